//! `/exec`, `/attach` (over SPDY/3.1 or WebSocket) and `/run`, as kubelet serves them
//! (`pkg/kubelet/server/server.go`, the remotecommand server of `k8s.io/kubelet/pkg/cri/streaming`).
//!
//! A request is checked before the upgrade: the query as kube-apiserver's `streamParams` writes it
//! and kubelet's `NewOptions` reads it (`command` repeated; `input`, `output`, `error`, `tty` each
//! `1` to ask for that stream; 400 without any stream), then the pod and its running container
//! (404 with kubelet's messages). Then the transport gives the client's streams — over SPDY the
//! client opens one stream per role (`error`, `stdin`, `stdout`, `stderr`, `resize`), within
//! [`STREAM_CREATION_TIMEOUT`]; over WebSocket they are channels 0–4 — and the session pumps them
//! to and from the runtime: stdin into the process (EOF when the client ends its stdin), output
//! out, terminal sizes to the TTY. When the output ends the exit code becomes the `Status` on the
//! error stream (v4+: JSON with `NonZeroExitCode` and the `ExitCode` cause; older: the message
//! text). A client that goes away mid-exec has its process killed, never left running.

use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use dockerlet_messages::ContainerId;
use dockerlet_runtime::{Attach, ExecId, InteractiveExec, Output, OutputChunks, StreamOptions, TtySize};
use dockerlet_streaming::spdy::conn::{Connection, Control, StreamWriter};
use dockerlet_streaming::spdy::frame::rst;
use dockerlet_streaming::status::{ExecOutcome, ResizeDecoder, TerminalSize};
use dockerlet_streaming::upgrade::{RemoteCommandProtocol, StreamHeaders, StreamType};
use dockerlet_streaming::websocket::{self, Incoming};
use futures::channel::{mpsc, oneshot};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;

use super::streams::{self, spdy, ws};
use super::KubeletApi;
use crate::error::ApiError;

/// How long a SPDY client has to open the streams it asked for (kubelet's default).
pub const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a TTY exec waits for the client's first terminal size before starting.
pub const FIRST_RESIZE_WAIT: Duration = Duration::from_secs(1);

/// The most output `/run` keeps (the CRI's 16 MiB message limit).
pub const RUN_OUTPUT_LIMIT: usize = 16 * 1024 * 1024;

/// The remote-command versions over SPDY, newest first: kubelet's `SupportedStreamingProtocols`
/// (`v5.channel.k8s.io` over SPDY is v4, as kubelet's `createHTTPStreamStreams` takes it; client-go's
/// SPDY executor, kube-apiserver's WebSocket translator among them, offers it first).
pub const SPDY_PROTOCOLS: [&str; 5] = dockerlet_streaming::upgrade::REMOTE_COMMAND_PROTOCOLS;

/// The query parameters of `/exec`, `/attach` and `/run`: the names kube-apiserver's
/// `streamParams` (`pkg/registry/core/pod/strategy.go`) writes and kubelet reads
/// (`k8s.io/api/core/v1` `ExecStdinParam`, `ExecStdoutParam`, `ExecStderrParam`, `ExecTTYParam`,
/// `ExecCommandParam`), not the `PodExecOptions` field names a client sends to the API server.
pub mod param {
    /// Attach the client's stdin (`1`).
    pub const STDIN: &str = "input";
    /// Send the process's stdout (`1`).
    pub const STDOUT: &str = "output";
    /// Send the process's stderr (`1`).
    pub const STDERR: &str = "error";
    /// Run on a terminal (`1`).
    pub const TTY: &str = "tty";
    /// One argument of the command, repeated in order (`/exec`).
    pub const COMMAND: &str = "command";
    /// The whole command, split on spaces (`/run`, kubelet's legacy name).
    pub const RUN_COMMAND: &str = "cmd";
}

/// No stream asked for: kubelet's `NewOptions` refuses the request (400, this text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("you must specify at least 1 of stdin, stdout, stderr")]
pub struct NoStreams;

/// The first value of `name`, as Go's `Request.FormValue` and go-restful's `QueryParameter`
/// read a query.
fn first<'q>(query: &'q [(String, String)], name: &str) -> Option<&'q str> {
    query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// Whether the stream `name` is asked for: kubelet compares the first value with `"1"`, so
/// `true` (or the `PodExecOptions` names `stdin`, `stdout`, `stderr`) asks for nothing.
fn wants(query: &[(String, String)], name: &str) -> bool {
    first(query, name) == Some("1")
}

/// The streams a remote command asks for, as kubelet's `NewOptions`: stderr is dropped with a
/// TTY (a terminal has one output), and at least one of stdin, stdout, stderr is required.
pub fn stream_options(query: &[(String, String)]) -> Result<StreamOptions, NoStreams> {
    let tty = wants(query, param::TTY);
    let options = StreamOptions {
        stdin: wants(query, param::STDIN),
        stdout: wants(query, param::STDOUT),
        stderr: wants(query, param::STDERR) && !tty,
        tty,
        initial_size: None,
    };
    if !options.stdin && !options.stdout && !options.stderr {
        return Err(NoStreams);
    }
    Ok(options)
}

