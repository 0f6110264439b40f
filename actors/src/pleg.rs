//! PlegActor: the Pod Lifecycle Event Generator (kubelet's `pkg/kubelet/pleg/generic.go`). Keeps
//! the [`PodCache`] current and tells the Supervisor which pods changed.
//!
//! | Message / trigger      | From       | Effect                                          |
//! |------------------------|------------|-------------------------------------------------|
//! | every second           | self       | relist (the safety net): every `relist_period` while Docker's events flow, every second otherwise; the running gauges |
//! | Docker `oom` event     | Docker     | remember it for that container's `die`            |
//! | Docker `die` event     | Docker     | the container is exited at once (exit code and time from the event), then one inspect refines it |
//! | Docker `destroy` event | Docker     | drop that container from the cache               |
//! | a cache reader waits   | PodCache   | relist now (a worker that could not observe its last action) |
//! | GetHealth              | Supervisor | healthy unless no relist succeeded for 3 min or the last one failed |
//! | GetActorState          | Supervisor | debug snapshot (relist time and duration, cache counts) |
//! | Panic                  | Supervisor | test-only fault hook                             |
//!
//! Sends `PodLifecycleEvent` and `RelistCompleted` to the Supervisor. A relist lists every
//! container of the node (one cheap `GET /containers/json`), inspects only those whose state
//! differs from the cache or that the cache does not know, and drops what is gone. Every state
//! change it or an event makes becomes a lifecycle event: running → ContainerStarted, exited →
//! ContainerDied, gone → ContainerRemoved (after ContainerDied if it was not exited), anything
//! else → ContainerChanged. What a PodWorker writes to the cache itself (after its own actions)
//! makes no event: the worker already knows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use dockerlet_messages::debug::{DebugView, GetHealth, Health, HealthCell, PlegDebug};
use dockerlet_messages::pleg::{ContainerOomKilled, LifecycleEventKind, PodLifecycleEvent, RelistCompleted};
use dockerlet_messages::runtime::{ContainerListing, ContainerRole, ObservedContainer, RuntimeState};
use dockerlet_messages::ContainerId;
use dockerlet_metrics::{ContainerStateValue, Metrics};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use dockerlet_runtime::{ContainerRuntime, RuntimeError, RuntimeEvent};

use crate::inspect::Inspect;
use crate::pod_cache::{refresh, Change, PodCache, Refreshed};

/// Wait before re-subscribing to Docker's events after the stream ended.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(1);
/// Inspects a relist runs at once (a restarted agent inspects every container once).
const RELIST_INSPECTS: usize = 8;

/// Relist period without Docker's events (kubelet `genericPlegRelistPeriod`), and the tick.
pub const RELIST_PERIOD: Duration = Duration::from_secs(1);
/// Relist period while Docker's event stream is up. Deaths and removals arrive as events at
/// once, so the relist is only the safety net for an event lost (kubelet's Evented PLEG, which
/// takes its events from the CRI, relists every 300 s for the same reason). Listing every
/// container each second cost the agent about 0.003 core and dockerd more at 110 pods.
pub const EVENTED_RELIST_PERIOD: Duration = Duration::from_secs(10);
/// PLEG is unhealthy when no relist succeeded for this long (`genericPlegRelistThreshold`).
pub use dockerlet_messages::debug::RELIST_THRESHOLD;

/// Where PLEG sends what it finds.
#[derive(Clone)]
pub struct PlegLinks {
    /// Per-container lifecycle events.
    pub events: Recipient<PodLifecycleEvent>,
    /// End of every relist.
    pub relisted: Recipient<RelistCompleted>,
    /// Where each relist's outcome is published for health checks.
    pub health: HealthCell,
}

