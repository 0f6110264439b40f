//! One housekeeping pass: every reader of `dockerlet_host` (cgroups, /proc, statvfs, disk use)
//! turned into a [`Summary`]. Blocking; the StatsActor runs it on `spawn_blocking` and keeps the
//! [`Collector`] (previous CPU samples, slowly refreshed disk use) between passes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dockerlet_host::cgroup::stats::{self as cgstats, CgroupPath, CgroupStats, MemoryUsage, StatsError};
use dockerlet_host::cgroup::CgroupLayout;
use dockerlet_host::node_stats::{self, DirUsage, FsFigures};
use dockerlet_messages::runtime::{ContainerRole, ObservedContainer};
use dockerlet_messages::stats::{
    system_container, CgroupBlockIo, CgroupExtras, CgroupSeries, ContainerRef, ContainerStats, CpuStats, DeviceBlockIo,
    FsStats, InterfaceStats, IoStats, MemoryStats, NetworkStats, NodeStats, PodReference, PodStats, ProcessStats,
    PsiStats, RlimitStats, RuntimeStats, Summary, SwapStats, VolumeStats,
};
use dockerlet_pod::cgroup::{CgroupDriver, CgroupNaming};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Writable layers, emptyDir volumes and the image store are walked at most this often; the
/// figures in between are the last walk's (kubelet's volume stats: every minute).
pub const SLOW_REFRESH: Duration = Duration::from_secs(60);

/// The image store is walked at most this often.
const IMAGE_FS_REFRESH: Duration = Duration::from_secs(300);

/// A cgroup's block IO is read again at most this often (two more files per cgroup; only
/// `/metrics/cadvisor` serves it, each sample with the time it was read).
pub const BLOCK_IO_REFRESH: Duration = Duration::from_secs(30);
/// How long a sandbox's cgroup reading serves: a pause container's figures hardly move, and
/// its pod's are read from the pod cgroup every pass, so its own series are refreshed slowly.
pub const SANDBOX_REFRESH: Duration = Duration::from_secs(30);

/// Where things are on this node.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The node's name (`node.nodeName`).
    pub node_name: String,
    /// `--root-dir`: nodefs, and the pods' volume directories.
    pub root_dir: PathBuf,
    /// Docker's root directory (`docker info`), when readable here: imagefs and containerfs,
    /// writable layers and log files.
    pub docker_root: Option<PathBuf>,
    /// The cgroup filesystems; none: no cgroup figures (the node's still are).
    pub layout: Option<CgroupLayout>,
    /// The system containers' cgroups as configured.
    pub system: SystemCgroupNames,
    /// The engine's cgroup driver: where Docker puts a container with no `CgroupParent`.
    pub engine_cgroup_driver: CgroupDriver,
}

/// The cgroups of the system containers given by flags; where none is given, `kubelet` is the
/// agent's own cgroup, `runtime` dockerd's and containerd's, and there is no `misc`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SystemCgroupNames {
    /// `--kubelet-cgroups`.
    pub kubelet: Option<String>,
    /// `--runtime-cgroups`.
    pub runtime: Option<String>,
    /// `--system-cgroups`: the `misc` system container.
    pub misc: Option<String>,
}

#[derive(Debug, Clone, Copy)]
struct CpuSample {
    ns: u64,
    at: Instant,
}

/// The state kept between passes.
pub struct Collector {
    paths: Paths,
    /// The last CPU reading per key (`node`, `sys:kubelet`, `pod:<uid>`, a container ID), for
    /// usageNanoCores.
    cpu: HashMap<String, CpuSample>,
    /// The last disk-use walk per directory, and when.
    disk: HashMap<PathBuf, (Option<DirUsage>, Instant)>,
    /// Keys already logged as skipped, so each is logged once.
    warned: HashSet<String>,
    /// dockerd's and containerd's PIDs; looked up again when their cgroups cannot be read.
    runtime_pids: Vec<u32>,
    /// When the agent started (the `kubelet` system container's start).
    agent_started: Timestamp,
    /// When the machine booted (the node's start); read once.
    boot: Option<Timestamp>,
    /// The machine's CPUs in nanocores: no rate is above it (a rate over a short window with
    /// tick-granular counters can come out a little over, and is clamped).
    max_nano_cores: Option<u64>,
    /// The last block-IO reading per cgroup (none: unreadable), and when.
    block_io: HashMap<String, (Option<CgroupBlockIo>, Instant)>,
    /// Block device names by number (`/dev/vda`), looked up once.
    devices: HashMap<(u32, u32), String>,
    /// The last reading of each sandbox's cgroup (none: unreadable), and when.
    sandboxes: HashMap<String, (Option<ContainerStats>, Instant)>,
}

/// The result of a pass.
pub struct Collected {
    /// The summary.
    pub summary: Summary,
    /// The containers in it.
    pub containers: Vec<ContainerRef>,
    /// Block IO of the root cgroup, the pod cgroups and the containers.
    pub block_io: Vec<CgroupBlockIo>,
    /// cAdvisor's other figures of the pod cgroups and the containers.
    pub extras: Vec<CgroupExtras>,
    /// The system containers that are one cgroup each, other than the root, and the QoS
    /// cgroups, for their cAdvisor series.
    pub other_cgroups: Vec<CgroupSeries>,
    /// Each pod's sandbox with its figures (read every [`SANDBOX_REFRESH`]), for cAdvisor's
    /// `container="POD"` series.
    pub sandboxes: Vec<(ContainerRef, ContainerStats)>,
}

impl Collector {
    /// A collector with no history.
    pub fn new(paths: Paths) -> Self {
        Collector {
            paths,
            cpu: HashMap::new(),
            disk: HashMap::new(),
            warned: HashSet::new(),
            runtime_pids: Vec::new(),
            agent_started: Timestamp::now(),
            boot: None,
            max_nano_cores: node_stats::online_cpus().map(|n| n.saturating_mul(1_000_000_000)),
            block_io: HashMap::new(),
            devices: HashMap::new(),
            sandboxes: HashMap::new(),
        }
    }

