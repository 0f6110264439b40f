//! Eviction signals, hard thresholds and the node's pressure conditions (kubelet's `pkg/kubelet/eviction/helpers.go`, `api/types.go`).
//!
//! The NodeStatusActor observes the signals at each heartbeat ([`observe`]), checks them against
//! the hard thresholds (`evictionHard`, kubelet's defaults when unset) and reports
//! MemoryPressure, DiskPressure and PIDPressure. A condition stays True until its signals have
//! not been met for `evictionPressureTransitionPeriod` ([`PressureTracker`]). The thresholds also
//! come off the node's allocatable resources. The EvictionActor acts on them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use dockerlet_pod::quantity::parse_quantity;

/// An eviction signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    /// `memory.available`: capacity − working set.
    MemoryAvailable,
    /// `nodefs.available`: free bytes on the filesystem of the agent's root directory.
    NodefsAvailable,
    /// `nodefs.inodesFree`.
    NodefsInodesFree,
    /// `imagefs.available`: free bytes on Docker's filesystem.
    ImagefsAvailable,
    /// `imagefs.inodesFree`.
    ImagefsInodesFree,
    /// `pid.available`: `pid_max` − processes.
    PidAvailable,
    /// `allocatableMemory.available`: the pods' cgroup (`kubepods`) limit − its working set
    /// (kubelet's observation of the summary's `pods` system container).
    AllocatableMemoryAvailable,
    /// `containerfs.available`: the containers' writable layers' filesystem, Docker's (so the
    /// image filesystem's figures: Docker keeps both in its root directory).
    ContainerfsAvailable,
    /// `containerfs.inodesFree`.
    ContainerfsInodesFree,
}

impl Signal {
    /// Every signal, in kubelet's order (`pkg/kubelet/eviction/api/types.go`).
    pub const ALL: [Signal; 9] = [
        Signal::MemoryAvailable,
        Signal::AllocatableMemoryAvailable,
        Signal::NodefsAvailable,
        Signal::NodefsInodesFree,
        Signal::ImagefsAvailable,
        Signal::ImagefsInodesFree,
        Signal::ContainerfsAvailable,
        Signal::ContainerfsInodesFree,
        Signal::PidAvailable,
    ];

    /// Kubelet's name of the signal.
    pub fn name(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::NodefsAvailable => "nodefs.available",
            Signal::NodefsInodesFree => "nodefs.inodesFree",
            Signal::ImagefsAvailable => "imagefs.available",
            Signal::ImagefsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
            Signal::AllocatableMemoryAvailable => "allocatableMemory.available",
            Signal::ContainerfsAvailable => "containerfs.available",
            Signal::ContainerfsInodesFree => "containerfs.inodesFree",
        }
    }

    /// The condition the signal drives.
    pub fn condition(self) -> Pressure {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => Pressure::Memory,
            Signal::PidAvailable => Pressure::Pid,
            _ => Pressure::Disk,
        }
    }

    /// The resource it starves (kubelet's signal → resource map).
    pub fn starved(self) -> dockerlet_pod::eviction::Starved {
        use dockerlet_pod::eviction::Starved;
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => Starved::Memory,
            Signal::NodefsAvailable | Signal::ImagefsAvailable | Signal::ContainerfsAvailable => {
                Starved::EphemeralStorage
            }
            Signal::NodefsInodesFree | Signal::ImagefsInodesFree | Signal::ContainerfsInodesFree => Starved::Inodes,
            Signal::PidAvailable => Starved::Pids,
        }
    }

    fn from_name(name: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The signal named `name`, or kubelet's refusal ("unsupported eviction signal …", with
    /// the signals dockerlet knows).
    pub fn parse_name(name: &str) -> Result<Signal, UnknownSignal> {
        Signal::from_name(name).ok_or_else(|| UnknownSignal(name.to_string()))
    }
}

pub use dockerlet_messages::node::Pressure;

/// A signal name kubelet does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported eviction signal {0} (known: {known})", known = Signal::ALL.map(Signal::name).join(", "))]
pub struct UnknownSignal(pub String);

