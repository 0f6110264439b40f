//! [`FakeKube`]: [`KubeClient`] in memory, for actor tests. It records every write as a typed
//! [`KubeCall`], answers Secrets and ConfigMaps from maps the test fills, and streams the pod
//! watch events the test sends. Clones share state.

use dockerlet_messages::debug::EventType;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewStatus};
use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewStatus};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::ByteString;

use async_trait::async_trait;
use futures::channel::mpsc;
use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::core::v1::{Node, NodeStatus, Pod, PodStatus, Service};

use crate::client::KubeClient;
use crate::tokens::{ServiceAccountToken, TokenRequestFor};
use crate::types::{ApiError, PodEvent, PodEventRef};

/// One write the agent made.
#[derive(Debug, Clone, PartialEq)]
pub enum KubeCall {
    /// `reconcile_pod_status`.
    PodStatus {
        /// `namespace/name`.
        pod: String,
        /// The status written.
        status: Box<PodStatus>,
    },
    /// `sync_mirror_pod`, with the static pod as given.
    MirrorPod(Box<Pod>),
    /// `delete_mirror_pod`.
    MirrorPodDeleted(String),
    /// `delete_pod`.
    PodDeleted {
        /// `namespace/name`.
        pod: String,
        /// The UID precondition.
        uid: String,
    },
    /// `record_pod_event`.
    PodEvent {
        /// `namespace/name`.
        pod: String,
        /// `Normal` or `Warning`.
        kind: String,
        /// The reason.
        reason: String,
        /// The count.
        count: i32,
    },
    /// `record_node_event`.
    NodeEvent {
        /// `Normal` or `Warning`.
        kind: String,
        /// The reason.
        reason: String,
    },
    /// `register_node`.
    NodeRegistered(Box<Node>),
    /// `patch_node_status`.
    NodeStatus(Box<NodeStatus>),
    /// `renew_lease`, with the owner's UID.
    LeaseRenewed(Option<String>),
    /// `service_account_token`, with what was asked.
    TokenRequested(TokenRequestFor),
}

/// What the fake holds.
#[derive(Debug, Default)]
pub struct FakeKubeState {
    /// Every write, in order.
    pub calls: Vec<KubeCall>,
    /// Secrets' data by `namespace/name`.
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
    /// Secrets' `type` by `namespace/name` (none: Opaque).
    pub secret_types: BTreeMap<String, String>,
    /// ConfigMaps' data by `namespace/name`.
    pub config_maps: BTreeMap<String, BTreeMap<String, String>>,
    /// ConfigMaps' binaryData by `namespace/name` (for ConfigMaps also in `config_maps`).
    pub binary_data: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    /// Tokens issued so far (each `service_account_token` call issues a new one,
    /// `token-<n>`, valid for the requested lifetime).
    pub tokens_issued: u32,
    /// The boot ID `register_node` reports for an existing Node.
    pub boot_id: Option<String>,
    /// The cluster's Services (`services`; none at first); `None` stands for a cache that has
    /// not listed.
    pub services: Option<Vec<Service>>,
    /// The cluster's RuntimeClasses by name.
    pub runtime_classes: BTreeMap<String, RuntimeClass>,
    /// Where the pod watch's events come from (taken by the first `watch_pods`).
    watch: Option<mpsc::UnboundedReceiver<Result<PodEvent, ApiError>>>,
}

/// The fake API server.
#[derive(Debug, Clone)]
pub struct FakeKube {
    node: String,
    /// Shared state, for tests to inspect and change.
    pub state: Arc<Mutex<FakeKubeState>>,
    events: mpsc::UnboundedSender<Result<PodEvent, ApiError>>,
}

impl FakeKube {
    /// A fake for node `node`.
    pub fn new(node: &str) -> Self {
        let (events, watch) = mpsc::unbounded();
        let state = FakeKubeState {
            watch: Some(watch),
            services: Some(Vec::new()),
            ..Default::default()
        };
        FakeKube {
            node: node.to_string(),
            state: Arc::new(Mutex::new(state)),
            events,
        }
    }

    /// Deliver a pod watch event.
    pub fn send(&self, event: PodEvent) {
        let _ = self.events.unbounded_send(Ok(event));
    }

    /// The writes made so far.
    pub fn calls(&self) -> Vec<KubeCall> {
        self.state.lock().expect("fake state").calls.clone()
    }

    fn record(&self, call: KubeCall) {
        self.state.lock().expect("fake state").calls.push(call);
    }
}

#[async_trait]
impl KubeClient for FakeKube {
    fn node(&self) -> &str {
        &self.node
    }

