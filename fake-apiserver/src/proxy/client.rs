//! The API server's side of a kubelet connection: the Node's kubelet address (the first
//! `InternalIP`, then `ExternalIP`, then `Hostname`: kubeadm's
//! `--kubelet-preferred-address-types`; `status.daemonEndpoints.kubeletEndpoint.Port`, as
//! `pkg/kubelet/client/kubelet_client.go` `NodeConnectionInfoGetter`), HTTPS with the API
//! server's kubelet client certificate (CN `kube-apiserver-kubelet-client`, O `system:masters`)
//! that does not verify the kubelet's serving certificate (kube-apiserver without
//! `--kubelet-certificate-authority`), and one HTTP/1.1 request with upgrades (hyper).

use std::sync::Arc;

use bytes::Bytes;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::error::ApiError;
use crate::http::Shared;

/// The kubelet's default port, when a Node reports none.
const KUBELET_PORT: u16 = 10250;

/// The address types tried, in order.
const PREFERRED_ADDRESS_TYPES: &[&str] = &["InternalIP", "ExternalIP", "Hostname"];

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
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub host: String,
    pub port: u16,
    pub path_and_query: String,
}

impl Target {
    /// `https://host:port/path?query`, as Go prints the URL in its errors.
    pub fn url(&self) -> String {
        format!("https://{}:{}{}", self.host, self.port, self.path_and_query)
    }
}

/// The kubelet of `node_name` (its connection info), with `path_and_query`.
pub(crate) fn node_target(shared: &Shared, node_name: &str, path_and_query: String) -> Result<Target, ApiError> {
    let nodes = crate::resources::by_name("nodes").expect("nodes are served");
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

/// Headers that belong to one connection, never passed on (RFC 9110 §7.6.1).
pub(crate) fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "te" | "trailer" | "upgrade"
    )
}

/// `TEST_APISERVER_LOG=1` lines.
pub(crate) fn debug_log(line: &str) {
    if std::env::var_os("TEST_APISERVER_LOG").is_some() {
        eprintln!("test-apiserver: {line}");
    }
}

/// Sends one request to the kubelet: the caller's headers without its credentials and
/// hop-by-hop headers (the upgrade headers kept for an upgrade).
pub(crate) async fn kubelet_request(
    shared: &Shared,
    target: &Target,
    method: &str,
    headers: &[(String, Vec<u8>)],
    upgrade: bool,
    body: Bytes,
) -> Result<hyper::Response<hyper::body::Incoming>, KubeletRequestError> {
    let io = connect(shared, target).await.map_err(KubeletRequestError::Connect)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(KubeletRequestError::Http)?;
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
        .map_err(KubeletRequestError::Request)?;
    sender.send_request(request).await.map_err(KubeletRequestError::Http)
}

/// Why a request did not reach the kubelet; shown as the underlying error alone, which the
/// callers wrap in kube-apiserver's words (`error dialing backend: …`, `Get "…": …`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum KubeletRequestError {
    /// The TCP or TLS connection.
    #[error("{0}")]
    Connect(#[source] std::io::Error),
    /// The HTTP/1 handshake or exchange.
    #[error("{0}")]
    Http(#[source] hyper::Error),
    /// The request could not be built (a header the client sent is not valid HTTP).
    #[error("{0}")]
    Request(#[source] hyper::http::Error),
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
