//! The DNS slice: `--cluster-dns` (IPs), `--cluster-domain`, `--resolv-conf` (empty for none),
//! flags over the file's `clusterDNS`, `clusterDomain`, `resolvConf`.

use std::net::IpAddr;
use std::path::PathBuf;

use dockerlet_pod::dns::ClusterDns;

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The pods' cluster DNS; a server that is no IP address is refused naming the flag or key.
pub(super) fn resolve(cli: &Cli, file: &FileSettings) -> Result<ClusterDns, ConfigError> {
    let (setting, servers) = if cli.cluster_dns.iter().any(|s| !s.is_empty()) {
        ("--cluster-dns", cli.cluster_dns.clone())
    } else {
        ("clusterDNS", file.cluster_dns.clone().unwrap_or_default())
    };
    let servers = servers
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.trim()
                .parse::<IpAddr>()
                .map_err(|_| invalid(setting, format!("{s:?} is not an IP address")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let domain = cli
        .cluster_domain
        .clone()
        .or_else(|| file.cluster_domain.clone())
        .unwrap_or_default()
        .trim_end_matches('.')
        .to_string();
    let resolv_conf = cli
        .resolv_conf
        .clone()
        .map(PathBuf::from)
        .or_else(|| file.resolv_conf.clone())
        .unwrap_or_else(|| PathBuf::from("/etc/resolv.conf"));
    Ok(ClusterDns {
        servers,
        domain,
        resolv_conf: (!resolv_conf.as_os_str().is_empty()).then_some(resolv_conf),
    })
}
