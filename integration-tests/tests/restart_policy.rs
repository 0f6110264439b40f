//! restartPolicy, CrashLoopBackOff, and restarting containers that died.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use dockerlet_integration_tests::docker;
use dockerlet_integration_tests::{
    holds_for, wait_until, Agent, AgentOptions, ContainerStatusExt, ManifestDir, PodExt, CHANGE_TIMEOUT,
    POD_START_TIMEOUT,
};
use k8s_openapi::jiff::Timestamp;

/// The six pods of the matrix: manifest name and fixture file.
const MATRIX: [&str; 6] = [
    "always-exit0",
    "always-exit1",
    "onfailure-exit0",
    "onfailure-exit1",
    "never-exit0",
    "never-exit1",
];

/// What the test saw of one pod while polling.
#[derive(Debug, Default)]
struct Seen {
    phases: Vec<String>,
    back_off: bool,
}

/// restartPolicy Always/OnFailure/Never × exit 0/1 give kubelet's phases, restart counts, back-off and reasons.
#[test]
fn restart_policies_give_kubelet_phases_restart_counts_and_reasons() {
    let manifests = ManifestDir::new();
    for name in MATRIX {
        manifests.add_fixture(&format!("{name}.yaml"));
    }
    let agent = Agent::start("restart-matrix", manifests.path(), &[]);

    let mut seen: BTreeMap<&str, Seen> = BTreeMap::new();
    let pods = wait_until("every pod of the matrix to settle", POD_START_TIMEOUT, || {
        let pods = agent.try_pods().map_err(|e| format!("{e:#}"))?;
        let mut by_name = BTreeMap::new();
        for name in MATRIX {
            let pod = pods
                .iter()
                .find(|p| p.name() == agent.pod_name(name))
                .ok_or(format!("{name} not in /pods"))?;
            let s = seen.entry(name).or_default();
            if s.phases.last().map(String::as_str) != Some(pod.phase()) {
                s.phases.push(pod.phase().to_string());
            }
            let main = pod.container("main");
            if main.and_then(|c| c.waiting_reason()) == Some("CrashLoopBackOff")
                && main.and_then(|c| c.last_terminated()).is_some()
            {
                s.back_off = true;
            }
            by_name.insert(name, pod.clone());
        }
        let restarts = |name: &str| by_name[name].container("main").map_or(0, |c| c.restart_count);
        let settled = ["always-exit0", "always-exit1", "onfailure-exit1"]
            .iter()
            .all(|&n| restarts(n) >= 2 && seen[n].back_off)
            && by_name["onfailure-exit0"].phase() == "Succeeded"
            && by_name["never-exit0"].phase() == "Succeeded"
            && by_name["never-exit1"].phase() == "Failed";
        if settled {
            Ok(by_name)
        } else {
            Err(by_name.values().map(PodExt::summary).collect::<Vec<_>>().join("\n"))
        }
    });

    // Restarting pods: Running from their first start on, also between restarts.
    for (name, exit, reason) in [
        ("always-exit0", 0, "Completed"),
        ("always-exit1", 1, "Error"),
        ("onfailure-exit1", 1, "Error"),
    ] {
        let phases = &seen[name].phases;
        let from_running: Vec<&String> = phases.iter().skip_while(|p| *p != "Running").collect();
        assert!(
            !from_running.is_empty() && from_running.iter().all(|p| *p == "Running"),
            "{name} stays Running while it restarts: phases seen {phases:?}"
        );
        let main = pods[name].container("main").unwrap();
        let last = main
            .last_terminated()
            .unwrap_or_else(|| panic!("{name}: {}", main.summary()));
        assert_eq!(
            (last.exit_code, last.reason.as_deref()),
            (exit, Some(reason)),
            "{name}: {}",
            main.summary()
        );
    }

    // Pods that do not restart: terminal phase, the container's own termination, no restarts.
    for (name, phase, exit, reason) in [
        ("onfailure-exit0", "Succeeded", 0, "Completed"),
        ("never-exit0", "Succeeded", 0, "Completed"),
        ("never-exit1", "Failed", 1, "Error"),
    ] {
        let main = pods[name].container("main").unwrap();
        let t = main
            .terminated()
            .unwrap_or_else(|| panic!("{name}: {}", main.summary()));
        assert_eq!(
            (t.exit_code, t.reason.as_deref()),
            (exit, Some(reason)),
            "{name}: {}",
            main.summary()
        );
        assert_eq!(main.restart_count, 0, "{name}: {}", main.summary());
        assert!(!main.ready, "{name}: a terminated container is not ready");
        assert_eq!(pods[name].phase(), phase);
    }

    // Longer than the maximum back-off plus a sync period: nothing restarts them.
    holds_for(
        "terminal pods stay terminal with one container",
        Duration::from_secs(10),
        || {
            let pods = agent.try_pods().map_err(|e| format!("{e:#}"))?;
            for (name, phase) in [
                ("onfailure-exit0", "Succeeded"),
                ("never-exit0", "Succeeded"),
                ("never-exit1", "Failed"),
            ] {
                let pod = pods
                    .iter()
                    .find(|p| p.name() == agent.pod_name(name))
                    .ok_or(format!("{name} gone"))?;
                let restarts = pod.container("main").map_or(-1, |c| c.restart_count);
                if pod.phase() != phase || restarts != 0 {
                    return Err(pod.summary());
                }
                let mains = agent
                    .pod_containers(pod.uid())
                    .into_iter()
                    .filter(|c| c.kube_name() == "main")
                    .count();
                if mains != 1 {
                    return Err(format!("{name} has {mains} main containers"));
                }
            }
            Ok(())
        },
    );
}

