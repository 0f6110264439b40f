//! The four patch types kube-apiserver accepts: JSON merge patch (RFC 7386), strategic merge
//! patch (lists merged by the keys the Go types declare), JSON patch (RFC 6902) and server-side
//! apply (treated as a strategic merge that may create).

use super::error::ApiError;
use serde_json::{Map, Value};

/// A PATCH request's content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/json-patch+json`.
    Json,
    /// `application/apply-patch+yaml` (also `+cbor` is not accepted).
    Apply,
}

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
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, \
                 application/strategic-merge-patch+json (got \"{media}\")"
            ))),
        }
    }
}

/// How a strategic merge patch treats one list field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    /// Replace the list (no `patchStrategy`, or `+listType=atomic`).
    Replace,
    /// Merge elements by this key (`patchStrategy:"merge" patchMergeKey:"<key>"`).
    MergeByKey(&'static str),
    /// A list of scalars merged as a set (`patchStrategy:"merge"` on `[]string`).
    MergeSet,
}

/// The patch strategy of the list at `path` (map keys joined by `.`, list indexes left out) of a
/// `kind`, as the Kubernetes Go types declare it. Lists not named here are replaced.
fn list_strategy(kind: &str, path: &str) -> ListStrategy {
    use ListStrategy::*;
    match path {
        "metadata.ownerReferences" => return MergeByKey("uid"),
        "metadata.finalizers" => return MergeSet,
        _ => {}
    }
    let container_lists = |p: &str| -> Option<ListStrategy> {
        for prefix in ["spec.containers", "spec.initContainers", "spec.ephemeralContainers"] {
            if let Some(rest) = p.strip_prefix(prefix) {
                return match rest {
                    "" => Some(MergeByKey("name")),
                    ".ports" => Some(MergeByKey("containerPort")),
                    ".env" => Some(MergeByKey("name")),
                    ".volumeMounts" => Some(MergeByKey("mountPath")),
                    ".volumeDevices" => Some(MergeByKey("devicePath")),
                    _ => None,
                };
            }
        }
        None
    };
    match kind {
        "Pod" => {
            if let Some(s) = container_lists(path) {
                return s;
            }
            match path {
                "spec.volumes" | "spec.imagePullSecrets" | "spec.resourceClaims" | "spec.schedulingGates" => {
                    MergeByKey("name")
                }
                "spec.hostAliases" => MergeByKey("ip"),
                "spec.topologySpreadConstraints" => MergeByKey("topologyKey"),
                "status.conditions" => MergeByKey("type"),
                "status.podIPs" | "status.hostIPs" => MergeByKey("ip"),
                "status.resourceClaimStatuses" => MergeByKey("name"),
                _ => Replace,
            }
        }
        "Node" => match path {
            "spec.podCIDRs" => MergeSet,
            "status.conditions" | "status.addresses" => MergeByKey("type"),
            _ => Replace,
        },
        "Namespace" => match path {
            "status.conditions" => MergeByKey("type"),
            _ => Replace,
        },
        "Service" => match path {
            "spec.ports" => MergeByKey("port"),
            "status.conditions" => MergeByKey("type"),
            _ => Replace,
        },
        _ => Replace,
    }
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// RFC 6902 JSON patch.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| {
        ApiError::bad_request(format!(
            "the server rejected our request due to an error in our request: {e}"
        ))
    })?;
    json_patch::patch(target, &ops).map_err(|e| ApiError::with_code(422, e.to_string()))
}

