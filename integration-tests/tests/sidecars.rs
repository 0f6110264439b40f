//! Sidecar containers (init containers with `restartPolicy: Always`), as the upstream
//! conformance tests meet them: `lifecycle_hook.go` injects a sidecar with a startup probe
//! that serves the hooked container's httpGet hooks, and its "Restartable Init Container
//! Lifecycle Hook" tests hook the sidecar itself. Ported to busybox (`httpd -vv` logs each URL
//! it serves) and driven through kubectl and the test API server.

mod common;

use std::path::Path;
use std::time::Duration;

use dockerlet_integration_tests::{wait_for, wait_until, HttpStub, Reply, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::Value;

/// The status of the init container `name`.
fn init_status<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["status"]["initContainerStatuses"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == name))
        .unwrap_or(&Value::Null)
}

/// The status of the condition `kind`.
fn condition<'a>(pod: &'a Value, kind: &str) -> &'a Value {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .map_or(&Value::Null, |c| &c["status"])
}

fn seconds(time: &Value) -> i64 {
    let text = time.as_str().unwrap_or_else(|| panic!("a time, not {time}"));
    text.parse::<jiff::Timestamp>()
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .as_second()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// lifecycle_hook.go's set-up with busybox: the app container's postStart and preStop httpGet
/// hooks are served by the pod's sidecar. The sidecar listens only 3 s after it starts, and its
/// startup probe holds the app container back until then (or its postStart hook would fail);
/// it runs beside the app container, Initialized and Ready count it; on deletion the app
/// container's preStop hook still reaches it, and it gets SIGTERM only after the app container
/// stopped.
#[test]
fn a_sidecar_serves_the_app_containers_hooks_and_stops_last() {
    let (api, agent, _manifests) = common::proxied_node("sidecar-hooks");
    let evidence = tempfile::tempdir().expect("evidence dir");
    let log = evidence.path().join("log");
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: pod-with-poststart-http-hook}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 15
  volumes:
  - name: evidence
    hostPath: {{path: {dir}, type: Directory}}
  initContainers:
  - name: container-redirect
    image: dockerlet.local/busybox:1
    restartPolicy: Always
    command: ["sh", "-c", "trap 'echo sidecar TERM >> /evidence/log; exit 0' TERM; echo sidecar up; mkdir -p /www; touch /www/startup /www/poststart /www/prestop; sleep 3; httpd -f -vv -p 8080 -h /www 2>> /evidence/log & wait"]
    startupProbe:
      httpGet: {{path: /startup, port: 8080}}
      periodSeconds: 1
      failureThreshold: 60
    volumeMounts: [{{name: evidence, mountPath: /evidence}}]
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'echo main TERM >> /evidence/log; exit 0' TERM; sleep 3600 & wait"]
    lifecycle:
      postStart:
        httpGet: {{path: /poststart, port: 8080}}
      preStop:
        httpGet: {{path: /prestop, port: 8080}}
    volumeMounts: [{{name: evidence, mountPath: /evidence}}]
"#,
        node = agent.node(),
        dir = evidence.path().display()
    );
    common::kubectl_create(&api, "hooked.yaml", &yaml);
    let name = "pod-with-poststart-http-hook";
    let pod = wait_until("the pod Running and Ready", POD_START_TIMEOUT, || {
        let pod = api.get("pods", "default", name).ok_or("no pod")?;
        let ready = pod["status"]["phase"] == "Running" && condition(&pod, "Ready") == "True";
        ready.then_some(pod.clone()).ok_or_else(|| pod["status"].to_string())
    });
    let sidecar = init_status(&pod, "container-redirect");
    assert_eq!(sidecar["started"], true, "{sidecar}");
    assert_eq!(sidecar["ready"], true, "{sidecar}");
    assert!(sidecar["state"]["running"].is_object(), "{sidecar}");
    assert_eq!(condition(&pod, "Initialized"), "True", "{pod}");
    let main = &pod["status"]["containerStatuses"][0];
    assert_eq!(main["restartCount"], 0, "the postStart hook never failed: {main}");
    let gap = seconds(&main["state"]["running"]["startedAt"]) - seconds(&sidecar["state"]["running"]["startedAt"]);
    assert!(
        gap >= 2,
        "main started {gap} s after the sidecar, before it listened: {pod}"
    );
    assert!(
        lines(&log).iter().any(|l| l.ends_with("url:/poststart")),
        "the postStart hook reached the sidecar: {:?}",
        lines(&log)
    );
    let logs = api.kubectl_ok(&["logs", name, "-c", "container-redirect"]);
    assert_eq!(logs.trim(), "sidecar up");

    api.kubectl_ok(&["delete", "pod", name, "--wait=false"]);
    wait_for("the pod gone", CHANGE_TIMEOUT, || {
        api.get("pods", "default", name).is_none().then_some(())
    });
    let seen = lines(&log);
    let at = |what: &str| {
        seen.iter()
            .position(|l| l.ends_with(what))
            .unwrap_or_else(|| panic!("{what:?} in {seen:?}"))
    };
    assert!(at("url:/prestop") < at("main TERM"), "preStop before SIGTERM: {seen:?}");
    assert!(
        at("main TERM") < at("sidecar TERM"),
        "the sidecar stops after the app container: {seen:?}"
    );
}

