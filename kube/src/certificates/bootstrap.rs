//! TLS bootstrap (`--bootstrap-kubeconfig`), as kubelet's `LoadClientCert`
//! (`pkg/kubelet/certificate/bootstrap/bootstrap.go`): when `--kubeconfig` does not exist or
//! its client certificate has expired, the agent
//! 1. takes the key of the store's current pair if it has one, else the key kept in
//!    `<cert-dir>/kubelet-client.key.tmp` from an earlier try, else a new ECDSA P-256 key
//!    (written there first, so a restart asks again with the same key and finds its request);
//! 2. waits up to a minute for the API server's `/healthz`;
//! 3. asks with the bootstrap kubeconfig's credentials for `CN=system:node:<name>,
//!    O=system:nodes` under the name `node-csr-<digest>`, and waits up to an hour for it to be
//!    approved and issued;
//! 4. stores the pair (`kubelet-client-<time>.pem`, `kubelet-client-current.pem`), removes
//!    the temporary key and writes `--kubeconfig`: the bootstrap kubeconfig's server and CA, and
//!    `client-certificate`/`client-key` both naming `kubelet-client-current.pem`.

use std::path::Path;
use std::time::{Duration, SystemTime};

use kube::config::{Cluster, Kubeconfig};

use super::kubeconfig::{self, KubeconfigProblem};
use super::request::{self, NodeRequest};
use super::store::{write_private, CertPair, CertStore};
use super::CertError;

/// The key kept between tries (`tmpPrivateKeyFile`).
pub const TMP_KEY_FILE: &str = "kubelet-client.key.tmp";
/// How long the bootstrap request is waited for (`requestNodeCertificate`: 3600 s).
pub const BOOTSTRAP_WAIT: Duration = Duration::from_secs(3600);
/// How long the API server's `/healthz` is waited for first (`waitForServer`: 1 min).
pub const SERVER_WAIT: Duration = Duration::from_secs(60);

/// Whether `kubeconfig` exists and its client certificate has not expired
/// (`isClientConfigStillValid`). A file that cannot be used is "not valid" (bootstrap then
/// writes a new one), as kubelet; only an unreadable path is an error.
pub fn client_config_still_valid(kubeconfig: &Path) -> Result<bool, CertError> {
    match std::fs::metadata(kubeconfig) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(CertError::Kubeconfig {
                path: format!("--kubeconfig {}", kubeconfig.display()),
                source: KubeconfigProblem::Stat(e),
            })
        }
    }
    let unusable = |why: String| {
        tracing::warn!(kubeconfig = %kubeconfig.display(), "{why}; bootstrapping a new client certificate");
        Ok(false)
    };
    let file = match Kubeconfig::read_from(kubeconfig) {
        Ok(f) => f,
        Err(e) => return unusable(format!("unable to read existing bootstrap client config: {e}")),
    };
    let cert = match kubeconfig::client_certificate_pem(&file) {
        Ok(Some(c)) => c,
        Ok(None) => return unusable("no client certificate in the existing kubeconfig".into()),
        Err(e) => return unusable(dockerlet_pod::go::error_chain(&e)),
    };
    let now = SystemTime::now();
    let mut any = false;
    for block in x509_parser::pem::Pem::iter_from_buffer(cert.as_bytes())
        .filter_map(Result::ok)
        .filter(|b| b.label == "CERTIFICATE")
    {
        let Ok(parsed) = block.parse_x509() else {
            return unusable("unable to load TLS certificates from the existing kubeconfig".into());
        };
        any = true;
        let not_after = parsed.validity().not_after.timestamp();
        let now_secs = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default();
        if now_secs > not_after {
            return unusable(format!(
                "part of the existing bootstrap client certificate is expired: {}",
                parsed.validity().not_after
            ));
        }
    }
    if !any {
        return unusable("no TLS certificates in the existing kubeconfig".into());
    }
    Ok(true)
}

