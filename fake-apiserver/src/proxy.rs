//! Requests the API server passes on to a node's kubelet, as kube-apiserver does: `pods/log`
//! (→ `/containerLogs/{ns}/{pod}/{container}`), `pods/exec` and `pods/attach` (→
//! `/exec|attach/{ns}/{pod}/{container}`), `pods/portforward` (→ `/portForward/{ns}/{pod}`)
//! and `nodes/{name}/proxy/{path}` (→ `/{path}`).
//!
//! The kubelet is reached at the Node's first `InternalIP` (then `ExternalIP`, then
//! `Hostname`: kubeadm's `--kubelet-preferred-address-types`) and
//! `status.daemonEndpoints.kubeletEndpoint.Port`, over HTTPS with the API server's kubelet
//! client certificate (CN `kube-apiserver-kubelet-client`, O `system:masters`), not verifying
//! the kubelet's serving certificate (kube-apiserver without `--kubelet-certificate-authority`).
//! HTTP/1.1 through hyper; an upgrade request (`Connection: Upgrade`: SPDY/3.1, WebSocket) gets
//! the kubelet's 101 and its headers, then bytes are copied both ways until either side closes.

use super::error::ApiError;
use super::http::Shared;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::Value;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The kubelet's default port, when a Node reports none.
const KUBELET_PORT: u16 = 10250;

/// The address types tried, in order.
const PREFERRED_ADDRESS_TYPES: &[&str] = &["InternalIP", "ExternalIP", "Hostname"];

/// Largest request body passed on (not upgrades: those stream).
const BODY_LIMIT: usize = 4 << 20;

/// Accepts any kubelet serving certificate (kube-apiserver without
/// `--kubelet-certificate-authority`), still checking the handshake's signatures.
#[derive(Debug)]
struct AnyServerCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The TLS client configuration for kubelets: the client certificate, HTTP/1.1 only.
pub fn client_config(cert_pem: &str, key_pem: &str) -> std::io::Result<Arc<rustls::ClientConfig>> {
    use rustls::pki_types::pem::PemObject;
    let err = |e: String| std::io::Error::other(format!("kubelet client certificate: {e}"));
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(e.to_string()))?;
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| err(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| err(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServerCertificate(provider)))
        .with_client_auth_cert(certs, key)
        .map_err(|e| err(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Where a request goes: the kubelet's `host:port` and the path with its query.
struct Target {
    host: String,
    port: u16,
    path_and_query: String,
}

/// How the answer of a non-upgrade request is passed back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// As it is (`nodes/proxy`, upgrade handlers).
    Raw,
    /// A non-2xx becomes a `Status` (kube-apiserver's GenericHttpResponseChecker, `pods/log`).
    Checked,
}

fn node_target(shared: &Shared, node_name: &str, path_and_query: String) -> Result<Target, ApiError> {
    let nodes = super::resources::by_name("nodes").expect("nodes are served");
    let node = shared.store().get(nodes, "", node_name)?;
    let addresses = node["status"]["addresses"].as_array().cloned().unwrap_or_default();
    let address = PREFERRED_ADDRESS_TYPES.iter().find_map(|kind| {
        addresses
            .iter()
            .find(|a| a["type"] == *kind)
            .and_then(|a| a["address"].as_str())
            .filter(|a| !a.is_empty())
    });
    let Some(host) = address else {
        let known: Vec<String> = addresses
            .iter()
            .map(|a| {
                format!(
                    "{}={}",
                    a["type"].as_str().unwrap_or(""),
                    a["address"].as_str().unwrap_or("")
                )
            })
            .collect();
        return Err(ApiError::internal(format!(
            "no preferred addresses found; known addresses: [{}]",
            known.join(" ")
        )));
    };
    let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .unwrap_or(KUBELET_PORT);
    Ok(Target {
        host: host.to_string(),
        port,
        path_and_query,
    })
}

fn names(containers: &Value) -> Vec<String> {
    containers
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// kube-apiserver's validateContainer: the container asked for must be the pod's; none asked
/// for is the only container, or a 400 listing the choices.
pub fn validate_container(pod: &Value, container: Option<&str>) -> Result<String, ApiError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let spec = &pod["spec"];
    let containers = names(&spec["containers"]);
    let init = names(&spec["initContainers"]);
    match container.filter(|c| !c.is_empty()) {
        Some(c) => {
            let ephemeral = names(&spec["ephemeralContainers"]);
            if containers.iter().chain(&init).chain(&ephemeral).any(|x| x == c) {
                Ok(c.to_string())
            } else {
                Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {name}"
                )))
            }
        }
        None => match containers.as_slice() {
            [only] => Ok(only.clone()),
            [] => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}"
            ))),
            _ => {
                let mut message = format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    containers.join(" ")
                );
                if !init.is_empty() {
                    message.push_str(&format!(" or one of the init containers: [{}]", init.join(" ")));
                }
                Err(ApiError::bad_request(message))
            }
        },
    }
}

