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

/// kubelet's image pull back-off (`pkg/kubelet/images/image_manager.go`): a client-go
/// `flowcontrol.Backoff` of 10 s doubling to 300 s, keyed by pod UID and image, that remembers
/// the last pull's error for the `ImagePullBackOff` message. An entry untouched for twice the
/// cap starts over at the initial delay; a successful pull removes it.
#[derive(Debug, Default)]
pub struct PullBackoff {
    config: BackoffConfig,
    entries: std::collections::HashMap<(String, String), PullFailure>,
}

/// The last failed pull of one image for one pod.
#[derive(Debug, Clone)]
struct PullFailure {
    at: std::time::Instant,
    delay: Duration,
    message: String,
}

/// A pull that may not be tried yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullBackingOff {
    /// When it may be tried again.
    pub until: std::time::Instant,
    /// The last pull's error (`ErrImagePull: <message>`, kubelet's prevPullErrMsg).
    pub last_error: String,
}

impl PullBackoff {
    /// A back-off with these delays (kubelet's are the defaults, not configurable).
    pub fn new(config: BackoffConfig) -> Self {
        PullBackoff {
            config,
            entries: Default::default(),
        }
    }

    /// Whether `image` is in back-off for the pod `uid` at `now` (IsInBackOffSinceUpdate).
    pub fn backing_off(&self, uid: &str, image: &str, now: std::time::Instant) -> Option<PullBackingOff> {
        let entry = self.entries.get(&(uid.to_string(), image.to_string()))?;
        let until = entry.at + entry.delay;
        (now < until).then(|| PullBackingOff {
            until,
            last_error: entry.message.clone(),
        })
    }

    /// A pull failed with `message`: the next delay (Next), returned as when it ends.
    pub fn failed(&mut self, uid: &str, image: &str, message: String, now: std::time::Instant) -> std::time::Instant {
        let reset = self.config.reset_after();
        self.entries.retain(|_, e| now.saturating_duration_since(e.at) <= reset);
        let config = self.config;
        let entry = self
            .entries
            .entry((uid.to_string(), image.to_string()))
            .and_modify(|e| e.delay = (e.delay * 2).min(config.max))
            .or_insert(PullFailure {
                at: now,
                delay: config.initial,
                message: String::new(),
            });
        entry.at = now;
        entry.message = message;
        now + entry.delay
    }

    /// A pull succeeded: its back-off is gone.
    pub fn succeeded(&mut self, uid: &str, image: &str) {
        self.entries.remove(&(uid.to_string(), image.to_string()));
    }

    /// The pod is gone: forget its entries.
    pub fn forget_pod(&mut self, uid: &str) {
        self.entries.retain(|(u, _), _| u != uid);
    }
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
            secondary_ip: None,
            host_network: false,
            pod_grace_seconds: None,
            pid: None,
            cgroup_parent: String::new(),
            termination_message: String::new(),
            details_pending: false,
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
    /// The pull back-off doubles from 10 s to 300 s, answers the last error while it lasts,
    /// starts over after a success or 10 idle minutes, and is kept per pod and image.
    #[test]
    fn the_pull_backoff_doubles_and_resets() {
        use std::time::Instant;
        let mut b = PullBackoff::new(BackoffConfig::default());
        let t0 = Instant::now();
        assert_eq!(b.backing_off("u", "img", t0), None);
        assert_eq!(
            b.failed("u", "img", "ErrImagePull: one".into(), t0),
            t0 + Duration::from_secs(10)
        );
        let off = b
            .backing_off("u", "img", t0 + Duration::from_secs(9))
            .expect("in back-off");
        assert_eq!(off.last_error, "ErrImagePull: one");
        assert_eq!(b.backing_off("u", "img", t0 + Duration::from_secs(10)), None);
        assert_eq!(b.backing_off("other", "img", t0), None);
        let t1 = t0 + Duration::from_secs(11);
        assert_eq!(
            b.failed("u", "img", "ErrImagePull: two".into(), t1),
            t1 + Duration::from_secs(20)
        );
        let mut t = t1;
        for _ in 0..10 {
            t += Duration::from_secs(1);
            b.failed("u", "img", "again".into(), t);
        }
        assert_eq!(
            b.backing_off("u", "img", t).unwrap().until,
            t + Duration::from_secs(300)
        );
        let later = t + Duration::from_secs(601);
        assert_eq!(b.failed("u", "img", "x".into(), later), later + Duration::from_secs(10));
        b.succeeded("u", "img");
        assert_eq!(b.backing_off("u", "img", later), None);
        b.failed("u", "a", "x".into(), later);
        b.failed("v", "a", "x".into(), later);
        b.forget_pod("u");
        assert!(b.backing_off("u", "a", later).is_none() && b.backing_off("v", "a", later).is_some());
    }
}
