//! The KubeletConfiguration file and its `--config-dir` drop-ins, read into [`FileSettings`].
//!
//! Every key is either parsed here (`field(path, &mut map, "key")`, one line per key) or checked
//! by [`kubelet_fields`]: accepted when it means kubelet's default or has no effect, refused
//! otherwise naming the file, the key and why. Nothing is warned about and ignored.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::values::{is_zero, parse_duration};
use super::{feature_gates, kubelet_fields, ConfigError};

/// The config file's `authentication` (kubelet's KubeletAuthentication).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileAuthentication {
    pub(super) x509: Option<FileX509>,
    pub(super) anonymous: Option<FileEnabled>,
    pub(super) webhook: Option<FileWebhook>,
}

/// `authentication.webhook` (kubelet's KubeletWebhookAuthentication).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileWebhook {
    pub(super) enabled: Option<bool>,
    #[serde(rename = "cacheTTL")]
    pub(super) cache_ttl: Option<String>,
}

/// `authorization.webhook` (kubelet's KubeletWebhookAuthorization).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileWebhookAuthorization {
    #[serde(rename = "cacheAuthorizedTTL")]
    pub(super) cache_authorized_ttl: Option<String>,
    #[serde(rename = "cacheUnauthorizedTTL")]
    pub(super) cache_unauthorized_ttl: Option<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileX509 {
    #[serde(rename = "clientCAFile")]
    pub(super) client_ca_file: Option<PathBuf>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileEnabled {
    pub(super) enabled: Option<bool>,
}

/// The config file's `authorization` (kubelet's KubeletAuthorization).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileAuthorization {
    pub(super) mode: Option<String>,
    pub(super) webhook: Option<FileWebhookAuthorization>,
}

