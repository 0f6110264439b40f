//! A sandbox on the CNI pod network (cri-dockerd's `RunPodSandbox` with its network plugin,
//! `core/sandbox_helpers.go` and `network/cni/cni.go`): the sandbox is made with Docker's
//! `none` network, then attached with CNI `ADD` in its namespace, the pod's hostPorts
//! (`portMappings`), traffic shaping (`bandwidth`, from the `kubernetes.io/ingress-bandwidth`
//! and `egress-bandwidth` annotations) and DNS (`dns`: the servers, searches and options of the
//! pod's resolv.conf, as containerd's CRI offers them; cri-dockerd offers it only on Windows)
//! offered as runtime capabilities. A failed attachment is
//! undone (the CNI crate's DEL) and the sandbox removed; the pod waits with
//! `FailedCreatePodSandBox`.

use dockerlet_cni::{Bandwidth, Cni, Dns, NetworkError, PodAttachment, PortMapping};
use dockerlet_messages::runtime::ObservedContainer;
use dockerlet_metrics::NetworkOperation;
use dockerlet_pod::container::PortBinding;
use dockerlet_pod::dns::ResolvConf;
use dockerlet_pod::spec::pod_identity;
use k8s_openapi::api::core::v1::Pod;

use crate::pod_network::netns_path;

/// cri-dockerd's burst for a shaped pod: `math.MaxInt32` (no burst limit of its own).
const BANDWIDTH_BURST: u64 = i32::MAX as u64;
/// kubelet's bounds for the bandwidth annotations (`pkg/util/bandwidth/utils.go`).
const MIN_BANDWIDTH: f64 = 1e3;
const MAX_BANDWIDTH: f64 = 1e15;

/// Why a sandbox has no pod network.
#[derive(Debug, thiserror::Error)]
pub enum SandboxNetworkError {
    /// No CNI configuration yet (kubelet's `NetworkNotReady`, with the runtime's condition as
    /// kubelet prints it).
    #[error("network is not ready: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:docker: network plugin is not ready: cni config uninitialized")]
    NotReady,
    /// A bandwidth annotation is not a quantity kubelet accepts.
    #[error("failed to get pod bandwidth: {0}")]
    Bandwidth(#[from] BandwidthError),
    /// The sandbox has no process whose namespace could be attached.
    #[error("failed to set up sandbox container {sandbox:?} network for pod {pod:?}: the sandbox is not running")]
    NotRunning {
        /// The sandbox's container ID.
        sandbox: String,
        /// The pod's name.
        pod: String,
    },
    /// The plugins failed (cri-dockerd's words around libcni's).
    #[error("failed to set up sandbox container {sandbox:?} network for pod {pod:?}: networkPlugin cni failed to set up pod \"{pod}_{namespace}\" network: {source}")]
    SetUp {
        /// The sandbox's container ID.
        sandbox: String,
        /// The pod's name.
        pod: String,
        /// The pod's namespace.
        namespace: String,
        /// What the plugin said (boxed: it is large, and rare).
        #[source]
        source: Box<NetworkError>,
    },
}

/// A bandwidth annotation kubelet refuses (`ExtractPodBandwidthResources`, `validateBandwidthIsReasonable`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BandwidthError {
    /// Not a quantity.
    #[error(
        "{key}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' ({text:?})"
    )]
    NotQuantity {
        /// The annotation.
        key: String,
        /// Its value.
        text: String,
    },
    /// Under 1 kbit/s.
    #[error("resource is unreasonably small (< 1kbit): {key}={text}")]
    TooSmall {
        /// The annotation.
        key: String,
        /// Its value.
        text: String,
    },
    /// Over 1 Pbit/s.
    #[error("resource is unreasonably large (> 1Pbit): {key}={text}")]
    TooLarge {
        /// The annotation.
        key: String,
        /// Its value.
        text: String,
    },
}

/// Refuses a sandbox before it is made while the network has no configuration (kubelet's
/// `networkErrors` check in `syncPod`).
pub(super) fn ready(cni: &Cni) -> Result<(), SandboxNetworkError> {
    match cni.reload() {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(SandboxNetworkError::NotReady),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the CNI configuration directory");
            Err(SandboxNetworkError::NotReady)
        }
    }
}

