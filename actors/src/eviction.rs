//! EvictionActor: kubelet's eviction manager (`pkg/kubelet/eviction/eviction_manager.go`) on
//! every node, standalone or in a cluster. Every `period` it observes the eviction signals,
//! keeps the pressure conditions (held for `evictionPressureTransitionPeriod`), tells the
//! Supervisor when they change (admission follows them), and while a hard threshold is met
//! evicts one pod: the first of kubelet's ranking ([`dockerlet_pod::eviction`]) that is not
//! critical, failed `Evicted` with kubelet's message and stopped with a grace period of 1 s.
//! Once the pod stopped it observes again at once, as kubelet's loop does.
//!
//! | Message / trigger     | From             | Effect                                            |
//! |-----------------------|------------------|---------------------------------------------------|
//! | GetNodePressure       | NodeStatusActor (through the Supervisor) | the conditions in force and the thresholds met |
//! | GetActorState         | Supervisor       | debug snapshot: conditions, thresholds met, evictions |
//! | Panic                 | Supervisor       | test-only fault hook                               |
//! | every `period`        | self             | observe (off the actor thread), apply the thresholds, evict |
//!
//! It sends `NodePressureChanged` and `GetEvictionCandidates` to the Supervisor,
//! `GetFreshStatsSummary` to the StatsActor (the usage pods are ranked by, read then), `EvictPod` to the
//! chosen pod's worker, and `RecordEvent` (`EvictionThresholdMet` about the Node, `Evicted`
//! about the pod) to the EventRecorder.
//!
//! The reading itself ([`dockerlet_host::signals::observe`]: /proc and statvfs) is blocking
//! I/O and runs on `spawn_blocking`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use dockerlet_host::signals::{self, Observation, PressureTracker, Signal};
use dockerlet_host::thresholds::{Evaluator, EvictionSettings, Met};
use dockerlet_messages::debug::{EventSubject, EventType, RecordEvent};
use dockerlet_messages::gc::ReclaimContainers;
use dockerlet_messages::node::{
    EvictPod, EvictionCandidate, GetEvictionCandidates, GetNodePressure, NodePressure, NodePressureChanged,
    ReclaimImages, ThresholdMet,
};
use dockerlet_messages::stats::{GetFreshStatsSummary, Summary};
use dockerlet_messages::PodRef;
use dockerlet_metrics::{EvictionSignalLabel, Metrics};
use dockerlet_pod::eviction::{self as policy, Starved};
use serde_json::json;

use crate::eviction_memcg::{self, MemcgConfig};
use crate::inspect::Inspect;
use crate::registry::Link;

/// kubelet's `immediateEvictionGracePeriodSeconds`: the grace period of a hard eviction.
pub const HARD_EVICTION_GRACE: Duration = Duration::from_secs(1);

/// Reads the node's signals; blocking.
pub type Observe = Arc<dyn Fn() -> Observation + Send + Sync>;

/// What the EvictionActor watches and how often.
#[derive(Clone)]
pub struct EvictionConfig {
    /// The node, for its events.
    pub node_name: String,
    /// The thresholds: hard, soft with their grace periods, the minimum reclaim, the longest
    /// grace period of a soft eviction.
    pub thresholds: EvictionSettings,
    /// `evictionPressureTransitionPeriod` (5 m): how long a condition stays True.
    pub transition_period: Duration,
    /// How often the signals are read (kubelet's eviction monitoring interval, 10 s).
    pub period: Duration,
    /// The reading; [`EvictionConfig::observe_node`] on a real node, a stand-in in tests.
    pub observe: Observe,
    /// `kernelMemcgNotification`: cgroup v1 usage thresholds that make the actor observe at
    /// once when crossed ([`crate::eviction_memcg`]); none: only every `period`.
    pub memcg: Option<MemcgConfig>,
}

impl EvictionConfig {
    /// Read this node: the filesystems of `root_dir` (nodefs) and `image_dir` (imagefs), and
    /// the pods' cgroup `kubepods` when the agent keeps one (`allocatableMemory.available`).
    pub fn observe_node(
        root_dir: PathBuf,
        image_dir: Option<PathBuf>,
        pods: Option<Arc<dockerlet_host::cgroup::tree::PodCgroups>>,
    ) -> Observe {
        Arc::new(move || {
            let mut observation = signals::observe(&root_dir, image_dir.as_deref());
            observation.allocatable_memory = pods.as_ref().and_then(|p| p.kubepods_memory());
            observation
        })
    }
}

