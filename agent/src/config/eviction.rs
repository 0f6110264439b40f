//! The eviction slice: `--eviction-hard` (`evictionHard`) and
//! `--eviction-pressure-transition-period`. Soft thresholds, grace periods and the minimum
//! reclaim belong here.

use std::time::Duration;

use dockerlet_host::signals::Thresholds;

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The eviction settings.
pub(super) struct Eviction {
    /// `--eviction-hard`.
    pub hard: Thresholds,
    /// `--eviction-pressure-transition-period`.
    pub pressure_transition_period: Duration,
}

/// The eviction settings, flags over the file over kubelet's defaults; a bad threshold is
/// refused naming the flag or key.
pub(super) fn resolve(cli: &Cli, file: &FileSettings) -> Result<Eviction, ConfigError> {
    let hard = if cli.eviction_hard.iter().any(|e| !e.is_empty()) {
        Thresholds::parse_flag(&cli.eviction_hard).map_err(|e| invalid("--eviction-hard", e.to_string()))?
    } else if let Some(map) = &file.eviction_hard {
        Thresholds::parse(map.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(|e| invalid("evictionHard", e.to_string()))?
    } else {
        Thresholds::default()
    };
    Ok(Eviction {
        hard,
        pressure_transition_period: cli
            .eviction_pressure_transition_period
            .or(file.eviction_pressure_transition_period)
            .unwrap_or(Duration::from_secs(300)),
    })
}
