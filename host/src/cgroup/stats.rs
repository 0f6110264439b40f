//! One cgroup's CPU, memory, PIDs and pressure, read from cgroupfs (v1 or v2), as cAdvisor
//! reads them for the kubelet's Summary API.
//!
//! | figure | cgroup v1 | cgroup v2 |
//! |---|---|---|
//! | CPU ns | `cpuacct.usage` | `cpu.stat` `usage_usec` × 1000 |
//! | user / system CPU ns | `cpuacct.stat` `user`/`system` × 10⁹ / USER_HZ | `cpu.stat` `user_usec`/`system_usec` × 1000 |
//! | memory usage | `memory.usage_in_bytes` | `memory.current` |
//! | working set | usage − `total_inactive_file` | usage − `inactive_file` (never below 0) |
//! | rss | `total_rss` | `anon` |
//! | page faults | `total_pgfault`, `total_pgmajfault` | `pgfault`, `pgmajfault` |
//! | page cache, mapped files | `total_cache`, `total_mapped_file` | `file`, `file_mapped` |
//! | swap | `total_swap` (0 without swap accounting) | `memory.swap.current` |
//! | CFS periods, throttled periods and time | `cpu.stat` (cpu controller) `nr_periods`, `nr_throttled`, `throttled_time` | `cpu.stat` `nr_periods`, `nr_throttled`, `throttled_usec` × 1000 |
//! | limit | `memory.limit_in_bytes` (≥ 2^62: none) | `memory.max` (`max`: none) |
//! | swap limit | `memory.memsw.limit_in_bytes`, memory + swap (≥ 2^62 or no swap accounting: none) | `memory.swap.max` (`max`: none) |
//! | PIDs | `pids.current` | `pids.current` |
//! | PSI | none | `cpu.pressure`, `memory.pressure`, `io.pressure` |
//!
//! A controller that is not mounted, or a file the kernel does not have, leaves that figure
//! out (`None`); a cgroup that is gone (or goes while being read) is [`StatsError::Gone`], so the
//! caller skips that sample rather than serving a partial one.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read as _};
use std::path::{Path, PathBuf};

use dockerlet_messages::stats::{CfsStats, PsiStats};

use super::{CgroupLayout, CgroupVersion};

pub mod parse;

use parse::{parse_blkio_v1, parse_io_stat, parse_keys, parse_max, parse_psi, parse_u64};

/// Above this a v1 memory limit is the kernel's "unlimited" (`PAGE_COUNTER_MAX` rounded to pages).
const V1_UNLIMITED: u64 = 1 << 62;

/// Why a cgroup's figures could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    /// The cgroup does not exist (any more): its container exited or was never started.
    #[error("cgroup {cgroup} is gone")]
    Gone {
        /// The cgroup path.
        cgroup: String,
    },
    /// A file of the cgroup could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file did not hold what the kernel writes there.
    #[error("{path}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
}

/// Which cgroup: the same path under every controller (a container's `/docker/<id>`), or one
/// path per v1 controller, as `/proc/<pid>/cgroup` lists them for a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupPath {
    /// One path for every controller.
    Same(String),
    /// v1 controller (`memory`, `cpuacct`, `pids`, …) → path; key `""` is the v2 path.
    PerController(BTreeMap<String, String>),
}

impl CgroupPath {
    /// The path under `controller` (`""` on v2).
    fn under(&self, controller: &str) -> Option<&str> {
        match self {
            CgroupPath::Same(p) => Some(p),
            CgroupPath::PerController(map) => map.get(controller).map(String::as_str),
        }
    }

    /// The text of `/proc/<pid>/cgroup` (`id:controllers:path` lines).
    pub fn from_proc_cgroup(text: &str) -> Self {
        let mut map = BTreeMap::new();
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            for c in controllers.split(',') {
                map.insert(c.to_string(), path.to_string());
            }
        }
        CgroupPath::PerController(map)
    }

    /// The cgroup as cAdvisor names it (its `id`): the path, or on v1 the memory controller's
    /// (the unified one on v2).
    pub fn id(&self) -> Option<&str> {
        match self {
            CgroupPath::Same(p) => Some(p),
            CgroupPath::PerController(map) => map.get("memory").or_else(|| map.get("")).map(String::as_str),
        }
    }

    /// A short name for logs and sample keys.
    pub fn key(&self) -> String {
        match self {
            CgroupPath::Same(p) => p.clone(),
            CgroupPath::PerController(map) => {
                let pick = |c: &str| map.get(c).map(String::as_str).unwrap_or("-");
                format!("cpu={},memory={},v2={}", pick("cpuacct"), pick("memory"), pick(""))
            }
        }
    }
}

