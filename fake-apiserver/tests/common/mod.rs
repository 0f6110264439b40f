//! What the fixture's own test files share: raw HTTP requests and watches against the fixture
//! (one request helper, so that every file sends the same headers), a kube-rs client from its
//! kubeconfig, and the fake kubelet's TLS and the Node and pod that point at it.

// Each test crate compiles this module and uses only some of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use dockerlet_fake_apiserver::{ApiServer, PatchType, Subresource};
use rustls::pki_types::pem::PemObject;
use serde_json::{json, Value};

pub const JSON: &str = "application/json";
pub const MERGE_PATCH: &str = "application/merge-patch+json";

/// How long a one-off request (`request`, `send`) may take.
const ONE_OFF_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a `Client`'s request may take; a watch is one request, so this also bounds how
/// long a watch's stream stays open.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// A raw HTTP answer: status code, `Warning` headers, and the body as JSON (or its text as a
/// JSON string when it is no JSON).
pub struct Answer {
    pub code: u16,
    pub warnings: Vec<String>,
    pub body: Value,
}

impl Answer {
    /// A Status body's message, empty when there is none.
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }

    /// Status code and body, as most tests look at an answer.
    pub fn pair(self) -> (u16, Value) {
        (self.code, self.body)
    }
}

/// A blocking client for raw requests: one HTTP agent (its connections reused), status codes
/// are answers, not errors.
pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: String,
}

impl Client {
    /// A client whose requests and watches may take 60 s.
    pub fn new(server: &ApiServer) -> Self {
        Self::with_timeout(server, CLIENT_TIMEOUT)
    }

    pub fn with_timeout(server: &ApiServer, timeout: Duration) -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .build();
        Self {
            agent: ureq::Agent::new_with_config(config),
            base: server.url(),
            token: server.token().to_string(),
        }
    }

    /// The raw request every test file makes: `method` on `path` with `bearer`, asking for
    /// JSON, the body (empty when `None`) sent as `content_type`.
    pub fn request(&self, method: &str, path: &str, content_type: &str, body: Option<&[u8]>, bearer: &str) -> Answer {
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("Authorization", format!("Bearer {bearer}"))
            .header("Accept", "application/json")
            .header("Content-Type", content_type)
            .body(body.unwrap_or_default().to_vec())
            .expect("request");
        let response = self.agent.run(request).expect("the fixture answers");
        let code = response.status().as_u16();
        let warnings = response
            .headers()
            .get_all("Warning")
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .collect();
        let text = response.into_body().read_to_string().expect("body");
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Answer { code, warnings, body }
    }

    /// A JSON request with the server's token: status code and body.
    pub fn send(&self, method: &str, path: &str, content_type: &str, body: Option<&Value>) -> (u16, Value) {
        let body = body.map(Value::to_string);
        self.request(
            method,
            path,
            content_type,
            body.as_deref().map(str::as_bytes),
            &self.token,
        )
        .pair()
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.send("GET", path, JSON, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send("POST", path, JSON, Some(body))
    }

    pub fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send("PUT", path, JSON, Some(body))
    }

    pub fn patch(&self, path: &str, content_type: &str, body: &Value) -> (u16, Value) {
        self.send("PATCH", path, content_type, Some(body))
    }

    pub fn merge_patch(&self, path: &str, body: &Value) -> (u16, Value) {
        self.patch(path, MERGE_PATCH, body)
    }

    pub fn delete(&self, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.send("DELETE", path, JSON, body)
    }

    /// A watch (`path_and_query` has `watch=1`), asked without an Accept header as the tests
    /// always asked; it must be answered 200.
    pub fn watch(&self, path_and_query: &str) -> Watch {
        let response = self
            .agent
            .get(format!("{}{path_and_query}", self.base))
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
            .expect("watch request");
        assert_eq!(response.status().as_u16(), 200, "watch {path_and_query}");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(response.into_body().into_reader()).lines() {
                let Ok(line) = line else { return };
                if line.trim().is_empty() {
                    continue;
                }
                let event: Value = serde_json::from_str(&line).expect("watch lines are JSON");
                if tx.send(event).is_err() {
                    return;
                }
            }
        });
        Watch { events: rx }
    }
}

/// One raw request on an HTTP agent of its own (30 s); see `Client::request`.
pub fn request(
    server: &ApiServer,
    bearer: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<&[u8]>,
) -> Answer {
    Client::with_timeout(server, ONE_OFF_TIMEOUT).request(method, path, content_type, body, bearer)
}

/// One JSON request with `bearer` on an HTTP agent of its own (30 s): status code and body.
/// A PATCH is a JSON merge patch, anything else `application/json`.
pub fn send(server: &ApiServer, bearer: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let content_type = if method == "PATCH" { MERGE_PATCH } else { JSON };
    let body = body.map(Value::to_string);
    request(
        server,
        bearer,
        method,
        path,
        content_type,
        body.as_deref().map(str::as_bytes),
    )
    .pair()
}

/// An open watch: its events arrive on a channel from a reader thread.
pub struct Watch {
    events: mpsc::Receiver<Value>,
}

impl Watch {
    /// The next event within 10 s, or `None` when the stream ended or stayed quiet.
    pub fn next(&self) -> Option<Value> {
        self.events.recv_timeout(Duration::from_secs(10)).ok()
    }

    /// The next event's type and object name.
    pub fn next_summary(&self) -> Option<(String, String)> {
        self.next().map(|e| {
            (
                e["type"].as_str().unwrap_or_default().to_string(),
                e["object"]["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            )
        })
    }

    /// Whether nothing arrives for `d`.
    pub fn quiet_for(&self, d: Duration) -> bool {
        matches!(self.events.recv_timeout(d), Err(mpsc::RecvTimeoutError::Timeout))
    }

    /// Whether the stream ends (within 10 s) with nothing more on it.
    pub fn ended(&self) -> bool {
        matches!(
            self.events.recv_timeout(Duration::from_secs(10)),
            Err(mpsc::RecvTimeoutError::Disconnected)
        )
    }
}

/// A multi-threaded runtime for the kube-rs tests.
pub fn multi_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A kube-rs client from the server's kubeconfig, as a user's program builds one.
pub async fn kube_client(server: &ApiServer) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(server.kubeconfig_path()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// The fake kubelet's TLS: a self-signed serving certificate for `ip`, and a client
/// certificate required, signed by the CA of `api`'s kubelet client certificate (as a kubelet
/// started with `--client-ca-file` checks the API server).
pub fn kubelet_tls(api: &ApiServer, ip: IpAddr) -> tokio_rustls::TlsAcceptor {
    let ca_pem = std::fs::read_to_string(api.kubelet_client_ca_path()).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec![ip.to_string()]).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .unwrap();
    let config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![cert.cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into()),
        )
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// A Node `n1` whose kubelet is at `kubelet` (its InternalIP, which the API server prefers to
/// the Hostname address also listed) and a pod `p` in `default` bound to it, one busybox
/// container a name of `containers`.
pub fn cluster(api: &ApiServer, kubelet: SocketAddr, containers: &[&str]) {
    api.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}))
        .unwrap();
    api.patch(
        "nodes",
        "",
        "n1",
        PatchType::Merge,
        &json!({"status": {
            "addresses": [{"type": "Hostname", "address": "n1.invalid"}, {"type": "InternalIP", "address": kubelet.ip().to_string()}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet.port()}},
        }}),
        Subresource::Status,
    )
    .unwrap();
    let containers: Vec<Value> = containers
        .iter()
        .map(|name| json!({"name": name, "image": "busybox"}))
        .collect();
    api.create(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": containers},
    }))
    .unwrap();
}