/// The `command` values of an exec, in order. kubelet checks nothing here: an empty command
/// reaches the runtime, whose refusal comes back on the error stream.
pub fn command(query: &[(String, String)]) -> Vec<String> {
    query
        .iter()
        .filter(|(k, _)| k == param::COMMAND)
        .map(|(_, v)| v.clone())
        .collect()
}

/// The pod a request names, and its container's ID.
#[derive(Debug, Clone)]
struct Target {
    namespace: String,
    pod: String,
    uid: String,
    container: String,
    id: ContainerId,
    /// The container's `stdinOnce`: an attach's end of input then closes the container's
    /// stdin; otherwise the container keeps it, and so does the attach.
    stdin_once: bool,
}

/// Find the running container `{namespace}/{pod}[/{uid}]/{container}` among the pods the agent
/// runs: 404 `pod does not exist` or `container not found ("c")`, as kubelet.
async fn find_container(api: &KubeletApi, req: &HttpRequest) -> Result<Target, ApiError> {
    let info = req.match_info();
    let namespace = info.get("namespace").unwrap_or_default().to_string();
    let pod_name = info.get("pod").unwrap_or_default().to_string();
    let uid = info.get("uid").filter(|u| !u.is_empty());
    let container = info.get("container").unwrap_or_default().to_string();
    let pod = super::find_pod(api, &namespace, &pod_name)
        .await?
        .ok_or_else(|| ApiError::NotFound("pod does not exist".into()))?;
    let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
    let not_found = || ApiError::NotFound(format!("container not found ({container:?})"));
    if uid.is_some_and(|u| u != pod_uid) {
        return Err(not_found());
    }
    let id = pod
        .status
        .as_ref()
        .and_then(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
                .chain(s.ephemeral_container_statuses.iter().flatten())
                .find(|c| c.name == container)
        })
        .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        .and_then(|c| c.container_id.clone())
        .ok_or_else(not_found)?;
    let id = ContainerId(id.strip_prefix("docker://").unwrap_or(&id).to_string());
    let stdin_once = pod.spec.as_ref().is_some_and(|s| {
        let ephemeral = s.ephemeral_containers.iter().flatten().map(|e| (&e.name, e.stdin_once));
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
            .map(|c| (&c.name, c.stdin_once))
            .chain(ephemeral)
            .any(|(name, once)| *name == container && once == Some(true))
    });
    Ok(Target {
        namespace,
        pod: pod_name,
        uid: pod_uid,
        container,
        id,
        stdin_once,
    })
}

/// Where output goes: a SPDY stream, or a WebSocket channel.
enum Sink {
    Spdy(StreamWriter),
    Ws(ws::Sender, u8),
}

impl Sink {
    async fn write(&mut self, data: Bytes) -> Result<(), ()> {
        match self {
            Sink::Spdy(w) => w.write(data).await.map_err(|_| ()),
            Sink::Ws(s, channel) => s.send(*channel, &data).await.map_err(|_| ()),
        }
    }

    /// This end is done with the stream (SPDY FIN; nothing over WebSocket).
    async fn finish(&mut self) {
        match self {
            Sink::Spdy(w) => {
                let _ = w.finish().await;
            }
            // kubelet's wsstream closes no channel (client-go's v5 reader drops such messages).
            Sink::Ws(..) => {}
        }
    }
}

/// How the connection is ended once the status is written.
enum Ender {
    Spdy(Control),
    Ws(ws::Sender),
}

impl Ender {
    async fn end(self) {
        match self {
            Ender::Spdy(mut control) => {
                let _ = control.close().await;
            }
            Ender::Ws(sender) => sender.close().await,
        }
    }
}

/// The client's side of a remote command, whatever the transport.
struct ClientIo {
    stdin: Option<BoxStream<'static, Bytes>>,
    resize: Option<BoxStream<'static, TerminalSize>>,
    stdout: Option<Sink>,
    stderr: Option<Sink>,
    error: Sink,
    status_is_json: bool,
    /// Resolves when the client has gone away.
    gone: BoxFuture<'static, ()>,
    ender: Ender,
}

