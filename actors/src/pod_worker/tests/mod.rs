//! The PodWorker's actor tests, against the recording fake runtime.

use super::*;
use dockerlet_runtime::fake::{Call, FakeRuntime};
use dockerlet_runtime::Containers;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::test_support::{eventually, eventually_async};

/// Collects what a worker reports.
#[derive(Default)]
struct Sink {
    terminated: Vec<dockerlet_messages::PodUid>,
    statuses: Vec<Pod>,
    events: Vec<String>,
    /// Each event's reason with the type its sender chose.
    types: Vec<(String, EventType)>,
}

impl Actor for Sink {
    type Context = Context<Self>;
}

impl Handler<PodFinished> for Sink {
    type Result = ();
    fn handle(&mut self, _: PodFinished, _: &mut Context<Self>) {}
}

impl Handler<SetPodStatus> for Sink {
    type Result = ();
    fn handle(&mut self, msg: SetPodStatus, _: &mut Context<Self>) {
        self.statuses.push(msg.to_pod());
    }
}

impl Handler<RemovePodStatus> for Sink {
    type Result = ();
    fn handle(&mut self, _: RemovePodStatus, _: &mut Context<Self>) {}
}

impl Handler<RecordEvent> for Sink {
    type Result = ();
    fn handle(&mut self, msg: RecordEvent, _: &mut Context<Self>) {
        self.events.push(format!("{}: {}", msg.reason, msg.message));
        self.types.push((msg.reason, msg.type_));
    }
}

/// The `(reason, type)` of every event so far.
struct EventTypes;
impl Message for EventTypes {
    type Result = Vec<(String, EventType)>;
}
impl Handler<EventTypes> for Sink {
    type Result = MessageResult<EventTypes>;
    fn handle(&mut self, _: EventTypes, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.types.clone())
    }
}

struct Events;
impl Message for Events {
    type Result = Vec<String>;
}
impl Handler<Events> for Sink {
    type Result = MessageResult<Events>;
    fn handle(&mut self, _: Events, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.events.clone())
    }
}

impl Handler<WatchContainers> for Sink {
    type Result = ();
    fn handle(&mut self, _: WatchContainers, _: &mut Context<Self>) {}
}

impl Handler<ForgetPod> for Sink {
    type Result = ();
    fn handle(&mut self, _: ForgetPod, _: &mut Context<Self>) {}
}

impl Handler<PodTerminated> for Sink {
    type Result = ();
    fn handle(&mut self, msg: PodTerminated, _: &mut Context<Self>) {
        self.terminated.push(msg.uid);
    }
}

struct Statuses;
impl Message for Statuses {
    type Result = Vec<Pod>;
}
impl Handler<Statuses> for Sink {
    type Result = MessageResult<Statuses>;
    fn handle(&mut self, _: Statuses, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.statuses.clone())
    }
}

struct Terminated;
impl Message for Terminated {
    type Result = usize;
}
impl Handler<Terminated> for Sink {
    type Result = usize;
    fn handle(&mut self, _: Terminated, _: &mut Context<Self>) -> usize {
        self.terminated.len()
    }
}

pub(super) fn pod() -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            uid: Some("u1".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("img:1".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    })
}

pub(super) fn config() -> Arc<PodWorkerConfig> {
    Arc::new(PodWorkerConfig {
        node_name: "n1".into(),
        host_ip: "10.0.0.1".into(),
        sandbox_image: "pause".into(),
        backoff: BackoffConfig::default(),
        container_gc: Default::default(),
        sync_frequency: Duration::from_secs(60),
        node_memory_bytes: 0,
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
    })
}

