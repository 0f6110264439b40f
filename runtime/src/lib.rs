//! The container runtime behind a trait: actors never see bollard.
//!
//! # Layout
//! - [`ContainerRuntime`]: what actors call: [`Containers`] (with the event stream), [`Images`],
//!   [`Exec`].
//! - What the kubelet API streams: [`ContainerLogs`], [`InteractiveExec`] (exec with the
//!   caller's stdio, TTY resize, exit code, kill) and [`Attach`] (a running container's stdio).
//! - [`docker`]: [`docker::DockerRuntime`], the trait on the Docker Engine API through bollard.
//! - [`measured`]: [`measured::Measured`], any runtime with its calls counted and timed
//!   (`kubelet_runtime_operations_*`).
//! - [`pause`]: the built-in pause image, provisioned with `docker import`.
//! - `fake` (feature `fake`, and this crate's tests): [`ContainerRuntime`] in memory, recording
//!   every call as a typed [`fake::Call`].
//!
//! The Docker label and name scheme that lets any agent rebuild its view of a pod from Docker
//! alone is [`dockerlet_pod::labels`]; the container spec it creates from is
//! [`dockerlet_pod::container::CreateSpec`].

pub mod claim;
pub mod docker;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
mod follow;
pub mod log_config;
pub mod measured;
pub mod pause;

pub use dockerlet_pod::container::{CreateSpec, NetworkMode, PortBinding};
pub use dockerlet_pod::credentials::RegistryAuth;
pub use log_config::{ContainerLogConfig, FileLogDriver, LogRotation};

use std::time::Duration;

use async_trait::async_trait;
use dockerlet_messages::runtime::{ContainerListing, ObservedContainer, RuntimeImage};
use dockerlet_messages::{ContainerId, PodUid};
use futures::stream::BoxStream;

/// Errors from the container runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The engine could not be reached or answered with an error. Retried by the caller's next
    /// sync (the PodWorker's error back-off) or the PLEG's next relist.
    #[error("docker {operation} failed: {source}")]
    EngineFailed {
        /// What was attempted (`create container k8s_…`).
        operation: String,
        /// bollard's error: the engine's answer, or why it could not be reached.
        #[source]
        source: bollard::errors::Error,
    },
    /// Local work for the engine failed (building the pause image's archive). Retried at the
    /// next start.
    #[error("{operation} failed: {source}")]
    IoFailed {
        /// What was attempted.
        operation: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A container dockerlet did not label as a pod container. Not retried: the spec is wrong.
    #[error("{operation}: container {name} has no pod labels")]
    Unlabelled {
        /// What was attempted.
        operation: String,
        /// The container's name.
        name: String,
    },
    /// The object does not exist (container or image). The caller decides: a sync observes
    /// again, a pull reports the image missing.
    #[error("{what} not found")]
    NotFound {
        /// The missing object.
        what: String,
    },
    /// The embedded pause image cannot run on this CPU architecture. Final: the agent stops.
    #[error("no built-in pause image for architecture {arch}; set --pod-infra-container-image")]
    UnsupportedArch {
        /// `std::env::consts::ARCH`.
        arch: &'static str,
    },
    /// An image removal the engine refused because a container (of any node, running or not)
    /// uses the image: Docker's 409 "conflict … (must force)". Never forced; image GC skips
    /// the image and goes on with the next candidate.
    #[error("remove image {image}: in use: {message}")]
    ImageInUse {
        /// The image ID or reference whose removal was refused.
        image: String,
        /// Docker's answer.
        message: String,
    },
    /// A pull the engine could not do: the registry refused it (credentials, a missing image)
    /// or could not be reached. Retried after the pull back-off.
    #[error("{message}")]
    PullFailed {
        /// The image.
        image: String,
        /// The engine's answer, as `docker pull` prints it.
        message: String,
        /// The registry could not be reached (name, connection, timeout), as opposed to refusing.
        unreachable: bool,
    },
}

impl RuntimeError {
    /// A pull failed only because the registry could not be reached: an offline node may use the
    /// copy it has. A refusal (no or wrong credentials, no such image) is never papered over.
    pub fn registry_unreachable(&self) -> bool {
        matches!(self, RuntimeError::PullFailed { unreachable: true, .. })
    }
}

