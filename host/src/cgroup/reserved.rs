//! Limits on the existing kube-reserved and system-reserved cgroups (kubelet's
//! `enforceExistingCgroup` in `pkg/kubelet/cm/node_container_manager_linux.go`, with
//! `getCgroupConfig`: the reserved CPU as shares, memory as the limit, `pid` as pids.max).
//! The cgroup must exist: kubelet never makes it.

use std::path::{Path, PathBuf};

use dockerlet_pod::cgroup::{milli_cpu_to_shares, shares_to_weight};

use super::systemd::{property, SliceManager, SystemdError};
use super::{CgroupLayout, CgroupVersion};

/// What is enforced on a reserved cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReservedLimits {
    /// The reserved CPU in millicores, as shares (`cpu.shares` / `cpu.weight`).
    pub cpu_milli: Option<i64>,
    /// The reserved memory in bytes (`memory.limit_in_bytes` / `memory.max`).
    pub memory: Option<i64>,
    /// The reserved PIDs (`pids.max`).
    pub pids: Option<i64>,
}

/// Why a reserved cgroup's limits could not be set.
#[derive(Debug, thiserror::Error)]
pub enum ReservedCgroupError {
    /// kubelet's `%q cgroup does not exist`.
    #[error("{cgroup:?} cgroup does not exist ({} missing)", missing.display())]
    Missing {
        /// The cgroup.
        cgroup: String,
        /// The first directory not there.
        missing: PathBuf,
    },
    /// With the systemd driver the cgroup must be a slice.
    #[error("{cgroup:?} is not a systemd slice (with the systemd cgroup driver the reserved cgroup is a slice, e.g. /system.slice)")]
    NotASlice {
        /// The cgroup.
        cgroup: String,
    },
    /// A limit file could not be written.
    #[error("write {value:?} to {}: {source}", path.display())]
    Write {
        /// The control file.
        path: PathBuf,
        /// The value.
        value: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// systemd refused the unit's properties.
    #[error(transparent)]
    Systemd(#[from] SystemdError),
}

/// Set `limits` on the existing `cgroup` (an absolute cgroupfs path; with `slices`, the
/// systemd driver, a slice whose unit properties are set first). Only the given limits are
/// written, as kubelet's cgroup manager updates only what the resource list has.
pub fn enforce_existing(
    layout: &CgroupLayout,
    slices: Option<&dyn SliceManager>,
    cgroup: &str,
    limits: &ReservedLimits,
) -> Result<(), ReservedCgroupError> {
    let version = layout.version();
    let files = files(layout, cgroup, limits);
    if let Some(missing) = files
        .iter()
        .filter_map(|(path, _)| path.parent())
        .find(|dir| !dir.is_dir())
    {
        return Err(ReservedCgroupError::Missing {
            cgroup: cgroup.to_string(),
            missing: missing.to_path_buf(),
        });
    }
    if let Some(slices) = slices {
        let unit = cgroup.rsplit('/').next().unwrap_or_default();
        if !unit.ends_with(".slice") {
            return Err(ReservedCgroupError::NotASlice {
                cgroup: cgroup.to_string(),
            });
        }
        slices.set(unit, properties(version, limits))?;
    }
    for (path, value) in files {
        std::fs::write(&path, &value).map_err(|source| ReservedCgroupError::Write { path, value, source })?;
    }
    Ok(())
}

/// The control files and values of `limits` on `cgroup`.
fn files(layout: &CgroupLayout, cgroup: &str, limits: &ReservedLimits) -> Vec<(PathBuf, String)> {
    let v2 = layout.version() == CgroupVersion::V2;
    let file = |controller: &str, name: &str| layout.dir(controller, cgroup).map(|d: PathBuf| d.join(name));
    let mut files = Vec::new();
    if let Some(milli) = limits.cpu_milli {
        let shares = milli_cpu_to_shares(milli);
        let (name, value) = match v2 {
            true => ("cpu.weight", shares_to_weight(shares)),
            false => ("cpu.shares", shares),
        };
        files.extend(file("cpu", name).map(|p| (p, value.to_string())));
    }
    if let Some(memory) = limits.memory {
        let name = if v2 { "memory.max" } else { "memory.limit_in_bytes" };
        files.extend(file("memory", name).map(|p| (p, memory.to_string())));
    }
    if let Some(pids) = limits.pids {
        files.extend(file("pids", "pids.max").map(|p| (p, pids.to_string())));
    }
    files
}

fn properties(version: CgroupVersion, limits: &ReservedLimits) -> Vec<super::systemd::Property> {
    let mut properties = Vec::new();
    if let Some(milli) = limits.cpu_milli {
        let shares = milli_cpu_to_shares(milli);
        properties.push(match version {
            CgroupVersion::V1 => property("CPUShares", shares),
            CgroupVersion::V2 => property("CPUWeight", shares_to_weight(shares)),
        });
    }
    if let Some(memory) = limits.memory.and_then(|m| u64::try_from(m).ok()) {
        properties.push(match version {
            CgroupVersion::V1 => property("MemoryLimit", memory),
            CgroupVersion::V2 => property("MemoryMax", memory),
        });
    }
    if let Some(pids) = limits.pids.and_then(|p| u64::try_from(p).ok()) {
        properties.push(property("TasksMax", pids));
    }
    properties
}

/// The kernel's `pid_max` (kubelet's `pidlimit.Stats` MaxPID: the node's PID capacity).
pub fn pid_max(proc_sys: &Path) -> Option<i64> {
    std::fs::read_to_string(proc_sys.join("kernel/pid_max"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: PathBuf) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    /// v1: shares, memory limit and pids.max in each controller of the existing cgroup; only
    /// what is reserved is written.
    #[test]
    fn v1_reserved_cgroup_gets_its_limits() {
        let root = tempfile::tempdir().unwrap();
        for c in ["cpu", "memory", "pids"] {
            std::fs::create_dir_all(root.path().join(c).join("kube-reserved")).unwrap();
        }
        let layout = CgroupLayout::v1_at(root.path(), &["cpu", "memory", "pids"]);
        let limits = ReservedLimits {
            cpu_milli: Some(500),
            memory: Some(1 << 30),
            pids: Some(1000),
        };
        enforce_existing(&layout, None, "/kube-reserved", &limits).unwrap();
        assert_eq!(read(root.path().join("cpu/kube-reserved/cpu.shares")), "512");
        assert_eq!(
            read(root.path().join("memory/kube-reserved/memory.limit_in_bytes")),
            "1073741824"
        );
        assert_eq!(read(root.path().join("pids/kube-reserved/pids.max")), "1000");
        let only_cpu = ReservedLimits {
            cpu_milli: Some(1000),
            ..Default::default()
        };
        std::fs::remove_file(root.path().join("pids/kube-reserved/pids.max")).unwrap();
        enforce_existing(&layout, None, "/kube-reserved", &only_cpu).unwrap();
        assert_eq!(read(root.path().join("cpu/kube-reserved/cpu.shares")), "1024");
        assert!(!root.path().join("pids/kube-reserved/pids.max").exists());
    }

    /// v2: cpu.weight, memory.max, pids.max; a cgroup that does not exist is kubelet's error.
    #[test]
    fn v2_reserved_cgroup_gets_its_limits_and_must_exist() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("system.slice")).unwrap();
        let layout = CgroupLayout::v2_at(root.path());
        let limits = ReservedLimits {
            cpu_milli: Some(1000),
            memory: Some(512 << 20),
            pids: Some(2000),
        };
        enforce_existing(&layout, None, "/system.slice", &limits).unwrap();
        assert_eq!(read(root.path().join("system.slice/cpu.weight")), "39");
        assert_eq!(read(root.path().join("system.slice/memory.max")), "536870912");
        assert_eq!(read(root.path().join("system.slice/pids.max")), "2000");
        let e = enforce_existing(&layout, None, "/nope", &limits)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("\"/nope\" cgroup does not exist"), "{e}");
    }

