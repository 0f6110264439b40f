//! The NodeRestriction admission plugin (`plugin/pkg/admission/noderestriction/admission.go`),
//! which kubeadm enables: what the Node authorizer lets every node do, this limits to the node's
//! own objects. For requests from a node (see [`crate::node_authorizer`]) only:
//!
//! - pods: a node creates only mirror pods bound to itself, owned by its Node (one controller
//!   owner reference with the Node's UID, no `blockOwnerDeletion`) and naming no service
//!   account, secret, configmap, persistent volume claim or cluster trust bundle; it deletes
//!   and writes the status of only pods bound to itself, and a status write may not change
//!   labels; it does not update pods;
//! - nodes: a node changes only its own Node, never its taints (after create) nor labels in
//!   the `kubernetes.io`/`k8s.io` namespaces other than kubelet's (`node-restriction.kubernetes.io`
//!   never);
//! - leases: only its own, in `kube-node-lease`;
//! - TokenRequests: only bound to a pod (with its UID) that is bound to the node.
//!
//! Refusals are `admission.NewForbidden`: `<resource> "<name>" is forbidden: <why>`.

use super::error::ApiError;
use super::lookup::{Lookup, Subresource};
use super::node_authorizer::{config_map_names, forbidden_error, secret_names, NODE_LEASE_NAMESPACE};
use super::resources::{self, ResourceInfo};
use serde_json::Value;
use std::collections::BTreeSet;

/// Labels kubelets may set on their Node (`kubeletLabels` in
/// `staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go`).
const KUBELET_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// Label namespaces kubelets may set (`kubeletLabelNamespaces`), with their subdomains.
const KUBELET_LABEL_NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];

/// The namespace no kubelet may set labels in (`v1.LabelNamespaceNodeRestriction`).
const NODE_RESTRICTION_NAMESPACE: &str = "node-restriction.kubernetes.io";

fn forbid(resource: &ResourceInfo, name: &str, why: String) -> ApiError {
    forbidden_error(resource.group, resource.plural, name, &why)
}

fn is_in(namespace: &str, domain: &str) -> bool {
    namespace == domain || namespace.ends_with(&format!(".{domain}"))
}

/// `IsKubeletLabel`.
pub fn is_kubelet_label(key: &str) -> bool {
    let namespace = key.split_once('/').map(|(ns, _)| ns).unwrap_or_default();
    KUBELET_LABELS.contains(&key) || KUBELET_LABEL_NAMESPACES.iter().any(|d| is_in(namespace, d))
}

/// `getForbiddenLabels` of the labels that differ between `new` and `old`.
fn forbidden_labels(new: &Value, old: Option<&Value>) -> Vec<String> {
    let labels = |obj: Option<&Value>| {
        obj.and_then(|o| o["metadata"]["labels"].as_object().cloned())
            .unwrap_or_default()
    };
    let (a, b) = (labels(Some(new)), labels(old));
    let modified: BTreeSet<&String> = a
        .iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .chain(b.iter().filter(|(k, v)| a.get(*k) != Some(v)))
        .map(|(k, _)| k)
        .collect();
    modified
        .into_iter()
        .filter(|key| {
            let namespace = key.split_once('/').map(|(ns, _)| ns).unwrap_or_default();
            let kubernetes = is_in(namespace, "kubernetes.io") || is_in(namespace, "k8s.io");
            is_in(namespace, NODE_RESTRICTION_NAMESPACE) || (kubernetes && !is_kubelet_label(key))
        })
        .cloned()
        .collect()
}

/// Semantic equality of two lists, a missing one being empty (`apiequality.Semantic`).
fn same_list(a: &Value, b: &Value) -> bool {
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    list(a) == list(b)
}

fn is_mirror(pod: &Value) -> bool {
    pod["metadata"]["annotations"]
        .get(dockerlet_pod::annotations::CONFIG_MIRROR)
        .is_some()
}

/// Admission of an object `node` creates: `name` is the object's name (empty with
/// `generateName`), `admission_name` the name refusals carry.
pub fn admit_create(
    store: &dyn Lookup,
    node: &str,
    resource: &'static ResourceInfo,
    ns: &str,
    name: &str,
    admission_name: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    match (resource.group, resource.plural) {
        ("", "pods") => admit_pod_create(store, node, resource, admission_name, obj),
        ("", "nodes") => {
            if name != node {
                return Err(forbid(
                    resource,
                    admission_name,
                    format!("node {node:?} is not allowed to modify node {name:?}"),
                ));
            }
            if !obj["spec"]["configSource"].is_null() {
                return Err(forbid(
                    resource,
                    name,
                    format!("node {node:?} is not allowed to create pods with a non-nil configSource"),
                ));
            }
            let labels = forbidden_labels(obj, None);
            if !labels.is_empty() {
                return Err(forbid(
                    resource,
                    name,
                    format!(
                        "node {node:?} is not allowed to set the following labels: {}",
                        labels.join(", ")
                    ),
                ));
            }
            Ok(())
        }
        ("coordination.k8s.io", "leases") => admit_lease(node, resource, ns, name, admission_name),
        _ => Ok(()),
    }
}