fn query_param(query: &str, key: &str) -> Option<String> {
    web::Query::<Vec<(String, String)>>::from_query(query)
        .ok()?
        .into_inner()
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

fn without_param(query: &str, key: &str) -> String {
    query
        .split('&')
        .filter(|p| !p.is_empty() && p.split('=').next() != Some(key))
        .collect::<Vec<_>>()
        .join("&")
}

fn with_query(path: String, query: &str) -> String {
    if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    }
}

fn is_upgrade(req: &HttpRequest) -> bool {
    req.headers()
        .get_all("Connection")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

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
    let headers: Vec<(String, Vec<u8>)> = req
        .headers()
        .iter()
        .filter(|(n, _)| !hop_by_hop(n.as_str()) && !n.as_str().starts_with("sec-websocket"))
        .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
        .collect();
    let response = match kubelet_request(shared, &target, "GET", &headers, false, Bytes::new()).await {
        Ok(r) => r,
        Err(e) => return unreachable(&target, "GET", e),
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
    HttpResponse::build(StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .content_type("application/json")
        .body(serde_json::to_vec(&err.status()).unwrap_or_default())
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
    let pods = super::resources::by_name("pods").expect("pods are served");
    let pod = match shared.store().get(pods, &ns, &name) {
        Ok(pod) => pod,
        Err(e) => return status_response(&e),
    };
    let query = req.query_string().to_string();
    let websocket_log = sub == "log" && is_websocket(&req);
    match pod_target(&shared, &pod, &sub, req.method().as_str(), &query, is_upgrade(&req)) {
        Ok(Some((target, _))) if websocket_log => log_over_websocket(&shared, target, &req, payload).await,
        Ok(Some((target, answer))) => forward(&shared, target, answer, &req, payload).await,
        // A pod not yet on a node has no log: kube-apiserver streams nothing.
        Ok(None) => HttpResponse::Ok().content_type("text/plain").finish(),
        Err(e) => status_response(&e),
    }
}

/// Where a pod subresource request goes; `None` for the log of a pod on no node yet.
fn pod_target(
    shared: &Shared,
    pod: &Value,
    sub: &str,
    method: &str,
    query: &str,
    upgrade: bool,
) -> Result<Option<(Target, Answer)>, ApiError> {
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    let allowed = match sub {
        "log" => method == "GET",
        _ => method == "GET" || method == "POST",
    };
    if !allowed {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({method})"
        )));
    }
    let container = || validate_container(pod, query_param(query, "container").as_deref());
    let (path, answer) = match sub {
        "log" => {
            let container = container()?;
            if node.is_empty() {
                return Ok(None);
            }
            (
                with_query(
                    format!("/containerLogs/{ns}/{name}/{container}"),
                    &without_param(query, "container"),
                ),
                Answer::Checked,
            )
        }
        "exec" | "attach" => (
            with_query(format!("/{sub}/{ns}/{name}/{}", container()?), query),
            Answer::Raw,
        ),
        "portforward" => (with_query(format!("/portForward/{ns}/{name}"), query), Answer::Raw),
        _ => return Err(super::http::not_found_path()),
    };
    if sub != "log" && !upgrade {
        return Err(ApiError::bad_request("Upgrade request required"));
    }
    if node.is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    Ok(Some((node_target(shared, node, path)?, answer)))
}

/// `/api/v1/nodes/{name}/proxy[/{path}]`.
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
    let rest = rest.strip_prefix('/').unwrap_or(&rest);
    let target = match node_target(&shared, &node, with_query(format!("/{rest}"), req.query_string())) {
        Ok(t) => t,
        Err(e) => return status_response(&e),
    };
    forward(&shared, target, Answer::Raw, &req, payload).await
}

