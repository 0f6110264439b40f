//! `/portForward/{namespace}/{pod}[/{uid}]`: TCP connections to `localhost:<port>` inside the
//! pod's network namespace, as kubelet (`pkg/kubelet/server/server.go` getPortForward, the CRI
//! streaming server's `portforward` package) and cri-dockerd serve them, over three transports:
//!
//! - **SPDY/3.1** with protocol `portforward.k8s.io`: the client opens a pair of streams per
//!   connection, `streamType` `error` and `data`, with the headers `port` and `requestID`
//!   (older clients without `requestID` are paired by stream id, as kubelet does); any number
//!   of ports and connections at once. A failure is written on the pair's error stream with
//!   kubelet's wording: `error forwarding port <p> to pod <sandbox>, uid : <why>`.
//! - **WebSocket** (`v4.channel.k8s.io`, `v4.base64.channel.k8s.io`, `portforward.k8s.io`, or
//!   none) with `?port=` (repeatable, comma-separated): channels `2i` (data) and `2i+1` (error)
//!   for the `i`-th port, each opened with the port as two little-endian bytes.
//! - **SPDY tunnelled in WebSocket** (`SPDY/3.1+portforward.k8s.io`, kubectl's default since
//!   1.30), so a proxy that passes kubectl's request through unchanged works.
//!
//! The pairing and the query are pure ([`Pairs`], [`ports_from_query`]); the connection itself
//! is the runtime's [`PortForward`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use dockerlet_messages::status::GetPodSandbox;
use dockerlet_messages::{ContainerId, PodUid};
use dockerlet_runtime::PortForward;
use dockerlet_streaming::spdy::conn::{Connection, SpdyStream, StreamError};
use dockerlet_streaming::spdy::header;
use dockerlet_streaming::upgrade::{
    StreamType, HEADER_PORT, HEADER_REQUEST_ID, HEADER_STREAM_TYPE, PORT_FORWARD_PROTOCOL,
};
use dockerlet_streaming::websocket::{self, Incoming};

use futures::stream::FuturesUnordered;
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::streams::{self, tunnel};
use super::KubeletApi;
use crate::error::ApiError;

/// How long the second stream of a pair may take to arrive (kubelet's streamCreationTimeout).
pub const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Bytes read from the pod's socket at once.
const CHUNK: usize = 32 * 1024;

/// The query parameter naming the ports of a WebSocket port-forward (`api.PortHeader`).
const PORT_PARAM: &str = "port";

/// Why a WebSocket port-forward's query names no ports, in kubelet's words (answered 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortQueryError {
    /// No `port` parameter.
    #[error("query parameter {PORT_PARAM:?} is required")]
    Missing,
    /// A `port` parameter with no value.
    #[error("query parameter {PORT_PARAM:?} cannot be empty")]
    Empty,
    /// A value that is not a list of 16-bit numbers.
    #[error("unable to parse {value:?} as a port: {source}")]
    NotAPort {
        /// The parameter's value.
        value: String,
        /// Why, in Go's `strconv` words.
        #[source]
        source: ParseUintError,
    },
    /// Port 0.
    #[error("port {0:?} must be > 0")]
    Zero(String),
}

/// Go's `strconv.ParseUint(p, 10, 16)` errors, with its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseUintError {
    /// Not decimal digits.
    #[error("strconv.ParseUint: parsing {0:?}: invalid syntax")]
    InvalidSyntax(String),
    /// Over 65535.
    #[error("strconv.ParseUint: parsing {0:?}: value out of range")]
    OutOfRange(String),
}

/// The ports a WebSocket port-forward asks for (kubelet's `NewV4Options`): every `port` value,
/// each a comma-separated list; the error is kubelet's message (answered 400).
pub fn ports_from_query(query: &str) -> Result<Vec<u16>, PortQueryError> {
    let values: Vec<String> = url_pairs(query)
        .filter(|(k, _)| k == PORT_PARAM)
        .map(|(_, v)| v)
        .collect();
    if values.is_empty() {
        return Err(PortQueryError::Missing);
    }
    let mut ports = Vec::new();
    for value in values {
        if value.is_empty() {
            return Err(PortQueryError::Empty);
        }
        for p in value.split(',') {
            let port = parse_u16(p).map_err(|source| PortQueryError::NotAPort {
                value: value.clone(),
                source,
            })?;
            if port < 1 {
                return Err(PortQueryError::Zero(value));
            }
            ports.push(port);
        }
    }
    Ok(ports)
}

