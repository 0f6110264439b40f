//! The OOM killer. A container over its memory limit (upstream `test/e2e_node/oomkiller_linux_test.go`,
//! "The containers terminated by OOM killer should have the reason set to OOMKilled") shows
//! Terminated with exit code 137 and reason OOMKilled, as an app and as an init container, with
//! a Warning `OOMKilled` event. A system OOM in the kernel log (injected through the test-only
//! `--kmsg-path` file, in `/dev/kmsg`'s record format) gives one Node event `SystemOOM`, and none
//! again after a restart on the same root dir; an OOM inside a container's cgroup, and
//! malformed lines, give none; neither does a re-created watcher.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use dockerlet_fake_apiserver::ApiServer;
use dockerlet_integration_tests::{
    holds_for, wait_for, Agent, ContainerStatusExt, ManifestDir, PodExt, CHANGE_TIMEOUT, POD_START_TIMEOUT,
};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

/// The upstream test's OOM-ing container: 15Mi request = limit, `dd` with a 20M buffer.
const OOM_CONTAINER: &str = r#"    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "sleep 5 && dd if=/dev/zero of=/dev/null bs=20M"]
    resources:
      requests: {memory: 15Mi}
      limits: {memory: 15Mi}
"#;

/// The pod terminates, and `status(pod)` — the target container's — is terminated with exit
/// code 137 and reason OOMKilled; a Warning OOMKilled event names the container.
fn assert_oom_killed(
    agent: &Agent,
    manifest: &str,
    container: &str,
    status: fn(&Pod) -> Option<&k8s_openapi::api::core::v1::ContainerStatus>,
) {
    let pod = agent.wait_for_pod(
        manifest,
        "Failed (its container OOM-killed)",
        POD_START_TIMEOUT + CHANGE_TIMEOUT,
        |p| p.phase() == "Failed",
    );
    let terminated = status(&pod)
        .and_then(|c| c.terminated())
        .unwrap_or_else(|| panic!("{container} terminated: {}", pod.summary()));
    assert_eq!(terminated.exit_code, 137, "{}", pod.summary());
    assert_eq!(terminated.reason.as_deref(), Some("OOMKilled"), "{}", pod.summary());
    let object = agent.pod_object(manifest);
    let events = wait_for("the OOMKilled event", CHANGE_TIMEOUT, || {
        let events = agent.events();
        events
            .iter()
            .any(|e| e["reason"] == "OOMKilled" && e["object"] == object.as_str())
            .then_some(events)
    });
    let oom: Vec<&Value> = events.iter().filter(|e| e["reason"] == "OOMKilled").collect();
    assert_eq!(oom.len(), 1, "one OOMKilled event: {oom:?}");
    let message = oom[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains(container), "the event names {container}: {message}");
}

/// An app container over its memory limit is OOM-killed: Terminated, exit code 137, OOMKilled.
#[test]
fn an_app_container_over_its_memory_limit_is_terminated_as_oom_killed() {
    let manifests = ManifestDir::new();
    manifests.write(
        "oom.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: oomkill-single}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: oomkill-target\n{OOM_CONTAINER}"
        ),
    );
    let agent = Agent::start("oom-app", manifests.path(), &[]);
    assert_oom_killed(&agent, "oomkill-single", "oomkill-target", |p| {
        p.container("oomkill-target")
    });
}

/// An init container over its memory limit is OOM-killed: Terminated, exit code 137, OOMKilled;
/// the main container never runs.
#[test]
fn an_init_container_over_its_memory_limit_is_terminated_as_oom_killed() {
    let manifests = ManifestDir::new();
    manifests.write(
        "oom.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: oomkill-init}}\nspec:\n  restartPolicy: Never\n  initContainers:\n  - name: oomkill-target\n{OOM_CONTAINER}  containers:\n  - name: busybox\n    image: dockerlet.local/busybox:1\n    command: [\"sleep\", \"3600\"]\n"
        ),
    );
    let agent = Agent::start("oom-init", manifests.path(), &[]);
    assert_oom_killed(&agent, "oomkill-init", "oomkill-target", |p| {
        p.init_container("oomkill-target")
    });
    let pod = agent.pod("oomkill-init").expect("pod");
    assert!(
        pod.container("busybox").is_none_or(|c| !c.is_started()),
        "the main container never started: {}",
        pod.summary()
    );
}

