//! Value rules the config file's parser ([`super::file`]) and its field table
//! ([`super::kubelet_fields`]) share: what a zero value is, and how a Go duration reads; and what
//! a cgroup path is, which the cgroups slice and the node settings share. In a file of their own
//! so none of those imports another.

use std::time::Duration;

use serde_json::Value;

/// A `metav1.Duration` that does not parse, naming the key and the text.
#[derive(Debug, thiserror::Error)]
#[error("{key}: invalid duration {text:?}: {source}")]
pub(super) struct DurationError {
    /// The config key (empty when the caller names it itself).
    key: String,
    /// The text as written.
    text: String,
    /// Why humantime refused it.
    #[source]
    source: humantime::DurationError,
}

/// Whether a value is its type's zero value (null, `""`, 0), which kubelet's defaulting
/// replaces by the default for fields that are not pointers
/// (`pkg/kubelet/apis/config/v1beta1/defaults.go`).
pub(super) fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// A Go duration (`metav1.Duration`: `1m30s`, `500ms`, `0s`).
pub(super) fn parse_duration(key: &str, text: &str) -> Result<Duration, DurationError> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(text).map_err(|source| DurationError {
        key: key.to_string(),
        text: text.to_string(),
        source,
    })
}

/// An absolute cgroup path without `.` or `..` parts.
pub(super) fn is_cgroup_path(path: &str) -> bool {
    path.starts_with('/') && !path.split('/').any(|part| part == ".." || part == ".")
}
