//! Graceful node shutdown (kubelet's `pkg/kubelet/nodeshutdown`, e2e
//! `test/e2e_node/node_shutdown_linux_test.go`), driven here by SIGUSR1 as kubelet also takes it:
//! this machine has no systemd-logind; `make test-vm` checks the same with `systemctl poweroff`
//! in a Debian 12 guest.

use std::time::Duration;

use dockerlet_integration_tests::{wait_until, Agent, ContainerStatusExt, ManifestDir, PodExt, CHANGE_TIMEOUT};

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

    let pid = agent.pid().expect("agent pid");
    let signalled = std::process::Command::new("kill")
        .args(["-USR1", &pid.to_string()])
        .status()
        .expect("kill -USR1");
    assert!(signalled.success());

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
    agent.sigterm(Duration::from_secs(10));
}
