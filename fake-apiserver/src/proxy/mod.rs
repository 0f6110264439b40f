//! Requests the API server passes on to a node's kubelet, as kube-apiserver passes them:
//! `pods/log`, `pods/exec`, `pods/attach`, `pods/portforward` and `nodes/{name}/proxy/{path}`.
//!
//! # Layout
//! - [`location`]: the client's options decoded and the kubelet URL built as kube-apiserver's
//!   `LogLocation`, `ExecLocation`, `AttachLocation`, `PortForwardLocation` build it (the
//!   kubelet's parameter names, not the client's).
//! - [`client`]: the Node's kubelet address and the TLS connection with the API server's kubelet
//!   client certificate.
//! - [`translate`]: exec and attach over WebSocket `v5.channel.k8s.io`, answered here and sent
//!   to the kubelet over SPDY (`StreamTranslatorHandler`).
//! - [`tunnel`]: port-forward's SPDY-in-WebSocket sent to the kubelet as a SPDY upgrade
//!   (`TunnelingHandler`).
//! - Here: routing, the order kube-apiserver checks things in (options, then the pod, then the
//!   container, then the node, then the upgrade), upgrades passed through byte for byte (SPDY,
//!   older WebSocket protocols, `nodes/proxy`), and `pods/log` read as a plain GET
//!   (`LocationStreamer`) with `GenericHttpResponseChecker`'s errors.

mod client;
pub mod location;
mod translate;
mod tunnel;

pub use client::client_config;

use std::net::IpAddr;
use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use self::client::{debug_log, hop_by_hop, kubelet_request, node_target, Target};
use self::location::{LogOptions, PortForwardOptions, Query, StreamOptions};
use super::error::ApiError;
use super::http::Shared;

/// Largest request body passed on (not upgrades: those stream).
const BODY_LIMIT: usize = 4 << 20;

fn is_upgrade(req: &HttpRequest) -> bool {
    req.headers()
        .get_all("Connection")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// `wsstream.IsWebSocketRequest`.
fn is_websocket(req: &HttpRequest) -> bool {
    is_upgrade(req)
        && req
            .headers()
            .get("Upgrade")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// The subprotocols kube-apiserver's `wsstream` reader offers for a log: each chunk one binary
/// message (also with no subprotocol), or one base64 text message.
const LOG_PROTOCOLS: [&str; 2] = ["binary.k8s.io", "base64.binary.k8s.io"];

/// `pods/log` over WebSocket (upstream's "should support retrieving logs from the container
/// over websockets"): as kube-apiserver, the log is read from the kubelet as a plain GET and
/// each chunk written as a message; the socket closes when the log ends. A kubelet error is
/// answered before any upgrade.
async fn log_over_websocket(shared: &Shared, target: Target, req: &HttpRequest, payload: web::Payload) -> HttpResponse {
    let response = match kubelet_request(shared, &target, "GET", &[], false, Bytes::new()).await {
        Ok(r) => r,
        Err(e) => return log_unreachable(&target, e),
    };
    let status = response.status().as_u16();
    if !(200..=206).contains(&status) {
        let text = match response.into_body().collect().await {
            Ok(b) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
            Err(e) => e.to_string(),
        };
        return status_response(&checked_error(status, text));
    }
    let (out, mut session, incoming) = match actix_ws::handle_with_protocols(req, payload, &LOG_PROTOCOLS) {
        Ok(accepted) => accepted,
        Err(e) => return status_response(&ApiError::bad_request(format!("unable to upgrade: {e}"))),
    };
    let base64 = out
        .headers()
        .get("Sec-WebSocket-Protocol")
        .is_some_and(|p| p.as_bytes() == LOG_PROTOCOLS[1].as_bytes());
    // Nothing is read from the client but its close and pings (answered by actix-ws).
    actix_web::rt::spawn(incoming.for_each(|_| std::future::ready(())));
    actix_web::rt::spawn(async move {
        use base64::Engine as _;
        let mut body = http_body_util::BodyStream::new(response.into_body());
        while let Some(frame) = body.next().await {
            let data = match frame.map(|f| f.into_data()) {
                Ok(Ok(data)) if !data.is_empty() => data,
                Ok(_) => continue,
                Err(e) => {
                    debug_log(&format!("log over WebSocket: {e}"));
                    break;
                }
            };
            let sent = if base64 {
                session
                    .text(base64::engine::general_purpose::STANDARD.encode(&data))
                    .await
            } else {
                session.binary(data).await
            };
            if sent.is_err() {
                return;
            }
        }
        let _ = session.close(None).await;
    });
    out
}

fn status_response(err: &ApiError) -> HttpResponse {
    json_response(err.code, &err.status())
}

fn json_response(code: u16, status: &Value) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .content_type("application/json")
        .body(serde_json::to_vec(status).unwrap_or_default())
}

/// What the upgrade-aware proxy's responder writes for an error that is not an API status
/// (`ErrorToAPIStatus`: 500, no reason): a dial failure, a kubelet that did not upgrade.
fn proxy_error(message: &str) -> HttpResponse {
    status_response(&ApiError::unknown(500, message))
}

/// A log request the kubelet did not answer: the `http.Client` error `LocationStreamer` returns.
fn log_unreachable(target: &Target, e: impl std::fmt::Display) -> HttpResponse {
    proxy_error(&format!("Get {:?}: {e}", target.url()))
}

/// The kubelet's own non-upgrade answer to an upgrade request, passed on as it is (the
/// upgrade-aware proxy writes the backend's response to the hijacked connection).
async fn passed_on(response: hyper::Response<hyper::body::Incoming>) -> HttpResponse {
    let mut out =
        HttpResponse::build(StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY));
    for (name, value) in response.headers() {
        if !hop_by_hop(name.as_str()) && name.as_str() != "content-length" {
            out.append_header((name.as_str(), value.as_bytes()));
        }
    }
    let body = response
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    out.body(body)
}

