//! The agent's settings: the `--config` file merged under the flags, validated.
//!
//! The file is KubeletConfiguration-style YAML; keys dockerlet does not use are logged and
//! ignored so a kubelet's file works. Every error names the setting and the reason.
//!
//! # Layout
//! [`build`] reads the file ([`file`], checked against [`kubelet_fields`]) and resolves one
//! slice per subsystem, each from the flags over the file over kubelet's defaults:
//! - [`node`]: the node's name, labels, taints and status/lease periods;
//! - [`servers`]: the listening addresses; [`kubelet_api`]: the kubelet API's TLS and auth;
//! - [`sources`]: the static pod directory and the manifest URL;
//! - [`pod_sync`]: the runtime endpoint, sync period, crash-loop back-off, housekeeping;
//! - [`reserved`], [`node_settings`]: reserved resources, `maxPods`, enforcement;
//! - [`eviction`]: the eviction thresholds; [`cluster`]: the API server and its rate limits;
//! - [`dns`], [`security`], [`cgroups`], [`images`], [`logs`], [`shutdown`], [`feature_gates`];
//! - [`image_gc`]: image garbage collection's thresholds, ages and period;
//! - [`network`]: the pod network (CNI or Docker's bridge);
//! - [`process`]: the agent's own command-line-only settings.
//!
//! A new subsystem adds a slice file here: a `pub(super) fn resolve(cli, file) -> Result<Slice,
//! ConfigError>` that names the flag or key in each refusal, its slice as a field of
//! [`AgentConfig`], one line
//! in [`build`], its keys in `file.rs`/`kubelet_fields.rs`, and its part of `/configz`
//! (`crate::configz`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use dockerlet_actors::HttpSourceConfig;
use dockerlet_pod::dns::ClusterDns;

use crate::cli::Cli;

mod cgroups;
mod cluster;
mod container_gc;
mod dns;
mod eviction;
mod feature_gates;
mod file;
mod image_gc;
mod images;
mod kubelet_api;
mod kubelet_fields;
mod logs;
mod network;
mod node;
mod node_settings;
mod pod_sync;
mod process;
mod reserved;
mod security;
mod servers;
mod shutdown;
mod sources;
mod values;

pub use cgroups::CgroupConfig;
pub use cluster::Cluster;
pub use container_gc::ContainerGc;
pub use eviction::Eviction;
pub use image_gc::ImageGcSettings;
pub use images::Images;
pub use kubelet_api::KubeletApiConfig;
pub use logs::ContainerLogs;
pub use network::{NetworkPlugin, NetworkSettings};
pub use node::Registration;
pub use node_settings::{NodeSettings, ReservedCgroup};
pub use pod_sync::PodSync;
pub use process::Process;
pub use security::Security;
pub use servers::Servers;
pub use sources::FileSource;

// What the tests name through `use super::*`.
#[cfg(test)]
use {
    dockerlet_actors::ImagePullLimit, dockerlet_kube::recorder::EventLimits, dockerlet_pod::backoff::BackoffConfig,
    std::net::IpAddr, std::time::Duration,
};
#[cfg(test)]
use {
    dockerlet_host::signals::Thresholds, dockerlet_http::kubelet_api::auth::AuthorizationMode,
    dockerlet_http::kubelet_api::DebugRoutes, dockerlet_pod::cgroup::CgroupDriver,
    kubelet_api::STREAMING_CONNECTION_IDLE_TIMEOUT, std::net::Ipv4Addr,
};

