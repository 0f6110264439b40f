//! Pods from manifests: start-up, names and labels, init containers, edits, deletion, and
//! manifest errors.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use dockerlet_integration_tests::docker::{self, Container};
use dockerlet_integration_tests::{
    fixture, holds_for, wait_for, wait_until, Agent, ContainerStatusExt, DieEvents, ManifestDir, PodExt,
    CHANGE_TIMEOUT, POD_START_TIMEOUT,
};

/// Asserts the labels every container of the agent carries.
fn assert_kube_labels(c: &Container, agent: &Agent, pod: &str, uid: &str, kube_name: &str) {
    let want_type = if kube_name == "POD" { "podsandbox" } else { "container" };
    for (key, want) in [
        ("io.kubernetes.pod.name", pod),
        ("io.kubernetes.pod.namespace", "default"),
        ("io.kubernetes.pod.uid", uid),
        ("io.kubernetes.container.name", kube_name),
        ("io.kubernetes.docker.type", want_type),
        ("io.dockerlet.node", agent.node()),
    ] {
        assert_eq!(c.label(key), Some(want), "label {key} of {}", c.short_name());
    }
}

/// Two containers share the sandbox's network over localhost, carry kubelet names and labels, and report Running/Ready.
#[test]
fn a_two_container_pod_runs_with_shared_network_and_kubelet_names_and_labels() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("two-containers.yaml");
    let agent = Agent::start("two-containers", manifests.path(), &[]);

    let pod = agent.wait_for_running("web");
    let pod_name = agent.pod_name("web");
    let uid = pod.uid().to_string();
    assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
    assert!(
        uid.len() == 32 && uid.chars().all(|c| c.is_ascii_hexdigit()),
        "UID should be 32 hex characters: {uid:?}"
    );
    for condition in [
        "PodScheduled",
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "Ready",
    ] {
        assert_eq!(
            pod.condition(condition),
            Some("True"),
            "condition {condition}: {}",
            pod.summary()
        );
    }

    let containers = agent.pod_containers(&uid);
    let sandboxes: Vec<&Container> = containers.iter().filter(|c| c.is_sandbox()).collect();
    assert_eq!(sandboxes.len(), 1, "one sandbox: {containers:#?}");
    let sandbox = sandboxes[0];
    assert_eq!(sandbox.short_name(), format!("k8s_POD_{pod_name}_default_{uid}_0"));
    assert_kube_labels(sandbox, &agent, &pod_name, &uid, "POD");
    assert!(sandbox.state.running, "sandbox running: {}", sandbox.summary());

    let mut by_name = BTreeMap::new();
    for name in ["server", "client"] {
        let c = containers
            .iter()
            .find(|c| c.kube_name() == name)
            .unwrap_or_else(|| panic!("no Docker container for {name}: {containers:#?}"));
        assert_eq!(c.short_name(), format!("k8s_{name}_{pod_name}_default_{uid}_0"));
        assert_kube_labels(c, &agent, &pod_name, &uid, name);
        assert_eq!(c.restart_count_label(), Some(0), "restartCount label of {name}");
        assert!(
            c.label("annotation.io.kubernetes.container.hash")
                .is_some_and(|h| !h.is_empty()),
            "container hash label of {name}"
        );
        assert!(c.state.running, "{name} running: {}", c.summary());
        let shared = format!("container:{}", sandbox.id);
        assert_eq!(c.host_config.network_mode, shared, "{name} joins the sandbox's network");
        assert_eq!(
            c.host_config.ipc_mode, shared,
            "{name} joins the sandbox's IPC namespace"
        );

        let status = pod.container(name).unwrap_or_else(|| panic!("no status for {name}"));
        assert_eq!(status.docker_id(), Some(c.id.as_str()), "containerID of {name}");
        assert_eq!(status.restart_count, 0);
        assert!(status.ready && status.is_running(), "{}", status.summary());
        by_name.insert(name, c.clone());
    }

    let sandbox_ip = sandbox.ip().expect("the sandbox has an IP address");
    assert_eq!(pod.pod_ip(), Some(sandbox_ip), "podIP is the sandbox's Docker IP");
    assert!(
        pod.host_ip().is_some_and(|ip| !ip.is_empty()),
        "hostIP set: {:?}",
        pod.status
    );

    // localhost in `client` is the pod's network namespace, where `server` listens.
    let out = docker::exec(&by_name["client"].id, &["wget", "-q", "-O-", "http://localhost:8080/"]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("hello from server"),
        "client fetches server's page over localhost: {:?} {} {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Init containers run one by one to completion while the app container waits in PodInitializing, then it starts.
#[test]
fn init_containers_run_in_order_to_completion_before_app_containers() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("init-ordered.yaml");
    let agent = Agent::start("init-ordered", manifests.path(), &[]);

    let mut saw_pod_initializing = false;
    let pod = agent.wait_for_pod("init-ordered", "Running", POD_START_TIMEOUT, |p| {
        if p.container("main").and_then(|c| c.waiting_reason()) == Some("PodInitializing") {
            saw_pod_initializing = true;
        }
        p.phase() == "Running" && p.container("main").is_some_and(|c| c.is_running())
    });
    assert!(saw_pod_initializing, "main waited with reason PodInitializing");
    assert_eq!(pod.condition("Initialized"), Some("True"), "{}", pod.summary());

    let done = |name: &str| {
        let status = pod
            .init_container(name)
            .unwrap_or_else(|| panic!("no status for {name}"));
        let t = status
            .terminated()
            .unwrap_or_else(|| panic!("{name}: {}", status.summary()));
        assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")), "{name}");
        assert_eq!(status.restart_count, 0, "{name} ran once");
        let started = t.started_at.as_ref().expect("startedAt").0;
        let finished = t.finished_at.as_ref().expect("finishedAt").0;
        (started, finished)
    };
    let (a_started, a_finished) = done("init-a");
    let (b_started, b_finished) = done("init-b");
    let main_started = pod
        .container("main")
        .and_then(|c| c.running_since())
        .expect("startedAt");
    assert!(
        a_started <= a_finished && a_finished <= b_started,
        "init-b started after init-a finished"
    );
    assert!(b_finished <= main_started, "main started after init-b finished");

    // Docker's timestamps are precise to the nanosecond, where the status has seconds.
    let containers = agent.pod_containers(pod.uid());
    let find = |name: &str| containers.iter().find(|c| c.kube_name() == name);
    if let (Some(a), Some(b), Some(main)) = (find("init-a"), find("init-b"), find("main")) {
        assert!(
            a.finished_at() <= b.started_at(),
            "init-a {} / init-b {}",
            a.summary(),
            b.summary()
        );
        assert!(
            b.finished_at() <= main.started_at(),
            "init-b {} / main {}",
            b.summary(),
            main.summary()
        );
    }
}

