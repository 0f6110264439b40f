//! Liveness, readiness and startup probes: httpGet, tcpSocket, exec and grpc handlers, their
//! effects on `/pods` (ready, started, restarts), their events, the ProbeActor's debug detail,
//! and invalid probes.

use std::collections::BTreeMap;
use std::time::Duration;

use dockerlet_integration_tests::docker;
use dockerlet_integration_tests::{
    holds_for, Agent, ContainerStatusExt, EventLog, GrpcHealthServer, HttpStub, ManifestDir, PodExt, Reply,
    CHANGE_TIMEOUT, POD_START_TIMEOUT,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// A container command that runs until SIGTERM, then exits 0 at once.
const SLEEPER: &str = r#"["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]"#;

/// The Docker ID of container `name` in `pod`; panics if it has none.
fn docker_id(pod: &Pod, name: &str) -> String {
    pod.container(name)
        .and_then(|c| c.docker_id())
        .unwrap_or_else(|| panic!("no containerID for {name}: {}", pod.summary()))
        .to_string()
}

/// Waits until the pod from `manifest` shows container `name` running with that readiness, and
/// the pod's Ready and ContainersReady conditions agree.
fn wait_for_ready(agent: &Agent, manifest: &str, name: &str, ready: bool) -> Pod {
    let want = if ready { "True" } else { "False" };
    agent.wait_for_pod(
        manifest,
        &format!("{name} running with ready={ready}, Ready and ContainersReady {want}"),
        CHANGE_TIMEOUT,
        |p| {
            p.container(name).is_some_and(|c| c.is_running() && c.ready == ready)
                && p.condition("Ready") == Some(want)
                && p.condition("ContainersReady") == Some(want)
        },
    )
}

/// An httpGet liveness probe (named port) passes while httpd serves the page; once the file is
/// removed it fails, the container is killed and restarted (restartCount 1, Unhealthy + Killing).
#[test]
fn an_http_liveness_probe_that_starts_failing_restarts_the_container() {
    let manifests = ManifestDir::new();
    manifests.write(
        "web.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: httpd
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "mkdir -p /var/www && echo alive > /var/www/index.html && exec httpd -f -p 8080 -h /var/www"]
    ports:
    - name: http
      containerPort: 8080
    livenessProbe:
      httpGet:
        path: /index.html
        port: http
      initialDelaySeconds: 1
      periodSeconds: 1
      failureThreshold: 2
"#,
    );
    let agent = Agent::start("http-liveness", manifests.path(), &[]);
    let events = EventLog::watch(&agent);
    let pod = agent.wait_for_running("web");
    let first_id = docker_id(&pod, "httpd");

    holds_for(
        "the healthy container to keep running without restarts",
        Duration::from_secs(4),
        || {
            let pod = agent.pod("web").ok_or("web not in /pods")?;
            let c = pod.container("httpd").ok_or("no httpd status")?;
            if c.restart_count == 0 && c.docker_id() == Some(first_id.as_str()) {
                Ok(())
            } else {
                Err(pod.summary())
            }
        },
    );

    let rm = docker::exec(&first_id, &["rm", "/var/www/index.html"]);
    assert!(rm.status.success(), "rm: {}", String::from_utf8_lossy(&rm.stderr));

    let pod = agent.wait_for_pod("web", "httpd restarted and running again", CHANGE_TIMEOUT, |p| {
        p.container("httpd")
            .is_some_and(|c| c.restart_count >= 1 && c.is_running() && c.docker_id() != Some(first_id.as_str()))
    });
    let httpd = pod.container("httpd").unwrap();
    assert_eq!(httpd.restart_count, 1, "{}", httpd.summary());
    assert!(
        httpd.last_terminated().is_some(),
        "lastState.terminated: {}",
        httpd.summary()
    );

    let object = agent.pod_object("web");
    let unhealthy = events.wait_for(&object, "Unhealthy", CHANGE_TIMEOUT, |m| {
        m.starts_with("Liveness probe failed: ")
    });
    assert!(
        unhealthy.message.contains("404"),
        "the failure names the status code: {unhealthy:?}"
    );
    events.wait_for(&object, "Killing", CHANGE_TIMEOUT, |m| {
        m == "Container httpd failed liveness probe, will be restarted"
    });

    // The new container serves its page again: the probe follows it and passes.
    holds_for("the restarted container to stay up", Duration::from_secs(4), || {
        let pod = agent.pod("web").ok_or("web not in /pods")?;
        let c = pod.container("httpd").ok_or("no httpd status")?;
        if c.restart_count == 1 && c.is_running() {
            Ok(())
        } else {
            Err(pod.summary())
        }
    });
}