/// A threshold's value: an absolute quantity or a share of the capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdValue {
    /// Bytes, inodes or PIDs.
    Quantity(i64),
    /// Percent of the capacity (0–100).
    Percentage(f64),
}

impl ThresholdValue {
    /// The value in units for a signal whose capacity is `capacity`.
    pub fn resolve(self, capacity: i64) -> i64 {
        match self {
            ThresholdValue::Quantity(q) => q,
            ThresholdValue::Percentage(p) => (capacity as f64 * p / 100.0).round() as i64,
        }
    }
}

/// Hard eviction thresholds, signal → value (kubelet's `evictionHard`).
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds(pub BTreeMap<Signal, ThresholdValue>);

/// A threshold that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{entry:?}: {reason}")]
pub struct ThresholdError {
    /// The entry as written.
    pub entry: String,
    /// Why it is refused.
    pub reason: String,
}

impl Default for Thresholds {
    /// Kubelet's Linux defaults: `memory.available<100Mi`, `nodefs.available<10%`,
    /// `nodefs.inodesFree<5%`, `imagefs.available<15%`, `imagefs.inodesFree<5%`.
    fn default() -> Self {
        Thresholds(BTreeMap::from([
            (Signal::MemoryAvailable, ThresholdValue::Quantity(100 << 20)),
            (Signal::NodefsAvailable, ThresholdValue::Percentage(10.0)),
            (Signal::NodefsInodesFree, ThresholdValue::Percentage(5.0)),
            (Signal::ImagefsAvailable, ThresholdValue::Percentage(15.0)),
            (Signal::ImagefsInodesFree, ThresholdValue::Percentage(5.0)),
        ]))
    }
}

impl Thresholds {
    /// Thresholds from `signal → value` pairs (the config file's map, or the flag's
    /// `signal<value` list). `0%` and `100%` disable a signal, as in kubelet.
    pub fn parse<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self, ThresholdError> {
        let mut map = BTreeMap::new();
        for (name, value) in entries {
            let err = |reason: String| ThresholdError {
                entry: format!("{name}<{value}"),
                reason,
            };
            let signal = Signal::parse_name(name.trim()).map_err(|e| err(e.to_string()))?;
            let value = value.trim();
            let parsed = match value.strip_suffix('%') {
                Some(p) => {
                    let p: f64 = p.parse().map_err(|_| err("percentage is not a number".to_string()))?;
                    // kubelet's ParseThresholdConfig words.
                    if p < 0.0 {
                        return Err(err(format!(
                            "eviction percentage threshold {} must be >= 0%: {value}",
                            signal.name()
                        )));
                    }
                    if p > 100.0 {
                        return Err(err(format!(
                            "eviction percentage threshold {} must be <= 100%: {value}",
                            signal.name()
                        )));
                    }
                    if p == 0.0 || p == 100.0 {
                        continue;
                    }
                    ThresholdValue::Percentage(p)
                }
                None => {
                    let magnitude = value.strip_prefix('-').unwrap_or(value);
                    let q = parse_quantity(magnitude, false)
                        .ok_or_else(|| err("not a quantity or a percentage".to_string()))?;
                    let q = if value.starts_with('-') { -q } else { q };
                    if q <= 0 {
                        return Err(err(format!(
                            "eviction threshold {} must be positive: {value}",
                            signal.name()
                        )));
                    }
                    ThresholdValue::Quantity(q)
                }
            };
            map.insert(signal, parsed);
        }
        Ok(Thresholds(map))
    }

    /// Thresholds from kubelet's flag syntax: `memory.available<100Mi,nodefs.available<10%`.
    pub fn parse_flag(entries: &[String]) -> Result<Self, ThresholdError> {
        let mut pairs = Vec::new();
        for entry in entries.iter().filter(|e| !e.is_empty()) {
            let (name, value) = entry.split_once('<').ok_or_else(|| ThresholdError {
                entry: entry.clone(),
                reason: "expected signal<value, like memory.available<100Mi".to_string(),
            })?;
            pairs.push((name, value));
        }
        Thresholds::parse(pairs)
    }
}