/// Memory figures of one cgroup, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// All memory charged, page cache included.
    pub usage: u64,
    /// Usage − inactive file pages.
    pub working_set: u64,
    /// Anonymous memory.
    pub rss: u64,
    /// Minor page faults.
    pub page_faults: u64,
    /// Major page faults.
    pub major_page_faults: u64,
    /// The limit; none when unlimited.
    pub limit: Option<u64>,
    /// Page cache.
    pub cache: u64,
    /// Memory-mapped files.
    pub mapped_file: u64,
    /// Swap in use; none where the kernel does not say.
    pub swap: Option<u64>,
    /// The swap limit as cAdvisor's `SwapLimit`: v1 the memory + swap limit, v2 the swap
    /// limit; none when unlimited or where the kernel has no swap accounting.
    pub swap_limit: Option<u64>,
}

/// One read of a cgroup.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CgroupStats {
    /// CPU time used, in nanoseconds.
    pub cpu_usage_ns: Option<u64>,
    /// Of it, in user mode (v1 `cpuacct.stat` in clock ticks; v2 `cpu.stat` `user_usec`).
    pub cpu_user_ns: Option<u64>,
    /// Of it, in kernel mode.
    pub cpu_system_ns: Option<u64>,
    /// Memory.
    pub memory: Option<MemoryUsage>,
    /// Tasks in the cgroup.
    pub pids: Option<u64>,
    /// CPU pressure (v2).
    pub cpu_psi: Option<PsiStats>,
    /// Memory pressure (v2).
    pub memory_psi: Option<PsiStats>,
    /// IO pressure (v2).
    pub io_psi: Option<PsiStats>,
    /// CFS throttling (none without the cpu controller's `cpu.stat`).
    pub cfs: Option<CfsStats>,
}

impl CgroupStats {
    /// The sum of several cgroups (a pod's containers when there is no pod cgroup): a figure is
    /// there when some part has it; limits, pressure and throttling are not summed (none). Sums
    /// saturate: a cgroup file can say anything up to `u64::MAX` (the fuzzer found the overflow
    /// in the blkio sums first), and a wrong figure is better than a panicking stats pass.
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a CgroupStats>) -> CgroupStats {
        let mut out = CgroupStats::default();
        for p in parts {
            for (total, part) in [
                (&mut out.cpu_usage_ns, p.cpu_usage_ns),
                (&mut out.cpu_user_ns, p.cpu_user_ns),
                (&mut out.cpu_system_ns, p.cpu_system_ns),
            ] {
                if let Some(ns) = part {
                    add(total.get_or_insert(0), ns);
                }
            }
            if let Some(pids) = p.pids {
                add(out.pids.get_or_insert(0), pids);
            }
            if let Some(m) = p.memory {
                let o = out.memory.get_or_insert_with(MemoryUsage::default);
                add(&mut o.usage, m.usage);
                add(&mut o.working_set, m.working_set);
                add(&mut o.rss, m.rss);
                add(&mut o.page_faults, m.page_faults);
                add(&mut o.major_page_faults, m.major_page_faults);
                add(&mut o.cache, m.cache);
                add(&mut o.mapped_file, m.mapped_file);
                if let Some(swap) = m.swap {
                    add(o.swap.get_or_insert(0), swap);
                }
            }
        }
        out
    }
}

/// `total += part`, stopping at `u64::MAX`.
fn add(total: &mut u64, part: u64) {
    *total = total.saturating_add(part);
}

