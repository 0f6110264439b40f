//! [`Agent`]: one dockerlet process under test, its HTTP endpoints, and its clean-up.

use std::collections::hash_map::RandomState;
use std::fs::OpenOptions;
use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, ensure, Context as _};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::List;
use serde_json::Value;
use tempfile::TempDir;

use crate::docker::{self, Container};
use crate::pod::{ContainerStatusExt, PodExt};
use crate::wait::wait_until;
use crate::{BUSYBOX_IMAGE, POD_START_TIMEOUT};

/// Flags every test agent gets: short intervals so tests see changes within seconds.
const FAST_FLAGS: &[&str] = &[
    "--file-check-frequency",
    "1s",
    "--sync-frequency",
    "5s",
    "--crash-loop-backoff-initial",
    "1s",
    "--crash-loop-backoff-max",
    "4s",
];

/// How long a freshly started agent may take to answer on its HTTP ports.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How many lines of the agent's log a failing test prints.
const LOG_TAIL_LINES: usize = 200;

/// The ports one agent listens on (all on 127.0.0.1).
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    /// `--read-only-port`: `/pods`, `/healthz`.
    pub read_only: u16,
    /// `--healthz-port`.
    pub healthz: u16,
    /// Port of `--debug-address`: `/debug/actors`, `/debug/fault`.
    pub debug: u16,
    /// `--port`: the kubelet API (HTTPS).
    pub kubelet: u16,
}

impl Ports {
    /// Four free ports, all different: bound at once and released together (one port freed
    /// before the next is asked for can be handed out again — an agent once got the same port
    /// for `/healthz` and the debug page, failed to bind, and was started again after its first
    /// instance had read the test's one-shot kernel log FIFO).
    pub fn fresh() -> Ports {
        let listeners: Vec<TcpListener> = (0..4)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("cannot bind 127.0.0.1:0"))
            .collect();
        let port = |i: usize| listeners[i].local_addr().expect("a bound address").port();
        Ports {
            read_only: port(0),
            healthz: port(1),
            debug: port(2),
            kubelet: port(3),
        }
    }
}

/// How the agent process ended after a signal.
#[derive(Debug, Clone, Copy)]
pub struct AgentExit {
    /// Its exit status.
    pub status: ExitStatus,
    /// Time from the signal to the exit.
    pub after: Duration,
}

/// One dockerlet process under test, with its node name, temporary root dir and log.
///
/// Dropping it kills the process and force-removes every container labelled with its node
/// (also when the test panicked; then it first prints the tail of the agent's log and the
/// node's containers, and keeps the temporary directory for a post-mortem).
pub struct Agent {
    node: String,
    bin: PathBuf,
    args: Vec<String>,
    ports: Ports,
    /// Holds `root/` (`--root-dir`) and `agent.log` (the agent's stdout and stderr).
    work: Option<TempDir>,
    child: Option<Child>,
    http: ureq::Agent,
    /// Restarts with fresh ports after a port taken by another test (see `spawn`).
    bind_retries: u32,
    /// Environment variables set for the agent (on top of the test's).
    env: Vec<(String, String)>,
    /// The agent's stdout and stderr: `agent.log` in the work dir, or `<log dir>/<node>.log`.
    log_path: PathBuf,
    /// `RUST_LOG` removed, for the agent's own default filter (else `info` unless set).
    default_log_filter: bool,
    /// Start-up also waits for `/healthz` to answer 200.
    wait_healthy: bool,
}

/// How often the harness picks fresh ports when the agent could not bind one.
const MAX_BIND_RETRIES: u32 = 5;

/// A sysctl tree under `dir` with kubelet's kernel tunables (so the agent changes nothing) and
/// this machine's `kernel/pid_max`.
pub fn write_kernel_tunables(dir: &Path) -> std::io::Result<()> {
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap_or_else(|_| "32768".into());
    for (flag, value) in [
        ("vm/overcommit_memory", "1"),
        ("vm/panic_on_oom", "0"),
        ("kernel/panic", "10"),
        ("kernel/panic_on_oops", "1"),
        ("kernel/keys/root_maxkeys", "1000000"),
        ("kernel/keys/root_maxbytes", "25000000"),
        ("kernel/pid_max", pid_max.trim()),
    ] {
        let path = dir.join(flag);
        std::fs::create_dir_all(path.parent().expect("a sysctl has a directory"))?;
        std::fs::write(path, format!("{value}\n"))?;
    }
    Ok(())
}

