//! kubelet's node-level settings: `maxPods`/`podsPerCore`, `failSwapOn`,
//! `protectKernelDefaults`, `cpuCFSQuota`/`cpuCFSQuotaPeriod` and `enforceNodeAllocatable` with
//! `kubeReservedCgroup`/`systemReservedCgroup`, flags over the file over kubelet's defaults,
//! validated with kubelet's messages (`pkg/kubelet/apis/config/validation/validation.go`,
//! defaults from `pkg/kubelet/apis/config/v1beta1/defaults.go`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::ConfigError;
use crate::cli::Cli;

/// kubelet's `maxPods` default.
pub const DEFAULT_MAX_PODS: i64 = 110;
/// kubelet's `cpuCFSQuotaPeriod` default (validation.go's `defaultCFSQuota`).
pub const DEFAULT_CFS_QUOTA_PERIOD: Duration = Duration::from_millis(100);

/// The config file's keys of these settings.
#[derive(Debug, Default)]
pub(super) struct FileNode {
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    pub fail_swap_on: Option<bool>,
    pub protect_kernel_defaults: Option<bool>,
    pub cpu_cfs_quota: Option<bool>,
    pub cpu_cfs_quota_period: Option<Duration>,
    pub enforce_node_allocatable: Option<Vec<String>>,
    pub kube_reserved_cgroup: Option<String>,
    pub system_reserved_cgroup: Option<String>,
}

/// A reserved cgroup whose limits are enforced (`kube-reserved` or `system-reserved` in
/// `enforceNodeAllocatable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedCgroup {
    /// `kubeReservedCgroup` / `systemReservedCgroup`: an existing cgroup, absolute.
    pub cgroup: String,
    /// `--kube-reserved` / `--system-reserved`: cpu in millicores, the rest in units.
    pub reserved: BTreeMap<String, i64>,
    /// `…-reserved-compressible`: only the CPU is enforced.
    pub compressible_only: bool,
}

/// What `enforceNodeAllocatable` enforces.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Enforcement {
    /// `pods`: `kubepods` limited to the allocatable (else to the capacity).
    pub pods: bool,
    /// `kube-reserved` (or `kube-reserved-compressible`).
    pub kube_reserved: Option<ReservedCgroup>,
    /// `system-reserved` (or `system-reserved-compressible`).
    pub system_reserved: Option<ReservedCgroup>,
}

/// The node-level settings.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSettings {
    /// `maxPods` (`--max-pods`).
    pub max_pods: i64,
    /// `podsPerCore` (`--pods-per-core`); 0 for no per-core limit.
    pub pods_per_core: i64,
    /// `failSwapOn` (`--fail-swap-on`).
    pub fail_swap_on: bool,
    /// `protectKernelDefaults` (`--protect-kernel-defaults`).
    pub protect_kernel_defaults: bool,
    /// `cpuCFSQuota` (`--cpu-cfs-quota`): CPU limits become CFS quotas.
    pub cpu_cfs_quota: bool,
    /// `cpuCFSQuotaPeriod` (`--cpu-cfs-quota-period`); only kubelet's default is accepted.
    pub cpu_cfs_quota_period: Duration,
    /// `enforceNodeAllocatable` (`--enforce-node-allocatable`).
    pub enforce: Enforcement,
}

impl NodeSettings {
    /// The node's `pods` capacity (and allocatable) on `cores` CPUs, as kubelet's MachineInfo
    /// setter (`pkg/kubelet/nodestatus/setters.go`): `min(podsPerCore × cores, maxPods)` when
    /// `podsPerCore` is positive, else `maxPods`.
    pub fn pods_capacity(&self, cores: usize) -> i64 {
        let cores = i64::try_from(cores).unwrap_or(i64::MAX);
        match self.pods_per_core {
            n if n > 0 => n.saturating_mul(cores).min(self.max_pods),
            _ => self.max_pods,
        }
    }
}

fn invalid(setting: &str, reason: String) -> ConfigError {
    ConfigError::Invalid {
        setting: setting.to_string(),
        reason: format!("invalid configuration: {reason}"),
    }
}

