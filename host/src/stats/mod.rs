//! One statistics housekeeping pass: every reader of this crate (cgroups, /proc, statvfs, disk
//! use) turned into a [`Summary`] for `/stats/summary`, `/metrics/resource` and
//! `/metrics/cadvisor`. Blocking; the StatsActor (`dockerlet_actors::stats`) runs it on
//! `spawn_blocking` and keeps the [`Collector`] (previous CPU samples, slowly refreshed disk use)
//! between passes.
//!
//! # Layout
//! - this file: where things are ([`Paths`]), the [`Collector`] and its pass
//!   ([`Collector::collect`]), and what every part shares: cgroup reads that skip a sample,
//!   CPU rates from the previous reading, disk-use walks kept for a while.
//! - `pod`: a pod's containers, its cgroup (or their sum), its emptyDir volumes and sandbox;
//!   the cgroup paths of containers and pods.
//! - `node`: the node, and the system containers (`kubelet`, `runtime`, `misc`, `pods`) with the
//!   QoS cgroups.
//! - `block_io`: the block IO of the root, pod and container cgroups, read slowly.
//! - `figures`: the Summary API's figures from one reading.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dockerlet_messages::runtime::{ContainerRole, ObservedContainer};
use dockerlet_messages::stats::{CgroupBlockIo, CgroupExtras, CgroupSeries, ContainerRef, ContainerStats, Summary};
use dockerlet_pod::cgroup::CgroupDriver;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::cgroup::stats::{self as cgstats, CgroupPath, CgroupStats, StatsError};
use crate::cgroup::CgroupLayout;
use crate::node_stats::{self, DirUsage};

mod block_io;
mod figures;
mod node;
mod pod;
#[cfg(test)]
mod tests;

use pod::{container_ref, kubepods_of, pod_cgroup_of};

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
