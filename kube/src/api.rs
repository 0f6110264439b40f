//! The Kubernetes API for API-server mode, through kube-rs: the node's pods (list + watch),
//! pod status, final pod deletion, the Node object and its Lease. [`KubeApi`] implements
//! [`KubeClient`]; actors see only the trait and never import kube themselves.

use dockerlet_messages::debug::EventType;
use std::path::Path;
use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec, TokenReview};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Node, NodeStatus, Pod, PodStatus, Secret, ServiceAccount};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use serde_json::json;

use async_trait::async_trait;

use crate::client::KubeClient;
use crate::cluster_cache::ClusterCache;
use crate::objects::ObjectCache;
use crate::tokens::{ServiceAccountToken, TokenCache, TokenRequestFor};
use crate::types::{ApiError, ConfigProblem, PodEvent, PodEventRef};

/// Namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// What an Event to create says.
struct NewEvent<'a> {
    /// Normal or Warning.
    kind: EventType,
    reason: &'a str,
    message: &'a str,
    /// How often it happened so far.
    count: i32,
    /// Its annotations (kubelet's `AnnotatedEventf`).
    annotations: Option<&'a std::collections::BTreeMap<String, String>>,
}

fn failed(operation: &str, source: kube::Error) -> ApiError {
    ApiError::RequestFailed {
        operation: operation.to_string(),
        source,
    }
}

/// Client-side rate limit of API requests (kubelet's kubeAPIQPS and kubeAPIBurst): a token
/// bucket shared by every clone; a request waits for a token instead of failing.
#[derive(Debug)]
struct RateLimiter {
    qps: f64,
    burst: f64,
    state: tokio::sync::Mutex<(f64, std::time::Instant)>,
}

impl RateLimiter {
    async fn wait_turn(&self) {
        let mut state = self.state.lock().await;
        let now = std::time::Instant::now();
        let (tokens, last) = *state;
        let tokens = (tokens + now.duration_since(last).as_secs_f64() * self.qps).min(self.burst);
        if tokens >= 1.0 {
            *state = (tokens - 1.0, now);
            return;
        }
        let wait = std::time::Duration::from_secs_f64((1.0 - tokens) / self.qps);
        *state = (0.0, now + wait);
        drop(state);
        tokio::time::sleep(wait).await;
    }
}

/// The node's view of the API server.
#[derive(Clone)]
pub struct KubeApi {
    client: kube::Client,
    node: String,
    limiter: std::sync::Arc<RateLimiter>,
    /// Secrets the pods' env refers to, each behind its own watch.
    secrets: std::sync::Arc<ObjectCache<Secret>>,
    /// ConfigMaps likewise.
    config_maps: std::sync::Arc<ObjectCache<ConfigMap>>,
    /// Service-account tokens of projected volumes, until they need a refresh.
    tokens: std::sync::Arc<TokenCache>,
    /// Every Service, from one watch started at connect (kubelet's service informer).
    services: std::sync::Arc<ClusterCache<k8s_openapi::api::core::v1::Service>>,
    runtime_classes: std::sync::Arc<ClusterCache<RuntimeClass>>,
    /// This node's own Node (`metadata.name=<node>`).
    node_object: std::sync::Arc<ClusterCache<k8s_openapi::api::core::v1::Node>>,
}

