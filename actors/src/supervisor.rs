//! Supervisor: the root actor. Owns the desired pods (merged from every source by
//! [`PodConfig`]), starts one PodWorker per pod UID, routes messages by pod UID, and re-creates
//! any child that dies — a panicking handler included ([`crate::registry`]).
//!
//! | Message                        | From                  | Effect                                       |
//! |--------------------------------|-----------------------|----------------------------------------------|
//! | SourcePodsChanged              | FileSource, HttpSource, ApiSource | merge; start, update or terminate workers |
//! | PodLifecycleEvent              | PlegActor             | `SyncPod` to that pod's worker               |
//! | RelistCompleted                | PlegActor             | terminate containers of pods nobody wants (once every source delivered) |
//! | PodTerminated                  | PodWorker             | forget the worker (or restart it if the pod came back); finalize an API deletion |
//! | RecordEvent                    | PodWorker, ProbeActor, OomWatcherActor | the [`EventRecorder`]: debug ring, API event |
//! | ProbeResultChanged             | ProbeActor            | forward to that pod's worker                 |
//! | WatchContainers, ForgetPod     | PodWorker             | forward to the ProbeActor                    |
//! | SetPodStatus, RemovePodStatus  | PodWorker             | forward to the StatusActor                   |
//! | GetPods                        | HTTP `/pods`          | forward to the StatusActor                   |
//! | GetHealth                      | NodeStatusActor       | forward to the PlegActor                     |
//! | GetNodePressure                | NodeStatusActor       | forward to the PressureActor                 |
//! | GetStatsSummary, GetStatsView | HTTP `/stats/summary`, `/metrics/resource`, `/metrics/cadvisor` | forward to the StatsActor |
//! | GetDebugSnapshot               | HTTP `/debug/actors`  | ask every actor for its state                |
//! | GetPodSandbox                  | HTTP `/portForward/…` | the pod's newest sandbox from the pod cache  |
//! | GetRunningPods                 | HTTP `/runningpods/`  | the pod cache's running pods                 |
//! | InjectFault                    | HTTP (tests)          | make an actor panic                          |
//! | every 250 ms                   | self                  | watchdog: re-create dead actors              |
//!
//! The actor graph is [`Children::start`]: every long-lived child, in start order, and the
//! registry that keeps them alive. Children talk to each other only through the Supervisor, so a
//! re-created actor is reachable at once; re-created actors rebuild their state from Docker (a
//! PodWorker's first sync reads the pod's containers, PLEG's first relist reads them all).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::node_shutdown::{NodeShutdownActor, NodeShutdownConfig, NodeShutdownLinks};
use actix::prelude::*;
use dockerlet_kube::recorder::EventLimits;
use dockerlet_kube::KubeClient;
use dockerlet_messages::debug::{
    ActorState, DebugSnapshot, FaultError, FaultTarget, GetActorState, GetDebugSnapshot, GetHealth, Health, HealthCell,
    InjectFault, Panic, RecordEvent,
};
use dockerlet_messages::metrics::StaticLabel;
use dockerlet_messages::node::GetNodePressure;
use dockerlet_messages::pleg::{LifecycleEventKind, PodLifecycleEvent, RelistCompleted};
use dockerlet_messages::probe::{ProbeResultChanged, ResendProbeTargets};
use dockerlet_messages::source::{PodSource, SourcePodsChanged};
use dockerlet_messages::stats::{GetStatsSummary, GetStatsView};
use dockerlet_messages::status::{GetPodSandbox, GetPods, GetRunningPods};
use dockerlet_messages::worker::{
    FinalizePodDeletion, GetShutdownTargets, NodeShuttingDown, PodFinished, PodTerminated, PublishStatus,
    ShutdownTarget, StopActor, SyncPod, TerminatePod, UpdatePod,
};
use dockerlet_messages::PodUid;
use dockerlet_pod::admission::Rejection;
use dockerlet_runtime::ContainerRuntime;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use crate::node_status::{NodeStatusActor, NodeStatusConfig};
use crate::oom_watcher::{OomWatcherActor, OomWatcherConfig};
use crate::pleg::{PlegActor, PlegLinks};
use crate::pod_cache::PodCache;
use crate::pod_config::{pod_ref, PodConfig};
use crate::pod_worker::{PodWorker, PodWorkerConfig, SyncContext, WorkerLinks};
use crate::pressure::{PressureActor, PressureConfig};
use crate::prober::{ProbeActor, ProbeLinks};
use crate::recorder::EventRecorder;
use crate::registry::{ask, AfterRestart, Child, Registry, QUERY_TIMEOUT};
use crate::source::api::ApiSource;
use crate::source::http::{HttpSource, HttpSourceConfig};
use crate::source::FileSource;
use crate::stats::{StatsActor, StatsConfig};
use crate::status::StatusActor;
use crate::system_cgroups::{SystemCgroupsActor, SystemCgroupsConfig};

/// How often the watchdog looks for dead children.
const WATCHDOG_PERIOD: Duration = Duration::from_millis(250);

/// Standalone node or member of a cluster: one type, so no half-configured mix can exist.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Static pods only (`--pod-manifest-path`, `--manifest-url`); no API server.
    Standalone,
    /// A node of the cluster behind `api` (`--kubeconfig` or `--in-cluster`).
    Cluster {
        /// The API server.
        api: Arc<dyn KubeClient>,
        /// Registration and heartbeats of the Node (boxed: the Node object is large).
        node: Box<NodeStatusConfig>,
    },
}

impl Mode {
    /// The API server, in cluster mode.
    pub fn api(&self) -> Option<&Arc<dyn KubeClient>> {
        match self {
            Mode::Standalone => None,
            Mode::Cluster { api, .. } => Some(api),
        }
    }
}

/// Settings of the actor system.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// Shared PodWorker settings (node name included).
    pub worker: Arc<PodWorkerConfig>,
    /// `--pod-manifest-path`, if any.
    pub manifest_path: Option<PathBuf>,
    /// `--file-check-frequency`.
    pub file_check_frequency: Duration,
    /// PLEG relist period while Docker's events flow (every second otherwise).
    pub relist_period: Duration,
    /// Honour [`InjectFault`] (tests only).
    pub fault_injection: bool,
    /// Standalone or cluster.
    pub mode: Mode,
    /// Static pods from a URL (`--manifest-url`).
    pub manifest_url: Option<HttpSourceConfig>,
    /// The eviction signals and thresholds (observed in both modes).
    pub pressure: PressureConfig,
    /// The OOM watcher's kernel log and checkpoint; `None` runs none.
    pub oom: Option<OomWatcherConfig>,
    /// Statistics housekeeping (`/stats/summary`); none: no StatsActor.
    pub stats: Option<StatsConfig>,
    /// `--kubelet-cgroups` and `--system-cgroups`, kept every minute; none: no
    /// SystemCgroupsActor.
    pub system_cgroups: Option<SystemCgroupsConfig>,
    /// How many pod events go to the API (`--event-qps`, `--event-burst`).
    pub events: EventLimits,
    /// The PLEG's health, shared with `/healthz` (which reads it without a message).
    pub health: HealthCell,
    /// The Node as the agent registers it (labels, taints, allocatable): new pods are admitted
    /// against it (kubelet's `initialNode`), or against the API's Node once the agent sees it.
    pub node: Arc<Node>,
    /// Graceful node shutdown (`shutdownGracePeriod…`); none: no NodeShutdownActor, a
    /// shutdown is immediate.
    pub node_shutdown: Option<NodeShutdownConfig>,
}

