//! The pod's host names and its `/etc/hosts`, as kubelet makes them (`kubelet_pods.go`:
//! `GeneratePodHostNameAndDomain`, `managedHostsFileContent`, `nodeHostsFileContent`,
//! `makeMounts`; `pkg/kubelet/util` `GetNodenameForKernel`). Pure: the node's hosts file
//! arrives as text.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, HostAlias, Pod};

use crate::names::{is_dns_label, DNS_LABEL_MSG};
use crate::spec::pod_identity;
use crate::volume::pod_dir;

/// Where containers see the hosts file.
pub const ETC_HOSTS: &str = "/etc/hosts";
/// Where containers see the resolver configuration.
pub const ETC_RESOLV_CONF: &str = "/etc/resolv.conf";
/// First line of the hosts file of a pod on the pod network.
pub const MANAGED_HOSTS_HEADER: &str = "# Kubernetes-managed hosts file.\n";
/// First line of the hosts file of a host-network pod (the node's file follows).
pub const MANAGED_HOSTS_HEADER_HOST_NETWORK: &str = "# Kubernetes-managed hosts file (host network).\n";
/// Longest hostname (the kernel's nodename holds 64 bytes with the terminating NUL).
const HOSTNAME_MAX_LEN: usize = 63;
/// Longest FQDN used as hostname (`setHostnameAsFQDN`).
const FQDN_MAX_LEN: usize = 64;

/// `<root>/pods/<uid>/etc-hosts`: the pod's managed hosts file (kubelet's path).
pub fn etc_hosts_path(root: &Path, uid: &str) -> PathBuf {
    pod_dir(root, uid).join("etc-hosts")
}

/// `<root>/pods/<uid>/resolv.conf`: the pod's resolver configuration.
pub fn resolv_conf_path(root: &Path, uid: &str) -> PathBuf {
    pod_dir(root, uid).join("resolv.conf")
}

/// Why the pod's host name cannot be formed. The sandbox is not created
/// (FailedCreatePodSandBox); the pod stays Pending and the next sync tries again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostnameError {
    /// `spec.hostname` is not a DNS label.
    #[error("pod Hostname {0:?} is not a valid DNS label: {DNS_LABEL_MSG}")]
    InvalidHostname(String),
    /// `spec.subdomain` is not a DNS label.
    #[error("pod Subdomain {0:?} is not a valid DNS label: {DNS_LABEL_MSG}")]
    InvalidSubdomain(String),
    /// `setHostnameAsFQDN` with an FQDN longer than the kernel takes.
    #[error("failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long ({FQDN_MAX_LEN} characters is the max, {} characters requested)", fqdn.len())]
    FqdnTooLong {
        /// The FQDN.
        fqdn: String,
    },
    /// Truncating the name left nothing ("should never happen" in kubelet).
    #[error("hostname for pod {pod:?} was invalid: {hostname:?}")]
    Empty {
        /// The pod's name.
        pod: String,
        /// The name it was cut from.
        hostname: String,
    },
}

/// The pod's host name and domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodHostname {
    /// `spec.hostname`, else the pod's name; at most 63 characters.
    pub hostname: String,
    /// `<subdomain>.<namespace>.svc.<cluster domain>` when `spec.subdomain` is set.
    pub domain: Option<String>,
}

