//! [`ContainerRuntime`] on the Docker Engine API, through bollard. The [`Images`](crate::Images)
//! half (presence, pulls, the sandbox image, image GC's list and removal) is in `images`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerStateStatusEnum, ContainerSummaryStateEnum, HostConfig,
    PortBinding as DockerPortBinding,
};
use bollard::query_parameters::{
    CreateContainerOptions, EventsOptions, ListContainersOptions, RemoveContainerOptions, StopContainerOptions,
};
use bollard::Docker;
use dockerlet_messages::runtime::{ContainerListing, ContainerRole, ObservedContainer, RuntimeState};
use dockerlet_messages::{ContainerId, PodUid};
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use dockerlet_pod::labels;

use crate::follow::{split_timestamp, FollowMark};
use crate::log_config::ContainerLogConfig;

use super::{
    Attach, AttachedIo, ContainerLogs, ContainerRuntime, Containers, CreateSpec, Exec, ExecId, ExecOutput, ExecState,
    InteractiveExec, LogChunks, LogRequest, LogStream, NetworkMode, Output, RuntimeError, RuntimeEvent, StreamOptions,
    TtySize, EXEC_OUTPUT_LIMIT, WATCHED_EVENTS,
};

mod images;

/// Seconds bollard waits for response headers. Stops pass their own longer timeout.
const REQUEST_TIMEOUT_SECS: u64 = 120;

/// The Docker engine.
#[derive(Clone)]
pub struct DockerRuntime {
    pub(crate) docker: Docker,
    /// Images known to be present (by the reference containers name them with): inspected or
    /// pulled once, forgotten when a create finds the image gone.
    images_present: Arc<Mutex<HashSet<String>>>,
    /// Image facts by image ID (its `Config.User`, for runAsNonRoot and runAsGroup), and the ID
    /// each reference resolved to: one inspect per image, not per container start.
    image_users: Arc<Mutex<ImageUsers>>,
    /// The log driver and rotation every container is created with; none: the daemon's.
    log_config: Option<ContainerLogConfig>,
}

/// The users of inspected images.
#[derive(Debug, Default)]
struct ImageUsers {
    /// Reference → image ID.
    ids: HashMap<String, String>,
    /// Image ID → `Config.User`.
    users: HashMap<String, String>,
}

impl ImageUsers {
    fn remember(&mut self, reference: &str, inspected: &bollard::models::ImageInspect) {
        let id = inspected.id.clone().unwrap_or_else(|| reference.to_string());
        let user = inspected
            .config
            .as_ref()
            .and_then(|c| c.user.clone())
            .unwrap_or_default();
        self.ids.insert(reference.to_string(), id.clone());
        self.users.insert(id, user);
    }

    fn user(&self, reference: &str) -> Option<&String> {
        self.users.get(self.ids.get(reference)?)
    }
}

impl DockerRuntime {
    /// Docker's cgroup driver (`CgroupDriver` of `docker info`: `cgroupfs` or `systemd`), which
    /// the agent's `--cgroup-driver` must match.
    pub async fn cgroup_driver(&self) -> Result<String, RuntimeError> {
        let info = self.docker.info().await.map_err(|e| failed("info", e))?;
        Ok(info.cgroup_driver.map(|d| d.to_string()).unwrap_or_default())
    }

    /// Docker's default log driver (`LoggingDriver`: `json-file`, `local`, `journald`, …).
    pub async fn logging_driver(&self) -> Result<String, RuntimeError> {
        let info = self.docker.info().await.map_err(|e| failed("info", e))?;
        Ok(info.logging_driver.unwrap_or_default())
    }

    /// Docker's root directory (`DockerRootDir`): its filesystem holds images and containers.
    pub async fn root_dir(&self) -> Option<std::path::PathBuf> {
        let info = self.docker.info().await.ok()?;
        info.docker_root_dir.map(std::path::PathBuf::from)
    }

    /// Connect to `endpoint` (`unix:///path` or `tcp://host:port`) and negotiate the API version
    /// once; the negotiated client is kept (bollard 0.21 against Docker 20.10's API 1.41 needs it).
    pub async fn connect(endpoint: &str) -> Result<Self, RuntimeError> {
        let version = bollard::API_DEFAULT_VERSION;
        let docker = if let Some(path) = endpoint.strip_prefix("unix://") {
            Docker::connect_with_unix(path, REQUEST_TIMEOUT_SECS, version)
        } else if let Some(addr) = endpoint.strip_prefix("tcp://") {
            Docker::connect_with_http(&format!("http://{addr}"), REQUEST_TIMEOUT_SECS, version)
        } else {
            Docker::connect_with_http(endpoint, REQUEST_TIMEOUT_SECS, version)
        }
        .map_err(|e| failed("connect", e))?;
        let docker = docker
            .negotiate_version()
            .await
            .map_err(|e| failed("negotiate API version", e))?;
        Ok(DockerRuntime {
            docker,
            images_present: Arc::default(),
            image_users: Arc::default(),
            log_config: None,
        })
    }

