//! The CNI pod network against real Docker and Debian's CNI plugins (`containernetworking-plugins`,
//! in `/usr/lib/cni`): `bridge` with `host-local` IPAM, `firewall` and `portmap`, as a
//! kubenet-style node network. Two agents, each with its own node name, bridge and pod subnet,
//! run a pod each: each pod reaches the other by pod IP (routed through the host), a hostPort
//! reaches a pod through `portmap`, and when the pods are gone no veth, IP lease, iptables rule or
//! cache entry of theirs is left. Plugin faults (an error, a hang, garbage) leave the pod
//! waiting with `FailedCreatePodSandBox` and nothing behind; `bandwidth` shapes, dual stack
//! gives an address of each family, and in API mode the Node's readiness and pod CIDR follow
//! the network. Agent restarts: `cni_restart.rs`. The node networks: `common/cni.rs`.
//!
//! The behaviour followed is cri-dockerd's network plugin (`network/cni/cni.go`: one
//! `ADD`/`DEL` of the first configuration, `CNI_ARGS` with the pod's namespace, name, sandbox
//! and UID) and libcni's (`libcni/api.go`: the list in order, `prevResult`, the cache).

use std::path::PathBuf;
use std::process::Command;

mod common;

use common::cni::{fetch, host_veth, require_plugins, running, wait_nothing_left, wait_pod_gone, web_pod, NodeNet};
use common::port_forward::{http_get, PortForward};
use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use dockerlet_integration_tests::docker::{docker, exec};
use dockerlet_integration_tests::harness::{free_port, random_hex};
use dockerlet_integration_tests::{wait_until, Agent, ManifestDir, PodExt, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::{json, Value};

/// Two agents, two bridges and subnets: pod IPs from the CNI result, each pod reaching the
/// other by IP through the host, `/etc/hosts` with the CNI address, a hostPort through
/// `portmap`, the plugins given cri-dockerd's `CNI_ARGS` and the pod's DNS as the `dns`
/// capability; after the pods are deleted, nothing
/// of theirs is left.
#[test]
fn pods_on_two_nodes_reach_each_other_by_pod_ip_and_nothing_is_left() {
    require_plugins();
    let (net_a, net_b) = (NodeNet::new(&[]), NodeNet::new(&[]));
    let (manifests_a, manifests_b) = (ManifestDir::new(), ManifestDir::new());
    let args_a = net_a.args();
    let args_b = net_b.args();
    let agent_a = Agent::start(
        "cni-a",
        manifests_a.path(),
        &args_a.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let agent_b = Agent::start(
        "cni-b",
        manifests_b.path(),
        &args_b.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let host_port = free_port();
    manifests_a.write("web-a.yaml", &web_pod("web-a", "hello-from-a", Some(host_port)));
    manifests_b.write("web-b.yaml", &web_pod("web-b", "hello-from-b", None));
    let (ip_a, sandbox_a, web_a) = running(&agent_a, "web-a", &net_a);
    let (ip_b, sandbox_b, web_b) = running(&agent_b, "web-b", &net_b);

    // Docker gave the sandboxes no network of their own: the plugins did.
    let mode = docker(&["inspect", "-f", "{{.HostConfig.NetworkMode}}", &sandbox_a]);
    assert_eq!(String::from_utf8_lossy(&mode.stdout).trim(), "none");
    assert_eq!(net_a.veths().len(), 1, "one veth on {}", net_a.bridge);
    assert_eq!(net_a.leases(), vec![ip_a.clone()]);
    let cached: Value = serde_json::from_slice(
        &std::fs::read(
            net_a
                .cache_dir()
                .join("results")
                .join(format!("{}-{sandbox_a}-eth0", net_a.name)),
        )
        .expect("libcni's cache file for the sandbox"),
    )
    .expect("JSON");
    let pod_a = agent_a.wait_for_running("web-a");
    assert_eq!(
        cached["cniArgs"],
        json!([
            ["IgnoreUnknown", "1"],
            ["K8S_POD_NAMESPACE", "default"],
            ["K8S_POD_NAME", pod_a.name()],
            ["K8S_POD_INFRA_CONTAINER_ID", sandbox_a],
            ["K8S_POD_UID", pod_a.uid()]
        ])
    );
    // The dns capability: the name servers, searches and options of the pod's resolv.conf.
    let resolv = String::from_utf8_lossy(&exec(&web_a, &["cat", "/etc/resolv.conf"]).stdout).into_owned();
    let mut dns = serde_json::Map::new();
    for (field, key) in [
        ("servers", "nameserver"),
        ("searches", "search"),
        ("options", "options"),
    ] {
        let values: Vec<&str> = resolv
            .lines()
            .filter_map(|l| l.strip_prefix(key).filter(|rest| rest.starts_with([' ', '\t'])))
            .flat_map(str::split_whitespace)
            .collect();
        if !values.is_empty() {
            dns.insert(field.into(), json!(values));
        }
    }
    assert!(
        dns.contains_key("servers"),
        "a name server in the pod's resolv.conf:\n{resolv}"
    );
    assert_eq!(
        cached["capabilityArgs"]["dns"],
        Value::Object(dns),
        "resolv.conf:\n{resolv}"
    );

    assert_eq!(fetch(&web_b, &ip_a, 8080), "hello-from-a");
    assert_eq!(fetch(&web_a, &ip_b, 8080), "hello-from-b");
    let hosts = exec(&web_a, &["cat", "/etc/hosts"]);
    assert!(
        String::from_utf8_lossy(&hosts.stdout).contains(&ip_a),
        "/etc/hosts names the pod IP {ip_a}: {}",
        String::from_utf8_lossy(&hosts.stdout)
    );
    // portmap's DNAT for the hostPort, from a pod of the other node to this node's bridge address.
    let gateway_a = format!("{}.1", net_a.prefix);
    assert_eq!(fetch(&web_b, &gateway_a, host_port), "hello-from-a");

    // Each ADD counted and timed as dockershim's network plugin manager did.
    let (status, metrics) = agent_a
        .get(&format!("http://127.0.0.1:{}/metrics", agent_a.ports().read_only))
        .expect("GET /metrics");
    assert_eq!(status, 200);
    for line in [
        r#"kubelet_network_plugin_operations_total{operation_type="set_up_pod"} 1"#,
        r#"kubelet_network_plugin_operations_duration_seconds_count{operation_type="set_up_pod"} 1"#,
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }

    manifests_a.remove("web-a.yaml");
    manifests_b.remove("web-b.yaml");
    wait_pod_gone(&agent_a, "web-a");
    wait_pod_gone(&agent_b, "web-b");
    wait_nothing_left(&net_a, &[sandbox_a, ip_a]);
    wait_nothing_left(&net_b, &[sandbox_b, ip_b]);
}

/// A plugin that fails, one that hangs past `--cni-plugin-timeout` (5 s) and one that prints garbage
/// (chosen by the pod's name in `CNI_ARGS`): each pod waits with `FailedCreatePodSandBox` and
/// the plugin's words, no sandbox container of it stays, and the bridge plugin's veth and lease
/// are released by the DEL that undoes the ADD. Once the configuration no longer names the
/// plugin, the pods run.
#[test]
fn plugin_faults_leave_pods_waiting_and_nothing_behind() {
    require_plugins();
    let net = NodeNet::new(&[json!({"type": "faulty"})]);
    std::fs::create_dir_all(net.bin_dir()).expect("bin dir");
    let log = net.dir.path().join("faulty.log");
    let script = format!(
        r#"#!/bin/sh
cat > /dev/null
echo "$CNI_COMMAND $CNI_ARGS" >> {log}
[ "$CNI_COMMAND" = ADD ] || exit 0
case "$CNI_ARGS" in
  *K8S_POD_NAME=fails-*) echo '{{"cniVersion":"1.0.0","code":7,"msg":"faulty refuses","details":"by design"}}'; exit 1 ;;
  *K8S_POD_NAME=hangs-*) exec sleep 60 ;;
  *) echo 'this is not JSON'; exit 0 ;;
esac
"#,
        log = log.display()
    );
    let plugin = net.bin_dir().join("faulty");
    std::fs::write(&plugin, script).expect("write the plugin");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).expect("chmod");

    let manifests = ManifestDir::new();
    let args = net.args();
    let agent = Agent::start(
        "cni-faults",
        manifests.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for name in ["fails", "hangs", "garbage"] {
        manifests.write(&format!("{name}.yaml"), &web_pod(name, name, None));
    }
    let expected = [
        (
            "fails",
            r#"plugin type="faulty" name="#,
            "failed (add): faulty refuses; by design",
        ),
        ("hangs", r#"plugin type="faulty" name="#, "did not finish in 5s: killed"),
        (
            "garbage",
            r#"plugin type="faulty" name="#,
            "returned a result that is not a CNI result",
        ),
    ];
    for (name, start, end) in expected {
        let pod_name = agent.pod_name(name);
        wait_until(&format!("{name}: FailedCreatePodSandBox"), POD_START_TIMEOUT, || {
            let events = agent.events();
            let found = events.iter().find(|e| {
                e["reason"] == "FailedCreatePodSandBox"
                    && e["message"].as_str().is_some_and(|m| {
                        m.contains(&format!("network for pod \"{pod_name}\": networkPlugin cni failed to set up pod \"{pod_name}_default\" network: "))
                            && m.contains(start)
                            && m.contains(end)
                    })
            });
            found.map(|_| ()).ok_or_else(|| format!("{events:#?}"))
        });
        let pod = agent.pod(name).expect("listed");
        assert_eq!(pod.phase(), "Pending", "{}", pod.summary());
    }
    // Each failed ADD was undone: nothing stays but what a sandbox being tried holds now.
    wait_until("no sandbox, veth or lease kept", CHANGE_TIMEOUT, || {
        let sandboxes: Vec<_> = agent.containers().into_iter().filter(|c| c.is_sandbox()).collect();
        let (veths, leases) = (net.veths(), net.leases());
        // The hanging ADD may be in flight: at most one sandbox and its attachment at a time.
        if sandboxes.len() <= 1 && veths.len() <= 1 && leases.len() <= 1 {
            Ok(())
        } else {
            Err(format!("sandboxes {sandboxes:?}, veths {veths:?}, leases {leases:?}"))
        }
    });
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        calls.lines().any(|l| l.starts_with("DEL ")),
        "the failed ADDs were undone with DEL:\n{calls}"
    );

    // The configuration mended: the next sandboxes attach and the pods run.
    std::fs::remove_file(&plugin).expect("remove the plugin");
    net.write_config(&[]);
    let mut needles = Vec::new();
    for name in ["fails", "hangs", "garbage"] {
        let (ip, sandbox, _) = running(&agent, name, &net);
        needles.extend([ip, sandbox]);
        manifests.remove(&format!("{name}.yaml"));
    }
    for name in ["fails", "hangs", "garbage"] {
        wait_pod_gone(&agent, name);
    }
    wait_nothing_left(&net, &needles);
}

