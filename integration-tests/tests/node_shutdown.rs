//! Graceful node shutdown (kubelet's `pkg/kubelet/nodeshutdown`, e2e
//! `test/e2e_node/node_shutdown_linux_test.go`), driven here by SIGUSR1 as kubelet also takes it:
//! this machine has no systemd-logind; `make test-vm` checks the same with `systemctl poweroff`
//! in a Debian 12 guest.

use std::time::Duration;

mod common;

use dockerlet_fake_apiserver::ApiServer;
use dockerlet_integration_tests::{
    wait_for, wait_until, Agent, ContainerStatusExt, ManifestDir, PodExt, CHANGE_TIMEOUT, POD_START_TIMEOUT,
};

/// The runs-until-killed container: SIGTERM is ignored, so a stop takes the whole grace period.
const STUBBORN: &str = r#"["sh", "-c", "trap '' TERM; sleep 3600 & wait; sleep 3600"]"#;

fn pod(name: &str, marks: &str, priority_class: Option<&str>) -> String {
    let class = priority_class.map_or(String::new(), |c| format!("  priorityClassName: {c}\n"));
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
{class}  terminationGracePeriodSeconds: 120
  volumes:
  - name: m
    hostPath: {{path: {marks}, type: Directory}}
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    command: {STUBBORN}
    volumeMounts:
    - {{name: m, mountPath: /m}}
    lifecycle:
      preStop:
        exec:
          command: ["sh", "-c", "echo {name} $(cut -d' ' -f1 /proc/uptime) >> /m/prestop"]
"#
    )
}

/// The preStop marks: pod name and uptime seconds, in the order written.
fn marks(dir: &std::path::Path) -> Vec<(String, f64)> {
    std::fs::read_to_string(dir.join("prestop"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (name, at) = l.split_once(' ')?;
            Some((name.to_string(), at.parse().ok()?))
        })
        .collect()
}

/// With `--shutdown-grace-period 8s --shutdown-grace-period-critical-pods 4s`, a shutdown stops
/// the ordinary pod first (its preStop hook, then at most the 4 s of its group), then the
/// `system-node-critical` one; both end Failed with reason `Terminated`, kubelet's message and
/// a `DisruptionTarget` condition, never Ready while Failed; a pod added during the shutdown
/// is rejected with `NodeShutdown`.
#[test]
fn a_shutdown_stops_pods_by_priority_and_fails_them_as_kubelet() {
    let dir = tempfile::tempdir().expect("marker dir");
    let marks_dir = dir.path().display().to_string();
    let manifests = ManifestDir::new();
    manifests.write("ordinary.yaml", &pod("ordinary", &marks_dir, None));
    manifests.write(
        "critical.yaml",
        &pod("critical", &marks_dir, Some("system-node-critical")),
    );
    let mut agent = Agent::start(
        "node-shutdown",
        manifests.path(),
        &[
            "--shutdown-grace-period",
            "8s",
            "--shutdown-grace-period-critical-pods",
            "4s",
        ],
    );
    agent.wait_for_running("ordinary");
    agent.wait_for_running("critical");

    usr1(&agent);

    // The ordinary pod goes first; the critical one keeps running meanwhile.
    let ordinary = agent.wait_for_pod("ordinary", "Failed", CHANGE_TIMEOUT, |p| p.phase() == "Failed");
    let critical_now = agent.pod("critical").expect("critical pod");
    assert_eq!(critical_now.phase(), "Running", "{}", critical_now.summary());
    let status = ordinary.status.as_ref().expect("status");
    assert_eq!(status.reason.as_deref(), Some("Terminated"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was terminated in response to imminent node shutdown.")
    );
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let condition = |kind: &str| conditions.iter().find(|c| c.type_ == kind).cloned();
    let target = condition("DisruptionTarget").expect("DisruptionTarget condition");
    assert_eq!(
        (target.status.as_str(), target.reason.as_deref()),
        ("True", Some("TerminationByKubelet"))
    );
    assert_eq!(condition("Ready").map(|c| c.status).as_deref(), Some("False"));

    // New pods are refused while the node shuts down.
    manifests.write("late.yaml", &pod("late", &marks_dir, None));
    let late = agent.wait_for_pod("late", "rejected", CHANGE_TIMEOUT, |p| p.phase() == "Failed");
    let late_status = late.status.as_ref().expect("status");
    assert_eq!(late_status.reason.as_deref(), Some("NodeShutdown"));
    // kubelet's rejectPod prefixes the admit handler's message.
    assert_eq!(
        late_status.message.as_deref(),
        Some("Pod was rejected: Pod was rejected as the node is shutting down.")
    );

    let critical = agent.wait_for_pod("critical", "Failed", CHANGE_TIMEOUT, |p| p.phase() == "Failed");
    assert_eq!(
        critical.status.as_ref().and_then(|s| s.reason.as_deref()),
        Some("Terminated")
    );
    // Every container of both pods stopped, each after its preStop hook ran.
    let marks = wait_until("both preStop marks", CHANGE_TIMEOUT, || {
        let marks = marks(dir.path());
        if marks.len() >= 2 {
            Ok(marks)
        } else {
            Err(format!("{marks:?}"))
        }
    });
    assert_eq!(marks[0].0, "ordinary", "{marks:?}");
    assert_eq!(marks[1].0, "critical", "{marks:?}");
    // The ordinary group ran out its 4 s (its container ignores SIGTERM) before the critical
    // group began.
    let between = marks[1].1 - marks[0].1;
    assert!(
        between >= 3.0,
        "critical pod stopped {between:.1}s after the ordinary one: {marks:?}"
    );
    assert!(!marks.iter().any(|(name, _)| name == "late"), "{marks:?}");
    for name in ["ordinary", "critical"] {
        agent.wait_for_pod(name, "every container stopped", CHANGE_TIMEOUT, |p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .is_some_and(|cs| cs.iter().all(|c| !c.is_running() && !c.ready))
        });
    }
    let log = agent.log();
    assert!(log.contains("Received shutdown signal from USR1"), "{log}");
    wait_until("the shutdown finished", Duration::from_secs(20), || {
        let log = agent.log();
        if log.contains("Shutdown manager completed processing shutdown event") {
            Ok(())
        } else {
            Err("not yet".to_string())
        }
    });
    let debug = agent
        .actor("NodeShutdownActor", "node-shutdown")
        .expect("NodeShutdownActor on /debug/actors");
    let stage = debug["detail"]["stage"].as_str().unwrap_or_default().to_string();
    assert!(stage.starts_with("done"), "{debug}");

    // The shutdown's times: the state file kubelet keeps (and the e2e test looks for) and the
    // two gauges, which a restarted agent reads back from the file (kubelet's `setMetrics`).
    let state_file = agent.root_dir().join("graceful_node_shutdown_state");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state_file).expect("the state file")).expect("JSON");
    let (start, end) = (
        state["startTime"].as_str().expect("startTime").to_string(),
        state["endTime"].as_str().expect("endTime").to_string(),
    );
    assert!(
        start.starts_with("20") && end.starts_with("20") && end > start,
        "{state}"
    );
    let gauges = |agent: &Agent| {
        let url = format!("http://127.0.0.1:{}/metrics", agent.ports().read_only);
        let (_, text) = agent.get(&url).expect("/metrics");
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or_else(|| panic!("{name} in {text}"))
        };
        (
            value("kubelet_graceful_shutdown_start_time_seconds"),
            value("kubelet_graceful_shutdown_end_time_seconds"),
        )
    };
    let (started, ended) = gauges(&agent);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        started > now - 120.0 && ended >= started && ended <= now,
        "{started} {ended} {now}"
    );
    agent.sigterm(Duration::from_secs(10));
    agent.restart();
    assert_eq!(
        gauges(&agent),
        (started, ended),
        "read back from {}",
        state_file.display()
    );
}

