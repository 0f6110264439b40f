//! CrashLoopBackOff, kubelet's container restart back-off (`pkg/kubelet/kuberuntime/kuberuntime_manager.go` doBackOff, client-go `util/flowcontrol/backoff.go`), derived from Docker.
//!
//! Kubelet keeps its back-off table in memory. dockerlet stores the step a container was started
//! at in a label ([`crate::labels::BACKOFF_STEP`]) instead, so the back-off survives an
//! agent restart or a re-created PodWorker. Step 0 means "first start, no back-off entry yet";
//! step `s ≥ 1` means the next restart waits `initial × 2^(s−1)`, capped at `max`.

use std::time::Duration;

use dockerlet_messages::runtime::ObservedContainer;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::Serialize;

/// Back-off settings (`--crash-loop-backoff-initial`, `--crash-loop-backoff-max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BackoffConfig {
    /// First delay (kubelet: 10 s).
    pub initial: Duration,
    /// Cap (kubelet: 300 s); a container that ran `2 × max` resets the back-off.
    pub max: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(300),
        }
    }
}

impl BackoffConfig {
    /// The delay owed before the restart that follows a container started at `step`.
    pub fn delay(&self, step: u32) -> Duration {
        if step == 0 {
            return Duration::ZERO;
        }
        let factor = 1u32.checked_shl(step - 1).unwrap_or(u32::MAX);
        self.initial.checked_mul(factor).unwrap_or(self.max).min(self.max)
    }

    /// An entry untouched this long is forgotten (kubelet: 2 × max = 10 min).
    pub fn reset_after(&self) -> Duration {
        self.max * 2
    }
}

/// What to do about a container whose last instance is dead and should run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartDecision {
    /// Start now; label the new container with this step.
    StartNow {
        /// The back-off step of the new container.
        step: u32,
    },
    /// Still in back-off.
    Wait {
        /// When the restart is allowed.
        until: Timestamp,
        /// The whole back-off delay (for the status message).
        delay: Duration,
    },
}

/// Decide whether the dead container `dead` may be replaced now.
///
/// Kubelet's doBackOff: the key includes the spec hash, so an edited container starts at once;
/// so does one whose back-off entry expired (it ran for `reset_after`) or that never had one.
pub fn restart_decision(
    config: &BackoffConfig,
    dead: &ObservedContainer,
    desired_hash: &str,
    now: Timestamp,
) -> RestartDecision {
    let started = dead
        .started_at
        .as_ref()
        .map(|t| t.0)
        .or(dead.created_at.as_ref().map(|t| t.0));
    let finished = dead.finished_at.as_ref().map(|t| t.0).or(started).unwrap_or(now);
    let expired = started.is_some_and(|s| elapsed(s, now) >= config.reset_after());
    if dead.backoff_step == 0 || dead.spec_hash != desired_hash || expired {
        return RestartDecision::StartNow { step: 1 };
    }
    let delay = config.delay(dead.backoff_step);
    if elapsed(finished, now) >= delay {
        RestartDecision::StartNow {
            step: dead.backoff_step.saturating_add(1),
        }
    } else {
        let until = finished
            .checked_add(SignedDuration::try_from(delay).unwrap_or(SignedDuration::MAX))
            .unwrap_or(Timestamp::MAX);
        RestartDecision::Wait { until, delay }
    }
}

fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(since)).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_messages::runtime::{ContainerRole, RuntimeState};
    use dockerlet_messages::{ContainerId, PodUid};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn dead(step: u32, started: i64, finished: i64) -> ObservedContainer {
        ObservedContainer {
            id: ContainerId("c".into()),
            pod_uid: PodUid("p".into()),
            pod_name: String::new(),
            pod_namespace: String::new(),
            name: "app".into(),
            role: ContainerRole::App,
            attempt: step,
            spec_hash: "h".into(),
            backoff_step: step,
            sandbox_id: None,
            state: RuntimeState::Exited,
            exit_code: 1,
            oom_killed: false,
            error: String::new(),
            created_at: None,
            started_at: Some(Time(Timestamp::from_second(started).unwrap())),
            finished_at: Some(Time(Timestamp::from_second(finished).unwrap())),
            image: String::new(),
            image_id: String::new(),
            ip: None,
            host_network: false,
            pod_grace_seconds: None,
            pid: None,
            cgroup_parent: String::new(),
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    /// Delays follow kubelet's 10, 20, 40, 80, 160, 300, 300 … sequence.
    #[test]
    fn delays_double_up_to_the_cap() {
        let c = BackoffConfig::default();
        let secs: Vec<u64> = (1..=8).map(|s| c.delay(s).as_secs()).collect();
        assert_eq!(secs, vec![10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(c.delay(0), Duration::ZERO);
        assert_eq!(c.delay(200), Duration::from_secs(300));
    }

    /// The first crash restarts at once; later crashes wait the step's delay from finishedAt.
    #[test]
    fn restarts_wait_for_the_step_delay_after_finishing() {
        let c = BackoffConfig::default();
        assert_eq!(
            restart_decision(&c, &dead(0, 100, 101), "h", at(101)),
            RestartDecision::StartNow { step: 1 }
        );
        assert_eq!(
            restart_decision(&c, &dead(2, 100, 101), "h", at(105)),
            RestartDecision::Wait {
                until: at(121),
                delay: Duration::from_secs(20)
            }
        );
        assert_eq!(
            restart_decision(&c, &dead(2, 100, 101), "h", at(121)),
            RestartDecision::StartNow { step: 3 }
        );
    }

    /// A changed spec or a container that ran for 2 × max starts at once, with a fresh back-off.
    #[test]
    fn edited_or_long_running_containers_reset_the_backoff() {
        let c = BackoffConfig::default();
        assert_eq!(
            restart_decision(&c, &dead(5, 100, 101), "other", at(102)),
            RestartDecision::StartNow { step: 1 }
        );
        assert_eq!(
            restart_decision(&c, &dead(5, 100, 800), "h", at(801)),
            RestartDecision::StartNow { step: 1 }
        );
    }
}