/// A failing init container with restartPolicy Never fails the pod, and the app container is never created.
#[test]
fn a_failing_init_container_with_restart_policy_never_fails_the_pod() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("init-fails-never.yaml");
    let agent = Agent::start("init-fails-never", manifests.path(), &[]);

    let pod = agent.wait_for_pod("init-fails-never", "Failed", POD_START_TIMEOUT, |p| {
        p.phase() == "Failed"
    });
    let init = pod.init_container("init").expect("init status");
    let t = init.terminated().unwrap_or_else(|| panic!("{}", init.summary()));
    assert_eq!(
        (t.exit_code, t.reason.as_deref()),
        (3, Some("Error")),
        "{}",
        init.summary()
    );
    assert_eq!(init.restart_count, 0);

    let uid = pod.uid().to_string();
    holds_for(
        "the pod stays Failed, nothing restarts and main is never created",
        Duration::from_secs(8),
        || {
            let pod = agent.pod("init-fails-never").ok_or("pod gone from /pods")?;
            if pod.phase() != "Failed" || pod.init_container("init").is_none_or(|c| c.restart_count != 0) {
                return Err(pod.summary());
            }
            if pod
                .container("main")
                .is_some_and(|c| c.is_running() || c.terminated().is_some())
            {
                return Err(format!("main ran: {}", pod.summary()));
            }
            let containers = agent.pod_containers(&uid);
            if let Some(main) = containers.iter().find(|c| c.kube_name() == "main") {
                return Err(format!("main was created: {}", main.summary()));
            }
            if containers.iter().filter(|c| c.kube_name() == "init").count() > 1 {
                return Err("init was re-created".to_string());
            }
            Ok(())
        },
    );
}

