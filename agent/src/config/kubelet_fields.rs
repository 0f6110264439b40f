//! Every field of KubeletConfiguration v1beta1 and what dockerlet does with it.
//!
//! The fields are those of `staging/src/k8s.io/kubelet/config/v1beta1/types.go`, their defaults
//! those of `pkg/kubelet/apis/config/v1beta1/defaults.go`. Each field is one of:
//! - [`Field::Honoured`]: parsed by [`super::file::settings`] and applied;
//! - [`Field::DefaultOnly`]: accepted when its value means kubelet's default (the zero value,
//!   which kubelet's defaulting replaces by the default, or the default itself), refused
//!   otherwise with `<field>: <value> is not supported by dockerlet (<why>)`;
//! - [`Field::NoEffect`]: any value accepted, because it changes nothing dockerlet does (why
//!   is said);
//! - [`Field::Nested`]: a mapping whose own fields follow these rules.
//!
//! A key that is no field is refused naming the key (and the nearest field's name).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::values::{is_zero, parse_duration};
use super::ConfigError;

/// What dockerlet does with a field.
#[derive(Debug, Clone, Copy)]
pub(super) enum Field {
    /// Parsed and applied (see `file.rs`).
    Honoured,
    /// Only these values (kubelet's default, and the zero value that means it); why others
    /// are refused.
    DefaultOnly(&'static [Is], &'static str),
    /// Any value: why it makes no difference.
    NoEffect(&'static str),
    /// A mapping of these fields.
    Nested(&'static [(&'static str, Field)]),
}

