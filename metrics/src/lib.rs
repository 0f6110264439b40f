//! The agent's Prometheus metrics, with kubelet's names, types, labels and buckets
//! (`pkg/kubelet/metrics`, `pkg/kubelet/prober`): one [`Metrics`] handle, made at start and
//! shared (`Arc`) by the actors, the runtime adapter and the HTTP servers.
//!
//! Two registries, as kubelet has: the main one (`/metrics`) and the prober's
//! (`/metrics/probes`). Updates are atomic operations on metric handles; the label sets of the
//! hot paths are `Copy` enums, so an update allocates nothing. The per-pod probe series are
//! fetched once per probe ([`Metrics::probe_series`]) and kept by the prober.
//!
//! A crate of its own, beside `dockerlet-messages` at the bottom of the layers: the data crate,
//! and with it `pod`, `host` and `kube`, compile without prometheus-client; only the runtime
//! adapter (`runtime::measured`), the actors, the HTTP servers and the agent depend on it.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// Prometheus' default buckets (`prometheus.DefBuckets`), which kubelet uses for most latencies.
pub const DEFAULT_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// kubelet's buckets for `kubelet_pod_start_duration_seconds` (0.5 s … 1 h).
pub const POD_START_BUCKETS: [f64; 25] = [
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0, 300.0, 360.0, 480.0,
    600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// A pod worker's operation (`kubelet_pod_worker_duration_seconds{operation}`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types, missing_docs)]
pub enum WorkerOperation {
    sync,
    create,
    update,
    kill,
}

/// `{operation}`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabel {
    /// What the worker did.
    pub operation: WorkerOperation,
}

/// A container runtime call, named as kubelet names its CRI calls
/// (`kubelet_runtime_operations_*{operation_type}`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types, missing_docs)]
pub enum RuntimeOperation {
    version,
    list_containers,
    container_status,
    create_container,
    start_container,
    stop_container,
    remove_container,
    exec_sync,
    image_status,
    pull_image,
    list_images,
    remove_image,
}

/// `{operation_type}`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationTypeLabel {
    /// The runtime call.
    pub operation_type: RuntimeOperation,
}

/// A pod network operation, named as kubelet's dockershim network plugin manager named them
/// (cri-dockerd's `network/plugins.go` `recordOperation`; `kubelet_network_plugin_operations_*`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types, missing_docs)]
pub enum NetworkOperation {
    set_up_pod,
    tear_down_pod,
}

/// `{operation_type}` of a network plugin operation.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NetworkOperationLabel {
    /// The operation.
    pub operation_type: NetworkOperation,
}

/// `kubelet_running_containers{container_state}` (kubelet's CRI states, lower case).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types, missing_docs)]
pub enum ContainerStateValue {
    created,
    running,
    exited,
    unknown,
}

/// `kubelet_image_garbage_collected_total{reason}`: why image GC removed an image.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types, missing_docs)]
pub enum ImageGcReason {
    age,
    space,
}

/// `{reason}`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ImageGcReasonLabel {
    /// Why the image was removed.
    pub reason: ImageGcReason,
}

/// `{container_state}`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ContainerStateLabel {
    /// The containers' state.
    pub container_state: ContainerStateValue,
}

/// `kubelet_started_containers_total{container_type}`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types, missing_docs)]
pub enum ContainerType {
    container,
    init_container,
    ephemeral_container,
    podsandbox,
}

/// `{container_type}`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ContainerTypeLabel {
    /// What kind of container started.
    pub container_type: ContainerType,
}

/// Counters kubelet names without the `_total` suffix the text encoder appends to every
/// counter: clients query them by kubelet's name. [`kubelet_names`] takes the suffix off again.
pub const UNSUFFIXED_COUNTERS: &[&str] = &[
    "kubelet_evictions",
    "kubelet_certificate_manager_client_expiration_renew_errors",
];

/// The text exposition with kubelet's names: [`UNSUFFIXED_COUNTERS`] lose the `_total` the
/// encoder gave them (the 0.0.4 text format allows a counter without it; the type stays
/// `counter`).
pub fn kubelet_names(text: &mut String) {
    for name in UNSUFFIXED_COUNTERS {
        let suffixed = format!("{name}_total");
        if text.contains(&suffixed) {
            *text = text.replace(&suffixed, name);
        }
    }
}