impl std::fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApi")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl KubeApi {
    /// Connect with a kubeconfig file. Must run inside the actor system's runtime.
    pub async fn connect(kubeconfig: &Path, node: &str, qps: f64, burst: u32) -> Result<Self, ApiError> {
        let source = format!("--kubeconfig {}", kubeconfig.display());
        let file = Kubeconfig::read_from(kubeconfig).map_err(|e| ApiError::Config {
            path: source.clone(),
            source: e.into(),
        })?;
        Self::connect_with(file, &source, node, qps, burst).await
    }

    /// Connect as the pod this agent runs in (in-cluster config): the API server from
    /// `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`, the CA (`ca.crt`) and token
    /// (`token`, re-read as it rotates) of the pod's service account in `service_account_dir`.
    pub async fn connect_in_cluster(
        service_account_dir: &Path,
        node: &str,
        qps: f64,
        burst: u32,
    ) -> Result<Self, ApiError> {
        let error = |message: String| ApiError::Config {
            path: format!("in-cluster config ({})", service_account_dir.display()),
            source: ConfigProblem::Missing(message),
        };
        let env = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| error(format!("{name} is not set: not running in a pod?")))
        };
        let (host, port) = (env("KUBERNETES_SERVICE_HOST")?, env("KUBERNETES_SERVICE_PORT")?);
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        let (ca, token) = (service_account_dir.join("ca.crt"), service_account_dir.join("token"));
        for file in [&ca, &token] {
            if !file.is_file() {
                return Err(error(format!("{} is missing", file.display())));
            }
        }
        let file = Kubeconfig {
            clusters: vec![NamedCluster {
                name: "in-cluster".to_string(),
                cluster: Some(Cluster {
                    server: Some(format!("https://{host}:{port}")),
                    certificate_authority: Some(ca.display().to_string()),
                    ..Default::default()
                }),
                other: Default::default(),
            }],
            auth_infos: vec![NamedAuthInfo {
                name: "service-account".to_string(),
                auth_info: Some(AuthInfo {
                    token_file: Some(token.display().to_string()),
                    ..Default::default()
                }),
                other: Default::default(),
            }],
            contexts: vec![NamedContext {
                name: "in-cluster".to_string(),
                context: Some(Context {
                    cluster: "in-cluster".to_string(),
                    user: Some("service-account".to_string()),
                    ..Default::default()
                }),
                other: Default::default(),
            }],
            current_context: Some("in-cluster".to_string()),
            ..Default::default()
        };
        Self::connect_with(file, "in-cluster config", node, qps, burst).await
    }

    async fn connect_with(file: Kubeconfig, source: &str, node: &str, qps: f64, burst: u32) -> Result<Self, ApiError> {
        let config_error = |problem: ConfigProblem| ApiError::Config {
            path: source.to_string(),
            source: problem,
        };
        let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .map_err(|e| config_error(e.into()))?;
        let client = kube::Client::try_from(config).map_err(|e| config_error(e.into()))?;
        Ok(Self::with_client(client, node, qps, burst))
    }

    /// On a client made elsewhere: the rotating client certificate's
    /// ([`crate::certificates::ClientCertificates::client`]). Must run inside the actor
    /// system's runtime (the caches start their watches).
    pub fn with_client(client: kube::Client, node: &str, qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        let limiter = RateLimiter {
            qps: qps.max(0.001),
            burst,
            state: tokio::sync::Mutex::new((burst, std::time::Instant::now())),
        };
        KubeApi {
            secrets: std::sync::Arc::new(ObjectCache::new(client.clone())),
            config_maps: std::sync::Arc::new(ObjectCache::new(client.clone())),
            tokens: std::sync::Arc::default(),
            services: std::sync::Arc::new(ClusterCache::start(client.clone(), "services")),
            runtime_classes: std::sync::Arc::new(ClusterCache::start(client.clone(), "runtimeclasses")),
            node_object: std::sync::Arc::new(ClusterCache::start_selected(
                client.clone(),
                "nodes",
                kube::runtime::watcher::Config::default().fields(&format!("metadata.name={node}")),
            )),
            client,
            node: node.to_string(),
            limiter: std::sync::Arc::new(limiter),
        }
    }

    /// The pod `name` if it is bound to this node, read as the Node authorizer lets a node read
    /// pods (`authorizePod` in `plugin/pkg/auth/authorizer/node/node_authorizer.go`): a list
    /// scoped to the node, `metadata.name=<name>,spec.nodeName=<node>`. A GET is refused (403,
    /// not 404) for any pod not bound to the node, one that does not exist included, so a node
    /// cannot ask whether its mirror pod exists yet with one. kubelet knows these pods from its
    /// watch; a pod of the same name bound elsewhere is not the node's to see.
    async fn node_pod(&self, api: &Api<Pod>, name: &str) -> Result<Option<Pod>, kube::Error> {
        let params = ListParams::default().fields(&format!("metadata.name={name},spec.nodeName={}", self.node));
        Ok(api.list(&params).await?.items.into_iter().next())
    }

    /// Write a pod's status (the `status` subresource).
    pub async fn patch_pod_status(&self, namespace: &str, name: &str, status: &PodStatus) -> Result<(), ApiError> {
        self.limiter.wait_turn().await;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let patch = json!({ "status": status });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| failed(&format!("patch status of pod {namespace}/{name}"), e))
    }

    async fn create_event(
        &self,
        namespace: &str,
        name: &str,
        involved_object: k8s_openapi::api::core::v1::ObjectReference,
        NewEvent {
            kind,
            reason,
            message,
            count,
            annotations,
        }: NewEvent<'_>,
    ) -> Result<(), ApiError> {
        use k8s_openapi::api::core::v1::{Event, EventSource};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let now = Time(Timestamp::now());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                annotations: annotations.filter(|a| !a.is_empty()).cloned(),
                ..Default::default()
            },
            involved_object,
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some(kind.as_str().to_string()),
            count: Some(count),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            source: Some(EventSource {
                component: Some("kubelet".to_string()),
                host: Some(self.node.clone()),
            }),
            reporting_component: Some("kubelet".to_string()),
            reporting_instance: Some(self.node.clone()),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(failed("create event", e)),
        }
    }
}