impl SupervisorConfig {
    /// The pod sources this configuration starts.
    fn sources(&self) -> Vec<PodSource> {
        [
            self.manifest_path.is_some().then_some(PodSource::File),
            self.manifest_url.is_some().then_some(PodSource::Http),
            self.mode.api().is_some().then_some(PodSource::Api),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// The long-lived children, typed for routing, and the registry that keeps them alive.
struct Children {
    registry: Registry,
    status: Child<StatusActor>,
    probe: Child<ProbeActor>,
    pleg: Child<PlegActor>,
    pressure: Child<PressureActor>,
    stats: Option<Child<StatsActor>>,
    api_source: Option<Child<ApiSource>>,
}

impl Children {
    /// The actor graph: every child of the Supervisor, in start order. Adding a subsystem is one
    /// `Child::start` here and its `registry.add`.
    fn start(
        config: &SupervisorConfig,
        runtime: &Arc<dyn ContainerRuntime>,
        cache: &Arc<PodCache>,
        me: Addr<Supervisor>,
    ) -> Self {
        let node = config.worker.node_name.clone();
        let api = config.mode.api().cloned();
        let status = {
            let api = api.clone();
            Child::start("StatusActor", "status", AfterRestart::PublishStatus, move || {
                StatusActor::new(api.clone()).start()
            })
        };
        let probe = {
            let (runtime, me, metrics) = (runtime.clone(), me.clone(), config.worker.metrics.clone());
            Child::start("ProbeActor", "probes", AfterRestart::ResendProbeTargets, move || {
                let links = ProbeLinks {
                    results: me.clone().recipient(),
                    events: me.clone().recipient(),
                };
                ProbeActor::new(runtime.clone(), links)
                    .with_metrics(metrics.clone())
                    .start()
            })
        };
        let pleg = {
            let (runtime, cache, me) = (runtime.clone(), cache.clone(), me.clone());
            let (node, period, metrics) = (node.clone(), config.relist_period, config.worker.metrics.clone());
            let health = config.health.clone();
            Child::start("PlegActor", "pleg", AfterRestart::Nothing, move || {
                let links = PlegLinks {
                    events: me.clone().recipient(),
                    relisted: me.clone().recipient(),
                    health: health.clone(),
                };
                PlegActor::new(runtime.clone(), cache.clone(), node.clone(), links, period)
                    .with_metrics(metrics.clone())
                    .start()
            })
        };
        let pressure = {
            let pressure = config.pressure.clone();
            Child::start("PressureActor", "pressure", AfterRestart::Nothing, move || {
                PressureActor::new(pressure.clone()).start()
            })
        };
        let stats = config.stats.clone().map(|stats| {
            let (cache, metrics) = (cache.clone(), config.worker.metrics.clone());
            Child::start("StatsActor", "stats", AfterRestart::Nothing, move || {
                StatsActor::new(stats.clone(), cache.clone())
                    .with_metrics(metrics.clone())
                    .start()
            })
        });
        let file_source = config.manifest_path.clone().map(|path| {
            let (me, node, every) = (me.clone(), node.clone(), config.file_check_frequency);
            Child::start("FileSource", "file", AfterRestart::Nothing, move || {
                FileSource::new(path.clone(), node.clone(), every, me.clone().recipient()).start()
            })
        });
        let api_source = api.clone().map(|api| {
            let me = me.clone();
            Child::start("ApiSource", "api", AfterRestart::Nothing, move || {
                ApiSource::new(api.clone(), me.clone().recipient()).start()
            })
        });
        let http_source = config.manifest_url.clone().map(|url| {
            let (me, node) = (me.clone(), node.clone());
            Child::start("HttpSource", "http", AfterRestart::Nothing, move || {
                HttpSource::new(url.clone(), node.clone(), me.clone().recipient()).start()
            })
        });
        let node_status = match &config.mode {
            Mode::Standalone => None,
            Mode::Cluster { api, node } => {
                let (api, node, me) = (api.clone(), (**node).clone(), me.clone());
                Some(Child::start(
                    "NodeStatusActor",
                    "node",
                    AfterRestart::Nothing,
                    move || {
                        NodeStatusActor::new(
                            api.clone(),
                            node.clone(),
                            me.clone().recipient(),
                            me.clone().recipient(),
                        )
                        .start()
                    },
                ))
            }
        };
        let oom = config.oom.clone().map(|oom| {
            let (api, me) = (api.clone(), me.clone());
            Child::start("OomWatcherActor", "oom", AfterRestart::Nothing, move || {
                OomWatcherActor::new(oom.clone(), api.clone(), me.clone().recipient()).start()
            })
        });
        let system_cgroups = config.system_cgroups.clone().map(|config| {
            Child::start(
                "SystemCgroupsActor",
                "system-cgroups",
                AfterRestart::Nothing,
                move || SystemCgroupsActor::new(config.clone()).start(),
            )
        });
        let node_shutdown = config.node_shutdown.clone().map(|shutdown| {
            let (api, me) = (api.clone(), me.clone());
            Child::start("NodeShutdownActor", "node-shutdown", AfterRestart::Nothing, move || {
                let links = NodeShutdownLinks {
                    targets: me.clone().recipient(),
                    shutting_down: me.clone().recipient(),
                    api: api.clone(),
                };
                NodeShutdownActor::new(shutdown.clone(), links).start()
            })
        });
        let mut registry = Registry::default();
        registry.add(&status);
        registry.add(&probe);
        registry.add(&pleg);
        registry.add(&pressure);
        registry.add_some(&stats);
        registry.add_some(&file_source);
        registry.add_some(&api_source);
        registry.add_some(&http_source);
        registry.add_some(&node_status);
        registry.add_some(&oom);
        registry.add_some(&system_cgroups);
        registry.add_some(&node_shutdown);
        Children {
            registry,
            status,
            probe,
            pleg,
            pressure,
            stats,
            api_source,
        }
    }
}

/// A PodWorker and what it is for.
struct WorkerEntry {
    addr: Addr<PodWorker>,
    restarts: u32,
    /// Termination was asked for; a re-created worker resumes it.
    termination: Option<Termination>,
    /// The pod the worker was started for (orphans get a stand-in with only the UID).
    pod: Arc<Pod>,
    /// Why the node did not admit the pod (it then never runs); kept for a re-created worker.
    rejection: Option<Rejection>,
    /// Its last status was Succeeded or Failed: it no longer counts against the node.
    finished: bool,
}

/// A termination asked of a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Termination {
    /// The grace period asked for; `None` is the pod's own.
    grace: Option<Duration>,
}

/// The root actor.
pub struct Supervisor {
    /// Settings.
    config: SupervisorConfig,
    /// Docker, the pod cache the PLEG fills, and the worker settings, handed to every worker.
    sync: SyncContext,
    /// The desired pods, merged from every source.
    pods: PodConfig,
    /// One worker per pod UID (desired pods, and pods being terminated).
    workers: HashMap<PodUid, WorkerEntry>,
    /// API pods deleted and stopped here, still in the API (kept by finalizers, or the final
    /// deletion not through yet): they are done on this node and get no worker again — a watch
    /// event about one only repeats the final deletion.
    finished: HashSet<PodUid>,
    /// New pods refused by node affinity alone whose Node is being read again before they
    /// are admitted (they have no worker yet).
    awaiting_node: HashSet<PodUid>,
    /// Static pods waiting for a terminating static pod of the same namespace and name (an
    /// edited manifest's earlier version) to stop first, by that full name: kubelet's
    /// `waitingToStartStaticPodsByFullname`, so the two never run at once and the mirror pod
    /// stays the old one's until it is gone. The newest version waiting wins.
    waiting_static: HashMap<(String, String), PodUid>,
    /// Pods stopped and wanted again under the same UID: the next attempt of each of their
    /// containers, for their new worker (a restarted pod's restart counts go on).
    next_attempts: HashMap<PodUid, std::collections::BTreeMap<String, u32>>,
    /// Every other child.
    children: Children,
    /// The debug ring and API events.
    recorder: EventRecorder,
    /// The node shuts down (kubelet's shutdown manager): new pods are rejected, the Node is
    /// not Ready.
    shutting_down: bool,
    /// Messages handled.
    handled: u64,
}

impl Supervisor {
    /// Start the supervisor; its children start with it.
    pub fn start(config: SupervisorConfig, runtime: Arc<dyn ContainerRuntime>) -> Addr<Supervisor> {
        Supervisor::create(|ctx| {
            let cache = Arc::new(PodCache::default());
            let children = Children::start(&config, &runtime, &cache, ctx.address());
            let sync = SyncContext::new(runtime, cache, config.worker.clone());
            Supervisor {
                pods: PodConfig::new(config.sources()),
                recorder: EventRecorder::new(config.mode.api().cloned(), config.events),
                workers: HashMap::new(),
                finished: HashSet::new(),
                awaiting_node: HashSet::new(),
                waiting_static: HashMap::new(),
                next_attempts: HashMap::new(),
                children,
                shutting_down: false,
                handled: 0,
                config,
                sync,
            }
        })
    }

    /// Delete a stopped API pod for good (grace 0, its UID as precondition).
    fn finalize_deletion(&self, pod: &Pod, uid: PodUid) {
        let (name, namespace, _) = dockerlet_pod::spec::pod_identity(pod);
        let finalize = FinalizePodDeletion {
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid,
        };
        if let Some(source) = &self.children.api_source {
            source.do_send(finalize);
        }
    }

    fn node_name(&self) -> &str {
        &self.config.worker.node_name
    }

    fn start_worker(
        &self,
        pod: Arc<Pod>,
        termination: Option<Termination>,
        rejection: Option<Rejection>,
        next_attempts: std::collections::BTreeMap<String, u32>,
        ctx: &mut Context<Self>,
    ) -> Addr<PodWorker> {
        let me = ctx.address();
        let (status, probe) = (&self.children.status, &self.children.probe);
        let links = WorkerLinks {
            status: status.link(),
            finished: me.clone().recipient(),
            removed: status.link(),
            events: me.clone().recipient(),
            terminated: me.recipient(),
            watch: probe.link(),
            forget: probe.link(),
        };
        let mut worker = PodWorker::new(pod, self.sync.clone(), links).attempts_from(next_attempts);
        if let Some(rejection) = rejection {
            worker = worker.rejected(rejection);
        }
        match termination {
            Some(t) => worker.terminating(t.grace).start(),
            None => worker.start(),
        }
    }

    /// The Node to admit pods against: the API's, once seen, else the one registered.
    fn node(&self) -> Arc<Node> {
        self.config
            .mode
            .api()
            .and_then(|api| api.node_object())
            .unwrap_or_else(|| self.config.node.clone())
    }

    /// kubelet's predicate admission of a new pod on `node` against the pods admitted before
    /// it that still run ([`dockerlet_pod::node_fit`]): as kubelet's pod manager, a pod gone
    /// from its source no longer counts (one being deleted in the API does until it is gone),
    /// nor does one that finished.
    fn admit(&self, pod: &Pod, node: &Node) -> Option<Rejection> {
        if self.shutting_down {
            return Some(Rejection {
                reason: dockerlet_pod::shutdown::NOT_ADMITTED_REASON.to_string(),
                message: dockerlet_pod::shutdown::NOT_ADMITTED_MESSAGE.to_string(),
            });
        }
        let others: Vec<&Pod> = self
            .workers
            .values()
            .filter(|e| e.termination.is_none() && e.rejection.is_none() && !e.finished)
            .map(|e| e.pod.as_ref())
            .collect();
        dockerlet_pod::node_fit::admit(pod, node, &others).err()
    }

    /// A worker for a pod new to the node, once admitted. Refused by node affinity alone, with
    /// an API server, the Node is first read again (kubelet's `generalFilter`: the watch may
    /// lag a label just added) and the pod admitted against it; meanwhile it has no worker.
    fn add_pod(&mut self, pod: Arc<Pod>, ctx: &mut Context<Self>) {
        let uid = PodUid(pod.metadata.uid.clone().unwrap_or_default());
        if let Some(name) = static_full_name(&pod) {
            let terminating = self
                .workers
                .values()
                .any(|e| e.termination.is_some() && static_full_name(&e.pod).as_ref() == Some(&name));
            if terminating {
                tracing::info!(pod.uid = %uid, pod.name = %pod_ref(&pod), "static pod waits for its earlier version to stop");
                self.waiting_static.insert(name, uid);
                return;
            }
        }
        let rejection = self.admit(&pod, &self.node());
        let api = self.config.mode.api().cloned();
        match (rejection, api) {
            (Some(r), Some(api)) if r.reason == dockerlet_pod::node_fit::NODE_AFFINITY => {
                if !self.awaiting_node.insert(uid.clone()) {
                    return;
                }
                let fetch = async move { api.get_node().await };
                ctx.spawn(fetch.into_actor(self).map(move |fetched, act, ctx| {
                    act.awaiting_node.remove(&uid);
                    let Some(desired) = act.pods.get(&uid).map(|d| d.pod.clone()) else {
                        return;
                    };
                    if act.workers.contains_key(&uid) {
                        return;
                    }
                    let node = match fetched {
                        Ok(Some(node)) => Arc::new(node),
                        Ok(None) => act.node(),
                        Err(e) => {
                            tracing::warn!(pod.uid = %uid, error = %e, "cannot read the Node again for admission");
                            act.node()
                        }
                    };
                    let rejection = act.admit(&desired, &node);
                    act.add_worker_admitted(desired, None, rejection, ctx);
                }));
            }
            (rejection, _) => self.add_worker_admitted(pod, None, rejection, ctx),
        }
    }

    /// The desired pods without a worker yet, each with why, for the debug page.
    fn waiting_pods(&self) -> Vec<serde_json::Value> {
        let named = |uid: &PodUid| self.pods.get(uid).map(|d| pod_ref(&d.pod));
        let static_waits = self.waiting_static.iter().filter_map(|((ns, name), uid)| {
            Some(json!({
                "pod": named(uid)?,
                "uid": uid.0,
                "why": format!(
                    "an earlier version of static pod {ns}/{name} is still stopping; one version runs at a time, \
                     so this one starts when that one has stopped"
                ),
            }))
        });
        let node_waits = self.awaiting_node.iter().filter_map(|uid| {
            Some(json!({
                "pod": named(uid)?,
                "uid": uid.0,
                "why": "its node affinity does not match the Node as last watched; the Node is being read again \
                        before the pod is admitted or rejected",
            }))
        });
        static_waits.chain(node_waits).collect()
    }

    /// A worker that only terminates what runs of `pod` (no admission).
    fn add_terminating_worker(&mut self, pod: Arc<Pod>, termination: Termination, ctx: &mut Context<Self>) {
        self.add_worker_admitted(pod, Some(termination), None, ctx);
    }

    fn add_worker_admitted(
        &mut self,
        pod: Arc<Pod>,
        termination: Option<Termination>,
        rejection: Option<Rejection>,
        ctx: &mut Context<Self>,
    ) {
        let uid = PodUid(pod.metadata.uid.clone().unwrap_or_default());
        let next_attempts = self.next_attempts.remove(&uid).unwrap_or_default();
        let addr = self.start_worker(pod.clone(), termination, rejection.clone(), next_attempts, ctx);
        let entry = WorkerEntry {
            addr,
            restarts: 0,
            termination,
            pod,
            finished: rejection.is_some(),
            rejection,
        };
        self.workers.insert(uid, entry);
    }

    /// Re-create every child and worker whose mailbox closed (it panicked or stopped).
    fn watchdog(&mut self, ctx: &mut Context<Self>) {
        let mut restarted: Vec<(&'static str, String)> = Vec::new();
        for child in self.children.registry.restart_dead() {
            // The new instance starts empty: every worker tells it again what it needs.
            let workers = self.workers.values();
            match child.after {
                AfterRestart::Nothing => {}
                AfterRestart::ResendProbeTargets => workers.for_each(|w| w.addr.do_send(ResendProbeTargets)),
                AfterRestart::PublishStatus => workers.for_each(|w| w.addr.do_send(PublishStatus)),
            }
            restarted.push((child.kind, child.name.to_string()));
        }
        let dead: Vec<PodUid> = self
            .workers
            .iter()
            .filter(|(_, e)| !e.addr.connected())
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in dead {
            let entry = &self.workers[&uid];
            let (pod, termination, rejection) = (entry.pod.clone(), entry.termination, entry.rejection.clone());
            // Its containers are on Docker still: their attempts count on by themselves.
            let addr = self.start_worker(pod, termination, rejection, Default::default(), ctx);
            let entry = self.workers.get_mut(&uid).expect("listed above");
            entry.addr = addr;
            entry.restarts += 1;
            restarted.push(("PodWorker", pod_ref(&entry.pod)));
        }
        for (kind, name) in restarted {
            tracing::error!(actor = %kind, name = %name, "actor died; re-created it");
            self.recorder.note(
                "ActorRestarted",
                name.clone(),
                format!("{kind} {name} died and was re-created"),
            );
        }
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(WATCHDOG_PERIOD, |act, ctx| act.watchdog(ctx));
        tracing::info!(node = %self.node_name(), "supervisor started");
    }
}

impl Handler<SourcePodsChanged> for Supervisor {
    type Result = ();

    /// Merge a source's full pod set; act on what changed in the union.
    fn handle(&mut self, msg: SourcePodsChanged, ctx: &mut Self::Context) {
        self.handled += 1;
        let changes = self.pods.apply(msg);
        for pod in changes.removed {
            let span = tracing::info_span!("pod", pod.uid = %pod.uid, pod.name = %pod_ref(&pod.pod));
            let _enter = span.enter();
            tracing::info!(origin = %pod.origin, "pod removed from its source");
            self.finished.remove(&pod.uid);
            self.recorder
                .note("PodRemoved", pod_ref(&pod.pod), format!("removed from {}", pod.origin));
            if let Some(entry) = self.workers.get_mut(&pod.uid) {
                entry.termination = Some(Termination { grace: None });
                entry.addr.do_send(TerminatePod { grace_period: None });
            }
        }
        // kubelet admits new pods oldest first (HandlePodAdditions sorts by creation time).
        let mut upserted = changes.upserted;
        upserted.sort_by(|a, b| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(&a.pod).cmp(&created(&b.pod))
        });
        for pod in upserted {
            let shared = pod.pod.clone();
            match self.workers.get_mut(&pod.uid) {
                Some(entry) if entry.termination.is_none() => {
                    entry.pod = shared.clone();
                    entry.addr.do_send(UpdatePod { pod: shared });
                }
                // Still terminating an earlier incarnation: PodTerminated starts it again.
                Some(_) => {}
                None if self.finished.contains(&pod.uid) => self.finalize_deletion(&pod.pod, pod.uid.clone()),
                None => {
                    let span = tracing::info_span!("pod", pod.uid = %pod.uid, pod.name = %pod_ref(&pod.pod));
                    span.in_scope(|| tracing::info!(origin = %pod.origin, "pod added"));
                    self.recorder
                        .note("PodAdded", pod_ref(&pod.pod), format!("from {}", pod.origin));
                    self.add_pod(shared, ctx);
                }
            }
        }
    }
}

impl Handler<PodLifecycleEvent> for Supervisor {
    type Result = ();

    /// Wake the pod's worker.
    fn handle(&mut self, msg: PodLifecycleEvent, _: &mut Self::Context) {
        self.handled += 1;
        if msg.kind == LifecycleEventKind::ContainerRemoved {
            return; // kubelet: every event but ContainerRemoved triggers a sync
        }
        if let Some(entry) = self.workers.get(&msg.pod_uid) {
            entry.addr.do_send(SyncPod);
        }
    }
}

impl Handler<RelistCompleted> for Supervisor {
    type Result = ();

    /// Containers of pods no source wants, and no worker handles, are terminated — once every
    /// source has delivered, so a restarted agent kills nothing before its manifests are read.
    fn handle(&mut self, msg: RelistCompleted, ctx: &mut Self::Context) {
        self.handled += 1;
        if !self.pods.sources_ready() {
            return;
        }
        for uid in msg.pods {
            if self.pods.contains(&uid) || self.workers.contains_key(&uid) {
                continue;
            }
            tracing::info!(pod.uid = %uid, "removing containers of a pod no source wants");
            self.recorder.note(
                "OrphanRemoved",
                uid.to_string(),
                "containers of a pod no source wants are being removed".to_string(),
            );
            self.add_terminating_worker(Arc::new(orphan(&uid)), Termination { grace: None }, ctx);
        }
    }
}

/// A static pod's namespace and name (kubelet's full name), which one version at a time may
/// run under; `None` for API pods and orphans.
fn static_full_name(pod: &Pod) -> Option<(String, String)> {
    let source = dockerlet_pod::annotations::source(pod)?;
    if source == dockerlet_pod::annotations::SOURCE_API {
        return None;
    }
    let (name, namespace, _) = dockerlet_pod::spec::pod_identity(pod);
    Some((namespace.to_string(), name.to_string()))
}

/// A stand-in for a pod known only by the UID on its containers; the name is for logs.
fn orphan(uid: &PodUid) -> Pod {
    Pod {
        metadata: ObjectMeta {
            uid: Some(uid.0.clone()),
            name: Some(format!("orphan-{uid}")),
            ..Default::default()
        },
        ..Default::default()
    }
}

impl Handler<ProbeResultChanged> for Supervisor {
    type Result = ();

    /// Route a probe result to its pod's worker.
    fn handle(&mut self, msg: ProbeResultChanged, _: &mut Self::Context) {
        self.handled += 1;
        if let Some(entry) = self.workers.get(&msg.pod_uid) {
            entry.addr.do_send(msg);
        }
    }
}

impl Handler<PodFinished> for Supervisor {
    type Result = ();

    /// Note whether the pod finished: it then no longer counts at admission.
    fn handle(&mut self, msg: PodFinished, _: &mut Self::Context) {
        self.handled += 1;
        if let Some(entry) = self.workers.get_mut(&msg.uid) {
            entry.finished = entry.rejection.is_some() || msg.finished;
        }
    }
}

impl Handler<RecordEvent> for Supervisor {
    type Result = ();

    /// Keep the event for the debug page and, in cluster mode, write it to the API.
    fn handle(&mut self, msg: RecordEvent, ctx: &mut Self::Context) {
        self.handled += 1;
        let pod = self.pods.by_name(&msg.event.object).map(|p| p.pod.as_ref());
        if let Some(write) = self.recorder.record(msg.event, pod) {
            ctx.spawn(write.into_actor(self));
        }
    }
}

impl Handler<PodTerminated> for Supervisor {
    type Result = ();

    /// The worker is done; start a fresh one if the pod is wanted again meanwhile.
    fn handle(&mut self, msg: PodTerminated, ctx: &mut Self::Context) {
        self.handled += 1;
        if let Some(entry) = self.workers.remove(&msg.uid) {
            entry.addr.do_send(StopActor);
            // A newer version of a static pod that waited for this one starts now.
            let waiting = static_full_name(&entry.pod).and_then(|name| self.waiting_static.remove(&name));
            if let Some(next) = waiting.and_then(|uid| self.pods.get(&uid).map(|d| d.pod.clone())) {
                self.add_pod(next, ctx);
            }
        }
        self.recorder.forget(&msg.uid.0);
        let Some(desired) = self.pods.get(&msg.uid) else {
            return;
        };
        if desired.pod.metadata.deletion_timestamp.is_some() {
            // Deleted in the API and now stopped: delete it for good, as kubelet does.
            let pod = desired.pod.clone();
            self.finished.insert(msg.uid.clone());
            self.finalize_deletion(&pod, msg.uid);
            return;
        }
        // Wanted again under the same UID while it stopped: kubelet counts a restarted pod, and
        // its containers' restarts count on.
        self.next_attempts.insert(msg.uid.clone(), msg.next_attempts);
        let is_static =
            dockerlet_pod::annotations::source(&desired.pod) != Some(dockerlet_pod::annotations::SOURCE_API);
        self.sync
            .config
            .metrics
            .restarted_pods
            .get_or_create(&StaticLabel {
                r#static: if is_static { "true" } else { "false" },
            })
            .inc();
        let pod = desired.pod.clone();
        self.add_pod(pod, ctx);
    }
}

impl Handler<NodeShuttingDown> for Supervisor {
    type Result = ();

    /// The node shuts down, or the shutdown was cancelled.
    fn handle(&mut self, msg: NodeShuttingDown, _: &mut Self::Context) {
        self.handled += 1;
        self.shutting_down = msg.0;
    }
}

impl Handler<GetShutdownTargets> for Supervisor {
    type Result = MessageResult<GetShutdownTargets>;

    /// Every admitted pod that has not finished and is not being terminated already.
    fn handle(&mut self, _: GetShutdownTargets, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let targets = self
            .workers
            .iter()
            .filter(|(_, e)| e.termination.is_none() && e.rejection.is_none() && !e.finished)
            .map(|(uid, e)| ShutdownTarget {
                uid: uid.clone(),
                name: pod_ref(&e.pod),
                priority: dockerlet_pod::shutdown::pod_priority(&e.pod),
                termination_grace_seconds: e.pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds),
                worker: e.addr.clone().recipient(),
            })
            .collect();
        MessageResult(targets)
    }
}

/// The queries of the HTTP side and the NodeStatusActor, which hold the Supervisor's address
/// (it never changes, a child's does): each answered by one expression, a future of the answer.
macro_rules! answer {
    ($($message:ty => |$me:ident, $msg:ident| $answer:expr;)*) => {$(
        impl Handler<$message> for Supervisor {
            type Result = ResponseFuture<<$message as Message>::Result>;

            fn handle(&mut self, $msg: $message, _: &mut Self::Context) -> Self::Result {
                self.handled += 1;
                let $me = &*self;
                Box::pin($answer)
            }
        }
    )*};
}

answer! {
    GetPods => |me, msg| me.children.status.query(msg, None);
    // The PressureActor's last reading; none while it is being re-created.
    GetNodePressure => |me, msg| me.children.pressure.query(msg, Some(QUERY_TIMEOUT));
    // The StatsActor's last summary, or view (the summary with its containers, for cAdvisor's
    // labels); none before its first pass, while it is being re-created, or without one.
    GetStatsSummary => |me, msg| query_some(me.children.stats.as_ref(), msg);
    GetStatsView => |me, msg| query_some(me.children.stats.as_ref(), msg);
    // From the pod cache (no Docker call).
    GetRunningPods => |me, _msg| std::future::ready(me.sync.cache.running_pods());
    GetPodSandbox => |me, msg| std::future::ready(me.sync.cache.newest_sandbox(&msg.uid));
    GetHealth => |me, msg| health(me.shutting_down, &me.children.pleg, msg);
}

/// Ask `child`, if there is one, within [`QUERY_TIMEOUT`]; none when it does not answer.
fn query_some<A, M, T>(child: Option<&Child<A>>, msg: M) -> impl std::future::Future<Output = Option<T>>
where
    A: Actor<Context = Context<A>> + Handler<GetActorState> + Handler<Panic> + Handler<M>,
    M: Message<Result = Option<T>> + Send + 'static,
    T: Send + 'static,
{
    let asked = child.map(|c| c.query(msg, Some(QUERY_TIMEOUT)));
    async move { asked?.await }
}

/// Not healthy while the node shuts down; otherwise the PLEG's health, unhealthy when it does
/// not answer.
fn health(shutting_down: bool, pleg: &Child<PlegActor>, msg: GetHealth) -> impl std::future::Future<Output = Health> {
    let pleg = pleg.addr();
    async move {
        if shutting_down {
            return Health {
                healthy: false,
                reason: Some(dockerlet_pod::shutdown::NOT_READY_MESSAGE.to_string()),
            };
        }
        match tokio::time::timeout(QUERY_TIMEOUT, pleg.send(msg)).await {
            Ok(Ok(health)) => health,
            _ => Health {
                healthy: false,
                reason: Some("PLEG is not responding".to_string()),
            },
        }
    }
}

impl Handler<GetDebugSnapshot> for Supervisor {
    type Result = ResponseFuture<DebugSnapshot>;