/// A value a [`Field::DefaultOnly`] accepts.
#[derive(Debug, Clone, Copy)]
pub(super) enum Is {
    /// null or absent, `""`, 0, `0s`: the zero value (for fields that are not pointers it
    /// means the default; for pointers only null does, so it is not listed for them).
    Zero,
    /// Null only.
    Null,
    /// This boolean.
    Bool(bool),
    /// This integer.
    Int(i64),
    /// This number.
    Float(f64),
    /// This string.
    Str(&'static str),
    /// A duration of this many milliseconds.
    Millis(u64),
    /// An empty mapping or list.
    Empty,
}

impl Is {
    fn matches(self, value: &Value) -> bool {
        match self {
            Is::Zero => {
                is_zero(value)
                    || matches!(value, Value::String(s) if parse_duration("", s).ok() == Some(Duration::ZERO))
            }
            Is::Null => value.is_null(),
            Is::Bool(b) => value.as_bool() == Some(b),
            Is::Int(i) => value.as_i64() == Some(i),
            Is::Float(f) => value.as_f64() == Some(f),
            Is::Str(s) => value.as_str() == Some(s),
            Is::Millis(ms) => value
                .as_str()
                .and_then(|s| parse_duration("", s).ok())
                .is_some_and(|d| d == Duration::from_millis(ms)),
            Is::Empty => match value {
                Value::Object(m) => m.is_empty(),
                Value::Array(a) => a.is_empty(),
                Value::Null => true,
                _ => false,
            },
        }
    }
}

use Field::{DefaultOnly, Honoured, Nested, NoEffect};
use Is::{Bool, Empty, Float, Int, Millis, Null, Str, Zero};

const NO_CSR: &str = "dockerlet does not request serving certificates through certificates.k8s.io; the kubelet API serves --tls-cert-file or a self-signed certificate";
const NO_CPU_MANAGER: &str = "dockerlet has no CPU, memory or topology manager; containers are not pinned";
const NO_LOG_ROTATION: &str = "Docker rotates each container's log as it writes it (containerLogMaxSize, containerLogMaxFiles); there is no rotation worker to tune";
const NO_VOLUME_PLUGINS: &str = "dockerlet has no volume plugins or attach/detach";

/// Every KubeletConfiguration v1beta1 field (`types.go`), in its order, with kubelet's
/// default as the accepted value of the ones dockerlet does not implement.
pub(super) const FIELDS: &[(&str, Field)] = &[
    ("enableServer", Honoured),
    ("staticPodPath", Honoured),
    ("podLogsDir", Honoured),
    ("syncFrequency", Honoured),
    ("fileCheckFrequency", Honoured),
    ("httpCheckFrequency", Honoured),
    ("staticPodURL", Honoured),
    ("staticPodURLHeader", Honoured),
    ("address", Honoured),
    ("port", Honoured),
    ("readOnlyPort", Honoured),
    ("tlsCertFile", Honoured),
    ("tlsPrivateKeyFile", Honoured),
    ("tlsCipherSuites", Honoured),
    (
        "tlsCurvePreferences",
        DefaultOnly(&[Empty], "rustls chooses the key exchange groups; they cannot be set"),
    ),
    ("tlsMinVersion", Honoured),
    ("rotateCertificates", Honoured),
    ("serverTLSBootstrap", DefaultOnly(&[Bool(false)], NO_CSR)),
    ("authentication", Honoured),
    ("authorization", Honoured),
    (
        "registryPullQPS",
        DefaultOnly(
            &[Null, Int(5), Int(0)],
            "dockerlet limits pulls only by serializeImagePulls and maxParallelImagePulls, not per second",
        ),
    ),
    (
        "registryBurst",
        DefaultOnly(
            &[Zero, Int(10)],
            "dockerlet limits pulls only by serializeImagePulls and maxParallelImagePulls, not per second",
        ),
    ),
    (
        "imagePullCredentialsVerificationPolicy",
        DefaultOnly(
            &[Zero],
            "dockerlet does not re-verify pull credentials of images already present",
        ),
    ),
    (
        "preloadedImagesVerificationAllowlist",
        DefaultOnly(
            &[Empty],
            "dockerlet does not re-verify pull credentials of images already present",
        ),
    ),
    ("eventRecordQPS", Honoured),
    ("eventBurst", Honoured),
    ("enableDebuggingHandlers", Honoured),
    (
        "enableContentionProfiling",
        DefaultOnly(&[Bool(false)], "dockerlet has no Go profiler"),
    ),
    ("healthzPort", Honoured),
    ("healthzBindAddress", Honoured),
    (
        "oomScoreAdj",
        DefaultOnly(&[Null, Int(-999)], "dockerlet does not set its own OOM score"),
    ),
    ("clusterDomain", Honoured),
    ("clusterDNS", Honoured),
    ("streamingConnectionIdleTimeout", Honoured),
    ("nodeStatusUpdateFrequency", Honoured),
    ("nodeStatusReportFrequency", Honoured),
    ("nodeLeaseDurationSeconds", Honoured),
    ("imageMinimumGCAge", Honoured),
    ("imageMaximumGCAge", Honoured),
    ("imageGCHighThresholdPercent", Honoured),
    ("imageGCLowThresholdPercent", Honoured),
    (
        "volumeStatsAggPeriod",
        DefaultOnly(
            &[Zero, Millis(60_000)],
            "dockerlet measures volumes on every statistics collection (--housekeeping-interval)",
        ),
    ),
    ("kubeletCgroups", Honoured),
    ("systemCgroups", Honoured),
    ("cgroupRoot", Honoured),
    ("cgroupsPerQOS", Honoured),
    ("cgroupDriver", Honoured),
    ("cpuManagerPolicy", DefaultOnly(&[Zero, Str("none")], NO_CPU_MANAGER)),
    ("singleProcessOOMKill", Honoured),
    ("cpuManagerPolicyOptions", DefaultOnly(&[Empty], NO_CPU_MANAGER)),
    (
        "cpuManagerReconcilePeriod",
        DefaultOnly(&[Zero, Millis(10_000)], NO_CPU_MANAGER),
    ),
    (
        "draManagerReconcilePeriod",
        DefaultOnly(&[Zero, Millis(60_000)], "dockerlet has no dynamic resource allocation"),
    ),
    ("memoryManagerPolicy", DefaultOnly(&[Zero, Str("None")], NO_CPU_MANAGER)),
    (
        "topologyManagerPolicy",
        DefaultOnly(&[Zero, Str("none")], NO_CPU_MANAGER),
    ),
    (
        "topologyManagerScope",
        DefaultOnly(&[Zero, Str("container")], NO_CPU_MANAGER),
    ),
    ("topologyManagerPolicyOptions", DefaultOnly(&[Empty], NO_CPU_MANAGER)),
    (
        "qosReserved",
        DefaultOnly(
            &[Empty],
            "dockerlet reserves no resources for Guaranteed pods in the QoS cgroups",
        ),
    ),
    (
        "runtimeRequestTimeout",
        DefaultOnly(
            &[Zero, Millis(120_000)],
            "dockerlet's Docker requests have their own timeouts; this one cannot be changed",
        ),
    ),
    (
        "hairpinMode",
        DefaultOnly(
            &[Zero, Str("promiscuous-bridge")],
            "Docker's bridge network handles hairpin traffic; dockerlet does not configure it",
        ),
    ),
    ("maxPods", Honoured),
    ("podCIDR", Honoured),
    ("podPidsLimit", Honoured),
    ("resolvConf", Honoured),
    ("runOnce", DefaultOnly(&[Bool(false)], "dockerlet has no run-once mode")),
    ("cpuCFSQuota", Honoured),
    ("cpuCFSQuotaPeriod", Honoured),
    ("nodeStatusMaxImages", Honoured),
    (
        "maxOpenFiles",
        DefaultOnly(
            &[Zero, Int(1_000_000)],
            "dockerlet does not raise its own open-file limit",
        ),
    ),
    (
        "contentType",
        DefaultOnly(
            &[
                Zero,
                Str("application/vnd.kubernetes.protobuf"),
                Str("application/json"),
            ],
            "dockerlet talks JSON to the API server; only its content type is chosen, not set",
        ),
    ),
    ("kubeAPIQPS", Honoured),
    ("kubeAPIBurst", Honoured),
    ("serializeImagePulls", Honoured),
    ("maxParallelImagePulls", Honoured),
    ("evictionHard", Honoured),
    ("evictionSoft", Honoured),
    ("evictionSoftGracePeriod", Honoured),
    ("evictionPressureTransitionPeriod", Honoured),
    ("evictionMaxPodGracePeriod", Honoured),
    ("evictionMinimumReclaim", Honoured),
    (
        "mergeDefaultEvictionSettings",
        DefaultOnly(
            &[Null, Bool(false)],
            "evictionHard replaces the defaults, as kubelet's default",
        ),
    ),
    ("podsPerCore", Honoured),
    (
        "enableControllerAttachDetach",
        DefaultOnly(&[Null, Bool(true)], NO_VOLUME_PLUGINS),
    ),
    ("protectKernelDefaults", Honoured),
    (
        "makeIPTablesUtilChains",
        DefaultOnly(
            &[Null, Bool(true), Bool(false)],
            "dockerlet makes no iptables chains; the KUBE-IPTABLES-HINT chain is only a hint to other components",
        ),
    ),
    (
        "iptablesMasqueradeBit",
        NoEffect("no longer has any effect in kubelet either (deprecated)"),
    ),
    (
        "iptablesDropBit",
        NoEffect("no longer has any effect in kubelet either (deprecated)"),
    ),
    ("featureGates", Honoured),
    ("failSwapOn", Honoured),
    (
        "memorySwap",
        Nested(&[(
            "swapBehavior",
            DefaultOnly(&[Zero, Str("NoSwap")], "containers get no swap (kubelet's NoSwap)"),
        )]),
    ),
    ("containerLogMaxSize", Honoured),
    ("containerLogMaxFiles", Honoured),
    ("containerLogMaxWorkers", DefaultOnly(&[Null, Int(1)], NO_LOG_ROTATION)),
    (
        "containerLogMonitorInterval",
        DefaultOnly(&[Null, Millis(10_000)], NO_LOG_ROTATION),
    ),
    (
        "configMapAndSecretChangeDetectionStrategy",
        DefaultOnly(
            &[Zero, Str("Watch")],
            "dockerlet watches the ConfigMaps and Secrets its pods use (kubelet's Watch)",
        ),
    ),
    ("systemReserved", Honoured),
    ("kubeReserved", Honoured),
    ("reservedSystemCPUs", DefaultOnly(&[Zero], NO_CPU_MANAGER)),
    (
        "showHiddenMetricsForVersion",
        DefaultOnly(&[Zero], "dockerlet has no hidden metrics to show"),
    ),
    ("systemReservedCgroup", Honoured),
    ("kubeReservedCgroup", Honoured),
    ("enforceNodeAllocatable", Honoured),
    ("allowedUnsafeSysctls", Honoured),
    (
        "volumePluginDir",
        DefaultOnly(
            &[Zero, Str("/usr/libexec/kubernetes/kubelet-plugins/volume/exec/")],
            NO_VOLUME_PLUGINS,
        ),
    ),
    (
        "providerID",
        DefaultOnly(&[Zero], "dockerlet does not set the Node's spec.providerID"),
    ),
    ("kernelMemcgNotification", Honoured),
    ("logging", Nested(LOGGING)),
    ("enableSystemLogHandler", Honoured),
    (
        "enableSystemLogQuery",
        DefaultOnly(&[Null, Bool(false)], "dockerlet serves no node logs (/logs/)"),
    ),
    ("shutdownGracePeriod", Honoured),
    ("shutdownGracePeriodCriticalPods", Honoured),
    ("shutdownGracePeriodByPodPriority", Honoured),
    ("crashLoopBackOff", Honoured),
    ("reservedMemory", DefaultOnly(&[Empty], NO_CPU_MANAGER)),
    ("enableProfilingHandler", Honoured),
    ("enableDebugFlagsHandler", Honoured),
    ("seccompDefault", Honoured),
    (
        "memoryThrottlingFactor",
        DefaultOnly(&[Null, Float(0.9)], "dockerlet sets no memory.high (MemoryQoS)"),
    ),
    (
        "memoryReservationPolicy",
        DefaultOnly(
            &[Zero, Str("None")],
            "dockerlet sets no memory.min or memory.low (MemoryQoS)",
        ),
    ),
    ("registerWithTaints", Honoured),
    ("registerNode", Honoured),
    (
        "tracing",
        DefaultOnly(&[Null], "dockerlet exports no OpenTelemetry traces"),
    ),
    (
        "localStorageCapacityIsolation",
        DefaultOnly(
            &[Null, Bool(true)],
            "ephemeral-storage requests, limits and emptyDir sizeLimit are enforced",
        ),
    ),
    ("containerRuntimeEndpoint", Honoured),
    (
        "imageServiceEndpoint",
        DefaultOnly(&[Zero], "Docker serves images at containerRuntimeEndpoint"),
    ),
    (
        "failCgroupV1",
        DefaultOnly(
            &[Null, Bool(false)],
            "dockerlet runs on cgroup v1 and does not refuse it",
        ),
    ),
    (
        "userNamespaces",
        Nested(&[(
            "idsPerPod",
            DefaultOnly(&[Null, Int(65536)], "dockerlet runs no pods in user namespaces"),
        )]),
    ),
    (
        "podHousekeepingPeriod",
        DefaultOnly(
            &[Null, Millis(2_000)],
            "dockerlet's pod housekeeping runs on its own period",
        ),
    ),
    // dockerlet's own settings, kept from before this table (no kubelet field).
    ("podInfraContainerImage", Honoured),
    ("debugAddress", Honoured),
    ("runtimeCgroups", Honoured),
];

/// `logging` (component-base's LoggingConfiguration): text on stderr, `--v` for verbosity.
const LOGGING: &[(&str, Field)] = &[
    ("format", DefaultOnly(&[Zero, Str("text")], "dockerlet logs text")),
    ("flushFrequency", NoEffect("dockerlet writes log lines as they come")),
    (
        "verbosity",
        DefaultOnly(&[Zero], "dockerlet's verbosity is the --v flag"),
    ),
    ("vmodule", DefaultOnly(&[Empty], "dockerlet has no per-file verbosity")),
    (
        "options",
        Nested(&[("json", Nested(LOG_STREAM)), ("text", Nested(LOG_STREAM))]),
    ),
];

/// `logging.options.json` and `.text`: buffering of info lines, no effect on what is logged.
const LOG_STREAM: &[(&str, Field)] = &[
    (
        "splitStream",
        DefaultOnly(&[Null, Bool(false)], "dockerlet writes every line to stderr"),
    ),
    ("infoBufferSize", NoEffect("buffering, not content")),
];

/// `crashLoopBackOff` (KubeletCrashLoopBackOffMax): both periods are parsed in `file.rs`.
const CRASH_LOOP_BACK_OFF: &[&str] = &["maxContainerRestartPeriod", "initialContainerRestartPeriod"];

/// Checks a key the file parser did not take: a field dockerlet does not implement is
/// accepted at its default only; a key that is no field is refused with the nearest name.
pub(super) fn check(path: &Path, key: &str, value: &Value) -> Result<(), ConfigError> {
    check_in(path, key, key, value, FIELDS)
}

/// Checks a key under `crashLoopBackOff` that the parser did not take: none is known.
pub(super) fn check_crash_loop_back_off(path: &Path, key: &str, _value: &Value) -> Result<(), ConfigError> {
    Err(unknown(
        path,
        &format!("crashLoopBackOff.{key}"),
        key,
        CRASH_LOOP_BACK_OFF.iter().copied(),
    ))
}

fn check_in(
    path: &Path,
    shown: &str,
    key: &str,
    value: &Value,
    table: &'static [(&'static str, Field)],
) -> Result<(), ConfigError> {
    let Some((_, rule)) = table.iter().find(|(name, _)| *name == key) else {
        return Err(unknown(path, shown, key, table.iter().map(|(name, _)| *name)));
    };
    let refuse = |why: &str| ConfigError::File {
        path: path.display().to_string(),
        reason: format!("{shown}: {value} is not supported by dockerlet ({why})"),
    };
    match rule {
        // Every honoured field is taken by the parser first; one left over has no parser
        // line, and is refused rather than ignored.
        Honoured => Err(refuse("dockerlet lists it as honoured but does not parse it; a bug")),
        NoEffect(why) => {
            tracing::debug!(file = %path.display(), field = shown, why, "accepted; no effect in dockerlet");
            Ok(())
        }
        DefaultOnly(accepted, why) => match accepted.iter().any(|is| is.matches(value)) {
            true => Ok(()),
            false => Err(refuse(why)),
        },
        Nested(fields) => match value {
            Value::Null => Ok(()),
            Value::Object(map) => map
                .iter()
                .try_for_each(|(k, v)| check_in(path, &format!("{shown}.{k}"), k, v, fields)),
            _ => Err(ConfigError::File {
                path: path.display().to_string(),
                reason: format!("{shown}: expected a mapping, got {value}"),
            }),
        },
    }
}

