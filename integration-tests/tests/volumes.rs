//! configMap, secret, downwardAPI and projected volumes in API-server mode, against the in-memory
//! API server (with its ServiceAccount admission and TokenRequest) and kubectl, with the
//! assertions of the upstream conformance tests (`test/e2e/common/storage/*_volume.go`,
//! `projected_*.go`) ported to busybox: each container prints what the upstream `mounttest`
//! prints (`content of file "<path>": <content>`, `mode of file "<path>": <mode>`).

use std::time::Duration;

use dockerlet_fake_apiserver::ApiServer;
use dockerlet_integration_tests::docker::docker;
use dockerlet_integration_tests::{wait_for, Agent, ManifestDir, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::Value;

mod common;

use common::api_agent as start;

/// Long enough for a ConfigMap change to reach a mounted volume (the agent resyncs each pod
/// every `--sync-frequency`, 1 m by default as in kubelet; the upstream tests allow minutes).
const UPDATE_TIMEOUT: Duration = Duration::from_secs(150);

fn kubectl_apply(api: &ApiServer, yaml: &str, file: &str) {
    let path = api.dir().join(file);
    std::fs::write(&path, yaml).expect("write manifest");
    api.kubectl_ok(&["apply", "-f", path.to_str().expect("utf-8 path")]);
}

/// The output of a pod's container so far (stdout and stderr), read from Docker.
fn output(agent: &Agent, uid: &str, container: &str) -> String {
    let mut text = String::new();
    for c in agent.pod_containers(uid).iter().filter(|c| c.kube_name() == container) {
        let out = docker(&["logs", &c.id]);
        text.push_str(&String::from_utf8_lossy(&out.stdout));
        text.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    text
}

/// Wait until the pod exists in the API with a UID, and return it.
fn uid_of(api: &ApiServer, name: &str) -> String {
    let pod = wait_for("the pod in the API", CHANGE_TIMEOUT, || {
        api.get("pods", "default", name)
    });
    pod["metadata"]["uid"].as_str().expect("uid").to_string()
}

/// Wait for `container`'s output to contain every one of `expected`.
fn wait_output(agent: &Agent, uid: &str, container: &str, expected: &[&str], timeout: Duration) -> String {
    wait_for(&format!("{container} to print {expected:?}"), timeout, || {
        let out = output(agent, uid, container);
        expected.iter().all(|e| out.contains(e)).then_some(out)
    })
}

/// Shell that prints a file as mounttest's `--file_content` and `--file_mode` do.
fn show(paths: &[&str]) -> String {
    paths
        .iter()
        .map(|p| {
            format!(r#"echo "content of file \"{p}\": $(cat {p})"; echo "mode of file \"{p}\": $(stat -L -c %A {p})";"#)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn phase(api: &ApiServer, name: &str) -> Option<String> {
    api.get("pods", "default", name)
        .and_then(|p| p["status"]["phase"].as_str().map(str::to_string))
}

/// A pod exactly as a real API server admits it (ServiceAccount admission adds the
/// `kube-api-access-*` projected volume) runs and reads its token, the cluster CA and its
/// namespace at `/var/run/secrets/kubernetes.io/serviceaccount`, written atomically
/// (`..data` → a timestamped directory); the token is the API server's, bound to the pod.
#[test]
fn a_pod_as_admitted_reads_its_service_account_token_ca_and_namespace() {
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let agent = start("vol-sa", &api, &manifests);
    let dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    kubectl_apply(
        &api,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: sa-reader}}
spec:
  nodeName: {node}
  restartPolicy: Never
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo ns=$(cat {dir}/namespace); echo token=$(cat {dir}/token); cat {dir}/ca.crt; ls -a {dir}; readlink {dir}/..data; stat -L -c %a {dir}/token"]
"#,
            node = agent.node()
        ),
        "sa-reader.yaml",
    );
    let pod = wait_for("the pod Succeeded", POD_START_TIMEOUT, || {
        api.get("pods", "default", "sa-reader")
            .filter(|p| p["status"]["phase"] == "Succeeded")
    });
    let volume = &pod["spec"]["volumes"][0];
    assert!(
        volume["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("kube-api-access-")),
        "admitted pod has the kube-api-access volume: {volume}"
    );
    let uid = pod["metadata"]["uid"].as_str().expect("uid");
    let out = output(&agent, uid, "app");
    assert!(out.contains("ns=default"), "{out}");
    let token = out
        .lines()
        .find_map(|l| l.strip_prefix("token="))
        .expect("token line")
        .to_string();
    let claims = api
        .verify_service_account_token(&token)
        .unwrap_or_else(|e| panic!("the mounted token verifies: {e:?}"));
    let claims = serde_json::to_value(claims).expect("claims as JSON");
    assert_eq!(claims["sub"], "system:serviceaccount:default:default", "{claims}");
    assert_eq!(claims["kubernetes.io"]["pod"]["uid"], uid, "bound to the pod: {claims}");
    let root_ca = api
        .get("configmaps", "default", "kube-root-ca.crt")
        .expect("kube-root-ca.crt");
    let ca = root_ca["data"]["ca.crt"].as_str().expect("ca.crt");
    assert!(out.contains(ca.trim()), "ca.crt is the cluster CA:\n{out}");
    assert!(
        out.contains("..data") && out.contains("token") && out.contains("ca.crt"),
        "{out}"
    );
    assert!(out.contains("..20"), "..data points at a timestamped directory: {out}");
    assert!(out.lines().any(|l| l == "644"), "defaultMode 420 = 0644: {out}");
}

/// ConfigMap volumes as `configmap_volume.go` checks them: content and mode of a plain mount,
/// defaultMode 0400, items with a path and a per-item mode, binaryData, the same ConfigMap in
/// two volumes; and an update of the ConfigMap reaches the mounted file.
#[test]
fn configmap_volumes_have_content_modes_mappings_and_follow_updates() {
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let agent = start("vol-cm", &api, &manifests);
    kubectl_apply(
        &api,
        r#"apiVersion: v1
kind: ConfigMap
metadata: {name: cm-test}
data: {data-1: value-1, data-2: value-2, data-3: value-3}
binaryData: {dump.bin: 3sr+utD+/w==}
"#,
        "cm.yaml",
    );
    let shown = show(&[
        "/etc/configmap-volume/data-1",
        "/etc/configmap-volume-0400/data-1",
        "/etc/configmap-volume-map/path/to/data-2",
        "/etc/configmap-volume-2/data-3",
    ]);
    kubectl_apply(
        &api,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: cm-pod}}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  volumes:
  - {{name: plain, configMap: {{name: cm-test}}}}
  - {{name: mode, configMap: {{name: cm-test, defaultMode: 0400}}}}
  - name: map
    configMap:
      name: cm-test
      items: [{{key: data-2, path: path/to/data-2, mode: 0400}}]
  - {{name: again, configMap: {{name: cm-test}}}}
  containers:
  - name: show
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", {shown:?}]
    volumeMounts:
    - {{name: plain, mountPath: /etc/configmap-volume, readOnly: true}}
    - {{name: mode, mountPath: /etc/configmap-volume-0400}}
    - {{name: map, mountPath: /etc/configmap-volume-map}}
    - {{name: again, mountPath: /etc/configmap-volume-2}}
  - name: binary
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "hexdump -C /etc/configmap-volume/dump.bin; sleep 3600"]
    volumeMounts: [{{name: plain, mountPath: /etc/configmap-volume}}]
  - name: loop
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "while true; do echo \"content of file \\\"/etc/configmap-volume/data-1\\\": $(cat /etc/configmap-volume/data-1)\"; sleep 1; done"]
    volumeMounts: [{{name: plain, mountPath: /etc/configmap-volume}}]
"#,
            node = agent.node()
        ),
        "cm-pod.yaml",
    );
    let uid = uid_of(&api, "cm-pod");
    wait_output(
        &agent,
        &uid,
        "show",
        &[
            r#"content of file "/etc/configmap-volume/data-1": value-1"#,
            r#"mode of file "/etc/configmap-volume/data-1": -rw-r--r--"#,
            r#"mode of file "/etc/configmap-volume-0400/data-1": -r--------"#,
            r#"content of file "/etc/configmap-volume-map/path/to/data-2": value-2"#,
            r#"mode of file "/etc/configmap-volume-map/path/to/data-2": -r--------"#,
            r#"content of file "/etc/configmap-volume-2/data-3": value-3"#,
        ],
        POD_START_TIMEOUT,
    );
    wait_output(&agent, &uid, "binary", &["de ca fe ba d0 fe ff"], POD_START_TIMEOUT);
    wait_output(
        &agent,
        &uid,
        "loop",
        &[r#"content of file "/etc/configmap-volume/data-1": value-1"#],
        POD_START_TIMEOUT,
    );

    api.kubectl_ok(&[
        "patch",
        "configmap",
        "cm-test",
        "--type=merge",
        "-p",
        r#"{"data":{"data-1":"value-2"}}"#,
    ]);
    wait_output(
        &agent,
        &uid,
        "loop",
        &[r#"content of file "/etc/configmap-volume/data-1": value-2"#],
        UPDATE_TIMEOUT,
    );
}

/// Secret volumes as `secrets_volume.go` checks them: content and the default mode, defaultMode
/// 0400, items with a new path; a Secret of the same name in another namespace is not read.
#[test]
fn secret_volumes_have_content_modes_and_mappings() {
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let agent = start("vol-secret", &api, &manifests);
    api.kubectl_ok(&["create", "namespace", "other"]);
    kubectl_apply(
        &api,
        r#"apiVersion: v1
kind: Secret
metadata: {name: secret-test}
data: {data-1: dmFsdWUtMQo=, data-2: dmFsdWUtMgo=, data-3: dmFsdWUtMwo=}
---
apiVersion: v1
kind: Secret
metadata: {name: secret-test, namespace: other}
data: {data-1: d3Jvbmc=}
"#,
        "secret.yaml",
    );
    let shown = show(&[
        "/etc/secret-volume/data-1",
        "/etc/secret-volume-0400/data-2",
        "/etc/secret-volume-map/new-path-data-1",
    ]);
    kubectl_apply(
        &api,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: secret-pod}}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  restartPolicy: Never
  volumes:
  - {{name: plain, secret: {{secretName: secret-test}}}}
  - {{name: mode, secret: {{secretName: secret-test, defaultMode: 0400}}}}
  - name: map
    secret:
      secretName: secret-test
      items: [{{key: data-1, path: new-path-data-1}}]
  containers:
  - name: show
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", {shown:?}]
    volumeMounts:
    - {{name: plain, mountPath: /etc/secret-volume, readOnly: true}}
    - {{name: mode, mountPath: /etc/secret-volume-0400, readOnly: true}}
    - {{name: map, mountPath: /etc/secret-volume-map, readOnly: true}}
"#,
            node = agent.node()
        ),
        "secret-pod.yaml",
    );
    wait_for("the pod Succeeded", POD_START_TIMEOUT, || {
        (phase(&api, "secret-pod").as_deref() == Some("Succeeded")).then_some(())
    });
    let uid = uid_of(&api, "secret-pod");
    let out = output(&agent, &uid, "show");
    for expected in [
        r#"content of file "/etc/secret-volume/data-1": value-1"#,
        r#"mode of file "/etc/secret-volume/data-1": -rw-r--r--"#,
        r#"content of file "/etc/secret-volume-0400/data-2": value-2"#,
        r#"mode of file "/etc/secret-volume-0400/data-2": -r--------"#,
        r#"content of file "/etc/secret-volume-map/new-path-data-1": value-1"#,
    ] {
        assert!(out.contains(expected), "{expected:?} in:\n{out}");
    }
    assert!(
        !out.contains("wrong"),
        "the other namespace's Secret is not read:\n{out}"
    );
}

