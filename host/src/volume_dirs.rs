//! Volume directories on the node: what a container's mounts need before it is created
//! (kubelet's `pkg/volume/emptydir` and `pkg/volume/hostpath` SetUp). Blocking file I/O: actors
//! call [`prepare`] on `spawn_blocking`.

use std::path::Path;

use dockerlet_pod::container::ConfigError;
use dockerlet_pod::volume::{Mount, VolumeSource};

fn config_error(field: String, reason: impl ToString) -> ConfigError {
    ConfigError::Volume {
        field,
        reason: reason.to_string(),
    }
}

/// Create what `mounts` need on the node: emptyDir directories, `…OrCreate` hostPaths and missing
/// subPath directories; hostPath `type` checks happen here, as kubelet does them at mount.
pub fn prepare(mounts: &[Mount]) -> Result<(), ConfigError> {
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

/// kubelet's hostPath type checks; `…OrCreate` types create the path.
fn prepare_host_path(path: &Path, kind: &str) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(path);
    let wrong = |what: &str| Err(format!("hostPath type check failed: {} is not {what}", path.display()));
    match kind {
        "" => Ok(()),
        "DirectoryOrCreate" => {
            std::fs::create_dir_all(path).map_err(|e| format!("cannot create {}: {e}", path.display()))
        }
        "FileOrCreate" => {
            if meta.is_err() {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                }
                std::fs::File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
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
        other => Err(format!("unsupported hostPath type {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_pod::volume::mounts;
    use k8s_openapi::api::core::v1::{
        Container, EmptyDirVolumeSource, HostPathVolumeSource, Pod, PodSpec, Volume, VolumeMount,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(volumes: Vec<Volume>, mounts: Vec<VolumeMount>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                volumes: Some(volumes),
                containers: vec![Container {
                    name: "c".into(),
                    volume_mounts: Some(mounts),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        }
    }

    fn mount(name: &str, path: &str, read_only: bool, sub: Option<&str>) -> VolumeMount {
        VolumeMount {
            name: name.into(),
            mount_path: path.into(),
            read_only: Some(read_only),
            sub_path: sub.map(str::to_string),
            ..Default::default()
        }
    }

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
