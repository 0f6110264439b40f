//! The kubepods cgroup tree on the node, as kubelet's cgroup managers keep it
//! (`pkg/kubelet/cm`: the node-allocatable cgroup, `qos_container_manager_linux.go`,
//! `pod_container_manager_linux.go`): `kubepods`, `kubepods/burstable` and
//! `kubepods/besteffort` made at start, a pod cgroup with the pod's limits made before its
//! sandbox and removed (children first, in every hierarchy) after its last container, and the
//! burstable cgroup's cpu.shares kept at the sum of its pods' requests. With the cgroupfs driver
//! the agent makes the directories; with the systemd driver systemd makes them as transient
//! slices ([`super::systemd`]) and the limits go both to the units' properties and to the files,
//! as runc's systemd manager does. Names and sums are the pure `dockerlet_pod::cgroup`. Blocking
//! I/O: call on `spawn_blocking`.

use std::collections::{BTreeSet, HashMap};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dockerlet_pod::cgroup::{
    milli_cpu_to_shares, pod_resources, resource_config_for_pod, shares_to_weight, CgroupNaming, PodResourceConfig,
    QosClass, MIN_SHARES,
};
use dockerlet_pod::field::FieldError;
use k8s_openapi::api::core::v1::Pod;

use super::systemd::{resource_properties, shares_properties, SliceManager, SystemdError};
use super::{CgroupLayout, CgroupVersion};

/// The v1 controllers the agent makes a pod cgroup in and writes limits to; runc makes the
/// container cgroups (and any missing parent) in the other hierarchies.
const V1_CONTROLLERS: [&str; 4] = ["cpu", "cpuacct", "memory", "pids"];
/// The v2 controllers enabled for children along the tree.
const V2_CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];

