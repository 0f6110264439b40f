//! The Docker engine: a bollard client, a `docker events` watcher, the bollard-only baseline
//! pods, and clean-up that also runs on panic and Ctrl-C.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _};
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptions, EventsOptions, KillContainerOptions, ListContainersOptions, RemoveContainerOptions,
};
use bollard::Docker;
use futures::StreamExt;
use tokio::runtime::Runtime;

/// The agent's label for its node; baseline containers carry it too (with a node name no agent
/// uses), so `make clean-containers` removes them as well.
pub const NODE_LABEL: &str = "io.dockerlet.node";
/// Every container the bench creates itself (the baseline) carries this label, with the run ID.
pub const BENCH_LABEL: &str = "io.dockerlet.bench";
/// Pod name label (the agent's; the baseline sets it too, so one watcher serves both).
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
/// Container name label (`POD` for the sandbox).
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
/// The agent's built-in sandbox image.
pub const PAUSE_IMAGE: &str = "dockerlet.local/pause:3.10-dockerlet1";
/// The app image of every bench pod.
pub const BUSYBOX_IMAGE: &str = "dockerlet.local/busybox:1";

/// Nanoseconds since the Unix epoch, the clock of Docker's `timeNano`.
pub fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Connects to `/var/run/docker.sock` and negotiates the API version (Docker 20.10 speaks 1.41).
pub async fn connect() -> anyhow::Result<Docker> {
    let docker = Docker::connect_with_unix_defaults().context("connect to the Docker socket")?;
    docker
        .negotiate_version()
        .await
        .context("negotiate the Docker API version")
}

/// Everything to clean up if the bench is interrupted: label filters and agent PIDs.
static REGISTRY: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

#[derive(Clone, PartialEq, Eq)]
enum Registered {
    Label(String),
    Pid(u32),
}

fn register(item: Registered) {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).push(item);
}

fn unregister(item: &Registered) {
    let mut reg = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = reg.iter().position(|r| r == item) {
        reg.remove(i);
    }
}

/// Registers an agent process, so Ctrl-C kills it before removing its containers.
pub fn register_pid(pid: u32) {
    register(Registered::Pid(pid));
}

/// Forgets an agent process that has been stopped.
pub fn unregister_pid(pid: u32) {
    unregister(&Registered::Pid(pid));
}

/// On Ctrl-C (SIGINT): kill the agents, remove every container still registered, exit 130.
pub fn install_interrupt_handler(rt: &Runtime) {
    rt.spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\ninterrupted: stopping agents and removing the bench's containers");
            let items = REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).clone();
            for item in &items {
                if let Registered::Pid(pid) = item {
                    if let Some(pid) = rustix::process::Pid::from_raw(*pid as i32) {
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                    }
                }
            }
            for item in &items {
                if let Registered::Label(label) = item {
                    remove_labelled_cli(label);
                }
            }
            std::process::exit(130);
        }
    });
}

/// Force-removes every container with `label` (`key=value`) through the `docker` CLI, which
/// works from a `Drop` during a panic without an async runtime.
pub fn remove_labelled_cli(label: &str) {
    let out = Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("label={label}")])
        .stdin(Stdio::null())
        .output();
    let Ok(out) = out else { return };
    let ids = String::from_utf8_lossy(&out.stdout).into_owned();
    let ids: Vec<&str> = ids.split_whitespace().collect();
    if ids.is_empty() {
        return;
    }
    let _ = Command::new("docker")
        .args(["rm", "-f", "-v"])
        .args(&ids)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Removes the containers labelled `label` on Ctrl-C while it lives; dropped, it only forgets
/// them (for containers something else removes on drop: an agent's, by the harness).
pub struct OnInterrupt {
    label: String,
}

impl OnInterrupt {
    /// Guards `label` (`key=value`).
    pub fn new(label: String) -> Self {
        register(Registered::Label(label.clone()));
        OnInterrupt { label }
    }
}

