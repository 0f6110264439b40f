//! A streaming client of the kubelet API for tests: TLS with a client certificate (the agent's
//! self-signed serving certificate is not checked), then either SPDY/3.1 — the upgrade by hand and
//! `dockerlet-streaming`'s session driver in the client role — or WebSocket (tokio-tungstenite)
//! with a channel subprotocol. Both give a [`Remote`] session: write stdin, close it, resize,
//! read stdout/stderr/error as they arrive, or drop the connection. Port-forward can reuse
//! [`KubeletClient::spdy`] and [`KubeletClient::websocket`] with its own streams and channels.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use dockerlet_streaming::spdy::conn::{self, Control, StreamWriter};
use dockerlet_streaming::spdy::{FlowControl, Role, SessionConfig};
use dockerlet_streaming::websocket::{self, ChannelProtocol, Incoming, WsMessage};
use futures::{SinkExt, StreamExt};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::client::TlsStream;

/// A CA and a client certificate it signed (CN `alice`, O `devs`), as PEM files.
pub struct ClientPki {
    _dir: tempfile::TempDir,
    /// The CA (`--client-ca-file`).
    pub ca: std::path::PathBuf,
    /// The client certificate.
    pub cert: std::path::PathBuf,
    /// Its key.
    pub key: std::path::PathBuf,
}

impl ClientPki {
    /// A fresh CA and client certificate in a temporary directory.
    pub fn new() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test-client-ca");
        let ca_key = rcgen::KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "devs");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        let write = |name: &str, text: String| -> anyhow::Result<std::path::PathBuf> {
            let path = dir.path().join(name);
            std::fs::write(&path, text)?;
            Ok(path)
        };
        Ok(ClientPki {
            ca: write("ca.crt", ca_cert.pem())?,
            cert: write("client.crt", cert.pem())?,
            key: write("client.key", key.serialize_pem())?,
            _dir: dir,
        })
    }

    /// A client of the kubelet API on `port` with this certificate.
    pub fn client(&self, port: u16) -> anyhow::Result<KubeletClient> {
        KubeletClient::new(port, &self.cert, &self.key)
    }
}

/// Connects to one agent's kubelet API as the holder of a client certificate.
#[derive(Clone)]
pub struct KubeletClient {
    port: u16,
    tls: Arc<rustls::ClientConfig>,
}

/// A response that was not an upgrade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The status.
    pub status: u16,
    /// The body.
    pub body: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.body)
    }
}

impl std::error::Error for Refused {}

impl KubeletClient {
    /// A client of `127.0.0.1:port` with the certificate and key in these PEM files.
    pub fn new(port: u16, cert: &Path, key: &Path) -> anyhow::Result<Self> {
        let certs = CertificateDer::pem_file_iter(cert)
            .context("client certificate")?
            .collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_file(key).context("client key")?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
            .with_client_auth_cert(certs, key)?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            port,
            tls: Arc::new(tls),
        })
    }

    /// A TLS connection to the agent.
    pub async fn connect(&self) -> anyhow::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).await?;
        let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
        Ok(connector
            .connect(ServerName::try_from("127.0.0.1").expect("an IP"), tcp)
            .await?)
    }

    /// A plain request (`Connection: close`); the status and body.
    pub async fn request(&self, method: &str, path: &str) -> anyhow::Result<(u16, String)> {
        let mut tls = self.connect().await?;
        let head =
            format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        tls.write_all(head.as_bytes()).await?;
        let mut all = Vec::new();
        // A TLS peer closing without close_notify is an error here; what was read counts.
        let _ = tls.read_to_end(&mut all).await;
        let (status, headers, body) = parse_head(&all)?.context("incomplete response")?;
        let chunked = headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
        let body = if chunked {
            dechunk(&all[body..])
        } else {
            all[body..].to_vec()
        };
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// Upgrade `path` to SPDY/3.1 offering `versions` (`X-Stream-Protocol-Version`); the
    /// negotiated version and the running connection, or the refusal.
    pub async fn spdy(&self, path: &str, versions: &[&str]) -> anyhow::Result<SpdyClient> {
        let mut tls = self.connect().await?;
        let mut head =
            format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n");
        for v in versions {
            head.push_str(&format!("X-Stream-Protocol-Version: {v}\r\n"));
        }
        head.push_str("Content-Length: 0\r\n\r\n");
        tls.write_all(head.as_bytes()).await?;
        let mut buf = Vec::new();
        let (status, headers, body_at) = loop {
            let mut chunk = [0u8; 4096];
            let n = tls.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                bail!("connection closed before the response head ({} bytes)", buf.len());
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(parsed) = parse_head(&buf)? {
                break parsed;
            }
        };
        if status != 101 {
            // Read the rest of a short error body.
            let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut buf)).await;
            return Err(Refused {
                status,
                body: String::from_utf8_lossy(&buf[body_at..]).into_owned(),
            }
            .into());
        }
        let protocol = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("x-stream-protocol-version"))
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let (mut read, mut write) = tokio::io::split(tls);
        let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(4);
        let first = Bytes::copy_from_slice(&buf[body_at..]);
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(async move {
            if !first.is_empty() && tx.send(Ok(first)).await.is_err() {
                return;
            }
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                match read.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if tx.send(Ok(Bytes::copy_from_slice(&chunk[..n]))).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }));
        let input = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) }).boxed();
        let config = SessionConfig {
            flow_control: FlowControl::Lenient,
            ..SessionConfig::new(Role::Client)
        };
        let (connection, driver, mut output) = conn::connect(config, input);
        tasks.push(tokio::spawn(async move {
            let _ = driver.await;
        }));
        tasks.push(tokio::spawn(async move {
            while let Some(bytes) = output.next().await {
                if write.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            let _ = write.shutdown().await;
        }));
        Ok(SpdyClient {
            protocol,
            connection,
            tasks,
        })
    }

    /// Open a WebSocket on `path` offering `protocols` (`Sec-WebSocket-Protocol`).
    pub async fn websocket(&self, path: &str, protocols: &[&str]) -> anyhow::Result<WsClient> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let tls = self.connect().await?;
        let mut request = format!("wss://127.0.0.1:{}{path}", self.port).into_client_request()?;
        if !protocols.is_empty() {
            request
                .headers_mut()
                .insert("Sec-WebSocket-Protocol", protocols.join(",").parse()?);
        }
        let (socket, response) = match tokio_tungstenite::client_async(request, tls).await {
            Ok(ok) => ok,
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                let body = response
                    .body()
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default();
                return Err(Refused {
                    status: response.status().as_u16(),
                    body,
                }
                .into());
            }
            Err(e) => return Err(e.into()),
        };
        let protocol = response
            .headers()
            .get("Sec-WebSocket-Protocol")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        Ok(WsClient { protocol, socket })
    }
}