/// An exec liveness probe restarts the container once its command fails (the file it reads was
/// deleted); the kill is graceful and runs the preStop hook before SIGTERM.
#[test]
fn an_exec_liveness_probe_restarts_the_container_when_its_command_fails() {
    let manifests = ManifestDir::new();
    manifests.write(
        "checked.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: checked
spec:
  terminationGracePeriodSeconds: 5
  volumes:
  - name: state
    emptyDir: {}
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "touch /tmp/health; trap 'echo term >> /state/log; exit 0' TERM; sleep 3600 & wait"]
    volumeMounts:
    - name: state
      mountPath: /state
    livenessProbe:
      exec:
        command: ["cat", "/tmp/health"]
      initialDelaySeconds: 1
      periodSeconds: 1
      failureThreshold: 1
    lifecycle:
      preStop:
        exec:
          command: ["sh", "-c", "echo prestop >> /state/log"]
"#,
    );
    let agent = Agent::start("exec-liveness", manifests.path(), &[]);
    let events = EventLog::watch(&agent);
    let pod = agent.wait_for_running("checked");
    let first_id = docker_id(&pod, "main");
    holds_for("the container to keep running", Duration::from_secs(3), || {
        let pod = agent.pod("checked").ok_or("checked not in /pods")?;
        let c = pod.container("main").ok_or("no main status")?;
        (c.restart_count == 0).then_some(()).ok_or(pod.summary())
    });

    let rm = docker::exec(&first_id, &["rm", "/tmp/health"]);
    assert!(rm.status.success(), "rm: {}", String::from_utf8_lossy(&rm.stderr));

    let pod = agent.wait_for_pod("checked", "main restarted and running again", CHANGE_TIMEOUT, |p| {
        p.container("main")
            .is_some_and(|c| c.restart_count >= 1 && c.is_running() && c.docker_id() != Some(first_id.as_str()))
    });
    let main = pod.container("main").unwrap();
    let last = main
        .last_terminated()
        .unwrap_or_else(|| panic!("lastState.terminated: {}", main.summary()));
    assert_eq!(
        last.exit_code,
        0,
        "killed with SIGTERM first, which the container handles: {}",
        main.summary()
    );

    let object = agent.pod_object("checked");
    let unhealthy = events.wait_for(&object, "Unhealthy", CHANGE_TIMEOUT, |m| {
        m.starts_with("Liveness probe failed: ")
    });
    assert!(
        unhealthy.message.contains("/tmp/health"),
        "the failure carries the command's output: {unhealthy:?}"
    );
    events.wait_for(&object, "Killing", CHANGE_TIMEOUT, |m| {
        m == "Container main failed liveness probe, will be restarted"
    });

    // The emptyDir outlives the container: the preStop hook wrote before the TERM trap did.
    let new_id = docker_id(&pod, "main");
    let log = docker::exec(&new_id, &["cat", "/state/log"]);
    let log = String::from_utf8_lossy(&log.stdout);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines, ["prestop", "term"], "preStop ran, then SIGTERM came");
    let state = agent
        .probe_state("checked", "main", "liveness")
        .unwrap_or_else(|| panic!("no liveness probe on /debug/actors: {:#}", agent.debug()));
    assert_eq!(state["handler"], "exec", "{state}");
}

