//! Strategic merge patch as kube-apiserver applies it: `strategicpatch.StrategicMergeMapPatch`
//! (staging/src/k8s.io/apimachinery/pkg/util/strategicpatch/patch.go) with `MergeParallelList`
//! and `IgnoreUnmatchedNulls`, the lists' strategies and merge keys taken from the Go types'
//! `patchStrategy`/`patchMergeKey` tags (k8s.io/api/core/v1/types.go).
//!
//! What a client can see is kept: the order of merged lists (`mergeSlice` puts the patch's items
//! in the patch's order and slots the server's other items back by their old positions, so a
//! new item lands *before* them; `$setElementOrder` orders explicitly), `$retainKeys`,
//! `$deleteFromPrimitiveList`, `$patch: replace|delete`, and the errors with their status
//! codes (`interpretStrategicMergePatchError` in handlers/patch.go: 400 for the malformed
//! directives, 422 for lists of lists, and a plain 500 with Go's message for everything else,
//! such as a list item without its merge key).

use super::error::ApiError;
use serde_json::{Map, Value};

/// How a strategic merge patch treats one list field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// Replace the list (no `patchStrategy`).
    Replace,
    /// Merge elements by this key (`patchStrategy:"merge" patchMergeKey:"<key>"`).
    MergeByKey(&'static str),
    /// A list of scalars merged as a set (`patchStrategy:"merge"` on `[]string`).
    MergeSet,
}

/// The patch strategy of the list at `path` (map keys joined by `.`, list indexes left out) of a
/// `kind`, as the Go types declare it. Lists not named here are replaced.
pub(crate) fn list_strategy(kind: &str, path: &str) -> ListStrategy {
    use ListStrategy::*;
    match path {
        "metadata.ownerReferences" => return MergeByKey("uid"),
        "metadata.finalizers" => return MergeSet,
        _ => {}
    }
    match kind {
        "Pod" => pod_list_strategy(path),
        // A PodTemplate's `template` is an ObjectMeta and a PodSpec.
        "PodTemplate" => match path.strip_prefix("template.") {
            Some(rest) if rest.starts_with("spec.") || rest.starts_with("metadata.") => list_strategy("Pod", rest),
            _ => Replace,
        },
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
        "ServiceAccount" => match path {
            "secrets" => MergeByKey("name"),
            _ => Replace,
        },
        _ => Replace,
    }
}

fn pod_list_strategy(path: &str) -> ListStrategy {
    use ListStrategy::*;
    for prefix in ["spec.containers", "spec.initContainers", "spec.ephemeralContainers"] {
        if let Some(rest) = path.strip_prefix(prefix) {
            return match rest {
                "" => MergeByKey("name"),
                ".ports" => MergeByKey("containerPort"),
                ".env" => MergeByKey("name"),
                ".volumeMounts" => MergeByKey("mountPath"),
                ".volumeDevices" => MergeByKey("devicePath"),
                _ => Replace,
            };
        }
    }
    match path {
        "spec.volumes" | "spec.imagePullSecrets" | "spec.resourceClaims" | "spec.schedulingGates" => MergeByKey("name"),
        "spec.hostAliases" => MergeByKey("ip"),
        "spec.topologySpreadConstraints" => MergeByKey("topologyKey"),
        "status.conditions" => MergeByKey("type"),
        "status.podIPs" | "status.hostIPs" => MergeByKey("ip"),
        "status.resourceClaimStatuses" => MergeByKey("name"),
        _ => Replace,
    }
}

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// A plain Go error (no `Status`): kube-apiserver answers 500 without a reason.
fn plain(message: String) -> ApiError {
    ApiError::unknown(500, message)
}

fn no_merge_key(item: &Value, key: &str) -> ApiError {
    plain(format!(
        "map: {} does not contain declared merge key: {key}",
        go_value(item)
    ))
}

fn bad_patch_type(directive: &Value, map: &Map<String, Value>) -> ApiError {
    plain(format!(
        "unknown patch type: {} in map: {}",
        go_value(directive),
        go_value(&Value::Object(map.clone()))
    ))
}

