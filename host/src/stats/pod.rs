//! A pod's figures: its containers (every running one but the sandbox), its cgroup (or the sum
//! of its containers'), its emptyDir volumes and ephemeral storage; the sandbox's own reading for
//! cAdvisor's `container="POD"` series; and where Docker puts a container's and a pod's cgroup.

use std::collections::HashSet;
use std::time::Instant;

use dockerlet_messages::runtime::{ContainerRole, ObservedContainer};
use dockerlet_messages::stats::{
    CgroupExtras, ContainerRef, ContainerStats, PodReference, PodStats, ProcessStats, VolumeStats,
};
use dockerlet_pod::cgroup::{CgroupDriver, CgroupNaming};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::figures::{cgroup_cpu, cgroup_extras, fs_stats, io_stats, memory_stats, network_stats, swap_stats};
use super::{elapsed_since, Collector, SANDBOX_REFRESH, SLOW_REFRESH};
use crate::cgroup::stats::{CgroupPath, CgroupStats};
use crate::cgroup::CgroupLayout;
use crate::node_stats::{self, DirUsage, FsFigures};

impl Collector {
    /// The sandbox's cgroup figures, read again every [`SANDBOX_REFRESH`] (each carries the
    /// time it was read). No CPU rate: cAdvisor's series need only the counter.
    pub(super) fn sandbox(&mut self, sandbox: &ObservedContainer, now: Instant) -> Option<ContainerStats> {
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
    pub(super) fn pod(
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
        let reading = Reading {
            time,
            now,
            nodefs,
            containerfs,
        };
        // The pod cgroup when the containers are under one (the kubepods tree), else their sum.
        let pod_cgroup = pod_cgroup_of(uid, containers);
        let mut pass = ContainerPass::new();
        for c in containers {
            self.container(&mut pass, c, layout.as_ref(), pod_cgroup.is_some(), reading, seen);
        }
        pass.stats.sort_by(|a, b| a.name.cmp(&b.name));
        let (pod, pod_rate) = self.pod_cgroup_stats(uid, layout.as_ref(), pod_cgroup, &mut pass, reading, seen);

        let volumes = self.volumes(uid, time, now);
        for (usage, on_nodefs) in volumes.iter().map(|v| (v.1, v.2)) {
            if on_nodefs {
                pass.ephemeral = pass.ephemeral + usage;
            }
        }
        let stats = PodStats {
            pod_ref: PodReference {
                name: sandbox.pod_name.clone(),
                namespace: sandbox.pod_namespace.clone(),
                uid: uid.to_string(),
            },
            start_time: sandbox.created_at.clone().unwrap_or_else(|| time.clone()),
            containers: pass.stats,
            cpu: pod.as_ref().and_then(|s| cgroup_cpu(time, s, pod_rate)),
            memory: pod
                .as_ref()
                .and_then(|s| s.memory.map(|m| memory_stats(time, m, s.memory_psi.clone()))),
            network: sandbox
                .pid
                .and_then(|pid| node_stats::interfaces(Some(pid)))
                .map(|ifaces| network_stats(time, ifaces, Some("eth0"))),
            volume_stats: volumes.into_iter().map(|v| v.0).collect(),
            ephemeral_storage: nodefs
                .map(|fs| fs_stats(time, fs, Some(pass.ephemeral.bytes), Some(pass.ephemeral.inodes))),
            process_stats: pod
                .as_ref()
                .and_then(|s| s.pids)
                .map(|n| ProcessStats { process_count: Some(n) }),
            swap: pod.as_ref().and_then(|s| swap_stats(time, s)),
            io: pod.as_ref().and_then(|s| io_stats(time, &s.io_psi)),
        };
        Pod {
            stats,
            extras: pass.extras,
            cgroup: PodCgroup {
                stats: pod.unwrap_or_default(),
                rate: pod_rate,
                writable_layers: pass.writable_layers,
            },
        }
    }

    /// One of the pod's containers: its cgroup read (and CPU rate) for the pod's sum, and unless
    /// it is the sandbox, its entry, cAdvisor's extras and its share of the ephemeral storage.
    fn container(
        &mut self,
        pass: &mut ContainerPass,
        c: &ObservedContainer,
        layout: Option<&CgroupLayout>,
        has_pod_cgroup: bool,
        reading: Reading<'_>,
        seen: &mut HashSet<String>,
    ) {
        let Reading { time, now, .. } = reading;
        // With a pod cgroup the sandbox's own figures are not needed (the summary has no
        // entry for it): one cgroup fewer to read per pod.
        if c.role == ContainerRole::Sandbox && has_pod_cgroup {
            return;
        }
        let id = container_cgroup(c, self.paths.engine_cgroup_driver);
        let cgroup = layout.and_then(|l| self.read_cgroup(l, &CgroupPath::Same(id.clone()), c.id.0.as_str()));
        let rate = match cgroup.as_ref().and_then(|s| s.cpu_usage_ns) {
            Some(ns) => {
                let since = c.started_at.as_ref().and_then(|t| elapsed_since(&t.0));
                self.rate(c.id.0.as_str(), ns, now, since, seen)
            }
            None => None,
        };
        pass.rates.push(rate);
        if let Some(s) = &cgroup {
            pass.reads.push(s.clone());
        }
        // Every running container but the sandbox has its entry, as kubelet's CRI stats
        // provider lists them: app containers, sidecars (and init containers while they
        // run), ephemeral containers.
        if c.role == ContainerRole::Sandbox {
            return;
        }
        if let Some(s) = &cgroup {
            pass.extras.push(cgroup_extras(id, time, s));
        }
        pass.app_limits = match (
            pass.app_limits,
            cgroup.as_ref().and_then(|s| s.memory).and_then(|m| m.limit),
        ) {
            (Some(sum), Some(limit)) => Some(sum + limit),
            _ => None,
        };
        let (rootfs, logs) = self.container_fs(c, now);
        pass.writable_layers += rootfs.map_or(0, |u| u.bytes);
        pass.ephemeral = pass.ephemeral + rootfs.unwrap_or_default() + logs.unwrap_or_default();
        pass.stats
            .push(container_stats(c, cgroup.as_ref(), rate, rootfs, logs, reading));
    }

    /// The pod's cgroup figures and CPU rate: its pod cgroup's, else the sum of its containers'
    /// (with the sum of their memory limits when each has one).
    fn pod_cgroup_stats(
        &mut self,
        uid: &str,
        layout: Option<&CgroupLayout>,
        pod_cgroup: Option<String>,
        pass: &mut ContainerPass,
        reading: Reading<'_>,
        seen: &mut HashSet<String>,
    ) -> (Option<CgroupStats>, Option<u64>) {
        match (layout, pod_cgroup) {
            (Some(l), Some(cgroup)) => {
                let key = format!("pod:{uid}");
                let s = self.read_cgroup(l, &CgroupPath::Same(cgroup.clone()), &key);
                if let Some(s) = &s {
                    pass.extras.push(cgroup_extras(cgroup, reading.time, s));
                }
                let rate = s
                    .as_ref()
                    .and_then(|s| s.cpu_usage_ns)
                    .and_then(|ns| self.rate(&key, ns, reading.now, None, seen));
                (s, rate)
            }
            (Some(_), None) if !pass.reads.is_empty() => {
                let mut s = CgroupStats::sum(pass.reads.iter());
                if let Some(m) = s.memory.as_mut() {
                    m.limit = pass.app_limits.filter(|l| *l > 0);
                }
                let rate = pass
                    .rates
                    .iter()
                    .all(Option::is_some)
                    .then(|| pass.rates.iter().flatten().sum());
                (Some(s), rate)
            }
            _ => (None, None),
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
}

/// When and on which filesystems a pod's figures are read.
#[derive(Debug, Clone, Copy)]
struct Reading<'t> {
    time: &'t Time,
    now: Instant,
    nodefs: Option<FsFigures>,
    containerfs: Option<FsFigures>,
}

/// What one pass over a pod's containers gathered.
struct ContainerPass {
    /// The containers' entries (all but the sandbox).
    stats: Vec<ContainerStats>,
    /// Every cgroup read, the sandbox's included: their sum is the pod's without a pod cgroup.
    reads: Vec<CgroupStats>,
    /// Each container's CPU rate, in the order read.
    rates: Vec<Option<u64>>,
    /// Writable layers and logs (the pod's volumes are added later).
    ephemeral: DirUsage,
    /// The writable layers' bytes.
    writable_layers: u64,
    /// cAdvisor's other figures of the containers.
    extras: Vec<CgroupExtras>,
    /// The sum of the containers' memory limits; `None` once one has none.
    app_limits: Option<u64>,
}

impl ContainerPass {
    fn new() -> Self {
        ContainerPass {
            stats: Vec::new(),
            reads: Vec::new(),
            rates: Vec::new(),
            ephemeral: DirUsage::default(),
            writable_layers: 0,
            extras: Vec::new(),
            app_limits: Some(0),
        }
    }
}

/// A container's entry in the summary.
fn container_stats(
    c: &ObservedContainer,
    cgroup: Option<&CgroupStats>,
    rate: Option<u64>,
    rootfs: Option<DirUsage>,
    logs: Option<DirUsage>,
    reading: Reading<'_>,
) -> ContainerStats {
    let Reading {
        time,
        nodefs,
        containerfs,
        ..
    } = reading;
    let fs_of = |u: Option<DirUsage>| {
        containerfs
            .zip(u)
            .map(|(fs, u)| fs_stats(time, fs, Some(u.bytes), Some(u.inodes)))
    };
    let logs_fs = nodefs
        .or(containerfs)
        .zip(logs)
        .map(|(fs, u)| fs_stats(time, fs, Some(u.bytes), Some(u.inodes)));
    ContainerStats {
        name: c.name.clone(),
        start_time: c
            .started_at
            .clone()
            .or_else(|| c.created_at.clone())
            .unwrap_or_else(|| time.clone()),
        cpu: cgroup.and_then(|s| cgroup_cpu(time, s, rate)),
        memory: cgroup.and_then(|s| s.memory.map(|m| memory_stats(time, m, s.memory_psi.clone()))),
        accelerators: Vec::new(),
        rootfs: fs_of(rootfs),
        logs: logs_fs,
        user_defined_metrics: Vec::new(),
        swap: cgroup.and_then(|s| swap_stats(time, s)),
        io: cgroup.and_then(|s| io_stats(time, &s.io_psi)),
    }
}

/// What a pod contributes to the `pods` system container and containerfs.
#[derive(Debug, Clone, Default)]
pub(super) struct PodCgroup {
    pub(super) stats: CgroupStats,
    pub(super) rate: Option<u64>,
    pub(super) writable_layers: u64,
}

pub(super) struct Pod {
    pub(super) stats: PodStats,
    /// cAdvisor's other figures of its containers and its pod cgroup.
    pub(super) extras: Vec<CgroupExtras>,
    pub(super) cgroup: PodCgroup,
}

/// A container's cgroup: `<parent>/<id>` under a cgroupfs parent, `<slice>/docker-<id>.scope`
/// under a systemd slice, Docker's default parent for none.
pub(super) fn container_cgroup(c: &ObservedContainer, engine: CgroupDriver) -> String {
    CgroupNaming::container_cgroup(&c.cgroup_parent, c.id.0.as_str(), engine)
}

/// The pod cgroup (`…/pod<uid>`, or its slice) when every container is directly under it.
pub(super) fn pod_cgroup_of(uid: &str, containers: &[&ObservedContainer]) -> Option<String> {
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
pub(super) fn container_ref(c: &ObservedContainer, pod_cgroup: &str, engine: CgroupDriver) -> ContainerRef {
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
pub(super) fn kubepods_of(parent: &str) -> Option<String> {
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