/// `/api/v1/namespaces/{ns}/pods/{name}/{log|exec|attach|portforward}`.
pub async fn pod_subresource(
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    payload: web::Payload,
    shared: web::Data<Shared>,
) -> HttpResponse {
    let (ns, name, sub) = path.into_inner();
    if let Some(refused) = super::http::admit(&shared, &req) {
        return refused;
    }
    let query = Query::parse(req.query_string());
    let method = req.method().as_str();
    let result = match sub.as_str() {
        "log" => return pod_log(&shared, &ns, &name, &query, &req, payload).await,
        "exec" | "attach" | "portforward" if method == "GET" || method == "POST" => {
            connect_target(&shared, &ns, &name, &sub, &query, is_upgrade(&req))
        }
        "exec" | "attach" | "portforward" => Err(not_allowed(method)),
        _ => Err(super::http::not_found_path()),
    };
    let (target, options) = match result {
        Ok(t) => t,
        Err(e) => return status_response(&e),
    };
    match options {
        Some(opts) if translate::wants_translation(&req) => translate::serve(shared, target, opts, &req, payload),
        None if tunnel::wants_tunnel(&req) => tunnel::serve(shared, target, &req, payload).await,
        _ => forward(&shared, target, &req, payload).await,
    }
}

fn not_allowed(method: &str) -> ApiError {
    ApiError::method_not_allowed(format!(
        "the server does not allow this method on the requested resource ({method})"
    ))
}