/// The settings the agent runs with, one struct a subsystem (each resolved by the module of
/// the same name).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// Node name (lowercase).
    pub node_name: String,
    /// `--root-dir`, `-v`, `--lock-file`, fault injection and the kernel paths read.
    pub process: Process,
    /// `--node-ip`, `--register-node`, `--node-labels`, `--register-with-taints` and the node
    /// status and lease periods.
    pub registration: Registration,
    /// The HTTP servers' addresses (read-only, healthz, debug, `--port`).
    pub servers: Servers,
    /// The kubelet API server on `--address:--port`; none with `--port 0`.
    pub kubelet_api: Option<KubeletApiConfig>,
    /// `--pod-manifest-path` and `--file-check-frequency`.
    pub file_source: FileSource,
    /// `--manifest-url`, its headers and poll period.
    pub manifest_url: Option<HttpSourceConfig>,
    /// The pod workers' resync, crash-loop back-off, housekeeping and the runtime endpoint.
    pub pod_sync: PodSync,
    /// `--kubeconfig`, `--in-cluster` (API-server mode when either is set), the client
    /// certificate, the API and event rate limits.
    pub cluster: Cluster,
    /// `--eviction-hard`, `--eviction-soft` (with `--eviction-soft-grace-period`),
    /// `--eviction-max-pod-grace-period`, `--eviction-minimum-reclaim`, the pressure
    /// transition period and `kernelMemcgNotification`.
    pub eviction: Eviction,
    /// `--seccomp-default`, `--allowed-unsafe-sysctls`.
    pub security: Security,
    /// The sandbox image and the image pull limits.
    pub images: Images,
    /// `--image-gc-high-threshold`, `--image-gc-low-threshold`, `--minimum-image-ttl-duration`,
    /// `imageMaximumGCAge`, `--image-gc-period`.
    pub image_gc: ImageGcSettings,
    /// `--kube-reserved` plus `--system-reserved`: cpu in millicores, the rest in units.
    pub reserved: BTreeMap<String, i64>,
    /// `maxPods`, `podsPerCore`, `failSwapOn`, `protectKernelDefaults`, `cpuCFSQuota*`,
    /// `enforceNodeAllocatable` and the reserved cgroups.
    pub node: NodeSettings,
    /// `--cluster-dns`, `--cluster-domain`, `--resolv-conf`.
    pub dns: ClusterDns,
    /// `--cgroup-root`, `--cgroups-per-qos`, `--cgroup-driver`, `--pod-max-pids`.
    pub cgroups: CgroupConfig,
    /// The pod network.
    pub network: NetworkSettings,
    /// `--pod-logs-dir` (`podLogsDir`): the CRI log paths, linked to Docker's json-file logs.
    pub pod_logs_dir: PathBuf,
    /// `--container-log-max-size` and `--container-log-max-files`: Docker's rotation of each
    /// container's log.
    pub container_logs: ContainerLogs,
    /// `--minimum-container-ttl-duration`, `--maximum-dead-containers-per-container`,
    /// `--maximum-dead-containers`: what container GC keeps, and how often it runs.
    pub container_gc: ContainerGc,
    /// Graceful node shutdown's priority groups (`shutdownGracePeriod…`); empty: none.
    pub shutdown_groups: Vec<dockerlet_pod::shutdown::ShutdownGroup>,
    /// `featureGates` merged with `--feature-gates`: known gates, with values dockerlet has.
    pub feature_gates: BTreeMap<String, bool>,
}

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file cannot be read or parsed.
    #[error("config file {path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A setting has a bad value.
    #[error("invalid value for {setting}: {reason}")]
    Invalid {
        /// Flag or config key.
        setting: String,
        /// Why.
        reason: String,
    },
}

/// A [`ConfigError::Invalid`]: `setting` (flag or key) has a bad value, for `reason`.
fn invalid(setting: &str, reason: String) -> ConfigError {
    ConfigError::Invalid {
        setting: setting.to_string(),
        reason,
    }
}

/// Merge flags over the file over kubelet's defaults, and validate.
///
/// The slices are resolved in the order the checks ran before the split into slices, so that of
/// several bad settings the same one is reported (but a bad `--manifest-url` now comes before a
/// negative `--kube-api-qps`, `--event-qps` or `--event-burst`). `hostname` is injected so tests
/// never depend on the machine.
pub fn build(cli: &Cli, hostname: impl FnOnce() -> String) -> Result<AgentConfig, ConfigError> {
    let mut file = file::load(cli.config.as_deref(), cli.config_dir.as_deref())?;
    let feature_gates = feature_gates::merge_flag(std::mem::take(&mut file.feature_gates), &cli.feature_gates)?;
    let node_name = node::name(cli, hostname)?;
    let servers = servers::resolve(cli, &file);
    let process = process::resolve(cli)?;
    let kubelet_api = kubelet_api::resolve(cli, &file, servers.kubelet_api(), &node_name, &process.root_dir)?;
    let file_source = sources::file(cli, &file)?;
    let pod_sync = pod_sync::resolve(cli, &file)?;
    let registration = node::registration(cli, &file)?;
    let reserved = reserved::resolve(cli, &file)?;
    let eviction = eviction::resolve(cli, &file)?;
    let manifest_url = sources::http(cli, &file)?;
    let cluster = cluster::resolve(cli, &file, &process.root_dir)?;
    let dns = dns::resolve(cli, &file)?;
    let security = security::resolve(cli, &file)?;
    let cgroups = cgroups::resolve(cli, &file)?;
    let node_settings =
        node_settings::node_settings(cli, std::mem::take(&mut file.node), cgroups.per_qos, reserved.each)?;
    // kubelet adds allocatableMemory.available (memory.available's hard value) when pods are
    // enforced on allocatable.
    let eviction_settings = if node_settings.enforce.pods {
        eviction.settings.with_allocatable_thresholds()
    } else {
        eviction.settings
    };
    let images = images::resolve(cli, &file)?;
    let image_gc = image_gc::resolve(cli, &file, &feature_gates)?;
    let shutdown_groups = shutdown::resolve(cli, &file)?;
    let container_logs = logs::resolve(cli, &file)?;
    let container_gc = container_gc::resolve(cli);
    let network = network::resolve(cli, &file, &node_name)?;
    Ok(AgentConfig {
        node_name,
        process,
        registration,
        servers,
        kubelet_api,
        file_source,
        manifest_url,
        pod_sync,
        cluster,
        eviction: Eviction {
            settings: eviction_settings,
            ..eviction
        },
        security,
        images,
        image_gc,
        reserved: reserved.total,
        node: node_settings,
        dns,
        cgroups,
        network,
        pod_logs_dir: logs::pods_dir(cli, &file),
        container_logs,
        container_gc,
        shutdown_groups,
        feature_gates,
    })
}

#[cfg(test)]
mod file_tests;
#[cfg(test)]
mod tests;
