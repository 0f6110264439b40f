//! The engine's faults: dockerd stopped and started under 110 pods, and an engine that answers
//! every call 500 ms late.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use super::agent_faults::start_timeout;
use super::node::ChaosNode;
use super::{ChaosSettings, Outcome};
use crate::agent::count_pods;
use crate::proxy::DockerProxy;
use crate::scenarios::Ctx;
use crate::stats::Samples;
use dockerlet_integration_tests::docker::Container;
use serde_json::Value;

const DOCKER_SOCKET: &str = "/var/run/docker.sock";
/// How long dockerd stays away once it has stopped.
const ENGINE_AWAY: Duration = Duration::from_secs(20);
/// How long `/pods` may go on calling a container running once Docker has it stopped (from its
/// `FinishedAt`, or from dockerd answering again for the containers that stopped with it): the
/// agent learns it from Docker's `die` event, or at its first relist that succeeds (every second
/// while the events are down), and the pod's status follows.
const STALE_WITHIN: f64 = 5.0;
/// The delay of every call on the slow engine.
const SLOW_DELAY: Duration = Duration::from_millis(500);

/// PIDs of the processes named `dockerd`.
fn dockerd_pids() -> Vec<i32> {
    crate::sys::pids_named(&["dockerd"])
        .into_iter()
        .filter_map(|p| i32::try_from(p).ok())
        .collect()
}