impl std::fmt::Debug for EvictionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvictionConfig")
            .field("node_name", &self.node_name)
            .field("thresholds", &self.thresholds)
            .field("transition_period", &self.transition_period)
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

/// kubelet's node-level reclaim for a disk signal: dead containers, then unused images.
async fn node_level_reclaim(containers: Option<Link<ReclaimContainers>>, images: Option<Link<ReclaimImages>>) {
    let unexpected = "Eviction manager: unexpected error when attempting to reduce resource pressure";
    if let Some(containers) = containers {
        match containers.send(ReclaimContainers).await {
            Ok(r) => {
                tracing::info!(removed = r.removed, error = ?r.error, "Eviction manager: unused containers deleted")
            }
            Err(e) => tracing::warn!(error = %e, "{unexpected}"),
        }
    }
    if let Some(images) = images {
        match images.send(ReclaimImages).await {
            Ok(r) => tracing::info!(freed = r.freed, error = ?r.error, "Eviction manager: unused images deleted"),
            Err(e) => tracing::warn!(error = %e, "{unexpected}"),
        }
    }
}

/// Whom the actor asks and tells. Without links (tests of the readings alone) it only observes.
#[derive(Clone)]
pub struct EvictionLinks {
    /// The Supervisor: the pressure conditions, for admission.
    pub pressure_changed: Recipient<NodePressureChanged>,
    /// The Supervisor: the pods that may be evicted.
    pub candidates: Recipient<GetEvictionCandidates>,
    /// The StatsActor: the usage pods are ranked by; none without one.
    pub stats: Option<Link<GetFreshStatsSummary>>,
    /// The EventRecorder.
    pub events: Link<RecordEvent>,
    /// `kubelet_evictions`, `kubelet_eviction_stats_age_seconds`.
    pub metrics: Arc<Metrics>,
    /// The ImageGcActor: the node-level reclaim of a disk signal (kubelet's
    /// `DeleteUnusedImages`) before any pod is evicted; none without one.
    pub reclaim_images: Option<Link<ReclaimImages>>,
    /// The ContainerGcActor: dead containers removed before images (kubelet's
    /// `DeleteAllUnusedContainers`); none without one.
    pub reclaim_containers: Option<Link<ReclaimContainers>>,
}

