//! The downward API's pod fields in volumes (kubelet's `pkg/fieldpath/fieldpath.go`:
//! `ExtractFieldPathAsString`, `FormatMap`, `SplitMaybeSubscriptedPath`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

/// Why a downwardAPI `fieldPath` names nothing kubelet can write, in its words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FieldPathError {
    /// A subscript on a field that is not a map (`metadata.name['x']`).
    #[error("fieldPath {0:?} does not support subscript")]
    NoSubscript(String),
    /// A subscript that is not a qualified name.
    #[error("invalid key subscript in {0}: not a qualified name")]
    InvalidKey(String),
    /// A field kubelet does not extract.
    #[error("unsupported fieldPath: {0}")]
    Unsupported(String),
}

/// The text of `field_path` of `pod`, as kubelet writes it into a downwardAPI file.
pub(crate) fn extract(pod: &Pod, field_path: &str) -> Result<String, FieldPathError> {
    let meta = &pod.metadata;
    if let Some((path, key)) = split_subscript(field_path) {
        let map = match path {
            "metadata.annotations" => &meta.annotations,
            "metadata.labels" => &meta.labels,
            _ => return Err(FieldPathError::NoSubscript(field_path.to_string())),
        };
        let checked = if path == "metadata.annotations" {
            key.to_lowercase()
        } else {
            key.to_string()
        };
        if !is_qualified_name(&checked) {
            return Err(FieldPathError::InvalidKey(field_path.to_string()));
        }
        return Ok(map.as_ref().and_then(|m| m.get(key)).cloned().unwrap_or_default());
    }
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    match field_path {
        "metadata.annotations" => Ok(format_map(meta.annotations.as_ref())),
        "metadata.labels" => Ok(format_map(meta.labels.as_ref())),
        "metadata.name" => Ok(text(&meta.name)),
        "metadata.namespace" => Ok(text(&meta.namespace)),
        "metadata.uid" => Ok(text(&meta.uid)),
        _ => Err(FieldPathError::Unsupported(field_path.to_string())),
    }
}

/// Whether a volume item may name this field (the API server's downwardAPI volume validation).
pub(crate) fn volume_field_supported(field_path: &str) -> bool {
    match split_subscript(field_path) {
        Some((path, _)) => path == "metadata.annotations" || path == "metadata.labels",
        None => matches!(
            field_path,
            "metadata.name" | "metadata.namespace" | "metadata.uid" | "metadata.labels" | "metadata.annotations"
        ),
    }
}

/// `metadata.labels['key']` → (`metadata.labels`, `key`).
fn split_subscript(field_path: &str) -> Option<(&str, &str)> {
    let inner = field_path.strip_suffix("']")?;
    let (path, key) = inner.split_once("['")?;
    (!path.is_empty()).then_some((path, key))
}

/// `key="value"` lines sorted by key, without a final newline; values quoted as Go's `%q`.
pub(crate) fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    map.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Go's `strconv.Quote`: `"` and `\` escaped, control characters as `\n`, `\t`, `\x1b`, …;
/// printable Unicode kept.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A Kubernetes qualified name (`[prefix/]name`: a DNS subdomain prefix, a name of at most 63
/// alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric).
fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    });
    name_ok && prefix_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("labelsupdate".into()),
                namespace: Some("ns".into()),
                uid: Some("1234".into()),
                labels: Some(BTreeMap::from([
                    ("key2".to_string(), "value2".to_string()),
                    ("key1".to_string(), "value1".to_string()),
                ])),
                annotations: Some(BTreeMap::from([("builder".to_string(), "bar \"q\"\n".to_string())])),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Labels and annotations are `key="value"` lines, sorted, Go-quoted, no final newline (the
    /// conformance test reads `key1="value1"\n` from a file holding two lines).
    #[test]
    fn maps_are_sorted_quoted_lines() {
        let p = pod();
        assert_eq!(
            extract(&p, "metadata.labels").unwrap(),
            "key1=\"value1\"\nkey2=\"value2\""
        );
        assert_eq!(
            extract(&p, "metadata.annotations").unwrap(),
            "builder=\"bar \\\"q\\\"\\n\""
        );
        assert_eq!(extract(&p, "metadata.labels['key2']").unwrap(), "value2");
        assert_eq!(extract(&p, "metadata.labels['absent']").unwrap(), "");
        assert_eq!(extract(&p, "metadata.name").unwrap(), "labelsupdate");
        assert_eq!(extract(&p, "metadata.uid").unwrap(), "1234");
        assert_eq!(go_quote("é\u{1b}"), "\"é\\x1b\"");
    }

    /// Unknown paths and subscripts are errors with kubelet's wording.
    #[test]
    fn unknown_fields_are_errors() {
        let p = pod();
        assert_eq!(
            extract(&p, "status.podIP").unwrap_err().to_string(),
            "unsupported fieldPath: status.podIP"
        );
        assert!(extract(&p, "metadata.name['x']")
            .unwrap_err()
            .to_string()
            .contains("does not support subscript"));
        assert!(extract(&p, "metadata.labels['-bad-']")
            .unwrap_err()
            .to_string()
            .contains("invalid key subscript"));
        assert!(volume_field_supported("metadata.annotations['a/b']"));
        assert!(!volume_field_supported("spec.nodeName"));
    }
}
