//! Image pulls, ported from upstream `runtime.go` ("Container Runtime blackbox test … when
//! running a container with a new image": an invalid registry, a public image, a private
//! registry without and with an `imagePullSecret`) and e2e_node `runtime_conformance_test.go`
//! (the node's own credentials in `<root-dir>/config.json`), against Debian's `docker-registry`
//! on 127.0.0.1 with htpasswd auth instead of gcr.io. Every pull uses `imagePullPolicy:
//! Always`, so the image being on the node (it is: the pushed busybox) never stands in for a
//! refused pull.

mod common;

use dockerlet_integration_tests::docker::image_exists;
use dockerlet_integration_tests::registry::{Registry, PASSWORD, USER};
use dockerlet_integration_tests::{
    wait_until, Agent, ContainerStatusExt as _, ManifestDir, PodExt as _, CHANGE_TIMEOUT, POD_START_TIMEOUT,
};
use serde_json::Value;

/// upstream's imagePullTest pod: one container, pull policy Always, restartPolicy Never.
fn pull_pod(name: &str, node: &str, image: &str, secret: Option<&str>) -> String {
    let secrets = secret.map_or(String::new(), |s| format!("  imagePullSecrets: [{{name: {s}}}]\n"));
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  nodeName: {node}
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
{secrets}  containers:
  - name: image-pull-test
    image: {image}
    imagePullPolicy: Always
    command: ["sh", "-c", "while true; do sleep 1; done"]
---
"#
    )
}

/// The container's waiting state, once it is ErrImagePull or ImagePullBackOff with the pod
/// Pending (upstream's expectation for a pull that must fail).
fn wait_pull_refused(api: &dockerlet_fake_apiserver::ApiServer, name: &str) -> Value {
    wait_until(&format!("{name} waiting on its image"), CHANGE_TIMEOUT, || {
        let pod = api.get("pods", "default", name).ok_or("no pod")?;
        let waiting = &pod["status"]["containerStatuses"][0]["state"]["waiting"];
        let reason = waiting["reason"].as_str().unwrap_or_default();
        (matches!(reason, "ErrImagePull" | "ImagePullBackOff") && pod["status"]["phase"] == "Pending")
            .then(|| waiting.clone())
            .ok_or_else(|| pod["status"].to_string())
    })
}

#[test]
fn images_are_pulled_with_the_pods_pull_secrets_and_refused_without() {
    let private = Registry::start(true);
    let public = Registry::start(false);
    let private_image = private.push("private/busybox");
    let public_image = public.push("public/busybox");
    let (api, agent, _manifests) = common::proxied_node("image-pulls");
    let node = agent.node().to_string();
    let server = format!("--docker-server={}", private.addr());
    api.kubectl_ok(&[
        "create",
        "secret",
        "docker-registry",
        "regcred",
        &server,
        &format!("--docker-username={USER}"),
        &format!("--docker-password={PASSWORD}"),
    ]);
    api.kubectl_ok(&[
        "create",
        "secret",
        "docker-registry",
        "badcred",
        &server,
        &format!("--docker-username={USER}"),
        "--docker-password=wrong",
    ]);
    let yaml = [
        pull_pod(
            "invalid-registry",
            &node,
            "invalid.registry.k8s.io/invalid/alpine:3.1",
            None,
        ),
        pull_pod("public-image", &node, &public_image, None),
        pull_pod("private-without-secret", &node, &private_image, None),
        pull_pod("private-wrong-secret", &node, &private_image, Some("badcred")),
        pull_pod("private-with-secret", &node, &private_image, Some("regcred")),
    ]
    .concat();
    // container_lifecycle_test.go "an init container fails to start because of a bad image":
    // the init container waits in ImagePullBackOff, the pod stays Pending, nothing starts.
    let bad_init = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: bad-init-image}}
