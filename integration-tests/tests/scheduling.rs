//! Pods created without `spec.nodeName`, as upstream's e2e tests create most of them: the test
//! API server's scheduler binds them to the agent's node as kube-scheduler would (event
//! `Scheduled`, `PodScheduled=True`), or leaves them Pending with kube-scheduler's
//! `Unschedulable` message until a node fits. Through kubectl.

mod common;

use dockerlet_integration_tests::{wait_until, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::Value;

fn condition(pod: &Value, kind: &str) -> Value {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn unbound_pods_are_scheduled_onto_the_node_that_fits_them() {
    let (api, agent, _manifests) = common::proxied_node("scheduling");
    let node = agent.node().to_string();
    let yaml = r#"apiVersion: v1
kind: Pod
metadata: {name: anywhere}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo scheduled; sleep 3600"]
---
apiVersion: v1
kind: Pod
metadata: {name: picky}
spec:
  terminationGracePeriodSeconds: 1
  nodeSelector: {disk: ssd}
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    command: ["sleep", "3600"]
"#;
    common::kubectl_create(&api, "pods.yaml", yaml);

    let running = common::wait_for_phase(&api, "anywhere", "Running", POD_START_TIMEOUT);
    assert_eq!(running["spec"]["nodeName"], node.as_str());
    assert_eq!(condition(&running, "PodScheduled")["status"], "True");
    let logs = api.kubectl_ok(&["logs", "anywhere"]);
    assert_eq!(logs, "scheduled\n");
    let events = api.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=anywhere,reason=Scheduled",
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert_eq!(events, format!("Successfully assigned default/anywhere to {node}"));

    // No node has the label: Pending, with kube-scheduler's condition and event.
    let picky = wait_until("picky unschedulable", CHANGE_TIMEOUT, || {
        let pod = api.get("pods", "default", "picky").ok_or("no pod")?;
        (condition(&pod, "PodScheduled")["reason"] == "Unschedulable")
            .then_some(pod.clone())
            .ok_or_else(|| pod["status"].to_string())
    });
    let scheduled = condition(&picky, "PodScheduled");
    assert_eq!(scheduled["status"], "False");
    assert_eq!(
        scheduled["message"],
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    );
    assert_eq!(picky["status"]["phase"], "Pending");
    assert!(picky["spec"]["nodeName"].is_null());
    let failed = api.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=picky,reason=FailedScheduling",
        "-o",
        "jsonpath={.items[*].type}",
    ]);
    assert_eq!(failed, "Warning");

    // Once the node has the label, the next try binds it.
    api.kubectl_ok(&["label", "node", &node, "disk=ssd"]);
    let picky = common::wait_for_phase(&api, "picky", "Running", POD_START_TIMEOUT);
    assert_eq!(picky["spec"]["nodeName"], node.as_str());
    assert_eq!(condition(&picky, "PodScheduled")["status"], "True");
    api.kubectl_ok(&["delete", "pod", "anywhere", "picky", "--wait=true"]);
}
