//! The kubelet API's TLS: the serving certificate (`--tls-cert-file`/`--tls-private-key-file`,
//! or a self-signed one kept as `<cert-dir>/kubelet.crt` and `kubelet.key`, made once and
//! reused), `--tls-min-version`, `--tls-cipher-suites` (Go's names, as kubelet takes them),
//! client certificates verified against `--client-ca-file`, and the log of refused handshakes
//! ([`HandshakeLog`]).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{AlertDescription, CertificateError, RootCertStore, ServerConfig, SupportedCipherSuite};

use super::auth::UserInfo;

/// The TLS settings, as the flags give them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsSettings {
    /// `--tls-cert-file` and `--tls-private-key-file` (both or neither).
    pub cert_and_key: Option<(PathBuf, PathBuf)>,
    /// `--cert-dir`: where the self-signed pair is kept.
    pub cert_dir: PathBuf,
    /// The node's name and IPs, the self-signed certificate's subject alternative names.
    pub node_name: String,
    /// Its IPs.
    pub node_ips: Vec<IpAddr>,
    /// `--client-ca-file`: client certificates it signed authenticate.
    pub client_ca_file: Option<PathBuf>,
    /// `--tls-min-version` (`VersionTLS12`, `VersionTLS13`).
    pub min_version: Option<String>,
    /// `--tls-cipher-suites` (Go's names); empty for rustls' defaults.
    pub cipher_suites: Vec<String>,
}

/// Why the TLS configuration cannot be built, naming the flag.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A flag's value is not supported.
    #[error("{flag}: {reason}")]
    Invalid {
        /// The flag.
        flag: &'static str,
        /// Why.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("{flag}: {path}: {source}")]
    Io {
        /// The flag naming the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// rustls refused the configuration (a key not matching its certificate).
    #[error("{flag}: {source}")]
    Rustls {
        /// The flag.
        flag: &'static str,
        /// rustls' error.
        #[source]
        source: rustls::Error,
    },
}

/// Go's names of the suites Go and kubelet know but rustls does not implement (CBC, RSA key
/// exchange, 3DES, RC4): refused by name rather than silently dropped.
const UNSUPPORTED_GO_SUITES: &[&str] = &[
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// Go's cipher suite names for the suites rustls implements.
fn cipher_suite(name: &str) -> Option<SupportedCipherSuite> {
    use ring::cipher_suite::*;
    Some(match name {
        "TLS_AES_128_GCM_SHA256" => TLS13_AES_128_GCM_SHA256,
        "TLS_AES_256_GCM_SHA384" => TLS13_AES_256_GCM_SHA384,
        "TLS_CHACHA20_POLY1305_SHA256" => TLS13_CHACHA20_POLY1305_SHA256,
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256" => {
            TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        }
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" => {
            TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
        }
        _ => return None,
    })
}

/// The crypto provider with `--tls-cipher-suites` applied (TLS 1.3 suites stay, as in Go,
/// where the list only governs TLS 1.2).
pub fn provider(names: &[String]) -> Result<CryptoProvider, TlsError> {
    let mut provider = ring::default_provider();
    if names.is_empty() {
        return Ok(provider);
    }
    let mut suites: Vec<SupportedCipherSuite> = Vec::new();
    for name in names {
        match cipher_suite(name) {
            Some(s) => suites.push(s),
            None if UNSUPPORTED_GO_SUITES.contains(&name.as_str()) => {
                return Err(TlsError::Invalid {
                    flag: "--tls-cipher-suites",
                    reason: format!("{name} is not supported by this agent (rustls offers only AEAD suites)"),
                })
            }
            None => {
                return Err(TlsError::Invalid {
                    flag: "--tls-cipher-suites",
                    reason: format!("unknown cipher suite {name:?}"),
                })
            }
        }
    }
    for s in ring::DEFAULT_CIPHER_SUITES {
        if matches!(s, SupportedCipherSuite::Tls13(_)) && !suites.iter().any(|x| x.suite() == s.suite()) {
            suites.push(*s);
        }
    }
    provider.cipher_suites = suites;
    Ok(provider)
}