/// Terminal sizes from a byte stream (the resize stream's JSON objects); a malformed one ends it.
fn sizes(bytes: BoxStream<'static, Bytes>) -> BoxStream<'static, TerminalSize> {
    futures::stream::unfold(
        (bytes, ResizeDecoder::default(), std::collections::VecDeque::new()),
        |(mut bytes, mut decoder, mut ready)| async move {
            loop {
                if let Some(size) = ready.pop_front() {
                    return Some((size, (bytes, decoder, ready)));
                }
                let chunk = bytes.next().await?;
                match decoder.push(&chunk) {
                    Ok(new) => ready.extend(new),
                    Err(e) => {
                        tracing::info!(error = %e, "resize stream ends: invalid input");
                        return None;
                    }
                }
            }
        },
    )
    .boxed()
}

fn reader_bytes(reader: dockerlet_streaming::spdy::conn::StreamReader) -> BoxStream<'static, Bytes> {
    reader
        .take_while(|r| futures::future::ready(r.is_ok()))
        .filter_map(|r| futures::future::ready(r.ok()))
        .boxed()
}

/// Wait for the SPDY streams the request asked for (error, and stdin/stdout/stderr/resize as
/// asked), as kubelet's `waitForStreams`; `None` when the client does not open them in time.
async fn spdy_streams(
    mut connection: Connection,
    protocol: RemoteCommandProtocol,
    options: StreamOptions,
) -> Option<ClientIo> {
    let control = connection.control();
    let want_resize = options.tty && protocol.has_resize();
    let expected = 1
        + usize::from(options.stdin)
        + usize::from(options.stdout)
        + usize::from(options.stderr)
        + usize::from(want_resize);
    let (mut error, mut stdin, mut stdout, mut stderr, mut resize) = (None, None, None, None, None);
    let mut received = 0;
    let wait = async {
        while received < expected {
            let mut stream = connection.accept().await?;
            match StreamHeaders::remote_command(&stream.headers).map(|h| h.stream_type) {
                Ok(StreamType::Error) => error = Some(stream.writer),
                Ok(StreamType::Stdin) => stdin = Some(reader_bytes(stream.reader)),
                Ok(StreamType::Stdout) => stdout = Some(stream.writer),
                Ok(StreamType::Stderr) => stderr = Some(stream.writer),
                Ok(StreamType::Resize) => resize = Some(sizes(reader_bytes(stream.reader))),
                Ok(other) => {
                    tracing::info!(stream_type = other.name(), "unexpected stream type: reset");
                    let _ = stream.writer.reset(rst::PROTOCOL_ERROR).await;
                    continue;
                }
                Err(e) => {
                    tracing::info!(error = %e, "invalid stream headers: reset");
                    let _ = stream.writer.reset(rst::PROTOCOL_ERROR).await;
                    continue;
                }
            }
            received += 1;
        }
        Some(())
    };
    match tokio::time::timeout(STREAM_CREATION_TIMEOUT, wait).await {
        Ok(Some(())) => {}
        Ok(None) => return None,
        Err(_) => {
            tracing::info!(expected, received, "timed out waiting for the client to create streams");
            let _ = control.clone().close().await;
            return None;
        }
    }
    // Streams opened from now on are refused.
    drop(connection);
    let Some(error) = error else {
        let _ = control.clone().close().await;
        return None;
    };
    Some(ClientIo {
        stdin,
        resize,
        stdout: stdout.map(Sink::Spdy),
        stderr: stderr.map(Sink::Spdy),
        error: Sink::Spdy(error),
        status_is_json: protocol.status_is_json(),
        gone: control.closed().boxed(),
        ender: Ender::Spdy(control),
    })
}

/// The WebSocket's channels as a remote command's streams: a task reads the client's messages
/// (stdin on 0, v5's close of 0 as EOF, sizes on 4) until it closes or goes away.
async fn ws_streams(
    protocol: websocket::ChannelProtocol,
    sender: ws::Sender,
    mut receiver: ws::Receiver,
    options: StreamOptions,
) -> ClientIo {
    let (stdin_tx, stdin_rx) = mpsc::channel::<Bytes>(4);
    let (mut resize_tx, resize_rx) = mpsc::channel::<Bytes>(4);
    let (gone_tx, gone_rx) = oneshot::channel::<()>();
    actix_web::rt::spawn(async move {
        let mut stdin_tx = Some(stdin_tx);
        while let Some(message) = receiver.recv().await {
            match message {
                Ok(Incoming::Data {
                    channel: websocket::STDIN,
                    data,
                }) => {
                    if let Some(tx) = stdin_tx.as_mut() {
                        if tx.send(data).await.is_err() {
                            stdin_tx = None;
                        }
                    }
                }
                Ok(Incoming::Data {
                    channel: websocket::RESIZE,
                    data,
                }) => {
                    let _ = resize_tx.send(data).await;
                }
                Ok(Incoming::Close {
                    channel: websocket::STDIN,
                }) => stdin_tx = None,
                Ok(_) => {}
                Err(e) => {
                    tracing::info!(error = %e, "WebSocket client broke the protocol");
                    break;
                }
            }
        }
        let _ = gone_tx.send(());
    });
    let mut first = sender.clone();
    // wsstream tells the client the connection is set up with an empty message on the lowest
    // channel it will write.
    let lowest = if options.stdout {
        websocket::STDOUT
    } else if options.stderr {
        websocket::STDERR
    } else {
        websocket::ERROR
    };
    let _ = first.send(lowest, &[]).await;
    ClientIo {
        stdin: options.stdin.then(|| stdin_rx.boxed()),
        resize: Some(sizes(resize_rx.boxed())),
        stdout: options.stdout.then(|| Sink::Ws(sender.clone(), websocket::STDOUT)),
        stderr: options.stderr.then(|| Sink::Ws(sender.clone(), websocket::STDERR)),
        error: Sink::Ws(sender.clone(), websocket::ERROR),
        status_is_json: protocol.status_is_json(),
        gone: gone_rx.map(|_| ()).boxed(),
        ender: Ender::Ws(sender),
    }
}