    /// Every actor's own account of itself, gathered concurrently.
    fn handle(&mut self, _: GetDebugSnapshot, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let own = ActorState {
            kind: "Supervisor".to_string(),
            name: "supervisor".to_string(),
            messages_handled: self.handled,
            restarts: 0,
            last_error: None,
            detail: json!({
                "desired_pods": self.pods.len(),
                "workers": self.workers.len(),
                "sources_ready": self.pods.sources_ready(),
                // Desired pods that have no worker yet, and why.
                "waiting_pods": self.waiting_pods(),
            }),
            view: None,
        };
        let mut queries = self.children.registry.states();
        let mut workers: Vec<_> = self.workers.values().map(|e| (pod_ref(&e.pod), e)).collect();
        workers.sort_by(|a, b| a.0.cmp(&b.0));
        queries.extend(
            workers
                .into_iter()
                .map(|(_, e)| -> futures::future::BoxFuture<'static, _> { Box::pin(ask(e.addr.clone(), e.restarts)) }),
        );
        let mut snapshot = DebugSnapshot {
            node_name: self.node_name().to_string(),
            actors: vec![own],
            manifest_errors: self.pods.errors(),
            events: self.recorder.recent(),
        };
        Box::pin(async move {
            let states = futures::future::join_all(queries).await;
            snapshot.actors.extend(states.into_iter().flatten());
            snapshot
        })
    }
}

impl Handler<InjectFault> for Supervisor {
    type Result = Result<(), FaultError>;

