//! The container logs slice: `--pod-logs-dir` (`podLogsDir`), where the CRI log paths link to
//! Docker's json-file logs, and the rotation Docker is asked for at each container's create:
//! `--container-log-max-size` (`containerLogMaxSize`) and `--container-log-max-files`
//! (`containerLogMaxFiles`).
//!
//! Validated as kubelet does: `containerLogMaxFiles` must be greater than 1
//! (`pkg/kubelet/apis/config/validation/validation.go`); `containerLogMaxSize` must be a
//! quantity that fits an int64, and a negative one disables rotation
//! (`pkg/kubelet/logs/container_log_manager.go`, `NewContainerLogManager`). A size of 0, which
//! kubelet would rotate at every check, is refused: Docker's `max-size` must be positive.

use std::path::PathBuf;

use dockerlet_pod::quantity::quantity_value;
use dockerlet_runtime::LogRotation;

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// kubelet's `containerLogMaxSize` default.
const DEFAULT_MAX_SIZE: &str = "10Mi";
/// kubelet's `containerLogMaxFiles` default.
const DEFAULT_MAX_FILES: i64 = 5;

/// `--pod-logs-dir` over `podLogsDir` over kubelet's `/var/log/pods`.
pub(super) fn pods_dir(cli: &Cli, file: &FileSettings) -> PathBuf {
    cli.pod_logs_dir
        .clone()
        .or_else(|| file.pod_logs_dir.clone())
        .unwrap_or_else(|| PathBuf::from("/var/log/pods"))
}

/// The container logs' rotation settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerLogs {
    /// `containerLogMaxSize` as written (shown by `/configz`).
    pub max_size: String,
    /// `containerLogMaxFiles`.
    pub max_files: i64,
    /// The rotation Docker does; none when `containerLogMaxSize` is negative (kubelet's "no
    /// rotation": the daemon's own log options apply).
    pub rotation: Option<LogRotation>,
}

/// The rotation settings, flags over the file over kubelet's defaults; a bad value is refused
/// naming the flag or key it came from.
pub(super) fn resolve(cli: &Cli, file: &FileSettings) -> Result<ContainerLogs, ConfigError> {
    let (size_setting, max_size) = match (&cli.container_log_max_size, &file.container_log_max_size) {
        (Some(flag), _) => ("--container-log-max-size", flag.clone()),
        (None, Some(key)) => ("containerLogMaxSize", key.clone()),
        (None, None) => ("containerLogMaxSize", DEFAULT_MAX_SIZE.to_string()),
    };
    let (files_setting, max_files) = match (cli.container_log_max_files, file.container_log_max_files) {
        (Some(flag), _) => ("--container-log-max-files", flag),
        (None, Some(key)) => ("containerLogMaxFiles", key),
        (None, None) => ("containerLogMaxFiles", DEFAULT_MAX_FILES),
    };
    let rotation = checked_rotation(&max_size, max_files).map_err(|e| match e {
        Refusal::Size(reason) => invalid(size_setting, reason),
        Refusal::Files(reason) => invalid(files_setting, reason),
    })?;
    Ok(ContainerLogs {
        max_size,
        max_files,
        rotation,
    })
}

/// Which setting is refused, and why.
#[derive(Debug)]
enum Refusal {
    Size(String),
    Files(String),
}

/// The rotation of a max size and file count, checked as kubelet checks them.
fn checked_rotation(max_size: &str, max_files: i64) -> Result<Option<LogRotation>, Refusal> {
    if max_files <= 1 {
        // kubelet: "invalid configuration: containerLogMaxFiles must be greater than 1".
        return Err(Refusal::Files(format!(
            "{max_files}: containerLogMaxFiles must be greater than 1"
        )));
    }
    // An int32 in KubeletConfiguration.
    let max_files = i32::try_from(max_files)
        .ok()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| Refusal::Files(format!("{max_files}: containerLogMaxFiles must fit an int32")))?;
    let bytes = quantity_value(max_size)
        .filter(|v| v.is_finite() && v.abs() < i64::MAX as f64)
        .ok_or_else(|| {
            // kubelet: "failed to parse container log max size %q: ...".
            Refusal::Size(format!(
                "failed to parse container log max size {max_size:?}: not a quantity (e.g. 10Mi)"
            ))
        })?
        .ceil();
    if bytes < 0.0 {
        return Ok(None);
    }
    if bytes == 0.0 {
        return Err(Refusal::Size(format!(
            "{max_size:?}: the container log max size must be greater than 0 (Docker's max-size must be a positive number; a negative size disables rotation)"
        )));
    }
    Ok(Some(LogRotation {
        max_size: bytes as u64,
        max_files,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes read as quantities in bytes; files must be 2 or more; negative sizes disable
    /// rotation; 0 and non-quantities are refused.
    #[test]
    fn rotation_is_validated_as_kubelet_does() {
        let r = checked_rotation;
        assert_eq!(
            r("10Mi", 5).unwrap(),
            Some(LogRotation {
                max_size: 10_485_760,
                max_files: 5
            })
        );
        assert_eq!(r("20Ki", 3).unwrap().unwrap().max_size, 20_480);
        assert_eq!(r("1M", 2).unwrap().unwrap().max_size, 1_000_000);
        assert_eq!(r("4096", 2).unwrap().unwrap().max_size, 4096);
        assert_eq!(r("-1", 5).unwrap(), None);
        for (size, files, want) in [
            ("10Mi", 1, "1: containerLogMaxFiles must be greater than 1"),
            ("10Mi", 0, "0: containerLogMaxFiles must be greater than 1"),
            ("10Mi", -3, "-3: containerLogMaxFiles must be greater than 1"),
            (
                "10MB",
                5,
                "failed to parse container log max size \"10MB\": not a quantity (e.g. 10Mi)",
            ),
            (
                "lots",
                5,
                "failed to parse container log max size \"lots\": not a quantity (e.g. 10Mi)",
            ),
            (
                "0",
                5,
                "\"0\": the container log max size must be greater than 0 (Docker's max-size must be a positive number; a negative size disables rotation)",
            ),
        ] {
            let got = match r(size, files).unwrap_err() {
                Refusal::Size(s) | Refusal::Files(s) => s,
            };
            assert_eq!(got, want, "{size} {files}");
        }
    }
}
