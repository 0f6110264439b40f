//! `kernelMemcgNotification` for the EvictionActor, as kubelet's memory threshold notifiers
//! (`pkg/kubelet/eviction/memory_threshold_notifier.go`): for each memory threshold (hard and
//! soft, `memory.available` on the root memory cgroup, `allocatableMemory.available` on
//! `kubepods`), a cgroup v1 usage threshold at the usage where the signal would meet it —
//! kubelet's `capacity − threshold + inactive_file`, here the usage now plus what is available
//! above the threshold now — re-registered at most every 10 s (`notifierRefreshInterval`).
//! Crossing one makes the actor observe (and evict) at once instead of at its next period.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::Duration;

use dockerlet_host::memcg;
use dockerlet_host::signals::{Observation, Signal};
use dockerlet_host::thresholds::EvictionSettings;

/// kubelet's `notifierRefreshInterval`.
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);

/// Where the thresholds go (cgroup v1 memory controller directories).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemcgConfig {
    /// The root memory cgroup (`memory.available`).
    pub root: PathBuf,
    /// `kubepods` (`allocatableMemory.available`); none without a pod cgroup tree.
    pub kubepods: Option<PathBuf>,
}

/// One threshold to register: which, on which cgroup, how many bytes above the usage now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// kubelet's description: `hard memory eviction threshold`, `soft allocatable …`.
    pub description: String,
    /// The cgroup directory.
    pub dir: PathBuf,
    /// Bytes the usage may still grow before the threshold is met.
    pub headroom: u64,
}

/// The thresholds to register for `observation`: every memory threshold not met now, with
/// its cgroup observed.
pub fn targets(config: &MemcgConfig, settings: &EvictionSettings, observation: &Observation) -> Vec<Target> {
    let mut out = Vec::new();
    for (soft, thresholds) in [(false, &settings.hard), (true, &settings.soft)] {
        for (&signal, value) in &thresholds.0 {
            let (dir, allocatable) = match signal {
                Signal::MemoryAvailable => (Some(config.root.clone()), ""),
                Signal::AllocatableMemoryAvailable => (config.kubepods.clone(), "allocatable "),
                _ => continue,
            };
            let (Some(dir), Some((available, capacity))) = (dir, observation.signal(signal)) else {
                continue;
            };
            let headroom = available - value.resolve(capacity);
            if headroom <= 0 {
                continue;
            }
            let hard = if soft { "soft " } else { "hard " };
            out.push(Target {
                description: format!("{hard}{allocatable}memory eviction threshold"),
                dir,
                headroom: headroom.unsigned_abs(),
            });
        }
    }
    out
}

/// Registers each target at its cgroup's usage now plus its headroom; blocking. A target that
/// cannot be registered is logged and skipped.
pub fn register(targets: Vec<Target>) -> Vec<(String, OwnedFd)> {
    let mut out = Vec::new();
    for t in targets {
        let Some(usage) = memcg::usage(&t.dir) else {
            tracing::warn!(cgroup = %t.dir.display(), "Eviction manager: cannot read memory.usage_in_bytes for the memory threshold notifier");
            continue;
        };
        match memcg::usage_threshold(&t.dir, usage.saturating_add(t.headroom)) {
            Ok(fd) => out.push((t.description, fd)),
            Err(e) => {
                tracing::warn!(error = %e, notifier = %t.description, "Eviction manager: failed to create memory threshold notifier")
            }
        }
    }
    out
}

/// A threshold was crossed (its description).
#[derive(Debug, Clone, actix::Message)]
#[rtype(result = "()")]
pub struct ThresholdCrossed(pub String);

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_host::signals::Thresholds;

    /// A threshold per memory signal not met yet, with kubelet's descriptions; the headroom is
    /// what is available above the threshold.
    #[test]
    fn every_unmet_memory_threshold_gets_a_notifier() {
        let config = MemcgConfig {
            root: "/sys/fs/cgroup/memory".into(),
            kubepods: Some("/sys/fs/cgroup/memory/kubepods".into()),
        };
        let settings = EvictionSettings {
            hard: Thresholds::parse([
                ("memory.available", "100Mi"),
                ("allocatableMemory.available", "100Mi"),
                ("nodefs.available", "10%"),
            ])
            .unwrap(),
            soft: Thresholds::parse([("memory.available", "2Gi")]).unwrap(),
            ..EvictionSettings::default()
        };
        let observation = Observation {
            memory_capacity: 8 << 30,
            memory_available: 1 << 30,
            allocatable_memory: Some((500 << 20, 4 << 30)),
            ..Observation::default()
        };
        let got = targets(&config, &settings, &observation);
        assert_eq!(
            got,
            vec![
                Target {
                    description: "hard memory eviction threshold".into(),
                    dir: config.root.clone(),
                    headroom: (1 << 30) - (100 << 20),
                },
                Target {
                    description: "hard allocatable memory eviction threshold".into(),
                    dir: config.kubepods.clone().unwrap(),
                    headroom: 400 << 20,
                },
            ],
            "the soft 2Gi is met already: no notifier"
        );
        let no_pods = MemcgConfig {
            kubepods: None,
            ..config
        };
        assert_eq!(targets(&no_pods, &settings, &observation).len(), 1);
    }
}
