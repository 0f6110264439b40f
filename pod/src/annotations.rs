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
