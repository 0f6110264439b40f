//! kubelet's node-level settings through the real agent: `--max-pods` (the predicate admit
//! handler's `OutOfpods`, `pkg/kubelet/lifecycle/predicate.go`), `--cpu-cfs-quota=false`
//! (containers and pod cgroups without a CFS quota), `--kube-reserved pid=` (kubepods'
//! pids.max), and the start-up refusals of `--fail-swap-on` and `--protect-kernel-defaults`
//! (`pkg/kubelet/cm/container_manager_linux.go`), and `--enforce-node-allocatable` with
//! kube- and system-reserved cgroups (`pkg/kubelet/cm/node_container_manager_linux.go`).
//!
//! The harness gives every agent its own sysctl tree and swaps file (`--proc-sys-root`,
//! `--proc-swaps`), so no test sets this machine's kernel tunables.

mod common;

use std::path::PathBuf;
use std::process::Command;

use dockerlet_integration_tests::docker::docker_ok;
use dockerlet_integration_tests::harness::{
    binary, remove_cgroup_tree, unique_name, write_kernel_tunables, CGROUP_TEST_ROOT,
};
use dockerlet_integration_tests::{wait_until, Agent, ManifestDir, PodExt, BUSYBOX_IMAGE, POD_START_TIMEOUT};

fn sleeper(name: &str, resources: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: Never\n    command: [\"sleep\", \"3600\"]\n{resources}"
    )
}

/// `--max-pods 2`: two static pods run, a third is rejected as kubelet rejects it (Failed,
/// `OutOfpods`, kubelet's message) and gets no container.
#[test]
fn pods_beyond_max_pods_are_rejected_out_of_pods() {
    let manifests = ManifestDir::new();
    manifests.write("one.yaml", &sleeper("one", ""));
    manifests.write("two.yaml", &sleeper("two", ""));
    let agent = Agent::start("max_pods", manifests.path(), &["--max-pods", "2"]);
    agent.wait_for_running("one");
    agent.wait_for_running("two");
    manifests.write("three.yaml", &sleeper("three", ""));
    let three = agent.wait_for_pod("three", "Failed", POD_START_TIMEOUT, |p| p.phase() == "Failed");
    let status = three.status.clone().unwrap_or_default();
    assert_eq!(status.reason.as_deref(), Some("OutOfpods"), "{}", three.summary());
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2")
    );
    let containers = agent.pod_containers(three.uid());
    assert!(
        containers.is_empty(),
        "a rejected pod gets no container: {containers:?}"
    );
    assert_eq!(agent.wait_for_running("one").phase(), "Running");
}

/// `--cpu-cfs-quota=false`: a container with a CPU limit has no CFS quota (HostConfig and its
/// pod cgroup), only its shares; `--kube-reserved pid=1000` comes off kubepods' pids.max.
#[test]
fn cpu_cfs_quota_false_leaves_containers_without_a_quota() {
    let manifests = ManifestDir::new();
    let limited = "    resources:\n      requests: {cpu: 250m}\n      limits: {cpu: 500m}\n";
    manifests.write("limited.yaml", &sleeper("limited", limited));
    let agent = Agent::start(
        "cfs_quota_off",
        manifests.path(),
        &["--cpu-cfs-quota=false", "--kube-reserved", "pid=1000"],
    );
    let pod = agent.wait_for_running("limited");
    let id = pod
        .container("c")
        .and_then(|c| c.container_id.clone())
        .expect("a container id")
        .trim_start_matches("docker://")
        .to_string();
    let host = docker_ok(&[
        "inspect",
        "--format",
        "{{.HostConfig.CpuQuota}} {{.HostConfig.CpuPeriod}} {{.HostConfig.CpuShares}}",
        &id,
    ]);
    assert_eq!(host.trim(), "0 0 256", "no quota, the shares of 250m");
    let cgroup = |controller: &str, cgroup: &str, file: &str| {
        let path = PathBuf::from("/sys/fs/cgroup")
            .join(controller)
            .join(cgroup.trim_start_matches('/'))
            .join(file);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .trim()
            .to_string()
    };
    let kubepods = format!("{}/kubepods", agent.cgroup_root());
    let pod_cgroup = format!("{kubepods}/burstable/pod{}", pod.uid());
    assert_eq!(cgroup("cpu", &pod_cgroup, "cpu.cfs_quota_us"), "-1");
    assert_eq!(cgroup("cpu", &pod_cgroup, "cpu.shares"), "256");
    assert_eq!(cgroup("cpu", &format!("{pod_cgroup}/{id}"), "cpu.cfs_quota_us"), "-1");
    let pid_max: i64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(cgroup("pids", &kubepods, "pids.max"), (pid_max - 1000).to_string());
}

