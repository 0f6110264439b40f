//! `/metrics/resource` and `/metrics/cadvisor`, rendered from the StatsActor's cached summary.
//!
//! Both carry an explicit timestamp on each sample (the time the figure was read), as kubelet's
//! resource collector and cAdvisor write them; metrics-server uses those timestamps to compute
//! rates. prometheus-client's text encoder has no sample timestamps (only exemplar ones), so
//! this module writes the text format 0.0.4 itself: families sorted by name as client_golang
//! sorts them, label values escaped (`\\`, `"`, newline), HELP escaped (`\\`, newline).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use dockerlet_messages::stats::{
    CgroupBlockIo, CgroupExtras, ContainerRef, ContainerStats, CpuStats, MemoryStats, NetworkStats, PodStats,
    StatsView, Summary, SwapStats,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The content type of both routes.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One sample: label pairs, value, timestamp in milliseconds (none: no timestamp).
struct Sample {
    labels: Vec<(&'static str, String)>,
    value: f64,
    millis: Option<i64>,
}

/// One metric family being collected.
struct Family {
    kind: &'static str,
    help: String,
    samples: Vec<Sample>,
}

/// Families by name; written sorted.
#[derive(Default)]
struct Exposition {
    families: BTreeMap<&'static str, Family>,
}

impl Exposition {
    /// Add a sample to family `name` (created with `kind` and `help` at its first sample; a
    /// family without samples is not written).
    fn sample(
        &mut self,
        name: &'static str,
        kind: &'static str,
        help: &str,
        labels: Vec<(&'static str, String)>,
        value: f64,
        time: Option<&Time>,
    ) {
        let family = self.families.entry(name).or_insert_with(|| Family {
            kind,
            help: help.to_string(),
            samples: Vec::new(),
        });
        family.samples.push(Sample {
            labels,
            value,
            millis: time.map(|t| t.0.as_millisecond()),
        });
    }

    fn render(self) -> String {
        let mut out = String::with_capacity(4096);
        for (name, family) in self.families {
            let _ = writeln!(out, "# HELP {name} {}", escape_help(&family.help));
            let _ = writeln!(out, "# TYPE {name} {}", family.kind);
            for sample in family.samples {
                out.push_str(name);
                if !sample.labels.is_empty() {
                    out.push('{');
                    for (i, (label, value)) in sample.labels.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        let _ = write!(out, "{label}=\"{}\"", escape_label(value));
                    }
                    out.push('}');
                }
                let _ = write!(out, " {}", format_value(sample.value));
                if let Some(ms) = sample.millis {
                    let _ = write!(out, " {ms}");
                }
                out.push('\n');
            }
        }
        out
    }
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

fn seconds(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

fn unix_seconds(time: &Time) -> f64 {
    time.0.as_nanosecond() as f64 / 1e9
}

/// A figure and the time it was read.
type Reading<'a> = Option<(f64, &'a Time)>;

/// CPU seconds used, when the counter is known.
fn cpu_seconds(cpu: Option<&CpuStats>) -> Reading<'_> {
    cpu.and_then(|c| Some((seconds(c.usage_core_nano_seconds?), &c.time)))
}

/// The working set in bytes, when known.
fn working_set(memory: Option<&MemoryStats>) -> Reading<'_> {
    memory.and_then(|m| Some((m.working_set_bytes? as f64, &m.time)))
}

/// Swap used in bytes, when known.
fn swap_used(swap: Option<&SwapStats>) -> Reading<'_> {
    swap.and_then(|s| Some((s.swap_usage_bytes? as f64, &s.time)))
}

/// The swap limit (available + used), when known.
fn swap_limit(swap: Option<&SwapStats>) -> Reading<'_> {
    swap.and_then(|s| {
        Some((
            (s.swap_available_bytes? + s.swap_usage_bytes.unwrap_or(0)) as f64,
            &s.time,
        ))
    })
}

