//! The cluster slice: the API server (`--kubeconfig` or `--in-cluster`), the client's rate
//! limits (`kubeAPIQPS`, `kubeAPIBurst`) and the event recorder's (`eventRecordQPS`,
//! `eventBurst`), flags over the file.

use std::path::PathBuf;

use dockerlet_kube::recorder::EventLimits;

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The API server connection's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// `--kubeconfig`: API-server mode when set.
    pub kubeconfig: Option<PathBuf>,
    /// `--in-cluster`: API-server mode with the service account in this directory.
    pub in_cluster: Option<PathBuf>,
    /// The node's client certificate: TLS bootstrap and rotation.
    pub client_certificate: ClientCertificate,
    /// `kubeAPIQPS` and `kubeAPIBurst`.
    pub kube_api_limits: (f64, u32),
    /// `eventRecordQPS` and `eventBurst`.
    pub event_limits: EventLimits,
}

/// How the node's client certificate is had and kept (kubelet's `--bootstrap-kubeconfig`,
/// `--cert-dir`, `rotateCertificates`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCertificate {
    /// `--bootstrap-kubeconfig`.
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// `rotateCertificates` / `--rotate-certificates`.
    pub rotate: bool,
    /// `--cert-dir` [default: `<root-dir>/pki`].
    pub cert_dir: PathBuf,
}

/// The connection's settings; negative rates are refused in kubelet's words.
pub(super) fn resolve(cli: &Cli, file: &FileSettings, root_dir: &std::path::Path) -> Result<Cluster, ConfigError> {
    // kubelet refuses a negative kubeAPIQPS; 0 is client-go's default, 5 per second.
    let kube_api_qps = match cli.kube_api_qps.or(file.kube_api_qps) {
        Some(q) if q < 0.0 || !q.is_finite() => {
            return Err(invalid("--kube-api-qps", format!("{q} must not be a negative number")))
        }
        Some(0.0) => 5.0,
        Some(q) => q,
        None => 50.0,
    };
    let event_limits = event_limits(
        cli.event_qps.or(file.event_record_qps),
        cli.event_burst.or(file.event_burst),
    )
    .map_err(|(setting, reason)| invalid(setting, reason))?;
    let rotate = cli.rotate_certificates.or(file.rotate_certificates).unwrap_or(false);
    if rotate && cli.kubeconfig.is_none() {
        let why = if cli.in_cluster {
            "needs --kubeconfig: the node's client certificate is renewed through certificates.k8s.io, and --in-cluster authenticates with the pod's service account"
        } else {
            "needs an API server (--kubeconfig)"
        };
        return Err(invalid("--rotate-certificates (rotateCertificates)", why.into()));
    }
    let client_certificate = ClientCertificate {
        bootstrap_kubeconfig: cli.bootstrap_kubeconfig.clone(),
        rotate,
        cert_dir: cli.cert_dir.clone().unwrap_or_else(|| root_dir.join("pki")),
    };
    Ok(Cluster {
        client_certificate,
        kubeconfig: cli.kubeconfig.clone(),
        in_cluster: cli.in_cluster.then(|| cli.service_account_dir.clone()),
        kube_api_limits: (kube_api_qps, cli.kube_api_burst.or(file.kube_api_burst).unwrap_or(100)),
        event_limits,
    })
}

/// `eventRecordQPS` and `eventBurst` as kubelet's event client takes them: negative is refused
/// in kubelet's words, 0 is client-go's default (5 per second, 10 at once).
fn event_limits(qps: Option<i32>, burst: Option<i32>) -> Result<EventLimits, (&'static str, String)> {
    let defaults = EventLimits::default();
    let limit = |value: Option<i32>, flag: &'static str, client_go: f64, ours: f64| match value {
        Some(n) if n < 0 => Err((flag, format!("{n} must not be a negative number"))),
        Some(0) => Ok(client_go),
        Some(n) => Ok(f64::from(n)),
        None => Ok(ours),
    };
    Ok(EventLimits {
        qps: limit(qps, "--event-qps", 5.0, defaults.qps)?,
        burst: limit(burst, "--event-burst", 10.0, defaults.burst)?,
    })
}
