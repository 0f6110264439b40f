//! The PodWorker's lifecycle as data: one [`WorkerState`] and one transition function,
//! [`WorkerState::on`], that says what to do next. Pure: no actix, no clock but the `now` handed
//! in; the actor runs the returned [`Effect`] (kubelet's `pkg/kubelet/pod_workers.go`: one worker
//! per UID, updates coalesced into one follow-up, a pending kill never overwritten by a sync, a
//! failed sync re-queued after a back-off).

use std::time::{Duration, Instant};

use serde::Serialize;

use dockerlet_pod::backoff::BackoffConfig;

/// How long to wait before retrying a termination that failed (Docker unreachable, …).
pub const TERMINATION_RETRY: Duration = Duration::from_secs(1);

/// Where the worker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Phase {
    /// Waiting for something to happen (a timer may be armed).
    Idle,
    /// A sync is running; `again` when another was asked for meanwhile (coalesced into one).
    Syncing {
        /// Run one more sync when this one ends.
        again: bool,
    },
    /// Stopping and removing the pod's containers; never left except for `Terminated`.
    Terminating {
        /// The grace period asked for; `None` is the pod's own.
        grace: Option<Duration>,
    },
    /// Every container is gone.
    Terminated,
}

/// Why a sync is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Docker changed (PLEG) or the periodic resync: held back while a failing sync backs off,
    /// so a failure cannot spin.
    Event,
    /// The desired spec changed: always syncs, and clears the error back-off.
    SpecChanged,
    /// The worker's own timer (back-off expiry, error back-off, periodic resync).
    Timer,
    /// A liveness or startup probe failed: the sync kills the container.
    ProbeFailed,
    /// A sidecar's startup probe passed: the sync starts what waited for it.
    SidecarStarted,
    /// The engine answers again after relists failed: syncs, and clears the error back-off
    /// (the failures were the engine's).
    RuntimeBack,
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A sync is asked for.
    Sync(Trigger),
    /// The sync in flight ended; `ok` when it met no error.
    SyncFinished {
        /// It met no error.
        ok: bool,
    },
    /// Termination is asked for (the pod was removed, deleted, or is an orphan).
    Terminate {
        /// The grace period; `None` for the pod's own.
        grace: Option<Duration>,
    },
    /// The termination in flight ended.
    TerminationFinished {
        /// Every container was stopped and removed.
        ok: bool,
    },
}

/// What the actor must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Nothing.
    None,
    /// Cancel the timer and start a sync.
    StartSync,
    /// Arm the timer for the next sync: after `error` when the sync failed, else at the earliest
    /// container back-off expiry or the periodic resync.
    ScheduleNext {
        /// The error back-off, when the sync failed.
        error: Option<Duration>,
    },
    /// Cancel any sync in flight and the timer; stop and remove every container.
    StartTermination {
        /// The grace period; `None` for the pod's own.
        grace: Option<Duration>,
    },
    /// Start the termination again after `after`.
    RetryTermination {
        /// The delay.
        after: Duration,
        /// The grace period asked for.
        grace: Option<Duration>,
    },
    /// Report the pod terminated.
    ReportTerminated,
}

/// The worker's lifecycle state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerState {
    phase: Phase,
    /// Until then, [`Trigger::Event`] does not start a sync.
    error_backoff_until: Option<Instant>,
    /// The engine came back while a sync was in flight: the next sync starts when it ends,
    /// even if it failed (it most likely failed for the engine's absence).
    retry_now: bool,
}

impl Default for WorkerState {
    fn default() -> Self {
        WorkerState {
            phase: Phase::Idle,
            error_backoff_until: None,
            retry_now: false,
        }
    }
}

impl WorkerState {
    /// Where the worker is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Termination was asked for (it may be done).
    pub fn is_terminating(&self) -> bool {
        matches!(self.phase, Phase::Terminating { .. } | Phase::Terminated)
    }

