//! Server-side output: `meta.k8s.io/v1 Table` (what `kubectl get` asks for) with the columns
//! kube-apiserver prints, and `PartialObjectMetadata` (metadata-only clients).

use super::resources::ResourceInfo;
use serde_json::{json, Value};

/// What the client's `Accept` header asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// Plain objects.
    #[default]
    Object,
    /// `as=Table`; `includeObject` is `None`, `Metadata` (default) or `Object`.
    Table {
        /// The `includeObject` query parameter.
        include: String,
    },
    /// `as=PartialObjectMetadata` / `PartialObjectMetadataList`.
    Metadata,
}

impl OutputFormat {
    /// From the `Accept` header (first acceptable type wins) and `includeObject`.
    pub fn from_accept(accept: &str, include_object: Option<&str>) -> Self {
        for media in accept.split(',') {
            let params: Vec<&str> = media.split(';').map(str::trim).collect();
            let base = params.first().copied().unwrap_or_default();
            if base != "application/json" && base != "*/*" && base != "application/*" {
                continue;
            }
            let as_ = params.iter().find_map(|p| p.strip_prefix("as="));
            let group = params.iter().find_map(|p| p.strip_prefix("g="));
            match (as_, group) {
                (None, _) => return Self::Object,
                (Some("Table"), Some("meta.k8s.io")) => {
                    return Self::Table {
                        include: include_object.unwrap_or("Metadata").to_string(),
                    }
                }
                (Some("PartialObjectMetadata" | "PartialObjectMetadataList"), Some("meta.k8s.io")) => {
                    return Self::Metadata
                }
                _ => continue,
            }
        }
        Self::Object
    }
}

fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
}

/// One object in the requested format (a GET or a watch event).
pub fn render_one(resource: &ResourceInfo, obj: &Value, format: &OutputFormat) -> Value {
    match format {
        OutputFormat::Object => obj.clone(),
        OutputFormat::Metadata => partial_metadata(obj),
        OutputFormat::Table { include } => table(resource, std::slice::from_ref(obj), include, None),
    }
}

/// A list (already a `<Kind>List`) in the requested format.
pub fn render_list(resource: &ResourceInfo, list: Value, format: &OutputFormat) -> Value {
    match format {
        OutputFormat::Object => list,
        OutputFormat::Metadata => {
            let items: Vec<Value> = list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(partial_metadata)
                .collect();
            json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": list["metadata"],
                "items": items,
            })
        }
        OutputFormat::Table { include } => {
            let items = list["items"].as_array().cloned().unwrap_or_default();
            let mut table = table(resource, &items, include, list["metadata"]["resourceVersion"].as_str());
            for key in ["continue", "remainingItemCount"] {
                if !list["metadata"][key].is_null() {
                    table["metadata"][key] = list["metadata"][key].clone();
                }
            }
            table
        }
    }
}

fn column(name: &str, kind: &str, format: &str, priority: u8, description: &str) -> Value {
    json!({"name": name, "type": kind, "format": format, "description": description, "priority": priority})
}

fn age_since(ts: &Value) -> String {
    let Some(t) = ts.as_str().and_then(|s| s.parse::<jiff::Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    let secs = (jiff::Timestamp::now() - t).get_seconds();
    human_duration(secs)
}

/// Kubernetes' `duration.HumanDuration`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    let minutes = seconds / 60;
    let hours = minutes / 60;
    let days = hours / 24;
    if seconds < 60 * 2 {
        format!("{seconds}s")
    } else if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        }
    } else if minutes < 60 * 3 {
        format!("{minutes}m")
    } else if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            format!("{days}d")
        } else {
            format!("{days}d{h}h")
        }
    } else if hours < 24 * 365 * 2 {
        format!("{days}d")
    } else if hours < 24 * 365 * 8 {
        let d = days % 365;
        if d == 0 {
            format!("{}y", days / 365)
        } else {
            format!("{}y{d}d", days / 365)
        }
    } else {
        format!("{}y", days / 365)
    }
}

fn or_none(v: &Value) -> Value {
    match v.as_str() {
        Some(s) if !s.is_empty() => json!(s),
        _ => json!("<none>"),
    }
}

