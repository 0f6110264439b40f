//! One probe's state machine: thresholds, hold-after-failure and startup gating, as kubelet's
//! prober worker decides them (`pkg/kubelet/prober/worker.go`, `doProbe`).
//!
//! The ProbeActor owns the timer and the queue, runs the handlers and sends the messages; every
//! decision about a probe is a transition here: [`ProbeState::on`] takes an [`Input`] and
//! returns an [`Effect`] — whether the published result changed, and what to do next.
//!
//! Time is handed in, as the time since the container instance started, and the next run is
//! due at such a time too; nothing here reads a clock.
//!
//! - Initial results: readiness Failure, liveness Success, startup Unknown (kubelet's
//!   `initialValue`); a new container instance starts over from them.
//! - Nothing runs before `initialDelaySeconds`; a run is due every `periodSeconds` after the
//!   previous one finished.
//! - Until the startup probe of the instance succeeded, only it runs; the others are due again
//!   a period later.
//! - The published result changes after `failureThreshold` failures or `successThreshold`
//!   successes in a row; a warning counts as a success.
//! - After a liveness failure or any startup result the probe holds: it does not run and its
//!   result does not change until a new container instance appears. (Kubelet holds a startup
//!   probe after a failure, and stops running it once the container has started.)

use std::time::Duration;

use dockerlet_messages::probe::{ProbeKind, ProbeResult};
use k8s_openapi::api::core::v1::Probe;

/// Kubelet's `periodSeconds` default.
pub const DEFAULT_PERIOD_SECONDS: i32 = 10;
/// Kubelet's `timeoutSeconds` default.
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 1;
/// Kubelet's `failureThreshold` default.
pub const DEFAULT_FAILURE_THRESHOLD: i32 = 3;
/// Kubelet's `successThreshold` default.
pub const DEFAULT_SUCCESS_THRESHOLD: i32 = 1;

/// A probe's timings and thresholds, defaulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeConfig {
    /// `initialDelaySeconds` (default 0).
    pub initial_delay: Duration,
    /// `periodSeconds` (default 10, at least 1).
    pub period: Duration,
    /// `timeoutSeconds` (default 1, at least 1).
    pub timeout: Duration,
    /// `successThreshold` (default 1, at least 1).
    pub success_threshold: u32,
    /// `failureThreshold` (default 3, at least 1).
    pub failure_threshold: u32,
}

impl ProbeConfig {
    /// The probe's settings with kubelet's defaults; values out of range (which validation
    /// refuses) are floored instead of trusted.
    pub fn from_probe(probe: &Probe) -> Self {
        let seconds = |value: Option<i32>, default: i32| Duration::from_secs(value.unwrap_or(default).max(1) as u64);
        let count = |value: Option<i32>, default: i32| value.unwrap_or(default).max(1) as u32;
        ProbeConfig {
            initial_delay: Duration::from_secs(probe.initial_delay_seconds.unwrap_or(0).max(0) as u64),
            period: seconds(probe.period_seconds, DEFAULT_PERIOD_SECONDS),
            timeout: seconds(probe.timeout_seconds, DEFAULT_TIMEOUT_SECONDS),
            success_threshold: count(probe.success_threshold, DEFAULT_SUCCESS_THRESHOLD),
            failure_threshold: count(probe.failure_threshold, DEFAULT_FAILURE_THRESHOLD),
        }
    }
}

/// How one run of the handler ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Passed.
    Success,
    /// Passed with a warning (counts as a success).
    Warning,
    /// Failed.
    Failure,
}

impl RunOutcome {
    /// Does it count as a success?
    pub fn passed(self) -> bool {
        self != RunOutcome::Failure
    }
}