static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// The protocol versions `--tls-min-version` allows.
pub fn versions(min: Option<&str>) -> Result<&'static [&'static rustls::SupportedProtocolVersion], TlsError> {
    match min {
        None | Some("") | Some("VersionTLS12") => Ok(rustls::ALL_VERSIONS),
        Some("VersionTLS13") => Ok(TLS13_ONLY),
        Some(v @ ("VersionTLS10" | "VersionTLS11")) => Err(TlsError::Invalid {
            flag: "--tls-min-version",
            reason: format!("{v} is not supported: the agent serves TLS 1.2 and later only"),
        }),
        Some(other) => Err(TlsError::Invalid {
            flag: "--tls-min-version",
            reason: format!("unknown version {other:?} (VersionTLS12 or VersionTLS13)"),
        }),
    }
}

/// The serving certificate and key as PEM: the given files, else the pair kept in the cert
/// dir, else a new self-signed pair written there (key mode 0600). Blocking file work: call at
/// start-up.
pub fn serving_pem(settings: &TlsSettings) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let read = |flag, path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Io {
            flag,
            path: path.to_path_buf(),
            source,
        })
    };
    if let Some((cert, key)) = &settings.cert_and_key {
        return Ok((read("--tls-cert-file", cert)?, read("--tls-private-key-file", key)?));
    }
    let cert_path = settings.cert_dir.join("kubelet.crt");
    let key_path = settings.cert_dir.join("kubelet.key");
    if cert_path.exists() && key_path.exists() {
        return Ok((read("--cert-dir", &cert_path)?, read("--cert-dir", &key_path)?));
    }
    let mut names = vec![settings.node_name.clone()];
    names.extend(settings.node_ips.iter().map(IpAddr::to_string));
    let generated = rcgen::generate_simple_self_signed(names).map_err(|e| TlsError::Invalid {
        flag: "--cert-dir",
        reason: format!("cannot make a self-signed certificate: {e}"),
    })?;
    let cert = generated.cert.pem().into_bytes();
    let key = generated.signing_key.serialize_pem().into_bytes();
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TlsError::Io {
            flag: "--cert-dir",
            path,
            source,
        }
    };
    std::fs::create_dir_all(&settings.cert_dir).map_err(io(&settings.cert_dir))?;
    std::fs::write(&cert_path, &cert).map_err(io(&cert_path))?;
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&key_path)
            .map_err(io(&key_path))?;
        f.write_all(&key).map_err(io(&key_path))?;
    }
    tracing::info!(cert = %cert_path.display(), "made a self-signed serving certificate");
    Ok((cert, key))
}

/// The rustls server configuration. Blocking (reads files): call at start-up.
pub fn server_config(settings: &TlsSettings) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(provider(&settings.cipher_suites)?);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions(settings.min_version.as_deref())?)
        .map_err(|source| TlsError::Rustls {
            flag: "--tls-cipher-suites",
            source,
        })?;
    let builder = match &settings.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| TlsError::Invalid {
                    flag: "--client-ca-file",
                    reason: format!("{}: {e}", path.display()),
                })?;
            for cert in certs {
                roots.add(cert).map_err(|source| TlsError::Rustls {
                    flag: "--client-ca-file",
                    source,
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                // No certificate: the request goes on to token or anonymous authentication.
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::Invalid {
                    flag: "--client-ca-file",
                    reason: e.to_string(),
                })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let (cert_pem, key_pem) = serving_pem(settings)?;
    let flag = if settings.cert_and_key.is_some() {
        "--tls-cert-file"
    } else {
        "--cert-dir"
    };
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Invalid {
            flag,
            reason: format!("bad certificate PEM: {e}"),
        })?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::Invalid {
        flag: if settings.cert_and_key.is_some() {
            "--tls-private-key-file"
        } else {
            "--cert-dir"
        },
        reason: format!("bad private key PEM: {e}"),
    })?;
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|source| TlsError::Rustls { flag, source })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The user a verified client certificate names: CN the user, O values the groups.
pub fn user_of(cert: &CertificateDer<'_>) -> Option<UserInfo> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let subject = parsed.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?.to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some(UserInfo {
        name,
        groups,
        ..Default::default()
    })
}

