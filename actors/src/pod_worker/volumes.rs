//! Pod volumes on this node: `emptyDir` (a directory under `--root-dir`, removed with the pod)
//! and `hostPath` (a path of the node), mounted into containers as Docker bind mounts.
//!
//! Static pods may not reference API objects (kubelet rejects secrets, configMaps, service
//! account tokens and claims in them), so other volume types are refused with the field named.

use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, Volume};

use super::container_spec::{pod_identity, ConfigError};

/// Where a volume's data lives on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeSource {
    /// A per-pod directory, created empty and removed with the pod.
    EmptyDir(PathBuf),
    /// A path of the node, with the hostPath `type` check.
    HostPath {
        /// Absolute path on the node.
        path: PathBuf,
        /// `""`, `DirectoryOrCreate`, `Directory`, `FileOrCreate`, `File`, `Socket`, …
        kind: String,
    },
}

/// `<root>/pods/<uid>`: everything the node keeps for one pod.
pub fn pod_dir(root: &Path, uid: &str) -> PathBuf {
    root.join("pods").join(uid)
}

/// Resolve one volume of `pod`; the error says why it cannot be used.
pub fn volume_source(root: &Path, pod: &Pod, volume: &Volume) -> Result<VolumeSource, String> {
    let (_, _, uid) = pod_identity(pod);
    if volume.empty_dir.is_some() {
        let dir = pod_dir(root, uid)
            .join("volumes")
            .join("kubernetes.io~empty-dir")
            .join(&volume.name);
        return Ok(VolumeSource::EmptyDir(dir));
    }
    if let Some(host) = &volume.host_path {
        let path = PathBuf::from(&host.path);
        if !path.is_absolute() {
            return Err(format!(
                "hostPath.path: Invalid value: {:?}: must be an absolute path",
                host.path
            ));
        }
        return Ok(VolumeSource::HostPath {
            path,
            kind: host.type_.clone().unwrap_or_default(),
        });
    }
    let api_reference = [
        (volume.secret.is_some(), "secrets"),
        (volume.config_map.is_some(), "configmaps"),
        (volume.persistent_volume_claim.is_some(), "persistentvolumeclaims"),
        (volume.projected.is_some(), "projected volumes"),
        (volume.ephemeral.is_some(), "ephemeral volume claims"),
    ];
    if let Some((_, what)) = api_reference.iter().find(|(set, _)| *set) {
        return Err(format!("static pods may not reference {what}"));
    }
    Err("only emptyDir and hostPath volumes are supported on this node".to_string())
}

/// Check a pod's volumes and every volumeMount; the error names the field.
pub fn validate(pod: &Pod) -> Result<(), String> {
    let Some(spec) = &pod.spec else { return Ok(()) };
    let volumes = spec.volumes.as_deref().unwrap_or_default();
    for (i, v) in volumes.iter().enumerate() {
        volume_source(Path::new("/"), pod, v).map_err(|e| format!("spec.volumes[{i}]: {e}"))?;
        if volumes[..i].iter().any(|o| o.name == v.name) {
            return Err(format!("spec.volumes[{i}].name: Duplicate value: {:?}", v.name));
        }
    }
    for (field, c) in super::container_spec::containers_with_fields(spec) {
        for (j, m) in c.volume_mounts.iter().flatten().enumerate() {
            let at = format!("{field}.volumeMounts[{j}]");
            if !volumes.iter().any(|v| v.name == m.name) {
                return Err(format!("{at}.name: Not found: {:?}", m.name));
            }
            if !m.mount_path.starts_with('/') {
                return Err(format!(
                    "{at}.mountPath: Invalid value: {:?}: must be an absolute path",
                    m.mount_path
                ));
            }
            if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                check_sub_path(sub).map_err(|e| format!("{at}.subPath: Invalid value: {sub:?}: {e}"))?;
            }
        }
    }
    Ok(())
}

fn check_sub_path(sub: &str) -> Result<(), &'static str> {
    let path = Path::new(sub);
    if path.is_absolute() {
        return Err("must be a relative path");
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err("must not contain '..'");
    }
    Ok(())
}

