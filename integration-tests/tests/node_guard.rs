//! One agent per node name: `--lock-file` and `--exit-on-lock-contention` as kubelet's
//! (`cmd/kubelet/app/server.go`, `server_linux.go`): a second agent given the same lock file
//! waits for it; the first, told to exit on contention, stops as soon as the second opens the
//! file, and the second takes its pods over without restarting them. Beyond kubelet, the node
//! name's claim on the engine (`agent/src/node_claim.rs`): a second agent for the node with
//! another root dir stops with an error naming the first, the first's pods untouched; a claim
//! whose holder was SIGKILLed is taken over; a stopped agent leaves none.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dockerlet_integration_tests::docker::docker;
use dockerlet_integration_tests::harness::{binary, AgentOptions};
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

/// The labels of the node's claim container, if there is one.
fn claim_labels(node: &str) -> Option<serde_json::Value> {
    let out = docker(&[
        "inspect",
        "-f",
        "{{json .Config.Labels}}",
        &format!("dockerlet_node_{node}"),
    ]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("labels as JSON"))
}

/// A second agent for `node` with a root dir of its own, run until it exits (30 s at most):
/// its exit code and what it printed.
fn second_agent(node: &str, manifests: &std::path::Path) -> (Option<i32>, String) {
    let root = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(binary())
        .args(["--pod-manifest-path", &manifests.display().to_string()])
        .args([
            "--hostname-override",
            node,
            "--root-dir",
            &root.path().display().to_string(),
        ])
        .args([
            "--read-only-port",
            "0",
            "--healthz-port",
            "0",
            "--port",
            "0",
            "--address",
            "127.0.0.1",
        ])
        .args(["--image-gc-high-threshold", "100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a second agent");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("its output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn a_second_agent_for_the_node_on_the_engine_is_refused_naming_the_first() {
    let manifests = ManifestDir::new();
    let mut first = Agent::start("claim", manifests.path(), &[]);
    manifests.write("sleeper.yaml", SLEEPER);
    let before = main_container(&first);
    let node = first.node().to_string();
    let pid = first.pid().expect("the first runs");
    let labels = claim_labels(&node).expect("the first agent's claim");
    assert_eq!(labels["io.dockerlet.claim"], node.as_str());
    assert_eq!(labels["io.dockerlet.claim.pid"], pid.to_string().as_str());

    let (code, text) = second_agent(&node, manifests.path());
    assert_eq!(code, Some(1), "the second agent stops with an error:\n{text}");
    let expected = format!(
        "node \"{node}\" is already managed on this Docker engine by the dockerlet with PID {pid} (root dir {}",
        first.root_dir().display()
    );
    assert!(text.contains(&expected), "{expected}\nin\n{text}");
    assert_eq!(main_container(&first), before, "the first agent's pod is untouched");
    assert_eq!(
        claim_labels(&node).expect("the claim stays")["io.dockerlet.claim.pid"],
        pid.to_string().as_str()
    );

    // SIGKILLed, the first leaves its claim; the next agent takes it over and the pod on.
    first.kill9();
    first.restart();
    let restarted = first.pid().expect("restarted");
    assert_eq!(
        claim_labels(&node).expect("the claim taken over")["io.dockerlet.claim.pid"],
        restarted.to_string().as_str()
    );
    assert!(first
        .log()
        .contains("taking over the node's claim on the Docker engine: its holder no longer runs"));
    assert_eq!(main_container(&first), before);

    // Stopped, it gives the claim up.
    let exit = first.sigterm(Duration::from_secs(30));
    assert!(exit.status.success(), "{exit:?}");
    assert_eq!(claim_labels(&node), None, "no claim left after a stop");
}

/// Two agents of different node names given one `--cgroup-root`: the second is refused, naming
/// the first, before it touches the shared kubepods tree (two agents there overwrite each
/// other's QoS cgroups and prune each other's pod cgroups); the first runs on.
#[test]
fn a_second_agent_on_the_same_cgroup_root_is_refused() {
    let root = dockerlet_integration_tests::harness::cgroup_root(&format!(
        "shared-{}",
        dockerlet_integration_tests::harness::random_hex()
    ));
    let manifests = ManifestDir::new();
    let first = Agent::start("cgroup-first", manifests.path(), &["--cgroup-root", &root]);
    let refused = Agent::try_start_with(
        "cgroup-second",
        manifests.path(),
        &["--cgroup-root", &root],
        AgentOptions::default(),
    );
    let Err(e) = refused else {
        panic!("a second agent started on --cgroup-root {root}");
    };
    let expected = format!(
        "--cgroup-root {root}: the dockerlet of node \"{}\" (PID {}, root dir {})",
        first.node(),
        first.pid().expect("the first runs"),
        first.root_dir().display()
    );
    assert!(format!("{e:#}").contains(&expected), "{expected}\nin\n{e:#}");
    assert!(
        first.healthz().is_ok_and(|(code, _)| code == 200),
        "the first agent runs on"
    );
}
