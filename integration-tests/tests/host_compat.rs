//! A host as users have it: Debian 12 with systemd as PID 1, the unified cgroup hierarchy
//! (v2), and Debian's `docker.io` on its default cgroup driver, `systemd` (issue 29). The
//! development machines and CI run cgroup v1 with Docker on `cgroupfs`, which hid that the
//! agent only works there.
//!
//! These tests run only inside the Debian 12 VM of `scripts/test-vm.sh` (`make test-vm`),
//! whose job sets `DOCKERLET_HOST_COMPAT=1` and `DOCKERLET_BIN`, and loads the test image.
//! Elsewhere every test says on stderr that it is skipped and why (written past the test
//! harness's capture, so the line shows in every run) and returns: they switch the engine's
//! cgroup driver and restart dockerd, which no shared development engine may undergo.
//!
//! Tests that read or change the engine's cgroup driver hold [`ENGINE`] for their whole run,
//! so they never see each other's restart; the others run in parallel.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use dockerlet_integration_tests::docker::{docker, docker_ok};
use dockerlet_integration_tests::harness::binary;
use dockerlet_integration_tests::wait::POLL_EVERY;
use dockerlet_integration_tests::{Agent, ContainerStatusExt, ManifestDir, PodExt, BUSYBOX_IMAGE};

/// The variable the VM's job sets; the tests run only where it is `1`.
const IN_VM: &str = "DOCKERLET_HOST_COMPAT";

/// Docker's configuration file, absent on a fresh Debian install.
const DAEMON_JSON: &str = "/etc/docker/daemon.json";

/// How long dockerd may take to come back after a restart (a TCG guest is slow).
const DOCKERD_RESTART_TIMEOUT: Duration = Duration::from_secs(120);

/// Held by every test that reads or changes the engine's cgroup driver.
static ENGINE: Mutex<()> = Mutex::new(());

/// The engine to oneself; a test that failed while holding it does not stop the others.
fn engine() -> MutexGuard<'static, ()> {
    ENGINE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// True inside the VM; elsewhere prints that `test` is skipped and why.
fn in_vm(test: &str) -> bool {
    if std::env::var_os(IN_VM).is_some_and(|v| v == "1") {
        return true;
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED host_compat::{test}: runs only in the Debian 12 VM of `make test-vm` \
         (scripts/test-vm.sh sets {IN_VM}=1 there): the set checks that host (systemd, cgroup \
         v2, Docker on the systemd driver) and restarts its dockerd on another cgroup driver, \
         which a shared engine must not undergo"
    );
    false
}

/// The engine's cgroup driver and cgroup version, as `docker info` reports them.
fn engine_cgroups() -> (String, String) {
    let info = docker_ok(&["info", "--format", "{{.CgroupDriver}} {{.CgroupVersion}}"]);
    let (driver, version) = info.trim().split_once(' ').unwrap_or((info.trim(), ""));
    (driver.to_string(), version.to_string())
}