    /// One pass over the node and the pods with a running sandbox among `running`.
    pub fn collect(&mut self, running: &[ObservedContainer]) -> Collected {
        let now = Instant::now();
        let time = Time(Timestamp::now());
        let mut seen = HashSet::new();
        let nodefs = node_stats::filesystem(&self.paths.root_dir);
        let docker_fs = self.paths.docker_root.as_deref().and_then(node_stats::filesystem);
        let containerfs = docker_fs.or(nodefs);

        let mut by_pod: BTreeMap<&str, Vec<&ObservedContainer>> = BTreeMap::new();
        for c in running {
            by_pod.entry(c.pod_uid.0.as_str()).or_default().push(c);
        }
        let mut pods = Vec::new();
        let mut pod_cgroups = Vec::new();
        let mut refs = Vec::new();
        let mut extras = Vec::new();
        let mut sandboxes = Vec::new();
        let mut kubepods = None;
        for (uid, containers) in &by_pod {
            let Some(sandbox) = containers.iter().find(|c| c.role == ContainerRole::Sandbox) else {
                continue;
            };
            if kubepods.is_none() {
                kubepods = kubepods_of(&sandbox.cgroup_parent);
            }
            let pod_cgroup = pod_cgroup_of(uid, containers);
            let pod = self.pod(uid, sandbox, containers, &time, now, nodefs, containerfs, &mut seen);
            pod_cgroups.push(pod.cgroup);
            pods.push(pod.stats);
            extras.extend(pod.extras);
            let pod_cgroup = pod_cgroup.unwrap_or_default();
            refs.extend(
                containers
                    .iter()
                    .filter(|c| c.role != ContainerRole::Sandbox)
                    .map(|c| container_ref(c, &pod_cgroup, self.paths.engine_cgroup_driver)),
            );
            if let Some(stats) = self.sandbox(sandbox, now) {
                sandboxes.push((
                    container_ref(sandbox, &pod_cgroup, self.paths.engine_cgroup_driver),
                    stats,
                ));
            }
        }
        self.sandboxes
            .retain(|id, _| sandboxes.iter().any(|(r, _)| &r.id == id));
        let (node, other_cgroups) = self.node(&time, now, nodefs, docker_fs, kubepods, &pod_cgroups, &mut seen);
        let block_io = self.block_io(&refs, now);
        self.cpu.retain(|k, _| seen.contains(k));
        // Forget what was logged about containers and pods that are gone (so the set stays
        // bounded); node-level keys stay.
        let alive: HashSet<String> = running
            .iter()
            .flat_map(|c| [c.id.0.clone(), format!("pod:{}", c.pod_uid.0)])
            .collect();
        self.warned.retain(|k| {
            if let Some(cgroup) = k.strip_prefix("blkio:") {
                return self.block_io.contains_key(cgroup);
            }
            let base = k.strip_suffix(":backwards").unwrap_or(k);
            base.starts_with("sys:") || base == "node" || alive.contains(base)
        });
        self.disk
            .retain(|_, (_, at)| now.duration_since(*at) < IMAGE_FS_REFRESH * 2);
        Collected {
            summary: Summary { node, pods },
            containers: refs,
            block_io,
            extras,
            other_cgroups,
            sandboxes,
        }
    }

    /// The sandbox's cgroup figures, read again every [`SANDBOX_REFRESH`] (each carries the
    /// time it was read). No CPU rate: cAdvisor's series need only the counter.
    fn sandbox(&mut self, sandbox: &ObservedContainer, now: Instant) -> Option<ContainerStats> {
        let layout = self.paths.layout.clone()?;
        let fresh = self
            .sandboxes
            .get(sandbox.id.0.as_str())
            .is_some_and(|(_, at)| now.duration_since(*at) < SANDBOX_REFRESH);
        if !fresh {
            let time = Time(Timestamp::now());
            let cgroup = CgroupPath::Same(container_cgroup(sandbox, self.paths.engine_cgroup_driver));
            let stats = self
                .read_cgroup(&layout, &cgroup, sandbox.id.0.as_str())
                .map(|s| ContainerStats {
                    name: sandbox.name.clone(),
                    start_time: sandbox
                        .started_at
                        .clone()
                        .or_else(|| sandbox.created_at.clone())
                        .unwrap_or_else(|| time.clone()),
                    cpu: cgroup_cpu(&time, &s, None),
                    memory: s.memory.map(|m| memory_stats(&time, m, None)),
                    accelerators: Vec::new(),
                    rootfs: None,
                    logs: None,
                    user_defined_metrics: Vec::new(),
                    swap: swap_stats(&time, &s),
                    io: None,
                });
            self.sandboxes.insert(sandbox.id.0.clone(), (stats, now));
        }
        self.sandboxes.get(sandbox.id.0.as_str()).and_then(|(s, _)| s.clone())
    }

    #[allow(clippy::too_many_arguments)]
    fn node(
        &mut self,
        time: &Time,
        now: Instant,
        nodefs: Option<FsFigures>,
        docker_fs: Option<FsFigures>,
        kubepods: Option<String>,
        pods: &[PodCgroup],
        seen: &mut HashSet<String>,
    ) -> (NodeStats, Vec<CgroupSeries>) {
        if self.boot.is_none() {
            self.boot = node_stats::boot_time_secs().and_then(|s| Timestamp::from_second(s as i64).ok());
        }
        let boot = self.boot.unwrap_or(self.agent_started);
        let memory = node_stats::node_memory();
        // The root cgroup's exact counter, as cAdvisor's `/`; `/proc/stat`'s clock ticks only
        // where the cgroup has none (under another key: the two counters differ).
        let root = match self.paths.layout.as_ref().map(cgstats::root_cpu_ns) {
            Some(Ok(ns)) => ns,
            Some(Err(e)) => {
                self.warn_once(
                    "sys:root-cpu",
                    &format!("root cgroup CPU unreadable ({e}); /proc/stat used"),
                );
                None
            }
            None => None,
        };
        let cpu = match root {
            Some(ns) => Some(("node", ns)),
            None => node_stats::node_cpu_ns().map(|ns| ("node:proc", ns)),
        }
        .map(|(key, ns)| {
            let rate = self.rate(key, ns, now, None, seen);
            cpu_stats(time, Some(ns), rate, None)
        });
        let network = node_stats::interfaces(None).map(|ifaces| {
            let default = node_stats::default_interface();
            network_stats(time, ifaces, default.as_deref())
        });
        let (max_pid, procs) = node_stats::rlimit();
        let image_fs = docker_fs.or(nodefs).map(|fs| {
            let used = self
                .paths
                .docker_root
                .clone()
                .and_then(|root| self.disk_usage(&root.join("overlay2"), now, IMAGE_FS_REFRESH))
                .map(|u| u.bytes)
                .unwrap_or(fs.used);
            fs_stats(time, fs, Some(used), Some(fs.inodes.saturating_sub(fs.inodes_free)))
        });
        let container_fs = docker_fs.or(nodefs).map(|fs| {
            let used = pods.iter().map(|p| p.writable_layers).sum::<u64>();
            fs_stats(time, fs, Some(used), Some(fs.inodes.saturating_sub(fs.inodes_free)))
        });
        let capacity = memory.map(|m| m.capacity);
        let (system_containers, other_cgroups) =
            self.system_containers(time, now, Time(boot), kubepods, pods, capacity, seen);
        let node = NodeStats {
            node_name: self.paths.node_name.clone(),
            system_containers,
            start_time: Time(boot),
            cpu,
            memory: memory.map(|m| MemoryStats {
                time: time.clone(),
                available_bytes: Some(m.capacity.saturating_sub(m.working_set)),
                usage_bytes: Some(m.usage),
                working_set_bytes: Some(m.working_set),
                rss_bytes: Some(m.rss),
                page_faults: Some(m.page_faults),
                major_page_faults: Some(m.major_page_faults),
                psi: None,
            }),
            network,
            fs: nodefs.map(|fs| fs_stats(time, fs, Some(fs.used), Some(fs.inodes.saturating_sub(fs.inodes_free)))),
            runtime: Some(RuntimeStats { image_fs, container_fs }),
            rlimit: Some(RlimitStats {
                time: time.clone(),
                max_pid: max_pid.map(|v| v as i64),
                num_of_running_processes: procs.map(|v| v as i64),
            }),
            // The root container's swap: its limit is the machine's swap, as cAdvisor's.
            swap: memory.map(|m| SwapStats {
                time: time.clone(),
                swap_available_bytes: Some(m.swap_capacity.saturating_sub(m.swap_usage)),
                swap_usage_bytes: Some(m.swap_usage),
            }),
            io: None,
        };
        (node, other_cgroups)
    }

