//! ProbeActor: runs every container's liveness, readiness and startup probes (reference §4) —
//! one actor and one timer for all probes, no thread or process per probe.
//!
//! | Message            | From       | Effect                                                  |
//! |--------------------|------------|---------------------------------------------------------|
//! | WatchContainers    | PodWorker  | start probes of new container instances, stop gone ones |
//! | ForgetPod          | PodWorker  | stop every probe of the pod                             |
//! | GetActorState      | Supervisor | each probe's state and last result                      |
//! | Panic              | Supervisor | test-only fault hook                                    |
//! | per probe, every `periodSeconds` | self | run the handler, apply thresholds            |
//!
//! The probes' next runs wait in one queue behind one timer. With a timer per probe, every
//! wake-up of the actor (a timer, or a probe's socket becoming ready) polled all of them: at
//! 110 probes a second that cost more than the probes' own bookkeeping.
//!
//! Sends `ProbeResultChanged` and `RecordEvent` (Unhealthy, ProbeWarning) to the Supervisor.
//! Semantics follow kubelet's prober worker: initial results readiness=Failure,
//! liveness=Success, startup=Unknown; nothing runs before `initialDelaySeconds`; until the
//! startup probe succeeds only it runs; a result changes after `failureThreshold` failures or
//! `successThreshold` successes in a row; after a liveness failure or any startup result the
//! probe holds until a new container instance appears.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use dockerlet_messages::debug::{ActorState, DebugEvent, GetActorState, Panic, RecordEvent};
use dockerlet_messages::probe::{ForgetPod, ProbeKind, ProbeResult, ProbeResultChanged, WatchContainers};
use dockerlet_messages::{ContainerId, PodUid};
use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::json;
use tokio::time::Instant;

use crate::actions::{self, Caller, Outcome, Target};
use dockerlet_pod::action::Action;
use dockerlet_runtime::ContainerRuntime;

/// Runs are started on a grid of this grain (at most this much late), so probes due close
/// together start in one wake-up and their sockets' events tend to arrive together: fewer
/// wake-ups of the agent at 110 probes a second.
const RUN_GRAIN: Duration = Duration::from_millis(20);

/// Kubelet's probe defaults.
const DEFAULT_PERIOD: i32 = 10;
const DEFAULT_TIMEOUT: i32 = 1;
const DEFAULT_FAILURE_THRESHOLD: i32 = 3;
const DEFAULT_SUCCESS_THRESHOLD: i32 = 1;
/// Longest output kept for the debug page.
const OUTPUT_KEPT: usize = 512;

/// Where the ProbeActor sends what it finds.
#[derive(Clone)]
pub struct ProbeLinks {
    /// Result changes.
    pub results: Recipient<ProbeResultChanged>,
    /// Unhealthy and ProbeWarning events.
    pub events: Recipient<RecordEvent>,
}

/// One probe of one container.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct ProbeKey {
    pod_uid: PodUid,
    container: String,
    kind: ProbeKind,
}

/// What the debug endpoint shows of a probe.
#[derive(Debug, Clone, Serialize)]
struct ProbeView {
    pod_uid: PodUid,
    pod: String,
    container: String,
    probe: ProbeKind,
    handler: &'static str,
    container_id: ContainerId,
    result: ProbeResult,
    last_outcome: Option<&'static str>,
    last_output: String,
    last_run: Option<String>,
    successes: u32,
    failures: u32,
    runs: u64,
    on_hold: bool,
}

