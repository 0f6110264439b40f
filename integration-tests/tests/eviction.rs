//! Node-pressure eviction on real Docker, in API mode against the test API server, after
//! upstream's `test/e2e_node/eviction_test.go` (`PriorityMemoryEvictionOrdering`,
//! `runEvictionTest`): the threshold is set relative to what this machine has free, a pod
//! that allocates memory pushes the node under it, and the eviction manager evicts by kubelet's
//! ranking — the BestEffort pod using memory before the Burstable pod within its request; a
//! static pod, critical, never. The evicted pod: phase Failed, reason `Evicted`, kubelet's
//! message, a `DisruptionTarget` condition (`TerminationByKubelet`), an `Evicted` event.
//!
//! The signal is the machine's own (`memory.available` = MemFree + Inactive(file), read as the
//! agent reads it), so other tests running at the same time move it a little: the margins are
//! hundreds of MiB on either side.

use std::time::Duration;

use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use dockerlet_integration_tests::{holds_for, wait_for, Agent, ManifestDir, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::Value;

/// Held by each test that allocates hundreds of MiB of the machine's memory or sets a threshold
/// relative to what is free: run together, one test's hog would push another's node under its
/// threshold (and evict a pod that must stay).
static MACHINE_MEMORY: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn machine_memory() -> std::sync::MutexGuard<'static, ()> {
    MACHINE_MEMORY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `memory.available` as the agent computes it: MemFree + Inactive(file), in MiB.
fn memory_available_mib() -> i64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("/proc/meminfo");
    let kib = |key: &str| -> i64 {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{key} in /proc/meminfo"))
    };
    (kib("MemFree") + kib("Inactive(file)")) / 1024
}

fn api_server() -> ApiServer {
    ApiServer::start_with(ApiServerConfig::default()).expect("start the API server")
}

fn start(name: &str, api: &ApiServer, manifests: &ManifestDir, threshold_mib: i64) -> Agent {
    let args = [
        "--kubeconfig".to_string(),
        api.kubeconfig_path().display().to_string(),
        "--node-status-update-frequency".into(),
        "1s".into(),
        "--eviction-hard".into(),
        format!("memory.available<{threshold_mib}Mi"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Agent::start(name, manifests.path(), &args)
}

/// A pod on `node` whose one container runs `command`, with a memory request when given.
fn pod_yaml(name: &str, node: &str, request: Option<&str>, command: &str) -> String {
    let resources = request.map_or(String::new(), |r| {
        format!("\n    resources: {{requests: {{memory: {r}}}}}")
    });
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  nodeName: {node}
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "{command}"]{resources}
"#
    )
}

const SLEEPER: &str = "trap 'exit 0' TERM; sleep 3600 & wait";

fn create(api: &ApiServer, dir: &std::path::Path, name: &str, yaml: &str) {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).expect("write pod manifest");
    api.kubectl_ok(&["create", "-f", path.to_str().expect("utf-8 path")]);
}

fn phase(api: &ApiServer, name: &str) -> Option<String> {
    api.get("pods", "default", name)?["status"]["phase"]
        .as_str()
        .map(String::from)
}

/// The pod `name` once its status says `Evicted`.
fn evicted(api: &ApiServer, name: &str, timeout: Duration) -> Value {
    wait_for(&format!("{name} evicted"), timeout, || {
        let pod = api.get("pods", "default", name)?;
        (pod["status"]["reason"] == "Evicted").then_some(pod)
    })
}

/// The agent's `/metrics` once `kubelet_evictions{eviction_signal="<signal>"}` is 1 (counted
/// when the evicted pod has stopped).
fn evictions_counted(agent: &Agent, signal: &str) -> String {
    let url = format!("http://127.0.0.1:{}/metrics", agent.ports().read_only);
    let counted = format!("kubelet_evictions{{eviction_signal=\"{signal}\"}} 1");
    wait_for(&format!("{counted} on /metrics"), CHANGE_TIMEOUT, || {
        let metrics = agent.get(&url).map(|(_, body)| body).ok()?;
        metrics.contains(&counted).then_some(metrics)
    })
}