/// Why a cgroup of the tree could not be made, set or removed. A pod cgroup that cannot be
/// made fails the sandbox (retried at the next sync); one that cannot be removed fails the
/// pod's teardown (retried a second later).
#[derive(Debug, thiserror::Error)]
pub enum CgroupTreeError {
    /// mkdir failed.
    #[error("create cgroup {}: {source}", path.display())]
    Create {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A limit could not be written.
    #[error("write {value:?} to {}: {source}", path.display())]
    Write {
        /// The control file.
        path: PathBuf,
        /// What was written.
        value: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// rmdir (or the listing before it) failed; a cgroup with processes stays (`EBUSY`).
    #[error("remove cgroup {}: {source}", path.display())]
    Remove {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The pod's resources do not parse (the field is named).
    #[error("pod cgroup limits: {0}")]
    Resources(#[from] FieldError),
    /// systemd refused a slice (systemd cgroup driver).
    #[error(transparent)]
    Systemd(#[from] SystemdError),
    /// systemd started the slice but its cgroup did not appear.
    #[error("systemd started {unit} but its cgroup {} did not appear within {:?}", path.display(), super::systemd::REALIZE_WAIT)]
    NotRealized {
        /// The slice.
        unit: String,
        /// The directory looked for.
        path: PathBuf,
    },
}

/// What the agent last set up for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodEntry {
    qos: QosClass,
    config: PodResourceConfig,
    cpu_request_milli: i64,
}

#[derive(Debug, Default)]
struct State {
    /// Pods whose cgroup this agent made (or found and set) since it started, by UID.
    pods: HashMap<String, PodEntry>,
    /// The burstable cgroup's shares as last written.
    burstable_shares: Option<u64>,
}

/// The node's pod cgroup tree, shared by every PodWorker (`Arc`): the burstable cgroup's shares
/// depend on all Burstable pods.
#[derive(Debug)]
pub struct PodCgroups {
    layout: CgroupLayout,
    naming: CgroupNaming,
    /// `--pod-max-pids` (applied when positive).
    pod_pids_limit: i64,
    /// systemd, with the systemd driver.
    slices: Option<Arc<dyn SliceManager>>,
    /// `cpuCFSQuota`: pod cgroups get their CPU limit as a quota (else shares only).
    cpu_cfs_quota: bool,
    state: Mutex<State>,
}

impl PodCgroups {
    /// The tree of `naming` (which must be per-QoS) over `layout`; `slices` is systemd for
    /// the systemd driver (and must be given then).
    pub fn new(
        layout: CgroupLayout,
        naming: CgroupNaming,
        pod_pids_limit: i64,
        slices: Option<Arc<dyn SliceManager>>,
    ) -> Self {
        Self {
            layout,
            naming,
            pod_pids_limit,
            slices,
            cpu_cfs_quota: true,
            state: Mutex::default(),
        }
    }

    /// kubelet's `--cpu-cfs-quota`: false gives pod cgroups no CPU quota, only shares
    /// (`pkg/kubelet/cm/pod_container_manager_linux.go`, `enforceCPULimits`).
    pub fn with_cpu_cfs_quota(mut self, enforce: bool) -> Self {
        self.cpu_cfs_quota = enforce;
        self
    }

    /// `allocatableMemory.available` of `kubepods` (its limit less its working set, and its
    /// limit; [`crate::signals::pods_memory`]).
    pub fn kubepods_memory(&self) -> Option<(i64, i64)> {
        crate::signals::pods_memory(&self.layout, &self.naming.kubepods())
    }

    /// The names.
    pub fn naming(&self) -> &CgroupNaming {
        &self.naming
    }

    /// Make `kubepods` with `kubepods` as its limits (the node's allocatable CPU as shares,
    /// memory and PIDs, [`dockerlet_pod::cgroup::kubepods_config`]), and the burstable and
    /// besteffort cgroups (besteffort with the minimum shares), as kubelet's container manager
    /// does at start. Idempotent.
    pub fn setup(&self, kubepods_limits: &PodResourceConfig) -> Result<(), CgroupTreeError> {
        let kubepods = self.naming.kubepods();
        self.make(&kubepods)?;
        self.write_limits(&kubepods, kubepods_limits)?;
        let burstable = self.naming.qos(QosClass::Burstable);
        self.make(&burstable)?;
        let besteffort = self.naming.qos(QosClass::BestEffort);
        self.make(&besteffort)?;
        self.write_shares(&besteffort, MIN_SHARES)?;
        let mut state = self.lock();
        self.update_burstable(&mut state)
    }

    /// Make the pod's cgroup with its limits (kubelet's `EnsureExists` and
    /// `ResourceConfigForPod`) and return Docker's `CgroupParent` for it (its path with
    /// cgroupfs, its slice with systemd). Nothing is written when it was already set up with the
    /// same limits.
    pub fn ensure_pod(&self, pod: &Pod) -> Result<String, CgroupTreeError> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let qos = QosClass::of(pod);
        let cgroup = self.naming.pod(qos, &uid);
        let entry = PodEntry {
            qos,
            config: {
                let mut config = resource_config_for_pod(pod, self.pod_pids_limit)?;
                if !self.cpu_cfs_quota {
                    (config.cpu_quota, config.cpu_period) = (None, None);
                }
                config
            },
            cpu_request_milli: pod_resources(pod)?.cpu_request_milli,
        };
        let parent = self.naming.docker_parent(&cgroup);
        let mut state = self.lock();
        if state.pods.get(&uid) == Some(&entry) && self.exists(&cgroup) {
            return Ok(parent);
        }
        self.make(&cgroup)?;
        self.write_limits(&cgroup, &entry.config)?;
        state.pods.insert(uid, entry);
        self.update_burstable(&mut state)?;
        Ok(parent)
    }

    /// cgroup v2: have the kernel kill a container's whole cgroup on an OOM
    /// (`memory.oom.group` 1), as kubelet asks the runtime for every container on v2 unless
    /// `singleProcessOOMKill` (`kuberuntime_container_linux.go`
    /// `generateLinuxContainerResources`). Docker has no setting for it, so it is written in the
    /// cgroup Docker made under `parent`; the kernel reads it when an OOM kill happens, so
    /// writing it after the start is in time. False on v1 (no such file) or for a container
    /// whose cgroup is gone already.
    pub fn group_oom_kills(&self, parent: &str, container_id: &str) -> Result<bool, CgroupTreeError> {
        if self.layout.version() != CgroupVersion::V2 {
            return Ok(false);
        }
        let cgroup = CgroupNaming::container_cgroup(parent, container_id, self.naming.driver());
        let Some(dir) = self.layout.dir("memory", &cgroup) else {
            return Ok(false);
        };
        if !dir.is_dir() {
            return Ok(false);
        }
        write(&dir.join("memory.oom.group"), "1")?;
        Ok(true)
    }

    /// Whether this agent set up the pod's cgroup (limits written, counted in the burstable
    /// cgroup): a later sync of the running pod has nothing to check.
    pub fn knows(&self, uid: &str) -> bool {
        self.lock().pods.contains_key(uid)
    }

    /// Remove the pod's cgroup in every hierarchy, children first (wherever its QoS class put
    /// it), and take its requests off the burstable cgroup.
    pub fn remove_pod(&self, uid: &str) -> Result<(), CgroupTreeError> {
        let mut state = self.lock();
        for qos in [QosClass::Guaranteed, QosClass::Burstable, QosClass::BestEffort] {
            self.remove_everywhere(&self.naming.pod(qos, uid))?;
        }
        if state.pods.remove(uid).is_some() {
            self.update_burstable(&mut state)?;
        }
        Ok(())
    }

    /// Remove the pod cgroups under this agent's root whose pod is not in `keep` (kubelet's
    /// `cleanupOrphanedPodCgroups`, at start-up); a cgroup that still has processes stays.
    /// Returns the UIDs removed and the failures.
    pub fn remove_orphans(&self, keep: &BTreeSet<String>) -> (Vec<String>, Vec<CgroupTreeError>) {
        let mut found = BTreeSet::new();
        for root in self.layout.hierarchies() {
            for qos in [QosClass::Guaranteed, QosClass::Burstable, QosClass::BestEffort] {
                let dir = root.join(self.naming.qos(qos).trim_start_matches('/'));
                let Ok(entries) = std::fs::read_dir(&dir) else { continue };
                for entry in entries.flatten() {
                    let name = entry.file_name();
                    let Some(uid) = name.to_str().and_then(CgroupNaming::uid_of_dir) else {
                        continue;
                    };
                    if entry.path().is_dir() && !keep.contains(&uid) {
                        found.insert(uid);
                    }
                }
            }
        }
        let mut removed = Vec::new();
        let mut errors = Vec::new();
        for uid in found {
            match self.remove_pod(&uid) {
                Ok(()) => removed.push(uid),
                Err(e) => errors.push(e),
            }
        }
        (removed, errors)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves nothing half-done that a later call cannot redo.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The directories of `cgroup` the agent makes and writes to.
    fn dirs(&self, cgroup: &str) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = match self.layout.version() {
            CgroupVersion::V1 => V1_CONTROLLERS
                .iter()
                .filter_map(|c| self.layout.dir(c, cgroup))
                .collect(),
            CgroupVersion::V2 => self.layout.dir("memory", cgroup).into_iter().collect(),
        };
        dirs.dedup();
        dirs
    }

    fn exists(&self, cgroup: &str) -> bool {
        self.dirs(cgroup).iter().all(|d| d.is_dir())
    }

    /// mkdir -p in each controller (v2: with the controllers enabled along the way); with the
    /// systemd driver, start the slice and wait for systemd to make its cgroup.
    fn make(&self, cgroup: &str) -> Result<(), CgroupTreeError> {
        let Some(slices) = &self.slices else {
            return make_cgroup(&self.layout, &V1_CONTROLLERS, cgroup);
        };
        let unit = unit_of(cgroup);
        slices.ensure(unit, Vec::new())?;
        let deadline = std::time::Instant::now() + super::systemd::REALIZE_WAIT;
        while !self.exists(cgroup) {
            if std::time::Instant::now() > deadline {
                return Err(CgroupTreeError::NotRealized {
                    unit: unit.to_string(),
                    path: self.dirs(cgroup).into_iter().next().unwrap_or_default(),
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(())
    }

    /// The limits of `config` on `cgroup`: v1 cpu.shares, cpu.cfs_period_us / cpu.cfs_quota_us,
    /// memory.limit_in_bytes, pids.max; v2 cpu.weight, cpu.max, memory.max, pids.max. An
    /// absent limit is written as unlimited, so a changed pod loses an old one.
    fn write_limits(&self, cgroup: &str, config: &PodResourceConfig) -> Result<(), CgroupTreeError> {
        if let Some(slices) = &self.slices {
            // systemd would write its own values back at a daemon-reload: it gets them too, and
            // setting them is also what makes systemd enable the controllers whose files are
            // then written (systemd ≥ 252 enables cpu only for a weight or a quota).
            slices.set(unit_of(cgroup), resource_properties(self.layout.version(), config))?;
        }
        self.write_shares_file(cgroup, config.cpu_shares)?;
        let pids = config.pids_limit.map_or("max".to_string(), |p| p.to_string());
        match self.layout.version() {
            CgroupVersion::V1 => {
                if let Some(cpu) = self.layout.dir("cpu", cgroup) {
                    if let (Some(quota), Some(period)) = (config.cpu_quota, config.cpu_period) {
                        write(&cpu.join("cpu.cfs_period_us"), &period.to_string())?;
                        write(&cpu.join("cpu.cfs_quota_us"), &quota.to_string())?;
                    } else {
                        write(&cpu.join("cpu.cfs_quota_us"), "-1")?;
                    }
                }
                if let Some(memory) = self.layout.dir("memory", cgroup) {
                    let limit = config.memory_limit.map_or("-1".to_string(), |m| m.to_string());
                    write(&memory.join("memory.limit_in_bytes"), &limit)?;
                }
                if let Some(dir) = self.layout.dir("pids", cgroup) {
                    write(&dir.join("pids.max"), &pids)?;
                }
            }
            CgroupVersion::V2 => {
                let Some(dir) = self.layout.dir("memory", cgroup) else {
                    return Ok(());
                };
                let max = match (config.cpu_quota, config.cpu_period) {
                    (Some(quota), Some(period)) => format!("{quota} {period}"),
                    _ => format!("max {}", dockerlet_pod::cgroup::CPU_PERIOD_US),
                };
                write(&dir.join("cpu.max"), &max)?;
                let limit = config.memory_limit.map_or("max".to_string(), |m| m.to_string());
                write(&dir.join("memory.max"), &limit)?;
                write(&dir.join("pids.max"), &pids)?;
            }
        }
        Ok(())
    }

    /// The CPU weight alone: on the unit first with systemd (which enables the cpu
    /// controller for it), then in the file.
    fn write_shares(&self, cgroup: &str, shares: u64) -> Result<(), CgroupTreeError> {
        if let Some(slices) = &self.slices {
            slices.set(unit_of(cgroup), shares_properties(self.layout.version(), shares))?;
        }
        self.write_shares_file(cgroup, shares)
    }

    fn write_shares_file(&self, cgroup: &str, shares: u64) -> Result<(), CgroupTreeError> {
        match self.layout.version() {
            CgroupVersion::V1 => match self.layout.dir("cpu", cgroup) {
                Some(dir) => write(&dir.join("cpu.shares"), &shares.to_string()),
                None => Ok(()),
            },
            CgroupVersion::V2 => match self.layout.dir("cpu", cgroup) {
                Some(dir) => write(&dir.join("cpu.weight"), &shares_to_weight(shares).to_string()),
                None => Ok(()),
            },
        }
    }

    /// The burstable cgroup's shares: the sum of its pods' CPU requests (kubelet's
    /// `setCPUCgroupConfig`), written when it changed.
    fn update_burstable(&self, state: &mut State) -> Result<(), CgroupTreeError> {
        let requests: i64 = state
            .pods
            .values()
            .filter(|p| p.qos == QosClass::Burstable)
            .map(|p| p.cpu_request_milli)
            .sum();
        let shares = milli_cpu_to_shares(requests);
        if state.burstable_shares != Some(shares) {
            self.write_shares(&self.naming.qos(QosClass::Burstable), shares)?;
            state.burstable_shares = Some(shares);
        }
        Ok(())
    }

    /// rmdir `cgroup` and everything under it in every hierarchy, deepest first; with the
    /// systemd driver, stop its slice first (systemd removes the cgroup), then clear what is
    /// left in hierarchies systemd does not manage.
    fn remove_everywhere(&self, cgroup: &str) -> Result<(), CgroupTreeError> {
        if let Some(slices) = &self.slices {
            slices.stop(unit_of(cgroup))?;
        }
        for root in self.layout.hierarchies() {
            remove_tree(&root.join(cgroup.trim_start_matches('/')))?;
        }
        Ok(())
    }
}

/// The unit name of a systemd cgroup path (its last component, a slice).
fn unit_of(cgroup: &str) -> &str {
    cgroup.rsplit('/').next().unwrap_or(cgroup)
}

/// rmdir a cgroup directory after its child cgroups; a missing one is already gone.
fn remove_tree(dir: &Path) -> Result<(), CgroupTreeError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(CgroupTreeError::Remove {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&entry.path())?;
        }
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(source) => Err(CgroupTreeError::Remove {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// cgroup v2: let `dir`'s children use the cpu, memory and pids controllers that `dir` has.
/// mkdir -p `cgroup` in each of the v1 `controllers` mounted; on v2 the controllers are enabled
/// for children along the way (`cgroup.subtree_control`), as runc and kubelet do.
pub(super) fn make_cgroup(layout: &CgroupLayout, controllers: &[&str], cgroup: &str) -> Result<(), CgroupTreeError> {
    match layout.version() {
        CgroupVersion::V1 => {
            for dir in controllers.iter().filter_map(|c| layout.dir(c, cgroup)) {
                std::fs::create_dir_all(&dir).map_err(|source| CgroupTreeError::Create { path: dir, source })?;
            }
        }
        CgroupVersion::V2 => {
            let Some(root) = layout.dir("memory", "/") else {
                return Ok(());
            };
            let mut dir = root;
            for part in cgroup.split('/').filter(|p| !p.is_empty()) {
                enable_v2_controllers(&dir)?;
                dir.push(part);
                match std::fs::create_dir(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                    Err(source) => return Err(CgroupTreeError::Create { path: dir, source }),
                }
            }
        }
    }
    Ok(())
}

fn enable_v2_controllers(dir: &Path) -> Result<(), CgroupTreeError> {
    let Ok(available) = std::fs::read_to_string(dir.join("cgroup.controllers")) else {
        return Ok(());
    };
    let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
    let missing: Vec<String> = V2_CONTROLLERS
        .iter()
        .filter(|c| available.split_whitespace().any(|a| a == **c))
        .filter(|c| !enabled.split_whitespace().any(|e| e == **c))
        .map(|c| format!("+{c}"))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    write(&dir.join("cgroup.subtree_control"), &missing.join(" "))
}

fn write(path: &Path, value: &str) -> Result<(), CgroupTreeError> {
    std::fs::write(path, value).map_err(|source| CgroupTreeError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_pod::cgroup::CgroupDriver;
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn pod(uid: &str, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Pod {
        let list = |items: &[(&str, &str)]| {
            (!items.is_empty()).then(|| {
                items
                    .iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect::<BTreeMap<_, _>>()
            })
        };
        Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: list(requests),
                        limits: list(limits),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        }
    }

    fn read(path: PathBuf) -> String {
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .trim()
            .to_string()
    }

    /// A recorded cgroup v2 root: the controllers available, nothing enabled yet.
    fn v2_root() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cgroup.controllers"),
            "cpuset cpu io memory hugetlb pids rdma\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("cgroup.subtree_control"), "").unwrap();
        dir
    }

    /// On cgroup v2 the tree gets cpu.weight (runc's conversion of the shares), cpu.max,
    /// memory.max and pids.max, the controllers enabled on the way; burstable's weight follows
    /// its pods' requests; removal takes the pod's directory (and a child) away.
    #[test]
    fn v2_tree_is_written_as_kubelet_writes_it() {
        let root = v2_root();
        let tree = PodCgroups::new(
            CgroupLayout::v2_at(root.path()),
            CgroupNaming::new("/dockerlet", true, CgroupDriver::Cgroupfs).unwrap(),
            1024,
            None,
        );
        tree.setup(&dockerlet_pod::cgroup::kubepods_config(2000, 4 << 30, None))
            .unwrap();
        let kubepods = root.path().join("dockerlet/kubepods");
        assert_eq!(read(root.path().join("cgroup.subtree_control")), "+cpu +memory +pids");
        assert_eq!(read(kubepods.join("cpu.weight")), shares_to_weight(2048).to_string());
        assert_eq!(read(kubepods.join("memory.max")), (4u64 << 30).to_string());
        assert_eq!(read(kubepods.join("cpu.max")), "max 100000");
        assert_eq!(read(kubepods.join("besteffort/cpu.weight")), "1");
        assert_eq!(read(kubepods.join("burstable/cpu.weight")), "1");

        let g = pod(
            "g1",
            &[("cpu", "100m"), ("memory", "100Mi")],
            &[("cpu", "100m"), ("memory", "100Mi")],
        );
        assert_eq!(tree.ensure_pod(&g).unwrap(), "/dockerlet/kubepods/podg1");
        assert_eq!(read(kubepods.join("podg1/cpu.max")), "10000 100000");
        assert_eq!(read(kubepods.join("podg1/memory.max")), (100u64 << 20).to_string());
        assert_eq!(
            read(kubepods.join("podg1/cpu.weight")),
            shares_to_weight(102).to_string()
        );
        assert_eq!(read(kubepods.join("podg1/pids.max")), "1024");

        let b = pod("b1", &[("cpu", "1")], &[("memory", "200Mi")]);
        let cgroup = tree.ensure_pod(&b).unwrap();
        assert_eq!(cgroup, "/dockerlet/kubepods/burstable/podb1");
        let dir = kubepods.join("burstable/podb1");
        assert_eq!(read(dir.join("cpu.max")), "max 100000");
        assert_eq!(read(dir.join("memory.max")), (200u64 << 20).to_string());
        assert_eq!(
            read(kubepods.join("burstable/cpu.weight")),
            shares_to_weight(1024).to_string()
        );

        std::fs::create_dir(dir.join("c1")).unwrap();
        assert!(tree.group_oom_kills(&cgroup, "c1").unwrap());
        assert_eq!(read(dir.join("c1/memory.oom.group")), "1");
        assert!(!tree.group_oom_kills(&cgroup, "gone").unwrap(), "a vanished container");
        std::fs::remove_file(dir.join("c1/memory.oom.group")).unwrap();
        std::fs::remove_dir(dir.join("c1")).unwrap();

        let be = pod("e1", &[], &[]);
        tree.ensure_pod(&be).unwrap();
        assert_eq!(read(kubepods.join("besteffort/pode1/memory.max")), "max");

        // Files a real cgroupfs has are written, not created: a recorded tree needs them gone
        // before rmdir, as a kernel's vanish with the directory.
        for d in [dir.clone(), kubepods.join("podg1"), kubepods.join("besteffort/pode1")] {
            for f in std::fs::read_dir(&d).unwrap().flatten() {
                if f.path().is_file() {
                    std::fs::remove_file(f.path()).unwrap();
                }
            }
        }
        std::fs::create_dir(dir.join("container1")).unwrap();
        assert!(tree.knows("b1"), "set up by this agent: later syncs skip the check");
        tree.remove_pod("b1").unwrap();
        assert!(!dir.exists());
        assert!(!tree.knows("b1"));
        assert_eq!(read(kubepods.join("burstable/cpu.weight")), "1");
        let (removed, errors) = tree.remove_orphans(&BTreeSet::from(["g1".to_string()]));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(removed, vec!["e1".to_string()]);
        assert!(kubepods.join("podg1").exists());
        assert!(!kubepods.join("besteffort/pode1").exists());
    }

    /// systemd in a test: records the calls and, as systemd does, makes a started slice's
    /// cgroup (under the recorded v2 root) and removes a stopped one's.
    #[derive(Debug)]
    struct RecordingSystemd {
        root: PathBuf,
        calls: Mutex<Vec<String>>,
    }

    impl SliceManager for RecordingSystemd {
        fn ensure(&self, unit: &str, properties: Vec<super::super::systemd::Property>) -> Result<(), SystemdError> {
            let path = dockerlet_pod::cgroup::naming::expand_slice(unit).expect("a slice");
            std::fs::create_dir_all(self.root.join(path.trim_start_matches('/'))).unwrap();
            self.calls
                .lock()
                .unwrap()
                .push(format!("start {unit} {}", properties.len()));
            Ok(())
        }
        fn set(&self, unit: &str, properties: Vec<super::super::systemd::Property>) -> Result<(), SystemdError> {
            let names: Vec<&str> = properties.iter().map(|(n, _)| *n).collect();
            self.calls
                .lock()
                .unwrap()
                .push(format!("set {unit} {}", names.join(",")));
            Ok(())
        }
        fn stop(&self, unit: &str) -> Result<(), SystemdError> {
            let path = dockerlet_pod::cgroup::naming::expand_slice(unit).expect("a slice");
            // A real cgroup's files go with it; the recorded ones need removing.
            let _ = std::fs::remove_dir_all(self.root.join(path.trim_start_matches('/')));
            self.calls.lock().unwrap().push(format!("stop {unit}"));
            Ok(())
        }
    }

    /// With the systemd driver the tree is slices systemd makes: `kubepods.slice` and the QoS
    /// slices started and sized through unit properties (and the files, as runc writes both),
    /// a pod's slice named as kubelet names it and handed to Docker by its unit name, the
    /// burstable slice's weight set on the unit, removal a stop of the unit.
    #[test]
    fn systemd_tree_is_slices_started_sized_and_stopped_through_systemd() {
        let root = v2_root();
        let systemd = Arc::new(RecordingSystemd {
            root: root.path().to_path_buf(),
            calls: Mutex::default(),
        });
        let tree = PodCgroups::new(
            CgroupLayout::v2_at(root.path()),
            CgroupNaming::new("/", true, CgroupDriver::Systemd).unwrap(),
            -1,
            Some(systemd.clone()),
        );
        tree.setup(&dockerlet_pod::cgroup::kubepods_config(2000, 4 << 30, None))
            .unwrap();
        assert_eq!(
            read(root.path().join("kubepods.slice/memory.max")),
            (4u64 << 30).to_string()
        );
        let b = pod("b-1", &[("cpu", "1")], &[("memory", "200Mi")]);
        assert_eq!(tree.ensure_pod(&b).unwrap(), "kubepods-burstable-podb_1.slice");
        let dir = root
            .path()
            .join("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb_1.slice");
        assert_eq!(read(dir.join("memory.max")), (200u64 << 20).to_string());
        tree.remove_pod("b-1").unwrap();
        assert!(!dir.exists());
        let calls = systemd.calls.lock().unwrap().clone();
        for expected in [
            "start kubepods.slice 0",
            "set kubepods.slice CPUWeight,CPUQuotaPerSecUSec,MemoryMax,TasksMax",
            "start kubepods-burstable.slice 0",
            "start kubepods-besteffort.slice 0",
            "set kubepods-besteffort.slice CPUWeight",
            "start kubepods-burstable-podb_1.slice 0",
            "set kubepods-burstable-podb_1.slice CPUWeight,CPUQuotaPerSecUSec,MemoryMax,TasksMax",
            "set kubepods-burstable.slice CPUWeight",
            "stop kubepods-burstable-podb_1.slice",
        ] {
            assert!(calls.iter().any(|c| c == expected), "{expected} in {calls:#?}");
        }
    }

    /// On cgroup v1 each controller gets its files; an unchanged pod is not written again.
    #[test]
    fn v1_tree_writes_each_controller() {
        let root = tempfile::tempdir().unwrap();
        let layout = CgroupLayout::v1_at(root.path(), &["cpu", "cpuacct", "memory", "pids"]);
        let naming = CgroupNaming::new("/", true, CgroupDriver::Cgroupfs).unwrap();
        let tree = PodCgroups::new(layout, naming, -1, None);
        tree.setup(&dockerlet_pod::cgroup::kubepods_config(1000, 1 << 30, None))
            .unwrap();
        assert_eq!(read(root.path().join("cpu/kubepods/cpu.shares")), "1024");
        assert_eq!(
            read(root.path().join("memory/kubepods/memory.limit_in_bytes")),
            (1u64 << 30).to_string()
        );
        assert_eq!(read(root.path().join("cpu/kubepods/besteffort/cpu.shares")), "2");
        let b = pod(
            "b1",
            &[("cpu", "100m"), ("memory", "100Mi")],
            &[("cpu", "200m"), ("memory", "200Mi")],
        );
        tree.ensure_pod(&b).unwrap();
        let cpu = root.path().join("cpu/kubepods/burstable/podb1");
        assert_eq!(read(cpu.join("cpu.cfs_quota_us")), "20000");
        assert_eq!(read(cpu.join("cpu.cfs_period_us")), "100000");
        assert_eq!(read(cpu.join("cpu.shares")), "102");
        assert_eq!(
            read(
                root.path()
                    .join("memory/kubepods/burstable/podb1/memory.limit_in_bytes")
            ),
            (200u64 << 20).to_string()
        );
        assert_eq!(read(root.path().join("pids/kubepods/burstable/podb1/pids.max")), "max");
        assert!(root.path().join("cpuacct/kubepods/burstable/podb1").is_dir());
        assert_eq!(read(root.path().join("cpu/kubepods/burstable/cpu.shares")), "102");
        std::fs::write(cpu.join("cpu.shares"), "7").unwrap();
        tree.ensure_pod(&b).unwrap();
        assert_eq!(
            read(cpu.join("cpu.shares")),
            "7",
            "an unchanged pod is not written again"
        );
        let bad = pod("x", &[("cpu", "much")], &[]);
        assert!(matches!(tree.ensure_pod(&bad), Err(CgroupTreeError::Resources(_))));
    }
}
