//! Pods created without `spec.nodeName`, as upstream's e2e tests create most of them: the test
//! API server's scheduler binds them to the agent's node as kube-scheduler would (event
//! `Scheduled`, `PodScheduled=True`), or leaves them Pending with kube-scheduler's
//! `Unschedulable` message until a node fits. Through kubectl.

mod common;

use dockerlet_integration_tests::{wait_until, CHANGE_TIMEOUT, POD_START_TIMEOUT};

use common::condition;

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

/// kubelet's predicate admission, for pods bound by `spec.nodeName` (no scheduler): a pod the
/// node cannot fit fails with kubelet's reason and message, and the node's labels and taints
/// are read from the API's Node as it changes.
#[test]
fn pods_bound_to_a_node_that_cannot_take_them_are_rejected_as_kubelet_rejects_them() {
    let (api, agent, _manifests) = common::proxied_node("node-fit");
    let node = agent.node().to_string();
    let allocatable = api.get("nodes", "", &node).expect("the node")["status"]["allocatable"]["cpu"].clone();
    let cores: i64 = allocatable.as_str().and_then(|c| c.parse().ok()).expect("whole cores");
    let pod = |name: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {node}\n  \
             terminationGracePeriodSeconds: 1\n{extra}  containers:\n  - name: c\n    \
             image: dockerlet.local/busybox:1\n    command: [\"sleep\", \"3600\"]\n    \
             resources: {{requests: {{cpu: 100m}}}}\n"
        )
    };
    let too_big = pod("too-big", "").replace("cpu: 100m", &format!("cpu: \"{}\"", cores + 1));
    let picky = pod("picky", "  nodeSelector: {disk: ssd}\n");
    common::kubectl_create(&api, "rejected.yaml", &format!("{too_big}---\n{picky}"));

    let failed = common::wait_for_phase(&api, "too-big", "Failed", POD_START_TIMEOUT);
    assert_eq!(failed["status"]["reason"], "OutOfcpu");
    assert_eq!(
        failed["status"]["message"],
        format!(
            "Pod was rejected: Node didn't have enough resource: cpu, requested: {}, used: 0, capacity: {}",
            (cores + 1) * 1000,
            cores * 1000
        )
    );
    let picky = common::wait_for_phase(&api, "picky", "Failed", POD_START_TIMEOUT);
    assert_eq!(picky["status"]["reason"], "NodeAffinity");
    assert_eq!(
        picky["status"]["message"],
        "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
    );
    let events = api.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=too-big,reason=OutOfcpu",
        "-o",
        "jsonpath={.items[*].type}",
    ]);
    assert_eq!(events, "Warning");
    let containers = dockerlet_integration_tests::docker::node_containers(&node);
    assert!(
        !containers
            .iter()
            .any(|c| c.pod_name() == "too-big" || c.pod_name() == "picky"),
        "a rejected pod gets no container"
    );

    // The label is seen from the API's Node: the same pod admitted now.
    api.kubectl_ok(&["label", "node", &node, "disk=ssd"]);
    wait_until("the agent sees the label", CHANGE_TIMEOUT, || {
        let n = api.get("nodes", "", &node).ok_or_else(|| "no node".to_string())?;
        (n["metadata"]["labels"]["disk"] == "ssd")
            .then_some(())
            .ok_or_else(|| "not yet".to_string())
    });
    std::thread::sleep(std::time::Duration::from_secs(1));
    let labelled = pod("labelled", "  nodeSelector: {disk: ssd}\n");
    common::kubectl_create(&api, "labelled.yaml", &labelled);
    common::wait_for_phase(&api, "labelled", "Running", POD_START_TIMEOUT);

    // A NoExecute taint refuses API pods that do not tolerate it.
    api.kubectl_ok(&["taint", "node", &node, "dedicated=x:NoExecute"]);
    std::thread::sleep(std::time::Duration::from_secs(1));
    let tolerant = pod(
        "tolerant",
        "  tolerations: [{key: dedicated, operator: Equal, value: x, effect: NoExecute}]\n",
    );
    common::kubectl_create(
        &api,
        "tainted.yaml",
        &format!("{}---\n{tolerant}", pod("intolerant", "")),
    );
    let intolerant = common::wait_for_phase(&api, "intolerant", "Failed", POD_START_TIMEOUT);
    assert_eq!(intolerant["status"]["reason"], "TaintToleration");
    common::wait_for_phase(&api, "tolerant", "Running", POD_START_TIMEOUT);
    api.kubectl_ok(&["delete", "pod", "--all", "--wait=true"]);
}
