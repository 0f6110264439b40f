//! The pod sync slice: how the pod workers keep Docker in line (`--container-runtime-endpoint`,
//! `--sync-frequency`, the crash-loop back-off) and the statistics housekeeping period
//! (`--housekeeping-interval`), flags over the file.

use std::time::Duration;

use dockerlet_pod::backoff::BackoffConfig;

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The pod workers' periods and runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSync {
    /// Statistics housekeeping period (`--housekeeping-interval`, a command-line flag only, as
    /// kubelet's).
    pub housekeeping_interval: Duration,
    /// Pod resync period.
    pub sync_frequency: Duration,
    /// CrashLoopBackOff.
    pub backoff: BackoffConfig,
    /// Docker endpoint.
    pub runtime_endpoint: String,
}

/// The periods (each more than 0; the back-off's maximum between its initial delay and 300 s)
/// and the endpoint (`unix://`, `tcp://` or `http://`).
pub(super) fn resolve(cli: &Cli, file: &FileSettings) -> Result<PodSync, ConfigError> {
    let housekeeping_interval = cli.housekeeping_interval.unwrap_or(Duration::from_secs(10));
    if housekeeping_interval.is_zero() {
        return Err(invalid("--housekeeping-interval", "must be greater than 0".to_string()));
    }
    let sync_frequency = cli
        .sync_frequency
        .or(file.sync_frequency)
        .unwrap_or(Duration::from_secs(60));
    if sync_frequency.is_zero() {
        return Err(invalid("--sync-frequency", "must be greater than 0".to_string()));
    }
    Ok(PodSync {
        housekeeping_interval,
        sync_frequency,
        backoff: backoff(cli, file)?,
        runtime_endpoint: runtime_endpoint(cli, file)?,
    })
}

/// `crashLoopBackOff`: kubelet's 10 s doubling to at most 5 m.
fn backoff(cli: &Cli, file: &FileSettings) -> Result<BackoffConfig, ConfigError> {
    let backoff = BackoffConfig {
        initial: cli
            .crash_loop_backoff_initial
            .or(file.backoff_initial)
            .unwrap_or(Duration::from_secs(10)),
        max: cli
            .crash_loop_backoff_max
            .or(file.backoff_max)
            .unwrap_or(Duration::from_secs(300)),
    };
    if backoff.initial.is_zero() {
        return Err(invalid(
            "--crash-loop-backoff-initial",
            "must be greater than 0".to_string(),
        ));
    }
    if backoff.max < backoff.initial || backoff.max > Duration::from_secs(300) {
        return Err(invalid(
            "--crash-loop-backoff-max",
            format!(
                "{} must be between the initial delay ({}) and 300s",
                humantime::format_duration(backoff.max),
                humantime::format_duration(backoff.initial)
            ),
        ));
    }
    Ok(backoff)
}

/// `--container-runtime-endpoint`: Docker's socket by default.
fn runtime_endpoint(cli: &Cli, file: &FileSettings) -> Result<String, ConfigError> {
    let endpoint = cli
        .container_runtime_endpoint
        .clone()
        .or_else(|| file.container_runtime_endpoint.clone())
        .unwrap_or_else(|| "unix:///var/run/docker.sock".to_string());
    if !["unix://", "tcp://", "http://"].iter().any(|p| endpoint.starts_with(p)) {
        return Err(invalid(
            "--container-runtime-endpoint",
            format!("{endpoint:?}: expected unix://, tcp:// or http://"),
        ));
    }
    Ok(endpoint)
}
