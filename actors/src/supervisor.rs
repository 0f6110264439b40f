//! Supervisor: the root actor. Owns the table of desired pods, starts one PodWorker per pod UID,
//! routes messages, and re-creates any child actor that dies — a panicking handler included,
//! which actix's own `Supervised` does not cover (crate-stack §3.8).
//!
//! | Message             | From          | Effect                                                |
//! |---------------------|---------------|-------------------------------------------------------|
//! | SourcePodsChanged   | FileSource    | diff against the desired table: start, update or terminate workers |
//! | PodLifecycleEvent   | PlegActor     | `SyncPod` to that pod's worker                         |
//! | RelistCompleted     | PlegActor     | terminate containers of pods nobody wants (once sources are ready) |
//! | SetPodStatus, RemovePodStatus | PodWorker | forward to the StatusActor                   |
//! | RecordEvent         | PodWorker     | keep in the debug ring buffer                          |
//! | PodTerminated       | PodWorker     | forget the worker (or restart it if the pod came back) |
//! | WatchContainers, ForgetPod | PodWorker | forward to the ProbeActor                       |
//! | ProbeResultChanged  | ProbeActor    | forward to that pod's worker                           |
//! | GetPods             | HTTP          | forward to the StatusActor                             |
//! | GetHealth           | HTTP          | forward to the PlegActor                               |
//! | GetDebugSnapshot    | HTTP          | ask every actor for its state                          |
//! | InjectFault         | HTTP (tests)  | make an actor panic                                    |
//! | every 250 ms        | self          | watchdog: re-create dead actors                        |
//!
//! Children live on the Supervisor's arbiter and talk to each other only through it, so a
//! re-created actor is reachable at once. Re-created actors rebuild their state from Docker:
//! a PodWorker's first sync reads the pod's containers, PLEG's first relist reads them all.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use dockerlet_messages::debug::{
    ActorState, DebugEvent, DebugSnapshot, FaultTarget, GetActorState, GetDebugSnapshot, GetHealth, Health,
    InjectFault, Panic, RecordEvent,
};
use dockerlet_messages::pleg::{LifecycleEventKind, PodLifecycleEvent, RelistCompleted};
use dockerlet_messages::probe::{ForgetPod, ProbeResultChanged, ResendProbeTargets, WatchContainers};
use dockerlet_messages::source::{DesiredPod, ManifestError, SourcePodsChanged};
use dockerlet_messages::status::{GetPods, RemovePodStatus, SetPodStatus};
use dockerlet_messages::worker::{
    FinalizePodDeletion, PodTerminated, PublishStatus, StopActor, SyncPod, TerminatePod, UpdatePod,
};
use dockerlet_messages::PodUid;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use crate::node_status::{NodeStatusActor, NodeStatusConfig};
use crate::pleg::{PlegActor, PlegLinks};
use crate::pod_worker::{PodWorker, PodWorkerConfig, WorkerLinks};
use crate::prober::{ProbeActor, ProbeLinks};
use crate::source::api::ApiSource;
use crate::source::http::{HttpSource, HttpSourceConfig};
use crate::source::FileSource;
use crate::status::StatusActor;
use dockerlet_kube::recorder::{Correlated, EventCorrelator};
use dockerlet_kube::{KubeApi, PodEventRef};
use dockerlet_runtime::ContainerRuntime;

/// How often the watchdog looks for dead children.
const WATCHDOG_PERIOD: Duration = Duration::from_millis(250);
/// How many debug events are kept.
const EVENT_LOG_SIZE: usize = 200;
/// How long a child may take to answer a debug query.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// Settings of the actor system.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// Shared PodWorker settings (node name included).
    pub worker: Arc<PodWorkerConfig>,
    /// `--pod-manifest-path`, if any.
    pub manifest_path: Option<PathBuf>,
    /// `--file-check-frequency`.
    pub file_check_frequency: Duration,
    /// PLEG relist period.
    pub relist_period: Duration,
    /// Honour [`InjectFault`] (tests only).
    pub fault_injection: bool,
    /// The API server, in API-server mode (`--kubeconfig`).
    pub api: Option<KubeApi>,
    /// Static pods from a URL (`--manifest-url`).
    pub manifest_url: Option<HttpSourceConfig>,
    /// Node registration and heartbeats, in API-server mode.
    pub node_status: Option<NodeStatusConfig>,
}