/// A static pod `static` (BestEffort: it would rank first, were it not critical).
fn static_pod() -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: static}}\nspec:\n  containers:\n  - name: app\n    \
         image: dockerlet.local/busybox:1\n    command: [\"sh\", \"-c\", \"{SLEEPER}\"]\n"
    )
}

/// The hog allocates this many MB and keeps them (a shell variable), BestEffort.
const HOG_MB: i64 = 2500;
/// The threshold sits this far below what the machine had free before the hog (2000 MiB: after
/// the hog is killed, `memory.available` has come back only partly by the next reading on a busy
/// machine, and at 600 or 1000 MiB that part evicted the burstable pod too).
const MARGIN_MIB: i64 = 2000;

#[test]
fn a_best_effort_memory_hog_is_evicted_before_a_burstable_pod_and_a_static_pod_stays() {
    let _memory = machine_memory();
    let api = api_server();
    let manifests = ManifestDir::new();
    let threshold = memory_available_mib() - MARGIN_MIB;
    let dir = tempfile::tempdir().unwrap();
    manifests.write("static.yaml", &static_pod());
    let agent = start("evict-order", &api, &manifests, threshold);
    let node = agent.node().to_string();
    create(
        &api,
        dir.path(),
        "burstable",
        &pod_yaml("burstable", &node, Some("200Mi"), SLEEPER),
    );
    wait_for("the burstable pod Running", POD_START_TIMEOUT, || {
        (phase(&api, "burstable").as_deref() == Some("Running")).then_some(())
    });
    agent.wait_for_running("static");
    let hog = format!("x=$(head -c {HOG_MB}000000 /dev/zero | tr '\\\\0' a); {SLEEPER}");
    create(&api, dir.path(), "hog", &pod_yaml("hog", &node, None, &hog));
    let evicted = evicted(&api, "hog", POD_START_TIMEOUT + CHANGE_TIMEOUT);
    assert_eq!(
        phase(&api, "burstable").as_deref(),
        Some("Running"),
        "the burstable pod is not evicted first"
    );
    let status = &evicted["status"];
    assert_eq!(status["phase"], "Failed");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("The node was low on resource: memory. Threshold quantity: "),
        "{message}"
    );
    assert!(message.contains("Container app was using"), "{message}");
    let disruption = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "DisruptionTarget")
        .unwrap_or_else(|| panic!("a DisruptionTarget condition: {status}"));
    assert_eq!(
        (&disruption["status"], &disruption["reason"]),
        (&Value::from("True"), &Value::from("TerminationByKubelet"))
    );
    let events = api.kubectl_ok(&["get", "events", "-n", "default", "-o", "json"]);
    let events: Value = serde_json::from_str(&events).unwrap();
    let evicted_events: Vec<&Value> = events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == "Evicted" && e["involvedObject"]["name"] == "hog")
        .collect();
    assert_eq!(evicted_events.len(), 1, "one Evicted event: {events}");
    // kubelet's AnnotatedEventf, as upstream's eviction e2e reads it.
    let annotations = &evicted_events[0]["metadata"]["annotations"];
    assert_eq!(annotations["starved_resource"], "memory", "{annotations}");
    assert_eq!(annotations["offending_containers"], "app", "{annotations}");
    let usage = annotations["offending_containers_usage"].as_str().unwrap_or_default();
    assert!(
        usage.ends_with("Ki") || usage.ends_with("Mi") || usage.parse::<u64>().is_ok_and(|u| u > 0),
        "{usage:?}"
    );
    // The hog's memory is back: nothing else goes.
    holds_for(
        "the burstable and static pods running on",
        Duration::from_secs(5),
        || {
            let static_running = agent
                .pod("static")
                .is_some_and(|p| p.status.and_then(|s| s.phase).as_deref() == Some("Running"));
            match (phase(&api, "burstable").as_deref(), static_running) {
                (Some("Running"), true) => Ok(()),
                other => Err(format!("burstable, static: {other:?}")),
            }
        },
    );
    evictions_counted(&agent, "memory.available");
}