    /// Every container created from now on gets this log driver and rotation
    /// (`HostConfig.LogConfig`), whatever the daemon's `log-opts` say.
    pub fn with_log_config(mut self, log_config: ContainerLogConfig) -> Self {
        self.log_config = Some(log_config);
        self
    }

    pub(crate) async fn list(
        &self,
        label_filters: Vec<String>,
    ) -> Result<Vec<bollard::models::ContainerSummary>, RuntimeError> {
        let filters = HashMap::from([("label".to_string(), label_filters)]);
        let options = ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        };
        self.docker
            .list_containers(Some(options))
            .await
            .map_err(|e| failed("list containers", e))
    }

    fn known_images(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.images_present
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn image_users(&self) -> std::sync::MutexGuard<'_, ImageUsers> {
        self.image_users
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl ContainerRuntime for DockerRuntime {
    async fn ping(&self) -> Result<(), RuntimeError> {
        self.docker.ping().await.map(|_| ()).map_err(|e| failed("ping", e))
    }

    async fn version(&self) -> Result<String, RuntimeError> {
        let v = self.docker.version().await.map_err(|e| failed("version", e))?;
        Ok(v.version.unwrap_or_default())
    }
}

#[async_trait]
impl Containers for DockerRuntime {
    async fn list_node_containers(&self, node: &str) -> Result<Vec<ContainerListing>, RuntimeError> {
        let summaries = self.list(vec![format!("{}={node}", labels::NODE)]).await?;
        Ok(summaries.into_iter().filter_map(listing).collect())
    }

    async fn list_pod_containers(&self, node: &str, pod_uid: &PodUid) -> Result<Vec<ContainerListing>, RuntimeError> {
        let summaries = self
            .list(vec![
                format!("{}={node}", labels::NODE),
                format!("{}={pod_uid}", labels::POD_UID),
            ])
            .await?;
        Ok(summaries.into_iter().filter_map(listing).collect())
    }

    async fn inspect_container(&self, id: &ContainerId) -> Result<Option<ObservedContainer>, RuntimeError> {
        match self.docker.inspect_container(&id.0, None).await {
            Ok(response) => {
                let source = TerminationMessageSource::of(&response);
                let Some(mut observed) = observe(response) else {
                    return Ok(None);
                };
                if observed.state == RuntimeState::Exited {
                    if let Some(source) = source {
                        observed.termination_message = self.termination_message(&observed, source).await;
                    }
                }
                Ok(Some(observed))
            }
            // Removed meanwhile: it is simply gone.
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(None),
            Err(e) => Err(failed(&format!("inspect container {id}"), e)),
        }
    }

    async fn create_container(&self, spec: CreateSpec) -> Result<ContainerId, RuntimeError> {
        let name = spec.name.clone();
        let options = CreateContainerOptions {
            name: Some(name.clone()),
            ..Default::default()
        };
        let image = spec.image.clone();
        let mut body = create_body(spec);
        if let (Some(host), Some(logs)) = (body.host_config.as_mut(), &self.log_config) {
            host.log_config = Some(logs.host_log_config());
        }
        let created = match self.docker.create_container(Some(options.clone()), body.clone()).await {
            // A dead container holds the name (an earlier agent crashed mid-way): remove it, retry.
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 409, .. }) => {
                self.remove_container(&ContainerId(name.clone())).await?;
                self.docker.create_container(Some(options), body).await
            }
            other => other,
        };
        match created {
            Ok(r) => Ok(ContainerId(r.id)),
            Err(e) => {
                if matches!(&e, bollard::errors::Error::DockerResponseServerError { status_code: 404, message } if message.contains("image"))
                {
                    // Removed behind our back: the next sync inspects (and pulls) again.
                    self.known_images().remove(&image);
                    self.image_users().ids.remove(&image);
                }
                Err(failed(&format!("create container {name}"), e))
            }
        }
    }

    async fn start_container(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        self.docker
            .start_container(&id.0, None)
            .await
            .map_err(|e| failed(&format!("start container {id}"), e))
    }

    async fn stop_container(&self, id: &ContainerId, grace: Duration) -> Result<(), RuntimeError> {
        // Docker takes whole seconds: round up so a grace period is never cut short.
        let secs = grace.as_secs() + u64::from(grace.subsec_nanos() > 0);
        let options = StopContainerOptions {
            t: Some(secs.min(i32::MAX as u64) as i32),
            signal: None,
        };
        match self.docker.stop_container(&id.0, Some(options)).await {
            Ok(()) => Ok(()),
            // 304: already stopped; 404: already gone. Both mean "stopped".
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 304 | 404, ..
            }) => Ok(()),
            Err(e) => Err(failed(&format!("stop container {id}"), e)),
        }
    }

    async fn remove_container(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        match self.docker.remove_container(&id.0, Some(options)).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(()),
            // 409 "removal already in progress": someone else is removing it.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409,
                message,
            }) if message.contains("already in progress") => Ok(()),
            Err(e) => Err(failed(&format!("remove container {id}"), e)),
        }
    }

    fn events(&self, node: &str) -> BoxStream<'static, Result<RuntimeEvent, RuntimeError>> {
        let filters = HashMap::from([
            ("type".to_string(), vec!["container".to_string()]),
            (
                "event".to_string(),
                WATCHED_EVENTS.iter().map(|e| e.to_string()).collect(),
            ),
            ("label".to_string(), vec![format!("{}={node}", labels::NODE)]),
        ]);
        let options = EventsOptions {
            filters: Some(filters),
            ..Default::default()
        };
        self.docker
            .events(Some(options))
            .map(|event| {
                let event = event.map_err(|e| failed("events", e))?;
                let actor = event.actor.unwrap_or_default();
                let exit_code = actor
                    .attributes
                    .as_ref()
                    .and_then(|a| a.get("exitCode"))
                    .and_then(|c| c.parse().ok());
                Ok(RuntimeEvent {
                    id: ContainerId(actor.id.unwrap_or_default()),
                    action: event.action.unwrap_or_default(),
                    exit_code,
                    time: event
                        .time_nano
                        .and_then(|ns| Timestamp::from_nanosecond(i128::from(ns)).ok()),
                })
            })
            .boxed()
    }
}

