//! Commands to a PodWorker and its reports back to the Supervisor.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::ids::PodUid;

/// The desired pod changed, or is new: sync it.
///
/// Supervisor → PodWorker.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct UpdatePod {
    /// The desired pod.
    pub pod: Arc<Pod>,
}

/// The pod is no longer wanted: stop its containers gracefully and remove them.
///
/// Supervisor → PodWorker. A pending termination is never replaced by a later sync.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct TerminatePod {
    /// Overrides the pod's `terminationGracePeriodSeconds` when set.
    pub grace_period: Option<Duration>,
    /// Why, for the log of each container stopped and removed.
    pub reason: String,
}

/// Re-check the pod against Docker now (periodic resync or after a restart of another actor).
///
/// Supervisor → PodWorker.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct SyncPod;

/// The engine answers again after relists failed: sync now, whatever the error back-off (the
/// failed syncs were the engine's, and the pod's status must stop claiming containers that
/// stopped with it).
///
/// Supervisor → PodWorker.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct RuntimeBack;

/// Send your pod's last status again (the StatusActor was re-created and is empty).
///
/// Supervisor → PodWorker.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct PublishStatus;

/// The worker finished terminating its pod: every container is removed.
///
/// PodWorker → Supervisor, which then forgets the worker.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct PodTerminated {
    /// The pod that is gone.
    pub uid: PodUid,
    /// The next attempt of each container that ran: a pod wanted again under the same UID
    /// counts its restarts on from there (kubelet keeps the dead containers it counts from).
    pub next_attempts: std::collections::BTreeMap<String, u32>,
}

/// A PodWorker published a new status of its pod: whether the pod's phase is final (Succeeded or
/// Failed). A finished pod no longer counts against the node when new pods are admitted.
///
/// PodWorker → Supervisor (its pod manager); the status itself goes to the StatusActor.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct PodFinished {
    /// The pod.
    pub uid: PodUid,
    /// Its phase is Succeeded or Failed.
    pub finished: bool,
}

/// Stop the actor (its work is over); containers are left as they are.
///
/// Supervisor → any child actor.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct StopActor;

/// A pod deleted in the API has no containers left: delete it for good (grace 0, its UID).
///
/// Supervisor → ApiSource.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct FinalizePodDeletion {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID (precondition).
    pub uid: PodUid,
}

/// The node shuts down: fail the pod (reason `Terminated`, kubelet's message, a
/// `DisruptionTarget` condition) and stop its containers, each with its preStop hook, within
/// `grace`. Answered once nothing of the pod runs any more (at once for a pod that finished,
/// was rejected or is being terminated already).
///
/// NodeShutdownActor → PodWorker (through [`ShutdownTarget`]).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct ShutdownPod {
    /// The grace period: the smaller of the shutdown group's period and the pod's own.
    pub grace: Duration,
}

/// A pod to stop when the node shuts down, and its worker. Holds an actix `Recipient`, so it
/// exists only with the `actix` feature.
#[cfg(feature = "actix")]
#[derive(Debug, Clone)]
pub struct ShutdownTarget {
    /// The pod, for the logs.
    pub uid: PodUid,
    /// `namespace/name`.
    pub name: String,
    /// Its priority (`spec.priority`; for a static pod without one, that of its
    /// `system-node-critical` / `system-cluster-critical` priority class).
    pub priority: i32,
    /// `terminationGracePeriodSeconds`, when set.
    pub termination_grace_seconds: Option<i64>,
    /// Its worker.
    pub worker: actix::Recipient<ShutdownPod>,
}

/// The pods a node shutdown stops: every admitted pod that has not finished and is not being
/// terminated already.
///
/// NodeShutdownActor → Supervisor.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "Vec<ShutdownTarget>"))]
pub struct GetShutdownTargets;

/// The node is shutting down (`true`) or a shutdown was cancelled (`false`): while it shuts
/// down, new pods are rejected (`NodeShutdown`) and the Node is not Ready ("node is shutting
/// down"), as kubelet's shutdown manager admits and reports.
///
/// NodeShutdownActor → Supervisor.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct NodeShuttingDown(pub bool);