/// How loud a refused handshake is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalLevel {
    /// A client certificate was refused: someone holds a certificate the node does not take.
    Warn,
    /// The client broke off or spoke something else than the TLS the agent serves.
    Info,
    /// The connection ended or stalled before the handshake said anything (TCP probes, port
    /// scans): logged at `debug` only, and not rate-limited, so they never hide a refusal.
    Debug,
}

/// A failed TLS handshake on the kubelet API, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// How loud.
    pub level: RefusalLevel,
    /// Why, for a reader who has not seen rustls' error enums.
    pub reason: String,
}

impl Refusal {
    fn new(level: RefusalLevel, reason: impl Into<String>) -> Self {
        Refusal {
            level,
            reason: reason.into(),
        }
    }

    /// The handshake did not end within `limit` (actix's handshake timeout).
    pub fn timed_out(limit: Duration) -> Self {
        Refusal::new(
            RefusalLevel::Debug,
            format!("the handshake did not finish within {limit:?}"),
        )
    }
}

/// Why the handshake failed, from the error of the TLS stream (tokio-rustls wraps rustls'
/// error in an `InvalidData` I/O error; anything else is the connection's own).
pub fn refusal(error: &std::io::Error) -> Refusal {
    match error.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
        Some(tls) => tls_refusal(tls),
        None => Refusal::new(
            RefusalLevel::Debug,
            format!("the connection ended during the handshake ({error})"),
        ),
    }
}

fn tls_refusal(error: &rustls::Error) -> Refusal {
    use rustls::Error as E;
    let (level, reason) = match error {
        E::InvalidCertificate(e) => (RefusalLevel::Warn, certificate_reason(e)),
        E::NoCertificatesPresented => (RefusalLevel::Warn, "the client sent no certificate".to_string()),
        E::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnsupportedCertificate),
        ) => (
            RefusalLevel::Info,
            format!("the client refused the agent's serving certificate (alert {alert:?})"),
        ),
        E::AlertReceived(alert) => (
            RefusalLevel::Info,
            format!("the client ended the handshake (alert {alert:?})"),
        ),
        E::PeerIncompatible(why) => (
            RefusalLevel::Info,
            format!("the client shares no TLS version, cipher suite or key exchange with the agent ({why:?})"),
        ),
        E::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => (
            RefusalLevel::Info,
            "the client does not speak TLS (an HTTP request to the HTTPS port?)".to_string(),
        ),
        other => (
            RefusalLevel::Info,
            format!("the client broke the TLS protocol: {other}"),
        ),
    };
    Refusal::new(level, reason)
}

/// A refused client certificate in words; webpki's errors that rustls has no variant for come
/// wrapped in [`CertificateError::Other`].
// rustls still gives the deprecated `UnsupportedSignatureAlgorithm` for some of webpki's errors.
#[allow(deprecated)]
fn certificate_reason(error: &CertificateError) -> String {
    use CertificateError as C;
    let words = match error {
        C::UnknownIssuer => "client certificate is not signed by a CA of --client-ca-file (unknown authority)",
        C::Expired | C::ExpiredContext { .. } => "client certificate has expired",
        C::NotValidYet | C::NotValidYetContext { .. } => "client certificate is not valid yet",
        C::BadSignature => "client certificate's signature does not verify",
        C::BadEncoding => "client certificate is malformed",
        C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
            "client certificate is not for client authentication (its extended key usage lacks clientAuth)"
        }
        C::UnsupportedSignatureAlgorithm
        | C::UnsupportedSignatureAlgorithmContext { .. }
        | C::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
            "client certificate is signed with an algorithm the agent does not support"
        }
        C::Revoked => "client certificate is revoked",
        C::UnhandledCriticalExtension => "client certificate has a critical extension the agent does not know",
        C::Other(other) => match other.0.downcast_ref::<webpki::Error>() {
            Some(webpki::Error::UnsupportedCertVersion) => {
                "client certificate is X.509 v1; only v3 certificates are accepted"
            }
            Some(webpki::Error::CaUsedAsEndEntity) => "client certificate is a CA certificate",
            _ => return format!("client certificate refused: {other}"),
        },
        other => return format!("client certificate refused: {other}"),
    };
    words.to_string()
}