/// A probe's schedule, counters and cached result.
struct ProbeState {
    /// `namespace/name`, for events and the debug page.
    pod: String,
    /// The container instance probed; a new instance replaces this state.
    container_id: ContainerId,
    /// The pod's IP.
    pod_ip: Option<String>,
    /// The validated handler (shared with the runs in flight).
    action: Arc<Action>,
    /// periodSeconds.
    period: Duration,
    /// timeoutSeconds.
    timeout: Duration,
    /// successThreshold.
    success_threshold: u32,
    /// failureThreshold.
    failure_threshold: u32,
    /// The published result.
    result: ProbeResult,
    /// Consecutive successes.
    successes: u32,
    /// Consecutive failures.
    failures: u32,
    /// Stopped until a new container instance (after a liveness failure or a startup result).
    on_hold: bool,
    /// A liveness or readiness probe of a container that has a startup probe: it waits for it.
    gated_by_startup: bool,
    /// Timers of an older instance carry an older generation and are ignored.
    generation: u64,
    /// A run is in flight.
    running: bool,
    /// Runs so far.
    runs: u64,
    /// Last outcome and output, and when.
    last: Option<(&'static str, String, Timestamp)>,
}

/// The probe actor.
pub struct ProbeActor {
    /// Docker (exec probes).
    runtime: Arc<dyn ContainerRuntime>,
    /// Where results and events go.
    links: ProbeLinks,
    /// Every probe.
    probes: BTreeMap<ProbeKey, ProbeState>,
    /// Next runs, earliest first: when, the probe's generation, the probe. Entries of replaced
    /// or removed probes are skipped when they come due.
    due: BinaryHeap<Reverse<(Instant, u64, ProbeKey)>>,
    /// Origin of the run grid ([`RUN_GRAIN`]).
    epoch: Instant,
    /// The one armed timer: when it fires, and its handle.
    timer: Option<(Instant, SpawnHandle)>,
    /// Generation counter for timers.
    next_generation: u64,
    /// Messages handled.
    handled: u64,
}

fn kind_label(kind: ProbeKind) -> &'static str {
    match kind {
        ProbeKind::Liveness => "Liveness",
        ProbeKind::Readiness => "Readiness",
        ProbeKind::Startup => "Startup",
    }
}

fn probe_of(container: &Container, kind: ProbeKind) -> Option<&Probe> {
    match kind {
        ProbeKind::Liveness => container.liveness_probe.as_ref(),
        ProbeKind::Readiness => container.readiness_probe.as_ref(),
        ProbeKind::Startup => container.startup_probe.as_ref(),
    }
}

fn seconds(value: Option<i32>, default: i32) -> Duration {
    Duration::from_secs(value.unwrap_or(default).max(1) as u64)
}

impl ProbeActor {
    /// A probe actor running exec probes through `runtime`.
    pub fn new(runtime: Arc<dyn ContainerRuntime>, links: ProbeLinks) -> Self {
        ProbeActor {
            runtime,
            links,
            probes: BTreeMap::new(),
            due: BinaryHeap::new(),
            epoch: Instant::now(),
            timer: None,
            next_generation: 0,
            handled: 0,
        }
    }

    /// Queue the next run of `key` in `delay`.
    fn schedule(&mut self, key: ProbeKey, delay: Duration, ctx: &mut Context<Self>) {
        let Some(generation) = self.probes.get(&key).map(|p| p.generation) else {
            return;
        };
        self.due
            .push(Reverse((self.on_grid(Instant::now() + delay), generation, key)));
        self.arm(ctx);
    }

    /// `at`, moved up to the next multiple of [`RUN_GRAIN`] since the actor started.
    fn on_grid(&self, at: Instant) -> Instant {
        let grain = RUN_GRAIN.as_nanos();
        let since = at.saturating_duration_since(self.epoch).as_nanos();
        let steps = since.div_ceil(grain);
        self.epoch + Duration::from_nanos(u64::try_from(steps * grain).unwrap_or(u64::MAX))
    }

    /// Make the timer fire when the earliest queued run is due.
    fn arm(&mut self, ctx: &mut Context<Self>) {
        let Some(Reverse((next, ..))) = self.due.peek() else {
            return;
        };
        let next = *next;
        if let Some((at, handle)) = self.timer {
            if at <= next {
                return;
            }
            ctx.cancel_future(handle);
        }
        let handle = ctx.run_later(next.saturating_duration_since(Instant::now()), |act, ctx| {
            act.timer = None;
            act.run_due(ctx);
        });
        self.timer = Some((next, handle));
    }

    /// Start every run that is due, then re-arm the timer.
    fn run_due(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        while self.due.peek().is_some_and(|Reverse((when, ..))| *when <= now) {
            let Some(Reverse((_, generation, key))) = self.due.pop() else {
                break;
            };
            self.tick(key, generation, ctx);
        }
        self.arm(ctx);
    }

    /// Startup gating: liveness and readiness wait until the startup probe succeeded.
    fn held_by_startup(&self, key: &ProbeKey, container_id: &ContainerId) -> bool {
        if key.kind == ProbeKind::Startup {
            return false;
        }
        let startup = ProbeKey {
            kind: ProbeKind::Startup,
            ..key.clone()
        };
        self.probes
            .get(&startup)
            .is_some_and(|s| s.container_id == *container_id && s.result != ProbeResult::Success)
    }

