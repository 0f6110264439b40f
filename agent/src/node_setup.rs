//! What kubelet's container manager checks and sets on the node at start, before any pod:
//! swap (`failSwapOn`), the kernel tunables (`protectKernelDefaults`), the `kubepods` limits
//! and the reserved cgroups (`enforceNodeAllocatable`). Upstream:
//! `pkg/kubelet/cm/container_manager_linux.go` (NewContainerManager, setupNode,
//! setupKernelTunables) and `pkg/kubelet/cm/node_container_manager_linux.go`
//! (enforceNodeAllocatableCgroups, getNodeAllocatableInternalAbsolute).

use anyhow::Context as _;
use dockerlet_host::cgroup::reserved::{enforce_existing, pid_max, ReservedLimits};
use dockerlet_host::cgroup::systemd::SliceManager;
use dockerlet_host::cgroup::CgroupLayout;
use dockerlet_pod::cgroup::PodResourceConfig;

use crate::config::{AgentConfig, ReservedCgroup};

/// Swap and the kernel tunables, as kubelet checks them at start: swap on with `failSwapOn`
/// refuses to start; the tunables differing with `protectKernelDefaults` refuse to start,
/// and without it are set to kubelet's values (each change logged; a failure refuses to
/// start, as kubelet's setupNode fails).
pub fn check_kernel(config: &AgentConfig) -> anyhow::Result<()> {
    let (proc_sys, swaps) = &config.process.proc_paths;
    let swap =
        dockerlet_host::kernel::check_swap(swaps, config.node.fail_swap_on).context("--fail-swap-on (failSwapOn)")?;
    if !swap.is_empty() {
        tracing::warn!(swaps = ?swap, "swap is on (--fail-swap-on=false): containers get no swap");
    }
    let changes = dockerlet_host::kernel::setup_kernel_tunables(proc_sys, config.node.protect_kernel_defaults)
        .with_context(|| match config.node.protect_kernel_defaults {
            true => "--protect-kernel-defaults (protectKernelDefaults): the kernel tunables differ from kubelet's",
            false => "setting the kernel tunables kubelet needs (--protect-kernel-defaults=false modifies them)",
        })?;
    for change in changes {
        tracing::info!(
            flag = change.flag,
            from = change.from,
            to = change.to,
            "kernel tunable set to kubelet's value"
        );
    }
    Ok(())
}

/// The `kubepods` limits: with `pods` enforced the node's capacity less kube- and
/// system-reserved (cpu, memory, pid), else the capacity (kubelet's
/// createNodeAllocatableCgroups: `internalCapacity`, or its allocatable when enforced).
pub fn kubepods_limits(config: &AgentConfig, cpu_milli: i64, memory: i64) -> PodResourceConfig {
    let reserved = |name: &str| match config.node.enforce.pods {
        true => config.reserved.get(name).copied().unwrap_or(0),
        false => 0,
    };
    let pids = pid_max(&config.process.proc_paths.0).map(|max| (max - reserved("pid")).max(0));
    dockerlet_pod::cgroup::kubepods_config(
        (cpu_milli - reserved("cpu")).max(0),
        (memory - reserved("memory")).max(0),
        pids,
    )
}

/// The limits of the enforced reserved cgroups set, system-reserved first (as kubelet's
/// enforceNodeAllocatableCgroups); a failure refuses to start with kubelet's message.
pub fn enforce_reserved(
    config: &AgentConfig,
    layout: &CgroupLayout,
    slices: Option<&dyn SliceManager>,
) -> anyhow::Result<()> {
    let enforce = &config.node.enforce;
    for (reserved, what, flag) in [
        (&enforce.system_reserved, "System Reserved", "--system-reserved-cgroup"),
        (&enforce.kube_reserved, "Kube Reserved", "--kube-reserved-cgroup"),
    ] {
        let Some(reserved) = reserved else { continue };
        let limits = limits_of(reserved);
        enforce_existing(layout, slices, &reserved.cgroup, &limits)
            .with_context(|| format!("Failed to enforce {what} Cgroup Limits on {:?}", reserved.cgroup))
            .with_context(|| format!("{flag} with --enforce-node-allocatable"))?;
        tracing::info!(cgroup = %reserved.cgroup, ?limits, "Updated limits on {} cgroup", what.to_lowercase());
    }
    Ok(())
}

/// The cgroup limits of a reserved amount: cpu, memory and pid (cpu only when compressible).
fn limits_of(reserved: &ReservedCgroup) -> ReservedLimits {
    let get = |name: &str| reserved.reserved.get(name).copied();
    ReservedLimits {
        cpu_milli: get("cpu"),
        memory: get("memory").filter(|_| !reserved.compressible_only),
        pids: get("pid").filter(|_| !reserved.compressible_only),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn config(args: &[&str]) -> AgentConfig {
        let cli = crate::cli::Cli::try_parse_from(std::iter::once("dockerlet").chain(args.iter().copied())).unwrap();
        crate::config::build(&cli, || "n".into()).unwrap()
    }

    /// With `pods` enforced kubepods gets the capacity less the reservations, pids included;
    /// without, the capacity.
    #[test]
    fn kubepods_gets_allocatable_only_when_pods_is_enforced() {
        let sys = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(sys.path().join("kernel")).unwrap();
        std::fs::write(sys.path().join("kernel/pid_max"), "32768").unwrap();
        let root = sys.path().to_str().unwrap();
        let c = config(&["--kube-reserved", "cpu=1,memory=1Gi,pid=768", "--proc-sys-root", root]);
        let limits = kubepods_limits(&c, 4000, 4 << 30);
        assert_eq!(limits.cpu_shares, 3072);
        assert_eq!(limits.memory_limit, Some(3 << 30));
        assert_eq!(limits.pids_limit, Some(32000));
        let c = config(&[
            "--kube-reserved",
            "cpu=1,memory=1Gi,pid=768",
            "--enforce-node-allocatable=none",
            "--proc-sys-root",
            root,
        ]);
        let limits = kubepods_limits(&c, 4000, 4 << 30);
        assert_eq!(
            (limits.cpu_shares, limits.memory_limit, limits.pids_limit),
            (4096, Some(4 << 30), Some(32768))
        );
    }

    /// A compressible enforcement limits the CPU alone.
    #[test]
    fn compressible_enforcement_limits_cpu_only() {
        let c = config(&[
            "--system-reserved",
            "cpu=500m,memory=1Gi,pid=100",
            "--enforce-node-allocatable",
            "pods,system-reserved-compressible",
            "--system-reserved-cgroup",
            "/system.slice",
        ]);
        let reserved = c.node.enforce.system_reserved.as_ref().unwrap();
        assert_eq!(
            limits_of(reserved),
            ReservedLimits {
                cpu_milli: Some(500),
                ..Default::default()
            }
        );
    }
}
