//! API-server mode against the in-memory API server fixture, with kubectl as the client: node
//! registration and lease, pods bound to the node, status, deletion, mirror pods, resilience.

use std::time::Duration;

use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig, PatchType, Subresource};
use dockerlet_integration_tests::{docker, holds_for, wait_for, Agent, ManifestDir, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::Value;

/// The API server of these tests (HTTPS if `tls`), with its ServiceAccount admission: the pods
/// they create carry the kube-api-access volume, as a real cluster admits them.
fn api_server(tls: bool) -> ApiServer {
    ApiServer::start_with(ApiServerConfig {
        tls,
        ..ApiServerConfig::default()
    })
    .expect("start the API server")
}

/// Flags that make heartbeats fast enough for tests.
fn api_args(api: &ApiServer) -> Vec<String> {
    vec![
        "--kubeconfig".into(),
        api.kubeconfig_path().display().to_string(),
        "--node-status-update-frequency".into(),
        "1s".into(),
    ]
}

fn start(name: &str, api: &ApiServer, manifests: &ManifestDir) -> Agent {
    let args = api_args(api);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Agent::start(name, manifests.path(), &args)
}

/// A pod manifest bound to `node`, whose container stops at once on SIGTERM.
fn pod_yaml(name: &str, node: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: {name}}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
"#
    )
}

fn kubectl_create(api: &ApiServer, yaml: &str, dir: &std::path::Path, file: &str) {
    let path = dir.join(file);
    std::fs::write(&path, yaml).expect("write pod manifest");
    api.kubectl_ok(&["create", "-f", path.to_str().expect("utf-8 path")]);
}

fn condition(obj: &Value, kind: &str) -> Option<String> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str().map(str::to_string))
}