    fn watch_pods(&self) -> BoxStream<'static, Result<PodEvent, ApiError>> {
        match self.state.lock().expect("fake state").watch.take() {
            Some(watch) => watch.boxed(),
            None => futures::stream::pending().boxed(),
        }
    }

    async fn reconcile_pod_status(&self, namespace: &str, name: &str, status: &PodStatus) -> Result<(), ApiError> {
        self.record(KubeCall::PodStatus {
            pod: format!("{namespace}/{name}"),
            status: Box::new(status.clone()),
        });
        Ok(())
    }

    async fn sync_mirror_pod(&self, static_pod: &Pod) -> Result<(), ApiError> {
        self.record(KubeCall::MirrorPod(Box::new(static_pod.clone())));
        Ok(())
    }

    async fn delete_mirror_pod(&self, namespace: &str, name: &str, _hash: &str) -> Result<(), ApiError> {
        self.record(KubeCall::MirrorPodDeleted(format!("{namespace}/{name}")));
        Ok(())
    }

    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<(), ApiError> {
        self.record(KubeCall::PodDeleted {
            pod: format!("{namespace}/{name}"),
            uid: uid.to_string(),
        });
        Ok(())
    }

    async fn record_pod_event(
        &self,
        _name: &str,
        about: PodEventRef<'_>,
        kind: EventType,
        reason: &str,
        _message: &str,
        count: i32,
    ) -> Result<(), ApiError> {
        self.record(KubeCall::PodEvent {
            pod: format!("{}/{}", about.namespace, about.pod),
            kind: kind.as_str().to_string(),
            reason: reason.to_string(),
            count,
        });
        Ok(())
    }

    async fn record_node_event(&self, kind: EventType, reason: &str, _message: &str) -> Result<(), ApiError> {
        self.record(KubeCall::NodeEvent {
            kind: kind.as_str().to_string(),
            reason: reason.to_string(),
        });
        Ok(())
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Arc<Secret>>, ApiError> {
        let state = self.state.lock().expect("fake state");
        let key = format!("{namespace}/{name}");
        Ok(state.secrets.get(&key).map(|data| {
            Arc::new(Secret {
                type_: state.secret_types.get(&key).cloned(),
                data: Some(
                    data.iter()
                        .map(|(k, v)| (k.clone(), ByteString(v.clone().into_bytes())))
                        .collect(),
                ),
                ..Default::default()
            })
        }))
    }

    async fn config_map(&self, namespace: &str, name: &str) -> Result<Option<Arc<ConfigMap>>, ApiError> {
        let state = self.state.lock().expect("fake state");
        let key = format!("{namespace}/{name}");
        Ok(state.config_maps.get(&key).map(|data| {
            let binary = state
                .binary_data
                .get(&key)
                .map(|b| b.iter().map(|(k, v)| (k.clone(), ByteString(v.clone()))).collect());
            Arc::new(ConfigMap {
                data: Some(data.clone()),
                binary_data: binary,
                ..Default::default()
            })
        }))
    }

    async fn service_account_token(&self, request: &TokenRequestFor) -> Result<ServiceAccountToken, ApiError> {
        self.record(KubeCall::TokenRequested(request.clone()));
        let mut state = self.state.lock().expect("fake state");
        state.tokens_issued += 1;
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        Ok(ServiceAccountToken {
            token: format!("token-{}", state.tokens_issued),
            expires: k8s_openapi::jiff::Timestamp::from_second(now + request.expiration_seconds)
                .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now()),
        })
    }

    async fn register_node(&self, node: &Node) -> Result<(String, Option<String>), ApiError> {
        self.record(KubeCall::NodeRegistered(Box::new(node.clone())));
        let boot_id = self.state.lock().expect("fake state").boot_id.clone();
        Ok((format!("uid-of-{}", self.node), boot_id))
    }

    async fn patch_node_status(&self, status: &NodeStatus) -> Result<(), ApiError> {
        self.record(KubeCall::NodeStatus(Box::new(status.clone())));
        Ok(())
    }

    async fn renew_lease(&self, _duration_seconds: i32, node_uid: Option<&str>) -> Result<(), ApiError> {
        self.record(KubeCall::LeaseRenewed(node_uid.map(str::to_string)));
        Ok(())
    }

    async fn services(&self, wait: bool) -> Result<Vec<Arc<Service>>, ApiError> {
        match self.state.lock().expect("fake state").services.clone() {
            Some(services) => Ok(services.into_iter().map(Arc::new).collect()),
            None if wait => Err(ApiError::NotSynced { what: "services" }),
            None => Ok(Vec::new()),
        }
    }

    async fn runtime_class(&self, name: &str) -> Result<Option<Arc<RuntimeClass>>, ApiError> {
        let state = self.state.lock().expect("fake state");
        Ok(state.runtime_classes.get(name).cloned().map(Arc::new))
    }

    /// Every token is unauthenticated (tests of the kubelet API's authenticator use their own
    /// fakes).
    async fn review_token(&self, review: &TokenReview) -> Result<TokenReview, ApiError> {
        let mut answer = review.clone();
        answer.status = Some(TokenReviewStatus {
            authenticated: Some(false),
            ..Default::default()
        });
        Ok(answer)
    }

    /// Nothing is allowed.
    async fn review_access(&self, review: &SubjectAccessReview) -> Result<SubjectAccessReview, ApiError> {
        let mut answer = review.clone();
        answer.status = Some(SubjectAccessReviewStatus::default());
        Ok(answer)
    }
}
