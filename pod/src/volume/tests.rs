use std::collections::BTreeMap;

use super::*;
use crate::testing::{mount, pod};
use k8s_openapi::api::core::v1::{
    ConfigMapProjection, ConfigMapVolumeSource, DownwardAPIProjection, DownwardAPIVolumeSource, EmptyDirVolumeSource,
    HostPathVolumeSource, PodSecurityContext, ProjectedVolumeSource, ResourceRequirements,
    ServiceAccountTokenProjection, VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

fn api(mut p: Pod) -> Pod {
    p.metadata.annotations = Some(BTreeMap::from([(
        crate::annotations::CONFIG_SOURCE.to_string(),
        "api".to_string(),
    )]));
    p
}

fn empty_dir(name: &str, medium: Option<&str>, size: Option<&str>) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: medium.map(str::to_string),
            size_limit: size.map(|s| Quantity(s.into())),
            mode: None,
        }),
        ..Default::default()
    }
}

fn container_mounts(p: &Pod, env: &[(String, String)]) -> Result<Vec<Mount>, VolumeError> {
    mounts(
        Path::new("/root"),
        p,
        &p.spec.as_ref().unwrap().containers[0],
        env,
        &Allocatable::default(),
    )
}

/// emptyDir lives under the pod's directory; hostPath binds as is, read-only when asked;
/// a subPath binds its own path under `volume-subpaths`.
#[test]
fn mounts_become_docker_binds() {
    let p = pod(
        vec![
            empty_dir("cache", None, None),
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
    let m = container_mounts(&p, &[]).unwrap();
    let binds: Vec<String> = m.iter().map(Mount::bind).collect();
    assert_eq!(
        binds,
        vec![
            "/root/pods/u1/volume-subpaths/cache/c/0:/cache".to_string(),
            "/srv/data:/data:ro".to_string()
        ]
    );
    assert_eq!(
        m[0].source,
        VolumeSource::EmptyDir {
            dir: "/root/pods/u1/volumes/kubernetes.io~empty-dir/cache".into(),
            medium: Medium::Disk,
            mode: 0o777
        }
    );
    assert_eq!(m[0].sub_path.as_ref().unwrap().path, "sub");
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
    let v = empty_dir("v", None, None);
    let err = validate(&pod(vec![v], vec![mount("v", "/x", false, Some("../etc"))]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("subPath") && err.contains(".."), "{err}");
}

fn projected(sources: Vec<VolumeProjection>) -> Volume {
    Volume {
        name: "kube-api-access-abcde".into(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(0o644),
            sources: Some(sources),
            default_user: None,
        }),
        ..Default::default()
    }
}

fn namespace_source() -> VolumeProjection {
    VolumeProjection {
        downward_api: Some(DownwardAPIProjection {
            items: Some(vec![k8s_openapi::api::core::v1::DownwardAPIVolumeFile {
                path: "namespace".into(),
                field_ref: Some(k8s_openapi::api::core::v1::ObjectFieldSelector {
                    field_path: "metadata.namespace".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
        }),
        ..Default::default()
    }
}

/// The kube-api-access volume (token, CA ConfigMap, namespace) is refused for static pods and
/// resolved for API pods; downwardAPI-only volumes are fine for both. Atomic-writer volumes live
/// in kubelet's plugin directories and are always mounted read-only.
#[test]
fn static_pods_refuse_api_objects_api_pods_get_them() {
    let access = projected(vec![
        VolumeProjection {
            service_account_token: Some(ServiceAccountTokenProjection {
                path: "token".into(),
                expiration_seconds: Some(3607),
                audience: None,
                user: None,
            }),
            ..Default::default()
        },
        VolumeProjection {
            config_map: Some(ConfigMapProjection {
                name: "kube-root-ca.crt".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        namespace_source(),
    ]);
    let mounts_of = vec![mount(
        "kube-api-access-abcde",
        "/var/run/secrets/kubernetes.io/serviceaccount",
        false,
        None,
    )];
    let static_pod = pod(vec![access.clone()], mounts_of.clone());
    let err = validate(&static_pod).unwrap_err().to_string();
    assert_eq!(
        err,
        "spec.volumes[0]: static pods may not reference API objects in projected volumes"
    );
    let api_pod = api(pod(vec![access], mounts_of.clone()));
    validate(&api_pod).unwrap();
    let m = container_mounts(&api_pod, &[]).unwrap();
    assert_eq!(
        m[0].bind(),
        "/root/pods/u1/volumes/kubernetes.io~projected/kube-api-access-abcde:/var/run/secrets/kubernetes.io/serviceaccount:ro"
    );
    let atomic = atomic_volumes(Path::new("/root"), &api_pod);
    assert_eq!(atomic.len(), 1);
    assert_eq!(atomic[0].2, AtomicKind::Projected);
    assert!(atomic_volumes(Path::new("/root"), &static_pod).is_empty());
    let downward_only = pod(vec![projected(vec![namespace_source()])], mounts_of);
    validate(&downward_only).unwrap();
    let downward = Volume {
        name: "podinfo".into(),
        downward_api: Some(DownwardAPIVolumeSource::default()),
        ..Default::default()
    };
    let p = pod(vec![downward], vec![mount("podinfo", "/etc/podinfo", false, None)]);
    validate(&p).unwrap();
    assert_eq!(
        container_mounts(&p, &[]).unwrap()[0].source,
        VolumeSource::Atomic {
            dir: "/root/pods/u1/volumes/kubernetes.io~downward-api/podinfo".into(),
            kind: AtomicKind::DownwardApi
        }
    );
    // A manifest claiming to come from the API server is still a static pod.
    let claimed = api(pod(
        vec![Volume {
            name: "cfg".into(),
            config_map: Some(ConfigMapVolumeSource::default()),
            ..Default::default()
        }],
        vec![],
    ));
    validate(&claimed).unwrap();
    assert!(validate_static(&claimed).is_err());
}

/// `medium: Memory` is a tmpfs sized by the smallest of sizeLimit, the pod's memory limit and
/// the node's allocatable memory; HugePages media are refused with the reason.
#[test]
fn memory_empty_dirs_are_sized_tmpfs() {
    let mut p = pod(
        vec![empty_dir("shm", Some("Memory"), Some("10Mi"))],
        vec![mount("shm", "/usr/share/volumeshare", false, None)],
    );
    let m = container_mounts(&p, &[]).unwrap();
    assert_eq!(
        m[0].source,
        VolumeSource::EmptyDir {
            dir: "/root/pods/u1/volumes/kubernetes.io~empty-dir/shm".into(),
            medium: Medium::Memory {
                size_limit: Some(10 << 20)
            },
            mode: 0o777
        }
    );
    p.spec.as_mut().unwrap().volumes = Some(vec![empty_dir("shm", Some("Memory"), None)]);
    p.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
        limits: Some(BTreeMap::from([("memory".to_string(), Quantity("64Mi".into()))])),
        ..Default::default()
    });
    let alloc = Allocatable {
        memory_bytes: 1 << 30,
        ..Default::default()
    };
    let c = &p.spec.as_ref().unwrap().containers[0];
    let m = mounts(Path::new("/root"), &p, c, &[], &alloc).unwrap();
    assert!(
        matches!(m[0].source, VolumeSource::EmptyDir { medium: Medium::Memory { size_limit: Some(s) }, .. } if s == 64 << 20)
    );
    p.spec.as_mut().unwrap().containers[0].resources = None;
    let c = &p.spec.as_ref().unwrap().containers[0];
    let m = mounts(Path::new("/root"), &p, c, &[], &alloc).unwrap();
    assert!(
        matches!(m[0].source, VolumeSource::EmptyDir { medium: Medium::Memory { size_limit: Some(s) }, .. } if s == 1 << 30)
    );
    p.spec.as_mut().unwrap().volumes = Some(vec![empty_dir("shm", Some("HugePages-2Mi"), None)]);
    let err = validate(&p).unwrap_err().to_string();
    assert!(
        err.starts_with("spec.volumes[0].emptyDir.medium: \"HugePages-2Mi\": hugepages"),
        "{err}"
    );
}

/// subPathExpr expands `$(VAR)` from the container's env; an unset variable, a result with `..`,
/// or both subPath and subPathExpr are errors.
#[test]
fn sub_path_expr_expands_with_the_env() {
    let with_expr = |expr: &str, sub: Option<&str>| {
        pod(
            vec![empty_dir("workdir", None, None)],
            vec![VolumeMount {
                name: "workdir".into(),
                mount_path: "/logs".into(),
                sub_path_expr: Some(expr.into()),
                sub_path: sub.map(str::to_string),
                ..Default::default()
            }],
        )
    };
    let env = vec![
        ("POD_NAME".to_string(), "pod-1".to_string()),
        ("UP".to_string(), "..".to_string()),
    ];
    let m = container_mounts(&with_expr("$(POD_NAME)/logs", None), &env).unwrap();
    assert_eq!(m[0].sub_path.as_ref().unwrap().path, "pod-1/logs");
    let err = container_mounts(&with_expr("$(NOPE)", None), &env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing value for NOPE"), "{err}");
    let err = container_mounts(&with_expr("$(UP)/x", None), &env)
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("unable to provision SubPath `../x`: must not contain '..'"),
        "{err}"
    );
    let err = container_mounts(&with_expr("/tmp", None), &env)
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("error SubPath `/tmp` must not be an absolute path"),
        "{err}"
    );
    let both = with_expr("$(POD_NAME)", Some("x"));
    let err = validate(&both).unwrap_err().to_string();
    assert!(err.contains("mutually exclusive"), "{err}");
    assert!(container_mounts(&both, &env).is_err());
}

/// fsGroup becomes the volumes' ownership.
#[test]
fn fs_group_is_the_volumes_ownership() {
    let mut p = pod(vec![], vec![]);
    assert_eq!(ownership(&p), None);
    p.spec.as_mut().unwrap().security_context = Some(PodSecurityContext {
        fs_group: Some(1001),
        ..Default::default()
    });
    assert_eq!(
        ownership(&p),
        Some(Ownership {
            fs_group: 1001,
            on_root_mismatch: false
        })
    );
}

/// `mountPropagation` becomes cri-dockerd's bind option: none for `None`, `rslave` for
/// `HostToContainer`, `rshared` for `Bidirectional` (privileged containers only); an unknown
/// mode is refused in kubelet's words.
#[test]
fn mount_propagation_becomes_the_binds_option() {
    let with = |propagation: Option<&str>, read_only: bool, privileged: bool| {
        let mut p = pod(
            vec![empty_dir("cache", None, None)],
            vec![VolumeMount {
                mount_propagation: propagation.map(str::to_string),
                ..mount("cache", "/cache", read_only, None)
            }],
        );
        if privileged {
            p.spec.as_mut().unwrap().containers[0].security_context =
                Some(k8s_openapi::api::core::v1::SecurityContext {
                    privileged: Some(true),
                    ..Default::default()
                });
        }
        container_mounts(&p, &[])
            .map(|m| m[0].bind())
            .map_err(|e| e.to_string())
    };
    let dir = "/root/pods/u1/volumes/kubernetes.io~empty-dir/cache:/cache";
    assert_eq!(with(None, false, false), Ok(dir.to_string()));
    assert_eq!(with(Some("None"), true, false), Ok(format!("{dir}:ro")));
    assert_eq!(with(Some("HostToContainer"), false, false), Ok(format!("{dir}:rslave")));
    assert_eq!(
        with(Some("HostToContainer"), true, false),
        Ok(format!("{dir}:ro,rslave"))
    );
    assert_eq!(with(Some("Bidirectional"), false, true), Ok(format!("{dir}:rshared")));
    assert_eq!(
        with(Some("Bidirectional"), false, false),
        Err(
            "volumeMounts[cache]: Bidirectional mount propagation is available only to privileged containers"
                .to_string()
        )
    );
    assert_eq!(
        with(Some("Sideways"), false, false),
        Err("volumeMounts[cache]: invalid MountPropagation mode: \"Sideways\"".to_string())
    );
}

/// `recursiveReadOnly` as kubelet resolves it on a runtime without recursively read-only
/// mounts: `Disabled` and `IfPossible` are plain read-only mounts; `Enabled`, or a mode on a
/// writable or propagating mount, is the container's error in kubelet's words.
#[test]
fn recursive_read_only_as_kubelet_on_a_runtime_without_it() {
    let with = |mode: &str, read_only: bool, propagation: Option<&str>| {
        let p = pod(
            vec![empty_dir("mnt", None, None)],
            vec![VolumeMount {
                recursive_read_only: Some(mode.to_string()),
                mount_propagation: propagation.map(str::to_string),
                ..mount("mnt", "/mnt", read_only, None)
            }],
        );
        container_mounts(&p, &[])
            .map(|m| m[0].bind())
            .map_err(|e| e.to_string())
    };
    let ro = "/root/pods/u1/volumes/kubernetes.io~empty-dir/mnt:/mnt:ro".to_string();
    assert_eq!(with("Disabled", true, None), Ok(ro.clone()));
    assert_eq!(
        with("Disabled", false, None),
        Ok(ro.trim_end_matches(":ro").to_string())
    );
    assert_eq!(with("IfPossible", true, None), Ok(ro.clone()));
    assert_eq!(with("IfPossible", true, Some("None")), Ok(ro));
    let refused = |why: &str| {
        Err(format!(
            "volumeMounts[mnt]: failed to resolve recursive read-only mode: {why}"
        ))
    };
    assert_eq!(
        with("Enabled", true, None),
        refused("volume \"mnt\" requested recursive read-only mode, but it is not supported by the runtime")
    );
    assert_eq!(
        with("Enabled", false, None),
        refused("volume \"mnt\" requested recursive read-only mode, but it is not read-only")
    );
    assert_eq!(
        with("IfPossible", true, Some("HostToContainer")),
        refused("volume \"mnt\" requested recursive read-only mode, but it is not compatible with propagation \"HostToContainer\"")
    );
    assert_eq!(
        with("Always", true, None),
        refused("unknown recursive read-only mode \"Always\"")
    );
}