/// `systemctl restart docker.service`, then waits until the engine reports `driver`. An error,
/// not a panic: the restore runs in a drop, maybe while a failed test unwinds.
fn restart_dockerd(driver: &str) -> anyhow::Result<()> {
    // Two restarts in a row must not hit the unit's start rate limit.
    let _ = Command::new("systemctl")
        .args(["reset-failed", "docker.service"])
        .status();
    let status = Command::new("systemctl").args(["restart", "docker.service"]).status()?;
    anyhow::ensure!(status.success(), "systemctl restart docker.service: {status}");
    let start = Instant::now();
    loop {
        let out = docker(&["info", "--format", "{{.CgroupDriver}}"]);
        let seen = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && seen == driver {
            return Ok(());
        }
        anyhow::ensure!(
            start.elapsed() < DOCKERD_RESTART_TIMEOUT,
            "dockerd did not come back on the {driver} cgroup driver within {DOCKERD_RESTART_TIMEOUT:?} \
             (last seen: {seen:?}, {})",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        std::thread::sleep(POLL_EVERY);
    }
}

/// Docker switched to another cgroup driver through `daemon.json`; dropping it puts the
/// previous file (or none) back and restarts dockerd on its default again.
struct EngineDriver {
    previous: Option<Vec<u8>>,
    restore_to: String,
}

impl EngineDriver {
    fn switch_to(driver: &str) -> EngineDriver {
        let (restore_to, _) = engine_cgroups();
        let previous = std::fs::read(DAEMON_JSON).ok();
        let config = serde_json::json!({ "exec-opts": [format!("native.cgroupdriver={driver}")] });
        std::fs::create_dir_all(Path::new(DAEMON_JSON).parent().expect("a parent")).expect("/etc/docker");
        std::fs::write(DAEMON_JSON, config.to_string()).expect("write daemon.json");
        let switched = EngineDriver { previous, restore_to };
        restart_dockerd(driver).unwrap_or_else(|e| panic!("{e:#}"));
        switched
    }
}

impl Drop for EngineDriver {
    fn drop(&mut self) {
        let restored = match &self.previous {
            Some(bytes) => std::fs::write(DAEMON_JSON, bytes),
            None => std::fs::remove_file(DAEMON_JSON),
        };
        if let Err(e) = restored
            .map_err(anyhow::Error::from)
            .and_then(|()| restart_dockerd(&self.restore_to))
        {
            let _ = writeln!(
                std::io::stderr(),
                "---- the engine's cgroup driver was not restored: {e:#}"
            );
        }
    }
}

/// One busybox container sleeping.
fn sleeper(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: Never\n    command: [\"sleep\", \"3600\"]\n"
    )
}

/// The cgroup v2 path (`0::<path>` of `/proc/<pid>/cgroup`) of the pod's running container.
fn container_cgroup(agent: &Agent, manifest_name: &str) -> String {
    let pod = agent.wait_for_running(manifest_name);
    let containers = agent.pod_containers(pod.uid());
    let container = containers
        .iter()
        .find(|c| c.kube_name() == "c")
        .unwrap_or_else(|| panic!("no container c: {containers:#?}"));
    let pid = docker_ok(&["inspect", "--format", "{{.State.Pid}}", &container.id]);
    let cgroups = std::fs::read_to_string(format!("/proc/{}/cgroup", pid.trim())).expect("the container's cgroup");
    cgroups
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no cgroup v2 line in {cgroups:?}"))
        .to_string()
}

/// The VM is the host it stands for: systemd is PID 1, cgroup v2 is mounted alone at
/// /sys/fs/cgroup, and Docker runs on its default systemd cgroup driver there.
#[test]
fn the_host_runs_systemd_on_cgroup_v2_and_docker_on_the_systemd_cgroup_driver() {
    if !in_vm("the_host_runs_systemd_on_cgroup_v2_and_docker_on_the_systemd_cgroup_driver") {
        return;
    }
    let _engine = engine();
    let init = std::fs::read_to_string("/proc/1/comm").expect("/proc/1/comm");
    assert_eq!(init.trim(), "systemd");
    let mounts = std::fs::read_to_string("/proc/self/mounts").expect("/proc/self/mounts");
    let cgroup_mounts: Vec<&str> = mounts
        .lines()
        .filter(|l| matches!(l.split(' ').nth(2), Some("cgroup" | "cgroup2")))
        .collect();
    assert!(
        matches!(&cgroup_mounts[..], [m] if m.starts_with("cgroup2 /sys/fs/cgroup ")),
        "only the unified hierarchy: {cgroup_mounts:?}"
    );
    assert_eq!(engine_cgroups(), ("systemd".to_string(), "2".to_string()));
}

/// The agent built on the development machine runs on the guest's libraries.
#[test]
fn the_agent_binary_runs_on_the_host() {
    if !in_vm("the_agent_binary_runs_on_the_host") {
        return;
    }
    let out = Command::new(binary()).arg("--version").output().expect("run dockerlet");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("dockerlet "),
        "{}: {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A pod limited to 64Mi that sleeps, and one that overruns 15Mi (upstream's OOM container).
fn limited_pods(manifests: &ManifestDir) {
    manifests.write(
        "limited.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: limited\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: Never\n    command: [\"sleep\", \"3600\"]\n    resources:\n      requests: {{cpu: 100m, memory: 64Mi}}\n      limits: {{cpu: 200m, memory: 64Mi}}\n"
        ),
    );
    manifests.write(
        "oom.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: oom\nspec:\n  restartPolicy: Never\n  containers:\n  - name: c\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: Never\n    command: [\"sh\", \"-c\", \"sleep 5 && dd if=/dev/zero of=/dev/null bs=20M\"]\n    resources:\n      requests: {{memory: 15Mi}}\n      limits: {{memory: 15Mi}}\n"
        ),
    );
}