    fn tick(&mut self, key: ProbeKey, generation: u64, ctx: &mut Context<Self>) {
        let Some(state) = self.probes.get(&key) else { return };
        if state.generation != generation || state.on_hold || state.running {
            return;
        }
        let period = state.period;
        if state.gated_by_startup && self.held_by_startup(&key, &state.container_id) {
            self.schedule(key, period, ctx);
            return;
        }
        let state = self.probes.get_mut(&key).expect("checked above");
        state.running = true;
        let target = Target {
            runtime: self.runtime.clone(),
            container_id: state.container_id.clone(),
            pod_ip: state.pod_ip.clone(),
            timeout: state.timeout,
        };
        let action = Arc::clone(&state.action);
        let future = async move { actions::run(&action, &target, Caller::Probe).await };
        ctx.spawn(
            future
                .into_actor(self)
                .map(move |outcome, act, ctx| act.record(key, generation, outcome, ctx)),
        );
    }

    fn record(&mut self, key: ProbeKey, generation: u64, outcome: Outcome, ctx: &mut Context<Self>) {
        let Some(state) = self.probes.get_mut(&key) else { return };
        if state.generation != generation {
            return;
        }
        state.running = false;
        state.runs += 1;
        let passed = outcome.passed();
        let event = match &outcome {
            Outcome::Failure(message) => {
                Some(("Unhealthy", format!("{} probe failed: {message}", kind_label(key.kind))))
            }
            Outcome::Warning(message) => Some((
                "ProbeWarning",
                format!("{} probe warning: {message}", kind_label(key.kind)),
            )),
            Outcome::Success(_) => None,
        };
        let (label, mut output) = match outcome {
            Outcome::Success(o) => ("Success", o),
            Outcome::Warning(o) => ("Warning", o),
            Outcome::Failure(o) => ("Failure", o),
        };
        if let Some((cut, _)) = output.char_indices().nth(OUTPUT_KEPT) {
            output.truncate(cut);
        }
        state.last = Some((label, output, Timestamp::now()));
        let mut published = None;
        if passed {
            state.successes += 1;
            state.failures = 0;
            if state.result != ProbeResult::Success && state.successes >= state.success_threshold {
                state.result = ProbeResult::Success;
                published = Some(ProbeResult::Success);
            }
        } else {
            state.failures += 1;
            state.successes = 0;
            if state.result != ProbeResult::Failure && state.failures >= state.failure_threshold {
                state.result = ProbeResult::Failure;
                published = Some(ProbeResult::Failure);
            }
        }
        // Kubelet holds a liveness probe after a failure and a startup probe after any result,
        // until a new container instance appears.
        if published.is_some()
            && (key.kind == ProbeKind::Startup
                || published == Some(ProbeResult::Failure) && key.kind == ProbeKind::Liveness)
        {
            state.on_hold = true;
        }
        let period = state.period;
        if let Some((reason, message)) = event {
            self.links.events.do_send(RecordEvent {
                event: DebugEvent {
                    time: Timestamp::now().to_string(),
                    reason: reason.to_string(),
                    object: state.pod.clone(),
                    container: Some(key.container.clone()),
                    message,
                },
            });
        }
        if let Some(result) = published {
            tracing::info!(pod.uid = %key.pod_uid, pod = %state.pod, container = %key.container, probe = ?key.kind, result = ?result, "probe result changed");
            self.links.results.do_send(ProbeResultChanged {
                pod_uid: key.pod_uid.clone(),
                container_name: key.container.clone(),
                container_id: state.container_id.clone(),
                kind: key.kind,
                result,
            });
        }
        self.schedule(key, period, ctx);
    }
}

impl Actor for ProbeActor {
    type Context = Context<Self>;
}

impl Handler<WatchContainers> for ProbeActor {
    type Result = ();

