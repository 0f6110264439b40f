//! The agent's settings: the `--config` file merged under the flags, validated.
//!
//! The file is KubeletConfiguration-style YAML; keys dockerlet does not use are logged and
//! ignored so a kubelet's file works. Every error names the setting and the reason.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use dockerlet_actors::pod_worker::ImagePullLimit;
use dockerlet_actors::source::http::HttpSourceConfig;
use dockerlet_host::signals::Thresholds;
use dockerlet_http::kubelet_api::auth::AuthorizationMode;
use dockerlet_http::kubelet_api::tls::TlsSettings;
use dockerlet_kube::recorder::EventLimits;
use dockerlet_pod::backoff::BackoffConfig;
use dockerlet_pod::cgroup::CgroupDriver;
use dockerlet_pod::dns::ClusterDns;
use dockerlet_pod::quantity::parse_quantity;
use k8s_openapi::api::core::v1::Taint;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::cli::Cli;

mod node_settings;
pub use node_settings::{NodeSettings, ReservedCgroup};

/// The settings the agent runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// Node name (lowercase).
    pub node_name: String,
    /// State directory.
    pub root_dir: PathBuf,
    /// `--pod-logs-dir` (`podLogsDir`): the CRI log paths, linked to Docker's json-file logs.
    pub pod_logs_dir: PathBuf,
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
    /// `--eviction-hard`.
    pub eviction_hard: Thresholds,
    /// `--eviction-pressure-transition-period`.
    pub eviction_pressure_transition_period: Duration,
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
    /// Graceful node shutdown's priority groups (`shutdownGracePeriod…`); empty: none.
    pub shutdown_groups: Vec<dockerlet_pod::shutdown::ShutdownGroup>,
    /// `maxPods`, `podsPerCore`, `failSwapOn`, `protectKernelDefaults`, `cpuCFSQuota*`,
    /// `enforceNodeAllocatable` and the reserved cgroups.
    pub node: NodeSettings,
    /// Where the kernel tunables and swaps are read (`/proc/sys`, `/proc/swaps`; hidden flags
    /// for tests).
    pub proc_paths: (PathBuf, PathBuf),
}

/// The pod cgroup tree's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupConfig {
    /// `--cgroup-root` (`cgroupRoot`), absolute.
    pub root: String,
    /// `--cgroups-per-qos` (`cgroupsPerQOS`).
    pub per_qos: bool,
    /// `--cgroup-driver` (`cgroupDriver`): `cgroupfs` or `systemd`; none given, the engine's
    /// (as kubelet ≥ 1.31 takes the runtime's, `KubeletCgroupDriverFromCRI`), set at start.
    pub driver: Option<CgroupDriver>,
    /// `--pod-max-pids` (`podPidsLimit`): applied when positive.
    pub pod_pids_limit: i64,
    /// `singleProcessOOMKill`: on cgroup v2 an OOM kills one process instead of the container's
    /// cgroup (kubelet's default, false, sets `memory.oom.group`).
    pub single_process_oom_kill: bool,
    /// `--kubelet-cgroups` (`kubeletCgroups`): the cgroup the agent puts itself in.
    pub kubelet_cgroups: Option<String>,
    /// `--runtime-cgroups` (`runtimeCgroups`): the engine's cgroup, read for its stats.
    pub runtime_cgroups: Option<String>,
    /// `--system-cgroups` (`systemCgroups`): the cgroup the root's other processes are moved
    /// to (needs an explicit `--cgroup-root`, as kubelet).
    pub system_cgroups: Option<String>,
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

/// The kubelet API's address, TLS and auth settings.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeletApiConfig {
    /// `--address:--port`.
    pub address: SocketAddr,
    /// Certificates, versions, cipher suites, client CA.
    pub tls: TlsSettings,
    /// `--anonymous-auth`.
    pub anonymous: bool,
    /// `--authentication-token-webhook`: bearer tokens through TokenReview, verdicts kept for
    /// this long (`--authentication-token-webhook-cache-ttl`); none when off.
    pub token_webhook: Option<Duration>,
    /// `--authorization-mode`.
    pub authorization: AuthorizationMode,
    /// `--streaming-connection-idle-timeout`; none for no limit (0).
    pub stream_idle_timeout: Option<Duration>,
}

/// kubelet's `--streaming-connection-idle-timeout` default.
pub const STREAMING_CONNECTION_IDLE_TIMEOUT: Duration = Duration::from_secs(4 * 3600);

/// The config file's `authentication` (kubelet's KubeletAuthentication).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileAuthentication {
    x509: Option<FileX509>,
    anonymous: Option<FileEnabled>,
    webhook: Option<FileWebhook>,
}

/// `authentication.webhook` (kubelet's KubeletWebhookAuthentication).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileWebhook {
    enabled: Option<bool>,
    #[serde(rename = "cacheTTL")]
    cache_ttl: Option<String>,
}

