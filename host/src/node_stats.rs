//! The node's and the pods' figures outside cgroups, for the Summary API: the machine's CPU and
//! memory, network counters of a network namespace, filesystem sizes, the disk use of a
//! directory, containers' writable layers and log files, and process limits. Blocking; the
//! StatsActor calls these on `spawn_blocking`.
//!
//! procfs parses `/proc/stat`, `/proc/vmstat`, `/proc/<pid>/net/dev`, `/proc/net/route` and
//! `/proc/<pid>/cgroup`; rustix gives `statvfs` and `sysinfo`.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use dockerlet_messages::stats::InterfaceStats;
use procfs::prelude::*;

use crate::cgroup::stats::CgroupPath;
use crate::meminfo::MemInfo;

/// The machine's CPU time used (everything but idle and iowait), in nanoseconds, from
/// `/proc/stat`.
pub fn node_cpu_ns() -> Option<u64> {
    let stat = procfs::KernelStats::current().ok()?;
    let t = &stat.total;
    let ticks = t.user + t.nice + t.system + t.irq.unwrap_or(0) + t.softirq.unwrap_or(0) + t.steal.unwrap_or(0);
    let per_tick = 1_000_000_000 / procfs::ticks_per_second().max(1);
    Some(ticks.saturating_mul(per_tick))
}

/// The machine's online CPUs (the `cpuN` lines of `/proc/stat`).
pub fn online_cpus() -> Option<u64> {
    let stat = procfs::KernelStats::current().ok()?;
    u64::try_from(stat.cpu_time.len()).ok().filter(|n| *n > 0)
}

/// The machine's memory, as cAdvisor reports the root container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeMemory {
    /// MemTotal.
    pub capacity: u64,
    /// MemTotal − MemFree.
    pub usage: u64,
    /// usage − Inactive(file).
    pub working_set: u64,
    /// AnonPages.
    pub rss: u64,
    /// `pgfault` of `/proc/vmstat`.
    pub page_faults: u64,
    /// `pgmajfault` of `/proc/vmstat`.
    pub major_page_faults: u64,
    /// SwapTotal: the root container's swap limit, as cAdvisor gives it.
    pub swap_capacity: u64,
    /// SwapTotal − SwapFree.
    pub swap_usage: u64,
}

/// Read `/proc/meminfo` and `/proc/vmstat`; none if meminfo is unreadable.
pub fn node_memory() -> Option<NodeMemory> {
    let vmstat = procfs::vmstat().unwrap_or_default();
    node_memory_from(&MemInfo::read(), &vmstat)
}

fn node_memory_from(m: &MemInfo, vmstat: &HashMap<String, i64>) -> Option<NodeMemory> {
    let bytes = |k: &str| u64::try_from(m.bytes(k)).unwrap_or(0);
    let capacity = bytes("MemTotal");
    if capacity == 0 {
        return None;
    }
    let usage = capacity.saturating_sub(bytes("MemFree"));
    let count = |k: &str| vmstat.get(k).and_then(|v| u64::try_from(*v).ok()).unwrap_or(0);
    Some(NodeMemory {
        capacity,
        usage,
        working_set: usage.saturating_sub(bytes("Inactive(file)")),
        rss: bytes("AnonPages"),
        page_faults: count("pgfault"),
        major_page_faults: count("pgmajfault"),
        swap_capacity: bytes("SwapTotal"),
        swap_usage: bytes("SwapTotal").saturating_sub(bytes("SwapFree")),
    })
}

/// Network counters of a namespace: every interface but loopback, sorted by name.
pub fn interfaces(pid: Option<u32>) -> Option<Vec<InterfaceStats>> {
    let devices = match pid {
        Some(pid) => procfs::process::Process::new(pid as i32).ok()?.dev_status().ok()?,
        None => procfs::net::dev_status().ok()?,
    };
    let mut out: Vec<InterfaceStats> = devices
        .into_values()
        .filter(|d| d.name != "lo")
        .map(|d| InterfaceStats {
            name: d.name,
            rx_bytes: Some(d.recv_bytes),
            rx_errors: Some(d.recv_errs),
            tx_bytes: Some(d.sent_bytes),
            tx_errors: Some(d.sent_errs),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Some(out)
}

/// The agent's default interface: the one holding the IPv4 default route.
pub fn default_interface() -> Option<String> {
    procfs::process::Process::myself()
        .ok()?
        .route()
        .ok()?
        .into_iter()
        .find(|r| r.destination.is_unspecified() && r.mask.is_unspecified())
        .map(|r| r.iface)
}

/// The cgroups of a process, from `/proc/<pid>/cgroup`.
pub fn process_cgroup(pid: u32) -> Option<CgroupPath> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    Some(CgroupPath::from_proc_cgroup(&text))
}

/// PIDs of the processes whose command name is one of `names` (`dockerd`, `containerd`).
pub fn find_processes(names: &[&str]) -> Vec<u32> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    all.filter_map(Result::ok)
        .filter_map(|p| {
            let stat = p.stat().ok()?;
            names.contains(&stat.comm.as_str()).then_some(stat.pid as u32)
        })
        .collect()
}