/// `kubelet_evictions{eviction_signal}` and `kubelet_eviction_stats_age_seconds{eviction_signal}`:
/// the signal an eviction was for (`memory.available`, …).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvictionSignalLabel {
    /// kubelet's signal name.
    pub eviction_signal: &'static str,
}

/// `kubelet_restarted_pods_total{static}`: kubelet counts pods restarted under the same UID,
/// which only static pods are.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StaticLabel {
    /// `"true"` for static pods.
    pub r#static: &'static str,
}

/// `kubelet_http_requests_*{method,path,server_type,long_running}`. `path` is the route's
/// first segment (kubelet: `pods`, `metrics`, `healthz`, …), never the full URL.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// GET, POST, … (`other` for the rest).
    pub method: &'static str,
    /// The route's first path segment, from a fixed set (`other` for the rest).
    pub path: &'static str,
    /// `readonly` (the read-only port) or `readwrite` (10250).
    pub server_type: &'static str,
    /// `"true"` for streaming requests (logs follow, exec, attach, port-forward).
    pub long_running: &'static str,
}

/// `prober_probe_total{probe_type,result,container,pod,namespace,pod_uid}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeTotalLabels {
    /// `Liveness`, `Readiness` or `Startup`.
    pub probe_type: &'static str,
    /// `successful`, `failed` or `unknown`.
    pub result: &'static str,
    /// Container name.
    pub container: String,
    /// Pod name.
    pub pod: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod UID.
    pub pod_uid: String,
}

/// `prober_probe_duration_seconds{probe_type,container,pod,namespace}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeDurationLabels {
    /// `Liveness`, `Readiness` or `Startup`.
    pub probe_type: &'static str,
    /// Container name.
    pub container: String,
    /// Pod name.
    pub pod: String,
    /// Pod namespace.
    pub namespace: String,
}

/// `kubelet_node_name{node}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabel {
    /// The node's name.
    pub node: String,
}

/// `kubernetes_build_info{…}`, as component-base sets it (Go fields answered for Rust).
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildInfo {
    /// Build date (empty when unknown).
    pub build_date: String,
    /// Compiler (`rustc`).
    pub compiler: String,
    /// Git commit (empty when unknown).
    pub git_commit: String,
    /// `clean`, `dirty` or empty.
    pub git_tree_state: String,
    /// The agent's version, `v0.1.0`.
    pub git_version: String,
    /// Go version: here the Rust toolchain's, when known.
    pub go_version: String,
    /// Major version.
    pub major: String,
    /// Minor version.
    pub minor: String,
    /// `linux/amd64`.
    pub platform: String,
}

/// A probe's outcome as `prober_probe_total` labels it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The probe succeeded.
    Successful,
    /// The probe failed.
    Failed,
    /// The probe could not run (error, container not ready).
    Unknown,
}

/// One probe's series, fetched once and kept by the prober: updating them allocates nothing.
#[derive(Clone, Debug)]
pub struct ProbeSeries {
    labels: ProbeDurationLabels,
    pod_uid: String,
    successful: Counter,
    failed: Counter,
    unknown: Counter,
    duration: Histogram,
}

impl ProbeSeries {
    /// Count one run of the probe and how long it took.
    pub fn observe(&self, outcome: ProbeOutcome, seconds: f64) {
        match outcome {
            ProbeOutcome::Successful => self.successful.inc(),
            ProbeOutcome::Failed => self.failed.inc(),
            ProbeOutcome::Unknown => self.unknown.inc(),
        };
        self.duration.observe(seconds);
    }
}

fn runtime_histogram() -> Histogram {
    // kubelet: ExponentialBuckets(.005, 2.5, 14).
    Histogram::new(exponential_buckets(0.005, 2.5, 14))
}

