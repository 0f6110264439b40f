//! The servers slice: where the agent listens (`--address`, `--port`, `--read-only-port`,
//! `--healthz-port`/`--healthz-bind-address`, the debug address), flags over the file. The
//! kubelet API's own settings are [`super::kubelet_api`].

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::file::FileSettings;
use crate::cli::Cli;

/// The listening addresses.
#[derive(Debug, Clone, PartialEq)]
pub struct Servers {
    /// `--address`: the kubelet API's and the read-only API's address.
    pub address: IpAddr,
    /// `--port` (advertised in the Node's daemon endpoints).
    pub port: u16,
    /// Read-only API address; none when disabled.
    pub read_only: Option<SocketAddr>,
    /// Healthz address; none when disabled.
    pub healthz: Option<SocketAddr>,
    /// Debug endpoint address.
    pub debug: SocketAddr,
}

impl Servers {
    /// The kubelet API's `--address:--port`.
    pub fn kubelet_api(&self) -> SocketAddr {
        SocketAddr::new(self.address, self.port)
    }
}

/// The addresses, flags over the file over kubelet's defaults (nothing here is refused).
pub(super) fn resolve(cli: &Cli, file: &FileSettings) -> Servers {
    // kubelet: the read-only port defaults to 10255 with flags only, 0 with a config file.
    let read_only_port = cli
        .read_only_port
        .or(file.read_only_port)
        .unwrap_or(if file.present { 0 } else { 10255 });
    let healthz_port = cli.healthz_port.or(file.healthz_port).unwrap_or(10248);
    let address = cli
        .address
        .or(file.address)
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let healthz_bind = cli
        .healthz_bind_address
        .or(file.healthz_bind_address)
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    Servers {
        address,
        port: cli.port.or(file.port).unwrap_or(10250),
        read_only: (read_only_port != 0).then(|| SocketAddr::new(address, read_only_port)),
        healthz: (healthz_port != 0).then(|| SocketAddr::new(healthz_bind, healthz_port)),
        debug: cli
            .debug_address
            .or(file.debug_address)
            .unwrap_or_else(|| "127.0.0.1:10265".parse().expect("valid default")),
    }
}
