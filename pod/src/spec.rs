//! Small facts read off a pod spec that the rest of the crate, the actors and the agent share:
//! identity, grace period, network mode, QoS class, a container's spec hash.

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod, PodSpec};
use sha2::{Digest, Sha256};

/// kubelet's minimum termination grace period (`pkg/kubelet/kuberuntime/kuberuntime_container.go`:
/// `minimumGracePeriodInSeconds`).
pub const MIN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Short hex hash of a container spec; a change means "definition changed, restart it".
pub fn container_hash(container: &Container) -> String {
    let json = serde_json::to_vec(container).unwrap_or_default();
    hex::encode(&Sha256::digest(&json)[..4])
}

/// An ephemeral container as the [`Container`] it is run as: the same fields but
/// `targetContainerName` (which [`ephemeral_target`] reads).
pub fn ephemeral_container(e: &EphemeralContainer) -> Container {
    let mut json = serde_json::to_value(e).unwrap_or_default();
    if let Some(fields) = json.as_object_mut() {
        fields.remove("targetContainerName");
    }
    // Through bytes: the API types' one decoder is serde_json's byte reader (see `decode`).
    let bytes = serde_json::to_vec(&json).unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or_else(|_| Container {
        name: e.name.clone(),
        image: e.image.clone(),
        ..Default::default()
    })
}

/// The pod's ephemeral container `name`, as a [`Container`], and the container whose process
/// namespace it joins (`targetContainerName`).
pub fn ephemeral_target(pod: &Pod, name: &str) -> Option<(Container, Option<String>)> {
    let e = pod
        .spec
        .as_ref()?
        .ephemeral_containers
        .iter()
        .flatten()
        .find(|e| e.name == name)?;
    Some((ephemeral_container(e), e.target_container_name.clone()))
}

/// A pod's name, namespace and UID, borrowed from the object (named, so they are never taken
/// in the wrong order); `dockerlet_messages::PodRef` is the owned identity that travels in
/// messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodIdentity<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.namespace` (`default` when unset).
    pub namespace: &'a str,
    /// `metadata.uid`.
    pub uid: &'a str,
}

/// Pod name, namespace and UID.
pub fn pod_identity(pod: &Pod) -> PodIdentity<'_> {
    let m = &pod.metadata;
    PodIdentity {
        name: m.name.as_deref().unwrap_or_default(),
        namespace: m.namespace.as_deref().unwrap_or("default"),
        uid: m.uid.as_deref().unwrap_or_default(),
    }
}

