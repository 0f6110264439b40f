//! Graceful node shutdown, the pure part (kubelet's
//! `pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go`): the priority groups pods are
//! stopped in, which group a pod belongs to, and the grace period it gets.
//!
//! Groups are stopped from the lowest priority up; each group's pods in parallel, each with the
//! smaller of the group's period and its own `terminationGracePeriodSeconds`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

/// `system-cluster-critical`'s priority (`pkg/apis/scheduling` `SystemCriticalPriority`): the
/// critical pods' group of `shutdownGracePeriodCriticalPods`.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// `system-node-critical`'s priority (`SystemCriticalPriority + 1000`).
pub const SYSTEM_NODE_CRITICAL_PRIORITY: i32 = SYSTEM_CRITICAL_PRIORITY + 1000;

/// The pod status reason of a pod refused while the node shuts down.
pub const NOT_ADMITTED_REASON: &str = "NodeShutdown";

/// Its message.
pub const NOT_ADMITTED_MESSAGE: &str = "Pod was rejected as the node is shutting down.";

/// The Node's Ready message while it shuts down (the shutdown manager's `ShutdownStatus`).
pub const NOT_READY_MESSAGE: &str = "node is shutting down";

/// One `shutdownGracePeriodByPodPriority` entry: pods of at least `priority` (up to the next
/// group's) get `period` to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShutdownGroup {
    /// The lowest priority of the group.
    pub priority: i32,
    /// How long the group's pods have to stop.
    pub shutdown_grace_period_seconds: i64,
}

/// The groups of `shutdownGracePeriod` and `shutdownGracePeriodCriticalPods` (kubelet's
/// `migrateConfig`): priority 0 gets the total less the critical pods' part, the critical pods
/// (`system-cluster-critical` and up) that part. None when the total is 0 (shutdown is then
/// immediate) or the critical part exceeds it.
pub fn groups_from_periods(total: Duration, critical: Duration) -> Vec<ShutdownGroup> {
    if total.is_zero() || critical > total {
        return Vec::new();
    }
    let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    vec![
        ShutdownGroup {
            priority: 0,
            shutdown_grace_period_seconds: secs(total - critical),
        },
        ShutdownGroup {
            priority: SYSTEM_CRITICAL_PRIORITY,
            shutdown_grace_period_seconds: secs(critical),
        },
    ]
}

/// Sorted from the lowest priority up, as the manager stops them.
pub fn sorted(mut groups: Vec<ShutdownGroup>) -> Vec<ShutdownGroup> {
    groups.sort_by_key(|g| g.priority);
    groups
}

/// The whole delay the node needs: the sum of the groups' periods (logind's
/// `InhibitDelayMaxSec` must be at least this).
pub fn period_requested(groups: &[ShutdownGroup]) -> Duration {
    Duration::from_secs(
        groups
            .iter()
            .map(|g| g.shutdown_grace_period_seconds.max(0) as u64)
            .sum(),
    )
}

/// The index of the group a pod of `priority` belongs to in `sorted` groups (kubelet's
/// `groupByPriority`): the highest group whose priority is at most the pod's; above the highest,
/// the highest; below the lowest, the lowest. None without groups.
pub fn group_of(groups: &[ShutdownGroup], priority: i32) -> Option<usize> {
    if groups.is_empty() {
        return None;
    }
    let above = groups.partition_point(|g| g.priority < priority);
    Some(match above {
        i if i == groups.len() => i - 1,
        i if i > 0 && groups[i].priority > priority => i - 1,
        i => i,
    })
}

/// A pod's priority: `spec.priority` as the API's priority admission set it; a static pod has
/// none, and then its `system-node-critical` / `system-cluster-critical` class counts (what
/// the admission would have set), else 0.
pub fn pod_priority(pod: &Pod) -> i32 {
    let spec = pod.spec.as_ref();
    if let Some(priority) = spec.and_then(|s| s.priority) {
        return priority;
    }
    match spec.and_then(|s| s.priority_class_name.as_deref()) {
        Some("system-node-critical") => SYSTEM_NODE_CRITICAL_PRIORITY,
        Some("system-cluster-critical") => SYSTEM_CRITICAL_PRIORITY,
        _ => 0,
    }
}

