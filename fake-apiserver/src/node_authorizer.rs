//! kube-apiserver's Node authorizer for requests from kubelets
//! (`plugin/pkg/auth/authorizer/node/node_authorizer.go`, with `AuthorizeNodeWithSelectors` on
//! as it is by default since 1.32), what `--authorization-mode=Node,RBAC` answers a node:
//!
//! - A user is a node when it is `system:node:<name>` in the group `system:nodes`
//!   (`pkg/auth/nodeidentifier/default.go`).
//! - Secrets and ConfigMaps may be read (get, list, watch of one named object) and
//!   ServiceAccount tokens created only when a pod bound to the node refers to them; a pod may
//!   be read only when it is bound to the node, and listed or watched only with the field
//!   selector `spec.nodeName=<node>`; a node reads only its own Node and touches only its own
//!   Lease in `kube-node-lease`. The graph of those relationships
//!   (`graph_populator.go`: pod → node; secret, configmap, serviceaccount → pod, not for
//!   mirror pods) is read from the store at each request, where the real one follows informers.
//! - Everything else is the `system:node` ClusterRole's static rules (`NodeRules` in
//!   `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`), and for paths that are not
//!   resources RBAC's `system:discovery` and `system:public-info-viewer`, bound to every
//!   authenticated user.
//!
//! A refusal is kube-apiserver's 403 (`responsewriters.Forbidden`): `pods "p" is forbidden:
//! User "system:node:n1" cannot get resource "pods" in API group "" in the namespace
//! "default": no relationship found between node 'n1' and this object`.

use super::error::ApiError;
use super::lookup::Lookup;
use super::resources;
use serde_json::{json, Value};
use std::collections::HashMap;

/// The user name prefix of node identities.
pub const NODE_USER_PREFIX: &str = "system:node:";

/// The group every node identity is in.
pub const NODES_GROUP: &str = "system:nodes";

/// The namespace of node leases (`api.NamespaceNodeLease`).
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The node a user is (`NodeIdentity`): `system:node:<name>` in `system:nodes`. `Some("")` is
/// a node whose name cannot be told.
pub fn node_identity<'a>(user: &'a str, groups: &[String]) -> Option<&'a str> {
    let name = user.strip_prefix(NODE_USER_PREFIX)?;
    groups.iter().any(|g| g == NODES_GROUP).then_some(name)
}

/// What a request asks, as kube-apiserver's `RequestInfoFactory` reads it from the method, the
/// path and the query (`staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`),
/// and the user it is for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// The user's name.
    pub user: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// Whether the path names a resource (else `path` is what is asked for).
    pub resource_request: bool,
    /// The path, for requests that are not for a resource.
    pub path: String,
    /// The API group (`""` for core).
    pub api_group: String,
    /// The resource (`pods`).
    pub resource: String,
    /// The subresource (`status`), or `""`.
    pub subresource: String,
    /// The namespace, or `""`.
    pub namespace: String,
    /// The object's name; for a list or watch, a `metadata.name=` field selector's value.
    pub name: String,
    /// The field selector's `field=value` requirements.
    pub field_selector: Vec<(String, String)>,
}

/// Special verbs of the path (`/api/v1/watch/...`).
const SPECIAL_VERBS: [&str; 2] = ["watch", "proxy"];