/// The settings, flags over `file`; `per_qos` is `cgroupsPerQOS` and `reserved` the parsed
/// `--kube-reserved` and `--system-reserved`.
pub(super) fn node_settings(
    cli: &Cli,
    file: FileNode,
    per_qos: bool,
    reserved: [BTreeMap<String, i64>; 2],
) -> Result<NodeSettings, ConfigError> {
    let max_pods = cli.max_pods.or(file.max_pods).unwrap_or(DEFAULT_MAX_PODS);
    if max_pods < 0 {
        return Err(invalid(
            "--max-pods",
            format!("maxPods (--max-pods) {max_pods} must not be a negative number"),
        ));
    }
    let pods_per_core = cli.pods_per_core.or(file.pods_per_core).unwrap_or(0);
    if pods_per_core < 0 {
        return Err(invalid(
            "--pods-per-core",
            format!("podsPerCore (--pods-per-core) {pods_per_core} must not be a negative number"),
        ));
    }
    let period = cli
        .cpu_cfs_quota_period
        .or(file.cpu_cfs_quota_period)
        .unwrap_or(DEFAULT_CFS_QUOTA_PERIOD);
    // The CustomCPUCFSQuotaPeriod gate is off by default and dockerlet takes no featureGates
    // here: another period is refused as kubelet refuses it without the gate.
    if period != DEFAULT_CFS_QUOTA_PERIOD {
        return Err(invalid(
            "--cpu-cfs-quota-period",
            format!(
                "cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {} requires feature gate CustomCPUCFSQuotaPeriod",
                humantime::format_duration(period)
            ),
        ));
    }
    let kube_cgroup = cli.kube_reserved_cgroup.clone().or(file.kube_reserved_cgroup);
    let system_cgroup = cli.system_reserved_cgroup.clone().or(file.system_reserved_cgroup);
    let list = match cli.enforce_node_allocatable.clone() {
        Some(flag) => flag.into_iter().filter(|v| !v.is_empty()).collect(),
        None => file
            .enforce_node_allocatable
            .unwrap_or_else(|| vec!["pods".to_string()]),
    };
    let [kube_reserved, system_reserved] = reserved;
    let enforce = enforcement(
        &list,
        per_qos,
        [
            (kube_cgroup.unwrap_or_default(), kube_reserved),
            (system_cgroup.unwrap_or_default(), system_reserved),
        ],
    )?;
    Ok(NodeSettings {
        max_pods,
        pods_per_core,
        fail_swap_on: cli.fail_swap_on.or(file.fail_swap_on).unwrap_or(true),
        protect_kernel_defaults: cli
            .protect_kernel_defaults
            .or(file.protect_kernel_defaults)
            .unwrap_or(false),
        cpu_cfs_quota: cli.cpu_cfs_quota.or(file.cpu_cfs_quota).unwrap_or(true),
        cpu_cfs_quota_period: period,
        enforce,
    })
}

const FLAG: &str = "--enforce-node-allocatable";

