//! `labelSelector` and `fieldSelector`, parsed and matched as kube-apiserver does.

use super::error::ApiError;
use super::resources::ResourceInfo;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum LabelTerm {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector`; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelTerm>);

/// Splits on commas outside parentheses.
fn split_terms(s: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' if depth == 0 => terms.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    terms.push(current);
    terms.into_iter().map(|t| t.trim().to_string()).collect()
}

fn valid_label_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_label_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (f,g),h,!i`.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(terms));
        }
        let bad = |why: &str| ApiError::bad_request(format!("unable to parse requirement: {why}"));
        for term in split_terms(s) {
            let parsed = if let Some((k, v)) = term.split_once("!=") {
                LabelTerm::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once("==") {
                LabelTerm::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once('=') {
                LabelTerm::Equals(k.trim().into(), v.trim().into())
            } else if let Some(k) = term.strip_prefix('!') {
                LabelTerm::NotExists(k.trim().into())
            } else if let Some((k, rest)) = term.split_once(" notin ") {
                LabelTerm::NotIn(k.trim().into(), set_values(rest).ok_or_else(|| bad(&term))?)
            } else if let Some((k, rest)) = term.split_once(" in ") {
                LabelTerm::In(k.trim().into(), set_values(rest).ok_or_else(|| bad(&term))?)
            } else {
                LabelTerm::Exists(term.clone())
            };
            let (key, values): (&str, Vec<&str>) = match &parsed {
                LabelTerm::Equals(k, v) | LabelTerm::NotEquals(k, v) => (k, vec![v]),
                LabelTerm::In(k, vs) | LabelTerm::NotIn(k, vs) => (k, vs.iter().map(String::as_str).collect()),
                LabelTerm::Exists(k) | LabelTerm::NotExists(k) => (k, vec![]),
            };
            if !valid_label_key(key) {
                return Err(bad(&format!("\"{key}\": invalid label key")));
            }
            if let Some(v) = values.iter().find(|v| !valid_label_value(v)) {
                return Err(bad(&format!("\"{v}\": invalid label value")));
            }
            terms.push(parsed);
        }
        Ok(Self(terms))
    }

    /// Whether it selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the object's `metadata.labels` satisfy every term.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|term| match term {
            LabelTerm::Equals(k, v) => get(k) == Some(v.as_str()),
            LabelTerm::NotEquals(k, v) => get(k) != Some(v.as_str()),
            LabelTerm::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelTerm::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            LabelTerm::Exists(k) => get(k).is_some(),
            LabelTerm::NotExists(k) => get(k).is_none(),
        })
    }
}

fn set_values(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').map(|v| v.trim().to_string()).collect())
}

/// A parsed `fieldSelector`; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// The field label a kind accepts for `label`, as its registered field label conversion
/// (`pkg/apis/core/v1/conversion.go`: `AddFieldLabelConversionFunc` for Pod, Node, Event,
/// Namespace and Secret) or, for other kinds, `runtime.DefaultMetaV1FieldSelectorConversion`
/// answers: the label to match (a pod's `spec.host` is `spec.nodeName`), or why not (the 400).
/// A registered conversion takes `metadata.name`, `metadata.namespace` only for namespaced
/// kinds (Node and Namespace refuse it), and the kind's own labels.
fn convert_field_label(label: &str, resource: &ResourceInfo) -> Result<String, FieldLabelError> {
    if resource.field_labels.is_empty() {
        return match label {
            "metadata.name" | "metadata.namespace" => Ok(label.to_string()),
            _ => Err(FieldLabelError::NotKnown(label.to_string())),
        };
    }
    match label {
        "metadata.name" => Ok(label.to_string()),
        "metadata.namespace" if resource.namespaced => Ok(label.to_string()),
        "spec.host" if resource.kind == "Pod" => Ok("spec.nodeName".to_string()),
        _ if resource.field_labels.contains(&label) => Ok(label.to_string()),
        _ => Err(FieldLabelError::NotSupported(label.to_string())),
    }
}

/// A field label a kind's conversion refuses, in kube-apiserver's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum FieldLabelError {
    /// `runtime.DefaultMetaV1FieldSelectorConversion`: only the metadata labels.
    #[error("\"{0}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"")]
    NotKnown(String),
    /// A registered conversion that does not take the label.
    #[error("field label not supported: {0}")]
    NotSupported(String),
}

