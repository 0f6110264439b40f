//! Container GC on real Docker, as kubelet's (`pkg/kubelet/kuberuntime/kuberuntime_gc.go`;
//! upstream's e2e `test/e2e_node/garbage_collector_test.go` asserts that no container name of a
//! pod has more than maxPerPodContainer + 1 instances and that a deleted pod's containers all
//! go). The agent runs its GC every second here (`--container-gc-period`, tests only; kubelet's
//! is a fixed minute).

use std::path::Path;
use std::time::Duration;

use dockerlet_integration_tests::docker::{self, docker, docker_ok};
use dockerlet_integration_tests::{
    wait_until, Agent, ManifestDir, PodExt, BUSYBOX_IMAGE, CHANGE_TIMEOUT, POD_START_TIMEOUT,
};

/// GC every second; the harness's back-off (1 s doubling to 4 s) leaves the crasher waiting
/// long enough after its second restart to see what GC does meanwhile.
const GC_ARGS: &[&str] = &["--container-gc-period", "1s"];

const CRASHER: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: crasher}
spec:
  restartPolicy: Always
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "exit 1"]
"#;

/// While a crash-looping container waits out its back-off, the sync keeps its two newest
/// instances (both dead); GC then takes the older, so one dead instance is left per
/// container (`--maximum-dead-containers-per-container 1`), never more than that plus one.
#[test]
fn a_crash_looping_container_keeps_one_dead_instance() {
    let manifests = ManifestDir::new();
    manifests.write("crasher.yaml", CRASHER);
    let agent = Agent::start("container-gc-crash", manifests.path(), GC_ARGS);
    let pod_name = agent.pod_name("crasher");
    let main_instances = || -> Vec<docker::Container> {
        docker::node_containers(agent.node())
            .into_iter()
            .filter(|c| c.pod_name() == pod_name && c.kube_name() == "main")
            .collect()
    };
    let mut most = 0;
    wait_until(
        "one dead instance of main after its second restart",
        POD_START_TIMEOUT,
        || {
            let instances = main_instances();
            most = most.max(instances.len());
            let restarts = instances
                .iter()
                .filter_map(|c| c.restart_count_label())
                .max()
                .unwrap_or(0);
            let all_dead = instances.iter().all(|c| !c.state.running);
            if instances.len() == 1 && all_dead && restarts >= 2 {
                Ok(())
            } else {
                let summary: Vec<String> = instances.iter().map(|c| c.summary()).collect();
                Err(format!("{} instance(s): {summary:?}", instances.len()))
            }
        },
    );
    assert!(
        most <= 2,
        "never more than maxPerPodContainer + 1 instances of main, saw {most}"
    );
    let pod = agent.pod("crasher").expect("the crasher in /pods");
    let main = pod.container("main").expect("main's status");
    assert!(main.restart_count >= 2, "{}", pod.summary());
    assert!(
        agent
            .log()
            .contains("container GC: over 1 dead instance(s) per container"),
        "the removal is logged with its reason"
    );
}

/// The labels of `c` with the pod UID replaced: a container of this node's pod `uid`.
fn labels_as(c: &docker::Container, uid: &str) -> Vec<String> {
    c.config
        .labels
        .iter()
        .flatten()
        .map(|(k, v)| {
            let v = if k == "io.kubernetes.pod.uid" { uid } else { v.as_str() };
            format!("{k}={v}")
        })
        .collect()
}

/// A pod log directory `<pods dir>/default_<name>_<uid>/main/0.log`, linked to `target`, its
/// own times set back (older than the agent's freshness guard).
fn pod_log_dir(pods_dir: &Path, name: &str, uid: &str, target: &Path) -> std::path::PathBuf {
    let dir = pods_dir.join(format!("default_{name}_{uid}"));
    std::fs::create_dir_all(dir.join("main")).unwrap();
    std::os::unix::fs::symlink(target, dir.join("main/0.log")).unwrap();
    let out = std::process::Command::new("touch")
        .args(["-d", "2000-01-01"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "touch: {out:?}");
    dir
}

/// A dead container of a pod no source wants goes (by the orphan clean-up or GC, whichever
/// comes first), and the log directory of a gone pod goes with it; the log directory of a pod
/// of another agent sharing the directory (its log still there) and the running pod's stay.
#[test]
fn a_gone_pods_containers_and_log_directory_go() {
    let manifests = ManifestDir::new();
    manifests.write(
        "runner.yaml",
        &CRASHER.replace("crasher", "runner").replace("exit 1", "sleep 3600"),
    );
    let agent = Agent::start("container-gc-gone", manifests.path(), GC_ARGS);
    agent.wait_for_running("runner");
    let runner = docker::node_containers(agent.node())
        .into_iter()
        .find(|c| c.kube_name() == "main")
        .expect("the runner's container");
    let ghost_uid = format!("ghost-{}", std::process::id());
    let mut args: Vec<String> = vec!["run".into(), "--name".into(), format!("gc-ghost-{}", agent.node())];
    for label in labels_as(&runner, &ghost_uid) {
        args.extend(["--label".into(), label]);
    }
    args.extend([BUSYBOX_IMAGE.into(), "true".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    docker_ok(&args);
    let pods_dir = agent.pod_logs_dir();
    let ghost_dir = pod_log_dir(&pods_dir, "ghost", &ghost_uid, Path::new("/nonexistent/ghost-json.log"));
    let live_log = tempfile::NamedTempFile::new().unwrap();
    let other_dir = pod_log_dir(&pods_dir, "other", "other-agents-pod", live_log.path());
    wait_until("the ghost's container and log directory gone", CHANGE_TIMEOUT, || {
        let left: Vec<String> = docker::node_containers(agent.node())
            .into_iter()
            .filter(|c| c.pod_uid() == ghost_uid)
            .map(|c| c.summary())
            .collect();
        if left.is_empty() && !ghost_dir.exists() {
            Ok(())
        } else {
            Err(format!("containers {left:?}, directory there: {}", ghost_dir.exists()))
        }
    });
    // A few more passes: what is not gone stays.
    std::thread::sleep(Duration::from_secs(3));
    assert!(other_dir.exists(), "another agent's pod log directory stays");
    let runner_dirs: Vec<_> = std::fs::read_dir(&pods_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("runner"))
        .collect();
    assert_eq!(runner_dirs.len(), 1, "the running pod's log directory stays");
    let _ = docker(&["rm", "-f", &format!("gc-ghost-{}", agent.node())]);
}