/// Read the cgroup at `path`. The cgroup must exist under the memory controller (v1) or in
/// the unified tree (v2); other v1 controllers are optional.
pub fn read(layout: &CgroupLayout, path: &CgroupPath) -> Result<CgroupStats, StatsError> {
    let gone = || StatsError::Gone { cgroup: path.key() };
    let (memory_ctl, cpu_ctl, pids_ctl) = match layout.version() {
        CgroupVersion::V1 => ("memory", "cpuacct", "pids"),
        CgroupVersion::V2 => ("", "", ""),
    };
    let dir_of = |controller: &str| {
        let cgroup = path.under(controller)?;
        // `dir` is keyed by the v1 controller name; on v2 any name gives the unified tree.
        layout.dir(if controller.is_empty() { "memory" } else { controller }, cgroup)
    };
    // No existence checks before reading (a statx each, for every cgroup of the node every
    // housekeeping): a cgroup that is gone fails its first read with ENOENT or ENODEV.
    let memory_dir = dir_of(memory_ctl).ok_or_else(gone)?;
    let result = match layout.version() {
        CgroupVersion::V1 => read_v1(&memory_dir, dir_of(cpu_ctl), dir_of("cpu"), dir_of(pids_ctl)),
        CgroupVersion::V2 => read_v2(&memory_dir),
    };
    match result {
        // A file vanishing under an existing directory means the cgroup is being removed.
        Err(StatsError::Read { source, .. }) if is_gone(&source) => Err(gone()),
        Ok(_) if !memory_dir.is_dir() => Err(gone()),
        other => other,
    }
}

fn is_gone(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::NotFound || e.raw_os_error() == Some(19) // ENODEV: cgroup removed
}

fn read_v1(
    memory: &Path,
    cpuacct: Option<PathBuf>,
    cpu: Option<PathBuf>,
    pids: Option<PathBuf>,
) -> Result<CgroupStats, StatsError> {
    let [inactive_file, rss, page_faults, major_page_faults, cache, mapped_file, swap] = read_keys(
        &memory.join("memory.stat"),
        [
            "total_inactive_file",
            "total_rss",
            "total_pgfault",
            "total_pgmajfault",
            "total_cache",
            "total_mapped_file",
            "total_swap",
        ],
    )?;
    let usage = read_u64(&memory.join("memory.usage_in_bytes"))?;
    let limit = read_u64(&memory.join("memory.limit_in_bytes"))?;
    let swap_limit = optional(read_u64(&memory.join("memory.memsw.limit_in_bytes")))?;
    let memory = MemoryUsage {
        usage,
        working_set: usage.saturating_sub(inactive_file),
        rss,
        page_faults,
        major_page_faults,
        limit: (limit < V1_UNLIMITED).then_some(limit),
        cache,
        mapped_file,
        swap: Some(swap),
        swap_limit: swap_limit.filter(|l| *l < V1_UNLIMITED),
    };
    // A controller that is not mounted (or a cgroup not in it) is a missing file: no figure.
    let usage = match &cpuacct {
        Some(dir) => optional(read_u64(&dir.join("cpuacct.usage")))?,
        None => None,
    };
    let (cpu_usage_ns, user_system) = match (usage, cpuacct) {
        (Some(usage), Some(dir)) => {
            // Clock ticks (USER_HZ) to nanoseconds.
            let tick_ns = 1_000_000_000 / rustix::param::clock_ticks_per_second().max(1);
            let split = optional(read_keys(&dir.join("cpuacct.stat"), ["user", "system"]))?
                .map(|[u, s]| (u.saturating_mul(tick_ns), s.saturating_mul(tick_ns)));
            (Some(usage), split)
        }
        _ => (None, None),
    };
    let pids = match pids {
        Some(dir) => optional(read_u64(&dir.join("pids.current")))?,
        None => None,
    };
    let cfs = match cpu {
        Some(dir) => optional(read_keys(
            &dir.join("cpu.stat"),
            ["nr_periods", "nr_throttled", "throttled_time"],
        ))?
        .map(|[periods, throttled_periods, throttled_ns]| CfsStats {
            periods,
            throttled_periods,
            throttled_ns,
        }),
        None => None,
    };
    Ok(CgroupStats {
        cpu_usage_ns,
        cpu_user_ns: user_system.map(|(u, _)| u),
        cpu_system_ns: user_system.map(|(_, s)| s),
        memory: Some(memory),
        pids,
        cfs,
        ..CgroupStats::default()
    })
}