    /// Apply `input` at `now`; returns what to do.
    pub fn on(&mut self, input: Input, now: Instant, backoff: &BackoffConfig) -> Effect {
        match (self.phase, input) {
            // A pending kill is never replaced: syncs and further kills are ignored.
            (Phase::Terminating { .. } | Phase::Terminated, Input::Sync(_) | Input::Terminate { .. }) => Effect::None,
            (Phase::Terminating { .. } | Phase::Terminated, Input::SyncFinished { .. }) => Effect::None,
            (_, Input::Terminate { grace }) => {
                self.phase = Phase::Terminating { grace };
                Effect::StartTermination { grace }
            }
            (Phase::Terminating { grace }, Input::TerminationFinished { ok: false }) => Effect::RetryTermination {
                after: TERMINATION_RETRY,
                grace,
            },
            (Phase::Terminating { .. }, Input::TerminationFinished { ok: true }) => {
                self.phase = Phase::Terminated;
                Effect::ReportTerminated
            }
            (_, Input::TerminationFinished { .. }) => Effect::None,
            (_, Input::Sync(Trigger::Event)) if self.error_backoff_until.is_some_and(|until| now < until) => {
                Effect::None
            }
            (Phase::Syncing { .. }, Input::Sync(trigger)) => {
                self.clear_backoff_on(trigger);
                self.retry_now |= trigger == Trigger::RuntimeBack;
                self.phase = Phase::Syncing { again: true };
                Effect::None
            }
            (Phase::Idle, Input::Sync(trigger)) => {
                self.clear_backoff_on(trigger);
                self.phase = Phase::Syncing { again: false };
                Effect::StartSync
            }
            (Phase::Syncing { again }, Input::SyncFinished { ok: true }) => {
                self.error_backoff_until = None;
                self.retry_now = false;
                if again {
                    self.phase = Phase::Syncing { again: false };
                    Effect::StartSync
                } else {
                    self.phase = Phase::Idle;
                    Effect::ScheduleNext { error: None }
                }
            }
            (Phase::Syncing { .. }, Input::SyncFinished { ok: false }) if self.retry_now => {
                self.retry_now = false;
                self.phase = Phase::Syncing { again: false };
                Effect::StartSync
            }
            (Phase::Syncing { .. }, Input::SyncFinished { ok: false }) => {
                // Requests that came in meanwhile wait for the back-off too.
                // kubelet's pod workers requeue a failed sync after a constant `backOffPeriod`
                // (10 s, the container back-off's first step), however often it failed before.
                let delay = backoff.initial;
                self.error_backoff_until = Some(now + delay);
                self.phase = Phase::Idle;
                Effect::ScheduleNext { error: Some(delay) }
            }
            (Phase::Idle, Input::SyncFinished { .. }) => Effect::None,
        }
    }

