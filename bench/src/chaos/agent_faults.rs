//! The agent's own faults: SIGKILL at 110 pods, and every supervised actor (and pod workers)
//! panicking with 50 pods. Neither may touch a container.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::Value;

use super::node::{describe, difference, ChaosNode};
use super::{ChaosSettings, Outcome};
use crate::engine::{now_nanos, Watcher};
use crate::scenarios::Ctx;

/// How long the containers are watched after the fault.
const HOLD: Duration = Duration::from_secs(10);

/// Time allowed for `n` pods to start.
pub(super) fn start_timeout(n: usize) -> Duration {
    Duration::from_secs(120 + 3 * n as u64)
}

/// Docker's container events seen by `watcher` from `since` (ns since the epoch), by action
/// (`2 start`), or `none`.
pub(super) fn engine_actions(watcher: &Watcher, since: i64) -> (usize, String) {
    let events: Vec<_> = watcher
        .snapshot()
        .into_iter()
        .filter(|e| e.time_nano >= since)
        .collect();
    let mut by: std::collections::BTreeMap<&str, usize> = Default::default();
    for e in &events {
        *by.entry(e.action.as_str()).or_default() += 1;
    }
    let text = by
        .iter()
        .map(|(a, n)| format!("{n} {a}"))
        .collect::<Vec<_>>()
        .join(", ");
    (events.len(), if text.is_empty() { "none".into() } else { text })
}

