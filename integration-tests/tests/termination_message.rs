//! Termination messages, ported from upstream `test/e2e/common/node/runtime.go` ("Container
//! Runtime blackbox test … on terminated container"): each container instance gets a file of
//! its own at `terminationMessagePath`, writable by whatever user it runs as, and
//! `state.terminated.message` is what it wrote there; with `FallbackToLogsOnError` a failed
//! container's log tail stands in for an empty file. As upstream, each pod is read once its
//! phase is final: the message must be there in the first status that shows the phase.

use dockerlet_fake_apiserver::ApiServer;
use dockerlet_integration_tests::{wait_for, Agent, ManifestDir, PodExt, POD_START_TIMEOUT};
use serde_json::Value;

/// One upstream case: the pod's name, its container's security context and termination
/// settings, its shell script, the final phase and the expected message.
struct Case {
    name: &'static str,
    settings: &'static str,
    script: &'static str,
    phase: &'static str,
    message: &'static str,
}

const CASES: &[Case] = &[
    // "should report termination message if TerminationMessagePath is set"
    Case {
        name: "termination-message-path",
        settings: "securityContext: {runAsUser: 0}\n    terminationMessagePath: /dev/termination-log",
        script: "/bin/echo -n DONE > /dev/termination-log",
        phase: "Succeeded",
        message: "DONE",
    },
    // "… as non-root user and at a non-default path" (Conformance)
    Case {
        name: "termination-message-non-root",
        settings: "securityContext: {runAsUser: 10000}\n    terminationMessagePath: /dev/termination-custom-log",
        script: "/bin/echo -n DONE > /dev/termination-custom-log",
        phase: "Succeeded",
        message: "DONE",
    },
    // "… from log output if TerminationMessagePolicy FallbackToLogsOnError is set" (Conformance)
    Case {
        name: "termination-message-from-log",
        settings: "terminationMessagePolicy: FallbackToLogsOnError",
        script: "/bin/echo -n DONE; /bin/false",
        phase: "Failed",
        message: "DONE",
    },
    // "… as empty when pod succeeds and TerminationMessagePolicy FallbackToLogsOnError is set"
    Case {
        name: "termination-message-empty",
        settings: "terminationMessagePolicy: FallbackToLogsOnError",
        script: "/bin/echo -n DONE; /bin/true",
        phase: "Succeeded",
        message: "",
    },
    // "… from file when pod succeeds and TerminationMessagePolicy FallbackToLogsOnError is set"
    Case {
        name: "termination-message-file-wins",
        settings: "terminationMessagePolicy: FallbackToLogsOnError",
        script: "/bin/echo -n OK > /dev/termination-log; /bin/echo DONE; /bin/true",
        phase: "Succeeded",
        message: "OK",
    },
];

#[test]
fn terminated_containers_report_their_termination_message() {
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let kubeconfig = api.kubeconfig_path().display().to_string();
    let agent = Agent::start("termination-message", manifests.path(), &["--kubeconfig", &kubeconfig]);
    for case in CASES {
        let path = api.dir().join(format!("{}.yaml", case.name));
        let yaml = format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  nodeName: {node}
  restartPolicy: Never
  containers:
  - name: termination-message-container
    image: dockerlet.local/busybox:1
    command: ["/bin/sh", "-c"]
    args: ["{script}"]
    {settings}
"#,
            name = case.name,
            node = agent.node(),
            script = case.script,
            settings = case.settings,
        );
        std::fs::write(&path, yaml).expect("write pod");
        api.kubectl_ok(&["create", "-f", path.to_str().expect("utf-8")]);
    }
    for case in CASES {
        // As upstream: poll the phase, then read the status once.
        let pod: Value = wait_for(&format!("{} {}", case.name, case.phase), POD_START_TIMEOUT, || {
            api.get("pods", "default", case.name)
                .filter(|p| p["status"]["phase"] == case.phase || p["status"]["phase"] == "Failed")
        });
        assert_eq!(pod["status"]["phase"], case.phase, "{}: {pod}", case.name);
        let terminated = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
        assert!(terminated.is_object(), "{}: terminated: {pod}", case.name);
        assert_eq!(
            terminated["message"].as_str().unwrap_or_default(),
            case.message,
            "{}: the termination message: {pod}",
            case.name
        );
    }
}

/// A restarted container starts from an empty message: each instance has a file of its own,
/// and the message of the last one that ended is reported (`lastState.terminated` keeps the
/// one before).
#[test]
fn each_instance_has_a_termination_message_of_its_own() {
    let manifests = ManifestDir::new();
    manifests.write(
        "restarts.yaml",
        r#"apiVersion: v1
kind: Pod
metadata: {name: restarts}
spec:
  restartPolicy: OnFailure
  volumes:
  - name: state
    emptyDir: {}
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    volumeMounts: [{name: state, mountPath: /state}]
    command: ["/bin/sh", "-c"]
    args:
    - |
      if [ -f /state/ran ]; then
        cat /dev/termination-log > /state/seen; echo -n "second saw [$(cat /state/seen)]" > /dev/termination-log; exit 0
      fi
      touch /state/ran; echo -n first > /dev/termination-log; exit 1
"#,
    );
    let agent = Agent::start("termination-message-restarts", manifests.path(), &[]);
    let pod = agent.wait_for_pod("restarts", "Succeeded after one restart", POD_START_TIMEOUT, |p| {
        p.phase() == "Succeeded"
    });
    let status = &pod
        .status
        .as_ref()
        .expect("status")
        .container_statuses
        .as_ref()
        .expect("statuses")[0];
    let message = |state: &Option<k8s_openapi::api::core::v1::ContainerState>| {
        state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.message.clone())
    };
    assert_eq!(message(&status.state).as_deref(), Some("second saw []"));
    assert_eq!(message(&status.last_state).as_deref(), Some("first"));
}

/// The pod's termination messages share 12 KiB (kubelet's status manager): with four
/// containers, a container's 4096-byte message is cut to its first 3072 bytes.
#[test]
fn termination_messages_share_the_pods_twelve_kib() {
    let manifests = ManifestDir::new();
    let others: String = ["c2", "c3", "c4"]
        .iter()
        .map(|c| format!("  - {{name: {c}, image: dockerlet.local/busybox:1, command: [\"true\"]}}\n"))
        .collect();
    manifests.write(
        "limits.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: limits}}
spec:
  restartPolicy: Never
  containers:
  - name: c1
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "head -c 1000 /dev/zero | tr '\\0' A > /dev/termination-log; head -c 3096 /dev/zero | tr '\\0' B >> /dev/termination-log"]
{others}"#
        ),
    );
    let agent = Agent::start("termination-limits", manifests.path(), &[]);
    let pod = wait_for("the pod Succeeded", POD_START_TIMEOUT, || {
        agent.pod("limits").filter(|p| p.phase() == "Succeeded")
    });
    let message = pod
        .container("c1")
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.message.clone())
        .unwrap_or_default();
    // The file's 4096 bytes (its last 4096, as kubelet reads it), then the pod's share: the
    // first 3072 of them.
    assert_eq!(message, format!("{}{}", "A".repeat(1000), "B".repeat(2072)));
}
