//! computePodActions' cases (`pkg/kubelet/kuberuntime/kuberuntime_manager_test.go`).

use super::*;
use dockerlet_messages::PodUid;
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

fn container(name: &str) -> Container {
    Container {
        name: name.into(),
        image: Some("img:1".into()),
        ..Default::default()
    }
}

fn pod(policy: &str, init: &[&str], apps: &[&str]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            uid: Some("u".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some(policy.into()),
            init_containers: (!init.is_empty()).then(|| init.iter().map(|n| container(n)).collect()),
            containers: apps.iter().map(|n| container(n)).collect(),
            ..Default::default()
        }),
        status: None,
    }
}

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(s).unwrap()
}

fn sandbox(attempt: u32, state: RuntimeState) -> ObservedContainer {
    ObservedContainer {
        id: ContainerId(format!("sb{attempt}")),
        pod_uid: PodUid("u".into()),
        pod_name: String::new(),
        pod_namespace: String::new(),
        name: "POD".into(),
        role: ContainerRole::Sandbox,
        attempt,
        spec_hash: String::new(),
        backoff_step: 0,
        sandbox_id: None,
        state,
        exit_code: 0,
        oom_killed: false,
        error: String::new(),
        created_at: Some(Time(at(10))),
        started_at: Some(Time(at(10))),
        finished_at: None,
        image: "pause".into(),
        image_id: String::new(),
        ip: Some("172.17.0.2".into()),
        secondary_ip: None,
        host_network: false,
        pod_grace_seconds: None,
        pid: None,
        cgroup_parent: String::new(),
        termination_message: String::new(),
        details_pending: false,
    }
}

fn instance(name: &str, role: ContainerRole, attempt: u32, state: RuntimeState, exit_code: i64) -> ObservedContainer {
    ObservedContainer {
        id: ContainerId(format!("{name}{attempt}")),
        name: name.into(),
        role,
        attempt,
        spec_hash: container_hash(&container(name)),
        backoff_step: attempt,
        sandbox_id: Some(ContainerId("sb0".into())),
        state,
        exit_code,
        finished_at: (state == RuntimeState::Exited).then(|| Time(at(20))),
        ip: None,
        secondary_ip: None,
        ..sandbox(0, state)
    }
}

fn names(actions: &PodActions) -> Vec<&str> {
    actions.start.iter().map(|s| s.name.as_str()).collect()
}

/// A new pod gets a sandbox (attempt 0) and all its app containers in one sync.
#[test]
fn new_pod_creates_sandbox_and_starts_all_containers() {
    let a = compute_pod_actions(&pod("Always", &[], &["a", "b"]), &[], at(0), &BackoffConfig::default());
    assert_eq!(a.create_sandbox, Some(0));
    assert_eq!(names(&a), vec!["a", "b"]);
    assert!(!a.kill_pod);
}

/// With init containers only the first init container starts with the new sandbox.
#[test]
fn new_pod_with_init_containers_starts_only_the_first_init() {
    let a = compute_pod_actions(
        &pod("Always", &["i1", "i2"], &["a"]),
        &[],
        at(0),
        &BackoffConfig::default(),
    );
    assert_eq!(names(&a), vec!["i1"]);
    assert_eq!(a.start[0].role, ContainerRole::Init);
}

/// Init containers run one by one: the second starts after the first exits 0, then apps.
#[test]
fn init_containers_run_in_order_then_apps() {
    let p = pod("Always", &["i1", "i2"], &["a"]);
    let sb = sandbox(0, RuntimeState::Running);
    let i1 = instance("i1", ContainerRole::Init, 0, RuntimeState::Exited, 0);
    let running_i1 = instance("i1", ContainerRole::Init, 0, RuntimeState::Running, 0);
    let a = compute_pod_actions(&p, &[sb.clone(), running_i1], at(30), &BackoffConfig::default());
    assert!(a.start.is_empty() && a.is_idle());
    let a = compute_pod_actions(&p, &[sb.clone(), i1.clone()], at(30), &BackoffConfig::default());
    assert_eq!(names(&a), vec!["i2"]);
    let i2 = instance("i2", ContainerRole::Init, 0, RuntimeState::Exited, 0);
    let a = compute_pod_actions(&p, &[sb, i1, i2], at(30), &BackoffConfig::default());
    assert_eq!(names(&a), vec!["a"]);
}

