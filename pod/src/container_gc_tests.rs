//! Table-driven tests after upstream's `TestContainerGC` and `TestSandboxGC`
//! (`pkg/kubelet/kuberuntime/kuberuntime_gc_test.go`): the same policies and expectations, on
//! this crate's container type.

use super::*;
use dockerlet_messages::ContainerId;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// "now" of every case: containers are created `age` seconds before it.
fn now() -> Timestamp {
    Timestamp::from_second(1_000_000).unwrap()
}

/// A container of pod `pod` named `name`, created `age` seconds ago, in `state`.
fn c(pod: &str, name: &str, attempt: u32, age: i64, state: RuntimeState) -> ObservedContainer {
    let labels = [(crate::labels::POD_UID, pod), (crate::labels::CONTAINER_NAME, name)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut o = crate::labels::parse(&labels).expect("labels").observed(
        ContainerId(format!("{pod}-{name}-{attempt}")),
        state,
        String::new(),
    );
    o.attempt = attempt;
    o.created_at = Some(Time(
        now()
            .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(age))
            .unwrap(),
    ));
    o.sandbox_id = Some(ContainerId(format!("{pod}-sandbox-0")));
    o
}

fn dead(pod: &str, name: &str, attempt: u32, age: i64) -> ObservedContainer {
    c(pod, name, attempt, age, RuntimeState::Exited)
}

fn sandbox(pod: &str, attempt: u32, age: i64, state: RuntimeState) -> ObservedContainer {
    let mut s = c(pod, "POD", attempt, age, state);
    s.id = ContainerId(format!("{pod}-sandbox-{attempt}"));
    s.role = ContainerRole::Sandbox;
    s.sandbox_id = None;
    s
}

fn policy(min_age: u64, per_container: i32, max: i32) -> GcPolicy {
    GcPolicy {
        min_age: Duration::from_secs(min_age),
        max_per_pod_container: per_container,
        max_containers: max,
    }
}

/// The IDs a pass removes, sorted; `gone` names the pods no source wants (`None`: sources not
/// ready).
fn removed(containers: &[ObservedContainer], policy: GcPolicy, gone: Option<&[&str]>) -> Vec<String> {
    let keep = gone.map(|gone| {
        let gone: Vec<String> = gone.iter().map(|s| s.to_string()).collect();
        move |uid: &PodUid| !gone.contains(&uid.0)
    });
    let keep_ref = keep.as_ref().map(|k| k as &dyn Fn(&PodUid) -> bool);
    let mut ids: Vec<String> = plan(containers, &policy, now(), keep_ref)
        .into_iter()
        .map(|r| r.container.id.0)
        .collect();
    ids.sort();
    ids
}

