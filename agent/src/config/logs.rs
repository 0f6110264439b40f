//! The container logs slice: `--pod-logs-dir` (`podLogsDir`), where the CRI log paths link to
//! Docker's json-file logs. Log rotation's settings (`containerLogMaxSize`,
//! `containerLogMaxFiles`, …) belong here.

use std::path::PathBuf;

use super::file::FileSettings;
use crate::cli::Cli;

/// `--pod-logs-dir` over `podLogsDir` over kubelet's `/var/log/pods`.
pub(super) fn resolve(cli: &Cli, file: &FileSettings) -> PathBuf {
    cli.pod_logs_dir
        .clone()
        .or_else(|| file.pod_logs_dir.clone())
        .unwrap_or_else(|| PathBuf::from("/var/log/pods"))
}