/// A child actor and how often it was re-created.
struct Child<A: Actor> {
    addr: Addr<A>,
    restarts: u32,
}

/// A PodWorker and what it is for.
struct WorkerEntry {
    addr: Addr<PodWorker>,
    restarts: u32,
    /// Termination was asked for (with this grace); a re-created worker resumes it.
    terminating: Option<Option<Duration>>,
    /// The pod the worker was started for (orphans get a stand-in with only the UID).
    pod: Arc<Pod>,
}

/// The root actor.
pub struct Supervisor {
    /// Settings.
    config: SupervisorConfig,
    /// Docker.
    runtime: Arc<dyn ContainerRuntime>,
    /// Desired pods by UID, from every source.
    desired: BTreeMap<PodUid, DesiredPod>,
    /// One worker per pod UID (desired pods, and pods being terminated).
    workers: HashMap<PodUid, WorkerEntry>,
    /// The PLEG.
    pleg: Option<Child<PlegActor>>,
    /// The prober.
    probe: Option<Child<ProbeActor>>,
    /// The status holder.
    status: Option<Child<StatusActor>>,
    /// The static pod source.
    source: Option<Child<FileSource>>,
    /// Each source's latest pod set (SET semantics per source); desired is their union.
    sources: BTreeMap<String, Vec<DesiredPod>>,
    /// Rejected manifests per source.
    source_errors: BTreeMap<String, Vec<ManifestError>>,
    /// The URL source.
    http_source: Option<Child<HttpSource>>,
    /// The API server source, in API-server mode.
    api_source: Option<Child<ApiSource>>,
    /// Node registration and heartbeats, in API-server mode.
    node_status: Option<Child<NodeStatusActor>>,
    /// Every source has delivered once: only then may containers of unknown pods be removed
    /// (otherwise a restart would kill every pod before the manifests are read).
    sources_ready: bool,
    /// Manifests rejected by the sources.
    manifest_errors: Vec<ManifestError>,
    /// Recent noteworthy events, newest last.
    events: VecDeque<DebugEvent>,
    /// Events written to the API: counted, combined, rate-limited.
    events_api: EventCorrelator,
    /// Messages handled.
    handled: u64,
}

impl Supervisor {
    /// A supervisor; children start with it.
    pub fn new(config: SupervisorConfig, runtime: Arc<dyn ContainerRuntime>) -> Self {
        Supervisor {
            sources_ready: config.manifest_path.is_none() && config.api.is_none() && config.manifest_url.is_none(),
            source_errors: BTreeMap::new(),
            http_source: None,
            sources: BTreeMap::new(),
            events_api: EventCorrelator::default(),
            api_source: None,
            node_status: None,
            config,
            runtime,
            desired: BTreeMap::new(),
            workers: HashMap::new(),
            pleg: None,
            probe: None,
            status: None,
            source: None,
            manifest_errors: Vec::new(),
            events: VecDeque::new(),
            handled: 0,
        }
    }

    fn node_name(&self) -> &str {
        &self.config.worker.node_name
    }

    fn record(&mut self, reason: &str, object: String, message: String) {
        self.keep(DebugEvent {
            time: Timestamp::now().to_string(),
            reason: reason.to_string(),
            object,
            container: None,
            message,
        });
    }

