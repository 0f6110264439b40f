//! The container log files kubelet keeps on a node, as dockershim kept them for Docker: per
//! container instance `<pods dir>/<namespace>_<pod>_<uid>/<container>/<restart count>.log`
//! (the CRI log path, `--pod-logs-dir`, default `/var/log/pods`), a symlink to Docker's
//! json-file log of the instance, and `/var/log/containers/<pod>_<namespace>_<container>-<id>.log`
//! pointing at it, which log collectors read. The files hold Docker's JSON lines, not the CRI
//! text format; `kubectl logs` reads through Docker's API either way.
//!
//! Kubelet's container GC removes a pod's directory with the pod and the `/var/log/containers`
//! links that dangle; [`LogLinks::remove_pod`] and [`LogLinks::remove_dangling`] do that.
//! Blocking file I/O: actors call these on `spawn_blocking`.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// kubelet's `ContainerLogsDir`.
pub const CONTAINERS_DIR: &str = "/var/log/containers";

/// A `/var/log/containers` link younger than this is never taken for dangling: its instance
/// may be created and not yet started (Docker makes the json log at the start), maybe by
/// another agent sharing the directory.
const FRESH: Duration = Duration::from_secs(60);

/// Why a log link could not be made or removed.
#[derive(Debug, thiserror::Error)]
#[error("cannot {op} {path}: {source}")]
pub struct LogLinkError {
    op: &'static str,
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> LogLinkError + 'a {
    move |source| LogLinkError {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// One container instance, as its log files are named.
#[derive(Debug, Clone, Copy)]
pub struct Instance<'a> {
    /// The pod's namespace.
    pub namespace: &'a str,
    /// The pod's name.
    pub pod: &'a str,
    /// The pod's UID.
    pub uid: &'a str,
    /// The container's name.
    pub container: &'a str,
    /// Its restart count (kubelet's attempt).
    pub attempt: u32,
    /// Docker's container ID.
    pub id: &'a str,
}

/// Where the links go and what they point at.
#[derive(Debug, Clone)]
pub struct LogLinks {
    /// `--pod-logs-dir` (`/var/log/pods`).
    pub pods_dir: PathBuf,
    /// `/var/log/containers`.
    pub containers_dir: PathBuf,
    /// Docker's root directory (`DockerRootDir`), under which the json-file logs are.
    pub docker_root: PathBuf,
}

impl LogLinks {
    /// `<pods dir>/<namespace>_<pod>_<uid>`.
    pub fn pod_dir(&self, namespace: &str, pod: &str, uid: &str) -> PathBuf {
        self.pods_dir.join(format!("{namespace}_{pod}_{uid}"))
    }

    /// The CRI log path of an instance.
    pub fn log_path(&self, c: &Instance) -> PathBuf {
        self.pod_dir(c.namespace, c.pod, c.uid)
            .join(c.container)
            .join(format!("{}.log", c.attempt))
    }

    /// Its `/var/log/containers` link.
    pub fn container_link(&self, c: &Instance) -> PathBuf {
        self.containers_dir
            .join(format!("{}_{}_{}-{}.log", c.pod, c.namespace, c.container, c.id))
    }

    /// Docker's json-file log of container `id`.
    pub fn docker_log(&self, id: &str) -> PathBuf {
        self.docker_root
            .join("containers")
            .join(id)
            .join(format!("{id}-json.log"))
    }

    /// Make both links of a new instance (replacing what an earlier instance of the same
    /// attempt left).
    pub fn link(&self, c: &Instance) -> Result<(), LogLinkError> {
        let path = self.log_path(c);
        let dir = path.parent().expect("a log path has a directory");
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        replace_symlink(&self.docker_log(c.id), &path)?;
        std::fs::create_dir_all(&self.containers_dir).map_err(io("create", &self.containers_dir))?;
        replace_symlink(&path, &self.container_link(c))
    }