/// How often one address gets a line about refused handshakes.
pub const REFUSAL_LOG_WINDOW: Duration = Duration::from_secs(10);

/// How many addresses [`HandshakeLog`] tracks; beyond, new addresses share one line per window.
const REFUSAL_LOG_PEERS: usize = 1024;

/// One address's lines in the current window.
#[derive(Debug)]
struct PeerWindow {
    /// When its last line was logged.
    logged_at: Instant,
    /// Refusals since then not logged.
    suppressed: u64,
}

/// The log of refused TLS handshakes, as Go's HTTP server logs kubelet's (`http: TLS handshake
/// error from <addr>: <err>`, net/http `conn.serve`), but in words and rate-limited: at most
/// one line per client address (the IP: a client's port changes with every connection) per
/// window, the next line telling how many were left out. Windows that ended are forgotten once
/// the table is full; new addresses then share one window.
#[derive(Debug)]
pub struct HandshakeLog {
    window: Duration,
    max_peers: usize,
    peers: Mutex<HashMap<IpAddr, PeerWindow>>,
}

impl Default for HandshakeLog {
    fn default() -> Self {
        HandshakeLog::new(REFUSAL_LOG_WINDOW, REFUSAL_LOG_PEERS)
    }
}

impl HandshakeLog {
    /// A log allowing one line per address per `window`, tracking up to `max_peers` addresses.
    pub fn new(window: Duration, max_peers: usize) -> Self {
        HandshakeLog {
            window,
            max_peers,
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a refusal from `ip` at `now` gets a line: with how many were left out since the
    /// address's last line, or `None` (counted for that next line).
    pub fn admit(&self, ip: IpAddr, now: Instant) -> Option<u64> {
        let mut peers = self.peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !peers.contains_key(&ip) && peers.len() >= self.max_peers {
            let window = self.window;
            peers.retain(|_, p| now.saturating_duration_since(p.logged_at) < window);
        }
        let key = if peers.contains_key(&ip) || peers.len() < self.max_peers {
            ip
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        };
        match peers.get_mut(&key) {
            Some(p) if now.saturating_duration_since(p.logged_at) < self.window => {
                p.suppressed += 1;
                None
            }
            Some(p) => {
                p.logged_at = now;
                Some(std::mem::take(&mut p.suppressed))
            }
            None => {
                peers.insert(
                    key,
                    PeerWindow {
                        logged_at: now,
                        suppressed: 0,
                    },
                );
                Some(0)
            }
        }
    }

    /// Logs the refused handshake of `peer` (rate-limited unless at `debug`); `detail` is the
    /// error as the TLS library gave it.
    pub fn refused(&self, peer: SocketAddr, refusal: &Refusal, detail: &dyn std::fmt::Display) {
        let suppressed = match refusal.level {
            RefusalLevel::Debug => 0,
            _ => match self.admit(peer.ip(), Instant::now()) {
                Some(n) => n,
                None => return,
            },
        };
        let reason = &refusal.reason;
        match refusal.level {
            RefusalLevel::Warn => tracing::warn!(
                server = "kubelet-api",
                suppressed,
                error = %detail,
                "TLS handshake error from {peer}: {reason}"
            ),
            RefusalLevel::Info => tracing::info!(
                server = "kubelet-api",
                suppressed,
                error = %detail,
                "TLS handshake error from {peer}: {reason}"
            ),
            RefusalLevel::Debug => tracing::debug!(
                server = "kubelet-api",
                error = %detail,
                "TLS handshake error from {peer}: {reason}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's names map onto rustls' suites; CBC ones and unknown names are refused naming the flag.
    #[test]
    fn cipher_suites_by_go_name() {
        let p = provider(&["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into()]).unwrap();
        assert!(p
            .cipher_suites
            .contains(&ring::cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256));
        assert!(!p
            .cipher_suites
            .contains(&ring::cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384));
        let e = provider(&["TLS_RSA_WITH_AES_128_CBC_SHA".into()]).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("--tls-cipher-suites: TLS_RSA_WITH_AES_128_CBC_SHA is not supported"));
        let e = provider(&["NOPE".into()]).unwrap_err();
        assert_eq!(e.to_string(), "--tls-cipher-suites: unknown cipher suite \"NOPE\"");
        assert!(versions(Some("VersionTLS10")).is_err());
        assert_eq!(versions(Some("VersionTLS13")).unwrap().len(), 1);
    }

    /// The self-signed pair is made once under the cert dir and reused.
    #[test]
    fn self_signed_pair_is_kept_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let settings = TlsSettings {
            cert_dir: dir.path().join("pki"),
            node_name: "n1".into(),
            node_ips: vec!["127.0.0.1".parse().unwrap()],
            ..Default::default()
        };
        server_config(&settings).unwrap();
        let first = std::fs::read(dir.path().join("pki/kubelet.crt")).unwrap();
        server_config(&settings).unwrap();
        assert_eq!(std::fs::read(dir.path().join("pki/kubelet.crt")).unwrap(), first);
    }

    /// A client certificate's CN is the user and its O values the groups.
    #[test]
    fn user_from_certificate_subject() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:masters");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let user = user_of(cert.der()).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["system:masters"]);
    }

    /// One line per address per window, the next one counting those left out; another address
    /// has its own window; with the table full, new addresses share one window until old
    /// windows end.
    #[test]
    fn refusals_are_logged_once_per_address_per_window() {
        let log = HandshakeLog::new(Duration::from_secs(10), 2);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let (a, b, c, d): (IpAddr, IpAddr, IpAddr, IpAddr) = (
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            "10.0.0.3".parse().unwrap(),
            "2001:db8::4".parse().unwrap(),
        );
        assert_eq!(log.admit(a, at(0)), Some(0));
        assert_eq!(log.admit(a, at(1)), None);
        assert_eq!(log.admit(a, at(2)), None);
        assert_eq!(log.admit(b, at(1)), Some(0));
        // Full: c and d share a window.
        assert_eq!(log.admit(c, at(3)), Some(0));
        assert_eq!(log.admit(d, at(4)), None);
        assert_eq!(log.admit(a, at(10)), Some(2), "the two left out are counted");
        assert_eq!(log.admit(a, at(11)), None);
        assert_eq!(log.admit(b, at(9)), None);
        // Every window has ended: c gets one of its own again.
        assert_eq!(log.admit(c, at(30)), Some(0));
        assert_eq!(log.admit(c, at(31)), None);
    }

    /// Accepts any serving certificate: the tests look at the server's side of the handshake.
    #[derive(Debug)]
    struct AnyServer(Arc<CryptoProvider>);

    impl rustls::client::danger::ServerCertVerifier for AnyServer {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
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

    /// Presents its certificate as it is (`with_client_auth_cert` would parse it, and refuse a
    /// v1 one itself; OpenSSL and Go clients send it).
    #[derive(Debug)]
    struct Present(Arc<rustls::sign::CertifiedKey>);

    impl rustls::client::ResolvesClientCert for Present {
        fn resolve(&self, _: &[&[u8]], _: &[rustls::SignatureScheme]) -> Option<Arc<rustls::sign::CertifiedKey>> {
            Some(self.0.clone())
        }

        fn has_certs(&self) -> bool {
            true
        }
    }

    /// Moves everything `from` has to send into `to`.
    fn pass(from: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>, to: &mut Vec<u8>) {
        while from.wants_write() {
            from.write_tls(to).unwrap();
        }
    }

    /// The server's error for an in-memory handshake with a client presenting `cert` and `key`
    /// (PEM); `None` if it succeeded. The error is wrapped in an I/O error, as tokio-rustls
    /// gives it to the acceptor.
    fn handshake(server: &ServerConfig, cert: &str, key: &str) -> Option<std::io::Error> {
        let provider = Arc::new(ring::default_provider());
        let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
        let key = provider.key_provider.load_private_key(key).unwrap();
        let present = Present(Arc::new(rustls::sign::CertifiedKey::new(chain, key)));
        let client = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
            .with_client_cert_resolver(Arc::new(present));
        let name = rustls::pki_types::ServerName::try_from("node").unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(client), name).unwrap();
        let mut server = rustls::ServerConnection::new(Arc::new(server.clone())).unwrap();
        while client.is_handshaking() || server.is_handshaking() {
            let mut bytes = Vec::new();
            pass(&mut client, &mut bytes);
            let mut wire = &bytes[..];
            while !wire.is_empty() {
                server.read_tls(&mut wire).unwrap();
            }
            if let Err(e) = server.process_new_packets() {
                return Some(std::io::Error::new(std::io::ErrorKind::InvalidData, e));
            }
            let mut bytes = Vec::new();
            pass(&mut server, &mut bytes);
            let mut wire = &bytes[..];
            while !wire.is_empty() {
                client.read_tls(&mut wire).unwrap();
            }
            client.process_new_packets().unwrap();
        }
        None
    }

    /// A client certificate signed by `issuer`, valid from `from` to `to` (years).
    fn client_cert(issuer: &rcgen::Issuer<'_, rcgen::KeyPair>, from: i32, to: i32) -> (String, String) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = rcgen::date_time_ymd(from, 1, 1);
        params.not_after = rcgen::date_time_ymd(to, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn ca(name: &str) -> (String, rcgen::Issuer<'static, rcgen::KeyPair>) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), rcgen::Issuer::new(params, key))
    }

    /// What rustls says about the client certificates a node refuses, and the words the log
    /// gives it: an X.509 v1 certificate signed by a trusted CA (testdata/v1-*, made with
    /// `openssl req -x509` for the CA and `openssl x509 -req` without extensions for the client,
    /// as OpenSSL 3.0 makes v1), one of an unknown CA, an expired one; a valid one passes; bytes
    /// that are not TLS, and a connection closed early.
    #[test]
    fn refused_handshakes_are_explained_in_words() {
        let dir = tempfile::tempdir().unwrap();
        let (trusted_pem, trusted) = ca("trusted-ca");
        let ca_file = dir.path().join("ca.crt");
        std::fs::write(&ca_file, format!("{trusted_pem}{}", include_str!("testdata/v1-ca.crt"))).unwrap();
        let server = server_config(&TlsSettings {
            cert_dir: dir.path().join("pki"),
            node_name: "node".into(),
            client_ca_file: Some(ca_file),
            ..Default::default()
        })
        .unwrap();

        let (cert, key) = client_cert(&trusted, 2020, 2100);
        assert!(handshake(&server, &cert, &key).is_none(), "a valid v3 certificate");

        let v1 = handshake(
            &server,
            include_str!("testdata/v1-client.crt"),
            include_str!("testdata/v1-client.key"),
        )
        .expect("a v1 certificate is refused");
        assert_eq!(
            v1.to_string(),
            "invalid peer certificate: Other(OtherError(UnsupportedCertVersion))",
            "rustls' own words"
        );
        assert_eq!(
            refusal(&v1),
            Refusal::new(
                RefusalLevel::Warn,
                "client certificate is X.509 v1; only v3 certificates are accepted"
            )
        );

        let (_, stranger) = ca("unknown-ca");
        let (cert, key) = client_cert(&stranger, 2020, 2100);
        let unknown = handshake(&server, &cert, &key).expect("an unknown CA is refused");
        assert_eq!(
            refusal(&unknown),
            Refusal::new(
                RefusalLevel::Warn,
                "client certificate is not signed by a CA of --client-ca-file (unknown authority)"
            )
        );

        let (cert, key) = client_cert(&trusted, 2000, 2001);
        let expired = handshake(&server, &cert, &key).expect("an expired certificate is refused");
        assert_eq!(
            refusal(&expired),
            Refusal::new(RefusalLevel::Warn, "client certificate has expired")
        );

        let mut plain = rustls::ServerConnection::new(Arc::new(server)).unwrap();
        plain
            .read_tls(&mut &b"GET /pods HTTP/1.1\r\nHost: node\r\n\r\n"[..])
            .unwrap();
        let http = plain.process_new_packets().expect_err("HTTP is not TLS");
        let http = std::io::Error::new(std::io::ErrorKind::InvalidData, http);
        assert_eq!(
            refusal(&http),
            Refusal::new(
                RefusalLevel::Info,
                "the client does not speak TLS (an HTTP request to the HTTPS port?)"
            )
        );

        let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "tls handshake eof");
        assert_eq!(refusal(&eof).level, RefusalLevel::Debug);
    }
}