/// A tcpSocket readiness probe starts not ready; Ready flips true and false with the listener,
/// and `/pods` shows it in the container's `ready` and the pod's conditions; nothing restarts.
/// Under `restartPolicy: OnFailure` a container killed for a failed liveness probe is started
/// again even though it ends with 0 on SIGTERM (kubelet restarts it in the same sync; upstream
/// `storage/subpath.go` "container restart" tests rely on it).
#[test]
fn an_on_failure_container_killed_by_its_liveness_probe_restarts_though_it_exits_0() {
    let manifests = ManifestDir::new();
    manifests.write(
        "onfailure.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: onfailure
spec:
  restartPolicy: OnFailure
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap exit TERM; while true; do sleep 1; done"]
    livenessProbe:
      exec:
        command: ["cat", "/tmp/nonexistent"]
      initialDelaySeconds: 1
      periodSeconds: 2
      failureThreshold: 1
"#,
    );
    let agent = Agent::start("onfailure-liveness", manifests.path(), &[]);
    let pod = agent.wait_for_pod(
        "onfailure",
        "main restarted after a liveness kill",
        CHANGE_TIMEOUT,
        |p| p.container("main").is_some_and(|c| c.restart_count >= 1),
    );
    assert_ne!(pod.phase(), "Succeeded", "{}", pod.summary());
    let last = pod
        .container("main")
        .and_then(|c| c.last_state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .map(|t| t.exit_code);
    assert_eq!(last, Some(0), "the killed instance ended with 0: {}", pod.summary());
}

#[test]
fn a_tcp_readiness_probe_makes_the_pod_ready_only_while_the_port_accepts() {
    let manifests = ManifestDir::new();
    manifests.write(
        "listener.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: listener
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: nc
    image: dockerlet.local/busybox:1
    command:
    - sh
    - -c
    - trap 'exit 0' TERM; while true; do if [ -f /tmp/listen ]; then nc -l -p 9000 </dev/null; else sleep 0.2; fi; done
    readinessProbe:
      tcpSocket:
        port: 9000
      periodSeconds: 1
      failureThreshold: 1
"#,
    );
    let agent = Agent::start("tcp-readiness", manifests.path(), &[]);
    let events = EventLog::watch(&agent);
    let pod = agent.wait_for_pod("listener", "nc running", POD_START_TIMEOUT, |p| {
        p.container("nc").is_some_and(|c| c.is_running())
    });
    let id = docker_id(&pod, "nc");
    holds_for(
        "nc to stay not ready while nothing listens",
        Duration::from_secs(3),
        || {
            let pod = agent.pod("listener").ok_or("listener not in /pods")?;
            let c = pod.container("nc").ok_or("no nc status")?;
            let ok = c.is_running()
                && !c.ready
                && pod.condition("Ready") == Some("False")
                && pod.condition("ContainersReady") == Some("False");
            ok.then_some(()).ok_or(pod.summary())
        },
    );

    let listen = |on: bool| {
        let script = if on {
            "touch /tmp/listen"
        } else {
            // A listener may be starting as the flag goes: kill twice.
            "rm -f /tmp/listen; killall nc; sleep 0.5; killall nc; true"
        };
        let out = docker::exec(&id, &["sh", "-c", script]);
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };

    listen(true);
    wait_for_ready(&agent, "listener", "nc", true);
    listen(false);
    wait_for_ready(&agent, "listener", "nc", false);
    events.wait_for(&agent.pod_object("listener"), "Unhealthy", CHANGE_TIMEOUT, |m| {
        m.starts_with("Readiness probe failed: ")
    });
    listen(true);
    let pod = wait_for_ready(&agent, "listener", "nc", true);

    let nc = pod.container("nc").unwrap();
    assert_eq!(
        nc.restart_count,
        0,
        "readiness failures do not restart: {}",
        nc.summary()
    );
    assert_eq!(nc.docker_id(), Some(id.as_str()), "the same container throughout");
    let state = agent
        .probe_state("listener", "nc", "readiness")
        .unwrap_or_else(|| panic!("no readiness probe on /debug/actors: {:#}", agent.debug()));
    assert_eq!(state["handler"], "tcpSocket", "{state}");
}

/// A startup probe that succeeds late holds back a liveness probe that would fail meanwhile
/// (started false, then true, no restart); one that never succeeds gets its container restarted.
#[test]
fn a_startup_probe_holds_back_liveness_until_it_succeeds_and_restarts_when_it_never_does() {
    let manifests = ManifestDir::new();
    manifests.write(
        "late.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: late
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; (sleep 8; touch /tmp/started) & sleep 3600 & wait"]
    startupProbe:
      exec:
        command: ["cat", "/tmp/started"]
      periodSeconds: 1
      failureThreshold: 60
    livenessProbe:
      exec:
        command: ["cat", "/tmp/started"]
      periodSeconds: 1
      failureThreshold: 1
    readinessProbe:
      exec:
        command: ["cat", "/tmp/started"]
      periodSeconds: 1
"#,
    );
    manifests.write(
        "never.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: never
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    startupProbe:
      exec:
        command: ["cat", "/tmp/never"]
      periodSeconds: 1
      failureThreshold: 2
"#
        ),
    );
    let agent = Agent::start("startup-probe", manifests.path(), &[]);
    let events = EventLog::watch(&agent);

    let mut held_back = false;
    let pod = agent.wait_for_pod("late", "main started and ready", POD_START_TIMEOUT, |p| {
        let Some(c) = p.container("main") else { return false };
        assert_eq!(c.restart_count, 0, "late must not restart: {}", p.summary());
        if c.is_running() && !c.is_started() {
            assert!(!c.ready, "not ready before started: {}", p.summary());
            held_back = true;
        }
        c.is_running() && c.is_started() && c.ready
    });
    assert!(
        held_back,
        "the container was seen running with started=false first: {}",
        pod.summary()
    );
    assert_eq!(pod.condition("Ready"), Some("True"), "{}", pod.summary());
    holds_for("late to keep running without restarts", Duration::from_secs(3), || {
        let pod = agent.pod("late").ok_or("late not in /pods")?;
        let c = pod.container("main").ok_or("no main status")?;
        (c.restart_count == 0 && c.is_started())
            .then_some(())
            .ok_or(pod.summary())
    });
    let late = agent.pod_object("late");
    events.wait_for(&late, "Unhealthy", CHANGE_TIMEOUT, |m| {
        m.starts_with("Startup probe failed: ")
    });
    let liveness_failures: Vec<_> = events
        .about(&late, "Unhealthy")
        .into_iter()
        .filter(|e| e.message.starts_with("Liveness probe failed"))
        .collect();
    assert!(
        liveness_failures.is_empty(),
        "liveness did not run before the startup probe passed: {liveness_failures:?}"
    );

    let mut ever_started = false;
    let pod = agent.wait_for_pod("never", "main restarted twice", CHANGE_TIMEOUT, |p| {
        let Some(c) = p.container("main") else { return false };
        ever_started |= c.is_started() || c.ready;
        c.restart_count >= 2
    });
    assert!(!ever_started, "never is never started nor ready: {}", pod.summary());
    let main = pod.container("main").unwrap();
    assert!(main.last_terminated().is_some(), "{}", main.summary());
    let never = agent.pod_object("never");
    events.wait_for(&never, "Unhealthy", CHANGE_TIMEOUT, |m| {
        m.starts_with("Startup probe failed: ")
    });
    events.wait_for(&never, "Killing", CHANGE_TIMEOUT, |m| {
        m == "Container main failed startup probe, will be restarted"
    });
}

