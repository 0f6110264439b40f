//! The kubelet's Summary API (`k8s.io/kubelet/pkg/apis/stats/v1alpha1`), as `/stats/summary`
//! serves it, and the query the StatsActor answers.
//!
//! Field names and JSON shapes follow the upstream types exactly: `Option` fields are Go's
//! `*T` with `omitempty` (left out when unknown, never served as 0), `Vec` fields with
//! `omitempty` are left out when empty, and times are RFC 3339 (`metav1.Time`). PSI, IO and swap
//! are the newer upstream fields (KEP 4205 and swap stats); they are filled only where the kernel
//! gives them (cgroup v2), so a cgroup v1 node's answer also decodes with the older types.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Names of the node's system containers (`SystemContainer*`).
pub mod system_container {
    /// The agent itself.
    pub const KUBELET: &str = "kubelet";
    /// The container runtime (dockerd and containerd).
    pub const RUNTIME: &str = "runtime";
    /// Processes outside Kubernetes.
    pub const MISC: &str = "misc";
    /// All pods (the `kubepods` cgroup).
    pub const PODS: &str = "pods";
}

/// The whole answer: the node and each pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Node-wide statistics.
    pub node: NodeStats,
    /// One entry per pod with a running sandbox.
    pub pods: Vec<PodStats>,
}

/// Node-wide statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    /// The node's name.
    pub node_name: String,
    /// `kubelet`, `runtime`, `pods` (and `misc` when known).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system_containers: Vec<ContainerStats>,
    /// When node-level collection started (the node's boot time, as cAdvisor reports the root).
    pub start_time: Time,
    /// CPU of the whole machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Memory of the whole machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The host's network interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    /// The filesystem holding the agent's root directory (nodefs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsStats>,
    /// The runtime's filesystems.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeStats>,
    /// Process limits of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rlimit: Option<RlimitStats>,
    /// Swap of the whole machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapStats>,
    /// IO pressure of the whole machine (PSI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoStats>,
}

/// Process limits of the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RlimitStats {
    /// When read.
    pub time: Time,
    /// `kernel.pid_max`.
    #[serde(default, rename = "maxpid", skip_serializing_if = "Option::is_none")]
    pub max_pid: Option<i64>,
    /// Processes (threads included, as the kernel counts them) now on the machine.
    #[serde(default, rename = "curproc", skip_serializing_if = "Option::is_none")]
    pub num_of_running_processes: Option<i64>,
}

/// The runtime's filesystems.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    /// Where images are stored; `usedBytes` is the bytes images take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_fs: Option<FsStats>,
    /// Where containers' writable layers are stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_fs: Option<FsStats>,
}

/// Process counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessStats {
    /// Processes in the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_count: Option<u64>,
}

/// One pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    /// Which pod.
    pub pod_ref: PodReference,
    /// When the pod's collection started (its sandbox's creation).
    pub start_time: Time,
    /// Its app containers (not the sandbox, not finished init containers).
    pub containers: Vec<ContainerStats>,
    /// The pod cgroup's CPU (all containers and overhead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// The pod cgroup's memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The pod's network namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    /// Its volumes (emptyDir and the API-object volumes).
    #[serde(default, rename = "volume", skip_serializing_if = "Vec::is_empty")]
    pub volume_stats: Vec<VolumeStats>,
    /// Containers' writable layers and logs plus emptyDir volumes on disk.
    #[serde(default, rename = "ephemeral-storage", skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<FsStats>,
    /// Process counts.
    #[serde(default, rename = "process_stats", skip_serializing_if = "Option::is_none")]
    pub process_stats: Option<ProcessStats>,
    /// The pod cgroup's swap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapStats>,
    /// The pod cgroup's IO pressure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoStats>,
}

/// One container (or a system container).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    /// The container's name in the pod spec (or the system container's name).
    pub name: String,
    /// When this container was started.
    pub start_time: Time,
    /// CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// GPUs and other accelerators (filled by the device work, empty until then).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accelerators: Vec<AcceleratorStats>,
    /// The writable layer: `usedBytes` is the layer's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<FsStats>,
    /// The container's log files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsStats>,
    /// Metrics the container exposes (none: dockerlet does not collect them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_defined_metrics: Vec<UserDefinedMetric>,
    /// Swap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapStats>,
    /// IO pressure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoStats>,
}

/// Which pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodReference {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
}

/// One network interface's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceStats {
    /// Interface name (`eth0`).
    pub name: String,
    /// Bytes received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_bytes: Option<u64>,
    /// Receive errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_errors: Option<u64>,
    /// Bytes sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_bytes: Option<u64>,
    /// Transmit errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_errors: Option<u64>,
}

