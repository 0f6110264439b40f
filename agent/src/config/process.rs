//! The process slice: the agent's own command-line-only settings: `--root-dir`, `-v`, the
//! fault-injection hook and the hidden paths tests point elsewhere.

use std::path::PathBuf;

use crate::cli::Cli;

/// The agent process's settings.
pub(super) struct Process {
    /// `--root-dir`: the state directory.
    pub root_dir: PathBuf,
    /// `-v`: log verbosity.
    pub verbosity: u8,
    /// `--enable-fault-injection`.
    pub fault_injection: bool,
    /// The kernel log of the OOM watcher (`/dev/kmsg`; hidden `--kmsg-path` for tests).
    pub kmsg_path: PathBuf,
    /// Where the kernel tunables and swaps are read (hidden flags for tests).
    pub proc_paths: (PathBuf, PathBuf),
}

/// The flags, with kubelet's `--root-dir` default replaced by dockerlet's own directory.
pub(super) fn resolve(cli: &Cli) -> Process {
    Process {
        root_dir: cli
            .root_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("/var/lib/dockerlet")),
        verbosity: cli.verbosity.unwrap_or(0),
        fault_injection: cli.enable_fault_injection,
        kmsg_path: cli.kmsg_path.clone(),
        proc_paths: (cli.proc_sys_root.clone(), cli.proc_swaps.clone()),
    }
}