/// One readiness-probed container per HTTP case, against a stub in the test process.
struct HttpCase {
    container: &'static str,
    path: &'static str,
    ready: bool,
    outcome: &'static str,
}

const HTTP_CASES: [HttpCase; 7] = [
    HttpCase {
        container: "ok",
        path: "/ok",
        ready: true,
        outcome: "Success",
    },
    HttpCase {
        container: "redirect-same",
        path: "/redirect-same",
        ready: true,
        outcome: "Success",
    },
    HttpCase {
        container: "redirect-other",
        path: "/redirect-other",
        ready: true,
        outcome: "Warning",
    },
    // Any 3xx that reaches the prober unfollowed is a Warning, as in kubelet's http prober.
    HttpCase {
        container: "status-399",
        path: "/status-399",
        ready: true,
        outcome: "Warning",
    },
    HttpCase {
        container: "status-400",
        path: "/status-400",
        ready: false,
        outcome: "Failure",
    },
    HttpCase {
        container: "status-500",
        path: "/status-500",
        ready: false,
        outcome: "Failure",
    },
    HttpCase {
        container: "slow",
        path: "/slow",
        ready: false,
        outcome: "Failure",
    },
];

/// HTTP probes succeed iff 200 ≤ status < 400: same-host redirects are followed, other-host ones
/// (and a bare 399) warn, slow replies fail; kube-probe headers are sent; the ProbeActor shows it.
#[test]
fn http_probe_results_follow_the_status_code_redirects_and_timeout() {
    let stub = HttpStub::start();
    let port = stub.port();
    stub.route("/ok", Reply::status(200));
    stub.route(
        "/redirect-same",
        Reply::redirect(302, format!("http://127.0.0.1:{port}/redirect-target")),
    );
    stub.route("/redirect-target", Reply::status(200));
    // 127.0.0.2 is loopback too, but the stub listens on 127.0.0.1 only: following this
    // redirect would fail, not following it is a success with a warning.
    stub.route(
        "/redirect-other",
        Reply::redirect(302, format!("http://127.0.0.2:{port}/other-target")),
    );
    stub.route("/status-399", Reply::status(399));
    stub.route("/status-400", Reply::status(400));
    stub.route("/status-500", Reply::status(500));
    stub.route("/slow", Reply::slow(200, Duration::from_secs(3)));

    let mut yaml = String::from(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: matrix
spec:
  terminationGracePeriodSeconds: 2
  containers:
"#,
    );
    for case in &HTTP_CASES {
        yaml.push_str(&format!(
            r#"  - name: {name}
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    readinessProbe:
      httpGet:
        host: 127.0.0.1
        port: {port}
        path: {path}
      periodSeconds: 1
      timeoutSeconds: 1
      failureThreshold: 1
"#,
            name = case.container,
            path = case.path,
        ));
    }
    let manifests = ManifestDir::new();
    manifests.write("matrix.yaml", &yaml);
    let agent = Agent::start("http-matrix", manifests.path(), &[]);
    let events = EventLog::watch(&agent);

    // Settled: the ready ones are ready, and the others were probed a few times.
    let settled = |p: &Pod| -> Result<(), String> {
        for case in &HTTP_CASES {
            let c = p
                .container(case.container)
                .ok_or(format!("no status for {}", case.container))?;
            if !c.is_running() {
                return Err(format!("{} not running", case.container));
            }
            if case.ready != c.ready {
                return Err(format!("{} ready={}", case.container, c.ready));
            }
            if !case.ready && stub.requests_to(case.path).len() < 3 {
                return Err(format!("{} probed fewer than 3 times", case.container));
            }
        }
        Ok(())
    };
    agent.wait_for_pod(
        "matrix",
        "each container ready as its status code says",
        POD_START_TIMEOUT,
        |p| settled(p).is_ok(),
    );
    holds_for(
        "readiness to stay as the status codes say",
        Duration::from_secs(3),
        || {
            let pod = agent.pod("matrix").ok_or("matrix not in /pods")?;
            settled(&pod).map_err(|e| format!("{e}: {}", pod.summary()))
        },
    );
    let pod = agent.pod("matrix").expect("matrix in /pods");
    assert_eq!(pod.condition("Ready"), Some("False"), "{}", pod.summary());
    assert_eq!(pod.condition("ContainersReady"), Some("False"), "{}", pod.summary());

    assert!(
        !stub.requests_to("/redirect-target").is_empty(),
        "the same-host redirect was followed"
    );
    let warning = events.wait_for(&agent.pod_object("matrix"), "ProbeWarning", CHANGE_TIMEOUT, |m| {
        m.starts_with("Readiness probe warning: ")
    });
    assert!(!warning.message.is_empty());

    let probes = stub.requests_to("/ok");
    assert!(!probes.is_empty());
    for request in &probes {
        assert_eq!(request.method, "GET");
        assert!(
            request
                .header("user-agent")
                .is_some_and(|ua| ua.starts_with("kube-probe/")),
            "User-Agent: {request:?}"
        );
        assert_eq!(request.header("accept"), Some("*/*"), "Accept: {request:?}");
    }

    // The ProbeActor lists each probe with its result.
    let pod_object = agent.pod_object("matrix");
    let states: BTreeMap<String, Value> = agent
        .probe_states()
        .into_iter()
        .filter(|p| p["pod"] == pod_object.as_str())
        .map(|p| (p["container"].as_str().unwrap_or("").to_string(), p))
        .collect();
    for case in &HTTP_CASES {
        let state = states
            .get(case.container)
            .unwrap_or_else(|| panic!("no probe for {} on /debug/actors: {states:#?}", case.container));
        let id = docker_id(&pod, case.container);
        let ctx = format!("{}: {state}", case.container);
        assert_eq!(state["pod_uid"], pod.uid(), "{ctx}");
        assert_eq!(state["probe"], "readiness", "{ctx}");
        assert_eq!(state["handler"], "httpGet", "{ctx}");
        assert!(
            state["container_id"].as_str().is_some_and(|c| c.ends_with(&id)),
            "container_id names {id}: {ctx}"
        );
        let result = if case.ready { "Success" } else { "Failure" };
        assert_eq!(state["result"], result, "{ctx}");
        assert_eq!(state["last_outcome"], case.outcome, "{ctx}");
        assert!(state["runs"].as_u64().is_some_and(|r| r >= 1), "{ctx}");
        let (streak, other) = if case.ready {
            ("successes", "failures")
        } else {
            ("failures", "successes")
        };
        assert!(state[streak].as_u64().is_some_and(|n| n >= 1), "{ctx}");
        assert_eq!(state[other], 0, "{ctx}");
        assert_eq!(state["on_hold"], false, "{ctx}");
        assert!(
            state["last_run"]
                .as_str()
                .is_some_and(|t| t.parse::<Timestamp>().is_ok()),
            "last_run is RFC 3339: {ctx}"
        );
        assert!(state["last_output"].is_string(), "{ctx}");
    }
    for (container, code) in [("status-400", "400"), ("status-500", "500")] {
        let output = states[container]["last_output"].as_str().unwrap_or("");
        assert!(output.contains(code), "{container}'s output names {code}: {output:?}");
    }
    assert!(
        states["slow"]["last_output"].as_str().is_some_and(|o| !o.is_empty()),
        "the timeout is explained: {}",
        states["slow"]
    );
}

