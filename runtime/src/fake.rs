//! An in-memory [`ContainerRuntime`] for unit tests of the actors: containers are records whose
//! state tests can change, and every call is logged.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use dockerlet_messages::runtime::{ContainerListing, ObservedContainer, RuntimeImage, RuntimeState};
use dockerlet_messages::{ContainerId, PodUid};
use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use dockerlet_pod::labels;

use super::{
    ContainerLogs, ContainerRuntime, Containers, CreateSpec, Exec, ExecOutput, Images, LogChunks, LogRequest,
    LogStream, RegistryAuth, RuntimeError, RuntimeEvent,
};

/// A call, as the fake saw it: one per Docker Engine API request the real runtime would make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `list_node_containers` or `list_pod_containers` (one `GET /containers/json`).
    List,
    /// `inspect_container`.
    Inspect(ContainerId),
    /// `image_present` that asked the engine (the remembered ones do not).
    InspectImage(String),
    /// `pull_image`.
    Pull(String),
    /// `remove_image` that removed the image, with its ID.
    RemoveImage(String),
    /// `create_container`, with the container's name (`k8s_…`).
    Create(String),
    /// `start_container`.
    Start(ContainerId),
    /// `stop_container`.
    Stop(ContainerId),
    /// `remove_container`.
    Remove(ContainerId),
    /// `exec`, with the command.
    Exec(ContainerId, Vec<String>),
    /// `start_exec` (interactive), with the command and streams.
    StartExec(ContainerId, Vec<String>, super::StreamOptions),
    /// `resize_exec`.
    ResizeExec(super::ExecId, super::TtySize),
    /// `kill_exec`.
    KillExec(super::ExecId),
    /// `attach`.
    Attach(ContainerId, super::StreamOptions),
    /// `resize_container_tty`.
    ResizeTty(ContainerId, super::TtySize),
}

/// One fake container: the spec it was created from and its state.
#[derive(Debug, Clone)]
pub struct FakeContainer {
    /// How it was created.
    pub spec: CreateSpec,
    /// What Docker would report.
    pub observed: ObservedContainer,
}

/// The size [`FakeRuntime`] reports of every image it pulls.
pub const FAKE_IMAGE_SIZE: u64 = 4_321_000;

/// Shared state of a [`FakeRuntime`].
#[derive(Debug, Default)]
pub struct FakeState {
    /// Images known present, as the Docker runtime remembers them.
    known_images: std::collections::BTreeSet<String>,
    /// Containers by ID.
    pub containers: BTreeMap<String, FakeContainer>,
    /// Images present.
    pub images: Vec<String>,
    /// What `list_images` lists (image GC's view; independent of [`FakeState::images`], the
    /// references a create finds present).
    pub image_list: Vec<RuntimeImage>,
    /// Image IDs that containers the fake does not model use (another node's, a plain
    /// `docker create`); with the IDs of listed images a fake container's image names, the
    /// set `image_ids_in_use` answers.
    pub foreign_image_users: std::collections::BTreeSet<String>,
    /// `Config.User` of images (empty for one not listed: root).
    pub image_users: BTreeMap<String, String>,
    /// Calls that change something, in order.
    pub calls: Vec<Call>,
    /// Next container ID number.
    next_id: u64,
    /// How long each create takes (to test that a slow start can be cut short).
    pub create_delay: Duration,
    /// How long `stop_container` takes (a container slow to stop: its SIGTERM trap).
    pub stop_delay: Duration,
    /// Make listing fail, as when the engine is unreachable.
    pub unreachable: bool,
    /// Exit code of every exec (0 unless a test sets it).
    pub exec_exit_code: i64,
    /// Make inspects fail (listing still works).
    pub inspect_fails: bool,
    /// Make removals fail, as Docker's 500 "driver failed to remove root filesystem".
    pub remove_fails: bool,
    /// When each exec was called.
    pub exec_times: Vec<std::time::Instant>,
    /// How long each exec takes.
    pub exec_delay: Duration,
    /// Execs running now, and the most that ever ran at once.
    pub exec_running: (usize, usize),
    /// What an interactive exec or attach writes before echoing its stdin back on stdout (as
    /// `cat` would), in order.
    pub stream_output: Vec<super::Output>,
    /// Interactive execs started, by ID: whether each still runs.
    pub interactive: BTreeMap<String, bool>,
    /// Log output by container ID: (stream, line) in the order written.
    pub logs: BTreeMap<String, Vec<(LogStream, String)>>,
    /// Images a pull can fetch, each with the (user, password) it needs (none: anonymous).
    pub registry: BTreeMap<String, Option<(String, String)>>,
    /// The user of each pull's credential, in order (none: anonymous).
    pub pull_users: Vec<Option<String>>,
    /// How long each pull takes.
    pub pull_delay: Duration,
    /// Pulls running now, and the most that ever ran at once.
    pub pulls_running: (usize, usize),
    /// The event streams handed out; [`FakeRuntime::emit`] sends to each.
    events: Vec<futures::channel::mpsc::UnboundedSender<Result<RuntimeEvent, RuntimeError>>>,
}