/// Docker's log stream of `id`, demultiplexed into raw bytes.
fn log_output(docker: &Docker, id: &ContainerId, options: bollard::query_parameters::LogsOptions) -> LogChunks {
    let operation = format!("logs of container {id}");
    docker
        .logs(&id.0, Some(options))
        .filter_map(|item| async move {
            match item {
                Ok(bollard::container::LogOutput::StdOut { message })
                | Ok(bollard::container::LogOutput::StdErr { message })
                | Ok(bollard::container::LogOutput::Console { message }) => Some(Ok(message)),
                Ok(bollard::container::LogOutput::StdIn { .. }) => None,
                Err(e) => Some(Err(e)),
            }
        })
        .map_err(move |e| failed(&operation, e))
        .boxed()
}

impl ContainerLogs for DockerRuntime {
    fn logs(&self, id: &ContainerId, request: &LogRequest) -> LogChunks {
        let options = bollard::query_parameters::LogsOptions {
            follow: request.follow,
            stdout: request.stream != LogStream::Stderr,
            stderr: request.stream != LogStream::Stdout,
            // Docker reads 0 as "from the start"; a time before 1970 means the same.
            since: request.since_unix.map_or(0, |s| s.clamp(0, i64::from(i32::MAX)) as i32),
            until: 0,
            timestamps: request.timestamps,
            tail: request.tail_lines.map_or_else(|| "all".to_string(), |n| n.to_string()),
        };
        if !request.follow {
            return log_output(&self.docker, id, options);
        }
        // A follow Docker may end early: read with timestamps, marked as delivered (see
        // crate::follow), and read again from the mark once it ends cleanly.
        let keep_stamps = request.timestamps;
        let stamped = bollard::query_parameters::LogsOptions {
            timestamps: true,
            ..options.clone()
        };
        let mark = Arc::new(Mutex::new(Some(FollowMark::default())));
        let marking = mark.clone();
        let followed = log_output(&self.docker, id, stamped.clone()).filter_map(move |chunk| {
            let mut mark = marking.lock().unwrap_or_else(|e| e.into_inner());
            let chunk = match chunk {
                Ok(message) => match split_timestamp(&message) {
                    Some((stamp, text)) => {
                        // Not fresh: sent again by Docker after a rotation (see crate::follow).
                        let fresh = mark.as_mut().is_none_or(|m| m.fresh(stamp, &text));
                        fresh.then(|| Ok(if keep_stamps { message.clone() } else { text }))
                    }
                    None => Some(Ok(message)),
                },
                Err(e) => {
                    // No second read after a failed follow: the error is the answer.
                    *mark = None;
                    Some(Err(e))
                }
            };
            futures::future::ready(chunk)
        });
        let (docker, id) = (self.docker.clone(), id.clone());
        let rest = futures::stream::once(async move {
            let Some(mark) = mark.lock().unwrap_or_else(|e| e.into_inner()).take() else {
                return futures::stream::empty().boxed();
            };
            let again = match mark.since() {
                Some(since) => bollard::query_parameters::LogsOptions {
                    follow: false,
                    since: since.clamp(0, i64::from(i32::MAX)) as i32,
                    tail: "all".to_string(),
                    ..stamped
                },
                None => bollard::query_parameters::LogsOptions {
                    follow: false,
                    ..stamped
                },
            };
            let mut is_new = mark.after();
            log_output(&docker, &id, again)
                .filter_map(move |chunk| {
                    let chunk = match chunk {
                        Ok(message) => match split_timestamp(&message) {
                            Some((stamp, text)) if is_new(stamp) => {
                                Some(Ok(if keep_stamps { message.clone() } else { text }))
                            }
                            // Delivered already, or not placeable in the log's order.
                            _ => None,
                        },
                        Err(e) => Some(Err(e)),
                    };
                    futures::future::ready(chunk)
                })
                .boxed()
        })
        .flatten();
        followed.chain(rest).boxed()
    }
}

