//! A small kube-scheduler, so that a pod created without `spec.nodeName` runs on a node as it
//! would in a real cluster (`ApiServerConfig::scheduler`, default on).
//!
//! [`place`] runs kube-scheduler's default filter plugins that a node agent's tests meet, with
//! their messages:
//! - NodeUnschedulable and the node lifecycle controller's taints: a node whose `Ready`
//!   condition is not `True` counts as tainted `node.kubernetes.io/not-ready:NoSchedule`
//!   (`Unknown`: `node.kubernetes.io/unreachable`), an unschedulable one as
//!   `node.kubernetes.io/unschedulable:NoSchedule`;
//! - TaintToleration (`NoSchedule` and `NoExecute` taints must be tolerated);
//! - NodeAffinity (`nodeSelector` and the required node affinity's terms, with `matchFields` on
//!   `metadata.name`);
//! - NodePorts (host ports in use by another pod on the node);
//! - NodeResourcesFit (`cpu`, `memory`, `ephemeral-storage`, extended resources and the pod
//!   count, against `status.allocatable` less what the node's pods request).
//!
//! Of the feasible nodes the one with the fewest pods wins (then the first by name). A pod
//! that fits nowhere gets `PodScheduled=False` with reason `Unschedulable` and kube-scheduler's
//! message (`0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable.`), and
//! is tried again on every change of a node or a pod. Not covered: preemption, scoring beyond
//! the pod count, inter-pod affinity and spreading, volumes.

use std::collections::BTreeMap;

use dockerlet_pod::quantity::parse_quantity;
use serde_json::{json, Value};