    /// `kubelet` (`--kubelet-cgroups`, else the agent's cgroup), `runtime` (`--runtime-cgroups`,
    /// else dockerd's and containerd's), `misc` (`--system-cgroups`, only when given), `pods` (the
    /// kubepods cgroup, else the sum of the pods); and those that are one cgroup other than the
    /// root, each cgroup once: (name, cgroup).
    #[allow(clippy::too_many_arguments)]
    fn system_containers(
        &mut self,
        time: &Time,
        now: Instant,
        boot: Time,
        kubepods: Option<String>,
        pods: &[PodCgroup],
        memory_capacity: Option<u64>,
        seen: &mut HashSet<String>,
    ) -> (Vec<ContainerStats>, Vec<CgroupSeries>) {
        let Some(layout) = self.paths.layout.clone() else {
            return (Vec::new(), Vec::new());
        };
        let mut out = Vec::new();
        let mut cgroups = Vec::new();
        let names = self.paths.system.clone();
        let kubelet = match names.kubelet {
            Some(cgroup) => Some(CgroupPath::Same(cgroup)),
            None => node_stats::process_cgroup(std::process::id()),
        };
        if let Some(path) = kubelet {
            if let Some(s) = self.read_cgroup(&layout, &path, "sys:kubelet") {
                cgroups.push((system_container::KUBELET, path.id().map(str::to_string)));
                out.push(self.system(
                    system_container::KUBELET,
                    Time(self.agent_started),
                    &s,
                    None,
                    time,
                    now,
                    seen,
                ));
            }
        }
        let runtime = match names.runtime {
            Some(cgroup) => self
                .read_cgroup(&layout, &CgroupPath::Same(cgroup.clone()), "sys:runtime")
                .map(|s| (s, Some(cgroup))),
            None => self.runtime_cgroups(&layout),
        };
        if let Some((s, id)) = runtime {
            cgroups.push((system_container::RUNTIME, id));
            out.push(self.system(system_container::RUNTIME, boot.clone(), &s, None, time, now, seen));
        }
        if let Some(cgroup) = names.misc {
            if let Some(s) = self.read_cgroup(&layout, &CgroupPath::Same(cgroup.clone()), "sys:misc") {
                cgroups.push((system_container::MISC, Some(cgroup)));
                out.push(self.system(system_container::MISC, boot.clone(), &s, None, time, now, seen));
            }
        }
        let qos_parent = kubepods.clone();
        let pods_stats = match &kubepods {
            Some(cgroup) => self.read_cgroup(&layout, &CgroupPath::Same(cgroup.clone()), "sys:pods"),
            None => Some(CgroupStats::sum(pods.iter().map(|p| &p.stats))),
        };
        if let Some(mut s) = pods_stats {
            cgroups.push((system_container::PODS, kubepods));
            if let Some(m) = s.memory.as_mut() {
                m.limit = m.limit.or(memory_capacity);
            }
            let rate = (!pods.is_empty() && pods.iter().all(|p| p.rate.is_some()))
                .then(|| pods.iter().filter_map(|p| p.rate).sum::<u64>());
            out.push(self.system(system_container::PODS, boot.clone(), &s, rate, time, now, seen));
        }
        // Each cgroup once, and never the root (which has its own series): in a container or
        // under no service manager the agent and the engine may well be in `/`.
        let mut other: Vec<CgroupSeries> = Vec::new();
        for (name, id) in cgroups {
            let Some(id) = id.filter(|id| id != "/" && !other.iter().any(|c| &c.id == id)) else {
                continue;
            };
            if let Some(stats) = out.iter().find(|s| s.name == name) {
                other.push(CgroupSeries {
                    id,
                    stats: stats.clone(),
                });
            }
        }
        // The QoS cgroups of the kubepods tree, which cAdvisor watches as every cgroup.
        for qos in qos_parent
            .iter()
            .flat_map(|k| ["burstable", "besteffort"].map(|q| (k, q)))
        {
            let id = format!("{}/{}", qos.0.trim_end_matches('/'), qos.1);
            let key = format!("sys:{}", qos.1);
            if let Some(s) = self.read_cgroup(&layout, &CgroupPath::Same(id.clone()), &key) {
                let stats = self.system(qos.1, boot.clone(), &s, None, time, now, seen);
                other.push(CgroupSeries { id, stats });
            }
        }
        (out, other)
    }

    #[allow(clippy::too_many_arguments)]
    fn system(
        &mut self,
        name: &str,
        start: Time,
        s: &CgroupStats,
        summed_rate: Option<u64>,
        time: &Time,
        now: Instant,
        seen: &mut HashSet<String>,
    ) -> ContainerStats {
        let key = format!("sys:{name}");
        let rate = match s.cpu_usage_ns {
            Some(ns) => self.rate(&key, ns, now, None, seen).or(summed_rate),
            None => None,
        };
        ContainerStats {
            name: name.to_string(),
            start_time: start,
            cpu: cgroup_cpu(time, s, rate),
            memory: s.memory.map(|m| memory_stats(time, m, s.memory_psi.clone())),
            accelerators: Vec::new(),
            rootfs: None,
            logs: None,
            user_defined_metrics: Vec::new(),
            swap: swap_stats(time, s),
            io: io_stats(time, &s.io_psi),
        }
    }

    /// dockerd's and containerd's cgroups, summed (once when they share one), and the cgroup
    /// when it is one.
    fn runtime_cgroups(&mut self, layout: &CgroupLayout) -> Option<(CgroupStats, Option<String>)> {
        for attempt in 0..2 {
            if self.runtime_pids.is_empty() || attempt == 1 {
                self.runtime_pids = node_stats::find_processes(&["dockerd", "containerd"]);
            }
            let mut paths: Vec<CgroupPath> = Vec::new();
            for pid in &self.runtime_pids {
                if let Some(p) = node_stats::process_cgroup(*pid) {
                    if !paths.contains(&p) {
                        paths.push(p);
                    }
                }
            }
            let read: Vec<CgroupStats> = paths.iter().filter_map(|p| cgstats::read(layout, p).ok()).collect();
            if !read.is_empty() && read.len() == paths.len() {
                let id = match &paths[..] {
                    [one] => one.id().map(str::to_string),
                    _ => None,
                };
                return Some((CgroupStats::sum(read.iter()), id));
            }
        }
        self.warn_once("sys:runtime", "cannot read the cgroups of dockerd and containerd");
        None
    }

