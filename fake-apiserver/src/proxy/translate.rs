//! kube-apiserver's `StreamTranslatorHandler` (`staging/src/k8s.io/apiserver/pkg/util/proxy/
//! streamtranslator.go`, `websocket.go`; chosen by `NewTranslatingHandler` in
//! `pkg/registry/core/pod/rest/subresources.go` when the client offers `v5.channel.k8s.io`):
//! the client's WebSocket is answered by the API server itself, and the kubelet is reached as
//! client-go's SPDY executor reaches it. That is what kubectl ≥ 1.30 exec and attach meet on a
//! real cluster: the kubelet sees SPDY, never the client's WebSocket.
//!
//! - WebSocket side (`v5.channel.k8s.io` only): an empty message on the lowest channel it
//!   writes (stdout, else stderr, else error) once open; channel 0 is stdin, 255 + 0 closes it;
//!   channel 4 carries terminal sizes; the kubelet's stdout and stderr go out on 1 and 2.
//! - SPDY side: `POST` the kubelet URL offering `v5`…`channel.k8s.io` (client-go's
//!   `NewSPDYExecutorForTransports`), then the `error`, `stdin`, `stdout`, `stderr` (not with a
//!   TTY) and `resize` (TTY, v3 on) streams, as `createStreams` opens them.
//! - The end (`finish`): the outcome as a `Status` on channel 3 — the kubelet's success, a
//!   non-zero exit re-worded as `codeExitToStatusError` words it, any other failure wrapped as
//!   `NewInternalError` wraps it — then the close frame, and a wait for the client to close.

use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use dockerlet_streaming::spdy::{self, FlowControl, Role, SessionConfig, StreamWriter};
use dockerlet_streaming::status::ResizeDecoder;
use dockerlet_streaming::upgrade::{RemoteCommandProtocol, HEADER_PROTOCOL_VERSION, REMOTE_COMMAND_PROTOCOLS, SPDY_31};
use dockerlet_streaming::websocket::{CLOSE, ERROR, RESIZE, STDERR, STDIN, STDOUT};
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::client::{debug_log, kubelet_request, Target};
use super::location::StreamOptions;
use crate::http::Shared;

/// The one subprotocol the translator speaks.
pub const V5: &str = "v5.channel.k8s.io";

/// How long the client has to close the WebSocket after the status (`finishTimeout`).
const FINISH_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The largest WebSocket message taken from the client.
const MAX_MESSAGE: usize = 1024 * 1024;

/// `wsstream.IsWebSocketRequestWithStreamCloseProtocol`: a WebSocket upgrade whose first
/// `Sec-WebSocket-Protocol` header lists `v5.channel.k8s.io`.
pub fn wants_translation(req: &HttpRequest) -> bool {
    super::is_websocket(req)
        && req
            .headers()
            .get("Sec-WebSocket-Protocol")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|p| p.trim() == V5))
}

/// Accept the WebSocket and run the translation in the background; the 101 (or the refusal).
pub fn serve(
    shared: web::Data<Shared>,
    target: Target,
    opts: StreamOptions,
    req: &HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let (response, session, incoming) = match actix_ws::handle_with_protocols(req, payload, &[V5]) {
        Ok(accepted) => accepted,
        Err(e) => return e.error_response(),
    };
    let incoming = incoming
        .max_frame_size(MAX_MESSAGE)
        .aggregate_continuations()
        .max_continuation_size(MAX_MESSAGE);
    actix_web::rt::spawn(translate(shared, target, opts, session, incoming));
    response
}

/// What the client sent, sorted by channel.
enum FromClient {
    Stdin(Bytes),
    CloseStdin,
    Resize(Bytes),
}