/// Replace the value following `flag` in `args`.
fn set_arg(args: &mut [String], flag: &str, value: String) {
    if let Some(i) = args.iter().position(|a| a == flag) {
        if let Some(slot) = args.get_mut(i + 1) {
            *slot = value;
        }
    }
}

impl Agent {
    /// Starts the agent on `manifest_dir` with a unique node name derived from `test_name`,
    /// free ports, short intervals, and `extra_args`; returns once its HTTP ports answer.
    pub fn start(test_name: &str, manifest_dir: &Path, extra_args: &[&str]) -> Agent {
        Agent::start_with(test_name, manifest_dir, extra_args, AgentOptions::default())
    }

    /// Like [`Agent::start`], with environment variables for the agent.
    pub fn start_with_env(test_name: &str, manifest_dir: &Path, extra_args: &[&str], env: &[(&str, &str)]) -> Agent {
        let options = AgentOptions {
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..AgentOptions::default()
        };
        Agent::start_with(test_name, manifest_dir, extra_args, options)
    }

    /// Like [`Agent::start`], started as `options` say. Panics if it cannot start (the agent's
    /// drop then prints its log tail and containers, as on any test failure).
    pub fn start_with(name: &str, manifest_dir: &Path, extra_args: &[&str], options: AgentOptions) -> Agent {
        preflight();
        let mut agent = Agent::new(name, manifest_dir, extra_args, options).unwrap_or_else(|e| panic!("{e:#}"));
        agent.spawn();
        agent
    }

    /// Like [`Agent::start_with`], with an error instead of a panic (its process killed and its
    /// containers removed).
    pub fn try_start_with(
        name: &str,
        manifest_dir: &Path,
        extra_args: &[&str],
        options: AgentOptions,
    ) -> anyhow::Result<Agent> {
        check_preflight()?;
        let mut agent = Agent::new(name, manifest_dir, extra_args, options)?;
        agent.try_spawn()?;
        Ok(agent)
    }