impl PodHostname {
    /// kubelet's `GeneratePodHostNameAndDomain`.
    pub fn of(pod: &Pod, cluster_domain: &str) -> Result<PodHostname, HostnameError> {
        let crate::spec::PodIdentity { name, namespace, .. } = pod_identity(pod);
        let spec = pod.spec.as_ref();
        let mut hostname = name.to_string();
        if let Some(h) = spec.and_then(|s| s.hostname.as_deref()).filter(|h| !h.is_empty()) {
            if !is_dns_label(h) {
                return Err(HostnameError::InvalidHostname(h.to_string()));
            }
            hostname = h.to_string();
        }
        if hostname.len() > HOSTNAME_MAX_LEN {
            // kubelet cuts bytes; names are ASCII once validated, and chars never split one.
            let cut: String = hostname.chars().take(HOSTNAME_MAX_LEN).collect();
            let cut = cut.trim_end_matches(['-', '.']).to_string();
            if cut.is_empty() {
                return Err(HostnameError::Empty {
                    pod: name.to_string(),
                    hostname,
                });
            }
            hostname = cut;
        }
        let domain = match spec.and_then(|s| s.subdomain.as_deref()).filter(|s| !s.is_empty()) {
            Some(sub) if !is_dns_label(sub) => return Err(HostnameError::InvalidSubdomain(sub.to_string())),
            Some(sub) => Some(format!("{sub}.{namespace}.svc.{cluster_domain}")),
            None => None,
        };
        Ok(PodHostname { hostname, domain })
    }

    /// `<hostname>.<domain>`, when there is a domain.
    pub fn fqdn(&self) -> Option<String> {
        self.domain.as_ref().map(|d| format!("{}.{d}", self.hostname))
    }

    /// The UTS hostname of the pod (kubelet's `GetNodenameForKernel`): the FQDN with
    /// `setHostnameAsFQDN` and a subdomain, else the short name.
    pub fn kernel_hostname(&self, pod: &Pod) -> Result<String, HostnameError> {
        let as_fqdn = pod.spec.as_ref().and_then(|s| s.set_hostname_as_fqdn) == Some(true);
        match self.fqdn() {
            Some(fqdn) if as_fqdn => {
                if fqdn.len() > FQDN_MAX_LEN {
                    return Err(HostnameError::FqdnTooLong { fqdn });
                }
                Ok(fqdn)
            }
            _ => Ok(self.hostname.clone()),
        }
    }
}

/// The hosts file of a pod on the pod network: localhost entries, each pod IP with its names,
/// the `hostAliases`.
pub fn managed_hosts(pod_ips: &[String], names: &PodHostname, aliases: &[HostAlias]) -> String {
    let mut out = String::from(MANAGED_HOSTS_HEADER);
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    for ip in pod_ips {
        match names.fqdn() {
            Some(fqdn) => out.push_str(&format!("{ip}\t{fqdn}\t{}\n", names.hostname)),
            None => out.push_str(&format!("{ip}\t{}\n", names.hostname)),
        }
    }
    out.push_str(&host_alias_entries(aliases));
    out
}

/// The hosts file of a host-network pod: the node's file under its own header, then the
/// `hostAliases`.
pub fn host_network_hosts(node_hosts: &str, aliases: &[HostAlias]) -> String {
    let mut out = String::from(MANAGED_HOSTS_HEADER_HOST_NETWORK);
    out.push_str(node_hosts);
    out.push_str(&host_alias_entries(aliases));
    out
}

fn host_alias_entries(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for alias in aliases {
        let names = alias.hostnames.clone().unwrap_or_default().join("\t");
        out.push_str(&format!("{}\t{names}\n", alias.ip));
    }
    out
}

/// The pod's `hostAliases`.
pub fn host_aliases(pod: &Pod) -> &[HostAlias] {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_aliases.as_deref())
        .unwrap_or_default()
}