/// A sidecar restarts whenever it exits, even in a `restartPolicy: Never` pod, and the next init
/// container waits until it runs; once the app container finished the pod Succeeded, its sidecar
/// stopped and not restarted.
#[test]
fn sidecars_restart_but_do_not_keep_a_finished_pod_running() {
    let (api, agent, _manifests) = common::proxied_node("sidecar-ending");
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: sidecar-ending}}
spec:
  nodeName: {node}
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: flaky
    image: dockerlet.local/busybox:1
    restartPolicy: Always
    command: ["sh", "-c", "sleep 4; exit 1"]
  - name: setup
    image: dockerlet.local/busybox:1
    command: ["true"]
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: ["sleep", "15"]
"#,
        node = agent.node()
    );
    common::kubectl_create(&api, "ending.yaml", &yaml);
    let name = "sidecar-ending";
    let pod = wait_until("the sidecar restarted beside the app", POD_START_TIMEOUT, || {
        let pod = api.get("pods", "default", name).ok_or("no pod")?;
        let restarted = init_status(&pod, "flaky")["restartCount"].as_i64() >= Some(1);
        let main_runs = pod["status"]["containerStatuses"][0]["state"]["running"].is_object();
        (restarted && main_runs && pod["status"]["phase"] == "Running")
            .then_some(pod.clone())
            .ok_or_else(|| pod["status"].to_string())
    });
    let setup = init_status(&pod, "setup");
    assert_eq!(setup["state"]["terminated"]["exitCode"], 0, "{setup}");
    assert_eq!(pod["status"]["containerStatuses"][0]["restartCount"], 0, "{pod}");
    assert_eq!(condition(&pod, "Initialized"), "True", "{pod}");

    let pod = common::wait_for_phase(&api, name, "Succeeded", CHANGE_TIMEOUT);
    let main = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(main["exitCode"], 0, "{pod}");
    let uid = pod["metadata"]["uid"].as_str().expect("uid").to_string();
    wait_until("nothing of the pod running", CHANGE_TIMEOUT, || {
        let running: Vec<String> = agent
            .pod_containers(&uid)
            .iter()
            .filter(|c| c.state.running)
            .map(|c| c.summary())
            .collect();
        running.is_empty().then_some(()).ok_or_else(|| format!("{running:?}"))
    });
    let flaky = init_status(&api.get("pods", "default", name).expect("pod"), "flaky").clone();
    let restarts = flaky["restartCount"].as_i64();
    std::thread::sleep(Duration::from_secs(12));
    let later = api.get("pods", "default", name).expect("pod");
    assert_eq!(later["status"]["phase"], "Succeeded", "{later}");
    assert_eq!(
        init_status(&later, "flaky")["restartCount"].as_i64(),
        restarts,
        "not restarted once the pod finished: {later}"
    );
    assert!(init_status(&later, "flaky")["state"]["running"].is_null(), "{later}");
}

