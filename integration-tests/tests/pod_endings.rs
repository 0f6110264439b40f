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

/// A running API pod with a finalizer, deleted: the agent stops it and deletes it (grace 0);
/// the finalizer keeps the object, whose final status says Failed with every container
/// terminated (exit code and reason from Docker).
#[test]
fn a_deleted_pod_kept_by_a_finalizer_ends_failed() {
    let (api, _manifests, agent) = api_agent("ending-finalizer");
    create_sleeper(&api, &agent, "{name: kept, finalizers: [example.com/keep]}", 5);
    let running = wait_for("the pod Running", POD_START_TIMEOUT, || {
        api.get("pods", "default", "kept")
            .filter(|p| p["status"]["phase"] == "Running")
    });
    let uid = running["metadata"]["uid"].as_str().expect("uid").to_string();
    api.kubectl_ok(&["delete", "pod", "kept", "--wait=false"]);
    let ended = wait_for("the kept pod Failed", CHANGE_TIMEOUT, || {
        api.get("pods", "default", "kept")
            .filter(|p| p["status"]["phase"] == "Failed")
    });
    assert!(!ended["metadata"]["deletionTimestamp"].is_null(), "{ended}");
    let state = &ended["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(state["exitCode"], 0, "the container ended on SIGTERM: {ended}");
    assert_eq!(state["reason"], "Completed", "{ended}");
    wait_for("the containers removed", CHANGE_TIMEOUT, || {
        agent.pod_containers(&uid).is_empty().then_some(())
    });
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
    let path = api.dir().join("pod.yaml");
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
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
"#,
        node = agent.node()
    );
    std::fs::write(&path, yaml).expect("write pod");
    api.kubectl_ok(&["create", "-f", path.to_str().expect("utf-8")]);
}
