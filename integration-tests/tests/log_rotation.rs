//! Container logs rotated as kubelet's `containerLogMaxSize`/`containerLogMaxFiles` ask
//! (upstream `test/e2e_node/container_log_rotation_test.go`: MaxFiles 3, a small MaxSize, a
//! busybox that writes lines). With Docker the rotation is Docker's own, as under cri-dockerd:
//! every container is created with json-file's `max-size`/`max-file`; Docker renames the full
//! file to `<id>-json.log.1` and reopens the same path, so the CRI log path under
//! `--pod-logs-dir` (a link to it) stays true, and the kubelet API's `/containerLogs` reads
//! every line Docker still keeps.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use dockerlet_integration_tests::docker::{docker_ok, Container};
use dockerlet_integration_tests::harness::binary;
use dockerlet_integration_tests::{wait_until, Agent, ManifestDir, CHANGE_TIMEOUT};

/// The agent's flags: the rotation under test, and the kubelet API open to the test's curl.
const ROTATION_ARGS: &[&str] = &[
    "--container-log-max-size",
    "20Ki",
    "--container-log-max-files",
    "3",
    "--anonymous-auth",
    "--authorization-mode",
    "AlwaysAllow",
];

/// `--container-log-max-size 20Ki`.
const MAX_SIZE: u64 = 20 * 1024;
/// `--container-log-max-files 3`.
const MAX_FILES: usize = 3;
/// More than one json-file entry of the container's lines takes.
const ENTRY_MAX: u64 = 200;
/// Lines the container writes: ~110 bytes each in json-file, ~700 KB in all.
const LINES: usize = 6000;

/// `GET https://127.0.0.1:<port><path>` with curl, anonymously (the agent runs with
/// `--anonymous-auth --authorization-mode AlwaysAllow`); the status and body.
fn curl(port: u16, path: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "60", "-w", "\n%{http_code}"])
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// The numbers of the `line-<n> …` lines of `text`, in order.
fn numbers(text: &str) -> Vec<usize> {
    text.lines()
        .filter_map(|l| l.strip_prefix("line-")?.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The JSON lines of a json-file log file.
fn json_lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .count()
}

/// `HostConfig.LogConfig` of a container, as JSON.
fn log_config(id: &str) -> serde_json::Value {
    serde_json::from_str(&docker_ok(&["inspect", "-f", "{{json .HostConfig.LogConfig}}", id])).unwrap()
}

fn app_container(agent: &Agent) -> Container {
    agent
        .containers()
        .into_iter()
        .find(|c| c.kube_name() == "app")
        .expect("the app container")
}

/// The agent creates containers with the rotation asked for; Docker rotates at the size and
/// keeps the number of files; the `--pod-logs-dir` and `/var/log/containers` links still
/// resolve to the current file; `/containerLogs` returns the last lines, in order, with no gap,
/// exactly as many as Docker's files hold.
#[test]
fn docker_rotates_container_logs_and_kubectl_logs_reads_what_it_keeps() {
    let manifests = ManifestDir::new();
    manifests.write(
        "spewer.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: spewer
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: setup
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["echo", "set up"]
  - name: sidecar
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    restartPolicy: Always
    command: ["sleep", "3600"]
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "i=1; while [ $i -le {LINES} ]; do echo \"line-$i padding-padding-padding-padding\"; i=$((i+1)); done; exec sleep 3600"]
"#
        ),
    );
    let agent = Agent::start("log-rotation", manifests.path(), ROTATION_ARGS);
    agent.wait_for_running("spewer");
    let port = agent.ports().kubelet;
    let pod = agent.pod_name("spewer");
    let logs_path = format!("/containerLogs/default/{pod}/app");

    // Every line written (the last one reaches Docker's log).
    let body = wait_until("the last line in the container's log", CHANGE_TIMEOUT, || {
        let (status, body) = curl(port, &format!("{logs_path}?tailLines=1"));
        (status == 200 && numbers(&body) == [LINES])
            .then_some(body.clone())
            .ok_or(format!("{status}: {body}"))
    });
    assert!(body.contains("padding"), "{body}");

    // /configz shows the settings in effect, as kubelet's.
    let (status, configz) = curl(port, "/configz");
    assert_eq!(status, 200, "{configz}");
    let configz: serde_json::Value = serde_json::from_str(&configz).unwrap();
    assert_eq!(configz["kubeletconfig"]["containerLogMaxSize"], "20Ki", "{configz}");
    assert_eq!(configz["kubeletconfig"]["containerLogMaxFiles"], 3, "{configz}");

    // Docker was told the rotation: json-file, max-size in bytes, max-file.
    let app = app_container(&agent);
    let config = log_config(&app.id);
    assert_eq!(config["Type"], "json-file", "{config}");
    assert_eq!(config["Config"]["max-size"], MAX_SIZE.to_string(), "{config}");
    assert_eq!(config["Config"]["max-file"], MAX_FILES.to_string(), "{config}");
    // Every container of the pod: init, sidecar, app and the sandbox.
    let containers = agent.containers();
    let names: Vec<&str> = containers.iter().map(|c| c.kube_name()).collect();
    for name in ["setup", "sidecar", "app", "POD"] {
        assert!(names.contains(&name), "{name} among {names:?}");
    }
    for c in &containers {
        let config = log_config(&c.id);
        assert_eq!(config["Config"]["max-file"], "3", "{}: {config}", c.kube_name());
        assert_eq!(config["Config"]["max-size"], "20480", "{}: {config}", c.kube_name());
    }

    // The files Docker keeps: the current one under the size, rotated ones up to MAX_FILES in all.
    let root = PathBuf::from(docker_ok(&["info", "-f", "{{.DockerRootDir}}"]).trim());
    let current = root.join(format!("containers/{0}/{0}-json.log", app.id));
    let rotated = |n: usize| PathBuf::from(format!("{}.{n}", current.display()));
    // Docker rotates before a write once the file holds max-size bytes or more (moby
    // `daemon/logger/loggerutils/logfile.go`, `checkCapacityAndRotate`), so a file ends at most
    // one entry past it and a rotated one at least at it.
    let size = std::fs::metadata(&current).expect("the current log file").len();
    assert!(
        size < MAX_SIZE + ENTRY_MAX,
        "the current file holds {size} bytes, over {MAX_SIZE}"
    );
    for n in 1..MAX_FILES {
        let size = std::fs::metadata(rotated(n))
            .unwrap_or_else(|e| panic!("{}: {e}", rotated(n).display()))
            .len();
        assert!(
            (MAX_SIZE..MAX_SIZE + ENTRY_MAX).contains(&size),
            "{} holds {size} bytes",
            rotated(n).display()
        );
    }
    assert!(!rotated(MAX_FILES).exists(), "no more than {MAX_FILES} files are kept");
    let kept = json_lines(&current) + (1..MAX_FILES).map(|n| json_lines(&rotated(n))).sum::<usize>();

    // The CRI log path and the /var/log/containers link still lead to the current file.
    let cri_log = agent
        .pod_logs_dir()
        .join(format!("default_{pod}_{}/app/0.log", app.pod_uid()));
    assert_eq!(std::fs::read_link(&cri_log).expect("the CRI log link"), current);
    assert_eq!(
        std::fs::canonicalize(&cri_log).unwrap(),
        std::fs::canonicalize(&current).unwrap()
    );
    let tail = std::fs::read_to_string(&cri_log).unwrap();
    assert!(
        tail.contains(&format!("line-{LINES} ")),
        "the link reads the newest lines"
    );
    let legacy = format!("/var/log/containers/{pod}_default_app-{}.log", app.id);
    assert_eq!(
        std::fs::canonicalize(&legacy).unwrap(),
        std::fs::canonicalize(&current).unwrap(),
        "{legacy}"
    );

    // kubectl logs: every line Docker keeps, in order, no gap, ending with the last.
    let (status, body) = curl(port, &logs_path);
    assert_eq!(status, 200, "{body}");
    let got = numbers(&body);
    assert_eq!(got.len(), kept, "as many lines as Docker's {MAX_FILES} files hold");
    assert_eq!(got.last(), Some(&LINES));
    assert!(
        got[0] > 1,
        "the oldest lines were rotated away (first kept: {})",
        got[0]
    );
    let expected: Vec<usize> = (got[0]..=LINES).collect();
    assert_eq!(got, expected, "in order, without a gap");
}