fn config_error(field: String, reason: impl ToString) -> ConfigError {
    ConfigError::Volume {
        field,
        reason: reason.to_string(),
    }
}

/// Create what the container's mounts need on the node and return its Docker binds
/// (`host:container[:ro]`). hostPath `type` checks happen here, as kubelet does them at mount.
pub fn binds(root: &Path, pod: &Pod, container: &Container) -> Result<Vec<String>, ConfigError> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    let mut binds = Vec::new();
    for m in container.volume_mounts.iter().flatten() {
        let field = format!("volumeMounts[{}]", m.name);
        let volume = volumes
            .iter()
            .find(|v| v.name == m.name)
            .ok_or_else(|| config_error(field.clone(), format!("no volume named {:?}", m.name)))?;
        let mut host = match volume_source(root, pod, volume).map_err(|e| config_error(field.clone(), e))? {
            VolumeSource::EmptyDir(dir) => {
                std::fs::create_dir_all(&dir).map_err(|e| config_error(field.clone(), e))?;
                dir
            }
            VolumeSource::HostPath { path, kind } => {
                prepare_host_path(&path, &kind).map_err(|e| config_error(format!("volume {:?}", volume.name), e))?;
                path
            }
        };
        if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            check_sub_path(sub).map_err(|e| config_error(field.clone(), e))?;
            host = host.join(sub);
            if !host.exists() {
                std::fs::create_dir_all(&host).map_err(|e| config_error(field.clone(), e))?;
            }
        }
        let read_only = if m.read_only == Some(true) { ":ro" } else { "" };
        binds.push(format!("{}:{}{read_only}", host.display(), m.mount_path));
    }
    Ok(binds)
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
    use k8s_openapi::api::core::v1::{
        ConfigMapVolumeSource, EmptyDirVolumeSource, HostPathVolumeSource, PodSpec, VolumeMount,
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

    /// emptyDir lives under the pod's directory and is created on demand; hostPath binds as is,
    /// read-only when asked; subPath joins the volume path.
    #[test]
    fn mounts_become_docker_binds() {
        let root = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        let p = pod(
            vec![
                Volume {
                    name: "cache".into(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Default::default()
                },
                Volume {
                    name: "data".into(),
                    host_path: Some(HostPathVolumeSource {
                        path: host.path().display().to_string(),
                        type_: Some("Directory".into()),
                    }),
                    ..Default::default()
                },
            ],
            vec![
                mount("cache", "/cache", false, Some("sub")),
                mount("data", "/data", true, None),
            ],
        );
        validate(&p).unwrap();
        let b = binds(root.path(), &p, &p.spec.as_ref().unwrap().containers[0]).unwrap();
        let empty = root.path().join("pods/u1/volumes/kubernetes.io~empty-dir/cache/sub");
        assert_eq!(
            b,
            vec![
                format!("{}:/cache", empty.display()),
                format!("{}:/data:ro", host.path().display())
            ]
        );
        assert!(empty.is_dir());
    }

    /// API-object volumes, unknown mounts and escaping subPaths are refused with the field.
    #[test]
    fn invalid_volumes_name_the_field() {
        let cm = Volume {
            name: "cfg".into(),
            config_map: Some(ConfigMapVolumeSource::default()),
            ..Default::default()
        };
        let err = validate(&pod(vec![cm], vec![])).unwrap_err();
        assert_eq!(err, "spec.volumes[0]: static pods may not reference configmaps");
        let err = validate(&pod(vec![], vec![mount("nope", "/x", false, None)])).unwrap_err();
        assert_eq!(err, "spec.containers[0].volumeMounts[0].name: Not found: \"nope\"");
        let v = Volume {
            name: "v".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        };
        let err = validate(&pod(vec![v], vec![mount("v", "/x", false, Some("../etc"))])).unwrap_err();
        assert!(err.contains("subPath") && err.contains(".."), "{err}");
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
        let err = binds(root.path(), &p, &p.spec.as_ref().unwrap().containers[0]).unwrap_err();
        assert!(err.to_string().contains("is not a directory"), "{err}");
    }
}
