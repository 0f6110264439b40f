//! Small facts read off a pod spec that the rest of the crate, the actors and the agent share:
//! identity, grace period, network mode, QoS class, a container's spec hash.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use sha2::{Digest, Sha256};

/// kubelet's minimum termination grace period (`pkg/kubelet/kuberuntime/kuberuntime_container.go`:
/// `minimumGracePeriodInSeconds`).
pub const MIN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Short hex hash of a container spec; a change means "definition changed, restart it".
pub fn container_hash(container: &Container) -> String {
    let json = serde_json::to_vec(container).unwrap_or_default();
    hex::encode(&Sha256::digest(&json)[..4])
}

/// Pod name, namespace and UID.
pub fn pod_identity(pod: &Pod) -> (&str, &str, &str) {
    let m = &pod.metadata;
    (
        m.name.as_deref().unwrap_or_default(),
        m.namespace.as_deref().unwrap_or("default"),
        m.uid.as_deref().unwrap_or_default(),
    )
}

/// Init then app containers, each with its field path (`spec.initContainers[0]`, …), for
/// validation messages.
pub fn containers_with_fields(spec: &PodSpec) -> impl Iterator<Item = (String, &Container)> {
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| (format!("spec.initContainers[{i}]"), c));
    let apps = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.containers[{i}]"), c));
    init.chain(apps)
}

/// The pod's termination grace period (default 30 s), never below kubelet's 2 s minimum.
pub fn pod_grace(pod: &Pod) -> std::time::Duration {
    let seconds = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    std::time::Duration::from_secs(seconds.max(0) as u64).max(MIN_GRACE)
}

/// Does the pod use the host's network namespace?
pub fn host_network(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false)
}

/// The pod's QoS class, as the API reports it.
pub fn qos_class(pod: &Pod) -> &'static str {
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default();
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in containers {
        let r = c.resources.as_ref();
        let limits = r.and_then(|r| r.limits.as_ref());
        let requests = r.and_then(|r| r.requests.as_ref());
        for key in ["cpu", "memory"] {
            let limit = limits.and_then(|m| m.get(key));
            let request = requests.and_then(|m| m.get(key)).or(limit);
            any |= limit.is_some() || request.is_some();
            guaranteed &= limit.is_some() && request == limit;
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// The API's default `imagePullPolicy`: Always for `:latest` or no tag, else IfNotPresent.
pub fn default_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pull policy defaults as the API server sets them.
    #[test]
    fn default_pull_policy_follows_the_api() {
        assert_eq!(default_pull_policy("busybox"), "Always");
        assert_eq!(default_pull_policy("busybox:latest"), "Always");
        assert_eq!(default_pull_policy("localhost:5000/busybox"), "Always");
        assert_eq!(default_pull_policy("localhost:5000/busybox:1"), "IfNotPresent");
        assert_eq!(default_pull_policy("busybox@sha256:abc"), "IfNotPresent");
    }
}