    #[allow(clippy::too_many_arguments)]
    fn pod(
        &mut self,
        uid: &str,
        sandbox: &ObservedContainer,
        containers: &[&ObservedContainer],
        time: &Time,
        now: Instant,
        nodefs: Option<FsFigures>,
        containerfs: Option<FsFigures>,
        seen: &mut HashSet<String>,
    ) -> Pod {
        let span = tracing::debug_span!(
            "pod",
            pod.uid = uid,
            pod.name = %format_args!("{}/{}", sandbox.pod_namespace, sandbox.pod_name)
        );
        let _entered = span.enter();
        let layout = self.paths.layout.clone();
        let mut container_stats = Vec::new();
        let mut reads = Vec::new();
        let mut rates = Vec::new();
        let mut ephemeral = DirUsage::default();
        let mut writable_layers = 0;
        let mut extras = Vec::new();
        let mut app_limits = Some(0u64);
        // The pod cgroup when the containers are under one (the kubepods tree), else their sum.
        let pod_cgroup = pod_cgroup_of(uid, containers);
        for c in containers {
            // With a pod cgroup the sandbox's own figures are not needed (the summary has no
            // entry for it): one cgroup fewer to read per pod.
            if c.role == ContainerRole::Sandbox && pod_cgroup.is_some() {
                continue;
            }
            let id = container_cgroup(c, self.paths.engine_cgroup_driver);
            let cgroup = layout
                .as_ref()
                .and_then(|l| self.read_cgroup(l, &CgroupPath::Same(id.clone()), c.id.0.as_str()));
            let rate = match cgroup.as_ref().and_then(|s| s.cpu_usage_ns) {
                Some(ns) => {
                    let since = c.started_at.as_ref().and_then(|t| elapsed_since(&t.0));
                    self.rate(c.id.0.as_str(), ns, now, since, seen)
                }
                None => None,
            };
            rates.push(rate);
            if let Some(s) = &cgroup {
                reads.push(s.clone());
            }
            // Every running container but the sandbox has its entry, as kubelet's CRI stats
            // provider lists them: app containers, sidecars (and init containers while they
            // run), ephemeral containers.
            if c.role == ContainerRole::Sandbox {
                continue;
            }
            if let Some(s) = &cgroup {
                extras.push(cgroup_extras(id, time, s));
            }
            app_limits = match (app_limits, cgroup.as_ref().and_then(|s| s.memory).and_then(|m| m.limit)) {
                (Some(sum), Some(limit)) => Some(sum + limit),
                _ => None,
            };
            let (rootfs, logs) = self.container_fs(c, now);
            writable_layers += rootfs.map_or(0, |u| u.bytes);
            ephemeral = ephemeral + rootfs.unwrap_or_default() + logs.unwrap_or_default();
            let fs_of = |u: Option<DirUsage>| {
                containerfs
                    .zip(u)
                    .map(|(fs, u)| fs_stats(time, fs, Some(u.bytes), Some(u.inodes)))
            };
            let logs_fs = nodefs
                .or(containerfs)
                .zip(logs)
                .map(|(fs, u)| fs_stats(time, fs, Some(u.bytes), Some(u.inodes)));
            container_stats.push(ContainerStats {
                name: c.name.clone(),
                start_time: c
                    .started_at
                    .clone()
                    .or_else(|| c.created_at.clone())
                    .unwrap_or_else(|| time.clone()),
                cpu: cgroup.as_ref().and_then(|s| cgroup_cpu(time, s, rate)),
                memory: cgroup
                    .as_ref()
                    .and_then(|s| s.memory.map(|m| memory_stats(time, m, s.memory_psi.clone()))),
                accelerators: Vec::new(),
                rootfs: fs_of(rootfs),
                logs: logs_fs,
                user_defined_metrics: Vec::new(),
                swap: cgroup.as_ref().and_then(|s| swap_stats(time, s)),
                io: cgroup.as_ref().and_then(|s| io_stats(time, &s.io_psi)),
            });
        }
        container_stats.sort_by(|a, b| a.name.cmp(&b.name));

        let (pod, pod_rate) = match (&layout, pod_cgroup) {
            (Some(l), Some(cgroup)) => {
                let key = format!("pod:{uid}");
                let s = self.read_cgroup(l, &CgroupPath::Same(cgroup.clone()), &key);
                if let Some(s) = &s {
                    extras.push(cgroup_extras(cgroup, time, s));
                }
                let rate = s
                    .as_ref()
                    .and_then(|s| s.cpu_usage_ns)
                    .and_then(|ns| self.rate(&key, ns, now, None, seen));
                (s, rate)
            }
            (Some(_), None) if !reads.is_empty() => {
                let mut s = CgroupStats::sum(reads.iter());
                if let Some(m) = s.memory.as_mut() {
                    m.limit = app_limits.filter(|l| *l > 0);
                }
                let rate = rates.iter().all(Option::is_some).then(|| rates.iter().flatten().sum());
                (Some(s), rate)
            }
            _ => (None, None),
        };

        let volumes = self.volumes(uid, time, now);
        for (usage, on_nodefs) in volumes.iter().map(|v| (v.1, v.2)) {
            if on_nodefs {
                ephemeral = ephemeral + usage;
            }
        }
        let stats = PodStats {
            pod_ref: PodReference {
                name: sandbox.pod_name.clone(),
                namespace: sandbox.pod_namespace.clone(),
                uid: uid.to_string(),
            },
            start_time: sandbox.created_at.clone().unwrap_or_else(|| time.clone()),
            containers: container_stats,
            cpu: pod.as_ref().and_then(|s| cgroup_cpu(time, s, pod_rate)),
            memory: pod
                .as_ref()
                .and_then(|s| s.memory.map(|m| memory_stats(time, m, s.memory_psi.clone()))),
            network: sandbox
                .pid
                .and_then(|pid| node_stats::interfaces(Some(pid)))
                .map(|ifaces| network_stats(time, ifaces, Some("eth0"))),
            volume_stats: volumes.into_iter().map(|v| v.0).collect(),
            ephemeral_storage: nodefs.map(|fs| fs_stats(time, fs, Some(ephemeral.bytes), Some(ephemeral.inodes))),
            process_stats: pod
                .as_ref()
                .and_then(|s| s.pids)
                .map(|n| ProcessStats { process_count: Some(n) }),
            swap: pod.as_ref().and_then(|s| swap_stats(time, s)),
            io: pod.as_ref().and_then(|s| io_stats(time, &s.io_psi)),
        };
        Pod {
            stats,
            extras,
            cgroup: PodCgroup {
                stats: pod.unwrap_or_default(),
                rate: pod_rate,
                writable_layers,
            },
        }
    }

    /// A container's writable layer (walked at most every [`SLOW_REFRESH`]) and log files.
    fn container_fs(&mut self, c: &ObservedContainer, now: Instant) -> (Option<DirUsage>, Option<DirUsage>) {
        let Some(root) = self.paths.docker_root.clone() else {
            return (None, None);
        };
        let rootfs = node_stats::writable_layer_dir(&root, c.id.0.as_str())
            .and_then(|dir| self.disk_usage(&dir, now, SLOW_REFRESH));
        let logs = node_stats::container_logs_usage(&root, c.id.0.as_str());
        (rootfs, logs)
    }

    /// The pod's emptyDir volumes with their use and whether they are on nodefs (not tmpfs).
    fn volumes(&mut self, uid: &str, time: &Time, now: Instant) -> Vec<(VolumeStats, DirUsage, bool)> {
        let dir = dockerlet_pod::volume::pod_dir(&self.paths.root_dir, uid)
            .join("volumes")
            .join(dockerlet_pod::volume::EMPTY_DIR_PLUGIN);
        let mut out = Vec::new();
        for (name, path) in node_stats::dir_entries(&dir) {
            let (Some(fs), Some(usage)) = (node_stats::filesystem(&path), self.disk_usage(&path, now, SLOW_REFRESH))
            else {
                continue;
            };
            let on_nodefs = node_stats::same_filesystem(&path, &self.paths.root_dir);
            out.push((
                VolumeStats {
                    fs: fs_stats(time, fs, Some(usage.bytes), Some(usage.inodes)),
                    name,
                    pvc_ref: None,
                },
                usage,
                on_nodefs,
            ));
        }
        out
    }