fn default_histogram() -> Histogram {
    Histogram::new(DEFAULT_BUCKETS)
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric the agent exports, and the two registries they are encoded from.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    probes: Registry,
    /// `kubelet_running_pods`: pods with a running sandbox.
    pub running_pods: Gauge,
    /// `kubelet_running_containers{container_state}`.
    pub running_containers: Family<ContainerStateLabel, Gauge>,
    /// `kubelet_pod_start_duration_seconds`: from the worker first seeing the pod to it running.
    pub pod_start_duration: Histogram,
    /// `kubelet_pod_worker_duration_seconds{operation}`.
    pub pod_worker_duration: HistogramFamily<OperationLabel>,
    /// `kubelet_pleg_relist_duration_seconds`.
    pub pleg_relist_duration: Histogram,
    /// `kubelet_pleg_relist_interval_seconds`.
    pub pleg_relist_interval: Histogram,
    /// `kubelet_pleg_last_seen_seconds`: Unix time of the last relist.
    pub pleg_last_seen: Gauge<f64, AtomicU64>,
    /// `kubelet_runtime_operations_total{operation_type}`.
    pub runtime_operations: Family<OperationTypeLabel, Counter>,
    /// `kubelet_runtime_operations_errors_total{operation_type}`.
    pub runtime_operations_errors: Family<OperationTypeLabel, Counter>,
    /// `kubelet_runtime_operations_duration_seconds{operation_type}`.
    pub runtime_operations_duration: HistogramFamily<OperationTypeLabel>,
    /// `kubelet_network_plugin_operations_total{operation_type}` (CNI only).
    pub network_plugin_operations: Family<NetworkOperationLabel, Counter>,
    /// `kubelet_network_plugin_operations_errors_total{operation_type}`.
    pub network_plugin_operations_errors: Family<NetworkOperationLabel, Counter>,
    /// `kubelet_network_plugin_operations_duration_seconds{operation_type}`.
    pub network_plugin_operations_duration: HistogramFamily<NetworkOperationLabel>,
    /// `kubelet_http_requests_total{method,path,server_type,long_running}`.
    pub http_requests: Family<HttpLabels, Counter>,
    /// `kubelet_http_requests_duration_seconds{method,path,server_type,long_running}`.
    pub http_requests_duration: HistogramFamily<HttpLabels>,
    /// `kubelet_http_inflight_requests{method,path,server_type,long_running}`.
    pub http_inflight_requests: Family<HttpLabels, Gauge>,
    /// `kubelet_started_pods_total`.
    pub started_pods: Counter,
    /// `kubelet_started_pods_errors_total`.
    pub started_pods_errors: Counter,
    /// `kubelet_started_containers_total{container_type}`.
    pub started_containers: Family<ContainerTypeLabel, Counter>,
    /// `kubelet_started_containers_errors_total{container_type}` (kubelet adds `code`; the
    /// agent's errors have no CRI code).
    pub started_containers_errors: Family<ContainerTypeLabel, Counter>,
    /// `kubelet_restarted_pods_total{static}`.
    pub restarted_pods: Family<StaticLabel, Counter>,
    /// `kubelet_evictions{eviction_signal}`: pods evicted, by signal.
    pub evictions: Family<EvictionSignalLabel, Counter>,
    /// `kubelet_eviction_stats_age_seconds{eviction_signal}`: how old the stats an eviction
    /// ranked pods by were.
    pub eviction_stats_age: HistogramFamily<EvictionSignalLabel>,
    /// `kubelet_lifecycle_handler_http_fallbacks_total`: HTTPS hooks answered in plain HTTP
    /// that passed when retried with HTTP.
    pub lifecycle_http_fallbacks: Counter,
    /// `prober_probe_total`.
    pub probe_total: Family<ProbeTotalLabels, Counter>,
    /// `prober_probe_duration_seconds`.
    pub probe_duration: HistogramFamily<ProbeDurationLabels>,
    /// `dockerlet_stats_collection_cpu_seconds_total`: the CPU time the stats collector's
    /// housekeeping took (its own thread's, so the agent's other work is not counted).
    pub stats_collection_cpu: Counter<f64, AtomicU64>,
    /// `dockerlet_stats_collection_duration_seconds`: one housekeeping, wall clock.
    pub stats_collection_duration: Histogram,
    /// `kubelet_image_garbage_collected_total{reason}`: images removed by image GC.
    pub image_garbage_collected: Family<ImageGcReasonLabel, Counter>,
    /// `kubelet_certificate_manager_client_ttl_seconds`: seconds until the client certificate
    /// expires, at each scrape.
    pub client_certificate_ttl: CertificateTtl,
    /// `kubelet_certificate_manager_client_expiration_renew_errors`: failed renewals.
    pub client_certificate_renew_errors: Counter,
    /// `kubelet_graceful_shutdown_start_time_seconds`: when the last graceful shutdown began.
    pub graceful_shutdown_start_time: Gauge<f64, AtomicU64>,
    /// `kubelet_graceful_shutdown_end_time_seconds`: when it ended (0 while it runs).
    pub graceful_shutdown_end_time: Gauge<f64, AtomicU64>,
}