/// Go's `strconv.ParseUint(p, 10, 16)`, with its error text.
fn parse_u16(p: &str) -> Result<u16, ParseUintError> {
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseUintError::InvalidSyntax(p.to_string()));
    }
    p.parse::<u16>().map_err(|_| ParseUintError::OutOfRange(p.to_string()))
}

/// `key=value` pairs of a query string, percent-decoded.
fn url_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').filter(|kv| !kv.is_empty()).map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (decode(k), decode(v))
    })
}

/// `+` is a space, `%XY` the byte 0xXY; a `%` not followed by two hex digits stays as it is.
/// The escape's digits are read as bytes: after a `%` may come any character, a multi-byte one
/// included (slicing the text there panicked; found by the `kubelet_query` fuzz target).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let hex = |b: u8| char::from(b).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push((high * 16 + low) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What a port-forward failure says on the error stream or channel (kubelet's
/// `error forwarding port %d to pod %s, uid %v: %v`; the CRI streaming server names the pod by
/// its sandbox and has no UID).
pub fn forward_error(port: u16, sandbox: &ContainerId, why: &dyn std::fmt::Display) -> String {
    format!("error forwarding port {port} to pod {}, uid : {why}", sandbox.0)
}

/// One stream of a pair, as [`Pairs`] needs it: the SPDY stream's id and headers, and the
/// stream itself (any type, so the pairing is tested without a connection).
#[derive(Debug)]
pub struct Arrived<S> {
    /// The stream's id (pairs old clients' streams without `requestID`).
    pub id: u32,
    /// `streamType`.
    pub stream_type: Option<String>,
    /// `port`.
    pub port: Option<String>,
    /// `requestID`.
    pub request_id: Option<String>,
    /// The stream.
    pub stream: S,
}

/// A complete pair: forward `port` over `data`, report on `error`.
#[derive(Debug)]
pub struct Pair<S> {
    /// The request it belongs to.
    pub request_id: String,
    /// The data stream's `port` header (0 when unparsable: the connection then fails).
    pub port: u16,
    /// The data stream.
    pub data: S,
    /// The error stream.
    pub error: S,
}

/// What adding a stream did.
#[derive(Debug)]
pub enum Added<S> {
    /// The first of its pair: waiting for the other (until [`STREAM_CREATION_TIMEOUT`]).
    Waiting(String),
    /// The pair is complete.
    Complete(Pair<S>),
    /// Refused (kubelet's `error processing stream for request …`): the message goes on the
    /// pair's error stream if it has one; every stream given back is to be closed.
    Refused {
        /// What to write on `error`.
        message: String,
        /// The pair's error stream, if it has one.
        error: Option<S>,
        /// Streams to close.
        close: Vec<S>,
    },
}

/// A pair in the making: its error stream, and its data stream with the port.
type Half<S> = (Option<S>, Option<(S, u16)>);

/// The streams waiting for their pair, by request ID (kubelet's `httpStreamHandler`).
#[derive(Debug)]
pub struct Pairs<S> {
    pending: HashMap<String, Half<S>>,
}

impl<S> Default for Pairs<S> {
    fn default() -> Self {
        Pairs {
            pending: HashMap::new(),
        }
    }
}

impl<S> Pairs<S> {
    /// The request ID of a stream: its `requestID`, or for old clients the id of the pair's
    /// error stream (the error stream is opened first, the data stream next: ids `n` and `n+2`).
    pub fn request_id(arrived: &Arrived<S>) -> String {
        if let Some(id) = arrived.request_id.as_deref().filter(|id| !id.is_empty()) {
            return id.to_string();
        }
        match arrived.stream_type.as_deref() {
            Some("error") => arrived.id.to_string(),
            Some("data") => arrived.id.saturating_sub(2).to_string(),
            _ => String::new(),
        }
    }

