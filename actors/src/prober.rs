//! ProbeActor: runs every container's liveness, readiness and startup probes — kubelet's
//! prober manager and workers (`pkg/kubelet/prober/prober_manager.go`, `worker.go`) as one
//! actor and one timer for all probes, no thread or process per probe.
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
//! Sends `ProbeResultChanged` to the Supervisor (which routes it to the pod's worker) and
//! `RecordEvent` (Unhealthy, ProbeWarning) to the EventRecorder.
//! What a probe does next — thresholds, initial delay, startup gating, the hold after a
//! liveness failure or a startup result — is decided by [`dockerlet_pod::probe_state`]; this
//! actor keeps the timer and the queue, runs the handlers and sends the messages.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use dockerlet_messages::debug::{DebugView, EventType, ProbeDebug, RecordEvent};
use dockerlet_messages::probe::{ForgetPod, ProbeKind, ProbeResult, ProbeResultChanged, ProbeTarget, WatchContainers};
use dockerlet_messages::{ContainerId, PodRef, PodUid};
use dockerlet_metrics::{Metrics, ProbeOutcome, ProbeSeries};
use dockerlet_pod::plan::is_sidecar;
use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use tokio::time::Instant;
use tracing::{Instrument, Span};

use crate::inspect::Inspect;
use crate::registry::Link;
use dockerlet_pod::action::Action;
use dockerlet_pod::probe_state::{Effect, Input, Next, ProbeConfig, ProbeState, RunOutcome};
use dockerlet_probe::{Caller, Outcome, Target};
use dockerlet_runtime::ContainerRuntime;

/// Runs are started on a grid of this grain (at most this much late), so probes due close
/// together start in one wake-up and their sockets' events tend to arrive together: fewer
/// wake-ups of the agent at 110 probes a second (about 0.003 core fewer than a 20 ms grain).
/// A period is kept: each run is due a period after the previous was due, not after it ran.
const RUN_GRAIN: Duration = Duration::from_millis(100);

/// The grain exec runs are spread on: [`EXEC_RUNS_PER_GRAIN`] start per grain.
const EXEC_GRAIN: Duration = Duration::from_millis(20);

/// Exec probes started in one exec grain at most (150 a second): each costs the engine about 45 ms
/// of CPU (dockerd, containerd, the shim and runc; BENCHMARKS.md, P5b), so a node's exec probes
/// due together are spread over the following grains rather than all fired at once.
const EXEC_RUNS_PER_GRAIN: usize = 3;

/// Exec probes running at once at most. Past what the engine can run (about 40 a second on
/// 2 cores) more at once only make each slower, until they time out and a healthy container is
/// killed for it — and its restart costs the engine more. Beyond this many, runs wait in the
/// agent: a probe then runs less often than its period asks (as a kubelet probe whose run
/// outlasts its period does), but never fails because the engine was busy.
const EXEC_IN_FLIGHT: usize = 4;

/// Longest output kept for the debug page.
const OUTPUT_KEPT: usize = 512;

/// Where the ProbeActor sends what it finds.
#[derive(Clone)]
pub struct ProbeLinks {
    /// Result changes.
    pub results: Recipient<ProbeResultChanged>,
    /// Unhealthy and ProbeWarning events.
    pub events: Link<RecordEvent>,
}

/// One probe of one container.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct ProbeKey {
    pod_uid: PodUid,
    container: String,
    kind: ProbeKind,
}