impl Exposition {
    /// A sample stamped with the time of its reading; nothing when the figure is unknown.
    fn reading(
        &mut self,
        name: &'static str,
        kind: &'static str,
        help: &str,
        labels: Vec<(&'static str, String)>,
        r: Reading,
    ) {
        if let Some((value, time)) = r {
            self.sample(name, kind, help, labels, value, Some(time));
        }
    }
}

/// The note on every swap series' help.
const SWAP: &str = "Reported only on non-windows systems";

/// A stable metric's help.
fn stable(help: &str) -> String {
    format!("[STABLE] {help}")
}

/// An alpha metric's help.
fn alpha(help: &str) -> String {
    format!("[ALPHA] {help}")
}

/// `/metrics/resource`, as kubelet's `resource_metrics.go` writes it from the CPU and memory
/// summary. `summary` is `None` when no housekeeping has finished: then only the scrape error
/// gauges, at 1.
pub fn resource(summary: Option<&Summary>) -> String {
    let mut e = Exposition::default();
    let error = if summary.is_some() { 0.0 } else { 1.0 };
    let scrape = "1 if there was an error while getting container metrics, 0 otherwise";
    e.sample(
        "resource_scrape_error",
        "gauge",
        &stable(scrape),
        Vec::new(),
        error,
        None,
    );
    let deprecated = format!("(Deprecated since 1.29.0) {scrape}");
    e.sample("scrape_error", "gauge", &alpha(&deprecated), Vec::new(), error, None);
    let Some(summary) = summary else { return e.render() };
    let node = &summary.node;
    e.reading(
        "node_cpu_usage_seconds_total",
        "counter",
        &stable("Cumulative cpu time consumed by the node in core-seconds"),
        Vec::new(),
        cpu_seconds(node.cpu.as_ref()),
    );
    e.reading(
        "node_memory_working_set_bytes",
        "gauge",
        &stable("Current working set of the node in bytes"),
        Vec::new(),
        working_set(node.memory.as_ref()),
    );
    e.reading(
        "node_swap_usage_bytes",
        "gauge",
        &alpha(&format!("Current swap usage of the node in bytes. {SWAP}")),
        Vec::new(),
        swap_used(node.swap.as_ref()),
    );
    for pod in &summary.pods {
        for c in &pod.containers {
            container_resource_series(&mut e, pod, c);
        }
        pod_resource_series(&mut e, pod);
    }
    e.render()
}

/// A container's `/metrics/resource` series.
fn container_resource_series(e: &mut Exposition, pod: &PodStats, c: &ContainerStats) {
    let (ns, name) = (&pod.pod_ref.namespace, &pod.pod_ref.name);
    let labels = || {
        vec![
            ("container", c.name.clone()),
            ("namespace", ns.clone()),
            ("pod", name.clone()),
        ]
    };
    if c.start_time.0.as_second() > 0 {
        e.sample(
            "container_start_time_seconds",
            "gauge",
            &stable("Start time of the container since unix epoch in seconds"),
            labels(),
            unix_seconds(&c.start_time),
            None,
        );
    }
    e.reading(
        "container_cpu_usage_seconds_total",
        "counter",
        &stable("Cumulative cpu time consumed by the container in core-seconds"),
        labels(),
        cpu_seconds(c.cpu.as_ref()),
    );
    e.reading(
        "container_memory_working_set_bytes",
        "gauge",
        &stable("Current working set of the container in bytes"),
        labels(),
        working_set(c.memory.as_ref()),
    );
    e.reading(
        "container_swap_usage_bytes",
        "gauge",
        &alpha(&format!("Current amount of the container swap usage in bytes. {SWAP}")),
        labels(),
        swap_used(c.swap.as_ref()),
    );
    e.reading(
        "container_swap_limit_bytes",
        "gauge",
        &alpha(&format!("Current amount of the container swap limit in bytes. {SWAP}")),
        labels(),
        swap_limit(c.swap.as_ref()),
    );
}

/// A pod's own `/metrics/resource` series.
fn pod_resource_series(e: &mut Exposition, pod: &PodStats) {
    let (ns, name) = (&pod.pod_ref.namespace, &pod.pod_ref.name);
    let pod_labels = || vec![("namespace", ns.clone()), ("pod", name.clone())];
    e.reading(
        "pod_cpu_usage_seconds_total",
        "counter",
        &stable("Cumulative cpu time consumed by the pod in core-seconds"),
        pod_labels(),
        cpu_seconds(pod.cpu.as_ref()),
    );
    e.reading(
        "pod_memory_working_set_bytes",
        "gauge",
        &stable("Current working set of the pod in bytes"),
        pod_labels(),
        working_set(pod.memory.as_ref()),
    );
    e.reading(
        "pod_swap_usage_bytes",
        "gauge",
        &alpha(&format!("Current amount of the pod swap usage in bytes. {SWAP}")),
        pod_labels(),
        swap_used(pod.swap.as_ref()),
    );
}

/// cAdvisor's base labels of one series: `container`, `id` (the cgroup), `image`, `name` (the
/// Docker container's name), `namespace`, `pod`.
#[derive(Clone)]
struct Base {
    container: String,
    id: String,
    image: String,
    name: String,
    namespace: String,
    pod: String,
}

impl Base {
    fn labels(&self) -> Vec<(&'static str, String)> {
        vec![
            ("container", self.container.clone()),
            ("id", self.id.clone()),
            ("image", self.image.clone()),
            ("name", self.name.clone()),
            ("namespace", self.namespace.clone()),
            ("pod", self.pod.clone()),
        ]
    }