/// kubelet's container reference (`pkg/kubelet/container/ref.go`): `spec.containers{name}`,
/// `spec.initContainers{name}` or `spec.ephemeralContainers{name}` — an event's fieldPath.
pub fn field_path(pod: &Pod, container: &str) -> String {
    let spec = pod.spec.as_ref();
    let init = spec.and_then(|s| s.init_containers.as_ref());
    let ephemeral = spec.and_then(|s| s.ephemeral_containers.as_ref());
    if init.is_some_and(|cs| cs.iter().any(|c| c.name == container)) {
        format!("spec.initContainers{{{container}}}")
    } else if ephemeral.is_some_and(|cs| cs.iter().any(|c| c.name == container)) {
        format!("spec.ephemeralContainers{{{container}}}")
    } else {
        format!("spec.containers{{{container}}}")
    }
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

/// The pod's QoS class, as kubelet's `GetPodQOS` computes it (`pkg/apis/core/v1/helper/qos`)
/// over the init and app containers: BestEffort without any non-zero CPU or memory request or
/// limit; Guaranteed when every container has non-zero CPU and memory limits and the summed
/// requests equal the summed limits (a request left out defaults to its limit, as the API
/// defaults it); Burstable otherwise.
pub fn qos_class(pod: &Pod) -> &'static str {
    const RESOURCES: [&str; 2] = ["cpu", "memory"];
    let Some(spec) = pod.spec.as_ref() else {
        return "BestEffort";
    };
    let all = spec.init_containers.iter().flatten().chain(&spec.containers);
    let value = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| {
        crate::quantity::quantity_value(&q.0).filter(|v| *v > 0.0)
    };
    let mut requests = [None::<f64>; 2];
    let mut limits = [None::<f64>; 2];
    let mut guaranteed = true;
    for c in all {
        let r = c.resources.as_ref();
        let lim = r.and_then(|r| r.limits.as_ref());
        let req = r.and_then(|r| r.requests.as_ref());
        for (i, key) in RESOURCES.iter().enumerate() {
            let limit = lim.and_then(|m| m.get(*key)).and_then(value);
            let request = req.and_then(|m| m.get(*key)).map_or(limit, value);
            if let Some(v) = request {
                *requests[i].get_or_insert(0.0) += v;
            }
            match limit {
                Some(v) => *limits[i].get_or_insert(0.0) += v,
                None => guaranteed = false,
            }
        }
    }
    if requests.iter().chain(&limits).all(Option::is_none) {
        return "BestEffort";
    }
    let equal = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()),
        (None, None) => true,
        _ => false,
    };
    if guaranteed && (0..2).all(|i| equal(requests[i], limits[i])) {
        "Guaranteed"
    } else {
        "Burstable"
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

    /// Events about an ephemeral container point at `spec.ephemeralContainers{name}`.
    #[test]
    fn field_paths_name_the_container_list() {
        let c = |name: &str| k8s_openapi::api::core::v1::Container {
            name: name.into(),
            ..Default::default()
        };
        let pod = Pod {
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                containers: vec![c("app")],
                init_containers: Some(vec![c("init")]),
                ephemeral_containers: Some(vec![k8s_openapi::api::core::v1::EphemeralContainer {
                    name: "debugger".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(field_path(&pod, "app"), "spec.containers{app}");
        assert_eq!(field_path(&pod, "init"), "spec.initContainers{init}");
        assert_eq!(field_path(&pod, "debugger"), "spec.ephemeralContainers{debugger}");
    }

    use super::*;

    /// Resource name and quantity pairs.
    type Pairs<'a> = &'a [(&'a str, &'a str)];
    /// A container's requests and limits.
    type Resources<'a> = (Pairs<'a>, Pairs<'a>);

    fn pod_of(init: &[Resources], apps: &[Resources]) -> Pod {
        use k8s_openapi::api::core::v1::ResourceRequirements;
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let list = |pairs: Pairs| {
            (!pairs.is_empty()).then(|| {
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect()
            })
        };
        let containers = |specs: &[Resources]| -> Vec<Container> {
            specs
                .iter()
                .map(|(requests, limits)| Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: list(requests),
                        limits: list(limits),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect()
        };
        Pod {
            spec: Some(PodSpec {
                init_containers: Some(containers(init)),
                containers: containers(apps),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// kubelet's GetPodQOS cases: init containers count, zero quantities do not, a request
    /// defaults to its limit, sums decide.
    #[test]
    fn qos_class_follows_get_pod_qos() {
        let both: &[(&str, &str)] = &[("cpu", "100m"), ("memory", "100Mi")];
        assert_eq!(qos_class(&pod_of(&[], &[(&[], &[])])), "BestEffort");
        assert_eq!(qos_class(&pod_of(&[], &[(&[("cpu", "0")], &[])])), "BestEffort");
        assert_eq!(qos_class(&pod_of(&[], &[(both, both)])), "Guaranteed");
        assert_eq!(
            qos_class(&pod_of(&[], &[(&[], both)])),
            "Guaranteed",
            "requests default to limits"
        );
        assert_eq!(
            qos_class(&pod_of(&[], &[(&[("cpu", "0.1"), ("memory", "100Mi")], both)])),
            "Guaranteed",
            "100m = 0.1"
        );
        assert_eq!(
            qos_class(&pod_of(&[(&[("cpu", "1")], &[])], &[(&[], &[])])),
            "Burstable",
            "an init container's request"
        );
        assert_eq!(
            qos_class(&pod_of(&[(&[], &[])], &[(both, both)])),
            "Burstable",
            "an init container without limits"
        );
        assert_eq!(qos_class(&pod_of(&[], &[(&[("cpu", "50m")], both)])), "Burstable");
        assert_eq!(
            qos_class(&pod_of(&[], &[(&[], &[("cpu", "1")])])),
            "Burstable",
            "no memory limit"
        );
    }

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