/// A global OOM (Linux 5.15's format): the node ran out of memory, `stress` (pid `pid`) killed.
fn system_oom(first_sequence: u64, pid: u32) -> String {
    let (a, b, c) = (first_sequence, first_sequence + 1, first_sequence + 2);
    format!(
        "4,{a},913001520,-;stress invoked oom-killer: gfp_mask=0x1100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0\n\
         6,{b},913001640,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,task=stress,pid={pid},uid=1000\n\
         3,{c},913001655,-;Out of memory: Killed process {pid} (stress) total-vm:2104552kB, anon-rss:1956048kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:3888kB oom_score_adj:0\n"
    )
}

/// A container over its own limit (Linux 6.18's format, as this host logs it): no SystemOOM.
fn container_oom(first_sequence: u64) -> String {
    let (a, b, c) = (first_sequence, first_sequence + 1, first_sequence + 2);
    let id = "4a7fdc5dd17278d2213745f08eaa9525b67e2438912b100c24ed2d5388386b14";
    format!(
        "4,{a},41123367512,-;dd invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=999\n\
         6,{b},41123368933,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset={id},mems_allowed=0,oom_memcg=/docker/{id},task_memcg=/docker/{id},task=dd,pid=31495,uid=0\n\
         3,{c},41123368957,-;Memory cgroup out of memory: Killed process 31495 (dd) total-vm:22748kB, anon-rss:15104kB, file-rss:48kB, shmem-rss:0kB, UID:0 pgtables:72kB oom_score_adj:999\n"
    )
}

/// Lines no kernel writes: skipped.
const MALFORMED: &str = "garbage without a header\n6,notanumber,1,-;half a record\n;\n\u{1}\u{2}\u{3}\n";

fn append(path: &Path, text: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open the kmsg file");
    file.write_all(text.as_bytes()).expect("append to the kmsg file");
}

/// The SystemOOM events about `node` in the API server.
fn system_oom_events(api: &ApiServer, node: &str) -> Vec<Value> {
    api.list("events")
        .into_iter()
        .filter(|e| {
            e["reason"] == "SystemOOM" && e["involvedObject"]["kind"] == "Node" && e["involvedObject"]["name"] == node
        })
        .collect()
}

/// How many kmsg lines the agent's OOM watcher reported malformed (`None`: no watcher yet).
fn malformed_lines(agent: &Agent) -> Option<u64> {
    agent.actor("OomWatcherActor", "oom")?["detail"]["malformed_lines"].as_u64()
}