/// What one eviction attempt came to.
#[derive(Debug)]
enum Attempt {
    /// These pods went over a local-storage limit and were evicted (with the limit's label).
    OverStorageLimits(Vec<(PodRef, &'static str)>),
    /// No limit is exceeded and no threshold met.
    NothingToDo,
    /// This pod was evicted for `signal` (and has stopped, or the wait for it ran out).
    Evicted {
        pod: PodRef,
        signal: Signal,
        stats_age: Option<Duration>,
    },
    /// Every pod that could be evicted is critical, or none runs.
    NothingToEvict(&'static str),
    /// The Supervisor did not answer.
    Failed(String),
}

/// The actor.
pub struct EvictionActor {
    config: EvictionConfig,
    links: Option<EvictionLinks>,
    /// Conditions held for the transition period.
    tracker: PressureTracker,
    /// When each threshold was first met, which were met last time.
    evaluator: Evaluator,
    /// The last result.
    current: NodePressure,
    /// The thresholds that may evict at the last observation (hard ones, soft ones past their
    /// grace period), with what was observed.
    met_now: Vec<Met>,
    /// An observation is running on the blocking pool.
    observing: bool,
    /// An eviction is under way (one at a time, as kubelet's).
    evicting: bool,
    /// When the last eviction attempt ended.
    attempt_ended: Option<Instant>,
    /// The node-level reclaim just ran: this observation decides whether a pod must go.
    just_reclaimed: bool,
    /// Observations done.
    observations: u64,
    /// Pods evicted (this instance), and the last one with its message.
    evictions: u64,
    last_eviction: Option<String>,
    /// Queries that came before the first observation: answered by it, so the Node's first
    /// status never reports pressure nobody has looked at yet.
    waiting: Vec<futures::channel::oneshot::Sender<NodePressure>>,
    /// The memory threshold notifiers' thread, and when they were last registered.
    memcg_watcher: Option<Arc<dockerlet_host::memcg::Watcher>>,
    memcg_refreshed: Option<Instant>,
    /// Crossings the notifiers reported.
    memcg_crossings: u64,
    /// Messages handled.
    handled: u64,
}

impl EvictionActor {
    /// An actor that observes and reports pressure; [`EvictionActor::evicting_through`] makes it
    /// evict too.
    pub fn new(config: EvictionConfig) -> Self {
        EvictionActor {
            tracker: PressureTracker::new(config.transition_period),
            evaluator: Evaluator::default(),
            config,
            links: None,
            current: NodePressure::default(),
            met_now: Vec::new(),
            observing: false,
            evicting: false,
            attempt_ended: None,
            just_reclaimed: false,
            observations: 0,
            evictions: 0,
            last_eviction: None,
            waiting: Vec::new(),
            memcg_watcher: None,
            memcg_refreshed: None,
            memcg_crossings: 0,
            handled: 0,
        }
    }

    /// Re-register the memory threshold notifiers for this observation (at most every
    /// [`eviction_memcg::REFRESH_EVERY`]); their watcher thread is started the first time.
    fn refresh_memcg(&mut self, ctx: &mut Context<Self>, observation: &Observation) {
        let Some(config) = &self.config.memcg else { return };
        if self
            .memcg_refreshed
            .is_some_and(|at| at.elapsed() < eviction_memcg::REFRESH_EVERY)
        {
            return;
        }
        self.memcg_refreshed = Some(Instant::now());
        if self.memcg_watcher.is_none() {
            // A weak address: the thread must not keep the actor alive.
            let me = ctx.address().downgrade();
            let on_cross = move |d: &str| {
                if let Some(me) = me.upgrade() {
                    me.do_send(eviction_memcg::ThresholdCrossed(d.to_string()));
                }
            };
            match dockerlet_host::memcg::Watcher::spawn(on_cross) {
                Ok(watcher) => self.memcg_watcher = Some(Arc::new(watcher)),
                Err(e) => {
                    tracing::warn!(error = %e, "Eviction manager: cannot start the memory threshold notifiers' thread");
                    return;
                }
            }
        }
        let targets = eviction_memcg::targets(config, &self.config.thresholds, observation);
        let watcher = self.memcg_watcher.clone();
        ctx.spawn(
            async move {
                let registered = tokio::task::spawn_blocking(move || eviction_memcg::register(targets)).await;
                if let (Some(watcher), Ok(registered)) = (watcher, registered) {
                    watcher.replace(registered);
                }
            }
            .into_actor(self),
        );
    }

    /// Report the conditions and evict pods through `links`.
    pub fn evicting_through(mut self, links: EvictionLinks) -> Self {
        self.links = Some(links);
        self
    }

    fn observe(&mut self, ctx: &mut Context<Self>) {
        if self.observing {
            return;
        }
        self.observing = true;
        let observe = self.config.observe.clone();
        let began = Instant::now();
        let reading = async move { tokio::task::spawn_blocking(move || observe()).await };
        ctx.spawn(reading.into_actor(self).map(move |reading, act, ctx| {
            act.observing = false;
            match reading {
                Ok(observation) => {
                    act.apply(&observation, Instant::now());
                    act.refresh_memcg(ctx, &observation);
                }
                Err(e) => tracing::warn!(error = %e, "reading the eviction signals failed"),
            }
            for waiting in act.waiting.drain(..) {
                let _ = waiting.send(act.current.clone());
            }
            // A reading begun before the last eviction ended may predate the evicted pod's
            // memory coming back: it reports, but only the next one may evict (kubelet's
            // synchronize observes afresh after each eviction and its pod's cleanup).
            if act.attempt_ended.is_some_and(|ended| began < ended) {
                return;
            }
            act.evict(ctx);
        }));
    }

    /// Apply the thresholds to an observation; log thresholds newly met; tell the Supervisor
    /// when the conditions changed.
    fn apply(&mut self, observation: &Observation, now: Instant) {
        self.observations += 1;
        let (met, eligible) = self.evaluator.evaluate(&self.config.thresholds, observation, now);
        let triples: Vec<(Signal, i64, i64)> = met.iter().map(|m| (m.signal, m.available, m.threshold)).collect();
        let conditions = self.tracker.update(&triples, now);
        self.met_now = eligible;
        let met: Vec<ThresholdMet> = met
            .into_iter()
            .map(|m| ThresholdMet {
                signal: m.signal.name(),
                observed: m.available,
                threshold: m.threshold,
            })
            .collect();
        let names = |m: &[ThresholdMet]| m.iter().map(|t| t.signal).collect::<Vec<_>>();
        if names(&met) != names(&self.current.met) {
            for t in &met {
                tracing::warn!(
                    signal = t.signal,
                    observed = t.observed,
                    threshold = t.threshold,
                    "eviction threshold met"
                );
            }
        }
        if conditions != self.current.conditions {
            if let Some(links) = &self.links {
                links.pressure_changed.do_send(NodePressureChanged(conditions.clone()));
            }
        }
        self.current = NodePressure { conditions, met };
    }

    /// A hard threshold is met: reclaim its resource by evicting one pod (kubelet's
    /// `synchronize`, memory signals first).
    fn evict(&mut self, ctx: &mut Context<Self>) {
        let Some(links) = self.links.clone().filter(|_| !self.evicting) else {
            return;
        };
        // Memory first, hard before soft.
        let chosen = self
            .met_now
            .iter()
            .min_by_key(|m| (m.signal.starved(), m.soft))
            .copied();
        if chosen.is_none() && std::mem::take(&mut self.just_reclaimed) {
            tracing::info!("Eviction manager: able to reduce resource pressure without evicting pods.");
        }
        self.evicting = true;
        let disk = chosen.is_some_and(|m| matches!(m.signal.starved(), Starved::EphemeralStorage | Starved::Inodes));
        let can_reclaim = links.reclaim_images.is_some() || links.reclaim_containers.is_some();
        if disk && can_reclaim && !std::mem::take(&mut self.just_reclaimed) {
            // kubelet's node-level reclaim for the filesystems (`buildSignalToNodeReclaimFuncs`,
            // no dedicated imagefs: Docker's and the root directory's are one here or both
            // filled by containers): dead containers, then unused images, then measure again; a
            // pod goes only if that was not enough.
            let reclaim = node_level_reclaim(links.reclaim_containers.clone(), links.reclaim_images.clone());
            ctx.spawn(reclaim.into_actor(self).map(|(), act, ctx| {
                act.evicting = false;
                act.just_reclaimed = true;
                act.observe(ctx);
            }));
            return;
        }
        self.just_reclaimed = false;
        let node = self.config.node_name.clone();
        let settings = self.config.thresholds.clone();
        let work = async move {
            // kubelet's local-storage checks come first; pods over their limits go this cycle,
            // and the thresholds wait for the next.
            // One look at the pods and one fresh summary serve both steps.
            let candidates = match links.candidates.send(GetEvictionCandidates).await {
                Ok(c) => c,
                Err(e) => return Attempt::Failed(e.to_string()),
            };
            let limited = candidates
                .iter()
                .any(|c| policy::has_storage_limits(&c.pod) && !policy::is_critical(&c.pod));
            let summary = match (&links.stats, limited || chosen.is_some()) {
                (Some(stats), true) => stats.send(GetFreshStatsSummary).await.ok().flatten(),
                _ => None,
            };
            let over = evict_over_storage_limits(&links, &candidates, summary.as_deref()).await;
            if !over.is_empty() {
                return Attempt::OverStorageLimits(over);
            }
            let Some(Met {
                signal,
                available,
                threshold,
                soft,
            }) = chosen
            else {
                return Attempt::NothingToDo;
            };
            // A hard threshold stops the pod in 1 s; a soft one with the smaller of
            // evictionMaxPodGracePeriod and the pod's own.
            let grace = move |pod: &k8s_openapi::api::core::v1::Pod| {
                if soft {
                    settings.soft_pod_grace(dockerlet_pod::spec::pod_grace(pod))
                } else {
                    HARD_EVICTION_GRACE
                }
            };
            let starved = signal.starved();
            tracing::warn!(resource = starved.name(), "Eviction manager: attempting to reclaim");
            links.events.do_send(RecordEvent::about(
                EventSubject::Node(node),
                EventType::Warning,
                policy::THRESHOLD_MET,
                format!("Attempting to reclaim {}", starved.name()),
            ));
            evict_one(&links, &candidates, summary, signal, (threshold, available), grace).await
        };
        ctx.spawn(work.into_actor(self).map(move |attempt, act, ctx| {
            act.evicting = false;
            act.attempt_ended = Some(Instant::now());
            act.evicted(attempt, ctx);
        }));
    }

    fn evicted(&mut self, attempt: Attempt, ctx: &mut Context<Self>) {
        match attempt {
            Attempt::OverStorageLimits(pods) => {
                for (pod, signal) in pods {
                    self.evictions += 1;
                    self.last_eviction = Some(pod.to_string());
                    if let Some(links) = &self.links {
                        let label = EvictionSignalLabel {
                            eviction_signal: signal,
                        };
                        links.metrics.evictions.get_or_create(&label).inc();
                    }
                }
                self.observe(ctx);
            }
            Attempt::NothingToDo => {}
            Attempt::Evicted { pod, signal, stats_age } => {
                self.evictions += 1;
                self.last_eviction = Some(pod.to_string());
                if let Some(links) = &self.links {
                    let label = EvictionSignalLabel {
                        eviction_signal: signal.name(),
                    };
                    links.metrics.evictions.get_or_create(&label).inc();
                    if let Some(age) = stats_age {
                        links
                            .metrics
                            .eviction_stats_age
                            .get_or_create(&label)
                            .observe(age.as_secs_f64());
                    }
                }
                // kubelet's loop goes round at once after an eviction.
                self.observe(ctx);
            }
            Attempt::NothingToEvict(why) => tracing::error!("Eviction manager: {why}"),
            Attempt::Failed(e) => tracing::warn!(error = %e, "Eviction manager: failed to synchronize"),
        }
    }
}

/// Rank the running pods by their use of `starved` and evict the first that is not critical:
/// its `Evicted` event, then `EvictPod` to its worker, waited for as kubelet's `killPodNow`
/// (max(10 s, 1.5 × grace)).
async fn evict_one(
    links: &EvictionLinks,
    candidates: &[EvictionCandidate],
    summary: Option<Arc<Summary>>,
    signal: Signal,
    threshold: (i64, i64),
    grace: impl Fn(&k8s_openapi::api::core::v1::Pod) -> Duration,
) -> Attempt {
    let starved = signal.starved();
    if candidates.is_empty() {
        return Attempt::NothingToEvict("eviction thresholds have been met, but no pods are active to evict");
    }
    let uids: Vec<String> = candidates.iter().map(|c| c.id.uid.0.clone()).collect();
    let pods = uids
        .iter()
        .map(String::as_str)
        .zip(candidates.iter().map(|c| c.pod.as_ref()));
    let mut ranked = policy::candidates(pods, summary.as_deref(), starved);
    policy::rank(&mut ranked, starved);
    let order: Vec<&str> = ranked.iter().map(|c| c.uid.as_str()).collect();
    tracing::info!(pods = ?order, "Eviction manager: pods ranked for eviction");
    for choice in &ranked {
        let Some(target) = candidates.iter().find(|c| c.id.uid.0 == choice.uid) else {
            continue;
        };
        if policy::is_critical(&target.pod) {
            tracing::info!(parent: &target.id.span(), "Eviction manager: cannot evict a critical pod");
            continue;
        }
        let message = policy::message(starved, Some(threshold), &choice.containers);
        tracing::info!(parent: &target.id.span(), message = %message, "Eviction manager: evicting pod");
        // kubelet's AnnotatedEventf: the containers over their request and what starved.
        let (names, usages) = policy::offending(&choice.containers, starved);
        let annotations = std::collections::BTreeMap::from([
            ("offending_containers".to_string(), names),
            ("offending_containers_usage".to_string(), usages),
            ("starved_resource".to_string(), starved.name().to_string()),
        ]);
        let event = RecordEvent::about(
            EventSubject::Pod(target.id.clone()),
            EventType::Warning,
            policy::EVICTED,
            message.clone(),
        );
        links.events.do_send(event.with_annotations(annotations));
        stop_evicted(target, message, true, grace(&target.pod)).await;
        let stats_age = summary.as_deref().and_then(stats_age);
        return Attempt::Evicted {
            pod: target.id.clone(),
            signal,
            stats_age,
        };
    }
    Attempt::NothingToEvict("unable to evict any pods from the node")
}

/// Stop an evicted pod (its `EvictPod`) and wait as kubelet's `killPodNow` does:
/// max(10 s, 1.5 × grace).
async fn stop_evicted(target: &EvictionCandidate, message: String, disruption_target: bool, grace: Duration) {
    let stop = target.worker.send(EvictPod {
        grace,
        message,
        disruption_target,
    });
    let wait = Duration::from_secs(10).max(grace.mul_f64(1.5));
    match tokio::time::timeout(wait, stop).await {
        Ok(_) => tracing::info!(parent: &target.id.span(), "Eviction manager: pod is evicted successfully"),
        Err(_) => tracing::warn!(parent: &target.id.span(), "Eviction manager: pod failed to evict"),
    }
}

/// kubelet's local-storage eviction: every running pod over an emptyDir `sizeLimit` or an
/// `ephemeral-storage` limit is evicted (grace 1 s, no `DisruptionTarget`), with an `Evicted`
/// event, from `summary` (read by the caller only when some pod has such a limit).
async fn evict_over_storage_limits(
    links: &EvictionLinks,
    candidates: &[EvictionCandidate],
    summary: Option<&Summary>,
) -> Vec<(PodRef, &'static str)> {
    let Some(summary) = summary else {
        return Vec::new();
    };
    let limited = candidates
        .iter()
        .filter(|c| policy::has_storage_limits(&c.pod) && !policy::is_critical(&c.pod));
    let mut evicted = Vec::new();
    for target in limited {
        let Some(stats) = summary.pods.iter().find(|p| p.pod_ref.uid == target.id.uid.0) else {
            continue;
        };
        let Some(violation) = policy::storage_violation(&target.pod, stats) else {
            continue;
        };
        tracing::info!(parent: &target.id.span(), message = %violation.message, "Eviction manager: evicting pod over its local storage limit");
        links.events.do_send(RecordEvent::about(
            EventSubject::Pod(target.id.clone()),
            EventType::Warning,
            policy::EVICTED,
            violation.message.clone(),
        ));
        stop_evicted(target, violation.message, false, HARD_EVICTION_GRACE).await;
        evicted.push((target.id.clone(), violation.signal));
    }
    evicted
}

/// How old the summary's node memory reading is.
fn stats_age(summary: &Summary) -> Option<Duration> {
    let at = summary.node.memory.as_ref()?.time.0;
    Duration::try_from(k8s_openapi::jiff::Timestamp::now().duration_since(at)).ok()
}

impl Actor for EvictionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.observe(ctx);
        ctx.run_interval(self.config.period, |act, ctx| act.observe(ctx));
    }
}

impl Handler<eviction_memcg::ThresholdCrossed> for EvictionActor {
    type Result = ();