impl Attributes {
    /// The attributes of `method path?query` for `user`.
    pub fn of_request(user: &str, method: &str, path: &str, query: &HashMap<String, String>) -> Self {
        let mut attrs = Attributes {
            user: user.to_string(),
            path: path.to_string(),
            verb: method.to_ascii_lowercase(),
            ..Attributes::default()
        };
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let rest = match parts.as_slice() {
            ["api", version, rest @ ..] if !rest.is_empty() => {
                let _ = version;
                rest
            }
            ["apis", group, _version, rest @ ..] if !rest.is_empty() => {
                attrs.api_group = group.to_string();
                rest
            }
            _ => return attrs,
        };
        attrs.resource_request = true;
        let mut rest = rest.to_vec();
        attrs.verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
        if SPECIAL_VERBS.contains(&rest[0]) && rest.len() > 1 {
            attrs.verb = rest[0].to_string();
            rest.remove(0);
        }
        if rest[0] == "namespaces" && rest.len() > 1 {
            attrs.namespace = rest[1].to_string();
            if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                rest.drain(..2);
            }
        }
        attrs.resource = rest[0].to_string();
        if let Some(name) = rest.get(1) {
            attrs.name = name.to_string();
        }
        if let Some(sub) = rest.get(2) {
            if attrs.verb != "proxy" {
                attrs.subresource = sub.to_string();
            }
        }
        if let Some(selector) = query.get("fieldSelector") {
            attrs.field_selector = selector
                .split(',')
                .filter(|r| !r.contains("!="))
                .filter_map(|r| {
                    let (field, value) = r.split_once("==").or_else(|| r.split_once('='))?;
                    Some((field.trim().to_string(), value.trim().to_string()))
                })
                .collect();
        }
        if attrs.name.is_empty() && attrs.verb == "get" {
            let watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
            attrs.verb = if watch { "watch" } else { "list" }.to_string();
            if let Some((_, name)) = attrs.field_selector.iter().find(|(f, _)| f == "metadata.name") {
                if !name.is_empty() && !name.contains('/') && name != "." && name != ".." {
                    attrs.name = name.clone();
                }
            }
        }
        if attrs.name.is_empty() && attrs.verb == "delete" {
            attrs.verb = "deletecollection".to_string();
        }
        attrs
    }

    /// kube-apiserver's 403 for these attributes (`forbiddenMessage`, then `NewForbidden` on the
    /// group resource and name), `reason` after a colon when there is one.
    pub fn forbidden(&self, reason: &str) -> ApiError {
        let mut message = if !self.resource_request {
            format!("User {:?} cannot {} path {:?}", self.user, self.verb, self.path)
        } else {
            let resource = if self.subresource.is_empty() {
                self.resource.clone()
            } else {
                format!("{}/{}", self.resource, self.subresource)
            };
            let scope = if self.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace {:?}", self.namespace)
            };
            format!(
                "User {:?} cannot {} resource {:?} in API group {:?} {scope}",
                self.user, self.verb, resource, self.api_group
            )
        };
        if !reason.is_empty() {
            message = format!("{message}: {reason}");
        }
        let (resource, name) = if self.resource_request {
            (self.resource.as_str(), self.name.as_str())
        } else {
            ("", "")
        };
        forbidden_error(&self.api_group, resource, name, &message)
    }
}

/// `apierrors.NewForbidden(groupResource, name, err)`: `<resource>[.<group>] ["<name>"] is
/// forbidden: <why>`, or `forbidden: <why>` without a resource.
pub fn forbidden_error(group: &str, resource: &str, name: &str, why: &str) -> ApiError {
    let qualified = if group.is_empty() || resource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    };
    let message = if qualified.is_empty() {
        format!("forbidden: {why}")
    } else if name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {name:?} is forbidden: {why}")
    };
    let mut details = serde_json::Map::new();
    for (key, value) in [("name", name), ("group", group), ("kind", resource)] {
        if !value.is_empty() {
            details.insert(key.into(), json!(value));
        }
    }
    ApiError {
        code: 403,
        reason: "Forbidden",
        message,
        details: Some(Value::Object(details)),
        list_continue: None,
    }
}

/// An authorizer's answer: allowed, or no opinion with why (then RBAC, which binds nodes
/// nothing more, has none either and the request is refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Not allowed; the reason (may be empty) follows the 403's message.
    NoOpinion(String),
}