    /// Make the target panic in a handler (only when fault injection is enabled).
    fn handle(&mut self, msg: InjectFault, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        if !self.config.fault_injection {
            return Err(FaultError::Disabled);
        }
        tracing::warn!(target = ?msg.target, "fault injection: making an actor panic");
        let found = match &msg.target {
            FaultTarget::Actor(name) => self.children.registry.panic(name),
            FaultTarget::PodWorker(uid) => self.workers.get(uid).inspect(|e| e.addr.do_send(Panic)).is_some(),
        };
        found.then_some(()).ok_or(FaultError::NoSuchActor(msg.target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_messages::runtime::{ContainerRole, RuntimeState};
    use dockerlet_messages::source::DesiredPod;
    use dockerlet_pod::backoff::BackoffConfig;
    use dockerlet_runtime::fake::{Call, FakeRuntime};
    use dockerlet_runtime::Containers;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    use crate::test_support::{eventually, eventually_async};

    const NODE: &str = "n1";

    fn supervisor(runtime: &FakeRuntime) -> Addr<Supervisor> {
        Supervisor::start(config(), Arc::new(runtime.clone()))
    }

    /// A node with plenty of memory and no filesystem readings.
    fn roomy_node() -> PressureConfig {
        observing(8 << 30)
    }

    fn observing(memory_available: i64) -> PressureConfig {
        PressureConfig {
            thresholds: dockerlet_host::signals::Thresholds::default(),
            transition_period: Duration::from_secs(300),
            period: Duration::from_millis(50),
            observe: Arc::new(move || dockerlet_host::signals::Observation {
                memory_capacity: 16 << 30,
                memory_available,
                nodefs: None,
                imagefs: None,
                pids: None,
            }),
        }
    }

    fn config() -> SupervisorConfig {
        let worker = PodWorkerConfig {
            node_name: NODE.into(),
            host_ip: "10.0.0.1".into(),
            sandbox_image: "pause".into(),
            backoff: BackoffConfig {
                initial: Duration::from_millis(100),
                max: Duration::from_millis(400),
            },
            sync_frequency: Duration::from_secs(60),
            node_memory_bytes: 1 << 30,
            allocatable: Default::default(),
            min_oom_score_adj: -1000,
            root_dir: std::env::temp_dir(),
            api: None,
            log_links: None,
            // No node resolv.conf: the tests do not depend on the machine's.
            dns: dockerlet_pod::dns::ClusterDns {
                resolv_conf: None,
                ..Default::default()
            },
            security: Default::default(),
            metrics: Default::default(),
            cgroup_naming: dockerlet_pod::cgroup::CgroupNaming::new(
                "/",
                false,
                dockerlet_pod::cgroup::CgroupDriver::Cgroupfs,
            )
            .expect("the root names"),
            single_process_oom_kill: false,
            cgroups: None,
            image_pulls: Default::default(),
            cpu_cfs_quota: true,
        };
        SupervisorConfig {
            worker: Arc::new(worker),
            manifest_path: None,
            file_check_frequency: Duration::from_secs(20),
            relist_period: Duration::from_millis(50),
            fault_injection: true,
            mode: Mode::Standalone,
            manifest_url: None,
            pressure: roomy_node(),
            oom: None,
            stats: None,
            system_cgroups: None,
            events: EventLimits::default(),
            health: HealthCell::default(),
            node: Arc::new(Node {
                metadata: ObjectMeta {
                    name: Some(NODE.into()),
                    ..Default::default()
                },
                ..Default::default()
            }),
            node_shutdown: None,
        }
    }

    fn desired(name: &str, uid: &str, grace: i64) -> DesiredPod {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    image: Some("img:1".into()),
                    ..Default::default()
                }],
                termination_grace_period_seconds: Some(grace),
                ..Default::default()
            }),
            status: None,
        };
        DesiredPod {
            uid: PodUid(uid.into()),
            pod: Arc::new(pod),
            origin: "test".into(),
        }
    }

