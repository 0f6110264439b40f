use super::*;
use k8s_openapi::api::core::v1::{
    ConfigMapProjection, ConfigMapVolumeSource, Container, DownwardAPIProjection, DownwardAPIVolumeSource,
    ObjectFieldSelector, PodSecurityContext, PodSpec, ProjectedVolumeSource, ResourceFieldSelector,
    ResourceRequirements, SecretProjection, SecretVolumeSource, ServiceAccountTokenProjection, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn pod_with(volumes: Vec<Volume>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("downwardapi-volume-1".into()),
            namespace: Some("ns".into()),
            uid: Some("u1".into()),
            labels: Some(BTreeMap::from([
                ("key1".to_string(), "value1".to_string()),
                ("key2".to_string(), "value2".to_string()),
            ])),
            annotations: Some(BTreeMap::from([("builder".to_string(), "bar".to_string())])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            volumes: Some(volumes),
            containers: vec![Container {
                name: "client-container".into(),
                resources: Some(ResourceRequirements {
                    limits: Some(BTreeMap::from([
                        ("cpu".to_string(), Quantity("1250m".into())),
                        ("memory".to_string(), Quantity("64Mi".into())),
                    ])),
                    requests: Some(BTreeMap::from([
                        ("cpu".to_string(), Quantity("250m".into())),
                        ("memory".to_string(), Quantity("32Mi".into())),
                    ])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

fn text(p: &Payload, path: &str) -> String {
    String::from_utf8(p[path].data.clone()).unwrap()
}

fn field(path: &str, field_path: &str) -> DownwardAPIVolumeFile {
    DownwardAPIVolumeFile {
        path: path.into(),
        field_ref: Some(ObjectFieldSelector {
            field_path: field_path.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn resource(path: &str, r: &str) -> DownwardAPIVolumeFile {
    DownwardAPIVolumeFile {
        path: path.into(),
        resource_field_ref: Some(ResourceFieldSelector {
            container_name: Some("client-container".into()),
            resource: r.into(),
            divisor: None,
        }),
        ..Default::default()
    }
}

fn key(key: &str, path: &str, mode: Option<i32>) -> KeyToPath {
    KeyToPath {
        key: key.into(),
        path: path.into(),
        mode,
        ..Default::default()
    }
}

fn cm_objects() -> VolumeObjects {
    VolumeObjects {
        config_maps: HashMap::from([(
            "configmap-test-volume".to_string(),
            Some(ConfigMapData {
                data: BTreeMap::from([
                    ("data-1".to_string(), "value-1".to_string()),
                    ("data-2".to_string(), "value-2".to_string()),
                ]),
                binary_data: BTreeMap::from([("dump.bin".to_string(), vec![0xde, 0xca, 0xfe, 0xba, 0xd0, 0xfe, 0xff])]),
            }),
        )]),
        secrets: HashMap::from([
            (
                "secret-test".to_string(),
                Some(BTreeMap::from([("data-1".to_string(), b"value-1\n".to_vec())])),
            ),
            ("absent".to_string(), None),
        ]),
        tokens: HashMap::new(),
    }
}

fn config_map_volume(
    items: Option<Vec<KeyToPath>>,
    default_mode: Option<i32>,
    optional: Option<bool>,
    name: &str,
) -> Volume {
    Volume {
        name: "configmap-volume".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: name.into(),
            items,
            default_mode,
            optional,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The conformance downwardAPI volume: podname, cpu_limit "2" (1250m rounded up),
/// memory_limit "67108864", cpu_request "1", memory_request "33554432", labels and annotations as
/// `key="value"` lines, files 0644 unless a mode says (0400 → -r--------).
#[test]
fn downward_api_volume_has_the_conformance_content() {
    let mut podname = field("podname", "metadata.name");
    podname.mode = Some(0o400);
    let v = Volume {
        name: "podinfo".into(),
        downward_api: Some(DownwardAPIVolumeSource {
            items: Some(vec![
                podname,
                resource("cpu_limit", "limits.cpu"),
                resource("cpu_request", "requests.cpu"),
                resource("memory_limit", "limits.memory"),
                resource("memory_request", "requests.memory"),
                field("labels", "metadata.labels"),
                field("annotations", "metadata.annotations"),
                field("./sub//uid", "metadata.uid"),
            ]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let p = pod_with(vec![v.clone()]);
    let out = payload(&p, &v, &VolumeObjects::default(), &Allocatable::default()).unwrap();
    assert_eq!(text(&out, "podname"), "downwardapi-volume-1");
    assert_eq!(out["podname"].mode, 0o400);
    assert_eq!(text(&out, "cpu_limit"), "2");
    assert_eq!(text(&out, "cpu_request"), "1");
    assert_eq!(text(&out, "memory_limit"), "67108864");
    assert_eq!(text(&out, "memory_request"), "33554432");
    assert_eq!(out["cpu_limit"].mode, 0o644);
    assert_eq!(text(&out, "labels"), "key1=\"value1\"\nkey2=\"value2\"");
    assert_eq!(text(&out, "annotations"), "builder=\"bar\"");
    assert_eq!(text(&out, "sub/uid"), "u1", "paths are cleaned");
}

/// Without limits, limits.cpu and limits.memory are the node's allocatable; containerName is
/// required in volumes.
#[test]
fn downward_api_limits_default_to_node_allocatable() {
    let v = Volume {
        name: "podinfo".into(),
        downward_api: Some(DownwardAPIVolumeSource {
            items: Some(vec![
                resource("cpu_limit", "limits.cpu"),
                resource("memory_limit", "limits.memory"),
            ]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut p = pod_with(vec![v.clone()]);
    p.spec.as_mut().unwrap().containers[0].resources = None;
    let alloc = Allocatable {
        cpu_milli: 2000,
        memory_bytes: 4 << 30,
        ephemeral_storage_bytes: 0,
    };
    let out = payload(&p, &v, &VolumeObjects::default(), &alloc).unwrap();
    assert_eq!(text(&out, "cpu_limit"), "2");
    assert_eq!(text(&out, "memory_limit"), (4i64 << 30).to_string());
    let mut no_container = resource("x", "limits.cpu");
    no_container.resource_field_ref.as_mut().unwrap().container_name = None;
    let v = Volume {
        name: "podinfo".into(),
        downward_api: Some(DownwardAPIVolumeSource {
            items: Some(vec![no_container]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let err = payload(&p, &v, &VolumeObjects::default(), &alloc)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "spec.volumes[0].downwardAPI.items[0].resourceFieldRef.containerName: Required value"
    );
}

/// configMap volumes: every key (data and binaryData) at 0644, defaultMode 0400, items mapping
/// `data-2 → path/to/data-2` with an item mode.
#[test]
fn config_map_keys_items_and_modes() {
    let objects = cm_objects();
    let a = Allocatable::default();
    let v = config_map_volume(None, None, None, "configmap-test-volume");
    let out = payload(&pod_with(vec![v.clone()]), &v, &objects, &a).unwrap();
    assert_eq!(out.keys().collect::<Vec<_>>(), vec!["data-1", "data-2", "dump.bin"]);
    assert_eq!(text(&out, "data-1"), "value-1");
    assert_eq!(out["data-1"].mode, 0o644);
    assert_eq!(out["dump.bin"].data, vec![0xde, 0xca, 0xfe, 0xba, 0xd0, 0xfe, 0xff]);
    let v = config_map_volume(None, Some(0o400), None, "configmap-test-volume");
    let out = payload(&pod_with(vec![v.clone()]), &v, &objects, &a).unwrap();
    assert_eq!(out["data-1"].mode, 0o400);
    let v = config_map_volume(
        Some(vec![key("data-2", "path/to/data-2", Some(0o400))]),
        None,
        None,
        "configmap-test-volume",
    );
    let out = payload(&pod_with(vec![v.clone()]), &v, &objects, &a).unwrap();
    assert_eq!(out.keys().collect::<Vec<_>>(), vec!["path/to/data-2"]);
    assert_eq!(
        (text(&out, "path/to/data-2").as_str(), out["path/to/data-2"].mode),
        ("value-2", 0o400)
    );
}

/// Missing objects and keys: errors in kubelet's words unless optional (then no files).
#[test]
fn missing_objects_and_keys() {
    let mut objects = cm_objects();
    objects.config_maps.insert("gone".into(), None);
    let a = Allocatable::default();
    let run = |v: Volume| payload(&pod_with(vec![v.clone()]), &v, &objects, &a);
    let err = run(config_map_volume(None, None, None, "gone"))
        .unwrap_err()
        .to_string();
    assert_eq!(err, "volume \"configmap-volume\": configmap \"gone\" not found");
    assert!(run(config_map_volume(None, None, Some(true), "gone"))
        .unwrap()
        .is_empty());
    let items = Some(vec![key("nope", "p", None)]);
    let err = run(config_map_volume(items.clone(), None, None, "configmap-test-volume"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "volume \"configmap-volume\": configmap references non-existent config key: nope"
    );
    assert!(run(config_map_volume(items, None, Some(true), "configmap-test-volume"))
        .unwrap()
        .is_empty());
    let err = run(config_map_volume(None, None, None, "unfetched"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("was not fetched"), "{err}");
    let secret = |name: &str, items: Option<Vec<KeyToPath>>| Volume {
        name: "secret-volume".into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(name.into()),
            items,
            ..Default::default()
        }),
        ..Default::default()
    };
    let err = run(secret("absent", None)).unwrap_err().to_string();
    assert_eq!(err, "volume \"secret-volume\": secret \"absent\" not found");
    let err = run(secret("secret-test", Some(vec![key("k", "p", None)])))
        .unwrap_err()
        .to_string();
    assert_eq!(err, "volume \"secret-volume\": references non-existent secret key: k");
    let out = run(secret(
        "secret-test",
        Some(vec![key("data-1", "new-path-data-1", None)]),
    ))
    .unwrap();
    assert_eq!(text(&out, "new-path-data-1"), "value-1\n");
}

/// Paths the AtomicWriter refuses are errors naming the field, never files.
#[test]
fn bad_paths_name_the_field() {
    let objects = cm_objects();
    let a = Allocatable::default();
    for (path, reason) in [
        ("/etc/passwd", "must be relative path"),
        ("../escape", "must not contain '..'"),
        ("a/../../b", "must not contain '..'"),
        ("..data", "must not start with '..'"),
        ("", "must not be empty"),
    ] {
        let v = config_map_volume(
            Some(vec![key("data-1", path, None)]),
            None,
            None,
            "configmap-test-volume",
        );
        let err = payload(&pod_with(vec![v.clone()]), &v, &objects, &a).unwrap_err();
        assert_eq!(err.field, "spec.volumes[0].configMap.items[0].path", "{path}");
        assert!(err.reason.contains(reason), "{path}: {err}");
    }
    let long = "x".repeat(256);
    assert!(validate_path(&long).unwrap_err().to_string().contains("255"));
    assert!(validate_path(&format!("{}/y", "a/".repeat(2100)))
        .unwrap_err()
        .to_string()
        .contains("4096"));
    let v = config_map_volume(
        Some(vec![key("data-1", "p", Some(0o1777))]),
        None,
        None,
        "configmap-test-volume",
    );
    let err = payload(&pod_with(vec![v.clone()]), &v, &objects, &a).unwrap_err();
    assert_eq!(err.field, "spec.volumes[0].configMap.items[0].mode");
    let err = validate_volume(&v).unwrap_err().to_string();
    assert!(err.starts_with("configMap.items[0].mode: Invalid value"), "{err}");
}

fn projected(sources: Vec<VolumeProjection>, default_mode: Option<i32>) -> Volume {
    Volume {
        name: "all".into(),
        projected: Some(ProjectedVolumeSource {
            default_mode,
            sources: Some(sources),
            default_user: None,
        }),
        ..Default::default()
    }
}

/// The projected-combined conformance volume: podname, secret-data and configmap-data in one
/// directory; a serviceAccountToken source is the token fetched for (volume, index); explicit
/// paths that collide are an error.
#[test]
fn projected_sources_merge() {
    let mut objects = cm_objects();
    objects.tokens.insert(("all".into(), 3), "jwt".into());
    let v = projected(
        vec![
            VolumeProjection {
                downward_api: Some(DownwardAPIProjection {
                    items: Some(vec![field("podname", "metadata.name")]),
                }),
                ..Default::default()
            },
            VolumeProjection {
                secret: Some(SecretProjection {
                    name: "secret-test".into(),
                    items: Some(vec![key("data-1", "secret-data", None)]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: "configmap-test-volume".into(),
                    items: Some(vec![key("data-1", "configmap-data", None)]),
                    ..Default::default()
                }),
                ..Default::default()
            },
            VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    path: "token".into(),
                    audience: None,
                    expiration_seconds: None,
                    user: None,
                }),
                ..Default::default()
            },
        ],
        Some(0o420),
    );
    let p = pod_with(vec![v.clone()]);
    let out = payload(&p, &v, &objects, &Allocatable::default()).unwrap();
    assert_eq!(text(&out, "podname"), "downwardapi-volume-1");
    assert_eq!(text(&out, "secret-data"), "value-1\n");
    assert_eq!(text(&out, "configmap-data"), "value-1");
    assert_eq!((text(&out, "token").as_str(), out["token"].mode), ("jwt", 0o420));
    let mut fs_group = p.clone();
    fs_group.spec.as_mut().unwrap().security_context = Some(PodSecurityContext {
        fs_group: Some(1001),
        ..Default::default()
    });
    assert_eq!(
        payload(&fs_group, &v, &objects, &Allocatable::default()).unwrap()["token"].mode,
        0o600
    );
    let refs = api_references(&p);
    assert_eq!(
        refs.tokens,
        vec![TokenNeed {
            volume: "all".into(),
            source_index: 3,
            service_account: "default".into(),
            audience: None,
            expiration_seconds: 3600,
            path: "token".into(),
        }]
    );
    assert_eq!(
        refs.secrets,
        vec![ObjectReference {
            name: "secret-test".into(),
            optional: false
        }]
    );
    let clash = projected(
        vec![
            VolumeProjection {
                downward_api: Some(DownwardAPIProjection {
                    items: Some(vec![field("same", "metadata.name")]),
                }),
                ..Default::default()
            },
            VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: "configmap-test-volume".into(),
                    items: Some(vec![key("data-1", "./same", None)]),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ],
        None,
    );
    let err = payload(
        &pod_with(vec![clash.clone()]),
        &clash,
        &objects,
        &Allocatable::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.field,
        "spec.volumes[0].projected.sources[1].configMap.items[0].path"
    );
    assert!(err.reason.contains("conflicting duplicate paths"), "{err}");
}

/// References are deduplicated; a name is optional only if every reference says so.
#[test]
fn references_are_deduplicated() {
    let p = pod_with(vec![
        config_map_volume(None, None, Some(true), "a"),
        config_map_volume(None, None, None, "a"),
        config_map_volume(None, None, Some(true), "b"),
    ]);
    let refs = api_references(&p);
    assert_eq!(
        refs.config_maps,
        vec![
            ObjectReference {
                name: "a".into(),
                optional: false
            },
            ObjectReference {
                name: "b".into(),
                optional: true
            }
        ]
    );
}
