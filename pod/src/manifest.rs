//! Static pod manifests: parsing, validating and defaulting (kubelet's
//! `pkg/kubelet/config/common.go`). Pure: reading the files is `dockerlet_host::manifest_dir`.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod, PodStatus, Toleration};
use sha2::{Digest, Sha256};

use crate::action::NON_NUMERIC_GRPC_PORT;
use crate::annotations::{CONFIG_HASH, CONFIG_SOURCE};
use crate::decode::{decode_pod, yaml_tree, DecodeError, Step, YamlError, YamlSource};
use crate::field::FieldError;
use crate::names::{is_dns_label, is_dns_subdomain};
use crate::spec::{containers_with_fields, default_pull_policy};

/// Why a manifest was refused. Not retried until the file (or URL body) changes.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InvalidManifest {
    /// The bytes are not UTF-8.
    #[error("not UTF-8: {0}")]
    NotUtf8(#[source] std::str::Utf8Error),
    /// JSON that does not parse.
    #[error("invalid JSON: {0}")]
    Json(#[source] Arc<serde_json::Error>),
    /// YAML that does not parse: line, column and what was wrong.
    #[error("invalid YAML: {0}")]
    Yaml(#[source] YamlError),
    /// A field the API server would refuse, or this node cannot honour.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// A document that does not decode as a Pod: the field (its path, and line in YAML) and why.
    #[error(
        "invalid Pod: {}{}: {message}",
        if field.is_empty() { "the document" } else { field },
        line.map(|l| format!(" (line {l})")).unwrap_or_default()
    )]
    Decode {
        /// The field's path (`spec.containers[0].ports[0].containerPort`); empty for the document.
        field: String,
        /// The field's line in a YAML source.
        line: Option<u64>,
        /// What is wrong (serde_json's message, without its position).
        message: String,
    },
}

/// Parse one Pod from YAML or JSON (by extension). A syntax error carries line and column; a
/// field that does not decode is named by its path.
pub fn parse(file: &Path, content: &[u8]) -> Result<Pod, InvalidManifest> {
    let text = std::str::from_utf8(content).map_err(InvalidManifest::NotUtf8)?;
    let (value, source) = tree(text, file.extension().is_some_and(|e| e == "json"))?;
    decode(value, source.as_ref(), &[])
}

/// The document as a JSON tree, and for YAML what the tree keeps of its source.
fn tree(text: &str, json: bool) -> Result<(serde_json::Value, Option<YamlSource>), InvalidManifest> {
    if json {
        let value = serde_json::from_str(text).map_err(|e| InvalidManifest::Json(Arc::new(e)))?;
        Ok((value, None))
    } else {
        let (value, source) = yaml_tree(text).map_err(InvalidManifest::Yaml)?;
        Ok((value, Some(source)))
    }
}

/// The tree at `at` of its document as a Pod; a named port on a gRPC probe is a type error for
/// the whole Pod, so it is marked first and refused for its container alone (the probe's
/// validation names the field).
fn decode(mut value: serde_json::Value, source: Option<&YamlSource>, at: &[Step]) -> Result<Pod, InvalidManifest> {
    mark_named_grpc_ports(&mut value);
    decode_pod(value, source, at).map_err(|DecodeError { field, line, message }| InvalidManifest::Decode {
        field,
        line,
        message,
    })
}

/// Replace each gRPC probe port given as a string with [`NON_NUMERIC_GRPC_PORT`].
fn mark_named_grpc_ports(pod: &mut serde_json::Value) {
    for list in ["containers", "initContainers"] {
        // `get_mut`, not indexing: the document may be anything (indexing a string panics).
        let containers = pod
            .get_mut("spec")
            .and_then(|s| s.get_mut(list))
            .and_then(|l| l.as_array_mut());
        let Some(containers) = containers else {
            continue;
        };
        for container in containers {
            for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
                let port = container
                    .get_mut(probe)
                    .and_then(|p| p.get_mut("grpc"))
                    .and_then(|g| g.get_mut("port"));
                if let Some(port) = port.filter(|p| p.is_string()) {
                    *port = serde_json::Value::from(NON_NUMERIC_GRPC_PORT);
                }
            }
        }
    }
}