/// `mergepatch.ErrBadArgType`: Go's names of the two types.
fn bad_arg_type(expected: &str, actual: &Value) -> ApiError {
    plain(format!("expected a {expected}, but received a {}", go_type(actual)))
}

/// Applies a strategic merge patch of a `kind` to `target` (the stored object).
pub fn strategic_merge(kind: &str, target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Value::Object(patch) = patch else {
        return Err(ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_type(patch)
        )));
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_map) = target else {
        unreachable!("made an object above")
    };
    merge_map(kind, "", target_map, patch.clone())
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A patch value taken as it is where the object had nothing to merge it with. Nulls go, as
/// Go's decoding into the typed object turns them into unset fields.
fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

/// `mergeMap`.
fn merge_map(
    kind: &str,
    path: &str,
    original: &mut Map<String, Value>,
    mut patch: Map<String, Value>,
) -> Result<(), ApiError> {
    if let Some(directive) = patch.get(PATCH).cloned() {
        match directive.as_str() {
            Some("replace") => {
                patch.remove(PATCH);
                *original = match without_nulls(Value::Object(patch)) {
                    Value::Object(m) => m,
                    _ => unreachable!("an object stays an object"),
                };
                return Ok(());
            }
            Some("delete") => {
                original.clear();
                return Ok(());
            }
            _ => return Err(bad_patch_type(&directive, &patch)),
        }
    }
    retain_keys(original, &mut patch)?;
    set_element_orders(kind, path, original, &mut patch)?;
    for (key, value) in patch {
        let (key, delete_list) = match key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            Some(field) => (field.to_string(), true),
            None => (key, false),
        };
        if value.is_null() {
            original.remove(&key);
            continue;
        }
        let Some(existing) = original.get_mut(&key) else {
            // Not in the object: the patch's value as it is (for a deletion list too: upstream
            // stores the list to delete).
            original.insert(key, without_nulls(value));
            continue;
        };
        let field_path = join(path, &key);
        match (existing, value) {
            (Value::Object(existing), Value::Object(sub)) => merge_map(kind, &field_path, existing, sub)?,
            (Value::Array(existing), Value::Array(items)) => {
                let current = std::mem::take(existing);
                *existing = merge_list_field(kind, &field_path, current, items, delete_list)?;
            }
            (slot, value) => *slot = without_nulls(value),
        }
    }
    Ok(())
}

/// `applyRetainKeysDirective`: the patch's keys must all be retained; the object keeps only the
/// retained keys.
fn retain_keys(original: &mut Map<String, Value>, patch: &mut Map<String, Value>) -> Result<(), ApiError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let bad = || ApiError::bad_request("invalid patch format of retainKeys");
    let Value::Array(keep) = retain else {
        return Err(bad());
    };
    for (key, value) in patch.iter() {
        if value.is_null() || key.starts_with(DELETE_FROM_PRIMITIVE_LIST) || key.starts_with(SET_ELEMENT_ORDER) {
            continue;
        }
        if !keep.contains(&Value::String(key.clone())) {
            return Err(bad());
        }
    }
    original.retain(|k, _| keep.contains(&Value::String(k.clone())));
    Ok(())
}

/// `mergePatchIntoOriginal`: each `$setElementOrder/<list>` merges its list now and orders the
/// result: the listed items in the listed order, the object's others slotted back by their old
/// positions.
fn set_element_orders(
    kind: &str,
    path: &str,
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), ApiError> {
    let directives: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for directive in directives {
        let order = patch.remove(&directive).expect("listed above");
        let Value::Array(order) = order else {
            return Err(bad_arg_type("[]interface {}", &order));
        };
        let field = directive[SET_ELEMENT_ORDER.len()..].to_string();
        let original_list = match original.get(&field) {
            None => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(other) => return Err(bad_arg_type("[]interface {}", other)),
        };
        let patch_list = match patch.remove(&field) {
            None => None,
            Some(Value::Array(items)) => Some(items),
            Some(other) => return Err(bad_arg_type("[]interface {}", &other)),
        };
        let field_path = join(path, &field);
        let merge_key = match list_strategy(kind, &field_path) {
            ListStrategy::MergeByKey(k) => Some(k),
            _ => None,
        };
        validate_set_order(patch_list.as_deref().unwrap_or_default(), &order, merge_key)?;
        let original_items = original_list.clone().unwrap_or_default();
        let patch_items = patch_list.clone().unwrap_or_default();
        let merged = match (original_list, patch_list) {
            (Some(o), None) => o,
            (None, Some(p)) => p,
            (Some(o), Some(p)) => merge_list_field(kind, &field_path, o, p, false)?,
            (None, None) => continue,
        };
        element_kind(&[&original_items, &patch_items])?;
        let (listed, others) = partition(merged, &order, merge_key)?;
        let ordered = normalize_order(listed, others, &order, &original_items, merge_key)?;
        original.insert(field, Value::Array(ordered));
    }
    Ok(())
}

