//! Queries behind the healthz and debug endpoints, and the test-only fault hook.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::ids::{ContainerId, PodRef, PodUid};
use crate::probe::{ProbeKind, ProbeResult};
use crate::source::ManifestError;

/// What one actor reports about itself on the debug endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct ActorState {
    /// The actor's kind: `Supervisor`, `PodWorker`, `PlegActor`, …
    pub kind: String,
    /// Its name (the pod's `namespace/name` for PodWorkers).
    pub name: String,
    /// Messages it has handled since it was (re)created.
    pub messages_handled: u64,
    /// How often the Supervisor re-created it (filled in by the Supervisor).
    pub restarts: u32,
    /// The last error it ran into, if any.
    pub last_error: Option<String>,
    /// Kind-specific detail (a PodWorker's phase and back-off, PLEG's relist times, …).
    pub detail: Value,
    /// The same state typed, for the actors the debug page explains (PodWorkers, the
    /// ProbeActor, the PLEG); `None` for the others. `detail` carries it in the JSON.
    #[serde(skip)]
    pub view: Option<DebugView>,
}

/// Typed state behind the debug page's explanations, built on request only.
#[derive(Debug, Clone)]
pub enum DebugView {
    /// A PodWorker's pod.
    Pod(Box<PodDebug>),
    /// Every probe the ProbeActor runs.
    Probes(Vec<ProbeDebug>),
    /// The PLEG's relists and health.
    Pleg(PlegDebug),
}

/// What a PodWorker is doing about its pod, and what it last saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PodDebug {
    /// The pod's UID.
    pub pod_uid: PodUid,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The worker's state: `Idle`, `Syncing`, `Terminating`, `Terminated`.
    pub phase: String,
    /// The status phase last computed (`Pending`, `Running`, …).
    pub pod_phase: Option<String>,
    /// The pod's `restartPolicy` (`Always` when unset).
    pub restart_policy: String,
    /// One-line summary of the last decision (`start c`, `wait for volumes: cfg`, …).
    pub next_action: String,
    /// Earliest back-off expiry among waiting containers, RFC 3339.
    pub backoff_until: Option<String>,
    /// The errors of the last failed sync or termination.
    pub last_error: Option<String>,
    /// When the last failed sync or termination ended, RFC 3339; with `retry_at` when it is
    /// retried.
    pub last_error_at: Option<String>,
    /// When a failed sync is tried again (the worker's error back-off), RFC 3339.
    pub retry_at: Option<String>,
    /// Why admission refused the pod (`SysctlForbidden: …`); such a pod never runs.
    pub rejected: Option<String>,
    /// Why the node failed the pod (`DeadlineExceeded: …`).
    pub failed: Option<String>,
    /// Volumes that could not be set up at the last sync, with kubelet's FailedMount message.
    pub mount_failures: Vec<String>,
    /// Its containers, init containers first, from the last status.
    pub containers: Vec<ContainerDebug>,
}

/// One container of a pod as its status shows it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ContainerDebug {
    /// Name in the pod spec.
    pub name: String,
    /// An init container.
    pub init: bool,
    /// A sidecar (an init container with `restartPolicy: Always`).
    pub sidecar: bool,
    /// The image in the spec.
    pub image: String,
    /// Its current state.
    pub state: ContainerStateDebug,
    /// `ready` in the status.
    pub ready: bool,
    /// `restartCount` in the status.
    pub restart_count: i32,
    /// Its previous instance's end (`lastState.terminated`).
    pub last_exit: Option<ExitDebug>,
    /// When its CrashLoopBackOff ends and it is started again, RFC 3339.
    pub restart_at: Option<String>,
}

/// A container's state, as the API's `ContainerState`.
#[derive(Debug, Clone, Default, Serialize)]
pub enum ContainerStateDebug {
    /// No status yet.
    #[default]
    Unknown,
    /// Not running: why.
    Waiting {
        /// `ContainerCreating`, `CrashLoopBackOff`, `ErrImageNeverPull`, …
        reason: String,
        /// Detail.
        message: String,
    },
    /// Running since `started_at` (RFC 3339).
    Running {
        /// When it started.
        started_at: Option<String>,
    },
    /// Exited.
    Terminated(ExitDebug),
}

/// How a container instance ended.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ExitDebug {
    /// Exit code.
    pub exit_code: i32,
    /// `Completed`, `Error`, `OOMKilled`, …
    pub reason: String,
    /// When, RFC 3339.
    pub finished_at: Option<String>,
}

/// One probe of one container, as the ProbeActor runs it.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeDebug {
    /// The pod's UID.
    pub pod_uid: PodUid,
    /// `namespace/name`.
    pub pod: String,
    /// The container probed.
    pub container: String,
    /// Liveness, readiness or startup.
    pub probe: ProbeKind,
    /// `exec`, `httpGet`, `tcpSocket`, `grpc`.
    pub handler: String,
    /// The instance probed.
    pub container_id: ContainerId,
    /// The published result.
    pub result: ProbeResult,
    /// How the last run went (`success`, `failure`, `timeout`, …), if it ran.
    pub last_outcome: Option<String>,
    /// What the last run said (exec output, HTTP status, error).
    pub last_output: String,
    /// When it last ran, RFC 3339.
    pub last_run: Option<String>,
    /// Successes in a row.
    pub successes: u32,
    /// Failures in a row.
    pub failures: u32,
    /// Runs so far.
    pub runs: u64,
    /// Held after a liveness or startup failure until the container restarts.
    pub on_hold: bool,
}

