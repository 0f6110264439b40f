//! Supervisor: the root actor, a registry plus a pod manager. It owns the [`PodManager`] (the
//! desired pods merged from every source, admission, and which pod has a PodWorker), starts one
//! PodWorker per pod UID, routes messages by pod UID, answers the HTTP side's queries, and
//! re-creates any child that dies — a panicking handler included ([`crate::registry`]).
//!
//! | Message                        | From                  | Effect                                       |
//! |--------------------------------|-----------------------|----------------------------------------------|
//! | SourcePodsChanged              | FileSource, HttpSource, ApiSource | the pod manager merges; start, update or terminate workers |
//! | PodLifecycleEvent              | PlegActor             | `SyncPod` to that pod's worker               |
//! | RelistCompleted                | PlegActor             | terminate containers of pods nobody wants (once every source delivered) |
//! | PodFinished                    | PodWorker             | a finished pod no longer counts at admission |
//! | PodTerminated                  | PodWorker             | forget the worker (or restart it if the pod came back); finalize an API deletion |
//! | ProbeResultChanged             | ProbeActor            | forward to that pod's worker                 |
//! | NodeShuttingDown, GetShutdownTargets | NodeShutdownActor | reject new pods; the pods to stop           |
//! | GetPods                        | HTTP `/pods`          | ask the StatusActor                          |
//! | GetHealth                      | NodeStatusActor       | ask the PlegActor (unhealthy while the node shuts down) |
//! | GetNodePressure                | NodeStatusActor       | ask the EvictionActor                        |
//! | NodePressureChanged, GetEvictionCandidates | EvictionActor | admit against the pressure; the pods it may evict |
//! | GetKeptPods                    | ContainerGcActor      | the pod manager's desired pods and workers   |
//! | GetStatsSummary, GetStatsView  | HTTP `/stats/summary`, `/metrics/resource`, `/metrics/cadvisor` | ask the StatsActor |
//! | GetPodSandbox, GetRunningPods  | HTTP `/portForward/…`, `/runningpods/` | the pod cache (no Docker call) |
//! | GetDebugSnapshot               | HTTP `/debug/actors`  | ask every actor for its state                |
//! | InjectFault                    | HTTP (tests)          | make an actor panic                          |
//! | every 250 ms                   | self                  | watchdog: re-create dead actors              |
//!
//! The actor graph is [`graph`]: every long-lived child and its settings, in start order, and the
//! registry that keeps them alive. A PodWorker sends its statuses, probe targets and events
//! straight to the StatusActor, the ProbeActor and the EventRecorder through
//! [`Link`](crate::registry::Link)s, which always reach the current instance (the ProbeActor and
//! the OomWatcherActor send their events the same way); what needs a pod's worker goes through
//! the Supervisor, which routes by pod UID. The Supervisor's own notes (pods added and removed,
//! orphans, actors re-created) go to the EventRecorder too. A
//! re-created actor rebuilds its state from Docker (a PodWorker's first sync reads the pod's
//! containers, PLEG's first relist reads them all), or is told it again after the restart
//! ([`AfterRestart`]).

mod graph;
mod introspection;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use dockerlet_messages::debug::{
    EventSubject, EventType, ForgetPodEvents, GetActorState, GetHealth, Health, Panic, RecordEvent,
};
use dockerlet_messages::gc::GetKeptPods;
use dockerlet_messages::node::{
    EvictionCandidate, GetEvictionCandidates, GetNodeImages, GetNodePressure, NodePressureChanged,
};
use dockerlet_messages::pleg::{LifecycleEventKind, PodLifecycleEvent, RelistCompleted};
use dockerlet_messages::probe::{ProbeResultChanged, ResendProbeTargets};
use dockerlet_messages::source::SourcePodsChanged;
use dockerlet_messages::stats::{GetStatsSummary, GetStatsView};
use dockerlet_messages::status::{GetPodSandbox, GetPods, GetRunningPods};
use dockerlet_messages::worker::{
    GetShutdownTargets, NodeShuttingDown, PodFinished, PodTerminated, PublishStatus, RuntimeBack, ShutdownTarget,
    SyncPod,
};
use dockerlet_messages::PodUid;
use dockerlet_runtime::ContainerRuntime;
use graph::Children;
pub use graph::{Mode, SupervisorConfig};