    fn keep(&mut self, event: DebugEvent) {
        if self.events.len() == EVENT_LOG_SIZE {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }

    fn start_http_source(&self, ctx: &mut Context<Self>) -> Option<Addr<HttpSource>> {
        let config = self.config.manifest_url.clone()?;
        Some(HttpSource::new(config, self.node_name().to_string(), ctx.address().recipient()).start())
    }

    fn start_api_source(&self, ctx: &mut Context<Self>) -> Option<Addr<ApiSource>> {
        let api = self.config.api.clone()?;
        Some(ApiSource::new(api, ctx.address().recipient()).start())
    }

    fn start_node_status(&self, ctx: &mut Context<Self>) -> Option<Addr<NodeStatusActor>> {
        let (api, config) = (self.config.api.clone()?, self.config.node_status.clone()?);
        Some(NodeStatusActor::new(api, config, ctx.address().recipient()).start())
    }

    fn start_probe(&self, ctx: &mut Context<Self>) -> Addr<ProbeActor> {
        let me = ctx.address();
        let links = ProbeLinks {
            results: me.clone().recipient(),
            events: me.recipient(),
        };
        ProbeActor::new(self.runtime.clone(), links).start()
    }

    fn start_pleg(&self, ctx: &mut Context<Self>) -> Addr<PlegActor> {
        let me = ctx.address();
        let links = PlegLinks {
            events: me.clone().recipient(),
            relisted: me.recipient(),
        };
        PlegActor::new(
            self.runtime.clone(),
            self.node_name().to_string(),
            links,
            self.config.relist_period,
        )
        .start()
    }

    fn start_source(&self, ctx: &mut Context<Self>) -> Option<Addr<FileSource>> {
        let path = self.config.manifest_path.clone()?;
        let source = FileSource::new(
            path,
            self.node_name().to_string(),
            self.config.file_check_frequency,
            ctx.address().recipient(),
        );
        Some(source.start())
    }

    fn start_worker(
        &self,
        pod: Arc<Pod>,
        terminating: Option<Option<Duration>>,
        ctx: &mut Context<Self>,
    ) -> Addr<PodWorker> {
        let me = ctx.address();
        let links = WorkerLinks {
            status: me.clone().recipient(),
            removed: me.clone().recipient(),
            events: me.clone().recipient(),
            terminated: me.clone().recipient(),
            watch: me.clone().recipient(),
            forget: me.recipient(),
        };
        let worker = PodWorker::new(pod, self.runtime.clone(), self.config.worker.clone(), links);
        match terminating {
            Some(grace) => worker.terminating(grace).start(),
            None => worker.start(),
        }
    }

    fn add_worker(&mut self, pod: Arc<Pod>, terminating: Option<Option<Duration>>, ctx: &mut Context<Self>) {
        let uid = PodUid(pod.metadata.uid.clone().unwrap_or_default());
        let addr = self.start_worker(pod.clone(), terminating, ctx);
        self.workers.insert(
            uid,
            WorkerEntry {
                addr,
                restarts: 0,
                terminating,
                pod,
            },
        );
    }

    /// Write a pod event to the API (kubelet's recorder): Warning for failures; counted,
    /// combined and rate-limited by the [`EventCorrelator`].
    fn record_in_api(&mut self, event: &DebugEvent, ctx: &mut Context<Self>) {
        let Some(api) = self.config.api.clone() else { return };
        let (reason, message) = (event.reason.as_str(), event.message.as_str());
        let Some(pod) = self.desired.values().find(|p| pod_ref(&p.pod) == event.object) else {
            return;
        };
        // kubelet's container reference: `spec.containers{name}` or `spec.initContainers{name}`.
        let field_path = event.container.as_ref().map(|name| {
            let init = pod
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.init_containers.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| &c.name == name));
            if init {
                format!("spec.initContainers{{{name}}}")
            } else {
                format!("spec.containers{{{name}}}")
            }
        });
        let meta = &pod.pod.metadata;
        let (namespace, name, uid) = (
            meta.namespace.clone().unwrap_or_else(|| "default".to_string()),
            meta.name.clone().unwrap_or_default(),
            meta.uid.clone().unwrap_or_default(),
        );
        // Named as kubelet names them: `<pod>.<unix nanoseconds in hex>`.
        let Some(Correlated {
            name: event_name,
            message,
            count,
        }) = self.events_api.observe(
            (&uid, &name),
            reason,
            field_path.as_deref().unwrap_or_default(),
            message,
            std::time::Instant::now(),
            || format!("{:x}", Timestamp::now().as_nanosecond()),
        )
        else {
            return;
        };
        let warning = [
            "BackOff",
            "Failed",
            "Unhealthy",
            "FailedPostStartHook",
            "FailedPreStopHook",
            "ProbeWarning",
            "FailedCreatePodSandBox",
        ];
        let kind = if warning.contains(&reason) { "Warning" } else { "Normal" };
        let reason = reason.to_string();
        let future = async move {
            if let Err(e) = api
                .record_pod_event(
                    &event_name,
                    PodEventRef {
                        namespace: &namespace,
                        pod: &name,
                        uid: &uid,
                        field_path: field_path.as_deref(),
                    },
                    kind,
                    &reason,
                    &message,
                    count,
                )
                .await
            {
                tracing::debug!(error = %e, "cannot record event");
            }
        };
        ctx.spawn(future.into_actor(self));
    }

    /// Re-create every child whose mailbox closed (it panicked or stopped unexpectedly).
    fn watchdog(&mut self, ctx: &mut Context<Self>) {
        let mut restarted = Vec::new();
        if self.pleg.as_ref().is_some_and(|c| !c.addr.connected()) {
            let addr = self.start_pleg(ctx);
            let child = self.pleg.as_mut().expect("checked above");
            child.addr = addr;
            child.restarts += 1;
            restarted.push(("PlegActor".to_string(), "pleg".to_string()));
        }
        if self.http_source.as_ref().is_some_and(|c| !c.addr.connected()) {
            if let Some(addr) = self.start_http_source(ctx) {
                let child = self.http_source.as_mut().expect("checked above");
                child.addr = addr;
                child.restarts += 1;
                restarted.push(("HttpSource".to_string(), "http".to_string()));
            }
        }
        if self.api_source.as_ref().is_some_and(|c| !c.addr.connected()) {
            if let Some(addr) = self.start_api_source(ctx) {
                let child = self.api_source.as_mut().expect("checked above");
                child.addr = addr;
                child.restarts += 1;
                restarted.push(("ApiSource".to_string(), "api".to_string()));
            }
        }
        if self.node_status.as_ref().is_some_and(|c| !c.addr.connected()) {
            if let Some(addr) = self.start_node_status(ctx) {
                let child = self.node_status.as_mut().expect("checked above");
                child.addr = addr;
                child.restarts += 1;
                restarted.push(("NodeStatusActor".to_string(), "node".to_string()));
            }
        }
        if self.probe.as_ref().is_some_and(|c| !c.addr.connected()) {
            let addr = self.start_probe(ctx);
            let child = self.probe.as_mut().expect("checked above");
            child.addr = addr;
            child.restarts += 1;
            restarted.push(("ProbeActor".to_string(), "probes".to_string()));
            // The new ProbeActor knows no container: have every worker tell it again.
            for entry in self.workers.values() {
                entry.addr.do_send(ResendProbeTargets);
            }
        }
        if self.status.as_ref().is_some_and(|c| !c.addr.connected()) {
            let child = self.status.as_mut().expect("checked above");
            child.addr = StatusActor::new(self.config.api.clone()).start();
            child.restarts += 1;
            restarted.push(("StatusActor".to_string(), "status".to_string()));
            // The new StatusActor is empty: have every worker publish again.
            for entry in self.workers.values() {
                entry.addr.do_send(PublishStatus);
            }
        }
        if self.source.as_ref().is_some_and(|c| !c.addr.connected()) {
            if let Some(addr) = self.start_source(ctx) {
                let child = self.source.as_mut().expect("checked above");
                child.addr = addr;
                child.restarts += 1;
                restarted.push(("FileSource".to_string(), "file".to_string()));
            }
        }
        let dead: Vec<PodUid> = self
            .workers
            .iter()
            .filter(|(_, e)| !e.addr.connected())
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in dead {
            let (pod, terminating) = {
                let entry = &self.workers[&uid];
                (entry.pod.clone(), entry.terminating)
            };
            let addr = self.start_worker(pod, terminating, ctx);
            let entry = self.workers.get_mut(&uid).expect("listed above");
            entry.addr = addr;
            entry.restarts += 1;
            restarted.push(("PodWorker".to_string(), pod_ref(&entry.pod)));
        }
        for (kind, name) in restarted {
            tracing::error!(actor = %kind, name = %name, "actor died; re-created it");
            self.record(
                "ActorRestarted",
                name.clone(),
                format!("{kind} {name} died and was re-created"),
            );
        }
    }
}

