//! The process slice: the agent's own command-line-only settings: `--root-dir`, `-v`,
//! `--lock-file` and `--exit-on-lock-contention`, the fault-injection hook and the hidden paths
//! tests point elsewhere.

use std::path::PathBuf;

use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The agent process's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Process {
    /// `--root-dir`: the state directory.
    pub root_dir: PathBuf,
    /// `-v`: log verbosity.
    pub verbosity: u8,
    /// `--lock-file` and `--exit-on-lock-contention`.
    pub lock: Option<LockFile>,
    /// `--enable-fault-injection`.
    pub fault_injection: bool,
    /// The kernel log of the OOM watcher (`/dev/kmsg`; hidden `--kmsg-path` for tests).
    pub kmsg_path: PathBuf,
    /// Where the kernel tunables and swaps are read (hidden flags for tests).
    pub proc_paths: (PathBuf, PathBuf),
}

/// `--lock-file`: the file, and whether to exit when another process opens it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockFile {
    /// The file flock(2) locks.
    pub path: PathBuf,
    /// `--exit-on-lock-contention`.
    pub exit_on_contention: bool,
}

/// The flags, with kubelet's `--root-dir` default replaced by dockerlet's own directory.
pub(super) fn resolve(cli: &Cli) -> Result<Process, ConfigError> {
    // kubelet's words (`cmd/kubelet/app/server.go`).
    if cli.exit_on_lock_contention && cli.lock_file.is_none() {
        return Err(invalid(
            "--exit-on-lock-contention",
            "cannot exit on lock file contention: no lock file specified".into(),
        ));
    }
    Ok(Process {
        root_dir: cli
            .root_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("/var/lib/dockerlet")),
        verbosity: cli.verbosity.unwrap_or(0),
        lock: cli.lock_file.clone().map(|path| LockFile {
            path,
            exit_on_contention: cli.exit_on_lock_contention,
        }),
        fault_injection: cli.enable_fault_injection,
        kmsg_path: cli.kmsg_path.clone(),
        proc_paths: (cli.proc_sys_root.clone(), cli.proc_swaps.clone()),
    })
}
