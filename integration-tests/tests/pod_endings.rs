//! How pods end besides their containers exiting. `activeDeadlineSeconds`: a pod active longer
//! than its deadline is failed by the node (phase Failed, reason DeadlineExceeded, kubelet's
//! message) and its containers stop; setting the deadline of a running API pod (upstream
//! `pods.go` "should allow activeDeadlineSeconds to be updated") takes effect. Deletion: an API
//! pod kept by a finalizer after the node is done with it shows phase Failed with its
//! containers terminated, as kubelet's status manager leaves it.

use dockerlet_fake_apiserver::ApiServer;
use dockerlet_integration_tests::{wait_for, Agent, ManifestDir, PodExt, CHANGE_TIMEOUT, POD_START_TIMEOUT};

const MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// A static pod with a 3 s deadline runs, then is Failed with DeadlineExceeded; its containers
/// are stopped and not restarted (restartPolicy Always notwithstanding).
#[test]
fn a_static_pod_past_its_deadline_fails_and_stops() {
    let manifests = ManifestDir::new();
    manifests.write(
        "deadline.yaml",
        r#"apiVersion: v1
kind: Pod
metadata: {name: deadline}
spec:
  activeDeadlineSeconds: 3
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
"#,
    );
    let agent = Agent::start("deadline-static", manifests.path(), &[]);
    let running = agent.wait_for_running("deadline");
    let failed = agent.wait_for_pod("deadline", "Failed with DeadlineExceeded", CHANGE_TIMEOUT, |p| {
        p.phase() == "Failed"
    });
    let status = failed.status.clone().unwrap_or_default();
    assert_eq!(
        status.reason.as_deref(),
        Some("DeadlineExceeded"),
        "{}",
        failed.summary()
    );
    assert_eq!(status.message.as_deref(), Some(MESSAGE));
    let uid = running.uid().to_string();
    wait_for("every container of the pod stopped", CHANGE_TIMEOUT, || {
        let containers = agent.pod_containers(&uid);
        containers.iter().all(|c| !c.state.running).then_some(())
    });
    let events = agent.events();
    assert!(
        events
            .iter()
            .any(|e| e["reason"] == "DeadlineExceeded" && e["message"] == MESSAGE),
        "a DeadlineExceeded event: {events:?}"
    );
    std::thread::sleep(std::time::Duration::from_secs(3));
    let after = agent.pod("deadline").expect("pod");
    assert_eq!(after.phase(), "Failed", "stays Failed: {}", after.summary());
    assert!(
        agent.pod_containers(&uid).iter().all(|c| !c.state.running),
        "nothing restarted after the deadline"
    );
}