    /// The log directory of the pod with this UID (`<namespace>_<pod>_<uid>`: found by the UID,
    /// so an orphan known only by it is cleaned up too) and its `/var/log/containers` links,
    /// once the pod is gone.
    pub fn remove_pod(&self, uid: &str) -> Result<(), LogLinkError> {
        let entries = match std::fs::read_dir(&self.pods_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io("read", &self.pods_dir)(e)),
        };
        let suffix = format!("_{uid}");
        for dir in entries.flatten().map(|e| e.path()) {
            if !dir
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(&suffix))
            {
                continue;
            }
            for link in self.links_into(&dir)? {
                remove_if_there(&link)?;
            }
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != ErrorKind::NotFound => return Err(io("remove", &dir)(e)),
                _ => {}
            }
        }
        Ok(())
    }

    /// Links in `/var/log/containers` that point into the pods directory at a log that is
    /// gone (its container was removed), with the CRI log path they name; fresh ones are kept.
    /// Returns how many went.
    pub fn remove_dangling(&self) -> Result<usize, LogLinkError> {
        let mut removed = 0;
        for (link, target) in self.pod_links()? {
            if target.exists() || is_fresh(&link) {
                continue;
            }
            remove_if_there(&link)?;
            remove_if_there(&target)?;
            removed += 1;
        }
        Ok(removed)
    }

    /// The log directories of pods that are `gone` (asked with each directory's pod UID, the
    /// last `_`-separated field of `<namespace>_<pod>_<uid>`, as kubelet's container GC parses
    /// it), once no log in them points at a file that still exists and the directory is not
    /// fresh: a directory of another agent's pod sharing the pods directory, whose containers
    /// still exist, is never taken. Returns the UIDs removed.
    pub fn remove_gone_pods(&self, gone: impl Fn(&str) -> bool) -> Result<Vec<String>, LogLinkError> {
        let entries = match std::fs::read_dir(&self.pods_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("read", &self.pods_dir)(e)),
        };
        let mut removed = Vec::new();
        for dir in entries.flatten().map(|e| e.path()) {
            let Some(uid) = dir
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.rsplit('_').next())
            else {
                continue;
            };
            if !gone(uid) || is_fresh(&dir) || has_live_log(&dir) {
                continue;
            }
            let uid = uid.to_string();
            self.remove_pod(&uid)?;
            removed.push(uid);
        }
        Ok(removed)
    }

    /// Every `/var/log/containers` link into the pods directory, with its target.
    fn pod_links(&self) -> Result<Vec<(PathBuf, PathBuf)>, LogLinkError> {
        let entries = match std::fs::read_dir(&self.containers_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("read", &self.containers_dir)(e)),
        };
        Ok(entries
            .flatten()
            .filter_map(|entry| {
                let link = entry.path();
                let target = std::fs::read_link(&link).ok()?;
                target.starts_with(&self.pods_dir).then_some((link, target))
            })
            .collect())
    }

    fn links_into(&self, dir: &Path) -> Result<Vec<PathBuf>, LogLinkError> {
        Ok(self
            .pod_links()?
            .into_iter()
            .filter(|(_, target)| target.starts_with(dir))
            .map(|(link, _)| link)
            .collect())
    }
}

fn is_fresh(link: &Path) -> bool {
    std::fs::symlink_metadata(link)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age < FRESH)
}

/// Whether a `<container>/<n>.log` under a pod's log directory leads to a file that exists.
fn has_live_log(pod_dir: &Path) -> bool {
    let Ok(containers) = std::fs::read_dir(pod_dir) else {
        return false;
    };
    containers
        .flatten()
        .filter_map(|c| std::fs::read_dir(c.path()).ok())
        .flat_map(|logs| logs.flatten())
        .any(|log| log.path().exists())
}

fn remove_if_there(path: &Path) -> Result<(), LogLinkError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(io("remove", path)(e)),
        _ => Ok(()),
    }
}

