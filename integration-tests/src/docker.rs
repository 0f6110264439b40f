//! The Docker engine, through the `docker` CLI (the same view a human debugging a test has).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

/// The label the agent puts on every container it creates, with its node name as value.
pub const NODE_LABEL: &str = "io.dockerlet.node";

/// Runs `docker <args>` and returns its output; panics only if `docker` cannot be run at all.
pub fn docker(args: &[&str]) -> Output {
    Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `docker {}`: {e}", args.join(" ")))
}

/// Runs `docker <args>`, panics if it fails, and returns its stdout.
pub fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(
        out.status.success(),
        "`docker {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One container, as `docker inspect` shows it (only the fields the tests read).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Container {
    /// Full container ID.
    pub id: String,
    /// Name with Docker's leading `/`; see [`Container::short_name`].
    pub name: String,
    /// Runtime state.
    pub state: ContainerState,
    /// Image, labels and environment.
    pub config: ContainerConfig,
    /// Namespace sharing.
    pub host_config: HostConfig,
    /// Addresses.
    pub network_settings: NetworkSettings,
}

/// `State` of `docker inspect`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ContainerState {
    /// `created`, `running`, `exited`, …
    pub status: String,
    /// True while the main process runs.
    pub running: bool,
    /// Exit code of the last run (0 while running).
    pub exit_code: i64,
    /// RFC 3339 with nanoseconds; year 1 when never started.
    pub started_at: String,
    /// RFC 3339 with nanoseconds; year 1 when not finished.
    pub finished_at: String,
}

/// `Config` of `docker inspect`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ContainerConfig {
    /// Image reference the container was created from.
    pub image: String,
    /// Labels (Docker reports `null` when there are none).
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// `KEY=value` entries.
    #[serde(default)]
    pub env: Option<Vec<String>>,
}

/// `HostConfig` of `docker inspect`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct HostConfig {
    /// `default`, `none`, `host`, `container:<id>`, …
    #[serde(default)]
    pub network_mode: String,
    /// `private`, `shareable`, `container:<id>`, …
    #[serde(default)]
    pub ipc_mode: String,
    /// Memory limit in bytes (0: none).
    #[serde(default)]
    pub memory: i64,
    /// CFS quota in µs (0: none).
    #[serde(default)]
    pub cpu_quota: i64,
    /// CFS period in µs (0: none).
    #[serde(default)]
    pub cpu_period: i64,
    /// CPU shares (0: default).
    #[serde(default)]
    pub cpu_shares: i64,
    /// Published ports: `"8080/tcp"` → host bindings.
    #[serde(default)]
    pub port_bindings: Option<BTreeMap<String, Option<Vec<PortBinding>>>>,
    /// The OCI runtime (`runc`, …).
    #[serde(default)]
    pub runtime: Option<String>,
}

/// One published port of `HostConfig.PortBindings`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PortBinding {
    /// Host address (empty for all).
    #[serde(default)]
    pub host_ip: String,
    /// Host port.
    #[serde(default)]
    pub host_port: String,
}

/// `NetworkSettings` of `docker inspect`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NetworkSettings {
    /// The default bridge address (empty for other networks).
    #[serde(rename = "IPAddress", default)]
    pub ip_address: String,
    /// Per-network endpoints.
    #[serde(default)]
    pub networks: Option<BTreeMap<String, Endpoint>>,
}

/// One network endpoint of a container.
#[derive(Debug, Clone, Deserialize)]
pub struct Endpoint {
    /// The address on that network.
    #[serde(rename = "IPAddress", default)]
    pub ip_address: String,
}

impl Container {
    /// The name without Docker's leading `/`.
    pub fn short_name(&self) -> &str {
        self.name.trim_start_matches('/')
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.config.labels.as_ref()?.get(key).map(String::as_str)
    }

    /// `io.kubernetes.container.name` (`POD` for the sandbox).
    pub fn kube_name(&self) -> &str {
        self.label("io.kubernetes.container.name").unwrap_or("")
    }

