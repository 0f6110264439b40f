//! The node's client certificate: TLS bootstrap and rotation through `certificates.k8s.io`.
//!
//! - [`bootstrap`]: kubelet's `--bootstrap-kubeconfig` (`pkg/kubelet/certificate/bootstrap/
//!   bootstrap.go` `LoadClientCert`): when the kubeconfig is missing or its certificate has
//!   expired, ask for a certificate with the bootstrap credentials and write a kubeconfig that
//!   names `<cert-dir>/kubelet-client-current.pem`.
//! - [`ClientCertificates`]: `rotateCertificates` (client-go `util/certificate/
//!   certificate_manager.go`, kubelet's `NewKubeletClientCertificateManager` and
//!   `UpdateTransport`): the API client presents the current pair; a rotation asks for a new
//!   pair with a new key, stores it and swaps the client, so every request after it — the
//!   caches' watches when they next connect included — uses the new certificate.
//! - [`store`]: the files (client-go's file store); [`request`]: the CSR and the wait for it.

pub mod bootstrap;
pub mod kubeconfig;
pub mod request;
pub mod store;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use base64::Engine as _;
use futures::future::BoxFuture;
use kube::config::{AuthInfo, Kubeconfig};

pub use kubeconfig::KubeconfigProblem;
pub use store::{CertPair, CertStore, StoreError};

/// How long a rotation waits for its certificate (client-go's `certificateWaitTimeout`).
pub const ROTATION_WAIT: Duration = Duration::from_secs(15 * 60);

/// Why a certificate could not be had.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A key or signing request could not be made.
    #[error("unable to generate a certificate signing request: {0}")]
    Generate(#[source] rcgen::Error),
    /// A kubeconfig cannot be read or used.
    #[error("{path}")]
    Kubeconfig {
        /// The file, with the flag that named it.
        path: String,
        /// What is wrong.
        #[source]
        source: KubeconfigProblem,
    },
    /// The API refused or could not be reached.
    #[error("{operation}: {source}")]
    Api {
        /// What was attempted.
        operation: String,
        /// kube-rs's error.
        #[source]
        source: kube::Error,
    },
    /// A CSR of our name asks for something else (client-go `ensureCompatible`).
    #[error("certificate signing request {name} exists and is not compatible: {reason}")]
    Incompatible {
        /// The CSR.
        name: String,
        /// How it differs.
        reason: String,
    },
    /// The request was denied (client-go's text).
    #[error("certificate signing request {name} is denied, reason: {reason}, message: {message}")]
    Denied {
        /// The CSR.
        name: String,
        /// The condition's reason.
        reason: String,
        /// The condition's message.
        message: String,
    },
    /// The signer failed it (client-go's text).
    #[error("certificate signing request {name} failed, reason: {reason}, message: {message}")]
    Failed {
        /// The CSR.
        name: String,
        /// The condition's reason.
        reason: String,
        /// The condition's message.
        message: String,
    },
    /// The CSR was deleted, or replaced by another of its name, while waited for.
    #[error("certificate signing request {name} was deleted or replaced while waiting for its certificate")]
    Deleted {
        /// The CSR.
        name: String,
    },
    /// Nothing was issued in time.
    #[error("timed out after {after:?} waiting for certificate signing request {name} to be approved and issued")]
    Timeout {
        /// The CSR.
        name: String,
        /// How long was waited.
        after: Duration,
    },
    /// The certificate files.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A file-system task did not finish.
    #[error("the certificate store's task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl CertError {
    /// Whether the API server answered the request that failed (client-go's
    /// `updateServerError`: Unauthorized, Forbidden and NotFound do; a 5xx or no connection
    /// does not; a denied, failed or timed-out CSR was an answer too).
    pub fn server_answered(&self) -> bool {
        match self {
            CertError::Api {
                source: kube::Error::Api(status),
                ..
            } => matches!(status.code, 401 | 403 | 404),
            CertError::Api { .. } => false,
            _ => true,
        }
    }
}

/// The rotation as the CertificateManager actor drives it (a trait, so the actor can be tested
/// without an API server).
#[async_trait]
pub trait CertificateRotation: std::fmt::Debug + Send + Sync + 'static {
    /// The pair the client presents now; `None` before the first one (rotation is then due at
    /// once, as client-go's `forceRotation`).
    fn current(&self) -> Option<CertPair>;
    /// Ask for a new pair, wait for it, store it and present it from now on.
    async fn rotate(&self) -> Result<(CertPair, String), CertError>;
}

/// When to rotate: at `fraction` (kubelet draws it from 0.7–0.9: `jitteryDuration`, 80 % ±
/// 10 %) of the certificate's lifetime, counted from its `notBefore`.
pub fn rotation_deadline(pair: &CertPair, fraction: f64) -> SystemTime {
    pair.not_before + pair.lifetime().mul_f64(fraction.clamp(0.0, 1.0))
}

/// The API client whose identity is the node's rotating client certificate.
pub struct ClientCertificates {
    /// The kubeconfig the agent runs with (`--kubeconfig`), as read.
    kubeconfig: Kubeconfig,
    /// `--kubeconfig <path>`, for errors.
    source: String,
    store: CertStore,
    node: String,
    current: Mutex<Option<CertPair>>,
    /// The client every request goes through now.
    presented: Arc<RwLock<kube::Client>>,
    default_namespace: String,
}