/// The PLEG actor.
pub struct PlegActor {
    /// Docker.
    runtime: Arc<dyn ContainerRuntime>,
    /// Every container's last observed state; outlives this actor.
    cache: Arc<PodCache>,
    /// Only containers labelled with this node are seen.
    node_name: String,
    /// Where events go.
    links: PlegLinks,
    /// Relist period while Docker's events flow.
    period: Duration,
    /// Docker's event stream is subscribed and has not failed since.
    events_up: bool,
    /// A relist is running.
    relisting: bool,
    /// A relist was asked for while one ran: run another when it ends.
    relist_again: bool,
    /// When the last relist started, on tokio's clock (the tick's; tests pause it).
    relist_started: Option<tokio::time::Instant>,
    /// Last successful relist: when, and wall-clock time for the debug page.
    last_relist: Option<(Instant, Timestamp)>,
    /// How long the last relist took.
    last_duration: Option<Duration>,
    /// Relists completed.
    relists: u64,
    /// Containers inspected (by relists and for events).
    inspects: u64,
    /// Docker events received.
    docker_events: u64,
    /// Error of the last relist, cleared by a successful one.
    last_error: Option<String>,
    /// Messages handled.
    handled: u64,
    /// Relist durations and intervals, running pods and containers.
    metrics: Arc<Metrics>,
    /// When the last relist began (`kubelet_pleg_relist_interval_seconds`).
    last_began: Option<Instant>,
}

/// What one relist found.
struct Relisted {
    /// When the listing was asked for.
    began: Instant,
    /// Changes it made to the cache.
    changes: Vec<Change>,
    /// Containers inspected.
    inspected: u64,
}

impl PlegActor {
    /// A PLEG for `node_name` relisting into `cache` every `period` while Docker's events flow,
    /// every [`RELIST_PERIOD`] (or `period`, if shorter) otherwise.
    pub fn new(
        runtime: Arc<dyn ContainerRuntime>,
        cache: Arc<PodCache>,
        node_name: String,
        links: PlegLinks,
        period: Duration,
    ) -> Self {
        PlegActor {
            runtime,
            cache,
            node_name,
            links,
            period,
            events_up: false,
            relisting: false,
            relist_again: false,
            relist_started: None,
            last_relist: None,
            last_duration: None,
            relists: 0,
            inspects: 0,
            docker_events: 0,
            last_error: None,
            handled: 0,
            metrics: Arc::default(),
            last_began: None,
        }
    }

    /// Report relists and the running pods and containers in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// kubelet's `kubelet_running_pods` (pods with a running sandbox) and
    /// `kubelet_running_containers{container_state}` (app and init containers), from the cache.
    fn count_running(&self) {
        let (mut pods, mut created, mut running, mut exited, mut unknown) = (0, 0, 0, 0, 0);
        // Counted in place: copying every container each second showed in P5's profile.
        self.cache.for_each_container(|c| {
            if c.role == ContainerRole::Sandbox {
                pods += i64::from(c.state == RuntimeState::Running);
                return;
            }
            match c.state {
                RuntimeState::Created => created += 1,
                RuntimeState::Running => running += 1,
                RuntimeState::Exited => exited += 1,
                RuntimeState::Unknown => unknown += 1,
            }
        });
        let m = &self.metrics;
        m.running_pods.set(pods);
        m.set_containers(ContainerStateValue::created, created);
        m.set_containers(ContainerStateValue::running, running);
        m.set_containers(ContainerStateValue::exited, exited);
        m.set_containers(ContainerStateValue::unknown, unknown);
    }

    /// The tick: relist when one is due, otherwise bring the running gauges up to date (events
    /// change the cache between relists).
    fn tick(&mut self, ctx: &mut Context<Self>) {
        let (tick, period) = (self.tick_period(), self.relist_period());
        // Half a tick of slack: a relist due just after this tick runs now, not a tick late.
        let due = self
            .relist_started
            .is_none_or(|began| began.elapsed() + tick / 2 >= period);
        if due {
            self.relist(ctx);
        } else {
            self.count_running();
        }
    }