/// downwardAPI volumes as `downwardapi_volume.go` checks them: the pod name, the container's
/// cpu and memory limits and requests (1250m → "2", 64Mi → "67108864", 250m → "1"), labels and
/// annotations as `key="value"` lines; a label change reaches the file.
#[test]
fn downward_api_volumes_show_the_pod_and_follow_label_changes() {
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let agent = start("vol-downward", &api, &manifests);
    kubectl_apply(
        &api,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: downward-pod
  labels: {{key1: value1, key2: value2}}
  annotations: {{builder: bar}}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  volumes:
  - name: podinfo
    downwardAPI:
      items:
      - {{path: podname, fieldRef: {{fieldPath: metadata.name}}}}
      - {{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}
      - {{path: annotations, fieldRef: {{fieldPath: metadata.annotations}}}}
      - {{path: cpu_limit, resourceFieldRef: {{containerName: client-container, resource: limits.cpu}}}}
      - {{path: cpu_request, resourceFieldRef: {{containerName: client-container, resource: requests.cpu}}}}
      - {{path: memory_limit, resourceFieldRef: {{containerName: client-container, resource: limits.memory}}}}
      - {{path: memory_request, resourceFieldRef: {{containerName: client-container, resource: requests.memory}}}}
  containers:
  - name: client-container
    image: dockerlet.local/busybox:1
    resources:
      requests: {{cpu: 250m, memory: 32Mi}}
      limits: {{cpu: 1250m, memory: 64Mi}}
    command: ["sh", "-c", "for f in podname cpu_limit cpu_request memory_limit memory_request; do echo \"$f=$(cat /etc/podinfo/$f)\"; done; while true; do cat /etc/podinfo/labels; echo; sleep 1; done"]
    volumeMounts: [{{name: podinfo, mountPath: /etc/podinfo}}]
"#,
            node = agent.node()
        ),
        "downward-pod.yaml",
    );
    let uid = uid_of(&api, "downward-pod");
    wait_output(
        &agent,
        &uid,
        "client-container",
        &[
            "podname=downward-pod",
            "cpu_limit=2",
            "cpu_request=1",
            "memory_limit=67108864",
            "memory_request=33554432",
            "key1=\"value1\"",
            "key2=\"value2\"",
        ],
        POD_START_TIMEOUT,
    );
    api.kubectl_ok(&["label", "pod", "downward-pod", "key3=value3"]);
    wait_output(&agent, &uid, "client-container", &["key3=\"value3\""], UPDATE_TIMEOUT);
}