/// `validatePatchWithSetOrderList`: the patch's items appear in the `$setElementOrder` list in
/// the same relative order.
fn validate_set_order(patch_list: &[Value], order: &[Value], merge_key: Option<&str>) -> Result<(), ApiError> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let mut kept = Vec::new();
    for item in patch_list {
        if merge_key.is_some() {
            if !item.is_object() {
                return Err(bad_arg_type("map[string]interface {}", item));
            }
            if item.get(PATCH).and_then(Value::as_str) == Some("delete") {
                continue;
            }
        }
        kept.push(item);
    }
    let (mut at_patch, mut at_order) = (0, 0);
    while at_patch < kept.len() && at_order < order.len() {
        if kept[at_patch].get(PATCH).is_some() {
            at_patch += 1;
            continue;
        }
        if merge_key_equal(kept[at_patch], &order[at_order], merge_key)? {
            at_patch += 1;
        }
        at_order += 1;
    }
    if at_patch < kept.len() && at_order >= order.len() {
        return Err(plain(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            go_value(&Value::Array(patch_list.to_vec())),
            go_value(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

fn merge_key_equal(left: &Value, right: &Value, merge_key: Option<&str>) -> Result<bool, ApiError> {
    let Some(key) = merge_key else {
        return Ok(left == right);
    };
    let value = |v: &Value| -> Result<Value, ApiError> {
        if !v.is_object() {
            return Err(bad_arg_type("map[string]interface {}", v));
        }
        v.get(key).cloned().ok_or_else(|| no_merge_key(v, key))
    };
    Ok(value(left)? == value(right)?)
}

/// `mergeSliceHandler`: a list merged by its field's strategy.
fn merge_list_field(
    kind: &str,
    path: &str,
    original: Vec<Value>,
    patch: Vec<Value>,
    delete_list: bool,
) -> Result<Vec<Value>, ApiError> {
    match list_strategy(kind, path) {
        ListStrategy::Replace => Ok(patch.into_iter().map(without_nulls).collect()),
        ListStrategy::MergeSet => merge_slice(kind, path, original, patch, None, delete_list),
        ListStrategy::MergeByKey(key) => merge_slice(kind, path, original, patch, Some(key), delete_list),
    }
}

/// What the elements of some lists are, Go's way: lists of lists are refused (422), and the
/// lists must hold one type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ElementKind {
    Map,
    Scalar(&'static str),
}

fn element_kind(lists: &[&[Value]]) -> Result<Option<ElementKind>, ApiError> {
    let mut seen: Option<&'static str> = None;
    for item in lists.iter().flat_map(|l| l.iter()) {
        let this = go_type(item);
        if item.is_array() && seen.is_none() {
            return Err(ApiError::generic_invalid());
        }
        match seen {
            None => seen = Some(this),
            Some(t) if t != this => {
                let rendered: Vec<String> = lists.iter().map(|l| go_value(&Value::Array(l.to_vec()))).collect();
                return Err(plain(format!(
                    "list element types are not identical: [{}]",
                    rendered.join(" ")
                )));
            }
            Some(_) => {}
        }
    }
    Ok(seen.map(|t| {
        if t == "map[string]interface {}" {
            ElementKind::Map
        } else {
            ElementKind::Scalar(t)
        }
    }))
}

/// `mergeSlice`.
fn merge_slice(
    kind: &str,
    path: &str,
    original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: Option<&'static str>,
    delete_list: bool,
) -> Result<Vec<Value>, ApiError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let Some(elements) = element_kind(&[&original, &patch])? else {
        return Ok(original);
    };
    if let ElementKind::Scalar(_) = elements {
        if delete_list {
            return Ok(original.into_iter().filter(|v| !patch.contains(v)).collect());
        }
        let mut merged: Vec<Value> = Vec::new();
        for v in original.iter().chain(patch.iter()) {
            if !merged.contains(v) {
                merged.push(v.clone());
            }
        }
        let (listed, others) = partition(merged, &patch, None)?;
        return normalize_order(listed, others, &patch, &original, None);
    }
    let Some(key) = merge_key else {
        return Err(plain("cannot merge lists without merge key for type struct".into()));
    };
    let (original, patch) = special_elements(original, patch, key)?;
    let server_order = original.clone();
    let mut merged = original;
    for item in &patch {
        let Value::Object(item_map) = item else {
            return Err(bad_arg_type("map[string]interface {}", item));
        };
        let key_value = item_map.get(key).ok_or_else(|| no_merge_key(item, key))?;
        let position = merged
            .iter()
            .position(|m| m.is_object() && m.get(key) == Some(key_value));
        match position {
            Some(i) => {
                if let Value::Object(existing) = &mut merged[i] {
                    merge_map(kind, path, existing, item_map.clone())?;
                }
            }
            None => merged.push(without_nulls(item.clone())),
        }
    }
    let (listed, others) = partition(merged, &patch, Some(key))?;
    normalize_order(listed, others, &patch, &server_order, Some(key))
}

/// `mergeSliceWithSpecialElements`: `$patch: delete` items remove their match from the object,
/// `$patch: replace` makes the patch's other items the list. Returns the object's list and the
/// patch's plain items.
fn special_elements(original: Vec<Value>, patch: Vec<Value>, key: &str) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
    let mut plain_items = Vec::new();
    let mut replace = false;
    let mut original = original;
    for item in patch {
        let Some(directive) = item.get(PATCH).cloned() else {
            plain_items.push(item);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let value = item.get(key).ok_or_else(|| no_merge_key(&item, key))?.clone();
                original.retain(|o| o.get(key) != Some(&value));
            }
            Some("replace") => replace = true,
            Some("merge") => return Err(plain("merging lists cannot yet be specified in the patch".into())),
            _ => {
                let map = item.as_object().cloned().unwrap_or_default();
                return Err(bad_patch_type(&directive, &map));
            }
        }
    }
    if replace {
        return Ok((plain_items, Vec::new()));
    }
    Ok((original, plain_items))
}

/// The identity of an item for ordering: its merge key's value, or the item itself.
fn identity<'a>(item: &'a Value, merge_key: Option<&str>) -> Option<&'a Value> {
    match merge_key {
        Some(k) => item.get(k),
        None => Some(item),
    }
}