fn read_v2(dir: &Path) -> Result<CgroupStats, StatsError> {
    let [inactive_file, rss, page_faults, major_page_faults, cache, mapped_file] = read_keys(
        &dir.join("memory.stat"),
        ["inactive_file", "anon", "pgfault", "pgmajfault", "file", "file_mapped"],
    )?;
    let usage = read_u64(&dir.join("memory.current"))?;
    let limit = read_max(&dir.join("memory.max"))?;
    let swap_limit = read_max(&dir.join("memory.swap.max"))?;
    let memory = MemoryUsage {
        usage,
        working_set: usage.saturating_sub(inactive_file),
        rss,
        page_faults,
        major_page_faults,
        limit,
        cache,
        mapped_file,
        swap: optional(read_u64(&dir.join("memory.swap.current")))?,
        swap_limit,
    };
    let cpu = optional(read_keys(
        &dir.join("cpu.stat"),
        [
            "usage_usec",
            "user_usec",
            "system_usec",
            "nr_periods",
            "nr_throttled",
            "throttled_usec",
        ],
    ))?;
    let us = |v: u64| v.saturating_mul(1000);
    Ok(CgroupStats {
        cpu_usage_ns: cpu.map(|c| us(c[0])),
        cpu_user_ns: cpu.map(|c| us(c[1])),
        cpu_system_ns: cpu.map(|c| us(c[2])),
        cfs: cpu.map(|c| CfsStats {
            periods: c[3],
            throttled_periods: c[4],
            throttled_ns: us(c[5]),
        }),
        memory: Some(memory),
        pids: optional(read_u64(&dir.join("pids.current")))?,
        cpu_psi: optional(read_psi(&dir.join("cpu.pressure")))?,
        memory_psi: optional(read_psi(&dir.join("memory.pressure")))?,
        io_psi: optional(read_psi(&dir.join("io.pressure")))?,
    })
}

/// The whole machine's CPU time in nanoseconds as its root cgroup counts it, cAdvisor's figure
/// for the node (`/`): v1 `cpuacct.usage`, v2 the root's `cpu.stat` `usage_usec`. Exact, where
/// `/proc/stat` counts clock ticks (10 ms each, so a quiet node can show no use over a second).
/// `None` when the controller or the figure is not there.
pub fn root_cpu_ns(layout: &CgroupLayout) -> Result<Option<u64>, StatsError> {
    match layout.version() {
        CgroupVersion::V1 => match layout.dir("cpuacct", "/") {
            Some(dir) => optional(read_u64(&dir.join("cpuacct.usage"))),
            None => Ok(None),
        },
        CgroupVersion::V2 => {
            let Some(dir) = layout.dir("cpu", "/") else {
                return Ok(None);
            };
            let path = dir.join("cpu.stat");
            let Some(text) = optional(read_text(&path))? else {
                return Ok(None);
            };
            text.lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .map(|v| parse_u64(&path, v.trim()).map(|us| us.saturating_mul(1000)))
                .transpose()
        }
    }
}

/// What one cgroup's tasks read from and wrote to one block device (cAdvisor's `DiskIo`
/// `io_service_bytes` and `io_serviced`, Read and Write).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceIo {
    /// The device's major number.
    pub major: u32,
    /// The device's minor number.
    pub minor: u32,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Read operations.
    pub reads: u64,
    /// Write operations.
    pub writes: u64,
}

/// The block IO of the cgroup at `cgroup` per device, as cAdvisor reads it: on v1 the blkio
/// controller's `blkio.throttle.io_service_bytes_recursive` and `…io_serviced_recursive` (the
/// non-recursive files on kernels without them), on v2 `io.stat` (`rbytes`, `wbytes`, `rios`,
/// `wios`). Devices with no IO are left out. `None` when the controller or the files are not
/// there (v2's root cgroup has no `io.stat`); a cgroup that is gone is [`StatsError::Gone`].
pub fn read_block_io(layout: &CgroupLayout, cgroup: &str) -> Result<Option<Vec<DeviceIo>>, StatsError> {
    let gone = || StatsError::Gone {
        cgroup: cgroup.to_string(),
    };
    let (dir, result) = match layout.version() {
        CgroupVersion::V1 => {
            let Some(dir) = layout.dir("blkio", cgroup) else {
                return Ok(None);
            };
            let result = read_blkio_v1(&dir);
            (dir, result)
        }
        CgroupVersion::V2 => {
            let Some(dir) = layout.dir("io", cgroup) else {
                return Ok(None);
            };
            let path = dir.join("io.stat");
            let result = optional(read_text(&path)).and_then(|text| text.map(|t| parse_io_stat(&path, &t)).transpose());
            (dir, result)
        }
    };
    match result {
        Err(StatsError::Read { source, .. }) if is_gone(&source) => Err(gone()),
        // No file: a controller without them, or a cgroup that is not there (any more).
        Ok(None) if !dir.is_dir() => Err(gone()),
        other => other,
    }
}