    /// Start probes of new container instances; stop those of instances no longer running.
    fn handle(&mut self, msg: WatchContainers, ctx: &mut Self::Context) {
        self.handled += 1;
        let pod: &Pod = &msg.pod;
        let pod_ref = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        let containers: HashMap<&str, &Container> = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .map(|c| (c.name.as_str(), c))
            .collect();
        let mut wanted = Vec::new();
        for target in &msg.running {
            let Some(container) = containers.get(target.container_name.as_str()) else {
                continue;
            };
            for kind in [ProbeKind::Startup, ProbeKind::Liveness, ProbeKind::Readiness] {
                let Some(probe) = probe_of(container, kind) else {
                    continue;
                };
                let key = ProbeKey {
                    pod_uid: msg.pod_uid.clone(),
                    container: target.container_name.clone(),
                    kind,
                };
                wanted.push(key.clone());
                if let Some(existing) = self.probes.get_mut(&key) {
                    if existing.container_id == target.container_id {
                        existing.pod_ip.clone_from(&msg.pod_ip);
                        continue;
                    }
                }
                let field = match kind {
                    ProbeKind::Liveness => "livenessProbe",
                    ProbeKind::Readiness => "readinessProbe",
                    ProbeKind::Startup => "startupProbe",
                };
                // Invalid probes never get this far (the container is refused), but never panic.
                let Ok(action) =
                    dockerlet_pod::action::probe_action(field, probe, container, kind != ProbeKind::Readiness)
                else {
                    continue;
                };
                self.next_generation += 1;
                self.probes.insert(
                    key.clone(),
                    ProbeState {
                        pod: pod_ref.clone(),
                        container_id: target.container_id.clone(),
                        pod_ip: msg.pod_ip.clone(),
                        action: Arc::new(action),
                        period: seconds(probe.period_seconds, DEFAULT_PERIOD),
                        timeout: seconds(probe.timeout_seconds, DEFAULT_TIMEOUT),
                        success_threshold: probe.success_threshold.unwrap_or(DEFAULT_SUCCESS_THRESHOLD).max(1) as u32,
                        failure_threshold: probe.failure_threshold.unwrap_or(DEFAULT_FAILURE_THRESHOLD).max(1) as u32,
                        result: match kind {
                            ProbeKind::Readiness => ProbeResult::Failure,
                            ProbeKind::Liveness => ProbeResult::Success,
                            ProbeKind::Startup => ProbeResult::Unknown,
                        },
                        successes: 0,
                        failures: 0,
                        on_hold: false,
                        gated_by_startup: kind != ProbeKind::Startup && container.startup_probe.is_some(),
                        generation: self.next_generation,
                        running: false,
                        runs: 0,
                        last: None,
                    },
                );
                let initial_delay = Duration::from_secs(probe.initial_delay_seconds.unwrap_or(0).max(0) as u64);
                let ran_for = target
                    .started_at
                    .as_ref()
                    .and_then(|t| Duration::try_from(Timestamp::now().duration_since(t.0)).ok())
                    .unwrap_or_default();
                self.schedule(key, initial_delay.saturating_sub(ran_for), ctx);
            }
        }
        self.probes
            .retain(|key, _| key.pod_uid != msg.pod_uid || wanted.contains(key));
    }
}

impl Handler<ForgetPod> for ProbeActor {
    type Result = ();

    /// Stop every probe of a pod.
    fn handle(&mut self, msg: ForgetPod, _: &mut Self::Context) {
        self.handled += 1;
        self.probes.retain(|key, _| key.pod_uid != msg.pod_uid);
    }
}

impl Handler<GetActorState> for ProbeActor {
    type Result = MessageResult<GetActorState>;

    fn handle(&mut self, _: GetActorState, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let probes: Vec<ProbeView> = self
            .probes
            .iter()
            .map(|(key, s)| ProbeView {
                pod_uid: key.pod_uid.clone(),
                pod: s.pod.clone(),
                container: key.container.clone(),
                probe: key.kind,
                handler: s.action.name(),
                container_id: s.container_id.clone(),
                result: s.result,
                last_outcome: s.last.as_ref().map(|l| l.0),
                last_output: s.last.as_ref().map(|l| l.1.clone()).unwrap_or_default(),
                last_run: s.last.as_ref().map(|l| l.2.to_string()),
                successes: s.successes,
                failures: s.failures,
                runs: s.runs,
                on_hold: s.on_hold,
            })
            .collect();
        MessageResult(ActorState {
            kind: "ProbeActor".to_string(),
            name: "probes".to_string(),
            messages_handled: self.handled,
            restarts: 0,
            last_error: None,
            detail: json!({ "probes": probes }),
        })
    }
}

impl Handler<Panic> for ProbeActor {
    type Result = ();

    fn handle(&mut self, _: Panic, _: &mut Self::Context) {
        panic!("fault injection: ProbeActor asked to panic");
    }
}