/// A probe of one container instance: its state machine and what running it takes.
struct ProbeWorker {
    /// The pod, for events, spans and the debug page.
    pod: PodRef,
    /// The container's reference in the pod (the events' fieldPath).
    field_path: String,
    /// The container instance probed; a new instance replaces this worker.
    container_id: ContainerId,
    /// The pod's IP.
    pod_ip: Option<String>,
    /// The validated handler (shared with the runs in flight).
    action: Arc<Action>,
    /// Thresholds, counts, result, hold and startup gating.
    state: ProbeState,
    /// When this worker was created, and how long the container had been running then: the
    /// state machine's times count from the container's start.
    created: (Instant, Duration),
    /// Timers of an older instance carry an older generation and are ignored.
    generation: u64,
    /// Runs so far.
    runs: u64,
    /// Last outcome and output, and when.
    last: Option<(&'static str, String, Timestamp)>,
    /// `prober_probe_total` and `prober_probe_duration_seconds` of this probe.
    series: ProbeSeries,
    /// The probe's span ([`probe_span`]), made once: the fmt layer formats a span's fields
    /// when it is created, which for three spans per run was 6 % of the agent's CPU at 110
    /// probes a second (BENCHMARKS.md, P5).
    span: Span,
}

impl ProbeWorker {
    /// A worker for a new container instance, and what to do first.
    fn start(
        key: &ProbeKey,
        probe: &Probe,
        action: Action,
        instance: &Instance,
        waits_for_startup: bool,
        generation: u64,
        series: ProbeSeries,
    ) -> (Self, Next) {
        let ran_for = running_for(instance.target);
        let mut state = ProbeState::new(key.kind, ProbeConfig::from_probe(probe));
        let next = state
            .on(Input::NewInstance {
                now: ran_for,
                waits_for_startup,
            })
            .next;
        let container_id = instance.target.container_id.clone();
        tracing::debug!(container_id = %container_id, running_for = ?ran_for, waits_for_startup, "probe started");
        let worker = ProbeWorker {
            span: probe_span(key, instance.pod),
            pod: instance.pod.clone(),
            field_path: dockerlet_pod::spec::field_path(&instance.msg.pod, &key.container),
            container_id,
            pod_ip: instance.msg.pod_ip.clone(),
            action: Arc::new(action),
            state,
            created: (Instant::now(), ran_for),
            generation,
            runs: 0,
            last: None,
            series,
        };
        (worker, next)
    }

    /// Time since the container started, at `now`.
    fn since_start(&self, now: Instant) -> Duration {
        let (at, ran_for) = self.created;
        ran_for + now.saturating_duration_since(at)
    }

    /// The probe's span (see [`probe_span`]).
    fn span(&self) -> Span {
        self.span.clone()
    }

    /// Keep a run's outcome for the debug page; the event it calls for, if any.
    fn remember(&mut self, kind: ProbeKind, outcome: Outcome) -> Option<(&'static str, String)> {
        let (label, event, mut output) = match outcome {
            Outcome::Success(o) => ("Success", None, o),
            Outcome::Warning(o) => ("Warning", Some(("ProbeWarning", "warning")), o),
            Outcome::Failure(o) => ("Failure", Some(("Unhealthy", "failed")), o),
        };
        let event = event.map(|(reason, what)| (reason, format!("{} probe {what}: {output}", kind_label(kind))));
        if let Some((cut, _)) = output.char_indices().nth(OUTPUT_KEPT) {
            output.truncate(cut);
        }
        self.last = Some((label, output, Timestamp::now()));
        event
    }

    fn view(&self, key: &ProbeKey) -> ProbeDebug {
        ProbeDebug {
            pod_uid: key.pod_uid.clone(),
            pod: self.pod.to_string(),
            container: key.container.clone(),
            probe: key.kind,
            handler: self.action.name().to_string(),
            container_id: self.container_id.clone(),
            result: self.state.result(),
            last_outcome: self.last.as_ref().map(|l| l.0.to_string()),
            last_output: self.last.as_ref().map(|l| l.1.clone()).unwrap_or_default(),
            last_run: self.last.as_ref().map(|l| l.2.to_string()),
            successes: self.state.successes(),
            failures: self.state.failures(),
            runs: self.runs,
            on_hold: self.state.on_hold(),
        }
    }
}

/// A running container instance of a `WatchContainers`, and its pod.
struct Instance<'a> {
    msg: &'a WatchContainers,
    /// The pod.
    pod: &'a PodRef,
    container: &'a Container,
    target: &'a ProbeTarget,
}

