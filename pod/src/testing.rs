//! Builders for tests of this crate and of the crates above it (feature `testing`).

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Pod `p` (UID `u1`) with these volumes and one container `c` with these mounts.
pub fn pod(volumes: Vec<Volume>, mounts: Vec<VolumeMount>) -> Pod {
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

/// A volumeMount.
pub fn mount(name: &str, path: &str, read_only: bool, sub: Option<&str>) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: Some(read_only),
        sub_path: sub.map(str::to_string),
        ..Default::default()
    }
}
