//! Tests of the pod status: phases, conditions, container statuses.

use super::*;
use dockerlet_messages::runtime::ContainerRole;
use dockerlet_messages::{ContainerId, PodUid};
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(s).unwrap()
}

fn pod(policy: &str, init: &[&str], apps: &[&str]) -> Pod {
    let c = |n: &&str| Container {
        name: n.to_string(),
        image: Some("img:1".into()),
        ..Default::default()
    };
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            uid: Some("u".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some(policy.into()),
            init_containers: (!init.is_empty()).then(|| init.iter().map(c).collect()),
            containers: apps.iter().map(c).collect(),
            ..Default::default()
        }),
        status: None,
    }
}

fn cstatus(name: &str, state: ContainerState) -> ContainerStatus {
    ContainerStatus {
        name: name.into(),
        state: Some(state),
        ..Default::default()
    }
}

fn waiting_state() -> ContainerState {
    waiting("ContainerCreating", None)
}

fn ended(exit_code: i32) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code,
            reason: Some(if exit_code == 0 { "Completed" } else { "Error" }.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn reason_of(c: &ContainerStatus) -> Option<&str> {
    let s = c.state.as_ref()?;
    s.terminated
        .as_ref()
        .and_then(|t| t.reason.as_deref())
        .or_else(|| s.waiting.as_ref().and_then(|w| w.reason.as_deref()))
}

/// Termination messages share the pod's 12 KiB: with four containers each keeps its first
/// 3072 bytes, in its current and its last state.
#[test]
fn termination_messages_share_twelve_kib() {
    let message = |n: usize| ContainerState {
        terminated: Some(ContainerStateTerminated {
            message: Some("B".repeat(n)),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut statuses = [
        ContainerStatus {
            state: Some(message(4096)),
            last_state: Some(message(4000)),
            ..cstatus("c1", message(0))
        },
        cstatus("c2", message(100)),
    ];
    cap_termination_messages(4, statuses.iter_mut());
    let len = |s: &Option<ContainerState>| {
        s.as_ref()
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.message.as_ref())
            .map(String::len)
    };
    assert_eq!(
        (len(&statuses[0].state), len(&statuses[0].last_state)),
        (Some(3072), Some(3072))
    );
    assert_eq!(len(&statuses[1].state), Some(100));
    // One container keeps up to 12 KiB; a multi-byte character is never split.
    let mut one = [ContainerStatus {
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                message: Some(format!("{}é", "a".repeat(12 * 1024 - 1))),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }];
    cap_termination_messages(1, one.iter_mut());
    assert_eq!(len(&one[0].state), Some(12 * 1024 - 1));
}

/// A pod deleted before its container started: the container ends "ContainerStatusUnknown"
/// with 137, as kubelet's TerminatePod; a container that ended keeps its end.
#[test]
fn a_terminated_pod_has_no_container_without_an_end() {
    let p = pod("Always", &[], &["a", "b"]);
    let mut status = PodStatus {
        container_statuses: Some(vec![cstatus("a", waiting_state()), cstatus("b", ended(2))]),
        ..Default::default()
    };
    default_unterminated(&p, &mut status);
    let apps = status.container_statuses.as_ref().unwrap();
    let a = apps[0].state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!((a.reason.as_deref(), a.exit_code), (Some(STATUS_UNKNOWN), 137));
    assert_eq!(
        a.message.as_deref(),
        Some("The container could not be located when the pod was terminated")
    );
    assert_eq!(reason_of(&apps[1]), Some("Error"));
    assert_eq!(status.init_container_statuses, None);
}

/// Before the pod initialized, regular containers keep waiting; of the init containers only
/// those up to the last that started are ended (at least the first).
#[test]
fn an_uninitialized_pod_ends_only_the_init_containers_that_started() {
    let p = pod("Always", &["i1", "i2", "i3"], &["a"]);
    let running = ContainerState {
        running: Some(Default::default()),
        ..Default::default()
    };
    let mut status = PodStatus {
        init_container_statuses: Some(vec![
            cstatus("i1", ended(0)),
            cstatus("i2", running),
            cstatus("i3", waiting_state()),
        ]),
        container_statuses: Some(vec![cstatus("a", waiting("PodInitializing", None))]),
        ..Default::default()
    };
    default_unterminated(&p, &mut status);
    let inits = status.init_container_statuses.as_ref().unwrap();
    let reasons: Vec<_> = inits.iter().map(reason_of).collect();
    assert_eq!(
        reasons,
        [Some("Completed"), Some(STATUS_UNKNOWN), Some("ContainerCreating")]
    );
    assert_eq!(
        reason_of(&status.container_statuses.as_ref().unwrap()[0]),
        Some("PodInitializing")
    );

    // None started: the first is ended all the same.
    let mut none = PodStatus {
        init_container_statuses: Some(vec![cstatus("i1", waiting_state()), cstatus("i2", waiting_state())]),
        container_statuses: Some(vec![cstatus("a", waiting("PodInitializing", None))]),
        ..Default::default()
    };
    default_unterminated(&p, &mut none);
    let reasons: Vec<_> = none
        .init_container_statuses
        .as_ref()
        .unwrap()
        .iter()
        .map(reason_of)
        .collect();
    assert_eq!(reasons, [Some(STATUS_UNKNOWN), Some("ContainerCreating")]);

    // The last init container ended with 0: initialized, the waiting app container ends too.
    let mut done = PodStatus {
        init_container_statuses: Some(vec![
            cstatus("i1", ended(0)),
            cstatus("i2", ended(0)),
            cstatus("i3", ended(0)),
        ]),
        container_statuses: Some(vec![cstatus("a", waiting_state())]),
        ..Default::default()
    };
    default_unterminated(&p, &mut done);
    assert_eq!(
        reason_of(&done.container_statuses.as_ref().unwrap()[0]),
        Some(STATUS_UNKNOWN)
    );
}

fn obs(name: &str, role: ContainerRole, attempt: u32, state: RuntimeState, exit_code: i64) -> ObservedContainer {
    ObservedContainer {
        id: ContainerId(format!("{name}{attempt}")),
        pod_uid: PodUid("u".into()),
        pod_name: String::new(),
        pod_namespace: String::new(),
        name: name.into(),
        role,
        attempt,
        spec_hash: String::new(),
        backoff_step: 0,
        sandbox_id: Some(ContainerId("POD0".into())),
        state,
        exit_code,
        oom_killed: false,
        error: String::new(),
        created_at: Some(Time(at(10))),
        started_at: Some(Time(at(11))),
        finished_at: (state == RuntimeState::Exited).then(|| Time(at(12))),
        image: "img:1".into(),
        image_id: "sha256:1".into(),
        ip: (role == ContainerRole::Sandbox).then(|| "172.17.0.9".to_string()),
        secondary_ip: None,
        host_network: false,
        pod_grace_seconds: None,
        pid: None,
        cgroup_parent: String::new(),
        termination_message: String::new(),
        details_pending: false,
    }
}

fn status_of(p: &Pod, observed: &[ObservedContainer], waiting: &HashMap<String, WaitingReason>) -> PodStatus {
    generate(&StatusInput {
        pod: p,
        observed,
        waiting,
        probes: &ProbeResults::new(),
        host_ip: "10.0.0.1",
        previous: None,
        known_pod_ip: None,
        now: at(100),
        failure: None,
    })
}

fn condition(s: &PodStatus, kind: &str) -> String {
    s.conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == kind)
        .unwrap()
        .status
        .clone()
}

/// A pod the node stopped for its shutdown (kubelet's node shutdown manager): phase Failed,
/// reason `Terminated` with kubelet's message, and a `DisruptionTarget` condition (reason
/// `TerminationByKubelet`); a pod failed by its deadline has no such condition.
#[test]
fn node_shutdown_failure_reports_a_disruption_target() {
    let p = pod("Always", &[], &["a"]);
    let observed = [
        obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Exited, 0),
        obs("a", ContainerRole::App, 0, RuntimeState::Exited, 137),
    ];
    let none = HashMap::new();
    let with = |failure: &crate::deadline::PodFailure| {
        generate(&StatusInput {
            pod: &p,
            observed: &observed,
            waiting: &none,
            probes: &ProbeResults::new(),
            host_ip: "10.0.0.1",
            previous: None,
            known_pod_ip: None,
            now: at(100),
            failure: Some(failure),
        })
    };
    let s = with(&crate::deadline::PodFailure::node_shutdown());
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("Terminated"));
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was terminated in response to imminent node shutdown.")
    );
    let target = s
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("DisruptionTarget");
    assert_eq!(target.status, "True");
    assert_eq!(target.reason.as_deref(), Some("TerminationByKubelet"));
    assert_eq!(target.message, s.message);
    assert_eq!(condition(&s, "ContainersReady"), "False");

    let s = with(&crate::deadline::PodFailure::deadline_exceeded());
    assert!(s.conditions.unwrap().iter().all(|c| c.type_ != "DisruptionTarget"));

    // Still running while it stops: Failed, and never Ready at the same time.
    let running = [
        obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
        obs("a", ContainerRole::App, 0, RuntimeState::Running, 0),
    ];
    let s = generate(&StatusInput {
        pod: &p,
        observed: &running,
        waiting: &none,
        probes: &ProbeResults::new(),
        host_ip: "10.0.0.1",
        previous: None,
        known_pod_ip: None,
        now: at(100),
        failure: Some(&crate::deadline::PodFailure::node_shutdown()),
    });
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(condition(&s, "Ready"), "False");
    assert!(!s.container_statuses.unwrap()[0].ready);
}

