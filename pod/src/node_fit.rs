//! Whether a pod fits this node: kubelet's predicate admission (`pkg/kubelet/lifecycle/predicate.go`
//! over the scheduler's `AdmissionCheck`), run when a pod first comes to the node, against the
//! pods already admitted and still running.
//!
//! In kubelet's order, the first failure being the answer:
//! - NodeResourcesFit: the pod count (`OutOfpods`), then `cpu`, `memory`, `ephemeral-storage`
//!   and every other requested resource (`OutOf<name>`) against `status.allocatable` less what
//!   the other pods request. Extended resources the node does not have at all are not checked
//!   (kubelet's `removeMissingExtendedResources`); requests are kubelet's `PodRequests` (init
//!   containers, sidecars, overhead).
//! - NodeAffinity: `nodeSelector` and the required node affinity against the node's labels.
//! - NodeName: `spec.nodeName` of another node.
//! - NodePorts: a host port another admitted pod holds.
//! - TaintToleration: an untolerated `NoExecute` taint, for pods from the API only.
//!
//! A pod refused here fails with that reason and `Pod was rejected: <message>`, as kubelet's
//! `rejectPod` reports it (see [`crate::admission::rejected_status`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, Pod, Taint, Toleration};

use crate::admission::Rejection;
use crate::quantity::parse_quantity;

/// The resources kubelet names its own `OutOf…` reasons after, in the order it checks them.
const NATIVE: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

/// Whether `name` is an extended resource (not in the `kubernetes.io` domain, not a quota
/// `requests.` name): those the node lacks entirely are left out of the check.
fn is_extended(name: &str) -> bool {
    let native = match name.split_once('/') {
        None => true,
        Some((domain, _)) => domain == "kubernetes.io" || domain.ends_with(".kubernetes.io"),
    };
    !native && !name.starts_with("requests.")
}

/// The pod's requests per resource (cpu in millicores, the rest in units), as kubelet's
/// `PodRequests`; invalid quantities count as nothing (the API server refuses them).
pub fn pod_requests(pod: &Pod) -> BTreeMap<String, i64> {
    let Some(spec) = pod.spec.as_ref() else {
        return BTreeMap::new();
    };
    let mut names: Vec<&str> = Vec::new();
    for c in spec.containers.iter().chain(spec.init_containers.iter().flatten()) {
        let r = c.resources.as_ref();
        for map in [r.and_then(|r| r.requests.as_ref()), r.and_then(|r| r.limits.as_ref())] {
            names.extend(map.into_iter().flat_map(|m| m.keys().map(String::as_str)));
        }
    }
    names.extend(spec.overhead.iter().flat_map(|m| m.keys().map(String::as_str)));
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let v = crate::cgroup::pod_request(pod, name).ok()?;
            (v > 0).then(|| (name.to_string(), v))
        })
        .collect()
}

/// The node's allocatable amounts (cpu in millicores).
fn allocatable(node: &Node) -> BTreeMap<String, i64> {
    node.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|(name, q)| Some((name.clone(), parse_quantity(&q.0, name == "cpu")?)))
        .collect()
}

/// The predicates whose names are rejection reasons.
pub const PREDICATES: [&str; 4] = ["NodeAffinity", "NodeName", "NodePorts", "TaintToleration"];

/// The reason of a refusal by node affinity alone, which kubelet checks again against a Node
/// fetched from the API server.
pub const NODE_AFFINITY: &str = "NodeAffinity";

fn reject(reason: String, message: String) -> Rejection {
    Rejection { reason, message }
}

fn predicate(name: &str, description: &str) -> Rejection {
    reject(name.to_string(), format!("Predicate {name} failed: {description}"))
}