/// The node path of block device `major:minor` (`/dev/vda`), from the `DEVNAME` of
/// `/sys/dev/block/<major>:<minor>/uevent`, as cAdvisor names the `device` of its IO series.
pub fn block_device_name(major: u32, minor: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")).ok()?;
    devname(&text)
}

fn devname(uevent: &str) -> Option<String> {
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .filter(|name| !name.is_empty())
        .map(|name| format!("/dev/{name}"))
}

/// When the machine booted, in seconds since the epoch.
pub fn boot_time_secs() -> Option<u64> {
    procfs::boot_time_secs().ok()
}

/// A filesystem's size and free space.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsFigures {
    /// Size in bytes.
    pub capacity: u64,
    /// Bytes free for unprivileged users.
    pub available: u64,
    /// Bytes used (size − free).
    pub used: u64,
    /// Inodes in all.
    pub inodes: u64,
    /// Free inodes.
    pub inodes_free: u64,
}

/// statvfs of the filesystem holding `path`.
pub fn filesystem(path: &Path) -> Option<FsFigures> {
    let s = rustix::fs::statvfs(path).ok()?;
    let block = s.f_frsize;
    Some(FsFigures {
        capacity: s.f_blocks.saturating_mul(block),
        available: s.f_bavail.saturating_mul(block),
        used: s.f_blocks.saturating_sub(s.f_bfree).saturating_mul(block),
        inodes: s.f_files,
        inodes_free: s.f_ffree,
    })
}

/// Whether `a` and `b` are on the same filesystem (an emptyDir on disk, not on tmpfs).
pub fn same_filesystem(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev(),
        _ => false,
    }
}

/// The entries of a directory (a pod's `volumes/kubernetes.io~empty-dir`), by name; none if
/// it is missing.
pub fn dir_entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<_> = entries
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    out.sort();
    out
}

/// Disk use of a directory tree, as `du` counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirUsage {
    /// Bytes of allocated blocks.
    pub bytes: u64,
    /// Files and directories (the root included).
    pub inodes: u64,
}

impl std::ops::Add for DirUsage {
    type Output = DirUsage;
    fn add(self, o: DirUsage) -> DirUsage {
        DirUsage {
            bytes: self.bytes + o.bytes,
            inodes: self.inodes + o.inodes,
        }
    }
}

/// Walk `root` without following symlinks or leaving its filesystem, adding allocated blocks
/// (`st_blocks` × 512, as `du`) and counting inodes (hard links once). Entries that vanish
/// during the walk are skipped; none if `root` itself cannot be read.
pub fn dir_usage(root: &Path) -> Option<DirUsage> {
    let meta = std::fs::symlink_metadata(root).ok()?;
    let device = meta.dev();
    let mut seen = std::collections::HashSet::new();
    let mut usage = DirUsage::default();
    let mut stack = vec![(root.to_path_buf(), meta)];
    while let Some((path, meta)) = stack.pop() {
        if meta.nlink() > 1 && !meta.is_dir() && !seen.insert(meta.ino()) {
            continue;
        }
        usage.bytes += meta.blocks() * 512;
        usage.inodes += 1;
        if !meta.is_dir() || meta.dev() != device {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            let child = entry.path();
            if let Ok(m) = std::fs::symlink_metadata(&child) {
                stack.push((child, m));
            }
        }
    }
    Some(usage)
}

/// A Docker container's writable layer on the host (overlay2: the layer's `diff` directory,
/// named by the layer store's `mount-id`); none for other storage drivers or when Docker's
/// directory is not readable here.
pub fn writable_layer_dir(docker_root: &Path, container_id: &str) -> Option<PathBuf> {
    let mount_id = docker_root
        .join("image/overlay2/layerdb/mounts")
        .join(container_id)
        .join("mount-id");
    let id = std::fs::read_to_string(mount_id).ok()?;
    let id = id.trim();
    if id.is_empty() || id.contains('/') {
        return None;
    }
    let diff = docker_root.join("overlay2").join(id).join("diff");
    diff.is_dir().then_some(diff)
}

/// A Docker container's log files: `<root>/containers/<id>/<id>-json.log*` (json-file,
/// rotated ones included) and the `local` driver's `local-logs/`.
pub fn container_logs_usage(docker_root: &Path, container_id: &str) -> Option<DirUsage> {
    let dir = docker_root.join("containers").join(container_id);
    let entries = std::fs::read_dir(&dir).ok()?;
    let prefix = format!("{container_id}-json.log");
    let mut usage = DirUsage::default();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) {
            if let Ok(m) = entry.metadata() {
                usage.bytes += m.blocks() * 512;
                usage.inodes += 1;
            }
        } else if name == "local-logs" {
            usage = usage + dir_usage(&entry.path()).unwrap_or_default();
        }
    }
    Some(usage)
}