/// `enforceNodeAllocatable` validated as kubelet's ValidateKubeletConfiguration does it: known
/// options only, none twice, `none` alone, a key and its `-compressible` form not together, the
/// reserved cgroup named for each reserved key, and per-QoS cgroups for any of them.
fn enforcement(
    list: &[String],
    per_qos: bool,
    [(kube_cgroup, kube), (system_cgroup, system)]: [(String, BTreeMap<String, i64>); 2],
) -> Result<Enforcement, ConfigError> {
    let has = |key: &str| list.iter().any(|v| v == key);
    for (key, compressible) in [
        ("system-reserved", "system-reserved-compressible"),
        ("kube-reserved", "kube-reserved-compressible"),
    ] {
        if has(key) && has(compressible) {
            return Err(invalid(
                FLAG,
                format!("both {key:?} and {compressible:?} cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)"),
            ));
        }
    }
    let mut enforce = Enforcement::default();
    let mut seen: Vec<&str> = Vec::new();
    for value in list {
        if seen.contains(&value.as_str()) {
            return Err(invalid(
                FLAG,
                format!("duplicated enforcements {value:?} in enforceNodeAllocatable (--enforce-node-allocatable)"),
            ));
        }
        seen.push(value);
        let reserved_cgroup = |cgroup: &str, reserved: &BTreeMap<String, i64>, setting: &str, flag: &str, key: &str| {
            if cgroup.is_empty() {
                return Err(invalid(
                    flag,
                    format!("{setting} ({flag}) must be specified when \"{key}\" or \"{key}-compressible\" included in enforceNodeAllocatable (--enforce-node-allocatable)"),
                ));
            }
            if !super::values::is_cgroup_path(cgroup) {
                return Err(ConfigError::Invalid {
                    setting: flag.to_string(),
                    reason: format!("{cgroup:?}: expected an absolute cgroup path without . or .."),
                });
            }
            Ok(ReservedCgroup {
                cgroup: cgroup.to_string(),
                reserved: reserved.clone(),
                compressible_only: value.ends_with("-compressible"),
            })
        };
        match value.as_str() {
            "pods" => enforce.pods = true,
            "system-reserved" | "system-reserved-compressible" => {
                enforce.system_reserved = Some(reserved_cgroup(
                    &system_cgroup,
                    &system,
                    "systemReservedCgroup",
                    "--system-reserved-cgroup",
                    "system-reserved",
                )?)
            }
            "kube-reserved" | "kube-reserved-compressible" => {
                enforce.kube_reserved = Some(reserved_cgroup(
                    &kube_cgroup,
                    &kube,
                    "kubeReservedCgroup",
                    "--kube-reserved-cgroup",
                    "kube-reserved",
                )?)
            }
            "none" => {
                if list.len() > 1 {
                    return Err(invalid(
                        FLAG,
                        "enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when \"none\" is specified".into(),
                    ));
                }
                continue;
            }
            other => {
                return Err(invalid(
                    FLAG,
                    format!("option {other:?} specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are \"pods\", \"system-reserved\", \"system-reserved-compressible\", \"kube-reserved\", \"kube-reserved-compressible\" or \"none\""),
                ))
            }
        }
        if !per_qos {
            return Err(invalid(
                "--cgroups-per-qos",
                format!("cgroupsPerQOS (--cgroups-per-qos) must be set to true when {value:?} contained in enforceNodeAllocatable (--enforce-node-allocatable)"),
            ));
        }
    }
    Ok(enforce)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn settings(args: &[&str], file: FileNode) -> Result<NodeSettings, ConfigError> {
        let cli = Cli::try_parse_from(std::iter::once("dockerlet").chain(args.iter().copied())).unwrap();
        let kube = BTreeMap::from([("memory".to_string(), 1 << 30), ("pid".to_string(), 1000)]);
        node_settings(&cli, file, true, [kube, BTreeMap::new()])
    }

    fn err(args: &[&str], file: FileNode) -> String {
        settings(args, file).unwrap_err().to_string()
    }

    /// kubelet's defaults: 110 pods, no per-core limit, swap refused, tunables modified, CFS
    /// quota at 100ms, `pods` enforced.
    #[test]
    fn defaults_are_kubelets() {
        let s = settings(&[], FileNode::default()).unwrap();
        assert_eq!((s.max_pods, s.pods_per_core), (110, 0));
        assert!(s.fail_swap_on && !s.protect_kernel_defaults && s.cpu_cfs_quota);
        assert_eq!(s.cpu_cfs_quota_period, Duration::from_millis(100));
        assert_eq!(
            s.enforce,
            Enforcement {
                pods: true,
                ..Default::default()
            }
        );
    }

    /// The flags win over the file.
    #[test]
    fn flags_override_the_file() {
        let file = FileNode {
            max_pods: Some(50),
            fail_swap_on: Some(true),
            cpu_cfs_quota: Some(true),
            protect_kernel_defaults: Some(false),
            ..Default::default()
        };
        let s = settings(
            &[
                "--max-pods",
                "2",
                "--fail-swap-on=false",
                "--cpu-cfs-quota=false",
                "--protect-kernel-defaults",
            ],
            file,
        )
        .unwrap();
        assert_eq!(s.max_pods, 2);
        assert!(!s.fail_swap_on && !s.cpu_cfs_quota && s.protect_kernel_defaults);
        let from_file = settings(
            &[],
            FileNode {
                max_pods: Some(50),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(from_file.max_pods, 50);
    }

    /// The KubeletConfiguration keys, as a kubeadm-style file writes them.
    #[test]
    fn the_config_file_keys_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 20\npodsPerCore: 4\n\
             failSwapOn: false\nprotectKernelDefaults: true\ncpuCFSQuota: false\ncpuCFSQuotaPeriod: 100ms\n\
             enforceNodeAllocatable: [pods, system-reserved]\nsystemReservedCgroup: /system.slice\n\
             kubeReservedCgroup: /kube.slice\nsystemReserved: {cpu: 100m, pid: \"50\"}\n",
        )
        .unwrap();
        let cli = Cli::try_parse_from(["dockerlet", "--config", path.to_str().unwrap()]).unwrap();
        let node = super::super::build(&cli, || "n".into()).unwrap().node;
        assert_eq!((node.max_pods, node.pods_per_core), (20, 4));
        assert!(!node.fail_swap_on && node.protect_kernel_defaults && !node.cpu_cfs_quota);
        let system = node.enforce.system_reserved.unwrap();
        assert_eq!(system.cgroup, "/system.slice");
        assert_eq!(
            system.reserved,
            BTreeMap::from([("cpu".into(), 100), ("pid".into(), 50)])
        );
        assert!(node.enforce.pods && node.enforce.kube_reserved.is_none());
        std::fs::write(&path, "cpuCFSQuotaPeriod: 50ms\n").unwrap();
        let e = super::super::build(&cli, || "n".into()).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "cpuCFSQuotaPeriod (--cpu-cfs-quota-period) 50ms requires feature gate CustomCPUCFSQuotaPeriod"
            ),
            "{e}"
        );
    }

    /// setters.go: min(podsPerCore × cores, maxPods) when podsPerCore > 0.
    #[test]
    fn pods_capacity_is_capped_per_core() {
        let s = settings(&["--max-pods", "110", "--pods-per-core", "10"], FileNode::default()).unwrap();
        assert_eq!(s.pods_capacity(4), 40);
        assert_eq!(s.pods_capacity(16), 110);
        let s = settings(&["--max-pods", "7"], FileNode::default()).unwrap();
        assert_eq!(s.pods_capacity(64), 7);
    }

    /// Negative counts and a non-default period are refused with kubelet's messages.
    #[test]
    fn bad_values_are_refused_in_kubelets_words() {
        assert_eq!(
            err(&["--max-pods=-1"], FileNode::default()),
            "invalid value for --max-pods: invalid configuration: maxPods (--max-pods) -1 must not be a negative number"
        );
        assert_eq!(
            err(&[], FileNode { pods_per_core: Some(-2), ..Default::default() }),
            "invalid value for --pods-per-core: invalid configuration: podsPerCore (--pods-per-core) -2 must not be a negative number"
        );
        assert_eq!(
            err(&["--cpu-cfs-quota-period", "50ms"], FileNode::default()),
            "invalid value for --cpu-cfs-quota-period: invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) 50ms requires feature gate CustomCPUCFSQuotaPeriod"
        );
        settings(&["--cpu-cfs-quota-period", "100ms"], FileNode::default()).unwrap();
    }

    /// enforceNodeAllocatable's validation, message for message.
    #[test]
    fn enforce_node_allocatable_is_validated_as_kubelet() {
        let e = err(
            &["--enforce-node-allocatable", "pods,kube-reserved"],
            FileNode::default(),
        );
        assert_eq!(e, "invalid value for --kube-reserved-cgroup: invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when \"kube-reserved\" or \"kube-reserved-compressible\" included in enforceNodeAllocatable (--enforce-node-allocatable)");
        let e = err(&["--enforce-node-allocatable", "system-reserved"], FileNode::default());
        assert!(
            e.contains("systemReservedCgroup (--system-reserved-cgroup) must be specified when \"system-reserved\""),
            "{e}"
        );
        let e = err(&["--enforce-node-allocatable", "pods,none"], FileNode::default());
        assert!(e.ends_with("enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when \"none\" is specified"), "{e}");
        let e = err(&["--enforce-node-allocatable", "pods,pods"], FileNode::default());
        assert!(
            e.ends_with("duplicated enforcements \"pods\" in enforceNodeAllocatable (--enforce-node-allocatable)"),
            "{e}"
        );
        let e = err(&["--enforce-node-allocatable", "memory"], FileNode::default());
        assert!(e.contains("option \"memory\" specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are \"pods\","), "{e}");
        let e = err(
            &[
                "--enforce-node-allocatable",
                "kube-reserved,kube-reserved-compressible",
                "--kube-reserved-cgroup",
                "/k",
            ],
            FileNode::default(),
        );
        assert!(e.ends_with("both \"kube-reserved\" and \"kube-reserved-compressible\" cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)"), "{e}");
        let cli = Cli::try_parse_from(["dockerlet"]).unwrap();
        let e = node_settings(&cli, FileNode::default(), false, Default::default())
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("cgroupsPerQOS (--cgroups-per-qos) must be set to true when \"pods\" contained in enforceNodeAllocatable (--enforce-node-allocatable)"), "{e}");
    }

    /// `none` and an empty flag enforce nothing; a reserved key takes its cgroup and amounts.
    #[test]
    fn enforcement_takes_the_reserved_cgroups() {
        assert_eq!(
            settings(&["--enforce-node-allocatable", "none"], FileNode::default())
                .unwrap()
                .enforce,
            Enforcement::default()
        );
        assert_eq!(
            settings(&["--enforce-node-allocatable="], FileNode::default())
                .unwrap()
                .enforce,
            Enforcement::default()
        );
        let file = FileNode {
            enforce_node_allocatable: Some(vec!["pods".into(), "kube-reserved".into()]),
            kube_reserved_cgroup: Some("/kube.slice".into()),
            ..Default::default()
        };
        let s = settings(&[], file).unwrap();
        let kube = s.enforce.kube_reserved.unwrap();
        assert_eq!(kube.cgroup, "/kube.slice");
        assert_eq!(kube.reserved["pid"], 1000);
        assert!(!kube.compressible_only && s.enforce.pods && s.enforce.system_reserved.is_none());
    }
}
