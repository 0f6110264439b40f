//! Every eviction threshold and how it is met over time, as kubelet's eviction manager
//! evaluates them each cycle (`pkg/kubelet/eviction/eviction_manager.go` `synchronize`,
//! `helpers.go` `thresholdsMet`, `thresholdsFirstObservedAt`, `thresholdsMetGracePeriod`,
//! `ParseThresholdConfig`):
//!
//! - hard thresholds (`evictionHard`) act at once; soft ones (`evictionSoft`) once they have been
//!   met for their grace period (`evictionSoftGracePeriod`), which each must have;
//! - a threshold is met while its quantity is greater than what is available; one met at the
//!   last cycle stays met until the available amount is back above the quantity plus its
//!   minimum reclaim (`evictionMinimumReclaim`), so pressure does not flap;
//! - the pressure conditions follow every met threshold, grace period or not.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::signals::{Observation, Signal, ThresholdError, ThresholdValue, Thresholds};

/// `evictionSoft`, its grace periods, `evictionMaxPodGracePeriod`, `evictionMinimumReclaim` and
/// the hard thresholds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvictionSettings {
    /// `evictionHard`.
    pub hard: Thresholds,
    /// `evictionSoft`.
    pub soft: Thresholds,
    /// `evictionSoftGracePeriod`: how long a soft threshold must be met before it evicts.
    pub soft_grace: BTreeMap<Signal, Duration>,
    /// `evictionMinimumReclaim`: how far above a threshold a met signal must get back.
    pub min_reclaim: BTreeMap<Signal, ThresholdValue>,
    /// `evictionMaxPodGracePeriod`: a soft eviction's longest grace period (0: the pod's own).
    pub max_pod_grace: Duration,
}

impl EvictionSettings {
    /// Hard thresholds alone.
    pub fn hard_only(hard: Thresholds) -> Self {
        EvictionSettings {
            hard,
            ..EvictionSettings::default()
        }
    }

    /// kubelet's check: every soft threshold has a grace period.
    pub fn validate(&self) -> Result<(), ThresholdError> {
        match self.soft.0.keys().find(|s| !self.soft_grace.contains_key(s)) {
            Some(signal) => Err(ThresholdError {
                entry: signal.name().to_string(),
                reason: format!(
                    "grace period must be specified for the soft eviction threshold {}",
                    signal.name()
                ),
            }),
            None => Ok(()),
        }
    }

    /// With `enforceNodeAllocatable` holding `pods`, the hard `memory.available` threshold is
    /// also one for `allocatableMemory.available`, with its minimum reclaim (kubelet's
    /// `ParseThresholdConfig` → `addAllocatableThresholds`, `pkg/kubelet/eviction/helpers.go`);
    /// one given for that signal itself is kept.
    pub fn with_allocatable_thresholds(mut self) -> Self {
        if let Some(&value) = self.hard.0.get(&Signal::MemoryAvailable) {
            self.hard.0.entry(Signal::AllocatableMemoryAvailable).or_insert(value);
            if let Some(&reclaim) = self.min_reclaim.get(&Signal::MemoryAvailable) {
                self.min_reclaim
                    .entry(Signal::AllocatableMemoryAvailable)
                    .or_insert(reclaim);
            }
        }
        self
    }

    /// The grace period a soft eviction stops a pod with: the smaller of
    /// `evictionMaxPodGracePeriod` and the pod's own, or the pod's own when the setting is 0
    /// (kubelet's pod worker keeps the smaller nonzero one).
    pub fn soft_pod_grace(&self, pod_grace: Duration) -> Duration {
        if self.max_pod_grace.is_zero() {
            pod_grace
        } else {
            self.max_pod_grace.min(pod_grace)
        }
    }
}

/// A refused `signal=value` entry.
fn entry_error(name: &str, value: &str, reason: String) -> ThresholdError {
    ThresholdError {
        entry: format!("{name}={value}"),
        reason,
    }
}

/// `signal=duration` pairs (`--eviction-soft-grace-period memory.available=1m30s`); a grace
/// period below zero is refused in kubelet's words.
pub fn parse_grace_periods<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<BTreeMap<Signal, Duration>, ThresholdError> {
    let mut map = BTreeMap::new();
    for (name, value) in entries {
        let err = |reason: String| entry_error(name, value, reason);
        let signal = Signal::parse_name(name.trim()).map_err(|e| err(e.to_string()))?;
        let value = value.trim();
        if value.starts_with('-') {
            return Err(err(format!(
                "invalid eviction grace period specified: {value}, must be a positive value"
            )));
        }
        let grace = humantime::parse_duration(value).map_err(|e| err(format!("not a duration: {e}")))?;
        map.insert(signal, grace);
    }
    Ok(map)
}

