//! Container logs under load (issue 12, "Bad input and load"): 100 concurrent `kubectl logs -f`
//! through the test API server on one container, and a follow client that never reads while
//! the container writes 100 MiB as fast as it can — the agent's memory stays bounded (its
//! response body pulls from Docker's log stream only as the socket takes it) and it keeps
//! answering `/healthz`.

use std::fs::File;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use dockerlet_fake_apiserver::KUBECTL;
use dockerlet_integration_tests::kubelet_stream::ClientPki;
use dockerlet_integration_tests::{
    docker, holds_for, wait_for, Agent, ContainerStatusExt, ManifestDir, PodExt, CHANGE_TIMEOUT, POD_START_TIMEOUT,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const FOLLOWERS: usize = 100;
const LINES: usize = 50;

/// A `kubectl logs -f` in the background, its stdout in a file; killed on drop.
struct Follower {
    child: Child,
    out: std::path::PathBuf,
}

impl Follower {
    fn output(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// 100 `kubectl logs -f` on one container at once, every other one with `--tail 1`: each sees
/// the line written before it attached, then every line written after all had attached, and
/// each ends with exit status 0 when the container exits (Docker 20.10 can end a follow before
/// the last lines; the agent reads them again, with or without tailLines).
#[test]
fn hundred_kubectl_logs_follow_on_one_container() {
    let (api, agent, _manifests) = common::proxied_node("logs-hundred");
    let path = api.dir().join("talker.yaml");
    std::fs::write(
        &path,
        format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: talker
spec:
  nodeName: {node}
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "echo ready; while [ ! -f /tmp/go ]; do sleep 0.2; done; for i in $(seq 1 {LINES}); do echo line-$i; done; echo bye"]
"#,
            node = agent.node()
        ),
    )
    .unwrap();
    api.kubectl_ok(&["create", "-f", path.to_str().unwrap()]);
    wait_for("talker Running", POD_START_TIMEOUT, || {
        api.get("pods", "default", "talker")
            .filter(|p| p["status"]["phase"] == "Running")
    });

    let dir = tempfile::tempdir().unwrap();
    let followers: Vec<Follower> = (0..FOLLOWERS)
        .map(|i| {
            let out = dir.path().join(format!("follower-{i}.log"));
            let child = Command::new("timeout")
                .arg("180")
                .arg(KUBECTL)
                .arg("--kubeconfig")
                .arg(api.kubeconfig_path())
                .arg("--cache-dir")
                .arg(api.dir().join("kube-cache"))
                .args(["logs", "-f", "talker", "-c", "app"])
                .args(if i % 2 == 1 { &["--tail", "1"][..] } else { &[] })
                .env_remove("KUBECONFIG")
                .stdin(Stdio::null())
                .stdout(File::create(&out).unwrap())
                .stderr(File::create(dir.path().join(format!("follower-{i}.err"))).unwrap())
                .spawn()
                .expect("run kubectl logs -f");
            Follower { child, out }
        })
        .collect();
    wait_until_all("every follower attached", &followers, |out| out.starts_with("ready\n"));

    let out = api.kubectl(&["exec", "talker", "-c", "app", "--", "touch", "/tmp/go"]);
    assert!(out.status.success(), "{out:?}");

    let expected: String = std::iter::once("ready".to_string())
        .chain((1..=LINES).map(|i| format!("line-{i}")))
        .chain(std::iter::once("bye".to_string()))
        .map(|l| l + "\n")
        .collect();
    let mut followers = followers;
    let deadline = Instant::now() + Duration::from_secs(120);
    for (i, follower) in followers.iter_mut().enumerate() {
        let status = loop {
            if let Some(status) = follower.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "follower {i} did not end after the container exited: {:?}",
                follower.output()
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let stderr = std::fs::read_to_string(dir.path().join(format!("follower-{i}.err"))).unwrap_or_default();
        assert!(status.success(), "follower {i}: {status} {stderr}");
        assert_eq!(follower.output(), expected, "follower {i}: {stderr}");
    }
    wait_for("talker Succeeded", CHANGE_TIMEOUT, || {
        api.get("pods", "default", "talker")
            .filter(|p| p["status"]["phase"] == "Succeeded")
    });
}

fn wait_until_all(what: &str, followers: &[Follower], ready: impl Fn(&str) -> bool) {
    wait_for(what, Duration::from_secs(120), || {
        followers.iter().all(|f| ready(&f.output())).then_some(())
    });
}

/// VmRSS of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the agent's /proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb * 1024
}

const FLOOD_BYTES: u64 = 100 * 1024 * 1024;
const RSS_BOUND: u64 = 30 * 1024 * 1024;

/// A follow client that never reads while the container writes 100 MiB: the agent reads
/// Docker's stream only as fast as the socket takes it, so its RSS grows by less than 30 MiB,
/// and it answers `/healthz` meanwhile. The stream is still live afterwards: reading it gives
/// a 200 and the container's output.
#[test]
fn a_follow_client_that_never_reads_keeps_the_agent_bounded() {
    let pki = ClientPki::new().unwrap();
    let manifests = ManifestDir::new();
    manifests.write(
        "flood.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: flood
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "echo ready; while [ ! -f /tmp/go ]; do sleep 0.2; done; yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx | head -c {FLOOD_BYTES}; touch /tmp/done; exec sleep 3600"]
"#
        ),
    );
    let ca = pki.ca.display().to_string();
    let agent = Agent::start(
        "logs-never-read",
        manifests.path(),
        &["--client-ca-file", &ca, "--authorization-mode", "AlwaysAllow"],
    );
    let pod = agent.wait_for_running("flood");
    let id = pod
        .container("app")
        .and_then(|c| c.docker_id())
        .expect("app's id")
        .to_string();
    let pid = agent.pid().expect("the agent runs");
    let client = pki.client(agent.ports().kubelet).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let path = format!("/containerLogs/default/{}/app?follow=true", agent.pod_name("flood"));
    let mut stream = runtime.block_on(async {
        let mut tls = client.connect().await.unwrap();
        let head = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        tls.write_all(head.as_bytes()).await.unwrap();
        tls.flush().await.unwrap();
        tls
    });
    // The request reached the handler (a /healthz round trip after it), then the baseline.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(agent.healthz().unwrap().0, 200);
    let before = rss(pid);

    let out = docker::exec(&id, &["touch", "/tmp/go"]);
    assert!(out.status.success(), "{out:?}");
    let mut peak = before;
    let mut healthz_checks = 0;
    wait_for("the container wrote 100 MiB", Duration::from_secs(120), || {
        peak = peak.max(rss(pid));
        let (code, body) = agent.healthz().expect("/healthz while a client does not read");
        assert_eq!(code, 200, "{body}");
        healthz_checks += 1;
        docker::exec(&id, &["test", "-f", "/tmp/done"])
            .status
            .success()
            .then_some(())
    });
    // Time for an agent that buffers to have read what Docker has for it.
    holds_for("the agent's RSS bounded", Duration::from_secs(3), || {
        peak = peak.max(rss(pid));
        Ok(())
    });
    let grown = peak.saturating_sub(before);
    eprintln!(
        "agent RSS {} KiB before, peak {} KiB, {healthz_checks} /healthz answered meanwhile",
        before / 1024,
        peak / 1024
    );
    assert!(
        grown < RSS_BOUND,
        "the agent's RSS grew by {} MiB (from {} MiB) with a client that never reads",
        grown / (1024 * 1024),
        before / (1024 * 1024)
    );
    assert!(healthz_checks > 0);

    // The stream was live all along: it answers 200 with the container's output.
    let head = runtime.block_on(async {
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = Vec::new();
        while got.len() < 16 * 1024 {
            let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buf))
                .await
                .expect("the stream to give data")
                .expect("read the stream");
            assert!(n > 0, "the stream ended: {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).into_owned()
    });
    assert!(head.starts_with("HTTP/1.1 200"), "{head:.300}");
    assert!(head.contains("ready\n") && head.contains("xxxxxxxxxx\n"), "{head:.300}");
}
