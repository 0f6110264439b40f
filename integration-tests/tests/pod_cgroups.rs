//! The kubepods cgroup tree: upstream's `test/e2e_node/pods_container_manager_test.go` "Pod
//! containers" (Guaranteed, BestEffort and Burstable pod cgroups at kubelet's cgroupfs paths,
//! seen from the host and from a checker pod with hostPath `/sys/fs/cgroup`, gone after the
//! pod), the pod-level limits and the QoS cgroups' shares, orphans removed at start-up,
//! `--cgroups-per-qos=false`, and `--cgroup-driver` checked against Docker's.
//!
//! Every agent has its own `--cgroup-root` (`/dockerlet-it/<node>`, the harness's), removed
//! when the agent is dropped.

use std::path::PathBuf;
use std::process::Command;

use dockerlet_integration_tests::docker::{docker_ok, inspect};
use dockerlet_integration_tests::{
    wait_until, Agent, ContainerStatusExt, ManifestDir, PodExt, BUSYBOX_IMAGE, CHANGE_TIMEOUT, POD_START_TIMEOUT,
};

/// A pod of one busybox container sleeping, with `resources` lines under the container.
fn sleeper(name: &str, resources: &[&str]) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: Never\n    command: [\"sleep\", \"3600\"]\n"
    );
    if !resources.is_empty() {
        yaml.push_str("    resources:\n");
        for line in resources {
            yaml.push_str(&format!("      {line}\n"));
        }
    }
    yaml
}

/// Upstream's checker: a busybox pod with the host's `/sys/fs/cgroup` at `/tmp` running
/// `script` once.
fn checker(name: &str, script: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: Never\n    command: [\"sh\", \"-c\", {script:?}]\n    volumeMounts:\n    - name: sysfscgroup\n      mountPath: /tmp\n  volumes:\n  - name: sysfscgroup\n    hostPath:\n      path: /sys/fs/cgroup\n"
    )
}

/// The host directory of `cgroup` in the v1 `controller` hierarchy.
fn dir(controller: &str, cgroup: &str) -> PathBuf {
    PathBuf::from("/sys/fs/cgroup")
        .join(controller)
        .join(cgroup.trim_start_matches('/'))
}