#[async_trait]
impl KubeClient for KubeApi {
    /// The node name.
    fn node(&self) -> &str {
        &self.node
    }

    /// List + watch the pods bound to this node, re-listing with back-off on errors.
    fn watch_pods(&self) -> BoxStream<'static, Result<PodEvent, ApiError>> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let config = watcher::Config::default().fields(&format!("spec.nodeName={}", self.node));
        watcher(api, config)
            .default_backoff()
            .map(|e| e.map_err(|source| ApiError::WatchFailed { source }))
            .boxed()
    }

    /// Make the API's status of a pod match `status` (kubelet is the source of truth), keeping
    /// conditions other writers own (readiness gates and the like). Reads first, and writes
    /// only when something differs, so it also repairs a status another writer overwrote.
    async fn reconcile_pod_status(&self, namespace: &str, name: &str, status: &PodStatus) -> Result<(), ApiError> {
        self.limiter.wait_turn().await;
        const KUBELET_CONDITIONS: [&str; 5] = [
            "PodScheduled",
            "PodReadyToStartContainers",
            "Initialized",
            "ContainersReady",
            "Ready",
        ];
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let Some(current) = self
            .node_pod(&api, name)
            .await
            .map_err(|e| failed(&format!("get pod {namespace}/{name}"), e))?
        else {
            return Ok(());
        };
        let mut wanted = status.clone();
        let theirs = current.status.clone().unwrap_or_default();
        let foreign = theirs
            .conditions
            .iter()
            .flatten()
            .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()));
        // Theirs first, then the node's, as kubelet's mergePodStatus orders them.
        let mut conditions: Vec<_> = foreign.cloned().collect();
        conditions.extend(wanted.conditions.take().unwrap_or_default());
        wanted.conditions = Some(conditions);
        // Fields the node leaves unset are not removed by its merge patch: what others put
        // there stays, so it counts as the node's too (no patch just for them).
        wanted.reason = wanted.reason.or(theirs.reason.clone());
        wanted.message = wanted.message.or(theirs.message.clone());
        wanted.nominated_node_name = wanted.nominated_node_name.or(theirs.nominated_node_name.clone());
        // Compare as the API stores it (second-precision times).
        if serde_json::to_value(&wanted).ok() == serde_json::to_value(&theirs).ok() {
            return Ok(());
        }
        self.patch_pod_status(namespace, name, &wanted).await
    }

    /// Make sure the static pod has its mirror pod (`pkg/kubelet/pod/mirror_client.go`): same name, namespace,
    /// labels, annotations and spec, `kubernetes.io/config.mirror` set to the config hash, owned
    /// by the Node; a pod of this node in the way that is not this mirror (or is being deleted)
    /// is replaced (one bound elsewhere the node cannot see, as kubelet cannot).
    /// Then write the static pod's status to it.
    async fn sync_mirror_pod(&self, static_pod: &Pod) -> Result<(), ApiError> {
        self.limiter.wait_turn().await;
        let namespace = static_pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let name = static_pod.metadata.name.clone().unwrap_or_default();
        let hash = dockerlet_pod::annotations::config_hash(static_pod).to_string();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let existing = self
            .node_pod(&api, &name)
            .await
            .map_err(|e| failed(&format!("get mirror pod {namespace}/{name}"), e))?;
        let is_ours = |p: &Pod| {
            p.metadata.deletion_timestamp.is_none()
                && p.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(dockerlet_pod::annotations::CONFIG_MIRROR))
                    == Some(&hash)
        };
        match existing {
            // Up to date: nothing to write.
            Some(p) if is_ours(&p) && p.status == static_pod.status => return Ok(()),
            Some(p) if is_ours(&p) => {}
            other => {
                if let Some(p) = other {
                    self.delete_pod(&namespace, &name, p.metadata.uid.as_deref().unwrap_or_default())
                        .await?;
                }
                let nodes: Api<Node> = Api::all(self.client.clone());
                let node = nodes
                    .get(&self.node)
                    .await
                    .map_err(|e| failed("get node for a mirror pod", e))?;
                let mut mirror = static_pod.clone();
                mirror.status = None;
                let meta = &mut mirror.metadata;
                meta.uid = None;
                meta.resource_version = None;
                meta.creation_timestamp = None;
                meta.annotations
                    .get_or_insert_with(Default::default)
                    .insert(dockerlet_pod::annotations::CONFIG_MIRROR.to_string(), hash);
                meta.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: "v1".to_string(),
                    kind: "Node".to_string(),
                    name: self.node.clone(),
                    uid: node.metadata.uid.unwrap_or_default(),
                    controller: Some(true),
                    ..Default::default()
                }]);
                match api.create(&PostParams::default(), &mirror).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(failed(&format!("create mirror pod {namespace}/{name}"), e)),
                }
            }
        }
        match &static_pod.status {
            Some(status) => self.patch_pod_status(&namespace, &name, status).await,
            None => Ok(()),
        }
    }

    /// Delete the mirror pod of a static pod that is gone.
    async fn delete_mirror_pod(&self, namespace: &str, name: &str, hash: &str) -> Result<(), ApiError> {
        self.limiter.wait_turn().await;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let Some(existing) = self
            .node_pod(&api, name)
            .await
            .map_err(|e| failed("get mirror pod", e))?
        else {
            return Ok(());
        };
        let mirrored = existing
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(dockerlet_pod::annotations::CONFIG_MIRROR));
        // Not a mirror pod, or a newer version's (an edited manifest's) already.
        if mirrored.is_none_or(|h| !hash.is_empty() && h != hash) {
            return Ok(());
        }
        self.delete_pod(namespace, name, existing.metadata.uid.as_deref().unwrap_or_default())
            .await
    }

    /// Delete a terminated pod for good (grace 0, only this UID), as kubelet does.
    async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<(), ApiError> {
        self.limiter.wait_turn().await;
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(name, &params).await {
            Ok(_) => Ok(()),
            // Gone already, or a new pod with the same name: nothing to do.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(e) => Err(failed(&format!("delete pod {namespace}/{name}"), e)),
        }
    }

    /// Record an event about a pod (kubelet's event recorder): the first occurrence creates an
    /// Event named `<pod>.<unique>`, later ones of the same `name` bump its count.
    async fn record_pod_event(
        &self,
        name: &str,
        about: PodEventRef<'_>,
        kind: EventType,
        reason: &str,
        message: &str,
        count: i32,
    ) -> Result<(), ApiError> {
        self.limiter.wait_turn().await;
        let namespace = about.namespace;
        use k8s_openapi::api::core::v1::{Event, ObjectReference};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let now = Time(Timestamp::now());
        if count > 1 {
            let patch = json!({ "count": count, "lastTimestamp": now });
            // An Event whose first occurrence the spam filter dropped, or that expired, is
            // created with the count so far (client-go's recordToSink does the same).
            match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                patched => return patched.map(|_| ()).map_err(|e| failed("update event", e)),
            }
        }
        let involved = ObjectReference {
            kind: Some("Pod".to_string()),
            api_version: Some("v1".to_string()),
            namespace: Some(namespace.to_string()),
            name: Some(about.pod.to_string()),
            uid: Some(about.uid.to_string()),
            field_path: about.field_path.map(str::to_string),
            ..Default::default()
        };
        let event = NewEvent {
            kind,
            reason,
            message,
            count,
            annotations: Some(about.annotations),
        };
        self.create_event(namespace, name, involved, event).await
    }

    /// Record an event about this Node (`Starting`, `NodeReady`, `NodeHasSufficientMemory`, …),
    /// in the `default` namespace as kubelet does, the node's name standing in for its UID.
    async fn record_node_event(&self, kind: EventType, reason: &str, message: &str) -> Result<(), ApiError> {
        self.limiter.wait_turn().await;
        let involved = k8s_openapi::api::core::v1::ObjectReference {
            kind: Some("Node".to_string()),
            api_version: Some("v1".to_string()),
            name: Some(self.node.clone()),
            uid: Some(self.node.clone()),
            ..Default::default()
        };
        let name = format!("{}.{:x}", self.node, Timestamp::now().as_nanosecond());
        let event = NewEvent {
            kind,
            reason,
            message,
            count: 1,
            annotations: None,
        };
        self.create_event("default", &name, involved, event).await
    }

    /// A Secret, or `None` if it does not exist: from the object's watch, or with a GET while
    /// the watch has not listed.
    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Arc<Secret>>, ApiError> {
        if let Some(cached) = self.secrets.get(namespace, name).await {
            return Ok(cached);
        }
        self.limiter.wait_turn().await;
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret = api
            .get_opt(name)
            .await
            .map_err(|e| failed(&format!("get secret {namespace}/{name}"), e))?;
        Ok(secret.map(Arc::new))
    }

    /// A ConfigMap, or `None` if it does not exist: from the object's watch, or with a GET
    /// while the watch has not listed.
    async fn config_map(&self, namespace: &str, name: &str) -> Result<Option<Arc<ConfigMap>>, ApiError> {
        if let Some(cached) = self.config_maps.get(namespace, name).await {
            return Ok(cached);
        }
        self.limiter.wait_turn().await;
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let map = api
            .get_opt(name)
            .await
            .map_err(|e| failed(&format!("get configmap {namespace}/{name}"), e))?;
        Ok(map.map(Arc::new))
    }

    fn forget_pod(&self, uid: &str) {
        self.tokens.forget_pod(uid);
    }

    /// A token from the cache, or a TokenRequest bound to the pod when it has none fresh.
    async fn service_account_token(&self, request: &TokenRequestFor) -> Result<ServiceAccountToken, ApiError> {
        if let Some(token) = self.tokens.fresh(request, Timestamp::now()) {
            return Ok(token);
        }
        self.limiter.wait_turn().await;
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &request.namespace);
        let body = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(request.audiences.clone()).filter(|a| !a.is_empty()),
                expiration_seconds: Some(request.expiration_seconds),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".to_string()),
                    kind: Some("Pod".to_string()),
                    name: Some(request.pod_name.clone()),
                    uid: Some(request.pod_uid.clone()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let operation = || {
            format!(
                "request token for serviceaccount {}/{}",
                request.namespace, request.service_account
            )
        };
        let issued = api
            .create_token_request(&request.service_account, &PostParams::default(), &body)
            .await
            .map_err(|e| failed(&operation(), e))?;
        let status = issued.status.unwrap_or_default();
        let (Some(token), Some(expires)) = (status.token, status.expiration_timestamp) else {
            return Err(ApiError::BadResponse {
                operation: operation(),
                reason: "the TokenRequest's status has no token or expirationTimestamp".to_string(),
            });
        };
        let token = ServiceAccountToken {
            token,
            expires: expires.0,
        };
        self.tokens.put(request.clone(), token.clone());
        Ok(token)
    }

    /// One TokenReview, not cached here (the kubelet API's authenticator caches results).
    async fn review_token(&self, review: &TokenReview) -> Result<TokenReview, ApiError> {
        self.limiter.wait_turn().await;
        Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), review)
            .await
            .map_err(|e| failed("create tokenreview", e))
    }

    /// One SubjectAccessReview, not cached here (the kubelet API's authorizer caches results).
    async fn review_access(&self, review: &SubjectAccessReview) -> Result<SubjectAccessReview, ApiError> {
        self.limiter.wait_turn().await;
        Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), review)
            .await
            .map_err(|e| failed("create subjectaccessreview", e))
    }

    /// Create the Node unless it exists; an existing Node gets this agent's labels (kubelet
    /// reconciles its default labels the same way). Returns the Node's UID and, for an existing
    /// Node, the boot ID it reported.
    async fn register_node(&self, node: &Node) -> Result<(String, Option<String>), ApiError> {
        self.limiter.wait_turn().await;
        let api: Api<Node> = Api::all(self.client.clone());
        let existing = match api.get_opt(&self.node).await.map_err(|e| failed("get node", e))? {
            Some(existing) => existing,
            None => match api.create(&PostParams::default(), node).await {
                Ok(created) => return Ok((created.metadata.uid.unwrap_or_default(), None)),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    api.get(&self.node).await.map_err(|e| failed("get node", e))?
                }
                Err(e) => return Err(failed("create node", e)),
            },
        };
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let current = existing.metadata.labels.clone().unwrap_or_default();
        if labels.iter().any(|(k, v)| current.get(k) != Some(v)) {
            let patch = json!({ "metadata": { "labels": labels } });
            api.patch(&self.node, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| failed("update node labels", e))?;
        }
        let boot_id = existing
            .status
            .and_then(|s| s.node_info)
            .map(|i| i.boot_id)
            .filter(|b| !b.is_empty());
        Ok((existing.metadata.uid.unwrap_or_default(), boot_id))
    }

    /// Write the node's status.
    async fn patch_node_status(&self, status: &NodeStatus) -> Result<(), ApiError> {
        self.limiter.wait_turn().await;
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = json!({ "status": status });
        api.patch_status(&self.node, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map(|_| ())
            .map_err(|e| failed("patch node status", e))
    }

    /// Create or renew the node's Lease in `kube-node-lease`.
    async fn renew_lease(&self, duration_seconds: i32, node_uid: Option<&str>) -> Result<(), ApiError> {
        self.limiter.wait_turn().await;
        let api: Api<Lease> = Api::namespaced(self.client.clone(), LEASE_NAMESPACE);
        let now = MicroTime(Timestamp::now());
        // The lease belongs to the Node, so it goes when the Node is deleted.
        let owner = node_uid.filter(|u| !u.is_empty()).map(|uid| {
            vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".to_string(),
                kind: "Node".to_string(),
                name: self.node.clone(),
                uid: uid.to_string(),
                ..Default::default()
            }]
        });
        // One request per renewal: patch, and create only when it is missing.
        let mut patch = json!({ "spec": { "holderIdentity": self.node, "leaseDurationSeconds": duration_seconds, "renewTime": now } });
        if let Some(owner) = &owner {
            patch["metadata"] = json!({ "ownerReferences": owner });
        }
        match api
            .patch(&self.node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(failed("renew lease", e)),
        }
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.node.clone()),
                namespace: Some(LEASE_NAMESPACE.to_string()),
                owner_references: owner,
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.node.clone()),
                lease_duration_seconds: Some(duration_seconds),
                renew_time: Some(now),
                ..Default::default()
            }),
        };
        match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(failed("create lease", e)),
        }
    }

    /// From the Service watch started at connect; no request.
    async fn services(&self, wait: bool) -> Result<Vec<std::sync::Arc<k8s_openapi::api::core::v1::Service>>, ApiError> {
        self.services.all(wait).await
    }

    /// From the RuntimeClass watch started at connect; no request.
    async fn runtime_class(&self, name: &str) -> Result<Option<std::sync::Arc<RuntimeClass>>, ApiError> {
        self.runtime_classes.get(name, true).await
    }

    /// One GET of this Node.
    async fn get_node(&self) -> Result<Option<k8s_openapi::api::core::v1::Node>, ApiError> {
        self.limiter.wait_turn().await;
        let api: Api<Node> = Api::all(self.client.clone());
        api.get_opt(&self.node).await.map_err(|e| failed("get node", e))
    }

    /// From the watch on this Node started at connect; no request.
    fn node_object(&self) -> Option<std::sync::Arc<k8s_openapi::api::core::v1::Node>> {
        self.node_object.first_now()
    }
}
