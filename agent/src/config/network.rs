//! The pod network slice: `--network-plugin` (`cni`, or empty for Docker's bridge; unset: `cni`
//! when `--cni-conf-dir` holds a usable configuration at start), `--cni-conf-dir`
//! (`/etc/cni/net.d`), `--cni-bin-dir` (`/opt/cni/bin`, several allowed), `--cni-cache-dir`
//! (`/var/lib/cni/cache`) — cri-dockerd's flags and defaults (`cmd/cri/options`), which kubelet
//! had before dockershim left it — `--pod-cidr` (`podCIDR`), and two dockerlet extensions:
//! `--cni-plugin-timeout` and `--cni-conf-template` (containerd's `conf_template`).

use std::path::PathBuf;
use std::time::Duration;

use dockerlet_cni::CniSettings;

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// cri-dockerd's defaults.
const CNI_CONF_DIR: &str = "/etc/cni/net.d";
const CNI_BIN_DIR: &str = "/opt/cni/bin";
const CNI_CACHE_DIR: &str = "/var/lib/cni/cache";
/// kubelet's `runtimeRequestTimeout`, which bounds a sandbox's creation with its network.
const CNI_PLUGIN_TIMEOUT: Duration = Duration::from_secs(120);

/// Which network the pods' sandboxes get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkPlugin {
    /// `--network-plugin=cni`.
    Cni,
    /// `--network-plugin=` (empty): Docker's bridge.
    DockerBridge,
    /// Not given: CNI if a configuration loads at start.
    Detect,
}

/// The pod network settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkSettings {
    /// The plugin asked for.
    pub plugin: NetworkPlugin,
    /// Where CNI's configurations, plugins and cache are (used with [`NetworkPlugin::Cni`] or
    /// when detected).
    pub cni: CniSettings,
    /// `--pod-cidr` (`podCIDR`).
    pub pod_cidr: Option<String>,
    /// `--cni-conf-template`.
    pub conf_template: Option<PathBuf>,
}

/// Whether `text` is an address range `ip/prefix` (IPv4 or IPv6).
fn is_cidr(text: &str) -> bool {
    let Some((ip, bits)) = text.split_once('/') else {
        return false;
    };
    let max = match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => 32,
        Ok(std::net::IpAddr::V6(_)) => 128,
        Err(_) => return false,
    };
    bits.parse::<u8>().is_ok_and(|b| b <= max)
}

/// The network settings from the flags, validated; `node` is kept with each attachment.
pub(super) fn resolve(cli: &Cli, file: &FileSettings, node: &str) -> Result<NetworkSettings, ConfigError> {
    let plugin = match cli.network_plugin.as_deref() {
        None => NetworkPlugin::Detect,
        Some("cni") => NetworkPlugin::Cni,
        Some("") => NetworkPlugin::DockerBridge,
        Some("kubenet") => {
            return Err(invalid(
                "--network-plugin",
                "kubenet is not supported: use cni with the bridge and host-local plugins".into(),
            ))
        }
        Some(other) => {
            return Err(invalid(
                "--network-plugin",
                format!("network plugin {other:?} not found: must be \"cni\" or empty (Docker's bridge)"),
            ))
        }
    };
    let bin_dirs = if cli.cni_bin_dir.is_empty() {
        vec![PathBuf::from(CNI_BIN_DIR)]
    } else {
        cli.cni_bin_dir.clone()
    };
    if let Some(relative) = bin_dirs.iter().find(|d| d.is_relative()) {
        return Err(invalid(
            "--cni-bin-dir",
            format!("{} is not an absolute path", relative.display()),
        ));
    }
    let timeout = cli.cni_plugin_timeout.unwrap_or(CNI_PLUGIN_TIMEOUT);
    if timeout.is_zero() {
        return Err(invalid("--cni-plugin-timeout", "must be more than 0".into()));
    }
    let (pod_cidr, setting) = match (&cli.pod_cidr, &file.pod_cidr) {
        (Some(flag), _) => (Some(flag.clone()), "--pod-cidr"),
        (None, Some(key)) => (Some(key.clone()), "podCIDR"),
        (None, None) => (None, "--pod-cidr"),
    };
    let pod_cidr = pod_cidr.filter(|c| !c.is_empty());
    if let Some(bad) = pod_cidr.as_deref().filter(|c| !is_cidr(c)) {
        return Err(invalid(
            setting,
            format!("{bad:?} is not a CIDR (address/prefix length)"),
        ));
    }
    Ok(NetworkSettings {
        plugin,
        cni: CniSettings {
            conf_dir: cli.cni_conf_dir.clone().unwrap_or_else(|| CNI_CONF_DIR.into()),
            bin_dirs,
            cache_dir: cli.cni_cache_dir.clone().unwrap_or_else(|| CNI_CACHE_DIR.into()),
            timeout,
            node: node.to_string(),
        },
        pod_cidr,
        conf_template: cli.cni_conf_template.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn resolve_args(args: &[&str]) -> Result<NetworkSettings, ConfigError> {
        let cli = Cli::try_parse_from(std::iter::once("dockerlet").chain(args.iter().copied())).expect("parses");
        resolve(&cli, &FileSettings::default(), "node-a")
    }

    /// cri-dockerd's defaults; detection when the flag is absent.
    #[test]
    fn defaults_are_cri_dockerds() {
        let s = resolve_args(&[]).expect("valid");
        assert_eq!(s.plugin, NetworkPlugin::Detect);
        assert_eq!(s.cni.conf_dir, PathBuf::from("/etc/cni/net.d"));
        assert_eq!(s.cni.bin_dirs, vec![PathBuf::from("/opt/cni/bin")]);
        assert_eq!(s.cni.cache_dir, PathBuf::from("/var/lib/cni/cache"));
        assert_eq!(s.cni.timeout, Duration::from_secs(120));
        assert_eq!(s.cni.node, "node-a");
    }

    /// Several binary directories; cni and empty accepted; kubenet and others refused naming
    /// the flag.
    #[test]
    fn the_flags_are_read_and_checked() {
        let s =
            resolve_args(&["--network-plugin", "cni", "--cni-bin-dir", "/usr/lib/cni,/opt/cni/bin"]).expect("valid");
        assert_eq!(s.plugin, NetworkPlugin::Cni);
        assert_eq!(
            s.cni.bin_dirs,
            vec![PathBuf::from("/usr/lib/cni"), PathBuf::from("/opt/cni/bin")]
        );
        assert_eq!(
            resolve_args(&["--network-plugin="]).expect("valid").plugin,
            NetworkPlugin::DockerBridge
        );
        for (args, setting) in [
            (&["--network-plugin", "kubenet"][..], "--network-plugin"),
            (&["--network-plugin", "flannel"][..], "--network-plugin"),
            (&["--cni-bin-dir", "bin"][..], "--cni-bin-dir"),
            (&["--cni-plugin-timeout", "0s"][..], "--cni-plugin-timeout"),
            (&["--pod-cidr", "10.0.0.0"][..], "--pod-cidr"),
            (&["--pod-cidr", "10.0.0.0/33"][..], "--pod-cidr"),
        ] {
            let e = resolve_args(args).expect_err("refused");
            assert!(e.to_string().contains(setting), "{args:?}: {e}");
        }
    }
}
