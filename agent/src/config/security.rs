//! The security slice: `--seccomp-default` and `--allowed-unsafe-sysctls`, flags over the
//! file's `seccompDefault` and `allowedUnsafeSysctls`.

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The pods' security defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Security {
    /// `--seccomp-default`: unset seccomp profiles mean RuntimeDefault.
    pub seccomp_default: bool,
    /// `--allowed-unsafe-sysctls`: namespaced patterns only (kubelet's check).
    pub allowed_unsafe_sysctls: Vec<String>,
}

/// The security defaults; a sysctl pattern that is not namespaced is refused naming the flag.
pub(super) fn resolve(cli: &Cli, file: &FileSettings) -> Result<Security, ConfigError> {
    let allowed_unsafe_sysctls = if cli.allowed_unsafe_sysctls.is_empty() {
        file.allowed_unsafe_sysctls.clone().unwrap_or_default()
    } else {
        cli.allowed_unsafe_sysctls.clone()
    };
    let allowed_unsafe_sysctls: Vec<String> = allowed_unsafe_sysctls.into_iter().filter(|s| !s.is_empty()).collect();
    dockerlet_pod::admission::check_unsafe_sysctl_patterns(&allowed_unsafe_sysctls)
        .map_err(|e| invalid("--allowed-unsafe-sysctls", e.to_string()))?;
    Ok(Security {
        seccomp_default: cli.seccomp_default.or(file.seccomp_default).unwrap_or(false),
        allowed_unsafe_sysctls,
    })
}
