//! Graceful node shutdown's settings, validated as kubelet validates them
//! (`pkg/kubelet/apis/config/validation/validation.go`): `shutdownGracePeriod` and
//! `shutdownGracePeriodCriticalPods` (also as `--shutdown-grace-period` and
//! `--shutdown-grace-period-critical-pods`), or `shutdownGracePeriodByPodPriority`.

use std::time::Duration;

use dockerlet_pod::shutdown::{groups_from_periods, sorted, ShutdownGroup};

/// A shutdown setting kubelet's validation refuses.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid value for {setting}: {reason}")]
pub struct Invalid {
    /// The config key.
    pub setting: &'static str,
    /// Why, in kubelet's words.
    pub reason: String,
}

/// What the flags and the file say.
#[derive(Debug, Default, Clone)]
pub struct ShutdownSettings {
    /// `shutdownGracePeriod`.
    pub total: Option<Duration>,
    /// `shutdownGracePeriodCriticalPods`.
    pub critical: Option<Duration>,
    /// `shutdownGracePeriodByPodPriority`.
    pub by_priority: Option<Vec<ShutdownGroup>>,
}

fn invalid(setting: &'static str, reason: impl Into<String>) -> Invalid {
    Invalid {
        setting,
        reason: reason.into(),
    }
}

/// The priority groups pods are stopped in, sorted from the lowest priority up; empty when no
/// graceful shutdown is configured (kubelet then shuts down at once).
pub fn groups(settings: ShutdownSettings) -> Result<Vec<ShutdownGroup>, Invalid> {
    let total = settings.total.unwrap_or_default();
    let critical = settings.critical.unwrap_or_default();
    if critical > total {
        return Err(invalid(
            "shutdownGracePeriodCriticalPods",
            format!(
                "invalid configuration: shutdownGracePeriod (--shutdown-grace-period) {total:?} must be >= 0, \
                 shutdownGracePeriodCriticalPods (--shutdown-grace-period-critical-pods) {critical:?} must be >= 0 \
                 and <= shutdownGracePeriod"
            ),
        ));
    }
    for (setting, flag, value) in [
        ("shutdownGracePeriod", "--shutdown-grace-period", total),
        (
            "shutdownGracePeriodCriticalPods",
            "--shutdown-grace-period-critical-pods",
            critical,
        ),
    ] {
        if !value.is_zero() && value < Duration::from_secs(1) {
            return Err(invalid(
                setting,
                format!(
                    "invalid configuration: {setting} ({flag}) {value:?} must be either zero or otherwise >= 1 sec"
                ),
            ));
        }
    }
    let by_priority = settings.by_priority.unwrap_or_default();
    if by_priority.is_empty() {
        return Ok(groups_from_periods(total, critical));
    }
    if !total.is_zero() || !critical.is_zero() {
        return Err(invalid(
            "shutdownGracePeriodByPodPriority",
            "invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time",
        ));
    }
    if let Some(negative) = by_priority.iter().find(|g| g.shutdown_grace_period_seconds < 0) {
        return Err(invalid(
            "shutdownGracePeriodByPodPriority",
            format!(
                "priority {}: shutdownGracePeriodSeconds {} must be >= 0",
                negative.priority, negative.shutdown_grace_period_seconds
            ),
        ));
    }
    Ok(sorted(by_priority))
}

/// The shutdown slice: the flags over the file's `shutdownGracePeriod…` keys, as groups.
pub(super) fn resolve(
    cli: &crate::cli::Cli,
    file: &super::file::FileSettings,
) -> Result<Vec<ShutdownGroup>, super::ConfigError> {
    groups(ShutdownSettings {
        total: cli.shutdown_grace_period.or(file.shutdown_grace_period),
        critical: cli
            .shutdown_grace_period_critical_pods
            .or(file.shutdown_grace_period_critical_pods),
        by_priority: file.shutdown_grace_period_by_pod_priority.clone(),
    })
    .map_err(|e| super::invalid(e.setting, e.reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Option<Duration> {
        Some(Duration::from_secs(secs))
    }

    /// Zero is no graceful shutdown; two periods make kubelet's two groups; the priority list
    /// is sorted; kubelet's validation errors, naming the setting.
    #[test]
    fn shutdown_settings_as_kubelet_validates_them() {
        assert!(groups(ShutdownSettings::default()).unwrap().is_empty());
        let two = groups(ShutdownSettings {
            total: s(30),
            critical: s(10),
            by_priority: None,
        })
        .unwrap();
        assert_eq!(
            two.iter().map(|g| g.shutdown_grace_period_seconds).collect::<Vec<_>>(),
            [20, 10]
        );

        let err = groups(ShutdownSettings {
            total: s(10),
            critical: s(20),
            by_priority: None,
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("shutdownGracePeriodCriticalPods") && err.contains("<= shutdownGracePeriod"),
            "{err}"
        );

        let err = groups(ShutdownSettings {
            total: Some(Duration::from_millis(500)),
            critical: None,
            by_priority: None,
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("must be either zero or otherwise >= 1 sec"), "{err}");

        let group = |priority, secs| ShutdownGroup {
            priority,
            shutdown_grace_period_seconds: secs,
        };
        let by = groups(ShutdownSettings {
            total: None,
            critical: None,
            by_priority: Some(vec![group(100000, 10), group(0, 30)]),
        })
        .unwrap();
        assert_eq!(by, vec![group(0, 30), group(100000, 10)]);
        let err = groups(ShutdownSettings {
            total: s(30),
            critical: None,
            by_priority: Some(vec![group(0, 30)]),
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod"),
            "{err}"
        );
    }
}
