//! Decoding, defaulting and validation of request bodies, no more lenient than kube-apiserver.
//!
//! Every body is decoded into its k8s-openapi type: a wrong type is a 400 whose message names the
//! field, and a key the type does not have is an unknown field (400 `strict decoding error`,
//! unless the request asked for `fieldValidation=Warn` or `Ignore`). The stored object is what
//! the type serializes back to, so unknown fields never land. Then the defaults the real server
//! applies, and the validation rules a node agent can trip over (422 Invalid).

use super::error::{ApiError, Cause};
use super::names::{
    is_dns_label, is_dns_subdomain, is_label_value, is_qualified_name, DNS_LABEL_MSG, DNS_SUBDOMAIN_MSG,
};
use super::resources::ResourceInfo;
use super::status_rules;
use dockerlet_pod::quantity::quantity_value;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};

/// The `fieldValidation` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Reject unknown fields. The fixture's default: kube-apiserver's default (`Warn`) would
    /// drop them silently, which hides agent bugs.
    #[default]
    Strict,
    /// Drop unknown fields with a `Warning` header.
    Warn,
    /// Drop unknown fields.
    Ignore,
}

impl FieldValidation {
    /// From the query parameter (empty is the fixture's default); another value comes back as
    /// the error, for the options' 422 ([`super::options`]).
    pub fn parse(value: Option<&str>) -> Result<Self, UnsupportedValidation> {
        match value {
            None | Some("") | Some("Strict") => Ok(Self::Strict),
            Some("Warn") => Ok(Self::Warn),
            Some("Ignore") => Ok(Self::Ignore),
            Some(other) => Err(UnsupportedValidation(other.to_string())),
        }
    }
}

/// A `fieldValidation` value kube-apiserver does not support (the value as given).
#[derive(Debug, thiserror::Error)]
#[error("unsupported fieldValidation {0:?}")]
pub struct UnsupportedValidation(pub String);

/// Why a body does not decode as its kind: the bare reason kube-apiserver puts after
/// `<Kind> in version "<v>" cannot be handled as a <Kind>: ` (or reports against a patch).
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not a JSON object at all.
    #[error("the body is not a JSON object")]
    NotAnObject,
    /// A field of the wrong type (`spec.containers[0].image: invalid type: …`).
    #[error("{path}: {source}")]
    Field {
        /// Where.
        path: String,
        /// The decoder's reason.
        #[source]
        source: serde_json::Error,
    },
    /// The body as a whole does not decode, or does not encode back.
    #[error("{0}")]
    Body(#[source] serde_json::Error),
    /// A kind the fixture has no type for.
    #[error("no type for {0}")]
    NoType(String),
    /// A resource quantity that is not one (apimachinery's `resource.ParseQuantity`).
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (got {0})")]
    Quantity(Value),
}

/// A body decoded and re-encoded through its k8s-openapi type.
pub struct Decoded {
    /// The object as the type serializes it (unknown fields gone).
    pub object: Value,
    /// Paths of the fields the type does not know (`spec.containers[0].foo`).
    pub unknown: Vec<String>,
}

pub(crate) fn typed<T: DeserializeOwned + Serialize>(obj: &Value) -> Result<Value, DecodeError> {
    let decoded: T = serde_path_to_error::deserialize(obj.clone()).map_err(|e| {
        let path = e.path().to_string();
        if path == "." || path.is_empty() {
            DecodeError::Body(e.into_inner())
        } else {
            DecodeError::Field {
                path,
                source: e.into_inner(),
            }
        }
    })?;
    serde_json::to_value(&decoded).map_err(DecodeError::Body)
}

/// Decodes `obj` as a `resource`: fills `apiVersion`/`kind` when absent, rejects a different
/// one, and reports wrong types as 400 BadRequest naming the field (create.go and update.go's
/// `transformDecodeError`: `<Kind> in version "<v>" cannot be handled as a <Kind>: ...`).
pub fn decode(resource: &ResourceInfo, obj: &Value) -> Result<Decoded, ApiError> {
    decode_detail(resource, obj)?.map_err(|detail| {
        ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {detail}",
            kind = resource.kind,
            version = resource.version
        ))
    })
}

