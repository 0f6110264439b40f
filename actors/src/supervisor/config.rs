//! The Supervisor's settings: the mode (standalone or cluster) and every subsystem's config.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dockerlet_kube::recorder::EventLimits;
use dockerlet_kube::KubeClient;
use dockerlet_messages::debug::HealthCell;
use dockerlet_messages::source::PodSource;
use k8s_openapi::api::core::v1::Node;

use crate::node_shutdown::NodeShutdownConfig;
use crate::node_status::NodeStatusConfig;
use crate::oom_watcher::OomWatcherConfig;
use crate::pod_worker::PodWorkerConfig;
use crate::pressure::PressureConfig;
use crate::source::http::HttpSourceConfig;
use crate::stats::StatsConfig;
use crate::system_cgroups::SystemCgroupsConfig;
#[cfg(doc)]
use dockerlet_messages::debug::InjectFault;

/// Standalone node or member of a cluster: one type, so no half-configured mix can exist.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Static pods only (`--pod-manifest-path`, `--manifest-url`); no API server.
    Standalone,
    /// A node of the cluster behind `api` (`--kubeconfig` or `--in-cluster`).
    Cluster {
        /// The API server.
        api: Arc<dyn KubeClient>,
        /// Registration and heartbeats of the Node (boxed: the Node object is large).
        node: Box<NodeStatusConfig>,
    },
}

impl Mode {
    /// The API server, in cluster mode.
    pub fn api(&self) -> Option<&Arc<dyn KubeClient>> {
        match self {
            Mode::Standalone => None,
            Mode::Cluster { api, .. } => Some(api),
        }
    }
}

/// Settings of the actor system.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// Shared PodWorker settings (node name included).
    pub worker: Arc<PodWorkerConfig>,
    /// `--pod-manifest-path`, if any.
    pub manifest_path: Option<PathBuf>,
    /// `--file-check-frequency`.
    pub file_check_frequency: Duration,
    /// PLEG relist period while Docker's events flow (every second otherwise).
    pub relist_period: Duration,
    /// Honour [`InjectFault`] (tests only).
    pub fault_injection: bool,
    /// Standalone or cluster.
    pub mode: Mode,
    /// Static pods from a URL (`--manifest-url`).
    pub manifest_url: Option<HttpSourceConfig>,
    /// The eviction signals and thresholds (observed in both modes).
    pub pressure: PressureConfig,
    /// The OOM watcher's kernel log and checkpoint; `None` runs none.
    pub oom: Option<OomWatcherConfig>,
    /// Statistics housekeeping (`/stats/summary`); none: no StatsActor.
    pub stats: Option<StatsConfig>,
    /// `--kubelet-cgroups` and `--system-cgroups`, kept every minute; none: no
    /// SystemCgroupsActor.
    pub system_cgroups: Option<SystemCgroupsConfig>,
    /// How many pod events go to the API (`--event-qps`, `--event-burst`).
    pub events: EventLimits,
    /// The PLEG's health, shared with `/healthz` (which reads it without a message).
    pub health: HealthCell,
    /// The Node as the agent registers it (labels, taints, allocatable): new pods are admitted
    /// against it (kubelet's `initialNode`), or against the API's Node once the agent sees it.
    pub node: Arc<Node>,
    /// Graceful node shutdown (`shutdownGracePeriod…`); none: no NodeShutdownActor, a
    /// shutdown is immediate.
    pub node_shutdown: Option<NodeShutdownConfig>,
}

impl SupervisorConfig {
    /// The pod sources this configuration starts.
    pub(super) fn sources(&self) -> Vec<PodSource> {
        [
            self.manifest_path.is_some().then_some(PodSource::File),
            self.manifest_url.is_some().then_some(PodSource::Http),
            self.mode.api().is_some().then_some(PodSource::Api),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}
