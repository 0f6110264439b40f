//! The client certificate's files, as client-go's file store keeps them
//! (`k8s.io/client-go/util/certificate/certificate_store.go`): each pair the agent is issued is
//! written, certificate then key, to `<dir>/kubelet-client-<YYYY-MM-DD-HH-MM-SS>.pem` (mode
//! 0600), and `<dir>/kubelet-client-current.pem` is a symlink to the newest, swapped in one
//! `rename` of a fresh `kubelet-client-updated.pem` link, so a reader never sees a half-written
//! pair. Without that link, the pair named by the kubeconfig (`client-certificate`,
//! `client-key`) is the current one, as the store's `certFile`/`keyFile` fallback.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What went wrong with the certificate files; names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable certificate or key.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// A certificate (with its chain) and its private key, as PEM, and what the agent reads of the
/// leaf.
#[derive(Clone, PartialEq, Eq)]
pub struct CertPair {
    /// The certificate chain, PEM.
    pub cert_pem: String,
    /// The private key, PEM.
    pub key_pem: String,
    /// The leaf's `notBefore`.
    pub not_before: SystemTime,
    /// The leaf's `notAfter`.
    pub not_after: SystemTime,
    /// The leaf's subject common name (`system:node:<name>`).
    pub common_name: String,
    /// The leaf's subject organizations (`system:nodes`).
    pub organizations: Vec<String>,
}

impl std::fmt::Debug for CertPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertPair")
            .field("common_name", &self.common_name)
            .field("organizations", &self.organizations)
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl CertPair {
    /// Reads a certificate chain and a key; `origin` names where they came from in errors.
    pub fn parse(cert_pem: &str, key_pem: &str, origin: &Path) -> Result<Self, StoreError> {
        let invalid = |reason: String| StoreError::Invalid {
            path: origin.to_path_buf(),
            reason,
        };
        let leaf = first_block(cert_pem, "CERTIFICATE").ok_or_else(|| invalid("no CERTIFICATE block".into()))?;
        let (_, cert) = x509_parser::parse_x509_certificate(&leaf)
            .map_err(|e| invalid(format!("the certificate cannot be parsed: {e}")))?;
        if !key_pem.contains("PRIVATE KEY-----") {
            return Err(invalid("no PRIVATE KEY block".into()));
        }
        let time = |t: x509_parser::time::ASN1Time| {
            let secs = t.timestamp();
            if secs >= 0 {
                SystemTime::UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
            } else {
                SystemTime::UNIX_EPOCH
            }
        };
        let subject = cert.subject();
        let text = |attr: &x509_parser::x509::AttributeTypeAndValue| attr.as_str().unwrap_or_default().to_string();
        let common_name = subject.iter_common_name().next().map(text).unwrap_or_default();
        let organizations: Vec<String> = subject.iter_organization().map(text).collect();
        let pair = CertPair {
            cert_pem: cert_pem.to_string(),
            key_pem: key_pem.to_string(),
            not_before: time(cert.validity().not_before),
            not_after: time(cert.validity().not_after),
            common_name,
            organizations,
        };
        Ok(pair)
    }

    /// Reads a file holding both (the store's `.pem`): its CERTIFICATE blocks, then its key.
    pub fn parse_combined(pem: &str, origin: &Path) -> Result<Self, StoreError> {
        let (certs, key) = split_blocks(pem);
        if key.is_empty() {
            return Err(StoreError::Invalid {
                path: origin.to_path_buf(),
                reason: "no PRIVATE KEY block".into(),
            });
        }
        Self::parse(&certs, &key, origin)
    }

    /// Whether the leaf has expired at `now`.
    pub fn expired_at(&self, now: SystemTime) -> bool {
        now > self.not_after
    }

    /// The whole validity period.
    pub fn lifetime(&self) -> Duration {
        self.not_after.duration_since(self.not_before).unwrap_or_default()
    }
}

/// The DER of the first PEM block of `label`.
fn first_block(pem: &str, label: &str) -> Option<Vec<u8>> {
    x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .filter_map(Result::ok)
        .find(|p| p.label == label)
        .map(|p| p.contents)
}

/// A combined file's certificate blocks and its key block, each as PEM text.
fn split_blocks(pem: &str) -> (String, String) {
    let (mut certs, mut key) = (String::new(), String::new());
    let mut current: Option<&mut String> = None;
    for line in pem.lines() {
        if line.starts_with("-----BEGIN ") {
            current = Some(if line.contains("PRIVATE KEY") {
                &mut key
            } else {
                &mut certs
            });
        }
        if let Some(out) = current.as_deref_mut() {
            out.push_str(line);
            out.push('\n');
        }
        if line.starts_with("-----END ") {
            current = None;
        }
    }
    (certs, key)
}