    /// The agent, not started: node name, temporary root dir, log, free ports and flags.
    fn new(name: &str, manifest_dir: &Path, extra_args: &[&str], options: AgentOptions) -> anyhow::Result<Agent> {
        let node = options
            .node_name
            .clone()
            .unwrap_or_else(|| unique_name(options.node_prefix.as_deref().unwrap_or("it"), name));
        let work = tempfile::Builder::new()
            .prefix(&format!("dockerlet-{node}-"))
            .tempdir()
            .context("cannot create the agent's temporary directory")?;
        let root = work.path().join("root");
        std::fs::create_dir_all(&root).context("cannot create the root dir")?;
        let log_path = match &options.log_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
                dir.join(format!("{node}.log"))
            }
            None => work.path().join("agent.log"),
        };
        let ports = Ports::fresh();

        let mut args: Vec<String> = vec![
            "--pod-manifest-path".into(),
            manifest_dir.display().to_string(),
            "--hostname-override".into(),
            node.clone(),
            "--read-only-port".into(),
            ports.read_only.to_string(),
            "--healthz-port".into(),
            ports.healthz.to_string(),
            "--debug-address".into(),
            format!("127.0.0.1:{}", ports.debug),
            "--port".into(),
            ports.kubelet.to_string(),
        ];
        // Loopback only, unless the test binds elsewhere (an agent reached through the API
        // server's `nodes/proxy` must listen on an address kube-apiserver proxies to).
        if !extra_args.contains(&"--address") {
            args.extend(["--address".to_string(), "127.0.0.1".to_string()]);
        }
        // Its root dir in its work dir, unless the test gives one (on a file system of its own).
        if !extra_args.contains(&"--root-dir") {
            args.extend(["--root-dir".to_string(), root.display().to_string()]);
        }
        if !options.agent_intervals {
            args.extend(FAST_FLAGS.iter().map(|s| s.to_string()));
        }
        // Hard eviction thresholds for a shared machine: kubelet's for memory, 1 Mi / 1 % for the
        // disks (a developer's disk is often fuller than kubelet's 10 % / 15 %, and under
        // DiskPressure the agent evicts pods and refuses new ones). A test that gives
        // `--eviction-hard` gives the whole set, as kubelet's flag replaces its defaults.
        if !extra_args.contains(&"--eviction-hard") {
            args.extend([
                "--eviction-hard".to_string(),
                "memory.available<100Mi,nodefs.available<1Mi,nodefs.inodesFree<1%,imagefs.available<1Mi,\
                 imagefs.inodesFree<1%"
                    .to_string(),
            ]);
        }
        // Image GC off: the agents share one engine, and one agent's collection would remove
        // the images of the others' tests. A test of image GC gives the flag itself (on an
        // engine of its own, `SecondEngine`).
        if !extra_args.contains(&"--image-gc-high-threshold") {
            args.extend(["--image-gc-high-threshold".to_string(), "100".to_string()]);
        }
        // Every agent its own pod cgroup tree, so agents sharing the engine never see (or
        // clean up) each other's pod cgroups; removed when the agent is dropped.
        if !extra_args.contains(&"--cgroup-root") {
            args.extend(["--cgroup-root".to_string(), cgroup_root(&node)]);
        }
        // Its container log files under its work dir (the links in /var/log/containers are
        // the machine's: removed when the agent is dropped).
        if !extra_args.contains(&"--pod-logs-dir") {
            args.extend([
                "--pod-logs-dir".to_string(),
                work.path().join("pod-logs").display().to_string(),
            ]);
        }
        // Its own sysctl tree and swaps file, holding kubelet's tunables and no swap: an agent
        // under test never sets this machine's kernel tunables (kubelet's
        // --protect-kernel-defaults=false does) nor refuses to start on a host with swap.
        if !extra_args.contains(&"--proc-sys-root") {
            let dir = work.path().join("proc-sys");
            write_kernel_tunables(&dir).context("cannot write the agent's sysctl tree")?;
            args.extend(["--proc-sys-root".to_string(), dir.display().to_string()]);
        }
        if !extra_args.contains(&"--proc-swaps") {
            let swaps = work.path().join("swaps");
            std::fs::write(&swaps, "Filename\tType\tSize\tUsed\tPriority\n")
                .context("cannot write the agent's swaps file")?;
            args.extend(["--proc-swaps".to_string(), swaps.display().to_string()]);
        }
        args.extend(extra_args.iter().map(|s| s.to_string()));

        let http = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(15)))
            .http_status_as_error(false)
            .proxy(None)
            // A pooled connection would be stale after an agent restart.
            .max_idle_connections(0)
            .build()
            .into();

        let bin = match options.bin {
            Some(bin) => bin,
            None => try_binary()?,
        };
        Ok(Agent {
            node,
            bin,
            args,
            ports,
            work: Some(work),
            child: None,
            http,
            bind_retries: 0,
            env: options.env,
            log_path,
            default_log_filter: options.default_log_filter,
            wait_healthy: options.wait_healthy,
        })
    }

    /// The value the agent was given for `flag`, if it was.
    fn flag_value(&self, flag: &str) -> Option<&String> {
        self.args
            .iter()
            .position(|a| a == flag)
            .and_then(|i| self.args.get(i + 1))
    }

    /// The agent's `--cgroup-root`: [`cgroup_root`] of its node unless the test gave one.
    pub fn cgroup_root(&self) -> String {
        self.flag_value("--cgroup-root")
            .cloned()
            .unwrap_or_else(|| cgroup_root(&self.node))
    }

    /// The agent's `--pod-logs-dir` (its work dir's `pod-logs` unless the test gave one).
    pub fn pod_logs_dir(&self) -> PathBuf {
        self.flag_value("--pod-logs-dir").map(PathBuf::from).unwrap_or_else(|| {
            self.work
                .as_ref()
                .expect("the agent's work dir")
                .path()
                .join("pod-logs")
        })
    }

    /// The agent's `--root-dir` (its work dir's `root` unless the test gave one).
    pub fn root_dir(&self) -> PathBuf {
        self.flag_value("--root-dir")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.work.as_ref().expect("the agent's work dir").path().join("root"))
    }

    /// The node name (`--hostname-override`), unique to this agent.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The name the agent gives the static pod `manifest_name`: `<manifest_name>-<node>`.
    pub fn pod_name(&self, manifest_name: &str) -> String {
        format!("{manifest_name}-{}", self.node)
    }

    /// The ports it listens on.
    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// The agent's stdout and stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The process ID of the running agent, if it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends SIGKILL and waits for the process to be gone.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("the agent is not running");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Sends SIGTERM and waits up to `timeout` for the process to exit; panics if it does not.
    pub fn sigterm(&mut self, timeout: Duration) -> AgentExit {
        let mut child = self.child.take().expect("the agent is not running");
        let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("valid pid");
        let sent = Instant::now();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("cannot send SIGTERM to the agent");
        loop {
            if let Some(status) = child.try_wait().expect("cannot wait for the agent") {
                return AgentExit {
                    status,
                    after: sent.elapsed(),
                };
            }
            if sent.elapsed() > timeout {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the agent did not exit within {timeout:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits up to `timeout` for the agent to exit by itself: its exit status, or `None` while
    /// it still runs.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let started = Instant::now();
        while started.elapsed() < timeout {
            let child = self.child.as_mut()?;
            if let Some(status) = child.try_wait().expect("cannot wait for the agent") {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Starts the agent again with the same node name, flags, ports and root dir (after
    /// [`Agent::kill9`] or [`Agent::sigterm`]; a running agent is SIGKILLed first).
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.kill9();
        }
        self.spawn();
    }

    /// Like [`Agent::restart`], with `extra_args` added to its flags from now on.
    pub fn restart_with(&mut self, extra_args: &[&str]) {
        self.args.extend(extra_args.iter().map(|a| a.to_string()));
        self.restart();
    }

    /// `GET /pods` on the read-only port.
    pub fn try_pods(&self) -> anyhow::Result<Vec<Pod>> {
        let url = format!("http://127.0.0.1:{}/pods", self.ports.read_only);
        let (status, body) = self.get(&url)?;
        if status != 200 {
            bail!("GET {url}: {status} {body}");
        }
        let list: List<Pod> = serde_json::from_str(&body).with_context(|| format!("GET {url}: not a PodList"))?;
        Ok(list.items)
    }

    /// `GET /pods`; panics on errors.
    pub fn pods(&self) -> Vec<Pod> {
        self.try_pods().unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// The pod from manifest pod name `manifest_name`, as `/pods` shows it now.
    pub fn pod(&self, manifest_name: &str) -> Option<Pod> {
        let name = self.pod_name(manifest_name);
        self.pods().into_iter().find(|p| p.name() == name)
    }

    /// Waits until the pod from `manifest_name` satisfies `ready`, described by `what`.
    pub fn wait_for_pod(
        &self,
        manifest_name: &str,
        what: &str,
        timeout: Duration,
        mut ready: impl FnMut(&Pod) -> bool,
    ) -> Pod {
        let name = self.pod_name(manifest_name);
        wait_until(&format!("pod {name}: {what}"), timeout, || {
            let pods = self.try_pods().map_err(|e| format!("{e:#}"))?;
            let pod = pods
                .into_iter()
                .find(|p| p.name() == name)
                .ok_or_else(|| format!("{name} not in /pods"))?;
            if ready(&pod) {
                Ok(pod)
            } else {
                Err(pod.summary())
            }
        })
    }

    /// Waits until the pod is Running with every container running and ready.
    pub fn wait_for_running(&self, manifest_name: &str) -> Pod {
        self.wait_for_pod(manifest_name, "Running, all containers ready", POD_START_TIMEOUT, |p| {
            let statuses = p.status.as_ref().and_then(|s| s.container_statuses.as_ref());
            p.phase() == "Running"
                && statuses.is_some_and(|cs| !cs.is_empty() && cs.iter().all(|c| c.is_running() && c.ready))
        })
    }

    /// `GET /debug/actors`.
    pub fn try_debug(&self) -> anyhow::Result<Value> {
        let url = format!("http://127.0.0.1:{}/debug/actors", self.ports.debug);
        let (status, body) = self.get(&url)?;
        if status != 200 {
            bail!("GET {url}: {status} {body}");
        }
        serde_json::from_str(&body).with_context(|| format!("GET {url}: not JSON: {body}"))
    }

    /// `GET /debug/actors`; panics on errors.
    pub fn debug(&self) -> Value {
        self.try_debug().unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// The entry of `/debug/actors` with that kind and name.
    pub fn actor(&self, kind: &str, name: &str) -> Option<Value> {
        let debug = self.debug();
        debug["actors"]
            .as_array()?
            .iter()
            .find(|a| a["kind"] == kind && a["name"] == name)
            .cloned()
    }

    /// The entries of `/debug/actors` of that kind.
    pub fn actors_of_kind(&self, kind: &str) -> Vec<Value> {
        let debug = self.debug();
        let actors = debug["actors"].as_array().cloned().unwrap_or_default();
        actors.into_iter().filter(|a| a["kind"] == kind).collect()
    }

    /// `<namespace>/<pod name>` of the pod from `manifest_name`: the `object` of its events and
    /// the `pod` of its probes on `/debug/actors`.
    pub fn pod_object(&self, manifest_name: &str) -> String {
        format!("default/{}", self.pod_name(manifest_name))
    }

    /// `detail.probes` of the ProbeActor (kind `ProbeActor`, name `probes`): one entry per
    /// probe worker; empty while the agent has no such actor.
    pub fn probe_states(&self) -> Vec<Value> {
        self.actor("ProbeActor", "probes")
            .and_then(|a| a["detail"]["probes"].as_array().cloned())
            .unwrap_or_default()
    }

    /// The ProbeActor's entry for `probe` (`liveness`, `readiness`, `startup`) of `container`
    /// in the pod from `manifest_name`.
    pub fn probe_state(&self, manifest_name: &str, container: &str, probe: &str) -> Option<Value> {
        let pod = self.pod_object(manifest_name);
        self.probe_states()
            .into_iter()
            .find(|p| p["pod"] == pod.as_str() && p["container"] == container && p["probe"] == probe)
    }

    /// `events` of `/debug/actors`.
    pub fn events(&self) -> Vec<Value> {
        self.debug()["events"].as_array().cloned().unwrap_or_default()
    }

    /// `manifest_errors` of `/debug/actors`.
    pub fn manifest_errors(&self) -> Vec<Value> {
        self.debug()["manifest_errors"].as_array().cloned().unwrap_or_default()
    }

    /// `GET /healthz` on the healthz port: status code and body.
    pub fn healthz(&self) -> anyhow::Result<(u16, String)> {
        self.get(&format!("http://127.0.0.1:{}/healthz", self.ports.healthz))
    }

    /// `GET` any URL: status code and body.
    pub fn get(&self, url: &str) -> anyhow::Result<(u16, String)> {
        let mut resp = self.http.get(url).call().with_context(|| format!("GET {url}"))?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .read_to_string()
            .with_context(|| format!("GET {url}: body"))?;
        Ok((status, body))
    }

    /// `POST /debug/fault?<query>` (needs `--enable-fault-injection`): status code and body.
    pub fn inject_fault(&self, query: &str) -> (u16, String) {
        let url = format!("http://127.0.0.1:{}/debug/fault?{query}", self.ports.debug);
        let mut resp = self
            .http
            .post(&url)
            .send_empty()
            .unwrap_or_else(|e| panic!("POST {url}: {e}"));
        let status = resp.status().as_u16();
        (status, resp.body_mut().read_to_string().unwrap_or_default())
    }

    /// Every Docker container labelled with this agent's node.
    pub fn containers(&self) -> Vec<Container> {
        docker::node_containers(&self.node)
    }

    /// The containers of the pod with that UID (sandbox included).
    pub fn pod_containers(&self, uid: &str) -> Vec<Container> {
        self.containers().into_iter().filter(|c| c.pod_uid() == uid).collect()
    }

    /// The file holding the agent's stdout and stderr.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Starts the process and waits until it is ready; panics if it does not get there (the
    /// agent is alive meanwhile, so its drop prints the diagnostics).
    fn spawn(&mut self) {
        if let Err(e) = self.try_spawn() {
            panic!("{e:#}");
        }
    }

    fn try_spawn(&mut self) -> anyhow::Result<()> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .context("cannot open the agent log")?;
        let _ = writeln!(
            log,
            "==== test harness: starting {} {}",
            self.bin.display(),
            self.args.join(" ")
        );
        let stderr = log.try_clone().context("cannot clone the log file handle")?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr);
        if self.default_log_filter {
            cmd.env_remove("RUST_LOG");
        } else if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        let child = cmd
            .spawn()
            .map_err(|e| anyhow!("cannot start {}: {e}", self.bin.display()))?;
        self.child = Some(child);
        let log_before = self.log().len();
        if let Startup::Exited(status) = self.wait_until_ready()? {
            let log = self.log();
            let this_start = &log[log_before.min(log.len())..];
            // A free port picked for this agent was taken by another test meanwhile: pick again.
            if this_start.contains("cannot bind") && self.bind_retries < MAX_BIND_RETRIES {
                self.bind_retries += 1;
                self.ports = Ports::fresh();
                set_arg(&mut self.args, "--port", self.ports.kubelet.to_string());
                set_arg(&mut self.args, "--read-only-port", self.ports.read_only.to_string());
                set_arg(&mut self.args, "--healthz-port", self.ports.healthz.to_string());
                set_arg(
                    &mut self.args,
                    "--debug-address",
                    format!("127.0.0.1:{}", self.ports.debug),
                );
                return self.try_spawn();
            }
            bail!(
                "the agent exited during start-up ({status}); its log:\n{}",
                tail(&log, LOG_TAIL_LINES)
            );
        }
        Ok(())
    }

    /// Waits until `/pods` and `/debug/actors` answer (and `/healthz` says 200, if asked to);
    /// tells whether the agent exited instead, fails after [`READY_TIMEOUT`].
    fn wait_until_ready(&mut self) -> anyhow::Result<Startup> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.child = None;
                return Ok(Startup::Exited(status));
            }
            let pods = self.try_pods();
            let debug = self.try_debug();
            let health = self.wait_healthy.then(|| self.healthz());
            let healthy = health.as_ref().is_none_or(|h| matches!(h, Ok((200, _))));
            match (&pods, &debug) {
                (Ok(_), Ok(_)) if healthy => return Ok(Startup::Ready),
                _ if start.elapsed() > READY_TIMEOUT => bail!(
                    "the agent did not answer within {READY_TIMEOUT:?}: /pods: {:?}, \
                     /debug/actors: {:?}{}; its log:\n{}",
                    pods.err(),
                    debug.err(),
                    health.map_or(String::new(), |h| format!(", /healthz: {h:?}")),
                    tail(&self.log(), LOG_TAIL_LINES)
                ),
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
}

/// How a start-up ended, short of the timeout.
enum Startup {
    /// The ports answer.
    Ready,
    /// The process exited first.
    Exited(ExitStatus),
}

impl Drop for Agent {
    fn drop(&mut self) {
        let pod_logs = self.work.as_ref().map(|_| self.pod_logs_dir());
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // A killed agent leaves the tmpfs and subPath mounts of its pods' volumes; they go with
        // the agent, so nothing of a test stays mounted on the machine.
        if let Some(work) = &self.work {
            unmount_under(work.path());
        }
        if std::thread::panicking() {
            let containers: Vec<String> = docker::node_containers(&self.node)
                .iter()
                .map(Container::summary)
                .collect();
            eprintln!(
                "---- node {}: containers at failure:\n{}\n---- agent log (last {LOG_TAIL_LINES} \
                 lines):\n{}",
                self.node,
                containers.join("\n"),
                tail(&self.log(), LOG_TAIL_LINES)
            );
            if let Some(work) = self.work.take() {
                eprintln!("---- agent work dir kept at {}", work.keep().display());
            }
        }
        // The agent is dead, so nothing re-creates containers behind our back.
        docker::remove_node_containers(&self.node);
        if let Some(pod_logs) = pod_logs {
            remove_container_log_links(&pod_logs);
        }
        // Then its pod cgroup tree, now that no container is in it; only a tests' tree (an agent
        // given `--cgroup-root /` shares the machine's).
        let cgroup_root = self.cgroup_root();
        if !cgroup_root.starts_with(CGROUP_TEST_ROOT) {
            return;
        }
        if let Err(e) = remove_cgroup_tree(&cgroup_root) {
            eprintln!("---- node {}: cgroup tree left behind: {e}", self.node);
        }
    }
}

/// The `/var/log/containers` links into `pod_logs` (a dropped agent's container logs).
fn remove_container_log_links(pod_logs: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir("/var/log/containers") else {
        return;
    };
    for link in entries.flatten().map(|e| e.path()) {
        if std::fs::read_link(&link).is_ok_and(|t| t.starts_with(pod_logs)) {
            let _ = std::fs::remove_file(&link);
        }
    }
}

/// Where the tests' cgroup trees go: each agent's `--cgroup-root` is under it.
pub const CGROUP_TEST_ROOT: &str = "/dockerlet-it/";

/// The `--cgroup-root` the harness gives an agent: `/dockerlet-it/<node>`.
pub fn cgroup_root(node: &str) -> String {
    format!("{CGROUP_TEST_ROOT}{node}")
}

/// The root of every cgroup hierarchy mounted (cgroup v1 controllers and named hierarchies,
/// the cgroup2 mount).
pub fn cgroup_hierarchies() -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut roots: Vec<PathBuf> = info
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut left = left.split(' ');
            let (root, point) = (left.nth(3)?, left.next()?);
            let fstype = right.split(' ').next()?;
            (root == "/" && matches!(fstype, "cgroup" | "cgroup2")).then(|| PathBuf::from(point))
        })
        .collect();
    roots.sort();
    roots.dedup();
    roots
}

/// rmdir `cgroup` (an absolute cgroup path under [`CGROUP_TEST_ROOT`]) and every cgroup under it, deepest first, in every
/// hierarchy; a cgroup that is still busy is retried for a few seconds (runc removes a killed
/// container's cgroup just after `docker rm` returns).
pub fn remove_cgroup_tree(cgroup: &str) -> std::io::Result<()> {
    fn remove(dir: &Path) -> std::io::Result<()> {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove(&entry.path())?;
            }
        }
        match std::fs::remove_dir(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))
            }
            _ => Ok(()),
        }
    }
    if !cgroup.starts_with(CGROUP_TEST_ROOT) || cgroup.split('/').any(|p| p == "..") {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{cgroup}: only a test tree under {CGROUP_TEST_ROOT} is removed"),
        ));
    }
    stop_test_slices(cgroup);
    let relative = cgroup.trim_start_matches('/');
    let mut last = Ok(());
    for _ in 0..50 {
        last = cgroup_hierarchies()
            .iter()
            .try_for_each(|root| remove(&root.join(relative)));
        if last.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    last
}