/// Equal but for `kubernetes.io/config.seen`, which a re-created source stamps anew.
fn same_pod(a: &Pod, b: &Pod) -> bool {
    let without_seen = |p: &Pod| {
        let mut p = p.clone();
        if let Some(annotations) = p.metadata.annotations.as_mut() {
            annotations.remove(dockerlet_pod::annotations::CONFIG_SEEN);
        }
        p
    };
    without_seen(a) == without_seen(b)
}

fn pod_ref(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.status = Some(Child {
            addr: StatusActor::new(self.config.api.clone()).start(),
            restarts: 0,
        });
        let probe = self.start_probe(ctx);
        self.probe = Some(Child {
            addr: probe,
            restarts: 0,
        });
        let pleg = self.start_pleg(ctx);
        self.pleg = Some(Child {
            addr: pleg,
            restarts: 0,
        });
        self.source = self.start_source(ctx).map(|addr| Child { addr, restarts: 0 });
        self.api_source = self.start_api_source(ctx).map(|addr| Child { addr, restarts: 0 });
        self.http_source = self.start_http_source(ctx).map(|addr| Child { addr, restarts: 0 });
        self.node_status = self.start_node_status(ctx).map(|addr| Child { addr, restarts: 0 });
        ctx.run_interval(WATCHDOG_PERIOD, |act, ctx| act.watchdog(ctx));
        tracing::info!(node = %self.node_name(), "supervisor started");
    }
}