impl std::fmt::Debug for ClientCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCertificates")
            .field("source", &self.source)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl ClientCertificates {
    /// Reads `kubeconfig` and the current pair (the store's link in `cert_dir`, else the
    /// kubeconfig's `client-certificate`/`client-key`, else its inline data, which is then
    /// stored as kubelet stores a bootstrap pair). Without any pair the kubeconfig's own
    /// credentials serve until the first rotation, which is then due at once.
    pub async fn load(kubeconfig: &Path, cert_dir: &Path, node: &str) -> Result<Self, CertError> {
        let source = format!("--kubeconfig {}", kubeconfig.display());
        let bad = |problem: KubeconfigProblem| CertError::Kubeconfig {
            path: source.clone(),
            source: problem,
        };
        let file = Kubeconfig::read_from(kubeconfig).map_err(|e| bad(KubeconfigProblem::Read(e)))?;
        let (_, auth) = kubeconfig::current_user(&file).map_err(&bad)?;
        let mut store = CertStore::client(cert_dir);
        if let (Some(cert), Some(key)) = (&auth.client_certificate, &auth.client_key) {
            store = store.with_fallback(PathBuf::from(cert), PathBuf::from(key));
        }
        let store_ = store.clone();
        let mut current = tokio::task::spawn_blocking(move || store_.current()).await??;
        if current.is_none() {
            if let (Some(cert), Some(key)) = (&auth.client_certificate_data, &auth.client_key_data) {
                let (cert, key) = (
                    kubeconfig::decode_pem("client-certificate-data", cert).map_err(&bad)?,
                    kubeconfig::decode_pem("client-key-data", secrecy_text(key)).map_err(&bad)?,
                );
                let store_ = store.clone();
                current = Some(tokio::task::spawn_blocking(move || store_.update(&cert, &key)).await??);
            }
        }
        let current = current.filter(|p| !p.expired_at(SystemTime::now()));
        let default_namespace = "default".to_string();
        let client = match &current {
            Some(pair) => client_for(&file, Some(pair), &source).await?,
            None => client_for(&file, None, &source).await?,
        };
        Ok(ClientCertificates {
            kubeconfig: file,
            source,
            store,
            node: node.to_string(),
            current: Mutex::new(current),
            presented: Arc::new(RwLock::new(client)),
            default_namespace,
        })
    }

    /// The client for everything the agent asks of the API server: each request goes out with
    /// the pair current at that moment.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(Presented(self.presented.clone()), self.default_namespace.clone())
    }
}

#[async_trait]
impl CertificateRotation for ClientCertificates {
    fn current(&self) -> Option<CertPair> {
        self.current.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    async fn rotate(&self) -> Result<(CertPair, String), CertError> {
        let request = request::NodeRequest::new(&self.node, None)?;
        // The request goes out as the current pair while it is valid, else with the
        // kubeconfig's own credentials (client-go's ClientsetFn; kubelet's certConfig).
        let valid = CertificateRotation::current(self).filter(|p| !p.expired_at(SystemTime::now()));
        let asking = client_for(&self.kubeconfig, valid.as_ref(), &self.source).await?;
        let (name, uid) = request::create(&asking, &request, None).await?;
        tracing::info!(csr = %name, "certificate signing request made for the node's client certificate");
        let cert = request::wait_for_certificate(&asking, &name, &uid, ROTATION_WAIT).await?;
        let (store, key) = (self.store.clone(), request.key_pem.clone());
        let pair = tokio::task::spawn_blocking(move || store.update(&cert, &key)).await??;
        let client = client_for(&self.kubeconfig, Some(&pair), &self.source).await?;
        *self.presented.write().unwrap_or_else(|e| e.into_inner()) = client;
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(pair.clone());
        Ok((pair, name))
    }
}

fn secrecy_text(secret: &secrecy::SecretString) -> &str {
    use secrecy::ExposeSecret as _;
    secret.expose_secret()
}

/// A client for the kubeconfig's cluster: as `pair` alone when given (client-go's
/// `AnonymousClientConfig` plus the certificate), else with the kubeconfig's own credentials.
async fn client_for(file: &Kubeconfig, pair: Option<&CertPair>, source: &str) -> Result<kube::Client, CertError> {
    let bad = |problem: KubeconfigProblem| CertError::Kubeconfig {
        path: source.to_string(),
        source: problem,
    };
    let mut file = file.clone();
    if let Some(pair) = pair {
        let (user, _) = kubeconfig::current_user(&file).map_err(bad)?;
        let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem.as_bytes());
        let auth = AuthInfo {
            client_certificate_data: Some(encode(&pair.cert_pem)),
            client_key_data: Some(encode(&pair.key_pem).into()),
            ..Default::default()
        };
        for named in file.auth_infos.iter_mut().filter(|a| a.name == user) {
            named.auth_info = Some(auth.clone());
        }
    }
    kubeconfig::client(file).await.map_err(bad)
}

/// The tower service behind [`ClientCertificates::client`]: each request through the client
/// presented at that moment.
struct Presented(Arc<RwLock<kube::Client>>);

impl tower::Service<http::Request<kube::client::Body>> for Presented {
    type Response = http::Response<kube::client::Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Self::Response, kube::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let client = self.0.read().unwrap_or_else(|e| e.into_inner()).clone();
        Box::pin(async move { client.send(request).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_an_answer_a_5xx_is_not() {
        let api = |code: u16| CertError::Api {
            operation: "create certificatesigningrequest".into(),
            source: kube::Error::Api(kube::core::Status::failure("x", "Y").with_code(code).boxed()),
        };
        assert!(api(401).server_answered() && api(403).server_answered() && api(404).server_answered());
        assert!(!api(503).server_answered() && !api(500).server_answered());
        assert!(CertError::Deleted { name: "x".into() }.server_answered());
    }
}