/// Upgrade (WebSocket or SPDY) and run `session` on the client's streams once they exist;
/// returns the 101 (or the refusal).
fn upgrade<F, Fut>(
    req: &HttpRequest,
    payload: web::Payload,
    options: StreamOptions,
    idle: Option<Duration>,
    session: F,
) -> HttpResponse
where
    F: FnOnce(ClientIo) -> Fut + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    if let Some(refused) = streams::upgrade_required(req) {
        return refused;
    }
    if streams::is_websocket(req) {
        let accepted = match ws::accept(req, payload, false, idle) {
            Ok(a) => a,
            Err(refusal) => return actix_web::ResponseError::error_response(&refusal),
        };
        let ws::Accepted {
            protocol,
            response,
            sender,
            receiver,
        } = accepted;
        actix_web::rt::spawn(async move {
            let io = ws_streams(protocol, sender, receiver, options).await;
            session(io).await;
        });
        return response;
    }
    let upgraded = match spdy::upgrade(req, payload, &SPDY_PROTOCOLS, idle) {
        Ok(u) => u,
        Err(refusal) => return actix_web::ResponseError::error_response(&refusal),
    };
    let protocol = RemoteCommandProtocol::from_name(upgraded.protocol).unwrap_or(RemoteCommandProtocol::V1);
    let connection = upgraded.connection;
    actix_web::rt::spawn(async move {
        if let Some(io) = spdy_streams(connection, protocol, options).await {
            session(io).await;
        }
    });
    upgraded.response
}

/// Kill an exec's process unless disarmed (the session ended normally, or was dropped).
struct KillOnDrop {
    runtime: Arc<dyn InteractiveExec>,
    exec: Option<ExecId>,
}

impl KillOnDrop {
    fn disarm(&mut self) {
        self.exec = None;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(exec) = self.exec.take() {
            let runtime = self.runtime.clone();
            actix_web::rt::spawn(async move {
                if let Err(e) = runtime.kill_exec(&exec).await {
                    tracing::warn!(exec = %exec, error = %e, "cannot kill an abandoned exec");
                }
            });
        }
    }
}

/// Copy the process's output to the client; `Err(true)` when the client is gone, `Err(false)`
/// when reading the runtime failed.
async fn pump_output(
    mut output: OutputChunks,
    stdout: &mut Option<Sink>,
    stderr: &mut Option<Sink>,
) -> Result<(), bool> {
    while let Some(chunk) = output.next().await {
        let (sink, data) = match chunk {
            Ok(Output::Stdout(data)) => (stdout.as_mut(), data),
            Ok(Output::Stderr(data)) => (stderr.as_mut().or(stdout.as_mut()), data),
            Err(e) => {
                tracing::info!(error = %e, "reading the process's output failed");
                return Err(false);
            }
        };
        if let Some(sink) = sink {
            sink.write(data).await.map_err(|()| true)?;
        }
    }
    Ok(())
}

/// Pass each terminal size the client sends to `apply`, in order, until it stops sending.
fn spawn_resizer<F, Fut>(mut sizes: BoxStream<'static, TerminalSize>, apply: F) -> tokio::task::JoinHandle<()>
where
    F: Fn(TtySize) -> Fut + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    actix_web::rt::spawn(async move {
        while let Some(size) = sizes.next().await {
            apply(TtySize {
                width: size.width,
                height: size.height,
            })
            .await;
        }
    })
}

/// Copy the client's stdin into the process; EOF shuts the process's stdin.
/// Copy the client's stdin to the process. At its end the process's input is closed when
/// `close_at_end`; otherwise it is held open until the session ends (the task is aborted).
fn pump_input(
    input: Option<dockerlet_runtime::InputWriter>,
    stdin: Option<BoxStream<'static, Bytes>>,
    close_at_end: bool,
) -> Option<tokio::task::JoinHandle<()>> {
    let (mut input, mut stdin) = (input?, stdin?);
    Some(actix_web::rt::spawn(async move {
        while let Some(data) = stdin.next().await {
            if input.write_all(&data).await.is_err() {
                return;
            }
            if input.flush().await.is_err() {
                return;
            }
        }
        if close_at_end {
            let _ = input.shutdown().await;
        } else {
            std::future::pending::<()>().await;
        }
    }))
}