/// kubelet's `LoadClientCert`: see the module. Returns the name of the CSR it made, or `None`
/// when the kubeconfig was still valid.
pub async fn load_client_cert(
    kubeconfig: &Path,
    bootstrap: &Path,
    cert_dir: &Path,
    node: &str,
) -> Result<Option<String>, CertError> {
    let path = kubeconfig.to_path_buf();
    if tokio::task::spawn_blocking(move || client_config_still_valid(&path)).await?? {
        tracing::info!(kubeconfig = %kubeconfig.display(), "kubeconfig exists and is valid, skipping bootstrap");
        return Ok(None);
    }
    tracing::info!(
        bootstrap_kubeconfig = %bootstrap.display(),
        "using the bootstrap kubeconfig to generate a TLS client certificate, key and kubeconfig file"
    );
    let source = format!("--bootstrap-kubeconfig {}", bootstrap.display());
    let bad = |problem: KubeconfigProblem| CertError::Kubeconfig {
        path: source.clone(),
        source: problem,
    };
    let file = Kubeconfig::read_from(bootstrap).map_err(|e| bad(KubeconfigProblem::Read(e)))?;
    let cluster = kubeconfig::current_cluster(&file).map_err(&bad)?;
    let client = kubeconfig::client(file).await.map_err(&bad)?;
    let store = CertStore::client(cert_dir);
    let request = {
        let (store, dir, node) = (store.clone(), cert_dir.to_path_buf(), node.to_string());
        tokio::task::spawn_blocking(move || request_with_kept_key(&store, &dir, &node)).await??
    };
    wait_for_server(&client).await;
    let name = request.digested_name();
    let (name, uid) = request::create(&client, &request, Some(&name)).await?;
    tracing::info!(csr = %name, "waiting for the client certificate to be issued");
    let cert = request::wait_for_certificate(&client, &name, &uid, BOOTSTRAP_WAIT).await?;
    let (dir, kubeconfig_path) = (cert_dir.to_path_buf(), kubeconfig.to_path_buf());
    let key = request.key_pem.clone();
    tokio::task::spawn_blocking(move || {
        let pair = store.update(&cert, &key)?;
        let _ = std::fs::remove_file(dir.join(TMP_KEY_FILE));
        write_kubeconfig(&kubeconfig_path, &cluster, &store.current_path())?;
        Ok::<CertPair, CertError>(pair)
    })
    .await??;
    Ok(Some(name))
}

/// The key to ask with: the current pair's (if readable), else the kept temporary key, else a
/// new one kept there.
fn request_with_kept_key(store: &CertStore, dir: &Path, node: &str) -> Result<NodeRequest, CertError> {
    if let Ok(Some(pair)) = store.current() {
        if rcgen::KeyPair::from_pem(&pair.key_pem).is_ok() {
            return NodeRequest::new(node, Some(&pair.key_pem));
        }
    }
    let tmp = dir.join(TMP_KEY_FILE);
    let kept = std::fs::read_to_string(&tmp)
        .ok()
        .filter(|k| rcgen::KeyPair::from_pem(k).is_ok());
    let request = NodeRequest::new(node, kept.as_deref())?;
    if kept.is_none() {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        write_private(&tmp, &request.key_pem).map_err(|e| io_error(&tmp, e))?;
    }
    Ok(request)
}