/// Rotation settings kubelet refuses stop the agent before it touches Docker: exit code 2, the
/// error naming the flag and kubelet's reason (`validation.go`: "containerLogMaxFiles must be
/// greater than 1"; a max size that is no quantity).
#[test]
fn bad_rotation_settings_stop_the_agent() {
    for (args, needle) in [
        (
            ["--container-log-max-files", "1"],
            "invalid value for --container-log-max-files: 1: containerLogMaxFiles must be greater than 1",
        ),
        (
            ["--container-log-max-size", "10MB"],
            "invalid value for --container-log-max-size: failed to parse container log max size \"10MB\"",
        ),
    ] {
        let root = tempfile::tempdir().unwrap();
        let mut child = Command::new(binary())
            .args(args)
            .arg("--root-dir")
            .arg(root.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot run the agent");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                // Never leave an agent behind: it would run with the host's defaults.
                child.kill().ok();
                child.wait().ok();
                panic!("{args:?}: the agent did not stop");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
}

/// `kubectl logs -f` across rotations: a follow opened before the container writes gets every
/// line, in order, while Docker rotates the file under it many times (each rotation renames the
/// file the reader holds and reopens the path; Docker's follower moves on to the new file).
#[test]
fn a_follow_reads_every_line_across_rotations() {
    const FOLLOWED: usize = 3000;
    let manifests = ManifestDir::new();
    manifests.write(
        "follower.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: follower
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "sleep 3; i=1; while [ $i -le {FOLLOWED} ]; do echo \"line-$i padding-padding-padding-padding\"; [ $((i % 50)) -eq 0 ] && sleep 0.02; i=$((i+1)); done; true"]
"#
        ),
    );
    let agent = Agent::start("log-rotation-follow", manifests.path(), ROTATION_ARGS);
    agent.wait_for_running("follower");
    let port = agent.ports().kubelet;
    // Ends when the container exits.
    let (status, body) = curl(
        port,
        &format!("/containerLogs/default/{}/app?follow=true", agent.pod_name("follower")),
    );
    assert_eq!(status, 200, "{body}");
    let got = numbers(&body);
    let app = app_container(&agent);
    let rotated = log_config(&app.id);
    assert_eq!(rotated["Config"]["max-size"], MAX_SIZE.to_string(), "{rotated}");
    let expected: Vec<usize> = (1..=FOLLOWED).collect();
    assert!(
        got == expected,
        "{} lines followed, first {:?}, last {:?}; missing: {:?}; jumps: {:?}",
        got.len(),
        got.first(),
        got.last(),
        expected
            .iter()
            .filter(|n| !got.contains(n))
            .take(20)
            .collect::<Vec<_>>(),
        got.windows(2).filter(|w| w[1] != w[0] + 1).take(20).collect::<Vec<_>>()
    );
}
