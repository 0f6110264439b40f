//! Ephemeral containers (`kubectl debug`), as upstream `ephemeral_containers.go` checks them:
//! one added to a running pod starts (in its target's process namespace), answers exec and
//! logs, and a second one can be added with a replace of the `ephemeralcontainers`
//! subresource. Ported to busybox, through kubectl and the test API server.

mod common;

use dockerlet_integration_tests::{wait_until, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::Value;

const POD: &str = "ephemeral-containers-target-pod";

/// The ephemeral container `name`'s status, once it runs.
fn running<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    pod["status"]["ephemeralContainerStatuses"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name && s["state"]["running"].is_object())
}

#[test]
fn an_ephemeral_container_starts_in_a_running_pod_and_answers_exec_and_logs() {
    let (api, agent, _manifests) = common::proxied_node("ephemeral");
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {POD}}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 2
  containers:
  - name: test-container-1
    image: dockerlet.local/busybox:1
    command: ["/bin/sleep", "10000"]
"#,
        node = agent.node()
    );
    common::kubectl_create(&api, "target.yaml", &yaml);
    common::wait_for_phase(&api, POD, "Running", POD_START_TIMEOUT);

    let before = api.get("pods", "default", POD).expect("pod");
    assert_eq!(before["metadata"]["generation"], 1, "{before}");
    api.kubectl_ok(&[
        "debug",
        POD,
        "-c",
        "debugger",
        "--image=dockerlet.local/busybox:1",
        "--image-pull-policy=IfNotPresent",
        "--target=test-container-1",
        "--",
        "sh",
        "-c",
        "while true; do echo polo; sleep 2; done",
    ]);
    let pod = wait_until("the ephemeral container running", CHANGE_TIMEOUT, || {
        let pod = api.get("pods", "default", POD).ok_or("no pod")?;
        running(&pod, "debugger")
            .is_some()
            .then_some(pod.clone())
            .ok_or_else(|| pod["status"].to_string())
    });
    let status = running(&pod, "debugger").expect("running");
    assert_eq!(status["ready"], false, "{status}");
    assert_eq!(pod["status"]["phase"], "Running");
    assert_eq!(pod["metadata"]["generation"], 2, "{pod}");

    let marco = api.kubectl_ok(&["exec", POD, "-c", "debugger", "--", "/bin/echo", "marco"]);
    assert_eq!(marco.trim(), "marco");
    // --target: the target's processes are visible from the ephemeral container.
    let ps = api.kubectl_ok(&["exec", POD, "-c", "debugger", "--", "ps", "-o", "args"]);
    assert!(ps.contains("/bin/sleep 10000"), "{ps}");
    wait_until("polo in its log", CHANGE_TIMEOUT, || {
        let logs = api.kubectl_ok(&["logs", POD, "-c", "debugger"]);
        logs.contains("polo").then_some(()).ok_or(logs)
    });

    // "should update the ephemeral containers in an existing pod": a second one through a
    // replace of the subresource.
    let mut current = api.get("pods", "default", POD).expect("pod");
    current["spec"]["ephemeralContainers"]
        .as_array_mut()
        .expect("ephemeral containers")
        .push(serde_json::json!({
            "name": "debugger2",
            "image": "dockerlet.local/busybox:1",
            "imagePullPolicy": "IfNotPresent",
            "command": ["sleep", "3600"],
        }));
    let file = api.dir().join("update.json");
    std::fs::write(&file, current.to_string()).expect("write the update");
    api.kubectl_ok(&[
        "replace",
        "--raw",
        &format!("/api/v1/namespaces/default/pods/{POD}/ephemeralcontainers"),
        "-f",
        file.to_str().expect("utf-8 path"),
    ]);
    let pod = wait_until("both ephemeral containers running", CHANGE_TIMEOUT, || {
        let pod = api.get("pods", "default", POD).ok_or("no pod")?;
        (running(&pod, "debugger").is_some() && running(&pod, "debugger2").is_some())
            .then_some(pod.clone())
            .ok_or_else(|| pod["status"].to_string())
    });
    assert_eq!(pod["spec"]["ephemeralContainers"].as_array().map(Vec::len), Some(2));
    let first = running(&pod, "debugger").expect("running");
    assert_eq!(first["restartCount"], 0, "the first one was not restarted: {first}");

    // `kubectl debug -i`: kubectl waits for the container to run, then attaches to its stdin.
    let out = common::kubectl_with_stdin(
        &api,
        &[],
        &[
            "debug",
            "-i",
            POD,
            "-c",
            "interactive",
            "--image=dockerlet.local/busybox:1",
            "--image-pull-policy=IfNotPresent",
            "--",
            "sh",
        ],
        Some(b"echo hello-from-debug; exit 0\n"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("hello-from-debug"),
        "{} stdout={stdout:?} stderr={:?}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
