//! Docker names and labels of pod containers (dockershim's `naming.go` and `pkg/kubelet/kuberuntime/labels.go`), and
//! their parsing back into [`ObservedContainer`] fields.

use std::collections::BTreeMap;

use dockerlet_messages::runtime::{ContainerRole, ObservedContainer, RuntimeState};
use dockerlet_messages::{ContainerId, PodUid};

/// `io.kubernetes.pod.name`
pub const POD_NAME: &str = "io.kubernetes.pod.name";
/// `io.kubernetes.pod.namespace`
pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
/// `io.kubernetes.pod.uid`
pub const POD_UID: &str = "io.kubernetes.pod.uid";
/// `io.kubernetes.container.name` (`POD` for the sandbox)
pub const CONTAINER_NAME: &str = "io.kubernetes.container.name";
/// `io.kubernetes.docker.type`: `podsandbox` or `container`
pub const DOCKER_TYPE: &str = "io.kubernetes.docker.type";
/// `io.kubernetes.sandbox.id` on app and init containers
pub const SANDBOX_ID: &str = "io.kubernetes.sandbox.id";
/// Restart count (container) or attempt (sandbox)
pub const RESTART_COUNT: &str = "annotation.io.kubernetes.container.restartCount";
/// Hash of the container spec
pub const CONTAINER_HASH: &str = "annotation.io.kubernetes.container.hash";
/// The pod's termination grace period, for a later agent to honour
pub const TERMINATION_GRACE: &str = "annotation.io.kubernetes.pod.terminationGracePeriod";
/// The container's `terminationMessagePath` (where the runtime finds its message file)
pub const TERMINATION_MESSAGE_PATH: &str = "annotation.io.kubernetes.container.terminationMessagePath";
/// The container's `terminationMessagePolicy` (`File` or `FallbackToLogsOnError`)
pub const TERMINATION_MESSAGE_POLICY: &str = "annotation.io.kubernetes.container.terminationMessagePolicy";
/// The node whose agent owns the container; agents touch nothing else
pub const NODE: &str = "io.dockerlet.node";
/// `init` or `app`
pub const ROLE: &str = "io.dockerlet.container.role";
/// CrashLoopBackOff step the container was started at
pub const BACKOFF_STEP: &str = "io.dockerlet.backoff.step";
/// `true` when the sandbox uses the host network
pub const HOST_NETWORK: &str = "io.dockerlet.host-network";
/// Label on images dockerlet provisioned itself (the pause image); image GC keeps them
pub const MANAGED_IMAGE: &str = "io.dockerlet.managed";

/// Name of the sandbox container role in labels and names.
pub const SANDBOX_CONTAINER_NAME: &str = "POD";

/// `k8s_<container>_<pod>_<namespace>_<uid>_<attempt>`.
pub fn container_name(container: &str, pod: &str, namespace: &str, uid: &str, attempt: u32) -> String {
    format!("k8s_{container}_{pod}_{namespace}_{uid}_{attempt}")
}

/// Identity fields read back from a container's labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedLabels {
    /// Pod UID.
    pub pod_uid: String,
    /// Pod name.
    pub pod_name: String,
    /// Pod namespace.
    pub pod_namespace: String,
    /// Container name in the pod (`POD` for sandboxes).
    pub name: String,
    /// Role.
    pub role: ContainerRole,
    /// Attempt / restart count.
    pub attempt: u32,
    /// Spec hash.
    pub spec_hash: String,
    /// Back-off step.
    pub backoff_step: u32,
    /// Sandbox the container joined.
    pub sandbox_id: Option<String>,
    /// Sandbox on the host network.
    pub host_network: bool,
    /// The pod's termination grace period, as the creating agent wrote it.
    pub pod_grace_seconds: Option<i64>,
}