/// A failed init container fails a Never pod (sandbox stopped) and is retried otherwise.
#[test]
fn failed_init_container_follows_restart_policy() {
    let sb = sandbox(0, RuntimeState::Running);
    let failed = instance("i1", ContainerRole::Init, 0, RuntimeState::Exited, 1);
    let a = compute_pod_actions(
        &pod("Never", &["i1"], &["a"]),
        &[sb.clone(), failed.clone()],
        at(30),
        &BackoffConfig::default(),
    );
    assert!(a.kill_pod && a.start.is_empty());
    let a = compute_pod_actions(
        &pod("Always", &["i1"], &["a"]),
        &[sb, failed],
        at(30),
        &BackoffConfig::default(),
    );
    assert_eq!(names(&a), vec!["i1"]);
    assert_eq!(a.start[0].attempt, 1);
}

/// The restart policy matrix for an exited app container.
#[test]
fn exited_containers_restart_per_policy() {
    let sb = sandbox(0, RuntimeState::Running);
    for (policy, code, restarts) in [
        ("Always", 0, true),
        ("Always", 1, true),
        ("OnFailure", 0, false),
        ("OnFailure", 1, true),
        ("Never", 0, false),
        ("Never", 1, false),
    ] {
        let dead = instance("a", ContainerRole::App, 0, RuntimeState::Exited, code);
        let a = compute_pod_actions(
            &pod(policy, &[], &["a"]),
            &[sb.clone(), dead],
            at(30),
            &BackoffConfig::default(),
        );
        assert_eq!(!a.start.is_empty(), restarts, "{policy} exit {code}");
        // A finished pod's sandbox is stopped (rule 5).
        assert_eq!(a.kill_pod, !restarts, "{policy} exit {code}");
    }
}

/// A crashing container waits out its back-off before the next attempt.
#[test]
fn crash_looping_container_backs_off() {
    let sb = sandbox(0, RuntimeState::Running);
    let dead = instance("a", ContainerRole::App, 3, RuntimeState::Exited, 1);
    let a = compute_pod_actions(
        &pod("Always", &[], &["a"]),
        &[sb.clone(), dead.clone()],
        at(25),
        &BackoffConfig::default(),
    );
    assert!(a.start.is_empty());
    assert_eq!(a.backing_off[0].delay, Duration::from_secs(40));
    assert!(!a.kill_pod, "a backing-off pod keeps its sandbox");
    let a = compute_pod_actions(
        &pod("Always", &[], &["a"]),
        &[sb, dead],
        at(60),
        &BackoffConfig::default(),
    );
    assert_eq!(
        a.start,
        vec![StartAction {
            name: "a".into(),
            role: ContainerRole::App,
            attempt: 4,
            backoff_step: 4
        }]
    );
}

/// A running container whose spec changed is killed and restarted at once.
#[test]
fn changed_container_is_killed_and_restarted() {
    let sb = sandbox(0, RuntimeState::Running);
    let mut running = instance("a", ContainerRole::App, 0, RuntimeState::Running, 0);
    running.spec_hash = "old".into();
    let a = compute_pod_actions(
        &pod("Always", &[], &["a"]),
        &[sb, running],
        at(30),
        &BackoffConfig::default(),
    );
    assert_eq!(a.kill.len(), 1);
    assert!(a.kill[0].reason.contains("definition changed"));
    assert_eq!(a.start[0].attempt, 1);
}

/// A failed liveness probe kills the container (restart follows when it is seen dead) and
/// keeps the sandbox; with restartPolicy Never the pod is done.
#[test]
fn failed_liveness_kills_the_container() {
    let sb = sandbox(0, RuntimeState::Running);
    let running = instance("a", ContainerRole::App, 0, RuntimeState::Running, 0);
    let failed = ProbeResults::from([(
        ("a".to_string(), ProbeKind::Liveness),
        (running.id.clone(), ProbeResult::Failure),
    )]);
    let cfg = BackoffConfig::default();
    let observed = [sb.clone(), running.clone()];
    let a = compute_pod_actions_with_probes(&pod("Always", &[], &["a"]), &observed, at(30), &cfg, &failed);
    assert_eq!(a.kill.len(), 1);
    assert_eq!(a.kill[0].reason, "Container a failed liveness probe, will be restarted");
    assert!(a.start.is_empty() && !a.kill_pod);
    let a = compute_pod_actions_with_probes(&pod("Never", &[], &["a"]), &observed, at(30), &cfg, &failed);
    assert!(a.kill_pod, "nothing will run again: the sandbox goes too");
    // OnFailure: killed and started again at once (its exit code, maybe 0, does not matter).
    let a = compute_pod_actions_with_probes(&pod("OnFailure", &[], &["a"]), &observed, at(30), &cfg, &failed);
    assert_eq!(a.kill.len(), 1);
    assert_eq!(a.start.len(), 1, "{a:?}");
    assert_eq!(a.start[0].attempt, 1);
    assert!(!a.kill_pod);
}

