//! The node's figures and its system containers: `kubelet`, `runtime`, `misc`, `pods`, and the
//! QoS cgroups of the kubepods tree.

use std::collections::HashSet;
use std::time::Instant;

use dockerlet_messages::stats::{
    system_container, CgroupSeries, ContainerStats, MemoryStats, NodeStats, RlimitStats, RuntimeStats, SwapStats,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::figures::{cgroup_cpu, cpu_stats, fs_stats, io_stats, memory_stats, network_stats, swap_stats};
use super::pod::PodCgroup;
use super::{Collector, IMAGE_FS_REFRESH};
use crate::cgroup::stats::{self as cgstats, CgroupPath, CgroupStats};
use crate::cgroup::CgroupLayout;
use crate::node_stats::{self, FsFigures};

impl Collector {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn node(
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
}
