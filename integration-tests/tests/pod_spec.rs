//! How a pod spec maps onto Docker: command/args/env/workingDir, fieldRefs, resources, hostPort,
//! hostNetwork, and a missing image.

use dockerlet_integration_tests::harness::free_port;
use dockerlet_integration_tests::{Agent, ContainerStatusExt, ManifestDir, PodExt, CHANGE_TIMEOUT};

/// Command and args with `$(VAR)` expansion, env values and fieldRefs, workingDir, limits and
/// requests, and a hostPort published on the node all reach Docker as kubelet maps them.
#[test]
fn the_pod_spec_maps_onto_docker_as_kubelet_maps_it() {
    let host_port = free_port();
    let manifests = ManifestDir::new();
    manifests.write(
        "spec.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: spec
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: web
    image: dockerlet.local/busybox:1
    workingDir: /var/www
    command: ["sh", "-c"]
    args: ["echo $(GREETING) from $(POD_NAME) > index.html && exec httpd -f -p 8080 -h ."]
    env:
    - name: GREETING
      value: hi
    - name: POD_NAME
      valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
    - name: POD_NAMESPACE
      valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}
    - name: POD_UID
      valueFrom: {{fieldRef: {{fieldPath: metadata.uid}}}}
    - name: NODE_NAME
      valueFrom: {{fieldRef: {{fieldPath: spec.nodeName}}}}
    - name: POD_IP
      valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}
    - name: HOST_IP
      valueFrom: {{fieldRef: {{fieldPath: status.hostIP}}}}
    ports:
    - containerPort: 8080
      hostPort: {host_port}
    resources:
      limits: {{memory: 64Mi, cpu: 250m}}
      requests: {{cpu: 100m}}
"#
        ),
    );
    let agent = Agent::start("pod-spec", manifests.path(), &[]);
    let pod = agent.wait_for_running("spec");
    let pod_name = agent.pod_name("spec");
    let containers = agent.pod_containers(pod.uid());
    let web = containers
        .iter()
        .find(|c| c.kube_name() == "web")
        .expect("web container");
    let sandbox = containers.iter().find(|c| c.is_sandbox()).expect("sandbox");

    assert_eq!(web.env("GREETING"), Some("hi"));
    assert_eq!(web.env("POD_NAME"), Some(pod_name.as_str()));
    assert_eq!(web.env("POD_NAMESPACE"), Some("default"));
    assert_eq!(web.env("POD_UID"), Some(pod.uid()));
    assert_eq!(web.env("NODE_NAME"), Some(agent.node()));
    assert_eq!(web.env("POD_IP"), pod.pod_ip());
    assert_eq!(web.env("HOST_IP"), pod.host_ip());

    assert_eq!(web.host_config.memory, 64 * 1024 * 1024, "limits.memory");
    assert_eq!(web.host_config.cpu_quota, 25_000, "limits.cpu 250m → 25 ms per 100 ms");
    assert_eq!(web.host_config.cpu_period, 100_000);
    assert_eq!(web.host_config.cpu_shares, 102, "requests.cpu 100m → 102 shares");

    let bindings = sandbox.host_config.port_bindings.clone().unwrap_or_default();
    let published = bindings.get("8080/tcp").cloned().flatten().unwrap_or_default();
    assert!(
        published.iter().any(|b| b.host_port == host_port.to_string()),
        "hostPort published on the sandbox: {bindings:?}"
    );
    // The page was written in workingDir with the expanded args, and is served on the hostPort.
    let url = format!("http://127.0.0.1:{host_port}/");
    let body = dockerlet_integration_tests::wait_for("page on the hostPort", CHANGE_TIMEOUT, || {
        agent
            .get(&url)
            .ok()
            .filter(|(code, _)| *code == 200)
            .map(|(_, body)| body)
    });
    assert_eq!(body.trim(), format!("hi from {pod_name}"));
}

/// A pod whose image is missing with pullPolicy Never waits with ErrImageNeverPull and never
/// gets its container; one whose image reference does not parse waits with InvalidImageName in
/// kubelet's words; a host-network pod beside them runs with the node's IP.
#[test]
fn a_missing_image_waits_with_a_reason_and_host_network_pods_use_the_node_ip() {
    let manifests = ManifestDir::new();
    manifests.write(
        "missing.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: missing
spec:
  containers:
  - name: app
    image: dockerlet.local/does-not-exist:1
    imagePullPolicy: Never
"#,
    );
    manifests.write(
        "badname.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: badname
spec:
  containers:
  - name: app
    image: dockerlet.local/BadName:1
"#,
    );
    manifests.write(
        "hostnet.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: hostnet
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
"#,
    );
    let agent = Agent::start("missing-image", manifests.path(), &[]);

    let pod = agent.wait_for_pod("missing", "waiting with ErrImageNeverPull", CHANGE_TIMEOUT, |p| {
        p.container("app").and_then(|c| c.waiting_reason()) == Some("ErrImageNeverPull")
    });
    assert_eq!(pod.phase(), "Pending");
    let message = pod
        .container("app")
        .and_then(|c| c.state.as_ref()?.waiting.as_ref()?.message.clone());
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("dockerlet.local/does-not-exist:1")),
        "the message names the image: {message:?}"
    );
    assert!(
        !agent.pod_containers(pod.uid()).iter().any(|c| c.kube_name() == "app"),
        "no container is created for a missing image"
    );
    // kubelet's image manager records an event of that reason too.
    let object = format!("default/{}", agent.pod_name("missing"));
    let never_pull = agent
        .events()
        .into_iter()
        .find(|e| e["reason"] == "ErrImageNeverPull" && e["object"] == object.as_str());
    assert!(
        never_pull
            .as_ref()
            .and_then(|e| e["message"].as_str())
            .is_some_and(|m| m
                == "Container image \"dockerlet.local/does-not-exist:1\" is not present with pull policy of Never"),
        "{never_pull:?}"
    );

    let bad = agent.wait_for_pod("badname", "waiting with InvalidImageName", CHANGE_TIMEOUT, |p| {
        p.container("app").and_then(|c| c.waiting_reason()) == Some("InvalidImageName")
    });
    let message = bad
        .container("app")
        .and_then(|c| c.waiting_message())
        .unwrap_or_default();
    assert_eq!(
        message,
        "Failed to apply default image tag \"dockerlet.local/BadName:1\": couldn't parse image name \
         \"dockerlet.local/BadName:1\": invalid reference format: repository name (BadName) must be lowercase"
    );

    let hostnet = agent.wait_for_running("hostnet");
    assert_eq!(
        hostnet.pod_ip(),
        hostnet.host_ip(),
        "a host-network pod has the node's IP"
    );
    let containers = agent.pod_containers(hostnet.uid());
    let sandbox = containers.iter().find(|c| c.is_sandbox()).expect("sandbox");
    assert_eq!(sandbox.host_config.network_mode, "host");
}

