//! kube-apiserver's `TunnelingHandler` (`staging/src/k8s.io/apiserver/pkg/util/proxy/
//! streamtunnel.go`; chosen by `NewTranslatingHandler` in `pkg/registry/core/pod/rest/
//! subresources.go` for a port-forward WebSocket offering `SPDY/3.1+…k8s.io`): kubectl ≥ 1.31
//! port-forward sends SPDY inside binary WebSocket messages; the API server asks the kubelet for
//! a plain SPDY upgrade (`createSPDYRequest`: `POST`, the WebSocket headers removed,
//! `Upgrade: SPDY/3.1`, one `X-Stream-Protocol-Version` per tunnelled protocol), answers the
//! client's WebSocket with `SPDY/3.1+<the kubelet's choice>` only once the kubelet switched, and
//! then carries bytes: each WebSocket message's payload to the kubelet, each chunk from the
//! kubelet as one binary message (client-go's `TunnelingConnection`). The kubelet sees SPDY.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use dockerlet_streaming::upgrade::{HEADER_PROTOCOL_VERSION, SPDY_31};
use futures::StreamExt;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::client::{debug_log, kubelet_request, Target};
use crate::http::Shared;

/// client-go's `WebsocketsSPDYTunnelingPrefix`.
const PREFIX: &str = "SPDY/3.1+";
/// client-go's `KubernetesSuffix`.
const SUFFIX: &str = ".k8s.io";
/// The largest WebSocket message taken from the client (a SPDY frame of kubectl's is far less).
const MAX_MESSAGE: usize = 1024 * 1024;

fn tunnelling(protocol: &str) -> bool {
    protocol.starts_with(PREFIX) && protocol.ends_with(SUFFIX)
}

/// `wsstream.IsWebSocketRequestWithTunnelingProtocol`: a WebSocket upgrade whose first
/// `Sec-WebSocket-Protocol` header offers a `SPDY/3.1+…k8s.io` protocol.
pub fn wants_tunnel(req: &HttpRequest) -> bool {
    super::is_websocket(req)
        && req
            .headers()
            .get("Sec-WebSocket-Protocol")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|p| tunnelling(p.trim())))
}

/// `spdyProtocolsFromWebsocketProtocols`: every offered tunnelling protocol (all
/// `Sec-WebSocket-Protocol` headers, as gorilla's `Subprotocols`), the prefix removed.
pub fn spdy_protocols(req: &HttpRequest) -> Vec<String> {
    req.headers()
        .get_all("Sec-WebSocket-Protocol")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| tunnelling(p))
        .map(|p| p[PREFIX.len()..].to_string())
        .collect()
}

/// Go's `http.Error`: plain text with a newline.
fn plain(status: StatusCode, text: &str) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/plain; charset=utf-8")
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .body(format!("{text}\n"))
}

/// The request towards the kubelet (`createSPDYRequest`, then the upgrade-aware proxy's
/// `X-Forwarded-For`): the client's headers without the WebSocket ones.
fn spdy_headers(req: &HttpRequest, protocols: &[String]) -> Vec<(String, Vec<u8>)> {
    let mut headers: Vec<(String, Vec<u8>)> = req
        .headers()
        .iter()
        .filter(|(n, _)| {
            !matches!(
                n.as_str(),
                "sec-websocket-protocol" | "sec-websocket-key" | "sec-websocket-version" | "sec-websocket-extensions"
            ) && n.as_str() != "upgrade"
                && !n.as_str().eq_ignore_ascii_case(HEADER_PROTOCOL_VERSION)
        })
        .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
        .collect();
    headers.push(("Upgrade".to_string(), SPDY_31.as_bytes().to_vec()));
    for p in protocols {
        headers.push((HEADER_PROTOCOL_VERSION.to_string(), p.as_bytes().to_vec()));
    }
    if let Some(peer) = req.peer_addr() {
        headers.push(("X-Forwarded-For".to_string(), peer.ip().to_string().into_bytes()));
    }
    headers
}