/// `authorization.webhook` (kubelet's KubeletWebhookAuthorization).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileWebhookAuthorization {
    #[serde(rename = "cacheAuthorizedTTL")]
    cache_authorized_ttl: Option<String>,
    #[serde(rename = "cacheUnauthorizedTTL")]
    cache_unauthorized_ttl: Option<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileX509 {
    #[serde(rename = "clientCAFile")]
    client_ca_file: Option<PathBuf>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct FileEnabled {
    enabled: Option<bool>,
}

/// The config file's `authorization` (kubelet's KubeletAuthorization).
#[derive(Debug, Default, serde::Deserialize)]
struct FileAuthorization {
    mode: Option<String>,
    webhook: Option<FileWebhookAuthorization>,
}

/// Settings read from the config file (kubelet's KubeletConfiguration field names).
#[derive(Debug, Default)]
struct FileSettings {
    static_pod_path: Option<PathBuf>,
    read_only_port: Option<u16>,
    healthz_port: Option<u16>,
    healthz_bind_address: Option<IpAddr>,
    address: Option<IpAddr>,
    file_check_frequency: Option<Duration>,
    sync_frequency: Option<Duration>,
    pod_infra_container_image: Option<String>,
    container_runtime_endpoint: Option<String>,
    debug_address: Option<SocketAddr>,
    backoff_max: Option<Duration>,
    backoff_initial: Option<Duration>,
    register_node: Option<bool>,
    kube_api_qps: Option<f64>,
    kube_api_burst: Option<u32>,
    event_record_qps: Option<i32>,
    event_burst: Option<i32>,
    static_pod_url: Option<String>,
    static_pod_url_header: Option<BTreeMap<String, Vec<String>>>,
    http_check_frequency: Option<Duration>,
    node_status_update_frequency: Option<Duration>,
    node_lease_duration_seconds: Option<i32>,
    port: Option<u16>,
    tls_cert_file: Option<PathBuf>,
    tls_private_key_file: Option<PathBuf>,
    tls_min_version: Option<String>,
    tls_cipher_suites: Option<Vec<String>>,
    streaming_connection_idle_timeout: Option<Duration>,
    authentication: Option<FileAuthentication>,
    authorization: Option<FileAuthorization>,
    node_status_report_frequency: Option<Duration>,
    register_with_taints: Option<Vec<Taint>>,
    kube_reserved: Option<BTreeMap<String, String>>,
    system_reserved: Option<BTreeMap<String, String>>,
    eviction_hard: Option<BTreeMap<String, String>>,
    eviction_pressure_transition_period: Option<Duration>,
    cluster_dns: Option<Vec<String>>,
    cluster_domain: Option<String>,
    resolv_conf: Option<PathBuf>,
    seccomp_default: Option<bool>,
    allowed_unsafe_sysctls: Option<Vec<String>>,
    cgroup_root: Option<String>,
    cgroups_per_qos: Option<bool>,
    cgroup_driver: Option<String>,
    pod_pids_limit: Option<i64>,
    single_process_oom_kill: Option<bool>,
    shutdown_grace_period: Option<Duration>,
    shutdown_grace_period_critical_pods: Option<Duration>,
    shutdown_grace_period_by_pod_priority: Option<Vec<dockerlet_pod::shutdown::ShutdownGroup>>,
    kubelet_cgroups: Option<String>,
    runtime_cgroups: Option<String>,
    system_cgroups: Option<String>,
    pod_logs_dir: Option<PathBuf>,
    serialize_image_pulls: Option<bool>,
    max_parallel_image_pulls: Option<i64>,
    node: node_settings::FileNode,
    present: bool,
}

fn field<T: DeserializeOwned>(
    path: &Path,
    map: &mut BTreeMap<String, Value>,
    key: &str,
) -> Result<Option<T>, ConfigError> {
    let Some(value) = map.remove(key) else { return Ok(None) };
    serde_json::from_value(value).map(Some).map_err(|e| ConfigError::File {
        path: path.display().to_string(),
        reason: format!("{key}: {e}"),
    })
}

fn duration_field(path: &Path, map: &mut BTreeMap<String, Value>, key: &str) -> Result<Option<Duration>, ConfigError> {
    let Some(text) = field::<String>(path, map, key)? else {
        return Ok(None);
    };
    humantime::parse_duration(&text)
        .map(Some)
        .map_err(|e| ConfigError::File {
            path: path.display().to_string(),
            reason: format!("{key}: invalid duration {text:?}: {e}"),
        })
}

fn read_file(path: &Path) -> Result<FileSettings, ConfigError> {
    let err = |reason: String| ConfigError::File {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let mut map: BTreeMap<String, Value> = serde_saphyr::from_str::<Option<BTreeMap<String, Value>>>(&text)
        .map_err(|e| {
            err(format!(
                "invalid YAML: {}",
                e.to_string()
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches("error: ")
            ))
        })?
        .unwrap_or_default();
    if let Some(kind) = map.remove("kind") {
        if kind != "KubeletConfiguration" {
            return Err(err(format!("kind: expected KubeletConfiguration, got {kind}")));
        }
    }
    map.remove("apiVersion");
    let mut backoff: BTreeMap<String, Value> = field(path, &mut map, "crashLoopBackOff")?.unwrap_or_default();
    let settings = FileSettings {
        static_pod_path: field(path, &mut map, "staticPodPath")?,
        read_only_port: field(path, &mut map, "readOnlyPort")?,
        healthz_port: field(path, &mut map, "healthzPort")?,
        healthz_bind_address: field(path, &mut map, "healthzBindAddress")?,
        address: field(path, &mut map, "address")?,
        file_check_frequency: duration_field(path, &mut map, "fileCheckFrequency")?,
        sync_frequency: duration_field(path, &mut map, "syncFrequency")?,
        pod_infra_container_image: field(path, &mut map, "podInfraContainerImage")?,
        container_runtime_endpoint: field(path, &mut map, "containerRuntimeEndpoint")?,
        debug_address: field(path, &mut map, "debugAddress")?,
        backoff_max: duration_field(path, &mut backoff, "maxContainerRestartPeriod")?,
        backoff_initial: duration_field(path, &mut backoff, "initialContainerRestartPeriod")?,
        register_node: field(path, &mut map, "registerNode")?,
        kube_api_qps: field(path, &mut map, "kubeAPIQPS")?,
        kube_api_burst: field(path, &mut map, "kubeAPIBurst")?,
        event_record_qps: field(path, &mut map, "eventRecordQPS")?,
        event_burst: field(path, &mut map, "eventBurst")?,
        static_pod_url: field(path, &mut map, "staticPodURL")?,
        static_pod_url_header: field(path, &mut map, "staticPodURLHeader")?,
        http_check_frequency: duration_field(path, &mut map, "httpCheckFrequency")?,
        node_status_update_frequency: duration_field(path, &mut map, "nodeStatusUpdateFrequency")?,
        node_lease_duration_seconds: field(path, &mut map, "nodeLeaseDurationSeconds")?,
        port: field(path, &mut map, "port")?,
        tls_cert_file: field(path, &mut map, "tlsCertFile")?,
        tls_private_key_file: field(path, &mut map, "tlsPrivateKeyFile")?,
        tls_min_version: field(path, &mut map, "tlsMinVersion")?,
        tls_cipher_suites: field(path, &mut map, "tlsCipherSuites")?,
        streaming_connection_idle_timeout: duration_field(path, &mut map, "streamingConnectionIdleTimeout")?,
        authentication: field(path, &mut map, "authentication")?,
        authorization: field(path, &mut map, "authorization")?,
        node_status_report_frequency: duration_field(path, &mut map, "nodeStatusReportFrequency")?,
        register_with_taints: field(path, &mut map, "registerWithTaints")?,
        kube_reserved: field(path, &mut map, "kubeReserved")?,
        system_reserved: field(path, &mut map, "systemReserved")?,
        eviction_hard: field(path, &mut map, "evictionHard")?,
        eviction_pressure_transition_period: duration_field(path, &mut map, "evictionPressureTransitionPeriod")?,
        cluster_dns: field(path, &mut map, "clusterDNS")?,
        cluster_domain: field(path, &mut map, "clusterDomain")?,
        resolv_conf: field(path, &mut map, "resolvConf")?,
        seccomp_default: field(path, &mut map, "seccompDefault")?,
        allowed_unsafe_sysctls: field(path, &mut map, "allowedUnsafeSysctls")?,
        cgroup_root: field(path, &mut map, "cgroupRoot")?,
        cgroups_per_qos: field(path, &mut map, "cgroupsPerQOS")?,
        cgroup_driver: field(path, &mut map, "cgroupDriver")?,
        pod_pids_limit: field(path, &mut map, "podPidsLimit")?,
        single_process_oom_kill: field(path, &mut map, "singleProcessOOMKill")?,
        shutdown_grace_period: duration_field(path, &mut map, "shutdownGracePeriod")?,
        shutdown_grace_period_critical_pods: duration_field(path, &mut map, "shutdownGracePeriodCriticalPods")?,
        shutdown_grace_period_by_pod_priority: field(path, &mut map, "shutdownGracePeriodByPodPriority")?,
        kubelet_cgroups: field(path, &mut map, "kubeletCgroups")?,
        runtime_cgroups: field(path, &mut map, "runtimeCgroups")?,
        system_cgroups: field(path, &mut map, "systemCgroups")?,
        pod_logs_dir: field(path, &mut map, "podLogsDir")?,
        serialize_image_pulls: field(path, &mut map, "serializeImagePulls")?,
        max_parallel_image_pulls: field(path, &mut map, "maxParallelImagePulls")?,
        node: node_settings::FileNode {
            max_pods: field(path, &mut map, "maxPods")?,
            pods_per_core: field(path, &mut map, "podsPerCore")?,
            fail_swap_on: field(path, &mut map, "failSwapOn")?,
            protect_kernel_defaults: field(path, &mut map, "protectKernelDefaults")?,
            cpu_cfs_quota: field(path, &mut map, "cpuCFSQuota")?,
            cpu_cfs_quota_period: duration_field(path, &mut map, "cpuCFSQuotaPeriod")?,
            enforce_node_allocatable: field(path, &mut map, "enforceNodeAllocatable")?,
            kube_reserved_cgroup: field(path, &mut map, "kubeReservedCgroup")?,
            system_reserved_cgroup: field(path, &mut map, "systemReservedCgroup")?,
        },
        present: true,
    };
    for key in map.keys().chain(backoff.keys().map(|k| k as &String)) {
        tracing::warn!(file = %path.display(), setting = %key, "config setting not supported by dockerlet; ignored");
    }
    Ok(settings)
}

/// `eventRecordQPS` and `eventBurst` as kubelet's event client takes them: negative is refused
/// in kubelet's words, 0 is client-go's default (5 per second, 10 at once).
fn event_limits(qps: Option<i32>, burst: Option<i32>) -> Result<EventLimits, (&'static str, String)> {
    let defaults = EventLimits::default();
    let limit = |value: Option<i32>, flag: &'static str, client_go: f64, ours: f64| match value {
        Some(n) if n < 0 => Err((flag, format!("{n} must not be a negative number"))),
        Some(0) => Ok(client_go),
        Some(n) => Ok(f64::from(n)),
        None => Ok(ours),
    };
    Ok(EventLimits {
        qps: limit(qps, "--event-qps", 5.0, defaults.qps)?,
        burst: limit(burst, "--event-burst", 10.0, defaults.burst)?,
    })
}

/// The config file's cgroup settings.
struct FileCgroups {
    root: Option<String>,
    per_qos: Option<bool>,
    driver: Option<String>,
    pod_pids_limit: Option<i64>,
    single_process_oom_kill: Option<bool>,
    kubelet: Option<String>,
    runtime: Option<String>,
    system: Option<String>,
}

fn is_cgroup_path(path: &str) -> bool {
    path.starts_with('/') && !path.split('/').any(|part| part == ".." || part == ".")
}

/// The cgroup settings from the flags over the file: `cgroupRoot` absolute (`""` is `/`, as
/// kubelet defaults it with per-QoS cgroups), `cgroupDriver` cgroupfs or systemd (checked
/// against Docker's at start), `podPidsLimit` -1 or more; the system cgroups absolute (`""` is
/// none), `systemCgroups` not the root and only with an explicit `cgroupRoot` (kubelet's
/// validation).
fn cgroup_settings(
    cli: &Cli,
    file: FileCgroups,
    invalid: &dyn Fn(&str, String) -> ConfigError,
) -> Result<CgroupConfig, ConfigError> {
    let explicit_root = cli.cgroup_root.clone().or(file.root).filter(|r| !r.is_empty());
    let root = explicit_root.clone().unwrap_or_else(|| "/".to_string());
    if !is_cgroup_path(&root) {
        return Err(invalid(
            "--cgroup-root",
            format!("{root:?}: expected an absolute cgroup path without . or .."),
        ));
    }
    let (per_qos, driver, pids) = (file.per_qos, file.driver, file.pod_pids_limit);
    let system_cgroup = |flag: &str, value: Option<String>| -> Result<Option<String>, ConfigError> {
        match value.filter(|v| !v.is_empty()) {
            Some(v) if !is_cgroup_path(&v) => Err(invalid(
                flag,
                format!("{v:?}: expected an absolute cgroup path without . or .."),
            )),
            v => Ok(v),
        }
    };
    let kubelet_cgroups = system_cgroup("--kubelet-cgroups", cli.kubelet_cgroups.clone().or(file.kubelet))?;
    let runtime_cgroups = system_cgroup("--runtime-cgroups", cli.runtime_cgroups.clone().or(file.runtime))?;
    let system_cgroups = system_cgroup("--system-cgroups", cli.system_cgroups.clone().or(file.system))?;
    if let Some(system) = &system_cgroups {
        if system.trim_matches('/').is_empty() {
            return Err(invalid(
                "--system-cgroups",
                "system container cannot be root (\"/\")".into(),
            ));
        }
        if explicit_root.is_none() {
            return Err(invalid(
                "--system-cgroups",
                "systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was not specified"
                    .into(),
            ));
        }
    }
    let driver = match cli.cgroup_driver.clone().or(driver) {
        None => None,
        Some(name) => Some(
            CgroupDriver::parse(&name)
                .ok_or_else(|| invalid("--cgroup-driver", format!("{name:?}: expected cgroupfs or systemd")))?,
        ),
    };
    let pod_pids_limit = cli.pod_max_pids.or(pids).unwrap_or(-1);
    if pod_pids_limit < -1 {
        return Err(invalid(
            "--pod-max-pids",
            format!("{pod_pids_limit}: expected -1 (no limit) or more"),
        ));
    }
    Ok(CgroupConfig {
        root,
        per_qos: cli.cgroups_per_qos.or(per_qos).unwrap_or(true),
        driver,
        pod_pids_limit,
        single_process_oom_kill: file.single_process_oom_kill.unwrap_or(false),
        kubelet_cgroups,
        runtime_cgroups,
        system_cgroups,
    })
}

/// `serializeImagePulls` and `maxParallelImagePulls`, flags over the file, as kubelet defaults
/// and validates them: serialized unless a limit of 2 or more is given; a limit must be
/// positive, and more than 1 only without serialization.
fn image_pull_limit(
    serialize: Option<bool>,
    max_parallel: Option<i64>,
    invalid: &dyn Fn(&str, String) -> ConfigError,
) -> Result<ImagePullLimit, ConfigError> {
    if let Some(n) = max_parallel.filter(|n| *n < 1) {
        return Err(invalid(
            "--max-parallel-image-pulls",
            format!("{n} must be a positive number"),
        ));
    }
    let serialize = serialize.unwrap_or(max_parallel.is_none_or(|n| n <= 1));
    match (serialize, max_parallel) {
        (true, Some(n)) if n > 1 => Err(invalid(
            "--max-parallel-image-pulls",
            format!("{n}: cannot be larger than 1 unless --serialize-image-pulls (serializeImagePulls) is false"),
        )),
        (true, _) => Ok(ImagePullLimit::default()),
        (false, None) => Ok(ImagePullLimit::Unlimited),
        (false, Some(n)) => Ok(ImagePullLimit::AtOnce(
            usize::try_from(n)
                .ok()
                .and_then(std::num::NonZeroUsize::new)
                .expect("checked positive above"),
        )),
    }
}

/// Merge flags over the file over kubelet's defaults, and validate.
///
/// `hostname` is injected so tests never depend on the machine.
pub fn build(cli: &Cli, hostname: impl FnOnce() -> String) -> Result<AgentConfig, ConfigError> {
    let file = match &cli.config {
        Some(path) => read_file(path)?,
        None => FileSettings::default(),
    };
    let invalid = |setting: &str, reason: String| ConfigError::Invalid {
        setting: setting.to_string(),
        reason,
    };

    let node_name = cli
        .hostname_override
        .clone()
        .unwrap_or_else(hostname)
        .trim()
        .to_lowercase();
    let valid_name = !node_name.is_empty()
        && node_name.len() <= 63
        && node_name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !node_name.starts_with(['-', '.'])
        && !node_name.ends_with(['-', '.']);
    if !valid_name {
        return Err(invalid(
            "--hostname-override",
            format!("{node_name:?} is not a valid node name (lowercase letters, digits, '-' and '.', at most 63)"),
        ));
    }

    // kubelet: the read-only port defaults to 10255 with flags only, 0 with a config file.
    let read_only_port = cli
        .read_only_port
        .or(file.read_only_port)
        .unwrap_or(if file.present { 0 } else { 10255 });
    let healthz_port = cli.healthz_port.or(file.healthz_port).unwrap_or(10248);
    let address = cli
        .address
        .or(file.address)
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let healthz_bind = cli
        .healthz_bind_address
        .or(file.healthz_bind_address)
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));

    let port = cli.port.or(file.port).unwrap_or(10250);
    let root_dir = cli
        .root_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("/var/lib/dockerlet"));
    let kubelet_api = kubelet_api_config(cli, &file, SocketAddr::new(address, port), &node_name, &root_dir)?;

    let file_check_frequency = cli
        .file_check_frequency
        .or(file.file_check_frequency)
        .unwrap_or(Duration::from_secs(20));
    if file_check_frequency.is_zero() {
        return Err(invalid("--file-check-frequency", "must be greater than 0".to_string()));
    }
    let housekeeping_interval = cli.housekeeping_interval.unwrap_or(Duration::from_secs(10));
    if housekeeping_interval.is_zero() {
        return Err(invalid("--housekeeping-interval", "must be greater than 0".to_string()));
    }
    let sync_frequency = cli
        .sync_frequency
        .or(file.sync_frequency)
        .unwrap_or(Duration::from_secs(60));
    if sync_frequency.is_zero() {
        return Err(invalid("--sync-frequency", "must be greater than 0".to_string()));
    }
    let backoff = BackoffConfig {
        initial: cli
            .crash_loop_backoff_initial
            .or(file.backoff_initial)
            .unwrap_or(Duration::from_secs(10)),
        max: cli
            .crash_loop_backoff_max
            .or(file.backoff_max)
            .unwrap_or(Duration::from_secs(300)),
    };
    if backoff.initial.is_zero() {
        return Err(invalid(
            "--crash-loop-backoff-initial",
            "must be greater than 0".to_string(),
        ));
    }
    if backoff.max < backoff.initial || backoff.max > Duration::from_secs(300) {
        return Err(invalid(
            "--crash-loop-backoff-max",
            format!(
                "{} must be between the initial delay ({}) and 300s",
                humantime::format_duration(backoff.max),
                humantime::format_duration(backoff.initial)
            ),
        ));
    }
    let runtime_endpoint = cli
        .container_runtime_endpoint
        .clone()
        .or(file.container_runtime_endpoint)
        .unwrap_or_else(|| "unix:///var/run/docker.sock".to_string());
    if !["unix://", "tcp://", "http://"]
        .iter()
        .any(|p| runtime_endpoint.starts_with(p))
    {
        return Err(invalid(
            "--container-runtime-endpoint",
            format!("{runtime_endpoint:?}: expected unix://, tcp:// or http://"),
        ));
    }
    let mut node_labels = BTreeMap::new();
    for label in cli.node_labels.iter().filter(|l| !l.is_empty()) {
        let (key, value) = label
            .split_once('=')
            .ok_or_else(|| invalid("--node-labels", format!("{label:?} is not key=value")))?;
        node_labels.insert(key.to_string(), value.to_string());
    }
    let node_status_update_frequency = cli
        .node_status_update_frequency
        .or(file.node_status_update_frequency)
        .unwrap_or(Duration::from_secs(10));
    if node_status_update_frequency.is_zero() {
        return Err(invalid(
            "--node-status-update-frequency",
            "must be greater than 0".to_string(),
        ));
    }
    let node_lease_duration_seconds = cli
        .node_lease_duration_seconds
        .or(file.node_lease_duration_seconds)
        .unwrap_or(40);
    if node_lease_duration_seconds < 1 {
        return Err(invalid(
            "--node-lease-duration-seconds",
            "must be at least 1".to_string(),
        ));
    }
    // kubelet: the report frequency follows an explicitly set update frequency.
    let node_status_report_frequency = file.node_status_report_frequency.unwrap_or(
        if cli
            .node_status_update_frequency
            .or(file.node_status_update_frequency)
            .is_some()
        {
            node_status_update_frequency
        } else {
            Duration::from_secs(300)
        },
    );
    let taints = match cli.register_with_taints.iter().any(|t| !t.is_empty()) {
        true => cli
            .register_with_taints
            .iter()
            .filter(|t| !t.is_empty())
            .map(|t| parse_taint(t).map_err(|reason| invalid("--register-with-taints", reason)))
            .collect::<Result<Vec<_>, _>>()?,
        false => file.register_with_taints.unwrap_or_default(),
    };
    for taint in &taints {
        check_taint(taint).map_err(|reason| invalid("--register-with-taints", reason))?;
    }
    let mut reserved = BTreeMap::new();
    let mut each_reserved: [BTreeMap<String, i64>; 2] = Default::default();
    for (i, (setting, flag, from_file)) in [
        ("--kube-reserved", &cli.kube_reserved, file.kube_reserved),
        ("--system-reserved", &cli.system_reserved, file.system_reserved),
    ]
    .into_iter()
    .enumerate()
    {
        let pairs: Vec<(String, String)> = if flag.iter().any(|r| !r.is_empty()) {
            flag.iter()
                .filter(|r| !r.is_empty())
                .map(|r| {
                    r.split_once('=')
                        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                        .ok_or_else(|| invalid(setting, format!("{r:?} is not resource=quantity")))
                })
                .collect::<Result<_, _>>()?
        } else {
            from_file.unwrap_or_default().into_iter().collect()
        };
        for (resource, quantity) in pairs {
            if !["cpu", "memory", "ephemeral-storage", "pid"].contains(&resource.as_str()) {
                return Err(invalid(
                    setting,
                    format!("{resource:?}: unknown resource (cpu, memory, ephemeral-storage, pid)"),
                ));
            }
            let value = parse_quantity(&quantity, resource == "cpu")
                .ok_or_else(|| invalid(setting, format!("{resource}={quantity}: not a quantity")))?;
            *reserved.entry(resource.clone()).or_insert(0) += value;
            *each_reserved[i].entry(resource).or_insert(0) += value;
        }
    }
    let eviction_hard = if cli.eviction_hard.iter().any(|e| !e.is_empty()) {
        Thresholds::parse_flag(&cli.eviction_hard).map_err(|e| invalid("--eviction-hard", e.to_string()))?
    } else if let Some(map) = &file.eviction_hard {
        Thresholds::parse(map.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(|e| invalid("evictionHard", e.to_string()))?
    } else {
        Thresholds::default()
    };
    let mut url_headers: Vec<(String, String)> = file
        .static_pod_url_header
        .unwrap_or_default()
        .into_iter()
        .flat_map(|(k, values)| values.into_iter().map(move |v| (k.clone(), v)))
        .collect();
    for header in cli.manifest_url_header.iter().filter(|h| !h.is_empty()) {
        let (name, value) = header
            .split_once(':')
            .ok_or_else(|| invalid("--manifest-url-header", format!("{header:?} is not Name:value")))?;
        url_headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let http_check_frequency = cli
        .http_check_frequency
        .or(file.http_check_frequency)
        .unwrap_or(Duration::from_secs(20));
    if http_check_frequency.is_zero() {
        return Err(invalid("--http-check-frequency", "must be greater than 0".to_string()));
    }
    if cli
        .kube_api_qps
        .or(file.kube_api_qps)
        .is_some_and(|q| q <= 0.0 || !q.is_finite())
    {
        return Err(invalid("--kube-api-qps", "must be greater than 0".to_string()));
    }
    let event_limits = event_limits(
        cli.event_qps.or(file.event_record_qps),
        cli.event_burst.or(file.event_burst),
    )
    .map_err(|(setting, reason)| invalid(setting, reason))?;
    let manifest_url = cli
        .manifest_url
        .clone()
        .or(file.static_pod_url)
        .filter(|u| !u.is_empty());
    if let Some(url) = &manifest_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(invalid(
                "--manifest-url",
                format!("{url:?}: expected an http:// or https:// URL"),
            ));
        }
    }
    let dns = dns_settings(cli, (file.cluster_dns, file.cluster_domain, file.resolv_conf), &invalid)?;
    let allowed_unsafe_sysctls = if cli.allowed_unsafe_sysctls.is_empty() {
        file.allowed_unsafe_sysctls.unwrap_or_default()
    } else {
        cli.allowed_unsafe_sysctls.clone()
    };
    let allowed_unsafe_sysctls: Vec<String> = allowed_unsafe_sysctls.into_iter().filter(|s| !s.is_empty()).collect();
    dockerlet_pod::admission::check_unsafe_sysctl_patterns(&allowed_unsafe_sysctls)
        .map_err(|e| invalid("--allowed-unsafe-sysctls", e.to_string()))?;
    let cgroups = cgroup_settings(
        cli,
        FileCgroups {
            root: file.cgroup_root,
            per_qos: file.cgroups_per_qos,
            driver: file.cgroup_driver,
            pod_pids_limit: file.pod_pids_limit,
            single_process_oom_kill: file.single_process_oom_kill,
            kubelet: file.kubelet_cgroups,
            runtime: file.runtime_cgroups,
            system: file.system_cgroups,
        },
        &invalid,
    )?;
    let node = node_settings::node_settings(cli, file.node, cgroups.per_qos, each_reserved)?;
    let image_pulls = image_pull_limit(
        cli.serialize_image_pulls.or(file.serialize_image_pulls),
        cli.max_parallel_image_pulls.or(file.max_parallel_image_pulls),
        &invalid,
    )?;
    let shutdown_groups = crate::shutdown_config::groups(crate::shutdown_config::ShutdownSettings {
        total: cli.shutdown_grace_period.or(file.shutdown_grace_period),
        critical: cli
            .shutdown_grace_period_critical_pods
            .or(file.shutdown_grace_period_critical_pods),
        by_priority: file.shutdown_grace_period_by_pod_priority,
    })
    .map_err(|e| invalid(e.setting, e.reason))?;
    Ok(AgentConfig {
        node,
        proc_paths: (cli.proc_sys_root.clone(), cli.proc_swaps.clone()),
        dns,
        cgroups,
        image_pulls,
        shutdown_groups,
        seccomp_default: cli.seccomp_default.or(file.seccomp_default).unwrap_or(false),
        allowed_unsafe_sysctls,
        manifest_url: manifest_url.map(|url| HttpSourceConfig {
            url,
            headers: url_headers,
            frequency: http_check_frequency,
        }),
        kubeconfig: cli.kubeconfig.clone(),
        in_cluster: cli.in_cluster.then(|| cli.service_account_dir.clone()),
        kube_api_limits: (
            cli.kube_api_qps.or(file.kube_api_qps).unwrap_or(50.0),
            cli.kube_api_burst.or(file.kube_api_burst).unwrap_or(100),
        ),
        event_limits,
        register_node: cli.register_node.or(file.register_node).unwrap_or(true),
        node_labels,
        node_status_update_frequency,
        node_lease_duration_seconds,
        port,
        kubelet_api,
        node_status_report_frequency,
        taints,
        reserved,
        eviction_hard,
        eviction_pressure_transition_period: cli
            .eviction_pressure_transition_period
            .or(file.eviction_pressure_transition_period)
            .unwrap_or(Duration::from_secs(300)),
        node_name,
        root_dir,
        pod_logs_dir: cli
            .pod_logs_dir
            .clone()
            .or(file.pod_logs_dir)
            .unwrap_or_else(|| PathBuf::from("/var/log/pods")),
        manifest_path: cli
            .pod_manifest_path
            .clone()
            .or(file.static_pod_path)
            .filter(|p| !p.as_os_str().is_empty()),
        read_only: (read_only_port != 0).then(|| SocketAddr::new(address, read_only_port)),
        healthz: (healthz_port != 0).then(|| SocketAddr::new(healthz_bind, healthz_port)),
        debug: cli
            .debug_address
            .or(file.debug_address)
            .unwrap_or_else(|| "127.0.0.1:10265".parse().expect("valid default")),
        file_check_frequency,
        sync_frequency,
        housekeeping_interval,
        sandbox_image: cli
            .pod_infra_container_image
            .clone()
            .or(file.pod_infra_container_image)
            .filter(|s| !s.is_empty()),
        runtime_endpoint,
        backoff,
        node_ip: cli.node_ip,
        fault_injection: cli.enable_fault_injection,
        kmsg_path: cli.kmsg_path.clone(),
        verbosity: cli.verbosity.unwrap_or(0),
    })
}