/// A gRPC readiness probe against a grpc.health.v1 server on the node (host-network pod): ready
/// while SERVING, not ready while NOT_SERVING.
#[test]
fn a_grpc_readiness_probe_follows_the_health_servers_status() {
    let server = GrpcHealthServer::start();
    let manifests = ManifestDir::new();
    manifests.write(
        "grpc.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: grpc
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    readinessProbe:
      grpc:
        port: {port}
      periodSeconds: 1
      failureThreshold: 1
"#,
            port = server.port()
        ),
    );
    let agent = Agent::start("grpc-readiness", manifests.path(), &[]);
    let events = EventLog::watch(&agent);

    let pod = agent.wait_for_running("grpc");
    assert_eq!(
        pod.pod_ip(),
        pod.host_ip(),
        "a host-network pod has the node's IP, where the server listens"
    );
    server.set_serving(false);
    wait_for_ready(&agent, "grpc", "main", false);
    events.wait_for(&agent.pod_object("grpc"), "Unhealthy", CHANGE_TIMEOUT, |m| {
        m.starts_with("Readiness probe failed: ")
    });
    server.set_serving(true);
    let pod = wait_for_ready(&agent, "grpc", "main", true);
    assert_eq!(pod.container("main").unwrap().restart_count, 0);
    let state = agent
        .probe_state("grpc", "main", "readiness")
        .unwrap_or_else(|| panic!("no readiness probe on /debug/actors: {:#}", agent.debug()));
    assert_eq!(state["handler"], "grpc", "{state}");
}