/// A running pod that matches its spec needs nothing.
#[test]
fn matching_pod_is_left_alone() {
    let sb = sandbox(0, RuntimeState::Running);
    let running = instance("a", ContainerRole::App, 0, RuntimeState::Running, 0);
    let a = compute_pod_actions(
        &pod("Always", &[], &["a"]),
        &[sb, running],
        at(30),
        &BackoffConfig::default(),
    );
    assert!(a.is_idle(), "{a:?}");
    assert_eq!(a.summary(), "none");
}

/// A dead sandbox kills the pod and re-creates it with the next attempt; not for a Never pod
/// whose containers already ran.
#[test]
fn dead_sandbox_recreates_the_pod() {
    let sb = sandbox(0, RuntimeState::Exited);
    let running = instance("a", ContainerRole::App, 0, RuntimeState::Running, 0);
    let a = compute_pod_actions(
        &pod("Always", &[], &["a"]),
        &[sb.clone(), running.clone()],
        at(30),
        &BackoffConfig::default(),
    );
    assert!(a.kill_pod);
    assert_eq!(a.create_sandbox, Some(1));
    assert_eq!(a.start[0].attempt, 1);
    let a = compute_pod_actions(
        &pod("Never", &[], &["a"]),
        &[sb, running],
        at(30),
        &BackoffConfig::default(),
    );
    assert!(a.kill_pod);
    assert_eq!(a.create_sandbox, None);
}

/// Only the two newest instances of a container are kept.
#[test]
fn old_dead_instances_are_removed() {
    let sb = sandbox(0, RuntimeState::Running);
    let old: Vec<_> = (0..4)
        .map(|i| instance("a", ContainerRole::App, i, RuntimeState::Exited, 1))
        .collect();
    let mut observed = vec![sb];
    observed.extend(old);
    let a = compute_pod_actions(
        &pod("Always", &[], &["a"]),
        &observed,
        at(1000),
        &BackoffConfig::default(),
    );
    let mut removed: Vec<_> = a.remove.iter().map(|c| c.0.as_str()).collect();
    removed.sort();
    assert_eq!(removed, vec!["a0", "a1"]);
}

/// `pod` with its init containers `names` made sidecars (`restartPolicy: Always`), and a
/// startup probe on `probed`.
fn with_sidecars(mut pod: Pod, names: &[&str], probed: &[&str]) -> Pod {
    for c in pod.spec.as_mut().unwrap().init_containers.iter_mut().flatten() {
        if names.contains(&c.name.as_str()) {
            c.restart_policy = Some("Always".into());
        }
        if probed.contains(&c.name.as_str()) {
            c.startup_probe = Some(Default::default());
        }
    }
    pod
}

/// An instance of `pod`'s container `name` (its spec hash from the pod).
fn instance_of(
    pod: &Pod,
    name: &str,
    role: ContainerRole,
    attempt: u32,
    state: RuntimeState,
    code: i64,
) -> ObservedContainer {
    let spec = pod.spec.as_ref().unwrap();
    let c = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .find(|c| c.name == name)
        .unwrap();
    ObservedContainer {
        spec_hash: container_hash(c),
        ..instance(name, role, attempt, state, code)
    }
}

/// Sidecars start in order with the init containers; the next one starts once the sidecar
/// runs, and the app containers once the ordinary init containers finished — with the
/// sidecar left running.
#[test]
fn sidecars_start_in_order_and_keep_running() {
    let p = with_sidecars(pod("Never", &["s", "i"], &["a"]), &["s"], &[]);
    let cfg = BackoffConfig::default();
    let a = compute_pod_actions(&p, &[], at(0), &cfg);
    assert_eq!(names(&a), vec!["s"]);
    assert_eq!(a.create_sandbox, Some(0));
    let sb = sandbox(0, RuntimeState::Running);
    let s = instance_of(&p, "s", ContainerRole::Init, 0, RuntimeState::Running, 0);
    let a = compute_pod_actions(&p, &[sb.clone(), s.clone()], at(30), &cfg);
    assert_eq!(names(&a), vec!["i"]);
    let i = instance_of(&p, "i", ContainerRole::Init, 0, RuntimeState::Exited, 0);
    let a = compute_pod_actions(&p, &[sb.clone(), s.clone(), i.clone()], at(30), &cfg);
    assert_eq!(names(&a), vec!["a"]);
    assert!(!a.kill_pod && a.kill.is_empty());
    let running = instance_of(&p, "a", ContainerRole::App, 0, RuntimeState::Running, 0);
    let a = compute_pod_actions(&p, &[sb, s, i, running], at(30), &cfg);
    assert!(a.is_idle(), "{a:?}");
}