    /// Add a stream the client opened.
    pub fn add(&mut self, arrived: Arrived<S>) -> Added<S> {
        let request_id = Self::request_id(&arrived);
        let kind = arrived.stream_type.as_deref().and_then(StreamType::from_name);
        let entry = self.pending.entry(request_id.clone()).or_default();
        let problem = match kind {
            Some(StreamType::Error) if entry.0.is_none() => {
                entry.0 = Some(arrived.stream);
                None
            }
            Some(StreamType::Data) if entry.1.is_none() => {
                let port = arrived.port.as_deref().and_then(|p| p.parse::<u16>().ok()).unwrap_or(0);
                entry.1 = Some((arrived.stream, port));
                None
            }
            Some(StreamType::Error) => Some(("error stream already assigned".to_string(), arrived.stream)),
            Some(StreamType::Data) => Some(("data stream already assigned".to_string(), arrived.stream)),
            _ => Some((
                format!(
                    "invalid stream type {:?}",
                    arrived.stream_type.as_deref().unwrap_or_default()
                ),
                arrived.stream,
            )),
        };
        if let Some((problem, stream)) = problem {
            // kubelet drops the pair and reports on its error stream.
            let (error, data) = self.pending.remove(&request_id).unwrap_or_default();
            let mut close = vec![stream];
            close.extend(data.map(|(s, _)| s));
            return Added::Refused {
                message: format!("error processing stream for request {request_id}: {problem}"),
                error,
                close,
            };
        }
        if let Some((Some(_), Some(_))) = self.pending.get(&request_id) {
            if let Some((Some(error), Some((data, port)))) = self.pending.remove(&request_id) {
                return Added::Complete(Pair {
                    request_id,
                    port,
                    data,
                    error,
                });
            }
        }
        Added::Waiting(request_id)
    }

    /// The pair `request_id` timed out waiting for its second stream: kubelet's message and the
    /// streams to close (none if it completed meanwhile).
    pub fn expire(&mut self, request_id: &str) -> Option<(String, Option<S>, Vec<S>)> {
        let (error, data) = self.pending.remove(request_id)?;
        Some((
            format!("(conn=?, request={request_id}) timed out waiting for streams"),
            error,
            data.into_iter().map(|(s, _)| s).collect(),
        ))
    }

    /// Requests waiting for a stream.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }
}

/// Path of `/portForward/{namespace}/{pod}[/{uid}]`.
#[derive(Debug, serde::Deserialize)]
pub struct PortForwardPath {
    namespace: String,
    pod: String,
    uid: Option<String>,
}