/// kubelet's `volumeMounts` in the status of a container the runtime has: each mount, a
/// read-only one with recursiveReadOnly `Disabled` (Docker has no recursively read-only
/// mounts), a writable one without; none for a container not created yet.
#[test]
fn created_containers_report_their_volume_mounts() {
    use k8s_openapi::api::core::v1::VolumeMount;
    let mut p = pod("Always", &[], &["a", "b"]);
    let mount = |name: &str, path: &str, read_only: Option<bool>, rro: Option<&str>| VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only,
        recursive_read_only: rro.map(str::to_string),
        ..Default::default()
    };
    for c in &mut p.spec.as_mut().unwrap().containers {
        c.volume_mounts = Some(vec![
            mount("mnt", "/mnt-rro-if-possible", Some(true), Some("IfPossible")),
            mount("mnt", "/mnt-ro", Some(true), None),
            mount("mnt", "/mnt-rw", None, None),
        ]);
    }
    let observed = [
        obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
        obs("a", ContainerRole::App, 0, RuntimeState::Running, 0),
    ];
    let s = status_of(&p, &observed, &HashMap::new());
    let statuses = s.container_statuses.unwrap();
    let mounts = statuses[0].volume_mounts.as_ref().unwrap();
    let seen: Vec<(&str, Option<bool>, Option<&str>)> = mounts
        .iter()
        .map(|m| (m.mount_path.as_str(), m.read_only, m.recursive_read_only.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            ("/mnt-rro-if-possible", Some(true), Some("Disabled")),
            ("/mnt-ro", Some(true), Some("Disabled")),
            ("/mnt-rw", None, None),
        ]
    );
    assert_eq!(statuses[1].volume_mounts, None, "b was never created");
}