/// `pods/log`: the options decoded (400) and validated (422), then the pod, its container and
/// its node; the log read from the kubelet (WebSocket clients get it as messages).
async fn pod_log(
    shared: &web::Data<Shared>,
    ns: &str,
    name: &str,
    query: &Query,
    req: &HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    if req.method() != actix_web::http::Method::GET {
        return status_response(&not_allowed(req.method().as_str()));
    }
    let located = LogOptions::decode(query)
        .and_then(|opts| opts.validate(name).map(|()| opts))
        .and_then(|opts| {
            let pods = super::resources::by_name("pods").expect("pods are served");
            let pod = shared.store().get(pods, ns, name)?;
            location::log_location(&pod, &opts)
        })
        .and_then(|loc| loc.map(|l| node_target(shared, &l.node, l.path_and_query)).transpose());
    match located {
        Err(e) => status_response(&e),
        // A pod not yet on a node has no log: kube-apiserver streams nothing.
        Ok(None) => HttpResponse::Ok().content_type("text/plain").finish(),
        Ok(Some(target)) if is_websocket(req) => log_over_websocket(shared, target, req, payload).await,
        Ok(Some(target)) => log_over_http(shared, target).await,
    }
}

/// The log as `LocationStreamer` reads it: a GET of its own (no client headers), a non-2xx
/// turned into a `Status`, the body streamed.
async fn log_over_http(shared: &Shared, target: Target) -> HttpResponse {
    let response = match kubelet_request(shared, &target, "GET", &[], false, Bytes::new()).await {
        Ok(r) => r,
        Err(e) => return log_unreachable(&target, e),
    };
    let status = response.status().as_u16();
    if !(200..=206).contains(&status) {
        let text = match response.into_body().collect().await {
            Ok(b) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
            Err(e) => e.to_string(),
        };
        return status_response(&checked_error(status, text));
    }
    let stream = http_body_util::BodyStream::new(response.into_body()).filter_map(|frame| async move {
        match frame {
            Ok(f) => f.into_data().ok().map(Ok::<_, hyper::Error>),
            Err(e) => Some(Err(e)),
        }
    });
    HttpResponse::Ok().content_type("text/plain").streaming(stream)
}

/// Where `exec`, `attach` or `portforward` of the pod `ns/name` goes, with the exec/attach
/// options (`None` for a port-forward), checked in kube-apiserver's order: the options, the
/// pod, its container, its node, the Node's address, and then that it is an upgrade.
fn connect_target(
    shared: &Shared,
    ns: &str,
    name: &str,
    sub: &str,
    query: &Query,
    upgrade: bool,
) -> Result<(Target, Option<StreamOptions>), ApiError> {
    let pods = super::resources::by_name("pods").expect("pods are served");
    let (location, options) = if sub == "portforward" {
        let opts = PortForwardOptions::decode(query)?;
        let pod = shared.store().get(pods, ns, name)?;
        (location::port_forward_location(&pod, &opts)?, None)
    } else {
        let opts = StreamOptions::decode(query);
        let pod = shared.store().get(pods, ns, name)?;
        (location::stream_location(&pod, sub, &opts)?, Some(opts))
    };
    let target = node_target(shared, &location.node, location.path_and_query)?;
    if !upgrade {
        return Err(ApiError::bad_request("Upgrade request required"));
    }
    Ok((target, options))
}

/// `/api/v1/nodes/{name}/proxy[/{path}]`: the kubelet at the Node's address (refused for a
/// loopback or link-local one), the path appended; an ordinary request keeps its query, an
/// upgrade does not (the upgrade-aware proxy dials its location, which has none).
pub async fn node_proxy(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    payload: web::Payload,
    shared: web::Data<Shared>,
) -> HttpResponse {
    let (node, rest) = path.into_inner();
    if let Some(refused) = super::http::admit(&shared, &req) {
        return refused;
    }
    let upgrade = is_upgrade(&req);
    let rest = rest.strip_prefix('/').unwrap_or(&rest);
    // `proxyRedirectsforRootPath`: no path at all is redirected to the path with a slash.
    if rest.is_empty() && !req.path().ends_with('/') && !upgrade && matches!(req.method().as_str(), "GET" | "HEAD") {
        let query = req.query_string();
        let location = format!("{}/{}{query}", req.path(), if query.is_empty() { "" } else { "?" });
        return HttpResponse::MovedPermanently()
            .insert_header(("Location", location))
            .finish();
    }
    let path_and_query = match (upgrade, req.query_string()) {
        (false, q) if !q.is_empty() => format!("/{rest}?{q}"),
        _ => format!("/{rest}"),
    };
    let target = node_target(&shared, &node, path_and_query).and_then(|t| proxyable(&t.host).map(|()| t));
    match target {
        Ok(target) => forward(&shared, target, &req, payload).await,
        Err(e) => status_response(&e),
    }
}

