//! The official Python client (`kubernetes` from PyPI, pinned in [`PYTHON_CLIENT`]) against the
//! agent through the test API server's kubelet proxy: exec and attach, logs, port-forward. kubectl
//! is Go's client-go; this is a second implementation of the same wire protocols, written
//! without our code in view, so a format that only our fixture and our agent agree on fails
//! here.
//!
//! What the client sends (read in the installed `kubernetes/stream/ws_client.py` and
//! `stream.py`, and the generated `client/api/core_v1_api.py`):
//! - exec and attach: a WebSocket (`wss://`, `GET`) with `Sec-WebSocket-Protocol:
//!   v5.channel.k8s.io,v4.channel.k8s.io`, and the query `command=` (repeated, one per
//!   argument), `container=`, `stdin=`, `stdout=`, `stderr=`, `tty=` as `true`/`false`. Frames
//!   are one channel byte then data: 0 stdin, 1 stdout, 2 stderr, 3 the error channel (a v1
//!   Status; `returncode` reads `details.causes[0].message` of a failure), 4 resize (JSON
//!   `{"Width", "Height"}`), and with v5 `[255, channel]` closes a channel (`close_channel`).
//!   kube-apiserver answers a v5 WebSocket itself and speaks SPDY to kubelet
//!   (`StreamTranslatorHandler`, `pkg/registry/core/pod/rest/subresources.go`).
//! - port-forward (`kubernetes.stream.portforward`): a WebSocket with the same protocol header
//!   and `ports=8080,8081`; kube-apiserver passes it to kubelet as `port=8080,8081`
//!   (`streamParams`, `pkg/registry/core/pod/strategy.go`), and kubelet picks
//!   `v4.channel.k8s.io`. Each port gets a data channel (2i) and an error channel (2i+1), and the
//!   client refuses a forward unless each channel's first frame is the port number (2 bytes,
//!   little-endian).
//! - logs: a plain `GET …/pods/{name}/log` with `container`, `follow`, `tailLines`,
//!   `timestamps`, `sinceSeconds`; followed, the response is read chunk by chunk
//!   (`urllib3`'s `stream(amt=None)`, as `kubernetes.watch.watch.iter_resp_lines` does), so the
//!   lines only arrive as written if the response is chunked rather than ended by the close.
//!
//! The client runs in a virtualenv made once under the target directory
//! (`target/py-kubernetes-venv`, with `python3 -m venv` and pip; a file lock lets parallel test
//! processes share it). Each test runs a script of `tests/python/` that prints a JSON object of
//! what the client saw; the assertions are here.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{ensure, Context as _};
use dockerlet_fake_apiserver::ApiServer;
use dockerlet_integration_tests::{wait_until, Agent, ManifestDir, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::Value;

mod common;

/// The client and version the virtualenv holds (a current release).
const PYTHON_CLIENT: &str = "kubernetes==37.0.2";

/// The target directory: `$CARGO_TARGET_DIR`, else this workspace's `target/`.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// Runs `cmd`, failing with its output unless it succeeds.
fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let out = cmd.output().with_context(|| format!("cannot run {cmd:?}"))?;
    ensure!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// The virtualenv's Python with [`PYTHON_CLIENT`] installed: made on first use under an
/// exclusive lock (other test processes wait, then find it made); a marker file named after
/// the version says it is complete, so a half-made or older one is made again.
fn make_venv() -> anyhow::Result<PathBuf> {
    let target = target_dir();
    std::fs::create_dir_all(&target).with_context(|| format!("cannot create {}", target.display()))?;
    let venv = target.join("py-kubernetes-venv");
    let lock = File::create(target.join("py-kubernetes-venv.lock")).context("cannot create the venv lock")?;
    lock.lock().context("cannot lock the venv")?;
    let python = venv.join("bin/python");
    let marker = venv.join(format!(".installed-{PYTHON_CLIENT}"));
    if !marker.is_file() {
        if venv.exists() {
            std::fs::remove_dir_all(&venv).with_context(|| format!("cannot remove {}", venv.display()))?;
        }
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        run(Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            PYTHON_CLIENT,
        ]))?;
        std::fs::write(&marker, "").context("cannot write the venv marker")?;
    }
    Ok(python)
}