    /// `io.kubernetes.pod.uid`.
    pub fn pod_uid(&self) -> &str {
        self.label("io.kubernetes.pod.uid").unwrap_or("")
    }

    /// `io.kubernetes.pod.name`.
    pub fn pod_name(&self) -> &str {
        self.label("io.kubernetes.pod.name").unwrap_or("")
    }

    /// True for the pod sandbox (`io.kubernetes.docker.type=podsandbox`).
    pub fn is_sandbox(&self) -> bool {
        self.label("io.kubernetes.docker.type") == Some("podsandbox")
    }

    /// `annotation.io.kubernetes.container.restartCount`, parsed.
    pub fn restart_count_label(&self) -> Option<u32> {
        self.label("annotation.io.kubernetes.container.restartCount")?
            .parse()
            .ok()
    }

    /// The value of environment variable `key`.
    pub fn env(&self, key: &str) -> Option<&str> {
        let prefix = format!("{key}=");
        self.config.env.iter().flatten().find_map(|e| e.strip_prefix(&prefix))
    }

    /// When the container last started (`None` if never).
    pub fn started_at(&self) -> Option<Timestamp> {
        parse_docker_time(&self.state.started_at)
    }

    /// When the container last finished (`None` if not finished).
    pub fn finished_at(&self) -> Option<Timestamp> {
        parse_docker_time(&self.state.finished_at)
    }

    /// The container's IP address on any network, if it has one.
    pub fn ip(&self) -> Option<&str> {
        let settings = &self.network_settings;
        std::iter::once(settings.ip_address.as_str())
            .chain(settings.networks.iter().flatten().map(|(_, e)| e.ip_address.as_str()))
            .find(|ip| !ip.is_empty())
    }

    /// One line for failure messages.
    pub fn summary(&self) -> String {
        format!(
            "{} {} {} exit={} started={}",
            &self.id[..12.min(self.id.len())],
            self.short_name(),
            self.state.status,
            self.state.exit_code,
            self.state.started_at
        )
    }
}

/// Parses a Docker timestamp; Docker's zero time (year 1) becomes `None`.
pub fn parse_docker_time(text: &str) -> Option<Timestamp> {
    let ts: Timestamp = text.parse().ok()?;
    (ts > Timestamp::UNIX_EPOCH).then_some(ts)
}

/// Every container labelled with `node`, running or not, inspected.
pub fn node_containers(node: &str) -> Vec<Container> {
    let filter = format!("label={NODE_LABEL}={node}");
    let ids = docker_ok(&["ps", "-aq", "--no-trunc", "--filter", &filter]);
    let ids: Vec<&str> = ids.split_whitespace().collect();
    inspect_many(&ids)
}

/// `docker inspect` of one container; `None` if it does not exist (any more).
pub fn inspect(id: &str) -> Option<Container> {
    inspect_many(&[id]).pop()
}

/// `docker inspect` of several containers; those removed meanwhile are left out.
pub fn inspect_many(ids: &[&str]) -> Vec<Container> {
    if ids.is_empty() {
        return Vec::new();
    }
    let mut args = vec!["inspect", "--type", "container"];
    args.extend_from_slice(ids);
    // Exit code 1 with partial output when some of them are gone: use what was printed.
    let out = docker(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.trim().is_empty() {
        return Vec::new();
    }
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("cannot parse `docker inspect` output: {e}\n{stdout}"))
}

/// `docker kill <id>` (SIGKILL); panics if it fails.
pub fn kill(id: &str) {
    docker_ok(&["kill", id]);
}

/// `docker exec <id> <cmd…>`; returns the output whatever the exit code.
pub fn exec(id: &str, cmd: &[&str]) -> Output {
    let mut args = vec!["exec", id];
    args.extend_from_slice(cmd);
    docker(&args)
}