/// `kernel.pid_max` and the number of processes (threads included) now running, from
/// `sysinfo(2)`.
pub fn rlimit() -> (Option<u64>, Option<u64>) {
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let procs = u64::from(rustix::system::sysinfo().procs);
    (pid_max, Some(procs))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device's name comes from DEVNAME; a uevent without one names nothing.
    #[test]
    fn block_devices_are_named_from_their_uevent() {
        assert_eq!(
            devname("MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n").as_deref(),
            Some("/dev/vda")
        );
        assert_eq!(devname("MAJOR=254\nMINOR=0\n"), None);
        assert_eq!(devname("DEVNAME=\n"), None);
        let first = std::fs::read_dir("/sys/dev/block")
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned());
        if let Some((major, minor)) = first.as_deref().and_then(|n| n.split_once(':')) {
            let name = block_device_name(major.parse().unwrap(), minor.parse().unwrap());
            assert!(name.is_some_and(|n| n.starts_with("/dev/")), "{first:?}");
        }
    }

    /// Node memory as cAdvisor's root: usage = total − free, working set without inactive file,
    /// swap used = total − free.
    #[test]
    fn node_memory_follows_cadvisor() {
        let m = MemInfo::parse(
            "MemTotal: 1000 kB\nMemFree: 400 kB\nInactive(file): 100 kB\nAnonPages: 200 kB\nSwapTotal: 50 kB\nSwapFree: 30 kB\n"
                .into(),
        );
        let vm: HashMap<String, i64> = [("pgfault".to_string(), 7), ("pgmajfault".to_string(), 1)].into();
        let n = node_memory_from(&m, &vm).unwrap();
        assert_eq!(
            n,
            NodeMemory {
                capacity: 1_024_000,
                usage: 614_400,
                working_set: 512_000,
                rss: 204_800,
                page_faults: 7,
                major_page_faults: 1,
                swap_capacity: 51_200,
                swap_usage: 20_480,
            }
        );
        assert_eq!(node_memory_from(&MemInfo::default(), &vm), None);
    }

    /// du semantics: blocks, directories counted, hard links once, a missing root is none.
    #[test]
    fn dir_usage_counts_blocks_and_inodes() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("v");
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/file"), vec![b'x'; 10_000]).unwrap();
        std::fs::hard_link(d.join("sub/file"), d.join("link")).unwrap();
        std::os::unix::fs::symlink("/etc", d.join("etc")).unwrap();
        let u = dir_usage(&d).unwrap();
        // v, sub, file (once), the symlink.
        assert_eq!(u.inodes, 4);
        assert!(u.bytes >= 10_000, "{u:?}");
        assert_eq!(dir_usage(&tmp.path().join("missing")), None);
    }

    /// The writable layer is found through the layer store; logs are the json-file files.
    #[test]
    fn docker_layer_and_logs_are_found_in_its_root() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let mounts = root.join("image/overlay2/layerdb/mounts/c1");
        std::fs::create_dir_all(&mounts).unwrap();
        std::fs::write(mounts.join("mount-id"), "abc123").unwrap();
        std::fs::create_dir_all(root.join("overlay2/abc123/diff")).unwrap();
        assert_eq!(writable_layer_dir(root, "c1"), Some(root.join("overlay2/abc123/diff")));
        assert_eq!(writable_layer_dir(root, "c2"), None);
        let logs = root.join("containers/c1");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join("c1-json.log"), "{}\n").unwrap();
        std::fs::write(logs.join("c1-json.log.1"), "{}\n").unwrap();
        std::fs::write(logs.join("config.v2.json"), vec![b'x'; 9000]).unwrap();
        let u = container_logs_usage(root, "c1").unwrap();
        assert_eq!(u.inodes, 2);
        assert!(u.bytes < 9000, "{u:?}");
    }

    /// This machine: CPU, memory, interfaces, process counts and filesystems read.
    #[test]
    fn this_machine_is_read() {
        assert!(node_cpu_ns().unwrap() > 0);
        assert!(node_memory().unwrap().capacity > 0);
        let ifaces = interfaces(None).unwrap();
        assert!(ifaces.iter().all(|i| i.name != "lo"));
        let me = std::process::id();
        assert!(interfaces(Some(me)).is_some());
        assert!(process_cgroup(me).is_some());
        let (max, procs) = rlimit();
        assert!(max.unwrap() > 0 && procs.unwrap() > 0);
        let fs = filesystem(Path::new("/")).unwrap();
        assert!(fs.capacity > 0);
        assert!(boot_time_secs().unwrap() > 0);
    }
}