/// `signal=quantity|percentage` pairs (`--eviction-minimum-reclaim nodefs.available=500Mi`),
/// checked as kubelet checks them: a percentage above 0, a quantity not below 0.
pub fn parse_min_reclaim<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<BTreeMap<Signal, ThresholdValue>, ThresholdError> {
    let mut map = BTreeMap::new();
    for (name, value) in entries {
        let err = |reason: String| entry_error(name, value, reason);
        let signal = Signal::parse_name(name.trim()).map_err(|e| err(e.to_string()))?;
        let value = value.trim();
        let parsed = match value.strip_suffix('%') {
            Some(p) => {
                let p: f64 = p.parse().map_err(|_| err("percentage is not a number".to_string()))?;
                if p <= 0.0 {
                    return Err(err(format!(
                        "eviction percentage minimum reclaim {} must be positive: {value}",
                        signal.name()
                    )));
                }
                ThresholdValue::Percentage(p)
            }
            None => {
                let magnitude = value.strip_prefix('-').unwrap_or(value);
                let q = dockerlet_pod::quantity::parse_quantity(magnitude, false)
                    .ok_or_else(|| err("not a quantity or a percentage".to_string()))?;
                if value.starts_with('-') && q > 0 {
                    return Err(err(format!(
                        "negative eviction minimum reclaim specified for {}",
                        signal.name()
                    )));
                }
                ThresholdValue::Quantity(q)
            }
        };
        map.insert(signal, parsed);
    }
    Ok(map)
}

/// One threshold met at an observation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Met {
    /// Its signal.
    pub signal: Signal,
    /// What was available.
    pub available: i64,
    /// The threshold's quantity (a percentage resolved against the capacity).
    pub threshold: i64,
    /// A soft threshold (evicts after its grace period, with the pod's grace period).
    pub soft: bool,
}

type Key = (Signal, bool);

/// The thresholds over time: when each was first met, and which were met last time.
#[derive(Debug, Default)]
pub struct Evaluator {
    first_observed: BTreeMap<Key, Instant>,
    previously_met: BTreeSet<Key>,
}

impl Evaluator {
    /// The thresholds met by `observation` at `now` (those met last time with their minimum
    /// reclaim added), and of them those that may evict: hard ones, and soft ones met for their
    /// grace period.
    pub fn evaluate(
        &mut self,
        settings: &EvictionSettings,
        observation: &Observation,
        now: Instant,
    ) -> (Vec<Met>, Vec<Met>) {
        let mut met = Vec::new();
        for (soft, thresholds) in [(false, &settings.hard), (true, &settings.soft)] {
            for (&signal, value) in &thresholds.0 {
                let Some((available, capacity)) = observation.signal(signal) else {
                    continue;
                };
                let threshold = value.resolve(capacity);
                let reclaim = match settings.min_reclaim.get(&signal) {
                    Some(r) if self.previously_met.contains(&(signal, soft)) => r.resolve(capacity),
                    _ => 0,
                };
                if threshold + reclaim > available {
                    met.push(Met {
                        signal,
                        available,
                        threshold,
                        soft,
                    });
                }
            }
        }
        let keys: BTreeSet<Key> = met.iter().map(|m| (m.signal, m.soft)).collect();
        self.first_observed.retain(|k, _| keys.contains(k));
        for key in &keys {
            self.first_observed.entry(*key).or_insert(now);
        }
        self.previously_met = keys;
        let eligible = met
            .iter()
            .filter(|m| {
                let grace = if m.soft {
                    settings.soft_grace.get(&m.signal).copied().unwrap_or_default()
                } else {
                    Duration::ZERO
                };
                let since = self.first_observed.get(&(m.signal, m.soft)).copied().unwrap_or(now);
                now.saturating_duration_since(since) >= grace
            })
            .copied()
            .collect();
        (met, eligible)
    }
}

#[cfg(test)]
#[path = "thresholds_tests.rs"]
mod tests;
