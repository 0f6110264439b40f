//! The types the API's trait speaks in: what an event is about, a pod watch event, and the errors.

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;

/// The pod (and container, as a fieldPath like `spec.containers{web}`) an event is about.
#[derive(Debug, Clone, Copy)]
pub struct PodEventRef<'a> {
    /// Namespace.
    pub namespace: &'a str,
    /// Pod name.
    pub pod: &'a str,
    /// Pod UID.
    pub uid: &'a str,
    /// `spec.containers{name}` or `spec.initContainers{name}`.
    pub field_path: Option<&'a str>,
    /// The Event's annotations (kubelet's `AnnotatedEventf`); empty for most events.
    pub annotations: &'a std::collections::BTreeMap<String, String>,
}

/// An API call that failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The kubeconfig (or in-cluster config) cannot be read or used. Final: the agent stops
    /// with exit code 2 and this message (the problem follows in the error's chain).
    #[error("{path}")]
    Config {
        /// `--kubeconfig <file>` or the in-cluster config.
        path: String,
        /// Why.
        #[source]
        source: ConfigProblem,
    },
    /// A request failed. Every caller retries: at its next period (status, heartbeats, events)
    /// or its next sync (Secrets and ConfigMaps of env).
    #[error("kubernetes API {operation} failed: {source}")]
    RequestFailed {
        /// What was attempted.
        operation: String,
        /// kube-rs's error (the API's Status for refusals, or why it could not be reached).
        #[source]
        source: kube::Error,
    },
    /// The API server answered, but not with what the request asks for. Retried like
    /// [`ApiError::RequestFailed`].
    #[error("kubernetes API {operation}: {reason}")]
    BadResponse {
        /// What was attempted.
        operation: String,
        /// What was wrong with the answer.
        reason: String,
    },
    /// A watch-backed cache has not listed yet (kubelet: "services have not yet been read at
    /// least once, cannot construct envvars"). The container waits; its next sync retries.
    #[error("{what} have not yet been read at least once, cannot construct envvars")]
    NotSynced {
        /// `services`.
        what: &'static str,
    },
    /// The pod watch failed. The watcher lists again with back-off by itself.
    #[error("watching the pods bound to this node failed: {source}")]
    WatchFailed {
        /// kube-runtime's error.
        #[source]
        source: watcher::Error,
    },
}

impl ApiError {
    /// Whether trying again soon may succeed, as k8s.io/apiserver's webhook `DefaultShouldRetry`
    /// judges a webhook call: the server could not be reached or the connection broke
    /// (a pooled connection the server closed as it was reused), or it answered 429, 500, 502,
    /// 503 or 504. A refusal or a malformed answer stays what it is.
    pub fn is_transient(&self) -> bool {
        match self {
            ApiError::RequestFailed { source, .. } => match source {
                kube::Error::Api(status) => matches!(status.code, 429 | 500 | 502 | 503 | 504),
                kube::Error::HyperError(_) | kube::Error::Service(_) => true,
                _ => false,
            },
            _ => false,
        }
    }
}

/// Why a kubeconfig cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigProblem {
    /// It does not read or parse, or names what is not in it.
    #[error(transparent)]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// A client cannot be built from it (TLS material, proxy, …).
    #[error(transparent)]
    Client(#[from] kube::Error),
    /// Something the in-cluster config needs is absent.
    #[error("{0}")]
    Missing(String),
}

/// A pod-list watch event (kube-runtime's watcher events).
pub type PodEvent = watcher::Event<Pod>;