/// [`decode`], with what does not decode as the bare reason (the patch handler reports it
/// against `patch`, apply as a typed-object failure): `Err` for a body of another kind or
/// version, `Ok(Err(reason))` for one that does not decode.
pub(crate) fn decode_detail(resource: &ResourceInfo, obj: &Value) -> Result<Result<Decoded, DecodeError>, ApiError> {
    let Value::Object(map) = obj else {
        return Ok(Err(DecodeError::NotAnObject));
    };
    let mut map = map.clone();
    let api_version = resource.api_version();
    match map.get("apiVersion") {
        None | Some(Value::Null) => {
            map.insert("apiVersion".into(), json!(api_version));
        }
        Some(v) if v.as_str() == Some(api_version.as_str()) => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({api_version})",
                v.as_str().unwrap_or_default()
            )))
        }
    }
    match map.get("kind") {
        None | Some(Value::Null) => {
            map.insert("kind".into(), json!(resource.kind));
        }
        Some(v) if v.as_str() == Some(resource.kind) => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({}) does not match the expected kind ({})",
                v.as_str().unwrap_or_default(),
                resource.kind
            )))
        }
    }
    let obj = Value::Object(map);
    use k8s_openapi::api::coordination::v1 as coordination;
    use k8s_openapi::api::core::v1 as core;
    let result = match resource.kind {
        "Pod" => typed::<core::Pod>(&obj),
        "Node" => typed::<core::Node>(&obj),
        "Event" => typed::<core::Event>(&obj),
        "Secret" => typed::<core::Secret>(&obj),
        "ConfigMap" => typed::<core::ConfigMap>(&obj),
        "Service" => typed::<core::Service>(&obj),
        "Namespace" => typed::<core::Namespace>(&obj),
        "ServiceAccount" => typed::<core::ServiceAccount>(&obj),
        "Lease" => typed::<coordination::Lease>(&obj),
        "PodTemplate" => typed::<core::PodTemplate>(&obj),
        "RuntimeClass" => typed::<k8s_openapi::api::node::v1::RuntimeClass>(&obj),
        "CertificateSigningRequest" => typed::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>(&obj),
        other => Err(DecodeError::NoType(other.to_string())),
    };
    let mut object = match result {
        Ok(object) => object,
        Err(detail) => return Ok(Err(detail)),
    };
    let mut unknown = Vec::new();
    find_unknown(&obj, &object, "", &mut unknown);
    if let Err(detail) = check_quantities(resource, &object) {
        return Ok(Err(detail));
    }
    if resource.kind == "Pod" {
        super::status_rules::convert_pod_ips(&mut object);
    }
    Ok(Ok(Decoded { object, unknown }))
}

/// Keys of `submitted` (with a non-null value) that `decoded` lacks.
pub(crate) fn find_unknown(submitted: &Value, decoded: &Value, path: &str, out: &mut Vec<String>) {
    match (submitted, decoded) {
        (Value::Object(s), Value::Object(d)) => {
            for (key, value) in s {
                let sub = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match d.get(key) {
                    Some(dv) => find_unknown(value, dv, &sub, out),
                    None if value.is_null() => {}
                    None => out.push(sub),
                }
            }
        }
        (Value::Array(s), Value::Array(d)) => {
            for (i, (sv, dv)) in s.iter().zip(d).enumerate() {
                find_unknown(sv, dv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The `strict decoding error` kube-apiserver returns with `fieldValidation=Strict`.
pub fn unknown_fields_error(resource: &ResourceInfo, unknown: &[String]) -> ApiError {
    let fields: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
    ApiError::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
        fields.join(", "),
        kind = resource.kind,
        version = resource.version
    ))
}

fn check_quantities(resource: &ResourceInfo, obj: &Value) -> Result<(), DecodeError> {
    let mut maps: Vec<&Value> = Vec::new();
    match resource.kind {
        "Pod" => {
            for list in ["containers", "initContainers", "ephemeralContainers"] {
                for c in obj["spec"][list].as_array().into_iter().flatten() {
                    maps.push(&c["resources"]["requests"]);
                    maps.push(&c["resources"]["limits"]);
                }
            }
            maps.push(&obj["spec"]["overhead"]);
            maps.push(&obj["spec"]["resources"]["requests"]);
            maps.push(&obj["spec"]["resources"]["limits"]);
        }
        "Node" => {
            maps.push(&obj["status"]["capacity"]);
            maps.push(&obj["status"]["allocatable"]);
        }
        _ => {}
    }
    for map in maps.into_iter().filter_map(Value::as_object) {
        for value in map.values() {
            let s = value.as_str().unwrap_or_default();
            if quantity_value(s).is_none() {
                return Err(DecodeError::Quantity(value.clone()));
            }
        }
    }
    Ok(())
}

fn set_default(obj: &mut Value, key: &str, value: Value) {
    if let Value::Object(map) = obj {
        if map.get(key).is_none_or(Value::is_null) {
            map.insert(key.to_string(), value);
        }
    }
}

fn ensure_object<'a>(obj: &'a mut Value, key: &str) -> &'a mut Value {
    set_default(obj, key, json!({}));
    &mut obj[key]
}

/// Removes `null` members: kube-apiserver never stores them (Go's `omitempty`).
fn prune_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(prune_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(prune_nulls),
        _ => {}
    }
}