/// The checks the API server would make that matter to this node; the error names the field.
pub fn validate(pod: &Pod) -> Result<(), FieldError> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        return Err(FieldError::required("metadata.name", "name is required"));
    }
    if !is_dns_subdomain(name) {
        return Err(FieldError::invalid(
            "metadata.name",
            format!("{name:?}: must be a lowercase RFC 1123 subdomain"),
        ));
    }
    if let Some(ns) = pod.metadata.namespace.as_deref().filter(|n| !n.is_empty()) {
        if !is_dns_label(ns) {
            return Err(FieldError::invalid(
                "metadata.namespace",
                format!("{ns:?}: must be a lowercase RFC 1123 label"),
            ));
        }
    }
    let Some(spec) = &pod.spec else {
        return Err(FieldError::required("spec", ""));
    };
    if spec.containers.is_empty() {
        return Err(FieldError::required(
            "spec.containers",
            "at least one container is required",
        ));
    }
    if let Some(policy) = spec.restart_policy.as_deref() {
        if !["Always", "OnFailure", "Never"].contains(&policy) {
            return Err(FieldError::unsupported(
                "spec.restartPolicy",
                format!("{policy:?}: supported values: \"Always\", \"OnFailure\", \"Never\""),
            ));
        }
    }
    if spec.termination_grace_period_seconds.is_some_and(|g| g < 0) {
        return Err(FieldError::invalid(
            "spec.terminationGracePeriodSeconds",
            "must be >= 0",
        ));
    }
    let mut seen = HashSet::new();
    for (field, c) in containers_with_fields(spec) {
        validate_container(&field, c)?;
        if !seen.insert(c.name.as_str()) {
            return Err(FieldError::duplicate(format!("{field}.name"), format!("{:?}", c.name)));
        }
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        if let Some(policy) = c.restart_policy.as_deref().filter(|p| *p != "Always") {
            return Err(FieldError::unsupported(
                format!("spec.initContainers[{i}].restartPolicy"),
                format!("{policy:?}: supported values: \"Always\""),
            ));
        }
    }
    if spec.ephemeral_containers.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err(FieldError::forbidden(
            "spec.ephemeralContainers",
            "static pods may not have ephemeral containers",
        ));
    }
    crate::dns::validate(spec)?;
    crate::volume::validate_static(pod)
}

fn validate_container(field: &str, c: &Container) -> Result<(), FieldError> {
    if !is_dns_label(&c.name) {
        return Err(FieldError::invalid(
            format!("{field}.name"),
            format!("{:?}: must be a lowercase RFC 1123 label", c.name),
        ));
    }
    if c.image.as_deref().unwrap_or_default().trim().is_empty() {
        return Err(FieldError::required(format!("{field}.image"), ""));
    }
    if let Some(policy) = c.image_pull_policy.as_deref() {
        if !["Always", "IfNotPresent", "Never"].contains(&policy) {
            return Err(FieldError::unsupported(
                format!("{field}.imagePullPolicy"),
                format!("{policy:?}"),
            ));
        }
    }
    for (i, p) in c.ports.iter().flatten().enumerate() {
        if !(1..=65535).contains(&p.container_port) {
            return Err(FieldError::invalid(
                format!("{field}.ports[{i}].containerPort"),
                format!("{}: must be between 1 and 65535", p.container_port),
            ));
        }
        if let Some(h) = p.host_port.filter(|h| !(0..=65535).contains(h)) {
            return Err(FieldError::invalid(
                format!("{field}.ports[{i}].hostPort"),
                format!("{h}: must be between 0 and 65535"),
            ));
        }
    }
    Ok(())
}

/// A static pod's UID: 32 hex characters from the pod's content, node name and file path
/// (kubelet hashes the same inputs; editing the manifest gives a new UID).
pub fn static_pod_uid(pod: &Pod, node_name: &str, source: StaticSource<'_>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(pod).unwrap_or_default());
    hasher.update(format!("host:{node_name}"));
    hasher.update(match source {
        StaticSource::File(file) => format!("file:{file}"),
        StaticSource::Url(url) => format!("url:{url}"),
    });
    hex::encode(&hasher.finalize()[..16])
}

/// Where a static pod came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaticSource<'a> {
    /// A manifest file (`--pod-manifest-path`).
    File(&'a str),
    /// A manifest URL (`--manifest-url`).
    Url(&'a str),
}

/// Parse the body of a manifest URL: one Pod or a PodList, JSON or YAML (kubelet's HTTP source).
pub fn parse_url_body(content: &[u8]) -> Result<Vec<Pod>, InvalidManifest> {
    let text = std::str::from_utf8(content).map_err(InvalidManifest::NotUtf8)?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let (value, source) = tree(text, text.trim_start().starts_with('{'))?;
    match value.get("kind").and_then(|k| k.as_str()) {
        Some("PodList") => {
            let items = match value {
                serde_json::Value::Object(mut list) => list.remove("items"),
                _ => None,
            };
            let Some(serde_json::Value::Array(items)) = items else {
                return Ok(Vec::new());
            };
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| decode(item, source.as_ref(), &[Step::Key("items".into()), Step::Index(i)]))
                .collect()
        }
        _ => Ok(vec![decode(value, source.as_ref(), &[])?]),
    }
}

/// Kubelet's defaulting of file pods: `<name>-<node>`, namespace `default`, UID, annotations,
/// `spec.nodeName`, the NoExecute toleration, API defaults, phase Pending.
pub fn default_static_pod(pod: Pod, node_name: &str, file: &str) -> Pod {
    default_static_pod_from(pod, node_name, StaticSource::File(file))
}