/// Network counters: the default interface inline, then every interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkStats {
    /// When read.
    pub time: Time,
    /// The default interface (`eth0` in a pod).
    #[serde(flatten)]
    pub default: InterfaceStats,
    /// Every interface but loopback.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<InterfaceStats>,
}

/// CPU use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    /// When read.
    pub time: Time,
    /// Average use over the last housekeeping window, in nanocores (1e9 = one core).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    /// CPU time used since the cgroup was made, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_core_nano_seconds: Option<u64>,
    /// CPU pressure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi: Option<PsiStats>,
    /// Of `usage_core_nano_seconds`, in user mode: for `/metrics/cadvisor`'s
    /// `container_cpu_user_seconds_total`, not part of the Summary API's JSON.
    #[serde(skip)]
    pub user_nano_seconds: Option<u64>,
    /// In kernel mode (`container_cpu_system_seconds_total`), not in the JSON either.
    #[serde(skip)]
    pub system_nano_seconds: Option<u64>,
}

/// Memory use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    /// When read.
    pub time: Time,
    /// Limit − working set; left out without a limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// All memory charged, page cache included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<u64>,
    /// Usage − inactive file pages: what the OOM killer and eviction look at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    /// Anonymous and swap-cache memory.
    #[serde(default, rename = "rssBytes", skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// Minor page faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    /// Major page faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
    /// Memory pressure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi: Option<PsiStats>,
}

/// Swap use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SwapStats {
    /// When read.
    pub time: Time,
    /// Swap limit − swap used; left out without a limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_available_bytes: Option<u64>,
    /// Swap used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_usage_bytes: Option<u64>,
}

/// IO pressure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoStats {
    /// When read.
    pub time: Time,
    /// IO pressure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi: Option<PsiStats>,
}

/// Pressure stall information of one resource (`cpu.pressure`, `memory.pressure`, `io.pressure`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PsiStats {
    /// Some tasks stalled.
    #[serde(default)]
    pub some: PsiData,
    /// All tasks stalled.
    #[serde(default)]
    pub full: PsiData,
}

/// One line of a pressure file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PsiData {
    /// Total stall time, in microseconds as the kernel gives it.
    pub total: u64,
    /// Percentage stalled over the last 10 s.
    pub avg10: f64,
    /// … over the last 60 s.
    pub avg60: f64,
    /// … over the last 300 s.
    pub avg300: f64,
}

/// One accelerator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AcceleratorStats {
    /// Vendor.
    pub make: String,
    /// Model.
    pub model: String,
    /// Device ID.
    pub id: String,
    /// Memory, bytes.
    pub memory_total: u64,
    /// Memory in use, bytes.
    pub memory_used: u64,
    /// Percent of the last 10 s the device was busy.
    pub duty_cycle: u64,
}

/// One volume's use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStats {
    /// The volume's filesystem figures.
    #[serde(flatten)]
    pub fs: FsStats,
    /// `spec.volumes[].name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The claim behind it (none: dockerlet refuses PVCs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc_ref: Option<PvcReference>,
}

/// A PersistentVolumeClaim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PvcReference {
    /// Claim name.
    pub name: String,
    /// Claim namespace.
    pub namespace: String,
}

/// Filesystem figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    /// When read.
    pub time: Time,
    /// Bytes free for unprivileged users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// Size of the filesystem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    /// Bytes used by what is measured (not necessarily capacity − available).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    /// Free inodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
    /// All inodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    /// Inodes used by what is measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes_used: Option<u64>,
}

/// A metric a container exposes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserDefinedMetric {
    /// Metric name.
    pub name: String,
    /// `gauge`, `cumulative` or `delta`.
    #[serde(rename = "type")]
    pub metric_type: String,
    /// Display units.
    pub units: String,
    /// Labels.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// When read.
    pub time: Time,
    /// Value.
    pub value: f64,
}

/// The last housekeeping's results: the summary, the containers it covers (for cAdvisor's
/// labels) and the machine's size, for `/metrics/cadvisor`; one snapshot, shared.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsView {
    /// The summary `/stats/summary` serves.
    pub summary: Arc<Summary>,
    /// The app containers of the summary's pods.
    pub containers: Arc<Vec<ContainerRef>>,
    /// The machine.
    pub machine: MachineInfo,
    /// Block IO of the root cgroup, the pod cgroups and the containers (none of the Summary
    /// types carries it), for cAdvisor's `container_fs_{reads,writes}[_bytes]_total`.
    pub block_io: Arc<Vec<CgroupBlockIo>>,
    /// Figures of the pod cgroups and the containers that cAdvisor serves and no Summary type
    /// carries, from the same readings as the summary's.
    pub extras: Arc<Vec<CgroupExtras>>,
    /// The other cgroups cAdvisor has series of: the system containers that are one cgroup
    /// each, other than the root, and the QoS cgroups.
    pub other_cgroups: Arc<Vec<CgroupSeries>>,
    /// Each pod's sandbox (`container` `POD`, as cri-dockerd names it) with its figures, read
    /// more slowly than the rest: cAdvisor serves the pause containers too; the summary has
    /// no entry for them.
    pub sandboxes: Arc<Vec<(ContainerRef, ContainerStats)>>,
}