/// Settings read from the config file (kubelet's KubeletConfiguration field names).
#[derive(Debug, Default)]
pub(super) struct FileSettings {
    pub(super) static_pod_path: Option<PathBuf>,
    pub(super) read_only_port: Option<u16>,
    pub(super) healthz_port: Option<u16>,
    pub(super) healthz_bind_address: Option<IpAddr>,
    pub(super) address: Option<IpAddr>,
    pub(super) file_check_frequency: Option<Duration>,
    pub(super) sync_frequency: Option<Duration>,
    pub(super) pod_infra_container_image: Option<String>,
    pub(super) container_runtime_endpoint: Option<String>,
    pub(super) debug_address: Option<SocketAddr>,
    pub(super) backoff_max: Option<Duration>,
    pub(super) backoff_initial: Option<Duration>,
    pub(super) register_node: Option<bool>,
    pub(super) kube_api_qps: Option<f64>,
    /// `rotateCertificates`.
    pub(super) rotate_certificates: Option<bool>,
    pub(super) kube_api_burst: Option<u32>,
    pub(super) event_record_qps: Option<i32>,
    pub(super) event_burst: Option<i32>,
    pub(super) static_pod_url: Option<String>,
    pub(super) static_pod_url_header: Option<BTreeMap<String, Vec<String>>>,
    pub(super) http_check_frequency: Option<Duration>,
    pub(super) node_status_update_frequency: Option<Duration>,
    pub(super) node_lease_duration_seconds: Option<i32>,
    /// `nodeStatusMaxImages` (a pointer: 0 is 0).
    pub(super) node_status_max_images: Option<i64>,
    pub(super) port: Option<u16>,
    pub(super) tls_cert_file: Option<PathBuf>,
    pub(super) tls_private_key_file: Option<PathBuf>,
    pub(super) tls_min_version: Option<String>,
    pub(super) tls_cipher_suites: Option<Vec<String>>,
    pub(super) streaming_connection_idle_timeout: Option<Duration>,
    pub(super) authentication: Option<FileAuthentication>,
    pub(super) authorization: Option<FileAuthorization>,
    pub(super) node_status_report_frequency: Option<Duration>,
    pub(super) register_with_taints: Option<Vec<Taint>>,
    pub(super) kube_reserved: Option<BTreeMap<String, String>>,
    pub(super) system_reserved: Option<BTreeMap<String, String>>,
    pub(super) eviction_hard: Option<BTreeMap<String, String>>,
    pub(super) eviction_soft: Option<BTreeMap<String, String>>,
    pub(super) eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    pub(super) eviction_max_pod_grace_period: Option<i32>,
    pub(super) eviction_minimum_reclaim: Option<BTreeMap<String, String>>,
    pub(super) eviction_pressure_transition_period: Option<Duration>,
    /// `kernelMemcgNotification`.
    pub(super) kernel_memcg_notification: Option<bool>,
    pub(super) cluster_dns: Option<Vec<String>>,
    pub(super) cluster_domain: Option<String>,
    pub(super) resolv_conf: Option<PathBuf>,
    /// `podCIDR` (empty: none).
    pub(super) pod_cidr: Option<String>,
    pub(super) seccomp_default: Option<bool>,
    pub(super) allowed_unsafe_sysctls: Option<Vec<String>>,
    pub(super) cgroup_root: Option<String>,
    pub(super) cgroups_per_qos: Option<bool>,
    pub(super) cgroup_driver: Option<String>,
    pub(super) pod_pids_limit: Option<i64>,
    pub(super) single_process_oom_kill: Option<bool>,
    pub(super) shutdown_grace_period: Option<Duration>,
    pub(super) shutdown_grace_period_critical_pods: Option<Duration>,
    pub(super) shutdown_grace_period_by_pod_priority: Option<Vec<dockerlet_pod::shutdown::ShutdownGroup>>,
    pub(super) node: super::node_settings::FileNode,
    pub(super) kubelet_cgroups: Option<String>,
    pub(super) runtime_cgroups: Option<String>,
    pub(super) system_cgroups: Option<String>,
    pub(super) pod_logs_dir: Option<PathBuf>,
    pub(super) container_log_max_size: Option<String>,
    pub(super) container_log_max_files: Option<i64>,
    pub(super) serialize_image_pulls: Option<bool>,
    pub(super) max_parallel_image_pulls: Option<i64>,
    /// `imageGCHighThresholdPercent` (a pointer: 0 is 0).
    pub(super) image_gc_high_threshold_percent: Option<i64>,
    /// `imageGCLowThresholdPercent` (a pointer).
    pub(super) image_gc_low_threshold_percent: Option<i64>,
    /// `imageMinimumGCAge` (0 means kubelet's 2m).
    pub(super) image_minimum_gc_age: Option<Duration>,
    /// `imageMaximumGCAge` (0 is off).
    pub(super) image_maximum_gc_age: Option<Duration>,
    /// `enableServer`: the kubelet API server on `--port` (default true).
    pub(super) enable_server: Option<bool>,
    /// `enableDebuggingHandlers` (default true).
    pub(super) enable_debugging_handlers: Option<bool>,
    /// `enableSystemLogHandler` (default true).
    pub(super) enable_system_log_handler: Option<bool>,
    /// `enableProfilingHandler` (default true).
    pub(super) enable_profiling_handler: Option<bool>,
    /// `enableDebugFlagsHandler` (default true).
    pub(super) enable_debug_flags_handler: Option<bool>,
    /// `featureGates`, checked against the known gates.
    pub(super) feature_gates: BTreeMap<String, bool>,
    /// A `--config` file was given (kubelet's file defaults differ from its flag defaults).
    pub(super) present: bool,
}

/// A file's top-level keys.
pub(super) type Map = BTreeMap<String, Value>;

fn file_error(path: &Path, reason: String) -> ConfigError {
    ConfigError::File {
        path: path.display().to_string(),
        reason,
    }
}

/// Takes `key` out of the map and parses it (null is unset).
pub(super) fn field<T: DeserializeOwned>(path: &Path, map: &mut Map, key: &str) -> Result<Option<T>, ConfigError> {
    let Some(value) = map.remove(key).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| file_error(path, format!("{key}: {e}")))
}

/// [`field`] for a non-pointer field: its zero value means kubelet's default (none here).
fn nonzero_field<T: DeserializeOwned>(path: &Path, map: &mut Map, key: &str) -> Result<Option<T>, ConfigError> {
    if map.get(key).is_some_and(is_zero) {
        map.remove(key);
    }
    field(path, map, key)
}

/// A pointer duration (`*metav1.Duration`): 0 is 0.
fn pointer_duration_field(path: &Path, map: &mut Map, key: &str) -> Result<Option<Duration>, ConfigError> {
    let Some(text) = field::<String>(path, map, key)? else {
        return Ok(None);
    };
    parse_duration(key, &text)
        .map(Some)
        .map_err(|e| file_error(path, e.to_string()))
}