/// A SPDY connection in the client role.
pub struct SpdyClient {
    /// The negotiated `X-Stream-Protocol-Version`.
    pub protocol: String,
    /// Its streams.
    pub connection: conn::Connection,
    /// The tasks reading and writing the socket and running the session; aborting them drops
    /// the connection at once.
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// A WebSocket.
pub struct WsClient {
    /// The negotiated subprotocol (empty when none).
    pub protocol: String,
    /// The socket.
    pub socket: tokio_tungstenite::WebSocketStream<TlsStream<TcpStream>>,
}

/// What a remote command asks for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Streams {
    /// Send stdin.
    pub stdin: bool,
    /// Read stdout.
    pub stdout: bool,
    /// Read stderr.
    pub stderr: bool,
    /// With a TTY (and a resize stream).
    pub tty: bool,
}

impl Streams {
    /// The query parameters for these streams, as kube-apiserver sends them to a kubelet
    /// (`streamParams` in `pkg/registry/core/pod/strategy.go`: `input`, `output`, `error`,
    /// `tty`, each `1`), not the `PodExecOptions` names a client sends the API server.
    pub fn query(&self) -> String {
        let mut q = Vec::new();
        for (name, on) in [
            ("input", self.stdin),
            ("output", self.stdout),
            ("error", self.stderr),
            ("tty", self.tty),
        ] {
            if on {
                q.push(format!("{name}=1"));
            }
        }
        q.join("&")
    }
}

/// Which transport and version a remote command uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// SPDY/3.1 with this `X-Stream-Protocol-Version`.
    Spdy(&'static str),
    /// WebSocket with this subprotocol.
    Ws(&'static str),
}

/// Every transport and version kubelets speak for exec and attach.
pub const TRANSPORTS: [Transport; 9] = [
    Transport::Spdy("v5.channel.k8s.io"),
    Transport::Spdy("v4.channel.k8s.io"),
    Transport::Spdy("v3.channel.k8s.io"),
    Transport::Spdy("v2.channel.k8s.io"),
    Transport::Spdy("channel.k8s.io"),
    Transport::Ws("v5.channel.k8s.io"),
    Transport::Ws("v4.channel.k8s.io"),
    Transport::Ws("channel.k8s.io"),
    Transport::Ws("base64.channel.k8s.io"),
];

enum Input {
    Spdy {
        stdin: Option<StreamWriter>,
        resize: Option<StreamWriter>,
        control: Control,
    },
    Ws {
        protocol: ChannelProtocol,
        sink: futures::stream::SplitSink<
            tokio_tungstenite::WebSocketStream<TlsStream<TcpStream>>,
            tokio_tungstenite::tungstenite::Message,
        >,
    },
}

/// What a remote command gave back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// stdout (the TTY's output with `tty`).
    pub stdout: Vec<u8>,
    /// stderr.
    pub stderr: Vec<u8>,
    /// The error stream (`Status` JSON with v4+, else the failure message).
    pub error: Vec<u8>,
}