/// Write the outcome on the error stream and end the connection.
async fn conclude(mut io_parts: (Option<Sink>, Option<Sink>, Sink, bool, Ender), outcome: ExecOutcome) {
    if let Some(s) = io_parts.0.as_mut() {
        s.finish().await;
    }
    if let Some(s) = io_parts.1.as_mut() {
        s.finish().await;
    }
    let bytes = outcome.error_stream_bytes(io_parts.3);
    if !bytes.is_empty() {
        let _ = io_parts.2.write(Bytes::from(bytes)).await;
    }
    io_parts.2.finish().await;
    io_parts.4.end().await;
}

/// Why an exec's exit code is not known.
#[derive(Debug, thiserror::Error)]
enum ExitCodeError {
    /// The runtime could not inspect the exec.
    #[error("{0}")]
    Inspect(#[from] dockerlet_runtime::RuntimeError),
    /// Its output ended but it still ran after 5 s of polling.
    #[error("the process's output ended but it still runs")]
    StillRunning,
}

/// Wait for the exec's exit code once its output ended (the engine may report it a moment
/// later).
async fn exit_code(runtime: &dyn InteractiveExec, exec: &ExecId) -> Result<Option<i64>, ExitCodeError> {
    for _ in 0..200 {
        let state = runtime.inspect_exec(exec).await?;
        if !state.running {
            return Ok(state.exit_code);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err(ExitCodeError::StillRunning)
}

async fn exec_session(
    runtime: Arc<dyn InteractiveExec>,
    target: Target,
    cmd: Vec<String>,
    options: StreamOptions,
    io: ClientIo,
) {
    let ClientIo {
        stdin,
        resize,
        mut stdout,
        mut stderr,
        error,
        status_is_json,
        gone,
        ender,
    } = io;
    // kubectl sends the terminal's size at once: wait a moment for it, so the TTY has it from
    // the start.
    let mut resize = resize;
    let mut options = options;
    if options.tty {
        if let Some(sizes) = resize.as_mut() {
            if let Ok(Some(size)) = tokio::time::timeout(FIRST_RESIZE_WAIT, sizes.next()).await {
                options.initial_size = Some(TtySize {
                    width: size.width,
                    height: size.height,
                });
            }
        }
    }
    let outcome = match runtime.start_exec(&target.id, cmd.clone(), options).await {
        Err(e) => ExecOutcome::Internal { message: e.to_string() },
        Ok((exec, attached)) => {
            let mut guard = KillOnDrop {
                runtime: runtime.clone(),
                exec: Some(exec.clone()),
            };
            let input = pump_input(attached.stdin, stdin, true);
            let resizer = resize.filter(|_| options.tty).map(|sizes| {
                let (runtime, exec) = (runtime.clone(), exec.clone());
                spawn_resizer(sizes, move |size| {
                    let (runtime, exec) = (runtime.clone(), exec.clone());
                    async move {
                        if let Err(e) = runtime.resize_exec(&exec, size).await {
                            tracing::info!(exec = %exec, error = %e, "resize failed");
                        }
                    }
                })
            });
            let pumped = tokio::select! {
                r = pump_output(attached.output, &mut stdout, &mut stderr) => r,
                () = gone => Err(true),
            };
            for task in [input, resizer].into_iter().flatten() {
                task.abort();
            }
            if pumped == Err(true) {
                tracing::info!(pod = %target.pod, namespace = %target.namespace, pod_uid = %target.uid,
                    container = %target.container, exec = %exec, "exec client went away: killing the process");
                // The guard kills it.
                return;
            }
            let code = exit_code(runtime.as_ref(), &exec).await;
            if code.is_ok() {
                guard.disarm();
            }
            match code {
                Ok(Some(0)) => ExecOutcome::Success,
                Ok(Some(code)) => ExecOutcome::NonZeroExit { code, command: cmd },
                Ok(None) => ExecOutcome::Internal {
                    message: "the runtime reported no exit code".into(),
                },
                Err(e) => ExecOutcome::Internal { message: e.to_string() },
            }
        }
    };
    tracing::debug!(pod = %target.pod, namespace = %target.namespace, pod_uid = %target.uid,
        container = %target.container, outcome = ?outcome, "exec ended");
    conclude((stdout, stderr, error, status_is_json, ender), outcome).await;
}

async fn attach_session(runtime: Arc<dyn Attach>, target: Target, options: StreamOptions, io: ClientIo) {
    let ClientIo {
        stdin,
        resize,
        mut stdout,
        mut stderr,
        error,
        status_is_json,
        gone,
        ender,
    } = io;
    let outcome = match runtime.attach(&target.id, options).await {
        Err(e) => ExecOutcome::AttachFailed { message: e.to_string() },
        Ok(attached) => {
            // Docker ends an attach's output when its input closes, unless the container is
            // StdinOnce (then it closes the container's stdin instead): without stdinOnce the
            // end of the client's input is not passed on, so output keeps coming, as kubelet's
            // CRI attach does.
            let input = pump_input(attached.stdin, stdin, target.stdin_once);
            let resizer = resize.filter(|_| options.tty).map(|sizes| {
                let (runtime, id) = (runtime.clone(), target.id.clone());
                spawn_resizer(sizes, move |size| {
                    let (runtime, id) = (runtime.clone(), id.clone());
                    async move {
                        if let Err(e) = runtime.resize_container_tty(&id, size).await {
                            tracing::info!(container_id = %id, error = %e, "resize failed");
                        }
                    }
                })
            });
            let pumped = tokio::select! {
                r = pump_output(attached.output, &mut stdout, &mut stderr) => r,
                () = gone => Err(true),
            };
            for task in [input, resizer].into_iter().flatten() {
                task.abort();
            }
            if pumped == Err(true) {
                // Detached: the container goes on.
                return;
            }
            ExecOutcome::Success
        }
    };
    conclude((stdout, stderr, error, status_is_json, ender), outcome).await;
}

/// `GET|POST /exec/{namespace}/{pod}[/{uid}]/{container}?command=…&input=1&output=1&error=1&tty=1`.
pub async fn exec(
    req: HttpRequest,
    payload: web::Payload,
    api: web::Data<KubeletApi>,
) -> Result<HttpResponse, ApiError> {
    let query = query(&req)?;
    let options = stream_options(&query).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let cmd = command(&query);
    let target = find_container(&api, &req).await?;
    tracing::info!(pod = %target.pod, namespace = %target.namespace, pod_uid = %target.uid,
        container = %target.container, command = ?cmd, tty = options.tty, "exec");
    let runtime = api.exec.clone();
    Ok(upgrade(&req, payload, options, api.stream_idle_timeout, move |io| {
        exec_session(runtime, target, cmd, options, io)
    }))
}

/// `GET|POST /attach/{namespace}/{pod}[/{uid}]/{container}?input=1&output=1&error=1&tty=1`.
pub async fn attach(
    req: HttpRequest,
    payload: web::Payload,
    api: web::Data<KubeletApi>,
) -> Result<HttpResponse, ApiError> {
    let query = query(&req)?;
    let options = stream_options(&query).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let target = find_container(&api, &req).await?;
    tracing::info!(pod = %target.pod, namespace = %target.namespace, pod_uid = %target.uid,
        container = %target.container, tty = options.tty, "attach");
    let runtime = api.attach.clone();
    Ok(upgrade(&req, payload, options, api.stream_idle_timeout, move |io| {
        attach_session(runtime, target, options, io)
    }))
}

/// `POST /run/{namespace}/{pod}[/{uid}]/{container}?cmd=…`: the command (split on spaces, as
/// kubelet) run to its end; 200 with stdout then stderr, or 500 `command '…' exited with N: …`.
pub async fn run(req: HttpRequest, api: web::Data<KubeletApi>) -> Result<HttpResponse, ApiError> {
    let query = query(&req)?;
    // kubelet: `strings.Split(request.QueryParameter("cmd"), " ")`, the first value, nothing
    // checked (an empty command fails in the runtime, 500).
    let raw = first(&query, param::RUN_COMMAND).unwrap_or_default().to_string();
    let target = find_container(&api, &req).await?;
    let cmd: Vec<String> = raw.split(' ').map(str::to_string).collect();
    tracing::info!(pod = %target.pod, namespace = %target.namespace, pod_uid = %target.uid,
        container = %target.container, command = ?cmd, "run");
    let options = StreamOptions {
        stdout: true,
        stderr: true,
        ..StreamOptions::default()
    };
    let internal = |reason: String| ApiError::Internal { reason };
    let (exec, attached) = api
        .exec
        .start_exec(&target.id, cmd.clone(), options)
        .await
        .map_err(|e| internal(e.to_string()))?;
    let mut guard = KillOnDrop {
        runtime: api.exec.clone(),
        exec: Some(exec.clone()),
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let mut output = attached.output;
    while let Some(chunk) = output.next().await {
        let (buf, data) = match chunk.map_err(|e| internal(e.to_string()))? {
            Output::Stdout(d) => (&mut stdout, d),
            Output::Stderr(d) => (&mut stderr, d),
        };
        let room = RUN_OUTPUT_LIMIT.saturating_sub(buf.len());
        buf.extend_from_slice(&data[..data.len().min(room)]);
    }
    let code = exit_code(api.exec.as_ref(), &exec)
        .await
        .map_err(|e| internal(e.to_string()))?;
    guard.disarm();
    match code {
        Some(0) => {
            stdout.extend_from_slice(&stderr);
            Ok(HttpResponse::Ok().content_type("application/json").body(stdout))
        }
        Some(code) => Ok(HttpResponse::InternalServerError()
            .content_type("text/plain; charset=utf-8")
            .body(format!(
                "command '{}' exited with {code}: {}",
                cmd.join(" "),
                String::from_utf8_lossy(&stderr)
            ))),
        None => Err(internal("the runtime reported no exit code".into())),
    }
}

/// The query's pairs, repeated names kept in order.
fn query(req: &HttpRequest) -> Result<Vec<(String, String)>, ApiError> {
    web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map(web::Query::into_inner)
        .map_err(|e| ApiError::BadRequest(format!("query: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet_api::auth::{AuthConfig, Authorizer};
    use dockerlet_runtime::fake::{Call, FakeRuntime};
    use tokio_tungstenite::tungstenite::{client::IntoClientRequest, Message};

    /// The kubelet API's routes on a plain local port, anonymous and always allowed, over
    /// `fake`; the port.
    fn serve(fake: &FakeRuntime) -> u16 {
        serve_with_idle_timeout(fake, None)
    }

    fn serve_with_idle_timeout(fake: &FakeRuntime, stream_idle_timeout: Option<Duration>) -> u16 {
        let api = KubeletApi {
            handles: crate::tests::fake_handles(true),
            logs: Arc::new(fake.clone()),
            exec: Arc::new(fake.clone()),
            attach: Arc::new(fake.clone()),
            configz: Arc::new(serde_json::json!({})),
            port_forward: Arc::new(crate::kubelet_api::port_forward::tests::Loopback),
            stream_idle_timeout,
            debug_routes: crate::kubelet_api::DebugRoutes::default(),
        };
        let auth = Arc::new(AuthConfig {
            node_name: "n1".into(),
            anonymous: true,
            tokens: None,
            authorizer: Authorizer::AlwaysAllow,
        });
        let server = actix_web::HttpServer::new(move || {
            actix_web::App::new()
                .app_data(web::Data::new(api.handles.clone()))
                .app_data(web::Data::new(api.clone()))
                .app_data(web::Data::new(auth.clone()))
                .configure(|cfg| super::super::configure(cfg, crate::kubelet_api::DebugRoutes::default()))
        })
        .workers(1)
        .disable_signals()
        .bind("127.0.0.1:0")
        .unwrap();
        let port = server.addrs()[0].port();
        actix_web::rt::spawn(server.run());
        port
    }

    async fn websocket(port: u16, path: &str) -> tokio_tungstenite::WebSocketStream<tokio::net::TcpStream> {
        let mut request = format!("ws://127.0.0.1:{port}{path}").into_client_request().unwrap();
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", "v5.channel.k8s.io".parse().unwrap());
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        tokio_tungstenite::client_async(request, tcp).await.unwrap().0
    }

    /// Over v5 WebSocket: the set-up message, the runtime's stdout and stderr on channels 1
    /// and 2, stdin echoed back until the client's close of channel 0, and the exit code as
    /// kubelet's NonZeroExitCode Status on channel 3.
    #[actix_web::test]
    async fn exec_over_websocket_carries_every_channel() {
        let fake = FakeRuntime::default();
        {
            let mut state = fake.state.lock().unwrap();
            state.stream_output = vec![
                Output::Stdout(Bytes::from_static(b"hi\n")),
                Output::Stderr(Bytes::from_static(b"warn\n")),
            ];
            state.exec_exit_code = 3;
        }
        let port = serve(&fake);
        let mut ws = websocket(port, "/exec/default/web-n1/app?command=cat&input=1&output=1&error=1").await;
        ws.send(Message::Binary(Bytes::from_static(b"\x00abc"))).await.unwrap();
        ws.send(Message::Binary(Bytes::from_static(&[255, 0]))).await.unwrap();
        let mut got = Vec::new();
        while let Some(Ok(message)) = ws.next().await {
            match message {
                Message::Binary(b) => got.push(b.to_vec()),
                Message::Close(_) => break,
                _ => {}
            }
        }
        let status = got.pop().expect("the status message");
        assert_eq!(status[0], 3);
        let status: serde_json::Value = serde_json::from_slice(&status[1..]).unwrap();
        assert_eq!(status["reason"], "NonZeroExitCode");
        assert_eq!(status["details"]["causes"][0]["message"], "3");
        assert_eq!(
            got,
            vec![
                vec![1],
                b"\x01hi\n".to_vec(),
                b"\x02warn\n".to_vec(),
                b"\x01abc".to_vec(),
            ]
        );
        assert!(fake
            .calls()
            .iter()
            .any(|c| matches!(c, Call::StartExec(_, cmd, _) if cmd == &["cat"])));
        assert!(!fake.calls().iter().any(|c| matches!(c, Call::KillExec(_))));
    }

    /// A WebSocket client that goes away mid-exec has the process killed.
    #[actix_web::test]
    async fn a_client_gone_mid_exec_has_its_process_killed() {
        let fake = FakeRuntime::default();
        let port = serve(&fake);
        let mut ws = websocket(port, "/exec/default/web-n1/app?command=cat&input=1&output=1").await;
        assert_eq!(
            ws.next().await.unwrap().unwrap(),
            Message::Binary(Bytes::from_static(&[1]))
        );
        drop(ws);
        for _ in 0..200 {
            if fake.calls().iter().any(|c| matches!(c, Call::KillExec(_))) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the exec was not killed: {:?}", fake.calls());
    }

    /// `--streaming-connection-idle-timeout`: an exec on which nothing moves is closed after
    /// the timeout (its process killed, as for a client gone), one that keeps moving is not.
    #[actix_web::test]
    async fn an_idle_exec_connection_is_closed() {
        let fake = FakeRuntime::default();
        let port = serve_with_idle_timeout(&fake, Some(Duration::from_millis(400)));
        let mut ws = websocket(port, "/exec/default/web-n1/app?command=cat&input=1&output=1").await;
        let started = std::time::Instant::now();
        // Activity: stdin every 200 ms for a second keeps it open and echoed; the last at 0.8 s,
        // so it closes at 1.2 s.
        for _ in 0..5 {
            ws.send(Message::Binary(Bytes::from_static(b"\x00x"))).await.unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut echoed = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(Ok(message)) = ws.next().await {
                match message {
                    Message::Binary(b) if b.first() == Some(&1) => echoed.extend_from_slice(&b[1..]),
                    Message::Close(_) => return,
                    _ => {}
                }
            }
        })
        .await
        .expect("the idle connection was not closed");
        assert_eq!(echoed, b"xxxxx", "stdin sent while active was echoed");
        assert!(
            started.elapsed() >= Duration::from_millis(1100),
            "{:?}",
            started.elapsed()
        );
        for _ in 0..200 {
            if fake.calls().iter().any(|c| matches!(c, Call::KillExec(_))) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the exec was not killed: {:?}", fake.calls());
    }

    /// Unknown pods and containers are 404 with kubelet's messages, before any upgrade.
    #[actix_web::test]
    async fn unknown_pods_and_containers_are_404() {
        let fake = FakeRuntime::default();
        let port = serve(&fake);
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        for (path, body) in [
            (
                "/exec/default/ghost/app?command=true&output=1",
                "pod does not exist".to_string(),
            ),
            (
                "/exec/default/web-n1/nope?command=true&output=1",
                "container not found (\"nope\")".to_string(),
            ),
            (
                "/exec/default/web-n1/wrong/app?command=true&output=1",
                "container not found (\"app\")".to_string(),
            ),
        ] {
            let request = format!("ws://127.0.0.1:{port}{path}").into_client_request().unwrap();
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            match tokio_tungstenite::client_async(request, tcp).await {
                Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                    assert_eq!(response.status(), 404, "{path}");
                    let text = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default()).into_owned();
                    assert_eq!(text, body, "{path}");
                }
                other => panic!("{path}: {other:?}"),
            }
        }
        drop(tcp);
    }

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// kubelet's NewOptions on kube-apiserver's parameters: `input`, `output`, `error`, `tty`
    /// are asked for by a first value of exactly "1"; stderr is dropped with a TTY; at least one
    /// stream; the `PodExecOptions` names a client sends to the API server (`stdin=true`, as an
    /// API server that forwarded the client's query would pass on) ask for nothing.
    #[test]
    fn stream_options_follow_kubelet() {
        let o = stream_options(&q(&[("input", "1"), ("output", "1"), ("tty", "1"), ("error", "1")])).unwrap();
        assert_eq!(
            o,
            StreamOptions {
                stdin: true,
                stdout: true,
                stderr: false,
                tty: true,
                initial_size: None,
            }
        );
        let o = stream_options(&q(&[("error", "1"), ("output", "true"), ("input", "0")])).unwrap();
        assert_eq!((o.stdin, o.stdout, o.stderr, o.tty), (false, false, true, false));
        assert_eq!(
            stream_options(&q(&[("output", "1"), ("output", "0")])).map(|o| o.stdout),
            Ok(true),
            "the first value counts"
        );
        for ignored in [
            &[("stdin", "1"), ("stdout", "1"), ("stderr", "1")][..],
            &[("stdin", "true"), ("stdout", "true")],
            &[("output", "true"), ("input", "yes")],
            &[("tty", "1"), ("error", "1")],
        ] {
            assert_eq!(stream_options(&q(ignored)), Err(NoStreams), "{ignored:?}");
        }
        assert_eq!(
            NoStreams.to_string(),
            "you must specify at least 1 of stdin, stdout, stderr"
        );
        assert_eq!(
            command(&q(&[
                ("command", "sh"),
                ("output", "1"),
                ("command", "-c"),
                ("command", "x")
            ])),
            ["sh", "-c", "x"]
        );
        assert!(command(&q(&[("output", "1")])).is_empty());
    }
}