fn usr1(agent: &Agent) {
    let pid = agent.pid().expect("agent pid");
    let signalled = std::process::Command::new("kill")
        .args(["-USR1", &pid.to_string()])
        .status()
        .expect("kill -USR1");
    assert!(signalled.success());
}

/// In a cluster: the Node event `NodeShutdown` "Shutdown manager detected shutdown event", the
/// Node's Ready condition False with "node is shutting down", and an API pod's final status
/// written to the API (Failed, `Terminated`, `DisruptionTarget`), as the e2e node shutdown test
/// reads them. The Node's status is written as the shutdown begins (kubelet's
/// `syncNodeStatus`), not at the next heartbeat: with heartbeats a minute apart, Ready is False
/// well within that minute.
#[test]
fn in_a_cluster_the_node_reports_the_shutdown() {
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let kubeconfig = api.kubeconfig_path().display().to_string();
    let agent = Agent::start(
        "node-shutdown-api",
        manifests.path(),
        &[
            "--kubeconfig",
            &kubeconfig,
            "--node-status-update-frequency",
            "60s",
            "--shutdown-grace-period",
            "4s",
            "--shutdown-grace-period-critical-pods",
            "2s",
        ],
    );
    let node = agent.node().to_string();
    wait_for("the node registered", CHANGE_TIMEOUT, || api.get("nodes", "", &node));
    common::kubectl_create(
        &api,
        "pod.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: app
  namespace: default
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    command: ["sleep", "3600"]
"#
        ),
    );
    common::wait_for_phase(&api, "app", "Running", POD_START_TIMEOUT);

    usr1(&agent);
    let ready = wait_for(
        "the Node not Ready before the next heartbeat",
        Duration::from_secs(20),
        || {
            let node = api.get("nodes", "", &node)?;
            let ready = node["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Ready")?
                .clone();
            (ready["status"] == "False" && ready["message"] == "node is shutting down").then_some(ready)
        },
    );
    assert_eq!(ready["reason"], "KubeletNotReady", "{ready}");
    let event = wait_for("the NodeShutdown event", CHANGE_TIMEOUT, || {
        api.list("events")
            .into_iter()
            .find(|e| e["reason"] == "NodeShutdown" && e["involvedObject"]["kind"] == "Node")
    });
    assert_eq!(event["message"], "Shutdown manager detected shutdown event", "{event}");
    assert_eq!(event["type"], "Normal");

    let pod = common::wait_for_phase(&api, "app", "Failed", CHANGE_TIMEOUT);
    assert_eq!(pod["status"]["reason"], "Terminated", "{pod}");
    assert_eq!(
        pod["status"]["message"],
        "Pod was terminated in response to imminent node shutdown."
    );
    let target = common::condition(&pod, "DisruptionTarget");
    assert_eq!(target["status"], "True", "{pod}");
    assert_eq!(target["reason"], "TerminationByKubelet");
}