/// [`make_venv`], once per test process.
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| make_venv().unwrap_or_else(|e| panic!("the Python client's virtualenv: {e:#}")))
}

/// Runs `tests/python/<script> <kubeconfig> <pod>` (at most 180 s) and returns the JSON object
/// it printed last; panics with its output if it failed.
fn run_script(api: &ApiServer, script: &str, pod: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python").join(script);
    let out = Command::new("timeout")
        .arg("180")
        .arg(python())
        .arg(&path)
        .arg(api.kubeconfig_path())
        .arg(pod)
        .env_remove("KUBECONFIG")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script} failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{script} printed no JSON ({e}): {stdout}\n{stderr}"))
}

/// A TLS API server, an agent behind its kubelet proxy, and the pod of `yaml` (`{node}` filled
/// in) running.
fn start(name: &str, pod: &str, yaml: &str) -> (ApiServer, Agent, ManifestDir) {
    // Made before the agent starts, so a first install does not eat into the pod's timeouts.
    python();
    let (api, agent, manifests) = common::proxied_node(name);
    common::kubectl_create(&api, "pod.yaml", &yaml.replace("{node}", agent.node()));
    common::wait_for_phase(&api, pod, "Running", POD_START_TIMEOUT);
    (api, agent, manifests)
}

/// `stream(connect_get_namespaced_pod_exec, …)`: all output at once; a session writing stdin
/// and reading stdout, stderr and the exit code apart; the end of stdin (v5's close) ending
/// `cat`; a terminal sized through the resize channel; and `connect_get_namespaced_pod_attach`
/// to a container reading stdin.
#[test]
fn the_python_client_execs_and_attaches() {
    let (api, _agent, _manifests) = start(
        "py-exec",
        "shell",
        r#"apiVersion: v1
kind: Pod
metadata: {name: shell}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sleep", "3600"]
  - name: reader
    image: dockerlet.local/busybox:1
    stdin: true
    command: ["sh", "-c", "while read line; do echo got:$line; done"]
"#,
    );
    let seen = run_script(&api, "exec.py", "shell");

    let preloaded = seen["preloaded"].as_str().unwrap_or_default();
    assert!(
        preloaded.contains("out-line\n") && preloaded.contains("err-line\n"),
        "{seen:#}"
    );

    // kube-apiserver answers v5 (the agent too, when the fixture passes the WebSocket on).
    assert_eq!(seen["subprotocol"], "v5.channel.k8s.io", "{seen:#}");
    let session = &seen["session"];
    assert_eq!(session["stdout"], "got:ping\n", "{seen:#}");
    assert_eq!(session["stderr"], "err:ping\n", "{seen:#}");
    assert_eq!(session["open"], false, "{seen:#}");
    assert_eq!(session["returncode"], 7, "{seen:#}");

    assert_eq!(seen["cat"]["stdout"], "first\nsecond\n", "{seen:#}");
    assert_eq!(seen["cat"]["open"], false, "{seen:#}");
    assert_eq!(seen["cat"]["returncode"], 0, "{seen:#}");

    // A terminal: one output, lines ending in CRLF, the size sent on channel 4.
    let tty = seen["tty"]["stdout"].as_str().unwrap_or_default();
    assert!(tty.starts_with("30 100\r\n/dev/pts/"), "{seen:#}");
    assert_eq!(seen["tty"]["returncode"], 0, "{seen:#}");

    assert_eq!(seen["attach"], "got:hello-attach", "{seen:#}");
}