/// A removal cuts into a slow start: the start in flight is dropped, the app container is
/// never created, and the worker reports the pod terminated.
/// Sidecars start one by one before the app container, and stop after it, the last declared
/// first (kubelet's termination ordering), then the sandbox.
#[actix::test]
async fn sidecars_start_in_order_and_stop_after_the_app_in_reverse() {
    tokio::time::pause();
    let runtime = FakeRuntime::with_images(&["img:1"]);
    let sink = Sink::default().start();
    let c = |name: &str, sidecar: bool| Container {
        name: name.into(),
        image: Some("img:1".into()),
        restart_policy: sidecar.then(|| "Always".to_string()),
        ..Default::default()
    };
    let pod = Arc::new(Pod {
        spec: Some(PodSpec {
            init_containers: Some(vec![c("s1", true), c("s2", true)]),
            containers: vec![c("app", false)],
            ..Default::default()
        }),
        ..(*pod()).clone()
    });
    let worker = PodWorker::new(pod, relisted(&runtime), links(&sink)).start();
    // No PLEG here: each sync starts the next container.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        worker.do_send(SyncPod);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let kind = |name: &str| name.split('_').nth(1).unwrap_or_default().to_string();
    let mut names = HashMap::new();
    let mut created = Vec::new();
    for call in runtime.calls() {
        match call {
            Call::Create(name) => created.push(kind(&name)),
            Call::Start(id) => {
                names.insert(id, created.last().cloned().unwrap_or_default());
            }
            _ => {}
        }
    }
    assert_eq!(created, ["POD", "s1", "s2", "app"], "{:?}", runtime.calls());
    runtime.clear_calls();
    worker.do_send(TerminatePod {
        grace_period: None,
        reason: "the test removed the pod".into(),
    });
    for _ in 0..100 {
        if sink.send(Terminated).await.unwrap() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stopped: Vec<String> = runtime
        .calls()
        .iter()
        .filter_map(|call| match call {
            Call::Stop(id) => names.get(id).cloned(),
            _ => None,
        })
        .collect();
    assert_eq!(stopped, ["app", "s2", "s1", "POD"], "{:?}", runtime.calls());
}

#[actix::test]
async fn termination_cuts_into_a_slow_start() {
    tokio::time::pause();
    let runtime = FakeRuntime::with_images(&["img:1"]);
    runtime.state.lock().unwrap().create_delay = Duration::from_secs(2);
    let sink = Sink::default().start();
    let worker = PodWorker::new(pod(), relisted(&runtime), links(&sink)).start();
    tokio::time::sleep(Duration::from_millis(100)).await;
    worker.do_send(TerminatePod {
        grace_period: None,
        reason: "the test removed the pod".into(),
    });
    for _ in 0..100 {
        if sink.send(Terminated).await.unwrap() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        sink.send(Terminated).await.unwrap(),
        1,
        "worker did not report termination"
    );
    assert!(
        !runtime
            .calls()
            .iter()
            .any(|c| matches!(c, Call::Create(name) if name.starts_with("k8s_app"))),
        "{:?}",
        runtime.calls()
    );
    assert!(runtime.state.lock().unwrap().containers.is_empty());
}

fn links(sink: &Addr<Sink>) -> WorkerLinks {
    WorkerLinks {
        status: Link::from(sink.clone().recipient()),
        finished: sink.clone().recipient(),
        removed: Link::from(sink.clone().recipient()),
        events: sink.clone().recipient().into(),
        terminated: sink.clone().recipient(),
        watch: Link::from(sink.clone().recipient()),
        forget: Link::from(sink.clone().recipient()),
    }
}

/// A cache as after the first relist of an empty node, and the sync context around it.
pub(super) fn relisted(runtime: &FakeRuntime) -> SyncContext {
    let cache = Arc::new(crate::pod_cache::PodCache::default());
    cache.relisted(Instant::now());
    SyncContext::new(Arc::new(runtime.clone()), cache, config())
}

fn named(name: &str, uid: &str) -> Arc<Pod> {
    let mut pod = (*pod()).clone();
    pod.metadata.name = Some(name.into());
    pod.metadata.uid = Some(uid.into());
    Arc::new(pod)
}

/// The ID of the (one) app container the fake runtime created.
pub(super) fn app_container(runtime: &FakeRuntime) -> String {
    let state = runtime.state.lock().unwrap();
    let (id, _) = state
        .containers
        .iter()
        .find(|(_, c)| c.spec.name.starts_with("k8s_app_"))
        .expect("the app container");
    id.clone()
}

fn count(runtime: &FakeRuntime, pred: impl Fn(&Call) -> bool) -> usize {
    runtime.calls().iter().filter(|c| pred(c)).count()
}

/// An ephemeral container added to a running pod is started once, in the process namespace
/// of its target container, and not restarted when it exits.
#[actix::test]
async fn an_ephemeral_container_starts_once_in_its_targets_pid_namespace() {
    tokio::time::pause();
    let runtime = FakeRuntime::with_images(&["img:1"]);
    let sink = Sink::default().start();
    let sync = relisted(&runtime);
    let worker = PodWorker::new(named("one", "u1"), sync.clone(), links(&sink)).start();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut debugged = (*named("one", "u1")).clone();
    if let Some(spec) = debugged.spec.as_mut() {
        spec.ephemeral_containers = Some(vec![k8s_openapi::api::core::v1::EphemeralContainer {
            name: "dbg".into(),
            image: Some("img:1".into()),
            target_container_name: Some("app".into()),
            ..Default::default()
        }]);
    }
    let debugged = Arc::new(debugged);
    worker.do_send(UpdatePod { pod: debugged.clone() });
    worker.do_send(UpdatePod { pod: debugged.clone() });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let created = |name: &str| {
        let state = runtime.state.lock().unwrap();
        state
            .containers
            .iter()
            .filter(|(_, c)| c.spec.name.starts_with(&format!("k8s_{name}_")))
            .map(|(id, c)| (id.clone(), c.spec.pid_mode.clone()))
            .collect::<Vec<_>>()
    };
    let dbg = created("dbg");
    let app = created("app");
    assert_eq!(dbg.len(), 1, "{:?}", runtime.calls());
    assert_eq!(dbg[0].1, Some(format!("container:{}", app[0].0)));
    runtime.exit(&dbg[0].0, 0);
    // What the PLEG's relist would put.
    let exited = runtime.state.lock().unwrap().containers[&dbg[0].0].observed.clone();
    sync.cache.put(exited, Instant::now());
    worker.do_send(SyncPod);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(created("dbg").len(), 1, "never restarted");
    let statuses = sink.send(Statuses).await.unwrap();
    let status = statuses.last().and_then(|p| p.status.clone()).unwrap();
    let dbg = &status.ephemeral_container_statuses.unwrap()[0];
    assert_eq!(dbg.name, "dbg");
    assert!(!dbg.ready && dbg.started.is_none(), "{dbg:?}");
    assert!(dbg.state.as_ref().unwrap().terminated.is_some(), "{dbg:?}");
    assert_eq!(
        status.phase.as_deref(),
        Some("Running"),
        "ephemeral containers do not count"
    );
}

#[actix::test]
async fn a_pod_start_costs_six_calls_and_the_next_sync_none() {
    tokio::time::pause();
    let runtime = FakeRuntime::with_images(&["img:1"]);
    let sync = relisted(&runtime);
    let sink = Sink::default().start();
    let first = PodWorker::new(named("one", "u1"), sync.clone(), links(&sink)).start();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        runtime.calls(),
        vec![
            Call::Create("k8s_POD_one_default_u1_0".into()),
            Call::Start(ContainerId("fake0001".into())),
            Call::Inspect(ContainerId("fake0001".into())),
            Call::InspectImage("img:1".into()),
            Call::Create("k8s_app_one_default_u1_0".into()),
            Call::Start(ContainerId("fake0002".into())),
            Call::Inspect(ContainerId("fake0002".into())),
        ]
    );
    runtime.clear_calls();
    first.do_send(SyncPod);
    first.do_send(SyncPod);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(runtime.calls(), vec![], "a sync after the start asked Docker again");
    let _second = PodWorker::new(named("two", "u2"), sync.clone(), links(&sink)).start();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(count(&runtime, |c| matches!(c, Call::InspectImage(_))), 0);
    assert_eq!(runtime.calls().len(), 6, "{:?}", runtime.calls());
    let statuses = sink.send(Statuses).await.unwrap();
    let running = |name: &str| {
        statuses.iter().any(|p| {
            p.metadata.name.as_deref() == Some(name)
                && p.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .is_some_and(|cs| cs.iter().all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some())))
        })
    };
    assert!(running("one") && running("two"), "{statuses:?}");
    // Two pods started (sandbox and app each), each start timed once; three syncs of "one".
    let m = &sync.config.metrics;
    assert_eq!(m.pod_start_duration.count(), 2);
    assert_eq!(m.started_pods.get(), 2);
    let started = |container_type| {
        m.started_containers
            .get_or_create(&dockerlet_metrics::ContainerTypeLabel { container_type })
            .get()
    };
    use dockerlet_metrics::ContainerType;
    assert_eq!(
        (started(ContainerType::podsandbox), started(ContainerType::container)),
        (2, 2)
    );
    let worker = |operation| {
        m.pod_worker_duration
            .get_or_create(&dockerlet_metrics::OperationLabel { operation })
            .count()
    };
    assert_eq!(worker(WorkerOperation::create), 2);
    assert!(worker(WorkerOperation::sync) >= 1);
}