impl Drop for OnInterrupt {
    fn drop(&mut self) {
        unregister(&Registered::Label(self.label.clone()));
    }
}

/// Removes the containers labelled `label` when dropped (also on panic), and on Ctrl-C.
pub struct Cleanup {
    interrupt: OnInterrupt,
}

impl Cleanup {
    /// Guards `label` (`key=value`).
    pub fn new(label: String) -> Self {
        Cleanup {
            interrupt: OnInterrupt::new(label),
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        // Then `interrupt` forgets the label.
        remove_labelled_cli(&self.interrupt.label);
    }
}

/// Force-removes every container with `label` through the API, 16 at a time (much faster than
/// one `docker rm` for hundreds of containers); returns how many.
pub async fn remove_labelled(docker: &Docker, label: &str) -> anyhow::Result<usize> {
    let ids = list_labelled(docker, label, true).await?;
    let count = ids.len();
    let removals = futures::stream::iter(ids)
        .map(|id| async move {
            let options = RemoveContainerOptions {
                force: true,
                v: true,
                ..Default::default()
            };
            match docker.remove_container(&id, Some(options)).await {
                Ok(()) => Ok(()),
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404 | 409, ..
                }) => Ok(()),
                Err(e) => Err(e),
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    for r in removals {
        r.context("remove a bench container")?;
    }
    Ok(count)
}

/// IDs of the containers with `label`; all of them or only running ones.
pub async fn list_labelled(docker: &Docker, label: &str, all: bool) -> anyhow::Result<Vec<String>> {
    let options = ListContainersOptions {
        all,
        filters: Some(HashMap::from([("label".to_string(), vec![label.to_string()])])),
        ..Default::default()
    };
    let list = docker.list_containers(Some(options)).await.context("list containers")?;
    Ok(list.into_iter().filter_map(|c| c.id).collect())
}

/// `docker kill` (SIGKILL).
pub async fn kill(docker: &Docker, id: &str) -> anyhow::Result<()> {
    let options = KillContainerOptions {
        signal: "SIGKILL".to_string(),
    };
    docker
        .kill_container(id, Some(options))
        .await
        .with_context(|| format!("kill {id}"))
}

/// One container event as the watcher saw it.
#[derive(Debug, Clone)]
pub struct Event {
    /// Container ID.
    pub id: String,
    /// `create`, `start`, `die`, `destroy`.
    pub action: String,
    /// Docker's timestamp, ns since the epoch.
    pub time_nano: i64,
    /// `io.kubernetes.pod.name`.
    pub pod: String,
    /// `io.kubernetes.container.name`.
    pub container: String,
}

/// Collects Docker's container events (create, start, die, destroy) of one label from creation
/// until dropped.
pub struct Watcher {
    events: Arc<Mutex<Vec<Event>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Watcher {
    /// Subscribes to events of containers with `label` (`key=value`). The subscription asks for
    /// the last second too, so nothing is lost while it connects.
    pub fn start(rt: &Runtime, docker: &Docker, label: &str) -> Self {
        Self::start_for(rt, docker, label, &["create", "start", "die", "destroy"])
    }

    /// Like [`Watcher::start`], for the events `actions` (`exec_die` …).
    pub fn start_for(rt: &Runtime, docker: &Docker, label: &str, actions: &[&str]) -> Self {
        let since = (now_nanos() / 1_000_000_000 - 1).to_string();
        let filters = HashMap::from([
            ("type".to_string(), vec!["container".to_string()]),
            ("label".to_string(), vec![label.to_string()]),
            ("event".to_string(), actions.iter().map(|a| a.to_string()).collect()),
        ]);
        let options = EventsOptions {
            since: Some(since),
            filters: Some(filters),
            ..Default::default()
        };
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        let mut stream = docker.events(Some(options));
        let task = rt.spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                let actor = message.actor.unwrap_or_default();
                let attrs = actor.attributes.unwrap_or_default();
                sink.lock().unwrap_or_else(|e| e.into_inner()).push(Event {
                    id: actor.id.unwrap_or_default(),
                    action: message.action.unwrap_or_default(),
                    time_nano: message.time_nano.unwrap_or_else(now_nanos),
                    pod: attrs.get(POD_NAME_LABEL).cloned().unwrap_or_default(),
                    container: attrs.get(CONTAINER_NAME_LABEL).cloned().unwrap_or_default(),
                });
            }
        });
        // The stream connects on first poll; give it a moment (`since` covers the rest).
        std::thread::sleep(Duration::from_millis(150));
        Watcher { events, task }
    }