    fn tick_period(&self) -> Duration {
        RELIST_PERIOD.min(self.period)
    }

    /// The relist period now: `period` while Docker's events flow, the tick's otherwise.
    fn relist_period(&self) -> Duration {
        if self.events_up {
            self.period
        } else {
            self.tick_period()
        }
    }

    fn relist(&mut self, ctx: &mut Context<Self>) {
        if self.relisting {
            self.relist_again = true;
            return;
        }
        self.relisting = true;
        self.relist_started = Some(tokio::time::Instant::now());
        let (runtime, cache, node) = (self.runtime.clone(), self.cache.clone(), self.node_name.clone());
        let future = relist(runtime, cache, node);
        ctx.spawn(future.into_actor(self).map(move |result, act, ctx| {
            act.relisting = false;
            act.relist_done(result);
            if std::mem::take(&mut act.relist_again) {
                act.relist(ctx);
            }
        }));
    }

    fn relist_done(&mut self, result: Result<Relisted, RuntimeError>) {
        let relisted = match result {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "PLEG relist failed");
                self.last_error = Some(e.to_string());
                self.links.health.failed(e.to_string());
                return;
            }
        };
        self.inspects += relisted.inspected;
        self.emit(relisted.changes);
        self.links.relisted.do_send(RelistCompleted {
            pods: self.cache.pods(),
            runtime_back: self.last_error.is_some(),
        });
        self.last_duration = Some(relisted.began.elapsed());
        let m = &self.metrics;
        m.pleg_relist_duration.observe(relisted.began.elapsed().as_secs_f64());
        if let Some(before) = self.last_began.replace(relisted.began) {
            m.pleg_relist_interval
                .observe(relisted.began.saturating_duration_since(before).as_secs_f64());
        }
        m.pleg_last_seen.set(Timestamp::now().as_millisecond() as f64 / 1000.0);
        self.count_running();
        self.last_relist = Some((Instant::now(), Timestamp::now()));
        self.last_error = None;
        self.links.health.relisted();
        self.relists += 1;
    }

    /// Tell the Supervisor of every state change.
    fn emit(&self, changes: Vec<Change>) {
        for change in changes {
            for event in lifecycle_events(&change) {
                tracing::debug!(pod.uid = %event.pod_uid, container = %event.container_name, kind = ?event.kind, "pod lifecycle event");
                self.links.events.do_send(event);
            }
        }
    }

    fn subscribe(&mut self, ctx: &mut Context<Self>) {
        ctx.add_stream(self.runtime.events(&self.node_name));
        self.events_up = true;
    }

    /// The OOM killer struck a container. Usually before its `die`, which then carries it; but
    /// Docker can send the `oom` after the `die` (and answer an inspect between them with
    /// `OOMKilled: false`), so a container already known exited is marked at once.
    fn oom(&mut self, id: ContainerId) {
        match self.cache.container(&id) {
            Some(c) if c.state == RuntimeState::Exited => {
                if c.oom_killed {
                    return;
                }
                let marked = ObservedContainer { oom_killed: true, ..c };
                let change = self.cache.put(marked.clone(), Instant::now());
                self.emit(vec![change.unwrap_or_else(|| Change::unchanged(&marked))]);
            }
            // The write that makes it exited marks it, whichever it is (its `die`, a relist,
            // a worker's inspect).
            _ => self.cache.oom_pending(id),
        }
    }

    /// A container died. If the cache knows it running, it is exited at once with what the
    /// event says (exit code, time, and an `oom` before it) — the worker can restart it without
    /// waiting for Docker's exit handling, which an inspect waits for (6–10 ms) — and one inspect
    /// then refines the entry (Docker's own finish time, error). Already known exited: nothing.
    fn died(&mut self, event: RuntimeEvent, ctx: &mut Context<Self>) {
        let id = event.id;
        let provisional = match self.cache.container(&id) {
            Some(c) if c.state == RuntimeState::Exited => return,
            Some(c) => {
                let exited = ObservedContainer {
                    state: RuntimeState::Exited,
                    exit_code: event.exit_code.unwrap_or(c.exit_code),
                    finished_at: event.time.map(Time).or_else(|| Some(Time(Timestamp::now()))),
                    details_pending: true,
                    ..c
                };
                let change = self.cache.put(exited.clone(), Instant::now());
                self.emit(change.into_iter().collect());
                Some(exited)
            }
            None => None,
        };
        self.inspects += 1;
        let (runtime, cache) = (self.runtime.clone(), self.cache.clone());
        let future = async move {
            let Refreshed { observed, change } = refresh(&*runtime, &cache, &id).await?;
            // Nothing but details changed: still tell the worker (OOMKilled, exit time).
            let refined = observed.filter(|o| provisional.as_ref().is_some_and(|p| p != o));
            Ok::<_, RuntimeError>(change.or_else(|| refined.map(|o| Change::unchanged(&o))))
        };
        ctx.spawn(future.into_actor(self).map(|result, act, _| match result {
            Ok(change) => act.emit(change.into_iter().collect()),
            // The next relist inspects it.
            Err(e) => tracing::debug!(error = %e, "inspect after a die event failed"),
        }));
    }
}