async fn translate(
    shared: web::Data<Shared>,
    target: Target,
    opts: StreamOptions,
    mut ws: actix_ws::Session,
    mut incoming: actix_ws::AggregatedMessageStream,
) {
    // `createWebSocketStreams`: tell the client the connection is up.
    let first = if opts.stdout {
        STDOUT
    } else if opts.stderr {
        STDERR
    } else {
        ERROR
    };
    if ws.binary(vec![first]).await.is_err() {
        return;
    }
    // The client's messages, read until it closes; `gone` fires then.
    let (mut to_spdy, from_client) = mpsc::channel::<FromClient>(8);
    let (gone_tx, mut gone) = futures::channel::oneshot::channel::<()>();
    let pong = ws.clone();
    actix_web::rt::spawn(async move {
        let mut pong = pong;
        while let Some(Ok(message)) = incoming.next().await {
            // wsstream takes a frame's bytes whatever its kind (the Python client writes text).
            let data = match message {
                actix_ws::AggregatedMessage::Binary(b) => b,
                actix_ws::AggregatedMessage::Text(t) => t.into_bytes(),
                actix_ws::AggregatedMessage::Ping(p) => {
                    let _ = pong.pong(&p).await;
                    continue;
                }
                actix_ws::AggregatedMessage::Pong(_) => continue,
                actix_ws::AggregatedMessage::Close(_) => break,
            };
            let item = match data.first() {
                Some(&CLOSE) if data.len() == 2 => (data[1] == STDIN).then_some(FromClient::CloseStdin),
                Some(&STDIN) => Some(FromClient::Stdin(data.slice(1..))),
                Some(&RESIZE) => Some(FromClient::Resize(data.slice(1..))),
                _ => None,
            };
            if let Some(item) = item {
                // The session is over: what the client still sends is dropped.
                let _ = to_spdy.send(item).await;
            }
        }
        let _ = gone_tx.send(());
    });
    let status = tokio::select! {
        status = exec_over_spdy(&shared, &target, &opts, from_client, ws.clone()) => status,
        // A client that goes away ends the SPDY connection with it (the request's context).
        _ = &mut gone => {
            debug_log("stream translator: the client went away");
            return;
        }
    };
    // `finish`: the status on the error channel, the close frame, then the client's close.
    let mut message = vec![ERROR];
    message.extend_from_slice(&serde_json::to_vec(&status).unwrap_or_default());
    let _ = ws.binary(message).await;
    // A normal closure: client-go reads its error channel to that end (another code is an
    // error: `next reader: websocket: close 1005 (no status)`).
    let _ = ws.close(Some(actix_ws::CloseCode::Normal.into())).await;
    let _ = tokio::time::timeout(FINISH_TIMEOUT, gone).await;
}

/// `metav1.Status` as Go's `json.Marshal` writes it (empty fields left out).
fn success() -> Value {
    json!({"metadata": {}, "status": "Success"})
}

/// `apierrors.NewInternalError(err)`.
pub(crate) fn internal_error(err: &str) -> Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("Internal error occurred: {err}"),
        "reason": "InternalError",
        "details": {"causes": [{"message": err}]},
        "code": 500,
    })
}

/// `codeExitToStatusError` of the `CodeExitError` the v4 error decoder made.
fn exit_code(code: u8) -> Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("command terminated with non-zero exit code: command terminated with exit code {code}"),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

/// client-go's error decoders (`errorDecoderV4`, `errorDecoderV1`) on what the kubelet wrote
/// on the error stream, then the translator's wording of the result.
pub(crate) fn decode_error_stream(protocol: RemoteCommandProtocol, message: &[u8]) -> Value {
    if message.is_empty() {
        return success();
    }
    let text = String::from_utf8_lossy(message);
    if !protocol.status_is_json() {
        return internal_error(&format!("error executing remote command: {text}"));
    }
    let status: Value = match serde_json::from_slice(message) {
        Ok(v) => v,
        Err(e) => return internal_error(&format!("error stream protocol error: {e} in {text:?}")),
    };
    match status["status"].as_str() {
        Some("Success") => success(),
        Some("Failure") if status["reason"] == "NonZeroExitCode" => {
            let causes = status["details"]["causes"].as_array();
            let Some(causes) = causes else {
                return internal_error("error stream protocol error: details must be set");
            };
            match causes.iter().find(|c| c["reason"] == "ExitCode") {
                Some(cause) => {
                    let value = cause["message"].as_str().unwrap_or_default();
                    match value.parse::<u8>() {
                        Ok(code) => exit_code(code),
                        Err(_) => internal_error(&format!(
                            "error stream protocol error: invalid exit code value {value:?}"
                        )),
                    }
                }
                None => internal_error("error stream protocol error: no ExitCode cause given"),
            }
        }
        Some("Failure") => internal_error(status["message"].as_str().unwrap_or_default()),
        _ => internal_error("error stream protocol error: unknown error"),
    }
}

/// The SPDY upgrade refused: the kubelet's `Status` body as it is (client-go makes it a
/// `StatusError`), else `unable to upgrade connection: <body>` as an internal error.
pub(crate) fn upgrade_refused(body: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(body) {
        Ok(status) if status["kind"] == "Status" => status,
        _ => internal_error(&format!(
            "unable to upgrade connection: {}",
            String::from_utf8_lossy(body).trim()
        )),
    }
}