/// One projected volume with a downwardAPI, a Secret and a ConfigMap source
/// (`projected_combined.go`).
#[test]
fn a_projected_volume_combines_its_sources() {
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let agent = start("vol-projected", &api, &manifests);
    kubectl_apply(
        &api,
        &format!(
            r#"apiVersion: v1
kind: ConfigMap
metadata: {{name: projected-cm}}
data: {{configmap-data: configmap-value-1}}
---
apiVersion: v1
kind: Secret
metadata: {{name: projected-secret}}
stringData: {{secret-data: secret-value-1}}
---
apiVersion: v1
kind: Pod
metadata: {{name: projected-pod}}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  restartPolicy: Never
  volumes:
  - name: all
    projected:
      sources:
      - downwardAPI: {{items: [{{path: podname, fieldRef: {{fieldPath: metadata.name}}}}]}}
      - secret: {{name: projected-secret, items: [{{key: secret-data, path: secret-data}}]}}
      - configMap: {{name: projected-cm, items: [{{key: configmap-data, path: configmap-data}}]}}
  containers:
  - name: projected-all-volume-test
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "cat /all/podname && cat /all/secret-data && cat /all/configmap-data"]
    volumeMounts: [{{name: all, mountPath: /all}}]
"#,
            node = agent.node()
        ),
        "projected.yaml",
    );
    wait_for("the pod Succeeded", POD_START_TIMEOUT, || {
        (phase(&api, "projected-pod").as_deref() == Some("Succeeded")).then_some(())
    });
    let uid = uid_of(&api, "projected-pod");
    let out = output(&agent, &uid, "projected-all-volume-test");
    for expected in ["projected-pod", "secret-value-1", "configmap-value-1"] {
        assert!(out.contains(expected), "{expected:?} in:\n{out}");
    }
}