/// Whether an engine's pull error says the registry could not be reached rather than that it
/// refused: Go's resolver and dialer errors, as Docker passes them on.
pub fn unreachable_registry_message(message: &str) -> bool {
    const TRANSPORT: &[&str] = &[
        "dial tcp",
        "no such host",
        "connection refused",
        "connection reset",
        "i/o timeout",
        "network is unreachable",
        "no route to host",
        "server misbehaving",
        "Temporary failure in name resolution",
        "TLS handshake timeout",
        "Client.Timeout exceeded",
        "context deadline exceeded",
    ];
    TRANSPORT.iter().any(|t| message.contains(t))
}

/// The Docker events the PLEG is told of: the OOM killer struck (Docker sends `oom` just before
/// that container's `die`), a container died (its own exit, a kill, the OOM killer), or it was
/// removed. Starts and creates are the agent's own doing and are observed by
/// whoever did them; exec, attach and the rest change nothing the PLEG keeps.
pub const WATCHED_EVENTS: &[&str] = &["oom", "die", "destroy"];

/// A change Docker reported on its event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeEvent {
    /// The container.
    pub id: ContainerId,
    /// Docker's action (`start`, `die`, `oom`, `destroy`, …).
    pub action: String,
    /// The exit code a `die` event carries.
    pub exit_code: Option<i64>,
    /// When Docker saw it happen.
    pub time: Option<k8s_openapi::jiff::Timestamp>,
}

/// What a command run in a container gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// Exit code; none when it did not finish within the timeout (it was killed).
    pub exit_code: Option<i64>,
    /// stdout and stderr together, at most [`EXEC_OUTPUT_LIMIT`] bytes.
    pub output: String,
}

/// Most output kept from an exec (kubelet keeps 10 KiB of probe output).
pub const EXEC_OUTPUT_LIMIT: usize = 10 * 1024;

/// A container engine as dockerlet needs it: [`Containers`], [`Images`] and [`Exec`], plus the
/// engine's own liveness and version. Streaming (logs, attach, interactive exec) and stats get
/// traits of their own when the kubelet API and the stats collector need them.
///
/// Every method is scoped by the node name where it lists: an agent only ever sees containers
/// labelled with its own node, so several agents can share one engine.
#[async_trait]
pub trait ContainerRuntime: Containers + Images + Exec + 'static {
    /// Is the engine reachable?
    async fn ping(&self) -> Result<(), RuntimeError>;

    /// The engine's version (`20.10.24`), for the Node's `containerRuntimeVersion`.
    async fn version(&self) -> Result<String, RuntimeError>;
}

/// The containers of this node's pods.
#[async_trait]
pub trait Containers: Send + Sync {
    /// Cheap listing of every container of this node, all states included.
    async fn list_node_containers(&self, node: &str) -> Result<Vec<ContainerListing>, RuntimeError>;

    /// Cheap listing of one pod's containers on this node (a termination's last check that
    /// nothing it did not know of is left).
    async fn list_pod_containers(&self, node: &str, pod_uid: &PodUid) -> Result<Vec<ContainerListing>, RuntimeError>;

    /// One container, inspected; none when it is gone or is not a pod container.
    async fn inspect_container(&self, id: &ContainerId) -> Result<Option<ObservedContainer>, RuntimeError>;

    /// Create (but not start) a container; returns its ID.
    async fn create_container(&self, spec: CreateSpec) -> Result<ContainerId, RuntimeError>;

    /// Start a created container.
    async fn start_container(&self, id: &ContainerId) -> Result<(), RuntimeError>;

    /// Send the stop signal, wait up to `grace`, then SIGKILL.
    async fn stop_container(&self, id: &ContainerId, grace: Duration) -> Result<(), RuntimeError>;

    /// Remove a container (forcibly, with its anonymous volumes).
    async fn remove_container(&self, id: &ContainerId) -> Result<(), RuntimeError>;

    /// The engine's event stream for this node's containers: only the changes nobody asked for
    /// ([`WATCHED_EVENTS`]); what the agent itself does it observes itself.
    fn events(&self, node: &str) -> BoxStream<'static, Result<RuntimeEvent, RuntimeError>>;
}

/// The engine's images.
#[async_trait]
pub trait Images: Send + Sync {
    /// Is the image present on the engine? Known presence is remembered (the image manager's
    /// cache): a pull adds to it, and a create that finds the image gone removes it, so an image
    /// is inspected once, not at every container start.
    async fn image_present(&self, image: &str) -> Result<bool, RuntimeError>;