#[async_trait]
impl Exec for DockerRuntime {
    async fn exec(&self, id: &ContainerId, cmd: Vec<String>, timeout: Duration) -> Result<ExecOutput, RuntimeError> {
        use bollard::exec::{CreateExecOptions, StartExecResults};
        let options = CreateExecOptions {
            cmd: Some(cmd),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let exec = self
            .docker
            .create_exec(&id.0, options)
            .await
            .map_err(|e| failed(&format!("exec in container {id}"), e))?
            .id;
        let run = async {
            let mut output = Vec::new();
            if let StartExecResults::Attached { output: mut stream, .. } = self
                .docker
                .start_exec(&exec, None)
                .await
                .map_err(|e| failed("start exec", e))?
            {
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk.map_err(|e| failed("read exec output", e))?;
                    let bytes = chunk.into_bytes();
                    let room = EXEC_OUTPUT_LIMIT.saturating_sub(output.len());
                    output.extend_from_slice(&bytes[..bytes.len().min(room)]);
                }
            }
            let inspected = self
                .docker
                .inspect_exec(&exec)
                .await
                .map_err(|e| failed("inspect exec", e))?;
            Ok::<_, RuntimeError>(ExecOutput {
                exit_code: inspected.exit_code,
                output: String::from_utf8_lossy(&output).into_owned(),
            })
        };
        match tokio::time::timeout(timeout, run).await {
            Ok(result) => result,
            Err(_) => {
                // Docker has no "kill exec": kill its process by the host PID Docker reports.
                if let Ok(inspected) = self.docker.inspect_exec(&exec).await {
                    if let (Some(pid), Some(true)) = (inspected.pid, inspected.running) {
                        kill_process(pid);
                    }
                }
                Ok(ExecOutput {
                    exit_code: None,
                    output: String::new(),
                })
            }
        }
    }
}

/// Docker's demultiplexed stdio as [`Output`] chunks (stdin echoes dropped).
fn output_chunks(
    output: std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<bollard::container::LogOutput, bollard::errors::Error>> + Send>,
    >,
    operation: String,
) -> super::OutputChunks {
    output
        .filter_map(move |item| {
            let operation = operation.clone();
            async move {
                match item {
                    Ok(bollard::container::LogOutput::StdOut { message })
                    | Ok(bollard::container::LogOutput::Console { message }) => Some(Ok(Output::Stdout(message))),
                    Ok(bollard::container::LogOutput::StdErr { message }) => Some(Ok(Output::Stderr(message))),
                    Ok(bollard::container::LogOutput::StdIn { .. }) => None,
                    Err(e) => Some(Err(failed(&operation, e))),
                }
            }
        })
        .boxed()
}