/// What a user checks on a new host, for either driver: the limited pod's container in the
/// kubepods tree (`in_tree` says how its cgroup looks) with its memory limit in `memory.max`,
/// its usage in `/stats/summary` and `/metrics/cadvisor`, the overrunning container
/// `OOMKilled`, and an agent restart adopting the running pod without restarting it.
fn pods_run_limited_measured_and_adopted(agent: &mut Agent, in_tree: impl Fn(&str) -> bool) {
    let cgroup = container_cgroup(agent, "limited");
    assert!(
        in_tree(&cgroup),
        "the container's cgroup {cgroup} is in the kubepods tree"
    );
    let memory_max = std::fs::read_to_string(format!("/sys/fs/cgroup{cgroup}/memory.max")).expect("memory.max");
    assert_eq!(memory_max.trim(), (64u64 << 20).to_string(), "{cgroup}");
    let oom_group =
        std::fs::read_to_string(format!("/sys/fs/cgroup{cgroup}/memory.oom.group")).expect("memory.oom.group");
    assert_eq!(
        oom_group.trim(),
        "1",
        "an OOM kills the container's cgroup, as kubelet has it on v2"
    );
    let read = |file: &str| {
        std::fs::read_to_string(format!("/sys/fs/cgroup{cgroup}/{file}"))
            .unwrap_or_else(|e| panic!("{cgroup}/{file}: {e}"))
            .trim()
            .to_string()
    };
    // kubelet's NoSwap: a limited container gets no swap (MemorySwap = its memory limit).
    assert_eq!(read("memory.swap.max"), "0", "{cgroup}");
    // 200m CPU limit: a 20 ms quota per 100 ms period; 100m request: shares 102, which runc
    // converts to cpu.weight 1 + (102 − 2) × 9999 / 262142 = 4 (kubelet's conversion on v2).
    assert_eq!(read("cpu.max"), "20000 100000", "{cgroup}");
    assert_eq!(read("cpu.weight"), "4", "{cgroup}");

    let summary_url = format!("http://127.0.0.1:{}/stats/summary", agent.ports().read_only);
    let deadline = Instant::now() + Duration::from_secs(120);
    let working_set = loop {
        let (_, body) = agent.get(&summary_url).expect("/stats/summary");
        let summary: serde_json::Value = serde_json::from_str(&body).expect("summary JSON");
        let found = summary["pods"].as_array().into_iter().flatten().find_map(|p| {
            (p["podRef"]["name"] == agent.pod_name("limited"))
                .then(|| p["containers"][0]["memory"]["workingSetBytes"].as_u64())
                .flatten()
        });
        match found {
            Some(bytes) if bytes > 0 => break bytes,
            _ if Instant::now() > deadline => panic!("no working set for the limited pod in {body}"),
            _ => std::thread::sleep(POLL_EVERY),
        }
    };
    assert!(working_set < 64 << 20, "{working_set}");
    // Pressure stall information on v2 (the summary's `psi`, kubelet ≥ 1.33 with cAdvisor's).
    let (_, body) = agent.get(&summary_url).expect("/stats/summary");
    let summary: serde_json::Value = serde_json::from_str(&body).expect("summary JSON");
    let pod = summary["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["podRef"]["name"] == agent.pod_name("limited"))
        .expect("the limited pod in the summary");
    assert!(
        pod["containers"][0]["memory"]["psi"]["some"].is_object(),
        "memory PSI of the limited container in {pod}"
    );
    let metrics_url = format!("http://127.0.0.1:{}/metrics/cadvisor", agent.ports().read_only);
    let (_, metrics) = agent.get(&metrics_url).expect("/metrics/cadvisor");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("container_memory_working_set_bytes{")
                && l.contains(&format!("pod=\"{}\"", agent.pod_name("limited")))
                && l.contains("container=\"c\"")),
        "the limited container's working set in /metrics/cadvisor"
    );

    let oom = agent.wait_for_pod("oom", "the OOM pod failed", Duration::from_secs(180), |p| {
        p.phase() == "Failed"
    });
    let terminated = oom.container("c").and_then(|c| c.terminated());
    assert_eq!(
        terminated.and_then(|t| t.reason.clone()).as_deref(),
        Some("OOMKilled"),
        "{}",
        oom.summary()
    );

    let before = agent.pod_containers(agent.wait_for_running("limited").uid());
    agent.restart();
    let after = agent.pod_containers(agent.wait_for_running("limited").uid());
    let ids = |cs: &[dockerlet_integration_tests::docker::Container]| {
        let mut ids: Vec<String> = cs.iter().map(|c| c.id.clone()).collect();
        ids.sort();
        ids
    };
    assert_eq!(
        ids(&after),
        ids(&before),
        "the restarted agent adopted the pod's containers"
    );
}