impl Handler<SourcePodsChanged> for Supervisor {
    type Result = ();

    /// Apply a source's full pod set; the desired pods are the union of every source's.
    fn handle(&mut self, msg: SourcePodsChanged, ctx: &mut Self::Context) {
        self.handled += 1;
        self.source_errors.insert(msg.source.clone(), msg.errors);
        self.manifest_errors = self.source_errors.values().flatten().cloned().collect();
        self.sources.insert(msg.source, msg.pods);
        let expected = [
            self.config.manifest_path.is_some().then_some("file"),
            self.config.manifest_url.is_some().then_some("http"),
            self.config.api.is_some().then_some("api"),
        ];
        self.sources_ready = expected.iter().flatten().all(|s| self.sources.contains_key(*s));
        let mut wanted: BTreeMap<PodUid, DesiredPod> = BTreeMap::new();
        for pods in self.sources.values() {
            for p in pods {
                wanted.entry(p.uid.clone()).or_insert_with(|| p.clone());
            }
        }
        let gone: Vec<PodUid> = self
            .desired
            .keys()
            .filter(|uid| !wanted.contains_key(*uid))
            .cloned()
            .collect();
        for uid in gone {
            let pod = self.desired.remove(&uid).expect("listed above");
            tracing::info!(pod.uid = %uid, pod = %pod_ref(&pod.pod), "pod removed from its source");
            self.record("PodRemoved", pod_ref(&pod.pod), format!("removed from {}", pod.origin));
            if let Some(entry) = self.workers.get_mut(&uid) {
                entry.terminating = Some(None);
                entry.addr.do_send(TerminatePod { grace_period: None });
            }
        }
        for (uid, pod) in std::mem::take(&mut wanted) {
            let changed = self.desired.get(&uid).is_none_or(|old| !same_pod(&old.pod, &pod.pod));
            if !changed {
                continue;
            }
            let shared = Arc::new(pod.pod.clone());
            match self.workers.get_mut(&uid) {
                Some(entry) if entry.terminating.is_none() => {
                    entry.pod = shared.clone();
                    entry.addr.do_send(UpdatePod { pod: shared });
                }
                // Still terminating an earlier incarnation: PodTerminated starts it again.
                Some(_) => {}
                None => {
                    tracing::info!(pod.uid = %uid, pod = %pod_ref(&pod.pod), origin = %pod.origin, "pod added");
                    self.record("PodAdded", pod_ref(&pod.pod), format!("from {}", pod.origin));
                    self.add_worker(shared, None, ctx);
                }
            }
            self.desired.insert(uid, pod);
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

    /// Containers of pods no source wants, and no worker handles, are terminated.
    fn handle(&mut self, msg: RelistCompleted, ctx: &mut Self::Context) {
        self.handled += 1;
        if !self.sources_ready {
            return;
        }
        for uid in msg.pods {
            if self.desired.contains_key(&uid) || self.workers.contains_key(&uid) {
                continue;
            }
            tracing::info!(pod.uid = %uid, "removing containers of a pod no source wants");
            self.record(
                "OrphanRemoved",
                uid.to_string(),
                "containers of a pod no source wants are being removed".to_string(),
            );
            // Only the UID is known; the name is for logs and the debug page.
            let stand_in = Pod {
                metadata: ObjectMeta {
                    uid: Some(uid.0.clone()),
                    name: Some(format!("orphan-{uid}")),
                    ..Default::default()
                },
                ..Default::default()
            };
            self.add_worker(Arc::new(stand_in), Some(None), ctx);
        }
    }
}

impl Handler<WatchContainers> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: WatchContainers, _: &mut Self::Context) {
        self.handled += 1;
        if let Some(probe) = &self.probe {
            probe.addr.do_send(msg);
        }
    }
}

