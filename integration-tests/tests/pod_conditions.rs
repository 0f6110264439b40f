//! Pod conditions others drive, and pods for another OS: upstream `pods.go` "should support
//! pod readiness gates" (Ready follows the gates' conditions, which a client patches into the
//! status) and `pod_admission.go` "should reject pod when the node OS doesn't match pod's OS"
//! (phase Failed, reason PodOSNotSupported); and `container_probe.go`'s Ready while a pod
//! terminates. Through kubectl and the test API server.

mod common;

use dockerlet_integration_tests::{holds_for, wait_until, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::Value;

use common::condition;

#[test]
fn ready_follows_the_readiness_gates_and_another_os_is_rejected() {
    let (api, agent, _manifests) = common::proxied_node("pod-conditions");
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: pod-ready}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  readinessGates:
  - conditionType: k8s.io/test-condition1
  - conditionType: k8s.io/test-condition2
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    command: ["sleep", "3600"]
---
apiVersion: v1
kind: Pod
metadata: {{name: windows-pod}}
spec:
  nodeName: {node}
  os: {{name: windows}}
  containers:
  - name: c
    image: dockerlet.local/busybox:1
"#,
        node = agent.node()
    );
    common::kubectl_create(&api, "pods.yaml", &yaml);

    // Waits for the Ready condition to be `want` with `message` (any, if empty).
    let ready_is = |want: &str, message: &str, what: &str| {
        wait_until(what, CHANGE_TIMEOUT, || {
            let pod = api.get("pods", "default", "pod-ready").ok_or("no pod")?;
            let ready = condition(&pod, "Ready");
            (pod["status"]["phase"] == "Running"
                && condition(&pod, "ContainersReady")["status"] == "True"
                && ready["status"] == want
                && (message.is_empty() || ready["message"] == message))
                .then_some(ready.clone())
                .ok_or_else(|| pod["status"].to_string())
        })
    };
    let ready = ready_is("False", "", "the pod running, not Ready");
    assert_eq!(ready["reason"], "ReadinessGatesNotReady", "{ready}");
    let patch = |kind: &str, status: &str| {
        let body = format!(r#"{{"status":{{"conditions":[{{"type":"{kind}","status":"{status}"}}]}}}}"#);
        api.kubectl_ok(&[
            "patch",
            "pod",
            "pod-ready",
            "--subresource=status",
            "--type=strategic",
            "-p",
            &body,
        ]);
    };
    patch("k8s.io/test-condition1", "True");
    ready_is(
        "False",
        r#"corresponding condition of pod readiness gate "k8s.io/test-condition2" does not exist."#,
        "still not Ready with one gate",
    );
    patch("k8s.io/test-condition2", "True");
    ready_is("True", "", "Ready with both gates");
    patch("k8s.io/test-condition1", "False");
    ready_is(
        "False",
        r#"the status of pod readiness gate "k8s.io/test-condition1" is not "True", but False"#,
        "not Ready once a gate is False",
    );
    let pod = api.get("pods", "default", "pod-ready").expect("pod");
    assert_eq!(
        condition(&pod, "k8s.io/test-condition2")["status"],
        "True",
        "the node keeps the conditions others set: {pod}"
    );
    // pods.go "should patch a pod status": a client's status fields stay.
    api.kubectl_ok(&[
        "patch",
        "pod",
        "pod-ready",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"message":"Patched by e2e test","reason":"E2E"}}"#,
    ]);
    patch("k8s.io/test-condition1", "True");
    ready_is("True", "", "Ready again, after the node wrote its status");
    holds_for("the patched status fields", std::time::Duration::from_secs(3), || {
        let pod = api.get("pods", "default", "pod-ready").ok_or("no pod")?;
        (pod["status"]["message"] == "Patched by e2e test" && pod["status"]["reason"] == "E2E")
            .then_some(())
            .ok_or_else(|| pod["status"].to_string())
    });

    let rejected = common::wait_for_phase(&api, "windows-pod", "Failed", POD_START_TIMEOUT);
    assert_eq!(rejected["status"]["reason"], "PodOSNotSupported", "{rejected}");
    assert_eq!(
        rejected["status"]["message"],
        "Pod was rejected: Failed to admit pod as the OS field doesn't match node OS"
    );
    let uid = rejected["metadata"]["uid"].as_str().expect("uid");
    assert!(agent.pod_containers(uid).is_empty(), "nothing ran");
}

/// container_probe.go's readiness-while-terminating tests: once deleted, the pod keeps being
/// probed for readiness, so Ready turns False when the container's SIGTERM trap removes its
/// ready file; its liveness probe (failing just the same) no longer runs, so nothing kills it.
#[test]
fn readiness_is_probed_while_terminating_and_liveness_is_not() {
    let (api, agent, _manifests) = common::proxied_node("terminating-readiness");
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: probe-test}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 60
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "touch /tmp/ready; trap 'rm -f /tmp/ready; sleep 12; exit 0' TERM; sleep 3600 & wait"]
    readinessProbe:
      exec: {{command: ["cat", "/tmp/ready"]}}
      periodSeconds: 1
      failureThreshold: 1
    livenessProbe:
      exec: {{command: ["cat", "/tmp/ready"]}}
      periodSeconds: 1
      failureThreshold: 1
"#,
        node = agent.node()
    );
    common::kubectl_create(&api, "probe-test.yaml", &yaml);
    wait_until("the pod Ready", POD_START_TIMEOUT, || {
        let pod = api.get("pods", "default", "probe-test").ok_or("no pod")?;
        (condition(&pod, "Ready")["status"] == "True")
            .then_some(())
            .ok_or_else(|| pod["status"].to_string())
    });
    api.kubectl_ok(&["delete", "pod", "probe-test", "--wait=false"]);
    let pod = wait_until("Ready False while terminating", CHANGE_TIMEOUT, || {
        let pod = api.get("pods", "default", "probe-test").ok_or("the pod went first")?;
        (condition(&pod, "Ready")["status"] == "False")
            .then_some(pod.clone())
            .ok_or_else(|| pod["status"].to_string())
    });
    assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");
    wait_until("the pod gone", CHANGE_TIMEOUT, || {
        api.get("pods", "default", "probe-test")
            .map(|p| p["status"].to_string())
            .map_or(Ok(()), Err)
    });
    let liveness_kills: Vec<Value> = api
        .list("events")
        .into_iter()
        .filter(|e| {
            e["involvedObject"]["name"] == "probe-test"
                && e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("failed liveness probe"))
        })
        .collect();
    assert!(liveness_kills.is_empty(), "{liveness_kills:?}");
}