/// `isProxyableHostname` (`pkg/registry/core/node/strategy.go`): every address of the host
/// must be global unicast (Go's `IP.IsGlobalUnicast`: not loopback, link-local, multicast,
/// unspecified or broadcast); otherwise 400 `address not allowed`.
fn proxyable(host: &str) -> Result<(), ApiError> {
    let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(host, 0))
            .map_err(|e| ApiError::bad_request(e.to_string()))?
            .map(|a| a.ip())
            .collect(),
    };
    if addresses.is_empty() {
        return Err(ApiError::bad_request("no addresses for hostname"));
    }
    let global = |ip: &IpAddr| match ip {
        IpAddr::V4(v4) => {
            !(v4.is_loopback() || v4.is_link_local() || v4.is_multicast() || v4.is_unspecified() || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            !(v6.is_loopback() || v6.is_multicast() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80)
        }
    };
    if addresses.iter().all(global) {
        Ok(())
    } else {
        Err(ApiError::bad_request("address not allowed"))
    }
}

/// Pass a request on: an upgrade gets the kubelet's 101 and then bytes both ways (or the
/// kubelet's refusal as it is); anything else is reverse-proxied (`nodes/proxy`).
async fn forward(shared: &Shared, target: Target, req: &HttpRequest, mut payload: web::Payload) -> HttpResponse {
    let method = req.method().as_str().to_string();
    let upgrade = is_upgrade(req);
    let body = if upgrade {
        Bytes::new()
    } else {
        let mut body = bytes::BytesMut::new();
        while let Some(chunk) = payload.next().await {
            match chunk {
                Ok(c) if body.len() + c.len() <= BODY_LIMIT => body.extend_from_slice(&c),
                Ok(_) => return status_response(&ApiError::with_code(413, "the request body is too large")),
                Err(e) => return status_response(&ApiError::bad_request(e.to_string())),
            }
        }
        body.freeze()
    };
    let mut headers: Vec<(String, Vec<u8>)> = req
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
        .collect();
    if let Some(peer) = req.peer_addr() {
        headers.push(("X-Forwarded-For".to_string(), peer.ip().to_string().into_bytes()));
    }
    let mut response = match kubelet_request(shared, &target, &method, &headers, upgrade, body).await {
        Ok(r) => r,
        // `nodes/proxy` through the proxy transport: 503 `error trying to reach service`.
        Err(e) if !upgrade => {
            return status_response(&ApiError::with_code(503, format!("error trying to reach service: {e}")))
        }
        Err(e) => return proxy_error(&format!("error dialing backend: {e}")),
    };
    let status = response.status().as_u16();
    if upgrade && status != 101 {
        if status < 400 {
            return proxy_error(&format!("invalid upgrade response: status code {status}"));
        }
        return passed_on(response).await;
    }
    if upgrade {
        let mut out = HttpResponse::build(StatusCode::SWITCHING_PROTOCOLS);
        for (name, value) in response.headers() {
            match name.as_str() {
                "connection" => {}
                "upgrade" => {
                    out.upgrade(value.as_bytes().to_vec());
                }
                other => {
                    out.append_header((other, value.as_bytes()));
                }
            }
        }
        let upgraded = match hyper::upgrade::on(&mut response).await {
            Ok(u) => u,
            Err(e) => return proxy_error(&e.to_string()),
        };
        let (from_kubelet, mut to_kubelet) = tokio::io::split(TokioIo::new(upgraded));
        actix_web::rt::spawn(async move {
            while let Some(chunk) = payload.next().await {
                match chunk {
                    Ok(chunk) if to_kubelet.write_all(&chunk).await.is_ok() => {}
                    Ok(_) => return,
                    Err(e) => {
                        debug_log(&format!("upgraded stream from the client: {e}"));
                        break;
                    }
                }
            }
            debug_log("upgraded stream: the client is done");
            let _ = to_kubelet.shutdown().await;
        });
        let stream = futures::stream::unfold((from_kubelet, vec![0u8; 32 * 1024]), |(mut r, mut buf)| async move {
            match r.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    debug_log("upgraded stream: the kubelet is done");
                    None
                }
                Ok(n) => Some((Ok::<_, std::io::Error>(Bytes::copy_from_slice(&buf[..n])), (r, buf))),
            }
        });
        return out.streaming(stream);
    }
    let mut out = HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY));
    for (name, value) in response.headers() {
        if !hop_by_hop(name.as_str()) && name.as_str() != "content-length" {
            out.append_header((name.as_str(), value.as_bytes()));
        }
    }
    let stream = http_body_util::BodyStream::new(response.into_body()).filter_map(|frame| async move {
        match frame {
            Ok(f) => f.into_data().ok().map(Ok::<_, hyper::Error>),
            Err(e) => Some(Err(e)),
        }
    });
    out.streaming(stream)
}