/// The probe actor.
pub struct ProbeActor {
    /// Docker (exec probes).
    runtime: Arc<dyn ContainerRuntime>,
    /// Where results and events go.
    links: ProbeLinks,
    /// Every probe.
    probes: BTreeMap<ProbeKey, ProbeWorker>,
    /// Next runs, earliest first: when, the probe's generation, the probe. Entries of replaced
    /// or removed probes are skipped when they come due.
    due: BinaryHeap<Reverse<(Instant, u64, ProbeKey)>>,
    /// Exec runs the state machines asked for, not started yet: at most
    /// [`EXEC_RUNS_PER_GRAIN`] start per wake-up. With each its probe's generation.
    exec_ready: VecDeque<(u64, ProbeKey)>,
    /// When the next exec runs of `exec_ready` start.
    exec_at: Option<Instant>,
    /// Exec runs in flight.
    exec_running: usize,
    /// Origin of the run grid ([`RUN_GRAIN`]).
    epoch: Instant,
    /// The one armed timer: when it fires, and its handle.
    timer: Option<(Instant, SpawnHandle)>,
    /// Generation counter for timers.
    next_generation: u64,
    /// Messages handled.
    handled: u64,
    /// The prober's metrics.
    metrics: Arc<Metrics>,
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

/// The probe's field in the container spec, for validation errors.
fn field_of(kind: ProbeKind) -> &'static str {
    match kind {
        ProbeKind::Liveness => "livenessProbe",
        ProbeKind::Readiness => "readinessProbe",
        ProbeKind::Startup => "startupProbe",
    }
}

fn run_outcome(outcome: &Outcome) -> RunOutcome {
    match outcome {
        Outcome::Success(_) => RunOutcome::Success,
        Outcome::Warning(_) => RunOutcome::Warning,
        Outcome::Failure(_) => RunOutcome::Failure,
    }
}

/// The span of one probe's runs, results and start: the pod's namespace, name and UID, then
/// `container` and `probe`.
fn probe_span(key: &ProbeKey, pod: &PodRef) -> Span {
    tracing::info_span!(
        parent: &pod.span(),
        "probe",
        container = %key.container,
        probe = kind_label(key.kind)
    )
}

/// How long a container has been running, by the wall clock (Docker's `startedAt`).
/// Exec probes are the engine's costly ones: they are spread and limited.
fn is_exec(action: &Action) -> bool {
    matches!(action, Action::Exec { .. })
}

fn running_for(target: &ProbeTarget) -> Duration {
    target
        .started_at
        .as_ref()
        .and_then(|t| Duration::try_from(Timestamp::now().duration_since(t.0)).ok())
        .unwrap_or_default()
}

impl ProbeActor {
    /// A probe actor running exec probes through `runtime`.
    pub fn new(runtime: Arc<dyn ContainerRuntime>, links: ProbeLinks) -> Self {
        ProbeActor {
            runtime,
            links,
            probes: BTreeMap::new(),
            due: BinaryHeap::new(),
            exec_ready: VecDeque::new(),
            exec_at: None,
            exec_running: 0,
            epoch: Instant::now(),
            timer: None,
            next_generation: 0,
            handled: 0,
            metrics: Arc::default(),
        }
    }

    /// Count probe runs in `metrics` (`/metrics/probes`).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Queue the next run of `key` in `delay`.
    fn schedule(&mut self, key: ProbeKey, delay: Duration, ctx: &mut Context<Self>) {
        let Some(generation) = self.probes.get(&key).map(|p| p.generation) else {
            return;
        };
        self.due.push(Reverse((
            self.on_grid(Instant::now() + delay, RUN_GRAIN),
            generation,
            key,
        )));
        self.arm(ctx);
    }

    /// `at`, moved up to the next multiple of `grain` since the actor started.
    fn on_grid(&self, at: Instant, grain: Duration) -> Instant {
        let grain = grain.as_nanos();
        let since = at.saturating_duration_since(self.epoch).as_nanos();
        let steps = since.div_ceil(grain);
        self.epoch + Duration::from_nanos(u64::try_from(steps * grain).unwrap_or(u64::MAX))
    }