/// A running pod is Running and Ready, with the sandbox's IP.
#[test]
fn running_pod_is_running_and_ready() {
    let p = pod("Always", &[], &["a"]);
    let observed = [
        obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
        obs("a", ContainerRole::App, 0, RuntimeState::Running, 0),
    ];
    let s = status_of(&p, &observed, &HashMap::new());
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(s.pod_ip.as_deref(), Some("172.17.0.9"));
    for kind in [
        "Ready",
        "ContainersReady",
        "Initialized",
        "PodScheduled",
        "PodReadyToStartContainers",
    ] {
        assert_eq!(condition(&s, kind), "True", "{kind}");
    }
    let cs = &s.container_statuses.unwrap()[0];
    assert!(cs.ready);
    assert_eq!(cs.container_id.as_deref(), Some("docker://a0"));
}

/// The terminated state's message is Docker's error, then what the container wrote, joined
/// as kubelet joins them.
#[test]
fn the_termination_message_follows_the_runtimes_error() {
    let with = |error: &str, written: &str| {
        let mut c = obs("a", ContainerRole::App, 0, RuntimeState::Exited, 1);
        c.error = error.into();
        c.termination_message = written.into();
        terminated(&c).message
    };
    assert_eq!(with("", ""), None);
    assert_eq!(with("", "DONE").as_deref(), Some("DONE"));
    assert_eq!(with("oci error", "").as_deref(), Some("oci error"));
    assert_eq!(with("oci error", "DONE").as_deref(), Some("oci error: DONE"));
}

