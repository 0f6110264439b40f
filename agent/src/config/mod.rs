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
use dockerlet_http::kubelet_api::DebugRoutes;
use dockerlet_kube::recorder::EventLimits;
use dockerlet_pod::backoff::BackoffConfig;
use dockerlet_pod::cgroup::CgroupDriver;
use dockerlet_pod::dns::ClusterDns;
use dockerlet_pod::quantity::parse_quantity;
use k8s_openapi::api::core::v1::Taint;

use crate::cli::Cli;

mod node_settings;
pub use node_settings::{NodeSettings, ReservedCgroup};
mod feature_gates;
mod file;
mod kubelet_fields;
mod values;

use file::FileSettings;

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
    /// `featureGates` merged with `--feature-gates`: known gates, with values dockerlet has.
    pub feature_gates: BTreeMap<String, bool>,
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
    /// `enableDebuggingHandlers`, `enableSystemLogHandler`, `enableProfilingHandler`,
    /// `enableDebugFlagsHandler`: which debugging routes are served or answered 405.
    pub debug_routes: DebugRoutes,
}

/// kubelet's `--streaming-connection-idle-timeout` default.
pub const STREAMING_CONNECTION_IDLE_TIMEOUT: Duration = Duration::from_secs(4 * 3600);

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
    let mut file = file::load(cli.config.as_deref(), cli.config_dir.as_deref())?;
    let feature_gates = feature_gates::merge_flag(std::mem::take(&mut file.feature_gates), &cli.feature_gates)?;
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
            .map(|t| parse_taint(t).map_err(|e| invalid("--register-with-taints", e.to_string())))
            .collect::<Result<Vec<_>, _>>()?,
        false => file.register_with_taints.unwrap_or_default(),
    };
    for taint in &taints {
        check_taint(taint).map_err(|e| invalid("--register-with-taints", e.to_string()))?;
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
    // kubelet refuses a negative kubeAPIQPS; 0 is client-go's default, 5 per second.
    let kube_api_qps = match cli.kube_api_qps.or(file.kube_api_qps) {
        Some(q) if q < 0.0 || !q.is_finite() => {
            return Err(invalid("--kube-api-qps", format!("{q} must not be a negative number")))
        }
        Some(0.0) => 5.0,
        Some(q) => q,
        None => 50.0,
    };
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
        feature_gates,
        seccomp_default: cli.seccomp_default.or(file.seccomp_default).unwrap_or(false),
        allowed_unsafe_sysctls,
        manifest_url: manifest_url.map(|url| HttpSourceConfig {
            url,
            headers: url_headers,
            frequency: http_check_frequency,
        }),
        kubeconfig: cli.kubeconfig.clone(),
        in_cluster: cli.in_cluster.then(|| cli.service_account_dir.clone()),
        kube_api_limits: (kube_api_qps, cli.kube_api_burst.or(file.kube_api_burst).unwrap_or(100)),
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
    // `enableServer: false` turns the kubelet API server off, as `--port 0` does here.
    if address.port() == 0 || cli.enable_server.or(file.enable_server) == Some(false) {
        return Ok(None);
    }
    let has_api_server = cli.kubeconfig.is_some() || cli.in_cluster;
    let file_ttl = |setting: &str, text: Option<&String>| -> Result<Option<Duration>, ConfigError> {
        // A zero TTL means kubelet's default (its defaulting replaces zero durations).
        let ttl = text.map(|t| values::parse_duration(setting, t).map_err(|e| invalid(setting, e.to_string())));
        Ok(ttl.transpose()?.filter(|t| !t.is_zero()))
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
                .filter(|p| !p.as_os_str().is_empty())
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
        debug_routes: DebugRoutes {
            debugging: cli
                .enable_debugging_handlers
                .or(file.enable_debugging_handlers)
                .unwrap_or(true),
            system_log: file.enable_system_log_handler.unwrap_or(true),
            profiling: file.enable_profiling_handler.unwrap_or(true),
            debug_flags: file.enable_debug_flags_handler.unwrap_or(true),
        },
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

/// Why a `--register-with-taints` entry is refused.
#[derive(Debug, thiserror::Error)]
enum TaintError {
    /// No `:Effect`.
    #[error("{0:?}: expected key=value:Effect")]
    Syntax(String),
    /// An empty key.
    #[error("a taint needs a key")]
    NoKey,
    /// An effect kubelet does not know.
    #[error("taint {key}: effect {effect:?} is not NoSchedule, PreferNoSchedule or NoExecute")]
    Effect {
        /// The taint's key.
        key: String,
        /// The effect as written.
        effect: String,
    },
}

/// A taint from kubelet's flag syntax: `key=value:Effect` or `key:Effect`.
fn parse_taint(text: &str) -> Result<Taint, TaintError> {
    let (key_value, effect) = text
        .rsplit_once(':')
        .ok_or_else(|| TaintError::Syntax(text.to_string()))?;
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

fn check_taint(taint: &Taint) -> Result<(), TaintError> {
    if taint.key.is_empty() {
        return Err(TaintError::NoKey);
    }
    if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&taint.effect.as_str()) {
        return Err(TaintError::Effect {
            key: taint.key.clone(),
            effect: taint.effect.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod file_tests;
#[cfg(test)]
mod tests;