    /// Records the properties set on units.
    #[derive(Debug, Default)]
    struct Recorder(std::sync::Mutex<Vec<String>>);

    impl SliceManager for Recorder {
        fn ensure(&self, unit: &str, _: Vec<super::super::systemd::Property>) -> Result<(), SystemdError> {
            panic!("a reserved slice is never started: {unit}");
        }
        fn set(&self, unit: &str, properties: Vec<super::super::systemd::Property>) -> Result<(), SystemdError> {
            let set: Vec<String> = properties
                .iter()
                .map(|(n, v)| format!("{n}={}", u64::try_from(v).unwrap()))
                .collect();
            self.0.lock().unwrap().push(format!("{unit} {}", set.join(",")));
            Ok(())
        }
        fn stop(&self, unit: &str) -> Result<(), SystemdError> {
            panic!("a reserved slice is never stopped: {unit}");
        }
    }

    /// With the systemd driver the slice's unit gets the properties of what is reserved (and
    /// the files are written); a cgroup that is not a slice is refused, naming it.
    #[test]
    fn systemd_reserved_slice_gets_unit_properties() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("system.slice")).unwrap();
        std::fs::create_dir_all(root.path().join("custom")).unwrap();
        let layout = CgroupLayout::v2_at(root.path());
        let systemd = Recorder::default();
        let limits = ReservedLimits {
            cpu_milli: Some(1000),
            memory: Some(1 << 30),
            pids: None,
        };
        enforce_existing(&layout, Some(&systemd), "/system.slice", &limits).unwrap();
        assert_eq!(
            *systemd.0.lock().unwrap(),
            ["system.slice CPUWeight=39,MemoryMax=1073741824"]
        );
        assert_eq!(read(root.path().join("system.slice/memory.max")), "1073741824");
        let e = enforce_existing(&layout, Some(&systemd), "/custom", &limits)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("\"/custom\" is not a systemd slice"), "{e}");
    }

    /// pid_max read as kubelet's MaxPID.
    #[test]
    fn pid_max_is_read_from_proc_sys() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("kernel")).unwrap();
        std::fs::write(root.path().join("kernel/pid_max"), "4194304\n").unwrap();
        assert_eq!(pid_max(root.path()), Some(4_194_304));
        assert_eq!(pid_max(&root.path().join("absent")), None);
    }
}
