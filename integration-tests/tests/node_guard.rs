//! One agent per node name: `--lock-file` and `--exit-on-lock-contention` as kubelet's
//! (`cmd/kubelet/app/server.go`, `server_linux.go`): a second agent given the same lock file
//! waits for it; the first, told to exit on contention, stops as soon as the second opens the
//! file, and the second takes its pods over without restarting them.

use std::time::Duration;

use dockerlet_integration_tests::harness::AgentOptions;
use dockerlet_integration_tests::{Agent, ManifestDir, PodExt};

const SLEEPER: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: sleeper
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: ["sleep", "3600"]
"#;

/// The container ID and restart count of the sleeper's `main`.
fn main_container(agent: &Agent) -> (String, i32) {
    let pod = agent.wait_for_running("sleeper");
    let main = pod.container("main").expect("main's status");
    (main.container_id.clone().unwrap_or_default(), main.restart_count)
}

#[test]
fn a_new_agent_takes_over_through_the_lock_file() {
    let lock_dir = tempfile::tempdir().expect("tempdir");
    let lock = lock_dir.path().join("dockerlet.lock");
    let lock = lock.to_str().expect("UTF-8 path");
    let manifests = ManifestDir::new();
    let mut first = Agent::start(
        "lock-handoff",
        manifests.path(),
        &["--lock-file", lock, "--exit-on-lock-contention"],
    );
    manifests.write("sleeper.yaml", SLEEPER);
    let before = main_container(&first);

    // The second blocks on the lock until the first, seeing it open the file, has stopped.
    let second = Agent::start_with(
        "lock-handoff",
        manifests.path(),
        &["--lock-file", lock],
        AgentOptions {
            node_name: Some(first.node().to_string()),
            ..AgentOptions::default()
        },
    );
    let exit = first.wait_exit(Duration::from_secs(30));
    assert!(
        exit.is_some_and(|s| s.success()),
        "the first agent stops on lock contention: {exit:?}\n{}",
        first.log()
    );
    assert!(
        first
            .log()
            .contains("lock file contention (--exit-on-lock-contention): stopping"),
        "{}",
        first.log()
    );
    let log = second.log();
    let (acquiring, acquired) = (log.find("acquiring file lock"), log.find("file lock acquired"));
    assert!(acquiring.is_some() && acquired > acquiring, "{log}");

    let after = main_container(&second);
    assert_eq!(after, before, "the pod is taken over, not restarted");
}