/// The pod cgroup is made before the sandbox, every container of the pod gets it as its
/// `CgroupParent`, and the teardown removes it; a pod cgroup that cannot be made fails the
/// sandbox with FailedCreatePodSandBox and nothing is created.
#[actix::test]
#[allow(clippy::disallowed_methods)] // The test reads and arranges the recorded tree.
async fn the_pod_cgroup_comes_before_the_sandbox_and_goes_after_the_pod() {
    use dockerlet_host::cgroup::tree::PodCgroups;
    use dockerlet_host::cgroup::CgroupLayout;
    use dockerlet_pod::cgroup::CgroupNaming;
    let dir = tempfile::tempdir().unwrap();
    let layout = CgroupLayout::v1_at(dir.path(), &["cpu", "memory"]);
    let naming = CgroupNaming::new("/", true, dockerlet_pod::cgroup::CgroupDriver::Cgroupfs).expect("the root names");
    let tree = Arc::new(PodCgroups::new(layout, naming.clone(), -1, None));
    tree.setup(&dockerlet_pod::cgroup::kubepods_config(1000, 1 << 30, None))
        .unwrap();
    let with_tree = |runtime: &FakeRuntime| {
        let mut sync = relisted(runtime);
        let mut config = (*sync.config).clone();
        config.cgroup_naming = naming.clone();
        config.cgroups = Some(tree.clone());
        sync.config = Arc::new(config);
        sync
    };
    let runtime = FakeRuntime::with_images(&["img:1"]);
    let sink = Sink::default().start();
    let worker = PodWorker::new(named("one", "u1"), with_tree(&runtime), links(&sink)).start();
    let pod_dir = dir.path().join("memory/kubepods/besteffort/podu1");
    eventually("both containers created", || {
        runtime.state.lock().unwrap().containers.len() == 2
    })
    .await;
    assert!(pod_dir.is_dir());
    let parents: Vec<Option<String>> = runtime
        .state
        .lock()
        .unwrap()
        .containers
        .values()
        .map(|c| c.spec.cgroup_parent.clone())
        .collect();
    assert_eq!(parents, vec![Some("/kubepods/besteffort/podu1".to_string()); 2]);
    // A recorded tree's control files would block rmdir; a kernel's vanish with it.
    for f in std::fs::read_dir(&pod_dir).unwrap().flatten() {
        std::fs::remove_file(f.path()).unwrap();
    }
    for f in std::fs::read_dir(dir.path().join("cpu/kubepods/besteffort/podu1"))
        .unwrap()
        .flatten()
    {
        std::fs::remove_file(f.path()).unwrap();
    }
    worker.do_send(TerminatePod {
        grace_period: None,
        reason: "the test removed the pod".into(),
    });
    eventually("terminated", || !pod_dir.exists()).await;

    // A file where the pod cgroup goes: it cannot be made.
    std::fs::write(dir.path().join("memory/kubepods/besteffort/podu2"), "").unwrap();
    let runtime = FakeRuntime::with_images(&["img:1"]);
    let _worker = PodWorker::new(named("two", "u2"), with_tree(&runtime), links(&sink)).start();
    let sink2 = sink.clone();
    let mut events = Vec::new();
    for _ in 0..200 {
        events = sink2.send(Events).await.unwrap();
        if events.iter().any(|e| e.starts_with("FailedCreatePodSandBox")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let failed = events
        .iter()
        .find(|e| e.starts_with("FailedCreatePodSandBox"))
        .unwrap_or_else(|| panic!("no FailedCreatePodSandBox in {events:?}"));
    assert!(
        failed.contains("pod cgroup: create cgroup") && failed.contains("podu2"),
        "{failed}"
    );
    assert_eq!(count(&runtime, |c| matches!(c, Call::Create(_))), 0);
}

/// A pod admission rejects (an unsafe sysctl) is reported Failed with kubelet's reason and
/// message, and nothing of it is created, then or at later syncs.
#[actix::test]
async fn a_rejected_pod_never_runs_and_reports_failed() {
    use k8s_openapi::api::core::v1::{PodSecurityContext, Sysctl};
    tokio::time::pause();
    let runtime = FakeRuntime::with_images(&["img:1"]);
    let sink = Sink::default().start();
    let mut pod = (*pod()).clone();
    pod.spec.as_mut().unwrap().security_context = Some(PodSecurityContext {
        sysctls: Some(vec![Sysctl {
            name: "kernel.msgmax".into(),
            value: "1".into(),
        }]),
        ..Default::default()
    });
    let worker = PodWorker::new(Arc::new(pod), relisted(&runtime), links(&sink)).start();
    tokio::time::sleep(Duration::from_millis(100)).await;
    worker.do_send(SyncPod);
    tokio::time::sleep(Duration::from_secs(70)).await;
    assert_eq!(runtime.calls(), vec![], "a rejected pod touched Docker");
    let statuses = sink.send(Statuses).await.unwrap();
    assert_eq!(statuses.len(), 1, "the rejection is reported once: {statuses:?}");
    let status = statuses[0].status.clone().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("SysctlForbidden"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was rejected: forbidden sysctl: \"kernel.msgmax\" not allowlisted")
    );
}

/// runAsNonRoot on an image that runs as root: the container waits with
/// CreateContainerConfigError and kubelet's message, and is never created; the next try comes
/// after the error back-off (kubelet requeues a failed SyncPod after 10 s), not at the resync.
#[actix::test]
async fn run_as_non_root_on_a_root_image_is_never_created() {
    use k8s_openapi::api::core::v1::SecurityContext;
    tokio::time::pause();
    let runtime = FakeRuntime::with_images(&["img:1"]);
    let sink = Sink::default().start();
    let mut pod = (*pod()).clone();
    pod.spec.as_mut().unwrap().containers[0].security_context = Some(SecurityContext {
        run_as_non_root: Some(true),
        ..Default::default()
    });
    let worker = PodWorker::new(Arc::new(pod), relisted(&runtime), links(&sink)).start();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        count(
            &runtime,
            |c| matches!(c, Call::Create(name) if name.starts_with("k8s_app"))
        ),
        0,
        "{:?}",
        runtime.calls()
    );
    let state = worker.send(dockerlet_messages::debug::GetActorState).await.unwrap();
    assert!(
        state.detail["retry_at"].is_string(),
        "a retry after the error back-off: {}",
        state.detail
    );
    let statuses = sink.send(Statuses).await.unwrap();
    let waiting = statuses
        .last()
        .and_then(|p| {
            p.status
                .as_ref()?
                .container_statuses
                .as_ref()?
                .first()?
                .state
                .clone()?
                .waiting
        })
        .expect("a waiting container");
    assert_eq!(waiting.reason.as_deref(), Some("CreateContainerConfigError"));
    assert_eq!(
        waiting.message.as_deref(),
        Some("container has runAsNonRoot and image will run as root (pod: \"web_default(u1)\", container: app)")
    );
}

