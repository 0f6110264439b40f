//! The pod manager: which desired pod gets a PodWorker, when, and how. A plain struct the
//! Supervisor owns (no actix: a worker is any [`Worker`], so it is tested with a recording
//! fake), holding what kubelet keeps in its pod manager and `HandlePodAdditions`
//! (`pkg/kubelet/kubelet.go`) and its pod workers' bookkeeping (`pkg/kubelet/pod_workers.go`):
//! - the desired pods, merged from every source ([`PodConfig`]);
//! - admission, in one function ([`PodManager::admission`]): the node shutting down, the node
//!   fit against the pods admitted before, and a Node read again when node affinity alone
//!   refuses (kubelet's `generalFilter`);
//! - static pods one version at a time (kubelet's `waitingToStartStaticPodsByFullname`);
//! - restart counts of a pod wanted again under the same UID;
//! - the final deletion of API pods deleted and stopped here;
//! - orphans: containers of pods no source wants.
//!
//! What the Supervisor must do besides starting and messaging workers comes back as
//! [`Effect`]s.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use dockerlet_kube::KubeClient;
use dockerlet_messages::source::{PodSource, SourcePodsChanged};
use dockerlet_messages::worker::FinalizePodDeletion;
use dockerlet_messages::{PodRef, PodUid};
use dockerlet_metrics::{Metrics, StaticLabel};
use dockerlet_pod::admission::Rejection;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use crate::pod_config::PodConfig;

/// What the pod manager needs of a pod's worker (the Supervisor's is a PodWorker's address).
pub trait Worker {
    /// The pod's desired spec changed.
    fn update(&self, pod: Arc<Pod>);
    /// Stop and remove every container of the pod, with its own grace period, for `reason`.
    fn terminate(&self, reason: &str);
    /// The worker's work is over: stop it (containers untouched).
    fn stop(&self);
    /// Its mailbox is closed: it panicked or stopped.
    fn dead(&self) -> bool;
}

/// How to start a worker.
#[derive(Debug, Clone)]
pub struct WorkerStart {
    /// The pod.
    pub pod: Arc<Pod>,
    /// Only terminate what runs of the pod.
    pub termination: Option<Termination>,
    /// Why the node did not admit the pod (it then never runs).
    pub rejection: Option<Rejection>,
    /// The next attempt of each container, for a pod that ran before under this UID.
    pub next_attempts: BTreeMap<String, u32>,
}

/// A termination asked of a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Termination {
    /// The grace period asked for; `None` is the pod's own.
    pub grace: Option<Duration>,
    /// Why, for the log of each container stopped and removed.
    pub reason: String,
}

/// A worker and what it is for.
pub struct WorkerEntry<W> {
    /// The worker.
    pub worker: W,
    /// How often it was re-created.
    pub restarts: u32,
    /// Termination was asked for; a re-created worker resumes it.
    pub termination: Option<Termination>,
    /// Who the pod is (an orphan's name is `orphan-<uid>`).
    pub id: PodRef,
    /// The pod the worker was started for (orphans get a stand-in with only the UID).
    pub pod: Arc<Pod>,
    /// Why the node did not admit the pod (it then never runs); kept for a re-created worker.
    pub rejection: Option<Rejection>,
    /// Its last status was Succeeded or Failed: it no longer counts against the node.
    pub finished: bool,
}

impl<W> WorkerEntry<W> {
    /// Admitted, not finished, not being terminated: it counts against the node, and a node
    /// shutdown stops it.
    pub fn running(&self) -> bool {
        self.termination.is_none() && self.rejection.is_none() && !self.finished
    }
}

/// What the Supervisor must do for the pod manager.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Note this in the debug ring.
    Note {
        /// Why (`PodAdded`).
        reason: &'static str,
        /// The pod (`namespace/name`, or the UID of an orphan).
        object: String,
        /// What happened.
        message: String,
    },
    /// Delete this stopped API pod for good (grace 0, its UID as precondition).
    Finalize(FinalizePodDeletion),
    /// Read the Node from the API again, then call [`PodManager::node_read`] for this pod.
    ReadNode(PodUid),
}