    fn with(&self, extra: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        let mut labels = self.labels();
        labels.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        labels
    }
}

/// The series cAdvisor gives for one cgroup's CPU and memory.
fn cgroup_series(e: &mut Exposition, base: &Base, stats: &ContainerStats) {
    e.reading(
        "container_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed in seconds.",
        base.with(&[("cpu", "total")]),
        cpu_seconds(stats.cpu.as_ref()),
    );
    if let Some(cpu) = &stats.cpu {
        let split = [
            (
                "container_cpu_user_seconds_total",
                "Cumulative user cpu time consumed in seconds.",
                cpu.user_nano_seconds,
            ),
            (
                "container_cpu_system_seconds_total",
                "Cumulative system cpu time consumed in seconds.",
                cpu.system_nano_seconds,
            ),
        ];
        for (name, help, ns) in split {
            if let Some(ns) = ns {
                e.sample(name, "counter", help, base.labels(), ns as f64 / 1e9, Some(&cpu.time));
            }
        }
    }
    if let Some(mem) = &stats.memory {
        let t = Some(&mem.time);
        let mut gauge = |name: &'static str, help: &str, v: Option<u64>| {
            if let Some(v) = v {
                e.sample(name, "gauge", help, base.labels(), v as f64, t);
            }
        };
        gauge(
            "container_memory_usage_bytes",
            "Current memory usage in bytes, including all memory regardless of when it was accessed",
            mem.usage_bytes,
        );
        gauge(
            "container_memory_working_set_bytes",
            "Current working set in bytes.",
            mem.working_set_bytes,
        );
        gauge("container_memory_rss", "Size of RSS in bytes.", mem.rss_bytes);
        for (kind, value) in [("pgfault", mem.page_faults), ("pgmajfault", mem.major_page_faults)] {
            if let Some(v) = value {
                e.sample(
                    "container_memory_failures_total",
                    "counter",
                    "Cumulative count of memory allocation failures.",
                    base.with(&[("failure_type", kind), ("scope", "container")]),
                    v as f64,
                    t,
                );
            }
        }
        if let (Some(available), Some(ws)) = (mem.available_bytes, mem.working_set_bytes) {
            e.sample(
                "container_spec_memory_limit_bytes",
                "gauge",
                "Memory limit for the container.",
                base.labels(),
                (available + ws) as f64,
                None,
            );
        }
    }
    if stats.start_time.0.as_second() > 0 {
        e.sample(
            "container_start_time_seconds",
            "gauge",
            "Start time of the container since unix epoch in seconds.",
            base.labels(),
            stats.start_time.0.as_second() as f64,
            None,
        );
    }
}

