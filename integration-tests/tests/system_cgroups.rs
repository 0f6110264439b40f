//! `--kubelet-cgroups`, `--runtime-cgroups` and `--system-cgroups`, as upstream's node e2e
//! framework starts kubelet on a host without systemd (`--runtime-cgroups=/docker-daemon`,
//! `kubeletCgroups: /kubelet`, `systemCgroups: /system`), where the Summary API test then
//! expects the `misc` system container beside `kubelet`, `runtime` and `pods`.
//!
//! `--system-cgroups` moves every process of the root cgroup but PID 1 and kernel threads, so
//! for the few seconds of this test the machine's other processes (this test's, other tests',
//! the engine's) are in the test's system cgroup; they are moved back before it is removed.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use dockerlet_integration_tests::{cgroup_hierarchies, unique_name, wait_until, Agent, ManifestDir, CGROUP_TEST_ROOT};
use serde_json::Value;

/// The memory hierarchy's path of `pid` (the unified one on cgroup v2).
fn memory_cgroup(pid: u32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            (controllers.split(',').any(|c| c == "memory") || controllers.is_empty()).then(|| path.to_string())
        })
        .next()
        .unwrap_or_default()
}

/// Moves every process in `cgroup` back to the root of each hierarchy (then the harness can
/// remove the tree), and kills the test's own processes.
struct Restore {
    cgroup: String,
    children: Vec<Child>,
}

impl Restore {
    fn run(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let relative = self.cgroup.trim_start_matches('/');
        for _ in 0..50 {
            let mut left = 0;
            for root in cgroup_hierarchies() {
                let procs = root.join(relative).join("cgroup.procs");
                let Ok(text) = std::fs::read_to_string(&procs) else {
                    continue;
                };
                for pid in text.lines() {
                    left += 1;
                    // One PID per write; a process that exited meanwhile fails, and is gone.
                    let _ = std::fs::write(root.join("cgroup.procs"), pid);
                }
            }
            if left == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("---- processes left in {}", self.cgroup);
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        self.run();
    }
}

/// A `sleep` in the root cgroup of every hierarchy, where the root's other processes are.
fn sleep_in_root() -> Child {
    let child = Command::new("sleep")
        .arg("600")
        .stdin(Stdio::null())
        .spawn()
        .expect("sleep");
    for root in cgroup_hierarchies() {
        std::fs::write(root.join("cgroup.procs"), child.id().to_string())
            .unwrap_or_else(|e| panic!("cannot put a process in the root cgroup of {}: {e}", root.display()));
    }
    child
}

/// A `sleep` started in `cgroup` (made in every hierarchy), so the engine's stand-in has
/// figures of its own from its first page.
fn sleep_in(cgroup: &str) -> Child {
    let mut joins = String::new();
    for root in cgroup_hierarchies() {
        let dir: PathBuf = root.join(cgroup.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        joins.push_str(&format!("echo $$ 2>/dev/null > {}/cgroup.procs; ", dir.display()));
    }
    Command::new("sh")
        .args(["-c", &format!("{joins} exec sleep 600")])
        .stdin(Stdio::null())
        .spawn()
        .expect("sh")
}

/// The agent moves itself to `--kubelet-cgroups` and the root's other processes to
/// `--system-cgroups` (PID 1 and kernel threads stay); the summary's system containers are
/// `kubelet`, `misc`, `pods` and `runtime`, read from those cgroups and `--runtime-cgroups`, and
/// each is a `/metrics/cadvisor` series of its own.
#[test]
fn system_cgroups_hold_the_agent_and_the_roots_other_processes() {
    let root = format!("{CGROUP_TEST_ROOT}{}", unique_name("it", "system-cgroups"));
    let (kubelet, runtime, system) = (
        format!("{root}/kubelet"),
        format!("{root}/docker-daemon"),
        format!("{root}/system"),
    );
    let mut restore = Restore {
        cgroup: system.clone(),
        children: Vec::new(),
    };
    let me_before = memory_cgroup(std::process::id());
    let in_root = sleep_in_root();
    let in_root_pid = in_root.id();
    restore.children.push(in_root);
    restore.children.push(sleep_in(&runtime));
    let manifests = ManifestDir::new();
    let mut agent = Agent::start(
        "system-cgroups",
        manifests.path(),
        &[
            "--cgroup-root",
            &root,
            "--kubelet-cgroups",
            &kubelet,
            "--runtime-cgroups",
            &runtime,
            "--system-cgroups",
            &system,
            "--housekeeping-interval",
            "1s",
        ],
    );
    let agent_pid = agent.pid().expect("the agent runs");
    assert_eq!(memory_cgroup(agent_pid), kubelet, "the agent's own cgroup");
    assert_eq!(memory_cgroup(in_root_pid), system, "a process of the root cgroup");
    assert_eq!(memory_cgroup(1), "/", "PID 1 stays at the root");
    if std::fs::read_to_string("/proc/2/comm").is_ok_and(|c| c.trim() == "kthreadd") {
        assert_eq!(memory_cgroup(2), "/", "kernel threads stay at the root");
    }

    let summary_url = format!("http://127.0.0.1:{}/stats/summary", agent.ports().read_only);
    let summary: Value = wait_until(
        "the four system containers with CPU used",
        Duration::from_secs(60),
        || {
            let (status, body) = agent.get(&summary_url).map_err(|e| format!("{e:#}"))?;
            let summary: Value = serde_json::from_str(&body).map_err(|e| format!("{status}: {e}: {body}"))?;
            let containers = summary["node"]["systemContainers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut names: Vec<&str> = containers.iter().filter_map(|c| c["name"].as_str()).collect();
            names.sort();
            if names != ["kubelet", "misc", "pods", "runtime"] {
                return Err(format!("system containers {names:?}"));
            }
            let misc = containers.iter().find(|c| c["name"] == "misc").unwrap();
            if misc["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap_or(0) == 0 || misc["memory"]["usageBytes"].is_null()
            {
                return Err(format!("misc without figures yet: {misc}"));
            }
            Ok(summary)
        },
    );
    let containers = summary["node"]["systemContainers"].as_array().unwrap();
    let runtime_stats = containers.iter().find(|c| c["name"] == "runtime").unwrap();
    assert!(runtime_stats["memory"]["usageBytes"].is_u64(), "{runtime_stats}");
    assert!(runtime_stats["cpu"]["usageCoreNanoSeconds"].is_u64(), "{runtime_stats}");

    let cadvisor_url = format!("http://127.0.0.1:{}/metrics/cadvisor", agent.ports().read_only);
    let (status, cadvisor) = agent.get(&cadvisor_url).expect("/metrics/cadvisor");
    assert_eq!(status, 200, "{cadvisor}");
    for cgroup in [&kubelet, &runtime, &system] {
        let id = format!("id=\"{cgroup}\"");
        assert!(
            cadvisor
                .lines()
                .any(|l| l.starts_with("container_memory_usage_bytes{") && l.contains(&id)),
            "no container_memory_usage_bytes of {cgroup} in:\n{cadvisor}"
        );
    }

    // Stopped, the agent leaves the processes where they are (as kubelet); the test moves them
    // back before the harness removes the tree.
    agent.sigterm(Duration::from_secs(30));
    restore.run();
    assert_eq!(
        memory_cgroup(std::process::id()),
        me_before,
        "this test is back where it was"
    );
}