    fn running(runtime: &FakeRuntime) -> Vec<(String, ContainerRole)> {
        let state = runtime.state.lock().unwrap();
        state
            .containers
            .values()
            .filter(|c| c.observed.state == RuntimeState::Running)
            .map(|c| (c.observed.id.0.clone(), c.observed.role))
            .collect()
    }

    /// A pod from a source gets a sandbox and its container; removing it from the source stops
    /// and removes everything.
    #[actix::test]
    async fn pods_follow_their_source() {
        tokio::time::pause();
        let runtime = FakeRuntime::with_images(&["img:1"]);
        let sup = supervisor(&runtime);
        let pods = vec![desired("web", "u1", 0)];
        sup.do_send(SourcePodsChanged {
            source: PodSource::File,
            pods,
            errors: vec![],
        });
        eventually("sandbox and container running", || running(&runtime).len() == 2).await;
        let listed = sup.send(GetPods).await.unwrap();
        assert_eq!(listed[0].status.as_ref().unwrap().phase.as_deref(), Some("Running"));
        sup.do_send(SourcePodsChanged {
            source: PodSource::File,
            pods: vec![],
            errors: vec![],
        });
        eventually("all containers removed", || {
            runtime.state.lock().unwrap().containers.is_empty()
        })
        .await;
        assert!(sup.send(GetPods).await.unwrap().is_empty());
        let stops = runtime.calls().iter().filter(|c| matches!(c, Call::Stop(_))).count();
        assert_eq!(stops, 2, "{:?}", runtime.calls());
    }