/// Attaches the running `sandbox` of `pod`, whose resolv.conf is `dns`; its first address is
/// the pod IP.
pub(super) async fn attach(
    cni: &Cni,
    metrics: &dockerlet_metrics::Metrics,
    pod: &Pod,
    sandbox: &ObservedContainer,
    ports: &[PortBinding],
    dns: &ResolvConf,
) -> Result<String, SandboxNetworkError> {
    let identity = pod_identity(pod);
    let Some(pid) = sandbox.pid else {
        return Err(SandboxNetworkError::NotRunning {
            sandbox: sandbox.id.0.clone(),
            pod: identity.name.to_string(),
        });
    };
    let attachment = PodAttachment {
        namespace: identity.namespace.to_string(),
        name: identity.name.to_string(),
        uid: identity.uid.to_string(),
        container_id: sandbox.id.0.clone(),
        netns: netns_path(pid),
        port_mappings: ports.iter().map(port_mapping).collect(),
        bandwidth: bandwidth(pod)?,
        dns: Some(Dns {
            servers: dns.nameservers.clone(),
            searches: dns.searches.clone(),
            options: dns.options.clone(),
        }),
    };
    let set_up = |source| SandboxNetworkError::SetUp {
        sandbox: sandbox.id.0.clone(),
        pod: identity.name.to_string(),
        namespace: identity.namespace.to_string(),
        source: Box::new(source),
    };
    let began = std::time::Instant::now();
    let added = cni.add(&attachment).await;
    metrics.network_operation(
        NetworkOperation::set_up_pod,
        began.elapsed().as_secs_f64(),
        added.is_err(),
    );
    let attached = added.map_err(set_up)?;
    tracing::info!(sandbox = %sandbox.id, ips = ?attached.ips, "pod network attached (CNI ADD)");
    Ok(attached.ips.first().map(ToString::to_string).unwrap_or_default())
}

fn port_mapping(p: &PortBinding) -> PortMapping {
    PortMapping {
        host_port: i32::from(p.host_port),
        container_port: i32::from(p.container_port),
        protocol: p.protocol.to_lowercase(),
        host_ip: p.host_ip.clone(),
    }
}

/// The pod's shaping from its annotations (kubelet's `ExtractPodBandwidthResources`, cri-dockerd's
/// rates in bits per second with `MaxInt32` bursts); none without either annotation.
pub(super) fn bandwidth(pod: &Pod) -> Result<Option<Bandwidth>, BandwidthError> {
    let annotations = pod.metadata.annotations.as_ref();
    let rate = |key: &str| -> Result<u64, BandwidthError> {
        let Some(text) = annotations.and_then(|a| a.get(key)) else {
            return Ok(0);
        };
        let (key, text) = (key.to_string(), text.clone());
        let Some(value) = dockerlet_pod::quantity::quantity_value(&text) else {
            return Err(BandwidthError::NotQuantity { key, text });
        };
        if value < MIN_BANDWIDTH {
            return Err(BandwidthError::TooSmall { key, text });
        }
        if value > MAX_BANDWIDTH {
            return Err(BandwidthError::TooLarge { key, text });
        }
        Ok(value as u64)
    };
    let ingress = rate("kubernetes.io/ingress-bandwidth")?;
    let egress = rate("kubernetes.io/egress-bandwidth")?;
    if ingress == 0 && egress == 0 {
        return Ok(None);
    }
    Ok(Some(Bandwidth {
        ingress_rate: ingress,
        ingress_burst: if ingress > 0 { BANDWIDTH_BURST } else { 0 },
        egress_rate: egress,
        egress_burst: if egress > 0 { BANDWIDTH_BURST } else { 0 },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_with(annotations: &[(&str, &str)]) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        pod
    }

    /// Rates in bits per second with cri-dockerd's bursts; kubelet's bounds and a bad quantity
    /// refused naming the annotation.
    #[test]
    fn bandwidth_comes_from_the_annotations() {
        assert_eq!(bandwidth(&Pod::default()), Ok(None));
        let b = bandwidth(&pod_with(&[("kubernetes.io/ingress-bandwidth", "10M")]))
            .expect("valid")
            .expect("shaped");
        assert_eq!(
            (b.ingress_rate, b.ingress_burst, b.egress_rate, b.egress_burst),
            (10_000_000, 2_147_483_647, 0, 0)
        );
        let e = bandwidth(&pod_with(&[("kubernetes.io/egress-bandwidth", "1")])).expect_err("too small");
        assert_eq!(
            e.to_string(),
            "resource is unreasonably small (< 1kbit): kubernetes.io/egress-bandwidth=1"
        );
        let e = bandwidth(&pod_with(&[("kubernetes.io/egress-bandwidth", "2P")])).expect_err("too large");
        assert!(matches!(e, BandwidthError::TooLarge { .. }), "{e}");
        let e = bandwidth(&pod_with(&[("kubernetes.io/ingress-bandwidth", "fast")])).expect_err("not a quantity");
        assert!(
            e.to_string()
                .starts_with("kubernetes.io/ingress-bandwidth: quantities must match"),
            "{e}"
        );
    }

    /// hostPorts become portmap's entries, protocol in lower case.
    #[test]
    fn host_ports_become_port_mappings() {
        let m = port_mapping(&PortBinding {
            container_port: 80,
            protocol: "TCP".into(),
            host_port: 8080,
            host_ip: "127.0.0.1".into(),
        });
        assert_eq!(
            (m.host_port, m.container_port, m.protocol.as_str(), m.host_ip.as_str()),
            (8080, 80, "tcp", "127.0.0.1")
        );
    }
}
