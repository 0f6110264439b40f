//! The kubelet API's TLS: the serving certificate (`--tls-cert-file`/`--tls-private-key-file`,
//! or a self-signed one kept as `<cert-dir>/kubelet.crt` and `kubelet.key`, made once and
//! reused), `--tls-min-version`, `--tls-cipher-suites` (Go's names, as kubelet takes them) and
//! client certificates verified against `--client-ca-file`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite};

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
}