/// The defaults kube-apiserver applies to an object of `kind` (create and update alike).
pub fn apply_defaults(kind: &str, obj: &mut Value) {
    defaults_of(kind, obj);
    prune_nulls(obj);
}

fn defaults_of(kind: &str, obj: &mut Value) {
    match kind {
        "Pod" => default_pod(obj),
        "Secret" => set_default(obj, "type", json!("Opaque")),
        "Namespace" => {
            let name = obj["metadata"]["name"].clone();
            let labels = ensure_object(ensure_object(obj, "metadata"), "labels");
            set_default(labels, "kubernetes.io/metadata.name", name);
            set_default(ensure_object(obj, "spec"), "finalizers", json!(["kubernetes"]));
            set_default(ensure_object(obj, "status"), "phase", json!("Active"));
        }
        "Service" => {
            let spec = ensure_object(obj, "spec");
            set_default(spec, "type", json!("ClusterIP"));
            set_default(spec, "sessionAffinity", json!("None"));
            set_default(spec, "internalTrafficPolicy", json!("Cluster"));
            if let Some(ports) = spec["ports"].as_array_mut() {
                for p in ports {
                    set_default(p, "protocol", json!("TCP"));
                    let port = p["port"].clone();
                    set_default(p, "targetPort", port);
                }
            }
            set_default(obj, "status", json!({"loadBalancer": {}}));
        }
        _ => {}
    }
}

fn default_probe(probe: &mut Value) {
    if !probe.is_object() {
        return;
    }
    set_default(probe, "timeoutSeconds", json!(1));
    set_default(probe, "periodSeconds", json!(10));
    set_default(probe, "successThreshold", json!(1));
    set_default(probe, "failureThreshold", json!(3));
    if probe["httpGet"].is_object() {
        set_default(&mut probe["httpGet"], "path", json!("/"));
        set_default(&mut probe["httpGet"], "scheme", json!("HTTP"));
    }
}

