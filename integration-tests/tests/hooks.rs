//! Lifecycle hooks: postStart (exec, httpGet) and preStop (exec, httpGet, sleep), their
//! failures, and how preStop shares the termination grace period.

use std::path::Path;
use std::time::{Duration, Instant};

use dockerlet_integration_tests::{
    holds_for, wait_until, Agent, ContainerStatusExt, DieEvents, EventLog, HttpStub, ManifestDir, PodExt, Reply,
    CHANGE_TIMEOUT,
};

/// A container command that runs until SIGTERM, then exits 0 at once.
const SLEEPER: &str = r#"["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]"#;

/// Seconds since boot (`/proc/uptime`): the same clock inside containers, which lets the test
/// compare times written by a container with its own.
fn uptime() -> f64 {
    let text = std::fs::read_to_string("/proc/uptime").expect("/proc/uptime");
    parse_uptime(&text).expect("an uptime")
}

fn parse_uptime(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// The lines of `dir/file`, or none if it does not exist.
fn lines(dir: &Path, file: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A postStart exec hook that fails kills its container, which restarts (FailedPostStartHook);
/// exec and httpGet postStart hooks that succeed run once and leave their containers alone.
#[test]
fn a_failing_post_start_hook_kills_the_container_and_successful_ones_run_once() {
    let stub = HttpStub::start();
    stub.route("/poststart", Reply::status(200));
    let manifests = ManifestDir::new();
    manifests.write(
        "poststart.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: poststart
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: bad
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    lifecycle:
      postStart:
        exec:
          command: ["false"]
  - name: good
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    lifecycle:
      postStart:
        exec:
          command: ["sh", "-c", "echo ran >> /tmp/poststart"]
  - name: web
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    lifecycle:
      postStart:
        httpGet:
          host: 127.0.0.1
          port: {port}
          path: /poststart
"#,
            port = stub.port()
        ),
    );
    let agent = Agent::start("post-start", manifests.path(), &[]);
    let events = EventLog::watch(&agent);

    let pod = agent.wait_for_pod("poststart", "bad restarted twice", CHANGE_TIMEOUT, |p| {
        p.container("bad").is_some_and(|c| c.restart_count >= 2)
    });
    let bad = pod.container("bad").unwrap();
    assert!(bad.last_terminated().is_some(), "{}", bad.summary());
    // kubelet's texts: the hook's output stays out of events (it may hold secrets).
    events.wait_for(
        &agent.pod_object("poststart"),
        "FailedPostStartHook",
        CHANGE_TIMEOUT,
        |m| m == "PostStartHook failed",
    );
    events.wait_for(&agent.pod_object("poststart"), "Killing", CHANGE_TIMEOUT, |m| {
        m == "FailedPostStartHook"
    });

    holds_for(
        "good and web to keep running without restarts",
        Duration::from_secs(3),
        || {
            let pod = agent.pod("poststart").ok_or("poststart not in /pods")?;
            for name in ["good", "web"] {
                let c = pod.container(name).ok_or(format!("no status for {name}"))?;
                if !(c.is_running() && c.restart_count == 0) {
                    return Err(pod.summary());
                }
            }
            Ok(())
        },
    );
    let pod = agent.pod("poststart").expect("poststart in /pods");
    let good_id = pod.container("good").and_then(|c| c.docker_id()).expect("good's ID");
    let out = dockerlet_integration_tests::docker::exec(good_id, &["cat", "/tmp/poststart"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ran\n",
        "the exec hook ran once in the container"
    );
    let requests = stub.requests_to("/poststart");
    assert_eq!(requests.len(), 1, "the httpGet hook was sent once: {requests:?}");
    assert_eq!(requests[0].method, "GET");
    assert!(
        requests[0]
            .header("user-agent")
            .is_some_and(|ua| ua.starts_with("kube-lifecycle/")),
        "User-Agent: {:?}",
        requests[0]
    );
}

/// On deletion preStop hooks run before SIGTERM: an exec hook's markers precede the TERM trap's,
/// a sleep hook's time counts against the grace period, a failing hook is reported, httpGet is sent.
#[test]
fn pre_stop_hooks_run_before_sigterm_and_share_the_grace_period() {
    let stub = HttpStub::start();
    // The agent must wait for the hook's answer before it sends SIGTERM.
    stub.route("/prestop", Reply::slow(200, Duration::from_secs(2)));
    let marks = tempfile::tempdir().expect("marker dir");
    let manifests = ManifestDir::new();
    manifests.write(
        "prestop.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: prestop
spec:
  terminationGracePeriodSeconds: 10
  volumes:
  - name: m
    hostPath:
      path: {dir}
      type: Directory
  containers:
  - name: graceful
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'echo term >> /m/graceful; exit 0' TERM; sleep 3600 & wait"]
    volumeMounts:
    - name: m
      mountPath: /m
    lifecycle:
      preStop:
        exec:
          command: ["sh", "-c", "echo prestop-start >> /m/graceful; sleep 1; echo prestop-end >> /m/graceful"]
  - name: stubborn
    image: dockerlet.local/busybox:1
    command:
    - sh
    - -c
    - |
      trap 'read up rest < /proc/uptime; echo $up >> /m/term' TERM
      while true; do read up rest < /proc/uptime; echo $up >> /m/ticks; sleep 0.1; done
    volumeMounts:
    - name: m
      mountPath: /m
    lifecycle:
      preStop:
        sleep:
          seconds: 6
  - name: failing
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    lifecycle:
      preStop:
        exec:
          command: ["sh", "-c", "exit 3"]
  - name: web
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'read up rest < /proc/uptime; echo $up >> /m/web; exit 0' TERM; sleep 3600 & wait"]
    volumeMounts:
    - name: m
      mountPath: /m
    lifecycle:
      preStop:
        httpGet:
          host: 127.0.0.1
          port: {port}
          path: /prestop
"#,
            dir = marks.path().display(),
            port = stub.port()
        ),
    );
    let agent = Agent::start("pre-stop", manifests.path(), &[]);
    let events = EventLog::watch(&agent);
    let pod = agent.wait_for_running("prestop");
    let id = |name: &str| {
        pod.container(name)
            .and_then(|c| c.docker_id())
            .unwrap_or_else(|| panic!("no containerID for {name}: {}", pod.summary()))
            .to_string()
    };
    let deaths = DieEvents::watch(agent.node());
    assert!(stub.requests_to("/prestop").is_empty(), "no preStop before the stop");

    let (deleted, deleted_at) = (uptime(), Instant::now());
    manifests.remove("prestop.yaml");
    wait_until("the pod to be stopped and removed", CHANGE_TIMEOUT, || {
        let left = agent.containers();
        if left.is_empty() && agent.pod("prestop").is_none() {
            Ok(())
        } else {
            Err(left.iter().map(|c| c.summary()).collect::<Vec<_>>().join("; "))
        }
    });

    // exec: the hook ran to its end before SIGTERM, which the container then handled.
    assert_eq!(
        lines(marks.path(), "graceful"),
        ["prestop-start", "prestop-end", "term"],
        "preStop ran before SIGTERM"
    );
    assert_eq!(deaths.exit_code(&id("graceful"), Duration::from_secs(10)), Some(0));

    // sleep: SIGTERM came only after the 6 s sleep, and SIGKILL at the end of the 10 s grace
    // period, i.e. about 4 s after SIGTERM — had the hook's time not counted, 10 s after it.
    // (Times are /proc/uptime seconds; the last tick is within 0.1 s of the kill.)
    let term = lines(marks.path(), "term");
    let term = term.first().and_then(|t| parse_uptime(t)).expect("the TERM trap ran");
    let last_tick = lines(marks.path(), "ticks")
        .iter()
        .rev()
        .find_map(|t| parse_uptime(t))
        .expect("ticks");
    assert!(
        term - deleted >= 5.9,
        "SIGTERM {:.2} s after the deletion, not before the 6 s preStop sleep ended",
        term - deleted
    );
    assert!(
        last_tick - deleted >= 9.5,
        "the container got its whole 10 s grace period: killed {:.2} s after the deletion",
        last_tick - deleted
    );
    let term_to_kill = last_tick - term;
    assert!(
        (1.5..7.0).contains(&term_to_kill),
        "SIGKILL {term_to_kill:.2} s after SIGTERM: the 10 s grace minus the 6 s the hook took, \
         not a fresh 10 s"
    );
    assert_eq!(deaths.exit_code(&id("stubborn"), Duration::from_secs(10)), Some(137));

    // A failing hook is reported; the container is still stopped with SIGTERM.
    events.wait_for(&agent.pod_object("prestop"), "FailedPreStopHook", CHANGE_TIMEOUT, |m| {
        m == "PreStopHook failed"
    });
    assert_eq!(deaths.exit_code(&id("failing"), Duration::from_secs(10)), Some(0));

    // httpGet: sent once; SIGTERM came after the (2 s slow) answer.
    let requests = stub.requests_to("/prestop");
    assert_eq!(requests.len(), 1, "the httpGet hook was sent once: {requests:?}");
    assert!(
        requests[0]
            .header("user-agent")
            .is_some_and(|ua| ua.starts_with("kube-lifecycle/")),
        "User-Agent: {:?}",
        requests[0]
    );
    let sent = deleted + requests[0].at.duration_since(deleted_at).as_secs_f64();
    let web_term = lines(marks.path(), "web");
    let web_term = web_term
        .first()
        .and_then(|t| parse_uptime(t))
        .expect("web's TERM trap ran");
    assert!(
        web_term - sent >= 1.8,
        "SIGTERM {:.2} s after the hook's request, whose answer took 2 s",
        web_term - sent
    );
    assert_eq!(deaths.exit_code(&id("web"), Duration::from_secs(10)), Some(0));
}

/// `lifecycle.stopSignal` (upstream ContainerStopSignals): the container is stopped with that
/// signal instead of SIGTERM, and its status reports it.
#[test]
fn a_stop_signal_replaces_sigterm() {
    let marks = tempfile::tempdir().expect("marker dir");
    let manifests = ManifestDir::new();
    manifests.write(
        "stopsignal.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: stopsignal
spec:
  os: {{name: linux}}
  terminationGracePeriodSeconds: 10
  volumes:
  - name: m
    hostPath:
      path: {dir}
      type: Directory
  containers:
  - name: usr1
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'echo USR1 > /m/usr1; exit 0' USR1; trap 'echo TERM > /m/usr1; exit 0' TERM; sleep 3600 & wait"]
    volumeMounts:
    - name: m
      mountPath: /m
    lifecycle:
      stopSignal: SIGUSR1
  - name: plain
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'echo USR1 > /m/plain; exit 0' USR1; trap 'echo TERM > /m/plain; exit 0' TERM; sleep 3600 & wait"]
    volumeMounts:
    - name: m
      mountPath: /m
"#,
            dir = marks.path().display(),
        ),
    );
    let agent = Agent::start("stop-signal", manifests.path(), &[]);
    let pod = agent.wait_for_running("stopsignal");
    let status = |name: &str| {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|all| all.iter().find(|c| c.name == name))
            .and_then(|c| c.stop_signal.clone())
    };
    assert_eq!(status("usr1").as_deref(), Some("SIGUSR1"));
    assert_eq!(status("plain"), None);
    manifests.remove("stopsignal.yaml");
    wait_until("both containers stopped", CHANGE_TIMEOUT, || {
        let seen = (lines(marks.path(), "usr1"), lines(marks.path(), "plain"));
        (!seen.0.is_empty() && !seen.1.is_empty())
            .then_some(())
            .ok_or_else(|| format!("{seen:?}"))
    });
    assert_eq!(lines(marks.path(), "usr1"), ["USR1"]);
    assert_eq!(lines(marks.path(), "plain"), ["TERM"]);
}