/// The verdict of [`PodManager::admission`].
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// The node takes the pod.
    Admitted,
    /// It does not: the pod fails with this reason and never runs.
    Rejected(Rejection),
    /// Node affinity alone refuses it: read the Node again first (the watch may lag a label
    /// just added).
    ReadNodeAgain,
}

/// Starts a worker.
pub type StartWorker<W> = Box<dyn Fn(WorkerStart) -> W>;

/// The desired pods and their workers.
pub struct PodManager<W> {
    /// The desired pods, merged from every source.
    pods: PodConfig,
    /// One worker per pod UID (desired pods, and pods being terminated).
    workers: HashMap<PodUid, WorkerEntry<W>>,
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
    next_attempts: HashMap<PodUid, BTreeMap<String, u32>>,
    /// The node shuts down (kubelet's shutdown manager): new pods are rejected.
    shutting_down: bool,
    /// The node's pressure conditions (kubelet's eviction admit handler).
    pressure: Vec<dockerlet_messages::node::Pressure>,
    /// The Node as the agent registered it: pods are admitted against it until the API's is seen.
    registered: Arc<Node>,
    /// The API server, in cluster mode: its Node, read again for node affinity.
    api: Option<Arc<dyn KubeClient>>,
    /// `kubelet_restarted_pods_total`.
    metrics: Arc<Metrics>,
    /// Starts a worker.
    start: StartWorker<W>,
    /// What the Supervisor must do, gathered during one call.
    effects: Vec<Effect>,
}

impl<W: Worker> PodManager<W> {
    /// Nothing desired yet; `sources` are the sources that must deliver before orphans go.
    pub fn new(
        sources: Vec<PodSource>,
        registered: Arc<Node>,
        api: Option<Arc<dyn KubeClient>>,
        metrics: Arc<Metrics>,
        start: StartWorker<W>,
    ) -> Self {
        PodManager {
            pods: PodConfig::new(sources),
            workers: HashMap::new(),
            finished: HashSet::new(),
            awaiting_node: HashSet::new(),
            waiting_static: HashMap::new(),
            next_attempts: HashMap::new(),
            shutting_down: false,
            pressure: Vec::new(),
            registered,
            api,
            metrics,
            start,
            effects: Vec::new(),
        }
    }

    /// The desired pods.
    pub fn desired(&self) -> &PodConfig {
        &self.pods
    }

    /// The worker of this pod.
    pub fn worker(&self, uid: &PodUid) -> Option<&W> {
        self.workers.get(uid).map(|e| &e.worker)
    }

    /// Every worker.
    pub fn workers(&self) -> impl Iterator<Item = (&PodUid, &WorkerEntry<W>)> {
        self.workers.iter()
    }

    /// The pressure conditions in force: pods are admitted against them.
    pub fn set_pressure(&mut self, conditions: Vec<dockerlet_messages::node::Pressure>) {
        self.pressure = conditions;
    }

    /// The node shuts down (true), or the shutdown was cancelled.
    pub fn set_shutting_down(&mut self, shutting_down: bool) {
        self.shutting_down = shutting_down;
    }