/// Why the kubelet could not be asked.
fn unreachable(target: &Target, method: &str, e: impl std::fmt::Display) -> HttpResponse {
    let url = format!("https://{}:{}{}", target.host, target.port, target.path_and_query);
    status_response(&ApiError::with_code(
        503,
        format!("error trying to reach service: {method} {url:?}: {e}"),
    ))
}

/// Headers that belong to one connection, never passed on (RFC 9110 §7.6.1).
fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "te" | "trailer" | "upgrade"
    )
}

async fn forward(
    shared: &Shared,
    target: Target,
    answer: Answer,
    req: &HttpRequest,
    mut payload: web::Payload,
) -> HttpResponse {
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
    let headers: Vec<(String, Vec<u8>)> = req
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
        .collect();
    let mut response = match kubelet_request(shared, &target, &method, &headers, upgrade, body).await {
        Ok(r) => r,
        Err(e) => return unreachable(&target, &method, e),
    };
    let status = StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    if upgrade && status == StatusCode::SWITCHING_PROTOCOLS {
        let mut out = HttpResponse::build(status);
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
            Err(e) => return unreachable(&target, &method, e),
        };
        let (from_kubelet, mut to_kubelet) = tokio::io::split(TokioIo::new(upgraded));
        actix_web::rt::spawn(async move {
            loop {
                match payload.next().await {
                    Some(Ok(chunk)) => {
                        if let Err(e) = to_kubelet.write_all(&chunk).await {
                            debug_log(&format!("upgraded stream to the kubelet: {e}"));
                            return;
                        }
                    }
                    Some(Err(e)) => {
                        debug_log(&format!("upgraded stream from the client: {e}"));
                        break;
                    }
                    None => break,
                }
            }
            debug_log("upgraded stream: the client is done");
            let _ = to_kubelet.shutdown().await;
        });
        let stream = futures::stream::unfold((from_kubelet, vec![0u8; 32 * 1024]), |(mut r, mut buf)| async move {
            match r.read(&mut buf).await {
                Ok(0) => {
                    debug_log("upgraded stream: the kubelet is done");
                    None
                }
                Err(e) => {
                    debug_log(&format!("upgraded stream from the kubelet: {e}"));
                    None
                }
                Ok(n) => Some((Ok::<_, std::io::Error>(Bytes::copy_from_slice(&buf[..n])), (r, buf))),
            }
        });
        return out.streaming(stream);
    }
    let headers = response.headers().clone();
    let body = response.into_body();
    if answer == Answer::Checked && !(200..=206).contains(&status.as_u16()) {
        let text = match body.collect().await {
            Ok(b) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
            Err(e) => e.to_string(),
        };
        return status_response(&checked_error(status.as_u16(), text));
    }
    let mut out = HttpResponse::build(status);
    for (name, value) in &headers {
        if !hop_by_hop(name.as_str()) && name.as_str() != "content-length" {
            out.append_header((name.as_str(), value.as_bytes()));
        }
    }
    let stream = http_body_util::BodyStream::new(body).filter_map(|frame| async move {
        match frame {
            Ok(f) => f.into_data().ok().map(Ok::<_, hyper::Error>),
            Err(e) => Some(Err(e)),
        }
    });
    out.streaming(stream)
}

fn debug_log(line: &str) {
    if std::env::var_os("TEST_APISERVER_LOG").is_some() {
        eprintln!("test-apiserver: {line}");
    }
}

/// kube-apiserver's GenericHttpResponseChecker for `pods/log`.
fn checked_error(code: u16, body: String) -> ApiError {
    match code {
        500 => ApiError::internal(body),
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

/// Sends one request to the kubelet: the caller's headers without its credentials and
/// hop-by-hop headers (the upgrade headers kept for an upgrade).
async fn kubelet_request(
    shared: &Shared,
    target: &Target,
    method: &str,
    headers: &[(String, Vec<u8>)],
    upgrade: bool,
    body: Bytes,
) -> Result<hyper::Response<hyper::body::Incoming>, String> {
    let io = connect(shared, target).await.map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    actix_web::rt::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            debug_log(&format!("kubelet connection: {e}"));
        }
    });
    let mut builder = hyper::Request::builder()
        .method(method)
        .uri(target.path_and_query.as_str())
        .header("Host", format!("{}:{}", target.host, target.port));
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        let keep = match lower.as_str() {
            "host" | "authorization" | "content-length" => false,
            "connection" | "upgrade" => upgrade,
            other => !hop_by_hop(other) && !other.starts_with("impersonate-"),
        };
        if keep {
            builder = builder.header(lower.as_str(), value.as_slice());
        }
    }
    let request = builder
        .body(http_body_util::Full::new(body))
        .map_err(|e| e.to_string())?;
    sender.send_request(request).await.map_err(|e| e.to_string())
}