/// Run the command's streams over SPDY to the kubelet; the status to send the client.
async fn exec_over_spdy(
    shared: &Shared,
    target: &Target,
    opts: &StreamOptions,
    mut from_client: mpsc::Receiver<FromClient>,
    ws: actix_ws::Session,
) -> Value {
    let mut headers = vec![
        ("Connection".to_string(), b"Upgrade".to_vec()),
        ("Upgrade".to_string(), SPDY_31.as_bytes().to_vec()),
    ];
    headers.extend(
        REMOTE_COMMAND_PROTOCOLS
            .iter()
            .map(|p| (HEADER_PROTOCOL_VERSION.to_string(), p.as_bytes().to_vec())),
    );
    let mut response = match kubelet_request(shared, target, "POST", &headers, true, Bytes::new()).await {
        Ok(r) => r,
        Err(e) => return internal_error(&format!("Post {:?}: {e}", target.url())),
    };
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    let upgraded = response.status().as_u16() == 101
        && header("connection").contains("upgrade")
        && header("upgrade").contains(&SPDY_31.to_ascii_lowercase());
    if !upgraded {
        let body = match response.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => Bytes::from_static(b"unable to read error from server response"),
        };
        return upgrade_refused(&body);
    }
    let protocol = response
        .headers()
        .get(HEADER_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .and_then(RemoteCommandProtocol::from_name)
        .unwrap_or(RemoteCommandProtocol::V1);
    let io = match hyper::upgrade::on(&mut response).await {
        Ok(io) => TokioIo::new(io),
        Err(e) => return internal_error(&e.to_string()),
    };
    let (read, mut write) = tokio::io::split(io);
    let input = futures::stream::unfold(read, |mut read| async move {
        let mut buf = vec![0u8; 32 * 1024];
        match read.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => Some((Ok(Bytes::copy_from_slice(&buf[..n])), read)),
            Err(e) => Some((Err(e), read)),
        }
    })
    .boxed();
    let config = SessionConfig {
        flow_control: FlowControl::Lenient,
        ..SessionConfig::new(Role::Client)
    };
    let (connection, driver, mut output) = spdy::connect(config, input);
    let _driving = AbortOnDrop(actix_web::rt::spawn(async move {
        let _ = driver.await;
    }));
    let _writing = AbortOnDrop(actix_web::rt::spawn(async move {
        while let Some(bytes) = output.next().await {
            if write.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = write.shutdown().await;
    }));
    run_streams(connection.control(), protocol, opts, &mut from_client, ws).await
}

/// A spawned task that ends with its owner (a dropped translation leaves no connection open).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Open the streams as `createStreams`, pump them, and decode the error stream once stdout
/// and stderr have ended.
async fn run_streams(
    mut control: spdy::Control,
    protocol: RemoteCommandProtocol,
    opts: &StreamOptions,
    from_client: &mut mpsc::Receiver<FromClient>,
    ws: actix_ws::Session,
) -> Value {
    let error = match open(&control, "error").await {
        Ok(s) => s,
        Err(status) => return status,
    };
    let mut wanted = Vec::new();
    for (on, kind) in [
        (opts.stdin, "stdin"),
        (opts.stdout, "stdout"),
        (opts.stderr && !opts.tty, "stderr"),
        (opts.tty && protocol.has_resize(), "resize"),
    ] {
        wanted.push(match on {
            false => None,
            true => match open(&control, kind).await {
                Ok(s) => Some(s),
                Err(status) => return status,
            },
        });
    }
    let [stdin, stdout, stderr, resize]: [Option<spdy::SpdyStream>; 4] =
        wanted.try_into().unwrap_or_else(|_| unreachable!("four streams"));
    let pump_in = pump_client(from_client, stdin.map(|s| s.writer), resize.map(|s| s.writer));
    let outputs = async {
        let out = stdout.map(|s| forward(s.reader, ws.clone(), STDOUT));
        let err = stderr.map(|s| forward(s.reader, ws.clone(), STDERR));
        futures::future::join(
            async {
                if let Some(out) = out {
                    out.await;
                }
            },
            async {
                if let Some(err) = err {
                    err.await;
                }
            },
        )
        .await;
        let mut message = Vec::new();
        let mut reader = error.reader;
        while let Some(chunk) = reader.next().await {
            match chunk {
                Ok(data) => message.extend_from_slice(&data),
                Err(e) => return internal_error(&format!("error reading from error stream: {e}")),
            }
        }
        decode_error_stream(protocol, &message)
    };
    let status = tokio::select! {
        status = outputs => status,
        () = pump_in => futures::future::pending().await,
    };
    let _ = control.close().await;
    status
}