fn read_blkio_v1(dir: &Path) -> Result<Option<Vec<DeviceIo>>, StatsError> {
    let read_either = |name: &str| -> Result<Option<(PathBuf, String)>, StatsError> {
        for file in [
            format!("blkio.throttle.{name}_recursive"),
            format!("blkio.throttle.{name}"),
        ] {
            let path = dir.join(file);
            if let Some(text) = optional(read_text(&path))? {
                return Ok(Some((path, text)));
            }
        }
        Ok(None)
    };
    let Some((bytes_path, bytes)) = read_either("io_service_bytes")? else {
        return Ok(None);
    };
    let ops = read_either("io_serviced")?;
    let ops = ops.as_ref().map(|(path, text)| (path.as_path(), text.as_str()));
    parse_blkio_v1((&bytes_path, &bytes), ops).map(Some)
}

/// A missing file (controller not enabled, older kernel) is `None`, not an error.
fn optional<T>(r: Result<T, StatsError>) -> Result<Option<T>, StatsError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(StatsError::Read { source, .. }) if source.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The file's text: open, read to the end, close. Not `fs::read_to_string`, which first asks
/// for the file's size (a statx per file; cgroup files report 0 anyway).
fn read_text(path: &Path) -> Result<String, StatsError> {
    let error = |source| StatsError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(error)?;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(error(e)),
        }
    }
    String::from_utf8(bytes).map_err(|e| error(std::io::Error::new(ErrorKind::InvalidData, e)))
}

fn read_u64(path: &Path) -> Result<u64, StatsError> {
    let text = read_text(path)?;
    parse_u64(path, text.trim())
}

/// A v2 limit file (`memory.max`, `memory.swap.max`): `max` or a missing file is none.
fn read_max(path: &Path) -> Result<Option<u64>, StatsError> {
    optional(read_text(path))?.map_or(Ok(None), |text| parse_max(path, &text))
}

/// The values of `keys` in a `key value` per line file (`memory.stat`, `cpu.stat`): [`parse_keys`].
fn read_keys<const N: usize>(path: &Path, keys: [&str; N]) -> Result<[u64; N], StatsError> {
    parse_keys(path, &read_text(path)?, keys)
}

