//! The reserved resources slice: `--kube-reserved` and `--system-reserved` (`kubeReserved`,
//! `systemReserved`), what the node's allocatable leaves out. How they are enforced is
//! [`super::node_settings`].

use std::collections::BTreeMap;

use dockerlet_pod::quantity::parse_quantity;

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The reserved resources: cpu in millicores, the rest in units.
pub(super) struct Reserved {
    /// Both together.
    pub total: BTreeMap<String, i64>,
    /// `--kube-reserved` and `--system-reserved` apart, for their cgroups.
    pub each: [BTreeMap<String, i64>; 2],
}

/// Each flag over its file key; `resource=quantity` pairs of cpu, memory, ephemeral-storage
/// and pid only.
pub(super) fn resolve(cli: &Cli, file: &FileSettings) -> Result<Reserved, ConfigError> {
    let mut reserved = Reserved {
        total: BTreeMap::new(),
        each: Default::default(),
    };
    for (i, (setting, flag, from_file)) in [
        ("--kube-reserved", &cli.kube_reserved, &file.kube_reserved),
        ("--system-reserved", &cli.system_reserved, &file.system_reserved),
    ]
    .into_iter()
    .enumerate()
    {
        for (resource, quantity) in pairs(setting, flag, from_file)? {
            if !["cpu", "memory", "ephemeral-storage", "pid"].contains(&resource.as_str()) {
                return Err(invalid(
                    setting,
                    format!("{resource:?}: unknown resource (cpu, memory, ephemeral-storage, pid)"),
                ));
            }
            let value = parse_quantity(&quantity, resource == "cpu")
                .ok_or_else(|| invalid(setting, format!("{resource}={quantity}: not a quantity")))?;
            *reserved.total.entry(resource.clone()).or_insert(0) += value;
            *reserved.each[i].entry(resource).or_insert(0) += value;
        }
    }
    Ok(reserved)
}

/// The flag's `resource=quantity` pairs, or the file's map when the flag is not given.
fn pairs(
    setting: &str,
    flag: &[String],
    from_file: &Option<BTreeMap<String, String>>,
) -> Result<Vec<(String, String)>, ConfigError> {
    if !flag.iter().any(|r| !r.is_empty()) {
        return Ok(from_file.clone().unwrap_or_default().into_iter().collect());
    }
    flag.iter()
        .filter(|r| !r.is_empty())
        .map(|r| {
            r.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| invalid(setting, format!("{r:?} is not resource=quantity")))
        })
        .collect()
}
