//! What a real cluster adds to the objects it stores, beyond decoding and validation: the
//! ServiceAccount admission plugin on pod create (`plugin/pkg/admission/serviceaccount`), the
//! objects controllers keep in every namespace (the `default` ServiceAccount, the
//! `kube-root-ca.crt` ConfigMap of `rootcacertpublisher`), the `kubernetes` Service
//! (`controlplane/controller/kubernetesservice`) and the Service IP and node port allocators
//! (`pkg/registry/core/service`). Done at once where the real controllers are asynchronous.

use super::error::{ApiError, Cause};
use super::lookup::Lookup;
use super::resources;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// The ServiceAccount a pod gets when it names none.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// Where the plugin mounts the kube-api-access volume.
pub const SERVICE_ACCOUNT_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The prefix of the kube-api-access volume's name (then 5 random characters).
pub const SERVICE_ACCOUNT_VOLUME_PREFIX: &str = "kube-api-access-";

/// The ConfigMap with the cluster's CA in every namespace.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

/// `kubernetes.io/description` of [`ROOT_CA_CONFIG_MAP`], as upstream writes it.
pub const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when \
     using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is \
     guaranteed across distributions of Kubernetes clusters.";

/// The Service CIDR (kube-apiserver's `--service-cluster-ip-range`, as kubeadm sets it).
pub const SERVICE_CIDR: &str = "10.96.0.0/12";

/// The `kubernetes` Service's ClusterIP: the first address of [`SERVICE_CIDR`].
pub const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";

const CIDR_BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const CIDR_SIZE: u32 = 1 << 20;
/// Dynamic allocations come from above the range's static band (min(max(16, size/16), 256)).
const STATIC_BAND: u32 = 256;
const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;

/// What the cluster side needs to know.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Run the ServiceAccount admission plugin on pod create.
    pub service_account_admission: bool,
    /// Bind unbound pods to nodes ([`crate::scheduler`]).
    pub scheduler: bool,
    /// The CA certificate (PEM) published in every namespace's `kube-root-ca.crt`.
    pub root_ca_pem: String,
    /// The API server's port: the `kubernetes` Service's `targetPort`.
    pub port: u16,
    /// kube-controller-manager's csrapproving and csrsigning ([`crate::csr::controllers`]).
    pub csr: crate::csr::controllers::Controllers,
    /// kube-controller-manager's node IPAM ([`crate::node_ipam`]): the cluster CIDR's node
    /// subnets; none without `--cluster-cidr`.
    pub node_cidrs: Option<crate::node_ipam::CidrSet>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            service_account_admission: false,
            scheduler: false,
            root_ca_pem: String::new(),
            port: 6443,
            csr: crate::csr::controllers::Controllers::default(),
            node_cidrs: None,
        }
    }
}

/// The `default` ServiceAccount of `ns`.
pub fn default_service_account(ns: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": ns},
    })
}

/// The `kube-root-ca.crt` ConfigMap of `ns`.
pub fn root_ca_config_map(ns: &str, pem: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": ROOT_CA_CONFIG_MAP,
            "namespace": ns,
            "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION},
        },
        "data": {"ca.crt": pem},
    })
}

/// The `kubernetes` Service in `default`.
pub fn kubernetes_service(port: u16) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_SERVICE_IP,
            "ipFamilyPolicy": "SingleStack",
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
        },
    })
}

fn forbidden(name: &str, why: String) -> ApiError {
    ApiError::forbidden("pods", name, &why)
}

/// The kube-api-access volume as the plugin adds it (`TokenVolumeSource`).
pub fn token_volume(name: &str) -> Value {
    json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [
                    {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                ]}},
            ],
        },
    })
}