#[async_trait]
impl InteractiveExec for DockerRuntime {
    async fn start_exec(
        &self,
        id: &ContainerId,
        cmd: Vec<String>,
        options: StreamOptions,
    ) -> Result<(ExecId, AttachedIo), RuntimeError> {
        use bollard::exec::{StartExecOptions, StartExecResults};
        // The size goes in at creation (Docker's ConsoleSize): a resize after the start races
        // the command (`stty size` would see 0 0).
        let create = bollard::models::ExecConfig {
            cmd: Some(cmd),
            attach_stdin: Some(options.stdin),
            attach_stdout: Some(options.stdout),
            attach_stderr: Some(options.stderr && !options.tty),
            tty: Some(options.tty),
            console_size: options
                .initial_size
                .filter(|_| options.tty)
                .map(|s| vec![usize::from(s.height), usize::from(s.width)]),
            ..Default::default()
        };
        let exec = self
            .docker
            .create_exec(&id.0, create)
            .await
            .map_err(|e| failed(&format!("exec in container {id}"), e))?
            .id;
        // Engines before API 1.42 ignore ConsoleSize: a resize sent now is held by the daemon
        // until the process has started (it waits up to 10 s for the start), which narrows the
        // race with the command's first look at its terminal.
        if let Some(size) = options.initial_size.filter(|_| options.tty) {
            let (docker, exec) = (self.docker.clone(), exec.clone());
            tokio::spawn(async move {
                let size = bollard::exec::ResizeExecOptions {
                    height: size.height,
                    width: size.width,
                };
                if let Err(e) = docker.resize_exec(&exec, size).await {
                    tracing::debug!(exec = %exec, error = %e, "initial exec resize failed");
                }
            });
        }
        let start = StartExecOptions {
            detach: false,
            tty: options.tty,
            output_capacity: None,
        };
        match self
            .docker
            .start_exec(&exec, Some(start))
            .await
            .map_err(|e| failed(&format!("start exec {exec}"), e))?
        {
            StartExecResults::Attached { output, input } => Ok((
                ExecId(exec.clone()),
                AttachedIo {
                    stdin: options.stdin.then_some(input),
                    output: output_chunks(output, format!("read exec {exec} output")),
                },
            )),
            StartExecResults::Detached => Err(RuntimeError::NotFound {
                what: format!("attached streams of exec {exec}"),
            }),
        }
    }

    async fn resize_exec(&self, exec: &ExecId, size: TtySize) -> Result<(), RuntimeError> {
        self.docker
            .resize_exec(
                &exec.0,
                bollard::exec::ResizeExecOptions {
                    height: size.height,
                    width: size.width,
                },
            )
            .await
            .map_err(|e| failed(&format!("resize exec {exec}"), e))
    }

    async fn inspect_exec(&self, exec: &ExecId) -> Result<ExecState, RuntimeError> {
        let inspected = self
            .docker
            .inspect_exec(&exec.0)
            .await
            .map_err(|e| failed(&format!("inspect exec {exec}"), e))?;
        Ok(ExecState {
            running: inspected.running.unwrap_or(false),
            exit_code: inspected.exit_code,
            pid: inspected.pid.filter(|p| *p > 0),
        })
    }

    async fn kill_exec(&self, exec: &ExecId) -> Result<(), RuntimeError> {
        let state = self.inspect_exec(exec).await?;
        if let (true, Some(pid)) = (state.running, state.pid) {
            tracing::info!(exec = %exec, pid, "killing an exec whose client went away");
            kill_process(pid);
        }
        Ok(())
    }
}

#[async_trait]
impl Attach for DockerRuntime {
    async fn attach(&self, id: &ContainerId, options: StreamOptions) -> Result<AttachedIo, RuntimeError> {
        let query = bollard::query_parameters::AttachContainerOptions {
            detach_keys: None,
            logs: false,
            stream: true,
            stdin: options.stdin,
            stdout: options.stdout,
            stderr: options.stderr && !options.tty,
        };
        let attached = self
            .docker
            .attach_container(&id.0, Some(query))
            .await
            .map_err(|e| failed(&format!("attach to container {id}"), e))?;
        Ok(AttachedIo {
            stdin: options.stdin.then_some(attached.input),
            output: output_chunks(attached.output, format!("read container {id} output")),
        })
    }

    async fn resize_container_tty(&self, id: &ContainerId, size: TtySize) -> Result<(), RuntimeError> {
        let options = bollard::query_parameters::ResizeContainerTTYOptionsBuilder::new()
            .h(i32::from(size.height))
            .w(i32::from(size.width))
            .build();
        self.docker
            .resize_container_tty(&id.0, options)
            .await
            .map_err(|e| failed(&format!("resize container {id} TTY"), e))
    }
}