/// `NodeRules()`: the `system:node` ClusterRole, for resources the authorizer does not
/// subdivide. Resources are `resource` or `resource/subresource`.
const NODE_RULES: &[(&str, &[&str], &[&str])] = &[
    ("authentication.k8s.io", &["tokenreviews"], &["create"]),
    (
        "authorization.k8s.io",
        &["subjectaccessreviews", "localsubjectaccessreviews"],
        &["create"],
    ),
    ("", &["services"], &["get", "list", "watch"]),
    ("", &["nodes"], &["create", "get", "list", "watch", "update", "patch"]),
    ("", &["nodes/status"], &["update", "patch"]),
    ("", &["events"], &["create", "update", "patch"]),
    ("events.k8s.io", &["events"], &["create", "update", "patch"]),
    ("", &["pods"], &["get", "list", "watch", "create", "delete"]),
    ("", &["pods/status"], &["update", "patch"]),
    ("", &["pods/eviction"], &["create"]),
    ("", &["secrets", "configmaps"], &["get", "list", "watch"]),
    ("", &["persistentvolumeclaims", "persistentvolumes"], &["get"]),
    ("", &["persistentvolumeclaims/status"], &["get", "update", "patch"]),
    ("", &["endpoints"], &["get"]),
    ("", &["serviceaccounts/token"], &["create"]),
    (
        "certificates.k8s.io",
        &["certificatesigningrequests"],
        &["create", "get", "list", "watch"],
    ),
    (
        "coordination.k8s.io",
        &["leases"],
        &["get", "create", "update", "patch", "delete"],
    ),
    ("storage.k8s.io", &["volumeattachments"], &["get"]),
    ("storage.k8s.io", &["csidrivers"], &["get", "list", "watch"]),
    (
        "storage.k8s.io",
        &["csinodes"],
        &["get", "create", "update", "patch", "delete"],
    ),
    ("node.k8s.io", &["runtimeclasses"], &["get", "list", "watch"]),
];

/// Paths every authenticated user may GET (`system:discovery`, `system:public-info-viewer`);
/// a trailing `*` is a prefix.
const DISCOVERY_PATHS: [&str; 11] = [
    "/livez",
    "/readyz",
    "/healthz",
    "/version",
    "/version/",
    "/openapi",
    "/openapi/*",
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
];

fn static_rules_allow(attrs: &Attributes) -> bool {
    if !attrs.resource_request {
        return attrs.verb == "get"
            && DISCOVERY_PATHS.iter().any(|p| match p.strip_suffix('*') {
                Some(prefix) => attrs.path.starts_with(prefix),
                None => attrs.path == *p,
            });
    }
    let resource = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    NODE_RULES.iter().any(|(group, resources, verbs)| {
        *group == attrs.api_group && resources.contains(&resource.as_str()) && verbs.contains(&attrs.verb.as_str())
    })
}

/// The Node authorizer's decision for a request from node `node`.
pub fn authorize(store: &dyn Lookup, node: &str, attrs: &Attributes) -> Decision {
    let deny = |why: &str| Decision::NoOpinion(why.to_string());
    if node.is_empty() {
        return deny(&format!("unknown node for user {:?}", attrs.user));
    }
    if attrs.resource_request {
        match (attrs.api_group.as_str(), attrs.resource.as_str()) {
            ("", "secrets") => return read_namespaced(store, node, Vertex::Secret, attrs),
            ("", "configmaps") => return read_namespaced(store, node, Vertex::ConfigMap, attrs),
            ("", "serviceaccounts") => return create_token(store, node, attrs),
            ("coordination.k8s.io", "leases") => return lease(node, attrs),
            ("", "nodes") => return node_object(node, attrs),
            ("", "pods") => return pod(store, node, attrs),
            _ => {}
        }
    }
    if static_rules_allow(attrs) {
        Decision::Allow
    } else {
        deny("")
    }
}

/// What the relationship graph starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vertex {
    Pod,
    Secret,
    ConfigMap,
    ServiceAccount,
}