use crate::pleg::PlegActor;
use crate::pod_cache::PodCache;
use crate::pod_manager::{Effect, PodManager};
use crate::pod_worker::{PodWorker, SyncContext};
use crate::registry::{AfterRestart, Child, QUERY_TIMEOUT};

/// How often the watchdog looks for dead children.
const WATCHDOG_PERIOD: Duration = Duration::from_millis(250);

/// The root actor.
pub struct Supervisor {
    /// Settings.
    config: SupervisorConfig,
    /// The pod cache the PLEG fills (`GetRunningPods`, `GetPodSandbox`).
    cache: Arc<PodCache>,
    /// The desired pods and their workers.
    pods: PodManager<Addr<PodWorker>>,
    /// Every other child.
    children: Children,
    /// Messages handled.
    handled: u64,
}

impl Supervisor {
    /// Start the supervisor; its children start with it.
    pub fn start(config: SupervisorConfig, runtime: Arc<dyn ContainerRuntime>) -> Addr<Supervisor> {
        Supervisor::create(|ctx| {
            let cache = Arc::new(PodCache::default());
            let children = Children::start(&config, &runtime, &cache, ctx.address());
            let sync = SyncContext::new(runtime, cache.clone(), config.worker.clone());
            let links = children.worker_links(ctx.address());
            let pods = PodManager::new(
                config.sources(),
                config.node.clone(),
                config.mode.api().cloned(),
                config.worker.metrics.clone(),
                Box::new(move |start| graph::start_worker(&sync, &links, start)),
            );
            Supervisor {
                cache,
                pods,
                children,
                handled: 0,
                config,
            }
        })
    }

    /// Do what the pod manager asks.
    fn run(&mut self, effects: Vec<Effect>, ctx: &mut Context<Self>) {
        for effect in effects {
            match effect {
                Effect::Note {
                    reason,
                    object,
                    message,
                } => self.note(reason, object, message),
                Effect::Finalize(finalize) => {
                    if let Some(source) = &self.children.api_source {
                        source.do_send(finalize);
                    }
                }
                Effect::ReadNode(uid) => self.read_node(uid, ctx),
            }
        }
    }

    /// Read the Node again for `uid`'s admission (kubelet's `generalFilter`: the watch may lag a
    /// label just added).
    fn read_node(&mut self, uid: PodUid, ctx: &mut Context<Self>) {
        let Some(api) = self.config.mode.api().cloned() else {
            return;
        };
        let fetch = async move { api.get_node().await };
        ctx.spawn(fetch.into_actor(self).map(move |fetched, act, ctx| {
            let node = fetched.unwrap_or_else(|e| {
                tracing::warn!(pod.uid = %uid, error = %e, "cannot read the Node again for admission");
                None
            });
            let effects = act.pods.node_read(&uid, node.map(Arc::new));
            act.run(effects, ctx);
        }));
    }

    /// Keep a note about `object` (a pod added or removed, an orphan, an actor re-created) on the
    /// debug page.
    fn note(&self, reason: &str, object: String, message: String) {
        let event = RecordEvent::about(EventSubject::Other(object), EventType::Normal, reason, message);
        self.children.events.do_send(event);
    }