fn read(controller: &str, cgroup: &str, file: &str) -> String {
    let path = dir(controller, cgroup).join(file);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

/// Runs the checker `name` with `script` and asserts it Succeeded.
fn check_from_a_pod(agent: &Agent, manifests: &ManifestDir, name: &str, script: &str) {
    manifests.write(&format!("{name}.yaml"), &checker(name, script));
    let pod = agent.wait_for_pod(name, "Succeeded or Failed", POD_START_TIMEOUT, |p| {
        matches!(p.phase(), "Succeeded" | "Failed")
    });
    let logs = pod
        .container("c")
        .and_then(|c| c.docker_id())
        .map(|id| docker_ok(&["logs", id]))
        .unwrap_or_default();
    assert_eq!(pod.phase(), "Succeeded", "{script}: {}; output: {logs}", pod.summary());
    manifests.remove(&format!("{name}.yaml"));
}

/// Guaranteed, BestEffort and Burstable pods get their cgroups at kubelet's paths, in the
/// memory and cpu hierarchies (from the host and from a checker pod); every container of the
/// pod, the sandbox included, is inside with Docker's CgroupParent the pod cgroup; the pod
/// cgroups carry the summed limits and the QoS cgroups their shares; after the pods are
/// deleted the directories are gone.
#[test]
fn pod_cgroups_follow_the_qos_classes() {
    let manifests = ManifestDir::new();
    manifests.write(
        "guaranteed.yaml",
        &sleeper(
            "guaranteed",
            &[
                "requests: {cpu: 100m, memory: 100Mi}",
                "limits: {cpu: 100m, memory: 100Mi}",
            ],
        ),
    );
    manifests.write("besteffort.yaml", &sleeper("besteffort", &[]));
    manifests.write(
        "burstable.yaml",
        &sleeper(
            "burstable",
            &[
                "requests: {cpu: 100m, memory: 100Mi}",
                "limits: {cpu: 200m, memory: 200Mi}",
            ],
        ),
    );
    let agent = Agent::start("pod_cgroups_qos", manifests.path(), &[]);
    let root = agent.cgroup_root();
    let kubepods = format!("{root}/kubepods");
    let mut cgroups = Vec::new();
    for (name, qos) in [
        ("guaranteed", ""),
        ("besteffort", "besteffort/"),
        ("burstable", "burstable/"),
    ] {
        let pod = agent.wait_for_running(name);
        let cgroup = format!("{kubepods}/{qos}pod{}", pod.uid());
        for controller in ["memory", "cpu", "cpuacct", "pids"] {
            assert!(
                dir(controller, &cgroup).is_dir(),
                "{name}: no {controller} cgroup {cgroup}"
            );
        }
        let containers = dockerlet_integration_tests::docker::node_containers(agent.node());
        let ours: Vec<_> = containers.iter().filter(|c| c.pod_uid() == pod.uid()).collect();
        assert_eq!(ours.len(), 2, "{name}: the sandbox and c");
        for c in ours {
            let parent = docker_ok(&["inspect", "--format", "{{.HostConfig.CgroupParent}}", &c.id]);
            assert_eq!(parent.trim(), cgroup, "{name}: {}", c.summary());
            assert!(
                dir("memory", &cgroup).join(&c.id).is_dir(),
                "{name}: container {} is not inside its pod cgroup",
                c.short_name()
            );
            assert!(inspect(&c.id).is_some());
        }
        cgroups.push((name, cgroup));
    }
    let (g, be, b) = (&cgroups[0].1, &cgroups[1].1, &cgroups[2].1);
    assert_eq!(read("memory", g, "memory.limit_in_bytes"), (100u64 << 20).to_string());
    assert_eq!(read("cpu", g, "cpu.cfs_quota_us"), "10000");
    assert_eq!(read("cpu", g, "cpu.shares"), "102");
    assert_eq!(read("memory", b, "memory.limit_in_bytes"), (200u64 << 20).to_string());
    assert_eq!(read("cpu", b, "cpu.cfs_quota_us"), "20000");
    assert_eq!(read("cpu", b, "cpu.shares"), "102");
    assert_eq!(read("cpu", be, "cpu.cfs_quota_us"), "-1");
    assert_eq!(read("cpu", be, "cpu.shares"), "2");
    assert_eq!(read("cpu", &format!("{kubepods}/besteffort"), "cpu.shares"), "2");
    assert_eq!(read("cpu", &format!("{kubepods}/burstable"), "cpu.shares"), "102");

    let exists = cgroups
        .iter()
        .map(|(_, c)| format!("[ -d /tmp/memory{c} ] && [ -d /tmp/cpu{c} ]"))
        .collect::<Vec<_>>()
        .join(" && ");
    check_from_a_pod(&agent, &manifests, "checker-exists", &exists);

    for (name, _) in &cgroups {
        manifests.remove(&format!("{name}.yaml"));
    }
    wait_until("the pods' cgroups removed", CHANGE_TIMEOUT, || {
        let left: Vec<String> = cgroups
            .iter()
            .flat_map(|(_, c)| ["memory", "cpu", "cpuacct", "pids", "systemd"].map(|h| dir(h, c)))
            .filter(|d| d.exists())
            .map(|d| d.display().to_string())
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("still there: {left:?}"))
        }
    });
    assert_eq!(read("cpu", &format!("{kubepods}/burstable"), "cpu.shares"), "2");
    let gone = cgroups
        .iter()
        .map(|(_, c)| format!("[ ! -d /tmp/memory{c} ] && [ ! -d /tmp/cpu{c} ]"))
        .collect::<Vec<_>>()
        .join(" && ");
    check_from_a_pod(&agent, &manifests, "checker-gone", &gone);
}

