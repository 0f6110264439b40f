//! The image GC slice: `--image-gc-high-threshold` (`imageGCHighThresholdPercent`, 85),
//! `--image-gc-low-threshold` (`imageGCLowThresholdPercent`, 80), `--minimum-image-ttl-duration`
//! (`imageMinimumGCAge`, 2m), `imageMaximumGCAge` (0: off; honoured while the
//! `ImageMaximumGCAge` gate is on, as in kubelet) and `--image-gc-period`, a dockerlet
//! extension (kubelet's `ImageGCPeriod` is a constant 5 m) so tests need not wait.
//!
//! Thresholds are refused in the image manager's words (`k/k pkg/kubelet/images/
//! image_gc_manager.go` `NewImageGCManager`), naming the flag or key that gave them.

use std::collections::BTreeMap;
use std::time::Duration;

use dockerlet_actors::image_gc::IMAGE_GC_PERIOD;
use dockerlet_host::image_gc::{ImageGcPolicy, PolicyError};

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The image GC settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGcSettings {
    /// Thresholds and ages.
    pub policy: ImageGcPolicy,
    /// `--image-gc-period`.
    pub period: Duration,
}

/// The image GC settings, flags over the file over kubelet's defaults, validated.
pub(super) fn resolve(
    cli: &Cli,
    file: &FileSettings,
    gates: &BTreeMap<String, bool>,
) -> Result<ImageGcSettings, ConfigError> {
    let defaults = ImageGcPolicy::default();
    let high = pick(
        cli.image_gc_high_threshold,
        "--image-gc-high-threshold",
        file.image_gc_high_threshold_percent,
        "imageGCHighThresholdPercent",
    );
    let low = pick(
        cli.image_gc_low_threshold,
        "--image-gc-low-threshold",
        file.image_gc_low_threshold_percent,
        "imageGCLowThresholdPercent",
    );
    let mut max_age = file.image_maximum_gc_age.unwrap_or(defaults.max_age);
    if !max_age.is_zero() && gates.get("ImageMaximumGCAge") == Some(&false) {
        tracing::info!("ImageMaximumGCAge flag enabled, but corresponding feature gate is not enabled. Ignoring flag.");
        max_age = Duration::ZERO;
    }
    let policy = ImageGcPolicy {
        high_threshold_percent: high.0.unwrap_or(defaults.high_threshold_percent),
        low_threshold_percent: low.0.unwrap_or(defaults.low_threshold_percent),
        min_age: cli
            .minimum_image_ttl_duration
            .or(file.image_minimum_gc_age)
            .unwrap_or(defaults.min_age),
        max_age,
    };
    policy.validate().map_err(|e| {
        let setting = match e {
            PolicyError::High(_) => high.1,
            PolicyError::Low(_) | PolicyError::LowAboveHigh { .. } => low.1,
        };
        invalid(setting, e.to_string())
    })?;
    let period = cli.image_gc_period.unwrap_or(IMAGE_GC_PERIOD);
    if period.is_zero() {
        return Err(invalid("--image-gc-period", "must be more than 0".into()));
    }
    Ok(ImageGcSettings { policy, period })
}

/// The flag's value if given, else the file's, with the name of the one that gave it (the flag's
/// when neither did: the default).
fn pick(
    flag: Option<i64>,
    flag_name: &'static str,
    key: Option<i64>,
    key_name: &'static str,
) -> (Option<i64>, &'static str) {
    match (flag, key) {
        (Some(v), _) => (Some(v), flag_name),
        (None, Some(v)) => (Some(v), key_name),
        (None, None) => (None, flag_name),
    }
}