/// SIGKILL a process (an exec that outlived its timeout).
fn kill_process(pid: i64) {
    let pid = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        if let Err(e) = rustix::process::kill_process(pid, rustix::process::Signal::KILL) {
            tracing::warn!(pid = pid.as_raw_nonzero().get(), error = %e, "cannot kill a timed-out exec");
        }
    }
}

pub(crate) fn failed(operation: &str, error: bollard::errors::Error) -> RuntimeError {
    match error {
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            message,
        } => RuntimeError::NotFound {
            what: format!("{operation}: {message}"),
        },
        other => RuntimeError::EngineFailed {
            operation: operation.to_string(),
            source: other,
        },
    }
}

/// One line of `docker ps -a` as a [`ContainerListing`]; `None` if it is not a pod container.
fn listing(s: bollard::models::ContainerSummary) -> Option<ContainerListing> {
    let l: BTreeMap<_, _> = s.labels.unwrap_or_default().into_iter().collect();
    let parsed = labels::parse(&l)?;
    Some(ContainerListing {
        id: ContainerId(s.id?),
        pod_uid: PodUid(parsed.pod_uid),
        name: parsed.name,
        state: match s.state {
            Some(ContainerSummaryStateEnum::CREATED) => RuntimeState::Created,
            Some(
                ContainerSummaryStateEnum::RUNNING
                | ContainerSummaryStateEnum::PAUSED
                | ContainerSummaryStateEnum::RESTARTING,
            ) => RuntimeState::Running,
            Some(ContainerSummaryStateEnum::EXITED | ContainerSummaryStateEnum::DEAD) => RuntimeState::Exited,
            _ => RuntimeState::Unknown,
        },
    })
}

/// Docker's zero time (`0001-01-01T00:00:00Z`) means "never".
fn docker_time(value: Option<&str>) -> Option<Time> {
    let ts: Timestamp = value?.parse().ok()?;
    (ts.as_second() > 0).then_some(Time(ts))
}

impl DockerRuntime {
    /// The PID of running container `id` (port-forward enters its network namespace); `None`
    /// when it is not running or gone.
    pub async fn running_pid(&self, id: &ContainerId) -> Result<Option<u32>, RuntimeError> {
        match self.docker.inspect_container(&id.0, None).await {
            Ok(response) => {
                let state = response.state.unwrap_or_default();
                let pid = state.pid.and_then(|p| u32::try_from(p).ok()).filter(|p| *p > 0);
                Ok(pid.filter(|_| state.running == Some(true)))
            }
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(None),
            Err(e) => Err(failed(&format!("inspect container {id}"), e)),
        }
    }
}

/// Most of a termination message file that is read: its last 4 KiB (kubelet's
/// `MaxContainerTerminationMessageLength`).
const TERMINATION_MESSAGE_MAX: u64 = 4096;
/// With `FallbackToLogsOnError`, the log lines and bytes (the last ones) that stand in for an
/// empty message (kubelet's `MaxContainerTerminationMessageLogLines` and `…LogLength`).
const TERMINATION_LOG_LINES: u64 = 80;
const TERMINATION_LOG_BYTES: usize = 2048;

/// Where an exited container's termination message comes from: the host file mounted at its
/// `terminationMessagePath` (the label the agent set), and whether its log stands in.
struct TerminationMessageSource {
    /// The host side of the mount at the path; none when nothing is mounted there.
    file: Option<std::path::PathBuf>,
    /// `FallbackToLogsOnError`.
    fallback_to_logs: bool,
}

impl TerminationMessageSource {
    fn of(response: &ContainerInspectResponse) -> Option<Self> {
        let labels = response.config.as_ref()?.labels.as_ref()?;
        let path = labels.get(labels::TERMINATION_MESSAGE_PATH)?;
        let file = response
            .mounts
            .iter()
            .flatten()
            .find(|m| m.destination.as_deref() == Some(path.as_str()))
            .and_then(|m| m.source.as_ref())
            .map(std::path::PathBuf::from);
        Some(TerminationMessageSource {
            file,
            fallback_to_logs: labels
                .get(labels::TERMINATION_MESSAGE_POLICY)
                .is_some_and(|p| p == "FallbackToLogsOnError"),
        })
    }
}

