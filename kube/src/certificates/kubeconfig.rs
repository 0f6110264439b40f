//! What the certificate code reads of a kubeconfig: its current context's user and cluster,
//! the user's client certificate (file or inline), and a client made from it — once, for
//! bootstrap and rotation alike.

use base64::Engine as _;
use kube::config::{AuthInfo, Cluster, KubeConfigOptions, Kubeconfig, KubeconfigError};

/// What is wrong with a kubeconfig (the file is named by [`super::CertError::Kubeconfig`]).
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigProblem {
    /// The file cannot be looked at.
    #[error("error reading existing bootstrap kubeconfig")]
    Stat(#[source] std::io::Error),
    /// The file cannot be read or parsed.
    #[error("unable to load the kubeconfig")]
    Read(#[source] KubeconfigError),
    /// It names no current context.
    #[error("no current-context")]
    NoCurrentContext,
    /// Its current context is not defined.
    #[error("context {0:?} is not defined")]
    NoContext(String),
    /// Inline data (`client-certificate-data`, `client-key-data`) is not base64.
    #[error("{what} is not base64")]
    NotBase64 {
        /// The key.
        what: &'static str,
        /// The decoder's error.
        #[source]
        source: base64::DecodeError,
    },
    /// Inline data is not PEM text.
    #[error("{what} is not PEM text")]
    NotText {
        /// The key.
        what: &'static str,
        /// The decoder's error.
        #[source]
        source: std::string::FromUtf8Error,
    },
    /// The client certificate file named cannot be read.
    #[error("unable to read the client certificate {path}")]
    CertificateFile {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// kube-rs cannot make a client configuration of it.
    #[error("unable to use the kubeconfig")]
    Config(#[source] KubeconfigError),
    /// kube-rs cannot make a client of that configuration.
    #[error("unable to make a client of the kubeconfig")]
    Client(#[source] kube::Error),
}

/// The current context's user: its name (possibly one no `users` entry defines) and its auth
/// info (empty then).
pub fn current_user(file: &Kubeconfig) -> Result<(String, AuthInfo), KubeconfigProblem> {
    let context_name = file
        .current_context
        .clone()
        .ok_or(KubeconfigProblem::NoCurrentContext)?;
    let context = file
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.clone())
        .ok_or(KubeconfigProblem::NoContext(context_name))?;
    let user = context.user.unwrap_or_default();
    let auth = file
        .auth_infos
        .iter()
        .find(|a| a.name == user)
        .and_then(|a| a.auth_info.clone())
        .unwrap_or_default();
    Ok((user, auth))
}

/// The current context's cluster (empty when it names none that is defined).
pub fn current_cluster(file: &Kubeconfig) -> Result<Cluster, KubeconfigProblem> {
    let context_name = file
        .current_context
        .clone()
        .ok_or(KubeconfigProblem::NoCurrentContext)?;
    let name = file
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .ok_or(KubeconfigProblem::NoContext(context_name))?;
    Ok(file
        .clusters
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.cluster.clone())
        .unwrap_or_default())
}

/// Inline data (`what`): base64 of PEM text.
pub fn decode_pem(what: &'static str, data: &str) -> Result<String, KubeconfigProblem> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|source| KubeconfigProblem::NotBase64 { what, source })?;
    String::from_utf8(bytes).map_err(|source| KubeconfigProblem::NotText { what, source })
}

/// The current user's client certificate, PEM, from its inline data or its file; `None`
/// without one.
pub fn client_certificate_pem(file: &Kubeconfig) -> Result<Option<String>, KubeconfigProblem> {
    let (_, auth) = current_user(file)?;
    if let Some(data) = &auth.client_certificate_data {
        return decode_pem("client-certificate-data", data).map(Some);
    }
    match &auth.client_certificate {
        Some(path) => std::fs::read_to_string(path)
            .map(Some)
            .map_err(|source| KubeconfigProblem::CertificateFile {
                path: path.clone(),
                source,
            }),
        None => Ok(None),
    }
}

/// A client as `file` says.
pub async fn client(file: Kubeconfig) -> Result<kube::Client, KubeconfigProblem> {
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(KubeconfigProblem::Config)?;
    kube::Client::try_from(config).map_err(KubeconfigProblem::Client)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n\
                        contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    \
                        client-certificate-data: UEVN\n";

    #[test]
    fn the_current_contexts_user_cluster_and_certificate() {
        let file = Kubeconfig::from_yaml(FILE).unwrap();
        let (user, auth) = current_user(&file).unwrap();
        assert_eq!(user, "u");
        assert_eq!(auth.client_certificate_data.as_deref(), Some("UEVN"));
        assert_eq!(
            current_cluster(&file).unwrap().server.as_deref(),
            Some("https://127.0.0.1:6443")
        );
        assert_eq!(client_certificate_pem(&file).unwrap().as_deref(), Some("PEM"));
        let bad = Kubeconfig::from_yaml(&FILE.replace("UEVN", "\"%%%\"")).unwrap();
        let err = client_certificate_pem(&bad).unwrap_err();
        assert_eq!(err.to_string(), "client-certificate-data is not base64");
        assert!(std::error::Error::source(&err).is_some(), "the decoder's error is kept");
        let lost = Kubeconfig::from_yaml(&FILE.replace("current-context: x", "current-context: y")).unwrap();
        assert_eq!(
            current_user(&lost).unwrap_err().to_string(),
            "context \"y\" is not defined"
        );
    }
}
