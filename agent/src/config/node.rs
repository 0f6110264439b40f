//! The node slice: its name (`--hostname-override` or the hostname) and how it registers and
//! reports (`--node-ip`, `--node-labels`, `--register-node`, `--register-with-taints`, the status
//! and lease periods), flags over the file.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The node's name: `--hostname-override` or `hostname`, trimmed and lowercased; refused when
/// it is no DNS subdomain of at most 63 characters.
pub(super) fn name(cli: &Cli, hostname: impl FnOnce() -> String) -> Result<String, ConfigError> {
    let node_name = cli
        .hostname_override
        .clone()
        .unwrap_or_else(hostname)
        .trim()
        .to_lowercase();
    let valid_name = !node_name.is_empty()
        && node_name.len() <= 63
        && node_name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !node_name.starts_with(['-', '.'])
        && !node_name.ends_with(['-', '.']);
    if !valid_name {
        return Err(invalid(
            "--hostname-override",
            format!("{node_name:?} is not a valid node name (lowercase letters, digits, '-' and '.', at most 63)"),
        ));
    }
    Ok(node_name)
}

/// How the node registers and reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    /// `--node-ip`, when given.
    pub node_ip: Option<IpAddr>,
    /// `--register-node`.
    pub register_node: bool,
    /// `--node-labels`.
    pub labels: BTreeMap<String, String>,
    /// `nodeStatusUpdateFrequency`.
    pub status_update_frequency: Duration,
    /// `nodeStatusReportFrequency`.
    pub status_report_frequency: Duration,
    /// `nodeLeaseDurationSeconds`.
    pub lease_duration_seconds: i32,
    /// `--register-with-taints`.
    pub taints: Vec<Taint>,
    /// `--node-status-max-images`.
    pub status_max_images: i64,
}

/// The registration settings, flags over the file over kubelet's defaults; the report
/// frequency follows an explicitly set update frequency, as kubelet's.
pub(super) fn registration(cli: &Cli, file: &FileSettings) -> Result<Registration, ConfigError> {
    let mut labels = BTreeMap::new();
    for label in cli.node_labels.iter().filter(|l| !l.is_empty()) {
        let (key, value) = label
            .split_once('=')
            .ok_or_else(|| invalid("--node-labels", format!("{label:?} is not key=value")))?;
        labels.insert(key.to_string(), value.to_string());
    }
    let update_frequency = cli.node_status_update_frequency.or(file.node_status_update_frequency);
    let status_update_frequency = update_frequency.unwrap_or(Duration::from_secs(10));
    if status_update_frequency.is_zero() {
        return Err(invalid(
            "--node-status-update-frequency",
            "must be greater than 0".to_string(),
        ));
    }
    let lease_duration_seconds = cli
        .node_lease_duration_seconds
        .or(file.node_lease_duration_seconds)
        .unwrap_or(40);
    if lease_duration_seconds < 1 {
        return Err(invalid(
            "--node-lease-duration-seconds",
            "must be at least 1".to_string(),
        ));
    }
    let status_report_frequency = file.node_status_report_frequency.unwrap_or(match update_frequency {
        Some(_) => status_update_frequency,
        None => Duration::from_secs(300),
    });
    let (status_max_images, setting) = match (cli.node_status_max_images, file.node_status_max_images) {
        (Some(n), _) => (n, "--node-status-max-images"),
        (None, Some(n)) => (n, "nodeStatusMaxImages"),
        (None, None) => (50, "--node-status-max-images"),
    };
    if status_max_images < -1 {
        // kubelet's `validation.go`.
        return Err(invalid(
            setting,
            format!("invalid configuration: nodeStatusMaxImages (--node-status-max-images) {status_max_images} must be -1 or greater"),
        ));
    }
    Ok(Registration {
        status_max_images,
        node_ip: cli.node_ip,
        register_node: cli.register_node.or(file.register_node).unwrap_or(true),
        labels,
        status_update_frequency,
        status_report_frequency,
        lease_duration_seconds,
        taints: taints(cli, file)?,
    })
}