/// API mode: a system OOM in the kernel log is one Warning SystemOOM Node event with kubelet's
/// message; a container's OOM and malformed lines add none; after a restart on the same root
/// dir and kernel log, the old OOM is not reported again, and a new one is.
#[test]
fn a_system_oom_is_one_node_event_and_not_again_after_a_restart() {
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let kmsg_dir = tempfile::tempdir().expect("tempdir");
    let kmsg = kmsg_dir.path().join("kmsg");
    append(
        &kmsg,
        &format!("{MALFORMED}{}{}", container_oom(100), system_oom(200, 4242)),
    );
    let kmsg_arg = kmsg.display().to_string();
    let kubeconfig = api.kubeconfig_path().display().to_string();
    let mut agent = Agent::start(
        "oom-system",
        manifests.path(),
        &[
            "--kubeconfig",
            &kubeconfig,
            "--kmsg-path",
            &kmsg_arg,
            "--enable-fault-injection",
        ],
    );
    let node = agent.node().to_string();
    let events = wait_for("a SystemOOM Node event", CHANGE_TIMEOUT, || {
        Some(system_oom_events(&api, &node)).filter(|e| !e.is_empty())
    });
    assert_eq!(events[0]["type"], "Warning", "{}", events[0]);
    assert_eq!(
        events[0]["message"],
        "System OOM encountered, victim process: stress, pid: 4242"
    );
    // The container's OOM and more malformed lines while it runs: nothing more.
    append(&kmsg, &format!("{MALFORMED}{}", container_oom(300)));
    wait_for("the new malformed lines read", CHANGE_TIMEOUT, || {
        (malformed_lines(&agent)? >= 8).then_some(())
    });
    holds_for("exactly one SystemOOM event", Duration::from_secs(2), || {
        let events = system_oom_events(&api, &node);
        if events.len() == 1 {
            Ok(())
        } else {
            Err(format!("{events:?}"))
        }
    });
    let debug_events = agent.events();
    assert_eq!(
        debug_events.iter().filter(|e| e["reason"] == "SystemOOM").count(),
        1,
        "one SystemOOM on the debug page: {debug_events:?}"
    );

    // A re-created watcher (its handler panicked) reads the log again from the checkpoint.
    let (status, body) = agent.inject_fault("target=oom");
    assert_eq!(status, 200, "{body}");
    wait_for("the watcher re-created and the log read again", CHANGE_TIMEOUT, || {
        let actor = agent.actor("OomWatcherActor", "oom")?;
        (actor["restarts"].as_u64()? >= 1 && actor["detail"]["malformed_lines"].as_u64()? >= 8).then_some(())
    });
    holds_for(
        "one SystemOOM event after the watcher was re-created",
        Duration::from_secs(2),
        || {
            let events = system_oom_events(&api, &node);
            if events.len() == 1 {
                Ok(())
            } else {
                Err(format!("{events:?}"))
            }
        },
    );

    agent.restart();
    // The restarted watcher read the whole file again (the malformed lines), and reported nothing.
    wait_for("the restarted watcher read the kernel log", CHANGE_TIMEOUT, || {
        (malformed_lines(&agent)? >= 8).then_some(())
    });
    holds_for(
        "still one SystemOOM event after the restart",
        Duration::from_secs(3),
        || {
            let events = system_oom_events(&api, &node);
            if events.len() == 1 {
                Ok(())
            } else {
                Err(format!("{events:?}"))
            }
        },
    );
    // A new system OOM is reported: the watcher of the restarted agent works.
    append(&kmsg, &system_oom(400, 5151));
    let events = wait_for("a second SystemOOM event", CHANGE_TIMEOUT, || {
        Some(system_oom_events(&api, &node)).filter(|e| e.len() == 2)
    });
    assert!(
        events
            .iter()
            .any(|e| e["message"] == "System OOM encountered, victim process: stress, pid: 5151"),
        "{events:?}"
    );
}

/// Standalone, from a FIFO: the SystemOOM event is kept on the debug page, once, about the node.
#[test]
fn a_standalone_node_keeps_the_system_oom_on_its_debug_page() {
    let manifests = ManifestDir::new();
    let kmsg_dir = tempfile::tempdir().expect("tempdir");
    let fifo = kmsg_dir.path().join("kmsg.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success(), "mkfifo {}", fifo.display());
    let writer = {
        let fifo = fifo.clone();
        // Opening a FIFO for writing waits for its reader: the agent's watcher.
        std::thread::spawn(move || {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .open(&fifo)
                .expect("open the FIFO");
            file.write_all(format!("{MALFORMED}{}{}", container_oom(10), system_oom(20, 777)).as_bytes())
                .expect("write the FIFO");
        })
    };
    let fifo_arg = fifo.display().to_string();
    let agent = Agent::start("oom-standalone", manifests.path(), &["--kmsg-path", &fifo_arg]);
    let object = format!("node/{}", agent.node());
    wait_for("a SystemOOM event on the debug page", CHANGE_TIMEOUT, || {
        agent.events().into_iter().find(|e| e["reason"] == "SystemOOM")
    });
    writer.join().expect("the FIFO writer");
    holds_for("exactly one SystemOOM event", Duration::from_secs(2), || {
        let events: Vec<Value> = agent
            .events()
            .into_iter()
            .filter(|e| e["reason"] == "SystemOOM")
            .collect();
        match events.as_slice() {
            [e] if e["object"] == object.as_str()
                && e["message"] == "System OOM encountered, victim process: stress, pid: 777" =>
            {
                Ok(())
            }
            _ => Err(format!("{events:?}")),
        }
    });
    assert_eq!(malformed_lines(&agent), Some(4));
}