/// Phases for every restart policy and exit code, as kubelet's getPhase gives them.
/// A start failure's waiting reason shows only where the container will be started again:
/// under Never the failed instance stays terminated (and the pod Failed), as kubelet's
/// reason cache applies only where ShouldContainerBeRestarted.
#[test]
fn a_waiting_reason_shows_only_for_a_container_that_restarts() {
    let mut failed = obs("a", ContainerRole::App, 0, RuntimeState::Created, 127);
    failed.started_at = None;
    let observed = [obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0), failed];
    let waiting = HashMap::from([(
        "a".to_string(),
        WaitingReason {
            reason: "RunContainerError".into(),
            message: "exec: no such file".into(),
        },
    )]);
    let state = |policy: &str| {
        let s = status_of(&pod(policy, &[], &["a"]), &observed, &waiting);
        let state = s.container_statuses.unwrap()[0].state.clone().unwrap();
        (
            s.phase.unwrap(),
            state.waiting.and_then(|w| w.reason),
            state.terminated.map(|t| t.exit_code),
        )
    };
    assert_eq!(state("Never"), ("Failed".into(), None, Some(127)));
    assert_eq!(
        state("Always"),
        ("Running".into(), Some("RunContainerError".into()), None)
    );
    assert_eq!(
        state("OnFailure"),
        ("Running".into(), Some("RunContainerError".into()), None)
    );
}

/// A pod whose sandbox stopped before any status carried its IP keeps the IP it had, as
/// kubelet keeps a terminal pod's.
#[test]
fn a_finished_pod_keeps_the_ip_its_sandbox_had() {
    let p = pod("Never", &[], &["a"]);
    let observed = [
        obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Exited, 0),
        obs("a", ContainerRole::App, 0, RuntimeState::Exited, 0),
    ];
    let mut observed = observed.to_vec();
    observed[0].ip = None;
    let status = |known: Option<&str>| {
        generate(&StatusInput {
            pod: &p,
            observed: &observed,
            waiting: &HashMap::new(),
            probes: &ProbeResults::new(),
            host_ip: "10.0.0.1",
            previous: None,
            known_pod_ip: known,
            now: at(100),
            failure: None,
        })
    };
    assert_eq!(status(None).pod_ip, None);
    let s = status(Some("172.17.0.9"));
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    assert_eq!(s.pod_ip.as_deref(), Some("172.17.0.9"));
    assert_eq!(s.pod_ips.unwrap()[0].ip, "172.17.0.9");
}

/// kubelet reports the image of the instance that exists (the runtime's), so a spec image
/// changed under a finished init container or a terminating one does not show as if it ran.
#[test]
fn the_status_image_is_the_instances_until_a_new_one_runs() {
    let mut p = pod("Always", &[], &["a", "b"]);
    for c in p.spec.as_mut().unwrap().containers.iter_mut() {
        c.image = Some("img:2".into());
    }
    let observed = [
        obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
        obs("a", ContainerRole::App, 0, RuntimeState::Running, 0),
    ];
    let s = status_of(&p, &observed, &HashMap::new());
    let images: Vec<&str> = s
        .container_statuses
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.image.as_str())
        .collect();
    assert_eq!(images, ["img:1", "img:2"], "a runs img:1; b has no instance yet");
}

#[test]
fn phase_matrix_matches_kubelet() {
    for (policy, code, phase) in [
        ("Always", 0, "Running"),
        ("Always", 1, "Running"),
        ("OnFailure", 0, "Succeeded"),
        ("OnFailure", 1, "Running"),
        ("Never", 0, "Succeeded"),
        ("Never", 1, "Failed"),
    ] {
        let p = pod(policy, &[], &["a"]);
        let observed = [
            obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Exited, 0),
            obs("a", ContainerRole::App, 0, RuntimeState::Exited, code),
        ];
        let s = status_of(&p, &observed, &HashMap::new());
        assert_eq!(s.phase.as_deref(), Some(phase), "{policy} exit {code}");
        let t = s.container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap();
        assert_eq!(t.reason.as_deref(), Some(if code == 0 { "Completed" } else { "Error" }));
    }
}