fn replace_symlink(target: &Path, link: &Path) -> Result<(), LogLinkError> {
    remove_if_there(link)?;
    std::os::unix::fs::symlink(target, link).map_err(io("link", link))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links(root: &Path) -> LogLinks {
        LogLinks {
            pods_dir: root.join("pods"),
            containers_dir: root.join("containers"),
            docker_root: root.join("docker"),
        }
    }

    fn instance(id: &str, attempt: u32) -> Instance<'_> {
        Instance {
            namespace: "default",
            pod: "web",
            uid: "u1",
            container: "app",
            attempt,
            id,
        }
    }

    fn docker_log(l: &LogLinks, id: &str, text: &str) {
        let path = l.docker_log(id);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn both_links_reach_dockers_log_under_kubelets_names() {
        let dir = tempfile::tempdir().unwrap();
        let l = links(dir.path());
        let c = instance("abc", 0);
        l.link(&c).unwrap();
        docker_log(&l, "abc", "{\"log\":\"hello\\n\"}\n");
        let cri = dir.path().join("pods/default_web_u1/app/0.log");
        let link = dir.path().join("containers/web_default_app-abc.log");
        assert_eq!(std::fs::read_link(&link).unwrap(), cri);
        assert!(std::fs::read_to_string(&link).unwrap().contains("hello"));
        // The next attempt gets its own file; linking one again replaces it.
        l.link(&instance("def", 1)).unwrap();
        l.link(&instance("def", 1)).unwrap();
        assert!(dir.path().join("pods/default_web_u1/app/1.log").is_symlink());
    }

    #[test]
    fn removed_containers_and_pods_leave_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let l = links(dir.path());
        l.link(&instance("abc", 0)).unwrap();
        docker_log(&l, "abc", "x");
        let link = l.container_link(&instance("abc", 0));
        assert_eq!(l.remove_dangling().unwrap(), 0, "its log exists");
        std::fs::remove_dir_all(dir.path().join("docker")).unwrap();
        assert_eq!(l.remove_dangling().unwrap(), 0, "a fresh link is kept");
        // Aged: the link's own mtime set back to 1970.
        rustix::fs::utimensat(
            rustix::fs::CWD,
            &link,
            &rustix::fs::Timestamps {
                last_access: rustix::fs::Timespec { tv_sec: 0, tv_nsec: 0 },
                last_modification: rustix::fs::Timespec { tv_sec: 0, tv_nsec: 0 },
            },
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .unwrap();
        assert_eq!(l.remove_dangling().unwrap(), 1);
        assert!(!link.is_symlink());
        assert!(!l.log_path(&instance("abc", 0)).is_symlink());

        l.link(&instance("ghi", 0)).unwrap();
        let other = Instance {
            uid: "u11",
            ..instance("jkl", 0)
        };
        l.link(&other).unwrap();
        l.remove_pod("u1").unwrap();
        assert!(!dir.path().join("pods/default_web_u1").exists());
        assert!(!l.container_link(&instance("ghi", 0)).is_symlink());
        assert!(l.container_link(&other).is_symlink(), "another pod's links stay");
        l.remove_pod("u1").unwrap();
    }

    /// Sets a path's own modification time back to 1970 (older than [`FRESH`]).
    fn age(path: &Path) {
        rustix::fs::utimensat(
            rustix::fs::CWD,
            path,
            &rustix::fs::Timestamps {
                last_access: rustix::fs::Timespec { tv_sec: 0, tv_nsec: 0 },
                last_modification: rustix::fs::Timespec { tv_sec: 0, tv_nsec: 0 },
            },
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .unwrap();
    }

    /// Container GC's pass over the pods directory: a gone pod's directory goes once its logs
    /// are gone and it is not fresh; a kept pod's, a fresh one and one whose log still exists
    /// (another agent's pod in a shared directory) stay.
    #[test]
    fn gone_pods_directories_go_once_nothing_in_them_lives() {
        let dir = tempfile::tempdir().unwrap();
        let l = links(dir.path());
        let pod = |uid: &'static str, id: &'static str| Instance { uid, ..instance(id, 0) };
        for (uid, id) in [("gone", "g1"), ("kept", "k1"), ("live", "l1"), ("fresh", "f1")] {
            l.link(&pod(uid, id)).unwrap();
            if uid != "fresh" {
                age(&l.pod_dir("default", "web", uid));
            }
        }
        docker_log(&l, "l1", "still here");
        let mut removed = l.remove_gone_pods(|uid| uid != "kept").unwrap();
        removed.sort();
        assert_eq!(removed, vec!["gone".to_string()]);
        assert!(!l.pod_dir("default", "web", "gone").exists());
        assert!(
            !l.container_link(&pod("gone", "g1")).is_symlink(),
            "its /var/log/containers link too"
        );
        for uid in ["kept", "live", "fresh"] {
            assert!(l.pod_dir("default", "web", uid).exists(), "{uid} stays");
        }
    }
}
