//! Tests of the Docker container specs and environment built from a pod.

use super::*;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Each instance's termination message file is bind-mounted at the container's path,
/// unless it has none or a volume is mounted there.
#[test]
fn termination_message_files_are_bound_at_the_containers_path() {
    use k8s_openapi::api::core::v1::VolumeMount;
    let file = termination_message_file(std::path::Path::new("/r"), "u1", "app", "0-1");
    assert_eq!(file, std::path::PathBuf::from("/r/pods/u1/containers/app/0-1"));
    let mut c = Container {
        name: "app".into(),
        termination_message_path: Some("/dev/termination-custom-log".into()),
        ..Default::default()
    };
    assert_eq!(
        termination_message_bind(&c, &file).as_deref(),
        Some("/r/pods/u1/containers/app/0-1:/dev/termination-custom-log")
    );
    c.volume_mounts = Some(vec![VolumeMount {
        name: "v".into(),
        mount_path: "/dev/termination-custom-log".into(),
        ..Default::default()
    }]);
    assert_eq!(termination_message_bind(&c, &file), None, "a volume is mounted there");
    c.volume_mounts = None;
    c.termination_message_path = Some(String::new());
    assert_eq!(termination_message_bind(&c, &file), None, "no path");
}

fn pod(containers: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web-n1".into()),
            namespace: Some("default".into()),
            uid: Some("uid1".into()),
            labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers,
            ..Default::default()
        }),
        status: None,
    }
}

/// Quantities parse in both binary and decimal units, CPU in millicores.
#[test]
fn quantities_parse_like_the_api() {
    assert_eq!(parse_quantity("128Mi", false), Some(128 * 1024 * 1024));
    assert_eq!(parse_quantity("1G", false), Some(1_000_000_000));
    assert_eq!(parse_quantity("500m", true), Some(500));
    assert_eq!(parse_quantity("0.5", true), Some(500));
    assert_eq!(parse_quantity("2", true), Some(2000));
    assert_eq!(parse_quantity("1e3", false), Some(1000));
    assert_eq!(parse_quantity("250000000n", true), Some(250));
    assert_eq!(parse_quantity("12x", false), None);
}

/// `$(VAR)` expands known names, keeps unknown ones, and `$$` escapes.
#[test]
fn expansion_follows_kubelet_rules() {
    let env = HashMap::from([("A", "1")]);
    assert_eq!(expand("x$(A)y$(B)$$(A)$", &env), "x1y$(B)$(A)$");
}