impl FieldSelector {
    /// Parses `a=b,c!=d` and converts each label as the kind's conversion does; a label the
    /// kind does not convert is a 400, as kube-apiserver answers it.
    pub fn parse(s: &str, resource: &ResourceInfo) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(terms));
        }
        for term in s.split(',') {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            let field =
                convert_field_label(field.trim(), resource).map_err(|e| ApiError::bad_request(e.to_string()))?;
            terms.push((field, equal, value.trim().to_string()));
        }
        Ok(Self(terms))
    }

    /// Whether it selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A selector on `metadata.name` alone (watching one object by its URL).
    pub fn name(name: &str) -> Self {
        Self(vec![("metadata.name".into(), true, name.into())])
    }

    /// Whether the object satisfies every term.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = field_value(obj, field);
            (actual == *value) == *equal
        })
    }

    /// The value the selector requires of `field`, if it has an `=` term for it.
    pub fn required(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, equal, _)| f == field && *equal)
            .map(|(_, _, v)| v.as_str())
    }
}

/// The string value kube-apiserver indexes for `field`: missing is `""`, booleans print as
/// `true`/`false`, a pod's `status.podIP` (and `status.podIPs`) is its first `podIPs` entry
/// (`ToSelectableFields` in `pkg/registry/core/pod/strategy.go`).
fn field_value(obj: &Value, field: &str) -> String {
    if field == "status.podIPs" || field == "status.podIP" {
        // v1 → internal conversion fills podIPs from a lone podIP.
        let first = obj["status"]["podIPs"][0]["ip"]
            .as_str()
            .or(obj["status"]["podIP"].as_str());
        return first.unwrap_or_default().to_string();
    }
    if field == "source" {
        return obj["source"]["component"].as_str().unwrap_or_default().to_string();
    }
    let mut v = obj;
    for part in field.split('.') {
        v = &v[part];
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Null => {
            if field == "spec.hostNetwork" || field == "spec.unschedulable" {
                "false".into()
            } else {
                String::new()
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::by_name;
    use serde_json::json;

    /// Label terms of every form match as kube-apiserver matches them.
    #[test]
    fn label_selector_forms() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        for (sel, want) in [
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("app in (web,db)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("missing!=x", true),
            ("", true),
        ] {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&obj), want, "{sel}");
        }
    }

    /// Field labels per kind, as `pkg/apis/core/v1/conversion.go` converts them: a kind with
    /// its own conversion says `field label not supported`, Node and Namespace refuse
    /// `metadata.namespace`, a pod's `spec.host` is `spec.nodeName`, and kinds without one get
    /// `DefaultMetaV1FieldSelectorConversion`'s message.
    #[test]
    fn field_labels_are_converted_per_kind() {
        let message = |sel: &str, kind: &str| {
            FieldSelector::parse(sel, by_name(kind).unwrap())
                .err()
                .map(|e| (e.code, e.message))
        };
        assert_eq!(
            message("spec.foo=x", "pods"),
            Some((400, "field label not supported: spec.foo".into()))
        );
        assert_eq!(
            message("metadata.namespace=x", "nodes"),
            Some((400, "field label not supported: metadata.namespace".into()))
        );
        assert_eq!(
            message("metadata.namespace=x", "namespaces"),
            Some((400, "field label not supported: metadata.namespace".into()))
        );
        assert_eq!(
            message("data.x=1", "configmaps"),
            Some((
                400,
                "\"data.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"".into()
            ))
        );
        for (sel, kind) in [
            ("metadata.namespace=a,metadata.name=b", "configmaps"),
            ("metadata.namespace=a", "leases"),
            ("metadata.name=n,spec.unschedulable=false", "nodes"),
            ("type=Opaque,metadata.namespace=a", "secrets"),
            ("status.phase=Active", "namespaces"),
            ("involvedObject.name=p,metadata.namespace=a", "events"),
        ] {
            assert_eq!(message(sel, kind), None, "{kind}: {sel}");
        }
        let host = FieldSelector::parse("spec.host=n1", by_name("pods").unwrap()).unwrap();
        assert!(host.matches(&json!({"spec": {"nodeName": "n1"}})));
        let ip = FieldSelector::parse("status.podIP=10.0.0.2", by_name("pods").unwrap()).unwrap();
        assert!(ip.matches(&json!({"status": {"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.2"}]}})));
        assert!(ip.matches(&json!({"status": {"podIP": "10.0.0.2"}})));
    }

    /// Unknown field labels are a 400, as kube-apiserver answers them.
    #[test]
    fn unknown_field_label_is_rejected() {
        let pods = by_name("pods").unwrap();
        let err = FieldSelector::parse("spec.foo=x", pods).unwrap_err();
        assert_eq!(err.code, 400);
        let sel = FieldSelector::parse("spec.nodeName=n1,metadata.name!=b", pods).unwrap();
        assert!(sel.matches(&json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n1"}})));
        assert!(!sel.matches(&json!({"metadata": {"name": "b"}, "spec": {"nodeName": "n1"}})));
    }
}