/// Open one stream of `streamType` `kind` (client-go's `CreateStream`).
async fn open(control: &spdy::Control, kind: &'static str) -> Result<spdy::SpdyStream, Value> {
    control
        .clone()
        .open(vec![("streamtype".to_string(), kind.to_string())], false)
        .await
        .map_err(|e| internal_error(&e.to_string()))
}

/// The kubelet's output on one stream to a WebSocket channel, until its FIN.
async fn forward(mut reader: spdy::StreamReader, mut ws: actix_ws::Session, channel: u8) {
    while let Some(Ok(data)) = reader.next().await {
        let mut message = Vec::with_capacity(data.len() + 1);
        message.push(channel);
        message.extend_from_slice(&data);
        if ws.binary(message).await.is_err() {
            return;
        }
    }
}

/// The client's stdin and terminal sizes to the kubelet; never returns before the client is
/// gone (the caller's `select!` ends it with the outputs).
async fn pump_client(
    from_client: &mut mpsc::Receiver<FromClient>,
    mut stdin: Option<StreamWriter>,
    mut resize: Option<StreamWriter>,
) {
    let mut sizes = ResizeDecoder::default();
    while let Some(item) = from_client.next().await {
        match item {
            FromClient::Stdin(data) => {
                if let Some(w) = stdin.as_mut() {
                    if w.write(data).await.is_err() {
                        stdin = None;
                    }
                }
            }
            FromClient::CloseStdin => {
                if let Some(mut w) = stdin.take() {
                    let _ = w.finish().await;
                }
            }
            FromClient::Resize(data) => {
                let Some(w) = resize.as_mut() else { continue };
                match sizes.push(&data) {
                    // client-go's `handleResizes` encodes each size with a JSON encoder.
                    Ok(new) => {
                        for size in new {
                            let mut line = serde_json::to_vec(&size).unwrap_or_default();
                            line.push(b'\n');
                            if w.write(Bytes::from(line)).await.is_err() {
                                resize = None;
                                break;
                            }
                        }
                    }
                    // `handleResizeEvents` stops at the first bad size.
                    Err(_) => resize = None,
                }
            }
        }
    }
    // The client is gone: its stdin ends (wsstream closes every channel's pipe).
    if let Some(mut w) = stdin.take() {
        let _ = w.finish().await;
    }
    futures::future::pending::<()>().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// client-go's v4 error decoder and the translator's re-wording, on what kubelets write.
    #[test]
    fn error_stream_statuses_are_translated_as_upstream() {
        let v4 = RemoteCommandProtocol::V4;
        assert_eq!(decode_error_stream(v4, b""), success());
        assert_eq!(
            decode_error_stream(v4, br#"{"metadata":{},"status":"Success"}"#),
            json!({"metadata": {}, "status": "Success"})
        );
        let exit = br#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
        assert_eq!(
            decode_error_stream(v4, exit),
            json!({
                "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                "message": "command terminated with non-zero exit code: command terminated with exit code 3",
                "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
            })
        );
        let failed = br#"{"metadata":{},"status":"Failure","message":"Internal error occurred: error executing command in container: no such file","reason":"InternalError","code":500}"#;
        assert_eq!(
            decode_error_stream(v4, failed)["message"],
            "Internal error occurred: Internal error occurred: error executing command in container: no such file"
        );
        assert_eq!(
            decode_error_stream(RemoteCommandProtocol::V2, b"it broke")["message"],
            "Internal error occurred: error executing remote command: it broke"
        );
        assert_eq!(decode_error_stream(v4, b"{]")["code"], 500);
    }

    /// A refused SPDY upgrade: a `Status` body is passed on, plain text is wrapped.
    #[test]
    fn refused_upgrades_are_reported_as_client_go_reports_them() {
        assert_eq!(
            upgrade_refused(b"pod does not exist\n")["message"],
            "Internal error occurred: unable to upgrade connection: pod does not exist"
        );
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404});
        assert_eq!(upgrade_refused(status.to_string().as_bytes()), status);
    }
}