/// Command replaces ENTRYPOINT, args replace CMD, env resolves fieldRefs, limits map to
/// Docker's memory, quota and shares, and the container joins the sandbox.
#[test]
fn container_spec_maps_the_pod_spec() {
    let c = Container {
        name: "app".into(),
        image: Some("img:1".into()),
        command: Some(vec!["sh".into()]),
        args: Some(vec!["-c".into(), "echo $(POD)".into()]),
        env: Some(vec![EnvVar {
            name: "POD".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.name".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        resources: Some(ResourceRequirements {
            limits: Some(BTreeMap::from([
                ("memory".into(), Quantity("64Mi".into())),
                ("cpu".into(), Quantity("250m".into())),
            ])),
            ..Default::default()
        }),
        ..Default::default()
    };
    let p = pod(vec![c.clone()]);
    let sandbox = ContainerId("sb".into());
    let ctx = PodContext {
        pod: &p,
        node_name: "n1",
        host_ip: "10.0.0.1",
        pod_ip: "172.17.0.2",
        pod_ips: &[],
        sandbox_id: &sandbox,
        node_memory_bytes: 1 << 30,
        env_objects: &EnvObjects::default(),
        allocatable: &Allocatable::default(),
        managed_files: &ManagedFiles::default(),
        cgroup_parent: Some("/kubepods/poduid1"),
    };
    let spec = container_spec(&ctx, &c, ContainerRole::App, 2, 1, &[]).unwrap();
    assert_eq!(spec.name, "k8s_app_web-n1_default_uid1_2");
    assert_eq!(spec.entrypoint, Some(vec!["sh".to_string()]));
    assert_eq!(spec.cmd, Some(vec!["-c".to_string(), "echo web-n1".to_string()]));
    assert_eq!(spec.env, vec!["POD=web-n1".to_string()]);
    assert_eq!(spec.memory, Some(64 * 1024 * 1024));
    assert_eq!(spec.memory_swap, Some(64 * 1024 * 1024), "no swap, as kubelet's NoSwap");
    assert_eq!(spec.cpu_quota, Some(25_000));
    assert_eq!(spec.cpu_period, Some(100_000));
    assert_eq!(spec.cpu_shares, Some(256));
    assert_eq!(spec.oom_score_adj, Some(-997));
    assert_eq!(spec.network, Some(NetworkMode::Container(sandbox.clone())));
    assert_eq!(spec.labels[labels::RESTART_COUNT], "2");
    assert_eq!(spec.labels[labels::NODE], "n1");
    assert_eq!(spec.labels[labels::SANDBOX_ID], "sb");
    assert_eq!(spec.cgroup_parent.as_deref(), Some("/kubepods/poduid1"));
}

/// The sandbox publishes hostPorts and carries the pod's labels.
#[test]
fn sandbox_publishes_host_ports() {
    let c = Container {
        name: "app".into(),
        ports: Some(vec![k8s_openapi::api::core::v1::ContainerPort {
            container_port: 80,
            host_port: Some(8080),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let spec = sandbox_spec(&pod(vec![c]), "n1", "pause", 0, Some("/kubepods/poduid1"));
    assert_eq!(spec.name, "k8s_POD_web-n1_default_uid1_0");
    assert_eq!(spec.cgroup_parent.as_deref(), Some("/kubepods/poduid1"));
    assert_eq!(
        spec.ports,
        vec![PortBinding {
            container_port: 80,
            protocol: "tcp".into(),
            host_port: 8080,
            host_ip: String::new()
        }]
    );
    assert_eq!(spec.labels["app"], "web");
    assert_eq!(spec.labels[labels::DOCKER_TYPE], "podsandbox");
    assert_eq!(spec.network, Some(NetworkMode::Bridge));
}

/// Secret and ConfigMap references resolve from the objects read beforehand (envFrom with
/// its prefix first, explicit env over it); a missing one is an error naming the variable.
#[test]
fn env_from_secrets_and_config_maps() {
    use k8s_openapi::api::core::v1::{ConfigMapEnvSource, EnvFromSource, SecretKeySelector};
    let c = Container {
        name: "app".into(),
        env_from: Some(vec![EnvFromSource {
            prefix: Some("CM_".into()),
            config_map_ref: Some(ConfigMapEnvSource {
                name: "cm".into(),
                optional: None,
            }),
            ..Default::default()
        }]),
        env: Some(vec![EnvVar {
            name: "PASSWORD".into(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: "s".into(),
                    key: "pw".into(),
                    optional: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let p = pod(vec![c.clone()]);
    let sandbox = ContainerId("sb".into());
    let objects = EnvObjects {
        secrets: HashMap::from([(
            "s".to_string(),
            Some(BTreeMap::from([("pw".to_string(), "hunter2".to_string())])),
        )]),
        config_maps: HashMap::from([(
            "cm".to_string(),
            Some(BTreeMap::from([("mode".to_string(), "fast".to_string())])),
        )]),
        ..Default::default()
    };
    let ctx = PodContext {
        pod: &p,
        node_name: "n1",
        host_ip: "",
        pod_ip: "",
        pod_ips: &[],
        sandbox_id: &sandbox,
        node_memory_bytes: 0,
        env_objects: &objects,
        allocatable: &Allocatable::default(),
        managed_files: &ManagedFiles::default(),
        cgroup_parent: Some("/kubepods/poduid1"),
    };
    let spec = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap();
    assert_eq!(
        spec.env,
        vec!["CM_mode=fast".to_string(), "PASSWORD=hunter2".to_string()]
    );
    let empty = EnvObjects::default();
    let ctx = PodContext {
        env_objects: &empty,
        ..ctx
    };
    let err = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "configmap \"cm\" not found",
        "kubelet's words, nothing before"
    );
    // The ConfigMap there but not the Secret's key: kubelet's missing-key text.
    let no_key = EnvObjects {
        secrets: HashMap::from([("s".to_string(), Some(BTreeMap::new()))]),
        ..objects.clone()
    };
    let ctx = PodContext {
        env_objects: &no_key,
        ..ctx
    };
    let err = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap_err();
    assert_eq!(err.to_string(), "couldn't find key pw in Secret default/s");
}

/// An env source that needs the API server is a config error naming the variable.
#[test]
fn unsupported_env_sources_are_config_errors() {
    let c = Container {
        name: "app".into(),
        env: Some(vec![EnvVar {
            name: "S".into(),
            value_from: Some(EnvVarSource::default()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let p = pod(vec![c.clone()]);
    let sandbox = ContainerId("sb".into());
    let ctx = PodContext {
        pod: &p,
        node_name: "n1",
        host_ip: "",
        pod_ip: "",
        pod_ips: &[],
        sandbox_id: &sandbox,
        node_memory_bytes: 0,
        env_objects: &EnvObjects::default(),
        allocatable: &Allocatable::default(),
        managed_files: &ManagedFiles::default(),
        cgroup_parent: Some("/kubepods/poduid1"),
    };
    let err = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap_err();
    assert!(err.to_string().starts_with("env S:"), "{err}");
}

/// Service variables come first, explicit env (and envFrom) override them, and `$(VAR)` in
/// values, command and args can use them, as kubelet's makeEnvironmentVariables does.
#[test]
fn service_variables_precede_and_yield_to_the_containers_env() {
    let c = Container {
        name: "app".into(),
        command: Some(vec!["echo $(FOO_SERVICE_HOST)".into()]),
        env: Some(vec![
            EnvVar {
                name: "FOO_SERVICE_PORT".into(),
                value: Some("mine".into()),
                ..Default::default()
            },
            EnvVar {
                name: "URL".into(),
                value: Some("http://$(FOO_SERVICE_HOST):$(FOO_SERVICE_PORT)".into()),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    let p = pod(vec![c.clone()]);
    let sandbox = ContainerId("sb".into());
    let objects = EnvObjects {
        services: vec![
            ("FOO_SERVICE_HOST".into(), "10.0.0.9".into()),
            ("FOO_SERVICE_PORT".into(), "80".into()),
        ],
        ..Default::default()
    };
    let ctx = PodContext {
        pod: &p,
        node_name: "n1",
        host_ip: "",
        pod_ip: "",
        pod_ips: &[],
        sandbox_id: &sandbox,
        node_memory_bytes: 0,
        env_objects: &objects,
        allocatable: &Allocatable::default(),
        managed_files: &ManagedFiles::default(),
        cgroup_parent: Some("/kubepods/poduid1"),
    };
    let spec = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap();
    assert_eq!(
        spec.env,
        [
            "FOO_SERVICE_HOST=10.0.0.9",
            "FOO_SERVICE_PORT=mine",
            "URL=http://10.0.0.9:mine"
        ]
    );
    assert_eq!(spec.entrypoint, Some(vec!["echo 10.0.0.9".to_string()]));
}

/// Env resourceFieldRef, as the downward API conformance test asserts: CPU_LIMIT=2 for 1250m,
/// MEMORY_LIMIT=67108864, CPU_REQUEST=1, MEMORY_REQUEST=33554432; containerName defaults to
/// the container itself; without limits, the node's allocatable.
#[test]
fn env_resource_field_refs() {
    use k8s_openapi::api::core::v1::ResourceFieldSelector;
    let var = |name: &str, resource: &str| EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            resource_field_ref: Some(ResourceFieldSelector {
                resource: resource.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut c = Container {
        name: "dapi-container".into(),
        env: Some(vec![
            var("CPU_LIMIT", "limits.cpu"),
            var("MEMORY_LIMIT", "limits.memory"),
            var("CPU_REQUEST", "requests.cpu"),
            var("MEMORY_REQUEST", "requests.memory"),
        ]),
        resources: Some(ResourceRequirements {
            limits: Some(BTreeMap::from([
                ("cpu".into(), Quantity("1250m".into())),
                ("memory".into(), Quantity("64Mi".into())),
            ])),
            requests: Some(BTreeMap::from([
                ("cpu".into(), Quantity("250m".into())),
                ("memory".into(), Quantity("32Mi".into())),
            ])),
            ..Default::default()
        }),
        ..Default::default()
    };
    let p = pod(vec![c.clone()]);
    let sandbox = ContainerId("sb".into());
    let alloc = Allocatable {
        cpu_milli: 4000,
        memory_bytes: 8 << 30,
        ephemeral_storage_bytes: 0,
    };
    let ctx = PodContext {
        pod: &p,
        node_name: "n1",
        host_ip: "",
        pod_ip: "",
        pod_ips: &[],
        sandbox_id: &sandbox,
        node_memory_bytes: 0,
        env_objects: &EnvObjects::default(),
        allocatable: &alloc,
        managed_files: &ManagedFiles::default(),
        cgroup_parent: Some("/kubepods/poduid1"),
    };
    let env = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap().env;
    assert_eq!(
        env,
        vec![
            "CPU_LIMIT=2".to_string(),
            "MEMORY_LIMIT=67108864".to_string(),
            "CPU_REQUEST=1".to_string(),
            "MEMORY_REQUEST=33554432".to_string()
        ]
    );
    c.resources = None;
    let p = pod(vec![c.clone()]);
    let ctx = PodContext { pod: &p, ..ctx };
    let env = container_env(&ctx, &c).unwrap();
    assert_eq!(env[0], ("CPU_LIMIT".to_string(), "4".to_string()));
    assert_eq!(env[1], ("MEMORY_LIMIT".to_string(), (8i64 << 30).to_string()));
    assert_eq!(env[2], ("CPU_REQUEST".to_string(), "0".to_string()));
}

/// The managed hosts file and resolv.conf are bind-mounted into the container, except
/// where the container mounts its own file.
#[test]
fn managed_files_are_mounted_unless_the_container_has_its_own() {
    use k8s_openapi::api::core::v1::VolumeMount;
    let files = ManagedFiles {
        etc_hosts: Some("/r/pods/u/etc-hosts".into()),
        resolv_conf: Some("/r/pods/u/resolv.conf".into()),
    };
    let mut c = Container {
        name: "app".into(),
        ..Default::default()
    };
    assert_eq!(
        files.binds(&c),
        [
            "/r/pods/u/etc-hosts:/etc/hosts",
            "/r/pods/u/resolv.conf:/etc/resolv.conf"
        ]
    );
    c.volume_mounts = Some(vec![VolumeMount {
        name: "hosts".into(),
        mount_path: "/etc/hosts".into(),
        ..Default::default()
    }]);
    assert_eq!(files.binds(&c), ["/r/pods/u/resolv.conf:/etc/resolv.conf"]);
    assert!(ManagedFiles::default().binds(&c).is_empty());
}

/// The downward API on a dual-stack pod: `status.podIP` is the first address, `status.podIPs`
/// all of them joined with commas (kubelet's `podFieldSelectorRuntimeValue`).
#[test]
fn env_pod_ips_on_a_dual_stack_pod() {
    let var = |name: &str, path: &str| EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let c = Container {
        name: "app".into(),
        env: Some(vec![var("IP", "status.podIP"), var("IPS", "status.podIPs")]),
        ..Default::default()
    };
    let p = pod(vec![c.clone()]);
    let sandbox = ContainerId("sb".into());
    let ips = ["10.244.1.5".to_string(), "fd00:10:244:1::5".to_string()];
    let ctx = PodContext {
        pod: &p,
        node_name: "n1",
        host_ip: "10.0.0.1",
        pod_ip: &ips[0],
        pod_ips: &ips,
        sandbox_id: &sandbox,
        node_memory_bytes: 0,
        env_objects: &EnvObjects::default(),
        allocatable: &Allocatable::default(),
        managed_files: &ManagedFiles::default(),
        cgroup_parent: None,
    };
    let env = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap().env;
    assert_eq!(env, vec!["IP=10.244.1.5", "IPS=10.244.1.5,fd00:10:244:1::5"]);
}