/// The kubelet API's settings, flags over the file (`tlsCertFile`, `authentication`, …); none
/// with port 0. The TokenReview and SubjectAccessReview webhooks are on by default with an API
/// server (KubeletConfiguration v1beta1's defaults) and refused, naming the setting, without
/// one; without an API server and no mode asked for, every request is forbidden.
fn kubelet_api_config(
    cli: &Cli,
    file: &FileSettings,
    address: SocketAddr,
    node_name: &str,
    root_dir: &Path,
) -> Result<Option<KubeletApiConfig>, ConfigError> {
    let invalid = |setting: &str, reason: String| ConfigError::Invalid {
        setting: setting.to_string(),
        reason,
    };
    if address.port() == 0 {
        return Ok(None);
    }
    let has_api_server = cli.kubeconfig.is_some() || cli.in_cluster;
    let file_ttl = |setting: &str, text: Option<&String>| -> Result<Option<Duration>, ConfigError> {
        text.map(|t| humantime::parse_duration(t).map_err(|e| invalid(setting, format!("invalid duration {t:?}: {e}"))))
            .transpose()
    };
    let authn = file.authentication.as_ref();
    let file_webhook = authn.and_then(|a| a.webhook.as_ref());
    let token_webhook = match cli
        .authentication_token_webhook
        .or_else(|| file_webhook.and_then(|w| w.enabled))
    {
        Some(true) if !has_api_server => {
            return Err(invalid(
                "--authentication-token-webhook",
                "bearer token authentication (TokenReview) needs an API server (--kubeconfig); use client certificates (--client-ca-file)".into(),
            ))
        }
        Some(enabled) => enabled,
        None => has_api_server,
    };
    let token_ttl = match cli.authentication_token_webhook_cache_ttl {
        Some(ttl) => ttl,
        None => file_ttl(
            "authentication.webhook.cacheTTL",
            file_webhook.and_then(|w| w.cache_ttl.as_ref()),
        )?
        .unwrap_or(Duration::from_secs(120)),
    };
    let authz = file.authorization.as_ref();
    let file_authz_webhook = authz.and_then(|a| a.webhook.as_ref());
    let authorized_ttl = match cli.authorization_webhook_cache_authorized_ttl {
        Some(ttl) => ttl,
        None => file_ttl(
            "authorization.webhook.cacheAuthorizedTTL",
            file_authz_webhook.and_then(|w| w.cache_authorized_ttl.as_ref()),
        )?
        .unwrap_or(Duration::from_secs(300)),
    };
    let unauthorized_ttl = match cli.authorization_webhook_cache_unauthorized_ttl {
        Some(ttl) => ttl,
        None => file_ttl(
            "authorization.webhook.cacheUnauthorizedTTL",
            file_authz_webhook.and_then(|w| w.cache_unauthorized_ttl.as_ref()),
        )?
        .unwrap_or(Duration::from_secs(30)),
    };
    let webhook = AuthorizationMode::Webhook {
        authorized_ttl,
        unauthorized_ttl,
    };
    let mode = cli
        .authorization_mode
        .clone()
        .or_else(|| authz.and_then(|a| a.mode.clone()));
    let authorization = match mode.as_deref() {
        None | Some("") if has_api_server => webhook,
        None | Some("") => {
            tracing::warn!("no --authorization-mode and no API server: every kubelet API request is forbidden (403); set --authorization-mode=AlwaysAllow to allow authenticated callers");
            AuthorizationMode::AlwaysDeny
        }
        Some("AlwaysAllow") => AuthorizationMode::AlwaysAllow,
        Some("Webhook") if has_api_server => webhook,
        Some("Webhook") => {
            return Err(invalid(
                "--authorization-mode",
                "Webhook (SubjectAccessReview) needs an API server (--kubeconfig); use AlwaysAllow".into(),
            ))
        }
        Some(other) => {
            return Err(invalid(
                "--authorization-mode",
                format!("{other:?}: expected Webhook or AlwaysAllow"),
            ))
        }
    };
    let cert_and_key = match (
        cli.tls_cert_file.clone().or_else(|| file.tls_cert_file.clone()),
        cli.tls_private_key_file
            .clone()
            .or_else(|| file.tls_private_key_file.clone()),
    ) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(invalid(
                "--tls-private-key-file",
                "required with --tls-cert-file".into(),
            ))
        }
        (None, Some(_)) => {
            return Err(invalid(
                "--tls-cert-file",
                "required with --tls-private-key-file".into(),
            ))
        }
    };
    let cipher_suites = if cli.tls_cipher_suites.iter().any(|s| !s.is_empty()) {
        cli.tls_cipher_suites.clone()
    } else {
        file.tls_cipher_suites.clone().unwrap_or_default()
    };
    let tls = TlsSettings {
        cert_and_key,
        cert_dir: cli.cert_dir.clone().unwrap_or_else(|| root_dir.join("pki")),
        node_name: node_name.to_string(),
        node_ips: cli.node_ip.into_iter().collect(),
        client_ca_file: cli.client_ca_file.clone().or_else(|| {
            authn
                .and_then(|a| a.x509.as_ref())
                .and_then(|x| x.client_ca_file.clone())
        }),
        min_version: cli.tls_min_version.clone().or_else(|| file.tls_min_version.clone()),
        cipher_suites: cipher_suites.into_iter().map(|s| s.trim().to_string()).collect(),
    };
    // Refuse bad names now, naming the flag, rather than when the server starts.
    let reason = |e: dockerlet_http::kubelet_api::tls::TlsError| match e {
        dockerlet_http::kubelet_api::tls::TlsError::Invalid { reason, .. } => reason,
        other => other.to_string(),
    };
    dockerlet_http::kubelet_api::tls::provider(&tls.cipher_suites)
        .map_err(|e| invalid("--tls-cipher-suites", reason(e)))?;
    dockerlet_http::kubelet_api::tls::versions(tls.min_version.as_deref())
        .map_err(|e| invalid("--tls-min-version", reason(e)))?;
    Ok(Some(KubeletApiConfig {
        address,
        tls,
        anonymous: cli
            .anonymous_auth
            .or_else(|| authn.and_then(|a| a.anonymous.as_ref()).and_then(|a| a.enabled))
            .unwrap_or(false),
        token_webhook: token_webhook.then_some(token_ttl),
        authorization,
        stream_idle_timeout: Some(
            cli.streaming_connection_idle_timeout
                .or(file.streaming_connection_idle_timeout)
                .unwrap_or(STREAMING_CONNECTION_IDLE_TIMEOUT),
        )
        .filter(|t| !t.is_zero()),
    }))
}