/// Invalid probes (unknown named port, periodSeconds 0, no handler, two handlers, gRPC port 0,
/// a gRPC port given by name) refuse only their container, with CreateContainerConfigError naming the field; a sibling runs.
#[test]
fn invalid_probes_refuse_only_their_container() {
    let manifests = ManifestDir::new();
    manifests.write(
        "invalid.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: invalid
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: healthy
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    readinessProbe:
      exec:
        command: ["true"]
      periodSeconds: 1
  - name: unknown-port
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    ports:
    - name: http
      containerPort: 8080
    readinessProbe:
      httpGet:
        port: nope
  - name: zero-period
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    livenessProbe:
      exec:
        command: ["true"]
      periodSeconds: 0
  - name: no-handler
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    livenessProbe:
      periodSeconds: 1
  - name: two-handlers
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    readinessProbe:
      exec:
        command: ["true"]
      tcpSocket:
        port: 8080
  - name: grpc-port-zero
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    livenessProbe:
      grpc:
        port: 0
  - name: grpc-port-name
    image: dockerlet.local/busybox:1
    command: {SLEEPER}
    ports:
    - name: grpc
      containerPort: 9090
    startupProbe:
      grpc:
        port: grpc
"#
        ),
    );
    let agent = Agent::start("invalid-probes", manifests.path(), &[]);
    let events = EventLog::watch(&agent);
    let refused = [
        ("unknown-port", "readinessProbe.httpGet.port:"),
        ("zero-period", "livenessProbe.periodSeconds:"),
        ("no-handler", "livenessProbe:"),
        ("two-handlers", "readinessProbe:"),
        ("grpc-port-zero", "livenessProbe.grpc.port:"),
        ("grpc-port-name", "startupProbe.grpc.port:"),
    ];
    let settled = |p: &Pod| -> Result<(), String> {
        let healthy = p.container("healthy").ok_or("no status for healthy")?;
        if !(healthy.is_running() && healthy.ready && healthy.restart_count == 0) {
            return Err(healthy.summary());
        }
        for (name, _) in refused {
            let c = p.container(name).ok_or(format!("no status for {name}"))?;
            if c.waiting_reason() != Some("CreateContainerConfigError") {
                return Err(c.summary());
            }
        }
        Ok(())
    };
    let pod = agent.wait_for_pod(
        "invalid",
        "healthy running, the others refused",
        POD_START_TIMEOUT,
        |p| settled(p).is_ok(),
    );
    for (name, field) in refused {
        let c = pod.container(name).unwrap();
        let message = c.waiting_message().unwrap_or("");
        assert!(
            message.starts_with(field),
            "{name}: the message names {field:?}: {message:?}"
        );
        assert!(!c.ready && c.restart_count == 0, "{}", c.summary());
    }
    let object = agent.pod_object("invalid");
    for (_, field) in refused {
        events.wait_for(&object, "Failed", CHANGE_TIMEOUT, |m| m.contains(field));
    }
    holds_for(
        "the refusals and the healthy sibling to stay",
        Duration::from_secs(3),
        || {
            let pod = agent.pod("invalid").ok_or("invalid not in /pods")?;
            settled(&pod).map_err(|e| format!("{e}: {}", pod.summary()))
        },
    );
    let created: Vec<String> = agent
        .pod_containers(pod.uid())
        .iter()
        .filter(|c| !c.is_sandbox())
        .map(|c| c.kube_name().to_string())
        .collect();
    assert_eq!(created, ["healthy"], "no Docker container for a refused one");
}

