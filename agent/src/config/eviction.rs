//! The eviction slice: `--eviction-hard` (`evictionHard`), `--eviction-soft` (`evictionSoft`)
//! with `--eviction-soft-grace-period` (`evictionSoftGracePeriod`),
//! `--eviction-max-pod-grace-period` (`evictionMaxPodGracePeriod`), `--eviction-minimum-reclaim`
//! (`evictionMinimumReclaim`) and `--eviction-pressure-transition-period`, each flag over its
//! key, refused in kubelet's words (`pkg/kubelet/eviction/helpers.go` `ParseThresholdConfig`)
//! naming the flag or key.

use std::collections::BTreeMap;
use std::time::Duration;

use dockerlet_host::signals::Thresholds;
use dockerlet_host::thresholds::{parse_grace_periods, parse_min_reclaim, EvictionSettings};

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The eviction settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Eviction {
    /// Every threshold and its settings.
    pub settings: EvictionSettings,
    /// `--eviction-pressure-transition-period`.
    pub pressure_transition_period: Duration,
    /// `kernelMemcgNotification` (a config key only, as kubelet's).
    pub memcg_notification: bool,
}

/// Where entries came from (the flag or the key, for errors) and the `(signal, value)` pairs.
type Given<'a> = (&'static str, Vec<(&'a str, &'a str)>);

/// The flag's `signal<sep>value` entries when given, else the key's map; which one, for errors.
fn pairs<'a>(
    flag: (&'static str, &'a [String]),
    key: (&'static str, Option<&'a BTreeMap<String, String>>),
    sep: char,
) -> Result<Option<Given<'a>>, ConfigError> {
    let given: Vec<&String> = flag.1.iter().filter(|e| !e.is_empty()).collect();
    if !given.is_empty() {
        let mut out = Vec::new();
        for entry in given {
            let pair = entry.split_once(sep).ok_or_else(|| {
                invalid(
                    flag.0,
                    format!("{entry:?}: expected signal{sep}value, like memory.available{sep}100Mi"),
                )
            })?;
            out.push(pair);
        }
        return Ok(Some((flag.0, out)));
    }
    Ok(key
        .1
        .map(|map| (key.0, map.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect())))
}

/// The eviction settings, flags over the file over kubelet's defaults.
pub(super) fn resolve(cli: &Cli, file: &FileSettings) -> Result<Eviction, ConfigError> {
    let hard = match pairs(
        ("--eviction-hard", &cli.eviction_hard),
        ("evictionHard", file.eviction_hard.as_ref()),
        '<',
    )? {
        Some((setting, p)) => Thresholds::parse(p).map_err(|e| invalid(setting, e.to_string()))?,
        None => Thresholds::default(),
    };
    let soft = match pairs(
        ("--eviction-soft", &cli.eviction_soft),
        ("evictionSoft", file.eviction_soft.as_ref()),
        '<',
    )? {
        Some((setting, p)) => Thresholds::parse(p).map_err(|e| invalid(setting, e.to_string()))?,
        None => Thresholds(BTreeMap::new()),
    };
    let grace_key = ("evictionSoftGracePeriod", file.eviction_soft_grace_period.as_ref());
    let soft_grace = match pairs(
        ("--eviction-soft-grace-period", &cli.eviction_soft_grace_period),
        grace_key,
        '=',
    )? {
        Some((setting, p)) => parse_grace_periods(p).map_err(|e| invalid(setting, e.to_string()))?,
        None => BTreeMap::new(),
    };
    let reclaim_key = ("evictionMinimumReclaim", file.eviction_minimum_reclaim.as_ref());
    let min_reclaim = match pairs(
        ("--eviction-minimum-reclaim", &cli.eviction_minimum_reclaim),
        reclaim_key,
        '=',
    )? {
        Some((setting, p)) => parse_min_reclaim(p).map_err(|e| invalid(setting, e.to_string()))?,
        None => BTreeMap::new(),
    };
    let (max_setting, max_pod_grace) = match (cli.eviction_max_pod_grace_period, file.eviction_max_pod_grace_period) {
        (Some(flag), _) => ("--eviction-max-pod-grace-period", flag),
        (None, Some(key)) => ("evictionMaxPodGracePeriod", key),
        (None, None) => ("evictionMaxPodGracePeriod", 0),
    };
    if max_pod_grace < 0 {
        return Err(invalid(
            max_setting,
            format!("must be 0 or more seconds, not {max_pod_grace}"),
        ));
    }
    let settings = EvictionSettings {
        hard,
        soft,
        soft_grace,
        min_reclaim,
        max_pod_grace: Duration::from_secs(max_pod_grace as u64),
    };
    let soft_setting = if cli.eviction_soft.iter().any(|e| !e.is_empty()) {
        "--eviction-soft"
    } else {
        "evictionSoft"
    };
    settings.validate().map_err(|e| invalid(soft_setting, e.to_string()))?;
    Ok(Eviction {
        settings,
        pressure_transition_period: cli
            .eviction_pressure_transition_period
            .or(file.eviction_pressure_transition_period)
            .unwrap_or(Duration::from_secs(300)),
        memcg_notification: file.kernel_memcg_notification.unwrap_or(false),
    })
}