/// `authorize`: a named object with a path to the node in the graph.
fn related(store: &dyn Lookup, node: &str, vertex: Vertex, attrs: &Attributes) -> Decision {
    if attrs.name.is_empty() {
        return Decision::NoOpinion("No Object name found".into());
    }
    if has_path(store, node, vertex, &attrs.namespace, &attrs.name) {
        Decision::Allow
    } else {
        Decision::NoOpinion(format!("no relationship found between node '{node}' and this object"))
    }
}

/// Whether a pod bound to `node` is the object or (not being a mirror pod) refers to it.
fn has_path(store: &dyn Lookup, node: &str, vertex: Vertex, ns: &str, name: &str) -> bool {
    let pods = resources::by_name("pods").expect("pods are served");
    store
        .all(pods)
        .iter()
        .filter(|p| p["spec"]["nodeName"].as_str() == Some(node))
        .filter(|p| p["metadata"]["namespace"].as_str() == Some(ns))
        .any(|p| {
            let mirror = p["metadata"]["annotations"]
                .get(dockerlet_pod::annotations::CONFIG_MIRROR)
                .is_some();
            let spec = &p["spec"];
            match vertex {
                Vertex::Pod => p["metadata"]["name"].as_str() == Some(name),
                _ if mirror => false,
                Vertex::ServiceAccount => spec["serviceAccountName"].as_str() == Some(name),
                Vertex::Secret => secret_names(spec).iter().any(|s| s == name),
                Vertex::ConfigMap => config_map_names(spec).iter().any(|c| c == name),
            }
        })
}

fn read_namespaced(store: &dyn Lookup, node: &str, vertex: Vertex, attrs: &Attributes) -> Decision {
    if !matches!(attrs.verb.as_str(), "get" | "list" | "watch") {
        return Decision::NoOpinion("can only read resources of this type".into());
    }
    if !attrs.subresource.is_empty() {
        return Decision::NoOpinion("cannot read subresource".into());
    }
    if attrs.namespace.is_empty() {
        return Decision::NoOpinion("can only read namespaced object of this type".into());
    }
    related(store, node, vertex, attrs)
}

fn create_token(store: &dyn Lookup, node: &str, attrs: &Attributes) -> Decision {
    if attrs.verb != "create" || attrs.name.is_empty() {
        return Decision::NoOpinion("can only create tokens for individual service accounts".into());
    }
    if attrs.subresource != "token" {
        return Decision::NoOpinion("can only create token subresource of serviceaccount".into());
    }
    related(store, node, Vertex::ServiceAccount, attrs)
}

fn lease(node: &str, attrs: &Attributes) -> Decision {
    let verb = attrs.verb.as_str();
    if !matches!(verb, "get" | "create" | "update" | "patch" | "delete") {
        return Decision::NoOpinion("can only get, create, update, patch, or delete a node lease".into());
    }
    if attrs.namespace != NODE_LEASE_NAMESPACE {
        return Decision::NoOpinion(format!(
            "can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace"
        ));
    }
    if verb != "create" && attrs.name != node {
        return Decision::NoOpinion("can only access node lease with the same name as the requesting node".into());
    }
    Decision::Allow
}

fn node_object(node: &str, attrs: &Attributes) -> Decision {
    match (attrs.subresource.as_str(), attrs.verb.as_str()) {
        ("", "create" | "update" | "patch") | ("status", "update" | "patch") => Decision::Allow,
        ("", "get" | "list" | "watch") => {
            if attrs.name == node {
                Decision::Allow
            } else if attrs.name.is_empty() {
                Decision::NoOpinion(format!("node '{node}' cannot read all nodes, only its own Node object"))
            } else {
                Decision::NoOpinion(format!(
                    "node '{node}' cannot read '{}', only its own Node object",
                    attrs.name
                ))
            }
        }
        _ => Decision::NoOpinion(String::new()),
    }
}