impl ParsedLabels {
    /// The container `id` with this identity, in `state`, from `image`; the caller fills in what
    /// the runtime reports besides (exit code, times, IP, …).
    pub fn observed(self, id: ContainerId, state: RuntimeState, image: String) -> ObservedContainer {
        ObservedContainer {
            id,
            pod_uid: PodUid(self.pod_uid),
            pod_name: self.pod_name,
            pod_namespace: self.pod_namespace,
            name: self.name,
            role: self.role,
            attempt: self.attempt,
            spec_hash: self.spec_hash,
            backoff_step: self.backoff_step,
            sandbox_id: self.sandbox_id.map(ContainerId),
            state,
            exit_code: 0,
            oom_killed: false,
            error: String::new(),
            created_at: None,
            started_at: None,
            finished_at: None,
            image,
            image_id: String::new(),
            ip: None,
            secondary_ip: None,
            host_network: self.host_network,
            pod_grace_seconds: self.pod_grace_seconds,
            pid: None,
            cgroup_parent: String::new(),
            termination_message: String::new(),
            details_pending: false,
        }
    }
}

/// Parse the identity labels; `None` when the container is not a dockerlet pod container.
pub fn parse(labels: &BTreeMap<String, String>) -> Option<ParsedLabels> {
    let pod_uid = labels.get(POD_UID)?.clone();
    let name = labels.get(CONTAINER_NAME)?.clone();
    let role = match (
        labels.get(DOCKER_TYPE).map(String::as_str),
        labels.get(ROLE).map(String::as_str),
    ) {
        (Some("podsandbox"), _) => ContainerRole::Sandbox,
        (_, Some("init")) => ContainerRole::Init,
        (_, Some("ephemeral")) => ContainerRole::Ephemeral,
        _ => ContainerRole::App,
    };
    let number = |key: &str| labels.get(key).and_then(|v| v.parse().ok()).unwrap_or(0);
    Some(ParsedLabels {
        pod_uid,
        pod_name: labels.get(POD_NAME).cloned().unwrap_or_default(),
        pod_namespace: labels.get(POD_NAMESPACE).cloned().unwrap_or_default(),
        name,
        role,
        attempt: number(RESTART_COUNT),
        spec_hash: labels.get(CONTAINER_HASH).cloned().unwrap_or_default(),
        backoff_step: number(BACKOFF_STEP),
        sandbox_id: labels.get(SANDBOX_ID).cloned(),
        host_network: labels.get(HOST_NETWORK).is_some_and(|v| v == "true"),
        pod_grace_seconds: labels.get(TERMINATION_GRACE).and_then(|v| v.parse().ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names follow dockershim's `k8s_<container>_<pod>_<ns>_<uid>_<attempt>` scheme.
    #[test]
    fn container_names_follow_the_dockershim_scheme() {
        assert_eq!(
            container_name("POD", "web-n1", "default", "abc", 0),
            "k8s_POD_web-n1_default_abc_0"
        );
        assert_eq!(
            container_name("app", "web-n1", "ns", "abc", 3),
            "k8s_app_web-n1_ns_abc_3"
        );
    }

    /// Labels written by the agent parse back into the same identity.
    #[test]
    fn labels_parse_back_into_identity() {
        let labels: BTreeMap<String, String> = [
            (POD_UID, "u1"),
            (CONTAINER_NAME, "app"),
            (DOCKER_TYPE, "container"),
            (ROLE, "init"),
            (RESTART_COUNT, "4"),
            (CONTAINER_HASH, "deadbeef"),
            (BACKOFF_STEP, "2"),
            (SANDBOX_ID, "sb"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let parsed = parse(&labels).unwrap();
        assert_eq!(parsed.role, ContainerRole::Init);
        assert_eq!(parsed.attempt, 4);
        assert_eq!(parsed.backoff_step, 2);
        assert_eq!(parsed.sandbox_id.as_deref(), Some("sb"));
        assert!(parse(&BTreeMap::new()).is_none());
    }
}