/// One filesystem's size and free space.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FsStats {
    /// Size in bytes.
    pub capacity_bytes: i64,
    /// Bytes available to unprivileged users.
    pub available_bytes: i64,
    /// Inodes in all.
    pub inodes: i64,
    /// Free inodes.
    pub inodes_free: i64,
}

impl FsStats {
    /// Statistics of the filesystem holding `path`.
    pub fn of(path: &Path) -> Option<FsStats> {
        let s = rustix::fs::statvfs(path).ok()?;
        let block = s.f_frsize as i64;
        Some(FsStats {
            capacity_bytes: s.f_blocks as i64 * block,
            available_bytes: s.f_bavail as i64 * block,
            inodes: s.f_files as i64,
            inodes_free: s.f_ffree as i64,
        })
    }
}

/// The signals as observed once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    /// Memory capacity in bytes.
    pub memory_capacity: i64,
    /// `memory.available` in bytes.
    pub memory_available: i64,
    /// The agent's root directory filesystem.
    pub nodefs: Option<FsStats>,
    /// Docker's filesystem.
    pub imagefs: Option<FsStats>,
    /// `pid_max` and processes in use.
    pub pids: Option<(i64, i64)>,
    /// The pods' cgroup: its memory limit less its working set, and its limit; none without a
    /// limit (kubelet observes nothing without the summary's `availableBytes`).
    pub allocatable_memory: Option<(i64, i64)>,
}

impl Observation {
    /// The signal's (available, capacity), when observed.
    pub fn signal(&self, signal: Signal) -> Option<(i64, i64)> {
        match signal {
            Signal::MemoryAvailable => {
                (self.memory_capacity > 0).then_some((self.memory_available, self.memory_capacity))
            }
            Signal::NodefsAvailable => self.nodefs.map(|f| (f.available_bytes, f.capacity_bytes)),
            Signal::NodefsInodesFree => self.nodefs.map(|f| (f.inodes_free, f.inodes)),
            Signal::ImagefsAvailable | Signal::ContainerfsAvailable => {
                self.imagefs.map(|f| (f.available_bytes, f.capacity_bytes))
            }
            Signal::ImagefsInodesFree | Signal::ContainerfsInodesFree => {
                self.imagefs.map(|f| (f.inodes_free, f.inodes))
            }
            Signal::AllocatableMemoryAvailable => self.allocatable_memory,
            Signal::PidAvailable => self.pids.map(|(max, used)| (max - used, max)),
        }
    }
}

/// The image filesystem: Docker's root directory's (`image_dir`), else the agent's root
/// directory's (Docker's path may be of another mount namespace). Image GC reads it too.
pub fn imagefs(root_dir: &Path, image_dir: Option<&Path>) -> Option<FsStats> {
    image_dir.and_then(FsStats::of).or_else(|| FsStats::of(root_dir))
}

/// Observe the signals: memory from `/proc/meminfo` (available = free + inactive file pages,
/// kubelet's capacity − working set), the filesystems of `root_dir` and `image_dir`, and PIDs
/// from `/proc/sys/kernel/pid_max` and `/proc/loadavg`.
pub fn observe(root_dir: &Path, image_dir: Option<&Path>) -> Observation {
    let meminfo = crate::meminfo::MemInfo::read();
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok());
    // The fourth field of loadavg is "running/total" scheduling entities.
    let tasks = std::fs::read_to_string("/proc/loadavg").ok().and_then(|s| {
        s.split_whitespace()
            .nth(3)?
            .split_once('/')
            .and_then(|(_, total)| total.parse::<i64>().ok())
    });
    Observation {
        memory_capacity: meminfo.total(),
        memory_available: meminfo.bytes("MemFree") + meminfo.bytes("Inactive(file)"),
        nodefs: FsStats::of(root_dir),
        imagefs: imagefs(root_dir, image_dir),
        pids: pid_max.zip(tasks),
        allocatable_memory: None,
    }
}