/// On Docker's default driver (systemd, what a Debian 12 user has) the agent started with no
/// cgroup flag takes the engine's driver, as kubelet ≥ 1.31 takes the runtime's: its pods run
/// in systemd scopes under `kubepods` slices, limited, measured, OOM-killed and adopted.
#[test]
fn with_no_cgroup_flag_the_agent_takes_dockers_systemd_driver_and_runs_pods_in_slices() {
    if !in_vm("with_no_cgroup_flag_the_agent_takes_dockers_systemd_driver_and_runs_pods_in_slices") {
        return;
    }
    let _engine = engine();
    assert_eq!(engine_cgroups().0, "systemd", "the engine is on its default driver");
    let manifests = ManifestDir::new();
    limited_pods(&manifests);
    let mut agent = Agent::start("systemd-default", manifests.path(), &[]);
    pods_run_limited_measured_and_adopted(&mut agent, |cgroup| {
        let (slices, scope) = cgroup.rsplit_once('/').unwrap_or_default();
        scope.starts_with("docker-")
            && scope.ends_with(".scope")
            && slices.ends_with(".slice")
            && slices.contains("-kubepods")
    });
}

/// With Docker switched to the cgroupfs driver, the same on cgroup v2 with directories.
#[test]
fn with_docker_on_cgroupfs_pods_run_limited_measured_and_adopted_on_cgroup_v2() {
    if !in_vm("with_docker_on_cgroupfs_pods_run_limited_measured_and_adopted_on_cgroup_v2") {
        return;
    }
    let _engine = engine();
    let _driver = EngineDriver::switch_to("cgroupfs");
    let manifests = ManifestDir::new();
    limited_pods(&manifests);
    let mut agent = Agent::start("cgroupfs-v2-all", manifests.path(), &[]);
    let root = agent.cgroup_root();
    pods_run_limited_measured_and_adopted(&mut agent, |cgroup| cgroup.starts_with(&format!("{root}/kubepods/")));
}

/// With Docker switched to the cgroupfs driver (the development machines' setup), the agent
/// starts on cgroup v2 and runs a static pod whose container is in the agent's pod cgroup tree.
#[test]
fn with_docker_on_cgroupfs_a_static_pod_runs_in_the_agents_cgroup_tree() {
    if !in_vm("with_docker_on_cgroupfs_a_static_pod_runs_in_the_agents_cgroup_tree") {
        return;
    }
    let _engine = engine();
    let _driver = EngineDriver::switch_to("cgroupfs");
    let manifests = ManifestDir::new();
    manifests.write("sleeper.yaml", &sleeper("sleeper"));
    let agent = Agent::start("cgroupfs-v2", manifests.path(), &["--cgroup-driver", "cgroupfs"]);

    let cgroup = container_cgroup(&agent, "sleeper");
    let root = agent.cgroup_root();
    assert!(
        cgroup.starts_with(&format!("{root}/kubepods/")),
        "the container's cgroup {cgroup} is under {root}/kubepods"
    );
}

/// On Docker's default driver (systemd, what a Debian 12 user has) the agent started with
/// `--cgroup-driver systemd` runs a static pod, its container in a systemd scope under the pod's
/// slice (kubelet's systemd layout: `kubepods.slice/…/docker-<id>.scope`).
#[test]
fn with_docker_on_its_default_systemd_driver_a_static_pod_runs_in_a_systemd_slice() {
    if !in_vm("with_docker_on_its_default_systemd_driver_a_static_pod_runs_in_a_systemd_slice") {
        return;
    }
    let _engine = engine();
    assert_eq!(engine_cgroups().0, "systemd", "the engine is on its default driver");
    let manifests = ManifestDir::new();
    manifests.write("sleeper.yaml", &sleeper("sleeper"));
    let agent = Agent::start("systemd-v2", manifests.path(), &["--cgroup-driver", "systemd"]);
    // A driver other than the engine's is refused with kubelet's message.
    let refused = Agent::try_start_with(
        "systemd-mismatch",
        manifests.path(),
        &["--cgroup-driver", "cgroupfs"],
        dockerlet_integration_tests::harness::AgentOptions::default(),
    );
    match refused {
        Ok(_) => panic!("--cgroup-driver cgroupfs started on Docker's systemd driver"),
        Err(e) => assert!(
            format!("{e:#}").contains("misconfiguration: kubelet cgroup driver: \"cgroupfs\" is different from docker cgroup driver: \"systemd\""),
            "{e:#}"
        ),
    }

    let cgroup = container_cgroup(&agent, "sleeper");
    let (slices, scope) = cgroup.rsplit_once('/').expect("a cgroup path");
    assert!(
        scope.starts_with("docker-") && scope.ends_with(".scope") && slices.ends_with(".slice"),
        "the container is a systemd scope in a slice: {cgroup}"
    );
    assert!(cgroup.contains("kubepods"), "under the kubepods slice: {cgroup}");
}