/// `kubelet_certificate_manager_client_ttl_seconds` (`pkg/kubelet/certificate/kubelet.go`, a
/// gauge function): the client certificate's `notAfter` is kept, the seconds left are computed
/// at each scrape; `+Inf` while there is no certificate (rotation off, or none yet).
#[derive(Debug, Clone, Default)]
pub struct CertificateTtl(std::sync::Arc<AtomicU64>);

impl CertificateTtl {
    /// The certificate in use expires at `not_after` (seconds since the epoch).
    pub fn set_not_after(&self, not_after: u64) {
        self.0.store(not_after, std::sync::atomic::Ordering::Relaxed);
    }

    /// Seconds left at `now` (seconds since the epoch), negative once expired.
    pub fn seconds_left(&self, now: f64) -> f64 {
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            0 => f64::INFINITY,
            at => at as f64 - now,
        }
    }
}

impl prometheus_client::encoding::EncodeMetric for CertificateTtl {
    fn encode(&self, mut encoder: prometheus_client::encoding::MetricEncoder) -> Result<(), std::fmt::Error> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        encoder.encode_gauge(&self.seconds_left(now))
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Gauge
    }
}

/// The registry behind `/metrics` with the node's constant series: its name and build.
fn node_registry(node: &str, build: BuildInfo) -> Registry {
    let mut registry = Registry::default();
    let node_name = Family::<NodeLabel, Gauge>::default();
    node_name.get_or_create(&NodeLabel { node: node.to_string() }).set(1);
    registry.register("kubelet_node_name", "The node's name. The count is always 1", node_name);
    let build_info = Family::<BuildInfo, Gauge>::default();
    build_info.get_or_create(&build).set(1);
    registry.register(
        "kubernetes_build_info",
        "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree \
         state, build date, Go version, and compiler from which Kubernetes was built, and platform on \
         which it is running",
        build_info,
    );
    registry
}

impl Default for Metrics {
    /// Metrics of an unnamed node (tests).
    fn default() -> Self {
        Metrics::new("", BuildInfo::default())
    }
}

impl Metrics {
    /// The metrics of node `node`, built as `build` says.
    pub fn new(node: &str, build: BuildInfo) -> Self {
        let metrics = Metrics::unregistered();
        let mut registry = node_registry(node, build);
        metrics.register_pod_metrics(&mut registry);
        metrics.register_request_metrics(&mut registry);
        let probes = metrics.build_probe_registry();
        Metrics {
            registry,
            probes,
            ..metrics
        }
    }