/// With the systemd cgroup driver an agent's tree under `cgroup` is slices
/// (`dockerlet_it-<node>.slice` and below, as kubelet names `/dockerlet-it/<node>`): stopping
/// the root slice stops the rest and systemd removes their cgroups. Nothing on a host without
/// systemd, or when the slice was never made.
fn stop_test_slices(cgroup: &str) {
    if !Path::new("/run/systemd/system").is_dir() {
        return;
    }
    let components: Vec<String> = cgroup
        .split('/')
        .filter(|c| !c.is_empty())
        .map(|c| c.replace('-', "_"))
        .collect();
    if components.is_empty() {
        return;
    }
    let slice = format!("{}.slice", components.join("-"));
    let _ = std::process::Command::new("systemctl")
        .args(["stop", &slice])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// Lazily unmount every mount point under `dir`, deepest first.
pub(crate) fn unmount_under(dir: &Path) {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let prefix = dir.display().to_string();
    let mut points: Vec<&str> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        let _ = std::process::Command::new("umount").args(["-l", p]).status();
    }
}

/// How [`Agent::start_with`] starts an agent, beyond its flags. The default is how
/// [`Agent::start`] starts one for a test; the bench changes the rest for its release agent.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// The node name is `<node_prefix>-<name>-<8 hex>` ([`unique_name`]); `None`: `it`.
    pub node_prefix: Option<String>,
    /// The node name itself, instead of one made up from the prefix (for a credential minted
    /// for the node before it starts, such as the test API server's `node_kubeconfig`).
    pub node_name: Option<String>,
    /// The binary to run; `None`: [`binary`].
    pub bin: Option<PathBuf>,
    /// Environment variables for the agent, on top of the caller's.
    pub env: Vec<(String, String)>,
    /// The agent's own intervals: none of the short ones tests get before their flags
    /// (`--file-check-frequency 1s`, `--sync-frequency 5s`, a 1–4 s crash-loop back-off).
    pub agent_intervals: bool,
    /// Log to `<log_dir>/<node>.log` (created if missing); `None`: `agent.log` in the agent's
    /// temporary directory.
    pub log_dir: Option<PathBuf>,
    /// Remove `RUST_LOG` from the agent's environment, for its own default filter (else the
    /// caller's `RUST_LOG`, or `info`).
    pub default_log_filter: bool,
    /// Start-up also waits for `/healthz` on the healthz port to answer 200.
    pub wait_healthy: bool,
}