    /// A notifier fired: observe now (kubelet's handler runs `synchronize`).
    fn handle(&mut self, crossed: eviction_memcg::ThresholdCrossed, ctx: &mut Self::Context) {
        self.handled += 1;
        self.memcg_crossings += 1;
        tracing::info!(desc = %format!("eviction manager: {} crossed", crossed.0), "Eviction manager: thresholds crossed");
        // Register again after this reading, whatever the 10 s refresh: the usage crossed the
        // threshold, but `memory.available` may still be above its own (inactive file pages
        // move as memory is taken), and only a new threshold at the new usage fires again.
        self.memcg_refreshed = None;
        self.observe(ctx);
    }
}

impl Handler<GetNodePressure> for EvictionActor {
    type Result = ResponseFuture<NodePressure>;

    /// The last reading; before the first one, the first one.
    fn handle(&mut self, _: GetNodePressure, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        if self.observations > 0 {
            let current = self.current.clone();
            return Box::pin(async move { current });
        }
        let (answer, answered) = futures::channel::oneshot::channel();
        self.waiting.push(answer);
        Box::pin(async move { answered.await.unwrap_or_default() })
    }
}

impl Inspect for EvictionActor {
    const KIND: &'static str = "EvictionActor";
    const NAME: &'static str = "eviction";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn detail(&self) -> serde_json::Value {
        let conditions: Vec<&str> = self.current.conditions.iter().map(|c| c.condition_type()).collect();
        json!({
            "conditions": conditions,
            "thresholds_met": self.current.met,
            "observations": self.observations,
            "evicting": self.evicting,
            "evictions": self.evictions,
            "last_eviction": self.last_eviction,
            "memcg_notifier": self.memcg_watcher.is_some(),
            "memcg_crossings": self.memcg_crossings,
        })
    }
}

crate::supervised!(EvictionActor);

#[cfg(test)]
#[path = "eviction_tests.rs"]
mod tests;
