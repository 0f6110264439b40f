//! kube-apiserver's admission chain, as far as the objects the fixture stores meet it, in
//! upstream's order (`AllOrderedPlugins` in `pkg/kubeapiserver/options/plugins.go`), mutating
//! plugins first, then validating ones:
//!
//! 1. ServiceAccount ([`crate::cluster::admit_pod`], `ApiServerConfig::service_account_admission`);
//! 2. NodeRestriction ([`crate::node_restriction`]), for requests from nodes when
//!    `ApiServerConfig::node_authorization` is on;
//! 3. Priority (`plugin/pkg/admission/priority`): a pod's `priority` and `preemptionPolicy`
//!    come from its `priorityClassName` — the built-in `system-node-critical` and
//!    `system-cluster-critical` (the fixture serves no `priorityclasses`), or 0 and
//!    `PreemptLowerPriority` without one; an unknown class or a different value set by the pod
//!    is 403; an update keeps what create set;
//! 4. DefaultTolerationSeconds (`plugin/pkg/admission/defaulttolerationseconds`): every pod
//!    tolerates `node.kubernetes.io/not-ready` and `node.kubernetes.io/unreachable`
//!    (`NoExecute`) for 300 s unless it tolerates them already;
//! 5. RuntimeClass (`plugin/pkg/admission/runtimeclass`): the class must exist; its
//!    `overhead.podFixed` becomes `spec.overhead`, its `scheduling` joins the pod's
//!    `nodeSelector` and tolerations; an overhead without the class's is 403.
//!
//! Then the API validation of mirror pods (`ValidatePodSpecificAnnotationUpdates`,
//! `ValidatePodEphemeralContainersUpdate` in `pkg/apis/core/validation/validation.go`): the
//! `kubernetes.io/config.mirror` annotation is never added, changed or removed by an update,
//! and static pods take no ephemeral containers.

use super::cluster;
use super::error::{ApiError, Cause};
use super::lookup::{Lookup, Subresource};
use super::node_restriction;
use super::resources::{self, ResourceInfo};
use serde_json::{json, Value};

/// `scheduling.SystemClusterCritical`'s value (`SystemCriticalPriority`).
pub const SYSTEM_CLUSTER_CRITICAL: i64 = 2_000_000_000;

/// `scheduling.SystemNodeCritical`'s value.
pub const SYSTEM_NODE_CRITICAL: i64 = SYSTEM_CLUSTER_CRITICAL + 1000;

/// `defaultNotReadyTolerationSeconds` and `defaultUnreachableTolerationSeconds` (the
/// `--default-not-ready-toleration-seconds` and `--default-unreachable-toleration-seconds`
/// defaults).
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The taints the node lifecycle controller puts on a node that is not ready or unreachable.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
/// See [`NOT_READY_TAINT`].
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// Who creates an object, under which names.
#[derive(Debug, Clone, Copy)]
pub struct CreateRequest<'a> {
    /// The namespace (empty for cluster-scoped objects).
    pub ns: &'a str,
    /// `metadata.name` as sent (empty with `generateName`).
    pub name: &'a str,
    /// The name refusals carry: the name, else the `generateName`.
    pub admission_name: &'a str,
    /// The requesting node, when NodeRestriction applies.
    pub node: Option<&'a str>,
    /// Whether the ServiceAccount plugin runs.
    pub service_accounts: bool,
}

fn forbidden(name: &str, why: String) -> ApiError {
    ApiError::forbidden("pods", name, &why)
}

fn is_mirror(pod: &Value) -> bool {
    pod["metadata"]["annotations"]
        .get(dockerlet_pod::annotations::CONFIG_MIRROR)
        .is_some()
}

/// The admission chain on an object being created (after decoding and defaults, before
/// validation). `suffix` names the kube-api-access volume.
pub fn admit_create(
    store: &dyn Lookup,
    resource: &'static ResourceInfo,
    request: &CreateRequest<'_>,
    obj: &mut Value,
    suffix: &str,
) -> Result<(), ApiError> {
    let pod = resource.kind == "Pod";
    if pod && request.service_accounts {
        cluster::admit_pod(store, request.ns, request.admission_name, obj, suffix)?;
    }
    if let Some(node) = request.node {
        node_restriction::admit_create(
            store,
            node,
            resource,
            request.ns,
            request.name,
            request.admission_name,
            obj,
        )?;
    }
    if pod {
        admit_priority(request.admission_name, obj)?;
        default_toleration_seconds(obj);
        admit_runtime_class(store, request.admission_name, obj)?;
        validate_overhead(store, request.admission_name, obj)?;
    }
    Ok(())
}