/// A failing init container with restartPolicy Always is restarted in CrashLoopBackOff; the pod stays Pending.
#[test]
fn a_failing_init_container_with_restart_policy_always_is_restarted_with_back_off() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("init-fails-always.yaml");
    let agent = Agent::start("init-fails-always", manifests.path(), &[]);

    let mut saw_back_off = false;
    let mut main_created = None;
    let pod = agent.wait_for_pod(
        "init-fails-always",
        "init restarted twice, CrashLoopBackOff seen",
        POD_START_TIMEOUT,
        |p| {
            let init = p.init_container("init");
            if init.and_then(|c| c.waiting_reason()) == Some("CrashLoopBackOff") {
                saw_back_off = true;
            }
            if main_created.is_none() {
                main_created = agent
                    .pod_containers(p.uid())
                    .into_iter()
                    .find(|c| c.kube_name() == "main");
            }
            // The first restart is immediate and the first back-off short: poll until both seen.
            saw_back_off && init.is_some_and(|c| c.restart_count >= 2)
        },
    );
    assert!(main_created.is_none(), "main must not be created: {main_created:?}");
    assert!(
        saw_back_off,
        "the init container showed CrashLoopBackOff between attempts"
    );
    let last = pod
        .init_container("init")
        .and_then(|c| c.last_terminated())
        .expect("lastState");
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    assert_eq!(pod.phase(), "Pending", "{}", pod.summary());
    assert_eq!(pod.condition("Initialized"), Some("False"), "{}", pod.summary());
    let main = pod.container("main").expect("main status");
    assert_eq!(main.waiting_reason(), Some("PodInitializing"), "{}", main.summary());
}

/// Editing a manifest gives the pod a new UID: old containers are removed, new ones run the new spec.
#[test]
fn editing_a_manifest_recreates_the_pod_with_a_new_uid() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("sleeper.yaml");
    let agent = Agent::start("edit-manifest", manifests.path(), &[]);
    let old = agent.wait_for_running("sleeper");
    let old_uid = old.uid().to_string();

    let edited = fixture("sleeper.yaml").replace("value: one", "value: two");
    assert_ne!(edited, fixture("sleeper.yaml"));
    manifests.write("sleeper.yaml", &edited);

    let new = agent.wait_for_pod("sleeper", "a new UID, Running", POD_START_TIMEOUT, |p| {
        p.uid() != old_uid && p.phase() == "Running" && p.container("main").is_some_and(|c| c.is_running())
    });
    let new_uid = new.uid().to_string();
    wait_until("the old pod's containers to be removed", CHANGE_TIMEOUT, || {
        let left: Vec<String> = agent.pod_containers(&old_uid).iter().map(Container::summary).collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(left.join("; "))
        }
    });

    let containers = agent.containers();
    assert!(
        containers.iter().all(|c| c.pod_uid() == new_uid),
        "only the new pod's containers: {containers:#?}"
    );
    let main = containers
        .iter()
        .find(|c| c.kube_name() == "main")
        .expect("new main container");
    assert_eq!(main.env("VERSION"), Some("two"), "created from the edited manifest");
    assert_eq!(
        new.container("main").and_then(|c| c.docker_id()),
        Some(main.id.as_str())
    );
    assert!(containers.iter().any(|c| c.is_sandbox()), "the new pod has a sandbox");
    assert_eq!(agent.pods().len(), 1, "only the new pod is listed");
}