/// An upgrade request actix-web cannot stream (only WebSocket upgrades get the connection as
/// their payload), read off the connection by [`super::front`]: authenticated and routed as
/// the actix handlers do, then the kubelet's answer written back raw and, after a 101, bytes
/// copied both ways. `rest` is what the client sent after the head.
pub(crate) async fn raw_upgrade<S>(shared: Arc<Shared>, head: RawHead, rest: Vec<u8>, mut client: S, certificate: bool)
where
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
    let target = if !super::http::authenticated_by(&shared, authorization.as_deref(), certificate) {
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
            let url = format!("https://{}:{}{}", target.host, target.port, target.path_and_query);
            let err = ApiError::with_code(
                503,
                format!("error trying to reach service: {} {url:?}: {e}", head.method),
            );
            return write_status(&mut client, &err).await;
        }
    };
    let status = response.status();
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

/// Routes a raw upgrade as the actix routes do.
fn raw_target(shared: &Shared, method: &str, path: &str, query: &str) -> Result<Target, ApiError> {
    let segs: Vec<&str> = path.split('/').collect();
    match segs.as_slice() {
        ["", "api", "v1", "namespaces", ns, "pods", name, sub @ ("exec" | "attach" | "portforward")] => {
            let pods = super::resources::by_name("pods").expect("pods are served");
            let pod = shared.store().get(pods, ns, name)?;
            pod_target(shared, &pod, sub, method, query, true)?
                .map(|(t, _)| t)
                .ok_or_else(super::http::not_found_path)
        }
        ["", "api", "v1", "nodes", node, "proxy", rest @ ..] => {
            node_target(shared, node, with_query(format!("/{}", rest.join("/")), query))
        }
        _ => Err(super::http::not_found_path()),
    }
}

async fn write_status<S: tokio::io::AsyncWrite + Unpin>(client: &mut S, err: &ApiError) {
    let body = serde_json::to_vec(&err.status()).unwrap_or_default();
    let status = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    let _ = client.write_all(head.as_bytes()).await;
    let _ = client.write_all(&body).await;
    let _ = client.shutdown().await;
}

async fn connect(
    shared: &Shared,
    target: &Target,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect((target.host.as_str(), target.port)).await?;
    let name = ServerName::try_from(target.host.clone()).map_err(std::io::Error::other)?;
    tokio_rustls::TlsConnector::from(shared.kubelet_client.clone())
        .connect(name, tcp)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// kube-apiserver's container defaulting and its messages.
    #[test]
    fn containers_default_as_upstream() {
        let pod = |cs: &[&str], init: &[&str]| {
            let c = |n: &&str| json!({"name": n});
            json!({"metadata": {"name": "p"}, "spec": {
                "containers": cs.iter().map(c).collect::<Vec<_>>(),
                "initContainers": init.iter().map(c).collect::<Vec<_>>()}})
        };
        assert_eq!(validate_container(&pod(&["a"], &[]), None).unwrap(), "a");
        assert_eq!(
            validate_container(&pod(&["a", "b"], &[]), None).unwrap_err().message,
            "a container name must be specified for pod p, choose one of: [a b]"
        );
        assert_eq!(
            validate_container(&pod(&["a", "b"], &["i"]), None).unwrap_err().message,
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
        );
        assert_eq!(validate_container(&pod(&["a", "b"], &["i"]), Some("i")).unwrap(), "i");
        let err = validate_container(&pod(&["a"], &[]), Some("x")).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "container x is not valid for pod p")
        );
    }

    /// `container` is dropped from the kubelet's query, the rest kept in order.
    #[test]
    fn query_rewriting() {
        assert_eq!(
            without_param("container=a&follow=true&tailLines=2", "container"),
            "follow=true&tailLines=2"
        );
        assert_eq!(
            query_param("follow=true&container=b", "container").as_deref(),
            Some("b")
        );
        assert_eq!(with_query("/x".into(), ""), "/x");
    }
}
