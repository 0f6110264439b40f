//! Upstream `e2e_node/log_path_test.go` ("ContainerLogPath", NodeConformance): a container's
//! log is on the node at kubelet's paths, `/var/log/containers/<pod>_<ns>_<container>-<id>.log`
//! and the CRI log path `<pod logs dir>/<ns>_<pod>_<uid>/<container>/0.log`, which a checker
//! pod mounts by hostPath (`FileOrCreate`) and greps. Once the pod is deleted both are gone.

mod common;

use dockerlet_integration_tests::{wait_until, CHANGE_TIMEOUT, POD_START_TIMEOUT};

const LOG_STRING: &str = "This is the expected log content of this node e2e test";

#[test]
fn container_logs_are_at_kubelets_log_paths_until_the_pod_goes() {
    let (api, agent, _manifests) = common::proxied_node("log-path");
    let node = agent.node().to_string();
    let logger = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: logger-pod}}
spec:
  nodeName: {node}
  restartPolicy: Never
  containers:
  - name: logger
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo {LOG_STRING}"]
"#
    );
    common::kubectl_create(&api, "logger.yaml", &logger);
    let done = common::wait_for_phase(&api, "logger-pod", "Succeeded", POD_START_TIMEOUT);
    let id = done["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .and_then(|id| id.strip_prefix("docker://"))
        .expect("a docker container ID")
        .to_string();
    let uid = done["metadata"]["uid"].as_str().expect("a UID").to_string();
    let container_log = format!("/var/log/containers/logger-pod_default_logger-{id}.log");
    let cri_log = agent
        .pod_logs_dir()
        .join(format!("default_logger-pod_{uid}/logger/0.log"))
        .display()
        .to_string();

    // Each checker pod greps one path through a hostPath of type FileOrCreate, as upstream's.
    for (name, path) in [("checker-containers", &container_log), ("checker-cri", &cri_log)] {
        let checker = format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  nodeName: {node}
  restartPolicy: Never
  volumes:
  - name: log
    hostPath: {{path: "{path}", type: FileOrCreate}}
  containers:
  - name: checker
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "grep -c '{LOG_STRING}' {path}"]
    volumeMounts:
    - {{name: log, mountPath: "{path}"}}
"#
        );
        common::kubectl_create(&api, &format!("{name}.yaml"), &checker);
        let checked = common::wait_for_phase(&api, name, "Succeeded", POD_START_TIMEOUT);
        let exit = &checked["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"];
        assert_eq!(exit, 0, "{name}: {}", api.kubectl_ok(&["logs", name]));
        assert_eq!(
            api.kubectl_ok(&["logs", name]).trim(),
            "1",
            "{name}: one line of the log"
        );
    }

    // Deleted, the pod leaves neither path behind (checked from the machine).
    api.kubectl_ok(&["delete", "pod", "logger-pod", "--wait=true"]);
    wait_until("the log files removed", CHANGE_TIMEOUT, || {
        let left: Vec<&String> = [&container_log, &cri_log]
            .into_iter()
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .collect();
        left.is_empty().then_some(()).ok_or_else(|| format!("{left:?}"))
    });
    let pod_dir = agent.pod_logs_dir().join(format!("default_logger-pod_{uid}"));
    assert!(!pod_dir.exists(), "{} is gone", pod_dir.display());
    api.kubectl_ok(&["delete", "pod", "--all", "--wait=true"]);
}