/// The `bandwidth` plugin and the pod's `kubernetes.io/ingress-bandwidth` annotation: the
/// traffic into the pod is shaped on the host end of its veth (a token bucket at the rate asked,
/// cri-dockerd's bits per second); the loopback plugin ran on `lo` first, as cri-dockerd's
/// loopback network (the pod answers on 127.0.0.1).
#[test]
fn a_pod_asking_for_bandwidth_is_shaped() {
    require_plugins();
    let net = NodeNet::new(&[json!({"type": "bandwidth", "capabilities": {"bandwidth": true}})]);
    let manifests = ManifestDir::new();
    let args = net.args();
    let agent = Agent::start(
        "cni-bw",
        manifests.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let shaped = web_pod("shaped", "shaped", None).replacen(
        "metadata:\n  name: shaped\n",
        "metadata:\n  name: shaped\n  annotations:\n    kubernetes.io/ingress-bandwidth: 2M\n",
        1,
    );
    manifests.write("shaped.yaml", &shaped);
    let (ip, sandbox, web) = running(&agent, "shaped", &net);
    let veth = host_veth(&sandbox);
    let qdisc = Command::new("tc")
        .args(["qdisc", "show", "dev", &veth])
        .output()
        .expect("tc");
    let qdisc = String::from_utf8_lossy(&qdisc.stdout).into_owned();
    assert!(
        qdisc.contains("tbf") && qdisc.contains("rate 2Mbit"),
        "a 2 Mbit/s token bucket on {veth}:\n{qdisc}"
    );
    assert_eq!(fetch(&web, "127.0.0.1", 8080), "shaped");
    manifests.remove("shaped.yaml");
    wait_pod_gone(&agent, "shaped");
    wait_nothing_left(&net, &[sandbox, ip]);
}

/// A dual-stack pod network (host-local with an IPv4 and an IPv6 range): `status.podIPs` has an
/// address of each family, the node IP's (IPv4) first as kubelet's `sortPodIPs` orders them, and
/// `status.podIP` is that one; the downward API's `status.podIPs` is both joined by a comma,
/// `/etc/hosts` names the pod at both, and the pod answers on its IPv6 address; once it is gone
/// nothing of either family is left.
#[test]
fn a_dual_stack_pod_gets_an_address_of_each_family() {
    require_plugins();
    let net = NodeNet::dual_stack();
    let v6_prefix = net.v6_prefix.clone().expect("a dual-stack network");
    let manifests = ManifestDir::new();
    let args = net.args();
    let agent = Agent::start(
        "cni-dual",
        manifests.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    manifests.write(
        "dual.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: dual
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "mkdir -p /www && echo dual > /www/index.html && exec httpd -f -p 8080 -h /www"]
    env:
    - name: IPS
      valueFrom: {fieldRef: {fieldPath: status.podIPs}}
"#,
    );
    let (ip, sandbox, web) = running(&agent, "dual", &net);
    let pod = agent.pod("dual").expect("dual in /pods");
    let ips: Vec<String> = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ips.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.ip)
        .collect();
    assert_eq!(ips.len(), 2, "one address of each family: {}", pod.summary());
    assert_eq!(ips[0], ip, "podIP is podIPs[0]");
    let v6 = ips[1].clone();
    assert!(v6.starts_with(&v6_prefix), "{v6} is not in {v6_prefix}:/64");

    let env = exec(&web, &["sh", "-c", "echo $IPS"]);
    assert_eq!(String::from_utf8_lossy(&env.stdout).trim(), format!("{ip},{v6}"));
    let hosts = String::from_utf8_lossy(&exec(&web, &["cat", "/etc/hosts"]).stdout).into_owned();
    for address in [&ip, &v6] {
        assert!(
            hosts.lines().any(|l| l.starts_with(&format!("{address}\t"))),
            "/etc/hosts names the pod at {address}:\n{hosts}"
        );
    }
    let body = wait_until(&format!("[{v6}]:8080 from the host"), CHANGE_TIMEOUT, || {
        use std::io::{Read, Write};
        let address: std::net::Ipv6Addr = v6.parse().map_err(|e| format!("{e}"))?;
        // Each try a new connection: one made while the bridge's address was still tentative
        // (DAD) has another source address for good.
        let to = std::net::SocketAddr::from((address, 8080));
        let mut stream =
            std::net::TcpStream::connect_timeout(&to, std::time::Duration::from_secs(3)).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(3)))
            .map_err(|e| e.to_string())?;
        stream.write_all(b"GET / HTTP/1.0\r\n\r\n").map_err(|e| e.to_string())?;
        let mut text = String::new();
        stream.read_to_string(&mut text).map_err(|e| e.to_string())?;
        text.split_once("\r\n\r\n")
            .map(|(_, b)| b.trim().to_string())
            .ok_or(text)
    });
    assert_eq!(body, "dual");

    manifests.remove("dual.yaml");
    wait_pod_gone(&agent, "dual");
    wait_nothing_left(&net, &[sandbox, ip, v6]);
}