    /// Every metric at zero, none registered yet.
    fn unregistered() -> Self {
        Metrics {
            running_pods: Gauge::default(),
            running_containers: Family::default(),
            pod_start_duration: Histogram::new(POD_START_BUCKETS),
            pod_worker_duration: Family::new_with_constructor(default_histogram),
            pleg_relist_duration: default_histogram(),
            pleg_relist_interval: default_histogram(),
            pleg_last_seen: Gauge::default(),
            runtime_operations: Family::default(),
            runtime_operations_errors: Family::default(),
            runtime_operations_duration: Family::new_with_constructor(runtime_histogram),
            network_plugin_operations: Family::default(),
            network_plugin_operations_errors: Family::default(),
            network_plugin_operations_duration: Family::new_with_constructor(default_histogram),
            http_requests: Family::default(),
            http_requests_duration: Family::new_with_constructor(default_histogram),
            http_inflight_requests: Family::default(),
            started_pods: Counter::default(),
            started_pods_errors: Counter::default(),
            started_containers: Family::default(),
            started_containers_errors: Family::default(),
            restarted_pods: Family::default(),
            evictions: Family::default(),
            eviction_stats_age: Family::new_with_constructor(default_histogram),
            lifecycle_http_fallbacks: Counter::default(),
            probe_total: Family::default(),
            probe_duration: Family::new_with_constructor(default_histogram),
            stats_collection_cpu: Counter::default(),
            stats_collection_duration: default_histogram(),
            image_garbage_collected: Family::default(),
            client_certificate_ttl: CertificateTtl::default(),
            client_certificate_renew_errors: Counter::default(),
            graceful_shutdown_start_time: Gauge::default(),
            graceful_shutdown_end_time: Gauge::default(),
            registry: Registry::default(),
            probes: Registry::default(),
        }
    }

    /// The client certificate manager's metrics, registered (as kubelet registers them) only
    /// when the certificate rotates: `kubelet_certificate_manager_client_ttl_seconds` and
    /// `kubelet_certificate_manager_client_expiration_renew_errors` — a counter kubelet names
    /// without `_total`, which `promtool check metrics` flags on kubelet's `/metrics` as on ours.
    pub fn register_client_certificate_metrics(&mut self) {
        self.registry.register(
            "kubelet_certificate_manager_client_ttl_seconds",
            "Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until \
             certificate expiry (negative if already expired). If client certificate is invalid or unused, the value \
             will be +INF.",
            self.client_certificate_ttl.clone(),
        );
        self.registry.register(
            "kubelet_certificate_manager_client_expiration_renew_errors",
            "Counter of certificate renewal errors.",
            self.client_certificate_renew_errors.clone(),
        );
    }

    /// Register the pod, PLEG and runtime metrics in `r` (their order is the scrape's).
    fn register_pod_metrics(&self, r: &mut Registry) {
        r.register(
            "kubelet_running_pods",
            "Number of pods that have a running pod sandbox",
            self.running_pods.clone(),
        );
        r.register(
            "kubelet_running_containers",
            "Number of containers currently running",
            self.running_containers.clone(),
        );
        r.register(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
            self.pod_start_duration.clone(),
        );
        r.register(
            "kubelet_pod_worker_duration_seconds",
            "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
            self.pod_worker_duration.clone(),
        );
        r.register(
            "kubelet_pleg_relist_duration_seconds",
            "Duration in seconds for relisting pods in PLEG",
            self.pleg_relist_duration.clone(),
        );
        r.register(
            "kubelet_pleg_relist_interval_seconds",
            "Interval in seconds between relisting in PLEG",
            self.pleg_relist_interval.clone(),
        );
        r.register(
            "kubelet_pleg_last_seen_seconds",
            "Timestamp in seconds when PLEG was last seen active",
            self.pleg_last_seen.clone(),
        );
        r.register(
            "kubelet_runtime_operations",
            "Cumulative number of runtime operations by operation type",
            self.runtime_operations.clone(),
        );
        r.register(
            "kubelet_runtime_operations_errors",
            "Cumulative number of runtime operation errors by operation type",
            self.runtime_operations_errors.clone(),
        );
        r.register(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations. Broken down by operation type",
            self.runtime_operations_duration.clone(),
        );
        // dockershim's network plugin metrics, kept by cri-dockerd (`network/metrics`).
        r.register(
            "kubelet_network_plugin_operations",
            "Cumulative number of network plugin operations by operation type.",
            self.network_plugin_operations.clone(),
        );
        r.register(
            "kubelet_network_plugin_operations_errors",
            "Cumulative number of network plugin operation errors by operation type.",
            self.network_plugin_operations_errors.clone(),
        );
        r.register(
            "kubelet_network_plugin_operations_duration_seconds",
            "Latency in seconds of network plugin operations. Broken down by operation type.",
            self.network_plugin_operations_duration.clone(),
        );
        // kubelet's `ImageGarbageCollectedTotal` (`pkg/kubelet/metrics/metrics.go`).
        r.register(
            "kubelet_image_garbage_collected",
            "Total number of images garbage collected by the kubelet, whether through disk usage or image age.",
            self.image_garbage_collected.clone(),
        );
    }

