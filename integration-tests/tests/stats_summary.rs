//! `/stats/summary`, ported from upstream `test/e2e_node/summary_test.go` ("Summary API when
//! querying /stats/summary should report resource usage through the stats api"): two busybox
//! pods with an emptyDir, a memory limit and some network traffic, restarted once, and the
//! summary decoded with the upstream types (strict: an unknown field fails) and checked against
//! the upstream ranges. Also `only_cpu_and_memory`, the read-only port, and 401/403 on the
//! authenticated port.
//!
//! There is no internet here: the pods ping their default gateway (the Docker bridge) instead
//! of google.com, which gives eth0 traffic all the same.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use dockerlet_integration_tests::{wait_until, Agent, ContainerStatusExt, ManifestDir, PodExt, POD_START_TIMEOUT};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The upstream types (`k8s.io/kubelet/pkg/apis/stats/v1alpha1`, with the PSI, IO, swap,
/// containerFs and volume health fields of current versions), copied field for field, strict.
/// `,inline` members (NetworkStats' InterfaceStats, VolumeStats' FsStats) are written out, as
/// serde cannot deny unknown fields through `flatten`.
#[allow(dead_code)] // every field is decoded (strictly); the checks read most of them
mod upstream {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Summary {
        pub node: NodeStats,
        pub pods: Vec<PodStats>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct NodeStats {
        pub node_name: String,
        #[serde(default)]
        pub system_containers: Vec<ContainerStats>,
        pub start_time: String,
        pub cpu: Option<CpuStats>,
        pub memory: Option<MemoryStats>,
        pub network: Option<NetworkStats>,
        pub fs: Option<FsStats>,
        pub runtime: Option<RuntimeStats>,
        pub rlimit: Option<RlimitStats>,
        pub swap: Option<SwapStats>,
        pub io: Option<IoStats>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct RlimitStats {
        pub time: String,
        pub maxpid: Option<i64>,
        pub curproc: Option<i64>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct RuntimeStats {
        pub image_fs: Option<FsStats>,
        pub container_fs: Option<FsStats>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ProcessStats {
        pub process_count: Option<u64>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct PodStats {
        pub pod_ref: PodReference,
        pub start_time: String,
        pub containers: Vec<ContainerStats>,
        pub cpu: Option<CpuStats>,
        pub memory: Option<MemoryStats>,
        pub network: Option<NetworkStats>,
        #[serde(default)]
        pub volume: Vec<VolumeStats>,
        #[serde(rename = "ephemeral-storage")]
        pub ephemeral_storage: Option<FsStats>,
        #[serde(rename = "process_stats")]
        pub process_stats: Option<ProcessStats>,
        pub swap: Option<SwapStats>,
        pub io: Option<IoStats>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct ContainerStats {
        pub name: String,
        pub start_time: String,
        pub cpu: Option<CpuStats>,
        pub memory: Option<MemoryStats>,
        #[serde(default)]
        pub accelerators: Vec<serde_json::Value>,
        pub rootfs: Option<FsStats>,
        pub logs: Option<FsStats>,
        #[serde(default)]
        pub user_defined_metrics: Vec<serde_json::Value>,
        pub swap: Option<SwapStats>,
        pub io: Option<IoStats>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct PodReference {
        pub name: String,
        pub namespace: String,
        pub uid: String,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct InterfaceStats {
        pub name: String,
        pub rx_bytes: Option<u64>,
        pub rx_errors: Option<u64>,
        pub tx_bytes: Option<u64>,
        pub tx_errors: Option<u64>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct NetworkStats {
        pub time: String,
        // InterfaceStats, inline.
        #[serde(default)]
        pub name: String,
        pub rx_bytes: Option<u64>,
        pub rx_errors: Option<u64>,
        pub tx_bytes: Option<u64>,
        pub tx_errors: Option<u64>,
        pub interfaces: Option<Vec<InterfaceStats>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct CpuStats {
        pub time: String,
        pub usage_nano_cores: Option<u64>,
        pub usage_core_nano_seconds: Option<u64>,
        pub psi: Option<PsiStats>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct MemoryStats {
        pub time: String,
        pub available_bytes: Option<u64>,
        pub usage_bytes: Option<u64>,
        pub working_set_bytes: Option<u64>,
        pub rss_bytes: Option<u64>,
        pub page_faults: Option<u64>,
        pub major_page_faults: Option<u64>,
        pub psi: Option<PsiStats>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct SwapStats {
        pub time: String,
        pub swap_available_bytes: Option<u64>,
        pub swap_usage_bytes: Option<u64>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct IoStats {
        pub time: String,
        pub psi: Option<PsiStats>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct PsiStats {
        pub full: PsiData,
        pub some: PsiData,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct PsiData {
        pub total: u64,
        pub avg10: f64,
        pub avg60: f64,
        pub avg300: f64,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct VolumeStats {
        // FsStats, inline.
        pub time: String,
        pub available_bytes: Option<u64>,
        pub capacity_bytes: Option<u64>,
        pub used_bytes: Option<u64>,
        pub inodes_free: Option<u64>,
        pub inodes: Option<u64>,
        pub inodes_used: Option<u64>,
        #[serde(default)]
        pub name: String,
        pub pvc_ref: Option<serde_json::Value>,
        pub volume_health_stats: Option<serde_json::Value>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct FsStats {
        pub time: String,
        pub available_bytes: Option<u64>,
        pub capacity_bytes: Option<u64>,
        pub used_bytes: Option<u64>,
        pub inodes_free: Option<u64>,
        pub inodes: Option<u64>,
        pub inodes_used: Option<u64>,
    }
}

use upstream::*;

const KB: u64 = 1000;
const MB: u64 = 1000 * KB;

/// cgroup v1 with swap accounting (`memory.memsw.*`), as on this project's CI machine.
fn v1_swap_accounting() -> bool {
    std::path::Path::new("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists()
}
const GB: u64 = 1000 * MB;
const TB: u64 = 1000 * GB;

/// Problems found in one summary (the upstream matchers, one message per field out of range).
#[derive(Default)]
struct Check {
    problems: Vec<String>,
}

impl Check {
    fn bounded(&mut self, what: &str, value: Option<u64>, lo: u64, hi: u64) {
        match value {
            Some(v) if (lo..=hi).contains(&v) => {}
            other => self.problems.push(format!("{what} = {other:?}, want {lo}..={hi}")),
        }
    }

    /// Upstream's `swapExpectation(upperBound)`: none, or a recent time and each figure none,
    /// within 0..=upperBound, or at least 2^62 ("unlimited"). This agent always reports the
    /// swap used (0 where nothing is swapped), so `required` checks it is there.
    fn swap(&mut self, what: &str, swap: &Option<upstream::SwapStats>, upper: u64, required: bool) {
        let Some(s) = swap else {
            if required {
                self.problems.push(format!("{what}.swap missing"));
            }
            return;
        };
        self.recent(&format!("{what}.swap.time"), &s.time, MAX_STATS_AGE);
        for (field, value) in [
            ("swapUsageBytes", s.swap_usage_bytes),
            ("swapAvailableBytes", s.swap_available_bytes),
        ] {
            if let Some(v) = value {
                if v > upper && v < 1 << 62 {
                    self.problems
                        .push(format!("{what}.swap.{field} = {v}, want 0..={upper} or unlimited"));
                }
            }
        }
        if required && s.swap_usage_bytes.is_none() {
            self.problems.push(format!("{what}.swap.swapUsageBytes missing"));
        }
    }

    fn none<T: std::fmt::Debug>(&mut self, what: &str, value: &Option<T>) {
        if value.is_some() {
            self.problems.push(format!("{what} = {value:?}, want none"));
        }
    }

    /// Upstream `recent(d)`: not older than `d`, not more than 3 minutes ahead.
    fn recent(&mut self, what: &str, time: &str, max_age: Duration) {
        let Ok(t) = time.parse::<Timestamp>() else {
            self.problems.push(format!("{what} = {time:?} is not RFC 3339"));
            return;
        };
        let now = Timestamp::now();
        let age = SignedDuration::try_from(max_age).unwrap();
        if t < now - age || t > now + SignedDuration::from_secs(180) {
            self.problems
                .push(format!("{what} = {time} is not within {max_age:?} of now"));
        }
    }

    fn psi(&mut self, what: &str, psi: &Option<PsiStats>) {
        // cgroup v2 gives PSI; v1 has none. Either way each average is a percentage.
        if let Some(p) = psi {
            for (name, d) in [("some", &p.some), ("full", &p.full)] {
                for (avg, v) in [("avg10", d.avg10), ("avg60", d.avg60), ("avg300", d.avg300)] {
                    if !(0.0..=100.0).contains(&v) {
                        self.problems.push(format!("{what}.psi.{name}.{avg} = {v}"));
                    }
                }
            }
        }
    }

    fn fs(&mut self, what: &str, fs: &Option<FsStats>, used: (u64, u64)) {
        let Some(fs) = fs else {
            self.problems.push(format!("{what} missing"));
            return;
        };
        self.recent(&format!("{what}.time"), &fs.time, MAX_STATS_AGE);
        self.bounded(&format!("{what}.availableBytes"), fs.available_bytes, 100 * MB, 10 * TB);
        self.bounded(&format!("{what}.capacityBytes"), fs.capacity_bytes, 100 * MB, 10 * TB);
        self.bounded(&format!("{what}.usedBytes"), fs.used_bytes, used.0, used.1);
        self.bounded(&format!("{what}.inodesFree"), fs.inodes_free, 10_000, 100_000_000);
        self.bounded(&format!("{what}.inodes"), fs.inodes, 10_000, 100_000_000);
        self.bounded(&format!("{what}.inodesUsed"), fs.inodes_used, 0, 100_000_000);
    }

    fn cpu(&mut self, what: &str, cpu: &Option<CpuStats>, nano_cores: (u64, u64), core_ns: (u64, u64), zero_ok: bool) {
        let Some(cpu) = cpu else {
            self.problems.push(format!("{what}.cpu missing"));
            return;
        };
        self.recent(&format!("{what}.cpu.time"), &cpu.time, MAX_STATS_AGE);
        if !(zero_ok && cpu.usage_nano_cores == Some(0)) {
            self.bounded(
                &format!("{what}.cpu.usageNanoCores"),
                cpu.usage_nano_cores,
                nano_cores.0,
                nano_cores.1,
            );
        }
        self.bounded(
            &format!("{what}.cpu.usageCoreNanoSeconds"),
            cpu.usage_core_nano_seconds,
            core_ns.0,
            core_ns.1,
        );
        self.psi(&format!("{what}.cpu"), &cpu.psi);
    }

    /// Memory within `limit`; `available` none for unlimited (system containers), else bounded.
    fn memory(&mut self, what: &str, m: &Option<MemoryStats>, bounds: MemoryBounds) {
        let Some(m) = m else {
            self.problems.push(format!("{what}.memory missing"));
            return;
        };
        self.recent(&format!("{what}.memory.time"), &m.time, MAX_STATS_AGE);
        match bounds.available {
            None => self.none(&format!("{what}.memory.availableBytes"), &m.available_bytes),
            Some((lo, hi)) => self.bounded(&format!("{what}.memory.availableBytes"), m.available_bytes, lo, hi),
        }
        let (lo, hi) = bounds.usage;
        self.bounded(&format!("{what}.memory.usageBytes"), m.usage_bytes, lo, hi);
        self.bounded(&format!("{what}.memory.workingSetBytes"), m.working_set_bytes, lo, hi);
        self.bounded(
            &format!("{what}.memory.rssBytes"),
            m.rss_bytes,
            bounds.rss.0,
            bounds.rss.1,
        );
        self.bounded(
            &format!("{what}.memory.pageFaults"),
            m.page_faults,
            bounds.faults.0,
            bounds.faults.1,
        );
        self.bounded(
            &format!("{what}.memory.majorPageFaults"),
            m.major_page_faults,
            0,
            1_000_000_000,
        );
        self.psi(&format!("{what}.memory"), &m.psi);
    }

    fn network(&mut self, what: &str, n: &Option<NetworkStats>, node: bool) {
        let Some(n) = n else {
            self.problems.push(format!("{what}.network missing"));
            return;
        };
        self.recent(&format!("{what}.network.time"), &n.time, MAX_STATS_AGE);
        if n.interfaces.is_none() {
            self.problems.push(format!("{what}.network.interfaces missing"));
        }
        if node {
            // Upstream: "" or eth0 (TODO #28407 there); here the interface of the default route.
            if n.rx_bytes.is_some() {
                self.bounded(&format!("{what}.network.rxBytes"), n.rx_bytes, MB, 100 * GB);
                self.bounded(&format!("{what}.network.txBytes"), n.tx_bytes, 10 * KB, 10 * GB);
                self.bounded(&format!("{what}.network.rxErrors"), n.rx_errors, 0, 100_000);
                self.bounded(&format!("{what}.network.txErrors"), n.tx_errors, 0, 100_000);
            }
        } else {
            if n.name != "eth0" {
                self.problems
                    .push(format!("{what}.network.name = {:?}, want eth0", n.name));
            }
            self.bounded(&format!("{what}.network.rxBytes"), n.rx_bytes, 10, 10 * MB);
            self.bounded(&format!("{what}.network.txBytes"), n.tx_bytes, 10, 10 * MB);
            self.bounded(&format!("{what}.network.rxErrors"), n.rx_errors, 0, 1000);
            self.bounded(&format!("{what}.network.txErrors"), n.tx_errors, 0, 1000);
        }
    }
}

#[derive(Clone, Copy)]
struct MemoryBounds {
    available: Option<(u64, u64)>,
    usage: (u64, u64),
    rss: (u64, u64),
    faults: (u64, u64),
}

const MAX_START_AGE: Duration = Duration::from_secs(365 * 24 * 3600);
const MAX_STATS_AGE: Duration = Duration::from_secs(60);

/// The two pods of upstream `getSummaryTestPods`: restart once, then loop writing outside and
/// inside the emptyDir and pinging (the default gateway here).
fn summary_pod(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 1
  containers:
  - name: busybox-container
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    securityContext:
      capabilities:
        add: ["NET_RAW"]
    resources:
      limits:
        memory: 80M
    volumeMounts:
    - name: test-empty-dir
      mountPath: /test-empty-dir-mnt
    command:
    - sh
    - -c
    - |
      f=/test-empty-dir-mnt/restarts0
      count=$(echo 'hello' >> $f ; wc -l $f | awk '{{print $1}}')
      if [ $count -lt 2 ]; then
        exit 0
      fi
      gw=$(ip route | awk '/default/ {{print $3}}')
      while true; do echo 'some bytes' >/outside_the_volume.txt; ping -c 1 $gw; echo 'hello world' >> /test-empty-dir-mnt/file; sleep 1; done
  volumes:
  - name: test-empty-dir
    emptyDir: {{}}
"#
    )
}

/// Every upstream expectation, for the pods named in `pods`; the problems found.
fn check_summary(s: &Summary, node_name: &str, pods: &[String], memory_limit: u64) -> Vec<String> {
    let mut c = Check::default();
    let n = &s.node;
    if n.node_name != node_name {
        c.problems.push(format!("node.nodeName = {:?}", n.node_name));
    }
    c.recent("node.startTime", &n.start_time, MAX_START_AGE);
    c.cpu(
        "node",
        &n.cpu,
        (100_000, 2_000_000_000),
        (1_000_000_000, 1_000_000_000_000_000),
        false,
    );
    c.memory(
        "node",
        &n.memory,
        MemoryBounds {
            available: Some((100 * MB, memory_limit)),
            usage: (10 * MB, memory_limit),
            rss: (KB, memory_limit),
            // Upstream's ceiling is 1e9, for a fresh CI machine; /proc/vmstat counts since
            // boot, and a long-running build machine passes it (1.7e9 seen here).
            faults: (1000, u64::MAX),
        },
    );
    c.network("node", &n.network, true);
    c.swap("node", &n.swap, memory_limit, true);
    c.fs("node.fs", &n.fs, (KB, 10 * TB));
    match &n.runtime {
        Some(r) => {
            c.fs("node.runtime.imageFs", &r.image_fs, (KB, 10 * TB));
            c.fs("node.runtime.containerFs", &r.container_fs, (KB, 10 * TB));
        }
        None => c.problems.push("node.runtime missing".into()),
    }
    match &n.rlimit {
        Some(r) => {
            c.recent("node.rlimit.time", &r.time, MAX_STATS_AGE);
            c.bounded("node.rlimit.maxpid", r.maxpid.map(|v| v as u64), 0, 100_000_000);
            c.bounded("node.rlimit.curproc", r.curproc.map(|v| v as u64), 0, 100_000_000);
        }
        None => c.problems.push("node.rlimit missing".into()),
    }
    let system = MemoryBounds {
        available: None,
        usage: (MB, memory_limit),
        rss: (MB, memory_limit),
        faults: (1000, 1_000_000_000),
    };
    let mut names: Vec<&str> = n.system_containers.iter().map(|c| c.name.as_str()).collect();
    names.sort();
    if names != ["kubelet", "pods", "runtime"] {
        c.problems.push(format!(
            "node.systemContainers = {names:?}, want kubelet, pods, runtime"
        ));
    }
    for sc in &n.system_containers {
        let what = format!("systemContainers[{}]", sc.name);
        c.recent(&format!("{what}.startTime"), &sc.start_time, MAX_START_AGE);
        c.cpu(
            &what,
            &sc.cpu,
            (10_000, 2_000_000_000),
            (10_000_000, 1_000_000_000_000_000),
            true,
        );
        let bounds = if sc.name == "pods" {
            // Pods are limited by node allocatable. Upstream's rss floor (1 kB) is the pods'.
            MemoryBounds {
                available: Some((KB, memory_limit)),
                usage: (10 * KB, memory_limit),
                rss: (KB, memory_limit),
                faults: (0, 1_000_000_000),
            }
        } else {
            system
        };
        c.memory(&what, &sc.memory, bounds);
        c.swap(&what, &sc.swap, memory_limit, true);
        if !sc.accelerators.is_empty() || !sc.user_defined_metrics.is_empty() {
            c.problems.push(format!("{what}: accelerators or userDefinedMetrics"));
        }
        c.none(&format!("{what}.rootfs"), &sc.rootfs);
        c.none(&format!("{what}.logs"), &sc.logs);
    }
    for name in pods {
        let Some(p) = s
            .pods
            .iter()
            .find(|p| &p.pod_ref.name == name && p.pod_ref.namespace == "default")
        else {
            c.problems.push(format!("pod default/{name} missing"));
            continue;
        };
        let what = format!("pod[{name}]");
        c.recent(&format!("{what}.startTime"), &p.start_time, MAX_START_AGE);
        let names: Vec<&str> = p.containers.iter().map(|c| c.name.as_str()).collect();
        if names != ["busybox-container"] {
            c.problems.push(format!("{what}.containers = {names:?}"));
        }
        let limited = MemoryBounds {
            available: Some((KB, 80 * MB)),
            usage: (10 * KB, 80 * MB),
            rss: (KB, 80 * MB),
            faults: (0, 1_000_000),
        };
        for ct in &p.containers {
            let what = format!("{what}.containers[{}]", ct.name);
            c.recent(&format!("{what}.startTime"), &ct.start_time, MAX_START_AGE);
            c.cpu(
                &what,
                &ct.cpu,
                (10_000, 1_000_000_000),
                (10_000_000, 100_000_000_000),
                false,
            );
            c.memory(
                &what,
                &ct.memory,
                MemoryBounds {
                    faults: (100, 1_000_000),
                    ..limited
                },
            );
            c.swap(&what, &ct.swap, memory_limit, true);
            if v1_swap_accounting() {
                // The 80M limit is the container's memory + swap limit too (no swap, as
                // kubelet's NoSwap): what is left of it is at most 80M. Docker's default
                // (twice the memory limit) would leave 160M.
                c.bounded(
                    &format!("{what}.swap.swapAvailableBytes"),
                    ct.swap.as_ref().and_then(|s| s.swap_available_bytes),
                    80 * MB - 64 * KB,
                    80 * MB,
                );
            }
            c.fs(&format!("{what}.rootfs"), &ct.rootfs, (KB, 10 * MB));
            c.fs(&format!("{what}.logs"), &ct.logs, (KB, 10 * MB));
            if !ct.accelerators.is_empty() || !ct.user_defined_metrics.is_empty() {
                c.problems.push(format!("{what}: accelerators or userDefinedMetrics"));
            }
        }
        c.network(&what, &p.network, false);
        c.cpu(
            &what,
            &p.cpu,
            (10_000, 1_000_000_000),
            (10_000_000, 100_000_000_000),
            false,
        );
        c.memory(&what, &p.memory, limited);
        c.swap(&what, &p.swap, memory_limit, true);
        let volumes: Vec<&str> = p.volume.iter().map(|v| v.name.as_str()).collect();
        if volumes != ["test-empty-dir"] {
            c.problems
                .push(format!("{what}.volume = {volumes:?}, want [test-empty-dir]"));
        }
        for v in &p.volume {
            let w = format!("{what}.volume[{}]", v.name);
            c.none(&format!("{w}.pvcRef"), &v.pvc_ref);
            c.none(&format!("{w}.volumeHealthStats"), &v.volume_health_stats);
            let fs = Some(FsStats {
                time: v.time.clone(),
                available_bytes: v.available_bytes,
                capacity_bytes: v.capacity_bytes,
                used_bytes: v.used_bytes,
                inodes_free: v.inodes_free,
                inodes: v.inodes,
                inodes_used: v.inodes_used,
            });
            c.fs(&w, &fs, (KB, MB));
        }
        c.fs(
            &format!("{what}.ephemeral-storage"),
            &p.ephemeral_storage,
            (KB, 21 * MB),
        );
        c.bounded(
            &format!("{what}.process_stats.process_count"),
            p.process_stats.as_ref().and_then(|s| s.process_count),
            1,
            100_000_000,
        );
    }
    c.problems
}

/// MemTotal, as the Node's memory capacity the upstream test bounds memory with.
fn memory_capacity() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kb * 1024
}

fn decode(body: &str) -> Summary {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("the summary does not decode strictly: {e}\n{body}"))
}

/// `curl -sk` to the kubelet API, anonymously: status and body.
fn curl(port: u16, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sk", "--max-time", "60", "-w", "\n%{http_code}", "-X", method]);
    if let Some(body) = body {
        cmd.args(["-H", "Content-Type: application/json", "--data", body]);
    }
    let out = cmd
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// Upstream's conformance test: after one restart of each pod, the summary has every field
/// in range, strictly decoded, and keeps it for several more housekeeping passes; the same
/// summary on the kubelet API; `only_cpu_and_memory` (query and POST body) leaves the rest out.
#[test]
fn summary_reports_resource_usage_through_the_stats_api() {
    let manifests = ManifestDir::new();
    for name in ["stats-busybox-0", "stats-busybox-1"] {
        manifests.write(&format!("{name}.yaml"), &summary_pod(name));
    }
    let agent = Agent::start(
        "stats-summary",
        manifests.path(),
        &[
            "--housekeeping-interval",
            "2s",
            "--anonymous-auth",
            "--authorization-mode",
            "AlwaysAllow",
        ],
    );
    let pods: Vec<String> = ["stats-busybox-0", "stats-busybox-1"]
        .iter()
        .map(|n| agent.pod_name(n))
        .collect();
    wait_until("both pods restarted once and running", POD_START_TIMEOUT, || {
        let all = agent.try_pods().map_err(|e| format!("{e:#}"))?;
        for name in &pods {
            let pod = all
                .iter()
                .find(|p| p.name() == name)
                .ok_or(format!("{name} not in /pods"))?;
            let c = pod.container("busybox-container").ok_or("no status")?;
            if c.restart_count < 1 || c.running_since().is_none() {
                return Err(format!(
                    "{name}: restarts {} running {:?}",
                    c.restart_count,
                    c.running_since()
                ));
            }
        }
        Ok(())
    });
    let limit = memory_capacity();
    let url = format!("http://127.0.0.1:{}/stats/summary", agent.ports().read_only);
    let fetch = || -> Result<Summary, String> {
        let (status, body) = agent.get(&url).map_err(|e| format!("{e:#}"))?;
        if status != 200 {
            return Err(format!("{status}: {body}"));
        }
        Ok(decode(&body))
    };
    // Upstream: Eventually within 180 s (polling every 15 s), then Consistently for 30 s.
    wait_until(
        "the summary to match upstream's expectations",
        Duration::from_secs(180),
        || {
            let problems = check_summary(&fetch()?, agent.node(), &pods, limit);
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems.join("\n"))
            }
        },
    );
    for _ in 0..3 {
        std::thread::sleep(Duration::from_secs(5));
        let problems = check_summary(&fetch().unwrap(), agent.node(), &pods, limit);
        assert!(
            problems.is_empty(),
            "the summary stopped matching:\n{}",
            problems.join("\n")
        );
    }

    // The kubelet API serves the same (anonymous allowed here), GET and POST.
    let port = agent.ports().kubelet;
    let (status, body) = curl(port, "GET", "/stats/summary", None);
    assert_eq!(status, 200, "{body}");
    let s = decode(&body);
    assert!(s.pods.iter().any(|p| p.pod_ref.name == pods[0]));

    // only_cpu_and_memory: CPU and memory kept, network, filesystems, volumes, rlimit left out.
    let small = |s: &Summary| {
        assert!(s.node.cpu.is_some() && s.node.memory.is_some());
        assert!(s.node.fs.is_none() && s.node.network.is_none() && s.node.runtime.is_none() && s.node.rlimit.is_none());
        let p = s.pods.iter().find(|p| p.pod_ref.name == pods[0]).expect("pod");
        assert!(p.cpu.is_some() && p.memory.is_some());
        assert!(p.network.is_none() && p.volume.is_empty() && p.ephemeral_storage.is_none());
        assert!(p.containers[0].rootfs.is_none() && p.containers[0].logs.is_none());
    };
    let (status, body) = agent.get(&format!("{url}?only_cpu_and_memory=true")).unwrap();
    assert_eq!(status, 200, "{body}");
    small(&decode(&body));
    let (status, body) = curl(port, "POST", "/stats/summary", Some(r#"{"only_cpu_and_memory":true}"#));
    assert_eq!(status, 200, "{body}");
    small(&decode(&body));
    let (status, body) = curl(port, "POST", "/stats/summary", Some(r#"{"only_cpu_and_memory":1}"#));
    assert_eq!(status, 400, "{body}");

    // The StatsActor shows on /debug/actors with its passes (the pass time is printed, never
    // asserted: no wall-clock bounds in tests).
    let actor = agent.actor("StatsActor", "stats").expect("StatsActor on /debug/actors");
    assert!(actor["detail"]["passes"].as_u64().unwrap() >= 5, "{actor}");
    eprintln!("stats housekeeping pass: {} ms", actor["detail"]["last_pass_ms"]);

    // A container's CPU and memory are its own cgroup's: the pod's include the sandbox.
    let s = fetch().unwrap();
    let by_name: BTreeMap<&str, &PodStats> = s.pods.iter().map(|p| (p.pod_ref.name.as_str(), p)).collect();
    let p = by_name[pods[0].as_str()];
    let pod_cpu = p.cpu.as_ref().unwrap().usage_core_nano_seconds.unwrap();
    let ct_cpu = p.containers[0].cpu.as_ref().unwrap().usage_core_nano_seconds.unwrap();
    assert!(pod_cpu >= ct_cpu, "pod {pod_cpu} < container {ct_cpu}");
}

/// `/stats/summary` on the kubelet API needs credentials (401) and authorization of the
/// `stats` subresource (403 with kubelet's message).
#[test]
fn the_kubelet_api_authenticates_and_authorizes_stats() {
    let manifests = ManifestDir::new();
    let agent = Agent::start("stats-auth-401", manifests.path(), &[]);
    let (status, body) = curl(agent.ports().kubelet, "GET", "/stats/summary", None);
    assert_eq!((status, body.as_str()), (401, "Unauthorized"));
    drop(agent);
    let agent = Agent::start("stats-auth-403", manifests.path(), &["--anonymous-auth"]);
    assert_eq!(
        curl(agent.ports().kubelet, "GET", "/stats/summary", None),
        (
            403,
            "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource=stats)".into()
        )
    );
}