/// List, inspect what changed, drop what is gone; then the cache is fresh as of the listing.
async fn relist(
    runtime: Arc<dyn ContainerRuntime>,
    cache: Arc<PodCache>,
    node: String,
) -> Result<Relisted, RuntimeError> {
    let began = Instant::now();
    let listing: Vec<ContainerListing> = runtime.list_node_containers(&node).await?;
    let plan = cache.plan(&listing, began);
    let mut changes: Vec<Change> = plan.gone.iter().filter_map(|id| cache.remove(id, began)).collect();
    let inspected = plan.inspect.len() as u64;
    let results: Vec<Result<Option<Change>, RuntimeError>> = futures::stream::iter(plan.inspect)
        .map(|id| observe(&*runtime, &cache, id))
        .buffer_unordered(RELIST_INSPECTS)
        .collect()
        .await;
    let mut failed = None;
    for result in results {
        match result {
            Ok(change) => changes.extend(change),
            Err(e) => failed = Some(e),
        }
    }
    // kubelet: a pod whose inspect failed is inspected again at the next relist, and this one
    // does not count as complete.
    if let Some(e) = failed {
        return Err(e);
    }
    cache.relisted(began);
    Ok(Relisted {
        began,
        changes,
        inspected,
    })
}

/// Inspect one container into the cache; the change it made, if any.
async fn observe(
    runtime: &dyn ContainerRuntime,
    cache: &PodCache,
    id: ContainerId,
) -> Result<Option<Change>, RuntimeError> {
    Ok(refresh(runtime, cache, &id).await?.change)
}

/// The lifecycle events of one state change (kubelet's `generateEvents`).
pub fn lifecycle_events(change: &Change) -> Vec<PodLifecycleEvent> {
    let event = |kind| PodLifecycleEvent {
        pod_uid: change.pod_uid.clone(),
        container_id: change.id.clone(),
        container_name: change.name.clone(),
        kind,
    };
    match change.after {
        Some(RuntimeState::Running) => vec![event(LifecycleEventKind::ContainerStarted)],
        Some(RuntimeState::Exited) => vec![event(LifecycleEventKind::ContainerDied)],
        Some(RuntimeState::Created | RuntimeState::Unknown) => vec![event(LifecycleEventKind::ContainerChanged)],
        None if change.before == Some(RuntimeState::Exited) => vec![event(LifecycleEventKind::ContainerRemoved)],
        None => vec![
            event(LifecycleEventKind::ContainerDied),
            event(LifecycleEventKind::ContainerRemoved),
        ],
    }
}