/// Runs the agent with `args` on its own sysctl tree (kubelet's tunables but `kernel/panic`,
/// when `panic` is given) and swaps file; returns its stderr once it exited with failure.
fn refused_start(args: &[&str], swap_line: Option<&str>, panic: Option<&str>) -> String {
    let work = tempfile::tempdir().unwrap();
    let proc_sys = work.path().join("proc-sys");
    write_kernel_tunables(&proc_sys).unwrap();
    if let Some(value) = panic {
        std::fs::write(proc_sys.join("kernel/panic"), value).unwrap();
    }
    let swaps = work.path().join("swaps");
    let swap_text = format!("Filename\tType\tSize\tUsed\tPriority\n{}", swap_line.unwrap_or(""));
    std::fs::write(&swaps, swap_text).unwrap();
    let manifests = ManifestDir::new();
    // A node name of its own: refusals run in parallel, and each agent claims its node on the
    // engine (agent/src/node_claim.rs).
    let node = unique_name("refused", "start");
    let mut child = Command::new(binary())
        .args(args)
        .args(["--hostname-override", &node])
        .arg("--pod-manifest-path")
        .arg(manifests.path())
        .arg("--root-dir")
        .arg(work.path().join("root"))
        .arg("--proc-sys-root")
        .arg(&proc_sys)
        .arg("--proc-swaps")
        .arg(&swaps)
        .args(["--read-only-port", "0", "--healthz-port", "0", "--port", "0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run dockerlet");
    let status = wait_until("the agent to exit", std::time::Duration::from_secs(30), || {
        child.try_wait().unwrap().ok_or("still running".to_string())
    });
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    // A start refused after the node was claimed gives the claim back.
    let claim = dockerlet_integration_tests::docker::docker(&["inspect", &format!("dockerlet_node_{node}")]);
    assert!(
        !claim.status.success(),
        "the refused agent left its claim on the engine"
    );
    // Nothing was changed in the agent's sysctl tree when it refused.
    if let Some(value) = panic {
        assert_eq!(std::fs::read_to_string(proc_sys.join("kernel/panic")).unwrap(), value);
    }
    stderr
}

/// Swap on refuses the start with kubelet's message (failSwapOn defaults to true); with
/// `--protect-kernel-defaults` a tunable that differs refuses it, named as kubelet names it.
#[test]
fn swap_and_protected_kernel_defaults_refuse_the_start() {
    let stderr = refused_start(&[], Some("/swapfile file 1048572 0 -2\n"), None);
    assert!(
        stderr
            .contains("running with swap on is not supported, please disable swap or set --fail-swap-on flag to false"),
        "{stderr}"
    );
    assert!(stderr.contains("/swapfile"), "{stderr}");
    let stderr = refused_start(&["--protect-kernel-defaults"], None, Some("0"));
    assert!(
        stderr.contains("invalid kernel flag: kernel/panic, expected value: 10, actual value: 0"),
        "{stderr}"
    );
}

/// A v1 cgroup under the tests' root made in the cpu, memory and pids hierarchies; removed
/// with everything under it when dropped.
struct TestCgroup(String);

impl TestCgroup {
    fn new(name: &str) -> Self {
        let cgroup = format!("{CGROUP_TEST_ROOT}{}", unique_name("rsv", name));
        for controller in ["cpu", "memory", "pids"] {
            std::fs::create_dir_all(v1_dir(controller, &cgroup)).unwrap();
        }
        TestCgroup(cgroup)
    }

    fn read(&self, controller: &str, file: &str) -> String {
        read_v1(controller, &self.0, file)
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        if let Err(e) = remove_cgroup_tree(&self.0) {
            eprintln!("cannot remove {}: {e}", self.0);
        }
    }
}

fn v1_dir(controller: &str, cgroup: &str) -> PathBuf {
    PathBuf::from("/sys/fs/cgroup")
        .join(controller)
        .join(cgroup.trim_start_matches('/'))
}

fn read_v1(controller: &str, cgroup: &str, file: &str) -> String {
    let path = v1_dir(controller, cgroup).join(file);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

/// kube-reserved and system-reserved (compressible: CPU only) enforced on existing cgroups:
/// the reservation as cpu.shares, memory limit and pids.max; kubepods gets the rest.
#[test]
fn enforced_reservations_limit_the_reserved_cgroups() {
    let kube = TestCgroup::new("kube");
    let system = TestCgroup::new("system");
    let untouched = system.read("memory", "memory.limit_in_bytes");
    let manifests = ManifestDir::new();
    let agent = Agent::start(
        "reserved_cgroups",
        manifests.path(),
        &[
            "--enforce-node-allocatable",
            "pods,kube-reserved,system-reserved-compressible",
            "--kube-reserved-cgroup",
            &kube.0,
            "--kube-reserved",
            "cpu=500m,memory=256Mi,pid=1000",
            "--system-reserved-cgroup",
            &system.0,
            "--system-reserved",
            "cpu=250m,memory=128Mi,pid=24",
        ],
    );
    assert_eq!(kube.read("cpu", "cpu.shares"), "512");
    assert_eq!(kube.read("memory", "memory.limit_in_bytes"), (256u64 << 20).to_string());
    assert_eq!(kube.read("pids", "pids.max"), "1000");
    assert_eq!(system.read("cpu", "cpu.shares"), "256");
    assert_eq!(system.read("memory", "memory.limit_in_bytes"), untouched);
    assert_eq!(system.read("pids", "pids.max"), "max");
    let kubepods = format!("{}/kubepods", agent.cgroup_root());
    let pid_max: i64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(read_v1("pids", &kubepods, "pids.max"), (pid_max - 1024).to_string());
}

/// A reserved cgroup that does not exist refuses the start with kubelet's message.
#[test]
fn a_missing_reserved_cgroup_refuses_the_start() {
    let root = format!("{CGROUP_TEST_ROOT}{}", unique_name("rsv", "missing"));
    let missing = format!("{root}-absent");
    let stderr = refused_start(
        &[
            "--cgroup-root",
            &root,
            "--enforce-node-allocatable",
            "pods,kube-reserved",
            "--kube-reserved-cgroup",
            &missing,
            "--kube-reserved",
            "cpu=100m",
        ],
        None,
        None,
    );
    remove_cgroup_tree(&root).unwrap();
    assert!(
        stderr.contains(&format!(
            "Failed to enforce Kube Reserved Cgroup Limits on \"{missing}\": \"{missing}\" cgroup does not exist"
        )),
        "{stderr}"
    );
}

/// In API-server mode the Node's `pods` capacity and allocatable are min(podsPerCore × cores,
/// maxPods), as kubelet's MachineInfo setter (`pkg/kubelet/nodestatus/setters.go`).
#[test]
fn the_node_reports_its_pods_capacity() {
    let (api, agent, _manifests) =
        common::proxied_node_with("pods_capacity", &["--max-pods", "300", "--pods-per-core", "1"]);
    let node = api.get("nodes", "", agent.node()).expect("the node");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(300);
    assert_eq!(
        node["status"]["capacity"]["pods"],
        cores.to_string(),
        "{}",
        node["status"]
    );
    assert_eq!(node["status"]["allocatable"]["pods"], cores.to_string());
}