/// kube-scheduler's name, the default `spec.schedulerName`.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Whether this scheduler should place `pod` now: unbound, for the default scheduler, not being
/// deleted, not finished, and not held by scheduling gates.
pub fn wants(pod: &Value) -> bool {
    let spec = &pod["spec"];
    spec["nodeName"].as_str().unwrap_or_default().is_empty()
        && spec["schedulerName"].as_str().is_none_or(|s| s == DEFAULT_SCHEDULER)
        && pod["metadata"]["deletionTimestamp"].is_null()
        && !matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

/// Why a pod with scheduling gates waits (kube-scheduler's `SchedulingGated` condition).
pub fn gated(pod: &Value) -> bool {
    pod["spec"]["schedulingGates"].as_array().is_some_and(|g| !g.is_empty())
}

/// Why no node fits a pod: kube-scheduler's `FitError` message (`0/N nodes are available: …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unschedulable(pub String);

impl From<&str> for Unschedulable {
    fn from(message: &str) -> Self {
        Unschedulable(message.to_string())
    }
}

/// The node for `pod` among `nodes`, given the pods already bound (`bound`, any node; finished
/// ones do not count); or kube-scheduler's message for why none fits.
pub fn place(pod: &Value, nodes: &[Value], bound: &[Value]) -> Result<String, Unschedulable> {
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut feasible: Vec<(usize, &str)> = Vec::new();
    for node in nodes {
        let name = node["metadata"]["name"].as_str().unwrap_or_default();
        let on_node: Vec<&Value> = bound
            .iter()
            .filter(|p| p["spec"]["nodeName"].as_str() == Some(name))
            .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
            .collect();
        match filter(pod, node, &on_node) {
            Ok(()) => feasible.push((on_node.len(), name)),
            Err(why) => {
                for reason in why {
                    *reasons.entry(reason).or_default() += 1;
                }
            }
        }
    }
    if let Some((_, name)) = feasible.into_iter().min() {
        return Ok(name.to_string());
    }
    let mut message = format!("0/{} nodes are available", nodes.len());
    if !reasons.is_empty() {
        // kube-scheduler's FitError: "<count> <reason>" strings, sorted.
        let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        parts.sort();
        message.push_str(": ");
        message.push_str(&parts.join(", "));
    }
    message.push('.');
    Err(Unschedulable(message))
}

/// The filter plugins for one node, in kube-scheduler's order; the first that fails gives the
/// reasons (NodeResourcesFit may give several).
fn filter(pod: &Value, node: &Value, on_node: &[&Value]) -> Result<(), Vec<String>> {
    let tolerations = pod["spec"]["tolerations"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let unschedulable = json!({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"});
    if node["spec"]["unschedulable"] == true && !tolerations.iter().any(|t| tolerates(t, &unschedulable)) {
        return Err(vec!["node(s) were unschedulable".to_string()]);
    }
    if let Some(taint) = node_taints(node)
        .iter()
        .filter(|t| matches!(t["effect"].as_str(), Some("NoSchedule" | "NoExecute")))
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
    {
        let key = taint["key"].as_str().unwrap_or_default();
        let value = taint["value"].as_str().unwrap_or_default();
        return Err(vec![format!("node(s) had untolerated taint {{{key}: {value}}}")]);
    }
    if !matches_affinity(pod, node) {
        return Err(vec!["node(s) didn't match Pod's node affinity/selector".to_string()]);
    }
    let ports = host_ports(pod);
    if on_node
        .iter()
        .flat_map(|p| host_ports(p))
        .any(|used| ports.iter().any(|want| ports_conflict(want, &used)))
    {
        return Err(vec![
            "node(s) didn't have free ports for the requested pod ports".to_string()
        ]);
    }
    let why = insufficient(pod, node, on_node);
    if why.is_empty() {
        Ok(())
    } else {
        Err(why)
    }
}

const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// The node's taints, with the one the node lifecycle controller would add for its `Ready`
/// condition.
fn node_taints(node: &Value) -> Vec<Value> {
    let mut taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    let ready = node["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["status"].as_str());
    let controller = match ready {
        Some("True") => None,
        Some("False") => Some("node.kubernetes.io/not-ready"),
        _ => Some("node.kubernetes.io/unreachable"),
    };
    if let Some(key) = controller {
        taints.push(json!({"key": key, "effect": "NoSchedule"}));
    }
    taints
}

/// Whether `toleration` tolerates `taint` (core/v1 `Toleration.ToleratesTaint`).
fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let effect = toleration["effect"].as_str().unwrap_or_default();
    if !effect.is_empty() && Some(effect) != taint["effect"].as_str() {
        return false;
    }
    let key = toleration["key"].as_str().unwrap_or_default();
    if !key.is_empty() && Some(key) != taint["key"].as_str() {
        return false;
    }
    match toleration["operator"].as_str().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" => toleration["value"].as_str().unwrap_or_default() == taint["value"].as_str().unwrap_or_default(),
        _ => false,
    }
}

/// `nodeSelector` and the required node affinity (any term, each term all its requirements).
fn matches_affinity(pod: &Value, node: &Value) -> bool {
    let labels = &node["metadata"]["labels"];
    let selector_ok = pod["spec"]["nodeSelector"]
        .as_object()
        .is_none_or(|s| s.iter().all(|(k, v)| labels[k] == *v));
    let terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"]
        .as_array();
    let affinity_ok = terms.is_none_or(|terms| {
        terms.iter().any(|term| {
            let fields = json!({"metadata.name": node["metadata"]["name"]});
            let exprs = term["matchExpressions"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            let field_exprs = term["matchFields"].as_array().map(Vec::as_slice).unwrap_or_default();
            (!exprs.is_empty() || !field_exprs.is_empty())
                && exprs.iter().all(|e| requirement(e, labels))
                && field_exprs.iter().all(|e| requirement(e, &fields))
        })
    });
    selector_ok && affinity_ok
}

/// One `NodeSelectorRequirement` against a map of labels (or fields).
fn requirement(expr: &Value, labels: &Value) -> bool {
    let key = expr["key"].as_str().unwrap_or_default();
    let value = labels[key].as_str();
    let values: Vec<&str> = expr["values"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match expr["operator"].as_str().unwrap_or_default() {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => matches!((value.and_then(number), values.first().and_then(|v| number(v))), (Some(a), Some(b)) if a > b),
        "Lt" => matches!((value.and_then(number), values.first().and_then(|v| number(v))), (Some(a), Some(b)) if a < b),
        _ => false,
    }
}

/// A host port a pod asks for: (host IP, protocol, port).
type HostPort = (String, String, i64);

fn host_ports(pod: &Value) -> Vec<HostPort> {
    let containers = pod["spec"]["containers"].as_array().into_iter().flatten();
    let inits = pod["spec"]["initContainers"].as_array().into_iter().flatten();
    containers
        .chain(inits)
        .flat_map(|c| c["ports"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| {
            let port = p["hostPort"].as_i64().filter(|p| *p > 0)?;
            let ip = p["hostIP"].as_str().unwrap_or("0.0.0.0").to_string();
            let protocol = p["protocol"].as_str().unwrap_or("TCP").to_string();
            Some((ip, protocol, port))
        })
        .collect()
}

fn ports_conflict(a: &HostPort, b: &HostPort) -> bool {
    let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
    a.1 == b.1 && a.2 == b.2 && (a.0 == b.0 || wildcard(&a.0) || wildcard(&b.0))
}

/// What a pod requests, per resource (cpu in millicores, the rest in units), as the scheduler
/// counts it: the larger of the app containers' sum (sidecars included) and each ordinary init
/// container (with the sidecars declared before it), plus the overhead.
pub fn requests(pod: &Value) -> BTreeMap<String, i64> {
    let of = |c: &Value| -> BTreeMap<String, i64> {
        let requests = &c["resources"]["requests"];
        let limits = &c["resources"]["limits"];
        let mut out = BTreeMap::new();
        for source in [limits, requests] {
            for (name, q) in source.as_object().into_iter().flatten() {
                let milli = name == "cpu";
                if let Some(v) = q.as_str().and_then(|q| parse_quantity(q, milli)) {
                    out.insert(name.clone(), v);
                }
            }
        }
        out
    };
    let add = |total: &mut BTreeMap<String, i64>, more: &BTreeMap<String, i64>| {
        for (k, v) in more {
            *total.entry(k.clone()).or_default() += v;
        }
    };
    let mut total = BTreeMap::new();
    let mut sidecars = BTreeMap::new();
    let mut init_max: BTreeMap<String, i64> = BTreeMap::new();
    for init in pod["spec"]["initContainers"].as_array().into_iter().flatten() {
        let r = of(init);
        if init["restartPolicy"] == "Always" {
            add(&mut sidecars, &r);
        } else {
            let mut with = sidecars.clone();
            add(&mut with, &r);
            for (k, v) in with {
                let slot = init_max.entry(k).or_default();
                *slot = (*slot).max(v);
            }
        }
    }
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        add(&mut total, &of(c));
    }
    add(&mut total, &sidecars);
    for (k, v) in init_max {
        let slot = total.entry(k).or_default();
        *slot = (*slot).max(v);
    }
    let overhead = of(&json!({"resources": {"requests": pod["spec"]["overhead"]}}));
    add(&mut total, &overhead);
    total
}

/// NodeResourcesFit's reasons: `Too many pods`, `Insufficient <resource>`.
fn insufficient(pod: &Value, node: &Value, on_node: &[&Value]) -> Vec<String> {
    let allocatable = &node["status"]["allocatable"];
    let allocatable = |name: &str| {
        allocatable[name]
            .as_str()
            .and_then(|q| parse_quantity(q, name == "cpu"))
    };
    let mut why = Vec::new();
    if allocatable("pods").is_some_and(|max| on_node.len() as i64 + 1 > max) {
        why.push("Too many pods".to_string());
    }
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for other in on_node {
        for (k, v) in requests(other) {
            *used.entry(k).or_default() += v;
        }
    }
    for (name, want) in requests(pod).into_iter().filter(|(_, v)| *v > 0) {
        let have = allocatable(&name).unwrap_or(0);
        if want + used.get(&name).copied().unwrap_or(0) > have {
            why.push(format!("Insufficient {name}"));
        }
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, edit: impl FnOnce(&mut Value)) -> Value {
        let mut n = json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
            },
        });
        edit(&mut n);
        n
    }

    fn pod(edit: impl FnOnce(&mut Value)) -> Value {
        let mut p = json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        });
        edit(&mut p);
        p
    }

    #[test]
    fn the_node_with_the_fewest_pods_wins() {
        let nodes = [node("a", |_| {}), node("b", |_| {})];
        let on_a = pod(|p| p["spec"]["nodeName"] = json!("a"));
        assert_eq!(place(&pod(|_| {}), &nodes, &[]), Ok("a".into()));
        assert_eq!(place(&pod(|_| {}), &nodes, std::slice::from_ref(&on_a)), Ok("b".into()));
        let mut done = on_a;
        done["status"]["phase"] = json!("Succeeded");
        assert_eq!(place(&pod(|_| {}), &nodes, &[done]), Ok("a".into()));
    }

    #[test]
    fn no_node_gives_kube_schedulers_message() {
        assert_eq!(place(&pod(|_| {}), &[], &[]), Err("0/0 nodes are available.".into()));
        let nodes = [
            node("a", |n| n["spec"]["unschedulable"] = json!(true)),
            node("b", |n| n["status"]["conditions"][0]["status"] = json!("False")),
            node("c", |n| {
                n["spec"]["taints"] = json!([{"key": "k", "value": "v", "effect": "NoSchedule"}])
            }),
            node("d", |n| {
                n["spec"]["taints"] = json!([{"key": "k", "effect": "PreferNoSchedule"}])
            }),
        ];
        let p = pod(|p| p["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "x"}));
        assert_eq!(
            place(&p, &nodes, &[]),
            Err(
                "0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
                 1 node(s) had untolerated taint {k: v}, \
                 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, \
                 1 node(s) were unschedulable."
                    .into()
            )
        );
        assert_eq!(place(&pod(|_| {}), &nodes, &[]), Ok("d".into()));
    }

    #[test]
    fn tolerations_match_as_core_v1_does() {
        let taint = json!({"key": "k", "value": "v", "effect": "NoSchedule"});
        assert!(tolerates(&json!({"operator": "Exists"}), &taint));
        assert!(tolerates(&json!({"key": "k", "operator": "Exists"}), &taint));
        assert!(tolerates(&json!({"key": "k", "value": "v"}), &taint));
        assert!(!tolerates(&json!({"key": "k", "value": "w"}), &taint));
        assert!(!tolerates(
            &json!({"key": "k", "operator": "Exists", "effect": "NoExecute"}),
            &taint
        ));
        let nodes = [node("a", |n| n["spec"]["unschedulable"] = json!(true))];
        let tolerant = pod(|p| {
            p["spec"]["tolerations"] = json!([{"key": UNSCHEDULABLE_TAINT, "operator": "Exists"}]);
        });
        assert_eq!(place(&tolerant, &nodes, &[]), Ok("a".into()));
    }

    #[test]
    fn required_node_affinity_terms_are_ored_and_their_requirements_anded() {
        let nodes = [
            node("a", |n| n["metadata"]["labels"]["zone"] = json!("z1")),
            node("b", |_| {}),
        ];
        let term = |exprs: Value| {
            pod(|p| {
                p["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": exprs}}});
            })
        };
        let zone_z1 = json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]);
        assert_eq!(place(&term(zone_z1), &nodes, &[]), Ok("a".into()));
        let no_zone = json!([{"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}]);
        assert_eq!(place(&term(no_zone), &nodes, &[]), Ok("b".into()));
        let by_name = json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]);
        assert_eq!(place(&term(by_name), &nodes, &[]), Ok("b".into()));
        let either = json!([
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z9"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a"]}]},
        ]);
        assert_eq!(place(&term(either), &nodes, &[]), Ok("b".into()));
        assert!(
            place(&term(json!([{}])), &nodes, &[]).is_err(),
            "an empty term matches nothing"
        );
    }

    #[test]
    fn several_resources_can_be_short_at_once() {
        let nodes = [node("a", |_| {})];
        let p = pod(|p| p["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "3", "memory": "5Gi"}}));
        assert_eq!(
            place(&p, &nodes, &[]),
            Err("0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.".into())
        );
    }

    #[test]
    fn resources_and_host_ports_must_fit() {
        let nodes = [node("a", |_| {})];
        let big = pod(|p| p["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "1500m"}}));
        let bound = pod(|p| {
            p["spec"]["nodeName"] = json!("a");
            p["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "1", "memory": "1Gi"}});
            p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8080}]);
        });
        assert_eq!(place(&big, &nodes, &[]), Ok("a".into()));
        assert_eq!(
            place(&big, &nodes, std::slice::from_ref(&bound)),
            Err("0/1 nodes are available: 1 Insufficient cpu.".into())
        );
        let gpu = pod(|p| p["spec"]["containers"][0]["resources"] = json!({"limits": {"example.com/gpu": "1"}}));
        assert_eq!(
            place(&gpu, &nodes, &[]),
            Err("0/1 nodes are available: 1 Insufficient example.com/gpu.".into())
        );
        let port = |ip: &str| {
            pod(|p| {
                p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8080, "hostIP": ip}])
            })
        };
        assert!(place(&port("127.0.0.1"), &nodes, std::slice::from_ref(&bound)).is_err());
        let mut udp = port("0.0.0.0");
        udp["spec"]["containers"][0]["ports"][0]["protocol"] = json!("UDP");
        assert_eq!(place(&udp, &nodes, &[bound]), Ok("a".into()));
        let full = [node("a", |n| n["status"]["allocatable"]["pods"] = json!("1"))];
        let one = pod(|p| p["spec"]["nodeName"] = json!("a"));
        assert_eq!(
            place(&pod(|_| {}), &full, &[one]),
            Err("0/1 nodes are available: 1 Too many pods.".into())
        );
    }

    #[test]
    fn requests_count_init_containers_sidecars_and_overhead() {
        let p = pod(|p| {
            p["spec"]["containers"] = json!([
                {"name": "a", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "b", "resources": {"limits": {"cpu": "200m", "memory": "64Mi"}}},
            ]);
            p["spec"]["initContainers"] = json!([
                {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
                {"name": "i", "resources": {"requests": {"cpu": "1"}}},
            ]);
            p["spec"]["overhead"] = json!({"cpu": "10m"});
        });
        let r = requests(&p);
        assert_eq!(
            r["cpu"], 1060,
            "the init container with the sidecar before it, plus the overhead"
        );
        assert_eq!(r["memory"], 64 << 20, "a limit alone is the request");
    }
}