/// The Node's Ready condition: (status, message).
fn ready_condition(api: &ApiServer, node: &str) -> (String, String) {
    let node = api.get("nodes", "", node).unwrap_or_default();
    let ready = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap_or_default();
    (
        ready["status"].as_str().unwrap_or_default().to_string(),
        ready["message"].as_str().unwrap_or_default().to_string(),
    )
}

/// In API mode with `--network-plugin=cni` and no configuration yet: the Node is NotReady in
/// kubelet's words, a hostNetwork pod runs, a pod on the pod network waits with
/// `NetworkNotReady`. Once a configuration appears (read again without a restart) the Node is
/// Ready and the pod runs on the CNI network: its IP in `status.podIP(s)`, its readiness probe
/// reaching it there, and `kubectl port-forward` entering its network namespace.
#[test]
fn the_node_is_ready_once_a_cni_configuration_exists() {
    require_plugins();
    let net = NodeNet::new(&[]);
    net.hide_config(true);
    let args = net.args();
    let (api, agent, _manifests) =
        common::proxied_node_with("cni-api", &args.iter().map(String::as_str).collect::<Vec<_>>());
    let node = agent.node().to_string();
    wait_until("the Node NotReady for its network", CHANGE_TIMEOUT, || {
        let (status, message) = ready_condition(&api, &node);
        (status == "False" && message.contains("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:docker: network plugin is not ready: cni config uninitialized"))
            .then_some(())
            .ok_or(format!("{status}: {message}"))
    });
    common::kubectl_create(
        &api,
        "pods.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: hostnet
spec:
  nodeName: {node}
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
---
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "mkdir -p /www && echo hello-over-cni > /www/index.html && exec httpd -f -p 8080 -h /www"]
    ports:
    - containerPort: 8080
    readinessProbe:
      httpGet: {{port: 8080, path: /}}
      periodSeconds: 1
"#
        ),
    );
    common::wait_for_phase(&api, "hostnet", "Running", POD_START_TIMEOUT);
    wait_until("web's NetworkNotReady event", CHANGE_TIMEOUT, || {
        let events = api.list("events");
        events
            .iter()
            .find(|e| {
                e["reason"] == "NetworkNotReady"
                    && e["involvedObject"]["name"] == "web"
                    && e["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("network is not ready: container runtime network not ready"))
            })
            .map(|_| ())
            .ok_or_else(|| format!("{events:#?}"))
    });
    let web = api.get("pods", "default", "web").expect("web");
    assert_eq!(web["status"]["phase"], "Pending", "{}", web["status"]);

    net.hide_config(false);
    wait_until("the Node Ready", CHANGE_TIMEOUT, || {
        let (status, message) = ready_condition(&api, &node);
        (status == "True").then_some(()).ok_or(format!("{status}: {message}"))
    });
    let web = wait_until("web Running and Ready", POD_START_TIMEOUT, || {
        let pod = api.get("pods", "default", "web").ok_or("no pod")?;
        (pod["status"]["phase"] == "Running" && common::condition(&pod, "Ready")["status"] == "True")
            .then_some(pod.clone())
            .ok_or_else(|| pod["status"].to_string())
    });
    let ip = web["status"]["podIP"].as_str().unwrap_or_default().to_string();
    assert!(ip.starts_with(&format!("{}.", net.prefix)), "{}", web["status"]);
    assert_eq!(web["status"]["podIPs"], json!([{"ip": ip}]));
    let forward = PortForward::start(&api, "true", &["pod/web", ":8080"]);
    let local = forward.local_ports(&[8080])[0];
    let response = http_get(local, "/");
    assert!(response.ends_with("hello-over-cni\n"), "{response}");
    drop(forward);
    api.kubectl_ok(&["delete", "pod", "web", "hostnet", "--wait=false"]);
    wait_until("the pods gone", CHANGE_TIMEOUT, || {
        let left: Vec<String> = ["web", "hostnet"]
            .into_iter()
            .filter(|n| api.get("pods", "default", n).is_some())
            .map(String::from)
            .collect();
        left.is_empty().then_some(()).ok_or(format!("{left:?}"))
    });
    wait_nothing_left(&net, std::slice::from_ref(&ip));
}

