//! cgroup v1 memory usage thresholds, as kubelet's `kernelMemcgNotification` registers them
//! (`pkg/kubelet/eviction/threshold_notifier_linux.go` `NewCgroupNotifier`): an eventfd, the
//! cgroup's `memory.usage_in_bytes` and a byte count written to its `cgroup.event_control`;
//! the kernel signals the eventfd each time usage crosses the count, either way. Closing the
//! eventfd removes the threshold. cgroup v2 has no such interface (kubelet disables the
//! notifier there).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// A threshold could not be registered; names the file.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct MemcgError {
    /// The cgroup file.
    pub path: PathBuf,
    /// The OS error.
    #[source]
    pub source: std::io::Error,
}

/// The cgroup's `memory.usage_in_bytes`.
pub fn usage(dir: &Path) -> Option<u64> {
    std::fs::read_to_string(dir.join("memory.usage_in_bytes"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Registers `threshold` bytes on `dir`'s `memory.usage_in_bytes`; the returned eventfd
/// (non-blocking) becomes readable each time usage crosses it.
pub fn usage_threshold(dir: &Path, threshold: u64) -> Result<OwnedFd, MemcgError> {
    let fail = |path: PathBuf| move |source: std::io::Error| MemcgError { path, source };
    let eventfd = rustix::event::eventfd(
        0,
        rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
    )
    .map_err(|e| fail(dir.to_path_buf())(e.into()))?;
    let attribute = dir.join("memory.usage_in_bytes");
    let watched = std::fs::File::open(&attribute).map_err(fail(attribute.clone()))?;
    let control = dir.join("cgroup.event_control");
    let line = format!("{} {} {threshold}", eventfd.as_raw_fd(), watched.as_raw_fd());
    std::fs::write(&control, line).map_err(fail(control))?;
    Ok(eventfd)
}

/// Reads the eventfd's count (how many crossings since the last read); `WouldBlock` when none.
pub fn take_events(eventfd: &impl AsFd) -> std::io::Result<u64> {
    let mut buf = [0u8; 8];
    rustix::io::read(eventfd, &mut buf)?;
    Ok(u64::from_ne_bytes(buf))
}

/// Thresholds registered together, each with its description.
pub type Registered = Vec<(String, OwnedFd)>;

/// A thread that waits on the registered thresholds and calls `on_cross` with a threshold's
/// description when it is crossed. [`Watcher::replace`] swaps in a new set (the old eventfds
/// close, removing their thresholds); the thread ends when the `Watcher` is dropped.
pub struct Watcher {
    sets: std::sync::mpsc::Sender<Registered>,
}

/// How long the thread waits before looking for a new set.
const POLL_TIMEOUT: rustix::event::Timespec = rustix::event::Timespec {
    tv_sec: 0,
    tv_nsec: 500_000_000,
};

impl Watcher {
    /// Starts the thread.
    pub fn spawn(on_cross: impl Fn(&str) + Send + 'static) -> std::io::Result<Watcher> {
        let (sets, rx) = std::sync::mpsc::channel::<Registered>();
        std::thread::Builder::new()
            .name("memcg-thresholds".into())
            .spawn(move || watch(&rx, &on_cross))?;
        Ok(Watcher { sets })
    }

    /// Watch `set` from now on instead of the set before.
    pub fn replace(&self, set: Registered) {
        let _ = self.sets.send(set);
    }
}

fn watch(sets: &std::sync::mpsc::Receiver<Registered>, on_cross: &dyn Fn(&str)) {
    use std::sync::mpsc::TryRecvError;
    let mut current: Registered = Vec::new();
    loop {
        loop {
            match sets.try_recv() {
                Ok(set) => current = set,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        if current.is_empty() {
            match sets.recv() {
                Ok(set) => current = set,
                Err(_) => return,
            }
            continue;
        }
        let mut fds: Vec<rustix::event::PollFd<'_>> = current
            .iter()
            .map(|(_, fd)| rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN))
            .collect();
        if rustix::event::poll(&mut fds, Some(&POLL_TIMEOUT)).is_err() {
            continue;
        }
        let ready: Vec<bool> = fds.iter().map(|p| !p.revents().is_empty()).collect();
        drop(fds);
        for ((description, fd), ready) in current.iter().zip(ready) {
            if ready && take_events(fd).is_ok() {
                on_cross(description);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory that is no memory cgroup: refused naming the file.
    #[test]
    fn a_directory_without_the_files_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = usage_threshold(dir.path(), 1).unwrap_err().to_string();
        assert!(err.contains("memory.usage_in_bytes"), "{err}");
        assert_eq!(usage(dir.path()), None);
    }

    /// On a cgroup v1 host: a threshold just above the root's usage fires once memory is
    /// charged past it (the kernel checks thresholds up the hierarchy as it charges), one far
    /// above does not.
    #[test]
    fn a_threshold_on_the_root_memory_cgroup_fires_when_crossed() {
        let root = Path::new("/sys/fs/cgroup/memory");
        let Some(now) = usage(root) else {
            eprintln!("SKIPPED: no cgroup v1 memory controller at {}", root.display());
            return;
        };
        let far = usage_threshold(root, now + (8 << 30)).unwrap();
        let near = match usage_threshold(root, now + (16 << 20)) {
            Ok(fd) => fd,
            Err(e) => panic!("{e}"),
        };
        // Charge memory past it: 64 MiB at a time, up to 2 GiB, since the root's usage moves
        // with the whole machine (other tests free memory meanwhile).
        let mut touched: Vec<Vec<u8>> = Vec::new();
        loop {
            match take_events(&near) {
                Ok(n) => {
                    assert!(n >= 1);
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(touched.len() < 32, "no event for a threshold crossed by 2 GiB");
                    let mut chunk = vec![0u8; 64 << 20];
                    for i in (0..chunk.len()).step_by(4096) {
                        chunk[i] = 1;
                    }
                    touched.push(chunk);
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(
            take_events(&far).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::WouldBlock)
        );
        drop(touched);
    }

    /// The watcher calls back with the description of a crossed threshold.
    #[test]
    fn the_watcher_reports_a_crossing() {
        let root = Path::new("/sys/fs/cgroup/memory");
        let Some(now) = usage(root) else {
            eprintln!("SKIPPED: no cgroup v1 memory controller at {}", root.display());
            return;
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let watcher = Watcher::spawn(move |d| {
            let _ = tx.send(d.to_string());
        })
        .unwrap();
        watcher.replace(vec![(
            "near".to_string(),
            usage_threshold(root, now + (16 << 20)).unwrap(),
        )]);
        // The root's usage moves with the whole machine (other tests free memory as this one
        // allocates): touch 64 MiB at a time, up to 2 GiB, until the notification comes.
        let mut touched: Vec<Vec<u8>> = Vec::new();
        let got = loop {
            if let Ok(got) = rx.recv_timeout(std::time::Duration::from_millis(500)) {
                break got;
            }
            assert!(touched.len() < 32, "no crossing after touching 2 GiB");
            let mut chunk = vec![0u8; 64 << 20];
            for i in (0..chunk.len()).step_by(4096) {
                chunk[i] = 1;
            }
            touched.push(chunk);
        };
        assert_eq!(got, "near");
        drop(touched);
    }
}