/// An API pod without a deadline runs; setting `activeDeadlineSeconds: 5` on it fails it with
/// reason DeadlineExceeded, as the upstream conformance test checks.
#[test]
fn setting_the_deadline_of_a_running_api_pod_fails_it() {
    let (api, _manifests, agent) = api_agent("deadline-api");
    create_sleeper(&api, &agent, "{name: pod-update-activedeadlineseconds}", 1);
    let name = "pod-update-activedeadlineseconds";
    wait_for("the pod Running", POD_START_TIMEOUT, || {
        api.get("pods", "default", name)
            .filter(|p| p["status"]["phase"] == "Running")
    });
    api.kubectl_ok(&["patch", "pod", name, "-p", r#"{"spec":{"activeDeadlineSeconds":5}}"#]);
    let pod = wait_for("the pod Failed", CHANGE_TIMEOUT, || {
        api.get("pods", "default", name)
            .filter(|p| p["status"]["phase"] == "Failed")
    });
    assert_eq!(pod["status"]["reason"], "DeadlineExceeded", "{pod}");
    assert_eq!(pod["status"]["message"], MESSAGE);
}

/// Running API pods with a finalizer, deleted (upstream e2e_node `deleted_pods_test.go`): the
/// agent stops them and deletes them (grace 0); the finalizer keeps each object, whose final
/// status has every container terminated. A pod whose containers all ended with 0 is
/// Succeeded whatever its restart policy (kubelet's getPhase for a terminal pod); one killed
/// at the end of its grace period (137) is Failed.
#[test]
fn deleted_pods_kept_by_a_finalizer_end_succeeded_or_failed() {
    let (api, _manifests, agent) = api_agent("ending-finalizer");
    // Default restartPolicy Always; SIGTERM ends the container with 0.
    create_sleeper(&api, &agent, "{name: kept, finalizers: [example.com/keep]}", 5);
    // Ignores SIGTERM: killed after its 2 s grace period.
    create_pod(
        &api,
        &agent,
        "{name: stubborn, finalizers: [example.com/keep]}",
        2,
        "trap '' TERM; while true; do sleep 1; done",
    );
    let mut uids = Vec::new();
    for name in ["kept", "stubborn"] {
        let running = wait_for(&format!("{name} Running"), POD_START_TIMEOUT, || {
            api.get("pods", "default", name)
                .filter(|p| p["status"]["phase"] == "Running")
        });
        uids.push(running["metadata"]["uid"].as_str().expect("uid").to_string());
        api.kubectl_ok(&["delete", "pod", name, "--wait=false"]);
    }
    for (name, phase, exit_code, reason) in [
        ("kept", "Succeeded", 0, "Completed"),
        ("stubborn", "Failed", 137, "Error"),
    ] {
        let ended = wait_for(&format!("{name} {phase}"), CHANGE_TIMEOUT, || {
            api.get("pods", "default", name)
                .filter(|p| p["status"]["phase"] == "Succeeded" || p["status"]["phase"] == "Failed")
        });
        assert_eq!(ended["status"]["phase"], phase, "{ended}");
        assert!(!ended["metadata"]["deletionTimestamp"].is_null(), "{ended}");
        let state = &ended["status"]["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(state["exitCode"], exit_code, "{ended}");
        assert_eq!(state["reason"], reason, "{ended}");
    }
    for uid in &uids {
        wait_for("the containers removed", CHANGE_TIMEOUT, || {
            agent.pod_containers(uid).is_empty().then_some(())
        });
    }
}

/// A pod deleted before its container ever started (upstream `deleted_pods_test.go` "should
/// transition to Failed phase a pod which is deleted while pending"): Failed, and its container,
/// never started, ends `ContainerStatusUnknown` with 137 as kubelet's TerminatePod has it; it
/// used to stay waiting.
#[test]
fn a_pod_deleted_while_pending_fails_with_its_container_status_unknown() {
    let (api, _manifests, agent) = api_agent("ending-pending");
    let path = api.dir().join("pending.yaml");
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: pending, finalizers: [example.com/keep]}}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  containers:
  - name: app
    image: dockerlet.local/no-such-image:1
    imagePullPolicy: Never
"#,
        node = agent.node()
    );
    std::fs::write(&path, yaml).expect("write pod");
    api.kubectl_ok(&["create", "-f", path.to_str().expect("utf-8")]);
    wait_for("the container waiting on its image", POD_START_TIMEOUT, || {
        api.get("pods", "default", "pending")
            .filter(|p| p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ErrImageNeverPull")
    });
    api.kubectl_ok(&["delete", "pod", "pending", "--wait=false"]);
    let ended = wait_for("the pod Failed", CHANGE_TIMEOUT, || {
        api.get("pods", "default", "pending")
            .filter(|p| p["status"]["phase"] == "Failed")
    });
    let state = &ended["status"]["containerStatuses"][0]["state"];
    assert!(state["waiting"].is_null(), "{ended}");
    let terminated = &state["terminated"];
    assert_eq!(terminated["reason"], "ContainerStatusUnknown", "{ended}");
    assert_eq!(terminated["exitCode"], 137, "{ended}");
    assert_eq!(
        terminated["message"], "The container could not be located when the pod was terminated",
        "{ended}"
    );
    assert!(ended["status"]["reason"].is_null(), "{ended}");
    api.kubectl_ok(&[
        "patch",
        "pod",
        "pending",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
}

/// A deleted API pod without finalizers: its final status (phase, terminated containers) is
/// written before the agent deletes it for good, so watchers see how it ended before it goes
/// (kubelet's status manager; upstream `pods.go` checks this of every pod it deletes).
#[test]
fn a_deleted_pods_final_status_is_written_before_it_is_deleted() {
    let (api, _manifests, agent) = api_agent("ending-order");
    create_sleeper(&api, &agent, "{name: ordered}", 5);
    wait_for("the pod Running", POD_START_TIMEOUT, || {
        api.get("pods", "default", "ordered")
            .filter(|p| p["status"]["phase"] == "Running")
    });
    api.clear_requests();
    api.kubectl_ok(&["delete", "pod", "ordered", "--wait=false"]);
    wait_for("the pod gone", CHANGE_TIMEOUT, || {
        api.get("pods", "default", "ordered").is_none().then_some(())
    });
    let requests = api.requests();
    let summary: Vec<String> = requests
        .iter()
        .filter(|r| r.path.contains("/pods/ordered"))
        .map(|r| format!("{} {} {:?} {}", r.method, r.path, r.user_agent, r.body))
        .collect();
    let final_write = requests
        .iter()
        .rposition(|r| r.path.ends_with("/pods/ordered/status") && r.body.contains("Succeeded"));
    // The agent's delete is the last one (kubectl's comes first).
    let delete = requests
        .iter()
        .rposition(|r| r.method == "DELETE" && r.path.ends_with("/namespaces/default/pods/ordered"));
    let (Some(final_write), Some(delete)) = (final_write, delete) else {
        panic!("a final status write and the agent's delete: {summary:?}");
    };
    assert!(final_write < delete, "the final status before the delete: {summary:?}");
}

/// While a deleted pod terminates, the node's `/pods` shows it with its deletionTimestamp (as
/// kubelet's pod manager has it; upstream `node/pods.go` "Delete Grace Period" polls it there).
#[test]
fn a_terminating_pod_shows_its_deletion_timestamp_on_the_node() {
    let (api, _manifests, agent) = api_agent("ending-shown");
    create_pod(
        &api,
        &agent,
        "{name: slow}",
        20,
        "trap '' TERM; while true; do sleep 1; done",
    );
    wait_for("the pod Running", POD_START_TIMEOUT, || {
        api.get("pods", "default", "slow")
            .filter(|p| p["status"]["phase"] == "Running")
    });
    api.kubectl_ok(&["delete", "pod", "slow", "--wait=false"]);
    let on_node = wait_for("/pods with the deletionTimestamp", CHANGE_TIMEOUT, || {
        agent
            .pods()
            .into_iter()
            .find(|p| p.metadata.name.as_deref() == Some("slow") && p.metadata.deletion_timestamp.is_some())
    });
    assert_eq!(on_node.metadata.deletion_grace_period_seconds, Some(20));
    api.kubectl_ok(&["delete", "pod", "slow", "--grace-period=0", "--force"]);
}

/// An agent in API-server mode against a fresh in-memory API server.
fn api_agent(name: &str) -> (ApiServer, ManifestDir, Agent) {
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let kubeconfig = api.kubeconfig_path().display().to_string();
    let agent = Agent::start(name, manifests.path(), &["--kubeconfig", &kubeconfig]);
    (api, manifests, agent)
}

/// Create, through kubectl, a pod bound to `agent`'s node whose container stops at once on
/// SIGTERM; `metadata` is the YAML of its metadata (flow style).
fn create_sleeper(api: &ApiServer, agent: &Agent, metadata: &str, grace: u32) {
    create_pod(api, agent, metadata, grace, "trap 'exit 0' TERM; sleep 3600 & wait");
}

/// Create, through kubectl, a one-container pod bound to `agent`'s node running `script`.
fn create_pod(api: &ApiServer, agent: &Agent, metadata: &str, grace: u32, script: &str) {
    let name = metadata
        .split("name: ")
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .expect("a name in the metadata");
    let path = api.dir().join(format!("{name}.yaml"));
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {metadata}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: {grace}
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "{script}"]
"#,
        node = agent.node()
    );
    std::fs::write(&path, yaml).expect("write pod");
    api.kubectl_ok(&["create", "-f", path.to_str().expect("utf-8")]);
}