/// The agent SIGKILLed at `node_pods` pods and started again: it adopts every container (none
/// restarted, created or stopped: Docker's events say so) and `/pods` has them all Running
/// within 2 s of the new process's start.
pub fn sigkill(ctx: &Ctx, s: &ChaosSettings) -> anyhow::Result<Outcome> {
    let n = s.node_pods;
    let mut node = ChaosNode::start(ctx, "kill", &[])?;
    node.add_pods("kill", n);
    let started = node.wait_ready("kill", n, start_timeout(n))?;
    let before = node.running();
    let watcher = Watcher::start(&ctx.rt, &ctx.docker, &node.label());
    let fault = now_nanos();

    node.kill9();
    let t = Instant::now();
    node.restart();
    let answered = t.elapsed().as_secs_f64();
    let all_running = loop {
        if node.counts("kill").is_ok_and(|c| c.running >= n) {
            break t.elapsed().as_secs_f64();
        }
        if t.elapsed() > Duration::from_secs(60) {
            bail!("{n} pods not Running on /pods within 60 s of the restart");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let changed = hold_unchanged(&node, &before, HOLD);
    let (events, actions) = engine_actions(&watcher, fault);
    let restarts = node.counts("kill")?.restarts;

    let mut o = Outcome::default();
    o.check(
        format!("all {n} pods Running on /pods ≤ 2 s after the restart"),
        format!("{all_running:.2} s (the agent answered after {answered:.2} s)"),
        all_running <= 2.0,
    );
    o.check(
        "0 containers stopped, created or restarted",
        format!(
            "{}; engine events: {actions}",
            changed.as_deref().unwrap_or(&describe(&before, &before))
        ),
        changed.is_none() && events == 0,
    );
    o.check("0 restarts on /pods", restarts.to_string(), restarts == 0);
    o.figure("pods", n);
    o.figure("start_s", started);
    o.figure("answered_s", answered);
    o.figure("all_running_s", all_running);
    Ok(o)
}

/// Watches the node's running containers for `hold`: the first difference from `before`.
pub(super) fn hold_unchanged(node: &ChaosNode, before: &super::node::Running, hold: Duration) -> Option<String> {
    let end = Instant::now() + hold;
    while Instant::now() < end {
        if let Some(d) = difference(before, &node.running()) {
            return Some(d);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    None
}

/// The supervised actors on `/debug/actors` (not the pod workers, not the Supervisor): name →
/// restarts.
fn supervised(node: &ChaosNode) -> anyhow::Result<Vec<(String, String, u64)>> {
    let debug = node.agent.try_debug()?;
    let actors = debug["actors"].as_array().cloned().unwrap_or_default();
    Ok(actors
        .iter()
        .filter(|a| a["kind"] != "PodWorker" && a["kind"] != "Supervisor")
        .filter_map(|a: &Value| {
            Some((
                a["kind"].as_str()?.to_string(),
                a["name"].as_str()?.to_string(),
                a["restarts"].as_u64().unwrap_or(0),
            ))
        })
        .collect())
}

/// Every supervised actor and five pod workers panic, one after the other, with `panic_pods`
/// pods: each is re-created (its restart count goes up), no container is touched, `/healthz`
/// answers 200 and no pod counts a restart.
pub fn panics(ctx: &Ctx, s: &ChaosSettings) -> anyhow::Result<Outcome> {
    let n = s.panic_pods;
    let node = ChaosNode::start(ctx, "panic", &["--enable-fault-injection"])?;
    node.add_pods("panic", n);
    node.wait_ready("panic", n, start_timeout(n))?;
    let before = node.running();
    let watcher = Watcher::start(&ctx.rt, &ctx.docker, &node.label());
    let fault = now_nanos();
    let actors = supervised(&node)?;
    let mut recreated = Vec::new();
    let mut missed = Vec::new();
    for (kind, name, restarts) in &actors {
        let (status, body) = node.agent.inject_fault(&format!("target={kind}"));
        if status != 200 {
            missed.push(format!("{kind} {name}: {status} {}", body.trim()));
            continue;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now = supervised(&node)?;
            if now.iter().any(|(k, n2, r)| k == kind && n2 == name && r > restarts) {
                recreated.push(kind.clone());
                break;
            }
            if Instant::now() > deadline {
                missed.push(format!("{kind} {name}: not re-created within 10 s"));
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let workers = panic_workers(&node, 5)?;
    let changed = hold_unchanged(&node, &before, HOLD);
    let (events, actions) = engine_actions(&watcher, fault);
    let healthz = node.healthz();
    let restarts = node.counts("panic")?.restarts;

    let mut o = Outcome::default();
    o.check(
        "each supervised actor re-created after its panic",
        if missed.is_empty() {
            format!("{} of {} ({})", recreated.len(), actors.len(), recreated.join(", "))
        } else {
            format!("missed: {}", missed.join("; "))
        },
        missed.is_empty() && !recreated.is_empty(),
    );
    o.check(
        "5 pod workers re-created after their panics",
        format!("{workers} of 5"),
        workers == 5,
    );
    o.check(
        format!("0 of {n} pods' containers touched, 0 restarts"),
        format!(
            "{}; engine events: {actions}; restarts {restarts}",
            changed.as_deref().unwrap_or(&describe(&before, &before))
        ),
        changed.is_none() && events == 0 && restarts == 0,
    );
    o.check("/healthz 200 after", format!("{healthz:?}"), healthz == Some(200));
    o.figure("pods", n);
    o.figure("actors", recreated.len());
    Ok(o)
}

/// Panics the workers of `count` pods; how many were re-created.
fn panic_workers(node: &ChaosNode, count: usize) -> anyhow::Result<usize> {
    let pods = node.pods()?;
    let mut recreated = 0;
    for pod in pods.iter().take(count) {
        let uid = pod["metadata"]["uid"].as_str().context("a pod without a UID")?;
        let name = format!(
            "{}/{}",
            pod["metadata"]["namespace"].as_str().unwrap_or("default"),
            pod["metadata"]["name"].as_str().unwrap_or_default()
        );
        let restarts = |node: &ChaosNode| {
            node.agent
                .actor("PodWorker", &name)
                .and_then(|a| a["restarts"].as_u64())
        };
        let before = restarts(node);
        node.agent.inject_fault(&format!("target=pod&uid={uid}"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if restarts(node) > before {
                recreated += 1;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(recreated)
}
