//! What a sync or a termination reports: its outcome (events, waiting reasons, errors), the
//! notes it sends its worker as it goes, and [`SyncError`], why it did not finish.

use dockerlet_messages::debug::EventType;
use std::collections::HashMap;
use std::time::Instant;

use dockerlet_host::pod_files::PodFileError;
use dockerlet_messages::runtime::ObservedContainer;
use dockerlet_pod::dns::ResolvConfError;
use dockerlet_pod::hosts::HostnameError;
use dockerlet_pod::status::WaitingReason;
use dockerlet_runtime::RuntimeError;
use k8s_openapi::jiff::Timestamp;

use crate::pod_cache::NotRefreshed;

/// Why a sync or a termination did not finish. The worker retries: a sync after its error
/// back-off, a termination a second later.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Docker failed (unreachable, or refused an operation).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The pod cache was not refreshed in time (the PLEG cannot relist).
    #[error(transparent)]
    CacheNotRefreshed(#[from] NotRefreshed),
    /// The pod's host name cannot be formed (`spec.hostname`, `spec.subdomain`, an FQDN too
    /// long for `setHostnameAsFQDN`): the sandbox is not created.
    #[error(transparent)]
    Hostname(#[from] HostnameError),
    /// A file the agent keeps for the pod (`resolv.conf`, `etc-hosts`) or a node file it is made
    /// from cannot be read or written.
    #[error(transparent)]
    PodFile(#[from] PodFileError),
    /// The node's resolv.conf (`--resolv-conf`) does not parse.
    #[error("{}: {source}", path.display())]
    ResolvConf {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: ResolvConfError,
    },
    /// The pod cgroup could not be made (the sandbox is not created) or removed (the teardown
    /// is retried).
    #[error("pod cgroup: {0}")]
    PodCgroup(#[from] dockerlet_host::cgroup::tree::CgroupTreeError),
    /// The blocking task making or removing the pod cgroup did not finish.
    #[error("pod cgroup: the blocking task did not finish: {0}")]
    PodCgroupUnfinished(#[source] tokio::task::JoinError),
    /// The pod's RuntimeClass cannot be resolved to a runtime handler.
    #[error(transparent)]
    RuntimeClass(#[from] RuntimeClassError),
    /// The sandbox cannot be put on the CNI pod network (none is configured, or the plugins
    /// failed): it is not made, or removed again.
    #[error(transparent)]
    Network(#[from] super::network::SandboxNetworkError),
    /// The pod's directory (its volumes) could not be removed.
    #[error("remove {}: {source}", path.display())]
    RemovePodDir {
        /// `<root-dir>/pods/<uid>`.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: dockerlet_host::volume_dirs::VolumeDirError,
    },
}

/// Why the runtime handler of a pod's `runtimeClassName` is not known (kubelet's runtime class
/// manager): its sandbox is not created (FailedCreatePodSandBox) and the next sync tries again.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeClassError {
    /// A standalone node cannot read RuntimeClasses.
    #[error("failed to lookup RuntimeClass {name}: RuntimeClasses need the API server (--kubeconfig)")]
    NeedsApiServer {
        /// `spec.runtimeClassName`.
        name: String,
    },
    /// No such RuntimeClass.
    #[error("failed to lookup RuntimeClass {name}: runtimeclass.node.k8s.io {name:?} not found")]
    NotFound {
        /// `spec.runtimeClassName`.
        name: String,
    },
    /// The API server could not be asked (or the RuntimeClasses have not been listed yet).
    #[error("failed to lookup RuntimeClass {name}: {source}")]
    Api {
        /// `spec.runtimeClassName`.
        name: String,
        /// Why.
        #[source]
        source: dockerlet_kube::ApiError,
    },
}

/// What a sync did and saw.
#[derive(Debug, Default)]
pub struct SyncOutcome {
    /// Where events go as they happen.
    pub notes: Notes,
    /// Docker's view after the sync (none when Docker could not be read).
    pub observed: Option<Vec<ObservedContainer>>,
    /// Why containers wait.
    pub waiting: HashMap<String, WaitingReason>,
    /// One-line summary of the decision.
    pub actions_summary: String,
    /// Earliest back-off expiry.
    pub backoff_until: Option<Timestamp>,
    /// When each container in CrashLoopBackOff may start again (the debug page).
    pub restart_at: HashMap<String, Timestamp>,
    /// kubelet's FailedMount message of each volume that could not be set up.
    pub mount_failures: Vec<String>,
    /// Every error met; none means the sync finished.
    pub errors: Vec<SyncError>,
    /// A container could not be started for a reason other than its image (whose pull has a
    /// back-off of its own): the next sync comes after the error back-off, as kubelet requeues
    /// a pod whose SyncPod failed after `backOffPeriod`, not at the periodic resync (a file
    /// the start writes failed on a full disk, a ConfigMap key missing).
    pub start_failed: bool,
    /// Events to record.
    pub events: Vec<WorkerEvent>,
    /// When the last action whose result could not be observed (its inspect failed) ended: the
    /// next sync must read state from a relist after it.
    pub unobserved: Option<Instant>,
}

/// An event to record about the pod, or about one of its containers (the event's fieldPath).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerEvent {
    /// `Normal` or `Warning`, as kubelet records this reason.
    pub type_: EventType,
    /// Kubelet's reason (`Created`, `Killing`, …).
    pub reason: String,
    /// Kubelet's message.
    pub message: String,
    /// The container it is about, if any.
    pub container: Option<String>,
}

impl WorkerEvent {
    /// An event about a container.
    pub fn container(type_: EventType, container: &str, reason: &str, message: String) -> Self {
        WorkerEvent {
            type_,
            reason: reason.to_string(),
            message,
            container: Some(container.to_string()),
        }
    }

    /// An event about the pod as a whole.
    pub fn pod(type_: EventType, reason: &str, message: String) -> Self {
        WorkerEvent {
            type_,
            reason: reason.to_string(),
            message,
            container: None,
        }
    }
}

/// What a termination did.
#[derive(Debug, Default)]
pub struct TerminateOutcome {
    /// Where events go as they happen.
    pub notes: Notes,
    /// Every failure met while stopping and removing; the worker retries while any.
    pub errors: Vec<SyncError>,
    /// Events to record.
    pub events: Vec<WorkerEvent>,
    /// For an API pod deleted while it ran: its containers as they were once stopped, before
    /// they were removed — what its final status is made of.
    pub stopped: Option<Vec<ObservedContainer>>,
}

/// What a sync or termination tells its worker while it runs.
#[derive(actix::Message)]
#[rtype(result = "()")]
pub enum SyncNote {
    /// The sync found nothing of its pod created yet, before it creates anything (the worker
    /// publishes a first status then, if it has none out).
    NothingCreatedYet,
    /// What the sync found, before it acts on it (kubelet's SyncPod sets the pod's status from
    /// the runtime's state before it kills or starts anything): a container that died — with
    /// its sandbox, with the engine — stops being reported running now, not once its
    /// replacement has started.
    Observed(Vec<ObservedContainer>),
    /// Events that happened now: recorded as they happen (kubelet's recorder), so `Pulling`
    /// shows during a long pull and `Killing` when the stop begins, not when the sync ends.
    Events(Vec<WorkerEvent>),
}

/// What a sync tells its worker as it goes: the events so far, and that it found nothing
/// created (none in tests that call a sync directly: the events wait in the outcome, which the
/// worker records at the end either way).
#[derive(Clone, Default)]
pub struct Notes(Option<actix::Recipient<SyncNote>>);

impl Notes {
    /// Notes for `worker`.
    pub fn to(worker: actix::Recipient<SyncNote>) -> Self {
        Notes(Some(worker))
    }

    /// Send the events so far to the worker now.
    pub(super) fn flush(&self, events: &mut Vec<WorkerEvent>) {
        if let Some(worker) = self.0.as_ref().filter(|_| !events.is_empty()) {
            worker.do_send(SyncNote::Events(std::mem::take(events)));
        }
    }

    pub(super) fn send(&self, note: SyncNote) {
        if let Some(worker) = &self.0 {
            worker.do_send(note);
        }
    }
}

impl std::fmt::Debug for Notes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Notes").field(&self.0.is_some()).finish()
    }
}

impl SyncOutcome {
    /// Record the events so far now, before something that takes time.
    pub(super) fn flush_events(&mut self) {
        self.notes.flush(&mut self.events);
    }

    /// Wake the worker for a sync at `until` (a pull back-off's end, or soon after a failed
    /// pull to show the back-off), unless something wakes it earlier.
    pub(super) fn retry_at(&mut self, until: Instant) {
        let after = until.saturating_duration_since(Instant::now());
        let Ok(at) = Timestamp::now().checked_add(after) else {
            return;
        };
        self.backoff_until = Some(self.backoff_until.map_or(at, |b| b.min(at)));
    }
}