fn default_container(c: &mut Value) {
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    let image = c["image"].as_str().unwrap_or_default();
    let last = image.rsplit('/').next().unwrap_or_default();
    let tag = last
        .split_once('@')
        .map_or(last, |(name, _)| name)
        .split_once(':')
        .map(|(_, t)| t);
    let policy = if image.contains('@') || tag.is_some_and(|t| t != "latest") {
        "IfNotPresent"
    } else {
        "Always"
    };
    set_default(c, "imagePullPolicy", json!(policy));
    let resources = ensure_object(c, "resources");
    if let Some(limits) = resources["limits"].as_object().cloned() {
        let requests = ensure_object(resources, "requests");
        for (k, v) in limits {
            set_default(requests, &k, v);
        }
    }
    if let Some(ports) = c["ports"].as_array_mut() {
        for p in ports {
            set_default(p, "protocol", json!("TCP"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        default_probe(&mut c[probe]);
    }
    if let Some(env) = c["env"].as_array_mut() {
        for e in env {
            if e["valueFrom"]["fieldRef"].is_object() {
                set_default(&mut e["valueFrom"]["fieldRef"], "apiVersion", json!("v1"));
            }
        }
    }
}

fn default_pod(pod: &mut Value) {
    let spec = ensure_object(pod, "spec");
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    // `priority` and `preemptionPolicy` are the Priority admission plugin's (`crate::admission`).
    // The deprecated `serviceAccount` is an alias: `serviceAccountName` wins, and the stored
    // object carries both (the v1 <-> internal conversion).
    let deprecated = spec["serviceAccount"].as_str().unwrap_or_default().to_string();
    if spec["serviceAccountName"].as_str().is_none_or(str::is_empty) && !deprecated.is_empty() {
        spec["serviceAccountName"] = json!(deprecated);
    }
    match spec["serviceAccountName"].as_str().filter(|s| !s.is_empty()) {
        Some(name) => spec["serviceAccount"] = json!(name),
        None => {
            if let Value::Object(m) = spec {
                m.remove("serviceAccount");
            }
        }
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(items) = spec.get_mut(list).and_then(Value::as_array_mut) {
            items.iter_mut().for_each(default_container);
        }
    }
    if let Some(volumes) = spec["volumes"].as_array_mut() {
        for v in volumes {
            for source in ["secret", "configMap"] {
                if v[source].is_object() {
                    set_default(&mut v[source], "defaultMode", json!(420));
                }
            }
            if v["hostPath"].is_object() {
                set_default(&mut v["hostPath"], "type", json!(""));
            }
            if v["downwardAPI"].is_object() {
                set_default(&mut v["downwardAPI"], "defaultMode", json!(420));
                default_field_refs(&mut v["downwardAPI"]["items"]);
            }
            if v["projected"].is_object() {
                set_default(&mut v["projected"], "defaultMode", json!(420));
                for source in v["projected"]["sources"].as_array_mut().into_iter().flatten() {
                    if source["serviceAccountToken"].is_object() {
                        set_default(&mut source["serviceAccountToken"], "expirationSeconds", json!(3600));
                    }
                    if source["downwardAPI"].is_object() {
                        default_field_refs(&mut source["downwardAPI"]["items"]);
                    }
                }
            }
        }
    }
    let qos = qos_class(&pod["spec"]);
    let status = ensure_object(pod, "status");
    set_default(status, "phase", json!("Pending"));
    set_default(status, "qosClass", json!(qos));
}

/// `fieldRef.apiVersion` defaults to `v1` in downward API items.
fn default_field_refs(items: &mut Value) {
    for item in items.as_array_mut().into_iter().flatten() {
        if item["fieldRef"].is_object() {
            set_default(&mut item["fieldRef"], "apiVersion", json!("v1"));
        }
    }
}

/// kube-apiserver's QoS class of a pod spec (requests already defaulted from limits).
fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .flat_map(|l| spec[*l].as_array().into_iter().flatten())
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let requests = &c["resources"]["requests"];
        let limits = &c["resources"]["limits"];
        for res in ["cpu", "memory"] {
            let request = requests[res].as_str().and_then(quantity_value);
            let limit = limits[res].as_str().and_then(quantity_value);
            if request.is_some() || limit.is_some() {
                any = true;
            }
            match (request, limit) {
                (Some(r), Some(l)) if (r - l).abs() < f64::EPSILON * l.abs().max(1.0) => {}
                _ => guaranteed = false,
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn validate_meta(resource: &ResourceInfo, obj: &Value, causes: &mut Vec<Cause>) {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        causes.push(Cause::required("metadata.name", "name or generateName is required"));
    } else if resource.kind == "Namespace" {
        if !is_dns_label(name) {
            causes.push(Cause::invalid("metadata.name", &json!(name), DNS_LABEL_MSG));
        }
    } else if resource.kind == "Service" {
        if !is_dns_label(name) || name.starts_with(|c: char| c.is_ascii_digit()) {
            causes.push(Cause::invalid("metadata.name", &json!(name), "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character"));
        }
    } else if matches!(resource.kind, "Event" | "CertificateSigningRequest") {
        // The core/v1 Event strategy checks no name format (nor does the CSR's:
        // `ValidateCertificateRequestName` in `pkg/apis/certificates/validation/validation.go`); only the generic path-segment rule
        // applies (rest.BeforeCreate's `ValidateObjectMetaAccessor` with
        // `path.ValidatePathSegmentName`).
        let why = match name {
            "." => Some("may not be '.'".to_string()),
            ".." => Some("may not be '..'".to_string()),
            _ => ["/", "%"]
                .iter()
                .find(|c| name.contains(**c))
                .map(|c| format!("may not contain '{c}'")),
        };
        if let Some(why) = why {
            causes.push(Cause::invalid("metadata.name", &json!(name), &why));
        }
    } else if !is_dns_subdomain(name) {
        causes.push(Cause::invalid("metadata.name", &json!(name), DNS_SUBDOMAIN_MSG));
    }
    if let Some(labels) = obj["metadata"]["labels"].as_object() {
        for (k, v) in labels {
            if !is_qualified_name(k) {
                causes.push(Cause::invalid("metadata.labels", &json!(k), "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
            }
            if !is_label_value(v.as_str().unwrap_or_default()) {
                causes.push(Cause::invalid(format!("metadata.labels.{k}"), v, "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
            }
        }
    }
    if let Some(annotations) = obj["metadata"]["annotations"].as_object() {
        let mut size = 0;
        for (k, v) in annotations {
            size += k.len() + v.as_str().map_or(0, str::len);
            if !is_qualified_name(k) {
                causes.push(Cause::invalid("metadata.annotations", &json!(k), "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
            }
        }
        if size > 256 * 1024 {
            causes.push(Cause {
                reason: "FieldValueTooLong",
                field: "metadata.annotations".into(),
                detail: "Too long: must have at most 262144 bytes".into(),
            });
        }
    }
    if let Some(refs) = obj["metadata"]["ownerReferences"].as_array() {
        for (i, r) in refs.iter().enumerate() {
            for field in ["apiVersion", "kind", "name", "uid"] {
                if r[field].as_str().is_none_or(str::is_empty) {
                    causes.push(Cause::required(format!("metadata.ownerReferences[{i}].{field}"), ""));
                }
            }
        }
    }
}

fn validate_pod_spec(spec: &Value, causes: &mut Vec<Cause>) {
    let containers = spec["containers"].as_array().cloned().unwrap_or_default();
    if containers.is_empty() {
        causes.push(Cause::required("spec.containers", ""));
    }
    let volumes: Vec<&str> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for (i, v) in volumes.iter().enumerate() {
        if !is_dns_label(v) {
            causes.push(Cause::invalid(
                format!("spec.volumes[{i}].name"),
                &json!(v),
                DNS_LABEL_MSG,
            ));
        } else if volumes[..i].contains(v) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                field: format!("spec.volumes[{i}].name"),
                detail: format!("Duplicate value: \"{v}\""),
            });
        }
    }
    let mut names: Vec<String> = Vec::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            let path = format!("spec.{list}[{i}]");
            let name = c["name"].as_str().unwrap_or_default();
            if name.is_empty() {
                causes.push(Cause::required(format!("{path}.name"), ""));
            } else if !is_dns_label(name) {
                causes.push(Cause::invalid(format!("{path}.name"), &json!(name), DNS_LABEL_MSG));
            } else if names.iter().any(|n| n == name) {
                causes.push(Cause {
                    reason: "FieldValueDuplicate",
                    field: format!("{path}.name"),
                    detail: format!("Duplicate value: \"{name}\""),
                });
            }
            names.push(name.to_string());
            if c["image"].as_str().is_none_or(|s| s.trim().is_empty()) {
                causes.push(Cause::required(format!("{path}.image"), ""));
            }
            for (j, p) in c["ports"].as_array().into_iter().flatten().enumerate() {
                let port = p["containerPort"].as_i64().unwrap_or(0);
                if !(1..=65535).contains(&port) {
                    causes.push(Cause::invalid(
                        format!("{path}.ports[{j}].containerPort"),
                        &p["containerPort"],
                        "must be between 1 and 65535, inclusive",
                    ));
                }
            }
            let privileged = c["securityContext"]["privileged"].as_bool() == Some(true);
            for (j, m) in c["volumeMounts"].as_array().into_iter().flatten().enumerate() {
                let mount = m["name"].as_str().unwrap_or_default();
                if !volumes.contains(&mount) {
                    causes.push(Cause {
                        reason: "FieldValueNotFound",
                        field: format!("{path}.volumeMounts[{j}].name"),
                        detail: format!("Not found: \"{mount}\""),
                    });
                }
                validate_mount_modes(m, privileged, &format!("{path}.volumeMounts"), causes);
            }
        }
    }
    let policy = &spec["restartPolicy"];
    if !matches!(policy.as_str(), Some("Always" | "OnFailure" | "Never")) {
        causes.push(Cause::unsupported(
            "spec.restartPolicy",
            policy,
            &["Always", "OnFailure", "Never"],
        ));
    }
    let dns = &spec["dnsPolicy"];
    if !matches!(
        dns.as_str(),
        Some("ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None")
    ) {
        causes.push(Cause::unsupported(
            "spec.dnsPolicy",
            dns,
            &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
        ));
    }
    if spec["terminationGracePeriodSeconds"].as_i64().is_some_and(|g| g < 0) {
        causes.push(Cause::invalid(
            "spec.terminationGracePeriodSeconds",
            &spec["terminationGracePeriodSeconds"],
            "must be greater than or equal to 0",
        ));
    }
}

/// `validateMountPropagation` and `validateMountRecursiveReadOnly`; like the API server's, the
/// field paths name the list, not the mount's index.
fn validate_mount_modes(m: &Value, privileged: bool, path: &str, causes: &mut Vec<Cause>) {
    let propagation = m["mountPropagation"].as_str();
    if let Some(p) = propagation {
        let field = format!("{path}.mountPropagation");
        if !matches!(p, "Bidirectional" | "HostToContainer" | "None") {
            causes.push(Cause::unsupported(
                field,
                &m["mountPropagation"],
                &["Bidirectional", "HostToContainer", "None"],
            ));
        } else if p == "Bidirectional" && !privileged {
            causes.push(Cause::forbidden(
                field,
                "Bidirectional mount propagation is available only to privileged containers",
            ));
        }
    }
    let field = format!("{path}.recursiveReadOnly");
    match m["recursiveReadOnly"].as_str() {
        None | Some("Disabled") => {}
        Some("Enabled" | "IfPossible") => {
            if m["readOnly"].as_bool() != Some(true) {
                causes.push(Cause::forbidden(
                    field.clone(),
                    "may only be specified when readOnly is true",
                ));
            }
            if propagation.is_some_and(|p| p != "None") {
                causes.push(Cause::forbidden(
                    field,
                    "may only be specified when mountPropagation is None or not specified",
                ));
            }
        }
        Some(_) => causes.push(Cause::unsupported(
            field,
            &m["recursiveReadOnly"],
            &["Disabled", "Enabled", "IfPossible"],
        )),
    }
}

/// Fields of a pod spec an update may change (kube-apiserver's ValidatePodUpdate).
fn mutable_spec_view(spec: &Value) -> Value {
    let mut spec = spec.clone();
    for list in ["containers", "initContainers"] {
        if let Some(items) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in items {
                if let Value::Object(m) = c {
                    m.remove("image");
                }
            }
        }
    }
    if let Value::Object(m) = &mut spec {
        m.remove("activeDeadlineSeconds");
        m.remove("tolerations");
        m.remove("terminationGracePeriodSeconds");
        m.remove("schedulingGates");
        // Changed only through their subresource, which keeps the rest as stored.
        m.remove("ephemeralContainers");
    }
    spec
}

/// What kube-apiserver's ValidatePodEphemeralContainersUpdate adds for a write of a pod's
/// `ephemeralcontainers` subresource (`new` as it would be stored): existing ephemeral
/// containers stay as they are, and none sets a field an ephemeral container may not have or
/// targets a container the pod does not have. The rest of the pod is validated as for any
/// update.
pub fn validate_ephemeral_update(new: &Value, old: &Value) -> Result<(), ApiError> {
    const FORBIDDEN: [&str; 7] = [
        "ports",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        "lifecycle",
        "resources",
        "restartPolicy",
    ];
    let list = |pod: &Value| {
        pod["spec"]["ephemeralContainers"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let (now, before) = (list(new), list(old));
    let mut causes = Vec::new();
    for (i, was) in before.iter().enumerate() {
        let name = was["name"].as_str().unwrap_or_default();
        match now.iter().position(|c| c["name"] == was["name"]) {
            None => causes.push(Cause::forbidden(
                format!("spec.ephemeralContainers[{i}]"),
                &format!("existing ephemeral containers \"{name}\" may not be removed"),
            )),
            Some(j) if now[j] != *was => causes.push(Cause::forbidden(
                format!("spec.ephemeralContainers[{j}]"),
                &format!("existing ephemeral containers \"{name}\" may not be changed"),
            )),
            Some(_) => {}
        }
    }
    let targets: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .flat_map(|l| new["spec"][*l].as_array().into_iter().flatten())
        .map(|c| &c["name"])
        .collect();
    for (i, c) in now.iter().enumerate() {
        for field in FORBIDDEN {
            let set = match c.get(field) {
                None | Some(Value::Null) => false,
                Some(Value::Object(m)) => m.values().any(|v| !v.is_null() && *v != json!({}) && *v != json!([])),
                Some(Value::Array(a)) => !a.is_empty(),
                Some(_) => true,
            };
            if set {
                causes.push(Cause::forbidden(
                    format!("spec.ephemeralContainers[{i}].{field}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
        let target = &c["targetContainerName"];
        if target.is_string() && !targets.contains(&target) {
            causes.push(Cause {
                reason: "FieldValueNotFound",
                field: format!("spec.ephemeralContainers[{i}].targetContainerName"),
                detail: format!("Not found: {target}"),
            });
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        let name = new["metadata"]["name"].as_str().unwrap_or_default();
        Err(ApiError::invalid("Pod", name, causes))
    }
}

/// 422 Invalid checks of an object about to be stored; `old` is the stored one on update.
pub fn validate(resource: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    validate_meta(resource, obj, &mut causes);
    match resource.kind {
        "Pod" => {
            validate_pod_spec(&obj["spec"], &mut causes);
            if let Some(old) = old {
                status_rules::validate_pod_status_update(obj, old, &mut causes);
                causes.extend(crate::admission::mirror_annotation_causes(obj, old));
            }
            // ValidatePodCreate: ephemeral containers come only through their subresource (which
            // is also why the ServiceAccount plugin never mounts its volume in them).
            if old.is_none()
                && obj["spec"]["ephemeralContainers"]
                    .as_array()
                    .is_some_and(|e| !e.is_empty())
            {
                causes.push(Cause::forbidden("spec.ephemeralContainers", "cannot be set on create"));
            }
            if let Some(old) = old {
                if mutable_spec_view(&obj["spec"]) != mutable_spec_view(&old["spec"]) {
                    let node_changed = obj["spec"]["nodeName"] != old["spec"]["nodeName"];
                    causes.push(Cause::forbidden(
                        "spec",
                        if node_changed {
                            "pod updates may not change fields other than `spec.containers[*].image`, \
                             `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only \
                             additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be \
                             set to 1 if it was previously negative) (spec.nodeName is set only by a binding)"
                        } else {
                            "pod updates may not change fields other than `spec.containers[*].image`, \
                             `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only \
                             additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be \
                             set to 1 if it was previously negative)"
                        },
                    ));
                }
            }
        }
        "Event" => status_rules::validate_event(obj, &mut causes),
        "Node" => {
            status_rules::validate_node(obj, &mut causes);
            if let Some(old) = old {
                status_rules::validate_node_update(obj, old, &mut causes);
            }
        }
        "Lease" => {
            let spec = &obj["spec"];
            if spec["leaseDurationSeconds"].as_i64().is_some_and(|d| d <= 0) {
                causes.push(Cause::invalid(
                    "spec.leaseDurationSeconds",
                    &spec["leaseDurationSeconds"],
                    "must be greater than 0",
                ));
            }
            if spec["leaseTransitions"].as_i64().is_some_and(|t| t < 0) {
                causes.push(Cause::invalid(
                    "spec.leaseTransitions",
                    &spec["leaseTransitions"],
                    "must be greater than or equal to 0",
                ));
            }
        }
        "PodTemplate"
            if obj["template"]["spec"]["containers"]
                .as_array()
                .is_none_or(Vec::is_empty) =>
        {
            causes.push(Cause::required("template.spec.containers", ""));
        }
        "RuntimeClass" => match obj["handler"].as_str() {
            None | Some("") => causes.push(Cause::required("handler", "")),
            Some(handler) if !is_dns_label(handler) => {
                causes.push(Cause::invalid("handler", &obj["handler"], DNS_LABEL_MSG));
            }
            Some(_) => {
                if old.is_some_and(|o| o["handler"] != obj["handler"]) {
                    causes.push(Cause::invalid("handler", &obj["handler"], "field is immutable"));
                }
            }
        },
        "Secret" | "ConfigMap" => {
            for field in ["data", "binaryData", "stringData"] {
                for key in obj[field].as_object().map(Map::keys).into_iter().flatten() {
                    let ok = !key.is_empty()
                        && key.len() <= 253
                        && key
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
                    if !ok {
                        causes.push(Cause::invalid(
                            format!("{field}[{key}]"),
                            &json!(key),
                            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                        ));
                    }
                }
            }
        }
        "CertificateSigningRequest" => crate::csr::validate(obj, old, &mut causes),
        _ => {}
    }
    if causes.is_empty() {
        Ok(())
    } else {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        if resource.kind == "CertificateSigningRequest" {
            return Err(ApiError::invalid_in_group(resource.group, resource.kind, name, causes));
        }
        Err(ApiError::invalid(resource.kind, name, causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::by_name;

    /// Wrong types name the field; unknown fields are listed with their path.
    #[test]
    fn decode_names_fields() {
        let pods = by_name("pods").unwrap();
        let err = decode(
            pods,
            &json!({"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "ports": [{"containerPort": "80"}]}]}}),
        )
        .err()
        .unwrap();
        assert!(
            err.message.contains("spec.containers[0].ports[0].containerPort"),
            "{}",
            err.message
        );
        let decoded = decode(
            pods,
            &json!({"metadata": {"name": "a"}, "status": {"phase": "Running", "bogus": 1}}),
        )
        .unwrap();
        assert_eq!(decoded.unknown, vec!["status.bogus".to_string()]);
    }

    /// The API server's mount checks: recursiveReadOnly only on a read-only, non-propagating
    /// mount; Bidirectional propagation only for a privileged container.
    #[test]
    fn mount_modes_are_validated_as_the_api_server_does() {
        let check = |m: Value, privileged: bool| {
            let mut causes = Vec::new();
            validate_mount_modes(&m, privileged, "spec.containers[0].volumeMounts", &mut causes);
            causes
                .iter()
                .map(|c| format!("{}: {}", c.field, c.detail))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            check(json!({"name": "mnt", "recursiveReadOnly": "Enabled"}), false),
            ["spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: may only be specified when readOnly is true"]
        );
        assert!(check(json!({"readOnly": true, "recursiveReadOnly": "IfPossible"}), false).is_empty());
        assert_eq!(
            check(json!({"mountPropagation": "Bidirectional"}), false),
            ["spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers"]
        );
        assert!(check(json!({"mountPropagation": "Bidirectional"}), true).is_empty());
        assert!(check(json!({"mountPropagation": "HostToContainer"}), false).is_empty());
        assert_eq!(check(json!({"mountPropagation": "Sideways"}), false).len(), 1);
    }
}