impl Outcome {
    /// stdout as text.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr as text.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// The error stream as JSON (`null` when empty).
    pub fn status(&self) -> serde_json::Value {
        serde_json::from_slice(&self.error).unwrap_or(serde_json::Value::Null)
    }
}

/// A running remote command (exec or attach).
pub struct Remote {
    /// The negotiated version or subprotocol.
    pub protocol: String,
    input: Input,
    /// (channel, data); `None` data when that channel ended; the sender drops at the end.
    events: mpsc::UnboundedReceiver<(u8, Option<Bytes>)>,
    /// What arrived so far.
    pub seen: Outcome,
    ended: bool,
    /// The connection's tasks, aborted on drop.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Remote {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

const STDOUT: u8 = websocket::STDOUT;
const STDERR: u8 = websocket::STDERR;
const ERROR: u8 = websocket::ERROR;

impl Remote {
    /// Start `path` (`/exec/…?command=…` without the stream parameters) with `streams` over
    /// `transport`.
    pub async fn start(
        client: &KubeletClient,
        transport: Transport,
        path: &str,
        streams: Streams,
    ) -> anyhow::Result<Remote> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let path = format!("{path}{sep}{}", streams.query());
        let (tx, events) = mpsc::unbounded_channel();
        match transport {
            Transport::Spdy(version) => {
                let mut spdy = client.spdy(&path, &[version]).await?;
                let mut tasks = std::mem::take(&mut spdy.tasks);
                let mut control = spdy.connection.control();
                let open = |kind: &str, fin: bool| {
                    let mut control = control.clone();
                    let headers = vec![("streamtype".to_string(), kind.to_string())];
                    async move { control.open(headers, fin).await }
                };
                let error = open("error", true).await?;
                let stdin = if streams.stdin {
                    Some(open("stdin", false).await?)
                } else {
                    None
                };
                let stdout = if streams.stdout {
                    Some(open("stdout", true).await?)
                } else {
                    None
                };
                let stderr = if streams.stderr && !streams.tty {
                    Some(open("stderr", true).await?)
                } else {
                    None
                };
                let resize = if streams.tty && version != "v2.channel.k8s.io" && version != "channel.k8s.io" {
                    Some(open("resize", false).await?)
                } else {
                    None
                };
                for (channel, stream) in [(ERROR, Some(error)), (STDOUT, stdout), (STDERR, stderr)] {
                    let Some(mut stream) = stream else { continue };
                    let tx = tx.clone();
                    tasks.push(tokio::spawn(async move {
                        while let Some(Ok(data)) = stream.reader.next().await {
                            let _ = tx.send((channel, Some(data)));
                        }
                        let _ = tx.send((channel, None));
                    }));
                }
                let closed = control.closed();
                tasks.push(tokio::spawn(async move {
                    closed.await;
                    drop(tx);
                }));
                let _ = &mut control;
                Ok(Remote {
                    protocol: spdy.protocol,
                    input: Input::Spdy {
                        stdin: stdin.map(|s| s.writer),
                        resize: resize.map(|s| s.writer),
                        control,
                    },
                    events,
                    seen: Outcome::default(),
                    ended: false,
                    tasks,
                })
            }
            Transport::Ws(subprotocol) => {
                let ws = client.websocket(&path, &[subprotocol]).await?;
                let protocol = ChannelProtocol::negotiate(&[ws.protocol.as_str()], false)
                    .context("server chose an unknown subprotocol")?;
                let (sink, mut source) = ws.socket.split();
                let reader = tokio::spawn(async move {
                    use tokio_tungstenite::tungstenite::Message;
                    while let Some(Ok(message)) = source.next().await {
                        let message = match message {
                            Message::Binary(b) => WsMessage::Binary(b),
                            Message::Text(t) => WsMessage::Text(t.to_string()),
                            Message::Close(_) => break,
                            _ => continue,
                        };
                        match websocket::decode(protocol, message) {
                            Ok(Incoming::Data { channel, data }) => {
                                let _ = tx.send((channel, Some(data)));
                            }
                            Ok(Incoming::Close { channel }) => {
                                let _ = tx.send((channel, None));
                            }
                            _ => {}
                        }
                    }
                });
                Ok(Remote {
                    protocol: ws.protocol,
                    input: Input::Ws { protocol, sink },
                    events,
                    seen: Outcome::default(),
                    ended: false,
                    tasks: vec![reader],
                })
            }
        }
    }

