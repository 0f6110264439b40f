//! The EvictionActor against stand-ins: the readings, the conditions it reports, and whom it
//! evicts (after kubelet's `eviction_manager_test.go`: `TestMemoryPressure`,
//! `TestStaticCriticalPodsAreNotEvicted`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use dockerlet_messages::node::Pressure;
use dockerlet_messages::stats::{MemoryStats, NodeStats, PodReference, PodStats};
use dockerlet_messages::PodUid;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use dockerlet_host::signals::Thresholds;

use super::*;
use crate::test_support::eventually_async;

fn config(memory_available: i64) -> EvictionConfig {
    EvictionConfig {
        node_name: "n1".into(),
        thresholds: EvictionSettings::hard_only(Thresholds::default()),
        transition_period: Duration::from_secs(300),
        period: Duration::from_millis(20),
        observe: Arc::new(move || Observation {
            memory_capacity: 8 << 30,
            memory_available,
            nodefs: None,
            imagefs: None,
            pids: None,
            allocatable_memory: None,
        }),
        memcg: None,
    }
}

/// A query that arrives before the first reading is answered by it, not with "no pressure"
/// (the Node's first status would otherwise claim sufficient memory).
#[actix::test]
async fn the_first_query_waits_for_the_first_reading() {
    let mut slow = config(50 << 20);
    let observe = slow.observe.clone();
    slow.observe = Arc::new(move || {
        // On the blocking pool, never the actor thread.
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(Duration::from_millis(100));
        observe()
    });
    let actor = EvictionActor::new(slow).start();
    let p = actor.send(GetNodePressure).await.unwrap();
    assert_eq!(p.conditions, vec![Pressure::Memory]);
}

/// A node short of memory reports MemoryPressure with the threshold met; one with room
/// reports none.
#[actix::test]
async fn pressure_follows_the_thresholds() {
    tokio::time::pause();
    let short = EvictionActor::new(config(50 << 20)).start();
    let roomy = EvictionActor::new(config(4 << 30)).start();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let p = short.send(GetNodePressure).await.unwrap();
    assert_eq!(p.conditions, vec![Pressure::Memory]);
    assert_eq!(p.met[0].signal, "memory.available");
    assert!(roomy.send(GetNodePressure).await.unwrap().conditions.is_empty());
}

/// What the stand-in Supervisor, StatsActor, workers and recorder saw.
#[derive(Default)]
struct Seen {
    pressure: Vec<Vec<Pressure>>,
    evicted: Vec<(String, EvictPod)>,
    events: Vec<(String, String, String)>,
}

/// The Supervisor, the StatsActor, every pod's worker and the recorder in one.
struct World {
    pods: Vec<Arc<Pod>>,
    summary: Arc<Summary>,
    seen: Arc<Mutex<Seen>>,
}

impl Actor for World {
    type Context = Context<Self>;
}

/// The actor's links, all to the stand-in `world`; no node-level reclaim.
fn world_links(world: &Addr<World>, metrics: Arc<Metrics>) -> EvictionLinks {
    EvictionLinks {
        pressure_changed: world.clone().recipient(),
        candidates: world.clone().recipient(),
        stats: Some(world.clone().recipient().into()),
        events: world.clone().recipient().into(),
        metrics,
        reclaim_images: None,
        reclaim_containers: None,
    }
}

impl Handler<NodePressureChanged> for World {
    type Result = ();
    fn handle(&mut self, msg: NodePressureChanged, _: &mut Context<Self>) {
        self.seen.lock().unwrap().pressure.push(msg.0);
    }
}

impl Handler<GetFreshStatsSummary> for World {
    type Result = Option<Arc<Summary>>;
    fn handle(&mut self, _: GetFreshStatsSummary, _: &mut Context<Self>) -> Self::Result {
        Some(self.summary.clone())
    }
}

impl Handler<RecordEvent> for World {
    type Result = ();
    fn handle(&mut self, msg: RecordEvent, _: &mut Context<Self>) {
        self.seen
            .lock()
            .unwrap()
            .events
            .push((msg.about.to_string(), msg.reason, msg.message));
    }
}

/// One pod's worker: records the eviction and drops the pod from the candidates.
struct Worker {
    uid: String,
    world: Addr<World>,
}

impl Actor for Worker {
    type Context = Context<Self>;
}

impl Handler<EvictPod> for Worker {
    type Result = ();
    fn handle(&mut self, msg: EvictPod, _: &mut Context<Self>) {
        self.world.do_send(Evicted(self.uid.clone(), msg));
    }
}

struct Evicted(String, EvictPod);
impl Message for Evicted {
    type Result = ();
}
impl Handler<Evicted> for World {
    type Result = ();
    fn handle(&mut self, msg: Evicted, _: &mut Context<Self>) {
        self.pods.retain(|p| p.metadata.uid.as_deref() != Some(msg.0.as_str()));
        self.seen.lock().unwrap().evicted.push((msg.0, msg.1));
    }
}