    /// Register the HTTP server, start and stats collector metrics in `r`.
    fn register_request_metrics(&self, r: &mut Registry) {
        r.register(
            "kubelet_http_requests",
            "Number of the http requests received since the server started",
            self.http_requests.clone(),
        );
        r.register(
            "kubelet_http_requests_duration_seconds",
            "Duration in seconds to serve http requests",
            self.http_requests_duration.clone(),
        );
        r.register(
            "kubelet_http_inflight_requests",
            "Number of the inflight http requests",
            self.http_inflight_requests.clone(),
        );
        r.register(
            "kubelet_started_pods",
            "Cumulative number of pods started",
            self.started_pods.clone(),
        );
        r.register(
            "kubelet_started_pods_errors",
            "Cumulative number of errors when starting pods",
            self.started_pods_errors.clone(),
        );
        r.register(
            "kubelet_started_containers",
            "Cumulative number of containers started",
            self.started_containers.clone(),
        );
        r.register(
            "kubelet_started_containers_errors",
            "Cumulative number of errors when starting containers",
            self.started_containers_errors.clone(),
        );
        r.register(
            "kubelet_restarted_pods",
            "Number of pods that have been restarted because they were deleted and recreated with the same UID \
             while the kubelet was watching them (common for static pods, extremely uncommon for API pods)",
            self.restarted_pods.clone(),
        );
        r.register(
            "kubelet_evictions",
            "Cumulative number of pod evictions by eviction signal",
            self.evictions.clone(),
        );
        r.register(
            "kubelet_eviction_stats_age_seconds",
            "Time between when stats are collected, and when pod is evicted based on those stats by eviction signal",
            self.eviction_stats_age.clone(),
        );
        r.register(
            "kubelet_graceful_shutdown_start_time_seconds",
            "Last graceful shutdown start time since unix epoch in seconds",
            self.graceful_shutdown_start_time.clone(),
        );
        r.register(
            "kubelet_graceful_shutdown_end_time_seconds",
            "Last graceful shutdown end time since unix epoch in seconds",
            self.graceful_shutdown_end_time.clone(),
        );
        r.register(
            "kubelet_lifecycle_handler_http_fallbacks",
            "The number of times lifecycle handlers successfully fell back to http from https.",
            self.lifecycle_http_fallbacks.clone(),
        );
        r.register(
            "dockerlet_stats_collection_cpu_seconds",
            "CPU time the stats collector's housekeeping used (its thread's own), in seconds",
            self.stats_collection_cpu.clone(),
        );
        r.register(
            "dockerlet_stats_collection_duration_seconds",
            "Duration in seconds of one stats housekeeping",
            self.stats_collection_duration.clone(),
        );
    }

    /// The registry behind `/metrics/probes`.
    fn build_probe_registry(&self) -> Registry {
        let mut probes = Registry::default();
        probes.register(
            "prober_probe",
            "Cumulative number of a liveness, readiness or startup probe for a container by result",
            self.probe_total.clone(),
        );
        probes.register(
            "prober_probe_duration_seconds",
            "Duration in seconds for a probe response",
            self.probe_duration.clone(),
        );
        probes
    }

    /// Add a collector run at each scrape of `/metrics` (process metrics). Before sharing.
    pub fn register_collector(&mut self, collector: Box<dyn prometheus_client::collector::Collector>) {
        self.registry.register_collector(collector);
    }

    /// The registry behind `/metrics`.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The registry behind `/metrics/probes`.
    pub fn probe_registry(&self) -> &Registry {
        &self.probes
    }

    /// Count one runtime call of `operation` that took `seconds` and failed or not.
    pub fn runtime_call(&self, operation: RuntimeOperation, seconds: f64, failed: bool) {
        let label = OperationTypeLabel {
            operation_type: operation,
        };
        self.runtime_operations.get_or_create(&label).inc();
        self.runtime_operations_duration.get_or_create(&label).observe(seconds);
        if failed {
            self.runtime_operations_errors.get_or_create(&label).inc();
        }
    }