/// Strategic merge patch of a `kind`.
pub fn strategic_merge(kind: &str, target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Value::Object(patch) = patch else {
        return Err(ApiError::bad_request("strategic merge patch must be a JSON object"));
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_map) = target else {
        unreachable!()
    };
    merge_map(kind, "", target_map, patch)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn is_directive(key: &str) -> bool {
    key.starts_with('$')
}

/// A patch value with every `$`-directive removed (what lands in the object when the target had
/// nothing to merge into).
fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !is_directive(k))
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .map(strip_directives)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge_map(
    kind: &str,
    path: &str,
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<(), ApiError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let Value::Object(replaced) = strip_directives(&Value::Object(patch.clone())) else {
                unreachable!()
            };
            *target = replaced;
            return Ok(());
        }
        Some("delete") => {
            target.clear();
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => return Err(ApiError::bad_request(format!("unknown patch type: {other}"))),
    }
    for (key, value) in patch {
        if is_directive(key) {
            continue;
        }
        let field_path = join(path, key);
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(sub) => {
                if sub.get("$patch").and_then(Value::as_str) == Some("delete") {
                    target.remove(key);
                    continue;
                }
                match target.get_mut(key) {
                    Some(Value::Object(existing)) => merge_map(kind, &field_path, existing, sub)?,
                    _ => {
                        target.insert(key.clone(), strip_directives(value));
                    }
                }
            }
            Value::Array(items) => {
                let strategy = list_strategy(kind, &field_path);
                match (strategy, target.get_mut(key)) {
                    (ListStrategy::MergeByKey(merge_key), Some(Value::Array(existing))) => {
                        merge_list_by_key(kind, &field_path, existing, items, merge_key)?
                    }
                    (ListStrategy::MergeSet, Some(Value::Array(existing))) => {
                        for item in items {
                            if !existing.contains(item) {
                                existing.push(item.clone());
                            }
                        }
                    }
                    (ListStrategy::MergeByKey(merge_key), _) => {
                        if let Some(bad) = items
                            .iter()
                            .find(|i| i.is_object() && i.get(merge_key).is_none() && i.get("$patch").is_none())
                        {
                            return Err(missing_merge_key(bad, merge_key));
                        }
                        target.insert(key.clone(), strip_directives(value));
                    }
                    _ => {
                        target.insert(key.clone(), strip_directives(value));
                    }
                }
            }
            scalar => {
                target.insert(key.clone(), scalar.clone());
            }
        }
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let remove = value.as_array().cloned().unwrap_or_default();
            if let Some(Value::Array(items)) = target.get_mut(field) {
                items.retain(|i| !remove.contains(i));
            }
        }
    }
    // `$setElementOrder/<list>`: the patch's order of the merged list.
    for (key, order) in patch {
        let Some(field) = key.strip_prefix("$setElementOrder/") else {
            continue;
        };
        let (Some(Value::Array(order)), Some(Value::Array(existing))) = (Some(order), target.get_mut(field)) else {
            continue;
        };
        let merge_key = match list_strategy(kind, &join(path, field)) {
            ListStrategy::MergeByKey(k) => Some(k),
            _ => None,
        };
        let id = |v: &Value| -> Value {
            match merge_key {
                Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
                None => v.clone(),
            }
        };
        let mut ordered = Vec::with_capacity(existing.len());
        for wanted in order {
            let wanted = id(wanted);
            if let Some(pos) = existing.iter().position(|e| id(e) == wanted) {
                ordered.push(existing.remove(pos));
            }
        }
        ordered.append(existing);
        *existing = ordered;
    }
    if let Some(Value::Array(retain)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        target.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(())
}

fn missing_merge_key(item: &Value, merge_key: &str) -> ApiError {
    ApiError::bad_request(format!("map: {item} does not contain declared merge key: {merge_key}"))
}

fn merge_list_by_key(
    kind: &str,
    path: &str,
    target: &mut Vec<Value>,
    patch: &[Value],
    merge_key: &str,
) -> Result<(), ApiError> {
    if patch
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *target = patch
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .map(strip_directives)
            .collect();
        return Ok(());
    }
    for item in patch {
        let Value::Object(item_map) = item else {
            if !target.contains(item) {
                target.push(item.clone());
            }
            continue;
        };
        let Some(key_value) = item_map.get(merge_key) else {
            return Err(missing_merge_key(item, merge_key));
        };
        let position = target.iter().position(|t| t.get(merge_key) == Some(key_value));
        if item_map.get("$patch").and_then(Value::as_str) == Some("delete") {
            target.retain(|t| t.get(merge_key) != Some(key_value));
            continue;
        }
        match position {
            Some(pos) => {
                if let Value::Object(existing) = &mut target[pos] {
                    merge_map(kind, path, existing, item_map)?;
                }
            }
            None => target.push(strip_directives(item)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Conditions merge by type, containerStatuses are replaced whole (they are atomic).
    #[test]
    fn strategic_merge_pod_status() {
        let mut pod = json!({"status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "Initialized", "status": "True"}],
            "containerStatuses": [{"name": "a", "ready": false}, {"name": "b", "ready": false}],
        }});
        let patch = json!({"status": {
            "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "a", "ready": true}],
        }});
        strategic_merge("Pod", &mut pod, &patch).unwrap();
        assert_eq!(
            pod["status"]["conditions"],
            json!([{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}])
        );
        assert_eq!(
            pod["status"]["containerStatuses"],
            json!([{"name": "a", "ready": true}])
        );
    }

    /// `$patch: delete` removes one keyed element; finalizers merge as a set.
    #[test]
    fn strategic_merge_directives() {
        let mut node =
            json!({"metadata": {"finalizers": ["a"]}, "status": {"conditions": [{"type": "X"}, {"type": "Y"}]}});
        let patch = json!({
            "metadata": {"finalizers": ["b"], "$deleteFromPrimitiveList/finalizers": ["a"]},
            "status": {"conditions": [{"type": "X", "$patch": "delete"}]},
        });
        strategic_merge("Node", &mut node, &patch).unwrap();
        assert_eq!(node["metadata"]["finalizers"], json!(["b"]));
        assert_eq!(node["status"]["conditions"], json!([{"type": "Y"}]));
    }
}
