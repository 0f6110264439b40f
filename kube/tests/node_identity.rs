//! The API client with a node's credential against the test API server with node
//! authorization (the Node authorizer and NodeRestriction, as a kubeadm cluster runs them):
//! what the agent asks about its pods must be what a real cluster lets a node ask.

use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use dockerlet_kube::{KubeApi, KubeClient};
use k8s_openapi::api::core::v1::{Node, NodeStatus, Pod, PodStatus};
use serde_json::json;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A static pod of `node` as the agent's file source makes it.
fn static_pod(node: &str) -> Pod {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "c", "image": "dockerlet.local/busybox:1"}]},
    }))
    .expect("pod");
    let mut pod = dockerlet_pod::manifest::default_static_pod(pod, node, "/etc/manifests/web.yaml");
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        ..PodStatus::default()
    });
    pod
}

/// The mirror pod does not exist yet, which a node cannot ask with a GET (the Node authorizer
/// answers 403 for any pod not bound to it); the client asks with a list scoped to the node,
/// creates the mirror pod and writes its status, and a status for a pod that is gone is
/// nothing to write. The server refuses the node nothing.
#[test]
fn a_node_creates_its_mirror_pod_without_asking_what_it_may_not() {
    let api = ApiServer::start_with(ApiServerConfig {
        tls: true,
        node_authorization: true,
        ..ApiServerConfig::default()
    })
    .expect("start");
    let kubeconfig = api.node_kubeconfig("n1").expect("kubeconfig");
    runtime().block_on(async {
        let client = KubeApi::connect(&kubeconfig, "n1", 100.0, 100).await.expect("connect");
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).expect("node");
        client.register_node(&node).await.expect("register");
        client
            .patch_node_status(&NodeStatus::default())
            .await
            .expect("node status");
        let pod = static_pod("n1");
        client.sync_mirror_pod(&pod).await.expect("mirror pod");
        client
            .reconcile_pod_status("default", "gone", &PodStatus::default())
            .await
            .expect("a pod that is gone has no status to write");
        client
            .delete_mirror_pod("default", "web-n1", "")
            .await
            .expect("mirror deleted");
    });
    assert_eq!(api.node_refusals(), Vec::<String>::new());
    assert!(api.get("pods", "default", "web-n1").is_none(), "deleted by its node");
}