fn network_series(e: &mut Exposition, base: &Base, net: &NetworkStats) {
    let interfaces = if net.interfaces.is_empty() {
        std::slice::from_ref(&net.default)
    } else {
        &net.interfaces[..]
    };
    for i in interfaces {
        let labels = || base.with(&[("interface", &i.name)]);
        let t = Some(&net.time);
        let series: [(&'static str, &str, Option<u64>); 4] = [
            (
                "container_network_receive_bytes_total",
                "Cumulative count of bytes received",
                i.rx_bytes,
            ),
            (
                "container_network_receive_errors_total",
                "Cumulative count of errors encountered while receiving",
                i.rx_errors,
            ),
            (
                "container_network_transmit_bytes_total",
                "Cumulative count of bytes transmitted",
                i.tx_bytes,
            ),
            (
                "container_network_transmit_errors_total",
                "Cumulative count of errors encountered while transmitting",
                i.tx_errors,
            ),
        ];
        for (name, help, value) in series {
            if let Some(v) = value {
                e.sample(name, "counter", help, labels(), v as f64, t);
            }
        }
    }
}

/// What `/metrics/cadvisor` serves of a cgroup beyond the Summary's figures, by cgroup.
struct ByCgroup<'a> {
    block_io: HashMap<&'a str, &'a CgroupBlockIo>,
    extras: HashMap<&'a str, &'a CgroupExtras>,
}

impl<'a> ByCgroup<'a> {
    fn of(view: &'a StatsView) -> Self {
        ByCgroup {
            block_io: view.block_io.iter().map(|io| (io.cgroup.as_str(), io)).collect(),
            extras: view.extras.iter().map(|x| (x.cgroup.as_str(), x)).collect(),
        }
    }

    /// The block IO, page cache, swap and throttling series of the cgroup `base` names (none
    /// without one).
    fn series(&self, e: &mut Exposition, base: &Base) {
        if base.id.is_empty() {
            return;
        }
        if let Some(io) = self.block_io.get(base.id.as_str()) {
            block_io_series(e, base, io);
        }
        if let Some(x) = self.extras.get(base.id.as_str()) {
            extras_series(e, base, x);
        }
    }
}