/// A container in back-off waits with CrashLoopBackOff and shows its last termination.
#[test]
fn crash_looping_container_waits_with_last_state() {
    let p = pod("Always", &[], &["a"]);
    let observed = [
        obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
        obs("a", ContainerRole::App, 2, RuntimeState::Exited, 1),
    ];
    let waiting = HashMap::from([(
        "a".to_string(),
        WaitingReason {
            reason: "CrashLoopBackOff".into(),
            message: "back-off 20s".into(),
        },
    )]);
    let s = status_of(&p, &observed, &waiting);
    let cs = &s.container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        cs.state.as_ref().unwrap().waiting.as_ref().unwrap().reason.as_deref(),
        Some("CrashLoopBackOff")
    );
    assert_eq!(
        cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code,
        1
    );
    assert_eq!(cs.restart_count, 2);
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(condition(&s, "Ready"), "False");
}

/// While init containers run the pod is Pending, apps wait PodInitializing, and
/// Initialized is False; a failed init container fails a Never pod.
#[test]
fn init_containers_gate_the_pod() {
    let p = pod("Never", &["i"], &["a"]);
    let sb = obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0);
    let s = status_of(
        &p,
        &[sb.clone(), obs("i", ContainerRole::Init, 0, RuntimeState::Running, 0)],
        &HashMap::new(),
    );
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    assert_eq!(condition(&s, "Initialized"), "False");
    let app = &s.container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        app.state.as_ref().unwrap().waiting.as_ref().unwrap().reason.as_deref(),
        Some("PodInitializing")
    );
    let s = status_of(
        &p,
        &[sb, obs("i", ContainerRole::Init, 0, RuntimeState::Exited, 1)],
        &HashMap::new(),
    );
    assert_eq!(s.phase.as_deref(), Some("Failed"));
}

/// A pod whose image is missing is Pending with the worker's reason.
#[test]
fn missing_image_shows_the_waiting_reason() {
    let p = pod("Always", &[], &["a"]);
    let waiting = HashMap::from([(
        "a".to_string(),
        WaitingReason {
            reason: "ErrImageNeverPull".into(),
            message: "no image".into(),
        },
    )]);
    let s = status_of(
        &p,
        &[obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0)],
        &waiting,
    );
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let st = s.container_statuses.unwrap()[0].state.clone().unwrap();
    assert_eq!(st.waiting.unwrap().reason.as_deref(), Some("ErrImageNeverPull"));
}

/// OOM-killed containers report OOMKilled even with exit code 0.
#[test]
fn oom_killed_wins_over_exit_code() {
    let mut c = obs("a", ContainerRole::App, 0, RuntimeState::Exited, 137);
    c.oom_killed = true;
    assert_eq!(terminated(&c).reason.as_deref(), Some("OOMKilled"));
}

/// A sidecar counts for Initialized once started and for Ready while ready; it keeps a
/// Never pod Running while it runs beside a finished app container, and does not count once
/// it stopped (the pod Succeeded).
#[test]
fn sidecars_in_status_phase_and_conditions() {
    let mut p = pod("Never", &["s"], &["a"]);
    let sidecar = &mut p.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0];
    sidecar.restart_policy = Some("Always".into());
    sidecar.startup_probe = Some(Default::default());
    let sb = obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0);
    let s_running = obs("s", ContainerRole::Init, 0, RuntimeState::Running, 0);
    let none = HashMap::new();

    // Started only once its startup probe passed: until then the pod is Pending.
    let s = status_of(&p, &[sb.clone(), s_running.clone()], &none);
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let init = &s.init_container_statuses.as_ref().unwrap()[0];
    assert_eq!((init.started, init.ready), (Some(false), false));
    let c = s
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Initialized")
        .unwrap();
    assert_eq!(c.message.as_deref(), Some("containers with incomplete status: [s]"));
    assert_eq!(
        s.container_statuses.as_ref().unwrap()[0]
            .state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("PodInitializing")
    );

    let probes = ProbeResults::from([(
        ("s".to_string(), ProbeKind::Startup),
        (s_running.id.clone(), ProbeResult::Success),
    )]);
    let with = |observed: &[ObservedContainer]| {
        generate(&StatusInput {
            pod: &p,
            observed,
            waiting: &none,
            probes: &probes,
            host_ip: "10.0.0.1",
            previous: None,
            known_pod_ip: None,
            now: at(100),
            failure: None,
        })
    };
    let a_running = obs("a", ContainerRole::App, 0, RuntimeState::Running, 0);
    let s = with(&[sb.clone(), s_running.clone(), a_running]);
    assert_eq!(s.phase.as_deref(), Some("Running"));
    let init = &s.init_container_statuses.as_ref().unwrap()[0];
    assert_eq!((init.started, init.ready), (Some(true), true));
    assert_eq!(condition(&s, "Initialized"), "True");
    assert_eq!(condition(&s, "Ready"), "True");

    let a_done = obs("a", ContainerRole::App, 0, RuntimeState::Exited, 0);
    let s = with(&[sb.clone(), s_running, a_done.clone()]);
    assert_eq!(s.phase.as_deref(), Some("Running"), "the sidecar still runs");
    let s_stopped = obs("s", ContainerRole::Init, 0, RuntimeState::Exited, 143);
    let s = with(&[sb, s_stopped, a_done]);
    assert_eq!(
        s.phase.as_deref(),
        Some("Succeeded"),
        "a stopped sidecar does not count"
    );
    assert_eq!(condition(&s, "Initialized"), "True");
}

