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
//! ConfigError>` that names the flag or key in each refusal, a field of [`AgentConfig`], one line
//! in [`build`], its keys in `file.rs`/`kubelet_fields.rs`, and its part of `/configz`
//! (`crate::configz`).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use dockerlet_actors::{HttpSourceConfig, ImagePullLimit};
use dockerlet_host::thresholds::EvictionSettings;
use dockerlet_kube::recorder::EventLimits;
use dockerlet_pod::backoff::BackoffConfig;
use dockerlet_pod::dns::ClusterDns;
use k8s_openapi::api::core::v1::Taint;

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
pub use container_gc::ContainerGc;
pub use image_gc::ImageGcSettings;
pub use kubelet_api::KubeletApiConfig;
pub use logs::ContainerLogs;
pub use network::{NetworkPlugin, NetworkSettings};
pub use node_settings::{NodeSettings, ReservedCgroup};
pub use process::LockFile;

// What the tests name through `use super::*`.
#[cfg(test)]
use {
    dockerlet_host::signals::Thresholds, dockerlet_http::kubelet_api::auth::AuthorizationMode,
    dockerlet_http::kubelet_api::DebugRoutes, dockerlet_pod::cgroup::CgroupDriver,
    kubelet_api::STREAMING_CONNECTION_IDLE_TIMEOUT, std::net::Ipv4Addr,
};

