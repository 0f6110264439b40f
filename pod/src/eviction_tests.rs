//! Table tests after upstream's `pkg/kubelet/eviction/helpers_test.go` (`TestOrderedByExceedsRequestMemory`,
//! `TestOrderedByPriority`, `TestOrderedbyMemory`, `TestOrderedByPid`, `TestEvictionMessage`) and
//! `eviction_manager_test.go` (`TestAdmitUnderNodeConditions`, `TestCriticalPodsAreNotEvicted`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn candidate(uid: &str, priority: i32, request: i64, usage: Option<i64>) -> Candidate {
    Candidate {
        uid: uid.to_string(),
        priority,
        request,
        usage,
        containers: Vec::new(),
    }
}

fn order(mut candidates: Vec<Candidate>, starved: Starved) -> Vec<String> {
    rank(&mut candidates, starved);
    candidates.into_iter().map(|c| c.uid).collect()
}

const MI: i64 = 1 << 20;

#[test]
fn memory_ranking_puts_pods_over_their_request_first_then_low_priority_then_most_over() {
    let cases: Vec<(&str, Vec<Candidate>, Vec<&str>)> = vec![
        (
            "exceeding the request comes before priority",
            vec![
                candidate("within-low-priority", -10, 200 * MI, Some(100 * MI)),
                candidate("over-high-priority", 10, 100 * MI, Some(150 * MI)),
            ],
            vec!["over-high-priority", "within-low-priority"],
        ),
        (
            "then lower priority first",
            vec![
                candidate("over-high", 10, 0, Some(100 * MI)),
                candidate("over-low", -10, 0, Some(10 * MI)),
            ],
            vec!["over-low", "over-high"],
        ),
        (
            "then the most above its request first",
            vec![
                candidate("a-little", 0, 100 * MI, Some(110 * MI)),
                candidate("a-lot", 0, 100 * MI, Some(300 * MI)),
                candidate("best-effort", 0, 0, Some(150 * MI)),
            ],
            vec!["a-lot", "best-effort", "a-little"],
        ),
        (
            "a pod without stats first",
            vec![
                candidate("measured", -10, 0, Some(500 * MI)),
                candidate("unmeasured", 10, 0, None),
            ],
            vec!["unmeasured", "measured"],
        ),
        (
            "a BestEffort pod before a Burstable pod within its request",
            vec![
                candidate("burstable", 0, 200 * MI, Some(50 * MI)),
                candidate("best-effort", 0, 0, Some(20 * MI)),
            ],
            vec!["best-effort", "burstable"],
        ),
    ];
    for (description, candidates, expected) in cases {
        assert_eq!(order(candidates, Starved::Memory), expected, "{description}");
    }
}

#[test]
fn pid_ranking_is_priority_then_processes() {
    let ranked = order(
        vec![
            candidate("few-low", -1, 0, Some(10)),
            candidate("many-high", 5, 0, Some(5000)),
            candidate("many-low", -1, 0, Some(5000)),
        ],
        Starved::Pids,
    );
    assert_eq!(ranked, vec!["many-low", "few-low", "many-high"]);
}

#[test]
fn messages_are_kubelets_sentences() {
    let containers = vec![
        ContainerUse {
            name: "mem-eater".into(),
            usage: 3_694_056 * 1024,
            request: 100 * MI,
        },
        ContainerUse {
            name: "modest".into(),
            usage: 10 * MI,
            request: 100 * MI,
        },
    ];
    // The observed example of node-managers.md §1.11.
    assert_eq!(
        message(Starved::Memory, Some((100 * MI, 58_472 * 1024)), &containers),
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 58472Ki. \
         Container mem-eater was using 3694056Ki, request is 100Mi, has larger consumption of memory. "
    );
    assert_eq!(
        message(Starved::Pids, Some((100, 20)), &containers),
        "The node was low on resource: pids. Threshold quantity: 100, available: 20. "
    );
    assert_eq!(
        message(Starved::EphemeralStorage, None, &[]),
        "The node was low on resource: ephemeral-storage. "
    );
    assert_eq!(
        offending(&containers, Starved::Memory),
        ("mem-eater".into(), "3694056Ki".into())
    );
}

#[test]
fn quantities_print_in_canonical_form() {
    for (value, binary, text) in [
        (100 * MI, true, "100Mi"),
        (1_288_490_188, true, "1288490188"),
        (0, true, "0"),
        (1 << 30, true, "1Gi"),
        (1000, false, "1k"),
        (1500, false, "1500"),
        (100, false, "100"),
    ] {
        assert_eq!(format_quantity(value, binary), text, "{value}");
    }
}

fn pod(qos: &str, annotations: &[(&str, &str)], priority: Option<i32>) -> Pod {
    let resources = match qos {
        "BestEffort" => None,
        _ => Some(ResourceRequirements {
            requests: Some(BTreeMap::from([("memory".to_string(), Quantity("100Mi".into()))])),
            ..Default::default()
        }),
    };
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                resources,
                ..Default::default()
            }],
            priority,
            ..Default::default()
        }),
        status: None,
    }
}

const API: (&str, &str) = ("kubernetes.io/config.source", "api");

