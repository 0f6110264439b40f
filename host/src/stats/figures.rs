//! The Summary API's figures from one reading (a cgroup's, a filesystem's, the interfaces'), each
//! stamped with the time it was read.

use dockerlet_messages::stats::{
    CgroupExtras, CpuStats, FsStats, InterfaceStats, IoStats, MemoryStats, NetworkStats, PsiStats, SwapStats,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::cgroup::stats::{CgroupStats, MemoryUsage};
use crate::node_stats::FsFigures;

/// The figures of one reading that only `/metrics/cadvisor` serves.
pub(super) fn cgroup_extras(cgroup: String, time: &Time, s: &CgroupStats) -> CgroupExtras {
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

pub(super) fn cpu_stats(time: &Time, ns: Option<u64>, rate: Option<u64>, psi: Option<PsiStats>) -> CpuStats {
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
pub(super) fn cgroup_cpu(time: &Time, s: &CgroupStats, rate: Option<u64>) -> Option<CpuStats> {
    s.cpu_usage_ns.map(|ns| CpuStats {
        user_nano_seconds: s.cpu_user_ns,
        system_nano_seconds: s.cpu_system_ns,
        ..cpu_stats(time, Some(ns), rate, s.cpu_psi.clone())
    })
}

pub(super) fn memory_stats(time: &Time, m: MemoryUsage, psi: Option<PsiStats>) -> MemoryStats {
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
pub(super) fn swap_stats(time: &Time, s: &CgroupStats) -> Option<SwapStats> {
    let memory = s.memory?;
    let used = memory.swap?;
    Some(SwapStats {
        time: time.clone(),
        swap_available_bytes: memory.swap_limit.map(|limit| limit.saturating_sub(used)),
        swap_usage_bytes: Some(used),
    })
}

pub(super) fn io_stats(time: &Time, psi: &Option<PsiStats>) -> Option<IoStats> {
    psi.clone().map(|psi| IoStats {
        time: time.clone(),
        psi: Some(psi),
    })
}

pub(super) fn fs_stats(time: &Time, fs: FsFigures, used: Option<u64>, inodes_used: Option<u64>) -> FsStats {
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
pub(super) fn network_stats(time: &Time, interfaces: Vec<InterfaceStats>, default: Option<&str>) -> NetworkStats {
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
