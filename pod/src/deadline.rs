//! `activeDeadlineSeconds` (kubelet's `pkg/kubelet/active_deadline.go`): a pod active on the node
//! longer than its deadline, counted from its `status.startTime`, is failed — phase Failed,
//! reason `DeadlineExceeded` — and its containers are stopped.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The pod status `reason` of a pod past its deadline.
pub const REASON: &str = "DeadlineExceeded";

/// The pod status `message` (and event) of a pod past its deadline, as kubelet words it.
pub const MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// The pod status `reason` of a pod stopped for a node shutdown (kubelet's
/// `pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go`, `nodeShutdownReason`).
pub const NODE_SHUTDOWN_REASON: &str = "Terminated";

/// The pod status `message` of a pod stopped for a node shutdown, as kubelet words it.
pub const NODE_SHUTDOWN_MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";

/// The `DisruptionTarget` condition's reason when the kubelet itself stops a pod (k8s.io/api
/// `PodReasonTerminationByKubelet`).
pub const TERMINATION_BY_KUBELET: &str = "TerminationByKubelet";

/// Why the node failed a pod: its status's `reason` and `message`, with phase Failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFailure {
    /// `DeadlineExceeded`, `Terminated`, …
    pub reason: String,
    /// kubelet's message.
    pub message: String,
    /// The status carries a `DisruptionTarget` condition (reason `TerminationByKubelet`, this
    /// message), as kubelet's disruptions (node shutdown, eviction) add one.
    pub disruption_target: bool,
}

impl PodFailure {
    /// The failure of a pod past its `activeDeadlineSeconds`.
    pub fn deadline_exceeded() -> Self {
        PodFailure {
            reason: REASON.to_string(),
            message: MESSAGE.to_string(),
            disruption_target: false,
        }
    }

    /// The failure of a pod the eviction manager evicts (reason `Evicted`, kubelet's message;
    /// a `DisruptionTarget` condition for a threshold's eviction, none for a local-storage
    /// limit's).
    pub fn evicted(message: String, disruption_target: bool) -> Self {
        PodFailure {
            reason: crate::eviction::EVICTED.to_string(),
            message,
            disruption_target,
        }
    }

    /// The failure of a pod stopped because the node shuts down.
    pub fn node_shutdown() -> Self {
        PodFailure {
            reason: NODE_SHUTDOWN_REASON.to_string(),
            message: NODE_SHUTDOWN_MESSAGE.to_string(),
            disruption_target: true,
        }
    }
}

/// When the pod's deadline passes, given when it started on this node; `None` without
/// `activeDeadlineSeconds`.
pub fn deadline(pod: &Pod, started: Timestamp) -> Option<Timestamp> {
    let seconds = pod.spec.as_ref()?.active_deadline_seconds?;
    started.checked_add(SignedDuration::from_secs(seconds.max(0))).ok()
}

/// Whether the pod has been active longer than its deadline at `now`.
pub fn exceeded(pod: &Pod, started: Timestamp, now: Timestamp) -> bool {
    deadline(pod, started).is_some_and(|d| now >= d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn pod(deadline: Option<i64>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                active_deadline_seconds: deadline,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The deadline counts from the start; no `activeDeadlineSeconds`, no deadline.
    #[test]
    fn counts_from_the_start_time() {
        let start = Timestamp::from_second(1_000).unwrap();
        let at = |s: i64| Timestamp::from_second(1_000 + s).unwrap();
        assert!(!exceeded(&pod(Some(5)), start, at(4)));
        assert!(exceeded(&pod(Some(5)), start, at(5)));
        assert_eq!(deadline(&pod(Some(5)), start), Some(at(5)));
        assert!(!exceeded(&pod(None), start, at(1_000_000)));
        assert_eq!(deadline(&pod(None), start), None);
    }
}