/// The client certificate's directory (`--cert-dir`) and the kubeconfig's own pair.
#[derive(Debug, Clone)]
pub struct CertStore {
    dir: PathBuf,
    prefix: &'static str,
    /// The kubeconfig's `client-certificate` and `client-key` files, if it names them.
    fallback: Option<(PathBuf, PathBuf)>,
}

/// The client certificate's file name prefix, kubelet's.
pub const CLIENT_PREFIX: &str = "kubelet-client";

impl CertStore {
    /// kubelet's client store in `dir` (`NewFileStore("kubelet-client", certDir, certDir, …)`).
    pub fn client(dir: &Path) -> Self {
        CertStore {
            dir: dir.to_path_buf(),
            prefix: CLIENT_PREFIX,
            fallback: None,
        }
    }

    /// With the kubeconfig's own files as the current pair until the store has one.
    pub fn with_fallback(mut self, cert: PathBuf, key: PathBuf) -> Self {
        self.fallback = Some((cert, key));
        self
    }

    /// `<dir>/kubelet-client-current.pem`, what the written kubeconfig names.
    pub fn current_path(&self) -> PathBuf {
        self.dir.join(format!("{}-current.pem", self.prefix))
    }

    /// The current pair: the `-current.pem` link's, else the fallback files'; `None` when
    /// there is neither.
    pub fn current(&self) -> Result<Option<CertPair>, StoreError> {
        let path = self.current_path();
        match std::fs::read_to_string(&path) {
            Ok(text) => return CertPair::parse_combined(&text, &path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(StoreError::Io { path, source }),
        }
        let Some((cert, key)) = &self.fallback else {
            return Ok(None);
        };
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path).map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })
        };
        CertPair::parse(&read(cert)?, &read(key)?, cert).map(Some)
    }

    /// Keeps a newly issued pair and makes it the current one; returns it as read back.
    pub fn update(&self, cert_pem: &str, key_pem: &str) -> Result<CertPair, StoreError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        let stamp = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%d-%H-%M-%S")
            .to_string();
        let file = self.dir.join(format!("{}-{stamp}.pem", self.prefix));
        let pair = CertPair::parse(cert_pem, key_pem, &file)?;
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let mut text = cert_pem.trim_end().to_string();
        text.push('\n');
        text.push_str(key_pem.trim_end());
        text.push('\n');
        write_private(&file, &text).map_err(io(&file))?;
        let updated = self.dir.join(format!("{}-updated.pem", self.prefix));
        match std::fs::remove_file(&updated) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(StoreError::Io { path: updated, source }),
        }
        std::os::unix::fs::symlink(&file, &updated).map_err(io(&updated))?;
        let current = self.current_path();
        std::fs::rename(&updated, &current).map_err(io(&current))?;
        Ok(pair)
    }
}

/// Writes `text` to `path`, readable by its owner only.
pub(crate) fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issued(cn: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:nodes");
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn an_update_is_a_dated_file_and_the_current_link_points_at_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = CertStore::client(dir.path());
        assert!(store.current().unwrap().is_none());
        let (cert, key) = issued("system:node:a");
        let pair = store.update(&cert, &key).unwrap();
        assert_eq!(pair.common_name, "system:node:a");
        assert_eq!(pair.organizations, vec!["system:nodes".to_string()]);
        let link = std::fs::read_link(store.current_path()).unwrap();
        let name = link.file_name().unwrap().to_str().unwrap().to_string();
        assert!(name.starts_with("kubelet-client-2") && name.ends_with(".pem"), "{name}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&link).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(store.current().unwrap().unwrap(), pair);
        assert!(!dir.path().join("kubelet-client-updated.pem").exists());

        // A second pair replaces the link's target; the first file stays.
        std::thread::sleep(Duration::from_millis(1100));
        let (cert2, key2) = issued("system:node:a");
        let second = store.update(&cert2, &key2).unwrap();
        assert_ne!(std::fs::read_link(store.current_path()).unwrap(), link);
        assert_eq!(store.current().unwrap().unwrap(), second);
        assert!(link.exists());
    }

    #[test]
    fn without_the_link_the_kubeconfigs_files_are_current() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = issued("system:node:b");
        let (c, k) = (dir.path().join("c.crt"), dir.path().join("k.key"));
        std::fs::write(&c, &cert).unwrap();
        std::fs::write(&k, &key).unwrap();
        let store = CertStore::client(&dir.path().join("pki")).with_fallback(c.clone(), k);
        assert_eq!(store.current().unwrap().unwrap().common_name, "system:node:b");
        std::fs::write(&c, "nonsense").unwrap();
        let err = store.current().unwrap_err().to_string();
        assert!(err.contains("c.crt") && err.contains("no CERTIFICATE block"), "{err}");
    }

    #[test]
    fn a_combined_file_without_a_key_is_refused_naming_it() {
        let (cert, _) = issued("x");
        let err = CertPair::parse_combined(&cert, Path::new("/p/x.pem"))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "/p/x.pem: no PRIVATE KEY block");
    }
}