/// cAdvisor's block IO series of one cgroup, per device (`DiskIo` Read and Write).
fn block_io_series(e: &mut Exposition, base: &Base, io: &CgroupBlockIo) {
    for d in &io.devices {
        let series: [(&'static str, &str, u64); 4] = [
            (
                "container_fs_reads_bytes_total",
                "Cumulative count of bytes read",
                d.read_bytes,
            ),
            (
                "container_fs_writes_bytes_total",
                "Cumulative count of bytes written",
                d.write_bytes,
            ),
            (
                "container_fs_reads_total",
                "Cumulative count of reads completed",
                d.reads,
            ),
            (
                "container_fs_writes_total",
                "Cumulative count of writes completed",
                d.writes,
            ),
        ];
        for (name, help, value) in series {
            e.sample(
                name,
                "counter",
                help,
                base.with(&[("device", &d.device)]),
                value as f64,
                Some(&io.time),
            );
        }
    }
}

/// cAdvisor's page cache, mapped file, swap and CFS throttling series of one cgroup (the
/// throttling ones only with a CPU quota, where periods elapse, as cAdvisor).
fn extras_series(e: &mut Exposition, base: &Base, x: &CgroupExtras) {
    let t = Some(&x.time);
    let gauges = [
        (
            "container_memory_cache",
            "Number of bytes of page cache memory.",
            x.cache_bytes,
        ),
        (
            "container_memory_mapped_file",
            "Size of memory mapped files in bytes.",
            x.mapped_file_bytes,
        ),
        ("container_memory_swap", "Container swap usage in bytes.", x.swap_bytes),
    ];
    for (name, help, value) in gauges {
        if let Some(v) = value {
            e.sample(name, "gauge", help, base.labels(), v as f64, t);
        }
    }
    if let Some(limit) = x.swap_limit_bytes {
        // A spec figure: no timestamp, as `container_spec_memory_limit_bytes`.
        e.sample(
            "container_spec_memory_swap_limit_bytes",
            "gauge",
            "Memory swap limit for the container.",
            base.labels(),
            limit as f64,
            None,
        );
    }
    if let Some(cfs) = x.cfs.filter(|c| c.periods > 0) {
        let counters = [
            (
                "container_cpu_cfs_periods_total",
                "Number of elapsed enforcement period intervals.",
                cfs.periods as f64,
            ),
            (
                "container_cpu_cfs_throttled_periods_total",
                "Number of throttled period intervals.",
                cfs.throttled_periods as f64,
            ),
            (
                "container_cpu_cfs_throttled_seconds_total",
                "Total time duration the container has been throttled.",
                cfs.throttled_ns as f64 / 1e9,
            ),
        ];
        for (name, help, value) in counters {
            e.sample(name, "counter", help, base.labels(), value, t);
        }
    }
}

/// The containers of one pod, by name.
type PodContainers<'a> = BTreeMap<&'a str, &'a ContainerRef>;

fn pod_series(e: &mut Exposition, containers: Option<&PodContainers>, by_cgroup: &ByCgroup, pod: &PodStats) {
    let pod_cgroup = containers
        .and_then(|c| c.values().next())
        .map(|c| c.pod_cgroup.clone())
        .unwrap_or_default();
    let base = Base {
        container: String::new(),
        id: pod_cgroup,
        image: String::new(),
        name: String::new(),
        namespace: pod.pod_ref.namespace.clone(),
        pod: pod.pod_ref.name.clone(),
    };
    // The pod cgroup, as cAdvisor shows it: CPU and memory of the whole pod, its process count,
    // and the pod's network (every container of a pod shares the sandbox's namespace). Without
    // a pod cgroup (pods outside the kubepods tree) only the network, on no cgroup.
    if !base.id.is_empty() {
        let whole = ContainerStats {
            name: String::new(),
            start_time: pod.start_time.clone(),
            cpu: pod.cpu.clone(),
            memory: pod.memory.clone(),
            accelerators: Vec::new(),
            rootfs: None,
            logs: None,
            user_defined_metrics: Vec::new(),
            swap: None,
            io: None,
        };
        cgroup_series(e, &base, &whole);
        by_cgroup.series(e, &base);
        if let Some(count) = pod.process_stats.as_ref().and_then(|p| p.process_count) {
            e.sample(
                "container_processes",
                "gauge",
                "Number of processes running inside the container.",
                base.labels(),
                count as f64,
                None,
            );
        }
    }
    if let Some(net) = &pod.network {
        network_series(e, &base, net);
    }
    for c in &pod.containers {
        let meta = containers.and_then(|m| m.get(c.name.as_str()));
        let base = Base {
            container: c.name.clone(),
            id: meta.map(|m| m.cgroup.clone()).unwrap_or_default(),
            image: meta.map(|m| m.image.clone()).unwrap_or_default(),
            name: meta.map(|m| m.docker_name.clone()).unwrap_or_default(),
            namespace: pod.pod_ref.namespace.clone(),
            pod: pod.pod_ref.name.clone(),
        };
        cgroup_series(e, &base, c);
        by_cgroup.series(e, &base);
        // The writable layer is the container's filesystem in cAdvisor's sense (its device is
        // not known here: the label is left empty).
        if let Some((fs, used)) = c.rootfs.as_ref().and_then(|f| Some((f, f.used_bytes?))) {
            e.sample(
                "container_fs_usage_bytes",
                "gauge",
                "Number of bytes that are consumed by the container on this filesystem.",
                base.with(&[("device", "")]),
                used as f64,
                Some(&fs.time),
            );
        }
    }
}

/// `/metrics/cadvisor`: cAdvisor's `container_*` and `machine_*` series for the node's root
/// cgroup, the system containers that are one cgroup (`/kubepods`), each pod cgroup and each
/// app container, with cAdvisor's labels (sandboxes are not served); block IO where it was
/// read. `view` is `None` before the first housekeeping: then only `container_scrape_error 1`.
pub fn cadvisor(view: Option<&StatsView>) -> String {
    let mut e = Exposition::default();
    e.sample(
        "container_scrape_error",
        "gauge",
        "1 if there was an error while getting container metrics, 0 otherwise",
        Vec::new(),
        if view.is_some() { 0.0 } else { 1.0 },
        None,
    );
    let Some(view) = view else { return e.render() };
    let summary = &view.summary;
    let root = Base {
        container: String::new(),
        id: "/".into(),
        image: String::new(),
        name: String::new(),
        namespace: String::new(),
        pod: String::new(),
    };
    let node = ContainerStats {
        name: String::new(),
        start_time: summary.node.start_time.clone(),
        cpu: summary.node.cpu.clone(),
        memory: summary.node.memory.clone(),
        accelerators: Vec::new(),
        rootfs: None,
        logs: None,
        user_defined_metrics: Vec::new(),
        swap: None,
        io: None,
    };
    cgroup_series(&mut e, &root, &node);
    let by_cgroup = ByCgroup::of(view);
    by_cgroup.series(&mut e, &root);
    // The system containers that are one cgroup (`/kubepods`, the agent's, the engine's) and
    // the QoS cgroups, on their cgroup as cAdvisor shows every cgroup it watches.
    for other in view.other_cgroups.iter() {
        let base = Base {
            id: other.id.clone(),
            ..root.clone()
        };
        cgroup_series(&mut e, &base, &other.stats);
        by_cgroup.series(&mut e, &base);
    }
    if let Some(net) = &summary.node.network {
        network_series(&mut e, &root, net);
    }
    let mut by_pod: BTreeMap<&str, PodContainers> = BTreeMap::new();
    for c in view.containers.iter() {
        by_pod
            .entry(c.pod_uid.as_str())
            .or_default()
            .insert(c.container.as_str(), c);
    }
    let mut sandboxes: BTreeMap<&str, Vec<&(ContainerRef, ContainerStats)>> = BTreeMap::new();
    for s in view.sandboxes.iter() {
        sandboxes.entry(s.0.pod_uid.as_str()).or_default().push(s);
    }
    for pod in &summary.pods {
        pod_series(&mut e, by_pod.get(pod.pod_ref.uid.as_str()), &by_cgroup, pod);
        // The sandbox, as cAdvisor shows every container's cgroup (cri-dockerd's `POD`).
        for (sandbox, stats) in sandboxes.get(pod.pod_ref.uid.as_str()).into_iter().flatten() {
            let base = Base {
                container: sandbox.container.clone(),
                id: sandbox.cgroup.clone(),
                image: sandbox.image.clone(),
                name: sandbox.docker_name.clone(),
                namespace: pod.pod_ref.namespace.clone(),
                pod: pod.pod_ref.name.clone(),
            };
            cgroup_series(&mut e, &base, stats);
        }
    }
    if let Some(cores) = view.machine.cpu_cores {
        e.sample(
            "machine_cpu_cores",
            "gauge",
            "Number of logical CPU cores.",
            Vec::new(),
            cores as f64,
            None,
        );
    }
    if let Some(bytes) = view.machine.memory_bytes {
        e.sample(
            "machine_memory_bytes",
            "gauge",
            "Amount of memory installed on the machine.",
            Vec::new(),
            bytes as f64,
            None,
        );
    }
    e.render()
}

#[cfg(test)]
mod tests;