/// A pod cgroup under the agent's root whose pod has no container left is removed when the
/// agent starts; the QoS cgroups are made with kubelet's shares.
#[test]
fn orphaned_pod_cgroups_are_removed_at_start() {
    let manifests = ManifestDir::new();
    let root = format!(
        "/dockerlet-it/orphans-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let orphan = format!("{root}/kubepods/besteffort/podorphan-uid");
    for controller in ["memory", "cpu"] {
        std::fs::create_dir_all(dir(controller, &orphan).join("leftover-container")).unwrap();
    }
    let agent = Agent::start("pod_cgroups_orphans", manifests.path(), &["--cgroup-root", &root]);
    assert_eq!(agent.cgroup_root(), root);
    for controller in ["memory", "cpu"] {
        assert!(!dir(controller, &orphan).exists(), "{controller}: orphan left");
    }
    assert_eq!(read("cpu", &format!("{root}/kubepods/besteffort"), "cpu.shares"), "2");
    assert!(dir("memory", &format!("{root}/kubepods/burstable")).is_dir());
    let limit: u64 = read("memory", &format!("{root}/kubepods"), "memory.limit_in_bytes")
        .parse()
        .unwrap();
    assert!(
        limit > 0 && limit < u64::MAX / 2,
        "kubepods limited to allocatable memory: {limit}"
    );
}

/// With `--cgroups-per-qos=false` there is no kubepods tree: the containers go straight into
/// `--cgroup-root` (kubelet's no-op pod container manager), or Docker's default parent for `/`.
#[test]
fn without_per_qos_cgroups_containers_go_in_the_cgroup_root() {
    let manifests = ManifestDir::new();
    manifests.write("plain.yaml", &sleeper("plain", &[]));
    let agent = Agent::start(
        "pod_cgroups_off",
        manifests.path(),
        &["--cgroups-per-qos=false", "--enforce-node-allocatable="],
    );
    let root = Agent::start(
        "pod_cgroups_off_root",
        manifests.path(),
        &[
            "--cgroups-per-qos=false",
            "--enforce-node-allocatable=",
            "--cgroup-root",
            "/",
        ],
    );
    let pod = root.wait_for_running("plain");
    for c in dockerlet_integration_tests::docker::node_containers(root.node()) {
        assert_eq!(c.pod_uid(), pod.uid());
        let parent = docker_ok(&["inspect", "--format", "{{.HostConfig.CgroupParent}}", &c.id]);
        assert_eq!(parent.trim(), "", "Docker's default: {}", c.summary());
    }
    drop(root);
    let pod = agent.wait_for_running("plain");
    for c in dockerlet_integration_tests::docker::node_containers(agent.node()) {
        assert_eq!(c.pod_uid(), pod.uid());
        let parent = docker_ok(&["inspect", "--format", "{{.HostConfig.CgroupParent}}", &c.id]);
        assert_eq!(parent.trim(), agent.cgroup_root(), "{}", c.summary());
    }
    assert!(!dir("memory", &format!("{}/kubepods", agent.cgroup_root())).exists());
}

/// `--cgroup-driver` must be the engine's: the agent refuses to start with kubelet's message
/// (and refuses systemd, not implemented, even where the engine uses it).
#[test]
fn a_cgroup_driver_other_than_dockers_is_refused() {
    let manifests = ManifestDir::new();
    let docker_driver = docker_ok(&["info", "--format", "{{.CgroupDriver}}"]).trim().to_string();
    let work = tempfile::tempdir().unwrap();
    // Its own sysctl tree: the agent must not set this machine's kernel tunables.
    let proc_sys = work.path().join("proc-sys");
    dockerlet_integration_tests::harness::write_kernel_tunables(&proc_sys).unwrap();
    let swaps = work.path().join("swaps");
    std::fs::write(&swaps, "Filename\tType\tSize\tUsed\tPriority\n").unwrap();
    let out = Command::new(dockerlet_integration_tests::harness::binary())
        .args(["--cgroup-driver", "systemd", "--pod-manifest-path"])
        .arg(manifests.path())
        .arg("--root-dir")
        .arg(work.path().join("root"))
        .arg("--proc-sys-root")
        .arg(&proc_sys)
        .arg("--proc-swaps")
        .arg(&swaps)
        .args(["--cgroup-root", "/dockerlet-it/driver-refused"])
        .output()
        .expect("run dockerlet");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = if docker_driver == "systemd" {
        "--cgroup-driver systemd: not implemented".to_string()
    } else {
        format!(
            "misconfiguration: kubelet cgroup driver: \"systemd\" is different from docker cgroup driver: \"{docker_driver}\""
        )
    };
    assert!(stderr.contains(&expected), "expected {expected:?} in: {stderr}");
    assert!(
        !dir("memory", "/dockerlet-it/driver-refused").exists(),
        "nothing made before the check"
    );
}