/// kube-apiserver's GenericHttpResponseChecker for `pods/log`.
fn checked_error(code: u16, body: String) -> ApiError {
    match code {
        500 => {
            let mut e = ApiError::internal(format!("Internal error occurred: {body}"));
            e.details = Some(serde_json::json!({"causes": [{"message": body}]}));
            e
        }
        400 => ApiError::bad_request(body),
        404 => {
            let mut e = ApiError::with_code(404, "the server could not find the requested resource ( pods/log)");
            e.details = Some(serde_json::json!({
                "kind": "pods/log",
                "causes": [{"reason": "UnexpectedServerResponse", "message": body}],
            }));
            e
        }
        _ => ApiError::with_code(code, body),
    }
}

/// An upgrade request actix-web cannot stream (only WebSocket upgrades get the connection as
/// their payload), read off the connection by [`super::front`]: authenticated and routed as
/// the actix handlers do, then the kubelet's answer written back raw and, after a 101, bytes
/// copied both ways. `rest` is what the client sent after the head.
pub(crate) async fn raw_upgrade<S>(
    shared: Arc<Shared>,
    head: RawHead,
    rest: Vec<u8>,
    mut client: S,
    certificate: Option<crate::ClientCertificate>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (path, query) = head.target.split_once('?').unwrap_or((head.target.as_str(), ""));
    super::http::record_request(
        &shared,
        super::RecordedRequest {
            method: head.method.clone(),
            path: path.to_string(),
            query: query.to_string(),
            content_type: None,
            accept: None,
            user_agent: head
                .header("user-agent")
                .map(|v| String::from_utf8_lossy(v).into_owned()),
            body: String::new(),
        },
    );
    if shared.log_requests {
        eprintln!(
            "test-apiserver: {} {} (kubelet proxy, raw upgrade)",
            head.method, head.target
        );
    }
    let authorization = head
        .header("authorization")
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let target = if super::http::request_user(&shared, authorization.as_deref(), certificate.as_ref()).is_err() {
        Err(ApiError::unauthorized())
    } else if let Some(e) = super::http::take_fault(&shared, &head.method, path) {
        Err(e)
    } else {
        raw_target(&shared, &head.method, path, query)
    };
    let target = match target {
        Ok(t) => t,
        Err(e) => return write_status(&mut client, &e).await,
    };
    let mut response = match kubelet_request(&shared, &target, &head.method, &head.headers, true, Bytes::new()).await {
        Ok(r) => r,
        Err(e) => {
            let err = ApiError::unknown(500, format!("error dialing backend: {e}"));
            return write_status(&mut client, &err).await;
        }
    };
    let status = response.status();
    if status.as_u16() != 101 && status.as_u16() < 400 {
        let err = ApiError::unknown(
            500,
            format!("invalid upgrade response: status code {}", status.as_u16()),
        );
        return write_status(&mut client, &err).await;
    }
    let mut out = format!(
        "HTTP/1.1 {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    )
    .into_bytes();
    let switching = status.as_u16() == 101;
    for (name, value) in response.headers() {
        if switching || !hop_by_hop(name.as_str()) && name.as_str() != "content-length" {
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    if !switching {
        let body = match response.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => Bytes::from(e.to_string()),
        };
        out.extend_from_slice(format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()).as_bytes());
        out.extend_from_slice(&body);
        let _ = client.write_all(&out).await;
        let _ = client.shutdown().await;
        return;
    }
    out.extend_from_slice(b"\r\n");
    let upgraded = match hyper::upgrade::on(&mut response).await {
        Ok(u) => u,
        Err(e) => {
            debug_log(&format!("kubelet upgrade: {e}"));
            return;
        }
    };
    let mut kubelet = TokioIo::new(upgraded);
    if client.write_all(&out).await.is_err() || kubelet.write_all(&rest).await.is_err() {
        return;
    }
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut kubelet).await {
        debug_log(&format!("upgraded stream: {e}"));
    }
}