/// Under MemoryPressure a BestEffort pod is refused (reason `Evicted`, "Pod was rejected: The
/// node had condition: [MemoryPressure]. "), and the static pod, critical, is never evicted
/// however long the pressure lasts.
#[test]
fn under_memory_pressure_a_best_effort_pod_is_refused_and_a_static_pod_stays() {
    let api = api_server();
    let manifests = ManifestDir::new();
    manifests.write("static.yaml", &static_pod());
    // Far above what is free: pressure from the first reading on.
    let agent = start("evict-admit", &api, &manifests, memory_available_mib() + 4096);
    let node = agent.node().to_string();
    let dir = tempfile::tempdir().unwrap();
    wait_for("MemoryPressure on the Node", CHANGE_TIMEOUT, || {
        let n = api.get("nodes", "", &node)?;
        n["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "MemoryPressure" && c["status"] == "True")
            .then_some(())
    });
    create(
        &api,
        dir.path(),
        "best-effort",
        &pod_yaml("best-effort", &node, None, SLEEPER),
    );
    let refused = wait_for("the BestEffort pod refused", CHANGE_TIMEOUT, || {
        let pod = api.get("pods", "default", "best-effort")?;
        (pod["status"]["phase"] == "Failed").then_some(pod)
    });
    assert_eq!(refused["status"]["reason"], "Evicted");
    assert_eq!(
        refused["status"]["message"],
        "Pod was rejected: The node had condition: [MemoryPressure]. "
    );
    agent.wait_for_running("static");
    holds_for(
        "the static pod running under pressure",
        Duration::from_secs(5),
        || match agent.pod("static").and_then(|p| p.status?.phase) {
            Some(p) if p == "Running" => Ok(()),
            other => Err(format!("static: {other:?}")),
        },
    );
}

/// A pod whose emptyDir grows over its `sizeLimit`, and one whose container writes more than
/// its `ephemeral-storage` limit into its writable layer, are evicted with kubelet's messages
/// and no `DisruptionTarget` condition (upstream's `LocalStorageCapacityIsolationEviction`); a
/// pod within its limits stays.
#[test]
fn pods_over_their_local_storage_limits_are_evicted_with_kubelets_messages() {
    let api = api_server();
    let manifests = ManifestDir::new();
    // No threshold near: only the limits evict.
    let agent = start("evict-storage", &api, &manifests, 1);
    let node = agent.node().to_string();
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, mb: u32| format!("dd if=/dev/zero of={path} bs=1048576 count={mb}; {SLEEPER}");
    let volume_pod = |name: &str, mb: u32| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  nodeName: {node}\n  restartPolicy: Never\n  \
             terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: dockerlet.local/busybox:1\n    \
             command: [\"sh\", \"-c\", \"{}\"]\n    volumeMounts: [{{name: scratch, mountPath: /scratch}}]\n  volumes:\n  \
             - name: scratch\n    emptyDir: {{sizeLimit: 10Mi}}\n",
            write("/scratch/f", mb)
        )
    };
    create(&api, dir.path(), "over-volume", &volume_pod("over-volume", 20));
    create(&api, dir.path(), "within-volume", &volume_pod("within-volume", 2));
    let rootfs_pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: over-rootfs}}\nspec:\n  nodeName: {node}\n  restartPolicy: Never\n  \
         terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: dockerlet.local/busybox:1\n    \
         command: [\"sh\", \"-c\", \"{}\"]\n    resources: {{limits: {{ephemeral-storage: 10Mi}}}}\n  - name: helper\n    \
         image: dockerlet.local/busybox:1\n    command: [\"sh\", \"-c\", \"{SLEEPER}\"]\n",
        write("/f", 20)
    );
    create(&api, dir.path(), "over-rootfs", &rootfs_pod);
    for (pod, message) in [
        (
            "over-volume",
            "Usage of EmptyDir volume \"scratch\" exceeds the limit \"10Mi\". ",
        ),
        (
            "over-rootfs",
            "Container app exceeded its local ephemeral storage limit \"10Mi\". ",
        ),
    ] {
        let evicted = wait_for(&format!("{pod} evicted"), POD_START_TIMEOUT + CHANGE_TIMEOUT, || {
            let p = api.get("pods", "default", pod)?;
            (p["status"]["reason"] == "Evicted").then_some(p)
        });
        assert_eq!(evicted["status"]["phase"], "Failed", "{pod}");
        assert_eq!(evicted["status"]["message"], message, "{pod}");
        let disruption = evicted["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "DisruptionTarget");
        assert!(!disruption, "{pod}: a local-storage eviction adds no DisruptionTarget");
    }
    holds_for(
        "the pod within its limit running",
        Duration::from_secs(3),
        || match phase(&api, "within-volume").as_deref() {
            Some("Running") => Ok(()),
            other => Err(format!("within-volume: {other:?}")),
        },
    );
}

