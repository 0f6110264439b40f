//! [`BenchAgent`]: one release `dockerlet` process on a manifest directory, started by the
//! integration harness ([`Agent`]) with its own node name, free ports and clean-up, but the
//! agent's own intervals and log filter.

use std::path::Path;

use anyhow::{bail, Context as _};
use dockerlet_integration_tests::{Agent, AgentOptions, ManifestDir};
use serde_json::Value;

use crate::engine::{self, NODE_LABEL};

/// One agent under measurement. Dropping it kills the process and force-removes every container
/// labelled with its node (the harness does; also on panic), and Ctrl-C does the same.
pub struct BenchAgent {
    /// Dropped first: kills the agent, then removes its containers.
    agent: Agent,
    manifests: ManifestDir,
    _interrupt: engine::OnInterrupt,
}

impl BenchAgent {
    /// Starts `bin` for scenario `scenario` (the node is `bench-<scenario>-<8 hex>`), logging to
    /// `log_dir/<node>.log`, with `--file-check-frequency 1s` and `extra` flags and everything
    /// else at the agent's defaults; returns once `/pods`, `/debug/actors` and `/healthz` answer.
    pub fn start(bin: &Path, scenario: &str, log_dir: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let manifests = ManifestDir::new();
        let mut args = vec!["--file-check-frequency", "1s"];
        args.extend_from_slice(extra);
        let options = AgentOptions {
            node_prefix: Some("bench".into()),
            bin: Some(bin.to_path_buf()),
            agent_intervals: true,
            log_dir: Some(log_dir.to_path_buf()),
            default_log_filter: true,
            wait_healthy: true,
            ..AgentOptions::default()
        };
        let agent = Agent::try_start_with(scenario, manifests.path(), &args, options)?;
        if let Some(pid) = agent.pid() {
            engine::register_pid(pid);
        }
        let interrupt = engine::OnInterrupt::new(format!("{NODE_LABEL}={}", agent.node()));
        Ok(BenchAgent {
            agent,
            manifests,
            _interrupt: interrupt,
        })
    }

    /// `io.dockerlet.node=<node>`.
    pub fn label(&self) -> String {
        format!("{NODE_LABEL}={}", self.agent.node())
    }

    /// The node name (`--hostname-override`).
    pub fn node(&self) -> &str {
        self.agent.node()
    }

    /// The name the agent gives the static pod `name`.
    pub fn pod_name(&self, name: &str) -> String {
        self.agent.pod_name(name)
    }

    /// The agent's PID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.agent.pid()
    }

    /// Writes manifest `file` atomically (a dot-file renamed into place: never half-read).
    pub fn write_manifest(&self, file: &str, yaml: &str) {
        self.manifests.write(file, yaml);
    }

    /// Deletes manifest `file`.
    pub fn remove_manifest(&self, file: &str) {
        self.manifests.remove(file);
    }

    /// `http://127.0.0.1:<healthz port>/healthz`.
    pub fn healthz_url(&self) -> String {
        format!("http://127.0.0.1:{}/healthz", self.agent.ports().healthz)
    }

    /// The kubelet API's port (`--port`, HTTPS).
    pub fn kubelet_port(&self) -> u16 {
        self.agent.ports().kubelet
    }

    /// A URL on the read-only port.
    pub fn read_only_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.agent.ports().read_only)
    }

    /// `GET url`: status and body.
    pub fn get(&self, url: &str) -> anyhow::Result<(u16, String)> {
        self.agent.get(url)
    }

    /// `GET /pods`: the `items`.
    pub fn pods(&self) -> anyhow::Result<Vec<Value>> {
        let url = self.read_only_url("/pods");
        let (status, body) = self.get(&url)?;
        if status != 200 {
            bail!("GET {url}: {status}");
        }
        let list: Value = serde_json::from_str(&body).context("/pods: not JSON")?;
        Ok(list["items"].as_array().cloned().unwrap_or_default())
    }

    /// Path of the agent's log.
    pub fn log_path(&self) -> &Path {
        self.agent.log_path()
    }

    /// SIGKILLs the agent (its containers keep running, as after a crash).
    pub fn stop(&mut self) {
        if let Some(pid) = self.agent.pid() {
            self.agent.kill9();
            engine::unregister_pid(pid);
        }
    }
}

impl Drop for BenchAgent {
    fn drop(&mut self) {
        // Forget the PID for Ctrl-C; the harness's drop then removes the containers.
        self.stop();
    }
}

/// What `/pods` says about the bench's pods.
#[derive(Debug, Default, Clone, Copy)]
pub struct PodCounts {
    /// Pods listed.
    pub listed: usize,
    /// Phase Running.
    pub running: usize,
    /// Running, with every container running and ready.
    pub ready: usize,
    /// Sum of every container's restart count.
    pub restarts: i64,
}

/// Counts the pods of `items` whose name starts with `prefix`.
pub fn count_pods(items: &[Value], prefix: &str) -> PodCounts {
    let mut c = PodCounts::default();
    for pod in items {
        if !pod["metadata"]["name"].as_str().is_some_and(|n| n.starts_with(prefix)) {
            continue;
        }
        c.listed += 1;
        let status = &pod["status"];
        let running = status["phase"] == "Running";
        let containers = status["containerStatuses"].as_array().cloned().unwrap_or_default();
        c.restarts += containers
            .iter()
            .filter_map(|s| s["restartCount"].as_i64())
            .sum::<i64>();
        if running {
            c.running += 1;
            let all_ready = !containers.is_empty()
                && containers
                    .iter()
                    .all(|s| s["ready"] == true && !s["state"]["running"].is_null());
            if all_ready {
                c.ready += 1;
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Only the bench's pods count; ready means Running with every container running and ready.
    #[test]
    fn pod_counts_read_phase_readiness_and_restarts() {
        let running = |name: &str, ready: bool, restarts: i64| {
            json!({"metadata": {"name": name}, "status": {"phase": "Running", "containerStatuses": [
                {"name": "main", "ready": ready, "restartCount": restarts, "state": {"running": {}}}]}})
        };
        let items = vec![
            running("p5-0-n", true, 0),
            running("p5-1-n", false, 2),
            json!({"metadata": {"name": "p5-2-n"}, "status": {"phase": "Pending"}}),
            running("other-n", true, 5),
        ];
        let c = count_pods(&items, "p5-");
        assert_eq!((c.listed, c.running, c.ready, c.restarts), (3, 2, 1, 2));
    }
}
