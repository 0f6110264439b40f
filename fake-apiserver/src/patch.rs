//! The four patch types kube-apiserver accepts, as its patch handler applies them
//! (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go): JSON patch (RFC 6902), JSON
//! merge patch (RFC 7386), strategic merge patch ([`super::strategic`]) and server-side apply
//! (here a strategic merge that may create; no field managers, see below).
//!
//! The answers follow the handler: an unsupported content type is 415 naming the accepted ones;
//! a patch body that does not decode is 400; a JSON patch that cannot be applied is 422 with the
//! generic message; a patched object that does not decode as its kind (a wrong type, or an
//! unknown field under `fieldValidation=Strict`) is 422 ` "" is invalid: patch: Invalid value:
//! ...`; a patch that renames the object or moves it to another namespace is 400. JSON and
//! merge patches of a missing object are 404; apply creates it (201).
//!
//! Server-side apply keeps no `managedFields`: there are no conflicts, `force` changes nothing,
//! and fields a manager stops applying stay. Its checks of the applied object are upstream's
//! (staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/structuredmerge.go,
//! versioncheck.go): the object's kind and version, no `metadata.managedFields`, and every field
//! declared in the schema (a plain 500 otherwise, as kube-apiserver answers).

use super::error::ApiError;
use super::resources::ResourceInfo;
use super::strategic::{self, go_value, json_type, ListStrategy};
use super::validate::{self, FieldValidation};
use serde_json::{json, Value};

/// A PATCH request's content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/json-patch+json`.
    Json,
    /// `application/apply-patch+yaml` (`+cbor` is behind a feature gate that is off).
    Apply,
}

/// The patch types kube-apiserver lists in its 415, in its order (endpoints/installer.go).
const ACCEPTED: &str = "application/json-patch+json, application/merge-patch+json, \
                        application/strategic-merge-patch+json, application/apply-patch+yaml";

/// The most operations a JSON patch may have (handlers/patch.go `maxJSONPatchOperations`).
const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

impl PatchType {
    /// From a `Content-Type` header value (parameters ignored).
    pub fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/json-patch+json" => Ok(Self::Json),
            "application/apply-patch+yaml" => Ok(Self::Apply),
            _ => Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: {ACCEPTED}"
            ))),
        }
    }
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// Applies a JSON, merge or strategic merge patch to `old` (the stored object) and decodes the
/// result as the resource's kind; returns it with the warnings `fieldValidation=Warn` sends.
pub fn patched_object(
    resource: &ResourceInfo,
    (ns, name): (&str, &str),
    old: &Value,
    patch_type: PatchType,
    patch: &Value,
    validation: FieldValidation,
) -> Result<(Value, Vec<String>), ApiError> {
    let mut patched = old.clone();
    match patch_type {
        PatchType::Merge => {
            if !patch.is_object() {
                return Err(ApiError::bad_request(format!(
                    "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                    json_type(patch)
                )));
            }
            merge_patch(&mut patched, patch);
        }
        PatchType::Json => json_patch_apply(&mut patched, patch)?,
        PatchType::Strategic | PatchType::Apply => strategic::strategic_merge(resource.kind, &mut patched, patch)?,
    }
    // The patched object carries the stored resourceVersion; one the patch does not set is no
    // precondition.
    if patch_type != PatchType::Json && patch["metadata"].get("resourceVersion").is_none() {
        if let Value::Object(meta) = &mut patched["metadata"] {
            meta.remove("resourceVersion");
        }
    }
    // A strategic merge patch is shown as Go prints the patch map; the others as the patched
    // object's JSON.
    let rendered = match patch_type {
        PatchType::Strategic | PatchType::Apply => go_value(patch),
        _ => serde_json::to_string(&patched).unwrap_or_default(),
    };
    let (mut object, warnings) = decode_patched(resource, &patched, validation, &rendered)?;
    check_identity(resource, ns, name, &mut object)?;
    Ok((object, warnings))
}

/// RFC 6902, with the handler's answers: a body that is no list of operations is 400, too many
/// operations 413, an operation that cannot be applied 422.
fn json_patch_apply(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Value::Array(ops) = patch else {
        return Err(ApiError::bad_request(format!(
            "error decoding patch: json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
            json_type(patch)
        )));
    };
    if let Some(op) = ops.iter().find(|op| !op.is_object()) {
        return Err(ApiError::bad_request(format!(
            "error decoding patch: json: cannot unmarshal {} into Go value of type handlers.jsonPatchOp",
            json_type(op)
        )));
    }
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::too_large(&format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            ops.len()
        )));
    }
    let ops: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|_| ApiError::generic_invalid())?;
    json_patch::patch(target, &ops).map_err(|_| ApiError::generic_invalid())
}

