//! The Kubernetes version dockerlet speaks, for user agents and the Node's nodeInfo.

/// The Kubernetes version as a literal, for `concat!`.
macro_rules! kube_version {
    () => {
        "1.37"
    };
}

/// Kubernetes version dockerlet reports itself compatible with (user agents, node info).
pub const KUBE_VERSION: &str = kube_version!();
/// The `User-Agent` of HTTP probes (kubelet: `pkg/kubelet/prober/prober.go`).
pub const PROBE_USER_AGENT: &str = concat!("kube-probe/", kube_version!());
/// The `User-Agent` of HTTP lifecycle hooks (kubelet: `pkg/kubelet/lifecycle/handlers.go`).
pub const LIFECYCLE_USER_AGENT: &str = concat!("kube-lifecycle/", kube_version!());