/// The settings the agent runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// Node name (lowercase).
    pub node_name: String,
    /// State directory.
    pub root_dir: PathBuf,
    /// `--lock-file` (with `--exit-on-lock-contention`).
    pub lock_file: Option<LockFile>,
    /// `--pod-logs-dir` (`podLogsDir`): the CRI log paths, linked to Docker's json-file logs.
    pub pod_logs_dir: PathBuf,
    /// `--container-log-max-size` and `--container-log-max-files`: Docker's rotation of each
    /// container's log.
    pub container_logs: ContainerLogs,
    /// `--minimum-container-ttl-duration`, `--maximum-dead-containers-per-container`,
    /// `--maximum-dead-containers`: what container GC keeps, and how often it runs.
    pub container_gc: ContainerGc,
    /// Static pod path.
    pub manifest_path: Option<PathBuf>,
    /// Read-only API address; none when disabled.
    pub read_only: Option<SocketAddr>,
    /// Healthz address; none when disabled.
    pub healthz: Option<SocketAddr>,
    /// Debug endpoint address.
    pub debug: SocketAddr,
    /// Manifest re-list period.
    pub file_check_frequency: Duration,
    /// Pod resync period.
    pub sync_frequency: Duration,
    /// Statistics housekeeping period (`--housekeeping-interval`, a command-line flag only, as
    /// kubelet's).
    pub housekeeping_interval: Duration,
    /// Sandbox image; none for the built-in one.
    pub sandbox_image: Option<String>,
    /// Docker endpoint.
    pub runtime_endpoint: String,
    /// CrashLoopBackOff.
    pub backoff: BackoffConfig,
    /// Node IP, when given.
    pub node_ip: Option<IpAddr>,
    /// Fault injection hook enabled.
    pub fault_injection: bool,
    /// The kernel log of the OOM watcher (`/dev/kmsg`; hidden `--kmsg-path` for tests).
    pub kmsg_path: PathBuf,
    /// Log verbosity.
    pub verbosity: u8,
    /// `--manifest-url`, its headers and poll period.
    pub manifest_url: Option<HttpSourceConfig>,
    /// `--kubeconfig`: API-server mode when set.
    pub kubeconfig: Option<PathBuf>,
    /// `--in-cluster`: API-server mode with the service account in this directory.
    pub in_cluster: Option<PathBuf>,
    /// `--bootstrap-kubeconfig`, `rotateCertificates`, `--cert-dir`: the node's client
    /// certificate.
    pub client_certificate: cluster::ClientCertificate,
    /// `kubeAPIQPS` and `kubeAPIBurst`.
    pub kube_api_limits: (f64, u32),
    /// `eventRecordQPS` and `eventBurst`.
    pub event_limits: EventLimits,
    /// `--register-node`.
    pub register_node: bool,
    /// `--node-labels`.
    pub node_labels: BTreeMap<String, String>,
    /// `nodeStatusUpdateFrequency`.
    pub node_status_update_frequency: Duration,
    /// `nodeLeaseDurationSeconds`.
    pub node_lease_duration_seconds: i32,
    /// `--node-status-max-images` (`nodeStatusMaxImages`): images named in `status.images`.
    pub node_status_max_images: i64,
    /// `--port` (advertised in the Node's daemon endpoints).
    pub port: u16,
    /// The kubelet API server on `--address:--port`; none with `--port 0`.
    pub kubelet_api: Option<KubeletApiConfig>,
    /// `nodeStatusReportFrequency`: longest time between two status writes with no change.
    pub node_status_report_frequency: Duration,
    /// `--register-with-taints`.
    pub taints: Vec<Taint>,
    /// `--kube-reserved` plus `--system-reserved`: cpu in millicores, the rest in units.
    pub reserved: BTreeMap<String, i64>,
    /// `--eviction-hard`, `--eviction-soft` (with `--eviction-soft-grace-period`),
    /// `--eviction-max-pod-grace-period`, `--eviction-minimum-reclaim`.
    pub eviction: EvictionSettings,
    /// `--eviction-pressure-transition-period`.
    pub eviction_pressure_transition_period: Duration,
    /// `kernelMemcgNotification`: cgroup v1 memory thresholds wake the eviction manager.
    pub eviction_memcg_notification: bool,
    /// `--cluster-dns`, `--cluster-domain`, `--resolv-conf`.
    pub dns: ClusterDns,
    /// `--seccomp-default`: unset seccomp profiles mean RuntimeDefault.
    pub seccomp_default: bool,
    /// `--allowed-unsafe-sysctls`.
    pub allowed_unsafe_sysctls: Vec<String>,
    /// `--cgroup-root`, `--cgroups-per-qos`, `--cgroup-driver`, `--pod-max-pids`.
    pub cgroups: CgroupConfig,
    /// `--serialize-image-pulls` and `--max-parallel-image-pulls`.
    pub image_pulls: ImagePullLimit,
    /// `--image-gc-high-threshold`, `--image-gc-low-threshold`, `--minimum-image-ttl-duration`,
    /// `imageMaximumGCAge`, `--image-gc-period`.
    pub image_gc: ImageGcSettings,
    /// The pod network.
    pub network: NetworkSettings,
    /// Graceful node shutdown's priority groups (`shutdownGracePeriod…`); empty: none.
    pub shutdown_groups: Vec<dockerlet_pod::shutdown::ShutdownGroup>,
    /// `maxPods`, `podsPerCore`, `failSwapOn`, `protectKernelDefaults`, `cpuCFSQuota*`,
    /// `enforceNodeAllocatable` and the reserved cgroups.
    pub node: NodeSettings,
    /// Where the kernel tunables and swaps are read (`/proc/sys`, `/proc/swaps`; hidden flags
    /// for tests).
    pub proc_paths: (PathBuf, PathBuf),
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
        node_ip: registration.node_ip,
        register_node: registration.register_node,
        node_labels: registration.labels,
        node_status_update_frequency: registration.status_update_frequency,
        node_status_report_frequency: registration.status_report_frequency,
        node_lease_duration_seconds: registration.lease_duration_seconds,
        node_status_max_images: registration.status_max_images,
        taints: registration.taints,
        port: servers.port,
        read_only: servers.read_only,
        healthz: servers.healthz,
        debug: servers.debug,
        kubelet_api,
        manifest_path: file_source.path,
        file_check_frequency: file_source.check_frequency,
        manifest_url,
        housekeeping_interval: pod_sync.housekeeping_interval,
        sync_frequency: pod_sync.sync_frequency,
        backoff: pod_sync.backoff,
        runtime_endpoint: pod_sync.runtime_endpoint,
        reserved: reserved.total,
        node: node_settings,
        eviction: eviction_settings,
        eviction_pressure_transition_period: eviction.pressure_transition_period,
        eviction_memcg_notification: eviction.memcg_notification,
        kubeconfig: cluster.kubeconfig,
        in_cluster: cluster.in_cluster,
        client_certificate: cluster.client_certificate,
        kube_api_limits: cluster.kube_api_limits,
        event_limits: cluster.event_limits,
        dns,
        seccomp_default: security.seccomp_default,
        allowed_unsafe_sysctls: security.allowed_unsafe_sysctls,
        cgroups,
        sandbox_image: images.sandbox_image,
        image_pulls: images.pulls,
        image_gc,
        network,
        pod_logs_dir: logs::pods_dir(cli, &file),
        container_logs,
        container_gc,
        shutdown_groups,
        feature_gates,
        root_dir: process.root_dir,
        verbosity: process.verbosity,
        lock_file: process.lock,
        fault_injection: process.fault_injection,
        kmsg_path: process.kmsg_path,
        proc_paths: process.proc_paths,
    })
}

#[cfg(test)]
mod file_tests;
#[cfg(test)]
mod tests;