/// The admission chain on an update of `old` to `new` through `sub` (after defaults, before
/// validation), and the mirror pods' ephemeral containers rule.
pub fn admit_update(
    resource: &'static ResourceInfo,
    sub: Subresource,
    old: &Value,
    new: &mut Value,
    node: Option<&str>,
) -> Result<(), ApiError> {
    if let Some(node) = node {
        node_restriction::admit_update(node, resource, sub, old, new)?;
    }
    if resource.kind != "Pod" {
        return Ok(());
    }
    match sub {
        Subresource::Main => {
            // Priority: what create set stays when an update leaves it out.
            for field in ["priority", "preemptionPolicy"] {
                if new["spec"][field].is_null() && !old["spec"][field].is_null() {
                    new["spec"][field] = old["spec"][field].clone();
                }
            }
            default_toleration_seconds(new);
        }
        Subresource::EphemeralContainers if is_mirror(old) => {
            let name = old["metadata"]["name"].as_str().unwrap_or_default();
            return Err(ApiError::invalid(
                "Pod",
                name,
                vec![Cause::forbidden(
                    "[]",
                    "static pods do not support ephemeral containers",
                )],
            ));
        }
        _ => {}
    }
    Ok(())
}

/// `ValidatePodSpecificAnnotationUpdates` for the mirror pod annotation: an update may not add,
/// change or remove it.
pub fn mirror_annotation_causes(new: &Value, old: &Value) -> Vec<Cause> {
    let key = dockerlet_pod::annotations::CONFIG_MIRROR;
    let field = format!("metadata.annotations[{key}]");
    match (
        old["metadata"]["annotations"].get(key),
        new["metadata"]["annotations"].get(key),
    ) {
        (Some(before), after) if after != Some(before) => {
            vec![Cause::forbidden(
                field,
                "may not remove or update mirror pod annotation",
            )]
        }
        (None, Some(_)) => vec![Cause::forbidden(field, "may not add mirror pod annotation")],
        _ => Vec::new(),
    }
}

/// The built-in PriorityClasses (`scheduling.SystemPriorityClasses()`), value and preemption.
fn priority_class(name: &str) -> Option<i64> {
    match name {
        "system-node-critical" => Some(SYSTEM_NODE_CRITICAL),
        "system-cluster-critical" => Some(SYSTEM_CLUSTER_CRITICAL),
        _ => None,
    }
}

/// The Priority plugin on a pod being created.
fn admit_priority(name: &str, pod: &mut Value) -> Result<(), ApiError> {
    let spec = &mut pod["spec"];
    let class = spec["priorityClassName"].as_str().unwrap_or_default().to_string();
    // No global default class exists: 0 and PreemptLowerPriority. The built-in classes are
    // PreemptLowerPriority too (the PriorityClass default).
    let priority = if class.is_empty() {
        0
    } else {
        priority_class(&class)
            .ok_or_else(|| forbidden(name, format!("no PriorityClass with name {class} was found")))?
    };
    if let Some(given) = spec["priority"].as_i64().filter(|p| *p != priority) {
        return Err(forbidden(
            name,
            format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission \
                 controller computed {priority} from the given PriorityClass name"
            ),
        ));
    }
    spec["priority"] = json!(priority);
    let policy = "PreemptLowerPriority";
    if let Some(given) = spec["preemptionPolicy"].as_str().filter(|p| *p != policy) {
        return Err(forbidden(
            name,
            format!(
                "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority \
                 admission controller computed {policy} from the given PriorityClass name"
            ),
        ));
    }
    spec["preemptionPolicy"] = json!(policy);
    Ok(())
}

/// DefaultTolerationSeconds: the not-ready and unreachable `NoExecute` tolerations for 300 s,
/// unless the pod has a toleration for each already (an empty key or effect matches any).
fn default_toleration_seconds(pod: &mut Value) {
    let tolerates = |pod: &Value, key: &str| {
        pod["spec"]["tolerations"].as_array().into_iter().flatten().any(|t| {
            let t_key = t["key"].as_str().unwrap_or_default();
            let effect = t["effect"].as_str().unwrap_or_default();
            (t_key == key || t_key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        })
    };
    for key in [NOT_READY_TAINT, UNREACHABLE_TAINT] {
        if tolerates(pod, key) {
            continue;
        }
        let toleration = json!({
            "key": key,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
        });
        match pod["spec"]["tolerations"].as_array_mut() {
            Some(list) => list.push(toleration),
            None => pod["spec"]["tolerations"] = json!([toleration]),
        }
    }
}

/// Semantic equality of two resource lists (`apiequality.Semantic`: quantities by value).
fn same_resources(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let value = |v: &Value| v.as_str().and_then(dockerlet_pod::quantity::quantity_value);
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| value(v).is_some() && value(v) == value(w)))
}

fn runtime_class(store: &dyn Lookup, name: &str, pod: &Value) -> Result<Option<Value>, ApiError> {
    let Some(class_name) = pod["spec"]["runtimeClassName"].as_str() else {
        return Ok(None);
    };
    let resource = resources::by_name("runtimeclasses").expect("runtimeclasses are served");
    store
        .get(resource, "", class_name)
        .map(Some)
        .map_err(|_| forbidden(name, format!("pod rejected: RuntimeClass \"{class_name}\" not found")))
}