spec:
  nodeName: {node}
  restartPolicy: Never
  initContainers:
  - name: init1-1
    image: invalid.registry.k8s.io/invalid/alpine:3.1
    command: ["sh", "-c", "echo init"]
  containers:
  - name: regular1-1
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "sleep 3600"]
"#
    );
    common::kubectl_create(&api, "pulls.yaml", &(yaml + &bad_init));

    // "should not be able to pull image from invalid registry"
    wait_pull_refused(&api, "invalid-registry");
    let bad_init = wait_until("the init container in ImagePullBackOff", CHANGE_TIMEOUT, || {
        let pod = api.get("pods", "default", "bad-init-image").ok_or("no pod")?;
        let waiting = &pod["status"]["initContainerStatuses"][0]["state"]["waiting"];
        (waiting["reason"] == "ImagePullBackOff" && pod["status"]["phase"] == "Pending")
            .then(|| pod.clone())
            .ok_or_else(|| pod["status"].to_string())
    });
    let uid = bad_init["metadata"]["uid"].as_str().expect("uid");
    let started: Vec<String> = agent
        .pod_containers(uid)
        .iter()
        .filter(|c| !c.is_sandbox())
        .map(|c| c.kube_name().to_string())
        .collect();
    assert!(
        started.is_empty(),
        "neither init nor regular container was created: {started:?}"
    );
    // "should be able to pull image"
    common::wait_for_phase(&api, "public-image", "Running", POD_START_TIMEOUT);
    // "should be able to pull from private registry with secret"
    let running = common::wait_for_phase(&api, "private-with-secret", "Running", POD_START_TIMEOUT);
    assert_eq!(
        running["status"]["containerStatuses"][0]["image"], private_image,
        "{running}"
    );
    assert!(image_exists(&private_image), "the pull brought {private_image} back");
    // "should not be able to pull from private registry without secret": refused although the
    // image is now on the node; then in back-off, with the last error.
    let refused = wait_pull_refused(&api, "private-without-secret");
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no basic auth credentials"),
        "{refused}"
    );
    let backoff = wait_until("ImagePullBackOff", CHANGE_TIMEOUT, || {
        let pod = api.get("pods", "default", "private-without-secret").ok_or("no pod")?;
        let waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"].clone();
        (waiting["reason"] == "ImagePullBackOff")
            .then_some(waiting)
            .ok_or_else(|| pod["status"].to_string())
    });
    let message = backoff["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("Back-off pulling image \"{private_image}\": ErrImagePull: ")),
        "{message}"
    );
    let wrong = wait_pull_refused(&api, "private-wrong-secret");
    assert!(!wrong["message"].as_str().unwrap_or_default().is_empty(), "{wrong}");
    let events = api.list("events");
    let about = |pod: &str, reason: &str| {
        events
            .iter()
            .filter(|e| e["involvedObject"]["name"] == pod && e["reason"] == reason)
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
    };
    let failed = about("private-without-secret", "Failed");
    assert!(
        failed
            .iter()
            .any(|m| m.starts_with(&format!("Failed to pull image \"{private_image}\": "))),
        "{failed:?}"
    );
    assert!(failed.iter().any(|m| m == "Error: ErrImagePull"), "{failed:?}");
    let pulled = about("private-with-secret", "Pulled");
    // kubelet's text: `Successfully pulled image "x" in 1.2s (1.3s including waiting). Image
    // size: 1234 bytes.`, the size Docker's.
    assert!(
        pulled.iter().any(|m| {
            let Some(rest) = m.strip_prefix(&format!("Successfully pulled image \"{private_image}\" in ")) else {
                return false;
            };
            let size = rest
                .split_once(" including waiting). Image size: ")
                .and_then(|(_, size)| size.strip_suffix(" bytes."))
                .and_then(|size| size.parse::<u64>().ok());
            size.is_some_and(|s| s > 100_000)
        }),
        "{pulled:?}"
    );

    // The ServiceAccount's imagePullSecrets reach pods that name none (ServiceAccount
    // admission), and their pulls use them.
    api.kubectl_ok(&[
        "patch",
        "serviceaccount",
        "default",
        "-p",
        r#"{"imagePullSecrets":[{"name":"regcred"}]}"#,
    ]);
    common::kubectl_create(
        &api,
        "sa.yaml",
        &pull_pod("private-via-sa", &node, &private_image, None),
    );
    let via_sa = common::wait_for_phase(&api, "private-via-sa", "Running", POD_START_TIMEOUT);
    assert_eq!(via_sa["spec"]["imagePullSecrets"][0]["name"], "regcred", "{via_sa}");
}

/// e2e_node `runtime_conformance_test.go` "should be able to pull from private registry with
/// credential provider": the node's Docker config in its root dir serves a static pod's pull;
/// without it the pull is refused, and once it is written the next pull (after the back-off)
/// succeeds.
/// The agent's built-in sandbox image (`dockerlet_runtime::pause::IMAGE`), imported by the
/// first agent of the test.
const BUILT_IN_PAUSE_IMAGE: &str = "dockerlet.local/pause:3.10-dockerlet1";

#[test]
fn the_nodes_docker_config_in_its_root_dir_serves_pulls() {
    let private = Registry::start(true);
    let image = private.push("node/busybox");
    let manifests = ManifestDir::new();
    let agent = Agent::start("node-credentials", manifests.path(), &[]);
    manifests.write(
        "private.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: private}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {image}
    imagePullPolicy: Always
    command: ["sh", "-c", "while true; do sleep 1; done"]
"#
        ),
    );
    let refused = agent.wait_for_pod("private", "refused without credentials", CHANGE_TIMEOUT, |p| {
        matches!(
            p.container("app").and_then(|c| c.waiting_reason()),
            Some("ErrImagePull" | "ImagePullBackOff")
        )
    });
    assert_eq!(refused.phase(), "Pending");
    std::fs::write(agent.root_dir().join("config.json"), private.docker_config_json()).expect("write config.json");
    agent.wait_for_pod(
        "private",
        "Running with the node's credentials",
        POD_START_TIMEOUT,
        |p| p.phase() == "Running",
    );

    // A configured sandbox image the node lacks is pulled at start with the node's
    // credentials too (the registry refuses anonymous pulls: without them the agent could not
    // start). The built-in pause image, pushed as a private one, is not present under that name.
    let pause = private.push_image(BUILT_IN_PAUSE_IMAGE, "node/pause");
    let mut agent = agent;
    agent.restart_with(&["--pod-infra-container-image", &pause]);
    manifests.write(
        "second.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: second}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {image}
    command: ["sh", "-c", "while true; do sleep 1; done"]
"#
        ),
    );
    let second = agent.wait_for_pod("second", "Running", POD_START_TIMEOUT, |p| p.phase() == "Running");
    let sandbox_images: Vec<String> = agent
        .pod_containers(second.uid())
        .into_iter()
        .filter(|c| c.name.starts_with("/k8s_POD_"))
        .map(|c| c.config.image)
        .collect();
    assert_eq!(
        sandbox_images,
        [pause],
        "the second pod's sandbox is the private pause image"
    );
}