/// The ServiceAccount admission plugin on a pod being created in `ns` (`Admit`, then
/// `Validate`): mirror pods may reference no service account, secret or token projection;
/// other pods get `default` if they name no account, which must exist (403 otherwise), its
/// image pull secrets if they have none, and unless automounting is off (the pod's
/// `automountServiceAccountToken` winning over the account's) the kube-api-access volume
/// (named with `suffix`) mounted read-only in every init and app container that mounts
/// nothing at its path. `name` is the pod's name or generateName, for the error messages.
pub fn admit_pod(store: &dyn Lookup, ns: &str, name: &str, pod: &mut Value, suffix: &str) -> Result<(), ApiError> {
    let account = pod["spec"]["serviceAccountName"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mirror = pod["metadata"]["annotations"]
        .get(dockerlet_pod::annotations::CONFIG_MIRROR)
        .is_some();
    if mirror {
        let spec = &pod["spec"];
        if !account.is_empty() {
            return Err(forbidden(
                name,
                "a mirror pod may not reference service accounts".into(),
            ));
        }
        if !crate::node_authorizer::secret_names(spec).is_empty() {
            return Err(forbidden(name, "a mirror pod may not reference secrets".into()));
        }
        let token_projection = spec["volumes"].as_array().into_iter().flatten().any(|v| {
            v["projected"]["sources"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| !s["serviceAccountToken"].is_null())
        });
        if token_projection {
            return Err(forbidden(
                name,
                "a mirror pod may not use ServiceAccountToken volume projections".into(),
            ));
        }
        return Ok(());
    }
    let account = if account.is_empty() {
        DEFAULT_SERVICE_ACCOUNT.to_string()
    } else {
        account
    };
    let spec = &mut pod["spec"];
    spec["serviceAccountName"] = json!(account);
    spec["serviceAccount"] = json!(account);
    let sa = store
        .get(resources::by_name("serviceaccounts").expect("served"), ns, &account)
        .map_err(|_| {
            forbidden(
                name,
                format!("error looking up service account {ns}/{account}: serviceaccount \"{account}\" not found"),
            )
        })?;
    let automount = spec["automountServiceAccountToken"]
        .as_bool()
        .or_else(|| sa["automountServiceAccountToken"].as_bool())
        .unwrap_or(true);
    if automount {
        mount_token(spec, suffix);
    }
    if spec["imagePullSecrets"].as_array().is_none_or(Vec::is_empty) {
        let pull: Vec<Value> = sa["imagePullSecrets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| json!({"name": s["name"]}))
            .collect();
        if let Value::Object(m) = spec {
            if pull.is_empty() {
                m.remove("imagePullSecrets");
            } else {
                m.insert("imagePullSecrets".into(), json!(pull));
            }
        }
    }
    Ok(())
}

/// `mountServiceAccountToken`: reuses a volume already named `kube-api-access-*`.
fn mount_token(spec: &mut Value, suffix: &str) {
    let existing = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .find(|n| n.starts_with(SERVICE_ACCOUNT_VOLUME_PREFIX))
        .map(str::to_string);
    let has_volume = existing.is_some();
    let volume = existing.unwrap_or_else(|| format!("{SERVICE_ACCOUNT_VOLUME_PREFIX}{suffix}"));
    let mount = json!({"name": volume, "readOnly": true, "mountPath": SERVICE_ACCOUNT_MOUNT_PATH});
    let mut needed = false;
    for list in ["initContainers", "containers"] {
        for c in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            let mounted = c["volumeMounts"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|m| m["mountPath"].as_str() == Some(SERVICE_ACCOUNT_MOUNT_PATH));
            if mounted {
                continue;
            }
            if !c["volumeMounts"].is_array() {
                c["volumeMounts"] = json!([]);
            }
            if let Some(mounts) = c["volumeMounts"].as_array_mut() {
                mounts.push(mount.clone());
            }
            needed = true;
        }
    }
    if needed && !has_volume {
        if !spec["volumes"].is_array() {
            spec["volumes"] = json!([]);
        }
        if let Some(volumes) = spec["volumes"].as_array_mut() {
            volumes.push(token_volume(&volume));
        }
    }
}

fn ip_of(offset: u32) -> String {
    Ipv4Addr::from(CIDR_BASE + offset).to_string()
}

fn offset_of(ip: &str) -> Option<u32> {
    let ip: Ipv4Addr = ip.parse().ok()?;
    let offset = u32::from(ip).checked_sub(CIDR_BASE)?;
    (offset > 0 && offset < CIDR_SIZE - 1).then_some(offset)
}

fn cluster_ips(svc: &Value) -> Vec<String> {
    let mut ips: Vec<String> = svc["spec"]["clusterIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip.as_str().map(str::to_string))
        .collect();
    if ips.is_empty() {
        if let Some(ip) = svc["spec"]["clusterIP"].as_str().filter(|ip| !ip.is_empty()) {
            ips.push(ip.to_string());
        }
    }
    ips
}

fn allocation_error(svc: &Value, ip: &str, why: String) -> ApiError {
    let name = svc["metadata"]["name"].as_str().unwrap_or_default();
    ApiError::invalid(
        "Service",
        name,
        vec![Cause {
            reason: "FieldValueInvalid",
            field: "spec.clusterIPs".into(),
            detail: format!("Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: {why}"),
        }],
    )
}

/// The Service registry's allocation on create (`old` = `None`) and update: IP families and
/// policy, a ClusterIP from [`SERVICE_CIDR`] (`clusterIP` and `clusterIPs`) unless headless
/// (`None`) or `ExternalName`, a provided IP checked against the range and the other Services,
/// node ports for NodePort and LoadBalancer Services. An update keeps what was allocated.
/// `seed` is random: each allocation takes the first free value from a point it picks.
pub fn allocate_service(store: &dyn Lookup, svc: &mut Value, old: Option<&Value>, seed: u64) -> Result<(), ApiError> {
    let mut seed = seed;
    let mut random = move || {
        // splitmix64: a new start for each allocation.
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let services = resources::by_name("services").expect("served");
    let ns = svc["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
    let name = svc["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let others: Vec<Value> = store
        .all(services)
        .into_iter()
        .filter(|s| !(s["metadata"]["namespace"] == json!(ns) && s["metadata"]["name"] == json!(name)))
        .collect();
    let svc_type = svc["spec"]["type"].as_str().unwrap_or("ClusterIP").to_string();
    if let Some(old) = old {
        // patchAllocatedValues: what the user leaves out of an update keeps its allocation.
        if svc_type != "ExternalName" && old["spec"]["type"] != json!("ExternalName") {
            for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
                if svc["spec"][field].is_null() && !old["spec"][field].is_null() {
                    svc["spec"][field] = old["spec"][field].clone();
                }
            }
            let old_ports = old["spec"]["ports"].as_array().cloned().unwrap_or_default();
            for p in svc["spec"]["ports"].as_array_mut().into_iter().flatten() {
                if p["nodePort"].is_null() {
                    if let Some(o) = old_ports
                        .iter()
                        .find(|o| o["port"] == p["port"] && o["protocol"] == p["protocol"])
                    {
                        if !o["nodePort"].is_null() {
                            p["nodePort"] = o["nodePort"].clone();
                        }
                    }
                }
            }
        }
        let (before, after) = (cluster_ips(old), cluster_ips(svc));
        if !before.is_empty() && svc_type != "ExternalName" && before != after {
            return Err(ApiError::invalid(
                "Service",
                &name,
                vec![Cause::invalid(
                    "spec.clusterIPs[0]",
                    &json!(after.first().cloned().unwrap_or_default()),
                    "may not change once set",
                )],
            ));
        }
    }
    let spec = &mut svc["spec"];
    if svc_type == "ExternalName" {
        return Ok(());
    }
    let mut ips = cluster_ips(&json!({"spec": spec.clone()}));
    let headless = ips.first().map(String::as_str) == Some("None");
    if headless {
        spec["clusterIP"] = json!("None");
        spec["clusterIPs"] = json!(["None"]);
        let selectorless = spec["selector"].as_object().is_none_or(|s| s.is_empty());
        if selectorless {
            // Headless without a selector: RequireDualStack, both families even on one stack.
            if spec["ipFamilyPolicy"].is_null() {
                spec["ipFamilyPolicy"] = json!("RequireDualStack");
            }
            if spec["ipFamilies"].is_null() {
                spec["ipFamilies"] = if spec["ipFamilyPolicy"] == json!("SingleStack") {
                    json!(["IPv4"])
                } else {
                    json!(["IPv4", "IPv6"])
                };
            }
        } else {
            if spec["ipFamilyPolicy"].is_null() {
                spec["ipFamilyPolicy"] = json!("SingleStack");
            }
            if spec["ipFamilies"].is_null() {
                spec["ipFamilies"] = json!(["IPv4"]);
            }
        }
    } else {
        let used: BTreeSet<u32> = others
            .iter()
            .flat_map(cluster_ips)
            .filter_map(|ip| offset_of(&ip))
            .collect();
        if ips.is_empty() {
            let span = u64::from(CIDR_SIZE - 1 - STATIC_BAND);
            let start = random() % span;
            let offset = (0..span)
                .map(|i| STATIC_BAND + ((start + i) % span) as u32)
                .find(|o| !used.contains(o))
                .ok_or_else(|| ApiError::internal("failed to allocate a serviceIP: range is full"))?;
            ips.push(ip_of(offset));
        } else if old.is_none_or(|o| cluster_ips(o) != ips) {
            let ip = ips[0].clone();
            let Some(offset) = offset_of(&ip) else {
                let why = format!(
                    "the provided IP ({ip}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"
                );
                return Err(allocation_error(svc, &ip, why));
            };
            if used.contains(&offset) {
                return Err(allocation_error(svc, &ip, "provided IP is already allocated".into()));
            }
        }
        let spec = &mut svc["spec"];
        spec["clusterIP"] = json!(ips[0]);
        spec["clusterIPs"] = json!(ips);
        if spec["ipFamilyPolicy"].is_null() {
            spec["ipFamilyPolicy"] = json!("SingleStack");
        }
        if spec["ipFamilies"].is_null() {
            spec["ipFamilies"] = json!(["IPv4"]);
        }
    }
    let spec = &mut svc["spec"];
    if matches!(svc_type.as_str(), "NodePort" | "LoadBalancer") {
        if spec["externalTrafficPolicy"].is_null() {
            spec["externalTrafficPolicy"] = json!("Cluster");
        }
        if svc_type == "LoadBalancer" && spec["allocateLoadBalancerNodePorts"].is_null() {
            spec["allocateLoadBalancerNodePorts"] = json!(true);
        }
        let mut used: BTreeSet<i64> = others
            .iter()
            .flat_map(|s| s["spec"]["ports"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p["nodePort"].as_i64())
            .collect();
        let allocate = svc_type == "NodePort" || spec["allocateLoadBalancerNodePorts"] != json!(false);
        for p in spec["ports"].as_array_mut().into_iter().flatten() {
            if let Some(port) = p["nodePort"].as_i64() {
                used.insert(port);
            } else if allocate {
                let span = (NODE_PORTS.end() - NODE_PORTS.start() + 1) as u64;
                let start = random() % span;
                let port = (0..span)
                    .map(|i| NODE_PORTS.start() + ((start + i) % span) as i64)
                    .find(|p| !used.contains(p))
                    .ok_or_else(|| ApiError::internal("failed to allocate a nodePort: range is full"))?;
                used.insert(port);
                p["nodePort"] = json!(port);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::store::WriteOptions;

    /// Many Services get distinct ClusterIPs inside the range (never the kubernetes Service's)
    /// and distinct node ports.
    #[test]
    fn allocations_are_unique_and_in_range() {
        let mut store = Store::new(10, ClusterConfig::default());
        let services = resources::by_name("services").expect("served");
        let mut ips = BTreeSet::new();
        let mut ports = BTreeSet::new();
        for i in 0..300 {
            let svc =
                json!({"metadata": {"name": format!("s{i}")}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}});
            let (svc, _) = store
                .create(services, "default", svc, &WriteOptions::default())
                .expect("allocated");
            let ip = svc["spec"]["clusterIP"].as_str().expect("clusterIP").to_string();
            let offset = offset_of(&ip).expect("in 10.96.0.0/12");
            assert!(offset >= STATIC_BAND, "{ip} is above the static band");
            assert!(ips.insert(ip.clone()), "{ip} given twice");
            let port = svc["spec"]["ports"][0]["nodePort"].as_i64().expect("nodePort");
            assert!(NODE_PORTS.contains(&port) && ports.insert(port), "{port}");
        }
        assert!(!ips.contains(KUBERNETES_SERVICE_IP));
    }
}