/// The patched object decoded as its kind: what does not decode, and unknown fields under
/// `Strict`, are 422 against `patch`.
fn decode_patched(
    resource: &ResourceInfo,
    patched: &Value,
    validation: FieldValidation,
    rendered: &str,
) -> Result<(Value, Vec<String>), ApiError> {
    let decoded = match validate::decode_detail(resource, patched)? {
        Ok(decoded) => decoded,
        Err(detail) => return Err(ApiError::invalid_patch(rendered, &detail.to_string())),
    };
    let unknown: Vec<String> = decoded
        .unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    match validation {
        _ if unknown.is_empty() => Ok((decoded.object, Vec::new())),
        FieldValidation::Strict => Err(ApiError::invalid_patch(
            rendered,
            &format!("strict decoding error: {}", unknown.join(", ")),
        )),
        FieldValidation::Warn => Ok((decoded.object, unknown)),
        FieldValidation::Ignore => Ok((decoded.object, Vec::new())),
    }
}

/// What the patch handler checks of the object a patch produced: its namespace is the
/// request's (filled in when empty, cleared for cluster-scoped kinds: handlers/rest.go
/// `EnsureObjectNamespaceMatchesRequestNamespace`) and its name the URL's (`checkName`).
pub fn check_identity(resource: &ResourceInfo, ns: &str, name: &str, obj: &mut Value) -> Result<(), ApiError> {
    let expected_ns = if resource.namespaced { ns } else { "" };
    let obj_ns = obj["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
    if obj_ns != expected_ns {
        if obj_ns.is_empty() {
            obj["metadata"]["namespace"] = json!(expected_ns);
        } else if expected_ns.is_empty() {
            if let Value::Object(meta) = &mut obj["metadata"] {
                meta.remove("namespace");
            }
        } else {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    let obj_name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if obj_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({obj_name}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

/// Server-side apply of `patch` (the applied configuration) to `old`, or to an empty object
/// when there is none (apply creates): the checks of the field manager, then a strategic
/// merge. Returns the object to create or write, decoded as its kind.
pub fn applied_object(
    resource: &ResourceInfo,
    (ns, name): (&str, &str),
    old: Option<&Value>,
    patch: &Value,
    validation: FieldValidation,
) -> Result<(Value, Vec<String>), ApiError> {
    if !patch.is_object() {
        return Err(ApiError::bad_request(format!(
            "error decoding YAML: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_type(patch)
        )));
    }
    let api_version = patch["apiVersion"].as_str().unwrap_or_default();
    let kind = patch["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = format!("{group}/{version}, Kind={kind}");
    if api_version != resource.api_version() || kind != resource.kind {
        return Err(ApiError::bad_request(format!("invalid object type: {gvk}")));
    }
    if !patch["metadata"]["managedFields"].is_null() {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    // structured-merge-diff types the applied configuration first: a field the schema does not
    // declare, or a value of the wrong type, fails the request with a plain error.
    let typed_failure = |detail: String| {
        ApiError::unknown(
            500,
            format!(
                "failed to create typed patch object ({}/{}; {gvk}): {detail}",
                patch["metadata"]["namespace"].as_str().unwrap_or_default(),
                patch["metadata"]["name"].as_str().unwrap_or_default(),
            ),
        )
    };
    match validate::decode_detail(resource, patch)? {
        Err(detail) => return Err(typed_failure(format!(".{detail}"))),
        Ok(decoded) => {
            if let Some(field) = decoded.unknown.first() {
                return Err(typed_failure(format!(
                    "{}: field not declared in schema",
                    smd_path(resource.kind, patch, field)
                )));
            }
        }
    }
    let base = old.cloned().unwrap_or_else(|| json!({}));
    let (mut object, warnings) = patched_object(resource, (ns, name), &base, PatchType::Apply, patch, validation)?;
    if old.is_none() {
        if let Value::Object(meta) = &mut object["metadata"] {
            meta.remove("resourceVersion");
        }
    }
    Ok((object, warnings))
}

/// A field path (`spec.containers[0].bogus`) as structured-merge-diff prints it: keyed list
/// items by their key (`.spec.containers[name="c"].bogus`), set items by value.
fn smd_path(kind: &str, body: &Value, field: &str) -> String {
    let mut out = String::new();
    let mut here = body;
    let mut path = String::new();
    for segment in field.split('.') {
        let (name, indexes) = match segment.split_once('[') {
            Some((n, rest)) => (n, Some(rest)),
            None => (segment, None),
        };
        out.push('.');
        out.push_str(name);
        path = if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        };
        here = &here[name];
        let Some(indexes) = indexes else { continue };
        for index in indexes.split('[').map(|i| i.trim_end_matches(']')) {
            let i: usize = index.parse().unwrap_or_default();
            let item = &here[i];
            match strategic::list_strategy(kind, &path) {
                ListStrategy::MergeByKey(key) => {
                    out.push_str(&format!("[{key}={}]", item[key]));
                }
                ListStrategy::MergeSet => out.push_str(&format!("[={item}]")),
                ListStrategy::Replace => out.push_str(&format!("[{i}]")),
            }
            here = item;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::by_name;

    fn pods() -> &'static ResourceInfo {
        by_name("pods").unwrap()
    }

    fn stored_pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "resourceVersion": "5"},
               "spec": {"containers": [{"name": "c", "image": "i"}]}, "status": {"phase": "Pending"}})
    }

    /// handlers/patch.go: the patched object that does not decode is 422 against `patch`, with
    /// the patched object's JSON (merge patch) or the patch's Go map (strategic).
    #[test]
    fn a_patched_object_that_does_not_decode_is_422_against_patch() {
        let err = patched_object(
            pods(),
            ("default", "p"),
            &stored_pod(),
            PatchType::Merge,
            &json!({"status": {"podIp": "10.0.0.1"}}),
            FieldValidation::Strict,
        )
        .unwrap_err();
        assert_eq!((err.code, err.reason), (422, "Invalid"));
        assert!(
            err.message.starts_with(" \"\" is invalid: patch: Invalid value: \"{"),
            "{}",
            err.message
        );
        assert!(
            err.message
                .ends_with("\": strict decoding error: unknown field \"status.podIp\""),
            "{}",
            err.message
        );
        let err = patched_object(
            pods(),
            ("default", "p"),
            &stored_pod(),
            PatchType::Strategic,
            &json!({"status": {"phase": 3}}),
            FieldValidation::Strict,
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message
                .starts_with(" \"\" is invalid: patch: Invalid value: \"map[status:map[phase:3]]\": "),
            "{}",
            err.message
        );
        let (patched, warnings) = patched_object(
            pods(),
            ("default", "p"),
            &stored_pod(),
            PatchType::Merge,
            &json!({"status": {"podIp": "10.0.0.1"}}),
            FieldValidation::Warn,
        )
        .unwrap();
        assert_eq!(warnings, ["unknown field \"status.podIp\""]);
        assert!(patched["status"].get("podIp").is_none());
    }

    /// A patch may not rename the object or move it to another namespace (400).
    #[test]
    fn a_patch_that_renames_or_moves_the_object_is_400() {
        for (patch, message) in [
            (
                json!({"metadata": {"name": "q"}}),
                "the name of the object (q) does not match the name on the URL (p)",
            ),
            (
                json!({"metadata": {"namespace": "other"}}),
                "the namespace of the provided object does not match the namespace sent on the request",
            ),
        ] {
            let err = patched_object(
                pods(),
                ("default", "p"),
                &stored_pod(),
                PatchType::Merge,
                &patch,
                FieldValidation::Strict,
            )
            .unwrap_err();
            assert_eq!((err.code, err.message.as_str()), (400, message));
        }
    }

    /// JSON patch: not a list is 400, an operation that fails is the generic 422.
    #[test]
    fn json_patch_errors() {
        let apply = |p: Value| {
            patched_object(
                pods(),
                ("default", "p"),
                &stored_pod(),
                PatchType::Json,
                &p,
                FieldValidation::Strict,
            )
        };
        let err = apply(json!({"op": "add"})).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"
        );
        for failing in [
            json!([{"op": "test", "path": "/metadata/name", "value": "x"}]),
            json!([{"op": "remove", "path": "/metadata/labels"}]),
            json!([{"op": "frobnicate", "path": "/x"}]),
        ] {
            let err = apply(failing).unwrap_err();
            assert_eq!(
                (err.code, err.reason, err.message.as_str()),
                (
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request"
                )
            );
        }
    }

    /// managedfields: the applied object's kind and version, no managedFields, and declared
    /// fields only (a plain 500 naming the field as structured-merge-diff does).
    #[test]
    fn apply_checks_the_applied_configuration() {
        let apply = |p: Value| applied_object(pods(), ("default", "p"), None, &p, FieldValidation::Strict);
        let err = apply(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "p"}})).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "invalid object type: /v1, Kind=Node")
        );
        let err = apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "managedFields": []}}))
            .unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "metadata.managedFields must be nil")
        );
        let err = apply(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                               "spec": {"containers": [{"name": "c", "image": "i", "bogus": 1}]}}),
        )
        .unwrap_err();
        assert_eq!((err.code, err.reason), (500, ""));
        assert_eq!(
            err.message,
            "failed to create typed patch object (default/p; /v1, Kind=Pod): .spec.containers[name=\"c\"].bogus: field not declared in schema"
        );
        let err = apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}})).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "the name of the object () does not match the name on the URL (p)")
        );
        let (created, _) = apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                        "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        .unwrap();
        assert_eq!(created["metadata"]["namespace"], "default");
    }

    /// The 415 lists kube-apiserver's patch types in its order, and nothing else.
    #[test]
    fn an_unknown_patch_type_is_415_listing_the_accepted_ones() {
        let err = PatchType::from_content_type("application/json").unwrap_err();
        assert_eq!(err.code, 415);
        assert_eq!(
            err.message,
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, \
             application/apply-patch+yaml"
        );
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8").unwrap(),
            PatchType::Merge
        );
    }
}