impl Actor for PlegActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.subscribe(ctx);
        self.relist(ctx);
        ctx.run_interval(self.tick_period(), |act, ctx| act.tick(ctx));
        let wanted = futures::stream::unfold(self.cache.clone(), |cache| async move {
            cache.relist_wanted().await;
            Some((RelistWanted, cache))
        });
        ctx.add_stream(wanted);
    }
}

/// A pod cache reader waits for a relist newer than its last action.
struct RelistWanted;

impl StreamHandler<RelistWanted> for PlegActor {
    fn handle(&mut self, _: RelistWanted, ctx: &mut Self::Context) {
        self.relist(ctx);
    }
}

impl StreamHandler<Result<RuntimeEvent, RuntimeError>> for PlegActor {
    /// A Docker event: a death is inspected at once, a removal dropped from the cache.
    fn handle(&mut self, event: Result<RuntimeEvent, RuntimeError>, ctx: &mut Self::Context) {
        match event {
            Ok(e) => {
                self.docker_events += 1;
                tracing::trace!(container = %e.id, action = %e.action, "docker event");
                match e.action.as_str() {
                    "oom" => self.oom(e.id),
                    "die" => self.died(e, ctx),
                    "destroy" => {
                        let change = self.cache.remove(&e.id, Instant::now());
                        self.emit(change.into_iter().collect());
                    }
                    _ => {}
                }
            }
            Err(e) => {
                // Events may be lost from here on: relist every second until the stream is back.
                tracing::debug!(error = %e, "docker event stream error");
                self.events_up = false;
            }
        }
    }

    /// The stream ends when Docker restarts: subscribe again (the default would stop the actor),
    /// and relist at once for what happened in between.
    fn finished(&mut self, ctx: &mut Self::Context) {
        self.events_up = false;
        ctx.run_later(RESUBSCRIBE_AFTER, |act, ctx| {
            act.subscribe(ctx);
            act.relist(ctx);
        });
    }
}

impl Handler<ContainerOomKilled> for PlegActor {
    type Result = ();

    /// The kernel log names the container's cgroup in an OOM kill: as Docker's `oom` event.
    fn handle(&mut self, msg: ContainerOomKilled, _: &mut Self::Context) {
        self.oom(msg.id);
    }
}

impl Handler<GetHealth> for PlegActor {
    type Result = MessageResult<GetHealth>;

    /// kubelet's PLEG Healthy(), plus "the runtime answered the last relist".
    fn handle(&mut self, _: GetHealth, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        MessageResult(self.health())
    }
}

impl PlegActor {
    /// kubelet's PLEG Healthy(), plus "the runtime answered the last relist".
    fn health(&self) -> Health {
        self.links.health.health()
    }
}

impl Inspect for PlegActor {
    const KIND: &'static str = "PlegActor";
    const NAME: &'static str = "pleg";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.clone()
    }

    fn detail(&self) -> serde_json::Value {
        json!({
            "last_relist": self.last_relist.map(|(_, t)| t.to_string()),
            "last_relist_duration_ms": self.last_duration.map(|d| d.as_secs_f64() * 1000.0),
            "relists": self.relists,
            "relist_period_s": self.relist_period().as_secs_f64(),
            "docker_events_up": self.events_up,
            "inspects": self.inspects,
            "docker_events": self.docker_events,
            "cache": self.cache.summary(),
        })
    }

    fn view(&self) -> Option<DebugView> {
        Some(DebugView::Pleg(PlegDebug {
            last_relist: self.last_relist.map(|(_, t)| t.to_string()),
            last_relist_duration_ms: self.last_duration.map(|d| d.as_secs_f64() * 1000.0),
            relists: self.relists,
            health: self.health(),
        }))
    }
}

