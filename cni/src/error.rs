//! What can go wrong with CNI, in libcni's and cri-dockerd's words where they have some.

use std::path::PathBuf;

/// A network configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The configuration directory cannot be read.
    #[error("error reading CNI config directory {dir}: {source}")]
    ReadDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file cannot be read.
    #[error("error reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file is not JSON, or not a network configuration (libcni's `ConfFromBytes` /
    /// `ConfListFromBytes`).
    #[error("error parsing configuration {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A field is missing or has the wrong type.
    #[error("error parsing configuration {path}: {what}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, in libcni's words.
        what: String,
    },
}

/// Running one plugin failed.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// No executable of that name in any `--cni-bin-dir` (libcni's `invoke.FindInPath`).
    #[error("failed to find plugin {plugin:?} in path {dirs:?}")]
    NotFound {
        /// The plugin's `type`.
        plugin: String,
        /// The directories searched.
        dirs: Vec<PathBuf>,
    },
    /// The plugin could not be started or its output read.
    #[error("failed to run plugin {plugin:?}: {source}")]
    Spawn {
        /// The plugin's `type`.
        plugin: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The plugin did not finish in time; it was killed.
    #[error("plugin {plugin:?} did not finish in {timeout:?}: killed")]
    Timeout {
        /// The plugin's `type`.
        plugin: String,
        /// The limit.
        timeout: std::time::Duration,
    },
    /// The plugin exited non-zero with a CNI error on stdout (the spec's error object; libcni's
    /// `types.Error`, whose text is `msg`, then `; details` if any).
    #[error("{}", plugin_message(msg, details))]
    Failed {
        /// The CNI error code.
        code: u32,
        /// `msg`.
        msg: String,
        /// `details`.
        details: String,
    },
    /// The plugin exited non-zero without a CNI error (libcni's `pluginErr`).
    #[error("netplugin failed: {output:?}")]
    FailedWithOutput {
        /// Its stdout and stderr.
        output: String,
    },
    /// The plugin exited non-zero and said nothing.
    #[error("netplugin failed with no error message: {status}")]
    FailedSilently {
        /// Its exit status.
        status: std::process::ExitStatus,
    },
    /// It exited 0 but its output is not a CNI result.
    #[error("plugin {plugin:?} returned a result that is not a CNI result: {source}")]
    BadResult {
        /// The plugin's `type`.
        plugin: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

fn plugin_message(msg: &str, details: &str) -> String {
    if details.is_empty() {
        msg.to_string()
    } else {
        format!("{msg}; {details}")
    }
}

/// A network operation on a sandbox failed.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// No valid network configuration: kubelet's "cni config uninitialized".
    #[error("cni config uninitialized")]
    Uninitialized,
    /// One plugin of the list failed (libcni: `plugin type="bridge" name="net" failed (add): …`).
    #[error("plugin type={plugin:?} name={network:?} failed ({command}): {source}")]
    Plugin {
        /// The plugin's `type`.
        plugin: String,
        /// The network's `name`.
        network: String,
        /// `add`, `del`, `check`.
        command: &'static str,
        /// What the plugin said.
        #[source]
        source: PluginError,
    },
    /// The result could not be kept in the cache (the next DEL would miss it).
    #[error("failed to write the CNI cache file {path}: {source}")]
    Cache {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
