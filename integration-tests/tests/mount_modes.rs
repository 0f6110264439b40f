//! A volumeMount's `recursiveReadOnly` and `mountPropagation`, in API-server mode through kubectl,
//! with the assertions of the upstream node test `test/e2e_node/mount_rro_linux_test.go` for a
//! runtime without recursively read-only mounts (Docker, as cri-dockerd reports it), and the
//! host-to-container case of `test/e2e/node/mount_propagation.go`. Its privileged parts (a
//! Bidirectional mount, the tmpfs the upstream test mounts from inside a pod) need privileged
//! containers, which this sandbox refuses: the host makes the mount here instead.

use std::path::{Path, PathBuf};
use std::process::Command;

use dockerlet_fake_apiserver::ApiServer;
use dockerlet_integration_tests::docker::docker;
use dockerlet_integration_tests::{wait_for, ManifestDir, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::Value;

mod common;

use common::api_agent as start;

fn apply(api: &ApiServer, yaml: &str, file: &str) -> std::process::Output {
    let path = api.dir().join(file);
    std::fs::write(&path, yaml).expect("write manifest");
    api.kubectl(&["apply", "-f", path.to_str().expect("utf-8 path")])
}

fn pod(api: &ApiServer, name: &str) -> Value {
    api.get("pods", "default", name).unwrap_or(Value::Null)
}

/// The API server refuses `recursiveReadOnly` on a writable mount, in its words.
#[test]
fn recursive_read_only_without_read_only_is_refused_by_the_api_server() {
    let api = ApiServer::start();
    let out = apply(
        &api,
        r#"apiVersion: v1
kind: Pod
metadata: {name: rro-invalid}
spec:
  nodeName: anywhere
  restartPolicy: Never
  volumes: [{name: mnt, emptyDir: {}}]
  containers:
  - name: busybox
    image: dockerlet.local/busybox:1
    command: ["echo", "this container should fail"]
    volumeMounts: [{name: mnt, mountPath: /mnt, recursiveReadOnly: Enabled}]
"#,
        "rro-invalid.yaml",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the pod was accepted");
    assert!(
        stderr.contains(
            "spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: may only be specified when readOnly is true"
        ),
        "{stderr}"
    );
}

/// Docker has no recursively read-only mounts (nor Strict supplemental groups): the Node says so, `recursiveReadOnly: Enabled`
/// fails its container with kubelet's `CreateContainerConfigError`, and `IfPossible` is a plain
/// read-only mount, reported `Disabled` in the container's `volumeMounts` status.
#[test]
fn recursive_read_only_on_a_runtime_without_it() {
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let agent = start("mount-rro", &api, &manifests);
    let node = agent.node();

    let handlers = wait_for("the Node's runtime handlers", CHANGE_TIMEOUT, || {
        api.get("nodes", "", node)
            .map(|n| n["status"]["runtimeHandlers"].clone())
            .filter(Value::is_array)
    });
    assert_eq!(handlers[0]["name"], "", "{handlers}");
    assert_eq!(handlers[0]["features"]["recursiveReadOnlyMounts"], false, "{handlers}");
    let features = api.get("nodes", "", node).map(|n| n["status"]["features"].clone());
    assert_eq!(
        features.as_ref().map(|f| &f["supplementalGroupsPolicy"]),
        Some(&Value::Bool(false)),
        "{features:?}"
    );

    let out = apply(
        &api,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: rro-unsupported}}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  restartPolicy: Never
  volumes: [{{name: mnt, emptyDir: {{}}}}]
  containers:
  - name: busybox
    image: dockerlet.local/busybox:1
    command: ["echo", "this container should fail"]
    volumeMounts: [{{name: mnt, mountPath: /mnt, readOnly: true, recursiveReadOnly: Enabled}}]
"#
        ),
        "rro-unsupported.yaml",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let waiting = wait_for("CreateContainerConfigError", POD_START_TIMEOUT, || {
        let p = pod(&api, "rro-unsupported");
        let waiting = p["status"]["containerStatuses"][0]["state"]["waiting"].clone();
        (waiting["reason"] == "CreateContainerConfigError").then_some(waiting)
    });
    let message = waiting["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(
            "failed to resolve recursive read-only mode: volume \"mnt\" requested recursive read-only mode, but it is not supported by the runtime"
        ),
        "{waiting}"
    );

    // The upstream test's "test" container, without its privileged tmpfs: every read-only mount
    // refuses a write, the writable one takes it.
    let out = apply(
        &api,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: rro-if-possible}}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  restartPolicy: Never
  volumes: [{{name: mnt, emptyDir: {{}}}}]
  containers:
  - name: test
    image: dockerlet.local/busybox:1
    command: ["sh", "-euxc", "for f in rro-if-possible rro-disabled ro; do touch /mnt-$f/foo 2>&1 | grep 'Read-only'; done; touch /mnt-rw/foo"]
    volumeMounts:
    - {{name: mnt, mountPath: /mnt-rro-if-possible, readOnly: true, recursiveReadOnly: IfPossible}}
    - {{name: mnt, mountPath: /mnt-rro-disabled, readOnly: true, recursiveReadOnly: Disabled}}
    - {{name: mnt, mountPath: /mnt-ro, readOnly: true}}
    - {{name: mnt, mountPath: /mnt-rw}}
