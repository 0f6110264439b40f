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