impl Handler<ForgetPod> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: ForgetPod, _: &mut Self::Context) {
        self.handled += 1;
        if let Some(probe) = &self.probe {
            probe.addr.do_send(msg);
        }
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

impl Handler<SetPodStatus> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: SetPodStatus, _: &mut Self::Context) {
        self.handled += 1;
        if let Some(status) = &self.status {
            status.addr.do_send(msg);
        }
    }
}

impl Handler<RemovePodStatus> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: RemovePodStatus, _: &mut Self::Context) {
        self.handled += 1;
        if let Some(status) = &self.status {
            status.addr.do_send(msg);
        }
    }
}

impl Handler<RecordEvent> for Supervisor {
    type Result = ();

    /// Keep the event for the debug page and, in API-server mode, record it in the API.
    fn handle(&mut self, msg: RecordEvent, ctx: &mut Self::Context) {
        self.handled += 1;
        self.record_in_api(&msg.event, ctx);
        self.keep(msg.event);
    }
}

impl Handler<PodTerminated> for Supervisor {
    type Result = ();

    /// The worker is done; start a fresh one if the pod is wanted again meanwhile.
    fn handle(&mut self, msg: PodTerminated, ctx: &mut Self::Context) {
        self.handled += 1;
        if let Some(entry) = self.workers.remove(&msg.uid) {
            entry.addr.do_send(StopActor);
        }
        // The pod's event counts go with it (kept here, not scanned on every event).
        self.events_api.forget(&msg.uid.0);
        let Some(desired) = self.desired.get(&msg.uid) else {
            return;
        };
        let meta = &desired.pod.metadata;
        if meta.deletion_timestamp.is_some() {
            // Deleted in the API and now stopped: delete it for good, as kubelet does.
            if let Some(source) = &self.api_source {
                source.addr.do_send(FinalizePodDeletion {
                    namespace: meta.namespace.clone().unwrap_or_else(|| "default".to_string()),
                    name: meta.name.clone().unwrap_or_default(),
                    uid: msg.uid.clone(),
                });
            }
            return;
        }
        let pod = Arc::new(desired.pod.clone());
        self.add_worker(pod, None, ctx);
    }
}

impl Handler<GetPods> for Supervisor {
    type Result = ResponseFuture<Vec<Pod>>;

    fn handle(&mut self, msg: GetPods, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let status = self.status.as_ref().map(|c| c.addr.clone());
        Box::pin(async move {
            match status {
                Some(addr) => addr.send(msg).await.unwrap_or_default(),
                None => Vec::new(),
            }
        })
    }
}

impl Handler<GetHealth> for Supervisor {
    type Result = ResponseFuture<Health>;