    /// Pods are admitted oldest first against the node's allocatable less the pods admitted
    /// before them: the one that does not fit fails with kubelet's reason and runs nothing,
    /// and once the first pod is gone a new one fits again.
    #[actix::test]
    async fn pods_that_do_not_fit_beside_the_admitted_ones_are_rejected() {
        use k8s_openapi::api::core::v1::{NodeStatus, ResourceRequirements};
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let runtime = FakeRuntime::with_images(&["img:1"]);
        let mut config = config();
        config.node = Arc::new(Node {
            metadata: ObjectMeta {
                name: Some(NODE.into()),
                ..Default::default()
            },
            status: Some(NodeStatus {
                allocatable: Some([("cpu".to_string(), Quantity("2".into()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let sup = Supervisor::start(config, Arc::new(runtime.clone()));
        let wanting = |name: &str, uid: &str, age: i64| {
            let mut d = desired(name, uid, 0);
            let pod = Arc::make_mut(&mut d.pod);
            pod.metadata.creation_timestamp = Some(Time(jiff::Timestamp::from_second(1_000_000 + age).unwrap()));
            pod.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
                requests: Some([("cpu".to_string(), Quantity("1500m".into()))].into()),
                ..Default::default()
            });
            d
        };
        // Listed newest first: the older pod is still the one admitted.
        sup.do_send(SourcePodsChanged {
            source: PodSource::File,
            pods: vec![wanting("second", "u2", 2), wanting("first", "u1", 1)],
            errors: vec![],
        });
        eventually("the first pod runs", || running(&runtime).len() == 2).await;
        let phase_of = |pods: &[Pod], name: &str| {
            let pod = pods.iter().find(|p| p.metadata.name.as_deref() == Some(name)).cloned();
            pod.and_then(|p| p.status).unwrap_or_default()
        };
        let mut rejected = Default::default();
        for _ in 0..200 {
            rejected = phase_of(&sup.send(GetPods).await.unwrap(), "second");
            if rejected.phase.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(rejected.phase.as_deref(), Some("Failed"));
        assert_eq!(rejected.reason.as_deref(), Some("OutOfcpu"));
        assert_eq!(
            rejected.message.as_deref(),
            Some(
                "Pod was rejected: Node didn't have enough resource: cpu, requested: 1500, used: 1500, capacity: 2000"
            )
        );
        assert_eq!(running(&runtime).len(), 2, "nothing of the rejected pod runs");

        sup.do_send(SourcePodsChanged {
            source: PodSource::File,
            pods: vec![wanting("third", "u3", 3)],
            errors: vec![],
        });
        eventually("the third pod runs once the first is gone", || {
            let state = runtime.state.lock().unwrap();
            state.containers.values().any(|c| c.observed.pod_uid.0 == "u3")
        })
        .await;
    }

    /// An edited static pod (same namespace and name, a new UID) starts only once its earlier
    /// version has stopped and its containers are gone, as kubelet runs one at a time.
    #[actix::test]
    async fn a_static_pods_new_version_waits_for_the_old_one_to_stop() {
        let runtime = FakeRuntime::with_images(&["img:1"]);
        let sup = supervisor(&runtime);
        let version = |uid: &str| {
            let mut d = desired("web", uid, 1);
            let pod = Arc::make_mut(&mut d.pod);
            pod.metadata.annotations = Some(
                [(
                    dockerlet_pod::annotations::CONFIG_SOURCE.to_string(),
                    "file".to_string(),
                )]
                .into(),
            );
            d
        };
        sup.do_send(SourcePodsChanged {
            source: PodSource::File,
            pods: vec![version("u1")],
            errors: vec![],
        });
        eventually("the first version runs", || running(&runtime).len() == 2).await;
        let old: Vec<String> = running(&runtime).into_iter().map(|(id, _)| id).collect();
        // The old version takes a while to stop.
        runtime.state.lock().unwrap().stop_delay = Duration::from_millis(500);
        sup.do_send(SourcePodsChanged {
            source: PodSource::File,
            pods: vec![version("u2")],
            errors: vec![],
        });
        // Meanwhile the debug page says why the new version has no worker.
        let snapshot = sup.send(GetDebugSnapshot).await.unwrap();
        let waiting = &snapshot.actors[0].detail["waiting_pods"];
        assert_eq!(waiting[0]["uid"], "u2", "{waiting}");
        assert!(
            waiting[0]["why"].as_str().unwrap().contains("still stopping"),
            "{waiting}"
        );
        eventually("the second version runs", || {
            let state = runtime.state.lock().unwrap();
            state
                .containers
                .values()
                .filter(|c| c.observed.pod_uid.0 == "u2" && c.observed.state == RuntimeState::Running)
                .count()
                == 2
        })
        .await;
        let calls = runtime.calls();
        let snapshot = sup.send(GetDebugSnapshot).await.unwrap();
        assert_eq!(
            snapshot.actors[0].detail["waiting_pods"],
            json!([]),
            "nothing waits any more"
        );
        let last_removal = calls
            .iter()
            .rposition(|c| matches!(c, Call::Remove(id) if old.contains(&id.0)))
            .expect("the old containers removed");
        let first_create = calls
            .iter()
            .position(|c| matches!(c, Call::Create(name) if name.contains("_u2_")))
            .expect("the new containers created");
        assert!(last_removal < first_create, "{calls:?}");
    }

    /// A PodWorker and the PlegActor that panic are re-created; the pod's containers are not
    /// restarted and the debug snapshot counts the restarts.
    #[actix::test]
    async fn panicking_actors_are_recreated_without_restarting_pods() {
        tokio::time::pause();
        let runtime = FakeRuntime::with_images(&["img:1"]);
        let sup = supervisor(&runtime);
        sup.do_send(SourcePodsChanged {
            source: PodSource::File,
            pods: vec![desired("web", "u1", 0)],
            errors: vec![],
        });
        eventually("pod running", || running(&runtime).len() == 2).await;
        let before = running(&runtime);
        let creates_before = runtime.calls().iter().filter(|c| matches!(c, Call::Create(_))).count();

        sup.send(InjectFault {
            target: FaultTarget::PodWorker(PodUid("u1".into())),
        })
        .await
        .unwrap()
        .unwrap();
        sup.send(InjectFault {
            target: FaultTarget::Actor("pleg".into()),
        })
        .await
        .unwrap()
        .unwrap();
        tokio::time::sleep(WATCHDOG_PERIOD * 4).await;

        let snapshot = sup.send(GetDebugSnapshot).await.unwrap();
        let restarts = |kind: &str| snapshot.actors.iter().find(|a| a.kind == kind).map(|a| a.restarts);
        assert_eq!(restarts("PodWorker"), Some(1));
        assert_eq!(restarts("PlegActor"), Some(1));
        assert!(snapshot.events.iter().any(|e| e.reason == "ActorRestarted"));
        assert_eq!(running(&runtime), before);
        let creates_after = runtime.calls().iter().filter(|c| matches!(c, Call::Create(_))).count();
        assert_eq!(creates_after, creates_before, "{:?}", runtime.calls());

        // A re-created StatusActor gets every pod's status again.
        sup.send(InjectFault {
            target: FaultTarget::Actor("status".into()),
        })
        .await
        .unwrap()
        .unwrap();
        tokio::time::sleep(WATCHDOG_PERIOD * 4).await;
        let pods = sup.send(GetPods).await.unwrap();
        assert_eq!(
            pods.len(),
            1,
            "status re-published after the StatusActor was re-created"
        );
        assert_eq!(pods[0].status.as_ref().unwrap().phase.as_deref(), Some("Running"));

        // The re-created actors still work: a container that dies is restarted.
        let app = before
            .iter()
            .find(|(_, role)| *role == ContainerRole::App)
            .unwrap()
            .0
            .clone();
        runtime.exit(&app, 1);
        eventually("app restarted", || {
            running(&runtime).len() == 2 && !running(&runtime).iter().any(|(id, _)| id == &app)
        })
        .await;
    }

    async fn orphan_container(runtime: &FakeRuntime) {
        let orphan = desired("old", "u9", 0).pod;
        let id = runtime
            .create_container(dockerlet_pod::container::sandbox_spec(&orphan, NODE, "pause", 0, None))
            .await
            .unwrap();
        runtime.start_container(&id).await.unwrap();
    }

    /// With no source configured, containers of a pod nobody wants (its manifest vanished while
    /// no agent ran) are removed at the first relist.
    #[actix::test]
    async fn orphaned_containers_are_removed_once_sources_are_ready() {
        tokio::time::pause();
        let runtime = FakeRuntime::with_images(&["img:1"]);
        orphan_container(&runtime).await;
        let sup = supervisor(&runtime);
        eventually("orphan removed", || runtime.state.lock().unwrap().containers.is_empty()).await;
        let snapshot = sup.send(GetDebugSnapshot).await.unwrap();
        assert!(snapshot.events.iter().any(|e| e.reason == "OrphanRemoved"));
    }

    /// An agent restarted while one of its sources is slow kills nothing: the orphan stays
    /// through many relists until every source has delivered, then goes.
    #[actix::test]
    async fn orphans_are_kept_until_every_source_has_delivered() {
        tokio::time::pause();
        let runtime = FakeRuntime::with_images(&["img:1"]);
        orphan_container(&runtime).await;
        let mut config = config();
        // A URL source that never answers (nothing listens on port 1), and a file source.
        config.manifest_url = Some(HttpSourceConfig {
            url: "http://127.0.0.1:1/pods".into(),
            headers: vec![],
            frequency: Duration::from_secs(60),
        });
        let empty = tempfile::tempdir().unwrap();
        config.manifest_path = Some(empty.path().to_path_buf());
        let sup = Supervisor::start(config, Arc::new(runtime.clone()));
        // Six relists at 50 ms, the file source delivered, the URL source not.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let snapshot = sup.send(GetDebugSnapshot).await.unwrap();
        assert_eq!(snapshot.actors[0].detail["sources_ready"], false);
        assert_eq!(
            running(&runtime).len(),
            1,
            "the orphan must survive: {:?}",
            runtime.calls()
        );
        sup.do_send(SourcePodsChanged {
            source: PodSource::Http,
            pods: vec![],
            errors: vec![],
        });
        eventually("orphan removed", || runtime.state.lock().unwrap().containers.is_empty()).await;
    }

    /// A standalone node (no API server) observes the eviction signals too: the PressureActor
    /// reports MemoryPressure on /debug/actors and to GetNodePressure.
    #[actix::test]
    async fn standalone_node_observes_pressure() {
        tokio::time::pause();
        let runtime = FakeRuntime::with_images(&["img:1"]);
        let mut config = config();
        config.pressure = observing(50 << 20);
        let sup = Supervisor::start(config, Arc::new(runtime.clone()));
        eventually_async("MemoryPressure observed", || {
            let sup = sup.clone();
            async move { !sup.send(GetNodePressure).await.unwrap().conditions.is_empty() }
        })
        .await;
        let pressure = sup.send(GetNodePressure).await.unwrap();
        assert_eq!(pressure.conditions, vec![dockerlet_messages::node::Pressure::Memory]);
        let snapshot = sup.send(GetDebugSnapshot).await.unwrap();
        let actor = snapshot
            .actors
            .iter()
            .find(|a| a.kind == "PressureActor")
            .expect("listed");
        assert_eq!(actor.detail["conditions"], json!(["MemoryPressure"]));
    }
}