/// `--cluster-dns` (IPs), `--cluster-domain`, `--resolv-conf` (empty for none), flags over
/// the file's `clusterDNS`, `clusterDomain`, `resolvConf`.
fn dns_settings(
    cli: &Cli,
    (file_servers, file_domain, file_resolv_conf): (Option<Vec<String>>, Option<String>, Option<PathBuf>),
    invalid: &dyn Fn(&str, String) -> ConfigError,
) -> Result<ClusterDns, ConfigError> {
    let (setting, servers) = if cli.cluster_dns.iter().any(|s| !s.is_empty()) {
        ("--cluster-dns", cli.cluster_dns.clone())
    } else {
        ("clusterDNS", file_servers.unwrap_or_default())
    };
    let servers = servers
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.trim()
                .parse::<IpAddr>()
                .map_err(|_| invalid(setting, format!("{s:?} is not an IP address")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let domain = cli
        .cluster_domain
        .clone()
        .or(file_domain)
        .unwrap_or_default()
        .trim_end_matches('.')
        .to_string();
    let resolv_conf = cli
        .resolv_conf
        .clone()
        .map(PathBuf::from)
        .or(file_resolv_conf)
        .unwrap_or_else(|| PathBuf::from("/etc/resolv.conf"));
    Ok(ClusterDns {
        servers,
        domain,
        resolv_conf: (!resolv_conf.as_os_str().is_empty()).then_some(resolv_conf),
    })
}

/// A taint from kubelet's flag syntax: `key=value:Effect` or `key:Effect`.
fn parse_taint(text: &str) -> Result<Taint, String> {
    let (key_value, effect) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("{text:?}: expected key=value:Effect"))?;
    let (key, value) = match key_value.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (key_value, None),
    };
    Ok(Taint {
        key: key.to_string(),
        value,
        effect: effect.to_string(),
        time_added: None,
    })
}