    /// Every event so far, in arrival order.
    pub fn snapshot(&self) -> Vec<Event> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Polls `check` over the events every 5 ms until it returns `Some`; fails after `timeout`.
    pub fn wait<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&[Event]) -> Option<T>,
    ) -> anyhow::Result<T> {
        let began = Instant::now();
        loop {
            if let Some(v) = check(&self.events.lock().unwrap_or_else(|e| e.into_inner())) {
                return Ok(v);
            }
            if began.elapsed() > timeout {
                bail!("timed out after {timeout:?} waiting for {what}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The latest `action` event time of each distinct container matching `filter`.
pub fn distinct<'a>(events: &'a [Event], action: &str, filter: impl Fn(&Event) -> bool + 'a) -> HashMap<&'a str, i64> {
    let mut seen = HashMap::new();
    for e in events.iter().filter(|e| e.action == action && filter(e)) {
        seen.insert(e.id.as_str(), e.time_nano);
    }
    seen
}

/// The labels of the baseline: the bench's run label and a node name no agent uses.
#[derive(Debug, Clone)]
pub struct BaselineLabels {
    /// `io.dockerlet.bench` value.
    pub run: String,
    /// `io.dockerlet.node` value.
    pub node: String,
}

impl BaselineLabels {
    /// `io.dockerlet.bench=<run>`, the filter for the watcher and the clean-up.
    pub fn filter(&self) -> String {
        format!("{BENCH_LABEL}={}", self.run)
    }

    fn for_container(&self, pod: &str, container: &str) -> HashMap<String, String> {
        HashMap::from([
            (BENCH_LABEL.to_string(), self.run.clone()),
            (NODE_LABEL.to_string(), self.node.clone()),
            (POD_NAME_LABEL.to_string(), pod.to_string()),
            (CONTAINER_NAME_LABEL.to_string(), container.to_string()),
        ])
    }
}

/// The lowest OOM score adjustment containers may get here, found as the agent finds it: try
/// kubelet's -999 on this process; a host that refuses (no CAP_SYS_RESOURCE, as inside some
/// containers) clamps container values at the current one, and the agent clamps them too.
fn oom_floor() -> i64 {
    static FLOOR: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *FLOOR.get_or_init(|| {
        let path = "/proc/self/oom_score_adj";
        if std::fs::write(path, "-999").is_ok() {
            return -999;
        }
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    })
}

/// The baseline of one pod: what the agent does for a static pod, without the agent — create
/// and start a pause container on the bridge with shareable IPC, then create and start the
/// busybox container `cmd` in its network and IPC namespaces. Sandbox CPU shares, OOM score and
/// hostname as the agent sets them
/// (OOM scores clamped at the same floor).
pub async fn baseline_pod(docker: &Docker, labels: &BaselineLabels, pod: &str, cmd: &[&str]) -> anyhow::Result<()> {
    baseline_pod_with_binds(docker, labels, pod, cmd, &[]).await
}

/// [`baseline_pod`], the app container with `binds` (`host:container[:ro]`, as the agent
/// mounts a pod's volumes).
pub async fn baseline_pod_with_binds(
    docker: &Docker,
    labels: &BaselineLabels,
    pod: &str,
    cmd: &[&str],
    binds: &[String],
) -> anyhow::Result<()> {
    baseline_pod_on(docker, labels, pod, cmd, binds, None).await.map(|_| ())
}

/// [`baseline_pod_with_binds`] on `network`: with a CNI network the sandbox gets Docker's
/// `none` network and is attached with CNI ADD between its start and the app container's
/// create, as the agent does; returns the sandbox's ID and how long the ADD took.
pub async fn baseline_pod_on(
    docker: &Docker,
    labels: &BaselineLabels,
    pod: &str,
    cmd: &[&str],
    binds: &[String],
    network: Option<&dockerlet_cni::Cni>,
) -> anyhow::Result<(String, Option<Duration>)> {
    let create = |name: String, body: ContainerCreateBody| async move {
        let options = CreateContainerOptions {
            name: Some(name.clone()),
            ..Default::default()
        };
        docker
            .create_container(Some(options), body)
            .await
            .map(|r| r.id)
            .with_context(|| format!("create {name}"))
    };
    let sandbox = create(
        format!("bench_POD_{pod}"),
        ContainerCreateBody {
            image: Some(PAUSE_IMAGE.to_string()),
            hostname: Some(pod.chars().take(63).collect()),
            labels: Some(labels.for_container(pod, "POD")),
            host_config: Some(HostConfig {
                network_mode: Some(if network.is_some() { "none" } else { "bridge" }.to_string()),
                ipc_mode: Some("shareable".to_string()),
                cpu_shares: Some(2),
                oom_score_adj: Some((-998).max(oom_floor())),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
    .await?;
    docker
        .start_container(&sandbox, None)
        .await
        .with_context(|| format!("start the sandbox of {pod}"))?;
    let add = match network {
        Some(cni) => Some(attach(docker, cni, pod, &sandbox).await?),
        None => None,
    };
    let app = create(
        format!("bench_main_{pod}"),
        ContainerCreateBody {
            image: Some(BUSYBOX_IMAGE.to_string()),
            entrypoint: Some(cmd.iter().map(|s| s.to_string()).collect()),
            labels: Some(labels.for_container(pod, "main")),
            host_config: Some(HostConfig {
                network_mode: Some(format!("container:{sandbox}")),
                ipc_mode: Some(format!("container:{sandbox}")),
                binds: (!binds.is_empty()).then(|| binds.to_vec()),
                cpu_shares: Some(2),
                oom_score_adj: Some(1000.max(oom_floor())),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
    .await?;
    docker
        .start_container(&app, None)
        .await
        .with_context(|| format!("start the app container of {pod}"))?;
    Ok((sandbox, add))
}

/// CNI ADD of a running baseline sandbox, as the agent makes it (`/proc/<pid>/ns/net`,
/// `eth0`, the pod's args); how long it took.
async fn attach(docker: &Docker, cni: &dockerlet_cni::Cni, pod: &str, sandbox: &str) -> anyhow::Result<Duration> {
    let pid = docker
        .inspect_container(sandbox, None)
        .await
        .with_context(|| format!("inspect the sandbox of {pod}"))?
        .state
        .and_then(|s| s.pid)
        .filter(|p| *p > 0)
        .with_context(|| format!("the sandbox of {pod} has no process"))?;
    let attachment = dockerlet_cni::PodAttachment {
        namespace: "default".into(),
        name: pod.to_string(),
        uid: pod.to_string(),
        container_id: sandbox.to_string(),
        netns: format!("/proc/{pid}/ns/net"),
        port_mappings: Vec::new(),
        bandwidth: None,
        dns: None,
    };
    let began = Instant::now();
    cni.add(&attachment)
        .await
        .with_context(|| format!("CNI ADD for the sandbox of {pod}"))?;
    Ok(began.elapsed())
}

/// Docker's server version and API version.
pub async fn version(docker: &Docker) -> String {
    match docker.version().await {
        Ok(v) => format!(
            "{} (API {})",
            v.version.unwrap_or_default(),
            v.api_version.unwrap_or_default()
        ),
        Err(e) => format!("unknown ({e})"),
    }
}

/// True if the engine has `image`.
pub async fn image_exists(docker: &Docker, image: &str) -> bool {
    docker.inspect_image(image).await.is_ok()
}
