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
#[derive(Debug, Clone, PartialEq)]
pub struct FileSource {
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("dockerlet").chain(args.iter().copied())).unwrap()
    }

    /// The file's `staticPodURLHeader` values come first, each value a header, then the flag's;
    /// names and values trimmed; the period is kubelet's 20 s unless set.
    #[test]
    fn manifest_url_headers_from_the_file_then_the_flag() {
        let file = FileSettings {
            static_pod_url: Some("http://file/pods".into()),
            static_pod_url_header: Some([("X-A".to_string(), vec!["1".to_string(), "2".to_string()])].into()),
            ..FileSettings::default()
        };
        let url = http(&cli(&["--manifest-url-header", " X-B : 3 "]), &file)
            .unwrap()
            .unwrap();
        assert_eq!(url.url, "http://file/pods");
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(url.headers, [pair("X-A", "1"), pair("X-A", "2"), pair("X-B", "3")]);
        assert_eq!(url.frequency, Duration::from_secs(20));
        let url = http(&cli(&["--manifest-url", "https://flag/"]), &file)
            .unwrap()
            .unwrap();
        assert_eq!(url.url, "https://flag/", "the flag wins");
        assert!(http(&cli(&[]), &FileSettings::default()).unwrap().is_none());
        let err = http(&cli(&["--manifest-url", "file:///etc/pods"]), &file)
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            err,
            r#"invalid value for --manifest-url: "file:///etc/pods": expected an http:// or https:// URL"#
        );
    }

    /// An empty `staticPodPath` is none, the flag wins over the file; the re-list period must
    /// be positive.
    #[test]
    fn the_static_pod_directory() {
        let empty = FileSettings {
            static_pod_path: Some(PathBuf::new()),
            ..FileSettings::default()
        };
        let none = file(&cli(&[]), &empty).unwrap();
        assert_eq!((none.path, none.check_frequency), (None, Duration::from_secs(20)));
        let flag = file(&cli(&["--pod-manifest-path", "/p"]), &empty).unwrap();
        assert_eq!(flag.path, Some(PathBuf::from("/p")));
        let err = file(&cli(&["--file-check-frequency", "0s"]), &FileSettings::default())
            .err()
            .unwrap()
            .to_string();
        assert_eq!(err, "invalid value for --file-check-frequency: must be greater than 0");
    }
}