    /// A pod network `operation` took `seconds` and failed or not.
    pub fn network_operation(&self, operation: NetworkOperation, seconds: f64, failed: bool) {
        let label = NetworkOperationLabel {
            operation_type: operation,
        };
        self.network_plugin_operations.get_or_create(&label).inc();
        self.network_plugin_operations_duration
            .get_or_create(&label)
            .observe(seconds);
        if failed {
            self.network_plugin_operations_errors.get_or_create(&label).inc();
        }
    }

    /// A pod worker's `operation` took `seconds`.
    pub fn worker_operation(&self, operation: WorkerOperation, seconds: f64) {
        self.pod_worker_duration
            .get_or_create(&OperationLabel { operation })
            .observe(seconds);
    }

    /// A container of `container_type` was started (or failed to).
    pub fn container_started(&self, container_type: ContainerType, ok: bool) {
        let label = ContainerTypeLabel { container_type };
        self.started_containers.get_or_create(&label).inc();
        if !ok {
            self.started_containers_errors.get_or_create(&label).inc();
        }
    }

    /// Set `kubelet_running_containers{container_state}`.
    pub fn set_containers(&self, state: ContainerStateValue, count: i64) {
        self.running_containers
            .get_or_create(&ContainerStateLabel { container_state: state })
            .set(count);
    }

    /// The series of one probe (`probe_type`: `Liveness`, `Readiness`, `Startup`), to keep.
    pub fn probe_series(
        &self,
        probe_type: &'static str,
        container: &str,
        pod: &str,
        namespace: &str,
        pod_uid: &str,
    ) -> ProbeSeries {
        let total = |result| ProbeTotalLabels {
            probe_type,
            result,
            container: container.to_string(),
            pod: pod.to_string(),
            namespace: namespace.to_string(),
            pod_uid: pod_uid.to_string(),
        };
        ProbeSeries {
            labels: ProbeDurationLabels {
                probe_type,
                container: container.to_string(),
                pod: pod.to_string(),
                namespace: namespace.to_string(),
            },
            pod_uid: pod_uid.to_string(),
            successful: self.probe_total.get_or_create_owned(&total("successful")),
            failed: self.probe_total.get_or_create_owned(&total("failed")),
            unknown: self.probe_total.get_or_create_owned(&total("unknown")),
            duration: self.probe_duration.get_or_create_owned(&ProbeDurationLabels {
                probe_type,
                container: container.to_string(),
                pod: pod.to_string(),
                namespace: namespace.to_string(),
            }),
        }
    }

