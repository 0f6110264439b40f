//! What the garbage collectors ask the rest of the agent.

/// The pods whose containers container GC must not take for a gone pod's: every pod a source
/// wants and every pod a worker handles. `None` until every pod source has delivered once
/// (kubelet's `allSourcesReady`), when no pod may be taken for gone.
///
/// ContainerGcActor → Supervisor, which asks its pod manager.
#[derive(Debug, Clone)]
#[cfg_attr(
    feature = "actix",
    derive(actix::Message),
    rtype(result = "Option<std::collections::HashSet<crate::PodUid>>")
)]
pub struct GetKeptPods;

/// Remove every dead container the policy lets go now, whatever the period (kubelet's
/// `DeleteAllUnusedContainers`, the eviction manager's first node-level reclaim for a disk
/// signal, before unused images).
///
/// EvictionActor → ContainerGcActor.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "ReclaimedContainers"))]
pub struct ReclaimContainers;

/// What a [`ReclaimContainers`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReclaimedContainers {
    /// Containers removed.
    pub removed: u64,
    /// Why some could not be, or the pass could not run.
    pub error: Option<String>,
}