/// The agent binary: `$DOCKERLET_BIN`, else `target/debug/dockerlet` of this workspace (or of
/// `$CARGO_TARGET_DIR`). Panics with a hint if it is missing.
pub fn binary() -> PathBuf {
    try_binary().unwrap_or_else(|e| panic!("{e:#}"))
}

fn try_binary() -> anyhow::Result<PathBuf> {
    let path = if let Some(bin) = std::env::var_os("DOCKERLET_BIN") {
        PathBuf::from(bin)
    } else {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
        target.join("debug/dockerlet")
    };
    ensure!(
        path.is_file(),
        "the dockerlet binary is missing at {}: run `cargo build --workspace --bins` first \
         (`make test` does), or point DOCKERLET_BIN at it",
        path.display()
    );
    Ok(path)
}

/// Panics early, with a hint, if Docker or the test image is missing.
fn preflight() {
    if let Err(e) = check_preflight() {
        panic!("{e:#}");
    }
}

fn check_preflight() -> anyhow::Result<()> {
    let info = docker::docker(&["info", "--format", "{{.ServerVersion}}"]);
    ensure!(
        info.status.success(),
        "Docker is not reachable (`docker info` failed: {}); run scripts/ensure-docker.sh",
        String::from_utf8_lossy(&info.stderr).trim()
    );
    ensure!(
        docker::image_exists(BUSYBOX_IMAGE),
        "the image {BUSYBOX_IMAGE} is missing; run `make image` (scripts/build-busybox-image.sh)"
    );
    Ok(())
}

