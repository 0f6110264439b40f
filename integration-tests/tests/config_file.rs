//! The KubeletConfiguration file through the real agent: `enableDebuggingHandlers: false`
//! (from a `--config-dir` drop-in) turns off exec, run, attach, port-forward and container logs
//! with kubelet's 405 while `/pods` still answers; a misspelled key stops the agent at start
//! with exit code 2, naming the key and the file.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use dockerlet_integration_tests::harness::binary;
use dockerlet_integration_tests::{wait_until, Agent, ManifestDir};

/// `GET` (or `POST`) `https://127.0.0.1:<port><path>` with curl, anonymous (the agent's
/// self-signed certificate not checked); the status and body.
fn curl(port: u16, method: &str, path: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "30", "-X", method, "-w", "\n%{http_code}"])
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// A directory with `config.yaml` and a `conf.d/` of drop-ins.
struct ConfigDir {
    dir: tempfile::TempDir,
}

impl ConfigDir {
    fn new(config: &str, drop_ins: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.yaml"), config).unwrap();
        std::fs::create_dir(dir.path().join("conf.d")).unwrap();
        for (name, text) in drop_ins {
            std::fs::write(dir.path().join("conf.d").join(name), text).unwrap();
        }
        ConfigDir { dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config.yaml")
    }

    fn drop_ins(&self) -> PathBuf {
        self.dir.path().join("conf.d")
    }
}

/// With `enableDebuggingHandlers: false` (a drop-in over a file that allows anonymous
/// requests), `/exec`, `/run`, `/attach`, `/portForward` and `/containerLogs` of a running pod
/// answer `405 Debug endpoints are disabled.` as kubelet's `InstallDebuggingDisabledHandlers`,
/// `/configz` is gone, and `/pods` still lists the pod.
#[test]
fn debugging_handlers_off_answer_405_and_pods_still_work() {
    let config = ConfigDir::new(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthentication:\n  anonymous:\n    enabled: true\nauthorization:\n  mode: AlwaysAllow\n",
        &[(
            "50-debug.conf",
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nenableDebuggingHandlers: false\n",
        )],
    );
    let manifests = ManifestDir::new();
    manifests.write(
        "sleeper.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: sleeper
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "echo hello; exec sleep 3600"]
"#,
    );
    let (file, dir) = (config.config(), config.drop_ins());
    let agent = Agent::start(
        "cfg-debug-off",
        manifests.path(),
        &[
            "--config",
            file.to_str().unwrap(),
            "--config-dir",
            dir.to_str().unwrap(),
        ],
    );
    agent.wait_for_running("sleeper");
    let port = agent.ports().kubelet;
    let pod = agent.pod_name("sleeper");
    let disabled = (405, "Debug endpoints are disabled.\n".to_string());
    for (method, path) in [
        (
            "POST",
            format!("/exec/default/{pod}/app?command=echo&command=hi&output=1"),
        ),
        ("GET", format!("/exec/default/{pod}/app?command=echo")),
        ("POST", format!("/run/default/{pod}/app?cmd=echo+hi")),
        ("POST", format!("/attach/default/{pod}/app?output=1")),
        ("GET", format!("/portForward/default/{pod}")),
        ("GET", format!("/containerLogs/default/{pod}/app")),
        ("GET", "/runningpods/".to_string()),
        ("GET", "/debug/pprof/".to_string()),
        ("GET", "/logs/".to_string()),
    ] {
        assert_eq!(curl(port, method, &path), disabled, "{method} {path}");
    }
    assert_eq!(curl(port, "GET", "/configz").0, 404);
    let (status, body) = curl(port, "GET", "/pods");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&pod), "/pods lists the pod: {body}");
    let (status, body) = curl(port, "GET", "/healthz");
    assert_eq!((status, body.as_str()), (200, "ok"));
}

/// A misspelled key, and a value dockerlet cannot honour, stop the agent before it does
/// anything: exit code 2, the error naming the file and the key (and the nearest field).
#[test]
fn a_config_that_cannot_be_honoured_stops_the_agent() {
    for (text, needles) in [
        (
            "staticPodPth: /etc/kubernetes/manifests\n",
            &["staticPodPth: unknown field", "did you mean \"staticPodPath\"?"][..],
        ),
        (
            "containerLogMaxWorkers: 4\n",
            &["containerLogMaxWorkers: 4 is not supported by dockerlet ("][..],
        ),
    ] {
        let config = ConfigDir::new(text, &[]);
        let file = config.config();
        let root = tempfile::tempdir().unwrap();
        let mut child = Command::new(binary())
            .arg("--config")
            .arg(&file)
            .arg("--root-dir")
            .arg(root.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot run the agent");
        let status = wait_until("the agent to exit", Duration::from_secs(30), || {
            child.try_wait().unwrap().ok_or("still running".to_string())
        });
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(&file.display().to_string()), "{stderr}");
        for needle in needles {
            assert!(stderr.contains(needle), "{needle}: {stderr}");
        }
    }
}