/// One attempt of a crash-looping container, from `docker inspect`.
#[derive(Debug)]
struct Attempt {
    started: Timestamp,
    finished: Option<Timestamp>,
}

/// Restarts of a crashing container wait 0, 1 s, 2 s, 4 s, 4 s after each exit (kubelet's back-off, capped).
#[test]
fn crash_loop_back_off_spaces_restarts_further_apart_up_to_the_maximum() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("always-exit1.yaml");
    let agent = Agent::start("crash-loop-backoff", manifests.path(), &[]);

    // Poll Docker every 100 ms; each attempt runs for 1 s, so none is missed.
    let mut attempts: BTreeMap<String, Attempt> = BTreeMap::new();
    let mut back_off_seen = false;
    let mut back_off_messages: Vec<String> = Vec::new();
    let start = Instant::now();
    let mut polls = 0u32;
    while attempts.len() < 6 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "fewer than 6 attempts after 120 s: {attempts:#?}"
        );
        for c in agent.containers().into_iter().filter(|c| c.kube_name() == "main") {
            if let Some(started) = c.started_at() {
                let entry = attempts.entry(c.id.clone()).or_insert(Attempt {
                    started,
                    finished: None,
                });
                entry.finished = c.finished_at().filter(|_| !c.state.running).or(entry.finished);
            }
        }
        polls += 1;
        if polls.is_multiple_of(3) {
            let main = agent.pod("always-exit1").and_then(|p| p.container("main").cloned());
            if main.as_ref().and_then(|c| c.waiting_reason()) == Some("CrashLoopBackOff") {
                back_off_seen = true;
                let waiting = main
                    .as_ref()
                    .and_then(|c| c.state.as_ref())
                    .and_then(|s| s.waiting.as_ref());
                if let Some(message) = waiting.and_then(|w| w.message.clone()) {
                    back_off_messages.push(message);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(back_off_seen, "the status showed CrashLoopBackOff between attempts");

    let mut attempts: Vec<Attempt> = attempts.into_values().collect();
    attempts.sort_by_key(|a| a.started);
    let secs = |d: k8s_openapi::jiff::SignedDuration| d.as_secs_f64();
    let gaps: Vec<f64> = attempts
        .windows(2)
        .map(|w| secs(w[1].started.duration_since(w[0].started)))
        .collect();
    for i in 1..gaps.len() {
        assert!(
            gaps[i] >= gaps[i - 1] - 0.5,
            "start-to-start gaps do not shrink: {gaps:?}"
        );
    }
    assert!(gaps[2] > gaps[0], "the third gap is longer than the first: {gaps:?}");

    // The back-off is counted from the previous attempt's finish. As in kubelet (`doBackOff`:
    // a container with no back-off entry yet restarts at once, and that first restart creates
    // the entry with the initial delay), the windows are 0, 1 s, 2 s, 4 s, 4 s.
    let windows: Vec<Option<f64>> = attempts
        .windows(2)
        .map(|w| w[0].finished.map(|f| secs(w[1].started.duration_since(f))))
        .collect();
    for (i, window) in windows.iter().enumerate() {
        let want = [0.0, 1.0, 2.0, 4.0, 4.0][i.min(4)];
        if let Some(window) = window {
            assert!(
                *window >= want - 0.1,
                "back-off before restart {} is at least {want} s: {windows:?}",
                i + 1
            );
        }
    }
    // Capped: the status names the delay being served; it reaches the 4 s maximum and never
    // doubles past it (no wall-clock bound, so load cannot make this flaky).
    assert!(
        back_off_messages
            .iter()
            .any(|m| m.starts_with("back-off 4s restarting failed container=main")),
        "the back-off reaches 4 s: {back_off_messages:?}"
    );
    assert!(
        !back_off_messages.iter().any(|m| m.starts_with("back-off 8s")),
        "the back-off stops growing at 4 s: {back_off_messages:?}"
    );

    // Names and labels count the attempts.
    let containers = agent.containers();
    for c in containers.iter().filter(|c| c.kube_name() == "main") {
        let attempt = c.short_name().rsplit('_').next().and_then(|n| n.parse::<u32>().ok());
        assert_eq!(
            attempt,
            c.restart_count_label(),
            "name suffix = restartCount label: {}",
            c.summary()
        );
    }
}

/// A `docker kill`ed app container gives a ContainerDied event and a new container in the same sandbox.
#[test]
fn a_docker_killed_app_container_is_noticed_and_restarted() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("sleeper.yaml");
    let agent = Agent::start("docker-kill", manifests.path(), &[]);
    let pod = agent.wait_for_running("sleeper");
    let uid = pod.uid().to_string();
    let old_id = pod.container("main").and_then(|c| c.docker_id()).unwrap().to_string();
    let sandbox_before: Vec<String> = agent
        .pod_containers(&uid)
        .into_iter()
        .filter(|c| c.is_sandbox())
        .map(|c| c.id)
        .collect();

    docker::kill(&old_id);

    let pod = agent.wait_for_pod("sleeper", "main restarted once", CHANGE_TIMEOUT, |p| {
        p.container("main")
            .is_some_and(|c| c.restart_count == 1 && c.is_running())
    });
    let main = pod.container("main").unwrap();
    let new_id = main.docker_id().expect("containerID").to_string();
    assert_ne!(new_id, old_id, "a new container");
    assert_eq!(pod.uid(), uid, "the same pod");
    assert_eq!(pod.phase(), "Running");
    let last = main.last_terminated().unwrap_or_else(|| panic!("{}", main.summary()));
    assert_eq!(
        (last.exit_code, last.reason.as_deref()),
        (137, Some("Error")),
        "{}",
        main.summary()
    );

    let new = docker::inspect(&new_id).expect("the new container exists");
    let pod_name = agent.pod_name("sleeper");
    assert_eq!(new.short_name(), format!("k8s_main_{pod_name}_default_{uid}_1"));
    assert_eq!(new.restart_count_label(), Some(1));
    let sandbox_after: Vec<String> = agent
        .pod_containers(&uid)
        .into_iter()
        .filter(|c| c.is_sandbox())
        .map(|c| c.id)
        .collect();
    assert_eq!(sandbox_after, sandbox_before, "the sandbox is kept");
    assert_eq!(new.host_config.network_mode, format!("container:{}", sandbox_before[0]));

    let object = format!("default/{pod_name}");
    wait_until("a ContainerDied event for the pod", CHANGE_TIMEOUT, || {
        let events = agent.events();
        let died = events
            .iter()
            .find(|e| e["reason"] == "ContainerDied" && e["object"] == object.as_str());
        match died {
            Some(e) => Ok(e.clone()),
            None => Err(format!("{events:?}")),
        }
    });
    let messages: BTreeSet<String> = agent
        .events()
        .iter()
        .filter(|e| e["reason"] == "ContainerDied" && e["object"] == object.as_str())
        .filter_map(|e| e["message"].as_str().map(String::from))
        .collect();
    assert!(
        messages.iter().any(|m| m.contains("main") && m.contains("137")),
        "the event names the container and its exit code: {messages:?}"
    );
}

/// A container Docker cannot start (its command does not exist) waits with kubelet's
/// `RunContainerError`, its instance as the last state (exit 127 on this engine), with a
/// `Failed` event; the failed sync's back-off brings the next sync, which starts it again,
/// not the periodic resync.
#[test]
fn a_container_docker_cannot_start_waits_with_run_container_error_and_is_retried() {
    let manifests = ManifestDir::new();
    manifests.write(
        "nostart.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: nostart
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["/no/such/binary"]
"#,
    );
    // The agent's own intervals (a 10 s error back-off) and a far-off periodic resync, so only
    // the failed sync's back-off can bring the retry within the test's minute.
    let options = AgentOptions {
        agent_intervals: true,
        ..AgentOptions::default()
    };
    let agent = Agent::start_with(
        "run-container-error",
        manifests.path(),
        &["--file-check-frequency", "1s", "--sync-frequency", "10m"],
        options,
    );

    let pod = agent.wait_for_pod(
        "nostart",
        "main waiting with RunContainerError",
        POD_START_TIMEOUT,
        |p| {
            p.container("main")
                .is_some_and(|c| c.waiting_reason() == Some("RunContainerError"))
        },
    );
    let main = pod.container("main").unwrap();
    let waiting = main.state.as_ref().and_then(|s| s.waiting.as_ref()).unwrap();
    assert!(
        waiting
            .message
            .as_deref()
            .is_some_and(|m| m.contains("/no/such/binary")),
        "the message is Docker's: {}",
        main.summary()
    );
    let last = main.last_terminated().unwrap_or_else(|| panic!("{}", main.summary()));
    assert_eq!(
        (last.exit_code, last.reason.as_deref()),
        (127, Some("ContainerCannotRun")),
        "{}",
        main.summary()
    );
    // kubelet's getPhase: a waiting container with a last state counts as stopped, and a pod
    // whose containers all stopped under Always is Running (restarting).
    assert_eq!(pod.phase(), "Running", "{}", pod.summary());

    let pod = agent.wait_for_pod("nostart", "main started again", CHANGE_TIMEOUT, |p| {
        p.container("main").is_some_and(|c| c.restart_count >= 1)
    });
    let object = format!("default/{}", agent.pod_name("nostart"));
    let failed = agent
        .events()
        .into_iter()
        .filter(|e| e["reason"] == "Failed" && e["object"] == object.as_str())
        .count();
    assert!(failed >= 1, "a Failed event per start: {}", pod.summary());
}