impl DockerRuntime {
    /// kubelet's termination message of an exited container (getTerminationMessage): the last
    /// 4 KiB of its message file; when that is empty or missing, the policy is
    /// `FallbackToLogsOnError` and the container failed after running, the last 80 lines of
    /// its log, at most their last 2 KiB.
    async fn termination_message(&self, c: &ObservedContainer, source: TerminationMessageSource) -> String {
        let fallback = source.fallback_to_logs && c.exit_code != 0 && c.started_at.is_some();
        let written = match &source.file {
            Some(file) => match read_tail(file, TERMINATION_MESSAGE_MAX).await {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => return format!("Error on reading termination log {}: {e}", file.display()),
            },
            None => String::new(),
        };
        if !written.is_empty() || !fallback {
            return written;
        }
        let request = LogRequest {
            follow: false,
            timestamps: false,
            tail_lines: Some(TERMINATION_LOG_LINES),
            since_unix: None,
            stream: LogStream::All,
        };
        let mut log = Vec::new();
        let mut chunks = self.logs(&c.id, &request);
        while let Some(chunk) = chunks.next().await {
            match chunk {
                Ok(bytes) => log.extend_from_slice(&bytes),
                Err(e) => return format!("Error on reading termination message from logs: {e}"),
            }
        }
        let start = log.len().saturating_sub(TERMINATION_LOG_BYTES);
        String::from_utf8_lossy(&log[start..]).into_owned()
    }
}

/// The last `max` bytes of the file at `path`.
async fn read_tail(path: &std::path::Path, max: u64) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
    let mut file = tokio::fs::File::open(path).await?;
    let len = file.metadata().await?.len();
    file.seek(std::io::SeekFrom::Start(len.saturating_sub(max))).await?;
    let mut bytes = Vec::with_capacity(len.min(max) as usize);
    file.take(max).read_to_end(&mut bytes).await?;
    Ok(bytes)
}

/// Turn an inspect answer into an [`ObservedContainer`]; `None` if it is not a pod container.
fn observe(response: ContainerInspectResponse) -> Option<ObservedContainer> {
    let config = response.config.unwrap_or_default();
    let l: BTreeMap<_, _> = config.labels.unwrap_or_default().into_iter().collect();
    let parsed = labels::parse(&l)?;
    let state = response.state.unwrap_or_default();
    let runtime_state = match state.status {
        Some(ContainerStateStatusEnum::CREATED) => RuntimeState::Created,
        Some(
            ContainerStateStatusEnum::RUNNING | ContainerStateStatusEnum::PAUSED | ContainerStateStatusEnum::RESTARTING,
        ) => RuntimeState::Running,
        Some(ContainerStateStatusEnum::EXITED | ContainerStateStatusEnum::DEAD) => RuntimeState::Exited,
        _ => RuntimeState::Unknown,
    };
    let ip = response.network_settings.and_then(|n| n.networks).and_then(|networks| {
        networks
            .into_values()
            .find_map(|e| e.ip_address.filter(|ip| !ip.is_empty()))
    });
    let created_at = response.created.as_deref().and_then(|c| docker_time(Some(c)));
    let id = ContainerId(response.id.unwrap_or_default());
    let sandbox = parsed.role == ContainerRole::Sandbox;
    let image = config.image.unwrap_or_default();
    Some(ObservedContainer {
        exit_code: state.exit_code.unwrap_or_default(),
        oom_killed: state.oom_killed.unwrap_or_default(),
        error: state.error.unwrap_or_default(),
        created_at,
        started_at: docker_time(state.started_at.as_deref()),
        finished_at: docker_time(state.finished_at.as_deref()),
        image_id: response.image.unwrap_or_default(),
        ip: if sandbox { ip } else { None },
        pid: state
            .pid
            .and_then(|p| u32::try_from(p).ok())
            .filter(|p| *p > 0 && runtime_state == RuntimeState::Running),
        cgroup_parent: response.host_config.and_then(|h| h.cgroup_parent).unwrap_or_default(),
        ..parsed.observed(id, runtime_state, image)
    })
}

fn non_empty(items: Vec<String>) -> Option<Vec<String>> {
    (!items.is_empty()).then_some(items)
}

