//! The Node object this agent registers: labels, addresses, capacity and nodeInfo read off the
//! machine (kubelet's `pkg/kubelet/kubelet_node_status.go`, `pkg/kubelet/nodestatus/setters.go`). Conditions are added by the NodeStatusActor.

use std::collections::BTreeMap;

use dockerlet_host::signals::{Signal, Thresholds};
use dockerlet_pod::resource::Allocatable;
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeDaemonEndpoints, NodeFeatures, NodeRuntimeHandler,
    NodeRuntimeHandlerFeatures, NodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// What the Node says about this machine.
#[derive(Debug, Clone, Default)]
pub struct NodeFacts {
    /// Node name.
    pub name: String,
    /// `status.addresses` InternalIP.
    pub ip: String,
    /// Extra labels (`--node-labels`).
    pub labels: BTreeMap<String, String>,
    /// CPUs.
    pub cpus: usize,
    /// Memory in bytes.
    pub memory_bytes: i64,
    /// Docker's version.
    pub docker_version: String,
    /// The advertised kubelet port.
    pub port: u16,
    /// Size of the root directory's filesystem (`ephemeral-storage`), when known.
    pub ephemeral_storage_bytes: Option<i64>,
    /// `--register-with-taints`.
    pub taints: Vec<Taint>,
    /// `--kube-reserved` plus `--system-reserved`: cpu in millicores, the rest in units.
    pub reserved: BTreeMap<String, i64>,
    /// Hard eviction thresholds, also taken off allocatable.
    pub eviction: Thresholds,
    /// The `pods` capacity and allocatable (`maxPods`, capped by `podsPerCore`).
    pub max_pods: i64,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn os_image() -> String {
    let text = read("/etc/os-release");
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".to_string())
}

/// Kubernetes' name of this CPU architecture.
pub fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The node's allocatable cpu, memory and ephemeral storage: capacity − kube/system-reserved −
/// hard eviction thresholds (`pkg/kubelet/cm/node_container_manager_linux.go`:
/// GetNodeAllocatableAbsolute). What the Node reports, and what downward API limits default to.
pub fn allocatable(facts: &NodeFacts) -> Allocatable {
    let reserved = |name: &str| facts.reserved.get(name).copied().unwrap_or(0);
    let threshold = |signal: Signal, capacity: i64| facts.eviction.0.get(&signal).map_or(0, |t| t.resolve(capacity));
    Allocatable {
        cpu_milli: (facts.cpus as i64 * 1000 - reserved("cpu")).max(0),
        memory_bytes: (facts.memory_bytes
            - reserved("memory")
            - threshold(Signal::MemoryAvailable, facts.memory_bytes))
        .max(0),
        ephemeral_storage_bytes: facts.ephemeral_storage_bytes.map_or(0, |storage| {
            (storage - reserved("ephemeral-storage") - threshold(Signal::NodefsAvailable, storage)).max(0)
        }),
    }
}

/// Capacity and allocatable, as the Node's quantities.
fn resources(facts: &NodeFacts) -> (BTreeMap<String, Quantity>, BTreeMap<String, Quantity>) {
    let cpu_millis = facts.cpus as i64 * 1000;
    let free = allocatable(facts);
    let mut capacity = BTreeMap::from([
        ("cpu".to_string(), millis(cpu_millis)),
        ("memory".to_string(), bytes(facts.memory_bytes)),
        ("pods".to_string(), Quantity(facts.max_pods.to_string())),
    ]);
    let mut allocatable = BTreeMap::from([
        ("cpu".to_string(), millis(free.cpu_milli)),
        ("memory".to_string(), bytes(free.memory_bytes)),
        ("pods".to_string(), Quantity(facts.max_pods.to_string())),
    ]);
    if let Some(storage) = facts.ephemeral_storage_bytes {
        capacity.insert("ephemeral-storage".to_string(), bytes(storage));
        allocatable.insert("ephemeral-storage".to_string(), bytes(free.ephemeral_storage_bytes));
    }
    (capacity, allocatable)
}

/// A CPU quantity from millicores: whole cores when it divides.
fn millis(m: i64) -> Quantity {
    let m = m.max(0);
    Quantity(if m % 1000 == 0 {
        (m / 1000).to_string()
    } else {
        format!("{m}m")
    })
}

/// A byte quantity: in Ki when it divides, as kubelet writes memory.
fn bytes(b: i64) -> Quantity {
    let b = b.max(0);
    Quantity(if b % 1024 == 0 {
        format!("{}Ki", b / 1024)
    } else {
        b.to_string()
    })
}

/// The Node to register.
pub fn node(facts: &NodeFacts) -> Node {
    let mut labels = BTreeMap::from([
        ("kubernetes.io/hostname".to_string(), facts.name.clone()),
        ("kubernetes.io/os".to_string(), "linux".to_string()),
        ("kubernetes.io/arch".to_string(), arch().to_string()),
        ("beta.kubernetes.io/os".to_string(), "linux".to_string()),
        ("beta.kubernetes.io/arch".to_string(), arch().to_string()),
    ]);
    labels.extend(facts.labels.clone());
    let (capacity, allocatable) = resources(facts);
    let uname = rustix::system::uname();
    Node {
        metadata: ObjectMeta {
            name: Some(facts.name.clone()),
            labels: Some(labels),
            ..Default::default()
        },
        spec: (!facts.taints.is_empty()).then(|| NodeSpec {
            taints: Some(facts.taints.clone()),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(capacity),
            allocatable: Some(allocatable),
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".to_string(),
                    address: facts.ip.clone(),
                },
                NodeAddress {
                    type_: "Hostname".to_string(),
                    address: facts.name.clone(),
                },
            ]),
            daemon_endpoints: Some(NodeDaemonEndpoints {
                kubelet_endpoint: Some(DaemonEndpoint {
                    port: i32::from(facts.port),
                }),
            }),
            node_info: Some(NodeSystemInfo {
                machine_id: read("/etc/machine-id"),
                system_uuid: read("/sys/class/dmi/id/product_uuid"),
                boot_id: read("/proc/sys/kernel/random/boot_id"),
                kernel_version: uname.release().to_string_lossy().into_owned(),
                os_image: os_image(),
                container_runtime_version: format!("docker://{}", facts.docker_version),
                kubelet_version: format!("v{}.0-dockerlet", dockerlet_pod::version::KUBE_VERSION),
                kube_proxy_version: String::new(),
                operating_system: "linux".to_string(),
                architecture: arch().to_string(),
                ..Default::default()
            }),
            // The runtime's features, as kubelet reports what its CRI runtime says. Docker cannot
            // honour `supplementalGroupsPolicy: Strict` (it merges the image's groups), which is
            // refused with `SupplementalGroupsPolicyNotSupported`;
            features: Some(NodeFeatures {
                supplemental_groups_policy: Some(false),
            }),
            // nor give recursively read-only mounts (so `recursiveReadOnly: Enabled` is refused)
            // or a user namespace per pod (so `hostUsers: false` is).
            runtime_handlers: Some(vec![NodeRuntimeHandler {
                name: Some(String::new()),
                features: Some(NodeRuntimeHandlerFeatures {
                    recursive_read_only_mounts: Some(false),
                    user_namespaces: Some(false),
                }),
            }]),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Node carries kubelet's labels, the node's addresses, capacity and runtime version.
    #[test]
    fn node_describes_the_machine() {
        let facts = NodeFacts {
            name: "n1".into(),
            ip: "10.0.0.1".into(),
            labels: BTreeMap::from([("tier".into(), "edge".into())]),
            cpus: 2,
            memory_bytes: 4 << 30,
            docker_version: "20.10.24".into(),
            port: 10250,
            ephemeral_storage_bytes: Some(100 << 30),
            taints: vec![Taint {
                key: "dedicated".into(),
                value: Some("edge".into()),
                effect: "NoSchedule".into(),
                time_added: None,
            }],
            reserved: BTreeMap::from([("cpu".into(), 500), ("memory".into(), 1 << 30)]),
            eviction: Thresholds::default(),
            max_pods: 110,
        };
        let n = node(&facts);
        assert_eq!(n.spec.unwrap().taints.unwrap()[0].key, "dedicated");
        let labels = n.metadata.labels.unwrap();
        assert_eq!(labels["kubernetes.io/hostname"], "n1");
        assert_eq!(labels["tier"], "edge");
        let s = n.status.unwrap();
        assert_eq!(s.capacity.as_ref().unwrap()["memory"].0, "4194304Ki");
        assert_eq!(s.capacity.as_ref().unwrap()["pods"].0, "110");
        assert_eq!(s.allocatable.as_ref().unwrap()["pods"].0, "110");
        assert_eq!(s.capacity.as_ref().unwrap()["ephemeral-storage"].0, "104857600Ki");
        let allocatable = s.allocatable.as_ref().unwrap();
        assert_eq!(allocatable["cpu"].0, "1500m");
        // 4 Gi − 1 Gi reserved − 100 Mi eviction threshold.
        assert_eq!(allocatable["memory"].0, format!("{}Ki", (3 << 20) - 100 * 1024));
        // 100 Gi − 10 % (nodefs.available).
        assert_eq!(allocatable["ephemeral-storage"].0, "94371840Ki");
        // The same figures are what downward API limits default to.
        assert_eq!(
            super::allocatable(&facts),
            Allocatable {
                cpu_milli: 1500,
                memory_bytes: (3 << 30) - (100 << 20),
                ephemeral_storage_bytes: 94371840 * 1024,
            }
        );
        assert_eq!(s.node_info.unwrap().container_runtime_version, "docker://20.10.24");
        let handlers = s.runtime_handlers.unwrap();
        let features = handlers[0].features.as_ref().unwrap();
        assert_eq!(handlers[0].name.as_deref(), Some(""));
        assert_eq!(features.recursive_read_only_mounts, Some(false));
        assert_eq!(s.features.and_then(|f| f.supplemental_groups_policy), Some(false));
        assert_eq!(s.addresses.unwrap()[0].address, "10.0.0.1");
    }
}