fn index_in(list: &[Value], item: &Value, merge_key: Option<&str>) -> Option<usize> {
    let id = identity(item, merge_key);
    list.iter().position(|v| identity(v, merge_key) == id)
}

/// `partitionMapsByPresentInList`/`partitionPrimitivesByPresentInList`: the items `by` names,
/// and the others, each in their order in `items`.
fn partition(items: Vec<Value>, by: &[Value], merge_key: Option<&str>) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
    let mut listed = Vec::new();
    let mut others = Vec::new();
    for item in items {
        if let Some(key) = merge_key {
            if !item.is_object() {
                return Err(bad_arg_type("map[string]interface {}", &item));
            }
            if item.get(key).is_none() {
                return Err(no_merge_key(&item, key));
            }
        }
        if index_in(by, &item, merge_key).is_some() {
            listed.push(item);
        } else {
            others.push(item);
        }
    }
    Ok((listed, others))
}

/// `normalizeElementOrder`: the patch's items in the patch's order, the server's in theirs, then
/// merged (`mergeSortedSlice`): a server item goes before a patch item only when both were in
/// the object and it came first there; a patch item new to the object goes first.
fn normalize_order(
    mut listed: Vec<Value>,
    mut others: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: Option<&str>,
) -> Result<Vec<Value>, ApiError> {
    if let Some(key) = merge_key {
        for item in listed
            .iter()
            .chain(patch_order)
            .chain(others.iter())
            .chain(server_order)
        {
            if !item.is_object() {
                return Err(bad_arg_type("map[string]interface {}", item));
            }
            if item.get(key).is_none() {
                return Err(no_merge_key(item, key));
            }
        }
    }
    listed.sort_by_key(|v| index_in(patch_order, v, merge_key).unwrap_or(usize::MAX));
    others.sort_by_key(|v| index_in(server_order, v, merge_key).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(listed.len() + others.len());
    let mut left = others.into_iter().peekable();
    let mut right = listed.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                match (
                    index_in(server_order, l, merge_key),
                    index_in(server_order, r, merge_key),
                ) {
                    (Some(li), Some(ri)) => li < ri,
                    _ => false,
                }
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    Ok(out)
}

/// Go's name of the type a JSON value decodes to (`map[string]interface {}`, `int64`, ...).
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "%!s(<nil>)",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// JSON's name of a value's type, as Go's `json: cannot unmarshal <type>` says it.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A JSON value as Go's `%v` prints the `interface{}` it decodes to: `map[k:v ...]` with sorted
/// keys, `[a b]`, strings bare, `<nil>`.
pub fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => go_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_value).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys.iter().map(|k| format!("{k}:{}", go_value(&m[*k]))).collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// `strconv.FormatFloat(f, 'g', -1, 64)`, which `%v` uses for a float64.
fn go_float(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    let exponent = f.abs().log10().floor() as i32;
    if (-4..21).contains(&exponent) {
        format!("{f}")
    } else {
        let s = format!("{f:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(kind: &str, mut target: Value, patch: Value) -> Result<Value, ApiError> {
        strategic_merge(kind, &mut target, &patch).map(|()| target)
    }

    /// patch.go `mergeSlice`/`mergeSortedSlice`: a condition new to the object goes before the
    /// object's other conditions; one that exists is merged in place.
    #[test]
    fn a_new_keyed_item_goes_before_the_objects_others() {
        let pod = json!({"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]}});
        let merged = smp(
            "Pod",
            pod.clone(),
            json!({"status": {"conditions": [{"type": "X", "status": "True"}]}}),
        )
        .unwrap();
        let types: Vec<&str> = merged["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["X", "A", "B"]);
        let merged = smp(
            "Pod",
            pod,
            json!({"status": {"conditions": [{"type": "B", "status": "False"}, {"type": "A", "status": "False"}]}}),
        )
        .unwrap();
        assert_eq!(
            merged["status"]["conditions"],
            json!([{"type": "B", "status": "False"}, {"type": "A", "status": "False"}]),
            "the patch's order wins for the items it names"
        );
    }

    /// `$setElementOrder` orders the listed items; an item it does not list is slotted back by
    /// its old position relative to them (`mergeSortedSlice`), here before `MemoryPressure`.
    #[test]
    fn set_element_order_orders_the_merged_list() {
        let node =
            json!({"status": {"conditions": [{"type": "Ready"}, {"type": "Other"}, {"type": "MemoryPressure"}]}});
        let merged = smp(
            "Node",
            node,
            json!({"status": {
                "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
                "conditions": [{"type": "Ready", "status": "True"}],
            }}),
        )
        .unwrap();
        assert_eq!(
            merged["status"]["conditions"],
            json!([{"type": "Other"}, {"type": "MemoryPressure"}, {"type": "Ready", "status": "True"}])
        );
    }

    /// A keyed item without its merge key is a plain Go error: 500, no reason, Go's `%v` map.
    #[test]
    fn an_item_without_its_merge_key_is_a_500_with_gos_message() {
        let err = smp(
            "Pod",
            json!({"status": {"conditions": [{"type": "A"}]}}),
            json!({"status": {"conditions": [{"status": "True", "reason": "x"}]}}),
        )
        .unwrap_err();
        assert_eq!((err.code, err.reason), (500, ""));
        assert_eq!(
            err.message,
            "map: map[reason:x status:True] does not contain declared merge key: type"
        );
        // Where the object has no list yet, the patch's list is taken as it is.
        let taken = smp(
            "Pod",
            json!({"status": {}}),
            json!({"status": {"conditions": [{"status": "True"}]}}),
        )
        .unwrap();
        assert_eq!(taken["status"]["conditions"], json!([{"status": "True"}]));
    }

    /// `$retainKeys` keeps only the listed keys and refuses a patch key it does not list (400).
    #[test]
    fn retain_keys_clears_and_checks() {
        let pod = json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}});
        let merged = smp(
            "Pod",
            pod.clone(),
            json!({"spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}]}}),
        )
        .unwrap();
        assert_eq!(
            merged["spec"]["volumes"],
            json!([{"name": "v", "hostPath": {"path": "/x"}}])
        );
        let err = smp(
            "Pod",
            pod,
            json!({"spec": {"volumes": [{"name": "v", "$retainKeys": ["name"], "hostPath": {"path": "/x"}}]}}),
        )
        .unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "invalid patch format of retainKeys")
        );
    }

    /// `$patch` directives: delete and replace in lists and maps; an unknown one is a 500.
    #[test]
    fn patch_directives() {
        let node =
            json!({"metadata": {"finalizers": ["a", "c"]}, "status": {"conditions": [{"type": "X"}, {"type": "Y"}]}});
        let merged = smp(
            "Node",
            node.clone(),
            json!({
                "metadata": {"finalizers": ["b"], "$deleteFromPrimitiveList/finalizers": ["a"]},
                "status": {"conditions": [{"type": "X", "$patch": "delete"}]},
            }),
        )
        .unwrap();
        assert_eq!(merged["metadata"]["finalizers"], json!(["b", "c"]));
        assert_eq!(merged["status"]["conditions"], json!([{"type": "Y"}]));
        let replaced = smp(
            "Node",
            node.clone(),
            json!({"status": {"conditions": [{"type": "Z"}, {"$patch": "replace"}]}}),
        )
        .unwrap();
        assert_eq!(replaced["status"]["conditions"], json!([{"type": "Z"}]));
        let err = smp("Node", node, json!({"status": {"$patch": "bogus"}})).unwrap_err();
        assert_eq!(err.code, 500);
        assert_eq!(err.message, "unknown patch type: bogus in map: map[$patch:bogus]");
    }

    /// Lists without a strategy are replaced; lists of lists are a 422.
    #[test]
    fn atomic_lists_are_replaced_and_lists_of_lists_refused() {
        let pod = json!({"status": {"containerStatuses": [{"name": "a"}, {"name": "b"}]}});
        let merged = smp(
            "Pod",
            pod,
            json!({"status": {"containerStatuses": [{"name": "b", "ready": true}]}}),
        )
        .unwrap();
        assert_eq!(
            merged["status"]["containerStatuses"],
            json!([{"name": "b", "ready": true}])
        );
        let err = smp(
            "Node",
            json!({"spec": {"podCIDRs": []}}),
            json!({"spec": {"podCIDRs": [["x"]]}}),
        )
        .unwrap_err();
        assert_eq!((err.code, err.reason), (422, "Invalid"));
        let err = smp(
            "Node",
            json!({"spec": {"podCIDRs": ["10.0.0.0/24"]}}),
            json!({"spec": {"podCIDRs": [["x"]]}}),
        )
        .unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (500, "list element types are not identical: [[10.0.0.0/24] [[x]]]")
        );
    }

    /// Go's `%v` of decoded JSON.
    #[test]
    fn go_value_prints_as_go_does() {
        assert_eq!(
            go_value(&json!({"b": [1, "x", null], "a": {"c": true}, "f": 1.5})),
            "map[a:map[c:true] b:[1 x <nil>] f:1.5]"
        );
        assert_eq!(go_float(1e21), "1e+21");
    }
}