/// The PLEG's relists and health (kubelet's `PLEG is not healthy`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PlegDebug {
    /// When the last complete relist began, RFC 3339.
    pub last_relist: Option<String>,
    /// How long it took.
    pub last_relist_duration_ms: Option<f64>,
    /// Relists so far.
    pub relists: u64,
    /// As `/healthz` says.
    pub health: Health,
}

/// Report your state.
///
/// Supervisor → every child actor, for `GET /debug/actors`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "ActorState"))]
pub struct GetActorState;

/// Everything the debug endpoint shows.
#[derive(Debug, Clone, Serialize)]
pub struct DebugSnapshot {
    /// The node name this agent runs as.
    pub node_name: String,
    /// Every live actor.
    pub actors: Vec<ActorState>,
    /// Manifests that were rejected, with the reason.
    pub manifest_errors: Vec<ManifestError>,
    /// The most recent noteworthy events (container died, actor re-created, …), newest last.
    pub events: Vec<DebugEvent>,
}

/// One noteworthy thing that happened, kept in a short ring buffer for the debug endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct DebugEvent {
    /// When (RFC 3339 on the wire).
    pub time: jiff::Timestamp,
    /// `Normal` or `Warning`, as its sender chose.
    #[serde(rename = "type")]
    pub type_: EventType,
    /// Short machine-readable reason, kubelet style (`ContainerDied`, `ActorRestarted`, …).
    pub reason: String,
    /// The object it is about (`namespace/pod` or an actor name).
    pub object: String,
    /// The pod's container it is about, if any (the API event's fieldPath).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Human-readable message.
    pub message: String,
}

/// Whether an event reports trouble (kubelet's `v1.EventTypeWarning`) or not. Chosen by whoever
/// records the event, as kubelet's `recorder.Eventf(pod, v1.EventTypeWarning, reason, …)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum EventType {
    /// Routine.
    Normal,
    /// Something failed.
    Warning,
}

impl EventType {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventSubject {
    /// A pod: kept for the debug page and, for a pod the node runs in cluster mode, written to
    /// the API.
    Pod(PodRef),
    /// The node, by name: kept for the debug page (as `node/<name>`) and, in cluster mode,
    /// written to the API about the Node (kubelet's node events: `SystemOOM`,
    /// `ContainerGCFailed`, `ImageGCFailed`, …).
    Node(String),
    /// Anything else (an actor, an orphan's containers): kept for the debug page only.
    Other(String),
}

impl std::fmt::Display for EventSubject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EventSubject::Pod(pod) => pod.fmt(f),
            EventSubject::Node(name) => write!(f, "node/{name}"),
            EventSubject::Other(object) => f.write_str(object),
        }
    }
}

/// The recent events, oldest first, for the debug snapshot.
///
/// Supervisor → EventRecorder.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "Vec<DebugEvent>"))]
pub struct GetRecentEvents;

/// Forget a terminated pod's event counts (the API events' correlation).
///
/// Supervisor → EventRecorder.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct ForgetPodEvents {
    /// The pod.
    pub uid: PodUid,
}

/// Assemble the debug snapshot.
///
/// HTTP debug server → Supervisor (`GET /debug/actors`).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "DebugSnapshot"))]
pub struct GetDebugSnapshot;

/// Health as `/healthz` reports it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Health {
    /// True when every check passed.
    pub healthy: bool,
    /// Why not, when unhealthy.
    pub reason: Option<String>,
}

/// kubelet's PLEG relist threshold: unhealthy when no relist succeeded for this long.
pub const RELIST_THRESHOLD: Duration = Duration::from_secs(180);

/// The PLEG's health, written by the PlegActor at each relist and read where health is asked
/// for: `/healthz` reads it on the HTTP threads, as kubelet's healthz reads its PLEG under a
/// lock, so a busy actor thread never delays a health check. A re-created PlegActor writes to
/// the same cell.
#[derive(Debug, Clone)]
pub struct HealthCell(Arc<Mutex<HealthState>>);

#[derive(Debug)]
struct HealthState {
    /// When the cell was made (health before the first relist).
    started: Instant,
    /// When the last relist succeeded.
    last_relist: Option<Instant>,
    /// Why the last relist failed, if it did.
    last_error: Option<String>,
}

impl Default for HealthCell {
    fn default() -> Self {
        HealthCell(Arc::new(Mutex::new(HealthState {
            started: Instant::now(),
            last_relist: None,
            last_error: None,
        })))
    }
}

