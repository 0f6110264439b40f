//! The kernel settings kubelet's container manager checks at start: swap (`failSwapOn`) and
//! the kernel tunables it needs (`protectKernelDefaults`).
//!
//! Upstream: `pkg/kubelet/cm/container_manager_linux.go` (NewContainerManager's swap check,
//! `setupKernelTunables`), `pkg/kubelet/util/swap/swap_util.go` (IsSwapOn) and
//! `k8s.io/component-helpers/node/util/sysctl` (the tunables and their values).

use std::path::{Path, PathBuf};

/// `/proc/swaps`.
pub const PROC_SWAPS: &str = "/proc/swaps";
/// `/proc/sys`.
pub const PROC_SYS: &str = "/proc/sys";

/// kubelet's refusal when swap is on and `failSwapOn` is true (NewContainerManager).
pub const SWAP_ON_MESSAGE: &str =
    "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false";

/// The tunables kubelet wants, as sysctl paths under `/proc/sys` with kubelet's values
/// (component-helpers' `VMOvercommitMemoryAlways`, `VMPanicOnOOMInvokeOOMKiller`,
/// `KernelPanicRebootTimeout`, `KernelPanicOnOopsAlways`, `RootMaxKeysSetting`,
/// `RootMaxBytesSetting` = 25 bytes a key).
pub const KERNEL_TUNABLES: [(&str, i64); 6] = [
    ("vm/overcommit_memory", 1),
    ("vm/panic_on_oom", 0),
    ("kernel/panic", 10),
    ("kernel/panic_on_oops", 1),
    ("kernel/keys/root_maxkeys", 1_000_000),
    ("kernel/keys/root_maxbytes", 25_000_000),
];

/// Why the kernel's settings stop the start.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// Swap is on and `failSwapOn` is true.
    #[error("{SWAP_ON_MESSAGE}. {path} contained: {lines:?}")]
    SwapOn {
        /// The swaps file read.
        path: String,
        /// Its swap lines (without the header).
        lines: Vec<String>,
    },
    /// The swaps file exists but cannot be read.
    #[error("failed to determine if swap is on: {path}: {source}")]
    Swaps {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A tunable cannot be read or parsed.
    #[error("kernel tunable {flag}: cannot read {path}: {reason}")]
    Read {
        /// The sysctl (`vm/overcommit_memory`).
        flag: String,
        /// Its file.
        path: String,
        /// Why.
        #[source]
        reason: TunableReadError,
    },
    /// `protectKernelDefaults` and a tunable differs (kubelet's words).
    #[error("invalid kernel flag: {flag}, expected value: {expected}, actual value: {actual}")]
    Differs {
        /// The sysctl.
        flag: String,
        /// kubelet's value.
        expected: i64,
        /// The kernel's.
        actual: i64,
    },
    /// A tunable could not be set.
    #[error("kernel tunable {flag}: cannot write {expected} to {path}: {source}")]
    Write {
        /// The sysctl.
        flag: String,
        /// kubelet's value.
        expected: i64,
        /// Its file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Several of the above (kubelet aggregates them).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Several(Vec<KernelError>),
}

/// The swap lines of a `/proc/swaps`-format file (every non-empty line after the header); none
/// when the file does not exist (as kubelet's IsSwapOn).
pub fn swap_lines(path: &Path) -> Result<Vec<String>, KernelError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(KernelError::Swaps {
                path: path.display().to_string(),
                source,
            })
        }
    };
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .skip(1)
        .map(str::to_string)
        .collect())
}

/// kubelet's start-up swap check: swap on with `fail_swap_on` refuses to start; swap on
/// without it is let through, its swap lines returned for the caller to log (containers still
/// get no swap: their memory-swap limit is their memory limit, kubelet's NoSwap).
pub fn check_swap(path: &Path, fail_swap_on: bool) -> Result<Vec<String>, KernelError> {
    let lines = swap_lines(path)?;
    if fail_swap_on && !lines.is_empty() {
        return Err(KernelError::SwapOn {
            path: path.display().to_string(),
            lines,
        });
    }
    Ok(lines)
}

/// A tunable changed by [`setup_kernel_tunables`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunableChange {
    /// The sysctl.
    pub flag: &'static str,
    /// The value it had.
    pub from: i64,
    /// kubelet's value, now set.
    pub to: i64,
}

