//! [`ApiServer`]: an in-memory Kubernetes API server for testing the agent's API-server mode.
//!
//! It speaks the real REST protocol for what a node uses — discovery, pods (with `status`,
//! `binding` and `ephemeralcontainers`), nodes (with `status`), events, secrets, configmaps,
//! services, serviceaccounts (with `token`), namespaces, `coordination.k8s.io/v1` leases and
//! `node.k8s.io/v1` runtimeclasses (with the RuntimeClass admission plugin); get, list, watch, create, update, merge / strategic-merge /
//! JSON / apply patch and delete — with one monotonically increasing resourceVersion, 409 on a
//! stale update, lists paged with `limit`/`continue`, and a bounded history for watches (a watch from a resourceVersion older than
//! the history gets kube-apiserver's ERROR event with a 410 `Expired` Status). Bodies are decoded
//! through the k8s-openapi types, so it is no more lenient than kube-apiserver: wrong types,
//! unknown fields and invalid values are rejected (see [`validate`]). Bodies come as JSON, YAML,
//! or protobuf for Secrets and ConfigMaps (what `kubectl create secret|configmap` sends).
//!
//! As a real cluster ([`cluster`], [`token`]): every namespace has a `default` ServiceAccount
//! and the `kube-root-ca.crt` ConfigMap (the CA made up at start, in plain HTTP mode too);
//! `default` has the `kubernetes` Service at 10.96.0.1; Services get ClusterIPs from
//! 10.96.0.0/12 and node ports; the ServiceAccount admission plugin defaults a pod's account,
//! refuses a missing one and adds the `kube-api-access-<5>` projected volume and its mounts
//! (`ApiServerConfig::service_account_admission`, default on); `serviceaccounts/<name>/token`
//! answers TokenRequests with ES256 JWTs carrying upstream's claims, which also authenticate
//! to the server ([`ApiServer::verify_service_account_token`], [`ApiServer::issued_tokens`]).
//!
//! TokenReview and SubjectAccessReview ([`review`]) answer as kube-apiserver for tokens it
//! knows ([`ApiServer::add_user_token`], its own, the service account tokens it issued) and by
//! rules a test sets ([`ApiServer::add_access_rule`]; default: `system:masters` allowed),
//! counted ([`ApiServer::token_reviews`], [`ApiServer::access_reviews`]). `pods/log`,
//! `pods/exec`, `pods/attach`, `pods/portforward` and `nodes/{name}/proxy` go to the node's
//! kubelet (`proxy`) over HTTPS with the API server's kubelet client certificate
//! ([`KUBELET_CLIENT_USER`], CA at [`ApiServer::kubelet_client_ca_path`]), upgrades
//! (SPDY, WebSocket) passed through byte for byte.
//!
//! TLS bootstrap ([`csr`]): `certificates.k8s.io/v1` CertificateSigningRequests, bootstrap
//! tokens ([`ApiServer::add_bootstrap_token`], [`ApiServer::bootstrap_kubeconfig`]), client
//! certificates as user = CN, groups = O, and kube-controller-manager's csrapproving and
//! csrsigning (`ApiServerConfig::csr_auto_approve`, `ApiServerConfig::csr_signing_duration`)
//! signing with the CA the server trusts.
//!
//! A small [`scheduler`] binds pods created without `spec.nodeName` to a node that fits them,
//! with kube-scheduler's condition, events and messages (`ApiServerConfig::scheduler`).
//!
//! Pods go through kube-apiserver's admission chain in its order ([`admission`]):
//! ServiceAccount, Priority, DefaultTolerationSeconds, RuntimeClass. With
//! `ApiServerConfig::node_authorization`, requests from nodes ([`ApiServer::node_token`],
//! [`ApiServer::node_kubeconfig`]: `system:node:<name>` in `system:nodes`) are authorized by
//! the Node authorizer ([`node_authorizer`]) and admitted by NodeRestriction
//! ([`node_restriction`]), as on a kubeadm cluster; every 403 a node got is in
//! [`ApiServer::node_refusals`].
//!
//! Not covered: kube-apiserver's own WebSocket→SPDY translation for exec/attach/portforward
//! (WebSocket upgrades go to the kubelet as they are); `PodLogOptions` are passed to the kubelet
//! unchecked; `nodes/{name}:{port}/proxy`; other admission (no quota, limit ranges,
//! webhooks); RBAC beyond nodes (any other credential may do everything); protobuf for other kinds; later list
//! pages are read from current objects rather than a snapshot; server-side apply tracks no
//! field managers.
//!
//! Plain HTTP or HTTPS (a CA and certificate made up at start, the CA in the kubeconfig) on
//! `127.0.0.1`, bearer-token auth, served by actix-web on a thread with its own
//! runtime, so synchronous tests use it directly. `kubectl` works against it (server-side
//! Tables for `kubectl get`, `fieldValidation=Strict` for `kubectl create`), and so does kube-rs.
//!
//! It is a test fixture, never a product feature. The `test-apiserver` binary serves one by
//! hand: `make test-apiserver`.