/// A sidecar with a startup probe holds the next init container back until the probe
/// passed; a failed startup probe restarts it.
#[test]
fn a_sidecars_startup_probe_gates_the_next_container() {
    let p = with_sidecars(pod("Always", &["s"], &["a"]), &["s"], &["s"]);
    let cfg = BackoffConfig::default();
    let sb = sandbox(0, RuntimeState::Running);
    let s = instance_of(&p, "s", ContainerRole::Init, 0, RuntimeState::Running, 0);
    let observed = [sb, s.clone()];
    let a = compute_pod_actions(&p, &observed, at(30), &cfg);
    assert!(a.is_idle(), "{a:?}");
    let result = |r| ProbeResults::from([(("s".to_string(), ProbeKind::Startup), (s.id.clone(), r))]);
    let a = compute_pod_actions_with_probes(&p, &observed, at(30), &cfg, &result(ProbeResult::Success));
    assert_eq!(names(&a), vec!["a"]);
    let a = compute_pod_actions_with_probes(&p, &observed, at(30), &cfg, &result(ProbeResult::Failure));
    assert_eq!(a.kill.len(), 1);
    assert_eq!(a.kill[0].reason, "Init container s failed startup probe");
    assert!(a.start.is_empty() && !a.kill_pod);
}

/// A sidecar that exits is started again whatever the pod's restart policy, after its
/// back-off; its liveness probe failing restarts it too.
#[test]
fn sidecars_restart_whatever_the_pod_policy() {
    let p = with_sidecars(pod("Never", &["s"], &["a"]), &["s"], &[]);
    let cfg = BackoffConfig::default();
    let sb = sandbox(0, RuntimeState::Running);
    let dead = instance_of(&p, "s", ContainerRole::Init, 1, RuntimeState::Exited, 0);
    let app = instance_of(&p, "a", ContainerRole::App, 0, RuntimeState::Running, 0);
    let a = compute_pod_actions(&p, &[sb.clone(), dead.clone(), app.clone()], at(30), &cfg);
    assert_eq!(names(&a), vec!["s"]);
    assert_eq!(a.start[0].attempt, 2);
    let a = compute_pod_actions(&p, &[sb.clone(), dead, app.clone()], at(25), &cfg);
    assert!(a.start.is_empty());
    assert_eq!(a.backing_off[0].name, "s", "{a:?}");
    let s = instance_of(&p, "s", ContainerRole::Init, 2, RuntimeState::Running, 0);
    let failed = ProbeResults::from([(
        ("s".to_string(), ProbeKind::Liveness),
        (s.id.clone(), ProbeResult::Failure),
    )]);
    let a = compute_pod_actions_with_probes(&p, &[sb, s, app], at(30), &cfg, &failed);
    assert_eq!(a.kill[0].reason, "Init container s failed liveness probe");
    assert!(!a.kill_pod);
}

/// Once every app container finished for good the pod is done: its sidecars are stopped
/// with it, not restarted, and no new sandbox brings the init containers back.
#[test]
fn sidecars_do_not_keep_a_finished_pod_alive() {
    let cfg = BackoffConfig::default();
    for policy in ["Never", "OnFailure"] {
        let p = with_sidecars(pod(policy, &["s"], &["a"]), &["s"], &[]);
        let sb = sandbox(0, RuntimeState::Running);
        let app = instance_of(&p, "a", ContainerRole::App, 0, RuntimeState::Exited, 0);
        let s = instance_of(&p, "s", ContainerRole::Init, 0, RuntimeState::Running, 0);
        let a = compute_pod_actions(&p, &[sb.clone(), s, app.clone()], at(30), &cfg);
        assert!(a.kill_pod && a.start.is_empty(), "{policy}: {a:?}");
        let dead = instance_of(&p, "s", ContainerRole::Init, 0, RuntimeState::Exited, 143);
        let a = compute_pod_actions(&p, &[sb.clone(), dead.clone(), app.clone()], at(30), &cfg);
        assert!(a.start.is_empty() && a.backing_off.is_empty(), "{policy}: {a:?}");
        let stopped = sandbox(0, RuntimeState::Exited);
        let a = compute_pod_actions(&p, &[stopped, dead, app], at(30), &cfg);
        assert!(a.is_idle() && a.create_sandbox.is_none(), "{policy}: {a:?}");
    }
}
