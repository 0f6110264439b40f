//! Whether a process still runs as the one seen before: its start time (`/proc/<pid>/stat`,
//! clock ticks since boot) within this boot (`/proc/sys/kernel/random/boot_id`). A PID alone is
//! reused; a PID, its start time and the boot name one process. And the process's own limit on
//! open files.

/// This boot's ID; empty if it cannot be read.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// When process `pid` started, in clock ticks since boot; none if it does not run.
pub fn start_time(pid: u32) -> Option<u64> {
    let pid = i32::try_from(pid).ok()?;
    procfs::process::Process::new(pid)
        .ok()?
        .stat()
        .ok()
        .map(|s| s.starttime)
}

/// Whether the process `pid` that started at `started` in boot `boot` still runs.
pub fn still_runs(pid: u32, started: u64, boot: &str) -> bool {
    !boot.is_empty() && boot == boot_id() && start_time(pid) == Some(started)
}

/// The open-files limit before and after [`raise_open_files_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFilesLimit {
    /// The soft limit the process started with.
    pub was: u64,
    /// The soft limit now (the hard limit, when it could be raised).
    pub now: u64,
}

/// Raises this process's soft limit on open files to its hard limit, as Go's runtime does for
/// every Go program since 1.19 (kubelet included): a systemd service starts with 1024 soft
/// (and 524288 hard), too few for a node's connections, watches and container logs. An
/// unlimited hard limit is left as the soft one already is, if that is unlimited too.
pub fn raise_open_files_limit() -> std::io::Result<OpenFilesLimit> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let was = limit.current.unwrap_or(u64::MAX);
    let Some(hard) = limit.maximum else {
        return Ok(OpenFilesLimit { was, now: was });
    };
    if was >= hard {
        return Ok(OpenFilesLimit { was, now: was });
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(hard),
            maximum: Some(hard),
        },
    )?;
    Ok(OpenFilesLimit { was, now: hard })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_files_limit_is_raised_to_the_hard_one() {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let before = getrlimit(Resource::Nofile);
        let Some(hard) = before.maximum.filter(|h| *h > 256) else {
            return; // an unlimited or tiny hard limit: nothing to raise to
        };
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(256),
                maximum: Some(hard),
            },
        )
        .expect("lowering the soft limit is allowed");
        let raised = raise_open_files_limit().expect("raise");
        assert_eq!(raised, OpenFilesLimit { was: 256, now: hard });
        assert_eq!(getrlimit(Resource::Nofile).current, Some(hard));
        assert_eq!(
            raise_open_files_limit().unwrap(),
            OpenFilesLimit { was: hard, now: hard }
        );
    }

    #[test]
    fn this_process_runs_and_a_different_start_does_not() {
        let me = std::process::id();
        let started = start_time(me).expect("this process's start time");
        assert!(still_runs(me, started, &boot_id()));
        assert!(
            !still_runs(me, started + 1, &boot_id()),
            "another start time: another process"
        );
        assert!(!still_runs(me, started, "another-boot"));
    }
}