    /// The block IO of the root cgroup, each pod cgroup and each container in `refs`, each read
    /// again when its last reading is older than [`BLOCK_IO_REFRESH`]; readings of cgroups no
    /// longer listed are dropped.
    fn block_io(&mut self, refs: &[ContainerRef], now: Instant) -> Vec<CgroupBlockIo> {
        let Some(layout) = self.paths.layout.clone() else {
            return Vec::new();
        };
        let mut cgroups: Vec<&str> = vec!["/"];
        cgroups.extend(refs.iter().map(|r| r.pod_cgroup.as_str()).filter(|c| !c.is_empty()));
        cgroups.extend(refs.iter().map(|r| r.cgroup.as_str()));
        cgroups.sort_unstable();
        cgroups.dedup();
        let mut out = Vec::new();
        for cgroup in &cgroups {
            let fresh = self
                .block_io
                .get(*cgroup)
                .is_some_and(|(_, at)| now.duration_since(*at) < BLOCK_IO_REFRESH);
            if !fresh {
                let reading = self.read_block_io(&layout, cgroup);
                self.block_io.insert(cgroup.to_string(), (reading, now));
            }
            if let Some((Some(io), _)) = self.block_io.get(*cgroup) {
                out.push(io.clone());
            }
        }
        self.block_io.retain(|k, _| cgroups.binary_search(&k.as_str()).is_ok());
        out
    }

    fn read_block_io(&mut self, layout: &CgroupLayout, cgroup: &str) -> Option<CgroupBlockIo> {
        let time = Time(Timestamp::now());
        let devices = match cgstats::read_block_io(layout, cgroup) {
            Ok(devices) => devices?,
            Err(e @ StatsError::Gone { .. }) => {
                tracing::debug!(cgroup, error = %e, "cgroup gone; block IO sample skipped");
                return None;
            }
            Err(e) => {
                self.warn_once(
                    &format!("blkio:{cgroup}"),
                    &format!("block IO of cgroup {cgroup} unreadable ({e}); sample skipped"),
                );
                return None;
            }
        };
        let devices = devices
            .into_iter()
            .map(|d| DeviceBlockIo {
                device: self
                    .devices
                    .entry((d.major, d.minor))
                    .or_insert_with(|| node_stats::block_device_name(d.major, d.minor).unwrap_or_default())
                    .clone(),
                read_bytes: d.read_bytes,
                write_bytes: d.write_bytes,
                reads: d.reads,
                writes: d.writes,
            })
            .collect();
        Some(CgroupBlockIo {
            cgroup: cgroup.to_string(),
            time,
            devices,
        })
    }

    /// A directory's disk use, walked again only when the last walk is older than `every`.
    fn disk_usage(&mut self, dir: &Path, now: Instant, every: Duration) -> Option<DirUsage> {
        if let Some((usage, at)) = self.disk.get(dir) {
            if now.duration_since(*at) < every {
                return *usage;
            }
        }
        let usage = node_stats::dir_usage(dir);
        self.disk.insert(dir.to_path_buf(), (usage, now));
        usage
    }

    /// Read a cgroup; a failure skips this sample (logged once per key).
    fn read_cgroup(&mut self, layout: &CgroupLayout, path: &CgroupPath, key: &str) -> Option<CgroupStats> {
        match cgstats::read(layout, path) {
            Ok(s) => {
                self.warned.remove(key);
                Some(s)
            }
            Err(e @ StatsError::Gone { .. }) => {
                tracing::debug!(cgroup = %path.key(), error = %e, "cgroup gone; sample skipped");
                None
            }
            Err(e) => {
                self.warn_once(key, &format!("cgroup {} unreadable ({e}); sample skipped", path.key()));
                None
            }
        }
    }

    fn warn_once(&mut self, key: &str, what: &str) {
        if self.warned.insert(key.to_string()) {
            tracing::warn!(key, "{what}");
        }
    }

    /// usageNanoCores from the previous reading of `key`: none for a first reading (unless the
    /// container started within the window: its usage over its life) or when the counter went
    /// backwards (a restarted container under the same key).
    fn rate(
        &mut self,
        key: &str,
        ns: u64,
        now: Instant,
        since_start: Option<Duration>,
        seen: &mut HashSet<String>,
    ) -> Option<u64> {
        seen.insert(key.to_string());
        let previous = self.cpu.insert(key.to_string(), CpuSample { ns, at: now });
        let max = self.max_nano_cores.unwrap_or(u64::MAX);
        let rate = match previous {
            Some(p) if ns < p.ns => {
                self.warn_once(
                    &format!("{key}:backwards"),
                    &format!("CPU counter of {key} went backwards; usageNanoCores skipped once"),
                );
                None
            }
            Some(p) => nano_cores(ns - p.ns, now.duration_since(p.at)),
            None => since_start
                .filter(|d| *d <= SLOW_REFRESH)
                .and_then(|d| nano_cores(ns, d)),
        };
        rate.map(|r| r.min(max))
    }
}

/// What a pod contributes to the `pods` system container and containerfs.
#[derive(Debug, Clone, Default)]
struct PodCgroup {
    stats: CgroupStats,
    rate: Option<u64>,
    writable_layers: u64,
}

struct Pod {
    stats: PodStats,
    /// cAdvisor's other figures of its containers and its pod cgroup.
    extras: Vec<CgroupExtras>,
    cgroup: PodCgroup,
}

/// The figures of one reading that only `/metrics/cadvisor` serves.
fn cgroup_extras(cgroup: String, time: &Time, s: &CgroupStats) -> CgroupExtras {
    CgroupExtras {
        cgroup,
        time: time.clone(),
        cache_bytes: s.memory.map(|m| m.cache),
        mapped_file_bytes: s.memory.map(|m| m.mapped_file),
        swap_bytes: s.memory.and_then(|m| m.swap),
        swap_limit_bytes: s.memory.and_then(|m| m.swap_limit),
        cfs: s.cfs,
    }
}

/// `delta` CPU ns over `window`, in nanocores; none for an empty window.
fn nano_cores(delta: u64, window: Duration) -> Option<u64> {
    let window = window.as_nanos();
    (window > 0).then(|| (u128::from(delta) * 1_000_000_000 / window) as u64)
}

/// How long ago `t` was; none if in the future.
fn elapsed_since(t: &Timestamp) -> Option<Duration> {
    let d = Timestamp::now().duration_since(*t);
    Duration::try_from(d).ok()
}

/// A container's cgroup: `<parent>/<id>` under a cgroupfs parent, `<slice>/docker-<id>.scope`
/// under a systemd slice, Docker's default parent for none.
fn container_cgroup(c: &ObservedContainer, engine: CgroupDriver) -> String {
    CgroupNaming::container_cgroup(&c.cgroup_parent, c.id.0.as_str(), engine)
}

/// The pod cgroup (`…/pod<uid>`, or its slice) when every container is directly under it.
fn pod_cgroup_of(uid: &str, containers: &[&ObservedContainer]) -> Option<String> {
    let first = containers.first()?.cgroup_parent.trim_end_matches('/');
    let path = CgroupNaming::parent_path(first);
    let last = path.rsplit('/').next()?;
    (CgroupNaming::uid_of_dir(last).as_deref() == Some(uid)
        && containers
            .iter()
            .all(|c| c.cgroup_parent.trim_end_matches('/') == first))
    .then_some(path)
}

/// Which Docker container `c` is, for cAdvisor's labels.
fn container_ref(c: &ObservedContainer, pod_cgroup: &str, engine: CgroupDriver) -> ContainerRef {
    ContainerRef {
        pod_uid: c.pod_uid.0.clone(),
        container: c.name.clone(),
        id: c.id.0.clone(),
        docker_name: dockerlet_pod::labels::container_name(
            &c.name,
            &c.pod_name,
            &c.pod_namespace,
            c.pod_uid.0.as_str(),
            c.attempt,
        ),
        image: c.image.clone(),
        image_id: c.image_id.clone(),
        cgroup: container_cgroup(c, engine),
        pod_cgroup: pod_cgroup.to_string(),
    }
}