/// Admit `pod` onto `node` beside `others` (the pods admitted before it that have not
/// finished), or say why not.
pub fn admit(pod: &Pod, node: &Node, others: &[&Pod]) -> Result<(), Rejection> {
    let allocatable = allocatable(node);
    let insufficient = |name: &str, requested: i64, used: i64, capacity: i64| {
        reject(
            format!("OutOf{name}"),
            format!(
                "Node didn't have enough resource: {name}, requested: {requested}, used: {used}, capacity: {capacity}"
            ),
        )
    };
    if let Some(&max) = allocatable.get("pods") {
        let used = others.len() as i64;
        if used + 1 > max {
            return Err(insufficient("pods", 1, used, max));
        }
    }
    let wanted = pod_requests(pod);
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for other in others {
        for (name, v) in pod_requests(other) {
            *used.entry(name).or_default() += v;
        }
    }
    let mut order: Vec<&String> = wanted.keys().filter(|n| NATIVE.contains(&n.as_str())).collect();
    order.sort_by_key(|n| NATIVE.iter().position(|x| x == n));
    order.extend(
        wanted
            .keys()
            .filter(|n| !NATIVE.contains(&n.as_str()) && n.as_str() != "pods"),
    );
    for name in order {
        if is_extended(name) && !allocatable.contains_key(name) {
            continue;
        }
        let (requested, capacity) = (wanted[name], allocatable.get(name).copied().unwrap_or(0));
        let in_use = used.get(name).copied().unwrap_or(0);
        if requested > capacity - in_use {
            return Err(insufficient(name, requested, in_use, capacity));
        }
    }
    if !matches_node_affinity(pod, node) {
        return Err(predicate(
            NODE_AFFINITY,
            "node(s) didn't match Pod's node affinity/selector",
        ));
    }
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let wanted_node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default();
    if !wanted_node.is_empty() && wanted_node != node_name {
        return Err(predicate("NodeName", "node(s) didn't match the requested node name"));
    }
    let ports = host_ports(pod);
    if others
        .iter()
        .flat_map(|o| host_ports(o))
        .any(|held| ports.iter().any(|want| ports_conflict(want, &held)))
    {
        return Err(predicate(
            "NodePorts",
            "node(s) didn't have free ports for the requested pod ports",
        ));
    }
    let from_api = crate::annotations::from_api(pod);
    if from_api {
        let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default();
        let untolerated = taints
            .iter()
            .filter(|t| t.effect == "NoExecute")
            .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)));
        if untolerated {
            return Err(predicate(
                "TaintToleration",
                "node(s) had taints that the pod didn't tolerate",
            ));
        }
    }
    Ok(())
}

/// core/v1 `Toleration.ToleratesTaint`.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if toleration
        .effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect)
    {
        return false;
    }
    if toleration
        .key
        .as_deref()
        .is_some_and(|k| !k.is_empty() && k != taint.key)
    {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => toleration.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default(),
        _ => false,
    }
}

/// `nodeSelector` and the required node affinity's terms (any term; all of a term's
/// requirements; a term with none matches nothing), `matchFields` on `metadata.name`.
pub fn matches_node_affinity(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return true };
    let labels = node.metadata.labels.clone().unwrap_or_default();
    if spec
        .node_selector
        .iter()
        .flatten()
        .any(|(k, v)| labels.get(k) != Some(v))
    {
        return false;
    }
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|s| s.node_selector_terms.as_slice());
    let Some(terms) = terms else { return true };
    let fields = BTreeMap::from([(
        "metadata.name".to_string(),
        node.metadata.name.clone().unwrap_or_default(),
    )]);
    terms.iter().any(|term| {
        let exprs = term.match_expressions.as_deref().unwrap_or_default();
        let field_exprs = term.match_fields.as_deref().unwrap_or_default();
        (!exprs.is_empty() || !field_exprs.is_empty())
            && exprs.iter().all(|e| requirement(e, &labels))
            && field_exprs.iter().all(|e| requirement(e, &fields))
    })
}

fn requirement(expr: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&expr.key).map(String::as_str);
    let values: Vec<&str> = expr.values.iter().flatten().map(String::as_str).collect();
    let number = |s: &str| s.parse::<i64>().ok();
    let compare = |ordering: std::cmp::Ordering| {
        let bound = (values.len() == 1).then(|| number(values[0])).flatten();
        matches!((value.and_then(number), bound), (Some(v), Some(b)) if v.cmp(&b) == ordering)
    };
    match expr.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => compare(std::cmp::Ordering::Greater),
        "Lt" => compare(std::cmp::Ordering::Less),
        _ => false,
    }
}

/// A host port: (host IP, protocol, port).
type HostPort = (String, String, i32);

fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|p| *p > 0)?;
            let ip = p
                .host_ip
                .clone()
                .filter(|ip| !ip.is_empty())
                .unwrap_or_else(|| "0.0.0.0".into());
            Some((ip, p.protocol.clone().unwrap_or_else(|| "TCP".into()), port))
        })
        .collect()
}