    /// Make the timer fire when the earliest queued run is due.
    fn arm(&mut self, ctx: &mut Context<Self>) {
        let due = self.due.peek().map(|Reverse((at, ..))| *at);
        let Some(next) = due.into_iter().chain(self.exec_at).min() else {
            return;
        };
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

    /// Start every run that is due, and at most [`EXEC_RUNS_PER_GRAIN`] exec runs (the rest
    /// wait for the next grain); then re-arm the timer.
    fn run_due(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        while self.due.peek().is_some_and(|Reverse((when, ..))| *when <= now) {
            let Some(Reverse((_, generation, key))) = self.due.pop() else {
                break;
            };
            self.tick(key, generation, ctx);
        }
        if self.exec_at.is_some_and(|at| at <= now) {
            let mut started = 0;
            while started < EXEC_RUNS_PER_GRAIN && self.exec_running < EXEC_IN_FLIGHT {
                let Some((generation, key)) = self.exec_ready.pop_front() else {
                    break;
                };
                if self.probes.get(&key).is_some_and(|w| w.generation == generation) {
                    self.start_run(key, ctx);
                    started += 1;
                }
            }
            // With all slots taken, the next finished exec run re-arms.
            let room = self.exec_running < EXEC_IN_FLIGHT;
            self.exec_at = (!self.exec_ready.is_empty() && room).then(|| self.on_grid(now + EXEC_GRAIN, EXEC_GRAIN));
            if !self.exec_ready.is_empty() {
                tracing::trace!(waiting = self.exec_ready.len(), "exec probes spread to the next grain");
            }
        }
        self.arm(ctx);
    }

    /// An exec run ended: its slot is free for the next one waiting.
    fn exec_finished(&mut self, ctx: &mut Context<Self>) {
        self.exec_running = self.exec_running.saturating_sub(1);
        if !self.exec_ready.is_empty() && self.exec_at.is_none() {
            self.exec_at = Some(self.on_grid(Instant::now(), EXEC_GRAIN));
            self.arm(ctx);
        }
    }

    /// Queue an exec run the state machine asked for; it starts at the next wake-up with room.
    fn queue_exec(&mut self, key: ProbeKey, ctx: &mut Context<Self>) {
        let Some(generation) = self.probes.get(&key).map(|w| w.generation) else {
            return;
        };
        self.exec_ready.push_back((generation, key));
        if self.exec_at.is_none() {
            self.exec_at = Some(self.on_grid(Instant::now(), EXEC_GRAIN));
            self.arm(ctx);
        }
    }

    /// Is `key` an exec probe?
    fn is_exec(&self, key: &ProbeKey) -> bool {
        self.probes.get(key).is_some_and(|w| is_exec(&w.action))
    }

    /// Do what the state machine said next: nothing, run now, or queue a run.
    fn follow(&mut self, key: ProbeKey, next: Next, ctx: &mut Context<Self>) {
        match next {
            Next::Nothing => {}
            // Exec probes wait their turn, so that many due at once are spread.
            Next::Run if self.is_exec(&key) => self.queue_exec(key, ctx),
            Next::Run => self.start_run(key, ctx),
            Next::DueAt(at) => {
                let Some(worker) = self.probes.get(&key) else { return };
                let delay = at.saturating_sub(worker.since_start(Instant::now()));
                self.schedule(key, delay, ctx);
            }
        }
    }

    /// A queued run came due.
    fn tick(&mut self, key: ProbeKey, generation: u64, ctx: &mut Context<Self>) {
        let Some(worker) = self.probes.get_mut(&key) else {
            return;
        };
        if worker.generation != generation {
            return;
        }
        let span = worker.span();
        let _entered = span.enter();
        let now = worker.since_start(Instant::now());
        let next = worker.state.on(Input::Due { now }).next;
        self.follow(key, next, ctx);
    }

    /// Run the probe's handler; its outcome comes back to [`Self::record`].
    fn start_run(&mut self, key: ProbeKey, ctx: &mut Context<Self>) {
        let Some(worker) = self.probes.get(&key) else { return };
        let generation = worker.generation;
        let target = Target {
            runtime: self.runtime.clone(),
            container_id: worker.container_id.clone(),
            pod_ip: worker.pod_ip.clone(),
            timeout: worker.state.config().timeout,
        };
        let action = Arc::clone(&worker.action);
        let exec = is_exec(&action);
        self.exec_running += usize::from(exec);
        let span = worker.span();
        tracing::trace!(parent: &span, handler = action.name(), "probe run started");
        let began = Instant::now();
        let future = async move { dockerlet_probe::run(&action, &target, Caller::Probe).await }.instrument(span);
        ctx.spawn(future.into_actor(self).map(move |outcome, act, ctx| {
            if exec {
                act.exec_finished(ctx);
            }
            if let Some(worker) = act.probes.get(&key).filter(|w| w.generation == generation) {
                // kubelet counts a warning as a success.
                let counted = match outcome {
                    Outcome::Success(_) | Outcome::Warning(_) => ProbeOutcome::Successful,
                    Outcome::Failure(_) => ProbeOutcome::Failed,
                };
                worker.series.observe(counted, began.elapsed().as_secs_f64());
            }
            act.record(key, generation, outcome, ctx);
        }));
    }

    /// A run finished: feed the state machine, send the event and the result change it calls for.
    fn record(&mut self, key: ProbeKey, generation: u64, outcome: Outcome, ctx: &mut Context<Self>) {
        let Some(worker) = self.probes.get_mut(&key) else {
            return;
        };
        if worker.generation != generation {
            return;
        }
        let span = worker.span();
        let _entered = span.enter();
        worker.runs += 1;
        let now = worker.since_start(Instant::now());
        let verdict = run_outcome(&outcome);
        let effect = worker.state.on(Input::Finished { now, outcome: verdict });
        tracing::debug!(outcome = ?verdict, "probe run finished");
        if let Some((reason, message)) = worker.remember(key.kind, outcome) {
            self.send_event(&key, reason, message);
        }
        self.apply(key, effect, ctx);
    }

    /// Publish a changed result, open the startup gate, queue what comes next.
    fn apply(&mut self, key: ProbeKey, effect: Effect, ctx: &mut Context<Self>) {
        let Some(worker) = self.probes.get(&key) else { return };
        if let Some(result) = effect.changed {
            tracing::info!(result = ?result, on_hold = worker.state.on_hold(), "probe result changed");
            self.links.results.do_send(ProbeResultChanged {
                pod_uid: key.pod_uid.clone(),
                container_name: key.container.clone(),
                container_id: worker.container_id.clone(),
                kind: key.kind,
                result,
            });
        }
        if effect.started {
            let container_id = worker.container_id.clone();
            self.startup_succeeded(&key, &container_id, ctx);
        }
        self.follow(key, effect.next, ctx);
    }

    /// The startup probe `startup` of `container_id` succeeded: its liveness and readiness
    /// probes may run.
    fn startup_succeeded(&mut self, startup: &ProbeKey, container_id: &ContainerId, ctx: &mut Context<Self>) {
        for kind in [ProbeKind::Liveness, ProbeKind::Readiness] {
            let key = ProbeKey {
                kind,
                ..startup.clone()
            };
            let Some(worker) = self.probes.get_mut(&key) else {
                continue;
            };
            if worker.container_id == *container_id {
                let _entered = worker.span().entered();
                tracing::debug!("startup probe succeeded: this probe may run");
                let now = worker.since_start(Instant::now());
                let next = worker.state.on(Input::StartupSucceeded { now }).next;
                self.follow(key, next, ctx);
            }
        }
    }

    /// A failed or warning run's event: kubelet records `Unhealthy` and `ProbeWarning` as
    /// Warnings (`pkg/kubelet/prober/prober.go`).
    fn send_event(&self, key: &ProbeKey, reason: &str, message: String) {
        let Some(worker) = self.probes.get(key) else { return };
        let event = RecordEvent::pod(&worker.pod, EventType::Warning, reason, message);
        self.links
            .events
            .do_send(event.in_container(&key.container, worker.field_path.clone()));
    }

    /// Does the startup probe of this instance of `key`'s container still have to succeed?
    fn startup_pending(&self, key: &ProbeKey, container_id: &ContainerId) -> bool {
        let startup = ProbeKey {
            kind: ProbeKind::Startup,
            ..key.clone()
        };
        self.probes
            .get(&startup)
            .is_some_and(|s| s.container_id == *container_id && s.state.result() != ProbeResult::Success)
    }

    /// Watch the probes of one running container; the probes it has.
    fn watch_container(&mut self, instance: &Instance, ctx: &mut Context<Self>) -> Vec<ProbeKey> {
        let mut keys = Vec::new();
        for kind in [ProbeKind::Startup, ProbeKind::Liveness, ProbeKind::Readiness] {
            let Some(probe) = probe_of(instance.container, kind) else {
                continue;
            };
            let key = ProbeKey {
                pod_uid: instance.pod.uid.clone(),
                container: instance.target.container_name.clone(),
                kind,
            };
            keys.push(key.clone());
            match self.probes.get_mut(&key) {
                Some(existing) if existing.container_id == instance.target.container_id => {
                    existing.pod_ip.clone_from(&instance.msg.pod_ip);
                }
                _ => self.start_probe(key, probe, instance, ctx),
            }
        }
        keys
    }

    /// Start a probe of a new container instance (replacing the older instance's).
    fn start_probe(&mut self, key: ProbeKey, probe: &Probe, instance: &Instance, ctx: &mut Context<Self>) {
        let _entered = probe_span(&key, instance.pod).entered();
        let must_be_one = key.kind != ProbeKind::Readiness;
        // Invalid probes never get this far (the container is refused), but never panic.
        let action =
            match dockerlet_pod::action::probe_action(field_of(key.kind), probe, instance.container, must_be_one) {
                Ok(action) => action,
                Err(error) => {
                    tracing::warn!(%error, "probe not started: invalid handler");
                    return;
                }
            };
        let waits_for_startup =
            key.kind != ProbeKind::Startup && self.startup_pending(&key, &instance.target.container_id);
        self.next_generation += 1;
        let series = self.metrics.probe_series(
            kind_label(key.kind),
            &key.container,
            &instance.pod.name,
            &instance.pod.namespace,
            &key.pod_uid.0,
        );
        let (worker, next) = ProbeWorker::start(
            &key,
            probe,
            action,
            instance,
            waits_for_startup,
            self.next_generation,
            series,
        );
        self.probes.insert(key.clone(), worker);
        self.follow(key, next, ctx);
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
        let _entered = msg.id.span().entered();
        let containers: HashMap<&str, &Container> = msg
            .pod
            .spec
            .iter()
            .flat_map(|s| {
                let sidecars = s.init_containers.iter().flatten().filter(|c| is_sidecar(c));
                s.containers.iter().chain(sidecars)
            })
            .map(|c| (c.name.as_str(), c))
            .collect();
        let mut wanted = Vec::new();
        for target in &msg.running {
            if let Some(container) = containers.get(target.container_name.as_str()) {
                let instance = Instance {
                    msg: &msg,
                    pod: &msg.id,
                    container,
                    target,
                };
                wanted.extend(self.watch_container(&instance, ctx));
            }
        }
        self.probes
            .retain(|key, _| key.pod_uid != msg.id.uid || wanted.contains(key));
    }
}

impl Handler<ForgetPod> for ProbeActor {
    type Result = ();