    fn clear_backoff_on(&mut self, trigger: Trigger) {
        if matches!(trigger, Trigger::SpecChanged | Trigger::RuntimeBack) {
            self.error_backoff_until = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BACKOFF: BackoffConfig = BackoffConfig {
        initial: Duration::from_secs(10),
        max: Duration::from_secs(300),
    };

    fn state(phase: Phase) -> WorkerState {
        WorkerState {
            phase,
            ..Default::default()
        }
    }

    fn backing_off(now: Instant) -> WorkerState {
        WorkerState {
            phase: Phase::Idle,
            error_backoff_until: Some(now + Duration::from_secs(10)),
            ..Default::default()
        }
    }

    const GRACE: Option<Duration> = Some(Duration::from_secs(3));

    /// Every edge of the machine: from a state, an input gives a new phase and an effect.
    #[test]
    fn transitions_follow_kubelets_pod_workers() {
        let now = Instant::now();
        let cases: Vec<(&str, WorkerState, Input, Phase, Effect)> = vec![
            (
                "an idle worker syncs",
                state(Phase::Idle),
                Input::Sync(Trigger::Event),
                Phase::Syncing { again: false },
                Effect::StartSync,
            ),
            (
                "a request during a sync is coalesced into one follow-up",
                state(Phase::Syncing { again: false }),
                Input::Sync(Trigger::Event),
                Phase::Syncing { again: true },
                Effect::None,
            ),
            (
                "two requests during a sync still give one follow-up",
                state(Phase::Syncing { again: true }),
                Input::Sync(Trigger::SpecChanged),
                Phase::Syncing { again: true },
                Effect::None,
            ),
            (
                "the follow-up runs when the sync ends",
                state(Phase::Syncing { again: true }),
                Input::SyncFinished { ok: true },
                Phase::Syncing { again: false },
                Effect::StartSync,
            ),
            (
                "a clean sync arms the resync timer",
                state(Phase::Syncing { again: false }),
                Input::SyncFinished { ok: true },
                Phase::Idle,
                Effect::ScheduleNext { error: None },
            ),
            (
                "a failed sync backs off, dropping the follow-up",
                state(Phase::Syncing { again: true }),
                Input::SyncFinished { ok: false },
                Phase::Idle,
                Effect::ScheduleNext {
                    error: Some(Duration::from_secs(10)),
                },
            ),
            (
                "Docker events wait out the error back-off",
                backing_off(now),
                Input::Sync(Trigger::Event),
                Phase::Idle,
                Effect::None,
            ),
            (
                "a new spec cuts the error back-off short",
                backing_off(now),
                Input::Sync(Trigger::SpecChanged),
                Phase::Syncing { again: false },
                Effect::StartSync,
            ),
            (
                "the engine back cuts the error back-off short",
                backing_off(now),
                Input::Sync(Trigger::RuntimeBack),
                Phase::Syncing { again: false },
                Effect::StartSync,
            ),
            (
                "the back-off timer syncs",
                backing_off(now),
                Input::Sync(Trigger::Timer),
                Phase::Syncing { again: false },
                Effect::StartSync,
            ),
            (
                "a failed liveness probe syncs during the back-off",
                backing_off(now),
                Input::Sync(Trigger::ProbeFailed),
                Phase::Syncing { again: false },
                Effect::StartSync,
            ),
            (
                "termination cuts into a sync",
                state(Phase::Syncing { again: true }),
                Input::Terminate { grace: GRACE },
                Phase::Terminating { grace: GRACE },
                Effect::StartTermination { grace: GRACE },
            ),
            (
                "an idle worker terminates",
                state(Phase::Idle),
                Input::Terminate { grace: None },
                Phase::Terminating { grace: None },
                Effect::StartTermination { grace: None },
            ),
            (
                "a second kill does not restart the termination",
                state(Phase::Terminating { grace: GRACE }),
                Input::Terminate { grace: None },
                Phase::Terminating { grace: GRACE },
                Effect::None,
            ),
            (
                "a failed termination is retried with its grace",
                state(Phase::Terminating { grace: GRACE }),
                Input::TerminationFinished { ok: false },
                Phase::Terminating { grace: GRACE },
                Effect::RetryTermination {
                    after: TERMINATION_RETRY,
                    grace: GRACE,
                },
            ),
            (
                "a finished termination is reported",
                state(Phase::Terminating { grace: GRACE }),
                Input::TerminationFinished { ok: true },
                Phase::Terminated,
                Effect::ReportTerminated,
            ),
            (
                "a terminated worker ignores syncs",
                state(Phase::Terminated),
                Input::Sync(Trigger::SpecChanged),
                Phase::Terminated,
                Effect::None,
            ),
        ];
        for (name, mut s, input, phase, effect) in cases {
            assert_eq!(s.on(input, now, &BACKOFF), effect, "{name}: effect");
            assert_eq!(s.phase(), phase, "{name}: phase");
        }
    }

    /// The engine back while a sync is in flight: that sync most likely fails for the
    /// engine's absence, and the next starts as soon as it ends instead of after the back-off.
    #[test]
    fn the_engine_back_during_a_sync_retries_at_once_after_it() {
        let now = Instant::now();
        let mut s = state(Phase::Syncing { again: false });
        assert_eq!(s.on(Input::Sync(Trigger::RuntimeBack), now, &BACKOFF), Effect::None);
        assert_eq!(
            s.on(Input::SyncFinished { ok: false }, now, &BACKOFF),
            Effect::StartSync
        );
        assert_eq!(s.phase(), Phase::Syncing { again: false });
        // Once: the next failure backs off again.
        assert_eq!(
            s.on(Input::SyncFinished { ok: false }, now, &BACKOFF),
            Effect::ScheduleNext {
                error: Some(Duration::from_secs(10))
            }
        );
    }

    /// kubelet: a pending kill is never overwritten by a sync. Whatever sync request comes in
    /// while terminating (spec change, PLEG event, timer, failed probe), or a sync that was cut
    /// short reporting back, the worker stays terminating and starts nothing.
    #[test]
    fn kill_is_never_overwritten_by_sync() {
        let now = Instant::now();
        let mut s = state(Phase::Syncing { again: false });
        assert_eq!(
            s.on(Input::Terminate { grace: GRACE }, now, &BACKOFF),
            Effect::StartTermination { grace: GRACE }
        );
        for trigger in [
            Trigger::Event,
            Trigger::SpecChanged,
            Trigger::Timer,
            Trigger::ProbeFailed,
            Trigger::RuntimeBack,
        ] {
            assert_eq!(s.on(Input::Sync(trigger), now, &BACKOFF), Effect::None, "{trigger:?}");
        }
        assert_eq!(s.on(Input::SyncFinished { ok: true }, now, &BACKOFF), Effect::None);
        assert_eq!(s.phase(), Phase::Terminating { grace: GRACE });
        assert!(s.is_terminating());
    }

    /// Every failed sync waits kubelet's constant back-off period (10 s), however many came
    /// before; a clean sync clears it.
    #[test]
    fn the_error_backoff_is_constant_and_cleared() {
        let now = Instant::now();
        let mut s = WorkerState::default();
        let mut delays = Vec::new();
        for _ in 0..3 {
            s.on(Input::Sync(Trigger::Timer), now, &BACKOFF);
            delays.push(s.on(Input::SyncFinished { ok: false }, now, &BACKOFF));
        }
        let secs = |d: u64| Effect::ScheduleNext {
            error: Some(Duration::from_secs(d)),
        };
        assert_eq!(delays, vec![secs(10), secs(10), secs(10)]);
        s.on(Input::Sync(Trigger::Timer), now, &BACKOFF);
        assert_eq!(
            s.on(Input::SyncFinished { ok: true }, now, &BACKOFF),
            Effect::ScheduleNext { error: None }
        );
        assert_eq!(
            s.on(Input::Sync(Trigger::Event), now, &BACKOFF),
            Effect::StartSync,
            "no back-off left"
        );
    }
}