/// The RuntimeClass plugin's `Admit`: the class must exist; `setOverhead` and `setScheduling`.
fn admit_runtime_class(store: &dyn Lookup, name: &str, pod: &mut Value) -> Result<(), ApiError> {
    let Some(class) = runtime_class(store, name, pod)? else {
        return Ok(());
    };
    let fixed = &class["overhead"]["podFixed"];
    if fixed.is_object() {
        let set = pod["spec"]["overhead"].as_object().is_some_and(|o| !o.is_empty());
        if set && !same_resources(fixed, &pod["spec"]["overhead"]) {
            return Err(forbidden(
                name,
                "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead".into(),
            ));
        }
        pod["spec"]["overhead"] = fixed.clone();
    }
    let scheduling = &class["scheduling"];
    if scheduling.is_null() {
        return Ok(());
    }
    for (key, value) in scheduling["nodeSelector"].as_object().into_iter().flatten() {
        match pod["spec"]["nodeSelector"].get(key) {
            Some(existing) if existing != value => {
                return Err(forbidden(
                    name,
                    format!(
                        "conflict: runtimeClass.scheduling.nodeSelector[{key}] = {}; pod.spec.nodeSelector[{key}] = {}",
                        value.as_str().unwrap_or_default(),
                        existing.as_str().unwrap_or_default()
                    ),
                ));
            }
            _ => pod["spec"]["nodeSelector"][key] = value.clone(),
        }
    }
    let mut all: Vec<Value> = pod["spec"]["tolerations"].as_array().cloned().unwrap_or_default();
    all.extend(scheduling["tolerations"].as_array().cloned().unwrap_or_default());
    if !all.is_empty() {
        pod["spec"]["tolerations"] = json!(merge_tolerations(&all));
    }
    Ok(())
}

/// The RuntimeClass plugin's `Validate`: an overhead is the class's, and only with a class
/// that defines one.
fn validate_overhead(store: &dyn Lookup, name: &str, pod: &Value) -> Result<(), ApiError> {
    let overhead = &pod["spec"]["overhead"];
    if overhead.as_object().is_none_or(|o| o.is_empty()) {
        return Ok(());
    }
    let class = runtime_class(store, name, pod)?;
    match class
        .as_ref()
        .map(|c| &c["overhead"]["podFixed"])
        .filter(|f| f.is_object())
    {
        Some(fixed) if !same_resources(fixed, overhead) => Err(forbidden(
            name,
            "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead".into(),
        )),
        Some(_) => Ok(()),
        None => Err(forbidden(
            name,
            "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead".into(),
        )),
    }
}

/// `tolerations.MergeTolerations` (`pkg/util/tolerations`): the list without the tolerations
/// another one covers (the first of equal ones stays).
fn merge_tolerations(all: &[Value]) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::new();
    for (i, t) in all.iter().enumerate() {
        if merged.iter().any(|kept| is_superset(kept, t)) {
            continue;
        }
        if all[i + 1..].iter().any(|later| later != t && is_superset(later, t)) {
            continue;
        }
        merged.push(t.clone());
    }
    merged
}

/// Whether toleration `ss` tolerates everything `t` does (`isSuperset`).
fn is_superset(ss: &Value, t: &Value) -> bool {
    if ss == t {
        return true;
    }
    let s = |v: &Value, f: &str| v[f].as_str().unwrap_or_default().to_string();
    let ss_operator = s(ss, "operator");
    if s(t, "key") != s(ss, "key") && (!s(ss, "key").is_empty() || ss_operator != "Exists") {
        return false;
    }
    if s(t, "effect") != s(ss, "effect") && !s(ss, "effect").is_empty() {
        return false;
    }
    if s(ss, "effect") == "NoExecute" {
        if let Some(limit) = ss["tolerationSeconds"].as_i64() {
            match t["tolerationSeconds"].as_i64() {
                Some(seconds) if seconds <= limit => {}
                _ => return false,
            }
        }
    }
    match ss_operator.as_str() {
        "Equal" | "" => s(t, "operator") == "Equal" && s(t, "value") == s(ss, "value"),
        "Exists" => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MergeTolerations: a toleration another covers goes; equal ones are kept once.
    #[test]
    fn merged_tolerations_drop_the_covered_ones() {
        let exists_all = json!({"operator": "Exists"});
        let a = json!({"key": "a", "operator": "Equal", "value": "1", "effect": "NoSchedule"});
        let a_any = json!({"key": "a", "operator": "Exists"});
        let b = json!({"key": "b", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10});
        let b_longer = json!({"key": "b", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60});
        assert_eq!(merge_tolerations(&[a.clone(), a_any.clone()]), vec![a_any.clone()]);
        assert_eq!(merge_tolerations(&[a.clone(), a.clone()]), vec![a.clone()]);
        assert_eq!(merge_tolerations(&[b.clone(), b_longer.clone()]), vec![b_longer]);
        assert_eq!(merge_tolerations(&[a, b, exists_all.clone()]), vec![exists_all]);
    }

    /// Quantities compare by value, as apiequality.Semantic compares them.
    #[test]
    fn overheads_compare_by_quantity() {
        assert!(same_resources(&json!({"cpu": "100m"}), &json!({"cpu": "0.1"})));
        assert!(!same_resources(&json!({"cpu": "100m"}), &json!({"cpu": "200m"})));
        assert!(!same_resources(
            &json!({"cpu": "100m"}),
            &json!({"cpu": "100m", "memory": "1Mi"})
        ));
    }
}