/// kubelet's `setupKernelTunables` over the sysctl tree at `root` (`/proc/sys`): with
/// `protect` (`protectKernelDefaults`) every tunable that differs is an error; without it each
/// is set to kubelet's value (KernelTunableModify). Every tunable is tried and the errors are
/// returned together, as kubelet aggregates them.
pub fn setup_kernel_tunables(root: &Path, protect: bool) -> Result<Vec<TunableChange>, KernelError> {
    let mut errors = Vec::new();
    let mut changes = Vec::new();
    for (flag, expected) in KERNEL_TUNABLES {
        let path: PathBuf = root.join(flag);
        let actual = match read_tunable(&path) {
            Ok(v) => v,
            Err(reason) => {
                errors.push(KernelError::Read {
                    flag: flag.to_string(),
                    path: path.display().to_string(),
                    reason,
                });
                continue;
            }
        };
        if actual == expected {
            continue;
        }
        if protect {
            errors.push(KernelError::Differs {
                flag: flag.to_string(),
                expected,
                actual,
            });
            continue;
        }
        match std::fs::write(&path, expected.to_string()) {
            Ok(()) => changes.push(TunableChange {
                flag,
                from: actual,
                to: expected,
            }),
            Err(source) => errors.push(KernelError::Write {
                flag: flag.to_string(),
                expected,
                path: path.display().to_string(),
                source,
            }),
        }
    }
    match errors.len() {
        0 => Ok(changes),
        1 => Err(errors.remove(0)),
        _ => Err(KernelError::Several(errors)),
    }
}

/// Why a tunable's file gave no number.
#[derive(Debug, thiserror::Error)]
pub enum TunableReadError {
    /// The file cannot be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Its text is not a number.
    #[error("{text:?} is not a number: {source}")]
    NotANumber {
        /// The text, trimmed.
        text: String,
        /// Why it does not parse.
        #[source]
        source: std::num::ParseIntError,
    },
}

fn read_tunable(path: &Path) -> Result<i64, TunableReadError> {
    let text = std::fs::read_to_string(path)?;
    text.trim().parse().map_err(|source| TunableReadError::NotANumber {
        text: text.trim().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";

    fn swaps(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("swaps");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    /// As kubelet's TestValidateSwapConfiguration: no file or a header alone is swap off; a
    /// swap line with failSwapOn refuses in kubelet's words, without it is let through.
    #[test]
    fn swap_is_refused_only_when_on_and_fail_swap_on() {
        let dir = tempfile::tempdir().unwrap();
        check_swap(&dir.path().join("absent"), true).unwrap();
        let (_d, header_only) = swaps(HEADER);
        check_swap(&header_only, true).unwrap();
        let (_d, on) = swaps(&format!("{HEADER}/dev/dm-1   partition\t16760828\t0\t-2\n"));
        assert_eq!(check_swap(&on, false).unwrap().len(), 1);
        let e = check_swap(&on, true).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false. "
            ),
            "{e}"
        );
        assert!(e.contains("/dev/dm-1"), "{e}");
    }

    fn sys_root(values: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (flag, value) in values {
            let path = dir.path().join(flag);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, format!("{value}\n")).unwrap();
        }
        dir
    }

    const THIS_MACHINE: [(&str, &str); 6] = [
        ("vm/overcommit_memory", "0"),
        ("vm/panic_on_oom", "0"),
        ("kernel/panic", "1"),
        ("kernel/panic_on_oops", "0"),
        ("kernel/keys/root_maxkeys", "1000000"),
        ("kernel/keys/root_maxbytes", "25000000"),
    ];

    /// protectKernelDefaults: each differing tunable named with kubelet's message, nothing
    /// written.
    #[test]
    fn protected_tunables_that_differ_refuse_the_start() {
        let root = sys_root(&THIS_MACHINE);
        let e = setup_kernel_tunables(root.path(), true).unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid kernel flag: vm/overcommit_memory, expected value: 1, actual value: 0, \
             invalid kernel flag: kernel/panic, expected value: 10, actual value: 1, \
             invalid kernel flag: kernel/panic_on_oops, expected value: 1, actual value: 0"
        );
        let read = |f: &str| std::fs::read_to_string(root.path().join(f)).unwrap();
        assert_eq!(read("kernel/panic").trim(), "1");
    }

    /// Without protection the differing tunables are set to kubelet's values and reported;
    /// a second run changes nothing.
    #[test]
    fn unprotected_tunables_are_set_to_kubelets_values() {
        let root = sys_root(&THIS_MACHINE);
        let changes = setup_kernel_tunables(root.path(), false).unwrap();
        assert_eq!(
            changes.iter().map(|c| (c.flag, c.from, c.to)).collect::<Vec<_>>(),
            [
                ("vm/overcommit_memory", 0, 1),
                ("kernel/panic", 1, 10),
                ("kernel/panic_on_oops", 0, 1)
            ]
        );
        let read = |f: &str| std::fs::read_to_string(root.path().join(f)).unwrap();
        assert_eq!(read("kernel/panic"), "10");
        assert!(setup_kernel_tunables(root.path(), false).unwrap().is_empty());
        setup_kernel_tunables(root.path(), true).unwrap();
    }

    /// A tunable that cannot be read stops the start, naming it and its file.
    #[test]
    fn a_missing_tunable_is_an_error_naming_it() {
        let root = sys_root(&THIS_MACHINE[..5]);
        let e = setup_kernel_tunables(root.path(), true).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("kernel tunable kernel/keys/root_maxbytes: cannot read "),
            "{text}"
        );
    }
}