"#
        ),
        "rro-if-possible.yaml",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let p = wait_for("the pod to succeed", POD_START_TIMEOUT, || {
        let p = pod(&api, "rro-if-possible");
        match p["status"]["phase"].as_str() {
            Some("Succeeded") => Some(p),
            Some("Failed") => panic!("the read-only mounts were not read-only: {}", p["status"]),
            _ => None,
        }
    });
    let mounts = p["status"]["containerStatuses"][0]["volumeMounts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let seen: Vec<(String, Value, Value)> = mounts
        .iter()
        .filter(|m| m["name"] == "mnt")
        .map(|m| {
            (
                m["mountPath"].as_str().unwrap_or_default().to_string(),
                m["readOnly"].clone(),
                m["recursiveReadOnly"].clone(),
            )
        })
        .collect();
    let disabled = Value::from("Disabled");
    assert_eq!(
        seen,
        [
            ("/mnt-rro-if-possible".into(), Value::Bool(true), disabled.clone()),
            ("/mnt-rro-disabled".into(), Value::Bool(true), disabled.clone()),
            ("/mnt-ro".into(), Value::Bool(true), disabled),
            ("/mnt-rw".into(), Value::Null, Value::Null),
        ],
        "{}",
        p["status"]
    );
}

/// A tmpfs on the host, made a shared mount, unmounted (with what is mounted under it) when
/// dropped.
struct SharedMount(PathBuf);

impl SharedMount {
    /// `None` when this machine does not let the test mount (said on stderr).
    fn new(dir: &Path) -> Option<Self> {
        let run = |args: &[&str]| {
            Command::new(args[0])
                .args(&args[1..])
                .status()
                .is_ok_and(|s| s.success())
        };
        let path = dir.to_str().expect("utf-8 path");
        if !run(&["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", path]) {
            return None;
        }
        let mount = SharedMount(dir.to_path_buf());
        run(&["mount", "--make-shared", path]).then_some(mount)
    }

    fn mount_under(&self, sub: &str) {
        let at = self.0.join(sub);
        std::fs::create_dir_all(&at).expect("mkdir");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(&at)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cannot mount a tmpfs on {}", at.display());
        std::fs::write(at.join("hello"), "from the host\n").expect("write");
    }
}

impl Drop for SharedMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-R").arg(&self.0).status();
    }
}

/// `mountPropagation: HostToContainer` (Docker's `rslave`): a mount the node makes under a
/// hostPath volume after the container started shows in the container; with no propagation it
/// does not. A Bidirectional mount in a container that is not privileged is refused by the API
/// server, as upstream's validation does.
#[test]
fn host_to_container_propagation_shows_the_nodes_later_mounts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(shared) = SharedMount::new(dir.path()) else {
        panic!(
            "this machine does not let the test mount a shared tmpfs at {}: mount propagation cannot be tested here",
            dir.path().display()
        );
    };
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let agent = start("mount-propagation", &api, &manifests);
    let node = agent.node();
    let host = dir.path().display();
    let watch =
        "for i in $(seq 120); do if [ -e /mnt/sub/hello ]; then echo seen; else echo unseen; fi; sleep 0.5; done";
    let out = apply(
        &api,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: propagation}}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  volumes: [{{name: host, hostPath: {{path: "{host}", type: Directory}}}}]
  containers:
  - name: slave
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "{watch}"]
    volumeMounts: [{{name: host, mountPath: /mnt, mountPropagation: HostToContainer}}]
  - name: private
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "{watch}"]
    volumeMounts: [{{name: host, mountPath: /mnt}}]
"#
        ),
        "propagation.yaml",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let uid = wait_for("both containers running", POD_START_TIMEOUT, || {
        let p = pod(&api, "propagation");
        let statuses = p["status"]["containerStatuses"].as_array()?.clone();
        (statuses.len() == 2 && statuses.iter().all(|s| s["state"]["running"].is_object()))
            .then(|| p["metadata"]["uid"].as_str().unwrap_or_default().to_string())
    });
    shared.mount_under("sub");
    let logs = |name: &str| {
        agent
            .pod_containers(&uid)
            .iter()
            .filter(|c| c.kube_name() == name)
            .map(|c| String::from_utf8_lossy(&docker(&["logs", &c.id]).stdout).into_owned())
            .collect::<String>()
    };
    wait_for(
        "the HostToContainer mount to show the node's new mount",
        CHANGE_TIMEOUT,
        || logs("slave").lines().any(|l| l == "seen").then_some(()),
    );
    let private = logs("private");
    assert!(
        !private.lines().any(|l| l == "seen"),
        "a mount without propagation saw the node's later mount: {private}"
    );

    let out = apply(
        &api,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: bidirectional}}
spec:
  nodeName: {node}
  volumes: [{{name: host, hostPath: {{path: "{host}"}}}}]
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    volumeMounts: [{{name: host, mountPath: /mnt, mountPropagation: Bidirectional}}]
"#
        ),
        "bidirectional.yaml",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the pod was accepted");
    assert!(
        stderr.contains("spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers"),
        "{stderr}"
    );
    drop(agent);
    drop(shared);
}