    /// The image's `Config.User` (empty when it names none), remembered per image ID: one
    /// inspect per image (none when [`Images::image_present`] inspected it already).
    async fn image_user(&self, image: &str) -> Result<String, RuntimeError>;

    /// Pull the image from its registry, with this credential (anonymously without); returns
    /// the pulled image's size in bytes (kubelet's `Pulled` event names it).
    async fn pull_image(&self, image: &str, auth: Option<&RegistryAuth>) -> Result<u64, RuntimeError>;

    /// Make sure the sandbox image is present, provisioning the built-in one if needed; returns
    /// the image reference to use. A configured image that is missing is pulled with each of
    /// `auths` in turn (the node's credentials for it), anonymously when there are none.
    async fn ensure_sandbox_image(
        &self,
        configured: Option<&str>,
        auths: &[RegistryAuth],
    ) -> Result<String, RuntimeError>;

    /// Every image on the engine (`docker images`: top-level images, untagged ones too).
    async fn list_images(&self) -> Result<Vec<RuntimeImage>, RuntimeError>;

    /// Remove `image` as cri-dockerd's `RemoveImage` does (`core/image.go`): each of its repo
    /// tags, then its ID, never forced (parents pruned). An image some container uses is
    /// refused with [`RuntimeError::ImageInUse`]; one already gone is no error.
    async fn remove_image(&self, image: &RuntimeImage) -> Result<(), RuntimeError>;

    /// The image IDs of **every** container on the engine (`docker ps -a`): all node names,
    /// containers no agent made, running or not. An image in this set is in use (kubelet's
    /// `detectImages` counts exited containers too).
    async fn image_ids_in_use(&self) -> Result<std::collections::BTreeSet<String>, RuntimeError>;
}

/// Which of a container's output streams a log read returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogStream {
    /// stdout and stderr, interleaved as written.
    #[default]
    All,
    /// stdout only.
    Stdout,
    /// stderr only.
    Stderr,
}

/// What part of a container's log to read (kubelet's `PodLogOptions`, validated).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogRequest {
    /// Keep the stream open and send new output until the container exits.
    pub follow: bool,
    /// Prefix each line with its RFC 3339 timestamp.
    pub timestamps: bool,
    /// Only the last this many lines; all when none.
    pub tail_lines: Option<u64>,
    /// Only output written at or after this Unix time (seconds).
    pub since_unix: Option<i64>,
    /// Which streams.
    pub stream: LogStream,
}

/// A container's log as a stream of byte chunks, read as the consumer asks for them.
pub type LogChunks = BoxStream<'static, Result<bytes::Bytes, RuntimeError>>;

/// Containers' logs (`kubectl logs`), streamed: nothing is read ahead of the consumer, so a slow
/// reader holds one chunk, not the log.
pub trait ContainerLogs: Send + Sync {
    /// The log of container `id` as `request` says; stdout and stderr demultiplexed into raw
    /// bytes. A follow ends when the container exits.
    fn logs(&self, id: &ContainerId, request: &LogRequest) -> LogChunks;
}

/// Commands run in containers (probes and hooks).
#[async_trait]
pub trait Exec: Send + Sync {
    /// Run `cmd` in the running container; past `timeout` the process is killed (never leaked)
    /// and `exit_code` is none.
    async fn exec(&self, id: &ContainerId, cmd: Vec<String>, timeout: Duration) -> Result<ExecOutput, RuntimeError>;
}

/// Which stdio streams an interactive exec or an attach connects, and whether with a TTY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamOptions {
    /// Connect the caller's stdin.
    pub stdin: bool,
    /// Connect stdout.
    pub stdout: bool,
    /// Connect stderr (never with `tty`: a terminal has one output).
    pub stderr: bool,
    /// Allocate a TTY (exec) / the container has one (attach): output is raw, stdout only.
    pub tty: bool,
    /// The TTY's size from the start (exec; else the engine's default until a resize).
    pub initial_size: Option<TtySize>,
}

/// A chunk of a process's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// From stdout (or the TTY).
    Stdout(bytes::Bytes),
    /// From stderr.
    Stderr(bytes::Bytes),
}

/// A process's output as read from the engine, demultiplexed; ends when the process's stdio
/// closes (it exited, or the container did).
pub type OutputChunks = BoxStream<'static, Result<Output, RuntimeError>>;