/// A cgroup with cAdvisor series of its own besides the root, the pods and the containers: a
/// system container that is one cgroup (`…/kubepods`, the agent's, the engine's,
/// `--system-cgroups`) or a QoS cgroup (`…/kubepods/burstable`, `…/kubepods/besteffort`).
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupSeries {
    /// The cgroup: cAdvisor's `id`.
    pub id: String,
    /// Its figures, as a summary's system container has them.
    pub stats: ContainerStats,
}

/// One cgroup's page cache, mapped files, swap and CFS throttling, as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupExtras {
    /// The cgroup: cAdvisor's `id`.
    pub cgroup: String,
    /// When it was read (the summary's time for the same cgroup).
    pub time: Time,
    /// Page cache bytes (`container_memory_cache`).
    pub cache_bytes: Option<u64>,
    /// Memory-mapped file bytes (`container_memory_mapped_file`).
    pub mapped_file_bytes: Option<u64>,
    /// Swap bytes (`container_memory_swap`).
    pub swap_bytes: Option<u64>,
    /// The swap limit as cAdvisor's `SwapLimit` (v1 memory + swap), where there is one
    /// (`container_spec_memory_swap_limit_bytes`).
    pub swap_limit_bytes: Option<u64>,
    /// CFS enforcement periods, throttled periods and throttled nanoseconds (with a CPU quota).
    pub cfs: Option<CfsStats>,
}

/// CFS bandwidth control figures (`container_cpu_cfs_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CfsStats {
    /// Enforcement periods elapsed.
    pub periods: u64,
    /// Periods in which the cgroup was throttled.
    pub throttled_periods: u64,
    /// Time throttled, in nanoseconds.
    pub throttled_ns: u64,
}

/// One cgroup's block IO per device, as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupBlockIo {
    /// The cgroup (`/`, `/kubepods/burstable/pod<uid>`, …): cAdvisor's `id`.
    pub cgroup: String,
    /// When it was read.
    pub time: Time,
    /// The devices with IO.
    pub devices: Vec<DeviceBlockIo>,
}

/// Bytes and operations on one block device (cAdvisor's `DiskIo` Read and Write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceBlockIo {
    /// The device's node (`/dev/vda`); empty when the kernel does not name it.
    pub device: String,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
}

/// The machine's size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MachineInfo {
    /// Logical CPUs.
    pub cpu_cores: Option<u64>,
    /// Installed memory in bytes.
    pub memory_bytes: Option<u64>,
}

/// The last housekeeping's summary, from the StatsActor; `None` before the first one finished.
/// Cheap: the summary is shared, not copied.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "Option<Arc<Summary>>"))]
pub struct GetStatsSummary;

/// A summary read now: the StatsActor runs a pass (or waits for the one under way) and answers
/// with it; none when the pass fails or before the first relist. kubelet's eviction manager
/// takes its summary so (`updateStats = true`), so a pod that just started is ranked by its use.
///
/// EvictionActor → StatsActor.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "Option<Arc<Summary>>"))]
pub struct GetFreshStatsSummary;

/// Which Docker container a [`Summary`] entry (pod reference + container name) is, for the
/// labels of cAdvisor's `container_*` series (`id`, `name`, `image`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerRef {
    /// The pod's UID (as in `podRef.uid`).
    pub pod_uid: String,
    /// `spec.containers[].name` (as in `containers[].name`).
    pub container: String,
    /// Docker's container ID.
    pub id: String,
    /// Docker's container name (`k8s_<container>_<pod>_<ns>_<uid>_<attempt>`).
    pub docker_name: String,
    /// The image reference it was created from.
    pub image: String,
    /// The image ID (`sha256:…`).
    pub image_id: String,
    /// Its cgroup (`/kubepods/burstable/pod<uid>/<id>`): cAdvisor's `id`.
    pub cgroup: String,
    /// Its pod's cgroup (`/kubepods/burstable/pod<uid>`); empty when the pod has none.
    pub pod_cgroup: String,
}

/// The last housekeeping's [`StatsView`], from the StatsActor; `None` before the first one
/// finished.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "Option<Arc<StatsView>>"))]
pub struct GetStatsView;

