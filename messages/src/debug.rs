//! Queries behind the healthz and debug endpoints, and the test-only fault hook.

use actix::Message;
use serde::Serialize;
use serde_json::Value;

use crate::ids::PodUid;
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
}

/// Report your state.
///
/// Supervisor → every child actor, for `GET /debug/actors`.
#[derive(Debug, Clone, Message)]
#[rtype(result = "ActorState")]
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
    /// RFC 3339 time.
    pub time: String,
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

/// Assemble the debug snapshot.
///
/// HTTP debug server → Supervisor (`GET /debug/actors`).
#[derive(Debug, Clone, Message)]
#[rtype(result = "DebugSnapshot")]
pub struct GetDebugSnapshot;

/// Health as `/healthz` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    /// True when every check passed.
    pub healthy: bool,
    /// Why not, when unhealthy.
    pub reason: Option<String>,
}

/// Are PLEG and the container runtime healthy?
///
/// HTTP healthz server → Supervisor → PlegActor.
#[derive(Debug, Clone, Message)]
#[rtype(result = "Health")]
pub struct GetHealth;

/// Which actor a test wants to panic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum FaultTarget {
    /// A supervised actor, by its name in the Supervisor's registry (`pleg`, `probes`,
    /// `status`, `pressure`, `file`, `http`, `api`, `node`).
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
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<(), FaultError>")]
pub struct InjectFault {
    /// The actor to panic.
    pub target: FaultTarget,
}

/// Panic in the handler. Sent only through [`InjectFault`].
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct Panic;

/// Record a noteworthy event (kubelet-style reason) in the debug endpoint's ring buffer.
///
/// PodWorker → Supervisor (`ContainerDied`, `Started`, `Killing`, `BackOff`, `Failed`, …).
#[derive(Debug, Clone, Message)]
#[rtype(result = "()")]
pub struct RecordEvent {
    /// The event.
    pub event: DebugEvent,
}