/// A request head as [`super::front`] read it.
pub(crate) struct RawHead {
    /// `GET`, `POST`.
    pub method: String,
    /// The path and query.
    pub target: String,
    /// Every header, in order.
    pub headers: Vec<(String, Vec<u8>)>,
}

impl RawHead {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// An upgrade actix-web does not stream: `Connection: Upgrade` with an `Upgrade` other
    /// than `websocket`.
    pub(crate) fn is_non_websocket_upgrade(&self) -> bool {
        let connection_upgrade = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
            .flat_map(|(_, v)| {
                String::from_utf8_lossy(v)
                    .split(',')
                    .map(|t| t.trim().to_ascii_lowercase())
                    .collect::<Vec<_>>()
            })
            .any(|t| t == "upgrade");
        let upgrade = self
            .header("upgrade")
            .map(|v| String::from_utf8_lossy(v).trim().to_ascii_lowercase());
        connection_upgrade && upgrade.is_some_and(|u| u != "websocket")
    }
}

/// Routes a raw upgrade as the actix routes do: pod subresources to their location (the
/// kubelet's query built from the client's options), `nodes/proxy` to the path without the
/// query.
fn raw_target(shared: &Shared, method: &str, path: &str, query: &str) -> Result<Target, ApiError> {
    let segs: Vec<&str> = path.split('/').collect();
    match segs.as_slice() {
        ["", "api", "v1", "namespaces", ns, "pods", name, sub @ ("exec" | "attach" | "portforward")] => {
            if method != "GET" && method != "POST" {
                return Err(not_allowed(method));
            }
            connect_target(shared, ns, name, sub, &Query::parse(query), true).map(|(t, _)| t)
        }
        ["", "api", "v1", "nodes", node, "proxy", rest @ ..] => {
            let target = node_target(shared, node, format!("/{}", rest.join("/")))?;
            proxyable(&target.host)?;
            Ok(target)
        }
        _ => Err(super::http::not_found_path()),
    }
}

async fn write_status<S: tokio::io::AsyncWrite + Unpin>(client: &mut S, err: &ApiError) {
    let (code, body) = (err.code, serde_json::to_vec(&err.status()).unwrap_or_default());
    let reason = StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = client.write_all(head.as_bytes()).await;
    let _ = client.write_all(&body).await;
    let _ = client.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `isProxyableHostname`: loopback and link-local node addresses are refused.
    #[test]
    fn only_global_unicast_node_addresses_are_proxied() {
        for host in ["127.0.0.1", "169.254.1.1", "::1", "fe80::1", "0.0.0.0", "localhost"] {
            let e = proxyable(host).unwrap_err();
            assert_eq!((e.code, e.message.as_str()), (400, "address not allowed"), "{host}");
        }
        for host in ["10.0.0.1", "172.17.0.1", "192.0.2.2", "2001:db8::1"] {
            assert!(proxyable(host).is_ok(), "{host}");
        }
    }
}
