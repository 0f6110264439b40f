//! [`ChaosNode`]: one agent under a fault — the integration harness's [`Agent`] running the
//! agent binary with its own intervals — its manifest directory, its pods and what Docker runs
//! for it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use dockerlet_integration_tests::{Agent, AgentOptions, ManifestDir};
use serde_json::Value;

use crate::agent::{count_pods, PodCounts};
use crate::engine::{self, NODE_LABEL};
use crate::pods;
use crate::scenarios::Ctx;

/// One agent under a fault. Dropping it kills the agent and removes its containers.
pub struct ChaosNode {
    /// The harness's agent (restart, fault injection, debug page).
    pub agent: Agent,
    manifests: ManifestDir,
    _interrupt: engine::OnInterrupt,
}

/// Running containers of a node: ID → when it started.
pub type Running = BTreeMap<String, String>;

impl ChaosNode {
    /// Starts the agent for `scenario` (node `chaos-<scenario>-<8 hex>`) with `extra` flags;
    /// returns once `/pods`, `/debug/actors` and `/healthz` answer.
    pub fn start(ctx: &Ctx, scenario: &str, extra: &[&str]) -> anyhow::Result<Self> {
        Self::start_with(ctx, scenario, extra, AgentOptions::default())
    }

    /// Like [`ChaosNode::start`], with the harness's `options` (its node name, environment).
    pub fn start_with(ctx: &Ctx, scenario: &str, extra: &[&str], options: AgentOptions) -> anyhow::Result<Self> {
        let manifests = ManifestDir::new();
        let mut args = vec!["--file-check-frequency", "1s"];
        args.extend_from_slice(extra);
        let options = AgentOptions {
            node_prefix: Some("chaos".into()),
            bin: Some(ctx.bin.clone()),
            agent_intervals: true,
            log_dir: Some(ctx.log_dir.clone()),
            default_log_filter: true,
            wait_healthy: true,
            ..options
        };
        let agent = Agent::try_start_with(scenario, manifests.path(), &args, options)?;
        if let Some(pid) = agent.pid() {
            engine::register_pid(pid);
        }
        let interrupt = engine::OnInterrupt::new(format!("{NODE_LABEL}={}", agent.node()));
        Ok(ChaosNode {
            agent,
            manifests,
            _interrupt: interrupt,
        })
    }

    /// `io.dockerlet.node=<node>`.
    pub fn label(&self) -> String {
        format!("{NODE_LABEL}={}", self.agent.node())
    }

    /// Writes `n` static pods `<prefix>-<i>`: busybox leaving on TERM, restartPolicy Always.
    pub fn add_pods(&self, prefix: &str, n: usize) {
        for i in 0..n {
            let name = format!("{prefix}-{i}");
            self.manifests
                .write(&format!("{name}.yaml"), &pods::pod(&name, pods::SLEEP_TRAP_CMD, None));
        }
    }

    /// Writes manifest `file`.
    pub fn write_manifest(&self, file: &str, yaml: &str) {
        self.manifests.write(file, yaml);
    }

    /// Deletes manifest `file`.
    pub fn remove_manifest(&self, file: &str) {
        self.manifests.remove(file);
    }

    /// What `/pods` says of the pods named `<prefix>…`.
    pub fn counts(&self, prefix: &str) -> anyhow::Result<PodCounts> {
        Ok(count_pods(&self.pods()?, prefix))
    }

    /// `GET /pods` on the read-only port: the items.
    pub fn pods(&self) -> anyhow::Result<Vec<Value>> {
        let url = format!("http://127.0.0.1:{}/pods", self.agent.ports().read_only);
        let (status, body) = self.agent.get(&url)?;
        if status != 200 {
            bail!("GET {url}: {status}");
        }
        let list: Value = serde_json::from_str(&body).context("/pods: not JSON")?;
        Ok(list["items"].as_array().cloned().unwrap_or_default())
    }

    /// Waits until `/pods` shows `n` pods `<prefix>…` ready; the seconds it took.
    pub fn wait_ready(&self, prefix: &str, n: usize, timeout: Duration) -> anyhow::Result<f64> {
        let began = Instant::now();
        let mut last = PodCounts::default();
        while began.elapsed() < timeout {
            if let Ok(c) = self.counts(prefix) {
                if c.ready >= n {
                    return Ok(began.elapsed().as_secs_f64());
                }
                last = c;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!(
            "{n} pods {prefix}… not ready within {timeout:?}: {last:?}; log {}",
            self.agent.log_path().display()
        )
    }

    /// The node's running containers (sandboxes included).
    pub fn running(&self) -> Running {
        self.agent
            .containers()
            .into_iter()
            .filter(|c| c.state.running)
            .map(|c| (c.id, c.state.started_at))
            .collect()
    }

    /// `/healthz`'s status, none when it does not answer.
    pub fn healthz(&self) -> Option<u16> {
        self.agent.healthz().ok().map(|(status, _)| status)
    }

    /// The agent's RSS, KiB.
    pub fn rss_kb(&self) -> Option<u64> {
        self.agent.pid().and_then(|p| crate::sys::status_kb(p, "VmRSS"))
    }

    /// SIGKILLs the agent (its containers keep running).
    pub fn kill9(&mut self) {
        if let Some(pid) = self.agent.pid() {
            self.agent.kill9();
            engine::unregister_pid(pid);
        }
    }

    /// Starts the agent again after [`ChaosNode::kill9`].
    pub fn restart(&mut self) {
        self.agent.restart();
        if let Some(pid) = self.agent.pid() {
            engine::register_pid(pid);
        }
    }
}

impl Drop for ChaosNode {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// How `after` differs from `before`: containers gone, new, or restarted.
pub fn difference(before: &Running, after: &Running) -> Option<String> {
    let gone = before.keys().filter(|id| !after.contains_key(*id)).count();
    let new = after.keys().filter(|id| !before.contains_key(*id)).count();
    let restarted = before
        .iter()
        .filter(|(id, started)| after.get(*id).is_some_and(|s| s != *started))
        .count();
    (gone + new + restarted > 0).then(|| format!("{gone} gone, {new} new, {restarted} restarted"))
}

/// `0 changed` or the difference.
pub fn describe(before: &Running, after: &Running) -> String {
    difference(before, after).unwrap_or_else(|| format!("all {} unchanged", before.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_count_gone_new_and_restarted_containers() {
        let map =
            |items: &[(&str, &str)]| -> Running { items.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect() };
        let before = map(&[("a", "1"), ("b", "1"), ("c", "1")]);
        assert_eq!(difference(&before, &before), None);
        let after = map(&[("a", "1"), ("b", "2"), ("d", "1")]);
        assert_eq!(
            difference(&before, &after).as_deref(),
            Some("1 gone, 1 new, 1 restarted")
        );
        assert_eq!(describe(&before, &before), "all 3 unchanged");
    }
}