#[test]
fn static_mirror_and_system_critical_pods_are_critical() {
    assert!(!is_critical(&pod("BestEffort", &[API], None)));
    assert!(is_critical(&pod(
        "BestEffort",
        &[("kubernetes.io/config.source", "file")],
        None
    )));
    assert!(is_critical(&pod(
        "BestEffort",
        &[API, ("kubernetes.io/config.mirror", "h")],
        None
    )));
    assert!(is_critical(&pod("BestEffort", &[API], Some(SYSTEM_CRITICAL_PRIORITY))));
    assert!(!is_critical(&pod(
        "BestEffort",
        &[API],
        Some(SYSTEM_CRITICAL_PRIORITY - 1)
    )));
}

#[test]
fn admission_under_pressure_is_kubelets() {
    let best_effort = pod("BestEffort", &[API], None);
    let burstable = pod("Burstable", &[API], None);
    let critical = pod("BestEffort", &[("kubernetes.io/config.source", "file")], None);
    let mut tolerating = best_effort.clone();
    tolerating.spec.as_mut().unwrap().tolerations = Some(vec![Toleration {
        key: Some(MEMORY_PRESSURE_TAINT.into()),
        operator: Some("Exists".into()),
        effect: Some("NoSchedule".into()),
        ..Default::default()
    }]);
    let memory = [Pressure::Memory];
    let disk_and_memory = [Pressure::Memory, Pressure::Disk];
    assert!(admit(&best_effort, &[]).is_ok());
    assert!(admit(&burstable, &memory).is_ok());
    assert!(admit(&tolerating, &memory).is_ok());
    assert!(admit(&critical, &disk_and_memory).is_ok());
    let refused = admit(&best_effort, &memory).unwrap_err();
    assert_eq!(refused.reason, "Evicted");
    assert_eq!(refused.message, "The node had condition: [MemoryPressure]. ");
    let refused = admit(&burstable, &disk_and_memory).unwrap_err();
    assert_eq!(
        refused.message,
        "The node had condition: [DiskPressure MemoryPressure]. "
    );
    assert!(
        admit(&tolerating, &[Pressure::Pid]).is_err(),
        "tolerations do not help under PIDPressure"
    );
}

/// A summary entry from the Summary API's JSON (what `/stats/summary` serves).
fn pod_stats(value: serde_json::Value) -> PodStats {
    serde_json::from_value(value).expect("pod stats")
}

const T: &str = "2026-12-06T00:00:00Z";

fn limited_pod(yaml: &str) -> Pod {
    let (value, source) = crate::decode::yaml_tree(yaml).expect("yaml");
    crate::decode::decode_pod(value, Some(&source), &[]).expect("a pod")
}

/// kubelet's local-storage checks, in its order and words (`eviction_manager.go`
/// `emptyDirLimitEviction`, `podEphemeralStorageLimitEviction`,
/// `containerEphemeralStorageLimitEviction`; e2e `LocalStorageCapacityIsolationEviction`).
#[test]
fn local_storage_limits_are_kubelets() {
    let pod = limited_pod(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: app\n    image: i\n    \
         resources: {limits: {ephemeral-storage: 100Mi}}\n  volumes:\n  - name: scratch\n    emptyDir: {sizeLimit: 10Mi}\n  \
         - name: ram\n    emptyDir: {medium: Memory, sizeLimit: 1Mi}\n",
    );
    let stats = |scratch: u64, ram: u64, rootfs: u64, logs: u64, pod_total: u64| {
        pod_stats(serde_json::json!({
            "podRef": {"name": "p", "namespace": "default", "uid": "u"},
            "startTime": T,
            "containers": [{"name": "app", "startTime": T,
                "rootfs": {"time": T, "usedBytes": rootfs}, "logs": {"time": T, "usedBytes": logs}}],
            "volume": [{"name": "scratch", "time": T, "usedBytes": scratch},
                       {"name": "ram", "time": T, "usedBytes": ram}],
            "ephemeral-storage": {"time": T, "usedBytes": pod_total},
        }))
    };
    let mib = 1 << 20;
    assert!(has_storage_limits(&pod));
    assert_eq!(
        storage_violation(&pod, &stats(mib, 5 * mib, mib, mib, 3 * mib)),
        None,
        "the memory emptyDir is tmpfs"
    );
    assert_eq!(
        storage_violation(&pod, &stats(11 * mib, 0, mib, mib, 13 * mib)),
        Some(StorageViolation {
            signal: "emptydirfs.limit",
            message: "Usage of EmptyDir volume \"scratch\" exceeds the limit \"10Mi\". ".into(),
        })
    );
    assert_eq!(
        storage_violation(&pod, &stats(mib, 0, 50 * mib, 10 * mib, 101 * mib)),
        Some(StorageViolation {
            signal: "ephemeralpodfs.limit",
            message: "Pod ephemeral local storage usage exceeds the total limit of containers 100Mi. ".into(),
        })
    );
    assert_eq!(
        storage_violation(&pod, &stats(0, 0, 95 * mib, 10 * mib, 99 * mib)),
        Some(StorageViolation {
            signal: "ephemeralcontainerfs.limit",
            message: "Container app exceeded its local ephemeral storage limit \"100Mi\". ".into(),
        })
    );
    let unlimited = limited_pod(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: app\n    image: i\n",
    );
    assert!(!has_storage_limits(&unlimited));
    assert_eq!(
        storage_violation(&unlimited, &stats(100 * mib, 0, 100 * mib, 0, 300 * mib)),
        None
    );
}