pub mod admission;
mod authn;
pub mod cluster;
pub mod csr;
mod error;
mod front;
mod http;
mod list_options;
mod lookup;
mod names;
pub mod node_authorizer;
pub mod node_ipam;
pub mod node_restriction;
mod options;
mod patch;
mod protobuf;
mod proxy;
pub mod resources;
pub mod review;
pub mod scheduler;
mod selectors;
mod status_rules;
mod store;
mod strategic;
mod table;
pub mod token;
mod user;
pub mod validate;

pub use error::{ApiError, Cause};
pub use patch::PatchType;
pub use review::{AccessRule, TokenUser};
pub use store::{DeleteOptions, Subresource, WriteOptions, DEFAULT_HISTORY};
pub use token::{IssuedToken, KubernetesClaims, ObjectRef, ServiceAccountClaims, TokenError};

use actix_web::{web, App, HttpServer};
use serde_json::Value;
use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The user of the API server's client certificate to kubelets (group `system:masters`).
pub const KUBELET_CLIENT_USER: &str = "kube-apiserver-kubelet-client";

/// The kubectl the fixture's helpers run.
pub const KUBECTL: &str = "/usr/bin/kubectl";

/// An IPv4 address of this host that the kubelet proxy accepts as a Node's address: global
/// unicast, as kube-apiserver's `isProxyableHostname` (`pkg/registry/core/node/strategy.go`)
/// requires for `nodes/{name}/proxy`, which refuses a Node at 127.0.0.1 with `address not
/// allowed`. The first such address of any interface (Docker's bridge counts); `None` on a host
/// with loopback only. A test that reaches a kubelet through `nodes/proxy` gives the agent this
/// as `--node-ip` and has it listen there.
pub fn proxyable_host_ip() -> Option<std::net::IpAddr> {
    if_addrs::get_if_addrs()
        .ok()?
        .into_iter()
        .map(|i| i.ip())
        .find(|ip| match ip {
            std::net::IpAddr::V4(v4) => {
                !(v4.is_loopback() || v4.is_link_local() || v4.is_unspecified() || v4.is_multicast())
            }
            std::net::IpAddr::V6(_) => false,
        })
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The raw query string.
    pub query: String,
    /// `Content-Type`, if sent.
    pub content_type: Option<String>,
    /// `Accept`, if sent.
    pub accept: Option<String>,
    /// `User-Agent`, if sent.
    pub user_agent: Option<String>,
    /// The body, as text.
    pub body: String,
}

/// An injected failure: the next `remaining` requests whose method matches (any, if `None`) and
/// whose path contains `path_contains` are answered with `status` and a `Status` body.
#[derive(Debug, Clone)]
pub struct Fault {
    /// Method to match, or any.
    pub method: Option<String>,
    /// Substring of the path to match.
    pub path_contains: String,
    /// HTTP status to answer with (429 and 503 carry `Retry-After: 1`).
    pub status: u16,
    /// How many more requests to fail.
    pub remaining: usize,
}