/// The refusal of a key that is no field, with the nearest field's name when one is close.
pub(super) fn unknown<'a>(path: &Path, shown: &str, key: &str, known: impl Iterator<Item = &'a str>) -> ConfigError {
    let nearest = known
        .map(|name| (strsim::jaro_winkler(&key.to_lowercase(), &name.to_lowercase()), name))
        .filter(|(score, _)| *score > 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let hint = match nearest {
        Some((_, name)) => format!("; did you mean {name:?}?"),
        None => String::new(),
    };
    ConfigError::File {
        path: path.display().to_string(),
        reason: format!("{shown}: unknown field, not a KubeletConfiguration v1beta1 setting{hint}"),
    }
}

/// The top-level fields marked honoured.
#[cfg(test)]
pub(super) fn honoured() -> impl Iterator<Item = &'static str> {
    FIELDS
        .iter()
        .filter(|(_, rule)| matches!(rule, Honoured))
        .map(|(name, _)| *name)
}

/// The README's table: every field (nested ones dotted) and what dockerlet does with it.
#[cfg(test)]
pub(super) fn markdown_table() -> String {
    fn value(is: &Is) -> String {
        match is {
            Zero => "zero".into(),
            Null => "unset".into(),
            Bool(b) => format!("`{b}`"),
            Int(i) => format!("`{i}`"),
            Float(f) => format!("`{f}`"),
            Str(s) => format!("`{s}`"),
            Millis(ms) => format!("`{}`", humantime::format_duration(Duration::from_millis(*ms))),
            Empty => "empty".into(),
        }
    }
    fn rows(prefix: &str, table: &[(&str, Field)], out: &mut String) {
        for (name, rule) in table {
            let name = format!("{prefix}{name}");
            let what = match rule {
                Honoured => "honoured".to_string(),
                NoEffect(why) => format!("any value: {why}"),
                DefaultOnly(values, why) => format!(
                    "{} only; else refused: {why}",
                    values.iter().map(value).collect::<Vec<_>>().join(", ")
                ),
                Nested(fields) => {
                    rows(&format!("{name}."), fields, out);
                    continue;
                }
            };
            out.push_str(&format!("| `{name}` | {what} |\n"));
        }
    }
    let mut out = String::from("| Field | dockerlet |\n|---|---|\n");
    rows("", FIELDS, &mut out);
    out
}