/// The grace period a pod is stopped with: the group's, or the pod's own when that is not
/// longer.
pub fn pod_grace(group_period_seconds: i64, termination_grace_seconds: Option<i64>) -> Duration {
    let seconds = match termination_grace_seconds {
        Some(own) if own <= group_period_seconds => own,
        _ => group_period_seconds,
    };
    Duration::from_secs(seconds.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn group(priority: i32, seconds: i64) -> ShutdownGroup {
        ShutdownGroup {
            priority,
            shutdown_grace_period_seconds: seconds,
        }
    }

    /// kubelet's migrateConfig: 30 s with 10 s for critical pods is 20 s at priority 0 and 10 s
    /// at 2000000000; no total, or a critical part above it, is no graceful shutdown.
    #[test]
    fn periods_make_two_groups() {
        let s = Duration::from_secs;
        assert_eq!(
            groups_from_periods(s(30), s(10)),
            vec![group(0, 20), group(SYSTEM_CRITICAL_PRIORITY, 10)]
        );
        assert_eq!(
            groups_from_periods(s(30), s(0)),
            vec![group(0, 30), group(SYSTEM_CRITICAL_PRIORITY, 0)]
        );
        assert!(groups_from_periods(s(0), s(0)).is_empty());
        assert!(groups_from_periods(s(10), s(20)).is_empty());
        assert_eq!(period_requested(&groups_from_periods(s(30), s(10))), s(30));
    }

    /// kubelet's groupByPriority (its `Test_groupByPriority` table): a pod goes to the highest
    /// group at or below its priority; above all, the highest; below all, the lowest.
    #[test]
    fn pods_go_to_the_group_at_or_below_their_priority() {
        let groups = sorted(vec![group(100000, 10), group(10000, 20), group(1000, 30), group(0, 40)]);
        assert_eq!(groups[0].priority, 0);
        let cases = [
            (-1, 0),
            (0, 0),
            (1, 0),
            (999, 0),
            (1000, 1),
            (1001, 1),
            (10000, 2),
            (99999, 2),
            (100000, 3),
            (SYSTEM_NODE_CRITICAL_PRIORITY, 3),
        ];
        for (priority, want) in cases {
            assert_eq!(group_of(&groups, priority), Some(want), "priority {priority}");
        }
        let high_only = [group(1000, 5)];
        assert_eq!(group_of(&high_only, 0), Some(0));
        assert_eq!(group_of(&[], 0), None);
    }

    /// The group's period, or the pod's own grace when it is not longer.
    #[test]
    fn grace_is_the_smaller() {
        assert_eq!(pod_grace(20, Some(120)), Duration::from_secs(20));
        assert_eq!(pod_grace(20, Some(5)), Duration::from_secs(5));
        assert_eq!(pod_grace(20, None), Duration::from_secs(20));
    }

    /// spec.priority counts; a static pod's critical class stands in for the missing priority.
    #[test]
    fn priority_of_api_and_static_pods() {
        let pod = |priority: Option<i32>, class: Option<&str>| Pod {
            spec: Some(PodSpec {
                priority,
                priority_class_name: class.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(pod_priority(&pod(Some(7), Some("system-node-critical"))), 7);
        assert_eq!(
            pod_priority(&pod(None, Some("system-node-critical"))),
            SYSTEM_NODE_CRITICAL_PRIORITY
        );
        assert_eq!(
            pod_priority(&pod(None, Some("system-cluster-critical"))),
            SYSTEM_CRITICAL_PRIORITY
        );
        assert_eq!(pod_priority(&pod(None, Some("high"))), 0);
        assert_eq!(pod_priority(&Pod::default()), 0);
    }
}