/// The store's I/O error about `path`.
fn io_error(path: &Path, source: std::io::Error) -> CertError {
    CertError::Store(super::StoreError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// `waitForServer`: `/healthz` every 2 s for up to a minute; going on regardless.
async fn wait_for_server(client: &kube::Client) {
    let deadline = tokio::time::Instant::now() + SERVER_WAIT;
    loop {
        let request = http::Request::get("/healthz").body(Vec::new());
        let result = match request {
            Ok(r) => client.request_text(r).await,
            Err(_) => return,
        };
        match result {
            Ok(_) => return,
            Err(e) if tokio::time::Instant::now() >= deadline => {
                tracing::info!(error = %e, "timed out waiting to connect to the API server");
                return;
            }
            Err(e) => tracing::info!(error = %e, "failed to connect to the API server"),
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// `writeKubeconfigFromBootstrapping`: the bootstrap file's cluster (server, CA) and
/// `client-certificate`/`client-key` naming the store's current pair; context
/// `default-context`, namespace `default`.
fn write_kubeconfig(path: &Path, cluster: &Cluster, pem: &Path) -> Result<(), CertError> {
    let server = cluster.server.clone().unwrap_or_default();
    let ca = match (&cluster.certificate_authority, &cluster.certificate_authority_data) {
        (Some(file), _) => format!("    certificate-authority: {}\n", yaml_text(file)),
        (None, Some(data)) => format!("    certificate-authority-data: {data}\n"),
        (None, None) => String::new(),
    };
    let insecure = if cluster.insecure_skip_tls_verify == Some(true) {
        "    insecure-skip-tls-verify: true\n"
    } else {
        ""
    };
    let pem = yaml_text(&pem.display().to_string());
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: default-cluster\n  cluster:\n    server: {server}\n{ca}{insecure}\
         contexts:\n- name: default-context\n  context:\n    cluster: default-cluster\n    namespace: default\n    user: default-auth\n\
         current-context: default-context\nusers:\n- name: default-auth\n  user:\n    client-certificate: {pem}\n    client-key: {pem}\n",
        server = yaml_text(&server),
    );
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    }
    write_private(path, &text).map_err(|e| io_error(path, e))
}

/// A YAML scalar: JSON's quoting is valid YAML.
fn yaml_text(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_pem(days: i64) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        let end = k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_hours(24 * days);
        let end = end.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC);
        params.not_after = rcgen::date_time_ymd(end.year().into(), end.month() as u8, end.day() as u8);
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    #[test]
    fn a_kubeconfig_is_valid_while_its_certificate_is() {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubelet.conf");
        assert!(!client_config_still_valid(&kubeconfig).unwrap(), "missing: not valid");
        let bootstrap: Kubeconfig = serde_yaml_from(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: Q0E=\n\
             contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: abc.def\n",
        );
        let pem = dir.path().join("pki/kubelet-client-current.pem");
        let cluster = kubeconfig::current_cluster(&bootstrap).unwrap();
        write_kubeconfig(&kubeconfig, &cluster, &pem).unwrap();
        let written = Kubeconfig::read_from(&kubeconfig).unwrap();
        assert_eq!(written.current_context.as_deref(), Some("default-context"));
        let cluster = written.clusters[0].cluster.clone().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Q0E="));
        let auth = written.auth_infos[0].auth_info.clone().unwrap();
        assert_eq!(auth.client_certificate.as_deref(), Some(pem.to_str().unwrap()));
        assert_eq!(auth.client_key.as_deref(), Some(pem.to_str().unwrap()));
        assert!(auth.token.is_none());
        // The pair it names is missing: not valid.
        assert!(!client_config_still_valid(&kubeconfig).unwrap());
        std::fs::create_dir_all(pem.parent().unwrap()).unwrap();
        let (cert, key) = cert_pem(30);
        std::fs::write(&pem, format!("{cert}{key}")).unwrap();
        assert!(client_config_still_valid(&kubeconfig).unwrap());
        let (expired, key) = cert_pem(-2);
        std::fs::write(&pem, format!("{expired}{key}")).unwrap();
        assert!(
            !client_config_still_valid(&kubeconfig).unwrap(),
            "expired: bootstrap again"
        );
    }

    #[test]
    fn a_restart_asks_again_with_the_kept_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = CertStore::client(dir.path());
        let first = request_with_kept_key(&store, dir.path(), "n").unwrap();
        assert!(dir.path().join(TMP_KEY_FILE).is_file());
        let again = request_with_kept_key(&store, dir.path(), "n").unwrap();
        assert_eq!(first.digested_name(), again.digested_name());
    }

    fn serde_yaml_from(text: &str) -> Kubeconfig {
        Kubeconfig::from_yaml(text).unwrap()
    }
}