/// The process's stdin; shut it down to send EOF.
pub type InputWriter = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// The stdio of an exec or attach.
pub struct AttachedIo {
    /// stdin, when asked for.
    pub stdin: Option<InputWriter>,
    /// stdout and stderr (or the TTY).
    pub output: OutputChunks,
}

impl std::fmt::Debug for AttachedIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachedIo")
            .field("stdin", &self.stdin.is_some())
            .finish_non_exhaustive()
    }
}

/// An exec instance's engine ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExecId(pub String);

impl std::fmt::Display for ExecId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the engine says of an exec instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExecState {
    /// The process still runs.
    pub running: bool,
    /// Its exit code, once it exited (126/127 when the command could not be run).
    pub exit_code: Option<i64>,
    /// Its PID on the host (0 or none once it exited).
    pub pid: Option<i64>,
}

/// A terminal's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtySize {
    /// Columns.
    pub width: u16,
    /// Rows.
    pub height: u16,
}

/// Commands run in containers with the caller's stdio (`kubectl exec`, `/run`).
#[async_trait]
pub trait InteractiveExec: Send + Sync {
    /// Create and start `cmd` in the running container `id` with the streams `options` asks
    /// for.
    async fn start_exec(
        &self,
        id: &ContainerId,
        cmd: Vec<String>,
        options: StreamOptions,
    ) -> Result<(ExecId, AttachedIo), RuntimeError>;

    /// Resize the exec's TTY.
    async fn resize_exec(&self, exec: &ExecId, size: TtySize) -> Result<(), RuntimeError>;

    /// The exec's state: running, exit code, host PID.
    async fn inspect_exec(&self, exec: &ExecId) -> Result<ExecState, RuntimeError>;

    /// SIGKILL the exec's process if it still runs (the engine has no "kill exec": its host PID
    /// from the inspect is killed).
    async fn kill_exec(&self, exec: &ExecId) -> Result<(), RuntimeError>;
}

/// Attaching to a running container's stdio (`kubectl attach`).
#[async_trait]
pub trait Attach: Send + Sync {
    /// Attach to container `id`'s streams (live output only, no past log).
    async fn attach(&self, id: &ContainerId, options: StreamOptions) -> Result<AttachedIo, RuntimeError>;

    /// Resize the container's TTY.
    async fn resize_container_tty(&self, id: &ContainerId, size: TtySize) -> Result<(), RuntimeError>;
}

/// Connections into pods' network namespaces (port-forward): the agent joins the sandbox's
/// namespace; the runtime tells which process holds it.
#[async_trait]
pub trait PortForward: Send + Sync {
    /// A TCP connection to `localhost:port` inside the network namespace of the running
    /// sandbox `sandbox`.
    async fn connect(&self, sandbox: &ContainerId, port: u16) -> Result<tokio::net::TcpStream, PortForwardError>;
}

/// Why a port-forward connection could not be made; the message goes to the client's error
/// stream.
#[derive(Debug, thiserror::Error)]
pub enum PortForwardError {
    /// The sandbox is not running (cri-dockerd's wording). Final for this connection.
    #[error("container not running ({0})")]
    NotRunning(ContainerId),
    /// The engine could not tell.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Nothing accepted the connection inside the namespace, or the namespace could not be
    /// entered.
    #[error("{0}")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
}

#[cfg(test)]
mod tests {
    /// Docker's words for a registry it could not reach, against those of a refusal.
    #[test]
    fn unreachable_registries_are_told_from_refusals() {
        for unreachable in [
            r#"Get "https://dockerlet.local/v2/": dial tcp: lookup dockerlet.local: no such host"#,
            r#"Get "http://127.0.0.1:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused"#,
            r#"Get "https://r.example/v2/": net/http: TLS handshake timeout"#,
        ] {
            assert!(super::unreachable_registry_message(unreachable), "{unreachable}");
        }
        for refused in [
            r#"Head "http://127.0.0.1:5555/v2/private/busybox/manifests/t1": no basic auth credentials"#,
            "pull access denied for x, repository does not exist or may require 'docker login': denied",
            "unauthorized: authentication required",
            "manifest for r.example/app:2 not found: manifest unknown",
        ] {
            assert!(!super::unreachable_registry_message(refused), "{refused}");
        }
    }
}
