//! The files the agent keeps for a pod beside its volumes: `<pod dir>/etc-hosts` and
//! `<pod dir>/resolv.conf`, and the node files they are made from (the node's `/etc/hosts`,
//! `--resolv-conf`). Blocking file I/O: actors call these on `spawn_blocking`.

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The node's hosts file, which host-network pods get (kubelet's `etcHostsPath`).
pub const NODE_HOSTS: &str = "/etc/hosts";

/// Largest resolv.conf read (kubelet's `maxResolveConfLength`).
const MAX_RESOLV_CONF: u64 = 10 << 20;

/// A pod file that cannot be read or written; the container waits (or the sandbox is not
/// created) and the next sync tries again.
#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {source}", path.display())]
pub struct PodFileError {
    /// `read`, `write`, `create directory`.
    pub what: &'static str,
    /// The file.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

fn error<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> PodFileError + 'a {
    move |source| PodFileError {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// A node file as text (at most 10 MiB: a larger one is an error, as in kubelet).
pub fn read_node_file(path: &Path) -> Result<String, PodFileError> {
    let file = std::fs::File::open(path).map_err(error("open", path))?;
    let mut text = String::new();
    file.take(MAX_RESOLV_CONF + 1)
        .read_to_string(&mut text)
        .map_err(error("read", path))?;
    if text.len() as u64 > MAX_RESOLV_CONF {
        return Err(PodFileError {
            what: "read",
            path: path.to_path_buf(),
            source: std::io::Error::other("file is larger than 10 MiB"),
        });
    }
    Ok(text)
}

/// Write `content` to `path` (mode 0644), creating the pod's directory (0750) if needed. A
/// file that already holds `content` is left alone; otherwise it is rewritten in place, so
/// containers that bind-mounted it see the new content (the bind mount holds the inode).
pub fn write_pod_file(path: &Path, content: &str) -> Result<(), PodFileError> {
    if std::fs::read(path).is_ok_and(|current| current == content.as_bytes()) {
        return Ok(());
    }
    make_parent(path)?;
    std::fs::write(path, content).map_err(error("write", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).map_err(error("chmod", path))
}

/// Create the directory `path` goes in (0750, with its parents) if needed.
fn make_parent(path: &Path) -> Result<(), PodFileError> {
    match path.parent() {
        Some(dir) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(dir)
            .map_err(error("create directory", dir)),
        None => Ok(()),
    }
}

/// Make a container instance's termination message file: empty, mode 0666 whatever the
/// umask (any user the container runs as may write it, as kubelet makes it), its directory
/// created (0750) if needed.
pub fn create_termination_message_file(path: &Path) -> Result<(), PodFileError> {
    make_parent(path)?;
    std::fs::File::create(path).map_err(error("create", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(error("chmod", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The termination message file is empty and writable by anyone, its directories made.
    #[test]
    fn termination_message_files_are_writable_by_anyone() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pods/u1/containers/app/0-1");
        create_termination_message_file(&path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!((meta.len(), meta.mode() & 0o777), (0, 0o666));
    }

    /// A pod file is created with its directory, mode 0644, rewritten in place when it changes.
    #[test]
    fn pod_files_are_written_in_place() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pods/u1/etc-hosts");
        write_pod_file(&path, "a\n").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o644);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\n");
        write_pod_file(&path, "b\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "b\n");
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), meta.ino(), "same inode");
        assert_eq!(read_node_file(&path).unwrap(), "b\n");
        let err = read_node_file(&dir.path().join("missing")).unwrap_err();
        assert!(err.to_string().starts_with("open "), "{err}");
    }
}
