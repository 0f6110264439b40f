//! The resources the fixture serves and its discovery documents (`/api`, `/api/v1`, `/apis`,
//! `/apis/coordination.k8s.io/v1`, `/apis/node.k8s.io/v1`, `/version`, `/openapi/v3`).

use serde_json::{json, Value};

/// One served resource, as discovery describes it.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group, `""` for core.
    pub group: &'static str,
    /// API version within the group.
    pub version: &'static str,
    /// Plural name, as in URLs (`pods`).
    pub plural: &'static str,
    /// Singular name (`pod`).
    pub singular: &'static str,
    /// Kind (`Pod`).
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: &'static [&'static str],
    /// Whether it has a `status` subresource.
    pub has_status: bool,
    /// Field selector labels accepted besides `metadata.name` and `metadata.namespace`.
    pub field_labels: &'static [&'static str],
    /// Whether a PUT to a missing object creates it (the strategy's `AllowCreateOnUpdate`:
    /// events and leases here).
    pub create_on_update: bool,
}

impl ResourceInfo {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The URL prefix of its group version (`/api/v1`, `/apis/coordination.k8s.io/v1`).
    pub fn group_prefix(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// Whether `name` is its plural, singular, kind (any case) or a short name.
    pub fn is_called(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        self.plural == lower
            || self.singular == lower
            || self.kind.eq_ignore_ascii_case(name)
            || self.short_names.contains(&lower.as_str())
    }
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
];

const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// Every resource served.
pub static RESOURCES: &[ResourceInfo] = &[
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        has_status: true,
        field_labels: POD_FIELDS,
        create_on_update: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        has_status: true,
        field_labels: &["spec.unschedulable"],
        create_on_update: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        has_status: false,
        field_labels: EVENT_FIELDS,
        create_on_update: true,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        short_names: &[],
        has_status: false,
        field_labels: &["type"],
        create_on_update: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        short_names: &["cm"],
        has_status: false,
        field_labels: &[],
        create_on_update: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        short_names: &["svc"],
        has_status: true,
        field_labels: &[],
        create_on_update: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        namespaced: true,
        short_names: &["sa"],
        has_status: false,
        field_labels: &[],
        create_on_update: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        has_status: true,
        field_labels: &["status.phase"],
        create_on_update: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "podtemplates",
        singular: "podtemplate",
        kind: "PodTemplate",
        namespaced: true,
        short_names: &[],
        has_status: false,
        field_labels: &[],
        create_on_update: false,
    },
    ResourceInfo {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        short_names: &[],
        has_status: false,
        field_labels: &[],
        create_on_update: true,
    },
    ResourceInfo {
        group: "node.k8s.io",
        version: "v1",
        plural: "runtimeclasses",
        singular: "runtimeclass",
        kind: "RuntimeClass",
        namespaced: false,
        short_names: &[],
        has_status: false,
        field_labels: &[],
        create_on_update: false,
    },
    // `pkg/registry/certificates/certificates/storage/storage.go`: cluster-scoped, short name
    // `csr`, with `status` and `approval` subresources; `spec.signerName` is a field label
    // (`pkg/apis/certificates/v1/conversion.go`).
    ResourceInfo {
        group: "certificates.k8s.io",
        version: "v1",
        plural: "certificatesigningrequests",
        singular: "certificatesigningrequest",
        kind: "CertificateSigningRequest",
        namespaced: false,
        short_names: &["csr"],
        has_status: true,
        field_labels: &["spec.signerName"],
        create_on_update: false,
    },
];

/// The resource served at `prefix` (`/api/v1`, `/apis/coordination.k8s.io/v1`) as `plural`.
pub fn by_url(group: &str, version: &str, plural: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource a test names by plural, singular, kind or short name.
pub fn by_name(name: &str) -> Option<&'static ResourceInfo> {
    RESOURCES.iter().find(|r| r.is_called(name))
}

/// The resource of `kind` in `apiVersion`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.kind == kind && r.api_version() == api_version)
}

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn resource_entry(r: &ResourceInfo) -> Value {
    let mut entry = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": VERBS,
    });
    if !r.short_names.is_empty() {
        entry["shortNames"] = json!(r.short_names);
    }
    if r.plural == "pods" || r.plural == "services" {
        entry["categories"] = json!(["all"]);
    }
    entry
}

/// `APIResourceList` of one group version.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in RESOURCES.iter().filter(|r| r.group == group && r.version == version) {
        resources.push(resource_entry(r));
        if r.has_status {
            resources.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if r.plural == "serviceaccounts" {
            resources.push(json!({
                "name": "serviceaccounts/token",
                "singularName": "",
                "namespaced": true,
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }));
        }
        if r.plural == "certificatesigningrequests" {
            resources.push(json!({
                "name": "certificatesigningrequests/approval",
                "singularName": "",
                "namespaced": false,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if r.plural == "pods" {
            resources.push(json!({
                "name": "pods/binding",
                "singularName": "",
                "namespaced": true,
                "kind": "Binding",
                "verbs": ["create"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// `/api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// `/apis`.
pub fn api_group_list() -> Value {
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            api_group("coordination.k8s.io"),
            api_group("node.k8s.io"),
            api_group("authentication.k8s.io"),
            api_group("authorization.k8s.io"),
            api_group("certificates.k8s.io"),
        ],
    })
}

/// `/apis/<group>`.
pub fn api_group(group: &str) -> Value {
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [{"groupVersion": format!("{group}/v1"), "version": "v1"}],
        "preferredVersion": {"groupVersion": format!("{group}/v1"), "version": "v1"},
    })
}

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "37",
        "gitVersion": "v1.37.0",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/openapi/v3`: one entry per group version.
///
/// kubectl reads it to learn whether the server validates fields itself (`fieldValidation`); when
/// it does, kubectl sends `fieldValidation=Strict` instead of validating on its side.
pub fn openapi_v3_root() -> Value {
    json!({
        "paths": {
            "api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=dockerlet-test-apiserver"},
            "apis/coordination.k8s.io/v1": {
                "serverRelativeURL": "/openapi/v3/apis/coordination.k8s.io/v1?hash=dockerlet-test-apiserver"
            },
            "apis/node.k8s.io/v1": {
                "serverRelativeURL": "/openapi/v3/apis/node.k8s.io/v1?hash=dockerlet-test-apiserver"
            },
            "apis/certificates.k8s.io/v1": {
                "serverRelativeURL": "/openapi/v3/apis/certificates.k8s.io/v1?hash=dockerlet-test-apiserver"
            },
        }
    })
}

/// `/openapi/v3/<group version>`: paths only, enough for kubectl's query parameter check. No
/// schemas: kubectl falls back to its compiled-in types where it would use them.
pub fn openapi_v3_group(group: &str, version: &str) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    for r in RESOURCES.iter().filter(|r| r.group == group && r.version == version) {
        let item = if r.namespaced {
            format!("{}/namespaces/{{namespace}}/{}/{{name}}", r.group_prefix(), r.plural)
        } else {
            format!("{}/{}/{{name}}", r.group_prefix(), r.plural)
        };
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let param =
            |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let op = |id: &str| {
            json!({
                "operationId": format!("{id}{}", r.kind),
                "x-kubernetes-action": id,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [param("dryRun"), param("fieldManager"), param("fieldValidation")],
                "responses": {"200": {"description": "OK"}},
            })
        };
        paths.insert(item, json!({"patch": op("patch"), "put": op("put")}));
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