/// Force-removes every container labelled with `node` (and their anonymous volumes).
pub fn remove_node_containers(node: &str) {
    // The node name's claim on the engine (agent/src/node_claim.rs), left by a killed agent.
    let _ = docker(&["rm", "-f", &format!("dockerlet_node_{node}")]);
    let filter = format!("label={NODE_LABEL}={node}");
    // A create the killed agent had in flight can land in dockerd after the first listing:
    // list again once the engine has had time to finish it, until nothing is left.
    for attempt in 0..5 {
        let ids = String::from_utf8_lossy(&docker(&["ps", "-aq", "--filter", &filter]).stdout).into_owned();
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if ids.is_empty() && attempt > 0 {
            return;
        }
        if !ids.is_empty() {
            let mut args = vec!["rm", "-f", "-v"];
            args.extend_from_slice(&ids);
            let _ = docker(&args);
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

/// True if the engine has the image `reference`.
pub fn image_exists(reference: &str) -> bool {
    docker(&["image", "inspect", reference]).status.success()
}

/// A container's exit, as the engine announced it (`docker events`, event `die`).
#[derive(Debug, Clone)]
pub struct Died {
    /// Container ID.
    pub id: String,
    /// Container name.
    pub name: String,
    /// Exit code.
    pub exit_code: i64,
}

/// Watches `die` events of one node's containers from creation until dropped.
///
/// Exit codes of containers the agent removes right after they stop are otherwise lost.
pub struct DieEvents {
    child: Child,
    seen: Arc<Mutex<Vec<Died>>>,
}

impl DieEvents {
    /// Starts `docker events` for `node` (including the last second, so nothing is missed
    /// while the subscription starts).
    pub fn watch(node: &str) -> Self {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() - 1;
        let mut child = Command::new("docker")
            .args([
                "events",
                "--since",
                &since.to_string(),
                "--filter",
                &format!("label={NODE_LABEL}={node}"),
                "--filter",
                "type=container",
                "--filter",
                "event=die",
                "--format",
                "{{json .}}",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot run `docker events`");
        let stdout = child.stdout.take().expect("piped stdout");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(died) = parse_die_event(&line) {
                    sink.lock().unwrap().push(died);
                }
            }
        });
        Self { child, seen }
    }

    /// Every exit seen so far, oldest first.
    pub fn all(&self) -> Vec<Died> {
        self.seen.lock().unwrap().clone()
    }

    /// The exit code of container `id`, once its `die` event arrived (waits up to `timeout`).
    pub fn exit_code(&self, id: &str, timeout: Duration) -> Option<i64> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(d) = self.all().into_iter().rev().find(|d| d.id == id) {
                return Some(d.exit_code);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for DieEvents {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_die_event(line: &str) -> Option<Died> {
    let event: serde_json::Value = serde_json::from_str(line).ok()?;
    let actor = event.get("Actor")?;
    let attrs = actor.get("Attributes")?;
    Some(Died {
        id: actor.get("ID")?.as_str()?.to_string(),
        name: attrs.get("name").and_then(|n| n.as_str()).unwrap_or("").to_string(),
        exit_code: attrs.get("exitCode")?.as_str()?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `docker events` line yields the container ID, name and exit code.
    #[test]
    fn a_die_event_line_is_parsed() {
        let line = r#"{"status":"die","id":"abc","Type":"container","Action":"die",
            "Actor":{"ID":"abc","Attributes":{"exitCode":"137","name":"k8s_main_p_default_u_0"}}}"#;
        let died = parse_die_event(&line.replace('\n', "")).expect("parsed");
        assert_eq!((died.id.as_str(), died.exit_code), ("abc", 137));
        assert_eq!(died.name, "k8s_main_p_default_u_0");
    }

    /// Docker's zero time means "never", real times parse with nanoseconds.
    #[test]
    fn docker_times_parse_and_zero_means_none() {
        assert_eq!(parse_docker_time("0001-01-01T00:00:00Z"), None);
        let t = parse_docker_time("2026-11-29T19:59:57.412875272Z").expect("parsed");
        assert_eq!(t.subsec_nanosecond(), 412_875_272);
    }
}