/// A preStop hook still running when the grace period ends goes on until the container is
/// killed, 2 s later at the least, as kubelet's does (upstream `container_lifecycle_test.go`
/// "should terminate sidecars simultaneously if prestop doesn't exit" times it at grace + 2 s):
/// the agent stops waiting for it, but does not end it early, and records no FailedPreStopHook.
#[test]
fn a_pre_stop_hook_runs_until_the_container_is_killed() {
    let host = tempfile::tempdir().expect("host dir");
    let manifests = ManifestDir::new();
    manifests.write(
        "looping.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: looping}}
spec:
  terminationGracePeriodSeconds: 3
  volumes:
  - name: out
    hostPath: {{path: {dir}, type: Directory}}
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"]
    volumeMounts: [{{name: out, mountPath: /out}}]
    lifecycle:
      preStop:
        exec:
          command: ["sh", "-c", "while true; do cut -d' ' -f1 /proc/uptime >> /out/loops; sleep 0.2; done"]
"#,
            dir = host.path().display()
        ),
    );
    let agent = Agent::start("pre-stop-overrun", manifests.path(), &[]);
    let pod = agent.wait_for_running("looping");
    let uid = pod.uid().to_string();
    manifests.remove("looping.yaml");
    dockerlet_integration_tests::wait_for("the pod's containers gone", CHANGE_TIMEOUT, || {
        agent.pod_containers(&uid).is_empty().then_some(())
    });
    let loops: Vec<f64> = std::fs::read_to_string(host.path().join("loops"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let (first, last) = (
        loops.first().copied().unwrap_or(0.0),
        loops.last().copied().unwrap_or(0.0),
    );
    let lived = last - first;
    assert!(
        (3.8..6.5).contains(&lived),
        "the hook ran {lived:.1}s: past the 3 s grace period, until the kill 2 s later ({} lines)",
        loops.len()
    );
    assert!(
        !agent.events().iter().any(|e| e["reason"] == "FailedPreStopHook"),
        "no FailedPreStopHook for a hook cut by the kill"
    );
}

/// A slow postStart hook runs to its end, and while the first sync waits for it the pod
/// already shows the status kubelet sets before it creates anything (Pending, its conditions,
/// its container ContainerCreating) and the events so far. (That a hook has no time limit at
/// all, as kubelet's, would take a test over two minutes: not tested.)
#[test]
fn a_slow_post_start_hook_runs_to_its_end_and_the_pod_shows_pending_and_its_events_meanwhile() {
    let manifests = ManifestDir::new();
    manifests.write(
        "slowhook.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: slowhook
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    lifecycle:
      postStart:
        exec:
          command: ["sh", "-c", "sleep 8; touch /tmp/hooked"]
"#,
    );
    let agent = Agent::start("slow-post-start", manifests.path(), &[]);
    let pending = agent.wait_for_pod("slowhook", "a Pending status during the hook", CHANGE_TIMEOUT, |p| {
        p.phase() == "Pending" && p.container("app").is_some()
    });
    let app = pending.container("app").unwrap();
    assert_eq!(app.waiting_reason(), Some("ContainerCreating"), "{}", pending.summary());
    assert_eq!(pending.condition("Ready"), Some("False"), "{}", pending.summary());
    assert_eq!(pending.condition("Initialized"), Some("True"), "{}", pending.summary());
    // Events are recorded as they happen (kubelet's recorder), not when the sync ends: the
    // container's Started is out while its hook still runs.
    let object = agent.pod_object("slowhook");
    wait_until("a Started event while the hook runs", Duration::from_secs(5), || {
        let started = agent
            .events()
            .iter()
            .any(|e| e["reason"] == "Started" && e["object"] == object.as_str());
        let pod = agent.pod("slowhook").ok_or("slowhook not in /pods")?;
        match (started, pod.phase()) {
            (true, "Pending") => Ok(()),
            (false, "Pending") => Err("no Started event yet".to_string()),
            _ => panic!("the hook ended before a Started event: {}", pod.summary()),
        }
    });

    let pod = agent.wait_for_pod("slowhook", "app running after its hook", CHANGE_TIMEOUT, |p| {
        p.container("app").is_some_and(|c| c.is_running())
    });
    let app = pod.container("app").unwrap();
    assert_eq!(app.restart_count, 0, "the hook was not cut: {}", app.summary());
    let id = app.docker_id().expect("containerID");
    let out = dockerlet_integration_tests::docker::exec(id, &["test", "-f", "/tmp/hooked"]);
    assert!(out.status.success(), "the hook ran to its end: {out:?}");
}