/// [`default_static_pod`] for any static source: URL pods get `config.source: http` and no
/// NoExecute toleration (kubelet adds it to file pods only).
pub fn default_static_pod_from(mut pod: Pod, node_name: &str, source: StaticSource<'_>) -> Pod {
    let uid = pod
        .metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| static_pod_uid(&pod, node_name, source));
    let m = &mut pod.metadata;
    m.name = Some(format!(
        "{}-{}",
        m.name.as_deref().unwrap_or_default(),
        node_name.to_lowercase()
    ));
    if m.namespace.as_deref().is_none_or(str::is_empty) {
        m.namespace = Some("default".to_string());
    }
    m.uid = Some(uid.clone());
    let annotations = m.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(CONFIG_HASH.to_string(), uid);
    let source_name = match source {
        StaticSource::File(_) => "file",
        StaticSource::Url(_) => "http",
    };
    annotations.insert(CONFIG_SOURCE.to_string(), source_name.to_string());
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(node_name.to_string());
    spec.restart_policy.get_or_insert_with(|| "Always".to_string());
    spec.termination_grace_period_seconds.get_or_insert(30);
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".to_string());
    spec.scheduler_name
        .get_or_insert_with(|| "default-scheduler".to_string());
    if source_name == "file" {
        spec.tolerations.get_or_insert_with(Vec::new).push(Toleration {
            operator: Some("Exists".to_string()),
            effect: Some("NoExecute".to_string()),
            ..Default::default()
        });
    }
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        default_container(c);
    }
    pod.status = Some(PodStatus {
        phase: Some("Pending".to_string()),
        ..Default::default()
    });
    pod
}

fn default_container(c: &mut Container) {
    let image = c.image.clone().unwrap_or_default();
    c.image_pull_policy
        .get_or_insert_with(|| default_pull_policy(&image).to_string());
    c.termination_message_path
        .get_or_insert_with(|| "/dev/termination-log".to_string());
    c.termination_message_policy.get_or_insert_with(|| "File".to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// File modes are written in octal (`defaultMode: 0400`), read as kubelet's YAML 1.1 reads
    /// them; `0o400` and decimal work too.
    #[test]
    fn yaml_modes_are_octal() {
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: m}\nspec:\n  containers: [{name: c, image: i}]\n  volumes:\n  - name: a\n    downwardAPI: {defaultMode: 0400, items: [{path: p, fieldRef: {fieldPath: metadata.name}, mode: 0o440}]}\n  - name: b\n    downwardAPI: {defaultMode: 420}\n";
        let pod = parse(Path::new("m.yaml"), yaml.as_bytes()).unwrap();
        let volumes = pod.spec.unwrap().volumes.unwrap();
        let d = volumes[0].downward_api.as_ref().unwrap();
        assert_eq!(d.default_mode, Some(0o400));
        assert_eq!(d.items.as_ref().unwrap()[0].mode, Some(0o440));
        assert_eq!(volumes[1].downward_api.as_ref().unwrap().default_mode, Some(0o644));
    }

    /// A manifest that is not a Pod names the field, whichever the format (and its line, in
    /// YAML); a URL's PodList names the item.
    #[test]
    fn a_field_that_does_not_decode_is_named() {
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: m}\nspec:\n  containers:\n  - name: c\n    image: i\n    ports: [{containerPort: web}]\n";
        let e = parse(Path::new("m.yaml"), yaml.as_bytes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid Pod: spec.containers[0].ports[0].containerPort (line 8): invalid type: string \"web\", expected i32"
        );
        let json = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "m"}, "spec": {"containers": [{"name": "c", "image": "i", "tty": "yes"}]}}"#;
        let e = parse(Path::new("m.json"), json.as_bytes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid Pod: spec.containers[0].tty: invalid type: string \"yes\", expected a boolean"
        );
        let e = parse(Path::new("m.yaml"), b"spec: [").unwrap_err();
        assert!(
            e.to_string().starts_with("invalid YAML: ") && e.to_string().contains("line 1"),
            "{e}"
        );
        let list = "kind: PodList\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: c, image: i}]}\n- metadata: {name: b}\n  spec: {containers: [{name: c, image: i, command: [sleep, 10], stdin: 3}]}\n";
        let e = parse_url_body(list.as_bytes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid Pod: items[1].spec.containers[0].stdin (line 6): invalid type: integer `3`, expected a boolean"
        );
        let pods = parse_url_body(list.replace("stdin: 3", "stdin: true").as_bytes()).unwrap();
        assert_eq!(pods.len(), 2);
        let command = pods[1].spec.as_ref().unwrap().containers[0].command.clone();
        assert_eq!(
            command.unwrap(),
            ["sleep", "10"],
            "the item's plain scalars keep their text"
        );
    }
}