    /// Stop every probe of a pod (but its readiness probes, with `keep_readiness`).
    fn handle(&mut self, msg: ForgetPod, _: &mut Self::Context) {
        self.handled += 1;
        let pod = self
            .probes
            .iter()
            .find(|(key, _)| key.pod_uid == msg.pod_uid)
            .map(|(_, worker)| worker.pod.clone());
        let span = pod.map_or_else(|| tracing::info_span!("pod", pod.uid = %msg.pod_uid), |p| p.span());
        let _entered = span.entered();
        let before = self.probes.len();
        let metrics = self.metrics.clone();
        self.probes.retain(|key, worker| {
            let keep = key.pod_uid != msg.pod_uid || (msg.keep_readiness && key.kind == ProbeKind::Readiness);
            if !keep {
                metrics.forget_probe(&worker.series);
            }
            keep
        });
        tracing::debug!(probes = before - self.probes.len(), "probes stopped");
    }
}

impl Inspect for ProbeActor {
    const KIND: &'static str = "ProbeActor";
    const NAME: &'static str = "probes";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn detail(&self) -> serde_json::Value {
        let probes: Vec<ProbeDebug> = self.probes.iter().map(|(key, w)| w.view(key)).collect();
        json!({ "probes": probes })
    }

    fn view(&self) -> Option<DebugView> {
        let probes: Vec<ProbeDebug> = self.probes.iter().map(|(key, w)| w.view(key)).collect();
        Some(DebugView::Probes(probes))
    }
}