/// Knobs for [`ApiServer::start_with`].
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    /// Address to bind; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Changes kept for watches that resume from a resourceVersion.
    pub history: usize,
    /// How often watches with `allowWatchBookmarks=true` get a bookmark.
    pub bookmark_interval: Duration,
    /// The bearer token clients must send; random if `None`.
    pub token: Option<String>,
    /// Print one line per request to stderr (default: if `TEST_APISERVER_LOG` is set).
    pub log_requests: bool,
    /// Serve HTTPS with a certificate for `127.0.0.1` and `localhost` signed by a CA made up at
    /// start ([`ApiServer::ca_pem`]), as a real API server does.
    pub tls: bool,
    /// Run the ServiceAccount admission plugin on pod create, as a real cluster does: a pod
    /// gets `serviceAccountName: default` and the `kube-api-access-<5>` projected volume
    /// mounted in its containers. Default true; off only for tests of agents that cannot
    /// mount those volumes.
    pub service_account_admission: bool,
    /// Run [`scheduler`]: pods created without `spec.nodeName` are bound to a node that fits
    /// them, as kube-scheduler would. Default true.
    pub scheduler: bool,
    /// Authorize requests from nodes (users `system:node:<name>` in `system:nodes`, such as
    /// [`ApiServer::node_token`]'s) as `--authorization-mode=Node,RBAC` and admit them through
    /// NodeRestriction, as a kubeadm cluster does ([`node_authorizer`], [`node_restriction`]):
    /// a node reads only the secrets, configmaps and pods of pods bound to it, writes only its
    /// own Node, Lease, mirror pods and pod statuses. Other users may still do everything.
    /// Default false.
    pub node_authorization: bool,
    /// Run kube-controller-manager's csrapproving ([`csr::controllers`]): kubelet client CSRs
    /// from a kubeadm bootstrap token (`nodeclient`) or from the node they name
    /// (`selfnodeclient`) are approved. Default true; off, CSRs wait for `kubectl certificate
    /// approve`.
    pub csr_auto_approve: bool,
    /// csrsigning's certificate lifetime (kube-controller-manager's
    /// `--cluster-signing-duration`, default 8760h); a CSR's `spec.expirationSeconds` may ask
    /// for less (never under 10 min). Set it short (30 s) to test rotation.
    pub csr_signing_duration: Duration,
    /// kube-controller-manager's `--cluster-cidr` with `--allocate-node-cidrs` ([`node_ipam`]):
    /// every Node gets a `/`[`ApiServerConfig::node_cidr_mask_size`] of it as
    /// `spec.podCIDR(s)`. Default none (Nodes get no pod CIDR, as without
    /// `--allocate-node-cidrs`).
    pub cluster_cidr: Option<String>,
    /// `--node-cidr-mask-size` (24).
    pub node_cidr_mask_size: u8,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history: DEFAULT_HISTORY,
            bookmark_interval: Duration::from_secs(10),
            token: None,
            log_requests: std::env::var_os("TEST_APISERVER_LOG").is_some(),
            tls: false,
            service_account_admission: true,
            scheduler: true,
            node_authorization: false,
            csr_auto_approve: true,
            csr_signing_duration: csr::controllers::DEFAULT_SIGNING_DURATION,
            cluster_cidr: None,
            node_cidr_mask_size: node_ipam::DEFAULT_NODE_MASK,
        }
    }
}

struct Running {
    handle: actix_web::dev::ServerHandle,
    thread: JoinHandle<()>,
}

/// The fixture's certificates: a CA made up at start, a server certificate and a client
/// certificate (user `test-admin`) it signed.
#[derive(Clone)]
struct Tls {
    /// The CA certificate, PEM, for clients.
    ca_pem: String,
    /// A client certificate and its key, PEM, that the server accepts instead of the token.
    client_pem: (String, String),
    /// The server's certificate and key; client certificates signed by the CA are verified.
    server: Arc<rustls::ServerConfig>,
    /// The API server's client certificate to kubelets (CN `kube-apiserver-kubelet-client`, O
    /// `system:masters`, signed by the CA), as TLS client configuration.
    kubelet_client: Arc<rustls::ClientConfig>,
    /// The CA's key, for csrsigning.
    authority: Arc<csr::controllers::Authority>,
}

/// Set on a connection whose client presented a certificate the CA signed: the user it
/// authenticates as (`CommonNameUserConversion`), or why it does not (expired, not yet valid).
#[derive(Debug, Clone)]
pub(crate) struct ClientCertificate(pub Result<TokenUser, authn::AuthnError>);