fn check_taint(taint: &Taint) -> Result<(), String> {
    if taint.key.is_empty() {
        return Err("a taint needs a key".to_string());
    }
    if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&taint.effect.as_str()) {
        return Err(format!(
            "taint {}: effect {:?} is not NoSchedule, PreferNoSchedule or NoExecute",
            taint.key, taint.effect
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("dockerlet").chain(args.iter().copied())).unwrap()
    }

    fn host() -> String {
        "My-Host".to_string()
    }

    /// `--housekeeping-interval` defaults to kubelet's 10 s, takes a duration, refuses 0.
    #[test]
    fn housekeeping_interval_is_kubelets_flag() {
        assert_eq!(
            build(&cli(&[]), host).unwrap().housekeeping_interval,
            Duration::from_secs(10)
        );
        let c = build(&cli(&["--housekeeping-interval", "2s"]), host).unwrap();
        assert_eq!(c.housekeeping_interval, Duration::from_secs(2));
        let err = build(&cli(&["--housekeeping-interval", "0s"]), host)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--housekeeping-interval"), "{err}");
    }

    /// With no flags the agent uses kubelet's flag defaults and the lowercased hostname.
    #[test]
    fn defaults_match_kubelet_flag_defaults() {
        let c = build(&cli(&[]), host).unwrap();
        assert_eq!(c.node_name, "my-host");
        assert_eq!(c.read_only, Some("0.0.0.0:10255".parse().unwrap()));
        assert_eq!(c.healthz, Some("127.0.0.1:10248".parse().unwrap()));
        assert_eq!(c.debug, "127.0.0.1:10265".parse().unwrap());
        assert_eq!(c.file_check_frequency, Duration::from_secs(20));
        assert_eq!(c.backoff, BackoffConfig::default());
        assert_eq!(c.runtime_endpoint, "unix:///var/run/docker.sock");
    }

    /// The config file sets values, flags override it, and unknown kubelet keys are ignored.
    #[test]
    fn flags_override_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/pods\nreadOnlyPort: 10266\nhealthzPort: 0\nfileCheckFrequency: 1m30s\ncrashLoopBackOff:\n  maxContainerRestartPeriod: 60s\nevictionHard:\n  memory.available: 100Mi\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let c = build(&cli(&["--config", p]), host).unwrap();
        assert_eq!(c.manifest_path, Some(PathBuf::from("/etc/pods")));
        assert_eq!(c.read_only.unwrap().port(), 10266);
        assert_eq!(c.healthz, None);
        assert_eq!(c.file_check_frequency, Duration::from_secs(90));
        assert_eq!(c.backoff.max, Duration::from_secs(60));
        let c = build(
            &cli(&["--config", p, "--read-only-port", "1234", "--pod-manifest-path", "/x"]),
            host,
        )
        .unwrap();
        assert_eq!(c.read_only.unwrap().port(), 1234);
        assert_eq!(c.manifest_path, Some(PathBuf::from("/x")));
    }

    /// `--event-qps` and `--event-burst` (file: `eventRecordQPS`, `eventBurst`): kubelet's 50 and
    /// 100 by default, client-go's 5 and 10 for 0, a negative number refused naming the flag.
    #[test]
    fn event_limits_as_kubelets_event_client() {
        let limits = |args: &[&str]| build(&cli(args), host).map(|c| c.event_limits);
        let pair = |qps: f64, burst: f64| EventLimits { qps, burst };
        assert_eq!(limits(&[]).unwrap(), pair(50.0, 100.0));
        assert_eq!(
            limits(&["--event-qps", "7", "--event-burst", "3"]).unwrap(),
            pair(7.0, 3.0)
        );
        assert_eq!(
            limits(&["--event-qps", "0", "--event-burst", "0"]).unwrap(),
            pair(5.0, 10.0)
        );
        let err = limits(&["--event-qps", "-1"]).unwrap_err().to_string();
        assert!(
            err.contains("--event-qps") && err.contains("-1 must not be a negative number"),
            "{err}"
        );
        let err = limits(&["--event-burst", "-2"]).unwrap_err().to_string();
        assert!(err.contains("--event-burst"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "kind: KubeletConfiguration\neventRecordQPS: 20\neventBurst: 40\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        assert_eq!(limits(&["--config", p]).unwrap(), pair(20.0, 40.0));
        assert_eq!(limits(&["--config", p, "--event-qps", "1"]).unwrap(), pair(1.0, 40.0));
    }

    /// Image pulls: serialized by default; `maxParallelImagePulls` of 2 or more alone turns
    /// serialization off (kubelet's defaulting); a limit above 1 with serialization asked for,
    /// or below 1, is refused naming the flag.
    #[test]
    fn image_pull_limits_as_kubelet_defaults_and_validates_them() {
        let at_once = |n: usize| ImagePullLimit::AtOnce(std::num::NonZeroUsize::new(n).unwrap());
        let limit = |args: &[&str]| build(&cli(args), host).map(|c| c.image_pulls);
        assert_eq!(limit(&[]).unwrap(), at_once(1));
        assert_eq!(
            limit(&["--serialize-image-pulls=false"]).unwrap(),
            ImagePullLimit::Unlimited
        );
        assert_eq!(limit(&["--max-parallel-image-pulls", "3"]).unwrap(), at_once(3));
        assert_eq!(limit(&["--max-parallel-image-pulls", "1"]).unwrap(), at_once(1));
        assert_eq!(
            limit(&["--serialize-image-pulls=false", "--max-parallel-image-pulls", "2"]).unwrap(),
            at_once(2)
        );
        let refused = limit(&["--serialize-image-pulls", "--max-parallel-image-pulls", "2"])
            .unwrap_err()
            .to_string();
        assert!(
            refused.starts_with("invalid value for --max-parallel-image-pulls: 2: cannot be larger than 1"),
            "{refused}"
        );
        let refused = limit(&["--max-parallel-image-pulls", "0"]).unwrap_err().to_string();
        assert_eq!(
            refused,
            "invalid value for --max-parallel-image-pulls: 0 must be a positive number"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "kind: KubeletConfiguration\nmaxParallelImagePulls: 5\n").unwrap();
        assert_eq!(limit(&["--config", path.to_str().unwrap()]).unwrap(), at_once(5));
        std::fs::write(&path, "kind: KubeletConfiguration\nserializeImagePulls: false\n").unwrap();
        assert_eq!(
            limit(&["--config", path.to_str().unwrap()]).unwrap(),
            ImagePullLimit::Unlimited
        );
    }

    /// The kubelet API: on 0.0.0.0:10250 by default, secure (no anonymous, every request
    /// forbidden without an authorization mode, self-signed pair under `<root-dir>/pki`); its
    /// settings come from the file's kubelet names or the flags; what it cannot honour (token
    /// webhook and Webhook authorizer without an API server, CBC suites, TLS 1.1) is refused
    /// naming the flag.
    #[test]
    fn kubelet_api_settings() {
        let c = build(&cli(&["--root-dir", "/r"]), host).unwrap();
        let api = c.kubelet_api.unwrap();
        assert_eq!(api.address, "0.0.0.0:10250".parse().unwrap());
        assert!(!api.anonymous);
        assert_eq!(api.authorization, AuthorizationMode::AlwaysDeny);
        assert_eq!(api.tls.cert_dir, PathBuf::from("/r/pki"));
        assert_eq!(api.stream_idle_timeout, Some(Duration::from_secs(4 * 3600)));
        assert_eq!(build(&cli(&["--port", "0"]), host).unwrap().kubelet_api, None);
        let idle = |args: &[&str]| {
            build(&cli(args), host)
                .unwrap()
                .kubelet_api
                .unwrap()
                .stream_idle_timeout
        };
        assert_eq!(
            idle(&["--streaming-connection-idle-timeout", "5m"]),
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            idle(&["--streaming-connection-idle-timeout", "0s"]),
            None,
            "0 is no limit"
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "kind: KubeletConfiguration\nport: 10260\ntlsCertFile: /c.crt\ntlsPrivateKeyFile: /c.key\ntlsMinVersion: VersionTLS13\ntlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\nauthentication:\n  anonymous:\n    enabled: true\n  x509:\n    clientCAFile: /ca.crt\nauthorization:\n  mode: AlwaysAllow\nstreamingConnectionIdleTimeout: 30m\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let api = build(&cli(&["--config", p]), host).unwrap().kubelet_api.unwrap();
        assert_eq!(api.address.port(), 10260);
        assert_eq!(api.stream_idle_timeout, Some(Duration::from_secs(1800)));
        assert!(api.anonymous);
        assert_eq!(api.authorization, AuthorizationMode::AlwaysAllow);
        assert_eq!(api.tls.cert_and_key, Some(("/c.crt".into(), "/c.key".into())));
        assert_eq!(api.tls.client_ca_file, Some("/ca.crt".into()));
        assert_eq!(api.tls.min_version.as_deref(), Some("VersionTLS13"));
        assert_eq!(api.tls.cipher_suites, ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);
        let api = build(&cli(&["--config", p, "--anonymous-auth=false"]), host)
            .unwrap()
            .kubelet_api
            .unwrap();
        assert!(!api.anonymous);

        assert_eq!(api.token_webhook, None);
        let api = build(&cli(&["--config", p, "--kubeconfig", "/k"]), host)
            .unwrap()
            .kubelet_api
            .unwrap();
        assert_eq!(
            api.authorization,
            AuthorizationMode::AlwaysAllow,
            "asked for explicitly"
        );
        assert_eq!(api.token_webhook, Some(Duration::from_secs(120)));

        for (args, setting) in [
            (&["--authorization-mode", "Webhook"][..], "--authorization-mode"),
            (&["--authorization-mode", "Node"][..], "--authorization-mode"),
            (
                &["--authentication-token-webhook"][..],
                "--authentication-token-webhook",
            ),
            (
                &["--tls-cipher-suites", "TLS_RSA_WITH_AES_128_CBC_SHA"][..],
                "--tls-cipher-suites",
            ),
            (&["--tls-cipher-suites", "BOGUS"][..], "--tls-cipher-suites"),
            (&["--tls-min-version", "VersionTLS11"][..], "--tls-min-version"),
        ] {
            match build(&cli(args), host) {
                Err(ConfigError::Invalid { setting: s, reason }) => assert_eq!(s, setting, "{args:?}: {reason}"),
                other => panic!("{args:?}: {other:?}"),
            }
        }
    }

    /// With an API server the TokenReview and SubjectAccessReview webhooks are on by default
    /// with kubelet's TTLs (2 m; 5 m and 30 s); the file's `cacheTTL`s and the flags set them;
    /// they can be turned off.
    #[test]
    fn webhooks_default_on_with_an_api_server() {
        let api = build(&cli(&["--kubeconfig", "/k"]), host).unwrap().kubelet_api.unwrap();
        assert_eq!(api.token_webhook, Some(Duration::from_secs(120)));
        assert_eq!(
            api.authorization,
            AuthorizationMode::Webhook {
                authorized_ttl: Duration::from_secs(300),
                unauthorized_ttl: Duration::from_secs(30)
            }
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "authentication:\n  webhook:\n    enabled: true\n    cacheTTL: 10s\nauthorization:\n  mode: Webhook\n  webhook:\n    cacheAuthorizedTTL: 1m0s\n    cacheUnauthorizedTTL: 5s\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let api = build(&cli(&["--config", p, "--kubeconfig", "/k"]), host)
            .unwrap()
            .kubelet_api
            .unwrap();
        assert_eq!(api.token_webhook, Some(Duration::from_secs(10)));
        assert_eq!(
            api.authorization,
            AuthorizationMode::Webhook {
                authorized_ttl: Duration::from_secs(60),
                unauthorized_ttl: Duration::from_secs(5)
            }
        );
        let api = build(
            &cli(&[
                "--config",
                p,
                "--kubeconfig",
                "/k",
                "--authentication-token-webhook=false",
                "--authorization-webhook-cache-unauthorized-ttl",
                "1s",
            ]),
            host,
        )
        .unwrap()
        .kubelet_api
        .unwrap();
        assert_eq!(api.token_webhook, None);
        assert!(matches!(
            api.authorization,
            AuthorizationMode::Webhook { unauthorized_ttl, .. } if unauthorized_ttl == Duration::from_secs(1)
        ));
        // Without an API server, asking for either webhook is refused.
        assert!(build(&cli(&["--config", p]), host).is_err());
    }

    /// The cgroup settings take kubelet's defaults, the file's `cgroupRoot`, `cgroupsPerQOS`,
    /// `cgroupDriver` and `podPidsLimit`, and the flags over them; bad values name the flag.
    #[test]
    fn cgroup_settings_parse() {
        let c = build(&cli(&[]), host).unwrap().cgroups;
        assert_eq!(
            c,
            CgroupConfig {
                root: "/".into(),
                per_qos: true,
                driver: None,
                pod_pids_limit: -1,
                single_process_oom_kill: false,
                kubelet_cgroups: None,
                runtime_cgroups: None,
                system_cgroups: None,
            }
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "cgroupRoot: /k\ncgroupsPerQOS: false\nenforceNodeAllocatable: []\ncgroupDriver: systemd\npodPidsLimit: 100\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let c = build(&cli(&["--config", p]), host).unwrap().cgroups;
        assert_eq!(
            (c.root.as_str(), c.per_qos, c.driver, c.pod_pids_limit),
            ("/k", false, Some(CgroupDriver::Systemd), 100)
        );
        let c = build(
            &cli(&[
                "--config",
                p,
                "--cgroup-root",
                "/it/n1",
                "--cgroups-per-qos",
                "--pod-max-pids",
                "-1",
            ]),
            host,
        )
        .unwrap()
        .cgroups;
        assert_eq!((c.root.as_str(), c.per_qos, c.pod_pids_limit), ("/it/n1", true, -1));
        // The system cgroups: from the file, flags over it; "" is none; systemCgroups with
        // the file's cgroupRoot.
        std::fs::write(
            &path,
            "cgroupRoot: /\nkubeletCgroups: /kubelet\nruntimeCgroups: /docker-daemon\nsystemCgroups: /system\n",
        )
        .unwrap();
        let c = build(
            &cli(&["--config", p, "--kubelet-cgroups", "/k2", "--runtime-cgroups", ""]),
            host,
        )
        .unwrap()
        .cgroups;
        assert_eq!(
            (
                c.kubelet_cgroups.as_deref(),
                c.runtime_cgroups.as_deref(),
                c.system_cgroups.as_deref()
            ),
            (Some("/k2"), None, Some("/system"))
        );
        for (args, setting) in [
            (&["--cgroup-root", "rel"][..], "--cgroup-root"),
            (&["--cgroup-root", "/a/../b"][..], "--cgroup-root"),
            (&["--cgroup-driver", "docker"][..], "--cgroup-driver"),
            (&["--pod-max-pids", "-2"][..], "--pod-max-pids"),
            (&["--kubelet-cgroups", "kubelet"][..], "--kubelet-cgroups"),
            (&["--runtime-cgroups", "/a/./b"][..], "--runtime-cgroups"),
            (&["--system-cgroups", "/system"][..], "--system-cgroups"),
            (&["--cgroup-root", "/", "--system-cgroups", "/"][..], "--system-cgroups"),
        ] {
            match build(&cli(args), host) {
                Err(ConfigError::Invalid { setting: s, .. }) => assert_eq!(s, setting, "{args:?}"),
                other => panic!("{args:?}: {other:?}"),
            }
        }
    }

    /// `seccompDefault` and `allowedUnsafeSysctls` come from the file or the flags (off and
    /// empty by default); a pattern that is not namespaced is refused naming the flag.
    #[test]
    fn security_settings_parse() {
        let c = build(&cli(&[]), host).unwrap();
        assert!(!c.seccomp_default && c.allowed_unsafe_sysctls.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "seccompDefault: true\nallowedUnsafeSysctls: [\"kernel.msg*\"]\n").unwrap();
        let p = path.to_str().unwrap();
        let c = build(&cli(&["--config", p]), host).unwrap();
        assert!(c.seccomp_default);
        assert_eq!(c.allowed_unsafe_sysctls, vec!["kernel.msg*"]);
        let c = build(
            &cli(&[
                "--config",
                p,
                "--seccomp-default=false",
                "--allowed-unsafe-sysctls",
                "net.*,kernel.sem",
            ]),
            host,
        )
        .unwrap();
        assert!(!c.seccomp_default);
        assert_eq!(c.allowed_unsafe_sysctls, vec!["net.*", "kernel.sem"]);
        assert!(build(&cli(&["--seccomp-default"]), host).unwrap().seccomp_default);
        let err = build(&cli(&["--allowed-unsafe-sysctls", "vm.swappiness"]), host)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            r#"invalid value for --allowed-unsafe-sysctls: the sysctls "vm.swappiness" are not known to be namespaced"#
        );
    }

    /// Bad values name the setting and the reason.
    #[test]
    fn bad_settings_name_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "readOnlyPort: abc\n").unwrap();
        let err = build(&cli(&["--config", path.to_str().unwrap()]), host)
            .unwrap_err()
            .to_string();
        assert!(err.contains("config.yaml") && err.contains("readOnlyPort"), "{err}");
        std::fs::write(&path, "fileCheckFrequency: soon\n").unwrap();
        let err = build(&cli(&["--config", path.to_str().unwrap()]), host)
            .unwrap_err()
            .to_string();
        assert!(err.contains("fileCheckFrequency: invalid duration"), "{err}");
        let err = build(&cli(&["--crash-loop-backoff-max", "10m"]), host)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--crash-loop-backoff-max"), "{err}");
        let err = build(&cli(&["--hostname-override", "bad_name"]), host)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--hostname-override"), "{err}");
        assert!(Cli::try_parse_from(["dockerlet", "--file-check-frequency", "xyz"]).is_err());
        let err = build(&cli(&["--register-with-taints", "a=b:Sometimes"]), host)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--register-with-taints") && err.contains("Sometimes"),
            "{err}"
        );
        let err = build(&cli(&["--kube-reserved", "gpu=1"]), host)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--kube-reserved") && err.contains("unknown resource"),
            "{err}"
        );
        let err = build(&cli(&["--eviction-hard", "memory.available<lots"]), host)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--eviction-hard") && err.contains("memory.available"),
            "{err}"
        );
    }

    /// DNS settings: kubelet's defaults, the file's keys, flags over them, "" for no
    /// resolv.conf, and a bad IP named.
    #[test]
    fn dns_settings_parse() {
        let c = build(&cli(&[]), host).unwrap();
        assert_eq!(c.dns, ClusterDns::default());
        assert_eq!(c.dns.resolv_conf, Some(PathBuf::from("/etc/resolv.conf")));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "clusterDNS: [10.96.0.10]\nclusterDomain: cluster.local\nresolvConf: /run/resolv.conf\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let c = build(&cli(&["--config", p]), host).unwrap();
        assert_eq!(c.dns.servers, vec!["10.96.0.10".parse::<IpAddr>().unwrap()]);
        assert_eq!(c.dns.domain, "cluster.local");
        assert_eq!(c.dns.resolv_conf, Some(PathBuf::from("/run/resolv.conf")));
        let c = build(
            &cli(&["--config", p, "--cluster-dns", "10.0.0.10,fd00::a", "--resolv-conf", ""]),
            host,
        )
        .unwrap();
        assert_eq!(c.dns.servers.len(), 2);
        assert_eq!(c.dns.resolv_conf, None);
        let err = build(&cli(&["--cluster-dns", "ten"]), host).unwrap_err().to_string();
        assert!(err.contains("--cluster-dns") && err.contains("\"ten\""), "{err}");
    }

    /// Taints, reserved resources and eviction thresholds come from flags or the file, with
    /// kubelet's defaults.
    #[test]
    fn node_allocatable_settings_parse() {
        let c = build(&cli(&[]), host).unwrap();
        assert!(c.taints.is_empty() && c.reserved.is_empty());
        assert_eq!(c.eviction_hard, Thresholds::default());
        assert_eq!(c.node_status_report_frequency, Duration::from_secs(300));
        let c = build(
            &cli(&[
                "--register-with-taints",
                "dedicated=edge:NoSchedule,gpu:NoExecute",
                "--kube-reserved",
                "cpu=100m,memory=1Gi",
                "--system-reserved",
                "cpu=0.4",
                "--eviction-hard",
                "memory.available<1Gi",
                "--node-status-update-frequency",
                "2s",
            ]),
            host,
        )
        .unwrap();
        assert_eq!(c.taints.len(), 2);
        assert_eq!(
            (
                c.taints[0].key.as_str(),
                c.taints[0].value.as_deref(),
                c.taints[0].effect.as_str()
            ),
            ("dedicated", Some("edge"), "NoSchedule")
        );
        assert_eq!(c.taints[1].value, None);
        assert_eq!(c.reserved["cpu"], 500);
        assert_eq!(c.reserved["memory"], 1 << 30);
        assert_eq!(c.eviction_hard.0.len(), 1);
        assert_eq!(c.node_status_report_frequency, Duration::from_secs(2));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "registerWithTaints:\n- key: a\n  effect: NoExecute\nkubeReserved:\n  memory: 512Mi\nevictionHard:\n  nodefs.available: 5%\nevictionPressureTransitionPeriod: 30s\n",
        )
        .unwrap();
        let c = build(&cli(&["--config", path.to_str().unwrap()]), host).unwrap();
        assert_eq!(c.taints[0].effect, "NoExecute");
        assert_eq!(c.reserved["memory"], 512 << 20);
        assert_eq!(c.eviction_hard.0.len(), 1);
        assert_eq!(c.eviction_pressure_transition_period, Duration::from_secs(30));
    }
}