    /// The node shuts down.
    pub fn shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// Merge a source's full pod set; act on what changed in the union.
    pub fn apply(&mut self, update: SourcePodsChanged) -> Vec<Effect> {
        let changes = self.pods.apply(update);
        for pod in changes.removed {
            let _enter = pod.id.span().entered();
            tracing::info!(origin = %pod.origin, "pod removed from its source");
            self.finished.remove(&pod.id.uid);
            self.note("PodRemoved", pod.id.to_string(), format!("removed from {}", pod.origin));
            if let Some(entry) = self.workers.get_mut(&pod.id.uid) {
                let reason = format!("the pod was removed from its source ({})", pod.origin);
                entry.worker.terminate(&reason);
                entry.termination = Some(Termination { grace: None, reason });
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
            match self.workers.get_mut(&pod.id.uid) {
                Some(entry) if entry.termination.is_none() => {
                    entry.pod = shared.clone();
                    entry.worker.update(shared);
                }
                // Still terminating an earlier incarnation: `terminated` starts it again.
                Some(_) => {}
                None if self.finished.contains(&pod.id.uid) => self.finalize(pod.id.clone()),
                None => {
                    pod.id
                        .span()
                        .in_scope(|| tracing::info!(origin = %pod.origin, "pod added"));
                    self.note("PodAdded", pod.id.to_string(), format!("from {}", pod.origin));
                    self.add_pod(shared);
                }
            }
        }
        self.take_effects()
    }

    /// The Node was read again for `uid` ([`Effect::ReadNode`]): admit the pod against it, or
    /// against the Node as last seen when the read found none or failed.
    pub fn node_read(&mut self, uid: &PodUid, node: Option<Arc<Node>>) -> Vec<Effect> {
        self.awaiting_node.remove(uid);
        let Some(desired) = self.pods.get(uid).map(|d| d.pod.clone()) else {
            return self.take_effects();
        };
        if self.workers.contains_key(uid) {
            return self.take_effects();
        }
        let node = node.unwrap_or_else(|| self.node());
        let rejection = match self.admission(&desired, &node, false) {
            Admission::Rejected(r) => Some(r),
            Admission::Admitted | Admission::ReadNodeAgain => None,
        };
        self.add_worker(desired, None, rejection);
        self.take_effects()
    }

    /// The runtime holds containers of `pods`: those of pods no source wants, and no worker
    /// handles, are terminated — once every source has delivered, so a restarted agent kills
    /// nothing before its manifests are read.
    pub fn relisted(&mut self, pods: impl IntoIterator<Item = PodUid>) -> Vec<Effect> {
        if !self.pods.sources_ready() {
            return Vec::new();
        }
        for uid in pods {
            if self.pods.contains(&uid) || self.workers.contains_key(&uid) {
                continue;
            }
            tracing::info!(pod.uid = %uid, "removing containers of a pod no source wants");
            self.note(
                "OrphanRemoved",
                uid.to_string(),
                "containers of a pod no source wants are being removed".to_string(),
            );
            let termination = Some(Termination {
                grace: None,
                reason: "orphan: a pod of this node no source wants".into(),
            });
            self.add_worker(Arc::new(orphan(&uid)), termination, None);
        }
        self.take_effects()
    }

    /// The pods container GC keeps: every desired pod and every pod with a worker; none until
    /// every source has delivered.
    pub fn kept_pods(&self) -> Option<std::collections::HashSet<PodUid>> {
        if !self.pods.sources_ready() {
            return None;
        }
        let desired = self.pods.uids();
        Some(desired.chain(self.workers.keys().cloned()).collect())
    }

    /// The pod's worker published a status: whether the pod finished.
    pub fn finished(&mut self, uid: &PodUid, finished: bool) {
        if let Some(entry) = self.workers.get_mut(uid) {
            entry.finished = entry.rejection.is_some() || finished;
        }
    }

    /// The pod's worker is done: forget it; start a fresh one if the pod is wanted again
    /// meanwhile (its containers' restarts count on from `next_attempts`), delete a deleted API
    /// pod for good, and start a static pod's newer version that waited for this one.
    pub fn terminated(&mut self, uid: &PodUid, next_attempts: BTreeMap<String, u32>) -> Vec<Effect> {
        if let Some(entry) = self.workers.remove(uid) {
            entry.worker.stop();
            let waiting = static_full_name(&entry.pod).and_then(|name| self.waiting_static.remove(&name));
            if let Some(next) = waiting.and_then(|uid| self.pods.get(&uid).map(|d| d.pod.clone())) {
                self.add_pod(next);
            }
        }
        let Some(desired) = self.pods.get(uid) else {
            return self.take_effects();
        };
        let (pod, is_static) = (desired.pod.clone(), desired.is_static());
        if pod.metadata.deletion_timestamp.is_some() {
            // Deleted in the API and now stopped: delete it for good, as kubelet does.
            let id = desired.id.clone();
            self.finished.insert(uid.clone());
            self.finalize(id);
            return self.take_effects();
        }
        // Wanted again under the same UID while it stopped: kubelet counts a restarted pod, and
        // its containers' restarts count on.
        self.next_attempts.insert(uid.clone(), next_attempts);
        let label = StaticLabel {
            r#static: if is_static { "true" } else { "false" },
        };
        self.metrics.restarted_pods.get_or_create(&label).inc();
        self.add_pod(pod);
        self.take_effects()
    }

    /// Re-create every worker whose mailbox closed; returns their pods' names.
    pub fn restart_dead(&mut self) -> Vec<String> {
        let dead: Vec<PodUid> = self
            .workers
            .iter()
            .filter(|(_, e)| e.worker.dead())
            .map(|(uid, _)| uid.clone())
            .collect();
        let mut restarted = Vec::new();
        for uid in dead {
            let entry = &self.workers[&uid];
            let start = WorkerStart {
                pod: entry.pod.clone(),
                termination: entry.termination.clone(),
                rejection: entry.rejection.clone(),
                // Its containers are on Docker still: their attempts count on by themselves.
                next_attempts: Default::default(),
            };
            let worker = (self.start)(start);
            let entry = self.workers.get_mut(&uid).expect("listed above");
            entry.worker = worker;
            entry.restarts += 1;
            restarted.push(entry.id.to_string());
        }
        restarted
    }

    /// Whether the node takes `pod` now: not while it shuts down; otherwise kubelet's predicate
    /// admission on `node` against the pods admitted before it that still run
    /// ([`dockerlet_pod::node_fit`]) — as kubelet's pod manager, a pod gone from its source no
    /// longer counts (one being deleted in the API does until it is gone), nor does one that
    /// finished. Refused by node affinity alone, and `may_read_node_again`, the Node is to be
    /// read again first.
    pub fn admission(&self, pod: &Pod, node: &Node, may_read_node_again: bool) -> Admission {
        if self.shutting_down {
            return Admission::Rejected(Rejection {
                reason: dockerlet_pod::shutdown::NOT_ADMITTED_REASON.to_string(),
                message: dockerlet_pod::shutdown::NOT_ADMITTED_MESSAGE.to_string(),
            });
        }
        if let Err(rejection) = dockerlet_pod::eviction::admit(pod, &self.pressure) {
            return Admission::Rejected(rejection);
        }
        let others: Vec<&Pod> = self
            .workers
            .values()
            .filter(|e| e.running())
            .map(|e| e.pod.as_ref())
            .collect();
        match dockerlet_pod::node_fit::admit(pod, node, &others) {
            Ok(()) => Admission::Admitted,
            Err(r) if may_read_node_again && r.reason == dockerlet_pod::node_fit::NODE_AFFINITY => {
                Admission::ReadNodeAgain
            }
            Err(r) => Admission::Rejected(r),
        }
    }

    /// The desired pods without a worker yet, each with why, for the debug page.
    pub fn waiting_pods(&self) -> Vec<serde_json::Value> {
        let named = |uid: &PodUid| self.pods.get(uid).map(|d| d.id.to_string());
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

    /// The Node to admit pods against: the API's, once seen, else the one registered.
    fn node(&self) -> Arc<Node> {
        self.api
            .as_ref()
            .and_then(|api| api.node_object())
            .unwrap_or_else(|| self.registered.clone())
    }

    /// A worker for a pod new to the node, once its earlier static version stopped and once
    /// admitted; while its Node is read again it has no worker.
    fn add_pod(&mut self, pod: Arc<Pod>) {
        let uid = PodUid::of(&pod);
        if let Some(name) = static_full_name(&pod) {
            let terminating = self
                .workers
                .values()
                .any(|e| e.termination.is_some() && static_full_name(&e.pod).as_ref() == Some(&name));
            if terminating {
                PodRef::of(&pod)
                    .span()
                    .in_scope(|| tracing::info!("static pod waits for its earlier version to stop"));
                self.waiting_static.insert(name, uid);
                return;
            }
        }
        match self.admission(&pod, &self.node(), self.api.is_some()) {
            Admission::ReadNodeAgain => {
                if self.awaiting_node.insert(uid.clone()) {
                    self.effects.push(Effect::ReadNode(uid));
                }
            }
            Admission::Admitted => self.add_worker(pod, None, None),
            Admission::Rejected(r) => self.add_worker(pod, None, Some(r)),
        }
    }

    fn add_worker(&mut self, pod: Arc<Pod>, termination: Option<Termination>, rejection: Option<Rejection>) {
        let id = PodRef::of(&pod);
        let uid = id.uid.clone();
        let next_attempts = self.next_attempts.remove(&uid).unwrap_or_default();
        let worker = (self.start)(WorkerStart {
            pod: pod.clone(),
            termination: termination.clone(),
            rejection: rejection.clone(),
            next_attempts,
        });
        let entry = WorkerEntry {
            worker,
            restarts: 0,
            termination,
            id,
            pod,
            finished: rejection.is_some(),
            rejection,
        };
        self.workers.insert(uid, entry);
    }

    /// Delete a stopped API pod for good.
    fn finalize(&mut self, id: PodRef) {
        self.effects.push(Effect::Finalize(FinalizePodDeletion {
            namespace: id.namespace,
            name: id.name,
            uid: id.uid,
        }));
    }

    fn note(&mut self, reason: &'static str, object: String, message: String) {
        self.effects.push(Effect::Note {
            reason,
            object,
            message,
        });
    }

    fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }
}

/// A static pod's namespace and name (kubelet's full name), which one version at a time may
/// run under; `None` for API pods and orphans.
fn static_full_name(pod: &Pod) -> Option<(String, String)> {
    if dockerlet_pod::annotations::source(pod)? == PodSource::Api {
        return None;
    }
    let id = PodRef::of(pod);
    Some((id.namespace, id.name))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    use dockerlet_messages::source::DesiredPod;
    use k8s_openapi::api::core::v1::{NodeStatus, PodSpec};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// What the fake workers were told, in order ("start u1", "terminate u1", …).
    type Log = Rc<RefCell<Vec<String>>>;

    /// A worker that logs what it is told.
    struct Fake {
        uid: String,
        log: Log,
        dead: Rc<Cell<bool>>,
    }

    impl Worker for Fake {
        fn update(&self, _: Arc<Pod>) {
            self.log.borrow_mut().push(format!("update {}", self.uid));
        }

        fn terminate(&self, _reason: &str) {
            self.log.borrow_mut().push(format!("terminate {}", self.uid));
        }

        fn stop(&self) {
            self.log.borrow_mut().push(format!("stop {}", self.uid));
        }

        fn dead(&self) -> bool {
            self.dead.get()
        }
    }

    /// A manager whose workers log into the returned log; a node that takes `max_pods` pods.
    fn manager(sources: Vec<PodSource>, max_pods: u32, api: Option<Arc<dyn KubeClient>>) -> (PodManager<Fake>, Log) {
        let log = Log::default();
        let starts = log.clone();
        let start = Box::new(move |s: WorkerStart| {
            let uid = s.pod.metadata.uid.clone().unwrap_or_default();
            let mut line = format!("start {uid}");
            if s.termination.is_some() {
                line.push_str(" terminating");
            }
            if let Some(r) = &s.rejection {
                line.push_str(&format!(" rejected {}", r.reason));
            }
            if !s.next_attempts.is_empty() {
                line.push_str(&format!(" attempts {:?}", s.next_attempts));
            }
            starts.borrow_mut().push(line);
            Fake {
                uid,
                log: starts.clone(),
                dead: Rc::default(),
            }
        });
        let node = Node {
            status: Some(NodeStatus {
                allocatable: Some([("pods".to_string(), Quantity(max_pods.to_string()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let manager = PodManager::new(sources, Arc::new(node), api, Arc::default(), start);
        (manager, log)
    }

    /// A pod `name` with UID `uid` from `source`, created at second `age`.
    fn pod(name: &str, uid: &str, source: &str, age: i64) -> DesiredPod {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                annotations: Some(
                    [(
                        dockerlet_pod::annotations::CONFIG_SOURCE.to_string(),
                        source.to_string(),
                    )]
                    .into(),
                ),
                creation_timestamp: Some(Time(
                    k8s_openapi::jiff::Timestamp::from_second(1_000_000 + age).unwrap(),
                )),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            status: None,
        };
        DesiredPod::new(Arc::new(pod), PodSource::parse(source).unwrap(), "test".into())
    }

    fn set(source: PodSource, pods: Vec<DesiredPod>) -> SourcePodsChanged {
        SourcePodsChanged {
            source,
            pods,
            errors: vec![],
        }
    }

    fn taken(log: &Log) -> Vec<String> {
        std::mem::take(&mut *log.borrow_mut())
    }

    /// Pods are admitted oldest first against the pods admitted before them; a finished pod
    /// no longer counts, so a new one fits again.
    #[test]
    fn pods_are_admitted_oldest_first_beside_the_unfinished_ones() {
        let (mut pods, log) = manager(vec![PodSource::File], 1, None);
        let (first, second) = (pod("a", "u1", "file", 1), pod("b", "u2", "file", 2));
        pods.apply(set(PodSource::File, vec![second.clone(), first.clone()]));
        assert_eq!(taken(&log), ["start u1", "start u2 rejected OutOfpods"]);
        pods.finished(&PodUid("u1".into()), true);
        pods.apply(set(PodSource::File, vec![first, second, pod("c", "u3", "file", 3)]));
        assert_eq!(taken(&log), ["start u3"]);
    }

    /// While the node shuts down, new pods are rejected with kubelet's reason.
    #[test]
    fn a_node_shutting_down_admits_nothing() {
        let (mut pods, log) = manager(vec![PodSource::File], 10, None);
        pods.set_shutting_down(true);
        pods.apply(set(PodSource::File, vec![pod("a", "u1", "file", 1)]));
        let reason = dockerlet_pod::shutdown::NOT_ADMITTED_REASON;
        assert_eq!(taken(&log), [format!("start u1 rejected {reason}")]);
    }

    /// An edited static pod (a new UID under the same name) starts only once the old version's
    /// worker terminated; meanwhile the debug page says why it waits.
    #[test]
    fn a_static_pods_new_version_waits_for_the_old_one() {
        let (mut pods, log) = manager(vec![PodSource::File], 10, None);
        pods.apply(set(PodSource::File, vec![pod("web", "u1", "file", 1)]));
        pods.apply(set(PodSource::File, vec![pod("web", "u2", "file", 2)]));
        assert_eq!(taken(&log), ["start u1", "terminate u1"]);
        assert_eq!(pods.waiting_pods()[0]["uid"], "u2");
        pods.terminated(&PodUid("u1".into()), BTreeMap::new());
        assert_eq!(taken(&log), ["stop u1", "start u2"]);
        assert!(pods.waiting_pods().is_empty());
    }

    /// An API pod deleted in the API is deleted for good once stopped, and gets no worker
    /// again: a later watch event about it only repeats the final deletion.
    #[test]
    fn a_deleted_api_pod_is_finalized_once_stopped() {
        let (mut pods, log) = manager(vec![PodSource::Api], 10, None);
        let mut deleted = pod("db", "a1", "api", 1);
        pods.apply(set(PodSource::Api, vec![deleted.clone()]));
        Arc::make_mut(&mut deleted.pod).metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        pods.apply(set(PodSource::Api, vec![deleted.clone()]));
        assert_eq!(taken(&log), ["start a1", "update a1"]);
        let finalize = Effect::Finalize(FinalizePodDeletion {
            namespace: "default".into(),
            name: "db".into(),
            uid: PodUid("a1".into()),
        });
        let effects = pods.terminated(&PodUid("a1".into()), BTreeMap::new());
        assert_eq!(effects, std::slice::from_ref(&finalize));
        assert_eq!(taken(&log), ["stop a1"]);
        Arc::make_mut(&mut deleted.pod).metadata.labels = Some([("x".to_string(), "y".to_string())].into());
        assert_eq!(pods.apply(set(PodSource::Api, vec![deleted])), [finalize]);
        assert!(taken(&log).is_empty(), "no worker again");
    }

    /// A pod stopped and wanted again under its UID gets a new worker whose containers count
    /// their attempts on, and kubelet's restarted-pods counter goes up.
    #[test]
    fn a_pod_wanted_again_counts_its_restarts_on() {
        let (mut pods, log) = manager(vec![PodSource::File], 10, None);
        pods.apply(set(PodSource::File, vec![pod("web", "u1", "file", 1)]));
        let attempts = BTreeMap::from([("app".to_string(), 3)]);
        pods.terminated(&PodUid("u1".into()), attempts);
        assert_eq!(taken(&log), ["start u1", "stop u1", "start u1 attempts {\"app\": 3}"]);
        let label = StaticLabel { r#static: "true" };
        assert_eq!(pods.metrics.restarted_pods.get_or_create(&label).get(), 1);
    }

    /// Containers of a pod no source wants are terminated only once every source delivered.
    #[test]
    fn orphans_wait_for_every_source() {
        let (mut pods, log) = manager(vec![PodSource::File], 10, None);
        assert!(pods.relisted([PodUid("u9".into())]).is_empty());
        assert!(taken(&log).is_empty(), "the file source has not delivered");
        pods.apply(set(PodSource::File, vec![]));
        let effects = pods.relisted([PodUid("u9".into())]);
        assert!(
            matches!(
                &effects[..],
                [Effect::Note {
                    reason: "OrphanRemoved",
                    ..
                }]
            ),
            "{effects:?}"
        );
        assert_eq!(taken(&log), ["start u9 terminating"]);
    }

    /// Refused by node affinity alone, with an API server, the pod waits for the Node to be
    /// read again (once, however often the source repeats it), then is admitted against it.
    #[test]
    fn node_affinity_refusals_read_the_node_again() {
        let api: Arc<dyn KubeClient> = Arc::new(dockerlet_kube::fake::FakeKube::new("n1"));
        let (mut pods, log) = manager(vec![PodSource::Api], 10, Some(api));
        let mut picky = pod("p", "a1", "api", 1);
        let selector = BTreeMap::from([("disk".to_string(), "ssd".to_string())]);
        Arc::make_mut(&mut picky.pod).spec.as_mut().unwrap().node_selector = Some(selector.clone());
        let uid = PodUid("a1".into());
        let effects = pods.apply(set(PodSource::Api, vec![picky.clone()]));
        assert_eq!(effects.last(), Some(&Effect::ReadNode(uid.clone())), "{effects:?}");
        Arc::make_mut(&mut picky.pod).metadata.labels = Some([("x".to_string(), "y".to_string())].into());
        let effects = pods.apply(set(PodSource::Api, vec![picky]));
        assert!(
            !effects.contains(&Effect::ReadNode(uid.clone())),
            "read once: {effects:?}"
        );
        assert!(taken(&log).is_empty());
        assert_eq!(pods.waiting_pods()[0]["uid"], "a1");
        let labelled = Node {
            metadata: ObjectMeta {
                labels: Some(selector),
                ..Default::default()
            },
            ..Default::default()
        };
        pods.node_read(&uid, Some(Arc::new(labelled)));
        assert_eq!(taken(&log), ["start a1"]);
    }

    /// A dead worker is re-created with its pod, termination and rejection.
    #[test]
    fn dead_workers_are_recreated() {
        let (mut pods, log) = manager(vec![PodSource::File], 10, None);
        pods.apply(set(PodSource::File, vec![pod("web", "u1", "file", 1)]));
        pods.worker(&PodUid("u1".into())).unwrap().dead.set(true);
        assert_eq!(pods.restart_dead(), ["default/web"]);
        assert_eq!(taken(&log), ["start u1", "start u1"]);
        assert_eq!(pods.workers().next().unwrap().1.restarts, 1);
    }
}