fn admit_pod_create(
    store: &dyn Lookup,
    node: &str,
    resource: &ResourceInfo,
    name: &str,
    pod: &Value,
) -> Result<(), ApiError> {
    let no = |why: String| Err(forbid(resource, name, why));
    if !is_mirror(pod) {
        return no(format!(
            "pod does not have {:?} annotation, node {node:?} can only create mirror pods",
            dockerlet_pod::annotations::CONFIG_MIRROR
        ));
    }
    let spec = &pod["spec"];
    if spec["nodeName"].as_str().unwrap_or_default() != node {
        return no(format!(
            "node {node:?} can only create pods with spec.nodeName set to itself"
        ));
    }
    let owners = pod["metadata"]["ownerReferences"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    match owners.as_slice() {
        [] => {
            return no(format!(
                "node {node:?} can only create pods with an owner reference set to itself"
            ))
        }
        [owner] => {
            if owner["apiVersion"] != "v1" || owner["kind"] != "Node" || owner["name"].as_str() != Some(node) {
                return no(format!(
                    "node {node:?} can only create pods with an owner reference set to itself"
                ));
            }
            if owner["controller"] != true {
                return no(format!(
                    "node {node:?} can only create pods with a controller owner reference set to itself"
                ));
            }
            if owner["blockOwnerDeletion"] == true {
                return no(format!(
                    "node {node:?} must not set blockOwnerDeletion on an owner reference"
                ));
            }
            let nodes = resources::by_name("nodes").expect("nodes are served");
            let stored = store.get(nodes, "", node)?;
            let (want, have) = (
                owner["uid"].as_str().unwrap_or_default(),
                stored["metadata"]["uid"].as_str().unwrap_or_default(),
            );
            if want != have {
                return no(format!("node {node} UID mismatch: expected {want} got {have}"));
            }
        }
        _ => {
            return no(format!(
                "node {node:?} can only create pods with a single owner reference set to itself"
            ))
        }
    }
    if !spec["serviceAccountName"].as_str().unwrap_or_default().is_empty() {
        return no(format!(
            "node {node:?} can not create pods that reference a service account"
        ));
    }
    if !secret_names(spec).is_empty() {
        return no(format!("node {node:?} can not create pods that reference secrets"));
    }
    if !config_map_names(spec).is_empty() {
        return no(format!("node {node:?} can not create pods that reference configmaps"));
    }
    let volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    let trust_bundle = volumes.iter().any(|v| {
        v["projected"]["sources"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| !s["clusterTrustBundle"].is_null())
    });
    if trust_bundle {
        return no(format!(
            "node {node:?} can not create pods that reference clustertrustbundles"
        ));
    }
    if volumes.iter().any(|v| !v["persistentVolumeClaim"].is_null()) {
        return no(format!(
            "node {node:?} can not create pods that reference persistentvolumeclaims"
        ));
    }
    Ok(())
}

fn admit_lease(
    node: &str,
    resource: &ResourceInfo,
    ns: &str,
    name: &str,
    admission_name: &str,
) -> Result<(), ApiError> {
    if ns != NODE_LEASE_NAMESPACE {
        return Err(forbid(
            resource,
            admission_name,
            format!("can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace"),
        ));
    }
    if name != node {
        return Err(forbid(
            resource,
            admission_name,
            "can only access node lease with the same name as the requesting node".into(),
        ));
    }
    Ok(())
}

/// Admission of `node`'s update (PUT or PATCH) of `old` to `new` through `sub`.
pub fn admit_update(
    node: &str,
    resource: &'static ResourceInfo,
    sub: Subresource,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    let name = old["metadata"]["name"].as_str().unwrap_or_default();
    let ns = old["metadata"]["namespace"].as_str().unwrap_or_default();
    match (resource.group, resource.plural) {
        ("", "pods") => match sub {
            Subresource::Main => Err(forbid(
                resource,
                name,
                format!("unexpected operation \"UPDATE\", node {node:?} can only create and delete mirror pods"),
            )),
            Subresource::Status => {
                if old["spec"]["nodeName"].as_str().unwrap_or_default() != node {
                    return Err(forbid(
                        resource,
                        name,
                        format!("node {node:?} can only update pod status for pods with spec.nodeName set to itself"),
                    ));
                }
                let labels = |p: &Value| p["metadata"]["labels"].as_object().cloned().unwrap_or_default();
                if labels(old) != labels(new) {
                    return Err(forbid(
                        resource,
                        name,
                        format!("node {node:?} cannot update labels through pod status"),
                    ));
                }
                if !same_list(
                    &old["status"]["resourceClaimStatuses"],
                    &new["status"]["resourceClaimStatuses"],
                ) {
                    return Err(forbid(
                        resource,
                        name,
                        format!("node {node:?} cannot update resource claim statues"),
                    ));
                }
                Ok(())
            }
            Subresource::EphemeralContainers => Err(forbid(
                resource,
                name,
                "unexpected pod subresource \"ephemeralcontainers\", only 'status' and 'eviction' are allowed".into(),
            )),
            // Pods have no approval subresource (the router never sends one).
            Subresource::Approval => Err(forbid(
                resource,
                name,
                "unexpected pod subresource \"approval\", only 'status' and 'eviction' are allowed".into(),
            )),
        },
        ("", "nodes") => {
            if name != node {
                return Err(forbid(
                    resource,
                    name,
                    format!("node {node:?} is not allowed to modify node {name:?}"),
                ));
            }
            let source = &new["spec"]["configSource"];
            if !source.is_null() && *source != old["spec"]["configSource"] {
                return Err(forbid(
                    resource,
                    name,
                    format!("node {node:?} is not allowed to update configSource to a new non-nil configSource"),
                ));
            }
            if !same_list(&new["spec"]["taints"], &old["spec"]["taints"]) {
                return Err(forbid(
                    resource,
                    name,
                    format!("node {node:?} is not allowed to modify taints"),
                ));
            }
            let labels = forbidden_labels(new, Some(old));
            if !labels.is_empty() {
                // Upstream's words: this one message does not name the node.
                return Err(forbid(
                    resource,
                    name,
                    format!("is not allowed to modify labels: {}", labels.join(", ")),
                ));
            }
            Ok(())
        }
        ("coordination.k8s.io", "leases") => admit_lease(node, resource, ns, name, name),
        _ => Ok(()),
    }
}

/// Admission of `node`'s delete of the stored `old`.
pub fn admit_delete(node: &str, resource: &'static ResourceInfo, old: &Value) -> Result<(), ApiError> {
    let name = old["metadata"]["name"].as_str().unwrap_or_default();
    let ns = old["metadata"]["namespace"].as_str().unwrap_or_default();
    match (resource.group, resource.plural) {
        ("", "pods") if old["spec"]["nodeName"].as_str().unwrap_or_default() != node => Err(forbid(
            resource,
            name,
            format!("node {node:?} can only delete pods with spec.nodeName set to itself"),
        )),
        ("", "nodes") if name != node => Err(forbid(
            resource,
            name,
            format!("node {node:?} is not allowed to modify node {name:?}"),
        )),
        ("coordination.k8s.io", "leases") => admit_lease(node, resource, ns, name, name),
        _ => Ok(()),
    }
}

/// Admission of `node`'s TokenRequest for the service account `account` in `ns`: bound to a
/// pod, with its UID, that is bound to the node.
pub fn admit_token_request(
    store: &dyn Lookup,
    node: &str,
    ns: &str,
    account: &str,
    request: &Value,
) -> Result<(), ApiError> {
    let accounts = resources::by_name("serviceaccounts").expect("served");
    let no = |why: String| Err(forbid(accounts, account, why));
    let reference = &request["spec"]["boundObjectRef"];
    let ref_name = reference["name"].as_str().unwrap_or_default();
    if reference["apiVersion"] != "v1" || reference["kind"] != "Pod" || ref_name.is_empty() {
        return no("node requested token not bound to a pod".into());
    }
    let ref_uid = reference["uid"].as_str().unwrap_or_default();
    if ref_uid.is_empty() {
        return no("node requested token with a pod binding without a uid".into());
    }
    let pods = resources::by_name("pods").expect("served");
    let pod = store.get(pods, ns, ref_name)?;
    if pod["metadata"]["uid"].as_str() != Some(ref_uid) {
        return no(format!(
            "the UID in the bound object reference ({ref_uid}) does not match the UID in record. The object might \
             have been deleted and then recreated"
        ));
    }
    if pod["spec"]["nodeName"].as_str() != Some(node) {
        return no("node requested token bound to a pod scheduled on a different node".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// IsKubeletLabel and getForbiddenLabels: kubelet's labels and namespaces pass, other
    /// kubernetes.io/k8s.io labels and node-restriction.kubernetes.io do not, others are free.
    #[test]
    fn only_kubelet_labels_in_kubernetes_namespaces_are_allowed() {
        assert!(is_kubelet_label("kubernetes.io/hostname"));
        assert!(is_kubelet_label("node.kubernetes.io/instance-type"));
        assert!(is_kubelet_label("x.kubelet.kubernetes.io/y"));
        assert!(!is_kubelet_label("node-role.kubernetes.io/control-plane"));
        let node = |labels: Value| json!({"metadata": {"labels": labels}});
        let new = node(json!({
            "kubernetes.io/hostname": "n",
            "node-role.kubernetes.io/master": "",
            "a.node-restriction.kubernetes.io/x": "y",
            "example.com/free": "z",
            "k8s.io/thing": "1",
        }));
        assert_eq!(
            forbidden_labels(&new, None),
            [
                "a.node-restriction.kubernetes.io/x",
                "k8s.io/thing",
                "node-role.kubernetes.io/master"
            ]
        );
        assert!(
            forbidden_labels(&new, Some(&new)).is_empty(),
            "unchanged labels are not checked"
        );
    }
}