fn create_body(spec: CreateSpec) -> ContainerCreateBody {
    let network_mode = spec.network.map(|n| match n {
        NetworkMode::Bridge => "bridge".to_string(),
        NetworkMode::Host => "host".to_string(),
        NetworkMode::Container(id) => format!("container:{id}"),
        NetworkMode::None => "none".to_string(),
    });
    let mut port_bindings: HashMap<String, Option<Vec<DockerPortBinding>>> = HashMap::new();
    let mut exposed = Vec::new();
    for p in &spec.ports {
        let key = format!("{}/{}", p.container_port, p.protocol);
        exposed.push(key.clone());
        port_bindings
            .entry(key)
            .or_default()
            .get_or_insert_with(Vec::new)
            .push(DockerPortBinding {
                host_ip: Some(p.host_ip.clone()),
                host_port: Some(p.host_port.to_string()),
            });
    }
    let host_config = HostConfig {
        network_mode,
        ipc_mode: spec.ipc_mode,
        port_bindings: (!port_bindings.is_empty()).then_some(port_bindings),
        binds: (!spec.binds.is_empty()).then_some(spec.binds),
        memory: spec.memory,
        memory_swap: spec.memory_swap,
        cpu_shares: spec.cpu_shares,
        cpu_quota: spec.cpu_quota,
        cpu_period: spec.cpu_period,
        oom_score_adj: spec.oom_score_adj,
        group_add: non_empty(spec.group_add),
        cap_add: non_empty(spec.cap_add),
        cap_drop: non_empty(spec.cap_drop),
        privileged: Some(spec.privileged),
        readonly_rootfs: Some(spec.read_only_rootfs),
        security_opt: non_empty(spec.security_opt),
        sysctls: (!spec.sysctls.is_empty()).then(|| spec.sysctls.into_iter().collect()),
        pid_mode: spec.pid_mode,
        masked_paths: spec.masked_paths,
        readonly_paths: spec.readonly_paths,
        cgroup_parent: spec.cgroup_parent,
        runtime: spec.runtime,
        ..Default::default()
    };
    ContainerCreateBody {
        image: Some(spec.image),
        entrypoint: spec.entrypoint,
        cmd: spec.cmd,
        env: Some(spec.env),
        working_dir: spec.working_dir,
        stop_signal: spec.stop_signal,
        labels: Some(spec.labels.into_iter().collect()),
        hostname: spec.hostname,
        user: spec.user,
        exposed_ports: (!exposed.is_empty()).then_some(exposed),
        tty: Some(spec.tty),
        open_stdin: Some(spec.stdin),
        stdin_once: Some(spec.stdin_once),
        host_config: Some(host_config),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The security fields of a `CreateSpec` reach Docker's `Config.User` and `HostConfig`;
    /// unset ones stay unset (Docker's defaults), and empty masked paths stay empty (unmasked).
    #[test]
    fn security_fields_reach_the_host_config() {
        let spec = CreateSpec {
            image: "img".into(),
            user: Some("1001:2002".into()),
            group_add: vec!["3000".into()],
            cap_add: vec!["CAP_NET_ADMIN".into()],
            cap_drop: vec!["ALL".into()],
            privileged: true,
            read_only_rootfs: true,
            security_opt: vec!["no-new-privileges".into(), "seccomp=unconfined".into()],
            sysctls: BTreeMap::from([("kernel.shm_rmid_forced".to_string(), "1".to_string())]),
            pid_mode: Some("host".into()),
            masked_paths: Some(vec![]),
            readonly_paths: Some(vec![]),
            stop_signal: Some("SIGUSR1".into()),
            runtime: Some("runsc".into()),
            ..Default::default()
        };
        let body = create_body(spec);
        assert_eq!(body.user.as_deref(), Some("1001:2002"));
        assert_eq!(body.stop_signal.as_deref(), Some("SIGUSR1"));
        assert_eq!(body.host_config.as_ref().unwrap().runtime.as_deref(), Some("runsc"));
        let host = body.host_config.unwrap();
        assert_eq!(host.group_add, Some(vec!["3000".to_string()]));
        assert_eq!(host.cap_add, Some(vec!["CAP_NET_ADMIN".to_string()]));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(host.privileged, Some(true));
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(
            host.security_opt,
            Some(vec!["no-new-privileges".to_string(), "seccomp=unconfined".to_string()])
        );
        assert_eq!(
            host.sysctls,
            Some(HashMap::from([("kernel.shm_rmid_forced".to_string(), "1".to_string())]))
        );
        assert_eq!(host.pid_mode.as_deref(), Some("host"));
        assert_eq!(host.masked_paths, Some(vec![]));
        assert_eq!(host.readonly_paths, Some(vec![]));

        let plain = create_body(CreateSpec::default());
        assert_eq!(plain.user, None);
        let host = plain.host_config.unwrap();
        assert_eq!((host.cap_add, host.security_opt, host.sysctls), (None, None, None));
        assert_eq!((host.masked_paths, host.pid_mode), (None, None));
    }
}
