//! What the container runtime reports about the containers dockerlet created.
//!
//! Every field is read back from Docker (labels and inspect), so an agent that restarts, or an
//! actor that is re-created, rebuilds its whole view from these types alone.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Serialize;

use crate::ids::{ContainerId, PodUid};

/// Which part of a pod a container plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ContainerRole {
    /// The pause container that holds the pod's network and IPC namespaces.
    Sandbox,
    /// An entry of `spec.initContainers`.
    Init,
    /// An entry of `spec.containers`.
    App,
    /// An entry of `spec.ephemeralContainers` (`kubectl debug`): started once, never restarted.
    Ephemeral,
}

/// A container's runtime state, as CRI names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RuntimeState {
    /// Created but never started.
    Created,
    /// Running (also paused or restarting in Docker's terms).
    Running,
    /// Exited or dead.
    Exited,
    /// Anything Docker reports that fits none of the above.
    Unknown,
}

/// One container of a pod as Docker reports it (labels plus inspect).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservedContainer {
    /// Docker's container ID.
    pub id: ContainerId,
    /// The pod this container belongs to (label `io.kubernetes.pod.uid`).
    pub pod_uid: PodUid,
    /// The pod's name (label `io.kubernetes.pod.name`), as the runtime lists it.
    pub pod_name: String,
    /// The pod's namespace (label `io.kubernetes.pod.namespace`).
    pub pod_namespace: String,
    /// `spec.containers[].name`, or `POD` for the sandbox.
    pub name: String,
    /// Sandbox, init or app container.
    pub role: ContainerRole,
    /// The attempt number: the restart count for containers, the sandbox generation for sandboxes.
    pub attempt: u32,
    /// Hash of the container spec it was created from; a change means the spec was edited.
    pub spec_hash: String,
    /// CrashLoopBackOff step this container was started at (0 for a first start).
    pub backoff_step: u32,
    /// The sandbox this container joined (none for sandboxes).
    pub sandbox_id: Option<ContainerId>,
    /// Runtime state.
    pub state: RuntimeState,
    /// Exit code once exited.
    pub exit_code: i64,
    /// Docker's OOMKilled flag.
    pub oom_killed: bool,
    /// Docker's `State.Error` (why a start failed).
    pub error: String,
    /// When the container was created.
    pub created_at: Option<Time>,
    /// When it last started; none if it never ran.
    pub started_at: Option<Time>,
    /// When it last finished; none if it has not.
    pub finished_at: Option<Time>,
    /// The image reference it was created from.
    pub image: String,
    /// The image ID (`sha256:…`).
    pub image_id: String,
    /// The sandbox's IP address on its Docker network, or the first of the pod network's of
    /// the node IP's family (sandboxes only; none for host network).
    pub ip: Option<String>,
    /// The sandbox's address of the other IP family on a dual-stack pod network (kubelet keeps
    /// at most one address per family: `sortPodIPs`); none otherwise.
    pub secondary_ip: Option<String>,
    /// Whether the sandbox uses the host network namespace (sandboxes only).
    pub host_network: bool,
    /// The pod's termination grace period when the container was created, so a pod whose
    /// manifest is gone can still be stopped as its spec asked.
    pub pod_grace_seconds: Option<i64>,
    /// The main process's host PID while running (`State.Pid`); none otherwise. The stats
    /// collector reads a sandbox's network counters through it.
    pub pid: Option<u32>,
    /// Docker's `HostConfig.CgroupParent` as created (empty: the engine's default, `/docker`
    /// with the cgroupfs driver). With the cgroupfs driver the container's cgroup is
    /// `<cgroup_parent>/<id>` under each controller.
    pub cgroup_parent: String,
    /// What the container left as its termination message once exited (kubelet's: the file
    /// at its `terminationMessagePath`, or with `FallbackToLogsOnError` and a failure the end
    /// of its log); empty while it runs.
    pub termination_message: String,
    /// Known exited from a `die` event alone: the inspect that fills in the details (the
    /// termination message, Docker's own finish time) has not answered yet.
    pub details_pending: bool,
}

/// One line of a cheap listing of all of a node's containers, as PLEG relists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerListing {
    /// Docker's container ID.
    pub id: ContainerId,
    /// The pod it belongs to.
    pub pod_uid: PodUid,
    /// Container name in the pod spec, or `POD`.
    pub name: String,
    /// Runtime state.
    pub state: RuntimeState,
}

/// An image on the engine, as `docker images` lists it (CRI's `Image`: kubelet's image
/// manager and the Node's `status.images` read these fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeImage {
    /// Docker's image ID (`sha256:…`).
    pub id: String,
    /// Its tags (`registry/repo:tag`); Docker's `<none>:<none>` of an untagged image left out.
    pub repo_tags: Vec<String>,
    /// Its digests (`registry/repo@sha256:…`); `<none>@<none>` left out.
    pub repo_digests: Vec<String>,
    /// Size in bytes, as Docker reports it (the image's layers, shared ones included).
    pub size: u64,
    /// When it was built, Unix seconds.
    pub created: i64,
    /// The image it was built on locally (`docker commit`, the classic builder); none for a
    /// pulled image. Docker refuses to delete an image other images are built on.
    pub parent: Option<String>,
}
