//! The node's system cgroups, as kubelet's container manager keeps them with the cgroupfs
//! driver (`pkg/kubelet/cm/container_manager_linux.go`): `--kubelet-cgroups` (the agent moves
//! itself in) and `--system-cgroups` (every non-kernel process left in the root cgroup is moved
//! in, but PID 1; kernel threads stay at the root so they are not tied to the system cgroup's
//! limits). Both are re-applied every minute by the agent. `--runtime-cgroups` is only read
//! (the engine is started there by whoever starts it). Blocking I/O: call on `spawn_blocking`.

use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use super::tree::{make_cgroup, CgroupTreeError};
use super::{CgroupLayout, CgroupVersion};

/// The v1 controllers a system cgroup is made in and its processes are moved into: those the
/// stats read (CPU, memory, PIDs, block IO).
const V1_CONTROLLERS: [&str; 5] = ["cpu", "cpuacct", "memory", "pids", "blkio"];

/// Why a process could not be put in a system cgroup.
#[derive(Debug, thiserror::Error)]
pub enum SystemCgroupError {
    /// `/` names the root, which already holds every process.
    #[error("system container cannot be root (\"/\")")]
    Root,
    /// The cgroup could not be made.
    #[error(transparent)]
    Make(#[from] CgroupTreeError),
    /// A process list could not be read.
    #[error("read {}: {source}", path.display())]
    List {
        /// The `cgroup.procs` file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A process could not be moved.
    #[error("move process {pid} to {}: {source}", path.display())]
    Move {
        /// The process.
        pid: u32,
        /// The `cgroup.procs` file written.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The directories of `cgroup`, one per hierarchy the processes are moved in.
fn dirs(layout: &CgroupLayout, cgroup: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = match layout.version() {
        CgroupVersion::V1 => V1_CONTROLLERS.iter().filter_map(|c| layout.dir(c, cgroup)).collect(),
        CgroupVersion::V2 => layout.dir("memory", cgroup).into_iter().collect(),
    };
    dirs.sort();
    dirs.dedup();
    dirs
}

fn make(layout: &CgroupLayout, cgroup: &str) -> Result<(), SystemCgroupError> {
    if cgroup.trim_matches('/').is_empty() {
        return Err(SystemCgroupError::Root);
    }
    Ok(make_cgroup(layout, &V1_CONTROLLERS, cgroup)?)
}

/// The PIDs in `dir`'s `cgroup.procs`; a cgroup that is gone has none.
fn procs(dir: &Path) -> Result<Vec<u32>, SystemCgroupError> {
    let path = dir.join("cgroup.procs");
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(SystemCgroupError::List { path, source }),
    }
}

/// Write each of `pids` to `dir`'s `cgroup.procs`, one write each (the kernel takes one PID per
/// write). A process that exited meanwhile (`ESRCH`) is no error. Returns how many moved.
fn move_into(dir: &Path, pids: &[u32]) -> Result<usize, SystemCgroupError> {
    let path = dir.join("cgroup.procs");
    // cgroupfs always has the file; `create` serves recorded trees.
    let open = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path);
    let mut file = open.map_err(|source| SystemCgroupError::Move {
        pid: pids.first().copied().unwrap_or_default(),
        path: path.clone(),
        source,
    })?;
    let mut moved = 0;
    for &pid in pids {
        match file.write_all(format!("{pid}\n").as_bytes()) {
            Ok(()) => moved += 1,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()) => {}
            Err(source) => {
                return Err(SystemCgroupError::Move {
                    pid,
                    path: path.clone(),
                    source,
                })
            }
        }
    }
    Ok(moved)
}

/// Make `cgroup` and put process `pid` in it, in every hierarchy where it is not there yet
/// (kubelet's `ensureProcessInContainerWithOOMScore` for `--kubelet-cgroups`). Idempotent.
pub fn ensure_process_in(layout: &CgroupLayout, cgroup: &str, pid: u32) -> Result<(), SystemCgroupError> {
    make(layout, cgroup)?;
    for dir in dirs(layout, cgroup) {
        if !procs(&dir)?.contains(&pid) {
            move_into(&dir, &[pid])?;
        }
    }
    Ok(())
}

/// Make `cgroup` and move into it every process directly in the root cgroup but PID 1 and
/// those `is_kernel` says are kernel threads (kubelet's `ensureSystemCgroups`), in each
/// hierarchy. Processes forked meanwhile are caught by a few more rounds; returns how many
/// were moved in all.
pub fn move_root_processes(
    layout: &CgroupLayout,
    cgroup: &str,
    is_kernel: &dyn Fn(u32) -> bool,
) -> Result<usize, SystemCgroupError> {
    make(layout, cgroup)?;
    let mut moved = 0;
    for dir in dirs(layout, cgroup) {
        let root = root_of(layout, &dir, cgroup);
        for _ in 0..5 {
            let pids: Vec<u32> = procs(&root)?
                .into_iter()
                .filter(|&pid| pid != 1 && !is_kernel(pid))
                .collect();
            if pids.is_empty() {
                break;
            }
            moved += move_into(&dir, &pids)?;
        }
    }
    Ok(moved)
}

/// Whether `pid` is a kernel thread: it has no executable (`/proc/<pid>/exe` is unreadable), as
/// kubelet's `isKernelPid` tells them apart. A process that is gone counts as one (nothing to
/// move).
pub fn is_kernel_thread(pid: u32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe")).is_err()
}

/// The hierarchy's root directory for `dir`, the directory of `cgroup` in it.
fn root_of(layout: &CgroupLayout, dir: &Path, cgroup: &str) -> PathBuf {
    let depth = cgroup.split('/').filter(|p| !p.is_empty()).count();
    let mut root = dir.to_path_buf();
    for _ in 0..depth {
        root.pop();
    }
    debug_assert!(layout.hierarchies().contains(&root) || layout.version() == CgroupVersion::V2);
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    const HIERARCHIES: [&str; 5] = ["cpu", "cpuacct", "memory", "pids", "blkio"];

    fn v1() -> (tempfile::TempDir, CgroupLayout) {
        let dir = tempfile::tempdir().unwrap();
        for c in HIERARCHIES {
            std::fs::create_dir_all(dir.path().join(c)).unwrap();
        }
        let layout = CgroupLayout::v1_at(dir.path(), &HIERARCHIES);
        (dir, layout)
    }

    fn write_procs(dir: &Path, pids: &[u32]) {
        let text: String = pids.iter().map(|p| format!("{p}\n")).collect();
        std::fs::write(dir.join("cgroup.procs"), text).unwrap();
    }

    #[test]
    fn the_root_is_refused_as_kubelet_does() {
        let (_dir, layout) = v1();
        for root in ["/", "", "//"] {
            let e = move_root_processes(&layout, root, &|_| false).unwrap_err();
            assert_eq!(e.to_string(), "system container cannot be root (\"/\")");
            assert!(ensure_process_in(&layout, root, 7).is_err());
        }
    }

    /// Every hierarchy gets the cgroup and the process; a process already there is not written
    /// again.
    #[test]
    fn a_process_is_put_in_its_cgroup_in_every_hierarchy() {
        let (dir, layout) = v1();
        ensure_process_in(&layout, "/kubelet", 42).unwrap();
        for h in HIERARCHIES {
            let procs = std::fs::read_to_string(dir.path().join(h).join("kubelet/cgroup.procs")).unwrap();
            assert_eq!(procs, "42\n", "{h}");
        }
        // Already there: nothing written (the file would be cut to the new write otherwise).
        write_procs(&dir.path().join("memory/kubelet"), &[42, 43]);
        ensure_process_in(&layout, "/kubelet", 42).unwrap();
        let memory = std::fs::read_to_string(dir.path().join("memory/kubelet/cgroup.procs")).unwrap();
        assert_eq!(memory, "42\n43\n");
    }

    /// PID 1 and kernel threads stay; every other process of the root is written, one per line,
    /// in each hierarchy.
    #[test]
    fn root_processes_but_init_and_kernel_threads_are_moved() {
        let (dir, layout) = v1();
        for h in HIERARCHIES {
            write_procs(&dir.path().join(h), &[1, 2, 300, 301, 302]);
        }
        // A recorded root does not change when its processes are moved, so each round moves
        // the same ones again: count rounds by the lines written.
        let moved = move_root_processes(&layout, "/system", &|pid| pid == 2).unwrap();
        assert_eq!(moved, 5 * 5 * 3, "3 processes, 5 rounds, 5 hierarchies");
        let memory = std::fs::read_to_string(dir.path().join("memory/system/cgroup.procs")).unwrap();
        assert!(memory.starts_with("300\n301\n302\n"), "{memory}");
        assert!(!memory.lines().any(|l| l == "1" || l == "2"), "{memory}");
    }

    #[test]
    fn a_root_without_other_processes_moves_none() {
        let (dir, layout) = v1();
        for h in HIERARCHIES {
            write_procs(&dir.path().join(h), &[1, 2]);
        }
        assert_eq!(move_root_processes(&layout, "/system", &|pid| pid == 2).unwrap(), 0);
        assert!(dir.path().join("blkio/system").is_dir());
    }

    #[test]
    fn v2_has_one_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cgroup.controllers"), "cpu memory pids io\n").unwrap();
        std::fs::write(dir.path().join("cgroup.subtree_control"), "").unwrap();
        write_procs(dir.path(), &[1, 50]);
        let layout = CgroupLayout::v2_at(dir.path());
        assert_eq!(move_root_processes(&layout, "/system", &|_| false).unwrap(), 5);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("system/cgroup.procs"))
                .unwrap()
                .lines()
                .next(),
            Some("50")
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("cgroup.subtree_control")).unwrap(),
            "+cpu +memory +pids"
        );
    }

    #[test]
    fn kernel_threads_have_no_executable() {
        assert!(!is_kernel_thread(std::process::id()));
        // A PID above the kernel's limit is gone: nothing to move.
        assert!(is_kernel_thread(u32::MAX));
        // kthreadd, where this test sees the host's PIDs.
        if std::fs::read_to_string("/proc/2/comm").is_ok_and(|c| c.trim() == "kthreadd") {
            assert!(is_kernel_thread(2));
        }
    }
}