/// A pressure file: [`parse_psi`].
fn read_psi(path: &Path) -> Result<PsiStats, StatsError> {
    parse_psi(path, &read_text(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, files: &[(&str, &str)]) {
        std::fs::create_dir_all(dir).unwrap();
        for (name, content) in files {
            std::fs::write(dir.join(name), content).unwrap();
        }
    }

    /// A cgroup v1 container as Docker makes it: cpuacct, memory (limited) and pids.
    fn v1_tree(root: &Path, id: &str, limit: &str) {
        write(
            &root.join("cpuacct/docker").join(id),
            &[("cpuacct.usage", "123456789\n")],
        );
        write(
            &root.join("memory/docker").join(id),
            &[
                ("memory.usage_in_bytes", "10485760\n"),
                ("memory.limit_in_bytes", limit),
                (
                    "memory.stat",
                    "cache 0\nrss 1\ninactive_file 1\ntotal_cache 4096\ntotal_rss 2097152\ntotal_inactive_file 1048576\ntotal_pgfault 900\ntotal_pgmajfault 3\ntotal_mapped_file 512\n",
                ),
            ],
        );
        write(&root.join("pids/docker").join(id), &[("pids.current", "2\n")]);
        write(
            &root.join("cpu/docker").join(id),
            &[("cpu.stat", "nr_periods 10\nnr_throttled 4\nthrottled_time 2500000\n")],
        );
    }

    /// v1: the total_* keys, the limit, no PSI.
    #[test]
    fn v1_figures_come_from_the_hierarchical_totals() {
        let tmp = tempfile::tempdir().unwrap();
        v1_tree(tmp.path(), "abc", "83886080\n");
        let layout = CgroupLayout::v1_at(tmp.path(), &["cpuacct", "memory", "pids"]);
        let s = read(&layout, &CgroupPath::Same("/docker/abc".into())).unwrap();
        assert_eq!(s.cpu_usage_ns, Some(123456789));
        assert_eq!(
            s.memory,
            Some(MemoryUsage {
                usage: 10485760,
                working_set: 10485760 - 1048576,
                rss: 2097152,
                page_faults: 900,
                major_page_faults: 3,
                limit: Some(83886080),
                cache: 4096,
                mapped_file: 512,
                swap: Some(0),
                // No memory.memsw.limit_in_bytes: no swap accounting, no swap limit.
                swap_limit: None,
            })
        );
        assert_eq!(s.pids, Some(2));
        write(
            &tmp.path().join("memory/docker/abc"),
            &[("memory.memsw.limit_in_bytes", "83886080\n")],
        );
        let s = read(&layout, &CgroupPath::Same("/docker/abc".into())).unwrap();
        assert_eq!(
            s.memory.unwrap().swap_limit,
            Some(83886080),
            "memory + swap, as cAdvisor's"
        );
        assert!(s.cpu_psi.is_none() && s.memory_psi.is_none() && s.io_psi.is_none());
        assert_eq!(s.cfs, None, "no cpu controller");
        let with_cpu = CgroupLayout::v1_at(tmp.path(), &["cpu", "cpuacct", "memory", "pids"]);
        let s = read(&with_cpu, &CgroupPath::Same("/docker/abc".into())).unwrap();
        assert_eq!(
            s.cfs,
            Some(CfsStats {
                periods: 10,
                throttled_periods: 4,
                throttled_ns: 2_500_000,
            })
        );
    }

    /// v1's "unlimited" is a huge number, not a limit; a missing pids controller leaves PIDs out.
    #[test]
    fn v1_unlimited_is_no_limit_and_a_missing_controller_is_left_out() {
        let tmp = tempfile::tempdir().unwrap();
        v1_tree(tmp.path(), "abc", "9223372036854771712\n");
        write(
            &tmp.path().join("memory/docker/abc"),
            &[("memory.memsw.limit_in_bytes", "9223372036854771712\n")],
        );
        let layout = CgroupLayout::v1_at(tmp.path(), &["cpuacct", "memory"]);
        let s = read(&layout, &CgroupPath::Same("/docker/abc".into())).unwrap();
        assert_eq!(s.memory.unwrap().limit, None);
        assert_eq!(s.memory.unwrap().swap_limit, None);
        assert_eq!(s.pids, None);
        assert_eq!(s.cpu_usage_ns, Some(123456789));
    }

    /// A process's cgroups differ per controller on v1: each figure is read from its own.
    #[test]
    fn per_controller_paths_are_followed() {
        let tmp = tempfile::tempdir().unwrap();
        v1_tree(tmp.path(), "abc", "max");
        write(&tmp.path().join("cpuacct"), &[("cpuacct.usage", "5\n")]);
        let path = CgroupPath::from_proc_cgroup("4:memory:/docker/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n");
        assert_eq!(path.id(), Some("/docker/abc"));
        assert_eq!(
            CgroupPath::from_proc_cgroup("0::/system.slice/x\n").id(),
            Some("/system.slice/x")
        );
        let layout = CgroupLayout::v1_at(tmp.path(), &["cpuacct", "memory"]);
        let s = read(&layout, &path);
        // "max" is not a v1 value: an error naming the file, not a panic or a wrong figure.
        let err = s.unwrap_err().to_string();
        assert!(err.contains("memory.limit_in_bytes"), "{err}");
        write(
            &tmp.path().join("memory/docker/abc"),
            &[("memory.limit_in_bytes", "100\n")],
        );
        let s = read(&layout, &path).unwrap();
        assert_eq!(s.cpu_usage_ns, Some(5));
        assert_eq!(s.memory.unwrap().limit, Some(100));
        assert_eq!((s.cpu_user_ns, s.cpu_system_ns), (None, None), "no cpuacct.stat");
        write(
            &tmp.path().join("cpuacct"),
            &[(
                "cpuacct.stat",
                "user 3
system 1
",
            )],
        );
        let tick = 1_000_000_000 / rustix::param::clock_ticks_per_second();
        let s = read(&layout, &path).unwrap();
        assert_eq!((s.cpu_user_ns, s.cpu_system_ns), (Some(3 * tick), Some(tick)));
    }

    /// v2: usage_usec in ns, anon as rss, `max` as no limit, the three pressure files.
    #[test]
    fn v2_figures_and_pressure() {
        let tmp = tempfile::tempdir().unwrap();
        let psi =
            "some avg10=1.50 avg60=0.25 avg300=0.00 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=6\n";
        write(
            &tmp.path().join("kubepods/pod1"),
            &[
                (
                    "cpu.stat",
                    "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\nnr_periods 8\nnr_throttled 2\nthrottled_usec 300\n",
                ),
                ("memory.swap.current", "65536\n"),
                ("memory.swap.max", "1048576\n"),
                ("memory.current", "4096\n"),
                ("memory.max", "max\n"),
                (
                    "memory.stat",
                    "anon 1024\nfile 3072\ninactive_file 8192\npgfault 10\npgmajfault 1\n",
                ),
                ("pids.current", "3\n"),
                ("cpu.pressure", psi),
                ("memory.pressure", psi),
                ("io.pressure", psi),
            ],
        );
        let layout = CgroupLayout::v2_at(tmp.path());
        let s = read(&layout, &CgroupPath::Same("/kubepods/pod1".into())).unwrap();
        assert_eq!(s.cpu_usage_ns, Some(2_500_000));
        assert_eq!((s.cpu_user_ns, s.cpu_system_ns), (Some(2_000_000), Some(500_000)));
        let m = s.memory.unwrap();
        // inactive_file above usage: the working set is 0, never negative.
        assert_eq!((m.usage, m.working_set, m.rss, m.limit), (4096, 0, 1024, None));
        assert_eq!((m.cache, m.mapped_file, m.swap), (3072, 0, Some(65536)));
        assert_eq!(m.swap_limit, Some(1_048_576));
        assert_eq!(
            s.cfs,
            Some(CfsStats {
                periods: 8,
                throttled_periods: 2,
                throttled_ns: 300_000,
            })
        );
        assert_eq!(s.pids, Some(3));
        let cpu = s.cpu_psi.unwrap();
        assert_eq!(cpu.some.total, 12345);
        assert!((cpu.some.avg10 - 1.5).abs() < 1e-6);
        assert_eq!(cpu.full.total, 6);
        write(&tmp.path().join("kubepods/pod1"), &[("memory.max", "52428800\n")]);
        let s = read(&layout, &CgroupPath::Same("/kubepods/pod1".into())).unwrap();
        assert_eq!(s.memory.unwrap().limit, Some(52428800));
    }

    /// A cgroup that does not exist, or loses a file mid-read, is Gone: the sample is skipped.
    #[test]
    fn a_vanished_cgroup_is_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = CgroupLayout::v2_at(tmp.path());
        let path = CgroupPath::Same("/docker/dead".into());
        assert!(matches!(read(&layout, &path), Err(StatsError::Gone { .. })));
        write(&tmp.path().join("docker/dead"), &[("memory.stat", "anon 1\n")]);
        assert!(matches!(read(&layout, &path), Err(StatsError::Gone { .. })));
        let v1 = CgroupLayout::v1_at(tmp.path(), &["cpuacct"]);
        assert!(
            matches!(read(&v1, &path), Err(StatsError::Gone { .. })),
            "no memory controller"
        );
    }

    /// v1 block IO: the throttle files' Read and Write per device (the recursive ones when
    /// the kernel has them), devices without IO left out; v2: io.stat's keys.
    #[test]
    fn block_io_per_device() {
        let tmp = tempfile::tempdir().unwrap();
        let bytes = "254:0 Read 4096\n254:0 Write 8192\n254:0 Sync 0\n254:0 Async 12288\n254:0 Discard 0\n254:0 Total 12288\n7:0 Read 0\n7:0 Write 0\n7:0 Total 0\nTotal 12288\n";
        let ops = "254:0 Read 1\n254:0 Write 2\n254:0 Total 3\nTotal 3\n";
        write(
            &tmp.path().join("blkio/kubepods/pod1"),
            &[
                ("blkio.throttle.io_service_bytes_recursive", bytes),
                ("blkio.throttle.io_serviced_recursive", ops),
                ("blkio.throttle.io_service_bytes", "Total 0\n"),
            ],
        );
        let layout = CgroupLayout::v1_at(tmp.path(), &["blkio", "memory"]);
        let want = DeviceIo {
            major: 254,
            minor: 0,
            read_bytes: 4096,
            write_bytes: 8192,
            reads: 1,
            writes: 2,
        };
        assert_eq!(read_block_io(&layout, "/kubepods/pod1").unwrap(), Some(vec![want]));
        // An older kernel: only the non-recursive files.
        write(
            &tmp.path().join("blkio/docker/abc"),
            &[
                ("blkio.throttle.io_service_bytes", bytes),
                ("blkio.throttle.io_serviced", ops),
            ],
        );
        assert_eq!(read_block_io(&layout, "/docker/abc").unwrap(), Some(vec![want]));
        assert!(matches!(
            read_block_io(&layout, "/docker/dead"),
            Err(StatsError::Gone { .. })
        ));
        let no_blkio = CgroupLayout::v1_at(tmp.path(), &["memory"]);
        assert_eq!(read_block_io(&no_blkio, "/docker/abc").unwrap(), None);
        write(
            &tmp.path().join("blkio/docker/bad"),
            &[("blkio.throttle.io_service_bytes_recursive", "vda Read 1\n")],
        );
        let err = read_block_io(&layout, "/docker/bad").unwrap_err().to_string();
        assert!(err.contains("is not a MAJOR:MINOR device number"), "{err}");

        let v2 = CgroupLayout::v2_at(&tmp.path().join("unified"));
        write(
            &tmp.path().join("unified/kubepods/pod1"),
            &[(
                "io.stat",
                "254:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n7:1 rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0\n",
            )],
        );
        assert_eq!(read_block_io(&v2, "/kubepods/pod1").unwrap(), Some(vec![want]));
        write(&tmp.path().join("unified"), &[("cgroup.procs", "1\n")]);
        assert_eq!(read_block_io(&v2, "/").unwrap(), None, "v2's root has no io.stat");
        assert!(matches!(
            read_block_io(&v2, "/kubepods/gone"),
            Err(StatsError::Gone { .. })
        ));
    }

    /// The node's CPU from the root cgroup: v1 cpuacct.usage, v2 cpu.stat's usage_usec in ns;
    /// nothing without the controller or the key.
    #[test]
    fn root_cpu_time_from_the_root_cgroup() {
        let tmp = tempfile::tempdir().unwrap();
        write(&tmp.path().join("cpuacct"), &[("cpuacct.usage", "8941426247278\n")]);
        let v1 = CgroupLayout::v1_at(tmp.path(), &["cpuacct", "memory"]);
        assert_eq!(root_cpu_ns(&v1).unwrap(), Some(8941426247278));
        assert_eq!(
            root_cpu_ns(&CgroupLayout::v1_at(tmp.path(), &["memory"])).unwrap(),
            None
        );
        let v2 = CgroupLayout::v2_at(&tmp.path().join("unified"));
        assert_eq!(root_cpu_ns(&v2).unwrap(), None, "no cpu.stat");
        write(&tmp.path().join("unified"), &[("cpu.stat", "nr_periods 0\n")]);
        assert_eq!(root_cpu_ns(&v2).unwrap(), None, "no usage_usec");
        write(
            &tmp.path().join("unified"),
            &[("cpu.stat", "usage_usec 2500\nuser_usec 2000\n")],
        );
        assert_eq!(root_cpu_ns(&v2).unwrap(), Some(2_500_000));
        assert!(root_cpu_ns(&CgroupLayout::detect().unwrap())
            .unwrap()
            .is_some_and(|ns| ns > 0));
    }

    /// Summing a pod's containers adds every figure and keeps no limit.
    #[test]
    fn sums_add_figures() {
        let a = CgroupStats {
            cpu_usage_ns: Some(10),
            memory: Some(MemoryUsage {
                usage: 5,
                working_set: 4,
                rss: 3,
                page_faults: 2,
                major_page_faults: 1,
                limit: Some(100),
                cache: 7,
                mapped_file: 6,
                swap: None,
                swap_limit: Some(200),
            }),
            pids: Some(1),
            ..CgroupStats::default()
        };
        let b = CgroupStats {
            cpu_usage_ns: Some(1),
            ..CgroupStats::default()
        };
        let s = CgroupStats::sum([&a, &b]);
        assert_eq!(s.cpu_usage_ns, Some(11));
        assert_eq!(s.memory.unwrap().limit, None);
        assert_eq!(s.memory.unwrap().usage, 5);
        assert_eq!(s.pids, Some(1));
        assert_eq!(CgroupStats::sum([]), CgroupStats::default());
    }

    /// Figures near `u64::MAX` (a cgroup file can say so) saturate instead of overflowing.
    #[test]
    fn sums_saturate() {
        let huge = CgroupStats {
            cpu_usage_ns: Some(u64::MAX - 1),
            memory: Some(MemoryUsage {
                usage: u64::MAX,
                swap: Some(u64::MAX),
                ..MemoryUsage::default()
            }),
            pids: Some(u64::MAX),
            ..CgroupStats::default()
        };
        let s = CgroupStats::sum([&huge, &huge]);
        assert_eq!(s.cpu_usage_ns, Some(u64::MAX));
        assert_eq!(s.pids, Some(u64::MAX));
        let m = s.memory.unwrap();
        assert_eq!((m.usage, m.swap), (u64::MAX, Some(u64::MAX)));
    }
}