/// The `kubepods` cgroup above a pod's parent: the `kubepods` directory, or the slice whose
/// last component is `kubepods` (`kubepods.slice`, `<root>-kubepods.slice`).
fn kubepods_of(parent: &str) -> Option<String> {
    let path = CgroupNaming::parent_path(parent);
    let mut end = 0;
    for component in path.split('/').filter(|c| !c.is_empty()) {
        end = path[end..].find(component)? + end + component.len();
        if component == "kubepods" || component == "kubepods.slice" || component.ends_with("-kubepods.slice") {
            return Some(path[..end].to_string());
        }
    }
    None
}

fn cpu_stats(time: &Time, ns: Option<u64>, rate: Option<u64>, psi: Option<PsiStats>) -> CpuStats {
    CpuStats {
        time: time.clone(),
        usage_nano_cores: rate,
        usage_core_nano_seconds: ns,
        psi,
        user_nano_seconds: None,
        system_nano_seconds: None,
    }
}

/// A cgroup's CPU figures (its user and system split included).
fn cgroup_cpu(time: &Time, s: &CgroupStats, rate: Option<u64>) -> Option<CpuStats> {
    s.cpu_usage_ns.map(|ns| CpuStats {
        user_nano_seconds: s.cpu_user_ns,
        system_nano_seconds: s.cpu_system_ns,
        ..cpu_stats(time, Some(ns), rate, s.cpu_psi.clone())
    })
}

fn memory_stats(time: &Time, m: MemoryUsage, psi: Option<PsiStats>) -> MemoryStats {
    MemoryStats {
        time: time.clone(),
        available_bytes: m.limit.map(|l| l.saturating_sub(m.working_set)),
        usage_bytes: Some(m.usage),
        working_set_bytes: Some(m.working_set),
        rss_bytes: Some(m.rss),
        page_faults: Some(m.page_faults),
        major_page_faults: Some(m.major_page_faults),
        psi,
    }
}

/// A cgroup's swap use, as cAdvisor's (v1 `total_swap`, v2 `memory.swap.current`), and what is
/// left of its swap limit as kubelet computes it (limit − use; none without a limit).
fn swap_stats(time: &Time, s: &CgroupStats) -> Option<SwapStats> {
    let memory = s.memory?;
    let used = memory.swap?;
    Some(SwapStats {
        time: time.clone(),
        swap_available_bytes: memory.swap_limit.map(|limit| limit.saturating_sub(used)),
        swap_usage_bytes: Some(used),
    })
}

fn io_stats(time: &Time, psi: &Option<PsiStats>) -> Option<IoStats> {
    psi.clone().map(|psi| IoStats {
        time: time.clone(),
        psi: Some(psi),
    })
}

fn fs_stats(time: &Time, fs: FsFigures, used: Option<u64>, inodes_used: Option<u64>) -> FsStats {
    FsStats {
        time: time.clone(),
        available_bytes: Some(fs.available),
        capacity_bytes: Some(fs.capacity),
        used_bytes: used,
        inodes_free: Some(fs.inodes_free),
        inodes: Some(fs.inodes),
        inodes_used,
    }
}

/// The default interface inline (`default`, else the first) and every interface.
fn network_stats(time: &Time, interfaces: Vec<InterfaceStats>, default: Option<&str>) -> NetworkStats {
    let inline = interfaces
        .iter()
        .find(|i| Some(i.name.as_str()) == default)
        .or_else(|| interfaces.first())
        .cloned()
        .unwrap_or_default();
    NetworkStats {
        time: time.clone(),
        default: inline,
        interfaces,
    }
}