/// The fake runtime; clones share state.
#[derive(Debug, Clone, Default)]
pub struct FakeRuntime {
    /// Shared state, for tests to inspect and change.
    pub state: Arc<Mutex<FakeState>>,
}

impl FakeRuntime {
    /// A runtime that has these images.
    pub fn with_images(images: &[&str]) -> Self {
        let runtime = FakeRuntime::default();
        runtime.state.lock().expect("fake state").images = images.iter().map(|s| s.to_string()).collect();
        runtime
    }

    /// Make a running container exit with `code`.
    pub fn exit(&self, id: &str, code: i64) {
        let mut state = self.state.lock().expect("fake state");
        if let Some(c) = state.containers.get_mut(id) {
            c.observed.state = RuntimeState::Exited;
            c.observed.exit_code = code;
            c.observed.finished_at = Some(Time(Timestamp::now()));
        }
    }

    /// The calls made so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().expect("fake state").calls.clone()
    }

    /// Send `event` on every event stream handed out.
    pub fn emit(&self, event: RuntimeEvent) {
        let mut state = self.state.lock().expect("fake state");
        state.events.retain(|tx| tx.unbounded_send(Ok(event.clone())).is_ok());
    }

    /// Forget every call made so far.
    pub fn clear_calls(&self) {
        self.state.lock().expect("fake state").calls.clear();
    }
}

impl FakeState {
    fn unreachable(&self, operation: &str) -> Result<(), RuntimeError> {
        if !self.unreachable {
            return Ok(());
        }
        Err(RuntimeError::EngineFailed {
            operation: operation.into(),
            source: bollard::errors::Error::DockerResponseServerError {
                status_code: 503,
                message: "connection refused".into(),
            },
        })
    }

    fn listing(&self, keep: impl Fn(&FakeContainer) -> bool) -> Vec<ContainerListing> {
        self.containers
            .values()
            .filter(|c| keep(c))
            .map(|c| ContainerListing {
                id: c.observed.id.clone(),
                pod_uid: c.observed.pod_uid.clone(),
                name: c.observed.name.clone(),
                state: c.observed.state,
            })
            .collect()
    }
}

fn on_node(c: &FakeContainer, node: &str) -> bool {
    c.spec.labels.get(labels::NODE).map(String::as_str) == Some(node)
}

#[async_trait]
impl ContainerRuntime for FakeRuntime {
    async fn ping(&self) -> Result<(), RuntimeError> {
        Ok(())
    }

    async fn version(&self) -> Result<String, RuntimeError> {
        Ok("fake".to_string())
    }
}

#[async_trait]
impl Containers for FakeRuntime {
    async fn list_node_containers(&self, node: &str) -> Result<Vec<ContainerListing>, RuntimeError> {
        let mut state = self.state.lock().expect("fake state");
        state.calls.push(Call::List);
        state.unreachable("list containers")?;
        Ok(state.listing(|c| on_node(c, node)))
    }

    async fn list_pod_containers(&self, node: &str, pod_uid: &PodUid) -> Result<Vec<ContainerListing>, RuntimeError> {
        let mut state = self.state.lock().expect("fake state");
        state.calls.push(Call::List);
        state.unreachable("list containers")?;
        Ok(state.listing(|c| on_node(c, node) && &c.observed.pod_uid == pod_uid))
    }

    async fn inspect_container(&self, id: &ContainerId) -> Result<Option<ObservedContainer>, RuntimeError> {
        let mut state = self.state.lock().expect("fake state");
        state.calls.push(Call::Inspect(id.clone()));
        state.unreachable("inspect container")?;
        if state.inspect_fails {
            return Err(RuntimeError::EngineFailed {
                operation: format!("inspect container {id}"),
                source: bollard::errors::Error::DockerResponseServerError {
                    status_code: 500,
                    message: "inspect refused".into(),
                },
            });
        }
        Ok(state.containers.get(&id.0).map(|c| c.observed.clone()))
    }