#[test]
fn container_gc_cases() {
    struct Case {
        description: &'static str,
        containers: Vec<ObservedContainer>,
        policy: GcPolicy,
        gone: Option<&'static [&'static str]>,
        removed: Vec<&'static str>,
    }
    let cases = vec![
        Case {
            description: "no containers are removed when neither limit is set",
            containers: vec![dead("p", "a", 0, 60), dead("p", "a", 1, 50), dead("p", "a", 2, 40)],
            policy: policy(0, -1, -1),
            gone: Some(&[]),
            removed: vec![],
        },
        Case {
            description: "one dead instance per container is kept by default",
            containers: vec![dead("p", "a", 0, 60), dead("p", "a", 1, 50), dead("p", "a", 2, 40)],
            policy: GcPolicy::default(),
            gone: Some(&[]),
            removed: vec!["p-a-0", "p-a-1"],
        },
        Case {
            description: "zero per container keeps the newest dead instance of a kept pod (the deviation)",
            containers: vec![dead("p", "a", 0, 60), dead("p", "a", 1, 50)],
            policy: policy(0, 0, -1),
            gone: Some(&[]),
            removed: vec!["p-a-0"],
        },
        Case {
            description: "a running container is never removed",
            containers: vec![
                c("p", "a", 2, 10, RuntimeState::Running),
                dead("p", "a", 1, 50),
                dead("p", "a", 0, 60),
            ],
            policy: policy(0, 0, 0),
            gone: Some(&["p"]),
            removed: vec!["p-a-0", "p-a-1"],
        },
        Case {
            description: "containers younger than the minimum age are kept",
            containers: vec![dead("p", "a", 0, 60), dead("p", "a", 1, 50), dead("p", "a", 2, 5)],
            policy: policy(30, 0, -1),
            gone: Some(&["p"]),
            removed: vec!["p-a-0", "p-a-1"],
        },
        Case {
            description: "a container being started (created, young) is left to its worker",
            containers: vec![
                c("p", "a", 1, 10, RuntimeState::Created),
                c("p", "a", 0, 600, RuntimeState::Created),
            ],
            policy: policy(0, 0, -1),
            gone: Some(&["p"]),
            removed: vec!["p-a-0"],
        },
        Case {
            description: "the newest instances are kept, by creation time not attempt",
            containers: vec![dead("p", "a", 5, 60), dead("p", "a", 1, 50), dead("p", "a", 0, 40)],
            policy: policy(0, 2, -1),
            gone: Some(&[]),
            removed: vec!["p-a-5"],
        },
        Case {
            description: "every dead container of a pod that is gone is removed",
            containers: vec![
                dead("gone", "a", 0, 60),
                dead("gone", "b", 0, 60),
                dead("live", "a", 0, 60),
            ],
            policy: GcPolicy::default(),
            gone: Some(&["gone"]),
            removed: vec!["gone-a-0", "gone-b-0"],
        },
        Case {
            description: "no pod counts as gone until every source has delivered",
            containers: vec![dead("gone", "a", 0, 60), dead("gone", "b", 0, 60)],
            policy: GcPolicy::default(),
            gone: None,
            removed: vec![],
        },
        Case {
            description: "the node cap: each unit at max(1, max / units) first",
            containers: vec![
                dead("p", "a", 0, 60),
                dead("p", "a", 1, 50),
                dead("p", "b", 0, 60),
                dead("p", "b", 1, 50),
            ],
            policy: policy(0, -1, 2),
            gone: Some(&[]),
            removed: vec!["p-a-0", "p-b-0"],
        },
        Case {
            description: "the node cap never takes a container's last dead instance (the deviation)",
            containers: vec![
                dead("p", "a", 0, 60),
                dead("p", "a", 1, 30),
                dead("p", "b", 0, 50),
                dead("q", "a", 0, 40),
            ],
            policy: policy(0, -1, 1),
            gone: Some(&[]),
            removed: vec!["p-a-0"],
        },
    ];
    for case in cases {
        assert_eq!(
            removed(&case.containers, case.policy, case.gone),
            case.removed,
            "{}",
            case.description
        );
    }
}

#[test]
fn sandbox_gc_cases() {
    let mut referred = dead("p", "a", 0, 60);
    referred.sandbox_id = Some(ContainerId("p-sandbox-0".into()));
    /// (description, containers, pods gone, removed)
    type Case = (
        &'static str,
        Vec<ObservedContainer>,
        Option<&'static [&'static str]>,
        Vec<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "a live pod keeps its newest sandbox, dead or not",
            vec![
                sandbox("p", 1, 10, RuntimeState::Exited),
                sandbox("p", 0, 60, RuntimeState::Exited),
            ],
            Some(&[]),
            vec!["p-sandbox-0"],
        ),
        (
            "a running sandbox is never removed",
            vec![sandbox("p", 0, 60, RuntimeState::Running)],
            Some(&["p"]),
            vec![],
        ),
        (
            "a gone pod loses every inactive sandbox",
            vec![
                sandbox("p", 1, 10, RuntimeState::Exited),
                sandbox("p", 0, 60, RuntimeState::Exited),
            ],
            Some(&["p"]),
            vec!["p-sandbox-0", "p-sandbox-1"],
        ),
        (
            "a sandbox a kept container refers to stays",
            vec![
                sandbox("p", 1, 10, RuntimeState::Exited),
                sandbox("p", 0, 60, RuntimeState::Exited),
                referred.clone(),
            ],
            Some(&[]),
            vec![],
        ),
        (
            "a sandbox whose containers go in the same pass goes too",
            vec![sandbox("p", 0, 60, RuntimeState::Exited), referred],
            Some(&["p"]),
            vec!["p-a-0", "p-sandbox-0"],
        ),
    ];
    for (description, containers, gone, expected) in cases {
        assert_eq!(
            removed(&containers, GcPolicy::default(), gone),
            expected,
            "{description}"
        );
    }
}

#[test]
fn a_sync_keeps_max_per_container_dead_instances_and_the_running_one() {
    assert_eq!(GcPolicy::default().instances_kept_by_sync(), 2);
    assert_eq!(
        policy(0, 0, -1).instances_kept_by_sync(),
        2,
        "at least one dead (kubelet's minDeadContainerInPod)"
    );
    assert_eq!(policy(0, 3, -1).instances_kept_by_sync(), 4);
    assert_eq!(policy(0, -1, -1).instances_kept_by_sync(), usize::MAX);
}
