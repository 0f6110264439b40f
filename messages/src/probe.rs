//! Probes: what the ProbeActor watches and what it finds.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Serialize;

use crate::ids::{ContainerId, PodRef, PodUid};

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// Restart the container when it fails.
    Liveness,
    /// Take the container out of Ready when it fails.
    Readiness,
    /// Hold the other two back until it succeeds; restart the container when it fails.
    Startup,
}

/// A probe's published result (kubelet's results cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ProbeResult {
    /// Passed `successThreshold` times in a row.
    Success,
    /// Failed `failureThreshold` times in a row.
    Failure,
    /// Not known yet.
    Unknown,
}

/// The latest published result of each probe, by container name and probe kind, with the
/// container instance it is about (a result for an older instance does not apply).
pub type ProbeResults = std::collections::HashMap<(String, ProbeKind), (ContainerId, ProbeResult)>;

/// A running container whose probes should run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeTarget {
    /// Container name in the pod spec.
    pub container_name: String,
    /// The running instance; a new ID means a restarted container, whose probes start over.
    pub container_id: ContainerId,
    /// When it started (initialDelaySeconds counts from here).
    pub started_at: Option<Time>,
}

/// The running containers of a pod, after a sync changed them.
///
/// PodWorker → ProbeActor (through a restart-stable link).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct WatchContainers {
    /// The pod.
    pub id: PodRef,
    /// Its spec (probe definitions, named ports).
    pub pod: Arc<Pod>,
    /// The pod's IP (default probe host).
    pub pod_ip: Option<String>,
    /// Running app containers and sidecars; probes of containers not listed stop.
    pub running: Vec<ProbeTarget>,
}

/// Stop every probe of a pod (it is terminating).
///
/// PodWorker → ProbeActor (through a restart-stable link).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct ForgetPod {
    /// The pod.
    pub pod_uid: PodUid,
    /// Keep its readiness probes (the pod is terminating: kubelet keeps probing readiness, so
    /// Ready can turn False meanwhile, and stops liveness and startup probes).
    pub keep_readiness: bool,
}

/// A probe's result changed.
///
/// ProbeActor → Supervisor → PodWorker.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct ProbeResultChanged {
    /// The pod.
    pub pod_uid: PodUid,
    /// Container name.
    pub container_name: String,
    /// The instance probed.
    pub container_id: ContainerId,
    /// Which probe.
    pub kind: ProbeKind,
    /// The new result.
    pub result: ProbeResult,
}

/// Send the probe targets again (the ProbeActor was re-created and knows nothing).
///
/// Supervisor → PodWorker.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct ResendProbeTargets;