impl HealthCell {
    fn lock(&self) -> std::sync::MutexGuard<'_, HealthState> {
        // Plain data: a panic while it was held leaves nothing half-written that matters.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A relist succeeded now.
    pub fn relisted(&self) {
        let mut state = self.lock();
        state.last_relist = Some(Instant::now());
        state.last_error = None;
    }

    /// A relist failed: the runtime did not answer.
    pub fn failed(&self, error: String) {
        self.lock().last_error = Some(error);
    }

    /// kubelet's PLEG `Healthy()`, plus "the runtime answered the last relist".
    pub fn health(&self) -> Health {
        let state = self.lock();
        let reason = match (&state.last_error, state.last_relist.map(|at| at.elapsed())) {
            (Some(e), _) => Some(format!("container runtime is down: {e}")),
            (None, None) if state.started.elapsed() > RELIST_THRESHOLD => {
                Some("pleg has yet to be successful".to_string())
            }
            (None, Some(d)) if d > RELIST_THRESHOLD => Some(format!(
                "pleg was last seen active {} ago; threshold is {}",
                humanize(d),
                humanize(RELIST_THRESHOLD)
            )),
            _ => None,
        };
        Health {
            healthy: reason.is_none(),
            reason,
        }
    }
}

/// Go's `3m0s` for whole seconds.
fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}m{}s", s / 60, s % 60)
}

/// Are PLEG and the container runtime healthy?
///
/// NodeStatusActor → Supervisor → PlegActor (the PLEG's [`HealthCell`]).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "Health"))]
pub struct GetHealth;

/// Which actor a test wants to panic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum FaultTarget {
    /// A supervised actor, by its name in the Supervisor's registry (`pleg`, `probes`,
    /// `status`, `stats`, `file`, `http`, `api`, `node`, `oom`, …) or its kind on
    /// `/debug/actors` (`PlegActor`, `FileSource`, …).
    Actor(String),
    /// The PodWorker of this pod.
    PodWorker(PodUid),
}

/// Why a fault could not be injected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    /// The agent was not started with `--enable-fault-injection`. Final.
    #[error("fault injection is disabled")]
    Disabled,
    /// No running actor has that name. Final.
    #[error("no such actor: {0:?}")]
    NoSuchActor(FaultTarget),
}

/// Make an actor panic inside a message handler. Only honoured when the agent was started with
/// fault injection enabled (tests only).
///
/// HTTP debug server → Supervisor → the target actor (as [`Panic`]).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "Result<(), FaultError>"))]
pub struct InjectFault {
    /// The actor to panic.
    pub target: FaultTarget,
}

/// Panic in the handler. Sent only through [`InjectFault`].
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct Panic;

/// Record a noteworthy event (kubelet-style reason) in the debug endpoint's ring buffer and, for
/// a pod in cluster mode, as a v1 Event.
///
/// PodWorker, ProbeActor, OomWatcherActor, Supervisor → EventRecorder (`Started`, `Killing`,
/// `BackOff`, `Unhealthy`, `SystemOOM`, `ActorRestarted`, …).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct RecordEvent {
    /// The pod (or other object) it is about.
    pub about: EventSubject,
    /// The pod's container it is about, if any.
    pub container: Option<String>,
    /// That container's reference in the pod (`spec.containers{app}`: the API event's
    /// fieldPath), found by the sender, who has the pod.
    pub field_path: Option<String>,
    /// `Normal` or `Warning`.
    pub type_: EventType,
    /// Kubelet's reason.
    pub reason: String,
    /// Kubelet's message.
    pub message: String,
    /// The API event's annotations (kubelet's `AnnotatedEventf`: an eviction's
    /// `offending_containers`, `offending_containers_usage`, `starved_resource`); mostly empty.
    pub annotations: std::collections::BTreeMap<String, String>,
}

impl RecordEvent {
    /// A `type_` event about `pod`.
    pub fn pod(pod: &PodRef, type_: EventType, reason: &str, message: String) -> RecordEvent {
        RecordEvent::about(EventSubject::Pod(pod.clone()), type_, reason, message)
    }

    /// A `type_` event about `about`.
    pub fn about(about: EventSubject, type_: EventType, reason: &str, message: String) -> RecordEvent {
        RecordEvent {
            about,
            container: None,
            field_path: None,
            type_,
            reason: reason.to_string(),
            message,
            annotations: std::collections::BTreeMap::new(),
        }
    }

    /// The same event with these annotations on the API's Event.
    pub fn with_annotations(mut self, annotations: std::collections::BTreeMap<String, String>) -> RecordEvent {
        self.annotations = annotations;
        self
    }

    /// The same event about one of the pod's containers, `field_path` its reference in the pod.
    pub fn in_container(mut self, container: &str, field_path: String) -> RecordEvent {
        self.container = Some(container.to_string());
        self.field_path = Some(field_path);
        self
    }

    /// The entry the debug ring keeps, stamped now.
    pub fn to_debug(&self) -> DebugEvent {
        DebugEvent {
            time: jiff::Timestamp::now(),
            type_: self.type_,
            reason: self.reason.clone(),
            object: self.about.to_string(),
            container: self.container.clone(),
            message: self.message.clone(),
        }
    }
}