/// A bridge + host-local template naming `{{.PodCIDR}}`, for `--cni-conf-template`, with its
/// own bridge and IPAM directory.
fn write_template(net: &NodeNet) -> PathBuf {
    let template = json!({
        "cniVersion": "1.0.0",
        "name": net.name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": net.bridge,
                "isGateway": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": "{{.PodCIDR}}"}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": net.ipam_dir(),
                },
            },
            {"type": "firewall"},
        ],
    });
    let path = net.dir.path().join("template.json");
    std::fs::write(&path, template.to_string()).expect("write the template");
    path
}

/// Node IPAM as kube-controller-manager's (`--cluster-cidr`): two agents joining one API server
/// each get a /24 of it in `spec.podCIDR`, render `--cni-conf-template` for it (no CNI
/// configuration before), and their pods get addresses in their own node's range and reach
/// each other by pod IP.
#[test]
fn each_node_gets_its_pod_cidr_from_the_api_server() {
    require_plugins();
    let hex = random_hex();
    let second = 100 + u8::from_str_radix(&hex[..2], 16).unwrap_or(0) % 100;
    let cluster_cidr = format!("10.{second}.0.0/16");
    let api = ApiServer::start_with(ApiServerConfig {
        tls: true,
        cluster_cidr: Some(cluster_cidr.clone()),
        ..ApiServerConfig::default()
    })
    .expect("start the API server");
    let mut nodes = Vec::new();
    for name in ["cni-cidr-a", "cni-cidr-b"] {
        let mut net = NodeNet::new(&[]);
        std::fs::remove_file(net.config_file()).expect("no configuration before the pod CIDR");
        let template = write_template(&net);
        let mut args = net.args();
        args.extend(["--cni-conf-template".to_string(), template.display().to_string()]);
        let manifests = ManifestDir::new();
        let agent = common::proxied_agent(
            name,
            &api,
            &manifests,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let cidr = wait_until("the Node's spec.podCIDR", CHANGE_TIMEOUT, || {
            let node = api.get("nodes", "", agent.node()).ok_or("no Node")?;
            let cidr = node["spec"]["podCIDR"].as_str().unwrap_or_default().to_string();
            (!cidr.is_empty() && node["spec"]["podCIDRs"] == json!([cidr]))
                .then_some(cidr)
                .ok_or_else(|| node["spec"].to_string())
        });
        assert!(
            cidr.starts_with(&format!("10.{second}.")) && cidr.ends_with(".0/24"),
            "{cidr}"
        );
        net.prefix = cidr.trim_end_matches(".0/24").to_string();
        let written = net.conf_dir().join("10-dockerlet.conflist");
        wait_until("the configuration rendered", CHANGE_TIMEOUT, || {
            let text = std::fs::read_to_string(&written).map_err(|e| e.to_string())?;
            text.contains(&cidr).then_some(()).ok_or(text)
        });
        nodes.push((net, agent, manifests, cidr));
    }
    assert_ne!(nodes[0].3, nodes[1].3, "each node its own range");
    let mut webs = Vec::new();
    for (i, (net, agent, manifests, _)) in nodes.iter().enumerate() {
        manifests.write("web.yaml", &web_pod("web", &format!("hello-from-{i}"), None));
        let (ip, _, web) = running(agent, "web", net);
        webs.push((ip, web));
    }
    assert_eq!(fetch(&webs[1].1, &webs[0].0, 8080), "hello-from-0");
    assert_eq!(fetch(&webs[0].1, &webs[1].0, 8080), "hello-from-1");
    for ((net, agent, manifests, _), (ip, _)) in nodes.iter().zip(&webs) {
        manifests.remove("web.yaml");
        wait_pod_gone(agent, "web");
        wait_nothing_left(net, std::slice::from_ref(ip));
    }
}
