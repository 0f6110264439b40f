//! RuntimeClass (upstream `runtimeclass.go`): a pod's `runtimeClassName` picks the Docker
//! runtime its sandbox and containers run with (the class's handler); a handler the engine has
//! no runtime for fails the sandbox (FailedCreatePodSandBox, the pod Pending), and the API
//! server refuses a pod naming no existing class.

mod common;

use dockerlet_integration_tests::docker::inspect_many;
use dockerlet_integration_tests::{wait_until, CHANGE_TIMEOUT, POD_START_TIMEOUT};

#[test]
fn a_runtime_class_picks_the_docker_runtime_and_an_unknown_handler_fails_the_sandbox() {
    let (api, agent, _manifests) = common::proxied_node("runtime-class");
    let yaml = format!(
        r#"apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {{name: runc-class}}
handler: runc
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {{name: unconfigured}}
handler: test-handler
---
apiVersion: v1
kind: Pod
metadata: {{name: with-runc}}
spec:
  nodeName: {node}
  runtimeClassName: runc-class
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    command: ["sleep", "3600"]
---
apiVersion: v1
kind: Pod
metadata: {{name: with-unconfigured}}
spec:
  nodeName: {node}
  runtimeClassName: unconfigured
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    command: ["sleep", "3600"]
"#,
        node = agent.node()
    );
    common::kubectl_create(&api, "classes.yaml", &yaml);
    let pod = common::wait_for_phase(&api, "with-runc", "Running", POD_START_TIMEOUT);
    let uid = pod["metadata"]["uid"].as_str().expect("uid");
    let ids: Vec<String> = agent.pod_containers(uid).iter().map(|c| c.id.clone()).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let runtimes: Vec<String> = inspect_many(&ids)
        .iter()
        .map(|c| c.host_config.runtime.clone().unwrap_or_default())
        .collect();
    assert_eq!(runtimes, ["runc", "runc"], "sandbox and container: {runtimes:?}");

    let event = wait_until(
        "FailedCreatePodSandBox for the unconfigured handler",
        CHANGE_TIMEOUT,
        || {
            let events = api.list("events");
            events
                .iter()
                .find(|e| e["involvedObject"]["name"] == "with-unconfigured" && e["reason"] == "FailedCreatePodSandBox")
                .cloned()
                .ok_or_else(|| format!("{} events", events.len()))
        },
    );
    let message = event["message"].as_str().unwrap_or_default();
    assert!(message.contains("test-handler"), "{message}");
    let stuck = api.get("pods", "default", "with-unconfigured").expect("pod");
    assert_eq!(stuck["status"]["phase"], "Pending", "{stuck}");

    let refused = api.kubectl(&[
        "run",
        "no-class",
        "--image=dockerlet.local/busybox:1",
        "--overrides",
        r#"{"spec": {"runtimeClassName": "nope"}}"#,
    ]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(r#"pod rejected: RuntimeClass "nope" not found"#),
        "{stderr}"
    );
}