/// A soft threshold turns MemoryPressure on at once but evicts only once it has been met for
/// its grace period (`--eviction-soft-grace-period`); the pod is evicted all the same, with
/// kubelet's message (upstream's `LocalStorageSoftEviction`, here on memory).
#[test]
fn a_soft_threshold_evicts_only_after_its_grace_period() {
    let api = api_server();
    let manifests = ManifestDir::new();
    let soft = format!("memory.available<{}Mi", memory_available_mib() + 4096);
    let args = [
        "--kubeconfig".to_string(),
        api.kubeconfig_path().display().to_string(),
        "--node-status-update-frequency".into(),
        "1s".into(),
        "--eviction-hard".into(),
        "memory.available<1Mi".into(),
        "--eviction-soft".into(),
        soft,
        "--eviction-soft-grace-period".into(),
        "memory.available=15s".into(),
        "--eviction-max-pod-grace-period".into(),
        "2".into(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::start("evict-soft", manifests.path(), &args);
    let node = agent.node().to_string();
    wait_for("MemoryPressure on the Node", CHANGE_TIMEOUT, || {
        let n = api.get("nodes", "", &node)?;
        n["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "MemoryPressure" && c["status"] == "True")
            .then_some(())
    });
    let pressure_seen = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    // Burstable: admitted under MemoryPressure.
    create(
        &api,
        dir.path(),
        "soft-victim",
        &pod_yaml("soft-victim", &node, Some("10Mi"), SLEEPER),
    );
    let evicted = wait_for("the pod evicted", POD_START_TIMEOUT, || {
        let p = api.get("pods", "default", "soft-victim")?;
        (p["status"]["reason"] == "Evicted").then_some(p)
    });
    let waited = pressure_seen.elapsed();
    assert!(
        waited >= Duration::from_secs(13),
        "evicted {waited:?} after MemoryPressure: not before the 15 s grace period"
    );
    let message = evicted["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("The node was low on resource: memory. Threshold quantity: "),
        "{message}"
    );
}

/// `MemTotal` in MiB, the node's memory capacity.
fn memory_capacity_mib() -> i64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("/proc/meminfo");
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<i64>().ok())
        .expect("MemTotal")
        / 1024
}

/// `allocatableMemory.available` (kubelet's `addAllocatableThresholds`: with `pods` enforced on
/// allocatable, the hard `memory.available` threshold also holds for the pods' cgroup): the
/// node has plenty of memory free, but its pods' cgroup, limited to 1500 Mi by a system
/// reservation of the rest, holds a BestEffort pod using 1100 MB — less than 500 Mi of it is
/// left, so the pod is evicted for memory, counted under that signal.
#[test]
fn the_pods_cgroup_running_low_evicts_under_allocatable_memory() {
    let _memory = machine_memory();
    const KUBEPODS_MIB: i64 = 1500;
    let api = api_server();
    let manifests = ManifestDir::new();
    let dir = tempfile::tempdir().unwrap();
    let reserved = memory_capacity_mib() - KUBEPODS_MIB;
    assert!(memory_available_mib() > 2600, "this test needs 2.6 GiB free");
    let args = [
        "--kubeconfig".to_string(),
        api.kubeconfig_path().display().to_string(),
        "--node-status-update-frequency".into(),
        "1s".into(),
        "--eviction-hard".into(),
        "memory.available<500Mi".into(),
        "--system-reserved".into(),
        format!("memory={reserved}Mi"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::start("evict-allocatable", manifests.path(), &args);
    let node = agent.node().to_string();
    create(
        &api,
        dir.path(),
        "quiet",
        &pod_yaml("quiet", &node, Some("10Mi"), SLEEPER),
    );
    wait_for("the quiet pod Running", POD_START_TIMEOUT, || {
        (phase(&api, "quiet").as_deref() == Some("Running")).then_some(())
    });
    // dd fills its 1100 MB buffer, then blocks writing it into a pipe nobody reads: the memory
    // stays touched, with no shell doubling it on the way.
    let hog = "dd if=/dev/zero bs=1100M count=1 | sleep 3600";
    create(&api, dir.path(), "hog", &pod_yaml("hog", &node, None, hog));
    let evicted = evicted(&api, "hog", POD_START_TIMEOUT + CHANGE_TIMEOUT);
    let message = evicted["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("The node was low on resource: memory. Threshold quantity: 500Mi, available: "),
        "{message}"
    );
    assert_eq!(
        phase(&api, "quiet").as_deref(),
        Some("Running"),
        "the pod within its request stays"
    );
    let metrics = evictions_counted(&agent, "allocatableMemory.available");
    assert!(
        !metrics.contains("kubelet_evictions{eviction_signal=\"memory.available\"}"),
        "the node itself had memory"
    );
}

/// `kernelMemcgNotification: true` (cgroup v1): a memory threshold registered on the root
/// memory cgroup wakes the eviction manager when crossed, so the hog is evicted long before
/// the next periodic reading (a minute apart here, with `--node-status-update-frequency 60s`),
/// as kubelet's memory threshold notifier runs `synchronize` at once.
#[test]
fn a_memcg_threshold_notification_evicts_before_the_next_reading() {
    let _memory = machine_memory();
    if !std::path::Path::new("/sys/fs/cgroup/memory/cgroup.event_control").exists() {
        eprintln!("SKIPPED: no cgroup v1 memory controller here (kernelMemcgNotification is refused on v2)");
        return;
    }
    let api = api_server();
    let manifests = ManifestDir::new();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kubelet.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkernelMemcgNotification: true\n",
    )
    .unwrap();
    let threshold = memory_available_mib() - MARGIN_MIB;
    let args = [
        "--config".to_string(),
        config.display().to_string(),
        "--kubeconfig".to_string(),
        api.kubeconfig_path().display().to_string(),
        "--node-status-update-frequency".into(),
        "60s".into(),
        "--eviction-hard".into(),
        format!("memory.available<{threshold}Mi"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::start("evict-memcg", manifests.path(), &args);
    let node = agent.node().to_string();
    wait_for("the Node registered", CHANGE_TIMEOUT, || api.get("nodes", "", &node));
    let hog = format!("x=$(head -c {HOG_MB}000000 /dev/zero | tr '\\\\0' a); {SLEEPER}");
    create(&api, dir.path(), "hog", &pod_yaml("hog", &node, None, &hog));
    // Well before the next reading, a minute after the first.
    let evicted = evicted(&api, "hog", Duration::from_secs(40));
    let message = evicted["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("The node was low on resource: memory."),
        "{message}"
    );
    let eviction = agent.actor("EvictionActor", "eviction").expect("the EvictionActor");
    assert!(
        eviction["detail"]["memcg_crossings"].as_u64() >= Some(1),
        "woken by the notifier: {eviction:#}"
    );
    assert!(
        agent.log().contains("Eviction manager: thresholds crossed"),
        "the crossing logged"
    );
}