/// `allocatableMemory.available` of the pods' cgroup `kubepods`: (limit − working set, limit),
/// as kubelet observes the summary's `pods` system container (`makeSignalObservations`:
/// available = `availableBytes`, capacity = available + working set); none without a limit.
pub fn pods_memory(layout: &crate::cgroup::CgroupLayout, kubepods: &str) -> Option<(i64, i64)> {
    let path = crate::cgroup::stats::CgroupPath::Same(kubepods.to_string());
    let memory = crate::cgroup::stats::read(layout, &path).ok()?.memory?;
    let limit = i64::try_from(memory.limit?).ok()?;
    let working_set = i64::try_from(memory.working_set).ok()?;
    Some((limit - working_set, limit))
}

/// The thresholds met by an observation, with the observed and threshold values.
pub fn met(thresholds: &Thresholds, observation: &Observation) -> Vec<(Signal, i64, i64)> {
    thresholds
        .0
        .iter()
        .filter_map(|(&signal, value)| {
            let (available, capacity) = observation.signal(signal)?;
            let threshold = value.resolve(capacity);
            (available < threshold).then_some((signal, available, threshold))
        })
        .collect()
}

/// Keeps each pressure condition True until its signals have not been met for the transition
/// period (`evictionPressureTransitionPeriod`, 5 m), so conditions do not flap.
#[derive(Debug, Clone)]
pub struct PressureTracker {
    period: Duration,
    last_met: BTreeMap<Pressure, Instant>,
}

impl PressureTracker {
    /// A tracker with the given transition period.
    pub fn new(period: Duration) -> Self {
        PressureTracker {
            period,
            last_met: BTreeMap::new(),
        }
    }