/// A `metav1.Duration` field: 0 (and `""`) means kubelet's default, as its defaulting does.
fn duration_field(path: &Path, map: &mut Map, key: &str) -> Result<Option<Duration>, ConfigError> {
    Ok(pointer_duration_field(path, map, key)?.filter(|d| !d.is_zero()))
}

/// Reads a KubeletConfiguration file into its top-level keys: `kind` must be
/// KubeletConfiguration when given (`required` for drop-ins, as kubelet decodes them by kind);
/// `apiVersion` and `kind` are taken out.
fn read_map(path: &Path, required: bool) -> Result<Map, ConfigError> {
    let err = |reason: String| file_error(path, reason);
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let mut map: Map = serde_saphyr::from_str::<Option<Map>>(&text)
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
    match map.remove("kind") {
        Some(kind) if kind != "KubeletConfiguration" => {
            return Err(err(format!("kind: expected KubeletConfiguration, got {kind}")))
        }
        None if required => return Err(err("kind: missing; a drop-in is a KubeletConfiguration".into())),
        _ => {}
    }
    match map.remove("apiVersion") {
        Some(v) if v != "kubelet.config.k8s.io/v1beta1" => Err(err(format!(
            "apiVersion: expected kubelet.config.k8s.io/v1beta1, got {v}"
        ))),
        None if required => Err(err("apiVersion: missing; a drop-in is a KubeletConfiguration".into())),
        _ => Ok(map),
    }
}

