//! The node's own state: pressure from the eviction signals.

use serde::Serialize;

/// A node pressure condition (kubelet's `pkg/kubelet/eviction/api` signal → condition map).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Pressure {
    /// MemoryPressure.
    Memory,
    /// DiskPressure.
    Disk,
    /// PIDPressure.
    Pid,
}

impl Pressure {
    /// The Node condition type.
    pub fn condition_type(self) -> &'static str {
        match self {
            Pressure::Memory => "MemoryPressure",
            Pressure::Disk => "DiskPressure",
            Pressure::Pid => "PIDPressure",
        }
    }
}

/// An eviction threshold met at the last observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThresholdMet {
    /// kubelet's signal name (`memory.available`).
    pub signal: &'static str,
    /// The observed value (bytes, inodes or PIDs).
    pub observed: i64,
    /// The threshold it fell below.
    pub threshold: i64,
}

/// The node's pressure as last observed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodePressure {
    /// The conditions in force (held for `evictionPressureTransitionPeriod`).
    pub conditions: Vec<Pressure>,
    /// The thresholds met at the last observation.
    pub met: Vec<ThresholdMet>,
}

/// The node's current pressure.
///
/// NodeStatusActor (each heartbeat) → Supervisor → EvictionActor.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "NodePressure"))]
pub struct GetNodePressure;

/// The engine's images as the image manager last listed them (every 30 s, and at each
/// collection), for the Node's `status.images`; none before the first listing.
///
/// NodeStatusActor (each heartbeat) → Supervisor → ImageGcActor.
#[derive(Debug, Clone)]
#[cfg_attr(
    feature = "actix",
    derive(actix::Message),
    rtype(result = "Option<Vec<crate::runtime::RuntimeImage>>")
)]
pub struct GetNodeImages;

/// Write the Node's status now instead of at the next heartbeat (kubelet's `syncNodeStatus`,
/// which the shutdown manager calls when a shutdown begins, so Ready goes False at once).
///
/// NodeShutdownActor → NodeStatusActor.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct SyncNodeStatus;

/// Remove every unused image now, whatever the disk usage (kubelet's `DeleteUnusedImages`, the
/// eviction manager's node-level reclaim for the image filesystem). The minimum age, the
/// sandbox image and images any container uses are still kept.
///
/// EvictionActor → ImageGcActor.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "ReclaimedImages"))]
pub struct ReclaimImages;

/// What a [`ReclaimImages`] freed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReclaimedImages {
    /// Bytes freed (the removed images' sizes as Docker reported them).
    pub freed: u64,
    /// Why some images could not be removed, or the run could not be made, in kubelet's words.
    pub error: Option<String>,
}
/// The pressure conditions in force changed: pods are admitted against them (kubelet's
/// eviction admit handler).
///
/// EvictionActor → Supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct NodePressureChanged(pub Vec<Pressure>);

/// Evict the pod (kubelet's eviction manager `evictPod`): fail it with reason `Evicted`, this
/// message and a `DisruptionTarget` condition (reason `TerminationByKubelet`), and stop its
/// containers within `grace`. Answered once nothing of the pod runs any more (at once for a
/// pod that finished, was rejected or is being terminated already).
///
/// EvictionActor → PodWorker (through [`EvictionCandidate`]).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct EvictPod {
    /// The grace period: 1 s for a hard threshold.
    pub grace: std::time::Duration,
    /// kubelet's eviction message ("The node was low on resource: memory. …").
    pub message: String,
    /// With a `DisruptionTarget` condition (threshold evictions; not local-storage ones).
    pub disruption_target: bool,
}

/// A pod the eviction manager may evict, and its worker. Holds an actix `Recipient`, so it
/// exists only with the `actix` feature.
#[cfg(feature = "actix")]
#[derive(Debug, Clone)]
pub struct EvictionCandidate {
    /// The pod.
    pub pod: std::sync::Arc<k8s_openapi::api::core::v1::Pod>,
    /// Who it is.
    pub id: crate::PodRef,
    /// Its worker.
    pub worker: actix::Recipient<EvictPod>,
}

/// The pods eviction may choose from: every admitted pod that runs (kubelet's active pods).
///
/// EvictionActor → Supervisor.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "Vec<EvictionCandidate>"))]
pub struct GetEvictionCandidates;