    /// Record the signals met now; returns the conditions that are True.
    pub fn update(&mut self, met: &[(Signal, i64, i64)], now: Instant) -> Vec<Pressure> {
        for (signal, _, _) in met {
            self.last_met.insert(signal.condition(), now);
        }
        self.last_met
            .retain(|_, at| *at == now || now.saturating_duration_since(*at) < self.period);
        self.last_met.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observation(memory_available: i64, disk_free_percent: i64) -> Observation {
        let fs = FsStats {
            capacity_bytes: 100 << 30,
            available_bytes: (100 << 30) / 100 * disk_free_percent,
            inodes: 1000,
            inodes_free: 900,
        };
        Observation {
            memory_capacity: 4 << 30,
            memory_available,
            nodefs: Some(fs),
            imagefs: Some(fs),
            pids: Some((4_194_304, 300)),
            allocatable_memory: None,
        }
    }

    /// Kubelet's defaults: 100Mi of memory, 10 % of nodefs, 15 % of imagefs.
    #[test]
    fn default_thresholds_are_kubelets() {
        let t = Thresholds::default();
        assert!(met(&t, &observation(1 << 30, 50)).is_empty());
        let low_memory = met(&t, &observation(50 << 20, 50));
        assert_eq!(low_memory.len(), 1);
        assert_eq!(low_memory[0].0, Signal::MemoryAvailable);
        let full_disk: Vec<Signal> = met(&t, &observation(1 << 30, 12)).iter().map(|m| m.0).collect();
        assert_eq!(full_disk, vec![Signal::ImagefsAvailable]);
    }

    /// The flag syntax parses quantities and percentages; 0 % disables; bad entries name the
    /// entry and the reason.
    #[test]
    fn thresholds_parse_like_kubelets_flag() {
        let t = Thresholds::parse_flag(&["memory.available<1Gi".into(), "nodefs.available<0%".into()]).unwrap();
        assert_eq!(
            t.0,
            BTreeMap::from([(Signal::MemoryAvailable, ThresholdValue::Quantity(1 << 30))])
        );
        let e = Thresholds::parse_flag(&["memory.free<1Gi".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unsupported eviction signal memory.free"), "{e}");
        let e = Thresholds::parse_flag(&["memory.available=1Gi".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("signal<value"), "{e}");
        let e = Thresholds::parse([("nodefs.available", "120%")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("eviction percentage threshold nodefs.available must be <= 100%: 120%"),
            "{e}"
        );
        let e = Thresholds::parse([("memory.available", "-1Mi")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("eviction threshold memory.available must be positive: -1Mi"),
            "{e}"
        );
    }

    /// A condition stays True for the transition period after its signal was last met.
    #[test]
    fn pressure_holds_for_the_transition_period() {
        let mut tracker = PressureTracker::new(Duration::from_secs(300));
        let t0 = Instant::now();
        let memory = [(Signal::MemoryAvailable, 1, 2)];
        assert_eq!(tracker.update(&memory, t0), vec![Pressure::Memory]);
        assert_eq!(
            tracker.update(&[], t0 + Duration::from_secs(299)),
            vec![Pressure::Memory]
        );
        assert!(tracker.update(&[], t0 + Duration::from_secs(301)).is_empty());
    }

    /// The machine's own signals can be read.
    #[test]
    fn the_machine_can_be_observed() {
        let o = observe(Path::new("/"), None);
        assert!(o.memory_capacity > 0 && o.memory_available > 0);
        assert!(o.nodefs.is_some_and(|f| f.capacity_bytes > 0));
        assert!(o.pids.is_some_and(|(max, used)| max > used && used > 0));
    }
}

#[cfg(test)]
mod allocatable_tests {
    use super::*;

    /// kubelet's signal names (`pkg/kubelet/eviction/api/types.go`), each with its condition
    /// and starved resource; containerfs reads Docker's filesystem, as imagefs.
    #[test]
    fn every_kubelet_signal_is_known() {
        let t = Thresholds::parse([
            ("allocatableMemory.available", "1Gi"),
            ("containerfs.available", "10%"),
            ("containerfs.inodesFree", "5%"),
        ])
        .unwrap();
        assert_eq!(t.0.len(), 3);
        assert_eq!(Signal::AllocatableMemoryAvailable.condition(), Pressure::Memory);
        assert_eq!(Signal::ContainerfsAvailable.condition(), Pressure::Disk);
        let imagefs = FsStats {
            capacity_bytes: 100,
            available_bytes: 40,
            inodes: 10,
            inodes_free: 3,
        };
        let o = Observation {
            imagefs: Some(imagefs),
            allocatable_memory: Some((300, 1000)),
            ..Observation::default()
        };
        assert_eq!(o.signal(Signal::ContainerfsAvailable), Some((40, 100)));
        assert_eq!(o.signal(Signal::ContainerfsInodesFree), Some((3, 10)));
        assert_eq!(o.signal(Signal::AllocatableMemoryAvailable), Some((300, 1000)));
        assert_eq!(Observation::default().signal(Signal::AllocatableMemoryAvailable), None);
        let err = Thresholds::parse([("memory.availabel", "1Gi")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unsupported eviction signal memory.availabel"), "{err}");
    }

    /// The pods' cgroup: its limit less its working set (usage − inactive_file); none without
    /// a limit.
    #[test]
    fn allocatable_memory_is_the_pods_cgroups_limit_less_its_working_set() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("kubepods");
        std::fs::create_dir_all(&dir).unwrap();
        let write = |file: &str, text: &str| std::fs::write(dir.join(file), text).unwrap();
        write("memory.current", "734003200\n");
        write(
            "memory.stat",
            "anon 600\nfile 0\ninactive_file 104857600\npgfault 1\npgmajfault 0\n",
        );
        write("memory.max", "1048576000\n");
        let layout = crate::cgroup::CgroupLayout::v2_at(tmp.path());
        assert_eq!(
            pods_memory(&layout, "/kubepods"),
            Some((1_048_576_000 - (734_003_200 - 104_857_600), 1_048_576_000))
        );
        write("memory.max", "max\n");
        assert_eq!(pods_memory(&layout, "/kubepods"), None);
    }
}