/// Upstream's "should be ready immediately after startupProbe succeeds": the readiness probe
/// (period 30 s) runs as soon as the startup probe has passed, not a period later, so the pod
/// is Ready within seconds of it (upstream allows 25 s).
#[test]
fn readiness_runs_at_once_when_the_startup_probe_succeeds() {
    let manifests = ManifestDir::new();
    manifests.write(
        "slowstart.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: slowstart
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3; touch /tmp/startup; sleep 3600 & wait"]
    readinessProbe:
      exec:
        command: ["true"]
      periodSeconds: 30
    startupProbe:
      exec:
        command: ["cat", "/tmp/startup"]
      periodSeconds: 1
      failureThreshold: 60
"#,
    );
    let agent = Agent::start("ready-after-startup", manifests.path(), &[]);
    agent.wait_for_pod("slowstart", "app started", POD_START_TIMEOUT, |p| {
        p.container("app").is_some_and(|c| c.started == Some(true))
    });
    let started = Timestamp::now();
    // The readiness ticker's first due time after the startup wait is 30 s after the start.
    agent.wait_for_pod("slowstart", "app ready", Duration::from_secs(15), |p| {
        p.container("app").is_some_and(|c| c.ready)
    });
    let took = Timestamp::now().duration_since(started);
    assert!(took.as_secs() < 15, "ready {took:?} after started");
}