/// lifecycle_hook.go's "Restartable Init Container Lifecycle Hook": a sidecar's own postStart
/// and preStop httpGet hooks run (from the node, as kubelet sends them), the preStop one when
/// its pod is deleted.
#[test]
fn a_sidecars_own_hooks_run() {
    let stub = HttpStub::start();
    stub.route("/echo", Reply::status(200));
    let (api, agent, _manifests) = common::proxied_node("sidecar-own-hooks");
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: pod-with-sidecar-hooks}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 5
  initContainers:
  - name: sidecar
    image: dockerlet.local/busybox:1
    restartPolicy: Always
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    lifecycle:
      postStart:
        httpGet:
          host: 127.0.0.1
          port: {port}
          path: /echo?msg=poststart
      preStop:
        httpGet:
          host: 127.0.0.1
          port: {port}
          path: /echo?msg=prestop
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
"#,
        node = agent.node(),
        port = stub.port()
    );
    common::kubectl_create(&api, "own-hooks.yaml", &yaml);
    let name = "pod-with-sidecar-hooks";
    common::wait_for_phase(&api, name, "Running", POD_START_TIMEOUT);
    let seen = |msg: &str| {
        stub.requests_to("/echo")
            .iter()
            .any(|r| r.path.ends_with(&format!("msg={msg}")))
    };
    wait_for("the postStart hook", CHANGE_TIMEOUT, || seen("poststart").then_some(()));
    assert!(!seen("prestop"), "no preStop before deletion");
    api.kubectl_ok(&["delete", "pod", name, "--wait=false"]);
    wait_for("the preStop hook", CHANGE_TIMEOUT, || seen("prestop").then_some(()));
    wait_for("the pod gone", CHANGE_TIMEOUT, || {
        api.get("pods", "default", name).is_none().then_some(())
    });
}

/// A sidecar without a startup probe counts as started once it runs: the app container starts
/// right after it, not at the next periodic sync (upstream `container_lifecycle_test.go` sidecar
/// tests, whose sidecars have no probe). The agent runs with its own intervals here (a 1 min
/// resync), so only the follow-up sync can start the app container in time.
#[test]
fn the_app_container_starts_right_after_a_probeless_sidecar() {
    use dockerlet_integration_tests::{Agent, AgentOptions, ContainerStatusExt, ManifestDir, PodExt};
    let manifests = ManifestDir::new();
    manifests.write(
        "sc.yaml",
        r#"apiVersion: v1
kind: Pod
metadata: {name: sc}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: side
    image: dockerlet.local/busybox:1
    restartPolicy: Always
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
"#,
    );
    let options = AgentOptions {
        agent_intervals: true,
        ..AgentOptions::default()
    };
    let agent = Agent::start_with("sidecar-follow-up", manifests.path(), &[], options);
    let pod = agent.wait_for_pod("sc", "main running", Duration::from_secs(40), |p| {
        p.container("main").and_then(|c| c.running_since()).is_some()
    });
    let status = pod.status.as_ref().expect("status");
    let started = |statuses: &Option<Vec<k8s_openapi::api::core::v1::ContainerStatus>>| {
        statuses.as_ref().expect("statuses")[0]
            .running_since()
            .expect("running")
            .as_second()
    };
    let (side, main) = (
        started(&status.init_container_statuses),
        started(&status.container_statuses),
    );
    assert!(
        main - side <= 10,
        "main started {}s after its sidecar: {}",
        main - side,
        pod.summary()
    );
}