/// What happens to a probe. Every `now` is the time since the container instance started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A new container instance appeared (the first one too): start over.
    NewInstance {
        /// How long the instance has been running.
        now: Duration,
        /// The instance has a startup probe that has not succeeded: wait for it.
        waits_for_startup: bool,
    },
    /// The time a previous [`Next::DueAt`] named came.
    Due {
        /// Now.
        now: Duration,
    },
    /// The run [`Next::Run`] asked for finished.
    Finished {
        /// Now.
        now: Duration,
        /// How it ended.
        outcome: RunOutcome,
    },
    /// The startup probe of this instance succeeded (its [`Effect::started`]), `now` after
    /// the prober's start.
    StartupSucceeded {
        /// Time since the prober started.
        now: Duration,
    },
}

/// What to do next about a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Nothing to queue: the probe holds, or a run in flight will say.
    Nothing,
    /// Run the handler now and hand its outcome back as [`Input::Finished`].
    Run,
    /// Hand back [`Input::Due`] at this time since the container started.
    DueAt(Duration),
}

/// What a transition asks of the actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effect {
    /// The published result changed to this (send `ProbeResultChanged`).
    pub changed: Option<ProbeResult>,
    /// This startup probe just succeeded: the container's other probes may run (give them
    /// [`Input::StartupSucceeded`]).
    pub started: bool,
    /// What to do next.
    pub next: Next,
}

impl Effect {
    /// No change; `next` next.
    fn next(next: Next) -> Self {
        Effect {
            changed: None,
            started: false,
            next,
        }
    }
}

/// One probe of one container: kubelet's prober worker without its goroutine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeState {
    kind: ProbeKind,
    config: ProbeConfig,
    /// The published result.
    result: ProbeResult,
    /// Consecutive successes.
    successes: u32,
    /// Consecutive failures.
    failures: u32,
    /// Not running until a new container instance appears.
    on_hold: bool,
    /// Waiting for the instance's startup probe to succeed.
    waits_for_startup: bool,
    /// A run is in flight.
    running: bool,
    /// The time the last [`Next::DueAt`] named: the phase of the probe's ticker.
    due_at: Duration,
}

/// Kubelet's `initialValue`: the result before any run.
pub fn initial_result(kind: ProbeKind) -> ProbeResult {
    match kind {
        ProbeKind::Readiness => ProbeResult::Failure,
        ProbeKind::Liveness => ProbeResult::Success,
        ProbeKind::Startup => ProbeResult::Unknown,
    }
}

impl ProbeState {
    /// A probe with no container instance yet: it holds until [`Input::NewInstance`].
    pub fn new(kind: ProbeKind, config: ProbeConfig) -> Self {
        ProbeState {
            kind,
            config,
            result: initial_result(kind),
            successes: 0,
            failures: 0,
            on_hold: true,
            waits_for_startup: false,
            running: false,
            due_at: Duration::ZERO,
        }
    }

    /// Which probe.
    pub fn kind(&self) -> ProbeKind {
        self.kind
    }

    /// Its timings and thresholds.
    pub fn config(&self) -> &ProbeConfig {
        &self.config
    }

    /// The published result.
    pub fn result(&self) -> ProbeResult {
        self.result
    }

