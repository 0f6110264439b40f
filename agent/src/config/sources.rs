//! The pod sources slice: the static pod directory (`--pod-manifest-path`,
//! `--file-check-frequency`) and the manifest URL (`--manifest-url`, its headers and
//! `--http-check-frequency`), flags over the file's `staticPodPath`, `staticPodURL`, ….

use std::path::PathBuf;
use std::time::Duration;

use dockerlet_actors::HttpSourceConfig;

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The static pod directory.
pub(super) struct FileSource {
    /// `--pod-manifest-path`; none when not given (or empty).
    pub path: Option<PathBuf>,
    /// `--file-check-frequency`: the directory's re-list period.
    pub check_frequency: Duration,
}

/// The static pod directory and its re-list period (more than 0).
pub(super) fn file(cli: &Cli, file: &FileSettings) -> Result<FileSource, ConfigError> {
    let check_frequency = cli
        .file_check_frequency
        .or(file.file_check_frequency)
        .unwrap_or(Duration::from_secs(20));
    if check_frequency.is_zero() {
        return Err(invalid("--file-check-frequency", "must be greater than 0".to_string()));
    }
    Ok(FileSource {
        path: cli
            .pod_manifest_path
            .clone()
            .or_else(|| file.static_pod_path.clone())
            .filter(|p| !p.as_os_str().is_empty()),
        check_frequency,
    })
}

/// The manifest URL with its headers (the file's, then the flag's) and poll period; none
/// without a URL. Headers must be `Name:value`, the period more than 0, the URL http(s).
pub(super) fn http(cli: &Cli, file: &FileSettings) -> Result<Option<HttpSourceConfig>, ConfigError> {
    let mut headers: Vec<(String, String)> = file
        .static_pod_url_header
        .clone()
        .unwrap_or_default()
        .into_iter()
        .flat_map(|(k, values)| values.into_iter().map(move |v| (k.clone(), v)))
        .collect();
    for header in cli.manifest_url_header.iter().filter(|h| !h.is_empty()) {
        let (name, value) = header
            .split_once(':')
            .ok_or_else(|| invalid("--manifest-url-header", format!("{header:?} is not Name:value")))?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let frequency = cli
        .http_check_frequency
        .or(file.http_check_frequency)
        .unwrap_or(Duration::from_secs(20));
    if frequency.is_zero() {
        return Err(invalid("--http-check-frequency", "must be greater than 0".to_string()));
    }
    let url = cli
        .manifest_url
        .clone()
        .or_else(|| file.static_pod_url.clone())
        .filter(|u| !u.is_empty());
    if let Some(url) = &url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(invalid(
                "--manifest-url",
                format!("{url:?}: expected an http:// or https:// URL"),
            ));
        }
    }
    Ok(url.map(|url| HttpSourceConfig {
        url,
        headers,
        frequency,
    }))
}