/// Containers of a pod share an emptyDir kept under `--root-dir`; a hostPath mounted read-only
/// shows the node's file and refuses writes; deleting the pod deletes its emptyDir.
#[test]
fn empty_dir_and_host_path_volumes_are_mounted_and_cleaned_up() {
    let host = tempfile::tempdir().expect("host dir");
    std::fs::write(host.path().join("greeting"), "from the node\n").expect("host file");
    let manifests = ManifestDir::new();
    manifests.write(
        "vols.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: vols
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: shared
    emptyDir: {{}}
  - name: node
    hostPath: {{path: {host}, type: Directory}}
  containers:
  - name: writer
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo written > /shared/note; trap 'exit 0' TERM; sleep 3600 & wait"]
    volumeMounts:
    - {{name: shared, mountPath: /shared}}
  - name: reader
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    volumeMounts:
    - {{name: shared, mountPath: /in}}
    - {{name: node, mountPath: /node, readOnly: true}}
"#,
            host = host.path().display()
        ),
    );
    let agent = Agent::start("volumes", manifests.path(), &[]);
    let pod = agent.wait_for_running("vols");
    let uid = pod.uid().to_string();
    let containers = agent.pod_containers(&uid);
    let reader = containers
        .iter()
        .find(|c| c.kube_name() == "reader")
        .expect("reader")
        .id
        .clone();

    let read = |path: &str| {
        let out = dockerlet_integration_tests::docker::exec(&reader, &["cat", path]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let note = dockerlet_integration_tests::wait_for("the writer's note", CHANGE_TIMEOUT, || {
        Some(read("/in/note")).filter(|s| !s.is_empty())
    });
    assert_eq!(note, "written", "the emptyDir is shared by both containers");
    assert_eq!(
        read("/node/greeting"),
        "from the node",
        "the hostPath shows the node's file"
    );
    let write = dockerlet_integration_tests::docker::exec(&reader, &["sh", "-c", "echo x > /node/new"]);
    assert!(!write.status.success(), "a readOnly mount refuses writes");
    assert!(!host.path().join("new").exists());

    let pod_dir = agent.root_dir().join("pods").join(&uid);
    let empty_dir = pod_dir.join("volumes/kubernetes.io~empty-dir/shared/note");
    assert!(
        empty_dir.is_file(),
        "the emptyDir lives under --root-dir: {}",
        empty_dir.display()
    );
    std::fs::remove_file(manifests.path().join("vols.yaml")).expect("remove manifest");
    dockerlet_integration_tests::wait_for("pod directory removed", CHANGE_TIMEOUT, || {
        (!pod_dir.exists() && agent.pod_containers(&uid).is_empty()).then_some(())
    });
}

/// A hostPath whose `type` does not match (upstream `host_path_type.go`) keeps the pod
/// ContainerCreating with kubelet's FailedMount event and creates no container; once the path
/// is what the volume says, the pod runs.
#[test]
fn a_host_path_of_the_wrong_type_fails_the_mount_until_it_is_right() {
    let host = tempfile::tempdir().expect("host dir");
    let wanted = host.path().join("later");
    let manifests = ManifestDir::new();
    manifests.write(
        "typed.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: typed
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: hp
    hostPath: {{path: {wanted}, type: Directory}}
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    volumeMounts:
    - {{name: hp, mountPath: /hp}}
"#,
            wanted = wanted.display()
        ),
    );
    let agent = Agent::start("host-path-type", manifests.path(), &[]);
    let message = format!(
        "MountVolume.SetUp failed for volume \"hp\" : hostPath type check failed: {} is not a directory",
        wanted.display()
    );
    let object = agent.pod_object("typed");
    dockerlet_integration_tests::wait_for("the FailedMount event", CHANGE_TIMEOUT, || {
        agent
            .events()
            .iter()
            .any(|e| e["reason"] == "FailedMount" && e["message"] == message.as_str() && e["object"] == object.as_str())
            .then_some(())
    });
    let pod = agent.pod("typed").expect("pod");
    assert_eq!(pod.phase(), "Pending", "{}", pod.summary());
    assert_eq!(
        pod.container("app").and_then(|c| c.waiting_reason()),
        Some("ContainerCreating"),
        "{}",
        pod.summary()
    );
    assert!(
        agent.pod_containers(pod.uid()).iter().all(|c| c.kube_name() == "POD"),
        "no app container is created"
    );
    std::fs::create_dir(&wanted).expect("make the directory");
    agent.wait_for_pod("typed", "Running once the path is a directory", CHANGE_TIMEOUT, |p| {
        p.phase() == "Running"
    });
}