/// `it-<test>-<8 hex>`: lowercase, at most 30 characters, unique per call.
pub fn unique_node_name(test_name: &str) -> String {
    unique_name("it", test_name)
}

/// `<prefix>-<name>-<8 hex>`: `name` lowercased, cut to 18 characters, anything but ASCII
/// letters and digits made `-`; unique per call.
pub fn unique_name(prefix: &str, name: &str) -> String {
    let mut short: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(18)
        .collect();
    while short.ends_with('-') {
        short.pop();
    }
    format!("{prefix}-{short}-{}", random_hex())
}

/// 8 random hex digits (random seed per process, a counter and the clock).
pub fn random_hex() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos());
    format!("{:08x}", hasher.finish() as u32)
}

/// A port that was free a moment ago (bind 127.0.0.1:0, read it, release it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("cannot bind 127.0.0.1:0")
        .port()
}

/// The last `lines` lines of `text`.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One agent's four ports are never the same port twice.
    #[test]
    fn an_agents_ports_are_distinct() {
        for _ in 0..50 {
            let p = Ports::fresh();
            let all = std::collections::BTreeSet::from([p.read_only, p.healthz, p.debug, p.kubelet]);
            assert_eq!(all.len(), 4, "{p:?}");
        }
    }

    /// Node names are lowercase, at most 30 characters, start with the test name, and differ between calls.
    #[test]
    fn node_names_are_short_lowercase_and_unique() {
        let a = unique_node_name("A_Very_Long_Test_Name_That_Goes_On");
        let b = unique_node_name("A_Very_Long_Test_Name_That_Goes_On");
        assert_ne!(a, b);
        for name in [&a, &b] {
            assert!(name.len() <= 30, "{name}");
            assert!(name.starts_with("it-a-very-long-test-n"), "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
        }
        assert!(unique_node_name("x-").starts_with("it-x-"));
    }
}
