//! [`BenchAgent`]: one release `dockerlet` process on a manifest directory, started as the
//! integration harness starts it, with its own node name, free ports and clean-up.

use std::collections::hash_map::RandomState;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _};
use serde_json::Value;
use tempfile::TempDir;

use crate::engine::{self, NODE_LABEL};

/// How long a fresh agent may take to answer on its ports.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// One agent under measurement. Dropping it kills the process and force-removes every container
/// labelled with its node (also on panic).
pub struct BenchAgent {
    node: String,
    child: Option<Child>,
    manifests: TempDir,
    /// Holds `root/` (`--root-dir`).
    _work: TempDir,
    read_only: u16,
    healthz: u16,
    http: ureq::Agent,
    log: PathBuf,
    _cleanup: engine::Cleanup,
}

impl BenchAgent {
    /// Starts `bin` for scenario `scenario` (the node is `bench-<scenario>-<8 hex>`), logging to
    /// `log_dir/<node>.log`, with `extra` flags; returns once `/pods` and `/healthz` answer.
    pub fn start(bin: &Path, scenario: &str, log_dir: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let node = format!("bench-{scenario}-{}", random_hex());
        let cleanup = engine::Cleanup::new(format!("{NODE_LABEL}={node}"));
        let manifests = tempfile::Builder::new()
            .prefix("dockerlet-bench-manifests-")
            .tempdir()?;
        let work = tempfile::Builder::new().prefix("dockerlet-bench-root-").tempdir()?;
        let root = work.path().join("root");
        std::fs::create_dir_all(&root)?;
        std::fs::create_dir_all(log_dir)?;
        let log = log_dir.join(format!("{node}.log"));
        let http = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .http_status_as_error(false)
            .proxy(None)
            .build()
            .into();
        let mut agent = BenchAgent {
            node,
            child: None,
            manifests,
            _work: work,
            read_only: 0,
            healthz: 0,
            http,
            log,
            _cleanup: cleanup,
        };
        // A port picked free may be taken by a concurrent test before the agent binds it: retry.
        for attempt in 0..5 {
            agent.read_only = free_port()?;
            agent.healthz = free_port()?;
            let debug = free_port()?;
            let out = File::create(&agent.log).with_context(|| format!("create {}", agent.log.display()))?;
            let err = out.try_clone()?;
            let mut cmd = Command::new(bin);
            cmd.args(["--pod-manifest-path", &agent.manifests.path().display().to_string()])
                .args(["--hostname-override", &agent.node])
                .args(["--root-dir", &root.display().to_string()])
                .args(["--read-only-port", &agent.read_only.to_string()])
                .args(["--address", "127.0.0.1"])
                .args(["--healthz-port", &agent.healthz.to_string()])
                .args(["--debug-address", &format!("127.0.0.1:{debug}")])
                .args(["--file-check-frequency", "1s"])
                .args(extra)
                // The agent's own default log level, whatever the caller's environment says.
                .env_remove("RUST_LOG")
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err);
            let child = cmd.spawn().with_context(|| format!("start {}", bin.display()))?;
            engine::register_pid(child.id());
            agent.child = Some(child);
            match agent.wait_ready() {
                Ok(()) => return Ok(agent),
                Err(e) if attempt < 4 && agent.log_text().contains("cannot bind") => {
                    eprintln!("  (agent could not bind a port, retrying: {e:#})");
                    agent.stop();
                }
                Err(e) => return Err(e),
            }
        }
        bail!("the agent could not bind its ports")
    }

    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let began = Instant::now();
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!(
                    "the agent exited during start-up ({status}); log: {}",
                    self.log.display()
                );
            }
            let pods = self.get(&format!("http://127.0.0.1:{}/pods", self.read_only));
            let health = self.get(&self.healthz_url());
            if matches!((&pods, &health), (Ok((200, _)), Ok((200, _)))) {
                return Ok(());
            }
            if began.elapsed() > READY_TIMEOUT {
                bail!(
                    "the agent did not answer within {READY_TIMEOUT:?} (/pods: {pods:?}, /healthz: {health:?}); log: {}",
                    self.log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `io.dockerlet.node=<node>`.
    pub fn label(&self) -> String {
        format!("{NODE_LABEL}={}", self.node)
    }

    /// The name the agent gives the static pod `name`.
    pub fn pod_name(&self, name: &str) -> String {
        format!("{name}-{}", self.node)
    }

    /// The agent's PID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The manifest directory.
    pub fn manifest_dir(&self) -> &Path {
        self.manifests.path()
    }

    /// Writes manifest `file` atomically (a dot-file renamed into place: never half-read).
    pub fn write_manifest(&self, file: &str, yaml: &str) -> anyhow::Result<()> {
        let tmp = self.manifest_dir().join(format!(".{file}.tmp"));
        std::fs::write(&tmp, yaml).with_context(|| format!("write {}", tmp.display()))?;
        std::fs::rename(&tmp, self.manifest_dir().join(file)).with_context(|| format!("rename to {file}"))
    }

    /// Deletes manifest `file`.
    pub fn remove_manifest(&self, file: &str) -> anyhow::Result<()> {
        std::fs::remove_file(self.manifest_dir().join(file)).with_context(|| format!("remove {file}"))
    }

    /// `http://127.0.0.1:<healthz port>/healthz`.
    pub fn healthz_url(&self) -> String {
        format!("http://127.0.0.1:{}/healthz", self.healthz)
    }

    /// A URL on the read-only port.
    pub fn read_only_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.read_only)
    }

    /// `GET url`: status and body.
    pub fn get(&self, url: &str) -> anyhow::Result<(u16, String)> {
        let mut resp = self.http.get(url).call().with_context(|| format!("GET {url}"))?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .read_to_string()
            .with_context(|| format!("GET {url}: body"))?;
        Ok((status, body))
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
        &self.log
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILLs the agent (its containers keep running, as after a crash).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            engine::unregister_pid(child.id());
        }
    }
}

impl Drop for BenchAgent {
    fn drop(&mut self) {
        // Kill first, so nothing re-creates containers; `_cleanup` then removes them.
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

/// A port that was free a moment ago.
fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// 8 random hex digits.
pub fn random_hex() -> String {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    format!("{:08x}", hasher.finish() as u32)
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