fn pod(store: &dyn Lookup, node: &str, attrs: &Attributes) -> Decision {
    match (attrs.subresource.as_str(), attrs.verb.as_str()) {
        ("", "get") => related(store, node, Vertex::Pod, attrs),
        ("", "list" | "watch") => {
            let scoped = attrs
                .field_selector
                .iter()
                .any(|(field, value)| field == "spec.nodeName" && value == node);
            if scoped {
                Decision::Allow
            } else if !attrs.name.is_empty() {
                related(store, node, Vertex::Pod, attrs)
            } else {
                Decision::NoOpinion("can only list/watch pods with spec.nodeName field selector".into())
            }
        }
        ("", "create" | "delete") | ("status", "update" | "patch") | ("eviction", "create") => Decision::Allow,
        _ => Decision::NoOpinion(String::new()),
    }
}

fn names_at(value: &Value, pointer: &str) -> Option<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn all_containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |list| spec[list].as_array().into_iter().flatten())
}

/// The Secrets a pod spec names (`podutil.VisitPodSecretNames` over all containers): pull
/// secrets, `env`/`envFrom`, and the volume sources that name one.
pub fn secret_names(spec: &Value) -> Vec<String> {
    let mut names: Vec<String> = spec["imagePullSecrets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| names_at(s, "/name"))
        .collect();
    for c in all_containers(spec) {
        names.extend(
            c["envFrom"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| names_at(e, "/secretRef/name")),
        );
        names.extend(
            c["env"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| names_at(e, "/valueFrom/secretKeyRef/name")),
        );
    }
    for v in spec["volumes"].as_array().into_iter().flatten() {
        for pointer in [
            "/secret/secretName",
            "/azureFile/secretName",
            "/cephfs/secretRef/name",
            "/cinder/secretRef/name",
            "/flexVolume/secretRef/name",
            "/rbd/secretRef/name",
            "/scaleIO/secretRef/name",
            "/iscsi/secretRef/name",
            "/storageos/secretRef/name",
            "/csi/nodePublishSecretRef/name",
        ] {
            names.extend(names_at(v, pointer));
        }
        for source in v["projected"]["sources"].as_array().into_iter().flatten() {
            names.extend(names_at(source, "/secret/name"));
        }
    }
    names
}

/// The ConfigMaps a pod spec names (`podutil.VisitPodConfigmapNames` over all containers):
/// `env`/`envFrom`, configMap volumes and projections.
pub fn config_map_names(spec: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for c in all_containers(spec) {
        names.extend(
            c["envFrom"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| names_at(e, "/configMapRef/name")),
        );
        names.extend(
            c["env"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| names_at(e, "/valueFrom/configMapKeyRef/name")),
        );
    }
    for v in spec["volumes"].as_array().into_iter().flatten() {
        names.extend(names_at(v, "/configMap/name"));
        for source in v["projected"]["sources"].as_array().into_iter().flatten() {
            names.extend(names_at(source, "/configMap/name"));
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: &str, path: &str, query: &[(&str, &str)]) -> Attributes {
        let query = query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Attributes::of_request("system:node:n1", method, path, &query)
    }

    /// requestinfo.go: verbs from the method, list/watch without a name, the name from a
    /// `metadata.name` field selector, subresources, groups, non-resource paths.
    #[test]
    fn request_attributes_are_read_as_kube_apiserver_reads_them() {
        let a = attrs(
            "GET",
            "/api/v1/pods",
            &[("fieldSelector", "spec.nodeName=n1"), ("watch", "1")],
        );
        assert_eq!(
            (a.verb.as_str(), a.resource.as_str(), a.name.as_str()),
            ("watch", "pods", "")
        );
        assert_eq!(a.field_selector, vec![("spec.nodeName".to_string(), "n1".to_string())]);
        let a = attrs(
            "GET",
            "/api/v1/namespaces/ns/secrets",
            &[("fieldSelector", "metadata.name=s")],
        );
        assert_eq!(
            (a.verb.as_str(), a.namespace.as_str(), a.name.as_str()),
            ("list", "ns", "s")
        );
        let a = attrs("PATCH", "/api/v1/namespaces/ns/pods/p/status", &[]);
        assert_eq!((a.verb.as_str(), a.subresource.as_str()), ("patch", "status"));
        let a = attrs(
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            &[],
        );
        assert_eq!(
            (a.api_group.as_str(), a.resource.as_str()),
            ("coordination.k8s.io", "leases")
        );
        let a = attrs("DELETE", "/api/v1/namespaces/ns/pods", &[]);
        assert_eq!(a.verb, "deletecollection");
        let a = attrs("GET", "/apis/coordination.k8s.io/v1", &[]);
        assert!(!a.resource_request);
        let a = attrs("GET", "/api/v1/namespaces/ns", &[]);
        assert_eq!((a.resource.as_str(), a.name.as_str()), ("namespaces", "ns"));
    }

    /// responsewriters.Forbidden and apierrors.NewForbidden, word for word.
    #[test]
    fn refusals_read_as_kube_apiservers() {
        let a = attrs("GET", "/api/v1/namespaces/default/secrets/s", &[]);
        let e = a.forbidden("no relationship found between node 'n1' and this object");
        assert_eq!(
            e.message,
            "secrets \"s\" is forbidden: User \"system:node:n1\" cannot get resource \"secrets\" in API group \"\" \
             in the namespace \"default\": no relationship found between node 'n1' and this object"
        );
        let a = attrs(
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            &[],
        );
        assert_eq!(
            a.forbidden("").message,
            "leases.coordination.k8s.io is forbidden: User \"system:node:n1\" cannot list resource \"leases\" in API \
             group \"coordination.k8s.io\" in the namespace \"kube-node-lease\""
        );
        let a = attrs("GET", "/openid/v1/jwks", &[]);
        assert_eq!(
            a.forbidden("").message,
            "forbidden: User \"system:node:n1\" cannot get path \"/openid/v1/jwks\""
        );
    }

    /// NodeIdentity: the prefix and the group, both.
    #[test]
    fn only_system_node_users_in_system_nodes_are_nodes() {
        let nodes = vec![NODES_GROUP.to_string()];
        assert_eq!(node_identity("system:node:n1", &nodes), Some("n1"));
        assert_eq!(node_identity("system:node:n1", &[]), None);
        assert_eq!(node_identity("n1", &nodes), None);
        assert_eq!(node_identity("system:node:", &nodes), Some(""));
    }

    /// VisitPodSecretNames / VisitPodConfigmapNames over every place a pod names them.
    #[test]
    fn secret_and_config_map_references_are_found_everywhere() {
        let spec = json!({
            "imagePullSecrets": [{"name": "pull"}],
            "containers": [{"env": [{"valueFrom": {"secretKeyRef": {"name": "env-s"}}},
                                    {"valueFrom": {"configMapKeyRef": {"name": "env-c"}}}],
                            "envFrom": [{"secretRef": {"name": "from-s"}}, {"configMapRef": {"name": "from-c"}}]}],
            "ephemeralContainers": [{"envFrom": [{"secretRef": {"name": "debug-s"}}]}],
            "volumes": [{"secret": {"secretName": "vol-s"}}, {"configMap": {"name": "vol-c"}},
                        {"csi": {"nodePublishSecretRef": {"name": "csi-s"}}},
                        {"projected": {"sources": [{"secret": {"name": "proj-s"}}, {"configMap": {"name": "proj-c"}}]}}],
        });
        let mut secrets = secret_names(&spec);
        secrets.sort();
        assert_eq!(
            secrets,
            ["csi-s", "debug-s", "env-s", "from-s", "proj-s", "pull", "vol-s"]
        );
        let mut maps = config_map_names(&spec);
        maps.sort();
        assert_eq!(maps, ["env-c", "from-c", "proj-c", "vol-c"]);
    }
}
