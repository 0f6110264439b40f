//! Pod volumes on this node: `emptyDir` (a directory under `--root-dir`, removed with the pod)
//! and `hostPath` (a path of the node), mounted into containers as Docker bind mounts.
//!
//! Static pods may not reference API objects (kubelet rejects secrets, configMaps, service
//! account tokens and claims in them), so other volume types are refused with the field named.

use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, Volume};

use crate::field::FieldError;
use crate::spec::{containers_with_fields, pod_identity};

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
pub fn volume_source(root: &Path, pod: &Pod, volume: &Volume) -> Result<VolumeSource, FieldError> {
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
            return Err(FieldError::invalid(
                "hostPath.path",
                format!("{:?}: must be an absolute path", host.path),
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
        return Err(FieldError::refused("", format!("static pods may not reference {what}")));
    }
    Err(FieldError::refused(
        "",
        "only emptyDir and hostPath volumes are supported on this node",
    ))
}

/// Check a pod's volumes and every volumeMount; the error names the field.
pub fn validate(pod: &Pod) -> Result<(), FieldError> {
    let Some(spec) = &pod.spec else { return Ok(()) };
    let volumes = spec.volumes.as_deref().unwrap_or_default();
    for (i, v) in volumes.iter().enumerate() {
        volume_source(Path::new("/"), pod, v).map_err(|e| e.under(&format!("spec.volumes[{i}]")))?;
        if volumes[..i].iter().any(|o| o.name == v.name) {
            return Err(FieldError::duplicate(
                format!("spec.volumes[{i}].name"),
                format!("{:?}", v.name),
            ));
        }
    }
    for (field, c) in containers_with_fields(spec) {
        for (j, m) in c.volume_mounts.iter().flatten().enumerate() {
            let at = format!("{field}.volumeMounts[{j}]");
            if !volumes.iter().any(|v| v.name == m.name) {
                return Err(FieldError::not_found(format!("{at}.name"), format!("{:?}", m.name)));
            }
            if !m.mount_path.starts_with('/') {
                return Err(FieldError::invalid(
                    format!("{at}.mountPath"),
                    format!("{:?}: must be an absolute path", m.mount_path),
                ));
            }
            if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                check_sub_path(sub)
                    .map_err(|e| FieldError::invalid(format!("{at}.subPath"), format!("{sub:?}: {e}")))?;
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

/// A volume or volumeMount that cannot be set up for a container (reason
/// `CreateContainerConfigError`). Retried at the container's next start attempt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct VolumeError {
    /// The mount or volume (`volumeMounts[data]`, `volume "data"`).
    pub field: String,
    /// Why.
    pub reason: String,
}

fn config_error(field: String, reason: impl ToString) -> VolumeError {
    VolumeError {
        field,
        reason: reason.to_string(),
    }
}

/// One volumeMount of a container, resolved: what the node must have ready before the container
/// is created, and the Docker bind that mounts it. Building it does no I/O; the agent prepares it
/// on the node (`dockerlet_host::volume_dirs::prepare`, where kubelet does its hostPath type
/// checks at mount) and then binds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The mount, for errors (`volumeMounts[data]`).
    pub field: String,
    /// The volume's name.
    pub volume: String,
    /// Where the volume lives on the node.
    pub source: VolumeSource,
    /// The mount's `subPath`, checked to be relative and free of `..`.
    pub sub_path: Option<String>,
    /// Where it appears in the container.
    pub container_path: String,
    /// `readOnly: true`.
    pub read_only: bool,
}

impl Mount {
    /// The path on the node that is bound: the volume, or its subPath inside it.
    pub fn host_path(&self) -> PathBuf {
        let base = match &self.source {
            VolumeSource::EmptyDir(dir) => dir.clone(),
            VolumeSource::HostPath { path, .. } => path.clone(),
        };
        match &self.sub_path {
            Some(sub) => base.join(sub),
            None => base,
        }
    }

    /// The Docker bind, `host:container[:ro]`.
    pub fn bind(&self) -> String {
        let read_only = if self.read_only { ":ro" } else { "" };
        format!("{}:{}{read_only}", self.host_path().display(), self.container_path)
    }
}

/// Resolve every volumeMount of `container` against the pod's volumes.
pub fn mounts(root: &Path, pod: &Pod, container: &Container) -> Result<Vec<Mount>, VolumeError> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    let mut mounts = Vec::new();
    for m in container.volume_mounts.iter().flatten() {
        let field = format!("volumeMounts[{}]", m.name);
        let volume = volumes
            .iter()
            .find(|v| v.name == m.name)
            .ok_or_else(|| config_error(field.clone(), format!("no volume named {:?}", m.name)))?;
        let source = volume_source(root, pod, volume).map_err(|e| config_error(field.clone(), e))?;
        let sub_path = m.sub_path.clone().filter(|s| !s.is_empty());
        if let Some(sub) = &sub_path {
            check_sub_path(sub).map_err(|e| config_error(field.clone(), e))?;
        }
        mounts.push(Mount {
            field,
            volume: volume.name.clone(),
            source,
            sub_path,
            container_path: m.mount_path.clone(),
            read_only: m.read_only == Some(true),
        });
    }
    Ok(mounts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{mount, pod};
    use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, EmptyDirVolumeSource, HostPathVolumeSource};

    /// emptyDir lives under the pod's directory; hostPath binds as is, read-only when asked;
    /// subPath joins the volume path.
    #[test]
    fn mounts_become_docker_binds() {
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
                        path: "/srv/data".into(),
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
        let m = mounts(Path::new("/root"), &p, &p.spec.as_ref().unwrap().containers[0]).unwrap();
        let binds: Vec<String> = m.iter().map(Mount::bind).collect();
        assert_eq!(
            binds,
            vec![
                "/root/pods/u1/volumes/kubernetes.io~empty-dir/cache/sub:/cache".to_string(),
                "/srv/data:/data:ro".to_string()
            ]
        );
        assert_eq!(
            m[1].source,
            VolumeSource::HostPath {
                path: "/srv/data".into(),
                kind: "Directory".into()
            }
        );
    }

    /// API-object volumes, unknown mounts and escaping subPaths are refused with the field.
    #[test]
    fn invalid_volumes_name_the_field() {
        let cm = Volume {
            name: "cfg".into(),
            config_map: Some(ConfigMapVolumeSource::default()),
            ..Default::default()
        };
        let err = validate(&pod(vec![cm], vec![])).unwrap_err().to_string();
        assert_eq!(err, "spec.volumes[0]: static pods may not reference configmaps");
        let err = validate(&pod(vec![], vec![mount("nope", "/x", false, None)]))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "spec.containers[0].volumeMounts[0].name: Not found: \"nope\"");
        let v = Volume {
            name: "v".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        };
        let err = validate(&pod(vec![v], vec![mount("v", "/x", false, Some("../etc"))]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("subPath") && err.contains(".."), "{err}");
    }
}
