//! Annotation keys kubelet puts on pods it learns from a config source
//! (`pkg/kubelet/types/pod_update.go`).

/// `kubernetes.io/config.source`
pub const CONFIG_SOURCE: &str = "kubernetes.io/config.source";

/// `kubernetes.io/config.hash`
pub const CONFIG_HASH: &str = "kubernetes.io/config.hash";

/// `kubernetes.io/config.mirror`: on a mirror pod, the static pod's config hash
pub const CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";

/// `kubernetes.io/config.seen`
pub const CONFIG_SEEN: &str = "kubernetes.io/config.seen";

use dockerlet_messages::source::PodSource;

/// Where the pod came from (`kubernetes.io/config.source`: `file`, `http` or `api`); `None`
/// when the annotation is absent or names no source.
pub fn source(pod: &k8s_openapi::api::core::v1::Pod) -> Option<PodSource> {
    PodSource::parse(pod.metadata.annotations.as_ref()?.get(CONFIG_SOURCE)?)
}

/// Did the pod come from the API server (and not from a manifest file or URL)?
pub fn from_api(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    source(pod) == Some(PodSource::Api)
}

/// The pod's `kubernetes.io/config.hash` (a static pod's content hash), empty when absent.
pub fn config_hash(pod: &k8s_openapi::api::core::v1::Pod) -> &str {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_HASH))
        .map_or("", String::as_str)
}