/// A slice that exists while the value lives: `systemd-run` starts a sleeping service in it,
/// so systemd makes the slice (kubelet never creates a reserved cgroup, it must exist).
struct HeldSlice {
    slice: String,
    unit: String,
}

impl HeldSlice {
    fn new(name: &str) -> HeldSlice {
        let (slice, unit) = (format!("{name}.slice"), format!("{name}-holder.service"));
        let status = Command::new("systemd-run")
            .args(["--unit", &unit, "--slice", &slice, "--collect", "sleep", "infinity"])
            .status()
            .expect("systemd-run");
        assert!(status.success(), "systemd-run --slice {slice}: {status}");
        assert!(Path::new("/sys/fs/cgroup").join(&slice).is_dir(), "{slice} made");
        HeldSlice { slice, unit }
    }
}

impl Drop for HeldSlice {
    fn drop(&mut self) {
        let _ = Command::new("systemctl")
            .args(["stop", &self.unit, &self.slice])
            .status();
    }
}

fn cgroup_file(cgroup: &Path, file: &str) -> String {
    std::fs::read_to_string(cgroup.join(file))
        .unwrap_or_else(|e| panic!("{}/{file}: {e}", cgroup.display()))
        .trim()
        .to_string()
}

/// On Docker's systemd driver and cgroup v2, kube-reserved and system-reserved (compressible:
/// CPU only) are enforced on existing slices through their unit properties (kubelet's
/// `enforceExistingCgroup` with the systemd cgroup manager): the reserved CPU as `cpu.weight`
/// (runc's conversion of shares 512 → 20 and 256 → 10), memory as `memory.max`, `pid` as
/// `pids.max`; the kubepods slice gets `pid_max` less both reservations.
#[test]
fn with_the_systemd_driver_reservations_limit_the_reserved_slices() {
    if !in_vm("with_the_systemd_driver_reservations_limit_the_reserved_slices") {
        return;
    }
    let _engine = engine();
    assert_eq!(engine_cgroups().0, "systemd", "the engine is on its default driver");
    let kube = HeldSlice::new("dlkubereserved");
    let system_untouched = cgroup_file(Path::new("/sys/fs/cgroup/system.slice"), "memory.max");
    let manifests = ManifestDir::new();
    manifests.write("sleeper.yaml", &sleeper("sleeper"));
    let kube_cgroup = format!("/{}", kube.slice);
    let agent = Agent::start(
        "reserved-slices",
        manifests.path(),
        &[
            "--enforce-node-allocatable",
            "pods,kube-reserved,system-reserved-compressible",
            "--kube-reserved-cgroup",
            &kube_cgroup,
            "--kube-reserved",
            "cpu=500m,memory=256Mi,pid=1000",
            "--system-reserved-cgroup",
            "/system.slice",
            "--system-reserved",
            "cpu=250m,memory=128Mi,pid=24",
        ],
    );
    agent.wait_for_running("sleeper");
    let kube_dir = Path::new("/sys/fs/cgroup").join(&kube.slice);
    assert_eq!(cgroup_file(&kube_dir, "cpu.weight"), "20");
    assert_eq!(cgroup_file(&kube_dir, "memory.max"), (256u64 << 20).to_string());
    assert_eq!(cgroup_file(&kube_dir, "pids.max"), "1000");
    let system_dir = Path::new("/sys/fs/cgroup/system.slice");
    assert_eq!(cgroup_file(system_dir, "cpu.weight"), "10");
    assert_eq!(
        cgroup_file(system_dir, "memory.max"),
        system_untouched,
        "compressible only"
    );
    // The kubepods slice of this agent's tree: systemd escapes `-` in a path component as `_`.
    let escaped = agent.node().replace('-', "_");
    let out = Command::new("find")
        .args([
            "/sys/fs/cgroup",
            "-maxdepth",
            "4",
            "-type",
            "d",
            "-name",
            "*-kubepods.slice",
        ])
        .output()
        .expect("find");
    let listing = String::from_utf8_lossy(&out.stdout).to_string();
    let kubepods = listing
        .lines()
        .find(|l| l.contains(&escaped))
        .unwrap_or_else(|| panic!("no kubepods slice of {escaped} in {listing}"));
    let pid_max: i64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .expect("pid_max")
        .trim()
        .parse()
        .expect("a number");
    assert_eq!(
        cgroup_file(Path::new(kubepods), "pids.max"),
        (pid_max - 1024).to_string(),
        "{kubepods}"
    );
    // Back to systemd's defaults for the other tests.
    let _ = Command::new("systemctl")
        .args(["set-property", "--runtime", "system.slice", "CPUWeight=", "TasksMax="])
        .status();
}
