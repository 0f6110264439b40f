//! The pod cgroup around a sync (kubelet's pod container manager): made with the pod's limits
//! before its sandbox, `memory.oom.group` on each new container (cgroup v2), removed with the
//! pod — all file I/O, so on the blocking pool.

use std::sync::Arc;

use dockerlet_messages::{ContainerId, PodUid};
use k8s_openapi::api::core::v1::Pod;

use super::context::SyncContext;
use super::outcome::SyncError;

/// Make (or check) the pod's cgroup with its limits, off the actor thread; returns the
/// `CgroupParent` of its containers (none for Docker's default).
pub(super) async fn ensure_pod_cgroup(sync: &SyncContext, pod: &Arc<Pod>) -> Result<Option<String>, SyncError> {
    let Some(tree) = sync.config.cgroups.clone() else {
        return Ok(sync.config.cgroup_naming.parent_of(pod));
    };
    let pod = pod.clone();
    let cgroup = tokio::task::spawn_blocking(move || tree.ensure_pod(&pod))
        .await
        .map_err(SyncError::PodCgroupUnfinished)??;
    Ok(Some(cgroup))
}

/// cgroup v2: an OOM kills the container's whole cgroup, as kubelet has it
/// ([`dockerlet_host::cgroup::tree::PodCgroups::group_oom_kills`]); a failure is logged, the
/// container runs on.
pub(super) async fn group_oom_kills(sync: &SyncContext, parent: Option<&str>, id: &ContainerId) {
    let (Some(tree), Some(parent)) = (sync.config.cgroups.clone(), parent) else {
        return;
    };
    if sync.config.single_process_oom_kill {
        return;
    }
    let (parent, container) = (parent.to_string(), id.0.clone());
    match tokio::task::spawn_blocking(move || tree.group_oom_kills(&parent, &container)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(container_id = %id, error = %e, "cannot set memory.oom.group"),
        Err(e) => tracing::warn!(container_id = %id, error = %e, "cannot set memory.oom.group"),
    }
}

/// Remove the pod's cgroup in every hierarchy, children first, off the actor thread.
pub(super) async fn remove_pod_cgroup(sync: &SyncContext, uid: &PodUid) -> Result<(), SyncError> {
    let Some(tree) = sync.config.cgroups.clone() else {
        return Ok(());
    };
    let uid = uid.0.clone();
    tokio::task::spawn_blocking(move || tree.remove_pod(&uid))
        .await
        .map_err(SyncError::PodCgroupUnfinished)??;
    Ok(())
}