/// `--register-with-taints` (kubelet's flag syntax) over the file's `registerWithTaints`, each
/// with a key and a known effect.
fn taints(cli: &Cli, file: &FileSettings) -> Result<Vec<Taint>, ConfigError> {
    let taints = match cli.register_with_taints.iter().any(|t| !t.is_empty()) {
        true => cli
            .register_with_taints
            .iter()
            .filter(|t| !t.is_empty())
            .map(|t| parse_taint(t).map_err(|e| invalid("--register-with-taints", e.to_string())))
            .collect::<Result<Vec<_>, _>>()?,
        false => file.register_with_taints.clone().unwrap_or_default(),
    };
    for taint in &taints {
        check_taint(taint).map_err(|e| invalid("--register-with-taints", e.to_string()))?;
    }
    Ok(taints)
}

/// Why a `--register-with-taints` entry is refused.
#[derive(Debug, thiserror::Error)]
enum TaintError {
    /// No `:Effect`.
    #[error("{0:?}: expected key=value:Effect")]
    Syntax(String),
    /// An empty key.
    #[error("a taint needs a key")]
    NoKey,
    /// An effect kubelet does not know.
    #[error("taint {key}: effect {effect:?} is not NoSchedule, PreferNoSchedule or NoExecute")]
    Effect {
        /// The taint's key.
        key: String,
        /// The effect as written.
        effect: String,
    },
}

/// A taint from kubelet's flag syntax: `key=value:Effect` or `key:Effect`.
fn parse_taint(text: &str) -> Result<Taint, TaintError> {
    let (key_value, effect) = text
        .rsplit_once(':')
        .ok_or_else(|| TaintError::Syntax(text.to_string()))?;
    let (key, value) = match key_value.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (key_value, None),
    };
    Ok(Taint {
        key: key.to_string(),
        value,
        effect: effect.to_string(),
        time_added: None,
    })
}

fn check_taint(taint: &Taint) -> Result<(), TaintError> {
    if taint.key.is_empty() {
        return Err(TaintError::NoKey);
    }
    if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&taint.effect.as_str()) {
        return Err(TaintError::Effect {
            key: taint.key.clone(),
            effect: taint.effect.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("dockerlet").chain(args.iter().copied())).unwrap()
    }

    /// The name is the hostname lowercased and trimmed unless overridden; a name that is no
    /// DNS label sequence is refused naming `--hostname-override`.
    #[test]
    fn the_node_name() {
        assert_eq!(
            name(&cli(&[]), || " Node-1.Example \n".into()).unwrap(),
            "node-1.example"
        );
        assert_eq!(name(&cli(&["--hostname-override", "n2"]), || "x".into()).unwrap(), "n2");
        let err = name(&cli(&[]), || "a".repeat(64)).unwrap_err().to_string();
        assert!(err.starts_with("invalid value for --hostname-override: "), "{err}");
    }

    /// Labels are `key=value`; the report frequency follows an update frequency set in the
    /// file (kubelet's defaulting), else 5 m; the file's taints are taken when no flag is given.
    #[test]
    fn registration_from_flags_and_file() {
        let file = FileSettings {
            node_status_update_frequency: Some(Duration::from_secs(7)),
            register_with_taints: Some(vec![Taint {
                key: "k".into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            }]),
            ..FileSettings::default()
        };
        let r = registration(&cli(&["--node-labels", "a=b,c="]), &file).unwrap();
        assert_eq!(
            r.labels,
            BTreeMap::from([("a".to_string(), "b".to_string()), ("c".to_string(), String::new())])
        );
        assert_eq!(
            (r.status_update_frequency, r.status_report_frequency),
            (Duration::from_secs(7), Duration::from_secs(7))
        );
        assert_eq!(
            (r.taints.len(), r.register_node, r.lease_duration_seconds),
            (1, true, 40)
        );
        let r = registration(&cli(&[]), &FileSettings::default()).unwrap();
        assert_eq!(r.status_report_frequency, Duration::from_secs(300));
        let err = registration(&cli(&["--node-labels", "a"]), &file)
            .err()
            .unwrap()
            .to_string();
        assert_eq!(err, r#"invalid value for --node-labels: "a" is not key=value"#);
    }
}
