//! Pod lifecycle events, produced by the PlegActor from Docker's event stream and relists.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::ids::{ContainerId, PodUid};

/// What happened to a container between two relists (kubelet's PodLifeCycleEventType).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LifecycleEventKind {
    /// The container is running now and was not before.
    ContainerStarted,
    /// The container exited (or vanished while running).
    ContainerDied,
    /// The container is gone from Docker.
    ContainerRemoved,
    /// Some other change (created, unknown state).
    ContainerChanged,
}

/// A container of a pod changed state.
///
/// PlegActor → Supervisor, which forwards it to that pod's PodWorker.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct PodLifecycleEvent {
    /// The pod the container belongs to.
    pub pod_uid: PodUid,
    /// The container.
    pub container_id: ContainerId,
    /// Container name in the pod spec, or `POD` for the sandbox.
    pub container_name: String,
    /// What happened.
    pub kind: LifecycleEventKind,
}

/// A relist finished; lists every pod that has at least one container on this node.
///
/// PlegActor → Supervisor, which uses it to find containers of pods nobody wants any more.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct RelistCompleted {
    /// Pods with containers on the engine.
    pub pods: BTreeSet<PodUid>,
    /// The relist before this one failed: the engine answers again (after a restart of dockerd,
    /// every container it ran has stopped meanwhile).
    pub runtime_back: bool,
}

/// The kernel's OOM killer struck a task in this container's cgroup (read from the kernel log):
/// the container is OOM-killed, whether or not Docker reports it (Docker's `oom` event can be
/// lost when the cgroup is gone before containerd reads it, as with `memory.oom.group`).
///
/// OomWatcherActor → PlegActor.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct ContainerOomKilled {
    /// The container.
    pub id: ContainerId,
}
