//! The cgroups slice: the pod cgroup tree (`--cgroup-root`, `--cgroups-per-qos`,
//! `--cgroup-driver`, `--pod-max-pids`, `singleProcessOOMKill`) and the system cgroups
//! (`--kubelet-cgroups`, `--runtime-cgroups`, `--system-cgroups`), flags over the file.

use dockerlet_pod::cgroup::CgroupDriver;

use super::file::FileSettings;
use super::values::is_cgroup_path;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The pod cgroup tree's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupConfig {
    /// `--cgroup-root` (`cgroupRoot`), absolute.
    pub root: String,
    /// `--cgroups-per-qos` (`cgroupsPerQOS`).
    pub per_qos: bool,
    /// `--cgroup-driver` (`cgroupDriver`): `cgroupfs` or `systemd`; none given, the engine's
    /// (as kubelet ≥ 1.31 takes the runtime's, `KubeletCgroupDriverFromCRI`), set at start.
    pub driver: Option<CgroupDriver>,
    /// `--pod-max-pids` (`podPidsLimit`): applied when positive.
    pub pod_pids_limit: i64,
    /// `singleProcessOOMKill`: on cgroup v2 an OOM kills one process instead of the container's
    /// cgroup (kubelet's default, false, sets `memory.oom.group`).
    pub single_process_oom_kill: bool,
    /// `--kubelet-cgroups` (`kubeletCgroups`): the cgroup the agent puts itself in.
    pub kubelet_cgroups: Option<String>,
    /// `--runtime-cgroups` (`runtimeCgroups`): the engine's cgroup, read for its stats.
    pub runtime_cgroups: Option<String>,
    /// `--system-cgroups` (`systemCgroups`): the cgroup the root's other processes are moved
    /// to (needs an explicit `--cgroup-root`, as kubelet).
    pub system_cgroups: Option<String>,
}

/// The cgroup settings from the flags over the file: `cgroupRoot` absolute (`""` is `/`, as
/// kubelet defaults it with per-QoS cgroups), `cgroupDriver` cgroupfs or systemd (checked
/// against Docker's at start), `podPidsLimit` -1 or more; the system cgroups absolute (`""` is
/// none), `systemCgroups` not the root and only with an explicit `cgroupRoot` (kubelet's
/// validation).
pub(super) fn resolve(cli: &Cli, file: &FileSettings) -> Result<CgroupConfig, ConfigError> {
    let explicit_root = cli
        .cgroup_root
        .clone()
        .or_else(|| file.cgroup_root.clone())
        .filter(|r| !r.is_empty());
    let root = explicit_root.clone().unwrap_or_else(|| "/".to_string());
    if !is_cgroup_path(&root) {
        return Err(invalid(
            "--cgroup-root",
            format!("{root:?}: expected an absolute cgroup path without . or .."),
        ));
    }
    let system = system_cgroups(cli, file, explicit_root.is_some())?;
    let driver = match cli.cgroup_driver.clone().or_else(|| file.cgroup_driver.clone()) {
        None => None,
        Some(name) => Some(
            CgroupDriver::parse(&name)
                .ok_or_else(|| invalid("--cgroup-driver", format!("{name:?}: expected cgroupfs or systemd")))?,
        ),
    };
    let pod_pids_limit = cli.pod_max_pids.or(file.pod_pids_limit).unwrap_or(-1);
    if pod_pids_limit < -1 {
        return Err(invalid(
            "--pod-max-pids",
            format!("{pod_pids_limit}: expected -1 (no limit) or more"),
        ));
    }
    Ok(CgroupConfig {
        root,
        per_qos: cli.cgroups_per_qos.or(file.cgroups_per_qos).unwrap_or(true),
        driver,
        pod_pids_limit,
        single_process_oom_kill: file.single_process_oom_kill.unwrap_or(false),
        kubelet_cgroups: system.kubelet,
        runtime_cgroups: system.runtime,
        system_cgroups: system.system,
    })
}

/// `--kubelet-cgroups`, `--runtime-cgroups` and `--system-cgroups`.
struct SystemCgroups {
    kubelet: Option<String>,
    runtime: Option<String>,
    system: Option<String>,
}

/// The kubelet's, the runtime's and the system's cgroups: absolute (`""` is none); the
/// system cgroup not the root and only with an explicit `--cgroup-root`.
fn system_cgroups(cli: &Cli, file: &FileSettings, explicit_root: bool) -> Result<SystemCgroups, ConfigError> {
    let system_cgroup = |flag: &str, value: Option<String>| -> Result<Option<String>, ConfigError> {
        match value.filter(|v| !v.is_empty()) {
            Some(v) if !is_cgroup_path(&v) => Err(invalid(
                flag,
                format!("{v:?}: expected an absolute cgroup path without . or .."),
            )),
            v => Ok(v),
        }
    };
    let kubelet = system_cgroup(
        "--kubelet-cgroups",
        cli.kubelet_cgroups.clone().or_else(|| file.kubelet_cgroups.clone()),
    )?;
    let runtime = system_cgroup(
        "--runtime-cgroups",
        cli.runtime_cgroups.clone().or_else(|| file.runtime_cgroups.clone()),
    )?;
    let system = system_cgroup(
        "--system-cgroups",
        cli.system_cgroups.clone().or_else(|| file.system_cgroups.clone()),
    )?;
    if let Some(system) = &system {
        if system.trim_matches('/').is_empty() {
            return Err(invalid(
                "--system-cgroups",
                "system container cannot be root (\"/\")".into(),
            ));
        }
        if !explicit_root {
            return Err(invalid(
                "--system-cgroups",
                "systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was not specified"
                    .into(),
            ));
        }
    }
    Ok(SystemCgroups {
        kubelet,
        runtime,
        system,
    })
}