impl Handler<GetEvictionCandidates> for World {
    type Result = MessageResult<GetEvictionCandidates>;
    fn handle(&mut self, _: GetEvictionCandidates, ctx: &mut Context<Self>) -> Self::Result {
        let me = ctx.address();
        MessageResult(
            self.pods
                .iter()
                .map(|pod| {
                    let id = PodRef::of(pod);
                    let worker = Worker {
                        uid: id.uid.0.clone(),
                        world: me.clone(),
                    }
                    .start();
                    EvictionCandidate {
                        pod: pod.clone(),
                        id,
                        worker: worker.recipient(),
                    }
                })
                .collect(),
        )
    }
}

/// A pod named `name` (UID too) from `source`, with a memory request when given.
fn pod(name: &str, source: &str, request: Option<&str>) -> Arc<Pod> {
    let resources = request.map(|r| ResourceRequirements {
        requests: Some(BTreeMap::from([("memory".to_string(), Quantity(r.into()))])),
        ..Default::default()
    });
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(name.into()),
            annotations: Some(BTreeMap::from([(
                "kubernetes.io/config.source".to_string(),
                source.to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                resources,
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    })
}

/// The summary's entry of a pod whose one container `app` has this working set.
fn memory(working_set: Option<u64>) -> MemoryStats {
    MemoryStats {
        time: Time(Timestamp::now()),
        available_bytes: None,
        usage_bytes: working_set,
        working_set_bytes: working_set,
        rss_bytes: None,
        page_faults: None,
        major_page_faults: None,
        psi: None,
    }
}

fn stats(name: &str, working_set: u64) -> PodStats {
    let memory = memory(Some(working_set));
    PodStats {
        pod_ref: PodReference {
            name: name.into(),
            namespace: "default".into(),
            uid: name.into(),
        },
        start_time: Time(Timestamp::now()),
        containers: vec![dockerlet_messages::stats::ContainerStats {
            name: "app".into(),
            start_time: Time(Timestamp::now()),
            memory: Some(memory.clone()),
            cpu: None,
            accelerators: Vec::new(),
            rootfs: None,
            logs: None,
            user_defined_metrics: Vec::new(),
            swap: None,
            io: None,
        }],
        cpu: None,
        memory: Some(memory),
        network: None,
        volume_stats: Vec::new(),
        ephemeral_storage: None,
        process_stats: None,
        swap: None,
        io: None,
    }
}

fn summary(pods: Vec<PodStats>) -> Arc<Summary> {
    Arc::new(Summary {
        node: NodeStats {
            node_name: "n1".into(),
            system_containers: Vec::new(),
            start_time: Time(Timestamp::now()),
            cpu: None,
            memory: Some(memory(None)),
            network: None,
            fs: None,
            runtime: None,
            rlimit: None,
            swap: None,
            io: None,
        },
        pods,
    })
}

/// Under memory pressure the BestEffort pod goes before the Burstable pod within its request,
/// and the static pod, which uses the most, never: one eviction per cycle, grace 1 s, kubelet's
/// message with the threshold, `Evicted` about the pod, `EvictionThresholdMet` about the Node,
/// MemoryPressure told to the Supervisor, `kubelet_evictions` counted.
#[actix::test]
async fn a_best_effort_pod_goes_first_and_a_static_pod_never() {
    const MI: u64 = 1 << 20;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let world = World {
        pods: vec![
            pod("burstable", "api", Some("200Mi")),
            pod("best-effort", "api", None),
            pod("static", "file", None),
        ],
        summary: summary(vec![
            stats("burstable", 50 * MI),
            stats("best-effort", 30 * MI),
            stats("static", 500 * MI),
        ]),
        seen: seen.clone(),
    }
    .start();
    let metrics = Arc::new(Metrics::default());
    let links = world_links(&world, metrics.clone());
    let _actor = EvictionActor::new(config(50 << 20)).evicting_through(links).start();
    eventually_async("two evictions", || {
        let seen = seen.clone();
        async move { seen.lock().unwrap().evicted.len() >= 2 }
    })
    .await;
    // A few more cycles: only the static pod is left, and it stays.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let seen = seen.lock().unwrap();
    let order: Vec<&str> = seen.evicted.iter().map(|(uid, _)| uid.as_str()).collect();
    assert_eq!(order, vec!["best-effort", "burstable"]);
    let (_, first) = &seen.evicted[0];
    assert_eq!(first.grace, HARD_EVICTION_GRACE);
    assert!(first.disruption_target);
    assert_eq!(
        first.message,
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. \
         Container app was using 30Mi, request is 0, has larger consumption of memory. "
    );
    assert_eq!(seen.pressure.first(), Some(&vec![Pressure::Memory]));
    assert!(seen.events.iter().any(|(about, reason, message)| about == "node/n1"
        && reason == "EvictionThresholdMet"
        && message == "Attempting to reclaim memory"));
    assert!(seen
        .events
        .iter()
        .any(|(about, reason, _)| about == "default/best-effort" && reason == "Evicted"));
    let label = EvictionSignalLabel {
        eviction_signal: "memory.available",
    };
    assert_eq!(metrics.evictions.get_or_create(&label).get(), 2);
    drop(PodUid("unused".into()));
}

/// A soft threshold evicts once met for its grace period, and the pod gets the smaller of
/// `evictionMaxPodGracePeriod` and its own grace period (kubelet's newest rule).
#[actix::test]
async fn a_soft_threshold_evicts_after_its_grace_period_with_the_pods_grace() {
    const MI: u64 = 1 << 20;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let world = World {
        pods: vec![pod("best-effort", "api", None)],
        summary: summary(vec![stats("best-effort", 30 * MI)]),
        seen: seen.clone(),
    }
    .start();
    let links = world_links(&world, Arc::new(Metrics::default()));
    let mut config = config(500 << 20);
    config.thresholds = EvictionSettings {
        hard: Thresholds(Default::default()),
        soft: Thresholds::parse([("memory.available", "1Gi")]).unwrap(),
        soft_grace: BTreeMap::from([(Signal::MemoryAvailable, Duration::from_millis(300))]),
        min_reclaim: BTreeMap::new(),
        max_pod_grace: Duration::from_secs(7),
    };
    let started = std::time::Instant::now();
    let _actor = EvictionActor::new(config).evicting_through(links).start();
    eventually_async("the soft eviction", || {
        let seen = seen.clone();
        async move { !seen.lock().unwrap().evicted.is_empty() }
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "not before the grace period"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.pressure.first(),
        Some(&vec![Pressure::Memory]),
        "the condition at once"
    );
    assert_eq!(
        seen.evicted[0].1.grace,
        Duration::from_secs(7),
        "min(max pod grace, the pod's 30 s)"
    );
}

/// Container GC and image GC, as kubelet's node-level reclaim funcs: what each was asked,
/// in order; the disk is "freed" by the image reclaim.
struct Reclaimer {
    calls: Arc<Mutex<Vec<&'static str>>>,
    freed: Arc<std::sync::atomic::AtomicBool>,
}

impl Actor for Reclaimer {
    type Context = Context<Self>;
}

impl Handler<ReclaimContainers> for Reclaimer {
    type Result = MessageResult<ReclaimContainers>;

    fn handle(&mut self, _: ReclaimContainers, _: &mut Self::Context) -> Self::Result {
        self.calls.lock().unwrap().push("containers");
        MessageResult(dockerlet_messages::gc::ReclaimedContainers::default())
    }
}

impl Handler<ReclaimImages> for Reclaimer {
    type Result = MessageResult<ReclaimImages>;

    fn handle(&mut self, _: ReclaimImages, _: &mut Self::Context) -> Self::Result {
        self.calls.lock().unwrap().push("images");
        self.freed.store(true, std::sync::atomic::Ordering::SeqCst);
        MessageResult(dockerlet_messages::node::ReclaimedImages { freed: 1, error: None })
    }
}

/// A disk threshold met: dead containers are reclaimed first, then unused images (kubelet's
/// `buildSignalToNodeReclaimFuncs` without a dedicated imagefs), and with the disk freed no
/// pod is evicted ("able to reduce resource pressure without evicting pods").
#[actix::test]
async fn a_disk_signal_reclaims_containers_then_images_before_any_pod() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let world = World {
        pods: vec![pod("best-effort", "api", None)],
        summary: summary(vec![stats("best-effort", 1 << 20)]),
        seen: seen.clone(),
    }
    .start();
    let (calls, freed) = (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let reclaimer = Reclaimer {
        calls: calls.clone(),
        freed: freed.clone(),
    }
    .start();
    let links = EvictionLinks {
        reclaim_images: Some(reclaimer.clone().recipient().into()),
        reclaim_containers: Some(reclaimer.recipient().into()),
        ..world_links(&world, Arc::new(Metrics::default()))
    };
    let mut config = config(4 << 30);
    let observe_freed = freed.clone();
    config.observe = Arc::new(move || {
        let free_percent = if observe_freed.load(std::sync::atomic::Ordering::SeqCst) {
            50
        } else {
            5
        };
        let fs = dockerlet_host::signals::FsStats {
            capacity_bytes: 100 << 30,
            available_bytes: (100 << 30) / 100 * free_percent,
            inodes: 1000,
            inodes_free: 900,
        };
        Observation {
            memory_capacity: 8 << 30,
            memory_available: 4 << 30,
            nodefs: Some(fs),
            imagefs: Some(fs),
            pids: None,
            allocatable_memory: None,
        }
    });
    let _actor = EvictionActor::new(config).evicting_through(links).start();
    eventually_async("both reclaims", || {
        let calls = calls.clone();
        async move { calls.lock().unwrap().len() >= 2 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(*calls.lock().unwrap(), vec!["containers", "images"]);
    assert!(seen.lock().unwrap().evicted.is_empty(), "no pod went");
}