    /// Consecutive successes so far.
    pub fn successes(&self) -> u32 {
        self.successes
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Held until a new container instance.
    pub fn on_hold(&self) -> bool {
        self.on_hold
    }

    /// Waiting for the startup probe.
    pub fn waits_for_startup(&self) -> bool {
        self.waits_for_startup
    }

    /// The one transition.
    pub fn on(&mut self, input: Input) -> Effect {
        match input {
            Input::NewInstance { now, waits_for_startup } => self.new_instance(now, waits_for_startup),
            Input::Due { now } => self.came_due(now),
            Input::Finished { now, outcome } => self.finished(now, outcome),
            Input::StartupSucceeded { now } => self.startup_succeeded(now),
        }
    }

    /// The container's startup probe succeeded: this probe may run. A readiness probe not yet
    /// passing runs at once (past its initial delay), as kubelet's prober manager triggers it
    /// when a started container is not ready (`manualTriggerCh`), so Ready follows the startup
    /// probe within a second instead of a period later; the ticker keeps its phase.
    fn startup_succeeded(&mut self, now: Duration) -> Effect {
        self.waits_for_startup = false;
        let run_now = self.kind == ProbeKind::Readiness
            && !self.on_hold
            && !self.running
            && self.result != ProbeResult::Success
            && now >= self.config.initial_delay;
        if run_now {
            self.running = true;
            return Effect::next(Next::Run);
        }
        Effect::next(Next::Nothing)
    }

    /// Kubelet: a new container ID resets the result to the initial value and resumes probing.
    fn new_instance(&mut self, now: Duration, waits_for_startup: bool) -> Effect {
        *self = ProbeState {
            on_hold: false,
            waits_for_startup: waits_for_startup && self.kind != ProbeKind::Startup,
            ..ProbeState::new(self.kind, self.config)
        };
        Effect::next(self.due(now.max(self.config.initial_delay)))
    }

    /// Due at `at`: remember it as the ticker's phase.
    fn due(&mut self, at: Duration) -> Next {
        self.due_at = at;
        Next::DueAt(at)
    }

    /// The ticker's next tick after `now`, as kubelet's probe worker ticks (`time.Ticker`): a
    /// period after the last, however long the run took or however late it started; ticks
    /// already past are dropped.
    fn next_tick(&mut self, now: Duration) -> Next {
        let period = self.config.period.max(Duration::from_millis(1));
        let mut next = self.due_at + period;
        if next <= now {
            let behind = (now - self.due_at).as_nanos() / period.as_nanos();
            next = self.due_at + period * u32::try_from(behind + 1).unwrap_or(u32::MAX);
        }
        self.due(next)
    }

    fn came_due(&mut self, now: Duration) -> Effect {
        if self.on_hold || self.running {
            return Effect::next(Next::Nothing);
        }
        if now < self.config.initial_delay {
            return Effect::next(self.due(self.config.initial_delay));
        }
        if self.waits_for_startup {
            return Effect::next(self.next_tick(now));
        }
        self.running = true;
        Effect::next(Next::Run)
    }

    fn finished(&mut self, now: Duration, outcome: RunOutcome) -> Effect {
        if !self.running {
            return Effect::next(Next::Nothing);
        }
        self.running = false;
        let changed = if outcome.passed() {
            self.successes = self.successes.saturating_add(1);
            self.failures = 0;
            self.reaches(ProbeResult::Success, self.successes, self.config.success_threshold)
        } else {
            self.failures = self.failures.saturating_add(1);
            self.successes = 0;
            self.reaches(ProbeResult::Failure, self.failures, self.config.failure_threshold)
        };
        if changed.is_some()
            && (self.kind == ProbeKind::Startup
                || self.kind == ProbeKind::Liveness && changed == Some(ProbeResult::Failure))
        {
            self.on_hold = true;
        }
        Effect {
            changed,
            started: self.kind == ProbeKind::Startup && changed == Some(ProbeResult::Success),
            next: if self.on_hold {
                Next::Nothing
            } else {
                self.next_tick(now)
            },
        }
    }

    /// Publish `result` once `run` in a row reached `threshold`, if it is not published yet.
    fn reaches(&mut self, result: ProbeResult, run: u32, threshold: u32) -> Option<ProbeResult> {
        if self.result == result || run < threshold {
            return None;
        }
        self.result = result;
        Some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProbeKind::{Liveness, Readiness, Startup};
    use RunOutcome::{Failure as Fail, Success as Pass, Warning as Warn};

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn config(initial_delay: u64, success_threshold: u32, failure_threshold: u32) -> ProbeConfig {
        ProbeConfig {
            initial_delay: secs(initial_delay),
            period: secs(10),
            timeout: secs(1),
            success_threshold,
            failure_threshold,
        }
    }

    /// A probe of an instance that just started, past its (zero) initial delay.
    fn started(kind: ProbeKind, success_threshold: u32, failure_threshold: u32) -> ProbeState {
        let mut probe = ProbeState::new(kind, config(0, success_threshold, failure_threshold));
        probe.on(Input::NewInstance {
            now: secs(0),
            waits_for_startup: false,
        });
        probe
    }

    /// Run once at `now` with `outcome`; the result change it published.
    fn run(probe: &mut ProbeState, now: u64, outcome: RunOutcome) -> Option<ProbeResult> {
        assert_eq!(
            probe.on(Input::Due { now: secs(now) }).next,
            Next::Run,
            "due at {now}s: {probe:?}"
        );
        probe
            .on(Input::Finished {
                now: secs(now),
                outcome,
            })
            .changed
    }

    fn no_change(next: Next) -> Effect {
        Effect {
            changed: None,
            started: false,
            next,
        }
    }

    /// Before any run the published result is kubelet's initial value, and a new instance
    /// publishes nothing.
    #[test]
    fn initial_results_are_failure_for_readiness_success_for_liveness_unknown_for_startup() {
        for (kind, initial) in [
            (Readiness, ProbeResult::Failure),
            (Liveness, ProbeResult::Success),
            (Startup, ProbeResult::Unknown),
        ] {
            let mut probe = ProbeState::new(kind, config(0, 1, 3));
            assert_eq!(probe.result(), initial, "{kind:?} before an instance");
            let effect = probe.on(Input::NewInstance {
                now: secs(0),
                waits_for_startup: false,
            });
            assert_eq!(effect, no_change(Next::DueAt(secs(0))), "{kind:?}");
            assert_eq!(probe.result(), initial, "{kind:?} after a new instance");
            assert_eq!((probe.successes(), probe.failures(), probe.on_hold()), (0, 0, false));
        }
    }

    /// The first run is due at `initialDelaySeconds` after the container started (at once when
    /// it has been running longer), and a run due earlier waits for it.
    #[test]
    fn nothing_runs_before_initial_delay_seconds() {
        // (initialDelaySeconds, running for, first run due at)
        for (delay, running_for, due) in [(0, 0, 0), (10, 0, 10), (10, 4, 10), (10, 10, 10), (10, 30, 30)] {
            let mut probe = ProbeState::new(Readiness, config(delay, 1, 3));
            let effect = probe.on(Input::NewInstance {
                now: secs(running_for),
                waits_for_startup: false,
            });
            assert_eq!(
                effect,
                no_change(Next::DueAt(secs(due))),
                "delay {delay}s, running {running_for}s"
            );
        }
        let mut probe = ProbeState::new(Readiness, config(10, 1, 3));
        probe.on(Input::NewInstance {
            now: secs(0),
            waits_for_startup: false,
        });
        assert_eq!(probe.on(Input::Due { now: secs(9) }), no_change(Next::DueAt(secs(10))));
        assert_eq!(probe.on(Input::Due { now: secs(10) }), no_change(Next::Run));
    }

    /// Runs follow each other by `periodSeconds`, counted from when the previous one was due (a
    /// ticker, as kubelet's probe worker); ticks a long run outlasted are dropped.
    #[test]
    fn the_next_run_is_due_a_period_after_the_last_was_due() {
        let mut probe = started(Readiness, 1, 3);
        assert_eq!(probe.on(Input::Due { now: secs(0) }).next, Next::Run);
        let effect = probe.on(Input::Finished {
            now: secs(2),
            outcome: Fail,
        });
        assert_eq!(effect, no_change(Next::DueAt(secs(10))));
        // Started late (the actor's grid), finished later still: the phase stays.
        assert_eq!(
            probe
                .on(Input::Due {
                    now: secs(10) + Duration::from_millis(80)
                })
                .next,
            Next::Run
        );
        let effect = probe.on(Input::Finished {
            now: secs(25),
            outcome: Fail,
        });
        assert_eq!(effect, no_change(Next::DueAt(secs(30))), "the tick at 20 s is dropped");
    }

    /// The result turns Failure on the `failureThreshold`-th failure in a row, and only once.
    #[test]
    fn a_result_changes_after_failure_threshold_failures_in_a_row() {
        // (failureThreshold, outcomes, the run that publishes Failure, 1-based)
        for (threshold, outcomes, at) in [
            (1, vec![Fail, Fail], 1),
            (3, vec![Fail, Fail, Fail, Fail], 3),
            (3, vec![Fail, Fail, Pass, Fail, Fail, Fail], 6),
            (2, vec![Fail, Warn, Fail, Fail, Fail], 4),
        ] {
            let mut probe = started(Readiness, 1, threshold);
            run(&mut probe, 0, Pass);
            for (n, outcome) in outcomes.iter().enumerate() {
                let expected = (n + 1 == at).then_some(ProbeResult::Failure);
                assert_eq!(
                    run(&mut probe, 10 * (n as u64 + 1), *outcome),
                    expected,
                    "threshold {threshold}, {outcomes:?}, run {}",
                    n + 1
                );
            }
            assert_eq!(probe.result(), ProbeResult::Failure);
        }
    }

    /// The result turns Success on the `successThreshold`-th success in a row (a warning
    /// counts as one), and only once.
    #[test]
    fn a_result_changes_after_success_threshold_successes_in_a_row() {
        // (successThreshold, outcomes, the run that publishes Success, 1-based)
        for (threshold, outcomes, at) in [
            (1, vec![Pass, Pass], 1),
            (1, vec![Warn, Pass], 1),
            (3, vec![Pass, Pass, Pass, Pass], 3),
            (3, vec![Pass, Pass, Fail, Pass, Warn, Pass], 6),
        ] {
            let mut probe = started(Readiness, threshold, 3);
            for (n, outcome) in outcomes.iter().enumerate() {
                let expected = (n + 1 == at).then_some(ProbeResult::Success);
                assert_eq!(
                    run(&mut probe, 10 * n as u64, *outcome),
                    expected,
                    "threshold {threshold}, {outcomes:?}, run {}",
                    n + 1
                );
            }
            assert_eq!(probe.result(), ProbeResult::Success);
        }
    }

    /// A success ends the failure run and a failure ends the success run; the counts keep
    /// growing past the threshold.
    #[test]
    fn a_success_resets_the_failure_run_and_a_failure_resets_the_success_run() {
        let mut probe = started(Readiness, 2, 3);
        // (outcome, successes, failures, result after it)
        for (n, (outcome, successes, failures, result)) in [
            (Fail, 0, 1, ProbeResult::Failure),
            (Fail, 0, 2, ProbeResult::Failure),
            (Pass, 1, 0, ProbeResult::Failure),
            (Pass, 2, 0, ProbeResult::Success),
            (Pass, 3, 0, ProbeResult::Success),
            (Fail, 0, 1, ProbeResult::Success),
            (Warn, 1, 0, ProbeResult::Success),
            (Fail, 0, 1, ProbeResult::Success),
            (Fail, 0, 2, ProbeResult::Success),
            (Fail, 0, 3, ProbeResult::Failure),
            (Fail, 0, 4, ProbeResult::Failure),
        ]
        .into_iter()
        .enumerate()
        {
            run(&mut probe, 10 * n as u64, outcome);
            assert_eq!(
                (probe.successes(), probe.failures(), probe.result()),
                (successes, failures, result),
                "after run {} ({outcome:?})",
                n + 1
            );
        }
    }

    /// Readiness never holds: it keeps running through failures and recovers.
    #[test]
    fn readiness_keeps_running_after_a_failure() {
        let mut probe = started(Readiness, 1, 1);
        assert_eq!(run(&mut probe, 0, Pass), Some(ProbeResult::Success));
        assert_eq!(run(&mut probe, 10, Fail), Some(ProbeResult::Failure));
        assert!(!probe.on_hold());
        assert_eq!(run(&mut probe, 20, Pass), Some(ProbeResult::Success));
    }

    /// Until the instance's startup probe succeeded, liveness and readiness are due again a
    /// period later without running; then they run at their next due time.
    #[test]
    fn liveness_and_readiness_do_not_run_until_the_startup_probe_succeeds() {
        for kind in [Liveness, Readiness] {
            let mut probe = ProbeState::new(kind, config(0, 1, 1));
            probe.on(Input::NewInstance {
                now: secs(0),
                waits_for_startup: true,
            });
            assert_eq!(
                probe.on(Input::Due { now: secs(0) }),
                no_change(Next::DueAt(secs(10))),
                "{kind:?}"
            );
            assert_eq!(
                probe.on(Input::Due { now: secs(10) }),
                no_change(Next::DueAt(secs(20))),
                "{kind:?}"
            );
            if kind == Liveness {
                assert_eq!(
                    probe.on(Input::StartupSucceeded { now: secs(15) }),
                    no_change(Next::Nothing)
                );
                assert_eq!(probe.on(Input::Due { now: secs(20) }), no_change(Next::Run));
            } else {
                // Readiness runs at once, and its ticker keeps its phase (the run counts as
                // the pending tick at 20 s).
                assert_eq!(
                    probe.on(Input::StartupSucceeded { now: secs(15) }),
                    no_change(Next::Run)
                );
                assert_eq!(
                    probe.on(Input::Finished {
                        now: secs(15),
                        outcome: Pass
                    }),
                    Effect {
                        changed: Some(ProbeResult::Success),
                        started: false,
                        next: Next::DueAt(secs(30)),
                    }
                );
            }
        }
        // The startup probe itself never waits, and says when it succeeded.
        let mut startup = ProbeState::new(Startup, config(0, 1, 3));
        startup.on(Input::NewInstance {
            now: secs(0),
            waits_for_startup: true,
        });
        assert_eq!(startup.on(Input::Due { now: secs(0) }).next, Next::Run);
        let effect = startup.on(Input::Finished {
            now: secs(1),
            outcome: Pass,
        });
        assert_eq!(
            effect,
            Effect {
                changed: Some(ProbeResult::Success),
                started: true,
                next: Next::Nothing,
            }
        );
    }

    /// A new instance of a container with a startup probe waits for it again.
    #[test]
    fn a_new_instance_waits_for_its_startup_probe_again() {
        let mut probe = ProbeState::new(Liveness, config(0, 1, 1));
        probe.on(Input::NewInstance {
            now: secs(0),
            waits_for_startup: true,
        });
        probe.on(Input::StartupSucceeded { now: secs(0) });
        assert_eq!(run(&mut probe, 0, Fail), Some(ProbeResult::Failure));
        probe.on(Input::NewInstance {
            now: secs(0),
            waits_for_startup: true,
        });
        assert!(probe.waits_for_startup());
        assert_eq!(probe.on(Input::Due { now: secs(0) }), no_change(Next::DueAt(secs(10))));
    }

    /// After a liveness failure the probe holds: it neither runs nor changes until a new
    /// container instance, which starts it over from Success.
    #[test]
    fn probe_holds_after_liveness_failure_until_new_instance() {
        let mut probe = started(Liveness, 1, 2);
        assert_eq!(run(&mut probe, 0, Fail), None);
        let effect = probe.on(Input::Finished {
            now: secs(10),
            outcome: Fail,
        });
        assert_eq!(effect, no_change(Next::Nothing), "not running: nothing to finish");
        assert_eq!(probe.on(Input::Due { now: secs(10) }).next, Next::Run);
        assert_eq!(
            probe.on(Input::Finished {
                now: secs(10),
                outcome: Fail
            }),
            Effect {
                changed: Some(ProbeResult::Failure),
                started: false,
                next: Next::Nothing,
            }
        );
        assert!(probe.on_hold());
        for input in [
            Input::Due { now: secs(20) },
            Input::Finished {
                now: secs(21),
                outcome: Pass,
            },
            Input::StartupSucceeded { now: secs(25) },
            Input::Due { now: secs(30) },
        ] {
            assert_eq!(probe.on(input), no_change(Next::Nothing), "{input:?} while on hold");
            assert_eq!((probe.result(), probe.on_hold()), (ProbeResult::Failure, true));
        }
        let effect = probe.on(Input::NewInstance {
            now: secs(0),
            waits_for_startup: false,
        });
        assert_eq!(effect, no_change(Next::DueAt(secs(0))));
        assert_eq!((probe.result(), probe.on_hold()), (ProbeResult::Success, false));
        assert_eq!((probe.successes(), probe.failures()), (0, 0));
        assert_eq!(run(&mut probe, 0, Fail), None, "a fresh failure run");
    }

    /// A startup probe holds after its first result, success or failure, until a new instance.
    #[test]
    fn a_startup_probe_holds_after_any_result_until_new_instance() {
        for (outcome, result) in [(Pass, ProbeResult::Success), (Fail, ProbeResult::Failure)] {
            let mut probe = started(Startup, 1, 1);
            assert_eq!(run(&mut probe, 0, outcome), Some(result), "{outcome:?}");
            assert!(probe.on_hold(), "{outcome:?}");
            assert_eq!(
                probe.on(Input::Due { now: secs(10) }),
                no_change(Next::Nothing),
                "{outcome:?}"
            );
            probe.on(Input::NewInstance {
                now: secs(0),
                waits_for_startup: false,
            });
            assert_eq!((probe.result(), probe.on_hold()), (ProbeResult::Unknown, false));
            assert_eq!(probe.on(Input::Due { now: secs(0) }).next, Next::Run, "{outcome:?}");
        }
    }

    /// Liveness recovering from below its threshold never holds; only a published failure does.
    #[test]
    fn liveness_holds_only_when_failure_is_published() {
        let mut probe = started(Liveness, 1, 3);
        for (n, outcome) in [Fail, Fail, Pass, Fail, Fail].into_iter().enumerate() {
            assert_eq!(run(&mut probe, 10 * n as u64, outcome), None);
            assert!(!probe.on_hold(), "after run {}", n + 1);
        }
    }

    /// A probe with no container instance yet holds, and one run is in flight at a time.
    #[test]
    fn a_probe_runs_only_for_an_instance_and_once_at_a_time() {
        let mut probe = ProbeState::new(Readiness, config(0, 1, 3));
        assert!(probe.on_hold());
        assert_eq!(probe.on(Input::Due { now: secs(0) }), no_change(Next::Nothing));
        probe.on(Input::NewInstance {
            now: secs(0),
            waits_for_startup: false,
        });
        assert_eq!(probe.on(Input::Due { now: secs(0) }).next, Next::Run);
        assert_eq!(
            probe.on(Input::Due { now: secs(1) }),
            no_change(Next::Nothing),
            "already running"
        );
    }

    /// Unset fields take kubelet's defaults; out-of-range ones are floored.
    #[test]
    fn config_takes_kubelet_defaults_and_floors_out_of_range_values() {
        // [initialDelay, period, timeout, successThreshold, failureThreshold]: set, then taken
        for (set, taken) in [
            ([None; 5], [0, 10, 1, 1, 3]),
            ([Some(5), Some(2), Some(3), Some(2), Some(4)], [5, 2, 3, 2, 4]),
            ([Some(-1), Some(0), Some(0), Some(0), Some(-2)], [0, 1, 1, 1, 1]),
        ] {
            let [delay, period, timeout, success, failure] = set;
            let probe = Probe {
                initial_delay_seconds: delay,
                period_seconds: period,
                timeout_seconds: timeout,
                success_threshold: success,
                failure_threshold: failure,
                ..Probe::default()
            };
            let c = ProbeConfig::from_probe(&probe);
            let got = [
                c.initial_delay.as_secs(),
                c.period.as_secs(),
                c.timeout.as_secs(),
                u64::from(c.success_threshold),
                u64::from(c.failure_threshold),
            ];
            assert_eq!(got, taken, "{set:?}");
        }
    }
}