impl Tls {
    fn new() -> io::Result<Self> {
        let err = |e: rcgen::Error| io::Error::other(format!("cannot make certificates: {e}"));
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test-apiserver CA");
        let ca_key = rcgen::KeyPair::generate().map_err(err)?;
        let ca_cert = ca_params.self_signed(&ca_key).map_err(err)?;
        let ca = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().map_err(err)?;
        let mut params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).map_err(err)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test-apiserver");
        let cert = params.signed_by(&key, &ca).map_err(err)?;
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let client_key = rcgen::KeyPair::generate().map_err(err)?;
        let mut client_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        client_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test-admin");
        client_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let client = client_params.signed_by(&client_key, &ca).map_err(err)?;
        let kubelet_key = rcgen::KeyPair::generate().map_err(err)?;
        let mut kubelet_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        kubelet_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, KUBELET_CLIENT_USER);
        kubelet_params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:masters");
        kubelet_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let kubelet_cert = kubelet_params.signed_by(&kubelet_key, &ca).map_err(err)?;
        let kubelet_client = proxy::client_config(&kubelet_cert.pem(), &kubelet_key.serialize_pem())?;
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(ca_cert.der().clone())
            .map_err(|e| io::Error::other(format!("cannot trust the CA: {e}")))?;
        // Certificates are optional (a bearer token also authenticates) but verified when sent.
        let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
            .allow_unauthenticated()
            .build()
            .map_err(|e| io::Error::other(format!("cannot verify clients: {e}")))?;
        let verifier = Arc::new(authn::TimeLenientVerifier(verifier));
        let server = rustls::ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![cert.der().clone()], key)
            .map_err(|e| io::Error::other(format!("cannot use the certificate: {e}")))?;
        Ok(Tls {
            ca_pem: ca_cert.pem(),
            authority: Arc::new(csr::controllers::Authority { issuer: ca }),
            client_pem: (client.pem(), client_key.serialize_pem()),
            server: Arc::new(server),
            kubelet_client,
        })
    }
}

/// An in-memory API server on `127.0.0.1`; stops when dropped.
pub struct ApiServer {
    tls: Option<Tls>,
    shared: Arc<http::Shared>,
    addr: SocketAddr,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    running: Option<Running>,
}

fn random_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut token = String::new();
    for i in 0..2u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        token.push_str(&format!("{:016x}", h.finish()));
    }
    token
}