/// Whether the container mounts a volume of its own at `path` (then the agent's file is not
/// mounted there: kubelet leaves a container's own `/etc/hosts` alone).
pub fn mounts_own(container: &Container, path: &str) -> bool {
    container
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_path.trim_end_matches('/') == path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, VolumeMount};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, hostname: Option<&str>, subdomain: Option<&str>, as_fqdn: Option<bool>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                hostname: hostname.map(str::to_string),
                subdomain: subdomain.map(str::to_string),
                set_hostname_as_fqdn: as_fqdn,
                ..Default::default()
            }),
            status: None,
        }
    }

    /// The pod name, or spec.hostname; the FQDN with a subdomain; the kernel hostname is the
    /// FQDN only with setHostnameAsFQDN and a subdomain (pod_hostnamefqdn_test.go's cases).
    #[test]
    fn host_names_follow_kubelet() {
        let names = PodHostname::of(&pod("web", None, None, None), "cluster.local").unwrap();
        assert_eq!(
            names,
            PodHostname {
                hostname: "web".into(),
                domain: None
            }
        );
        let p = pod("web", None, None, Some(true));
        assert_eq!(
            PodHostname::of(&p, "cluster.local")
                .unwrap()
                .kernel_hostname(&p)
                .unwrap(),
            "web"
        );
        let p = pod("web", Some("h1"), Some("t"), None);
        let names = PodHostname::of(&p, "cluster.local").unwrap();
        assert_eq!(names.fqdn().as_deref(), Some("h1.t.ns1.svc.cluster.local"));
        assert_eq!(names.kernel_hostname(&p).unwrap(), "h1");
        let p = pod("web", None, Some("t"), Some(true));
        let names = PodHostname::of(&p, "cluster.local").unwrap();
        assert_eq!(names.kernel_hostname(&p).unwrap(), "web.t.ns1.svc.cluster.local");
    }

    /// A name over 63 characters is cut and loses trailing '-' and '.'; bad labels and a too
    /// long FQDN are errors with kubelet's messages.
    #[test]
    fn long_and_invalid_names() {
        let long = format!("{}-{}", "a".repeat(62), "b".repeat(10));
        let names = PodHostname::of(&pod(&long, None, None, None), "cluster.local").unwrap();
        assert_eq!(names.hostname, "a".repeat(62));
        assert!(matches!(
            PodHostname::of(&pod("web", Some("Bad_Name"), None, None), "c"),
            Err(HostnameError::InvalidHostname(_))
        ));
        assert!(PodHostname::of(&pod("web", None, Some("x.y"), None), "c")
            .unwrap_err()
            .to_string()
            .starts_with("pod Subdomain \"x.y\" is not a valid DNS label"));
        let p = pod(&"a".repeat(41), None, Some("t"), Some(true));
        let err = PodHostname::of(&p, "cluster.local")
            .unwrap()
            .kernel_hostname(&p)
            .unwrap_err();
        let fqdn = format!("{}.t.ns1.svc.cluster.local", "a".repeat(41));
        assert_eq!(
            err.to_string(),
            format!("failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long (64 characters is the max, 65 characters requested)")
        );
    }

    /// kubelet's managed file, byte for byte, with and without a domain and with host aliases.
    #[test]
    fn managed_hosts_file_is_kubelets() {
        let names = PodHostname {
            hostname: "web".into(),
            domain: None,
        };
        let base = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n";
        assert_eq!(
            managed_hosts(&["10.0.0.5".into()], &names, &[]),
            format!("{base}10.0.0.5\tweb\n")
        );
        let names = PodHostname {
            hostname: "web".into(),
            domain: Some("t.ns1.svc.cluster.local".into()),
        };
        let aliases = [
            HostAlias {
                ip: "123.45.67.89".into(),
                hostnames: Some(vec!["foo".into(), "bar".into()]),
            },
            HostAlias {
                ip: "10.1.1.1".into(),
                hostnames: Some(vec!["baz".into()]),
            },
        ];
        assert_eq!(
            managed_hosts(&["10.0.0.5".into()], &names, &aliases),
            format!("{base}10.0.0.5\tweb.t.ns1.svc.cluster.local\tweb\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n10.1.1.1\tbaz\n")
        );
        assert_eq!(
            host_network_hosts("127.0.0.1 localhost\n", &aliases[1..]),
            "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n\n# Entries added by HostAliases.\n10.1.1.1\tbaz\n"
        );
    }

    /// A container that mounts its own /etc/hosts keeps it.
    #[test]
    fn own_mounts_are_recognised() {
        let mut c = Container::default();
        assert!(!mounts_own(&c, ETC_HOSTS));
        c.volume_mounts = Some(vec![VolumeMount {
            name: "h".into(),
            mount_path: "/etc/hosts".into(),
            ..Default::default()
        }]);
        assert!(mounts_own(&c, ETC_HOSTS));
        assert!(!mounts_own(&c, ETC_RESOLV_CONF));
    }
}