#[cfg(test)]
// The tests record cgroup trees on disk and wait out a CPU window: plain blocking calls, off
// any actor.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// What is left of a swap limit is the limit less the swap used; no limit, no figure.
    #[test]
    fn swap_available_is_the_limit_less_the_use() {
        let time = Time(Timestamp::UNIX_EPOCH);
        let cgroup = |swap_limit| CgroupStats {
            memory: Some(MemoryUsage {
                swap: Some(4096),
                swap_limit,
                ..Default::default()
            }),
            ..CgroupStats::default()
        };
        let limited = swap_stats(&time, &cgroup(Some(10_000))).unwrap();
        assert_eq!(
            (limited.swap_usage_bytes, limited.swap_available_bytes),
            (Some(4096), Some(5904))
        );
        let unlimited = swap_stats(&time, &cgroup(None)).unwrap();
        assert_eq!(
            (unlimited.swap_usage_bytes, unlimited.swap_available_bytes),
            (Some(4096), None)
        );
        // A limit below the use (lowered under a swapped-out cgroup) leaves nothing, never wraps.
        let over = swap_stats(&time, &cgroup(Some(1024))).unwrap();
        assert_eq!(over.swap_available_bytes, Some(0));
    }

    /// usageNanoCores is the CPU delta over the window; a first reading has none.
    #[test]
    fn rates_come_from_the_previous_reading() {
        let mut c = Collector::new(Paths {
            node_name: "n".into(),
            root_dir: PathBuf::from("/nonexistent"),
            docker_root: None,
            layout: None,
            system: SystemCgroupNames::default(),
            engine_cgroup_driver: CgroupDriver::Cgroupfs,
        });
        let mut seen = HashSet::new();
        let t0 = Instant::now();
        assert_eq!(c.rate("a", 1_000, t0, None, &mut seen), None);
        let t1 = t0 + Duration::from_secs(10);
        // 5 s of CPU in 10 s: half a core.
        assert_eq!(c.rate("a", 5_000_001_000, t1, None, &mut seen), Some(500_000_000));
        // Backwards (a restart under the same key): skipped, then counted from the new value.
        assert_eq!(c.rate("a", 10, t1 + Duration::from_secs(10), None, &mut seen), None);
        assert_eq!(
            c.rate("a", 1_000_000_010, t1 + Duration::from_secs(20), None, &mut seen),
            Some(100_000_000)
        );
        // A container started 2 s ago with 1 s of CPU: half a core over its life.
        assert_eq!(
            c.rate("b", 1_000_000_000, t1, Some(Duration::from_secs(2)), &mut seen),
            Some(500_000_000)
        );
        assert_eq!(nano_cores(1, Duration::ZERO), None);
        // Never more than the machine: 2.02 cores measured on 2 CPUs is 2 cores.
        c.max_nano_cores = Some(2_000_000_000);
        assert_eq!(c.rate("c", 0, t0, None, &mut seen), None);
        assert_eq!(
            c.rate("c", 20_200_000_000, t0 + Duration::from_secs(10), None, &mut seen),
            Some(2_000_000_000)
        );
    }

    fn write(dir: &Path, files: &[(&str, String)]) {
        std::fs::create_dir_all(dir).unwrap();
        for (name, content) in files {
            std::fs::write(dir.join(name), content).unwrap();
        }
    }

    /// A recorded v1 container cgroup: CPU ns, memory usage and limit, PIDs.
    fn v1_container(root: &Path, id: &str, cpu_ns: u64, usage: u64, limit: u64, pids: u64) {
        write(
            &root.join("cpuacct/docker").join(id),
            &[("cpuacct.usage", cpu_ns.to_string())],
        );
        write(
            &root.join("memory/docker").join(id),
            &[
                ("memory.usage_in_bytes", usage.to_string()),
                ("memory.limit_in_bytes", limit.to_string()),
                (
                    "memory.stat",
                    "total_rss 4096\ntotal_inactive_file 1000\ntotal_pgfault 500\ntotal_pgmajfault 0\n".into(),
                ),
            ],
        );
        write(
            &root.join("pids/docker").join(id),
            &[("pids.current", pids.to_string())],
        );
    }

    fn observed(id: &str, name: &str, role: ContainerRole) -> ObservedContainer {
        let labels = [
            (dockerlet_pod::labels::POD_UID, "u1"),
            (dockerlet_pod::labels::CONTAINER_NAME, name),
            (dockerlet_pod::labels::POD_NAME, "web"),
            (dockerlet_pod::labels::POD_NAMESPACE, "ns"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let parsed = dockerlet_pod::labels::parse(&labels).expect("pod labels");
        let mut c = parsed.observed(
            dockerlet_messages::ContainerId(id.into()),
            dockerlet_messages::runtime::RuntimeState::Running,
            String::new(),
        );
        c.role = role;
        c
    }

    /// Sidecars and ephemeral containers have their entries beside the app containers (the
    /// summary and the cAdvisor series); the sandbox has none.
    #[test]
    fn every_running_container_but_the_sandbox_has_an_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("cgroup");
        for id in ["sb", "app", "side", "dbg"] {
            v1_container(&cg, id, 1_000, 100_000, 80_000_000, 1);
        }
        let mut c = Collector::new(Paths {
            node_name: "n1".into(),
            root_dir: tmp.path().join("root"),
            docker_root: None,
            layout: Some(CgroupLayout::v1_at(&cg, &["cpuacct", "memory", "pids"])),
            system: SystemCgroupNames::default(),
            engine_cgroup_driver: CgroupDriver::Cgroupfs,
        });
        let running = vec![
            observed("sb", "POD", ContainerRole::Sandbox),
            observed("app", "app", ContainerRole::App),
            observed("side", "side", ContainerRole::Init),
            observed("dbg", "dbg", ContainerRole::Ephemeral),
        ];
        let collected = c.collect(&running);
        let mut names: Vec<&str> = collected.summary.pods[0]
            .containers
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        names.sort();
        assert_eq!(names, ["app", "dbg", "side"]);
        let mut refs: Vec<&str> = collected.containers.iter().map(|c| c.container.as_str()).collect();
        refs.sort();
        assert_eq!(refs, ["app", "dbg", "side"]);
        // The sandbox has cAdvisor's series only, its reading kept for SANDBOX_REFRESH.
        let sandbox = |c: &Collected| {
            let (r, stats) = &c.sandboxes[0];
            (
                r.container.clone(),
                r.id.clone(),
                stats.memory.as_ref().and_then(|m| m.usage_bytes),
            )
        };
        assert_eq!(collected.sandboxes.len(), 1);
        assert_eq!(
            sandbox(&collected),
            ("POD".to_string(), "sb".to_string(), Some(100_000))
        );
        v1_container(&cg, "sb", 2_000, 200_000, 80_000_000, 1);
        assert_eq!(
            sandbox(&c.collect(&running)).2,
            Some(100_000),
            "read again only after 30 s"
        );
        // Gone with its pod.
        assert!(c.collect(&[]).sandboxes.is_empty());
        assert!(c.sandboxes.is_empty());
    }

    /// `--kubelet-cgroups`, `--runtime-cgroups` and `--system-cgroups` name the `kubelet`,
    /// `runtime` and `misc` system containers' cgroups (`misc` only when given), each then a
    /// cAdvisor series of its own.
    #[test]
    fn configured_system_cgroups_are_read() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("cgroup");
        let system = |name: &str, usage: u64| {
            write(&cg.join("cpuacct").join(name), &[("cpuacct.usage", "5000".into())]);
            write(
                &cg.join("memory").join(name),
                &[
                    ("memory.usage_in_bytes", usage.to_string()),
                    ("memory.limit_in_bytes", u64::MAX.to_string()),
                    ("memory.stat", "total_rss 10\ntotal_inactive_file 0\n".into()),
                ],
            );
        };
        system("kubelet", 1000);
        system("docker-daemon", 2000);
        system("system", 3000);
        let mut c = Collector::new(Paths {
            node_name: "n1".into(),
            root_dir: tmp.path().join("root"),
            docker_root: None,
            layout: Some(CgroupLayout::v1_at(&cg, &["cpuacct", "memory"])),
            system: SystemCgroupNames {
                kubelet: Some("/kubelet".into()),
                runtime: Some("/docker-daemon".into()),
                misc: Some("/system".into()),
            },
            engine_cgroup_driver: CgroupDriver::Cgroupfs,
        });
        let collected = c.collect(&[]);
        let usage = |name: &str| {
            let sc = collected.summary.node.system_containers.iter().find(|s| s.name == name);
            sc.and_then(|s| s.memory.as_ref()).and_then(|m| m.usage_bytes)
        };
        assert_eq!(usage("kubelet"), Some(1000));
        assert_eq!(usage("runtime"), Some(2000));
        assert_eq!(usage("misc"), Some(3000));
        let other: Vec<(&str, &str)> = collected
            .other_cgroups
            .iter()
            .map(|c| (c.stats.name.as_str(), c.id.as_str()))
            .collect();
        assert_eq!(
            other,
            [
                ("kubelet", "/kubelet"),
                ("runtime", "/docker-daemon"),
                ("misc", "/system")
            ]
        );
        // Without --system-cgroups there is no misc.
        let mut c = Collector::new(Paths {
            system: SystemCgroupNames::default(),
            ..c.paths.clone()
        });
        let collected = c.collect(&[]);
        assert!(!collected
            .summary
            .node
            .system_containers
            .iter()
            .any(|s| s.name == "misc"));
    }

    /// Block IO is read for the root cgroup and each container, kept for [`BLOCK_IO_REFRESH`]
    /// (a second pass serves the first reading), and dropped with the container.
    #[test]
    fn block_io_of_the_root_and_the_containers_is_read_slowly() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("cgroup");
        for id in ["sb", "app"] {
            v1_container(&cg, id, 1_000, 100_000, 80_000_000, 1);
        }
        let blkio = |dir: &Path, read: u64| {
            write(
                dir,
                &[
                    (
                        "blkio.throttle.io_service_bytes_recursive",
                        format!("254:0 Read {read}\n254:0 Write 0\n254:0 Total {read}\nTotal {read}\n"),
                    ),
                    (
                        "blkio.throttle.io_serviced_recursive",
                        "254:0 Read 1\n254:0 Write 0\nTotal 1\n".into(),
                    ),
                ],
            )
        };
        blkio(&cg.join("blkio"), 1 << 20);
        blkio(&cg.join("blkio/docker/app"), 4096);
        let mut c = Collector::new(Paths {
            node_name: "n1".into(),
            root_dir: tmp.path().join("root"),
            docker_root: None,
            layout: Some(CgroupLayout::v1_at(&cg, &["blkio", "cpuacct", "memory", "pids"])),
            system: SystemCgroupNames::default(),
            engine_cgroup_driver: CgroupDriver::Cgroupfs,
        });
        let running = vec![
            observed("sb", "POD", ContainerRole::Sandbox),
            observed("app", "app", ContainerRole::App),
        ];
        let reads = |io: &[CgroupBlockIo]| -> Vec<(String, u64, u64)> {
            io.iter()
                .flat_map(|c| c.devices.iter().map(|d| (c.cgroup.clone(), d.read_bytes, d.reads)))
                .collect()
        };
        let first = c.collect(&running).block_io;
        assert_eq!(
            reads(&first),
            [("/".to_string(), 1 << 20, 1), ("/docker/app".to_string(), 4096, 1)]
        );
        blkio(&cg.join("blkio/docker/app"), 8192);
        let second = c.collect(&running).block_io;
        assert_eq!(second, first, "read again only after {BLOCK_IO_REFRESH:?}");
        let third = c.collect(&running[..1]).block_io;
        assert_eq!(reads(&third), [("/".to_string(), 1 << 20, 1)]);
        assert_eq!(c.block_io.len(), 1, "the container's reading is dropped");
    }

    /// Over a recorded v1 tree with the pod under /docker: the container's own figures, the
    /// pod's as the sum with the sandbox, its memory limit the app's, usageNanoCores from the
    /// second pass; a container whose cgroup vanished is left out of the next pass, not zeroed.
    #[test]
    fn a_pod_under_docker_is_the_sum_of_its_containers() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("cgroup");
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("pods/u1/volumes/kubernetes.io~empty-dir/scratch")).unwrap();
        std::fs::write(root.join("pods/u1/volumes/kubernetes.io~empty-dir/scratch/f"), "hello").unwrap();
        v1_container(&cg, "sb", 1_000, 100_000, 9223372036854771712, 1);
        v1_container(&cg, "app", 2_000, 200_000, 80_000_000, 2);
        let mut c = Collector::new(Paths {
            node_name: "n1".into(),
            root_dir: root.clone(),
            docker_root: None,
            layout: Some(CgroupLayout::v1_at(&cg, &["cpuacct", "memory", "pids"])),
            system: SystemCgroupNames::default(),
            engine_cgroup_driver: CgroupDriver::Cgroupfs,
        });
        let running = vec![
            observed("sb", "POD", ContainerRole::Sandbox),
            observed("app", "app", ContainerRole::App),
        ];
        let first = c.collect(&running).summary;
        let pod = &first.pods[0];
        assert_eq!(
            (pod.pod_ref.name.as_str(), pod.pod_ref.namespace.as_str()),
            ("web", "ns")
        );
        let app = &pod.containers[0];
        assert_eq!(app.name, "app");
        assert_eq!(app.cpu.as_ref().unwrap().usage_core_nano_seconds, Some(2_000));
        assert_eq!(app.cpu.as_ref().unwrap().usage_nano_cores, None, "no previous reading");
        let m = app.memory.as_ref().unwrap();
        assert_eq!(
            (m.usage_bytes, m.working_set_bytes, m.available_bytes),
            (Some(200_000), Some(199_000), Some(79_801_000))
        );
        assert_eq!(pod.cpu.as_ref().unwrap().usage_core_nano_seconds, Some(3_000));
        let pm = pod.memory.as_ref().unwrap();
        assert_eq!(
            (pm.usage_bytes, pm.available_bytes),
            (Some(300_000), Some(80_000_000 - 298_000))
        );
        assert_eq!(pod.process_stats.as_ref().unwrap().process_count, Some(3));
        assert_eq!(pod.volume_stats.len(), 1);
        assert_eq!(pod.volume_stats[0].name, "scratch");
        assert!(pod.volume_stats[0].fs.used_bytes.unwrap() > 0);
        let pods = first.node.system_containers.iter().find(|s| s.name == "pods").unwrap();
        assert_eq!(pods.cpu.as_ref().unwrap().usage_core_nano_seconds, Some(3_000));
        assert!(
            pods.memory.as_ref().unwrap().available_bytes.is_some(),
            "bounded by the node"
        );

        std::thread::sleep(Duration::from_millis(20));
        v1_container(&cg, "app", 2_000 + 10_000_000, 200_000, 80_000_000, 2);
        let second = c.collect(&running).summary;
        let rate = second.pods[0].containers[0]
            .cpu
            .as_ref()
            .unwrap()
            .usage_nano_cores
            .unwrap();
        assert!(rate > 0 && rate <= 10_000_000 * 1_000_000_000 / 20_000_000, "{rate}");

        std::fs::remove_dir_all(cg.join("memory/docker/app")).unwrap();
        let third = c.collect(&running).summary;
        let app = &third.pods[0].containers[0];
        assert!(
            app.cpu.is_none() && app.memory.is_none(),
            "a gone cgroup is left out: {app:?}"
        );
        assert_eq!(
            third.pods[0].cpu.as_ref().unwrap().usage_core_nano_seconds,
            Some(1_000),
            "the sandbox alone"
        );
    }

    /// Cgroup paths: Docker's default parent, the pod cgroup only when all share it, kubepods.
    #[test]
    fn cgroups_of_containers_and_pods() {
        let labels = [
            (dockerlet_pod::labels::POD_UID, "u1"),
            (dockerlet_pod::labels::CONTAINER_NAME, "app"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let parsed = dockerlet_pod::labels::parse(&labels).expect("pod labels");
        let mut c = parsed.observed(
            dockerlet_messages::ContainerId("c1".into()),
            dockerlet_messages::runtime::RuntimeState::Running,
            String::new(),
        );
        assert_eq!(container_cgroup(&c, CgroupDriver::Cgroupfs), "/docker/c1");
        assert_eq!(
            container_cgroup(&c, CgroupDriver::Systemd),
            "/system.slice/docker-c1.scope"
        );
        c.cgroup_parent = "/kubepods/burstable/podu1".into();
        assert_eq!(
            container_cgroup(&c, CgroupDriver::Cgroupfs),
            "/kubepods/burstable/podu1/c1"
        );
        let mut d = c.clone();
        assert_eq!(pod_cgroup_of("u1", &[&c, &d]), Some("/kubepods/burstable/podu1".into()));
        assert_eq!(kubepods_of(&c.cgroup_parent).as_deref(), Some("/kubepods"));
        d.cgroup_parent = String::new();
        assert_eq!(pod_cgroup_of("u1", &[&c, &d]), None);
        // A systemd slice parent: its path, the container's scope, the kubepods slice.
        c.cgroup_parent = "n1-kubepods-burstable-podu_1.slice".into();
        let d = c.clone();
        assert_eq!(
            container_cgroup(&c, CgroupDriver::Systemd),
            "/n1.slice/n1-kubepods.slice/n1-kubepods-burstable.slice/n1-kubepods-burstable-podu_1.slice/docker-c1.scope"
        );
        assert_eq!(
            pod_cgroup_of("u-1", &[&c, &d]).as_deref(),
            Some("/n1.slice/n1-kubepods.slice/n1-kubepods-burstable.slice/n1-kubepods-burstable-podu_1.slice")
        );
        assert_eq!(
            kubepods_of(&c.cgroup_parent).as_deref(),
            Some("/n1.slice/n1-kubepods.slice")
        );
        assert_eq!(pod_cgroup_of("u2", &[&c]), None);
        assert_eq!(kubepods_of("/kubepods/burstable/podu1"), Some("/kubepods".into()));
        assert_eq!(kubepods_of("/root/kubepods/podu1"), Some("/root/kubepods".into()));
        assert_eq!(kubepods_of("/docker"), None);
        assert_eq!(kubepods_of("/kubepodsx/p"), None);
    }
}