/// `GET|POST /portForward/{namespace}/{pod}[/{uid}]`.
pub async fn port_forward(
    req: HttpRequest,
    payload: web::Payload,
    path: web::Path<PortForwardPath>,
    api: web::Data<KubeletApi>,
) -> Result<HttpResponse, ApiError> {
    let path = path.into_inner();
    let websocket = streams::is_websocket(&req);
    let ports = if websocket && tunnel::tunnelled_protocol(&req, &[PORT_FORWARD_PROTOCOL]).is_none() {
        Some(ports_from_query(req.query_string()).map_err(|e| ApiError::BadRequest(e.to_string()))?)
    } else {
        None
    };
    let Some(pod) = super::find_pod(&api, &path.namespace, &path.pod).await? else {
        return Err(ApiError::NotFound("pod does not exist".to_string()));
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    if path.uid.as_deref().is_some_and(|u| !u.is_empty() && u != uid) {
        return Err(ApiError::NotFound("pod not found".to_string()));
    }
    let sandbox = api
        .handles
        .sandbox
        .send(GetPodSandbox {
            uid: PodUid(uid.clone()),
        })
        .await
        .map_err(|e| ApiError::ActorUnavailable {
            actor: "supervisor",
            reason: e.to_string(),
        })?
        .ok_or_else(|| ApiError::Internal {
            reason: format!(
                "failed to find sandboxID for pod {}_{}({uid})",
                path.pod, path.namespace
            ),
        })?;
    let span = tracing::info_span!(
        "port_forward",
        pod.namespace = %path.namespace,
        pod.name = %path.pod,
        pod.uid = %uid
    );
    let target = Target {
        forwarder: api.port_forward.clone(),
        sandbox,
        span,
    };
    if let Some(refused) = streams::upgrade_required(&req) {
        return Ok(refused);
    }
    if let Some(ports) = ports {
        let accepted = match streams::ws::accept(&req, payload, true, api.stream_idle_timeout) {
            Ok(a) => a,
            Err(refusal) => return Ok(actix_web::ResponseError::error_response(&refusal)),
        };
        actix_web::rt::spawn(serve_websocket(target, ports, accepted.sender, accepted.receiver));
        return Ok(accepted.response);
    }
    if websocket {
        let (response, connection) = match tunnel::accept(&req, payload, PORT_FORWARD_PROTOCOL, api.stream_idle_timeout)
        {
            Ok(accepted) => accepted,
            Err(refusal) => return Ok(actix_web::ResponseError::error_response(&refusal)),
        };
        actix_web::rt::spawn(serve_spdy(target, connection));
        return Ok(response);
    }
    let upgraded = match streams::spdy::upgrade(&req, payload, &[PORT_FORWARD_PROTOCOL], api.stream_idle_timeout) {
        Ok(u) => u,
        Err(refusal) => return Ok(actix_web::ResponseError::error_response(&refusal)),
    };
    actix_web::rt::spawn(serve_spdy(target, upgraded.connection));
    Ok(upgraded.response)
}

/// Where connections go.
#[derive(Clone)]
struct Target {
    forwarder: Arc<dyn PortForward>,
    sandbox: ContainerId,
    span: tracing::Span,
}

impl Target {
    /// A connection to `port` in the pod; the error is kubelet's text ([`forward_error`]), which
    /// goes to the client's error stream as it is: a `String`, as the bytes it sends.
    async fn connect(&self, port: u16) -> Result<TcpStream, String> {
        self.forwarder
            .connect(&self.sandbox, port)
            .await
            .map_err(|e| forward_error(port, &self.sandbox, &e))
    }
}

/// Serve a SPDY port-forward connection: pair the client's streams, forward each pair.
async fn serve_spdy(target: Target, mut connection: Connection) {
    let mut pairs: Pairs<SpdyStream> = Pairs::default();
    let mut timeouts = FuturesUnordered::new();
    let mut forwards = FuturesUnordered::new();
    loop {
        tokio::select! {
            stream = connection.accept() => {
                let Some(stream) = stream else { break };
                let arrived = Arrived {
                    id: stream.id,
                    stream_type: header(&stream.headers, HEADER_STREAM_TYPE).map(str::to_string),
                    port: header(&stream.headers, HEADER_PORT).map(str::to_string),
                    request_id: header(&stream.headers, HEADER_REQUEST_ID).map(str::to_string),
                    stream,
                };
                match pairs.add(arrived) {
                    Added::Waiting(id) => timeouts.push(async move {
                        tokio::time::sleep(STREAM_CREATION_TIMEOUT).await;
                        id
                    }),
                    Added::Complete(pair) => {
                        tracing::debug!(parent: &target.span, port = pair.port, request = %pair.request_id, "port-forward stream pair");
                        forwards.push(actix_web::rt::spawn(forward_pair(target.clone(), pair)));
                    }
                    Added::Refused { message, error, close } => {
                        tracing::warn!(parent: &target.span, %message, "port-forward stream refused");
                        refuse(&message, error, close).await;
                    }
                }
            }
            Some(id) = timeouts.next(), if !timeouts.is_empty() => {
                if let Some((message, error, close)) = pairs.expire(&id) {
                    tracing::warn!(parent: &target.span, %message, "port-forward stream pair incomplete");
                    refuse(&message, error, close).await;
                }
            }
            Some(_) = forwards.next(), if !forwards.is_empty() => {}
        }
    }
    // The client went away: the connections in flight end with it (their readers end).
    while forwards.next().await.is_some() {}
}

async fn refuse(message: &str, error: Option<SpdyStream>, close: Vec<SpdyStream>) {
    if let Some(mut error) = error {
        let _ = error.writer.write(Bytes::from(message.to_string())).await;
        let _ = error.writer.finish().await;
    }
    for mut s in close {
        let _ = s.writer.reset(dockerlet_streaming::spdy::frame::rst::CANCEL).await;
    }
}

/// One connection: dial inside the pod, then copy both ways until the pod closes or the client
/// resets; the client's FIN half-closes the pod's socket. A failure goes on the error stream.
async fn forward_pair(target: Target, pair: Pair<SpdyStream>) {
    let Pair { port, data, error, .. } = pair;
    let (mut data, mut error) = (data, error);
    match target.connect(port).await {
        Err(message) => {
            tracing::info!(parent: &target.span, port, error = %message, "port-forward connection failed");
            let _ = error.writer.write(Bytes::from(message)).await;
        }
        Ok(socket) => {
            let (mut from_pod, mut to_pod) = socket.into_split();
            let mut writer = data.writer.clone();
            let up = async move {
                let mut buf = vec![0u8; CHUNK];
                loop {
                    match from_pod.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if writer.write(Bytes::copy_from_slice(&buf[..n])).await.is_err() {
                                break;
                            }
                        }
                    }
                }
            };
            let reader = &mut data.reader;
            let down = async move {
                while let Some(chunk) = reader.next().await {
                    match chunk {
                        Ok(bytes) => {
                            if to_pod.write_all(&bytes).await.is_err() {
                                return false;
                            }
                        }
                        // Reset or connection gone: stop at once.
                        Err(StreamError::Reset { .. } | StreamError::ConnectionClosed) => return false,
                    }
                }
                // The client's FIN: no more data for the pod.
                let _ = to_pod.shutdown().await;
                true
            };
            tokio::pin!(up, down);
            tokio::select! {
                () = &mut up => {}
                finished = &mut down => if finished { up.await },
            }
        }
    }
    let _ = data.writer.finish().await;
    let _ = error.writer.finish().await;
}