/// Deleting a manifest sends SIGTERM (handled: exit 0 at once), SIGKILL after the grace period (137), then removes all.
#[test]
fn deleting_a_manifest_stops_the_pod_with_sigterm_then_sigkill_after_the_grace_period() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("term-honoured.yaml");
    manifests.add_fixture("term-ignored.yaml");
    let agent = Agent::start("delete-manifest", manifests.path(), &[]);

    let polite = agent.wait_for_running("polite");
    let stubborn = agent.wait_for_running("stubborn");
    let main_id = |p: &k8s_openapi::api::core::v1::Pod| {
        p.container("main")
            .and_then(|c| c.docker_id())
            .expect("main containerID")
            .to_string()
    };
    let (polite_id, stubborn_id) = (main_id(&polite), main_id(&stubborn));
    let deaths = DieEvents::watch(agent.node());

    let deleted = Instant::now();
    manifests.remove("term-honoured.yaml");
    manifests.remove("term-ignored.yaml");

    // When each app container stopped running (exited or removed), polled every 100 ms.
    let mut stopped: BTreeMap<&str, Duration> = BTreeMap::new();
    while stopped.len() < 2 {
        for (name, id) in [("polite", &polite_id), ("stubborn", &stubborn_id)] {
            if !stopped.contains_key(name) && docker::inspect(id).is_none_or(|c| !c.state.running) {
                stopped.insert(name, deleted.elapsed());
            }
        }
        assert!(
            deleted.elapsed() < Duration::from_secs(90),
            "containers still running: {stopped:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    assert!(
        stopped["polite"] < Duration::from_secs(30),
        "the SIGTERM-handling container stops long before its 60 s grace period: {:?}",
        stopped["polite"]
    );
    assert!(
        stopped["stubborn"] >= Duration::from_secs(3),
        "the SIGTERM-ignoring container runs until its 3 s grace period is over: {:?}",
        stopped["stubborn"]
    );
    assert!(
        stopped["stubborn"] < Duration::from_secs(30),
        "and is then killed (its grace period is 3 s, not the default 30 s): {:?}",
        stopped["stubborn"]
    );
    assert_eq!(
        deaths.exit_code(&polite_id, Duration::from_secs(10)),
        Some(0),
        "polite exits 0 on SIGTERM"
    );
    assert_eq!(
        deaths.exit_code(&stubborn_id, Duration::from_secs(10)),
        Some(137),
        "stubborn is SIGKILLed"
    );

    wait_until("every container of both pods to be removed", CHANGE_TIMEOUT, || {
        let left: Vec<String> = agent.containers().iter().map(Container::summary).collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(left.join("; "))
        }
    });
    wait_for("both pods to leave /pods", CHANGE_TIMEOUT, || {
        agent.pods().is_empty().then_some(())
    });
}

/// A YAML error is reported with file and line while the good pod runs; dot-files and subdirectories are skipped.
#[test]
fn a_malformed_manifest_is_reported_and_does_not_stop_the_good_one() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("sleeper.yaml");
    manifests.write("bad.yaml", &fixture("malformed.yaml"));
    std::fs::write(manifests.path().join(".hidden.yaml"), "not: [a pod").unwrap();
    std::fs::create_dir(manifests.path().join("sub")).unwrap();
    std::fs::write(
        manifests.path().join("sub/nested.yaml"),
        fixture("sleeper.yaml").replace("name: sleeper", "name: nested"),
    )
    .unwrap();
    let agent = Agent::start("malformed-manifest", manifests.path(), &[]);

    agent.wait_for_running("sleeper");
    let errors = wait_until("an error for bad.yaml", CHANGE_TIMEOUT, || {
        let errors = agent.manifest_errors();
        let named = errors
            .iter()
            .any(|e| e["file"].as_str().is_some_and(|f| f.ends_with("bad.yaml")));
        if named {
            Ok(errors)
        } else {
            Err(format!("{errors:?}"))
        }
    });
    assert_eq!(
        errors.len(),
        1,
        "only bad.yaml is reported (dot-files and subdirectories are skipped): {errors:?}"
    );
    let reason = errors[0]["reason"].as_str().unwrap_or("");
    assert!(
        reason.to_lowercase().contains("line"),
        "the reason gives the line: {reason:?}"
    );
    let pods: Vec<String> = agent.pods().iter().map(|p| p.name().to_string()).collect();
    assert_eq!(pods, vec![agent.pod_name("sleeper")], "only the good pod runs");

    manifests.write(
        "bad.yaml",
        &fixture("sleeper.yaml").replace("name: sleeper", "name: fixed"),
    );
    agent.wait_for_running("fixed");
    wait_until("manifest_errors to be empty", CHANGE_TIMEOUT, || {
        let errors = agent.manifest_errors();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!("{errors:?}"))
        }
    });
}
