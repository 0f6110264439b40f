//! The Kubernetes API for API-server mode, through kube-rs: the node's pods (list + watch),
//! pod status, final pod deletion, the Node object and its Lease. Actors use [`KubeApi`] and
//! never import kube themselves.

use std::path::Path;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, NodeStatus, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use serde_json::json;

/// Namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// An API call that failed; every caller retries on its next period.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The kubeconfig cannot be read or used.
    #[error("--kubeconfig {path}: {message}")]
    Config {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// A request failed.
    #[error("kubernetes API {operation} failed: {message}")]
    RequestFailed {
        /// What was attempted.
        operation: String,
        /// The error.
        message: String,
    },
}

fn failed(operation: &str, e: kube::Error) -> ApiError {
    ApiError::RequestFailed {
        operation: operation.to_string(),
        message: e.to_string(),
    }
}

/// A pod-list watch event (kube-runtime's watcher events).
pub type PodEvent = watcher::Event<Pod>;

/// The node's view of the API server.
#[derive(Clone)]
pub struct KubeApi {
    client: kube::Client,
    node: String,
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
    pub async fn connect(kubeconfig: &Path, node: &str) -> Result<Self, ApiError> {
        let config_error = |message: String| ApiError::Config {
            path: kubeconfig.display().to_string(),
            message,
        };
        let file = Kubeconfig::read_from(kubeconfig).map_err(|e| config_error(e.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .map_err(|e| config_error(e.to_string()))?;
        let client = kube::Client::try_from(config).map_err(|e| config_error(e.to_string()))?;
        Ok(KubeApi {
            client,
            node: node.to_string(),
        })
    }

    /// The node name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// List + watch the pods bound to this node, re-listing with back-off on errors.
    pub fn watch_pods(&self) -> BoxStream<'static, Result<PodEvent, String>> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let config = watcher::Config::default().fields(&format!("spec.nodeName={}", self.node));
        watcher(api, config)
            .default_backoff()
            .map(|e| e.map_err(|e| e.to_string()))
            .boxed()
    }

    /// Write a pod's status (the `status` subresource).
    pub async fn patch_pod_status(&self, namespace: &str, name: &str, status: &PodStatus) -> Result<(), ApiError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let patch = json!({ "status": status });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| failed(&format!("patch status of pod {namespace}/{name}"), e))
    }

    /// Delete a terminated pod for good (grace 0, only this UID), as kubelet does.
    pub async fn delete_pod(&self, namespace: &str, name: &str, uid: &str) -> Result<(), ApiError> {
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

    /// Create the Node unless it exists.
    pub async fn register_node(&self, node: &Node) -> Result<bool, ApiError> {
        let api: Api<Node> = Api::all(self.client.clone());
        if api
            .get_opt(&self.node)
            .await
            .map_err(|e| failed("get node", e))?
            .is_some()
        {
            return Ok(false);
        }
        match api.create(&PostParams::default(), node).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(failed("create node", e)),
        }
    }

    /// Write the node's status.
    pub async fn patch_node_status(&self, status: &NodeStatus) -> Result<(), ApiError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = json!({ "status": status });
        api.patch_status(&self.node, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map(|_| ())
            .map_err(|e| failed("patch node status", e))
    }

    /// Create or renew the node's Lease in `kube-node-lease`.
    pub async fn renew_lease(&self, duration_seconds: i32) -> Result<(), ApiError> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), LEASE_NAMESPACE);
        let now = MicroTime(Timestamp::now());
        if api
            .get_opt(&self.node)
            .await
            .map_err(|e| failed("get lease", e))?
            .is_none()
        {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.node.clone()),
                    namespace: Some(LEASE_NAMESPACE.to_string()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.node.clone()),
                    lease_duration_seconds: Some(duration_seconds),
                    renew_time: Some(now),
                    ..Default::default()
                }),
            };
            return match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                Err(e) => Err(failed("create lease", e)),
            };
        }
        let patch = json!({ "spec": { "holderIdentity": self.node, "leaseDurationSeconds": duration_seconds, "renewTime": now } });
        api.patch(&self.node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| failed("renew lease", e))
    }
}