    /// Send bytes on stdin.
    pub async fn write_stdin(&mut self, data: &[u8]) -> anyhow::Result<()> {
        match &mut self.input {
            Input::Spdy { stdin, .. } => {
                stdin
                    .as_mut()
                    .context("no stdin stream")?
                    .write(Bytes::copy_from_slice(data))
                    .await?
            }
            Input::Ws { protocol, sink } => sink.send(message(*protocol, websocket::STDIN, data)?).await?,
        }
        Ok(())
    }

    /// End stdin (SPDY FIN; v5's close message). WebSocket protocols before v5 cannot: nothing
    /// is sent.
    pub async fn close_stdin(&mut self) -> anyhow::Result<()> {
        match &mut self.input {
            Input::Spdy { stdin, .. } => stdin.as_mut().context("no stdin stream")?.finish().await?,
            Input::Ws { protocol, .. } if *protocol != ChannelProtocol::V5 => {}
            Input::Ws { protocol, sink } => {
                let close = websocket::encode_close(*protocol, websocket::STDIN)?;
                sink.send(to_tungstenite(close)).await?
            }
        }
        Ok(())
    }

    /// Send a terminal size on the resize stream.
    pub async fn resize(&mut self, width: u16, height: u16) -> anyhow::Result<()> {
        let json = format!(r#"{{"Width":{width},"Height":{height}}}"#);
        match &mut self.input {
            Input::Spdy { resize, .. } => {
                resize
                    .as_mut()
                    .context("no resize stream")?
                    .write(Bytes::from(json))
                    .await?
            }
            Input::Ws { protocol, sink } => {
                sink.send(message(*protocol, websocket::RESIZE, json.as_bytes())?)
                    .await?
            }
        }
        Ok(())
    }

    /// Take what arrives until `until` holds for what was seen or the connection ends;
    /// whether it held. Gives up after `timeout`.
    pub async fn read_until(&mut self, timeout: Duration, until: impl Fn(&Outcome) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while !until(&self.seen) {
            if self.ended {
                return false;
            }
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Err(_) => return false,
                Ok(None) => self.ended = true,
                Ok(Some((channel, Some(data)))) => match channel {
                    STDOUT => self.seen.stdout.extend_from_slice(&data),
                    STDERR => self.seen.stderr.extend_from_slice(&data),
                    ERROR => self.seen.error.extend_from_slice(&data),
                    _ => {}
                },
                Ok(Some((_, None))) => {}
            }
        }
        true
    }

    /// Everything until the server ends the connection (at most `timeout`).
    pub async fn finish(mut self, timeout: Duration) -> anyhow::Result<Outcome> {
        self.read_until(timeout, |_| false).await;
        if !self.ended {
            bail!(
                "the server did not end the connection within {timeout:?}; so far: {:?}",
                self.seen
            );
        }
        if let Input::Spdy { control, .. } = &mut self.input {
            let _ = control.close().await;
        }
        Ok(std::mem::take(&mut self.seen))
    }

    /// Drop the connection at once, without closing anything properly.
    pub fn disconnect(self) {
        drop(self);
    }
}

fn message(
    protocol: ChannelProtocol,
    channel: u8,
    data: &[u8],
) -> anyhow::Result<tokio_tungstenite::tungstenite::Message> {
    Ok(to_tungstenite(websocket::encode(protocol, channel, data)?))
}

fn to_tungstenite(message: WsMessage) -> tokio_tungstenite::tungstenite::Message {
    match message {
        WsMessage::Binary(b) => tokio_tungstenite::tungstenite::Message::Binary(b),
        WsMessage::Text(t) => tokio_tungstenite::tungstenite::Message::Text(t.into()),
    }
}

/// Status, headers and where the body starts, once the head is complete.
#[allow(clippy::type_complexity)]
fn parse_head(buf: &[u8]) -> anyhow::Result<Option<(u16, Vec<(String, String)>, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(buf)? {
        httparse::Status::Partial => Ok(None),
        httparse::Status::Complete(n) => Ok(Some((
            response.code.unwrap_or(0),
            response
                .headers
                .iter()
                .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()))
                .collect(),
            n,
        ))),
    }
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = body.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&body[..line_end]).trim(), 16).unwrap_or(0);
        body = &body[line_end + 2..];
        if size == 0 || body.len() < size {
            break;
        }
        out.extend_from_slice(&body[..size]);
        body = &body[(size + 2).min(body.len())..];
    }
    out
}

/// Accepts the agent's self-signed certificate (tests only).
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