/// kubectl's pod STATUS column (printPod, abridged).
fn pod_status(pod: &Value) -> String {
    let status = &pod["status"];
    let mut reason = status["phase"].as_str().unwrap_or_default().to_string();
    if let Some(r) = status["reason"].as_str().filter(|r| !r.is_empty()) {
        reason = r.to_string();
    }
    let init_specs = pod["spec"]["initContainers"].as_array().map_or(0, Vec::len);
    let mut initializing = false;
    for (i, c) in status["initContainerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let state = &c["state"];
        if state["terminated"]["exitCode"].as_i64() == Some(0) {
            continue;
        }
        if state["terminated"].is_object() {
            reason = match state["terminated"]["reason"].as_str().filter(|r| !r.is_empty()) {
                Some(r) => format!("Init:{r}"),
                None => format!("Init:ExitCode:{}", state["terminated"]["exitCode"]),
            };
        } else if let Some(r) = state["waiting"]["reason"]
            .as_str()
            .filter(|r| !r.is_empty() && *r != "PodInitializing")
        {
            reason = format!("Init:{r}");
        } else {
            reason = format!("Init:{i}/{init_specs}");
        }
        initializing = true;
        break;
    }
    if !initializing {
        let mut has_running = false;
        for c in status["containerStatuses"].as_array().into_iter().flatten().rev() {
            let state = &c["state"];
            if let Some(r) = state["waiting"]["reason"].as_str().filter(|r| !r.is_empty()) {
                reason = r.to_string();
            } else if let Some(r) = state["terminated"]["reason"].as_str().filter(|r| !r.is_empty()) {
                reason = r.to_string();
            } else if state["terminated"].is_object() {
                reason = match state["terminated"]["signal"].as_i64().filter(|s| *s != 0) {
                    Some(s) => format!("Signal:{s}"),
                    None => format!("ExitCode:{}", state["terminated"]["exitCode"]),
                };
            } else if c["ready"].as_bool() == Some(true) && state["running"].is_object() {
                has_running = true;
            }
        }
        if reason == "Completed" && has_running {
            reason = "Running".into();
        }
    }
    if pod["metadata"]["deletionTimestamp"].is_string() {
        reason = if status["reason"].as_str() == Some("NodeLost") {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    reason
}

fn pod_row(pod: &Value) -> Vec<Value> {
    let statuses = pod["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let total = pod["spec"]["containers"].as_array().map_or(0, Vec::len);
    let ready = statuses.iter().filter(|c| c["ready"].as_bool() == Some(true)).count();
    let restarts: i64 = statuses.iter().filter_map(|c| c["restartCount"].as_i64()).sum();
    vec![
        pod["metadata"]["name"].clone(),
        json!(format!("{ready}/{total}")),
        json!(pod_status(pod)),
        json!(restarts.to_string()),
        json!(age_since(&pod["metadata"]["creationTimestamp"])),
        or_none(&pod["status"]["podIP"]),
        or_none(&pod["spec"]["nodeName"]),
        or_none(&pod["status"]["nominatedNodeName"]),
        json!("<none>"),
    ]
}

fn node_row(node: &Value) -> Vec<Value> {
    let conditions = node["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let mut status = match conditions.iter().find(|c| c["type"] == "Ready") {
        Some(c) if c["status"] == "True" => "Ready".to_string(),
        Some(c) if c["status"] == "False" => "NotReady".to_string(),
        _ => "Unknown".to_string(),
    };
    if node["spec"]["unschedulable"].as_bool() == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = node["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            k.strip_prefix("node-role.kubernetes.io/")
                .map(str::to_string)
                .or_else(|| (k == "kubernetes.io/role").then(|| v.as_str().unwrap_or_default().to_string()))
        })
        .filter(|r| !r.is_empty())
        .collect();
    roles.sort();
    let address = |kind: &str| {
        node["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["type"] == kind)
            .map_or(json!("<none>"), |a| a["address"].clone())
    };
    let info = &node["status"]["nodeInfo"];
    vec![
        node["metadata"]["name"].clone(),
        json!(status),
        json!(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }),
        json!(age_since(&node["metadata"]["creationTimestamp"])),
        json!(info["kubeletVersion"].as_str().unwrap_or_default()),
        address("InternalIP"),
        address("ExternalIP"),
        or_none(&info["osImage"]),
        or_none(&info["kernelVersion"]),
        or_none(&info["containerRuntimeVersion"]),
    ]
}

fn event_row(ev: &Value) -> Vec<Value> {
    let last = if ev["lastTimestamp"].is_string() {
        &ev["lastTimestamp"]
    } else if ev["eventTime"].is_string() {
        &ev["eventTime"]
    } else {
        &ev["metadata"]["creationTimestamp"]
    };
    let involved = &ev["involvedObject"];
    vec![
        json!(age_since(last)),
        ev["type"].clone(),
        ev["reason"].clone(),
        json!(format!(
            "{}/{}",
            involved["kind"].as_str().unwrap_or_default().to_ascii_lowercase(),
            involved["name"].as_str().unwrap_or_default()
        )),
        ev["message"].clone(),
        ev["metadata"]["name"].clone(),
    ]
}

/// kubectl's service row: type, ClusterIP, external IPs, `port[:nodePort]/protocol`, age and
/// the selector (`<none>` where empty).
fn service_row(svc: &Value) -> Vec<Value> {
    let spec = &svc["spec"];
    let svc_type = spec["type"].as_str().unwrap_or("ClusterIP");
    let mut external: Vec<String> = spec["externalIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip.as_str().map(str::to_string))
        .collect();
    match svc_type {
        "LoadBalancer" => {
            for ingress in svc["status"]["loadBalancer"]["ingress"]
                .as_array()
                .into_iter()
                .flatten()
            {
                for key in ["ip", "hostname"] {
                    if let Some(v) = ingress[key].as_str().filter(|v| !v.is_empty()) {
                        external.push(v.to_string());
                    }
                }
            }
            if external.is_empty() {
                external.push("<pending>".into());
            }
        }
        "ExternalName" => external = vec![spec["externalName"].as_str().unwrap_or_default().to_string()],
        _ => {}
    }
    let ports: Vec<String> = spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let protocol = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64() {
                Some(node) => format!("{}:{node}/{protocol}", p["port"]),
                None => format!("{}/{protocol}", p["port"]),
            }
        })
        .collect();
    let selector: Vec<String> = spec["selector"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    let none_if_empty = |v: Vec<String>, sep: &str| {
        if v.is_empty() {
            "<none>".to_string()
        } else {
            v.join(sep)
        }
    };
    vec![
        svc["metadata"]["name"].clone(),
        json!(svc_type),
        json!(spec["clusterIP"].as_str().filter(|s| !s.is_empty()).unwrap_or("<none>")),
        json!(none_if_empty(external, ",")),
        json!(none_if_empty(ports, ",")),
        json!(age_since(&svc["metadata"]["creationTimestamp"])),
        json!(none_if_empty(selector, ",")),
    ]
}

fn data_count(obj: &Value) -> usize {
    obj["data"].as_object().map_or(0, |m| m.len()) + obj["binaryData"].as_object().map_or(0, |m| m.len())
}

/// The cells of one object's row.
type RowFn = fn(&Value) -> Vec<Value>;

/// `printCertificateSigningRequest` with `extractCSRStatus`: Denied, else Approved, else
/// Pending; then `,Failed` and `,Issued`.
fn csr_row(csr: &Value) -> Vec<Value> {
    let has = |t: &str| {
        csr["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == t)
    };
    let mut condition = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        condition.push_str(",Failed");
    }
    if csr["status"]["certificate"].as_str().is_some_and(|c| !c.is_empty()) {
        condition.push_str(",Issued");
    }
    let or_none = |v: &Value| json!(v.as_str().filter(|s| !s.is_empty()).unwrap_or("<none>"));
    let duration = csr["spec"]["expirationSeconds"]
        .as_i64()
        .map_or_else(|| "<none>".to_string(), human_duration);
    vec![
        csr["metadata"]["name"].clone(),
        json!(age_since(&csr["metadata"]["creationTimestamp"])),
        or_none(&csr["spec"]["signerName"]),
        json!(csr["spec"]["username"].as_str().unwrap_or_default()),
        json!(duration),
        json!(condition),
    ]
}

fn columns_and_row(resource: &ResourceInfo) -> (Vec<Value>, RowFn) {
    let name = column("Name", "string", "name", 0, "Name must be unique within a namespace.");
    let age = column(
        "Age",
        "string",
        "",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    match resource.kind {
        "Pod" => (
            vec![
                name,
                column(
                    "Ready",
                    "string",
                    "",
                    0,
                    "The aggregate readiness state of this pod for accepting traffic.",
                ),
                column(
                    "Status",
                    "string",
                    "",
                    0,
                    "The aggregate status of the containers in this pod.",
                ),
                column(
                    "Restarts",
                    "string",
                    "",
                    0,
                    "The number of times the containers in this pod have been restarted.",
                ),
                age,
                column("IP", "string", "", 1, "IP address allocated to the pod."),
                column("Node", "string", "", 1, "Name of the node the pod is assigned to."),
                column(
                    "Nominated Node",
                    "string",
                    "",
                    1,
                    "Name of the node the pod is nominated to.",
                ),
                column("Readiness Gates", "string", "", 1, "The readiness gates of the pod."),
            ],
            pod_row,
        ),
        "Node" => (
            vec![
                name,
                column("Status", "string", "", 0, "The status of the node"),
                column("Roles", "string", "", 0, "The roles of the node"),
                age,
                column("Version", "string", "", 0, "Kubelet Version reported by the node."),
                column(
                    "Internal-IP",
                    "string",
                    "",
                    1,
                    "List of addresses reachable to the node.",
                ),
                column(
                    "External-IP",
                    "string",
                    "",
                    1,
                    "List of addresses reachable to the node.",
                ),
                column("OS-Image", "string", "", 1, "OS Image reported by the node."),
                column(
                    "Kernel-Version",
                    "string",
                    "",
                    1,
                    "Kernel Version reported by the node.",
                ),
                column(
                    "Container-Runtime",
                    "string",
                    "",
                    1,
                    "Container Runtime Version reported by the node.",
                ),
            ],
            node_row,
        ),
        "RuntimeClass" => (
            vec![
                name,
                column("Handler", "string", "", 0, "The underlying runtime and configuration."),
                age,
            ],
            |r| {
                vec![
                    r["metadata"]["name"].clone(),
                    json!(r["handler"].as_str().unwrap_or_default()),
                    json!(age_since(&r["metadata"]["creationTimestamp"])),
                ]
            },
        ),
        "PodTemplate" => (
            vec![
                name,
                column(
                    "Containers",
                    "string",
                    "",
                    0,
                    "Names of each container in the template.",
                ),
                column(
                    "Images",
                    "string",
                    "",
                    0,
                    "Images referenced by each container in the template.",
                ),
                column("Pod Labels", "string", "", 0, "The labels for the pod template."),
            ],
            |t| {
                let containers = t["template"]["spec"]["containers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let each = |field: &str| {
                    containers
                        .iter()
                        .map(|c| c[field].as_str().unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let labels = t["template"]["metadata"]["labels"]
                    .as_object()
                    .map(|l| {
                        l.iter()
                            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "<none>".into());
                vec![
                    t["metadata"]["name"].clone(),
                    json!(each("name")),
                    json!(each("image")),
                    json!(labels),
                ]
            },
        ),
        // printers.go `certificateSigningRequestColumnDefinitions`,
        // `printCertificateSigningRequest`.
        "CertificateSigningRequest" => (
            vec![
                name,
                age,
                column(
                    "SignerName",
                    "string",
                    "",
                    0,
                    "signerName indicates the requested signer.",
                ),
                column(
                    "Requestor",
                    "string",
                    "",
                    0,
                    "username contains the name of the user that created the CertificateSigningRequest.",
                ),
                column(
                    "RequestedDuration",
                    "string",
                    "",
                    0,
                    "expirationSeconds is the requested duration of validity of the issued certificate.",
                ),
                column("Condition", "string", "", 0, "conditions applied to the request."),
            ],
            csr_row,
        ),
        "Lease" => (
            vec![name, column("Holder", "string", "", 0, "The holder of the lease."), age],
            |l| {
                vec![
                    l["metadata"]["name"].clone(),
                    json!(l["spec"]["holderIdentity"].as_str().unwrap_or_default()),
                    json!(age_since(&l["metadata"]["creationTimestamp"])),
                ]
            },
        ),
        "Event" => (
            vec![
                column("Last Seen", "string", "", 0, "Time of the last occurrence."),
                column("Type", "string", "", 0, "Type of this event (Normal, Warning)."),
                column("Reason", "string", "", 0, "Why the action was taken."),
                column("Object", "string", "", 0, "The object that this event is about."),
                column(
                    "Message",
                    "string",
                    "",
                    0,
                    "A human-readable description of the status of this operation.",
                ),
                column("Name", "string", "name", 1, "Name of the event."),
            ],
            event_row,
        ),
        "Namespace" => (
            vec![
                name,
                column("Status", "string", "", 0, "The status of the namespace"),
                age,
            ],
            |n| {
                vec![
                    n["metadata"]["name"].clone(),
                    n["status"]["phase"].clone(),
                    json!(age_since(&n["metadata"]["creationTimestamp"])),
                ]
            },
        ),
        "ConfigMap" => (
            vec![name, column("Data", "integer", "", 0, "Number of keys."), age],
            |c| {
                vec![
                    c["metadata"]["name"].clone(),
                    json!(data_count(c)),
                    json!(age_since(&c["metadata"]["creationTimestamp"])),
                ]
            },
        ),
        "Secret" => (
            vec![
                name,
                column("Type", "string", "", 0, "The type of the secret"),
                column("Data", "integer", "", 0, "Number of keys."),
                age,
            ],
            |s| {
                vec![
                    s["metadata"]["name"].clone(),
                    s["type"].clone(),
                    json!(data_count(s)),
                    json!(age_since(&s["metadata"]["creationTimestamp"])),
                ]
            },
        ),
        "ServiceAccount" => (
            vec![
                name,
                column(
                    "Secrets",
                    "string",
                    "",
                    0,
                    "Secrets is a list of the secrets in the same namespace that pods running using this \
                     ServiceAccount are allowed to use.",
                ),
                age,
            ],
            |a| {
                vec![
                    a["metadata"]["name"].clone(),
                    json!(a["secrets"].as_array().map_or(0, Vec::len)),
                    json!(age_since(&a["metadata"]["creationTimestamp"])),
                ]
            },
        ),
        "Service" => (
            vec![
                name,
                column("Type", "string", "", 0, "The type of the service"),
                column("Cluster-IP", "string", "", 0, "The cluster IP of the service"),
                column("External-IP", "string", "", 0, "The external IP of the service"),
                column("Port(s)", "string", "", 0, "The ports of the service"),
                age,
                column("Selector", "string", "", 1, "The selector of the service"),
            ],
            service_row,
        ),
        _ => (vec![name, age], |o| {
            vec![
                o["metadata"]["name"].clone(),
                json!(age_since(&o["metadata"]["creationTimestamp"])),
            ]
        }),
    }
}

/// A `Table` of `items`.
pub fn table(resource: &ResourceInfo, items: &[Value], include: &str, rv: Option<&str>) -> Value {
    let (columns, row) = columns_and_row(resource);
    let rows: Vec<Value> = items
        .iter()
        .map(|obj| {
            let object = match include {
                "None" => Value::Null,
                "Object" => obj.clone(),
                _ => partial_metadata(obj),
            };
            json!({"cells": row(obj), "object": object})
        })
        .collect();
    let mut metadata = json!({});
    if let Some(rv) = rv {
        metadata["resourceVersion"] = json!(rv);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ages read as kubectl prints them.
    #[test]
    fn human_durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(3600 * 5 + 60 * 3), "5h3m");
        assert_eq!(human_duration(86400 * 3), "3d");
    }

    /// Accept headers pick Tables, metadata or plain objects.
    #[test]
    fn accept_headers() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert!(matches!(
            OutputFormat::from_accept(kubectl, None),
            OutputFormat::Table { .. }
        ));
        assert_eq!(
            OutputFormat::from_accept("application/json", None),
            OutputFormat::Object
        );
        assert_eq!(
            OutputFormat::from_accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", None),
            OutputFormat::Metadata
        );
    }
}