crate::supervised!(PlegActor);

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_messages::PodUid;
    use dockerlet_runtime::fake::{Call, FakeRuntime};
    use dockerlet_runtime::{Containers, CreateSpec};

    fn change(before: Option<RuntimeState>, after: Option<RuntimeState>) -> Change {
        Change {
            pod_uid: PodUid("p".into()),
            id: ContainerId("c".into()),
            name: "app".into(),
            before,
            after,
        }
    }

    fn kinds(change: Change) -> Vec<LifecycleEventKind> {
        lifecycle_events(&change).into_iter().map(|e| e.kind).collect()
    }

    /// State changes map to kubelet's lifecycle events.
    #[test]
    fn changes_become_kubelet_events() {
        use LifecycleEventKind::*;
        use RuntimeState::*;
        assert_eq!(kinds(change(None, Some(Running))), vec![ContainerStarted]);
        assert_eq!(kinds(change(Some(Running), Some(Exited))), vec![ContainerDied]);
        assert_eq!(kinds(change(None, Some(Created))), vec![ContainerChanged]);
        assert_eq!(kinds(change(Some(Exited), None)), vec![ContainerRemoved]);
        assert_eq!(
            kinds(change(Some(Running), None)),
            vec![ContainerDied, ContainerRemoved]
        );
    }

    /// Collects lifecycle events.
    #[derive(Default)]
    struct Sink(Vec<PodLifecycleEvent>);
    impl Actor for Sink {
        type Context = Context<Self>;
    }
    impl Handler<PodLifecycleEvent> for Sink {
        type Result = ();
        fn handle(&mut self, e: PodLifecycleEvent, _: &mut Context<Self>) {
            self.0.push(e);
        }
    }
    impl Handler<RelistCompleted> for Sink {
        type Result = ();
        fn handle(&mut self, _: RelistCompleted, _: &mut Context<Self>) {}
    }
    struct Take;
    impl Message for Take {
        type Result = Vec<(String, LifecycleEventKind)>;
    }
    impl Handler<Take> for Sink {
        type Result = MessageResult<Take>;
        fn handle(&mut self, _: Take, _: &mut Context<Self>) -> Self::Result {
            MessageResult(self.0.drain(..).map(|e| (e.container_id.0, e.kind)).collect())
        }
    }

    fn start(runtime: &FakeRuntime, cache: &Arc<PodCache>, period: Duration) -> (Addr<PlegActor>, Addr<Sink>) {
        let sink = Sink::default().start();
        let links = PlegLinks {
            events: sink.clone().recipient(),
            relisted: sink.clone().recipient(),
            health: HealthCell::default(),
        };
        let pleg = PlegActor::new(Arc::new(runtime.clone()), cache.clone(), "n1".into(), links, period).start();
        (pleg, sink)
    }

    fn spec(name: &str) -> CreateSpec {
        let labels = [
            (dockerlet_pod::labels::NODE, "n1"),
            (dockerlet_pod::labels::POD_UID, "p"),
            (dockerlet_pod::labels::CONTAINER_NAME, name),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        CreateSpec {
            name: format!("k8s_{name}"),
            labels,
            ..Default::default()
        }
    }

    /// A relist inspects only what changed: a steady node costs one list per relist and no
    /// inspect; a new container is inspected once and reported; a death too; a removal needs no
    /// inspect.
    #[actix::test]
    async fn relists_inspect_only_what_changed() {
        tokio::time::pause();
        let runtime = FakeRuntime::default();
        let id = runtime.create_container(spec("app")).await.unwrap();
        runtime.start_container(&id).await.unwrap();
        runtime.clear_calls();
        let cache = Arc::new(PodCache::default());
        let (pleg, sink) = start(&runtime, &cache, Duration::from_millis(100));
        tokio::time::sleep(Duration::from_millis(350)).await;
        let inspects = |r: &FakeRuntime| r.calls().iter().filter(|c| matches!(c, Call::Inspect(_))).count();
        assert_eq!(inspects(&runtime), 1, "{:?}", runtime.calls());
        assert!(runtime.calls().iter().filter(|c| **c == Call::List).count() >= 3);
        assert_eq!(
            sink.send(Take).await.unwrap(),
            vec![(id.0.clone(), LifecycleEventKind::ContainerStarted)]
        );
        runtime.exit(&id.0, 1);
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(inspects(&runtime), 2);
        assert_eq!(
            sink.send(Take).await.unwrap(),
            vec![(id.0.clone(), LifecycleEventKind::ContainerDied)]
        );
        runtime.remove_container(&id).await.unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(inspects(&runtime), 2);
        assert_eq!(
            sink.send(Take).await.unwrap(),
            vec![(id.0.clone(), LifecycleEventKind::ContainerRemoved)]
        );
        assert!(cache.pods().is_empty());
        drop(pleg);
    }

    /// While Docker's events flow the relist is the safety net: one per period, not one per
    /// tick; a reader waiting for a state newer than its last action gets one at once.
    #[actix::test]
    async fn with_events_flowing_relists_are_a_safety_net() {
        tokio::time::pause();
        let runtime = FakeRuntime::default();
        let cache = Arc::new(PodCache::default());
        let (_pleg, _sink) = start(&runtime, &cache, Duration::from_secs(10));
        let lists = |r: &FakeRuntime| r.calls().iter().filter(|c| **c == Call::List).count();
        tokio::time::sleep(Duration::from_millis(5500)).await;
        assert_eq!(
            lists(&runtime),
            1,
            "only the first relist in 5.5 s: {:?}",
            runtime.calls()
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(lists(&runtime), 2, "the next one 10 s after the first");
        let since = Instant::now();
        let got = cache
            .get_newer_than(&PodUid("p".into()), Some(since), Duration::from_secs(5))
            .await;
        assert!(got.is_ok(), "{got:?}");
        assert_eq!(lists(&runtime), 3, "the waiting reader's relist");
    }

    /// Each relist is timed and spaced (`kubelet_pleg_relist_*`), marks PLEG last seen, and
    /// recounts pods with a running sandbox and containers by state from the cache.
    #[actix::test]
    async fn relists_report_their_metrics_and_the_running_pods() {
        tokio::time::pause();
        let runtime = FakeRuntime::default();
        let mut sandbox = spec("POD");
        sandbox
            .labels
            .insert(dockerlet_pod::labels::DOCKER_TYPE.into(), "podsandbox".into());
        let sandbox = runtime.create_container(sandbox).await.unwrap();
        runtime.start_container(&sandbox).await.unwrap();
        let app = runtime.create_container(spec("app")).await.unwrap();
        runtime.start_container(&app).await.unwrap();
        let cache = Arc::new(PodCache::default());
        let metrics = Arc::new(Metrics::default());
        let sink = Sink::default().start();
        let links = PlegLinks {
            events: sink.clone().recipient(),
            relisted: sink.clone().recipient(),
            health: HealthCell::default(),
        };
        let period = Duration::from_millis(100);
        let pleg = PlegActor::new(Arc::new(runtime.clone()), cache.clone(), "n1".into(), links, period)
            .with_metrics(metrics.clone())
            .start();
        tokio::time::sleep(Duration::from_millis(350)).await;
        let running = |state| {
            metrics
                .running_containers
                .get_or_create(&dockerlet_metrics::ContainerStateLabel { container_state: state })
                .get()
        };
        assert_eq!(metrics.running_pods.get(), 1);
        assert_eq!(
            running(ContainerStateValue::running),
            1,
            "the sandbox is not a container"
        );
        assert!(metrics.pleg_relist_duration.count() >= 3);
        assert_eq!(
            metrics.pleg_relist_interval.count(),
            metrics.pleg_relist_duration.count() - 1
        );
        assert!(metrics.pleg_last_seen.get() > 1e9);
        runtime.exit(&app.0, 1);
        runtime.exit(&sandbox.0, 0);
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(metrics.running_pods.get(), 0);
        assert_eq!(
            (
                running(ContainerStateValue::running),
                running(ContainerStateValue::exited)
            ),
            (0, 1)
        );
        drop(pleg);
    }

    /// Docker's event `action` about container `id`, now.
    fn docker_event(id: &ContainerId, action: &str, exit_code: Option<i64>) -> RuntimeEvent {
        RuntimeEvent {
            id: id.clone(),
            action: action.into(),
            exit_code,
            time: Some(Timestamp::now()),
        }
    }

    /// A `die` event makes the container exited at once, with the event's exit code and the
    /// `oom` before it — even when the inspect that follows cannot answer.
    #[actix::test]
    async fn a_die_event_is_the_death() {
        tokio::time::pause();
        let runtime = FakeRuntime::default();
        let id = runtime.create_container(spec("app")).await.unwrap();
        runtime.start_container(&id).await.unwrap();
        let cache = Arc::new(PodCache::default());
        // A long period: only the first relist and the event can tell the PLEG anything.
        let (_pleg, sink) = start(&runtime, &cache, Duration::from_secs(3600));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            sink.send(Take).await.unwrap(),
            vec![(id.0.clone(), LifecycleEventKind::ContainerStarted)]
        );
        runtime.state.lock().unwrap().inspect_fails = true;
        runtime.emit(docker_event(&id, "oom", None));
        runtime.emit(docker_event(&id, "die", Some(137)));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            sink.send(Take).await.unwrap(),
            vec![(id.0.clone(), LifecycleEventKind::ContainerDied)]
        );
        let dead = cache.container(&id).unwrap();
        assert_eq!(
            (dead.state, dead.exit_code, dead.oom_killed),
            (RuntimeState::Exited, 137, true)
        );
        assert!(dead.finished_at.is_some());
    }

    /// An `oom` that comes after the `die` (Docker sends it late at times) still marks the
    /// exited container OOM-killed and tells its worker.
    #[actix::test]
    async fn an_oom_after_the_death_still_counts() {
        tokio::time::pause();
        let runtime = FakeRuntime::default();
        let id = runtime.create_container(spec("app")).await.unwrap();
        runtime.start_container(&id).await.unwrap();
        let cache = Arc::new(PodCache::default());
        let (_pleg, sink) = start(&runtime, &cache, Duration::from_secs(3600));
        tokio::time::sleep(Duration::from_millis(50)).await;
        sink.send(Take).await.unwrap();
        runtime.exit(&id.0, 137);
        runtime.emit(docker_event(&id, "die", Some(137)));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!cache.container(&id).unwrap().oom_killed, "Docker said no OOM yet");
        sink.send(Take).await.unwrap();
        runtime.emit(docker_event(&id, "oom", None));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let dead = cache.container(&id).unwrap();
        assert_eq!((dead.state, dead.oom_killed), (RuntimeState::Exited, true));
        assert_eq!(
            sink.send(Take).await.unwrap(),
            vec![(id.0.clone(), LifecycleEventKind::ContainerDied)],
            "the worker hears of it"
        );
    }

    /// PLEG is healthy while relists succeed, and names the runtime as the reason once Docker
    /// stops answering (what `/healthz` reports).
    #[actix::test]
    async fn health_follows_the_runtime() {
        tokio::time::pause();
        let runtime = FakeRuntime::default();
        let cache = Arc::new(PodCache::default());
        let (pleg, _sink) = start(&runtime, &cache, Duration::from_millis(20));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let health = pleg.send(GetHealth).await.unwrap();
        assert!(health.healthy, "{health:?}");
        runtime.state.lock().unwrap().unreachable = true;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let health = pleg.send(GetHealth).await.unwrap();
        assert!(!health.healthy);
        assert!(health.reason.unwrap().starts_with("container runtime is down"));
        runtime.state.lock().unwrap().unreachable = false;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(pleg.send(GetHealth).await.unwrap().healthy);
    }
}