    async fn create_container(&self, spec: CreateSpec) -> Result<ContainerId, RuntimeError> {
        let delay = self.state.lock().expect("fake state").create_delay;
        tokio::time::sleep(delay).await;
        let mut state = self.state.lock().expect("fake state");
        state.next_id += 1;
        let id = ContainerId(format!("fake{:04}", state.next_id));
        let parsed = labels::parse(&spec.labels).ok_or_else(|| RuntimeError::Unlabelled {
            operation: "create".into(),
            name: spec.name.clone(),
        })?;
        let observed = ObservedContainer {
            created_at: Some(Time(Timestamp::now())),
            image_id: "sha256:fake".into(),
            ..parsed.observed(id.clone(), RuntimeState::Created, spec.image.clone())
        };
        state.calls.push(Call::Create(spec.name.clone()));
        state.containers.insert(id.0.clone(), FakeContainer { spec, observed });
        Ok(id)
    }

    async fn start_container(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        let mut state = self.state.lock().expect("fake state");
        state.calls.push(Call::Start(id.clone()));
        let c = state
            .containers
            .get_mut(&id.0)
            .ok_or(RuntimeError::NotFound { what: id.to_string() })?;
        c.observed.state = RuntimeState::Running;
        c.observed.started_at = Some(Time(Timestamp::now()));
        if c.observed.role == dockerlet_messages::runtime::ContainerRole::Sandbox && !c.observed.host_network {
            c.observed.ip = Some("10.88.0.2".into());
        }
        Ok(())
    }

    async fn stop_container(&self, id: &ContainerId, _grace: Duration) -> Result<(), RuntimeError> {
        let delay = {
            let mut state = self.state.lock().expect("fake state");
            state.calls.push(Call::Stop(id.clone()));
            state.stop_delay
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut state = self.state.lock().expect("fake state");
        if let Some(c) = state.containers.get_mut(&id.0) {
            if c.observed.state == RuntimeState::Running {
                c.observed.state = RuntimeState::Exited;
                c.observed.exit_code = 143;
                c.observed.finished_at = Some(Time(Timestamp::now()));
            }
        }
        Ok(())
    }

    async fn remove_container(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        let mut state = self.state.lock().expect("fake state");
        state.calls.push(Call::Remove(id.clone()));
        if state.remove_fails {
            return Err(RuntimeError::EngineFailed {
                operation: format!("remove container {id}"),
                source: bollard::errors::Error::DockerResponseServerError {
                    status_code: 500,
                    message: "driver failed to remove root filesystem".into(),
                },
            });
        }
        state.containers.remove(&id.0);
        Ok(())
    }

    fn events(&self, _node: &str) -> BoxStream<'static, Result<RuntimeEvent, RuntimeError>> {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        self.state.lock().expect("fake state").events.push(tx);
        // Like Docker's, the stream stays open.
        rx.chain(futures::stream::pending()).boxed()
    }
}

#[async_trait]
impl Images for FakeRuntime {
    async fn image_present(&self, image: &str) -> Result<bool, RuntimeError> {
        let mut state = self.state.lock().expect("fake state");
        if state.known_images.contains(image) {
            return Ok(true);
        }
        state.calls.push(Call::InspectImage(image.to_string()));
        let present = state.images.iter().any(|i| i == image);
        if present {
            state.known_images.insert(image.to_string());
        }
        Ok(present)
    }

    async fn image_user(&self, image: &str) -> Result<String, RuntimeError> {
        let state = self.state.lock().expect("fake state");
        Ok(state.image_users.get(image).cloned().unwrap_or_default())
    }

