//! [`KubeClient`]: what the actors ask of the API server, as a trait, so they can be tested
//! against the in-memory `FakeKube` (module `fake`) and never see kube-rs. `KubeApi` (module
//! `api`) implements it on kube-rs.

use dockerlet_messages::debug::EventType;
use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::{ConfigMap, Node, NodeStatus, Pod, PodStatus, Secret, Service};
use k8s_openapi::api::node::v1::RuntimeClass;

use crate::tokens::{ServiceAccountToken, TokenRequestFor};
use crate::types::{ApiError, PodEvent, PodEventRef};

/// The API server as this node uses it. Every method is scoped to this node (its name is
/// [`KubeClient::node`]) or to the pods bound to it.
#[async_trait]
pub trait KubeClient: std::fmt::Debug + Send + Sync + 'static {
    /// The node name.
    fn node(&self) -> &str;

    /// List + watch the pods bound to this node, re-listing with back-off on errors.
    fn watch_pods(&self) -> BoxStream<'static, Result<PodEvent, ApiError>>;

    /// Write an API pod's status unless the API already has it (kubelet's status manager).
    async fn reconcile_pod_status(&self, namespace: &str, name: &str, status: &PodStatus) -> Result<(), ApiError>;

    /// Make sure a static pod has its mirror pod, with this status.
    async fn sync_mirror_pod(&self, static_pod: &Pod) -> Result<(), ApiError>;

    /// Delete a static pod's mirror pod (the static pod is gone): only the mirror of that
    /// version (`config.mirror` = `hash`), not a newer version's of the same name.
    async fn delete_mirror_pod(&self, namespace: &str, name: &str, hash: &str) -> Result<(), ApiError>;

    /// Delete a pod for good (grace 0, UID precondition) once it has stopped here.
    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<(), ApiError>;

    /// Record an event about a pod; `count` > 1 bumps an earlier one of the same `name`.
    async fn record_pod_event(
        &self,
        name: &str,
        about: PodEventRef<'_>,
        kind: EventType,
        reason: &str,
        message: &str,
        count: i32,
    ) -> Result<(), ApiError>;

    /// Record an event about this Node.
    async fn record_node_event(&self, kind: EventType, reason: &str, message: &str) -> Result<(), ApiError>;

    /// A Secret, from the watch-backed cache; `None` when it does not exist.
    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Arc<Secret>>, ApiError>;

    /// A ConfigMap, from the watch-backed cache; `None` when it does not exist.
    async fn config_map(&self, namespace: &str, name: &str) -> Result<Option<Arc<ConfigMap>>, ApiError>;

    /// A service-account token bound to a pod (TokenRequest), served from memory until it needs
    /// a refresh.
    async fn service_account_token(&self, request: &TokenRequestFor) -> Result<ServiceAccountToken, ApiError>;

    /// The pod `uid` is gone from this node: forget what was kept for it (its tokens).
    fn forget_pod(&self, _uid: &str) {}

    /// A Secret's data as text (env vars), `stringData` under `data`; `None` when it does not
    /// exist.
    async fn secret_data(&self, namespace: &str, name: &str) -> Result<Option<BTreeMap<String, String>>, ApiError> {
        Ok(self.secret(namespace, name).await?.map(|s| secret_strings(&s)))
    }

    /// A ConfigMap's `data`; `None` when it does not exist.
    async fn config_map_data(&self, namespace: &str, name: &str) -> Result<Option<BTreeMap<String, String>>, ApiError> {
        Ok(self
            .config_map(namespace, name)
            .await?
            .map(|m| m.data.clone().unwrap_or_default()))
    }

    /// Create the Node, or reconcile its labels; returns its UID and the boot ID it had.
    async fn register_node(&self, node: &Node) -> Result<(String, Option<String>), ApiError>;

    /// Patch the Node's status.
    async fn patch_node_status(&self, status: &NodeStatus) -> Result<(), ApiError>;

    /// Renew (or create) the node's Lease in `kube-node-lease`, owned by the Node.
    async fn renew_lease(&self, duration_seconds: i32, node_uid: Option<&str>) -> Result<(), ApiError>;

    /// Every Service of the cluster, from the watch-backed cache (service link env vars). With
    /// `wait` (API pods, as kubelet does), a cache that has not listed yet is waited for a few
    /// seconds and then [`ApiError::NotSynced`]; without (static pods), it answers what it has.
    async fn services(&self, wait: bool) -> Result<Vec<std::sync::Arc<Service>>, ApiError>;

    /// A RuntimeClass (`node.k8s.io/v1`), from the watch-backed cache (waited for a few
    /// seconds before its first list, then [`ApiError::NotSynced`]); `None` when it does not
    /// exist.
    async fn runtime_class(&self, name: &str) -> Result<Option<Arc<RuntimeClass>>, ApiError>;

    /// This node's Node as the API last showed it (a watch on it alone), without waiting:
    /// `None` before the first list or when it is not registered. Admission reads its labels,
    /// taints and allocatable, as kubelet's node lister.
    fn node_object(&self) -> Option<Arc<Node>> {
        None
    }

    /// This node's Node read from the API server now (kubelet's synchronous node fetch when
    /// only node affinity refused a pod: the watch may not have its newest labels yet).
    async fn get_node(&self) -> Result<Option<Node>, ApiError> {
        Ok(self.node_object().map(|n| (*n).clone()))
    }

    /// Create a `authentication.k8s.io/v1` TokenReview (the kubelet API's bearer tokens) and
    /// return it with the API server's status.
    async fn review_token(&self, review: &TokenReview) -> Result<TokenReview, ApiError>;

    /// Create a `authorization.k8s.io/v1` SubjectAccessReview (the kubelet API's Webhook
    /// authorizer) and return it with the API server's status.
    async fn review_access(&self, review: &SubjectAccessReview) -> Result<SubjectAccessReview, ApiError>;
}

/// A Secret's values as text: `data` decoded (invalid UTF-8 replaced, as Go's string conversion
/// does not do but env vars need), `stringData` where `data` lacks the key.
pub fn secret_strings(secret: &Secret) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = secret.string_data.clone().unwrap_or_default();
    for (k, v) in secret.data.iter().flatten() {
        out.insert(k.clone(), String::from_utf8_lossy(&v.0).into_owned());
    }
    out
}