/// What Docker runs for the node: pod UID → (running sandboxes, running app containers). One
/// `docker ps` with the labels (no inspect: it is read every iteration while Docker is busy).
fn engine_view(node: &ChaosNode) -> BTreeMap<String, (usize, usize)> {
    let out = Command::new("docker")
        .args(["ps", "--no-trunc", "--filter"])
        .arg(format!(
            "label={}={}",
            dockerlet_integration_tests::docker::NODE_LABEL,
            node.agent.node()
        ))
        .args([
            "--format",
            "{{.Label \"io.kubernetes.pod.uid\"}} {{.Label \"io.kubernetes.container.name\"}}",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut pods: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (uid, name) in out.lines().filter_map(|l| l.split_once(' ')) {
        let entry = pods.entry(uid.to_string()).or_default();
        if name == "POD" {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }
    pods
}

/// The containers `pods` (a read of `/pods`) calls running that Docker does not run, each with
/// its age. Docker inspects only the containers `/pods` calls running (cheap enough to sample
/// every second at 110 pods while Docker is busy), after `/pods` was read, so a container that
/// stopped between the two reads is a claim of age about 0.
fn stale_claims(pods: &[Value], back: jiff::Timestamp) -> Vec<Claim> {
    let claimed: Vec<(String, String)> = pods
        .iter()
        .flat_map(|p| {
            let name = p["metadata"]["name"].as_str().unwrap_or_default().to_string();
            p["status"]["containerStatuses"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |s| (name.clone(), s))
        })
        .filter(|(_, s)| !s["state"]["running"].is_null())
        .filter_map(|(n, s)| {
            s["containerID"]
                .as_str()
                .map(|id| (n, id.trim_start_matches("docker://").to_string()))
        })
        .collect();
    let ids: Vec<&str> = claimed.iter().map(|(_, id)| id.as_str()).collect();
    let containers = dockerlet_integration_tests::docker::inspect_many(&ids);
    claimed
        .into_iter()
        .filter_map(|(pod, id)| {
            let container = containers.iter().find(|c| c.id == id);
            (!container.is_some_and(|c| c.state.running)).then(|| Claim::of(pod, id, container, back))
        })
        .collect()
}

/// What `/debug/actors` says of the pod's worker (its view: phase, next action, last error).
fn worker_view(node: &ChaosNode, pod: &str) -> String {
    let Ok(debug) = node.agent.try_debug() else {
        return "no /debug/actors".into();
    };
    let actors = debug["actors"].as_array().cloned().unwrap_or_default();
    let view = actors
        .iter()
        .find(|a| a["kind"] == "PodWorker" && a["name"].as_str().is_some_and(|n| n.contains(pod)))
        .map(|a| serde_json::json!({ "detail": a["detail"], "view": a["view"] }).to_string())
        .unwrap_or_else(|| "no worker".into());
    view.chars().take(1500).collect()
}

/// A stale claim: `<pod> <id>`, Docker's state of the container, and how long `/pods` has called
/// it running against Docker's word — since its `FinishedAt`, or since `back` (dockerd
/// answering again) for a container that stopped before.
struct Claim {
    pod: String,
    what: String,
    age: f64,
}

impl Claim {
    /// `/pods` calls `id` of `pod` running; `container` is Docker's word on it (none: gone).
    fn of(pod: String, id: String, container: Option<&Container>, back: jiff::Timestamp) -> Claim {
        let finished = container
            .and_then(|c| c.state.finished_at.parse::<jiff::Timestamp>().ok())
            .map_or(back, |f| f.max(back));
        let age = (jiff::Timestamp::now() - finished)
            .total(jiff::Unit::Second)
            .unwrap_or(0.0);
        let state = container.map_or("gone".to_string(), |c| {
            format!(
                "{} started {} finished {}",
                c.state.status, c.state.started_at, c.state.finished_at
            )
        });
        Claim {
            what: format!("{pod} {id}: {state}"),
            pod,
            age,
        }
    }

    /// What the agent's debug endpoint says of the claim's pod, added to its description.
    fn explained(mut self, node: &ChaosNode) -> Claim {
        self.what = format!("{}; its worker: {}", self.what, worker_view(node, &self.pod));
        self
    }
}

/// Stops dockerd (SIGTERM, as its service manager does) and waits until it has gone, sampling
/// `/healthz` meanwhile and for [`ENGINE_AWAY`] after: the samples `(seconds since dockerd was
/// gone, status)` (negative while it stops its containers and still answers).
fn stop_dockerd(node: &ChaosNode) -> anyhow::Result<Vec<(f64, Option<u16>)>> {
    let pids = dockerd_pids();
    if pids.is_empty() {
        bail!("no dockerd runs");
    }
    let t = Instant::now();
    for pid in &pids {
        let pid = rustix::process::Pid::from_raw(*pid).context("a PID")?;
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).context("SIGTERM dockerd")?;
    }
    let mut samples = Vec::new();
    while !dockerd_pids().is_empty() {
        if t.elapsed() > Duration::from_secs(120) {
            bail!("dockerd did not stop within 120 s");
        }
        samples.push((t.elapsed().as_secs_f64(), node.healthz()));
        std::thread::sleep(Duration::from_millis(250));
    }
    let gone = t.elapsed().as_secs_f64();
    let away = Instant::now() + ENGINE_AWAY;
    while Instant::now() < away {
        samples.push((t.elapsed().as_secs_f64(), node.healthz()));
        std::thread::sleep(Duration::from_millis(250));
    }
    Ok(samples.into_iter().map(|(at, s)| (at - gone, s)).collect())
}

/// Starts dockerd again the way `make test` does (`scripts/ensure-docker.sh`).
fn start_dockerd() -> anyhow::Result<()> {
    let script = crate::workspace_root().join("scripts/ensure-docker.sh");
    let status = Command::new(&script)
        .status()
        .with_context(|| format!("run {}", script.display()))?;
    if !status.success() {
        bail!("{} failed: {status}", script.display());
    }
    Ok(())
}

/// dockerd stopped (SIGTERM) and started again at `node_pods` pods: `/healthz` fails while it is
/// away; afterwards every pod runs again, per its restartPolicy Always, with exactly one sandbox
/// and one app container; `/pods` stops claiming containers Docker no longer runs.
pub fn engine_restart(ctx: &Ctx, s: &ChaosSettings) -> anyhow::Result<Outcome> {
    let n = s.node_pods;
    let node = ChaosNode::start(ctx, "engine", &[])?;
    node.add_pods("engine", n);
    node.wait_ready("engine", n, start_timeout(n))?;

    let samples = stop_dockerd(&node)?;
    // The agent notices within its PLEG period (1 s) and a relist; from then on it must fail.
    let settled: Vec<_> = samples.iter().filter(|(t, _)| *t > 2.0).collect();
    let failing = settled.iter().filter(|(_, s)| *s != Some(200)).count();
    start_dockerd()?;
    let back = Instant::now();
    let back_at = jiff::Timestamp::now();

    let mut stale_seen: Option<(f64, f64)> = None;
    let mut oldest: Option<Claim> = None;
    let (mut reads, mut unread) = (0, 0);
    let mut last_view = String::from("no read of /pods answered");
    let recovered = loop {
        if back.elapsed() > start_timeout(n) + Duration::from_secs(60) {
            bail!(
                "not recovered {:?} after dockerd started again: {last_view}",
                back.elapsed()
            );
        }
        // When this sample's `/pods` was read (the Docker reads after it take seconds at 110 pods).
        let t = back.elapsed().as_secs_f64();
        let Ok(listed) = node.pods() else {
            unread += 1;
            std::thread::sleep(Duration::from_millis(500));
            continue;
        };
        reads += 1;
        let claims = stale_claims(&listed, back_at);
        let stale = claims.len();
        if let Some(claim) = claims.into_iter().max_by(|a, b| a.age.total_cmp(&b.age)) {
            if oldest.as_ref().is_none_or(|o| claim.age > o.age) {
                oldest = Some(claim.explained(&node));
            }
        }
        if stale > 0 {
            stale_seen = Some(stale_seen.map_or((t, t), |(first, _)| (first, t)));
        }
        let pods = engine_view(&node);
        let exact = pods.len() == n && pods.values().all(|v| *v == (1, 1));
        let ready = count_pods(&listed, "engine").ready;
        if exact && ready >= n && stale == 0 {
            break t;
        }
        last_view = format!(
            "{} pods on the engine, {ready} ready on /pods, {stale} stale claims",
            pods.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    // Once recovered it stays so: no second sandbox or instance appears.
    std::thread::sleep(Duration::from_secs(10));
    let pods = engine_view(&node);
    let still_exact = pods.len() == n && pods.values().all(|v| *v == (1, 1));
    let stale_after = node
        .pods()
        .map_or(usize::MAX, |listed| stale_claims(&listed, back_at).len());
    let healthz = node.healthz();

    let mut o = Outcome::default();
    o.check(
        "/healthz fails while the engine is away",
        format!(
            "{failing} of {} samples (from 2 s after dockerd was gone) not 200",
            settled.len()
        ),
        !settled.is_empty() && failing == settled.len(),
    );
    o.check(
        format!("all {n} pods back, each with exactly one sandbox and one app container"),
        format!("{recovered:.1} s after dockerd started; still so 10 s later: {still_exact}"),
        still_exact,
    );
    o.check(
        format!(
            "/pods calls no container running more than {STALE_WITHIN} s after Docker has it stopped \
             (its FinishedAt, or dockerd answering again for those that stopped with it: the agent \
             learns it from the die event, or at its first relist that succeeds, every second while \
             Docker's events are down); none at the end"
        ),
        match (stale_seen, &oldest) {
            (Some((a, b)), Some(o)) => format!(
                "claims seen from {a:.1} s to {b:.1} s after dockerd started; the oldest {:.1} s old ({}); \
                 {stale_after} at the end",
                o.age, o.what
            ),
            _ => format!("none seen; {stale_after} at the end"),
        } + &format!(" ({reads} reads of /pods, {unread} unanswered)"),
        stale_after == 0 && oldest.as_ref().is_none_or(|o| o.age <= STALE_WITHIN),
    );
    o.check("/healthz 200 again", format!("{healthz:?}"), healthz == Some(200));
    o.figure("pods", n);
    o.figure("recovered_s", recovered);
    Ok(o)
}

/// A pod serving HTTP with an httpGet readiness probe and an exec liveness probe (an exec is
/// three engine calls), both every 2 s with a 10 s timeout.
fn probed_pod(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 0
  containers:
    - name: main
      image: dockerlet.local/busybox:1
      command: [\"sh\", \"-c\", \"echo ok > /tmp/index.html && exec httpd -f -p 8080 -h /tmp\"]
      readinessProbe:
        httpGet: {{path: /index.html, port: 8080}}
        periodSeconds: 2
        timeoutSeconds: 10
      livenessProbe:
        exec: {{command: [\"true\"]}}
        periodSeconds: 2
        timeoutSeconds: 10
"
    )
}

/// The agent on an engine behind a proxy that holds every call back 500 ms: its pods start and
/// stay ready, the calls in flight (connections open to the engine) stay bounded, memory
/// stays flat and `/healthz` answers 200 at once throughout (the engine does answer).
pub fn slow_engine(ctx: &Ctx, s: &ChaosSettings) -> anyhow::Result<Outcome> {
    let n = s.slow_pods;
    let proxy = DockerProxy::start_delayed(&ctx.rt, Path::new(DOCKER_SOCKET), SLOW_DELAY)?;
    let endpoint = proxy.endpoint();
    let node = ChaosNode::start(ctx, "slow", &["--container-runtime-endpoint", &endpoint])?;
    for i in 0..n {
        let name = format!("slow-{i}");
        node.write_manifest(&format!("{name}.yaml"), &probed_pod(&name));
    }
    let started = node.wait_ready("slow", n, start_timeout(n) * 3)?;
    proxy.connections().reset_max();
    let rss_start = node.rss_kb().unwrap_or(0);
    let (mut healthz, mut latencies, mut rss, mut open) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let end = Instant::now() + s.slow_window;
    while Instant::now() < end {
        let t = Instant::now();
        healthz.push(node.healthz());
        latencies.push(t.elapsed());
        rss.push(node.rss_kb().unwrap_or(0));
        open.push(proxy.connections().get().0);
        std::thread::sleep(Duration::from_secs(1));
    }
    let (_, max_open) = proxy.connections().get();
    let counts = node.counts("slow")?;
    let half = open.len() / 2;
    let first_half = open[..half].iter().max().copied().unwrap_or(0);
    let second_half = open[half..].iter().max().copied().unwrap_or(0);
    let rss_end = rss.last().copied().unwrap_or(0);
    let not_ok = healthz.iter().filter(|s| **s != Some(200)).count();
    let p99 = Samples::from_durations(&latencies).p50_p99().map(|(_, p)| p);

    let mut o = Outcome::default();
    o.check(
        format!("{n} probed pods ready, 0 restarts"),
        format!(
            "{} ready after {started:.0} s, {} restarts",
            counts.ready, counts.restarts
        ),
        counts.ready >= n && counts.restarts == 0,
    );
    o.check(
        "engine connections bounded (the second half of the window ≤ the first + 2)",
        format!("first half ≤ {first_half}, second half ≤ {second_half}, most at once {max_open}"),
        second_half <= first_half + 2,
    );
    o.check(
        "RSS flat (≤ +4 MiB over the window)",
        format!("{:.1} → {:.1} MiB", rss_start as f64 / 1024.0, rss_end as f64 / 1024.0),
        rss_end <= rss_start + 4096,
    );
    o.check(
        "/healthz 200 throughout, answered at once (p99 < 100 ms)",
        format!(
            "{not_ok} of {} not 200; p99 {:.1} ms",
            healthz.len(),
            p99.unwrap_or(f64::NAN) * 1000.0
        ),
        not_ok == 0 && p99.is_some_and(|p| p < 0.1),
    );
    o.figure("pods", n);
    o.figure("start_s", started);
    o.figure("max_engine_connections", max_open);
    Ok(o)
}