    fn handle(&mut self, msg: GetHealth, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let pleg = self.pleg.as_ref().map(|c| c.addr.clone());
        Box::pin(async move {
            let unhealthy = |reason: &str| Health {
                healthy: false,
                reason: Some(reason.to_string()),
            };
            match pleg {
                Some(addr) => match tokio::time::timeout(QUERY_TIMEOUT, addr.send(msg)).await {
                    Ok(Ok(health)) => health,
                    _ => unhealthy("PLEG is not responding"),
                },
                None => unhealthy("PLEG is not running"),
            }
        })
    }
}

async fn ask<A>(addr: Addr<A>, restarts: u32) -> Option<ActorState>
where
    A: Actor<Context = Context<A>> + Handler<GetActorState>,
{
    let mut state = tokio::time::timeout(QUERY_TIMEOUT, addr.send(GetActorState))
        .await
        .ok()?
        .ok()?;
    state.restarts = restarts;
    Some(state)
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
                "desired_pods": self.desired.len(),
                "workers": self.workers.len(),
                "sources_ready": self.sources_ready,
            }),
        };
        let mut queries: Vec<futures::future::BoxFuture<'static, Option<ActorState>>> = Vec::new();
        if let Some(c) = &self.probe {
            queries.push(Box::pin(ask(c.addr.clone(), c.restarts)));
        }
        if let Some(c) = &self.api_source {
            queries.push(Box::pin(ask(c.addr.clone(), c.restarts)));
        }
        if let Some(c) = &self.http_source {
            queries.push(Box::pin(ask(c.addr.clone(), c.restarts)));
        }
        if let Some(c) = &self.node_status {
            queries.push(Box::pin(ask(c.addr.clone(), c.restarts)));
        }
        if let Some(c) = &self.pleg {
            queries.push(Box::pin(ask(c.addr.clone(), c.restarts)));
        }
        if let Some(c) = &self.status {
            queries.push(Box::pin(ask(c.addr.clone(), c.restarts)));
        }
        if let Some(c) = &self.source {
            queries.push(Box::pin(ask(c.addr.clone(), c.restarts)));
        }
        let mut workers: Vec<_> = self
            .workers
            .values()
            .map(|e| (pod_ref(&e.pod), e.addr.clone(), e.restarts))
            .collect();
        workers.sort_by(|a, b| a.0.cmp(&b.0));
        queries.extend(
            workers
                .into_iter()
                .map(|(_, addr, restarts)| -> futures::future::BoxFuture<'static, _> { Box::pin(ask(addr, restarts)) }),
        );
        let snapshot = DebugSnapshot {
            node_name: self.node_name().to_string(),
            actors: vec![own],
            manifest_errors: self.manifest_errors.clone(),
            events: self.events.iter().cloned().collect(),
        };
        Box::pin(async move {
            let mut snapshot = snapshot;
            snapshot
                .actors
                .extend(futures::future::join_all(queries).await.into_iter().flatten());
            snapshot
        })
    }
}

impl Handler<InjectFault> for Supervisor {
    type Result = Result<(), String>;