/// Ready waits for the readiness gates' conditions (set by others) to be True, with
/// kubelet's reason and messages; ContainersReady does not.
#[test]
fn readiness_gates_hold_ready_back() {
    let mut p = pod("Always", &[], &["a"]);
    p.spec.as_mut().unwrap().readiness_gates = Some(
        ["k8s.io/test-condition1", "k8s.io/test-condition2"]
            .iter()
            .map(|t| k8s_openapi::api::core::v1::PodReadinessGate {
                condition_type: t.to_string(),
            })
            .collect(),
    );
    let observed = [
        obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
        obs("a", ContainerRole::App, 0, RuntimeState::Running, 0),
    ];
    let ready = |p: &Pod| {
        let s = status_of(p, &observed, &HashMap::new());
        assert_eq!(condition(&s, "ContainersReady"), "True");
        let c = s.conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
        (c.status, c.reason, c.message)
    };
    assert_eq!(
            ready(&p),
            (
                "False".to_string(),
                Some("ReadinessGatesNotReady".to_string()),
                Some(r#"corresponding condition of pod readiness gate "k8s.io/test-condition1" does not exist., corresponding condition of pod readiness gate "k8s.io/test-condition2" does not exist."#.to_string())
            )
        );
    let set = |p: &mut Pod, one: &str, two: &str| {
        p.status = Some(PodStatus {
            conditions: Some(vec![
                PodCondition {
                    type_: "k8s.io/test-condition1".into(),
                    status: one.into(),
                    ..Default::default()
                },
                PodCondition {
                    type_: "k8s.io/test-condition2".into(),
                    status: two.into(),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        });
    };
    set(&mut p, "True", "False");
    assert_eq!(
        ready(&p).2.as_deref(),
        Some(r#"the status of pod readiness gate "k8s.io/test-condition2" is not "True", but False"#)
    );
    set(&mut p, "True", "True");
    assert_eq!(ready(&p), ("True".to_string(), None, None));
}

/// A sandbox on a dual-stack pod network: `podIPs` has both addresses, `podIP` the first; once
/// the sandbox is gone, the next status keeps both.
#[test]
fn a_dual_stack_pod_reports_both_addresses() {
    let p = pod("Never", &[], &["a"]);
    let mut observed = vec![
        obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
        obs("a", ContainerRole::App, 0, RuntimeState::Running, 0),
    ];
    observed[0].ip = Some("10.244.1.5".into());
    observed[0].secondary_ip = Some("fd00:10:244:1::5".into());
    let status = |observed: &[ObservedContainer], previous: Option<&PodStatus>| {
        generate(&StatusInput {
            pod: &p,
            observed,
            waiting: &HashMap::new(),
            probes: &ProbeResults::new(),
            host_ip: "10.0.0.1",
            previous,
            known_pod_ip: None,
            now: at(100),
            failure: None,
        })
    };
    let running = status(&observed, None);
    let ips = |s: &PodStatus| s.pod_ips.iter().flatten().map(|p| p.ip.clone()).collect::<Vec<_>>();
    assert_eq!(running.pod_ip.as_deref(), Some("10.244.1.5"));
    assert_eq!(ips(&running), ["10.244.1.5", "fd00:10:244:1::5"]);
    for c in &mut observed {
        c.state = RuntimeState::Exited;
        c.ip = None;
        c.secondary_ip = None;
    }
    let done = status(&observed, Some(&running));
    assert_eq!(done.pod_ip.as_deref(), Some("10.244.1.5"));
    assert_eq!(ips(&done), ["10.244.1.5", "fd00:10:244:1::5"]);
}
