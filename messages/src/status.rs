//! Pod status: written by PodWorkers, held and served by the StatusActor.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use crate::ids::{PodRef, PodUid};

/// The pod (with its freshly generated `status`) as this node runs it.
///
/// PodWorker → StatusActor, after every sync that changed something.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct SetPodStatus {
    /// Who the pod is.
    pub id: PodRef,
    /// The pod object as the worker has it (shared with it: the StatusActor keeps no copy of
    /// the spec; its own `status` is not read).
    pub pod: Arc<Pod>,
    /// Its freshly generated status.
    pub status: PodStatus,
}

impl SetPodStatus {
    /// The pod with `status` filled in.
    pub fn to_pod(&self) -> Pod {
        let mut pod = (*self.pod).clone();
        pod.status = Some(self.status.clone());
        pod
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &PodUid {
        &self.id.uid
    }
}

/// The pod is gone from this node; forget its status.
///
/// PodWorker → StatusActor, once the pod's containers are removed.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct RemovePodStatus {
    /// The pod.
    pub uid: PodUid,
    /// For an API pod deleted while it ran: the pod with its final status (every container
    /// terminated, phase Failed unless it Succeeded), written once more before it is forgotten,
    /// so a pod kept by finalizers shows how it ended, as kubelet's status manager does.
    pub final_status: Option<k8s_openapi::api::core::v1::Pod>,
}

/// Every pod this node runs, with status, in name order.
///
/// HTTP read-only server → StatusActor (`GET /pods`).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "Vec<Pod>"))]
pub struct GetPods;

/// The pods that have running containers according to the runtime (kubelet's
/// `GetRunningPods`): name, namespace, UID and each running container's name and image, in
/// name order. `None` until the first relist filled the pod cache.
///
/// HTTP kubelet API (`GET /runningpods/`) → Supervisor, which reads the pod cache.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "Option<Vec<Pod>>"))]
pub struct GetRunningPods;

/// The pod's newest sandbox, preferring a running one (port-forward connects inside its network
/// namespace); `None` when the pod has none.
///
/// HTTP kubelet API (`/portForward/…`) → Supervisor, which reads the pod cache.
#[derive(Debug, Clone)]
#[cfg_attr(
    feature = "actix",
    derive(actix::Message),
    rtype(result = "Option<crate::ids::ContainerId>")
)]
pub struct GetPodSandbox {
    /// The pod.
    pub uid: PodUid,
}