/// An action whose result the worker could not observe (the inspect after the start
/// failed) makes the next sync wait for a relist after it, rather than decide on state that
/// predates it (and create the container a second time).
#[actix::test]
async fn never_decides_on_state_older_than_its_last_action() {
    tokio::time::pause();
    let runtime = FakeRuntime::with_images(&["img:1"]);
    runtime.state.lock().unwrap().inspect_fails = true;
    let sync = relisted(&runtime);
    let sink = Sink::default().start();
    let worker = PodWorker::new(pod(), sync.clone(), links(&sink)).start();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The sandbox was created and started, but its inspect failed: nothing more.
    assert_eq!(
        count(&runtime, |c| matches!(c, Call::Create(_))),
        1,
        "{:?}",
        runtime.calls()
    );
    runtime.state.lock().unwrap().inspect_fails = false;
    // The sync after the error back-off (10 s) waits: no relist came after the action.
    worker.do_send(SyncPod);
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        count(&runtime, |c| matches!(c, Call::Create(_))),
        1,
        "{:?}",
        runtime.calls()
    );
    // A relist after the action lets it go on, with the sandbox it made.
    let listing = runtime.list_node_containers("n1").await.unwrap();
    let at = Instant::now();
    for id in sync.cache.plan(&listing, at).inspect {
        let observed = runtime.inspect_container(&id).await.unwrap().unwrap();
        sync.cache.put(observed, at);
    }
    sync.cache.relisted(at);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let creates: Vec<_> = runtime
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Create(name) => Some(name),
            _ => None,
        })
        .collect();
    assert_eq!(
        creates,
        vec!["k8s_POD_web_default_u1_0", "k8s_app_web_default_u1_0"],
        "{:?}",
        runtime.calls()
    );
}