fn serve(listener: TcpListener, shared: Arc<http::Shared>, tls: Option<Tls>) -> io::Result<Running> {
    // actix-web listens on an internal port; the front (`front`) owns the public one.
    let internal = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let internal_addr = internal.local_addr()?;
    listener.set_nonblocking(true)?;
    let verified: front::Verified = Arc::default();
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("test-apiserver".into())
        .spawn(move || {
            let system = actix_web::rt::System::new();
            system.block_on(async move {
                let data = web::Data::from(shared.clone());
                let seen = verified.clone();
                let server = HttpServer::new(move || {
                    App::new()
                        .app_data(data.clone())
                        .app_data(web::PayloadConfig::new(4 << 20))
                        .route(
                            "/api/v1/namespaces/{ns}/pods/{name}/{sub:log|exec|attach|portforward}",
                            web::route().to(proxy::pod_subresource),
                        )
                        .route(
                            "/api/v1/nodes/{name}/proxy{rest:(/.*)?}",
                            web::route().to(proxy::node_proxy),
                        )
                        .default_service(web::to(http::dispatch))
                })
                .workers(2)
                .disable_signals()
                .shutdown_timeout(0)
                .on_connect(move |conn, extensions| {
                    // The front connected from this address for a client with a certificate.
                    let certified = conn
                        .downcast_ref::<actix_web::rt::net::TcpStream>()
                        .and_then(|tcp| tcp.peer_addr().ok())
                        .and_then(|peer| seen.lock().unwrap_or_else(|e| e.into_inner()).get(&peer).cloned());
                    if let Some(certificate) = certified {
                        extensions.insert(certificate);
                    }
                })
                .listen(internal);
                let server = match server {
                    Ok(s) => s.run(),
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let tls = tls.map(|t| {
                    let mut config = (*t.server).clone();
                    // HTTP/1.1 only: the front reads request heads and actix-web's internal
                    // port speaks plain HTTP/1.
                    config.alpn_protocols = vec![b"http/1.1".to_vec()];
                    Arc::new(config)
                });
                let front = actix_web::rt::spawn(front::accept_loop(listener, internal_addr, shared, tls, verified));
                let _ = tx.send(Ok(server.handle()));
                let _ = server.await;
                front.abort();
            });
        })?;
    let handle = rx
        .recv()
        .map_err(|_| io::Error::other("the API server thread died while starting"))??;
    Ok(Running { handle, thread })
}

impl ApiServer {
    /// Starts on `127.0.0.1:<free port>` with default settings.
    pub fn start() -> Self {
        Self::start_with(ApiServerConfig::default()).expect("cannot start the test API server")
    }

    /// Starts with `config`.
    pub fn start_with(config: ApiServerConfig) -> io::Result<Self> {
        let listener = TcpListener::bind(config.listen)?;
        let addr = listener.local_addr()?;
        // The CA exists in plain HTTP mode too: every namespace's kube-root-ca.crt publishes it.
        let certificates = Tls::new()?;
        let cluster = cluster::ClusterConfig {
            service_account_admission: config.service_account_admission,
            scheduler: config.scheduler,
            root_ca_pem: certificates.ca_pem.clone(),
            port: addr.port(),
            csr: csr::controllers::Controllers {
                auto_approve: config.csr_auto_approve,
                signing_duration: config.csr_signing_duration,
                authority: Some(certificates.authority.clone()),
            },
            node_cidrs: match &config.cluster_cidr {
                Some(cidr) => Some(
                    node_ipam::CidrSet::new(cidr, config.node_cidr_mask_size)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
                ),
                None => None,
            },
        };
        let shared = Arc::new(http::Shared {
            store: Mutex::new(store::Store::new(config.history, cluster)),
            issuer: token::Issuer::new()?,
            issued: Mutex::new(Vec::new()),
            token: config.token.unwrap_or_else(random_token),
            tls: config.tls,
            addr,
            requests: Mutex::new(VecDeque::new()),
            faults: Mutex::new(Vec::new()),
            bookmark_interval: config.bookmark_interval,
            log_requests: config.log_requests,
            user_tokens: Mutex::new(std::collections::HashMap::new()),
            access_rules: Mutex::new(Vec::new()),
            token_reviews: Mutex::new(Vec::new()),
            access_reviews: Mutex::new(Vec::new()),
            kubelet_client: certificates.kubelet_client.clone(),
            node_authorization: config.node_authorization,
            node_refusals: Mutex::new(Vec::new()),
        });
        let tls = config.tls.then_some(certificates.clone());
        let running = serve(listener, Arc::clone(&shared), tls.clone())?;
        let dir = tempfile::Builder::new().prefix("test-apiserver-").tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        let server = Self {
            tls,
            shared,
            addr,
            dir,
            kubeconfig,
            running: Some(running),
        };
        server.write_kubeconfig(&server.kubeconfig)?;
        std::fs::write(server.kubelet_client_ca_path(), &certificates.ca_pem)?;
        Ok(server)
    }

    /// `http://127.0.0.1:<port>`, or `https://` when serving TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// A kubeconfig that authenticates with the client certificate instead of the token (TLS
    /// only), in the server's directory.
    pub fn client_certificate_kubeconfig(&self) -> io::Result<PathBuf> {
        use base64::Engine as _;
        let tls = self
            .tls
            .as_ref()
            .ok_or_else(|| io::Error::other("client certificates need TLS"))?;
        let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test-apiserver\n  cluster:\n    \
             certificate-authority-data: {ca}\n    server: {url}\nusers:\n- name: test-admin\n  user:\n    \
             client-certificate-data: {cert}\n    client-key-data: {key}\ncontexts:\n- name: test-apiserver\n  \
             context:\n    cluster: test-apiserver\n    user: test-admin\ncurrent-context: test-apiserver\n",
            ca = b64(&tls.ca_pem),
            url = self.url(),
            cert = b64(&tls.client_pem.0),
            key = b64(&tls.client_pem.1),
        );
        let path = self.dir.path().join("kubeconfig-client-cert");
        std::fs::write(&path, text)?;
        Ok(path)
    }

    /// The client certificate and key of [`ApiServer::client_certificate_kubeconfig`] as PEM
    /// files in the server's directory (TLS only), for clients other than kubectl.
    pub fn client_certificate_files(&self) -> io::Result<(PathBuf, PathBuf)> {
        let tls = self
            .tls
            .as_ref()
            .ok_or_else(|| io::Error::other("client certificates need TLS"))?;
        let (cert, key) = (self.dir.path().join("client.crt"), self.dir.path().join("client.key"));
        std::fs::write(&cert, &tls.client_pem.0)?;
        std::fs::write(&key, &tls.client_pem.1)?;
        Ok((cert, key))
    }

    /// The CA certificate (PEM) that signed the server's certificate, when serving TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.tls.as_ref().map(|t| t.ca_pem.as_str())
    }

    /// The cluster's CA certificate (PEM), as every namespace's `kube-root-ca.crt` carries it
    /// (made up at start in plain HTTP mode too; the one that signs the server's certificate
    /// with TLS).
    pub fn root_ca_pem(&self) -> String {
        self.shared.store().root_ca_pem().to_string()
    }

    /// Verifies a service account token as kube-apiserver's authenticator does (signature,
    /// issuer, expiry, and that the service account and the pod, secret or node it is bound
    /// to still exist with the same UIDs) and returns its claims. Audiences are not checked:
    /// they are in the claims.
    pub fn verify_service_account_token(&self, token: &str) -> Result<ServiceAccountClaims, TokenError> {
        let store = self.shared.store();
        self.shared.issuer.verify(&store, token.trim())
    }

    /// Every token issued through TokenRequest so far, oldest first.
    pub fn issued_tokens(&self) -> Vec<IssuedToken> {
        self.shared.issued.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A file holding the CA (PEM) that signed the API server's client certificate to
    /// kubelets ([`KUBELET_CLIENT_USER`], group `system:masters`): give it to the agent as
    /// `--client-ca-file` so the proxied `pods/log`, `exec`, `attach`, `portforward` and
    /// `nodes/proxy` requests authenticate.
    pub fn kubelet_client_ca_path(&self) -> PathBuf {
        self.dir.path().join("kubelet-client-ca.crt")
    }

    /// Registers a bearer token that authenticates (to this server and in TokenReviews) as
    /// `user` with UID `uid` and `groups` (`system:authenticated` is added in reviews).
    pub fn add_user_token(&self, token: &str, user: &str, uid: &str, groups: &[&str]) {
        self.shared
            .user_tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                token.to_string(),
                TokenUser {
                    name: user.to_string(),
                    uid: uid.to_string(),
                    groups: groups.iter().map(|g| g.to_string()).collect(),
                },
            );
    }

    /// A new bearer token for node `node`: user `system:node:<node>` in the group
    /// `system:nodes`, a kubelet's identity. With [`ApiServerConfig::node_authorization`] its
    /// requests get the Node authorizer's and NodeRestriction's answers.
    pub fn node_token(&self, node: &str) -> String {
        let token = random_token();
        let user = format!("{}{node}", node_authorizer::NODE_USER_PREFIX);
        self.add_user_token(&token, &user, "", &[node_authorizer::NODES_GROUP]);
        token
    }

    /// A new bootstrap token (`<id>.<secret>`) as `kubeadm token create` makes it
    /// (`plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go`,
    /// `staging/src/k8s.io/cluster-bootstrap/token/api/types.go`): the Secret
    /// `kube-system/bootstrap-token-<id>` of type `bootstrap.kubernetes.io/token` with
    /// `usage-bootstrap-authentication` and `usage-bootstrap-signing` `"true"`,
    /// `auth-extra-groups: system:bootstrappers:kubeadm:default-node-token` and `expiration`
    /// when given (a past one makes a token that no longer authenticates). Requests with it are
    /// user `system:bootstrap:<id>` in `system:bootstrappers` and that group.
    pub fn add_bootstrap_token(&self, expiration: Option<std::time::SystemTime>) -> Result<String, ApiError> {
        let lower = |n: usize| -> String {
            random_token()
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .take(n)
                .collect()
        };
        let (id, secret) = (lower(6), lower(16));
        let mut data = serde_json::json!({
            "token-id": id,
            "token-secret": secret,
            "usage-bootstrap-authentication": "true",
            "usage-bootstrap-signing": "true",
            "auth-extra-groups": csr::controllers::KUBEADM_NODE_TOKEN_GROUP,
            "description": "test-apiserver bootstrap token",
        });
        if let Some(at) = expiration {
            let at = jiff::Timestamp::try_from(at).map_err(|e| ApiError::bad_request(format!("expiration: {e}")))?;
            data["expiration"] = serde_json::json!(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
        }
        use base64::Engine as _;
        let data: serde_json::Map<String, Value> = data
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| {
                let text = v.as_str().unwrap_or_default();
                (
                    k.clone(),
                    Value::from(base64::engine::general_purpose::STANDARD.encode(text)),
                )
            })
            .collect();
        self.create(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": format!("{}{id}", authn::BOOTSTRAP_SECRET_PREFIX), "namespace": authn::BOOTSTRAP_NAMESPACE},
            "type": authn::BOOTSTRAP_SECRET_TYPE,
            "data": data,
        }))?;
        Ok(format!("{id}.{secret}"))
    }

    /// A bootstrap kubeconfig (in the server's directory) as `kubeadm join` writes one: the
    /// server's cluster (with its CA under TLS) and a new [`ApiServer::add_bootstrap_token`]
    /// valid for 24 h (kubeadm's default TTL), user `tls-bootstrap-token-user`, for
    /// `dockerlet --bootstrap-kubeconfig`.
    pub fn bootstrap_kubeconfig(&self) -> io::Result<PathBuf> {
        let expiration = std::time::SystemTime::now() + Duration::from_secs(24 * 3600);
        let token = self
            .add_bootstrap_token(Some(expiration))
            .map_err(|e| io::Error::other(format!("cannot create the bootstrap token Secret: {}", e.message)))?;
        let admin = format!("token: {}\n", self.token());
        let text = self
            .kubeconfig()
            .replace("name: test-admin", "name: tls-bootstrap-token-user")
            .replace("user: test-admin", "user: tls-bootstrap-token-user")
            .replace(&admin, &format!("token: {token}\n"));
        let path = self.dir.path().join(format!("bootstrap-kubeconfig-{}", &token[..6]));
        std::fs::write(&path, text)?;
        Ok(path)
    }

    /// Every 403 a node got from the Node authorizer or NodeRestriction (with
    /// [`ApiServerConfig::node_authorization`]), as `<METHOD> <path>: <message>`, oldest first:
    /// what a real cluster would refuse the agent.
    pub fn node_refusals(&self) -> Vec<String> {
        self.shared
            .node_refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A kubeconfig (in the server's directory) for node `node`: the server's cluster (with its
    /// CA under TLS) and a new [`ApiServer::node_token`], for `dockerlet --kubeconfig`.
    pub fn node_kubeconfig(&self, node: &str) -> io::Result<PathBuf> {
        let token = self.node_token(node);
        let admin = format!("token: {}\n", self.token());
        let text = self
            .kubeconfig()
            .replace("name: test-admin", &format!("name: system:node:{node}"))
            .replace("user: test-admin", &format!("user: system:node:{node}"))
            .replace(&admin, &format!("token: {token}\n"));
        let path = self.dir.path().join(format!("kubeconfig-node-{node}"));
        std::fs::write(&path, text)?;
        Ok(path)
    }

    /// Adds a SubjectAccessReview rule after those already set (first match wins; with none
    /// matching, `system:masters` members are allowed and others are not).
    pub fn add_access_rule(&self, rule: AccessRule) {
        self.shared
            .access_rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(rule);
    }

    /// Forgets every SubjectAccessReview rule.
    pub fn clear_access_rules(&self) {
        self.shared
            .access_rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// The `spec` of every TokenReview received, oldest first.
    pub fn token_reviews(&self) -> Vec<Value> {
        self.shared
            .token_reviews
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The `spec` of every SubjectAccessReview received, oldest first.
    pub fn access_reviews(&self) -> Vec<Value> {
        self.shared
            .access_reviews
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bearer token clients must send.
    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// A kubeconfig (in a temporary directory that lives as long as the server) for kubectl,
    /// kube-rs and `dockerlet --kubeconfig`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The temporary directory holding the kubeconfig; tests may keep other files there.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The kubeconfig text: cluster `test-apiserver` at [`Self::url`] (with the CA when serving
    /// TLS), user `test-admin` with the token, context `test-apiserver` (namespace `default`) as
    /// the current context.
    pub fn kubeconfig(&self) -> String {
        use base64::Engine as _;
        let ca = match self.ca_pem() {
            Some(pem) => format!(
                "    certificate-authority-data: {}\n",
                base64::engine::general_purpose::STANDARD.encode(pem)
            ),
            None => String::new(),
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test-apiserver\n  cluster:\n{ca}    server: {url}\n\
             users:\n- name: test-admin\n  user:\n    token: {token}\ncontexts:\n- name: test-apiserver\n  context:\n    \
             cluster: test-apiserver\n    user: test-admin\n    namespace: default\ncurrent-context: test-apiserver\n\
             preferences: {{}}\n",
            url = self.url(),
            token = self.token()
        )
    }

    /// Writes [`Self::kubeconfig`] to `path` (creating its directory).
    pub fn write_kubeconfig(&self, path: &Path) -> io::Result<()> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, self.kubeconfig())
    }

    /// Runs `kubectl --kubeconfig <ours> <args>` (with a cache directory of its own, so
    /// discovery is never stale across servers).
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(KUBECTL)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("cannot run kubectl")
    }

    /// Like [`Self::kubectl`], but panics with its stderr unless it succeeds; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {} failed ({}):\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn resource(kind: &str) -> &'static resources::ResourceInfo {
        resources::by_name(kind).unwrap_or_else(|| panic!("the test API server does not serve {kind:?}"))
    }

    /// One object by resource (`pods`, `Pod`, `po`), namespace (ignored for cluster-scoped
    /// resources) and name.
    pub fn get(&self, kind: &str, ns: &str, name: &str) -> Option<Value> {
        self.shared.store().get(Self::resource(kind), ns, name).ok()
    }

    /// Every object of a resource, in all namespaces, ordered by namespace and name.
    pub fn list(&self, kind: &str) -> Vec<Value> {
        self.shared.store().all(Self::resource(kind))
    }

    /// Creates an object in-process, as a POST would (validation included). The resource comes
    /// from `apiVersion`/`kind`, the namespace from `metadata.namespace` (default `default`).
    pub fn create(&self, obj: Value) -> Result<Value, ApiError> {
        let api_version = obj["apiVersion"].as_str().unwrap_or("v1");
        let kind = obj["kind"].as_str().unwrap_or_default();
        let resource = resources::by_kind(api_version, kind)
            .ok_or_else(|| ApiError::bad_request(format!("no resource for {api_version} {kind}")))?;
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
        self.shared
            .store()
            .create(resource, &ns, obj, &WriteOptions::default())
            .map(|(o, _)| o)
    }

    /// Applies a patch in-process, as a PATCH would.
    pub fn patch(
        &self,
        kind: &str,
        ns: &str,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        sub: Subresource,
    ) -> Result<Value, ApiError> {
        let opts = WriteOptions {
            field_manager: Some("test".into()),
            ..WriteOptions::default()
        };
        self.shared
            .store()
            .patch(Self::resource(kind), ns, name, patch_type, patch, sub, &opts)
            .map(|(o, _, _)| o)
    }

    /// Deletes in-process, as a DELETE with `gracePeriodSeconds` would.
    pub fn delete(
        &self,
        kind: &str,
        ns: &str,
        name: &str,
        grace_period_seconds: Option<i64>,
    ) -> Result<Value, ApiError> {
        let opts = DeleteOptions {
            grace_period_seconds,
            ..DeleteOptions::default()
        };
        self.shared.store().delete(Self::resource(kind), ns, name, &opts)
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store().resource_version()
    }

    /// How many watches are open.
    pub fn watch_count(&self) -> usize {
        self.shared.store().watch_count()
    }

    /// Ends every open watch stream (cleanly, as when an API server closes them); clients must
    /// re-watch.
    pub fn drop_watches(&self) {
        self.shared.store().drop_watches();
    }

    /// Forgets the change history: a watch from any earlier resourceVersion gets 410 Expired.
    pub fn compact_history(&self) {
        self.shared.store().compact();
    }

    /// Answers the next `times` requests matching `method` (any if `None`) and `path_contains`
    /// with `status`.
    pub fn fail_requests(&self, method: Option<&str>, path_contains: &str, status: u16, times: usize) {
        self.shared
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Fault {
                method: method.map(str::to_string),
                path_contains: path_contains.to_string(),
                status,
                remaining: times,
            });
    }

    /// Every request received so far (the latest 10 000), oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        self.shared.requests.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Whether it is serving.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Stops serving: watches end, connections close, the port is released. The objects stay.
    pub fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            self.drop_watches();
            futures::executor::block_on(running.handle.stop(false));
            let _ = running.thread.join();
        }
    }

    /// Serves again on the same port, with the same objects and history (as an API server
    /// restarted over the same etcd).
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match TcpListener::bind(self.addr) {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("cannot bind {} again: {e}", self.addr),
            }
        };
        self.running = Some(
            serve(listener, Arc::clone(&self.shared), self.tls.clone()).expect("cannot restart the test API server"),
        );
    }

    /// Blocks until the server thread ends (never, unless stopped from elsewhere).
    pub fn wait(mut self) {
        if let Some(running) = self.running.take() {
            let _ = running.thread.join();
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop();
    }
}