impl Summary {
    /// The answer to `only_cpu_and_memory=true`: as kubelet's `summaryProvider.GetCPUAndMemoryStats`,
    /// the node's and each pod's and container's CPU and memory (and the system containers');
    /// network, filesystems, volumes, rlimit and process counts left out.
    pub fn cpu_and_memory(&self) -> Summary {
        let keep = |c: &ContainerStats| ContainerStats {
            name: c.name.clone(),
            start_time: c.start_time.clone(),
            cpu: c.cpu.clone(),
            memory: c.memory.clone(),
            accelerators: Vec::new(),
            rootfs: None,
            logs: None,
            user_defined_metrics: Vec::new(),
            swap: c.swap.clone(),
            io: None,
        };
        Summary {
            node: NodeStats {
                node_name: self.node.node_name.clone(),
                system_containers: self.node.system_containers.iter().map(keep).collect(),
                start_time: self.node.start_time.clone(),
                cpu: self.node.cpu.clone(),
                memory: self.node.memory.clone(),
                network: None,
                fs: None,
                runtime: None,
                rlimit: None,
                swap: self.node.swap.clone(),
                io: None,
            },
            pods: self
                .pods
                .iter()
                .map(|p| PodStats {
                    pod_ref: p.pod_ref.clone(),
                    start_time: p.start_time.clone(),
                    containers: p.containers.iter().map(keep).collect(),
                    cpu: p.cpu.clone(),
                    memory: p.memory.clone(),
                    network: None,
                    volume_stats: Vec::new(),
                    ephemeral_storage: None,
                    process_stats: None,
                    swap: p.swap.clone(),
                    io: None,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time() -> Time {
        serde_json::from_str("\"2026-12-01T10:00:00Z\"").unwrap()
    }

    #[test]
    fn unknown_values_are_left_out_and_names_are_upstream() {
        let fs = FsStats {
            time: time(),
            available_bytes: Some(1),
            capacity_bytes: None,
            used_bytes: Some(0),
            inodes_free: None,
            inodes: None,
            inodes_used: Some(3),
        };
        let s = Summary {
            node: NodeStats {
                node_name: "n1".into(),
                system_containers: Vec::new(),
                start_time: time(),
                cpu: Some(CpuStats {
                    time: time(),
                    usage_nano_cores: Some(5),
                    usage_core_nano_seconds: None,
                    psi: None,
                    user_nano_seconds: Some(7),
                    system_nano_seconds: None,
                }),
                memory: None,
                network: Some(NetworkStats {
                    time: time(),
                    default: InterfaceStats {
                        name: "eth0".into(),
                        rx_bytes: Some(7),
                        ..Default::default()
                    },
                    interfaces: Vec::new(),
                }),
                fs: Some(fs.clone()),
                runtime: None,
                rlimit: Some(RlimitStats {
                    time: time(),
                    max_pid: Some(4194304),
                    num_of_running_processes: Some(300),
                }),
                swap: None,
                io: None,
            },
            pods: vec![PodStats {
                pod_ref: PodReference {
                    name: "p".into(),
                    namespace: "ns".into(),
                    uid: "u".into(),
                },
                start_time: time(),
                containers: Vec::new(),
                cpu: None,
                memory: None,
                network: None,
                volume_stats: vec![VolumeStats {
                    fs,
                    name: "scratch".into(),
                    pvc_ref: None,
                }],
                ephemeral_storage: None,
                process_stats: Some(ProcessStats { process_count: Some(2) }),
                swap: None,
                io: None,
            }],
        };
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "node": {
                    "nodeName": "n1",
                    "startTime": "2026-12-01T10:00:00Z",
                    "cpu": {"time": "2026-12-01T10:00:00Z", "usageNanoCores": 5},
                    "network": {"time": "2026-12-01T10:00:00Z", "name": "eth0", "rxBytes": 7},
                    "fs": {"time": "2026-12-01T10:00:00Z", "availableBytes": 1, "usedBytes": 0, "inodesUsed": 3},
                    "rlimit": {"time": "2026-12-01T10:00:00Z", "maxpid": 4194304, "curproc": 300}
                },
                "pods": [{
                    "podRef": {"name": "p", "namespace": "ns", "uid": "u"},
                    "startTime": "2026-12-01T10:00:00Z",
                    "containers": [],
                    "volume": [{"time": "2026-12-01T10:00:00Z", "availableBytes": 1, "usedBytes": 0, "inodesUsed": 3, "name": "scratch"}],
                    "process_stats": {"process_count": 2}
                }]
            })
        );
        let back: Summary = serde_json::from_value(json).unwrap();
        // The user/system split is not in the JSON, so it does not come back.
        let mut expected = s.clone();
        if let Some(cpu) = expected.node.cpu.as_mut() {
            cpu.user_nano_seconds = None;
        }
        assert_eq!(back, expected);
        let small = serde_json::to_value(s.cpu_and_memory()).unwrap();
        assert!(small["node"].get("fs").is_none() && small["node"].get("rlimit").is_none());
        assert!(small["pods"][0].get("volume").is_none());
        assert_eq!(small["node"]["cpu"]["usageNanoCores"], 5);
    }
}
