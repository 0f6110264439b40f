//! The log options every container is created with: Docker rotates its own log files, sized by
//! kubelet's `containerLogMaxSize` and `containerLogMaxFiles`.
//!
//! Under cri-dockerd the kubelet's own rotation cannot work (Docker cannot be told to reopen a
//! log file: cri-dockerd's ReopenContainerLog fails with "docker does not support reopening
//! container log files"), so the sizes go to Docker's file-based log drivers instead, as
//! dockershim did: `max-size` and `max-file` of `json-file` (moby
//! `daemon/logger/jsonfilelog/jsonfilelog.go`) and of `local` (`daemon/logger/local/config.go`).
//! Both read `max-size` with go-units' `FromHumanSize`, so a plain byte count is exact.

use std::collections::HashMap;

use bollard::models::HostConfigLogConfig;

/// Docker's own rotation of each container's log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRotation {
    /// Size in bytes at which Docker rotates the current file (`containerLogMaxSize`, > 0).
    pub max_size: u64,
    /// Files kept, the current one included (`containerLogMaxFiles`, ≥ 2).
    pub max_files: u32,
}

impl Default for LogRotation {
    /// kubelet's defaults: 10Mi, 5 files (`pkg/kubelet/apis/config/v1beta1/defaults.go`).
    fn default() -> Self {
        LogRotation {
            max_size: 10 * 1024 * 1024,
            max_files: 5,
        }
    }
}

/// A log driver that writes files on the node and rotates them itself; `kubectl logs` reads
/// them back through Docker's logs API. Other drivers (journald, syslog, none, …) are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileLogDriver {
    /// `json-file`: Docker's default; the files `/var/log/pods` links to.
    JsonFile,
    /// `local`: Docker's compact, compressed format (no `/var/log/pods` links).
    Local,
}

impl FileLogDriver {
    /// The driver of this name (`LoggingDriver` of `docker info`), if it is file-based.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "json-file" => Some(FileLogDriver::JsonFile),
            "local" => Some(FileLogDriver::Local),
            _ => None,
        }
    }

    /// Docker's name of the driver.
    pub fn name(self) -> &'static str {
        match self {
            FileLogDriver::JsonFile => "json-file",
            FileLogDriver::Local => "local",
        }
    }
}

/// How every container's log is configured at create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerLogConfig {
    /// The engine's default driver, named explicitly.
    pub driver: FileLogDriver,
    /// Its rotation; none when rotation is disabled (kubelet's negative `containerLogMaxSize`):
    /// then the daemon's own `log-opts` apply.
    pub rotation: Option<LogRotation>,
}

impl ContainerLogConfig {
    /// The `HostConfig.LogConfig` of a container: the driver, `max-size` in bytes and
    /// `max-file`. Options given here win over the daemon's `log-opts` (moby merges only the
    /// daemon's keys a container does not set), so a daemon configured without limits cannot
    /// make a container's log unbounded.
    pub(crate) fn host_log_config(&self) -> HostConfigLogConfig {
        let config = self.rotation.map(|r| {
            HashMap::from([
                ("max-size".to_string(), r.max_size.to_string()),
                ("max-file".to_string(), r.max_files.to_string()),
            ])
        });
        HostConfigLogConfig {
            typ: Some(self.driver.name().to_string()),
            config,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes reach Docker as a byte count and a file count, under the driver's name.
    #[test]
    fn log_config_names_driver_and_sizes() {
        let config = ContainerLogConfig {
            driver: FileLogDriver::JsonFile,
            rotation: Some(LogRotation::default()),
        }
        .host_log_config();
        assert_eq!(config.typ.as_deref(), Some("json-file"));
        let opts = config.config.unwrap();
        assert_eq!(opts["max-size"], "10485760");
        assert_eq!(opts["max-file"], "5");

        let local = ContainerLogConfig {
            driver: FileLogDriver::Local,
            rotation: None,
        }
        .host_log_config();
        assert_eq!(local.typ.as_deref(), Some("local"));
        assert_eq!(local.config, None);
    }

    /// Only the file-based drivers are known.
    #[test]
    fn file_drivers_parse() {
        assert_eq!(FileLogDriver::parse("json-file"), Some(FileLogDriver::JsonFile));
        assert_eq!(FileLogDriver::parse("local"), Some(FileLogDriver::Local));
        for other in ["journald", "syslog", "none", "fluentd", ""] {
            assert_eq!(FileLogDriver::parse(other), None, "{other}");
        }
    }
}