/// A pod whose non-optional ConfigMap does not exist does not start: it stays Pending with a
/// FailedMount event naming the ConfigMap; a missing optional one leaves an empty volume. Once
/// the ConfigMap is created, the pod starts. The event is repeated on kubelet's back-off, and
/// written again when it was deleted meanwhile.
#[test]
fn a_missing_configmap_holds_the_pod_until_it_exists() {
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let agent = start("vol-missing", &api, &manifests);
    kubectl_apply(
        &api,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: waits}}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  volumes:
  - {{name: needed, configMap: {{name: not-yet}}}}
  - {{name: maybe, configMap: {{name: never, optional: true}}}}
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo needed=$(cat /etc/needed/data-1); echo maybe=$(ls /etc/maybe | wc -l); sleep 3600"]
    volumeMounts:
    - {{name: needed, mountPath: /etc/needed}}
    - {{name: maybe, mountPath: /etc/maybe}}
"#,
            node = agent.node()
        ),
        "waits.yaml",
    );
    let uid = uid_of(&api, "waits");
    let event = wait_for("a FailedMount event", POD_START_TIMEOUT, || {
        api.list("events")
            .into_iter()
            .find(|e: &Value| e["reason"] == "FailedMount" && e["involvedObject"]["name"] == "waits")
    });
    let message = event["message"].as_str().unwrap_or_default();
    assert_eq!(
        message, r#"MountVolume.SetUp failed for volume "needed" : configmap "not-yet" not found"#,
        "{event}"
    );
    assert_eq!(event["type"], "Warning");
    assert!(
        agent.pod_containers(&uid).is_empty(),
        "nothing started while a volume is missing"
    );
    assert_eq!(phase(&api, "waits").as_deref(), Some("Pending"));

    // The agent tries the volume every 2 s but repeats the event on kubelet's back-off (0.5 s,
    // doubling): 6 events in the first 20 s (0, 2, 4, 6, 10, 18 s), where one per try gave 10.
    std::thread::sleep(Duration::from_secs(20));
    let count = api
        .list("events")
        .into_iter()
        .find(|e: &Value| e["reason"] == "FailedMount" && e["involvedObject"]["name"] == "waits")
        .and_then(|e| e["count"].as_i64());
    assert!(
        count.is_some_and(|c| (3..=6).contains(&c)),
        "FailedMount repeated on kubelet's back-off, seen {count:?} times in 20 s"
    );

    // An Event that is gone (expired, deleted) while its repeats are counted is written again
    // with the count so far, as client-go's recorder does when its patch finds none.
    let name = event["metadata"]["name"].as_str().unwrap_or_default().to_string();
    api.kubectl_ok(&["delete", "event", &name]);
    let again = wait_for("the FailedMount event written again", CHANGE_TIMEOUT, || {
        api.get("events", "default", &name)
    });
    assert!(
        again["count"].as_i64().is_some_and(|c| c > count.unwrap_or_default()),
        "{again}"
    );

    kubectl_apply(
        &api,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: not-yet}\ndata: {data-1: here}\n",
        "not-yet.yaml",
    );
    wait_output(&agent, &uid, "app", &["needed=here", "maybe=0"], CHANGE_TIMEOUT);
}