/// The settings of one file's keys: every key is parsed, or checked against kubelet's
/// fields ([`kubelet_fields`]); a key that is no field, or a value dockerlet cannot honour,
/// is refused naming the file.
pub(super) fn settings(path: &Path, mut map: Map) -> Result<FileSettings, ConfigError> {
    let mut backoff: Map = field(path, &mut map, "crashLoopBackOff")?.unwrap_or_default();
    let settings = FileSettings {
        static_pod_path: nonzero_field(path, &mut map, "staticPodPath")?,
        read_only_port: field(path, &mut map, "readOnlyPort")?,
        healthz_port: field(path, &mut map, "healthzPort")?,
        healthz_bind_address: nonzero_field(path, &mut map, "healthzBindAddress")?,
        address: nonzero_field(path, &mut map, "address")?,
        file_check_frequency: duration_field(path, &mut map, "fileCheckFrequency")?,
        sync_frequency: duration_field(path, &mut map, "syncFrequency")?,
        pod_infra_container_image: field(path, &mut map, "podInfraContainerImage")?,
        container_runtime_endpoint: nonzero_field(path, &mut map, "containerRuntimeEndpoint")?,
        debug_address: field(path, &mut map, "debugAddress")?,
        backoff_max: pointer_duration_field(path, &mut backoff, "maxContainerRestartPeriod")?,
        backoff_initial: pointer_duration_field(path, &mut backoff, "initialContainerRestartPeriod")?,
        register_node: field(path, &mut map, "registerNode")?,
        kube_api_qps: field(path, &mut map, "kubeAPIQPS")?,
        rotate_certificates: field(path, &mut map, "rotateCertificates")?,
        kube_api_burst: nonzero_field(path, &mut map, "kubeAPIBurst")?,
        event_record_qps: field(path, &mut map, "eventRecordQPS")?,
        event_burst: nonzero_field(path, &mut map, "eventBurst")?,
        static_pod_url: field(path, &mut map, "staticPodURL")?,
        static_pod_url_header: field(path, &mut map, "staticPodURLHeader")?,
        http_check_frequency: duration_field(path, &mut map, "httpCheckFrequency")?,
        node_status_update_frequency: duration_field(path, &mut map, "nodeStatusUpdateFrequency")?,
        node_lease_duration_seconds: nonzero_field(path, &mut map, "nodeLeaseDurationSeconds")?,
        node_status_max_images: field(path, &mut map, "nodeStatusMaxImages")?,
        port: nonzero_field(path, &mut map, "port")?,
        tls_cert_file: nonzero_field(path, &mut map, "tlsCertFile")?,
        tls_private_key_file: nonzero_field(path, &mut map, "tlsPrivateKeyFile")?,
        tls_min_version: nonzero_field(path, &mut map, "tlsMinVersion")?,
        tls_cipher_suites: field(path, &mut map, "tlsCipherSuites")?,
        streaming_connection_idle_timeout: duration_field(path, &mut map, "streamingConnectionIdleTimeout")?,
        authentication: field(path, &mut map, "authentication")?,
        authorization: field(path, &mut map, "authorization")?,
        node_status_report_frequency: duration_field(path, &mut map, "nodeStatusReportFrequency")?,
        register_with_taints: field(path, &mut map, "registerWithTaints")?,
        kube_reserved: field(path, &mut map, "kubeReserved")?,
        system_reserved: field(path, &mut map, "systemReserved")?,
        eviction_hard: field(path, &mut map, "evictionHard")?,
        eviction_soft: field(path, &mut map, "evictionSoft")?,
        eviction_soft_grace_period: field(path, &mut map, "evictionSoftGracePeriod")?,
        eviction_max_pod_grace_period: field(path, &mut map, "evictionMaxPodGracePeriod")?,
        eviction_minimum_reclaim: field(path, &mut map, "evictionMinimumReclaim")?,
        eviction_pressure_transition_period: duration_field(path, &mut map, "evictionPressureTransitionPeriod")?,
        kernel_memcg_notification: field(path, &mut map, "kernelMemcgNotification")?,
        cluster_dns: field(path, &mut map, "clusterDNS")?,
        cluster_domain: nonzero_field(path, &mut map, "clusterDomain")?,
        resolv_conf: field(path, &mut map, "resolvConf")?,
        pod_cidr: nonzero_field(path, &mut map, "podCIDR")?,
        seccomp_default: field(path, &mut map, "seccompDefault")?,
        allowed_unsafe_sysctls: field(path, &mut map, "allowedUnsafeSysctls")?,
        cgroup_root: field(path, &mut map, "cgroupRoot")?,
        cgroups_per_qos: field(path, &mut map, "cgroupsPerQOS")?,
        cgroup_driver: nonzero_field(path, &mut map, "cgroupDriver")?,
        // kubelet defaults a negative limit to -1 (no limit).
        pod_pids_limit: field::<i64>(path, &mut map, "podPidsLimit")?.map(|n| n.max(-1)),
        single_process_oom_kill: field(path, &mut map, "singleProcessOOMKill")?,
        shutdown_grace_period: duration_field(path, &mut map, "shutdownGracePeriod")?,
        shutdown_grace_period_critical_pods: duration_field(path, &mut map, "shutdownGracePeriodCriticalPods")?,
        shutdown_grace_period_by_pod_priority: field(path, &mut map, "shutdownGracePeriodByPodPriority")?,
        node: node_fields(path, &mut map)?,
        kubelet_cgroups: field(path, &mut map, "kubeletCgroups")?,
        runtime_cgroups: field(path, &mut map, "runtimeCgroups")?,
        system_cgroups: field(path, &mut map, "systemCgroups")?,
        pod_logs_dir: nonzero_field(path, &mut map, "podLogsDir")?,
        // A string (`""` is kubelet's default) and a pointer (0 is 0, refused by the slice).
        container_log_max_size: nonzero_field(path, &mut map, "containerLogMaxSize")?,
        container_log_max_files: field(path, &mut map, "containerLogMaxFiles")?,
        serialize_image_pulls: field(path, &mut map, "serializeImagePulls")?,
        max_parallel_image_pulls: field(path, &mut map, "maxParallelImagePulls")?,
        image_gc_high_threshold_percent: field(path, &mut map, "imageGCHighThresholdPercent")?,
        image_gc_low_threshold_percent: field(path, &mut map, "imageGCLowThresholdPercent")?,
        image_minimum_gc_age: duration_field(path, &mut map, "imageMinimumGCAge")?,
        image_maximum_gc_age: pointer_duration_field(path, &mut map, "imageMaximumGCAge")?,

        enable_server: field(path, &mut map, "enableServer")?,
        enable_debugging_handlers: field(path, &mut map, "enableDebuggingHandlers")?,
        enable_system_log_handler: field(path, &mut map, "enableSystemLogHandler")?,
        enable_profiling_handler: field(path, &mut map, "enableProfilingHandler")?,
        enable_debug_flags_handler: field(path, &mut map, "enableDebugFlagsHandler")?,
        feature_gates: feature_gates::check(path, field(path, &mut map, "featureGates")?.unwrap_or_default())?,
        present: true,
    };
    for (key, value) in &backoff {
        kubelet_fields::check_crash_loop_back_off(path, key, value)?;
    }
    for (key, value) in &map {
        kubelet_fields::check(path, key, value)?;
    }
    Ok(settings)
}