/// A pod's `runtimeClassName` gives its sandbox and containers the class's handler as their
/// Docker runtime; a class that does not exist fails the sandbox (FailedCreatePodSandBox
/// naming it) and creates nothing; a standalone node cannot resolve one and says so.
#[actix::test]
async fn a_runtime_class_sets_the_docker_runtime_or_fails_the_sandbox() {
    use dockerlet_kube::fake::FakeKube;
    use k8s_openapi::api::node::v1::RuntimeClass;
    let api = FakeKube::new("n1");
    api.state.lock().unwrap().runtime_classes.insert(
        "sandboxed".into(),
        RuntimeClass {
            metadata: ObjectMeta {
                name: Some("sandboxed".into()),
                ..Default::default()
            },
            handler: "runsc".into(),
            ..Default::default()
        },
    );
    let with_class = |name: &str, uid: &str, class: &str| {
        let mut pod = (*named(name, uid)).clone();
        pod.spec.as_mut().unwrap().runtime_class_name = Some(class.into());
        Arc::new(pod)
    };
    let runtime = FakeRuntime::with_images(&["img:1"]);
    let mut with_api = relisted(&runtime);
    let mut config = (*config()).clone();
    config.api = Some(Arc::new(api));
    with_api.config = Arc::new(config);
    let standalone = relisted(&runtime);
    let sink = Sink::default().start();
    let _a = PodWorker::new(with_class("a", "ua", "sandboxed"), with_api.clone(), links(&sink)).start();
    let _b = PodWorker::new(with_class("b", "ub", "missing"), with_api, links(&sink)).start();
    let _c = PodWorker::new(with_class("c", "uc", "sandboxed"), standalone, links(&sink)).start();
    // Until pod a's two containers are there and b's and c's sandboxes have failed (a fixed
    // wait was too short on a loaded machine); then nothing else is created.
    eventually_async("a's containers and b's and c's failed sandboxes", || {
        let (runtime, sink) = (runtime.clone(), sink.clone());
        async move {
            let events = sink.send(Events).await.unwrap();
            let failed = events.iter().filter(|e| e.starts_with("FailedCreatePodSandBox"));
            runtime.state.lock().unwrap().containers.len() >= 2 && failed.count() >= 2
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let runtimes: Vec<(String, Option<String>)> = runtime
        .state
        .lock()
        .unwrap()
        .containers
        .values()
        .map(|c| (c.spec.name.clone(), c.spec.runtime.clone()))
        .collect();
    assert_eq!(
        runtimes,
        [
            ("k8s_POD_a_default_ua_0".to_string(), Some("runsc".to_string())),
            ("k8s_app_a_default_ua_0".to_string(), Some("runsc".to_string())),
        ],
        "only pod a runs, with runsc"
    );
    let events = sink.send(Events).await.unwrap();
    let failed: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("FailedCreatePodSandBox"))
        .collect();
    assert!(
        failed
            .iter()
            .any(|e| e
                .contains(r#"failed to lookup RuntimeClass missing: runtimeclass.node.k8s.io "missing" not found"#)),
        "{events:?}"
    );
    assert!(
        failed.iter().any(|e| e.contains("RuntimeClasses need the API server")),
        "{events:?}"
    );
}

/// An API pod's container gets the service variables from the API's Service cache and the
/// pod's resolv.conf and hosts file mounted; written under the pod's directory, with the
/// sandbox's hostname. While the cache has not listed, the container waits with
/// CreateContainerConfigError instead of starting without them.
#[actix::test]
async fn api_pods_get_service_env_dns_and_hosts_files() {
    use dockerlet_kube::fake::FakeKube;
    use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
    let dir = tempfile::tempdir().unwrap();
    let node_resolv = dir.path().join("resolv.conf");
    tokio::fs::write(&node_resolv, "nameserver 192.168.0.53\nsearch corp.example\n")
        .await
        .unwrap();
    let api = FakeKube::new("n1");
    api.state.lock().unwrap().services = Some(vec![Service {
        metadata: ObjectMeta {
            name: Some("kubernetes".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("10.96.0.1".into()),
            ports: Some(vec![ServicePort {
                name: Some("https".into()),
                port: 443,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }]);
    let mut config = (*config()).clone();
    config.root_dir = dir.path().to_path_buf();
    config.api = Some(Arc::new(api.clone()));
    config.dns = dockerlet_pod::dns::ClusterDns {
        servers: vec!["10.96.0.10".parse().unwrap()],
        domain: "cluster.local".into(),
        resolv_conf: Some(node_resolv),
    };
    let runtime = FakeRuntime::with_images(&["img:1"]);
    let mut sync = relisted(&runtime);
    sync.config = Arc::new(config);
    let mut pod = (*named("web", "u9")).clone();
    pod.metadata.namespace = Some("default".into());
    pod.metadata.annotations = Some(std::collections::BTreeMap::from([(
        dockerlet_pod::annotations::CONFIG_SOURCE.to_string(),
        "api".to_string(),
    )]));
    let sink = Sink::default().start();
    let _worker = PodWorker::new(Arc::new(pod.clone()), sync.clone(), links(&sink)).start();
    let spec_of = |name: &str| {
        runtime
            .state
            .lock()
            .unwrap()
            .containers
            .values()
            .find(|c| c.spec.name == name)
            .map(|c| c.spec.clone())
    };
    for _ in 0..100 {
        if spec_of("k8s_app_web_default_u9_0").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let app = spec_of("k8s_app_web_default_u9_0").expect("the app container");
    assert!(
        app.env.contains(&"KUBERNETES_SERVICE_HOST=10.96.0.1".to_string()),
        "{:?}",
        app.env
    );
    assert!(
        app.env.contains(&"KUBERNETES_PORT_443_TCP_PORT=443".to_string()),
        "{:?}",
        app.env
    );
    let pod_dir = dir.path().join("pods/u9");
    assert_eq!(
        app.binds,
        [
            format!("{}:/etc/hosts", pod_dir.join("etc-hosts").display()),
            format!("{}:/etc/resolv.conf", pod_dir.join("resolv.conf").display())
        ]
    );
    assert_eq!(
        tokio::fs::read_to_string(pod_dir.join("resolv.conf")).await.unwrap(),
        "nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5\n"
    );
    let hosts = tokio::fs::read_to_string(pod_dir.join("etc-hosts")).await.unwrap();
    assert!(hosts.starts_with("# Kubernetes-managed hosts file.\n"), "{hosts}");
    assert!(hosts.ends_with("\tweb\n"), "{hosts}");
    let sandbox = spec_of("k8s_POD_web_default_u9_0").expect("the sandbox");
    assert_eq!(sandbox.hostname.as_deref(), Some("web"));
    assert!(
        sandbox.binds.is_empty(),
        "the sandbox mounts nothing: {:?}",
        sandbox.binds
    );

    // A cache that has not listed: the container waits, naming why.
    api.state.lock().unwrap().services = None;
    pod.metadata.uid = Some("u10".into());
    let _waiting = PodWorker::new(Arc::new(pod), sync, links(&sink)).start();
    let mut reason = None;
    for _ in 0..100 {
        let statuses = sink.send(Statuses).await.unwrap();
        reason = statuses
            .iter()
            .filter(|p| p.metadata.uid.as_deref() == Some("u10"))
            .filter_map(|p| {
                p.status
                    .as_ref()?
                    .container_statuses
                    .as_ref()?
                    .first()?
                    .state
                    .as_ref()?
                    .waiting
                    .clone()
            })
            .next_back();
        if reason
            .as_ref()
            .is_some_and(|w| w.reason.as_deref() == Some("CreateContainerConfigError"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let waiting = reason.expect("a waiting reason");
    assert_eq!(waiting.reason.as_deref(), Some("CreateContainerConfigError"));
    assert_eq!(
        waiting.message.as_deref(),
        Some("services have not yet been read at least once, cannot construct envvars")
    );
    assert!(spec_of("k8s_app_web_default_u10_0").is_none());
}

mod engine_back;
mod images;
mod oom_verdict;

/// The status published before a sync acts (`SyncNote::Observed`, `RuntimeBack`) goes out only
/// when a container the last status had running no longer runs or is gone — not for a sandbox
/// alone, nor when nothing stopped.
#[test]
fn a_status_goes_out_early_only_when_a_running_container_stopped() {
    use dockerlet_messages::runtime::{ObservedContainer, RuntimeState};
    let container = |name: &str, id: &str, state: RuntimeState| -> ObservedContainer {
        let mut c = crate::test_support::observed("u1", name, id, state);
        if name == "POD" {
            c.role = dockerlet_messages::runtime::ContainerRole::Sandbox;
        }
        c
    };
    let before = vec![
        container("POD", "s1", RuntimeState::Running),
        container("app", "a1", RuntimeState::Running),
    ];
    let app_exited = vec![
        container("POD", "s1", RuntimeState::Exited),
        container("app", "a1", RuntimeState::Exited),
    ];
    let sandbox_exited = vec![
        container("POD", "s1", RuntimeState::Exited),
        container("app", "a1", RuntimeState::Running),
    ];
    let app_gone = vec![container("POD", "s1", RuntimeState::Running)];
    assert!(super::running_container_stopped(&before, &app_exited));
    assert!(super::running_container_stopped(&before, &app_gone));
    assert!(!super::running_container_stopped(&before, &sandbox_exited));
    assert!(!super::running_container_stopped(&before, &before));
}