    /// Make the target panic in a handler (only when fault injection is enabled).
    fn handle(&mut self, msg: InjectFault, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        if !self.config.fault_injection {
            return Err("fault injection is disabled".to_string());
        }
        tracing::warn!(target = ?msg.target, "fault injection: making an actor panic");
        match &msg.target {
            FaultTarget::Pleg => self.pleg.as_ref().map(|c| c.addr.do_send(Panic)),
            FaultTarget::Probe => self.probe.as_ref().map(|c| c.addr.do_send(Panic)),
            FaultTarget::Status => self.status.as_ref().map(|c| c.addr.do_send(Panic)),
            FaultTarget::Source => self.source.as_ref().map(|c| c.addr.do_send(Panic)),
            FaultTarget::PodWorker(uid) => self.workers.get(uid).map(|e| e.addr.do_send(Panic)),
        }
        .ok_or_else(|| format!("no such actor: {:?}", msg.target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_messages::runtime::{ContainerRole, RuntimeState};
    use dockerlet_pod::backoff::BackoffConfig;
    use dockerlet_runtime::fake::FakeRuntime;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    const NODE: &str = "n1";

    fn supervisor(runtime: &FakeRuntime) -> Addr<Supervisor> {
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
            min_oom_score_adj: -1000,
            root_dir: std::env::temp_dir(),
            api: None,
        };
        let config = SupervisorConfig {
            worker: Arc::new(worker),
            manifest_path: None,
            file_check_frequency: Duration::from_secs(20),
            relist_period: Duration::from_millis(50),
            fault_injection: true,
            api: None,
            manifest_url: None,
            node_status: None,
        };
        Supervisor::new(config, Arc::new(runtime.clone())).start()
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
            pod,
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

    async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
        for _ in 0..200 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("timed out waiting for: {what}");
    }

    /// A pod from a source gets a sandbox and its container; removing it from the source stops
    /// and removes everything.
    #[actix::test]
    async fn pods_follow_their_source() {
        let runtime = FakeRuntime::with_images(&["img:1"]);
        let sup = supervisor(&runtime);
        let pods = vec![desired("web", "u1", 0)];
        sup.do_send(SourcePodsChanged {
            source: "file".into(),
            pods,
            errors: vec![],
        });
        eventually("sandbox and container running", || running(&runtime).len() == 2).await;
        let listed = sup.send(GetPods).await.unwrap();
        assert_eq!(listed[0].status.as_ref().unwrap().phase.as_deref(), Some("Running"));
        sup.do_send(SourcePodsChanged {
            source: "file".into(),
            pods: vec![],
            errors: vec![],
        });
        eventually("all containers removed", || {
            runtime.state.lock().unwrap().containers.is_empty()
        })
        .await;
        assert!(sup.send(GetPods).await.unwrap().is_empty());
        let stops = runtime.calls().iter().filter(|c| c.starts_with("stop")).count();
        assert_eq!(stops, 2, "{:?}", runtime.calls());
    }

    /// A PodWorker and the PlegActor that panic are re-created; the pod's containers are not
    /// restarted and the debug snapshot counts the restarts.
    #[actix::test]
    async fn panicking_actors_are_recreated_without_restarting_pods() {
        let runtime = FakeRuntime::with_images(&["img:1"]);
        let sup = supervisor(&runtime);
        sup.do_send(SourcePodsChanged {
            source: "file".into(),
            pods: vec![desired("web", "u1", 0)],
            errors: vec![],
        });
        eventually("pod running", || running(&runtime).len() == 2).await;
        let before = running(&runtime);
        let creates_before = runtime.calls().iter().filter(|c| c.starts_with("create")).count();

        sup.send(InjectFault {
            target: FaultTarget::PodWorker(PodUid("u1".into())),
        })
        .await
        .unwrap()
        .unwrap();
        sup.send(InjectFault {
            target: FaultTarget::Pleg,
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
        let creates_after = runtime.calls().iter().filter(|c| c.starts_with("create")).count();
        assert_eq!(creates_after, creates_before, "{:?}", runtime.calls());

        // A re-created StatusActor gets every pod's status again.
        sup.send(InjectFault {
            target: FaultTarget::Status,
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

    /// Containers of a pod no source wants (its manifest vanished while no agent ran) are
    /// removed once the sources have spoken, and not before.
    #[actix::test]
    async fn orphaned_containers_are_removed_once_sources_are_ready() {
        let runtime = FakeRuntime::with_images(&["img:1"]);
        let orphan = desired("old", "u9", 0).pod;
        let id = runtime
            .create_container(dockerlet_pod::container::sandbox_spec(&orphan, NODE, "pause", 0))
            .await
            .unwrap();
        runtime.start_container(&id).await.unwrap();
        let sup = supervisor(&runtime);
        tokio::time::sleep(Duration::from_millis(300)).await;
        // No manifest path means the sources are ready at once; a real file source would hold
        // this back until its first read. Here the orphan goes right away.
        eventually("orphan removed", || runtime.state.lock().unwrap().containers.is_empty()).await;
        let snapshot = sup.send(GetDebugSnapshot).await.unwrap();
        assert!(snapshot.events.iter().any(|e| e.reason == "OrphanRemoved"));
    }
}
