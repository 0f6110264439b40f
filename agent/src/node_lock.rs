//! `--lock-file` and `--exit-on-lock-contention`, as kubelet has them: the agent holds an
//! exclusive flock(2) on the file while it runs, waiting for it if another process holds it
//! (`cmd/kubelet/app/server.go`, `flock.Acquire`: a blocking `LOCK_EX`); with
//! `--exit-on-lock-contention` it watches the file and stops as soon as another process opens it
//! (one come to wait for the lock) or deletes it (`server_linux.go`,
//! `watchForLockfileContention`: inotify `IN_OPEN|IN_DELETE_SELF`), so a new agent takes over.
//! Beyond kubelet, the wait is logged with the PIDs holding the lock (from `/proc/locks`).

use std::fs::File;
use std::mem::MaybeUninit;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use rustix::fs::{flock, FlockOperation};

/// Why the lock file cannot be held or watched.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// kubelet's words.
    #[error("unable to acquire file lock on {path:?}: {source}")]
    Acquire {
        /// `--lock-file`.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The inotify watch of `--exit-on-lock-contention`.
    #[error("unable to watch lockfile {path:?}: {source}")]
    Watch {
        /// `--lock-file`.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The lock, held until the process ends (or this is dropped).
#[derive(Debug)]
pub struct FileLock {
    _file: File,
    path: PathBuf,
}

impl FileLock {
    /// Opens (creating it) and locks `path`, waiting while another process holds it.
    pub async fn acquire(path: &Path) -> Result<FileLock, LockError> {
        let failed = |source: std::io::Error| LockError::Acquire {
            path: path.to_path_buf(),
            source,
        };
        tracing::info!(path = %path.display(), "acquiring file lock");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(failed)?;
        let file = match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => file,
            Err(rustix::io::Errno::WOULDBLOCK) => {
                let holders = file.metadata().map(|m| holders(m.ino())).unwrap_or_default();
                tracing::info!(path = %path.display(), holders = ?holders, "the lock file is held by another process; waiting for it");
                tokio::task::spawn_blocking(move || flock(&file, FlockOperation::LockExclusive).map(|()| file))
                    .await
                    .map_err(|e| failed(std::io::Error::other(e)))?
                    .map_err(|e| failed(e.into()))?
            }
            Err(e) => return Err(failed(e.into())),
        };
        tracing::info!(path = %path.display(), "file lock acquired");
        Ok(FileLock {
            _file: file,
            path: path.to_path_buf(),
        })
    }

    /// Resolves, with what happened, once another process opens the lock file or it is
    /// deleted. The watch runs on a thread of its own, blocked in `read`.
    pub fn contention(&self) -> Result<tokio::sync::oneshot::Receiver<String>, LockError> {
        let failed = |source: rustix::io::Errno| LockError::Watch {
            path: self.path.clone(),
            source: source.into(),
        };
        let fd = inotify::init(CreateFlags::CLOEXEC).map_err(failed)?;
        inotify::add_watch(&fd, &self.path, WatchFlags::OPEN | WatchFlags::DELETE_SELF).map_err(failed)?;
        let (tell, told) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("lock-file-watch".into())
            .spawn(move || {
                let mut buf = [MaybeUninit::<u8>::uninit(); 256];
                let mut reader = inotify::Reader::new(&fd, &mut buf);
                let what = match reader.next() {
                    Ok(event) => format!("inotify event {:?}", event.events()),
                    Err(e) => format!("inotify watcher error: {e}"),
                };
                let _ = tell.send(what);
            })
            .map_err(|source| LockError::Watch {
                path: self.path.clone(),
                source,
            })?;
        Ok(told)
    }
}

/// The PIDs holding a flock on the file with inode `inode` (`/proc/locks`: `1: FLOCK ADVISORY
/// WRITE <pid> <major>:<minor>:<inode> 0 EOF`).
fn holders(inode: u64) -> Vec<u32> {
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    parse_holders(&locks, inode)
}

fn parse_holders(locks: &str, inode: u64) -> Vec<u32> {
    locks
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // "->" marks a waiter, listed under the holder with one more field.
            let fields = if fields.get(1) == Some(&"->") {
                &fields[1..]
            } else {
                &fields[..]
            };
            let (kind, pid, id) = (fields.get(1)?, fields.get(4)?, fields.get(5)?);
            let held = *kind == "FLOCK" && fields.first() != Some(&"->");
            let same = id.rsplit(':').next()?.parse::<u64>().ok()? == inode;
            (held && same).then(|| pid.parse().ok()).flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_are_read_from_proc_locks() {
        let locks = "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF\n\
                     1: -> FLOCK  ADVISORY  WRITE 4343 08:01:1234 0 EOF\n\
                     2: POSIX  ADVISORY  WRITE 99 08:01:1234 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 77 08:01:999 0 EOF\n";
        assert_eq!(parse_holders(locks, 1234), vec![4242]);
    }

    /// A second holder waits until the first is dropped; the watch of the first sees the second
    /// open the file.
    #[tokio::test]
    async fn a_second_lock_waits_and_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dockerlet.lock");
        let first = FileLock::acquire(&path).await.expect("first lock");
        let seen = first.contention().expect("watch");
        let second = tokio::spawn({
            let path = path.clone();
            async move { FileLock::acquire(&path).await }
        });
        let what = tokio::time::timeout(std::time::Duration::from_secs(5), seen)
            .await
            .expect("the open is seen")
            .expect("an answer");
        assert!(what.contains("OPEN"), "{what}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(!second.is_finished(), "the second waits while the first holds the lock");
        drop(first);
        let second = tokio::time::timeout(std::time::Duration::from_secs(5), second)
            .await
            .expect("the second gets the lock once the first is gone")
            .unwrap();
        assert!(second.is_ok());
    }
}