/// `read_namespaced_pod_log`: the whole log, `tail_lines`, `timestamps`, `since_seconds`, and
/// `follow=True` with `_preload_content=False` giving each line as the container writes it.
#[test]
fn the_python_client_reads_and_follows_logs() {
    let (api, _agent, _manifests) = start(
        "py-logs",
        "ticker",
        r#"apiVersion: v1
kind: Pod
metadata: {name: ticker}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  containers:
  - name: ticker
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo old-1; echo old-2; echo old-3; sleep 4; i=0; while true; do i=$((i+1)); echo tick-$i; sleep 1; done"]
"#,
    );
    // `old-*` is then at least 6 s old, and `since_seconds=2` must leave it out.
    wait_until("tick-3 in the log", CHANGE_TIMEOUT, || {
        let log = api.kubectl_ok(&["logs", "ticker"]);
        log.contains("tick-3").then_some(()).ok_or(log)
    });
    let seen = run_script(&api, "logs.py", "ticker");

    let all = seen["all"].as_str().unwrap_or_default();
    assert!(
        all.starts_with("old-1\nold-2\nold-3\ntick-1\ntick-2\ntick-3\n"),
        "{seen:#}"
    );

    let tail: Vec<&str> = seen["tail_lines_2"].as_str().unwrap_or_default().lines().collect();
    assert_eq!(tail.len(), 2, "{seen:#}");
    assert!(tail.iter().all(|l| l.starts_with("tick-")), "{seen:#}");
    let n = |line: &str| line.trim_start_matches("tick-").parse::<u32>().unwrap_or(0);
    assert_eq!(n(tail[1]), n(tail[0]) + 1, "the last two lines: {seen:#}");

    let stamped: Vec<&str> = seen["timestamps"].as_str().unwrap_or_default().lines().collect();
    assert_eq!(stamped.len(), 3, "{seen:#}");
    for line in &stamped {
        let (stamp, text) = line.split_once(' ').unwrap_or_default();
        assert!(
            stamp.parse::<jiff::Timestamp>().is_ok() && stamp.ends_with('Z') && text.starts_with("tick-"),
            "an RFC 3339 timestamp, a space, the line: {line:?}"
        );
    }

    let since = seen["since_seconds_2"].as_str().unwrap_or_default();
    assert!(since.contains("tick-") && !since.contains("old-"), "{seen:#}");
    assert!(since.lines().count() <= 4, "more than 2 s of ticks: {seen:#}");

    // Followed: the tail's line at once, then each new tick about a second after the one
    // before (a response held until its end would never have ended: `follow` does not).
    let followed = seen["followed"].as_array().expect("followed lines");
    let lines: Vec<u32> = followed
        .iter()
        .map(|f| n(f["line"].as_str().unwrap_or_default()))
        .collect();
    assert!(
        lines.windows(2).all(|w| w[1] == w[0] + 1) && lines[0] > 0,
        "consecutive ticks: {seen:#}"
    );
    let at: Vec<f64> = followed.iter().map(|f| f["at"].as_f64().unwrap_or_default()).collect();
    assert!(at[3] - at[1] > 1.0, "the lines came as written, not at once: {seen:#}");
}

/// `kubernetes.stream.portforward`: two ports through one forward (an HTTP page and an echo,
/// 64 kB through it), and a port nobody listens on, reported on its error channel.
#[test]
fn the_python_client_forwards_ports() {
    let (api, _agent, _manifests) = start(
        "py-portforward",
        "ports",
        r#"apiVersion: v1
kind: Pod
metadata: {name: ports}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "mkdir -p /www && echo hello-web > /www/index.html && exec httpd -f -p 8080 -h /www"]
  - name: echo
    image: dockerlet.local/busybox:1
    command: ["nc", "-ll", "-p", "8081", "-e", "cat"]
"#,
    );
    let seen = run_script(&api, "port_forward.py", "ports");
    let web = seen["web"].as_str().unwrap_or_default();
    assert!(web.contains("200 OK") && web.contains("hello-web"), "{seen:#}");
    assert_eq!(seen["echo"], "echo-me\n", "{seen:#}");
    assert_eq!(seen["echo_big_ok"], true, "{seen:#}");
    assert_eq!(seen["errors"], serde_json::json!([null, null]), "{seen:#}");

    assert_eq!(seen["nobody_data"], "", "{seen:#}");
    let error = seen["nobody_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("error forwarding port 9999 to pod") && error.contains("connection refused"),
        "{seen:#}"
    );
}