/// The agent registers its Node (Ready, capacity, nodeInfo) and keeps renewing its Lease;
/// kubectl shows both. The API server speaks HTTPS with a CA from the kubeconfig.
#[test]
fn the_agent_registers_its_node_and_renews_its_lease() {
    let api = api_server(true);
    assert!(api.url().starts_with("https://"));
    let manifests = ManifestDir::new();
    let mut agent = start("api-node", &api, &manifests);
    let node = agent.node().to_string();

    let obj = wait_for("the node to be Ready", CHANGE_TIMEOUT, || {
        api.get("nodes", "", &node)
            .filter(|n| condition(n, "Ready").as_deref() == Some("True"))
    });
    assert_eq!(obj["metadata"]["labels"]["kubernetes.io/hostname"], node.as_str());
    assert_eq!(obj["status"]["capacity"]["pods"], "110");
    assert!(obj["status"]["nodeInfo"]["containerRuntimeVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with("docker://")));
    let table = api.kubectl_ok(&["get", "nodes", &node]);
    assert!(
        table.contains(&node) && table.contains("Ready"),
        "kubectl get nodes: {table}"
    );

    let renew = |api: &ApiServer| {
        api.get("leases", "kube-node-lease", &node)
            .and_then(|l| l["spec"]["renewTime"].as_str().map(str::to_string))
    };
    let first = wait_for("the lease", CHANGE_TIMEOUT, || renew(&api));
    wait_for("the lease to be renewed", CHANGE_TIMEOUT, || {
        renew(&api).filter(|t| *t != first)
    });
    let leases = api.kubectl_ok(&["get", "lease", "-n", "kube-node-lease"]);
    assert!(leases.contains(&node), "kubectl get lease: {leases}");
    let lease = wait_for("the lease owned by the Node", CHANGE_TIMEOUT, || {
        api.get("leases", "kube-node-lease", &node)
            .filter(|l| l["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"])
    });
    assert_eq!(lease["metadata"]["ownerReferences"][0]["kind"], "Node");

    // A restarted agent finds its Node and puts back the labels it owns; a Node that reported
    // another boot ID gets a Rebooted event.
    api.kubectl_ok(&["label", "node", &node, "kubernetes.io/os-"]);
    agent.kill9();
    api.patch(
        "nodes",
        "",
        &node,
        PatchType::Merge,
        &serde_json::json!({"status": {"nodeInfo": {"bootID": "an-earlier-boot"}}}),
        Subresource::Status,
    )
    .expect("patch the boot ID");
    agent.restart();
    wait_for("the label put back", CHANGE_TIMEOUT, || {
        api.get("nodes", "", &node)
            .filter(|n| n["metadata"]["labels"]["kubernetes.io/os"] == "linux")
    });
    wait_for("a Rebooted event", CHANGE_TIMEOUT, || {
        api.list("events")
            .into_iter()
            .find(|e| e["reason"] == "Rebooted" && e["involvedObject"]["name"] == node.as_str())
    });
}

/// Node status is written only when it changed (heartbeat times aside) or
/// `nodeStatusReportFrequency` passed, while the Lease is renewed every
/// `nodeStatusUpdateFrequency`.
#[test]
fn node_status_is_written_on_change_and_the_lease_every_period() {
    let api = api_server(false);
    let manifests = ManifestDir::new();
    let config = api.dir().join("kubelet.yaml");
    std::fs::write(
        &config,
        "kind: KubeletConfiguration\nnodeStatusUpdateFrequency: 500ms\nnodeStatusReportFrequency: 1h\n",
    )
    .expect("write config");
    let kubeconfig = api.kubeconfig_path().display().to_string();
    let agent = Agent::start(
        "api-report",
        manifests.path(),
        &[
            "--config",
            config.to_str().expect("utf-8 path"),
            "--kubeconfig",
            &kubeconfig,
        ],
    );
    let node = agent.node().to_string();
    wait_for("the node to be Ready", CHANGE_TIMEOUT, || {
        api.get("nodes", "", &node)
            .filter(|n| condition(n, "Ready").as_deref() == Some("True"))
    });
    std::thread::sleep(Duration::from_secs(1));
    api.clear_requests();
    std::thread::sleep(Duration::from_secs(4));
    let requests = api.requests();
    let count = |path: &str, method: &str| {
        requests
            .iter()
            .filter(|r| r.method == method && r.path.ends_with(path))
            .count()
    };
    let status_writes = count(&format!("/nodes/{node}/status"), "PATCH");
    let lease_writes = count(&format!("/leases/{node}"), "PUT") + count(&format!("/leases/{node}"), "PATCH");
    assert_eq!(status_writes, 0, "nothing changed, so no status write");
    assert!(
        lease_writes >= 5,
        "the lease is renewed every 500 ms: {lease_writes} renewals in 4 s"
    );
}

/// With `--in-cluster` the agent joins as a pod would: the API server from
/// `KUBERNETES_SERVICE_HOST`/`_PORT` over HTTPS, the service account's CA and token; its node
/// registers and a pod bound to it runs.
#[test]
fn in_cluster_config_uses_the_service_account() {
    let api = api_server(true);
    let account = api.dir().join("serviceaccount");
    std::fs::create_dir_all(&account).expect("service account dir");
    std::fs::write(account.join("token"), api.token()).expect("token");
    std::fs::write(account.join("ca.crt"), api.ca_pem().expect("a CA")).expect("ca.crt");
    let manifests = ManifestDir::new();
    let (host, port) = (api.addr().ip().to_string(), api.addr().port().to_string());
    let agent = Agent::start_with_env(
        "api-in-cluster",
        manifests.path(),
        &[
            "--in-cluster",
            "--service-account-dir",
            account.to_str().expect("utf-8 path"),
            "--node-status-update-frequency",
            "1s",
        ],
        &[("KUBERNETES_SERVICE_HOST", &host), ("KUBERNETES_SERVICE_PORT", &port)],
    );
    wait_for("the node to be Ready", CHANGE_TIMEOUT, || {
        api.get("nodes", "", agent.node())
            .filter(|n| condition(n, "Ready").as_deref() == Some("True"))
    });
    kubectl_create(&api, &pod_yaml("in-cluster", agent.node()), api.dir(), "pod.yaml");
    wait_for("the pod Running", POD_START_TIMEOUT, || {
        api.get("pods", "default", "in-cluster")
            .filter(|p| p["status"]["phase"] == "Running")
    });
}

/// Bytes of a quantity as the agent writes them (`123Ki` or plain bytes).
fn quantity_bytes(q: &Value) -> i64 {
    let text = q.as_str().expect("a quantity");
    match text.strip_suffix("Ki") {
        Some(ki) => ki.parse::<i64>().expect("Ki quantity") * 1024,
        None => text.parse().expect("byte quantity"),
    }
}

/// The Node carries `--register-with-taints`; allocatable is capacity minus kube/system-reserved
/// minus the hard eviction threshold; a met `memory.available` threshold makes MemoryPressure
/// True, and the node's events (Starting, NodeHasInsufficientMemory, NodeReady) reach the API.
#[test]
fn the_node_reports_taints_allocatable_and_pressure() {
    // HTTPS, and the agent authenticates with a client certificate from its kubeconfig.
    let api = api_server(true);
    let kubeconfig = api
        .client_certificate_kubeconfig()
        .expect("client certificate kubeconfig");
    let manifests = ManifestDir::new();
    let mut args: Vec<String> = vec![
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--node-status-update-frequency".into(),
        "1s".into(),
    ];
    args.extend(
        [
            "--register-with-taints",
            "dedicated=edge:NoSchedule",
            "--kube-reserved",
            "cpu=100m,memory=256Mi",
            "--system-reserved",
            "memory=256Mi",
            "--eviction-hard",
            "memory.available<99.9%,nodefs.available<1Mi",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::start("api-pressure", manifests.path(), &args);
    let node = agent.node().to_string();

    // Pressure does not make the node NotReady. (This machine's disk is often over kubelet's
    // default 10 % nodefs threshold, so the test sets its own.)
    let obj = wait_for("MemoryPressure True and Ready", CHANGE_TIMEOUT, || {
        api.get("nodes", "", &node).filter(|n| {
            condition(n, "MemoryPressure").as_deref() == Some("True")
                && condition(n, "Ready").as_deref() == Some("True")
        })
    });
    assert_eq!(condition(&obj, "DiskPressure").as_deref(), Some("False"));
    let taint = &obj["spec"]["taints"][0];
    assert_eq!(
        (&taint["key"], &taint["value"], &taint["effect"]),
        (
            &Value::from("dedicated"),
            &Value::from("edge"),
            &Value::from("NoSchedule")
        )
    );
    let (capacity, allocatable) = (&obj["status"]["capacity"], &obj["status"]["allocatable"]);
    let cpus: i64 = capacity["cpu"].as_str().unwrap().parse().unwrap();
    assert_eq!(allocatable["cpu"], format!("{}m", cpus * 1000 - 100).as_str());
    let memory = quantity_bytes(&capacity["memory"]);
    let threshold = (memory as f64 * 0.999).round() as i64;
    assert_eq!(
        quantity_bytes(&allocatable["memory"]),
        (memory - (512 << 20) - threshold).max(0)
    );
    let storage = quantity_bytes(&capacity["ephemeral-storage"]);
    assert!(storage > 0, "ephemeral-storage capacity: {capacity}");
    assert_eq!(
        quantity_bytes(&allocatable["ephemeral-storage"]),
        storage - (1 << 20),
        "allocatable storage keeps nodefs.available<1Mi back"
    );

    let events = wait_for("the node's events", CHANGE_TIMEOUT, || {
        let out = api.kubectl_ok(&["get", "events", "-n", "default", "-o", "json"]);
        let list: Value = serde_json::from_str(&out).ok()?;
        let reasons: Vec<String> = list["items"]
            .as_array()?
            .iter()
            .filter(|e| e["involvedObject"]["kind"] == "Node" && e["involvedObject"]["name"] == node.as_str())
            .filter_map(|e| e["reason"].as_str().map(str::to_string))
            .collect();
        ["Starting", "NodeHasInsufficientMemory", "NodeReady"]
            .iter()
            .all(|r| reasons.iter().any(|x| x == r))
            .then_some(reasons)
    });
    assert!(
        !events.iter().any(|r| r == "NodeHasSufficientMemory"),
        "memory was never sufficient: {events:?}"
    );
    let described = api.kubectl_ok(&["describe", "node", &node]);
    assert!(
        described.contains("dedicated=edge:NoSchedule") && described.contains("KubeletHasInsufficientMemory"),
        "kubectl describe node: {described}"
    );
}

/// A pod created with kubectl and bound to the node runs on Docker and shows Running and Ready
/// with its IP; `kubectl delete pod` stops it gracefully, removes its containers, and the agent
/// deletes it from the API.
#[test]
fn a_pod_bound_to_the_node_runs_and_is_deleted_gracefully() {
    let api = api_server(false);
    let manifests = ManifestDir::new();
    let agent = start("api-pod", &api, &manifests);
    kubectl_create(&api, &pod_yaml("hello", agent.node()), api.dir(), "hello.yaml");

    let pod = wait_for("the pod Running and Ready in the API", POD_START_TIMEOUT, || {
        api.get("pods", "default", "hello")
            .filter(|p| p["status"]["phase"] == "Running" && condition(p, "Ready").as_deref() == Some("True"))
    });
    let uid = pod["metadata"]["uid"].as_str().expect("uid").to_string();
    let ip = pod["status"]["podIP"].as_str().expect("podIP").to_string();
    let containers = agent.pod_containers(&uid);
    let sandbox = containers.iter().find(|c| c.is_sandbox()).expect("sandbox");
    assert_eq!(sandbox.ip(), Some(ip.as_str()), "the API's podIP is the sandbox's IP");
    let wide = api.kubectl_ok(&["get", "pods", "-o", "wide"]);
    assert!(
        wide.contains("hello") && wide.contains("Running") && wide.contains(&ip),
        "{wide}"
    );

    api.kubectl_ok(&["delete", "pod", "hello", "--wait=false"]);
    wait_for("the pod gone from the API", CHANGE_TIMEOUT, || {
        api.get("pods", "default", "hello").is_none().then_some(())
    });
    assert!(
        agent.pod_containers(&uid).is_empty(),
        "containers removed before the final deletion"
    );
}

/// A static pod gets a mirror pod; deleting the mirror re-creates it; deleting the manifest
/// deletes the mirror.
#[test]
fn static_pods_get_mirror_pods() {
    let api = api_server(false);
    let manifests = ManifestDir::new();
    manifests.add_fixture("sleeper.yaml");
    let agent = start("api-mirror", &api, &manifests);
    let name = agent.pod_name("sleeper");

    let mirror = wait_for("a Running mirror pod", POD_START_TIMEOUT, || {
        api.get("pods", "default", &name)
            .filter(|p| p["status"]["phase"] == "Running")
    });
    let hash = mirror["metadata"]["annotations"]["kubernetes.io/config.hash"].clone();
    assert_eq!(mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"], hash);
    assert_eq!(mirror["metadata"]["ownerReferences"][0]["kind"], "Node");
    let first_uid = mirror["metadata"]["uid"].as_str().expect("uid").to_string();

    api.kubectl_ok(&["delete", "pod", &name, "--wait=false"]);
    wait_for("the mirror pod re-created", CHANGE_TIMEOUT, || {
        api.get("pods", "default", &name)
            .filter(|p| p["metadata"]["uid"] != first_uid.as_str() && p["metadata"]["deletionTimestamp"].is_null())
    });
    let static_uid = agent
        .pod("sleeper")
        .map(|p| p.metadata.uid.clone().unwrap_or_default())
        .expect("static pod");
    assert!(
        !agent.pod_containers(&static_uid).is_empty(),
        "deleting the mirror does not stop the static pod"
    );

    std::fs::remove_file(manifests.path().join("sleeper.yaml")).expect("remove manifest");
    wait_for("the mirror pod deleted", CHANGE_TIMEOUT, || {
        api.get("pods", "default", &name).is_none().then_some(())
    });
}

/// Upstream `mirror_pod_test.go` "should successfully recreate when file is removed and
/// recreated" (NodeConformance): the manifest removed and written again at once stops the static
/// pod and starts it again under the same UID, its container's restart count going on (1), and
/// its mirror pod Running again.
#[test]
fn a_static_pods_manifest_removed_and_written_again_restarts_it() {
    let api = api_server(false);
    let manifests = ManifestDir::new();
    manifests.add_fixture("sleeper.yaml");
    let agent = start("api-mirror-recreate", &api, &manifests);
    let name = agent.pod_name("sleeper");
    let restarts = |p: &Value| p["status"]["containerStatuses"][0]["restartCount"].as_i64();
    let first = wait_for("a Running mirror pod", POD_START_TIMEOUT, || {
        api.get("pods", "default", &name)
            .filter(|p| p["status"]["phase"] == "Running")
    });
    assert_eq!(restarts(&first), Some(0), "{first}");
    let content = std::fs::read_to_string(manifests.path().join("sleeper.yaml")).expect("read manifest");
    // As upstream: os.Remove, then the file written anew (not a rename over it).
    std::fs::remove_file(manifests.path().join("sleeper.yaml")).expect("remove manifest");
    std::fs::write(manifests.path().join("sleeper.yaml"), content).expect("write manifest");
    let again = wait_for("the mirror pod Running with restartCount 1", POD_START_TIMEOUT, || {
        api.get("pods", "default", &name)
            .filter(|p| p["status"]["phase"] == "Running" && restarts(p) == Some(1))
    });
    assert!(
        again["status"]["containerStatuses"][0]["state"]["running"].is_object(),
        "{again}"
    );
}

/// Upstream `mirror_pod_grace_period_test.go` (NodeConformance): a static pod that takes a
/// while to stop keeps its mirror pod (same UID, Running) through its grace period, when its
/// manifest is edited (the new version starts only after the old one stopped, then gets a new
/// mirror pod) and when it is deleted (then the mirror goes).
#[test]
fn mirror_pods_stay_through_the_static_pods_grace_period() {
    let api = api_server(false);
    let manifests = ManifestDir::new();
    let agent = start("api-mirror-grace", &api, &manifests);
    let manifest = |marker: &str| {
        format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: graceful, namespace: default}}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    env: [{{name: VERSION, value: "{marker}"}}]
    command: ["sh", "-c", "trap 'sleep 6; exit 0' TERM; while true; do sleep 1; done"]
"#
        )
    };
    manifests.write("graceful.yaml", &manifest("one"));
    let name = agent.pod_name("graceful");
    let running = |api: &ApiServer| {
        api.get("pods", "default", &name)
            .filter(|p| p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null())
    };
    let first = wait_for("a Running mirror pod", POD_START_TIMEOUT, || running(&api));
    let first_uid = first["metadata"]["uid"].clone();
    let annotations = &first["metadata"]["annotations"];
    assert_eq!(
        annotations["kubernetes.io/config.mirror"],
        annotations["kubernetes.io/config.hash"]
    );

    // Edited: the old version stops over about 6 s; its mirror stays meanwhile.
    manifests.write("graceful.yaml", &manifest("two"));
    holds_for(
        "the first mirror pod Running while its static pod stops",
        Duration::from_secs(4),
        || match running(&api) {
            Some(p) if p["metadata"]["uid"] == first_uid => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    let second = wait_for("the new version's mirror pod", POD_START_TIMEOUT, || {
        running(&api).filter(|p| p["metadata"]["uid"] != first_uid)
    });
    let env = &second["spec"]["containers"][0]["env"][0]["value"];
    assert_eq!(env, "two", "the mirror pod is the new version's");
    let versions: Vec<String> = docker::node_containers(agent.node())
        .iter()
        .filter(|c| !c.is_sandbox() && c.pod_name() == name)
        .filter_map(|c| c.env("VERSION").map(str::to_string))
        .collect();
    assert_eq!(versions, ["two"], "never both versions at once once it runs");

    // Deleted: the mirror stays through the grace period, then goes.
    let second_uid = second["metadata"]["uid"].clone();
    manifests.remove("graceful.yaml");
    holds_for(
        "the mirror pod Running while its static pod stops",
        Duration::from_secs(4),
        || match running(&api) {
            Some(p) if p["metadata"]["uid"] == second_uid => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    wait_for("the mirror pod deleted", CHANGE_TIMEOUT, || {
        api.get("pods", "default", &name).is_none().then_some(())
    });
}

/// Cutting the agent off the API server (watches dropped, then the server restarted) leaves
/// pods running with no duplicate containers, and status catches up afterwards.
#[test]
fn losing_the_api_server_leaves_pods_running_and_status_catches_up() {
    let mut api = api_server(false);
    let manifests = ManifestDir::new();
    let agent = start("api-cut", &api, &manifests);
    kubectl_create(&api, &pod_yaml("steady", agent.node()), api.dir(), "steady.yaml");
    let pod = wait_for("the pod Running", POD_START_TIMEOUT, || {
        api.get("pods", "default", "steady")
            .filter(|p| p["status"]["phase"] == "Running")
    });
    let uid = pod["metadata"]["uid"].as_str().expect("uid").to_string();
    let before: Vec<String> = agent.pod_containers(&uid).iter().map(|c| c.id.clone()).collect();

    api.drop_watches();
    api.stop();
    std::thread::sleep(Duration::from_secs(3));
    let during: Vec<String> = agent.pod_containers(&uid).iter().map(|c| c.id.clone()).collect();
    assert_eq!(during, before, "pods keep running while the API server is away");
    api.restart();

    // The restarted fixture keeps its objects; the agent's status writes resume.
    let node = agent.node().to_string();
    let beat = |api: &ApiServer| {
        api.get("leases", "kube-node-lease", &node)
            .and_then(|l| l["spec"]["renewTime"].as_str().map(str::to_string))
    };
    let after_restart = wait_for("a lease renewal after the restart", CHANGE_TIMEOUT, || beat(&api));
    wait_for("another renewal", CHANGE_TIMEOUT, || {
        beat(&api).filter(|t| *t != after_restart)
    });
    let after: Vec<String> = agent.pod_containers(&uid).iter().map(|c| c.id.clone()).collect();
    assert_eq!(after, before, "no container was restarted or duplicated");
    assert_eq!(
        api.get("pods", "default", "steady")
            .map(|p| p["status"]["phase"].clone()),
        Some(Value::from("Running"))
    );
}

fn lease_renew_time(api: &ApiServer, node: &str) -> Option<String> {
    api.get("leases", "kube-node-lease", node)
        .and_then(|l| l["spec"]["renewTime"].as_str().map(str::to_string))
}

/// Three agents (three node names) on one fixture and one engine each run only the pods bound
/// to them. A SIGKILLed agent's lease stops being renewed while its containers keep running (the
/// others' leases go on); started again, it renews the lease and adopts its containers without
/// restarting them.
#[test]
fn three_agents_run_only_their_pods_and_a_killed_one_adopts_its_pods() {
    let api = api_server(false);
    let dirs = [ManifestDir::new(), ManifestDir::new(), ManifestDir::new()];
    let mut agents: Vec<Agent> = ["api-three-a", "api-three-b", "api-three-c"]
        .iter()
        .zip(&dirs)
        .map(|(name, dir)| start(name, &api, dir))
        .collect();
    let names = ["on-a", "on-b", "on-c"];
    for (name, agent) in names.iter().zip(&agents) {
        kubectl_create(&api, &pod_yaml(name, agent.node()), api.dir(), &format!("{name}.yaml"));
    }
    let mut uids = Vec::new();
    for (name, agent) in names.iter().zip(&agents) {
        let pod = wait_for("the pod Running", POD_START_TIMEOUT, || {
            api.get("pods", "default", name)
                .filter(|p| p["status"]["phase"] == "Running")
        });
        assert_eq!(pod["spec"]["nodeName"], agent.node());
        let uid = pod["metadata"]["uid"].as_str().expect("uid").to_string();
        assert!(!agent.pod_containers(&uid).is_empty(), "{name} runs on its own node");
        uids.push(uid);
    }
    for (name, agent) in names.iter().zip(&agents) {
        let pods: Vec<String> = agent.containers().iter().map(|c| c.pod_name().to_string()).collect();
        assert!(
            pods.iter().all(|p| p == name),
            "{} runs only its pod: {pods:?}",
            agent.node()
        );
    }
    let wide = api.kubectl_ok(&["get", "pods", "-o", "wide"]);
    for agent in &agents {
        assert!(wide.contains(agent.node()), "kubectl get pods -o wide: {wide}");
    }

    let killed = &mut agents[2];
    let node = killed.node().to_string();
    let before: Vec<String> = killed.pod_containers(&uids[2]).iter().map(|c| c.id.clone()).collect();
    killed.kill9();
    std::thread::sleep(Duration::from_secs(2));
    let frozen = lease_renew_time(&api, &node);
    let others: Vec<Option<String>> = agents[..2].iter().map(|a| lease_renew_time(&api, a.node())).collect();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(lease_renew_time(&api, &node), frozen, "a dead agent renews nothing");
    for (agent, earlier) in agents[..2].iter().zip(&others) {
        assert_ne!(
            &lease_renew_time(&api, agent.node()),
            earlier,
            "{} keeps renewing",
            agent.node()
        );
    }
    let killed = &mut agents[2];
    let during: Vec<String> = killed.pod_containers(&uids[2]).iter().map(|c| c.id.clone()).collect();
    assert_eq!(during, before, "containers keep running without the agent");

    killed.restart();
    wait_for("the lease renewed again", CHANGE_TIMEOUT, || {
        lease_renew_time(&api, &node).filter(|t| Some(t) != frozen.as_ref())
    });
    wait_for("the pod Running and Ready again", CHANGE_TIMEOUT, || {
        api.get("pods", "default", "on-c")
            .filter(|p| condition(p, "Ready").as_deref() == Some("True"))
    });
    let after: Vec<String> = killed.pod_containers(&uids[2]).iter().map(|c| c.id.clone()).collect();
    assert_eq!(after, before, "the restarted agent adopts the containers");
}

/// The pod's lifecycle shows as Events in the API (`kubectl describe pod`): Pulled, Created and
/// Started for its container, about the pod, with the container's fieldPath.
#[test]
fn pod_lifecycle_events_reach_the_api() {
    let api = api_server(false);
    let manifests = ManifestDir::new();
    let agent = start("api-events", &api, &manifests);
    kubectl_create(&api, &pod_yaml("eventful", agent.node()), api.dir(), "eventful.yaml");
    let events = wait_for("Created and Started events", POD_START_TIMEOUT, || {
        let events: Vec<Value> = api
            .list("events")
            .into_iter()
            .filter(|e| e["involvedObject"]["name"] == "eventful" && e["involvedObject"]["kind"] == "Pod")
            .collect();
        let has = |reason: &str| events.iter().any(|e| e["reason"] == reason);
        (has("Pulled") && has("Created") && has("Started")).then_some(events)
    });
    assert!(
        events.iter().all(|e| e["source"]["host"] == agent.node()),
        "{events:#?}"
    );
    let pulled = events.iter().find(|e| e["reason"] == "Pulled").expect("Pulled");
    assert_eq!(
        pulled["message"],
        "Container image \"dockerlet.local/busybox:1\" already present on machine"
    );
    let started = events.iter().find(|e| e["reason"] == "Started").expect("Started");
    assert_eq!(
        started["involvedObject"]["fieldPath"], "spec.containers{app}",
        "container events name the container: {started:#}"
    );
    let described = api.kubectl_ok(&["describe", "pod", "eventful"]);
    assert!(
        described.contains("Started"),
        "kubectl describe shows the events: {described}"
    );
}

/// Env from a Secret (secretKeyRef) and a ConfigMap (envFrom with a prefix) reaches the
/// container; a pod whose Secret is missing waits with CreateContainerConfigError; a Secret
/// changed later reaches containers started later (the agent's watch-backed cache follows it).
#[test]
fn env_comes_from_secrets_and_config_maps() {
    let api = api_server(false);
    let manifests = ManifestDir::new();
    let agent = start("api-env", &api, &manifests);
    // The Secret from a manifest (JSON), the ConfigMap imperatively (kubectl sends protobuf).
    let objects = "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {password: hunter2}\n";
    kubectl_create(&api, objects, api.dir(), "objects.yaml");
    api.kubectl_ok(&["create", "configmap", "settings", "--from-literal=mode=fast"]);
    let node = agent.node();
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: envy
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    envFrom:
    - prefix: CFG_
      configMapRef: {{name: settings}}
    env:
    - name: PASSWORD
      valueFrom: {{secretKeyRef: {{name: creds, key: password}}}}
  - name: lost
    image: dockerlet.local/busybox:1
    command: ["sleep", "3600"]
    env:
    - name: TOKEN
      valueFrom: {{secretKeyRef: {{name: missing, key: token}}}}
"#
    );
    kubectl_create(&api, &yaml, api.dir(), "envy.yaml");
    let pod = wait_for("app running and lost waiting", POD_START_TIMEOUT, || {
        api.get("pods", "default", "envy").filter(|p| {
            let statuses = p["status"]["containerStatuses"].as_array().cloned().unwrap_or_default();
            let find = |n: &str| statuses.iter().find(|c| c["name"] == n).cloned().unwrap_or_default();
            !find("app")["state"]["running"].is_null()
                && find("lost")["state"]["waiting"]["reason"] == "CreateContainerConfigError"
        })
    });
    let lost = pod["status"]["containerStatuses"]
        .as_array()
        .and_then(|s| s.iter().find(|c| c["name"] == "lost"))
        .cloned()
        .unwrap_or_default();
    // kubelet's words: the API's not-found text, nothing before it.
    assert_eq!(
        lost["state"]["waiting"]["message"], "secret \"missing\" not found",
        "{pod}"
    );
    let uid = pod["metadata"]["uid"].as_str().expect("uid");
    let containers = agent.pod_containers(uid);
    let app = containers
        .iter()
        .find(|c| c.kube_name() == "app")
        .expect("app container");
    assert_eq!(app.env("PASSWORD"), Some("hunter2"));
    assert_eq!(app.env("CFG_mode"), Some("fast"));
    assert!(
        !containers.iter().any(|c| c.kube_name() == "lost"),
        "no container without its secret"
    );

    // The Secret changes: a container started afterwards gets the new value, read from the
    // object's watch (the agent's cache follows the change).
    api.kubectl_ok(&[
        "patch",
        "secret",
        "creds",
        "--type=merge",
        "-p",
        r#"{"stringData":{"password":"correct-horse"}}"#,
    ]);
    let later = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: envy-later
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    env:
    - name: PASSWORD
      valueFrom: {{secretKeyRef: {{name: creds, key: password}}}}
"#
    );
    // The watch event reaches the agent long before the pod's sandbox is up (kubectl's own start,
    // the pod's watch event, the sync and a Docker create come first).
    kubectl_create(&api, &later, api.dir(), "envy-later.yaml");
    let pod = wait_for("envy-later running", POD_START_TIMEOUT, || {
        api.get("pods", "default", "envy-later")
            .filter(|p| p["status"]["phase"] == "Running")
    });
    let uid = pod["metadata"]["uid"].as_str().expect("uid");
    let app = agent
        .pod_containers(uid)
        .into_iter()
        .find(|c| c.kube_name() == "app")
        .expect("app container");
    assert_eq!(app.env("PASSWORD"), Some("correct-horse"));
}

/// Another writer overwriting the pod's status does not win: within the 10 s resync the
/// agent's status is back, and a condition the other writer owns is kept.
#[test]
fn the_agents_status_wins_over_a_stale_write_and_keeps_foreign_conditions() {
    let api = api_server(false);
    let manifests = ManifestDir::new();
    let agent = start("api-conflict", &api, &manifests);
    kubectl_create(&api, &pod_yaml("raced", agent.node()), api.dir(), "raced.yaml");
    wait_for("the pod Running", POD_START_TIMEOUT, || {
        api.get("pods", "default", "raced")
            .filter(|p| p["status"]["phase"] == "Running")
    });
    let stale = r#"{"status":{"phase":"Pending","conditions":[{"type":"example.com/gate","status":"True"}]}}"#;
    api.kubectl_ok(&[
        "patch",
        "pod",
        "raced",
        "--subresource=status",
        "--type=merge",
        "-p",
        stale,
    ]);
    let pod = wait_for("the agent's status restored", Duration::from_secs(45), || {
        api.get("pods", "default", "raced")
            .filter(|p| p["status"]["phase"] == "Running" && condition(p, "Ready").as_deref() == Some("True"))
    });
    assert_eq!(
        condition(&pod, "example.com/gate").as_deref(),
        Some("True"),
        "the foreign condition is kept"
    );
    assert_eq!(
        pod["status"]["conditions"][0]["type"], "example.com/gate",
        "others' conditions first, as kubelet's mergePodStatus orders them: {}",
        pod["status"]["conditions"]
    );
}

/// Static pods from `--manifest-url` (a PodList served over HTTP, with the configured header)
/// run like file pods, get mirror pods, and go when the URL stops listing them.
#[test]
fn static_pods_from_a_url_run_and_get_mirror_pods() {
    use dockerlet_integration_tests::{HttpStub, Reply};
    let api = api_server(false);
    let stub = HttpStub::start();
    let list = |names: &[&str]| {
        let items: Vec<String> = names
            .iter()
            .map(|n| {
                format!(
                    r#"{{"metadata":{{"name":"{n}"}},"spec":{{"terminationGracePeriodSeconds":2,"containers":[{{"name":"app","image":"dockerlet.local/busybox:1","command":["sh","-c","trap 'exit 0' TERM; sleep 3600 & wait"]}}]}}}}"#
                )
            })
            .collect();
        Reply {
            body: format!(
                r#"{{"kind":"PodList","apiVersion":"v1","items":[{}]}}"#,
                items.join(",")
            ),
            ..Reply::status(200)
        }
    };
    stub.route("/pods", list(&["from-url"]));
    let manifests = ManifestDir::new();
    let mut args = api_args(&api);
    args.extend([
        "--manifest-url".into(),
        stub.url("/pods"),
        "--manifest-url-header".into(),
        "X-Node:test".into(),
    ]);
    args.extend(["--http-check-frequency".into(), "1s".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::start("api-url", manifests.path(), &args);
    let name = agent.pod_name("from-url");

    let pod = agent.wait_for_running("from-url");
    assert_eq!(
        pod.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("kubernetes.io/config.source"))
            .map(String::as_str),
        Some("http")
    );
    let mirror = wait_for("the URL pod's mirror pod", CHANGE_TIMEOUT, || {
        api.get("pods", "default", &name)
    });
    assert!(!mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_null());
    assert!(
        stub.requests_to("/pods")
            .iter()
            .any(|r| r.header("x-node") == Some("test")),
        "the header is sent"
    );

    stub.route("/pods", list(&[]));
    wait_for("the URL pod gone", CHANGE_TIMEOUT, || {
        agent.pod("from-url").is_none().then_some(())
    });
    wait_for("its mirror pod deleted", CHANGE_TIMEOUT, || {
        api.get("pods", "default", &name).is_none().then_some(())
    });
}