/// Serve a WebSocket port-forward: one connection per requested port, on channels `2i` and
/// `2i+1`; done when every connection ended or the client closed the WebSocket.
async fn serve_websocket(
    target: Target,
    ports: Vec<u16>,
    sender: streams::ws::Sender,
    mut receiver: streams::ws::Receiver,
) {
    let mut inputs = Vec::new();
    let mut forwards = FuturesUnordered::new();
    for (index, port) in ports.iter().copied().enumerate() {
        let Some((data_channel, error_channel)) = websocket::port_forward_channels(index) else {
            break;
        };
        let (tx, rx) = mpsc::channel::<Bytes>(8);
        inputs.push(Some(tx));
        let mut sender = sender.clone();
        let target = target.clone();
        forwards.push(actix_web::rt::spawn(async move {
            // Each channel opens with its port, two bytes little-endian (`port_prefix`).
            for channel in [data_channel, error_channel] {
                if sender.send(channel, &port.to_le_bytes()).await.is_err() {
                    return;
                }
            }
            forward_channel(target, port, data_channel, error_channel, sender, rx).await;
        }));
    }
    loop {
        tokio::select! {
            message = receiver.recv() => match message {
                Some(Ok(Incoming::Data { channel, data })) if channel % 2 == 0 => {
                    let index = usize::from(channel / 2);
                    if let Some(Some(tx)) = inputs.get(index) {
                        if tx.send(data).await.is_err() {
                            inputs[index] = None;
                        }
                    }
                }
                Some(Ok(Incoming::Close { channel })) if channel % 2 == 0 => {
                    if let Some(slot) = inputs.get_mut(usize::from(channel / 2)) {
                        *slot = None;
                    }
                }
                // Writes on an error channel, and empty messages: nothing to do.
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::info!(parent: &target.span, error = %e, "port-forward WebSocket protocol error");
                    break;
                }
                None => break,
            },
            next = forwards.next() => if next.is_none() { break },
        }
    }
    drop(inputs);
    for forward in forwards.iter() {
        forward.abort();
    }
    sender.close().await;
}

/// One port of a WebSocket port-forward.
async fn forward_channel(
    target: Target,
    port: u16,
    data_channel: u8,
    error_channel: u8,
    mut sender: streams::ws::Sender,
    mut input: mpsc::Receiver<Bytes>,
) {
    let socket = match target.connect(port).await {
        Ok(s) => s,
        Err(message) => {
            tracing::info!(parent: &target.span, port, error = %message, "port-forward connection failed");
            let _ = sender.send(error_channel, message.as_bytes()).await;
            return;
        }
    };
    let (mut from_pod, mut to_pod) = socket.into_split();
    let up = async {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match from_pod.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if sender.send(data_channel, &buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
    };
    let down = async {
        while let Some(bytes) = input.recv().await {
            if to_pod.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to_pod.shutdown().await;
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

#[cfg(test)]
pub(crate) mod tests;