fn ports_conflict(a: &HostPort, b: &HostPort) -> bool {
    let wildcard = |ip: &str| ip == "0.0.0.0" || ip == "::";
    a.1 == b.1 && a.2 == b.2 && (a.0 == b.0 || wildcard(&a.0) || wildcard(&b.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Affinity, Container, ContainerPort, NodeAffinity, NodeSelector, NodeSelectorTerm, NodeSpec, NodeStatus,
        PodSpec, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node() -> Node {
        let q = |s: &str| Quantity(s.to_string());
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                labels: Some(BTreeMap::from([("kubernetes.io/hostname".into(), "n1".into())])),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                allocatable: Some(BTreeMap::from([
                    ("cpu".into(), q("2")),
                    ("memory".into(), q("1Gi")),
                    ("pods".into(), q("3")),
                ])),
                ..Default::default()
            }),
        }
    }

    fn pod(name: &str, requests: &[(&str, &str)]) -> Pod {
        let requests: BTreeMap<String, Quantity> = requests
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect();
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some(BTreeMap::from([(
                    crate::annotations::CONFIG_SOURCE.to_string(),
                    dockerlet_messages::source::PodSource::Api.to_string(),
                )])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: (!requests.is_empty()).then_some(requests),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn rejection(pod: &Pod, others: &[&Pod]) -> (String, String) {
        let r = admit(pod, &node(), others).expect_err("rejected");
        (r.reason, r.message)
    }

    #[test]
    fn resources_are_checked_against_allocatable_less_the_other_pods() {
        let one_cpu = pod("a", &[("cpu", "1")]);
        assert_eq!(admit(&one_cpu, &node(), &[]), Ok(()));
        let big = pod("b", &[("cpu", "1500m"), ("memory", "2Gi")]);
        assert_eq!(
            rejection(&big, &[&one_cpu]),
            (
                "OutOfcpu".into(),
                "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000".into()
            )
        );
        let memory = pod("m", &[("memory", "2Gi")]);
        assert_eq!(
            rejection(&memory, &[]),
            (
                "OutOfmemory".into(),
                "Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824".into()
            )
        );
        let best_effort = pod("e", &[]);
        assert_eq!(
            rejection(&best_effort, &[&one_cpu, &one_cpu, &one_cpu]),
            (
                "OutOfpods".into(),
                "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3".into()
            )
        );
    }

    #[test]
    fn extended_resources_the_node_lacks_are_not_checked_but_native_ones_are() {
        assert_eq!(admit(&pod("g", &[("example.com/gpu", "1")]), &node(), &[]), Ok(()));
        let mut with_gpus = node();
        let status = with_gpus.status.as_mut().unwrap();
        status
            .allocatable
            .as_mut()
            .unwrap()
            .insert("example.com/gpu".into(), Quantity("1".into()));
        let two = pod("g", &[("example.com/gpu", "2")]);
        assert_eq!(admit(&two, &with_gpus, &[]).unwrap_err().reason, "OutOfexample.com/gpu");
        let huge = pod("h", &[("hugepages-2Mi", "2Mi")]);
        assert_eq!(rejection(&huge, &[]).0, "OutOfhugepages-2Mi");
    }

    #[test]
    fn node_affinity_selector_name_and_ports() {
        let mut picky = pod("p", &[]);
        let spec = picky.spec.as_mut().unwrap();
        spec.node_selector = Some(BTreeMap::from([("disk".into(), "ssd".into())]));
        assert_eq!(
            rejection(&picky, &[]),
            (
                "NodeAffinity".into(),
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector".into()
            )
        );
        let mut by_name = pod("f", &[]);
        by_name.spec.as_mut().unwrap().affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_fields: Some(vec![NodeSelectorRequirement {
                            key: "metadata.name".into(),
                            operator: "In".into(),
                            values: Some(vec!["n1".into()]),
                        }]),
                        ..Default::default()
                    }],
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(admit(&by_name, &node(), &[]), Ok(()));

        let mut elsewhere = pod("x", &[]);
        elsewhere.spec.as_mut().unwrap().node_name = Some("n2".into());
        assert_eq!(rejection(&elsewhere, &[]).0, "NodeName");

        let with_port = |name: &str, ip: Option<&str>| {
            let mut p = pod(name, &[]);
            p.spec.as_mut().unwrap().containers[0].ports = Some(vec![ContainerPort {
                container_port: 80,
                host_port: Some(8080),
                host_ip: ip.map(str::to_string),
                ..Default::default()
            }]);
            p
        };
        let holder = with_port("a", None);
        assert_eq!(
            rejection(&with_port("b", Some("127.0.0.1")), &[&holder]),
            (
                "NodePorts".into(),
                "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports".into()
            )
        );
    }

    #[test]
    fn no_execute_taints_refuse_api_pods_only() {
        let mut tainted = node();
        tainted.spec.as_mut().unwrap().taints = Some(vec![
            Taint {
                key: "k".into(),
                value: Some("v".into()),
                effect: "NoExecute".into(),
                ..Default::default()
            },
            Taint {
                key: "soft".into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            },
        ]);
        let api_pod = pod("a", &[]);
        let r = admit(&api_pod, &tainted, &[]).unwrap_err();
        assert_eq!(r.reason, "TaintToleration");
        assert_eq!(
            r.message,
            "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
        );
        let mut tolerant = api_pod.clone();
        tolerant.spec.as_mut().unwrap().tolerations = Some(vec![Toleration {
            key: Some("k".into()),
            operator: Some("Equal".into()),
            value: Some("v".into()),
            ..Default::default()
        }]);
        assert_eq!(admit(&tolerant, &tainted, &[]), Ok(()));
        let mut static_pod = api_pod;
        static_pod.metadata.annotations = None;
        assert_eq!(admit(&static_pod, &tainted, &[]), Ok(()));
    }
}