/// The node-level keys (`maxPods`, `failSwapOn`, `enforceNodeAllocatable`, …).
fn node_fields(path: &Path, map: &mut Map) -> Result<super::node_settings::FileNode, ConfigError> {
    Ok(super::node_settings::FileNode {
        max_pods: field(path, map, "maxPods")?,
        pods_per_core: field(path, map, "podsPerCore")?,
        fail_swap_on: field(path, map, "failSwapOn")?,
        protect_kernel_defaults: field(path, map, "protectKernelDefaults")?,
        cpu_cfs_quota: field(path, map, "cpuCFSQuota")?,
        cpu_cfs_quota_period: duration_field(path, map, "cpuCFSQuotaPeriod")?,
        enforce_node_allocatable: field(path, map, "enforceNodeAllocatable")?,
        kube_reserved_cgroup: field(path, map, "kubeReservedCgroup")?,
        system_reserved_cgroup: field(path, map, "systemReservedCgroup")?,
    })
}

/// The file settings: `--config` (kubelet's `loadConfigFile`), then the `--config-dir`
/// drop-ins merged over it as kubelet's `mergeKubeletConfigurations` does
/// (`cmd/kubelet/app/server.go`): every `*.conf` file under the directory, walked in lexical
/// order (subdirectories too, as `filepath.WalkDir`), applied as a JSON merge patch (RFC 7386:
/// mappings merge key by key, anything else replaces, null removes what an earlier drop-in
/// set). Each file is checked on its own first, so an error names the file that has it.
pub(super) fn load(config: Option<&Path>, config_dir: Option<&Path>) -> Result<FileSettings, ConfigError> {
    let Some(dir) = config_dir else {
        return match config {
            Some(path) => settings(path, read_map(path, false)?),
            None => Ok(FileSettings::default()),
        };
    };
    let mut base = Value::Object(Default::default());
    if let Some(path) = config {
        let map = read_map(path, false)?;
        settings(path, map.clone())?;
        base = Value::Object(map.into_iter().collect());
    }
    // kubelet patches the drop-ins onto the JSON of its (already loaded) configuration and
    // unmarshals the result over it: a drop-in's null undoes an earlier drop-in's value, not
    // the `--config` file's. So the drop-ins are merged among themselves first.
    let mut drop_in = Value::Object(Default::default());
    for path in drop_ins(dir)? {
        let map = read_map(&path, true)?;
        settings(&path, map.clone())?;
        merge_patch(&mut drop_in, Value::Object(map.into_iter().collect()));
    }
    let mut merged = base;
    merge_patch(&mut merged, drop_in);
    let map: Map = match merged {
        Value::Object(map) => map.into_iter().collect(),
        _ => unreachable!("merging objects gives an object"),
    };
    let shown = config.map(Path::to_path_buf).unwrap_or_else(|| dir.to_path_buf());
    let mut settings = settings(&shown, map)?;
    settings.present = config.is_some();
    Ok(settings)
}

/// The `*.conf` files under `dir`, in `filepath.WalkDir`'s order: lexical, depth first.
pub(super) fn drop_ins(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let err = |e: std::io::Error| ConfigError::Invalid {
        setting: "--config-dir".into(),
        reason: format!(
            "failed to walk through kubelet dropin directory {:?}: {e}",
            dir.display().to_string()
        ),
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(err)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(err)?;
    entries.sort();
    let mut files = Vec::new();
    for path in entries {
        if path.is_dir() {
            files.extend(drop_ins(&path)?);
        } else if path.extension().is_some_and(|e| e == "conf") {
            files.push(path);
        }
    }
    Ok(files)
}

/// RFC 7386 JSON merge patch (what kubelet's drop-in merge applies, `jsonpatch.MergePatch`).
pub(super) fn merge_patch(target: &mut Value, patch: Value) {
    let Value::Object(patch) = patch else {
        *target = patch;
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Value::Object(target) = target else {
        unreachable!("made an object above")
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(&key);
        } else {
            merge_patch(target.entry(key).or_insert(Value::Null), value);
        }
    }
}
