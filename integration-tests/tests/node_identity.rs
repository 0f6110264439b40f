//! The agent with a kubelet's identity: it authenticates as `system:node:<name>` (group
//! `system:nodes`) to a test API server that authorizes nodes as a kubeadm cluster does (the
//! Node authorizer and NodeRestriction, `ApiServerConfig::node_authorization`), not with the
//! all-powerful admin token the other API-mode tests use. Everything a node does must pass:
//! registering its Node, renewing its Lease, reading the configMap and secret of its pod,
//! requesting its service account tokens, writing its pod's status and events, creating the
//! mirror pod of its static pod, deleting its pods. A request a real cluster would refuse is
//! in `ApiServer::node_refusals`.

mod common;

use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use dockerlet_integration_tests::docker::docker;
use dockerlet_integration_tests::{
    unique_name, wait_for, Agent, AgentOptions, ManifestDir, CHANGE_TIMEOUT, POD_START_TIMEOUT,
};
use serde_json::{json, Value};

/// The output of a pod's container so far, read from Docker.
fn output(agent: &Agent, uid: &str, container: &str) -> String {
    let mut text = String::new();
    for c in agent.pod_containers(uid).iter().filter(|c| c.kube_name() == container) {
        let out = docker(&["logs", &c.id]);
        text.push_str(&String::from_utf8_lossy(&out.stdout));
        text.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    text
}

/// With a node's credential the agent registers its Node and renews its Lease, runs a pod that
/// mounts a configMap, a secret and a projected service account token (its kube-api-access
/// volume too) and writes its status and events, keeps the mirror pod of its static pod, and
/// deletes the pod when it is deleted; the API server refuses it nothing.
#[test]
fn an_agent_with_a_node_credential_does_a_kubelets_work() {
    let api = ApiServer::start_with(ApiServerConfig {
        tls: true,
        node_authorization: true,
        ..ApiServerConfig::default()
    })
    .expect("start the API server");
    let node = unique_name("it", "node-identity");
    let kubeconfig = api.node_kubeconfig(&node).expect("the node's kubeconfig");
    let kubeconfig = kubeconfig.display().to_string();
    let manifests = ManifestDir::new();
    manifests.add_fixture("sleeper.yaml");
    let options = AgentOptions {
        node_name: Some(node.clone()),
        ..AgentOptions::default()
    };
    let agent = Agent::start_with(
        "node-identity",
        manifests.path(),
        &["--kubeconfig", &kubeconfig, "--node-status-update-frequency", "1s"],
        options,
    );
    assert_eq!(agent.node(), node);

    // Its Node, Ready, and its Lease, renewed.
    let registered = wait_for("the Node Ready", CHANGE_TIMEOUT, || {
        api.get("nodes", "", &node).filter(common::node_ready)
    });
    let renewed = |after: &str| {
        api.get("leases", "kube-node-lease", &node).and_then(|l| {
            let at = l["spec"]["renewTime"].as_str()?.to_string();
            (at.as_str() > after).then_some(at)
        })
    };
    let first = wait_for("the Lease", CHANGE_TIMEOUT, || renewed(""));
    wait_for("the Lease renewed", CHANGE_TIMEOUT, || renewed(&first));

    // A pod with a configMap, a secret and a token for another audience.
    api.create(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                      "data": {"greeting": "hello"}}),
    )
    .expect("configmap");
    api.create(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                      "stringData": {"password": "s3cret"}}),
    )
    .expect("secret");
    let script = "echo greeting=$(cat /etc/settings/greeting); echo password=$(cat /etc/creds/password); \
                  echo vault=$(cat /var/run/secrets/tokens/vault); \
                  echo token=$(cat /var/run/secrets/kubernetes.io/serviceaccount/token)";
    let created = api
        .create(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "reader"},
            "spec": {
                "nodeName": node,
                "restartPolicy": "Never",
                "containers": [{
                    "name": "app", "image": "dockerlet.local/busybox:1", "command": ["sh", "-c", script],
                    "volumeMounts": [
                        {"name": "settings", "mountPath": "/etc/settings"},
                        {"name": "creds", "mountPath": "/etc/creds"},
                        {"name": "tokens", "mountPath": "/var/run/secrets/tokens"},
                    ],
                }],
                "volumes": [
                    {"name": "settings", "configMap": {"name": "settings"}},
                    {"name": "creds", "secret": {"secretName": "creds"}},
                    {"name": "tokens", "projected": {"sources": [
                        {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 3600, "path": "vault"}},
                    ]}},
                ],
            },
        }))
        .expect("pod");
    let uid = created["metadata"]["uid"].as_str().expect("uid").to_string();
    let done = wait_for("the pod Succeeded", POD_START_TIMEOUT, || {
        api.get("pods", "default", "reader")
            .filter(|p| p["status"]["phase"] == "Succeeded")
    });
    let state = &done["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(state["exitCode"], 0, "the status the node wrote: {done}");
    let out = output(&agent, &uid, "app");
    assert!(out.contains("greeting=hello"), "{out}");
    assert!(out.contains("password=s3cret"), "{out}");
    let token = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} in {out}"))
            .to_string()
    };
    for (name, audience) in [
        ("vault", "vault"),
        ("token", "https://kubernetes.default.svc.cluster.local"),
    ] {
        let claims = api
            .verify_service_account_token(&token(name))
            .unwrap_or_else(|e| panic!("the {name} token verifies: {e}"));
        assert_eq!(claims.aud, [audience]);
        assert_eq!(
            claims.kubernetes.pod.as_ref().map(|p| p.uid.as_str()),
            Some(uid.as_str())
        );
        assert_eq!(
            claims.kubernetes.node.as_ref().map(|n| n.name.as_str()),
            Some(node.as_str())
        );
    }

    // Its events about the pod.
    let events = wait_for("the node's events about the pod", CHANGE_TIMEOUT, || {
        let events: Vec<Value> = api
            .list("events")
            .into_iter()
            .filter(|e| e["involvedObject"]["uid"] == uid.as_str() && e["source"]["host"] == node.as_str())
            .collect();
        events.iter().any(|e| e["reason"] == "Started").then_some(events)
    });
    assert!(
        events.iter().all(|e| e["source"]["component"] == "kubelet"),
        "{events:?}"
    );

    // The mirror pod of its static pod, owned by its Node.
    let mirror_name = agent.pod_name("sleeper");
    let mirror = wait_for("a Running mirror pod", POD_START_TIMEOUT, || {
        api.get("pods", "default", &mirror_name)
            .filter(|p| p["status"]["phase"] == "Running")
    });
    assert_eq!(
        mirror["metadata"]["ownerReferences"][0]["uid"], registered["metadata"]["uid"],
        "{mirror}"
    );

    // A running pod deleted in the API is stopped, its final status written, and deleted for
    // good by the node.
    api.create(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "runner"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "app", "image": "dockerlet.local/busybox:1",
                            "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}],
        },
    }))
    .expect("pod");
    wait_for("the runner Running", POD_START_TIMEOUT, || {
        api.get("pods", "default", "runner")
            .filter(|p| p["status"]["phase"] == "Running")
    });
    api.delete("pods", "default", "runner", None).expect("delete");
    wait_for("the runner deleted by its node", CHANGE_TIMEOUT, || {
        api.get("pods", "default", "runner").is_none().then_some(())
    });

    let refusals = api.node_refusals();
    assert!(
        refusals.is_empty(),
        "a real cluster refuses the agent:\n{}",
        refusals.join("\n")
    );
}