    /// Drop a removed probe's series (its pod is gone), as kubelet does.
    pub fn forget_probe(&self, series: &ProbeSeries) {
        let l = &series.labels;
        for result in ["successful", "failed", "unknown"] {
            self.probe_total.remove(&ProbeTotalLabels {
                probe_type: l.probe_type,
                result,
                container: l.container.clone(),
                pod: l.pod.clone(),
                namespace: l.namespace.clone(),
                pod_uid: series.pod_uid.clone(),
            });
        }
        self.probe_duration.remove(l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::prometheus_text::encode;

    fn metrics() -> Metrics {
        Metrics::new(
            "n1",
            BuildInfo {
                build_date: String::new(),
                compiler: "rustc".into(),
                git_commit: String::new(),
                git_tree_state: String::new(),
                git_version: "v0.1.0".into(),
                go_version: String::new(),
                major: "0".into(),
                minor: "1".into(),
                platform: "linux/amd64".into(),
            },
        )
    }

    fn text(r: &Registry) -> String {
        let mut out = String::new();
        encode(&mut out, r).unwrap();
        out
    }

    /// Every family is exposed with kubelet's name, type, HELP and labels, in the text format.
    #[test]
    fn families_have_kubelet_names_types_and_labels() {
        let m = metrics();
        m.running_pods.set(2);
        m.set_containers(ContainerStateValue::running, 3);
        m.pod_start_duration.observe(1.5);
        m.worker_operation(WorkerOperation::sync, 0.02);
        m.pleg_relist_duration.observe(0.01);
        m.pleg_relist_interval.observe(1.0);
        m.pleg_last_seen.set(1_700_000_000.5);
        m.runtime_call(RuntimeOperation::create_container, 0.1, true);
        m.started_pods.inc();
        m.container_started(ContainerType::init_container, true);
        m.restarted_pods.get_or_create(&StaticLabel { r#static: "true" }).inc();
        let signal = EvictionSignalLabel {
            eviction_signal: "memory.available",
        };
        m.evictions.get_or_create(&signal).inc();
        let mut out = text(m.registry());
        kubelet_names(&mut out);
        for line in [
            "# TYPE kubelet_node_name gauge",
            "kubelet_node_name{node=\"n1\"} 1",
            "kubernetes_build_info{build_date=\"\",compiler=\"rustc\"",
            "# HELP kubelet_running_pods Number of pods that have a running pod sandbox",
            "kubelet_running_pods 2",
            "kubelet_running_containers{container_state=\"running\"} 3",
            "# TYPE kubelet_pod_start_duration_seconds histogram",
            "kubelet_pod_start_duration_seconds_bucket{le=\"0.5\"} 0",
            "kubelet_pod_start_duration_seconds_bucket{le=\"2\"} 1",
            "kubelet_pod_start_duration_seconds_bucket{le=\"3600\"} 1",
            "kubelet_pod_start_duration_seconds_count 1",
            "kubelet_pod_worker_duration_seconds_count{operation=\"sync\"} 1",
            "kubelet_pleg_relist_duration_seconds_count 1",
            "kubelet_pleg_relist_interval_seconds_count 1",
            "kubelet_pleg_last_seen_seconds 1700000000.5",
            "# TYPE kubelet_runtime_operations_total counter",
            "kubelet_runtime_operations_total{operation_type=\"create_container\"} 1",
            "kubelet_runtime_operations_errors_total{operation_type=\"create_container\"} 1",
            "kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"create_container\",le=\"0.1953125\"} 1",
            "kubelet_started_pods_total 1",
            "kubelet_started_containers_total{container_type=\"init_container\"} 1",
            "kubelet_restarted_pods_total{static=\"true\"} 1",
            "# TYPE kubelet_evictions counter",
            "kubelet_evictions{eviction_signal=\"memory.available\"} 1",
        ] {
            assert!(out.contains(line), "{line:?} not in\n{out}");
        }
        assert!(
            !out.contains("prober_probe"),
            "probe metrics belong to /metrics/probes:\n{out}"
        );
        assert!(!out.contains("# EOF"), "the Prometheus text format has no EOF marker");
    }

    /// Probe series count per result and are dropped with the probe.
    #[test]
    fn probe_series_count_by_result_and_go_with_the_probe() {
        let m = metrics();
        let s = m.probe_series("Readiness", "c", "web", "default", "u1");
        s.observe(ProbeOutcome::Successful, 0.003);
        s.observe(ProbeOutcome::Successful, 0.004);
        s.observe(ProbeOutcome::Failed, 0.004);
        let out = text(m.probe_registry());
        for line in [
            "# TYPE prober_probe_total counter",
            "prober_probe_total{probe_type=\"Readiness\",result=\"successful\",container=\"c\",pod=\"web\",namespace=\"default\",pod_uid=\"u1\"} 2",
            "prober_probe_total{probe_type=\"Readiness\",result=\"failed\",container=\"c\",pod=\"web\",namespace=\"default\",pod_uid=\"u1\"} 1",
            "prober_probe_total{probe_type=\"Readiness\",result=\"unknown\",container=\"c\",pod=\"web\",namespace=\"default\",pod_uid=\"u1\"} 0",
            "prober_probe_duration_seconds_count{probe_type=\"Readiness\",container=\"c\",pod=\"web\",namespace=\"default\"} 3",
        ] {
            assert!(out.contains(line), "{line:?} not in\n{out}");
        }
        m.forget_probe(&s);
        assert!(!text(m.probe_registry()).contains("pod=\"web\""));
    }
}