    /// Pulls what [`FakeState::registry`] serves, with its credential; any other image's
    /// registry cannot be reached (an offline node), and a wrong or missing credential is
    /// refused as Docker refuses it.
    async fn pull_image(&self, image: &str, auth: Option<&RegistryAuth>) -> Result<u64, RuntimeError> {
        let delay = {
            let mut state = self.state.lock().expect("fake state");
            state.calls.push(Call::Pull(image.to_string()));
            state.pull_users.push(auth.map(|a| a.username.clone()));
            state.pulls_running.0 += 1;
            state.pulls_running.1 = state.pulls_running.1.max(state.pulls_running.0);
            state.pull_delay
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut state = self.state.lock().expect("fake state");
        state.pulls_running.0 -= 1;
        let Some(wanted) = state.registry.get(image).cloned() else {
            return Err(RuntimeError::PullFailed {
                image: image.to_string(),
                message: format!("Error response from daemon: dial tcp: lookup {image}: no such host"),
                unreachable: true,
            });
        };
        let given = auth.map(|a| (a.username.clone(), a.password.clone()));
        if wanted.is_some() && given != wanted {
            return Err(RuntimeError::PullFailed {
                image: image.to_string(),
                message: "Error response from daemon: no basic auth credentials".into(),
                unreachable: false,
            });
        }
        state.images.push(image.to_string());
        Ok(FAKE_IMAGE_SIZE)
    }

    async fn ensure_sandbox_image(
        &self,
        configured: Option<&str>,
        _auths: &[RegistryAuth],
    ) -> Result<String, RuntimeError> {
        Ok(configured.unwrap_or(super::pause::IMAGE).to_string())
    }

    async fn list_images(&self) -> Result<Vec<RuntimeImage>, RuntimeError> {
        let state = self.state.lock().expect("fake state");
        state.unreachable("list images")?;
        Ok(state.image_list.clone())
    }

    /// Refused as Docker refuses it when a container uses the image; removes it from
    /// [`FakeState::image_list`] and its tags from [`FakeState::images`] otherwise.
    async fn remove_image(&self, image: &RuntimeImage) -> Result<(), RuntimeError> {
        let mut state = self.state.lock().expect("fake state");
        if state.in_use().contains(&image.id) {
            return Err(RuntimeError::ImageInUse {
                image: image.id.clone(),
                message: format!("conflict: unable to delete {} (must be forced)", image.id),
            });
        }
        state.calls.push(Call::RemoveImage(image.id.clone()));
        state.image_list.retain(|i| i.id != image.id);
        state.images.retain(|i| !image.repo_tags.contains(i));
        for tag in &image.repo_tags {
            state.known_images.remove(tag);
        }
        Ok(())
    }

    async fn image_ids_in_use(&self) -> Result<std::collections::BTreeSet<String>, RuntimeError> {
        let state = self.state.lock().expect("fake state");
        state.unreachable("list containers")?;
        Ok(state.in_use())
    }
}

impl FakeState {
    /// The IDs of listed images a fake container names by a tag or its ID, and the foreign ones.
    fn in_use(&self) -> std::collections::BTreeSet<String> {
        let mut used = self.foreign_image_users.clone();
        for c in self.containers.values() {
            let named = |i: &&RuntimeImage| i.id == c.spec.image || i.repo_tags.contains(&c.spec.image);
            used.extend(self.image_list.iter().filter(named).map(|i| i.id.clone()));
        }
        used
    }
}

impl ContainerLogs for FakeRuntime {
    /// The lines set in [`FakeState::logs`], filtered by stream and `tail_lines` (a follow ends
    /// at once, as for an exited container).
    fn logs(&self, id: &ContainerId, request: &LogRequest) -> LogChunks {
        let lines: Vec<String> = {
            let state = self.state.lock().expect("fake state");
            state
                .logs
                .get(&id.0)
                .map(|lines| {
                    lines
                        .iter()
                        .filter(|(s, _)| request.stream == LogStream::All || *s == request.stream)
                        .map(|(_, l)| format!("{l}\n"))
                        .collect()
                })
                .unwrap_or_default()
        };
        let skip = request.tail_lines.map_or(0, |n| lines.len().saturating_sub(n as usize));
        futures::stream::iter(lines.into_iter().skip(skip).map(|l| Ok(bytes::Bytes::from(l)))).boxed()
    }
}

/// Scripted stdio: the [`FakeState::stream_output`] chunks, then stdin echoed on stdout until it
/// is shut down (or nothing, without stdin); `done` runs when the output ends.
fn fake_io(script: Vec<super::Output>, stdin: bool, done: impl FnOnce() + Send + 'static) -> super::AttachedIo {
    use tokio::io::AsyncReadExt;
    let scripted = futures::stream::iter(script.into_iter().map(Ok));
    let (input, echo): (Option<super::InputWriter>, super::OutputChunks) = if stdin {
        let (writer, reader) = tokio::io::duplex(64 * 1024);
        let echo = futures::stream::unfold(reader, |mut reader| async move {
            let mut buf = vec![0u8; 8192];
            let n = reader.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.truncate(n);
            Some((Ok(super::Output::Stdout(bytes::Bytes::from(buf))), reader))
        })
        .boxed();
        (Some(Box::pin(writer)), echo)
    } else {
        (None, futures::stream::empty().boxed())
    };
    let mut done = Some(done);
    let output = scripted
        .chain(echo)
        .chain(futures::stream::poll_fn(move |_| {
            if let Some(done) = done.take() {
                done();
            }
            std::task::Poll::Ready(None)
        }))
        .boxed();
    super::AttachedIo { stdin: input, output }
}

#[async_trait]
impl Exec for FakeRuntime {
    async fn exec(&self, id: &ContainerId, cmd: Vec<String>, _timeout: Duration) -> Result<ExecOutput, RuntimeError> {
        let delay = {
            let mut state = self.state.lock().expect("fake state");
            state.calls.push(Call::Exec(id.clone(), cmd.clone()));
            state.exec_times.push(std::time::Instant::now());
            state.exec_running.0 += 1;
            state.exec_running.1 = state.exec_running.1.max(state.exec_running.0);
            state.exec_delay
        };
        tokio::time::sleep(delay).await;
        let mut state = self.state.lock().expect("fake state");
        state.exec_running.0 -= 1;
        Ok(ExecOutput {
            exit_code: Some(state.exec_exit_code),
            output: String::new(),
        })
    }
}

#[async_trait]
impl super::InteractiveExec for FakeRuntime {
    /// [`FakeState::stream_output`], then stdin echoed; the exec "runs" until its output ends
    /// and exits with [`FakeState::exec_exit_code`]. Any container ID is taken.
    async fn start_exec(
        &self,
        id: &ContainerId,
        cmd: Vec<String>,
        options: super::StreamOptions,
    ) -> Result<(super::ExecId, super::AttachedIo), RuntimeError> {
        let (exec, script) = {
            let mut state = self.state.lock().expect("fake state");
            state.unreachable("start exec")?;
            state.calls.push(Call::StartExec(id.clone(), cmd, options));
            state.next_id += 1;
            let exec = format!("exec{}", state.next_id);
            state.interactive.insert(exec.clone(), true);
            (exec, state.stream_output.clone())
        };
        let shared = self.state.clone();
        let name = exec.clone();
        let io = fake_io(script, options.stdin, move || {
            shared.lock().expect("fake state").interactive.insert(name, false);
        });
        Ok((super::ExecId(exec), io))
    }