crate::supervised!(ProbeActor);

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_runtime::fake::FakeRuntime;
    use k8s_openapi::api::core::v1::{ExecAction, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    struct Sink;
    impl Actor for Sink {
        type Context = Context<Self>;
    }
    impl Handler<ProbeResultChanged> for Sink {
        type Result = ();
        fn handle(&mut self, _: ProbeResultChanged, _: &mut Context<Self>) {}
    }
    impl Handler<RecordEvent> for Sink {
        type Result = ();
        fn handle(&mut self, _: RecordEvent, _: &mut Context<Self>) {}
    }

    fn watch(i: usize) -> WatchContainers {
        let container = Container {
            name: "app".into(),
            liveness_probe: Some(Probe {
                exec: Some(ExecAction {
                    command: Some(vec!["true".into()]),
                }),
                period_seconds: Some(1),
                ..Default::default()
            }),
            ..Default::default()
        };
        let pod = k8s_openapi::api::core::v1::Pod {
            metadata: ObjectMeta {
                name: Some(format!("p{i}")),
                uid: Some(format!("u{i}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![container],
                ..Default::default()
            }),
            status: None,
        };
        WatchContainers {
            id: PodRef::of(&pod),
            pod: Arc::new(pod),
            pod_ip: None,
            running: vec![ProbeTarget {
                container_name: "app".into(),
                container_id: ContainerId(format!("c{i}")),
                started_at: None,
            }],
        }
    }

    /// A ProbeActor on `runtime` watching `pods` pods with one exec liveness probe each.
    fn watching(runtime: &FakeRuntime, pods: usize) -> Addr<ProbeActor> {
        let sink = Sink.start();
        let links = ProbeLinks {
            results: sink.clone().recipient(),
            events: sink.recipient().into(),
        };
        let prober = ProbeActor::new(Arc::new(runtime.clone()), links).start();
        for i in 0..pods {
            prober.do_send(watch(i));
        }
        prober
    }

    /// However many exec probes are due, no more than [`EXEC_IN_FLIGHT`] run at once; the rest
    /// wait and run when a slot frees, and none fails for waiting.
    #[actix::test]
    async fn exec_probes_beyond_the_limit_wait_for_a_slot() {
        let runtime = FakeRuntime::default();
        runtime.state.lock().unwrap().exec_delay = Duration::from_millis(100);
        let _prober = watching(&runtime, 12);
        tokio::time::sleep(Duration::from_millis(900)).await;
        let state = runtime.state.lock().unwrap();
        assert_eq!(state.exec_running.1, EXEC_IN_FLIGHT, "most execs at once");
        assert!(
            state.exec_times.len() >= 12,
            "every probe ran: {}",
            state.exec_times.len()
        );
    }

    /// Ten exec probes due at the same instant start at most three a wake-up, a grain apart —
    /// at their first run and at every period after.
    #[actix::test]
    async fn exec_probes_due_together_are_spread() {
        let runtime = FakeRuntime::default();
        let _prober = watching(&runtime, 10);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let times = runtime.state.lock().unwrap().exec_times.clone();
        assert_eq!(times.len(), 20, "two runs of each of ten probes");
        // Runs of one wake-up are microseconds apart; wake-ups are a grain (20 ms) apart.
        let mut bursts = vec![1];
        for pair in times.windows(2) {
            if pair[1].duration_since(pair[0]) > Duration::from_millis(10) {
                bursts.push(1);
            } else {
                *bursts.last_mut().unwrap() += 1;
            }
        }
        assert!(bursts.iter().all(|b| *b <= EXEC_RUNS_PER_GRAIN), "{bursts:?}");
        assert_eq!(bursts.len(), 8, "{bursts:?}");
    }
}
