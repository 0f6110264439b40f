//! Whether a process still runs as the one seen before: its start time (`/proc/<pid>/stat`,
//! clock ticks since boot) within this boot (`/proc/sys/kernel/random/boot_id`). A PID alone is
//! reused; a PID, its start time and the boot name one process.

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

#[cfg(test)]
mod tests {
    use super::*;

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