    async fn resize_exec(&self, exec: &super::ExecId, size: super::TtySize) -> Result<(), RuntimeError> {
        let mut state = self.state.lock().expect("fake state");
        state.calls.push(Call::ResizeExec(exec.clone(), size));
        Ok(())
    }

    async fn inspect_exec(&self, exec: &super::ExecId) -> Result<super::ExecState, RuntimeError> {
        let state = self.state.lock().expect("fake state");
        let running = *state.interactive.get(&exec.0).ok_or_else(|| RuntimeError::NotFound {
            what: format!("exec {exec}"),
        })?;
        Ok(super::ExecState {
            running,
            exit_code: (!running).then_some(state.exec_exit_code),
            pid: running.then_some(4242),
        })
    }

    async fn kill_exec(&self, exec: &super::ExecId) -> Result<(), RuntimeError> {
        let mut state = self.state.lock().expect("fake state");
        state.calls.push(Call::KillExec(exec.clone()));
        state.interactive.insert(exec.0.clone(), false);
        Ok(())
    }
}

#[async_trait]
impl super::Attach for FakeRuntime {
    /// As [`super::InteractiveExec::start_exec`]'s stdio.
    async fn attach(&self, id: &ContainerId, options: super::StreamOptions) -> Result<super::AttachedIo, RuntimeError> {
        let script = {
            let mut state = self.state.lock().expect("fake state");
            state.unreachable("attach")?;
            state.calls.push(Call::Attach(id.clone(), options));
            state.stream_output.clone()
        };
        Ok(fake_io(script, options.stdin, || {}))
    }

    async fn resize_container_tty(&self, id: &ContainerId, size: super::TtySize) -> Result<(), RuntimeError> {
        let mut state = self.state.lock().expect("fake state");
        state.calls.push(Call::ResizeTty(id.clone(), size));
        Ok(())
    }
}