    /// Re-create every child and worker whose mailbox closed (it panicked or stopped).
    fn watchdog(&mut self) {
        let mut restarted: Vec<(&'static str, String)> = Vec::new();
        for child in self.children.registry.restart_dead() {
            // The new instance starts empty: every worker tells it again what it needs.
            let workers = self.pods.workers().map(|(_, e)| &e.worker);
            match child.after {
                AfterRestart::Nothing => {}
                AfterRestart::ResendProbeTargets => workers.for_each(|w| w.do_send(ResendProbeTargets)),
                AfterRestart::PublishStatus => workers.for_each(|w| w.do_send(PublishStatus)),
            }
            restarted.push((child.kind, child.name.to_string()));
        }
        restarted.extend(self.pods.restart_dead().into_iter().map(|name| ("PodWorker", name)));
        for (kind, name) in restarted {
            tracing::error!(actor = %kind, name = %name, "actor died; re-created it");
            self.note(
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
        ctx.run_interval(WATCHDOG_PERIOD, |act, _| act.watchdog());
        tracing::info!(node = %self.config.worker.node_name, "supervisor started");
    }
}

impl Handler<SourcePodsChanged> for Supervisor {
    type Result = ();

    /// Merge a source's full pod set; act on what changed in the union.
    fn handle(&mut self, msg: SourcePodsChanged, ctx: &mut Self::Context) {
        self.handled += 1;
        let effects = self.pods.apply(msg);
        self.run(effects, ctx);
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
        if let Some(worker) = self.pods.worker(&msg.pod_uid) {
            worker.do_send(SyncPod);
        }
    }
}

impl Handler<RelistCompleted> for Supervisor {
    type Result = ();

    /// Containers of pods no source wants, and no worker handles, are terminated (once every
    /// source has delivered).
    /// When the engine answers again after failed relists, every worker syncs at once.
    fn handle(&mut self, msg: RelistCompleted, ctx: &mut Self::Context) {
        self.handled += 1;
        if msg.runtime_back {
            tracing::info!("the container runtime answers again: every pod syncs now");
            for (_, entry) in self.pods.workers() {
                entry.worker.do_send(RuntimeBack);
            }
        }
        let effects = self.pods.relisted(msg.pods);
        self.run(effects, ctx);
    }
}

impl Handler<ProbeResultChanged> for Supervisor {
    type Result = ();

    /// Route a probe result to its pod's worker.
    fn handle(&mut self, msg: ProbeResultChanged, _: &mut Self::Context) {
        self.handled += 1;
        if let Some(worker) = self.pods.worker(&msg.pod_uid) {
            worker.do_send(msg);
        }
    }
}

impl Handler<PodFinished> for Supervisor {
    type Result = ();

    /// Note whether the pod finished: it then no longer counts at admission.
    fn handle(&mut self, msg: PodFinished, _: &mut Self::Context) {
        self.handled += 1;
        self.pods.finished(&msg.uid, msg.finished);
    }
}

impl Handler<PodTerminated> for Supervisor {
    type Result = ();

    /// The worker is done; the pod manager starts a fresh one if the pod is wanted again.
    fn handle(&mut self, msg: PodTerminated, ctx: &mut Self::Context) {
        self.handled += 1;
        let effects = self.pods.terminated(&msg.uid, msg.next_attempts);
        self.children.events.do_send(ForgetPodEvents { uid: msg.uid.clone() });
        self.run(effects, ctx);
    }
}

impl Handler<NodeShuttingDown> for Supervisor {
    type Result = ();

    /// The node shuts down (new pods are rejected, the Node is not Ready), or the shutdown was
    /// cancelled.
    fn handle(&mut self, msg: NodeShuttingDown, _: &mut Self::Context) {
        self.handled += 1;
        self.pods.set_shutting_down(msg.0);
    }
}

impl Handler<NodePressureChanged> for Supervisor {
    type Result = ();

    /// The pressure conditions changed: admission follows them.
    fn handle(&mut self, msg: NodePressureChanged, _: &mut Self::Context) {
        self.handled += 1;
        self.pods.set_pressure(msg.0);
    }
}

impl Handler<GetEvictionCandidates> for Supervisor {
    type Result = MessageResult<GetEvictionCandidates>;

    /// Every admitted pod that runs (not finished, not rejected, not being terminated).
    fn handle(&mut self, _: GetEvictionCandidates, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let candidates = self
            .pods
            .workers()
            .filter(|(_, e)| e.running())
            .map(|(_, e)| EvictionCandidate {
                pod: e.pod.clone(),
                id: e.id.clone(),
                worker: e.worker.clone().recipient(),
            })
            .collect();
        MessageResult(candidates)
    }
}

impl Handler<GetShutdownTargets> for Supervisor {
    type Result = MessageResult<GetShutdownTargets>;

    /// Every admitted pod that has not finished and is not being terminated already.
    fn handle(&mut self, _: GetShutdownTargets, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let targets = self
            .pods
            .workers()
            .filter(|(_, e)| e.running())
            .map(|(uid, e)| ShutdownTarget {
                uid: uid.clone(),
                name: e.id.to_string(),
                priority: dockerlet_pod::shutdown::pod_priority(&e.pod),
                termination_grace_seconds: e.pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds),
                worker: e.worker.clone().recipient(),
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
    // The EvictionActor's last reading; none while it is being re-created.
    GetNodePressure => |me, msg| me.children.eviction.query(msg, Some(QUERY_TIMEOUT));
    // The StatsActor's last summary, or view (the summary with its containers, for cAdvisor's
    // labels); none before its first pass, while it is being re-created, or without one.
    GetStatsSummary => |me, msg| query_some(me.children.stats.as_ref(), msg);
    GetStatsView => |me, msg| query_some(me.children.stats.as_ref(), msg);
    // The ImageGcActor's last listing; none before it, while it is re-created, or without one.
    GetNodeImages => |me, msg| query_some(me.children.image_gc.as_ref(), msg);
    // From the pod cache (no Docker call).
    GetRunningPods => |me, _msg| std::future::ready(me.cache.running_pods());
    GetPodSandbox => |me, msg| std::future::ready(me.cache.newest_sandbox(&msg.uid));
    // The pod manager's desired pods and workers, for container GC.
    GetKeptPods => |me, _msg| std::future::ready(me.pods.kept_pods());
    GetHealth => |me, msg| health(me.pods.shutting_down(), &me.children.pleg, msg);
}

/// Ask `child`, if there is one, within [`QUERY_TIMEOUT`]; none when it does not answer.
fn query_some<A, M, T>(child: Option<&Child<A>>, msg: M) -> impl Future<Output = Option<T>>
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
fn health(shutting_down: bool, pleg: &Child<PlegActor>, msg: GetHealth) -> impl Future<Output = Health> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::EvictionConfig;
    use crate::pod_worker::PodWorkerConfig;
    use crate::source::http::HttpSourceConfig;
    use dockerlet_kube::recorder::EventLimits;
    use dockerlet_messages::debug::{FaultTarget, GetDebugSnapshot, HealthCell, InjectFault};
    use dockerlet_messages::runtime::{ContainerRole, RuntimeState};
    use dockerlet_messages::source::DesiredPod;
    use dockerlet_messages::source::PodSource;
    use dockerlet_pod::backoff::BackoffConfig;
    use dockerlet_runtime::fake::{Call, FakeRuntime};
    use dockerlet_runtime::Containers;
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    use crate::test_support::{eventually, eventually_async};

    const NODE: &str = "n1";

    fn supervisor(runtime: &FakeRuntime) -> Addr<Supervisor> {
        Supervisor::start(config(), Arc::new(runtime.clone()))
    }

    /// A node with plenty of memory and no filesystem readings.
    fn roomy_node() -> EvictionConfig {
        observing(8 << 30)
    }

    fn observing(memory_available: i64) -> EvictionConfig {
        EvictionConfig {
            node_name: NODE.into(),
            thresholds: dockerlet_host::thresholds::EvictionSettings::hard_only(
                dockerlet_host::signals::Thresholds::default(),
            ),
            transition_period: Duration::from_secs(300),
            period: Duration::from_millis(50),
            observe: Arc::new(move || dockerlet_host::signals::Observation {
                memory_capacity: 16 << 30,
                memory_available,
                nodefs: None,
                imagefs: None,
                pids: None,
                allocatable_memory: None,
            }),
            memcg: None,
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
            container_gc: Default::default(),
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
            network: None,
        };
        SupervisorConfig {
            worker: Arc::new(worker),
            manifest_path: None,
            file_check_frequency: Duration::from_secs(20),
            relist_period: Duration::from_millis(50),
            fault_injection: true,
            mode: Mode::Standalone,
            manifest_url: None,
            eviction: roomy_node(),
            oom: None,
            image_gc: None,
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
            container_gc: None,
            client_certificates: None,
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
        DesiredPod::new(Arc::new(pod), PodSource::File, "test".into())
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

    /// A standalone node (no API server) observes the eviction signals too: the EvictionActor
    /// reports MemoryPressure on /debug/actors and to GetNodePressure.
    #[actix::test]
    async fn standalone_node_observes_pressure() {
        tokio::time::pause();
        let runtime = FakeRuntime::with_images(&["img:1"]);
        let mut config = config();
        config.eviction = observing(50 << 20);
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
            .find(|a| a.kind == "EvictionActor")
            .expect("listed");
        assert_eq!(actor.detail["conditions"], json!(["MemoryPressure"]));
    }
}
