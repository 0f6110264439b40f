//! Set-up shared by the test files that reach the agent through the test API server's kubelet
//! proxy (`kubectl exec`, `port-forward`, `logs`, the kubelet API's auth).

// Each test crate compiles this module and uses only some of it.
#![allow(dead_code)]

pub mod cni;
pub mod port_forward;

use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use dockerlet_integration_tests::{wait_for, Agent, ManifestDir, CHANGE_TIMEOUT};

/// An agent of the cluster behind `api` reading `manifests`, its Node status written every
/// second.
pub fn api_agent(name: &str, api: &ApiServer, manifests: &ManifestDir) -> Agent {
    let kubeconfig = api.kubeconfig_path().display().to_string();
    Agent::start(
        name,
        manifests.path(),
        &["--kubeconfig", &kubeconfig, "--node-status-update-frequency", "1s"],
    )
}

/// A TLS API server and an agent registered with it, reachable through the server's kubelet
/// proxy: the agent reports an address of this host that kube-apiserver proxies to (not
/// loopback: `nodes/proxy` refuses that, as `isProxyableHostname`), listens on all addresses,
/// and trusts the server's kubelet client certificate (`--client-ca-file`). Returns once the
/// Node exists.
pub fn proxied_node(name: &str) -> (ApiServer, Agent, ManifestDir) {
    proxied_node_with(name, &[])
}

/// [`proxied_node`] with more agent flags.
pub fn proxied_node_with(name: &str, extra: &[&str]) -> (ApiServer, Agent, ManifestDir) {
    let api = ApiServer::start_with(ApiServerConfig {
        tls: true,
        ..ApiServerConfig::default()
    })
    .expect("start the API server");
    let manifests = ManifestDir::new();
    let agent = proxied_agent(name, &api, &manifests, extra);
    (api, agent, manifests)
}

/// An agent for `api` reading `manifests`, set up as [`proxied_node`]'s, with more flags;
/// returns once its Node exists.
pub fn proxied_agent(name: &str, api: &ApiServer, manifests: &ManifestDir, extra: &[&str]) -> Agent {
    let kubeconfig = api.kubeconfig_path().display().to_string();
    let ca = api.kubelet_client_ca_path().display().to_string();
    let node_ip = dockerlet_fake_apiserver::proxyable_host_ip()
        .expect("a non-loopback IPv4 address on this host (Docker's bridge is one)")
        .to_string();
    let mut args = vec![
        "--kubeconfig",
        &kubeconfig,
        "--node-status-update-frequency",
        "1s",
        "--node-ip",
        &node_ip,
        "--address",
        "0.0.0.0",
        "--client-ca-file",
        &ca,
    ];
    args.extend_from_slice(extra);
    let agent = Agent::start(name, manifests.path(), &args);
    wait_for("the node registered", CHANGE_TIMEOUT, || {
        api.get("nodes", "", agent.node())
    });
    agent
}

/// Create the objects of `yaml` with `kubectl create -f` (the file is written as `file` in the
/// API server's directory).
pub fn kubectl_create(api: &ApiServer, file: &str, yaml: &str) {
    let path = api.dir().join(file);
    std::fs::write(&path, yaml).expect("write the objects");
    api.kubectl_ok(&["create", "-f", path.to_str().expect("utf-8 path")]);
}

/// Wait (up to `timeout`) until the pod `name` of `default` has `phase`; the pod then. The
/// panic on timeout shows the last status seen.
pub fn wait_for_phase(api: &ApiServer, name: &str, phase: &str, timeout: std::time::Duration) -> serde_json::Value {
    dockerlet_integration_tests::wait_until(&format!("pod {name} {phase}"), timeout, || {
        let pod = api.get("pods", "default", name).ok_or("no pod")?;
        (pod["status"]["phase"] == phase)
            .then_some(pod.clone())
            .ok_or_else(|| pod["status"].to_string())
    })
}

/// kubectl against `api` with `env` set, `stdin` piped in (then closed), at most 120 s.
pub fn kubectl_with_stdin(
    api: &ApiServer,
    env: &[(&str, &str)],
    args: &[&str],
    stdin: Option<&[u8]>,
) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("timeout")
        .arg("120")
        .arg(dockerlet_fake_apiserver::KUBECTL)
        .arg("--kubeconfig")
        .arg(api.kubeconfig_path())
        .arg("--cache-dir")
        .arg(api.dir().join("kube-cache"))
        .args(args)
        .env_remove("KUBECONFIG")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    let mut input = child.stdin.take().expect("kubectl's stdin");
    if let Some(data) = stdin {
        input.write_all(data).expect("write kubectl's stdin");
    }
    drop(input);
    child.wait_with_output().expect("kubectl's output")
}

/// Whether the Node's `Ready` condition is True.
pub fn node_ready(node: &serde_json::Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The pod's status condition of type `kind`, or null.
pub fn condition(pod: &serde_json::Value, kind: &str) -> serde_json::Value {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}