/// Ask the kubelet for SPDY and tunnel it through the client's WebSocket.
pub async fn serve(
    shared: web::Data<Shared>,
    target: Target,
    req: &HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let protocols = spdy_protocols(req);
    if protocols.is_empty() {
        return plain(
            StatusCode::BAD_REQUEST,
            "unable to upgrade: no tunneling spdy protocols provided",
        );
    }
    let headers = spdy_headers(req, &protocols);
    let mut response = match kubelet_request(&shared, &target, "POST", &headers, true, Bytes::new()).await {
        Ok(r) => r,
        Err(e) => return super::proxy_error(&format!("error dialing backend: {e}")),
    };
    let status = response.status().as_u16();
    if status != 101 {
        if status < 400 {
            return super::proxy_error(&format!("invalid upgrade response: status code {status}"));
        }
        return super::passed_on(response).await;
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    if !header("connection").contains("upgrade") || !header("upgrade").contains(&SPDY_31.to_ascii_lowercase()) {
        return plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "unable to upgrade: missing upgrade headers in response",
        );
    }
    let chosen = response
        .headers()
        .get(HEADER_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| format!("{PREFIX}{p}"));
    let offer: Vec<&str> = chosen.iter().map(String::as_str).collect();
    let (accepted, session, incoming) = match actix_ws::handle_with_protocols(req, payload, &offer) {
        Ok(a) => a,
        Err(e) => return e.error_response(),
    };
    let kubelet = match hyper::upgrade::on(&mut response).await {
        Ok(io) => TokioIo::new(io),
        Err(e) => {
            debug_log(&format!("tunnel: kubelet upgrade: {e}"));
            let _ = session.close(None).await;
            return accepted;
        }
    };
    actix_web::rt::spawn(carry(kubelet, session, incoming));
    accepted
}

/// Bytes both ways until either side ends; then both are closed.
async fn carry<IO>(kubelet: IO, session: actix_ws::Session, incoming: actix_ws::MessageStream)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut from_kubelet, mut to_kubelet) = tokio::io::split(kubelet);
    let mut incoming = incoming
        .max_frame_size(MAX_MESSAGE)
        .aggregate_continuations()
        .max_continuation_size(MAX_MESSAGE);
    let mut pong = session.clone();
    let upstream = async {
        while let Some(Ok(message)) = incoming.next().await {
            match message {
                actix_ws::AggregatedMessage::Binary(b) => {
                    if to_kubelet.write_all(&b).await.is_err() {
                        break;
                    }
                }
                actix_ws::AggregatedMessage::Ping(p) => {
                    let _ = pong.pong(&p).await;
                }
                // `TunnelingConnection.Read`: any other message ends the tunnel.
                actix_ws::AggregatedMessage::Text(_) | actix_ws::AggregatedMessage::Close(_) => break,
                actix_ws::AggregatedMessage::Pong(_) => {}
            }
        }
        let _ = to_kubelet.shutdown().await;
    };
    let mut out = session.clone();
    let downstream = async {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match from_kubelet.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if out.binary(buf[..n].to_vec()).await.is_err() {
                        break;
                    }
                }
            }
        }
    };
    tokio::select! {
        () = upstream => debug_log("tunnel: the client is done"),
        () = downstream => debug_log("tunnel: the kubelet is done"),
    }
    // `TunnelingConnection.Close`: a normal closure.
    let _ = session.close(Some(actix_ws::CloseCode::Normal.into())).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    /// Only `SPDY/3.1+…k8s.io` offers tunnel; the prefix is removed, the order kept.
    #[test]
    fn tunnelled_protocols_are_read_as_upstream() {
        let req = TestRequest::get()
            .insert_header(("Upgrade", "websocket"))
            .insert_header(("Connection", "Upgrade"))
            .insert_header((
                "Sec-WebSocket-Protocol",
                "SPDY/3.1+portforward.k8s.io, v4.channel.k8s.io, SPDY/3.1+other.example",
            ))
            .to_http_request();
        assert!(wants_tunnel(&req));
        assert_eq!(spdy_protocols(&req), ["portforward.k8s.io"]);
        let plain_ws = TestRequest::get()
            .insert_header(("Upgrade", "websocket"))
            .insert_header(("Connection", "Upgrade"))
            .insert_header(("Sec-WebSocket-Protocol", "portforward.k8s.io"))
            .to_http_request();
        assert!(!wants_tunnel(&plain_ws));
    }
}
