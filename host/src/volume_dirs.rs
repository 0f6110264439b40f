//! Volume directories on the node: what a container's mounts need before it is created
//! (kubelet's `pkg/volume/emptydir` and `pkg/volume/hostpath` SetUp). Blocking file I/O: actors
//! call [`prepare`] on `spawn_blocking`.

use std::path::Path;

use dockerlet_pod::volume::{Mount, VolumeError, VolumeSource};

fn config_error(field: String, reason: impl ToString) -> VolumeError {
    VolumeError {
        field,
        reason: reason.to_string(),
    }
}

/// Create what `mounts` need on the node: emptyDir directories, `…OrCreate` hostPaths and missing
/// subPath directories; hostPath `type` checks happen here, as kubelet does them at mount.
pub fn prepare(mounts: &[Mount]) -> Result<(), VolumeError> {
    for m in mounts {
        match &m.source {
            VolumeSource::EmptyDir(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| config_error(m.field.clone(), e))?;
            }
            VolumeSource::HostPath { path, kind } => {
                prepare_host_path(path, kind).map_err(|e| config_error(format!("volume {:?}", m.volume), e))?;
            }
        }
        if m.sub_path.is_some() {
            let host = m.host_path();
            if !host.exists() {
                std::fs::create_dir_all(&host).map_err(|e| config_error(m.field.clone(), e))?;
            }
        }
    }
    Ok(())
}

/// Why a hostPath cannot be mounted. Retried at the container's next start attempt.
#[derive(Debug, thiserror::Error)]
pub enum HostPathError {
    /// The path exists but is not of the `type` asked for (or does not exist).
    #[error("hostPath type check failed: {} is not {what}", path.display())]
    WrongType {
        /// The path.
        path: std::path::PathBuf,
        /// `a directory`, `a file`, …
        what: &'static str,
    },
    /// A `…OrCreate` path could not be created.
    #[error("cannot create {}: {source}", path.display())]
    CreateFailed {
        /// The path.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A `type` kubelet does not know.
    #[error("unsupported hostPath type {0:?}")]
    UnsupportedType(String),
}

/// kubelet's hostPath type checks; `…OrCreate` types create the path.
fn prepare_host_path(path: &Path, kind: &str) -> Result<(), HostPathError> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(path);
    let wrong = |what: &'static str| {
        Err(HostPathError::WrongType {
            path: path.to_path_buf(),
            what,
        })
    };
    let create_failed = |at: &Path| {
        let at = at.to_path_buf();
        move |source| HostPathError::CreateFailed { path: at, source }
    };
    match kind {
        "" => Ok(()),
        "DirectoryOrCreate" => std::fs::create_dir_all(path).map_err(create_failed(path)),
        "FileOrCreate" => {
            if meta.is_err() {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(create_failed(parent))?;
                }
                std::fs::File::create(path).map_err(create_failed(path))?;
            }
            Ok(())
        }
        "Directory" if meta.as_ref().is_ok_and(|m| m.is_dir()) => Ok(()),
        "Directory" => wrong("a directory"),
        "File" if meta.as_ref().is_ok_and(|m| m.is_file()) => Ok(()),
        "File" => wrong("a file"),
        "Socket" if meta.as_ref().is_ok_and(|m| m.file_type().is_socket()) => Ok(()),
        "Socket" => wrong("a socket"),
        "CharDevice" if meta.as_ref().is_ok_and(|m| m.file_type().is_char_device()) => Ok(()),
        "CharDevice" => wrong("a character device"),
        "BlockDevice" if meta.as_ref().is_ok_and(|m| m.file_type().is_block_device()) => Ok(()),
        "BlockDevice" => wrong("a block device"),
        other => Err(HostPathError::UnsupportedType(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_pod::testing::{mount, pod};
    use dockerlet_pod::volume::mounts;
    use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, HostPathVolumeSource, Volume};

    /// emptyDir directories and subPaths are created on demand.
    #[test]
    fn empty_dirs_and_sub_paths_are_created() {
        let root = tempfile::tempdir().unwrap();
        let v = Volume {
            name: "cache".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        };
        let p = pod(vec![v], vec![mount("cache", "/cache", false, Some("sub"))]);
        let m = mounts(root.path(), &p, &p.spec.as_ref().unwrap().containers[0]).unwrap();
        prepare(&m).unwrap();
        assert!(root
            .path()
            .join("pods/u1/volumes/kubernetes.io~empty-dir/cache/sub")
            .is_dir());
    }

    /// hostPath `type: Directory` fails at mount time when the path is missing.
    #[test]
    fn host_path_types_are_checked() {
        let root = tempfile::tempdir().unwrap();
        let v = Volume {
            name: "d".into(),
            host_path: Some(HostPathVolumeSource {
                path: "/nonexistent/dockerlet".into(),
                type_: Some("Directory".into()),
            }),
            ..Default::default()
        };
        let p = pod(vec![v], vec![mount("d", "/d", false, None)]);
        let err = prepare(&mounts(root.path(), &p, &p.spec.as_ref().unwrap().containers[0]).unwrap()).unwrap_err();
        assert!(err.to_string().contains("is not a directory"), "{err}");
    }
}
