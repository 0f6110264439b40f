//! The CNI pod network against real Docker and Debian's CNI plugins (`containernetworking-plugins`,
//! in `/usr/lib/cni`): `bridge` with `host-local` IPAM, `firewall` and `portmap`, as a
//! kubenet-style node network. Two agents, each with its own node name, bridge and pod subnet,
//! run a pod each: each pod reaches the other by pod IP (routed through the host), a hostPort
//! reaches a pod through `portmap`, and when the pods are gone no veth, IP lease, iptables rule or
//! cache entry of theirs is left. Plugin faults (an error, a hang, garbage) leave the pod
//! waiting with `FailedCreatePodSandBox` and nothing behind; a sandbox removed while the agent
//! was down is detached at the next start, one whose network broke fails CHECK and is replaced.
//!
//! The behaviour followed is cri-dockerd's network plugin (`network/cni/cni.go`: one
//! `ADD`/`DEL` of the first configuration, `CNI_ARGS` with the pod's namespace, name, sandbox
//! and UID) and libcni's (`libcni/api.go`: the list in order, `prevResult`, the cache).

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::port_forward::{http_get, PortForward};
use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use dockerlet_integration_tests::docker::{docker, exec};
use dockerlet_integration_tests::harness::{free_port, random_hex};
use dockerlet_integration_tests::{wait_until, Agent, ManifestDir, PodExt, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::{json, Value};

/// Debian's plugins.
const PLUGINS: &str = "/usr/lib/cni";

/// Fails (never passes silently) when the plugins are missing: `scripts/ensure-test-tools.sh`
/// installs them.
fn require_plugins() {
    for plugin in ["bridge", "host-local", "portmap", "firewall", "loopback"] {
        assert!(
            Path::new(PLUGINS).join(plugin).exists(),
            "{PLUGINS}/{plugin} is missing: install containernetworking-plugins (scripts/ensure-test-tools.sh)"
        );
    }
}

/// One node's network: its bridge, subnet, configuration, IPAM and cache directories. Dropping
/// it deletes the bridge (the plugins leave it, as kubenet's cbr0 stays).
struct NodeNet {
    dir: tempfile::TempDir,
    name: String,
    bridge: String,
    /// `10.<a>.<b>`: the /24's first three octets.
    prefix: String,
    /// A second, IPv6 range (`fd..::/64`) for a dual-stack network; none for IPv4 only.
    v6_prefix: Option<String>,
}

impl NodeNet {
    fn new(extra_plugins: &[Value]) -> NodeNet {
        NodeNet::with_ranges(extra_plugins, false)
    }

    /// A dual-stack network: host-local hands out an IPv4 and an IPv6 address.
    fn dual_stack() -> NodeNet {
        NodeNet::with_ranges(&[], true)
    }

    fn with_ranges(extra_plugins: &[Value], dual_stack: bool) -> NodeNet {
        let hex = random_hex();
        let (a, b) = (
            200 + u8::from_str_radix(&hex[0..2], 16).unwrap_or(0) % 50,
            u8::from_str_radix(&hex[2..4], 16).unwrap_or(0),
        );
        let net = NodeNet {
            dir: tempfile::tempdir().expect("tempdir"),
            name: format!("dl-{}", &hex[..8]),
            bridge: format!("dlbr{}", &hex[..8]),
            prefix: format!("10.{a}.{b}"),
            v6_prefix: dual_stack.then(|| format!("fd42:{}:{}:", &hex[..4], &hex[4..8])),
        };
        std::fs::create_dir_all(net.conf_dir()).expect("conf dir");
        net.write_config(extra_plugins);
        net
    }

    /// The configuration file.
    fn config_file(&self) -> PathBuf {
        self.conf_dir().join(format!("10-{}.conflist", self.name))
    }

    /// Moves the configuration out of libcni's sight (a name it does not read) and back.
    fn hide_config(&self, hidden: bool) {
        let off = self.config_file().with_extension("off");
        let (from, to) = if hidden {
            (self.config_file(), off)
        } else {
            (off, self.config_file())
        };
        std::fs::rename(from, to).expect("move the CNI configuration");
    }

    fn conf_dir(&self) -> PathBuf {
        self.dir.path().join("net.d")
    }

    fn cache_dir(&self) -> PathBuf {
        self.dir.path().join("cache")
    }

    fn ipam_dir(&self) -> PathBuf {
        self.dir.path().join("ipam")
    }

    fn bin_dir(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    /// `10-<name>.conflist`: bridge + host-local, firewall, portmap, then `extra`.
    fn write_config(&self, extra: &[Value]) {
        let mut plugins = vec![
            json!({
                "type": "bridge",
                "bridge": self.bridge,
                "isGateway": true,
                "ipMasq": false,
                "ipam": {
                    "type": "host-local",
                    "ranges": self.ranges(),
                    "routes": self.routes(),
                    "dataDir": self.ipam_dir(),
                },
            }),
            json!({"type": "firewall"}),
            json!({"type": "portmap", "capabilities": {"portMappings": true}}),
        ];
        plugins.extend(extra.iter().cloned());
        let list = json!({"cniVersion": "1.0.0", "name": self.name, "plugins": plugins});
        let path = self.config_file();
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, list.to_string()).expect("write the CNI configuration");
        std::fs::rename(&tmp, &path).expect("put the CNI configuration in place");
    }

    /// host-local's ranges: the IPv4 /24, and the IPv6 /64 on a dual-stack network.
    fn ranges(&self) -> Value {
        let mut ranges = vec![json!([{"subnet": format!("{}.0/24", self.prefix)}])];
        if let Some(v6) = &self.v6_prefix {
            ranges.push(json!([{"subnet": format!("{v6}:/64")}]));
        }
        Value::Array(ranges)
    }

    /// The pods' default routes through the bridge: IPv4's, and IPv6's on a dual-stack network.
    fn routes(&self) -> Value {
        let mut routes = vec![json!({"dst": "0.0.0.0/0"})];
        if self.v6_prefix.is_some() {
            routes.push(json!({"dst": "::/0"}));
        }
        Value::Array(routes)
    }

    /// The agent's flags for this network (the test's own plugin directory first).
    fn args(&self) -> Vec<String> {
        vec![
            "--network-plugin".into(),
            "cni".into(),
            "--cni-conf-dir".into(),
            self.conf_dir().display().to_string(),
            "--cni-bin-dir".into(),
            format!("{},{PLUGINS}", self.bin_dir().display()),
            "--cni-cache-dir".into(),
            self.cache_dir().display().to_string(),
            "--cni-plugin-timeout".into(),
            "5s".into(),
        ]
    }

    /// The veths on the bridge.
    fn veths(&self) -> Vec<String> {
        let out = Command::new("ip")
            .args(["-o", "link", "show", "master", &self.bridge])
            .output()
            .expect("ip link");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split(':').nth(1).map(|n| n.trim().to_string()))
            .collect()
    }

    /// host-local's leases: the files of its network directory named by an address.
    fn leases(&self) -> Vec<String> {
        std::fs::read_dir(self.ipam_dir().join(&self.name))
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The cache's attachment files.
    fn cached(&self) -> Vec<String> {
        std::fs::read_dir(self.cache_dir().join("results"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// What of this network the node's network still holds: veths, leases, cache entries and
    /// iptables rules naming an address of its subnet or one of `needles` (sandbox IDs).
    fn leftovers(&self, needles: &[String]) -> Vec<String> {
        let mut left: Vec<String> = self.veths().into_iter().map(|v| format!("veth {v}")).collect();
        left.extend(self.leases().into_iter().map(|l| format!("lease {l}")));
        left.extend(self.cached().into_iter().map(|c| format!("cache {c}")));
        let mut rules = String::from_utf8_lossy(&Command::new("iptables-save").output().expect("iptables-save").stdout)
            .into_owned();
        if self.v6_prefix.is_some() {
            let v6 = Command::new("ip6tables-save").output().expect("ip6tables-save");
            rules.push_str(&String::from_utf8_lossy(&v6.stdout));
        }
        let subnets: Vec<String> = std::iter::once(format!("{}.", self.prefix))
            .chain(self.v6_prefix.clone())
            .collect();
        for line in rules.lines() {
            let names_subnet = line
                .split([' ', '/', '"'])
                .any(|w| subnets.iter().any(|s| w.starts_with(s.as_str())));
            if names_subnet || needles.iter().any(|n| !n.is_empty() && line.contains(n.as_str())) {
                left.push(format!("iptables {line}"));
            }
        }
        left
    }
}

impl Drop for NodeNet {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.bridge]).output();
    }
}

/// Waits until the static pod of `manifest` is gone from the agent's `/pods`.
fn wait_pod_gone(agent: &Agent, manifest: &str) {
    wait_until(&format!("{manifest} gone"), CHANGE_TIMEOUT, || {
        match agent.pod(manifest) {
            None => Ok(()),
            Some(p) => Err(p.summary()),
        }
    });
}

/// Waits until nothing of `net` is left ([`NodeNet::leftovers`]).
fn wait_nothing_left(net: &NodeNet, needles: &[String]) {
    wait_until(&format!("nothing of {} left", net.name), CHANGE_TIMEOUT, || {
        let left = net.leftovers(needles);
        left.is_empty().then_some(()).ok_or(left.join("\n"))
    });
}

/// A pod serving `text` on port 8080 with busybox httpd, `hostPort` published if given.
fn web_pod(name: &str, text: &str, host_port: Option<u16>) -> String {
    let port = match host_port {
        Some(p) => format!("    ports:\n    - containerPort: 8080\n      hostPort: {p}\n"),
        None => "    ports:\n    - containerPort: 8080\n".into(),
    };
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "mkdir -p /www && echo {text} > /www/index.html && exec httpd -f -p 8080 -h /www"]
{port}"#
    )
}

/// The running pod `manifest`'s IP (in `net`'s subnet) and its sandbox's container ID.
fn running(agent: &Agent, manifest: &str, net: &NodeNet) -> (String, String, String) {
    let pod = agent.wait_for_running(manifest);
    let ip = pod.pod_ip().unwrap_or_default().to_string();
    assert!(
        ip.starts_with(&format!("{}.", net.prefix)),
        "{manifest}'s IP {ip:?} is not in {}.0/24: {}",
        net.prefix,
        pod.summary()
    );
    let containers = agent.pod_containers(pod.uid());
    let sandbox = containers
        .iter()
        .find(|c| c.is_sandbox())
        .expect("a sandbox")
        .id
        .clone();
    let web = containers
        .iter()
        .find(|c| c.kube_name() == "web")
        .expect("the web container")
        .id
        .clone();
    (ip, sandbox, web)
}

/// An HTTP GET from container `from` to `ip:port` with busybox `nc` (its static `wget`
/// crashes resolving names), retried until it answers; the body.
fn fetch(from: &str, ip: &str, port: u16) -> String {
    let request = format!("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {ip} {port}");
    wait_until(&format!("{ip}:{port} from {from}"), CHANGE_TIMEOUT, || {
        let out = exec(from, &["sh", "-c", &request]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        match text.split_once("\r\n\r\n") {
            Some((head, body)) if out.status.success() && head.starts_with("HTTP/1.") => Ok(body.trim().to_string()),
            _ => Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr))),
        }
    })
}

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

/// A sandbox removed while its agent was killed is detached at the next start (its lease and
/// cache entry released); a running one is kept attached and its pod keeps its IP.
/// The host end of the veth of running sandbox `sandbox` (the peer of its `eth0`).
fn host_veth(sandbox: &str) -> String {
    let pid = String::from_utf8_lossy(&docker(&["inspect", "-f", "{{.State.Pid}}", sandbox]).stdout)
        .trim()
        .to_string();
    // `2: eth0@if5478: <…>`: the peer's index on the host.
    let eth0 = Command::new("nsenter")
        .args(["-t", &pid, "-n", "ip", "-o", "link", "show", "eth0"])
        .output()
        .expect("nsenter");
    let eth0 = String::from_utf8_lossy(&eth0.stdout).into_owned();
    let index = eth0
        .split_once("@if")
        .and_then(|(_, rest)| rest.split(':').next())
        .unwrap_or_else(|| panic!("no peer index in {eth0:?}"))
        .to_string();
    let links = Command::new("ip").args(["-o", "link"]).output().expect("ip link");
    String::from_utf8_lossy(&links.stdout)
        .lines()
        .find_map(|l| {
            let (i, rest) = l.split_once(": ")?;
            (i == index).then(|| rest.split(['@', ':']).next().unwrap_or_default().to_string())
        })
        .unwrap_or_else(|| panic!("no host link with index {index:?} for sandbox {sandbox}"))
}

/// While the agent is down (SIGKILL): one pod's sandbox is removed behind its back, another's
/// network is broken (the host end of its veth deleted). At the next start the gone sandbox is
/// detached (its lease released), the broken one fails the plugins' `CHECK` and is replaced (a
/// new sandbox, reachable again), and the untouched pod keeps its sandbox and address.
#[test]
fn sandboxes_gone_or_broken_while_the_agent_was_down_are_mended_at_start() {
    require_plugins();
    let net = NodeNet::new(&[]);
    let manifests = ManifestDir::new();
    let args = net.args();
    let mut agent = Agent::start(
        "cni-restart",
        manifests.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    manifests.write("kept.yaml", &web_pod("kept", "kept", None));
    manifests.write("lost.yaml", &web_pod("lost", "lost", None));
    manifests.write("broken.yaml", &web_pod("broken", "broken", None));
    let (kept_ip, kept_sandbox, kept_web) = running(&agent, "kept", &net);
    let (lost_ip, lost_sandbox, _) = running(&agent, "lost", &net);
    let (broken_ip, broken_sandbox, _) = running(&agent, "broken", &net);
    agent.kill9();
    manifests.remove("lost.yaml");
    let lost_pod_containers: Vec<String> = dockerlet_integration_tests::docker::node_containers(agent.node())
        .into_iter()
        .filter(|c| c.pod_name() == agent.pod_name("lost"))
        .map(|c| c.id)
        .collect();
    for id in &lost_pod_containers {
        docker(&["rm", "-f", id]);
    }
    assert!(
        net.leases().contains(&lost_ip),
        "the lease outlives a container removed behind the agent's back"
    );
    let veth = host_veth(&broken_sandbox);
    let deleted = Command::new("ip")
        .args(["link", "del", &veth])
        .status()
        .expect("ip link del");
    assert!(deleted.success(), "delete {veth}");
    agent.restart();
    wait_until("the lost sandbox detached", CHANGE_TIMEOUT, || {
        let (leases, cached) = (net.leases(), net.cached());
        if !leases.contains(&lost_ip) && !cached.iter().any(|c| c.contains(&lost_sandbox)) {
            Ok(())
        } else {
            Err(format!("leases {leases:?}, cache {cached:?}"))
        }
    });
    let (ip, sandbox, _) = running(&agent, "kept", &net);
    assert_eq!(
        (ip.as_str(), sandbox.as_str()),
        (kept_ip.as_str(), kept_sandbox.as_str())
    );
    assert!(net.leases().contains(&kept_ip));
    let (new_ip, new_sandbox) = wait_until("a new sandbox for broken", POD_START_TIMEOUT, || {
        let (ip, sandbox, _) = running(&agent, "broken", &net);
        (sandbox != broken_sandbox)
            .then_some((ip, sandbox))
            .ok_or_else(|| "the old sandbox still".to_string())
    });
    assert!(
        agent
            .log()
            .contains("its pod network failed the plugins' CHECK (found at start)"),
        "the replacement is logged with its reason"
    );
    assert_eq!(fetch(&kept_web, &new_ip, 8080), "broken");
    assert!(
        !net.cached().iter().any(|c| c.contains(&broken_sandbox)),
        "the broken sandbox is detached"
    );

    manifests.remove("kept.yaml");
    manifests.remove("broken.yaml");
    wait_pod_gone(&agent, "kept");
    wait_pod_gone(&agent, "broken");
    wait_nothing_left(
        &net,
        &[
            kept_sandbox,
            kept_ip,
            lost_sandbox,
            broken_sandbox,
            broken_ip,
            new_sandbox,
            new_ip,
        ],
    );
}

/// An agent SIGKILLed in the middle of a sandbox's CNI ADD (after `bridge` and `host-local` ran,
/// while a plugin after them is still at work): at the next start that sandbox, attached without
/// an address, is detached (its lease released, its veth gone) and replaced, and the pod comes up
/// on a new sandbox; once the pod is deleted nothing of either is left.
#[test]
fn an_agent_killed_during_add_cleans_up_at_its_next_start() {
    require_plugins();
    let net = NodeNet::new(&[json!({"type": "slow"})]);
    std::fs::create_dir_all(net.bin_dir()).expect("bin dir");
    let (entered, hold) = (net.dir.path().join("slow.entered"), net.dir.path().join("slow.hold"));
    // Passes its prevResult on (as portmap does), but first waits while the hold file exists.
    let script = format!(
        r#"#!/bin/sh
conf=$(cat)
[ "$CNI_COMMAND" = ADD ] || exit 0
touch {entered}
while [ -e {hold} ]; do sleep 0.1; done
printf '%s' "$conf" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["prevResult"]))'
"#,
        entered = entered.display(),
        hold = hold.display()
    );
    let plugin = net.bin_dir().join("slow");
    std::fs::write(&plugin, script).expect("write the plugin");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(&hold, "").expect("hold the ADD");

    let manifests = ManifestDir::new();
    let args = net.args();
    let mut agent = Agent::start(
        "cni-killed",
        manifests.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    manifests.write("slow.yaml", &web_pod("slow", "slow", None));
    wait_until("the ADD in the slow plugin", POD_START_TIMEOUT, || {
        entered.exists().then_some(()).ok_or_else(|| "not yet".to_string())
    });
    let leases = net.leases();
    assert_eq!(leases.len(), 1, "host-local ran before the slow plugin: {leases:?}");
    let first_sandbox = dockerlet_integration_tests::docker::node_containers(agent.node())
        .into_iter()
        .find(|c| c.is_sandbox())
        .expect("the sandbox being attached")
        .id;
    agent.kill9();
    std::fs::remove_file(&hold).expect("let ADDs through");
    agent.restart();

    let (ip, sandbox, _) = running(&agent, "slow", &net);
    assert_ne!(sandbox, first_sandbox, "the half-attached sandbox is replaced");
    wait_until("the first sandbox detached", CHANGE_TIMEOUT, || {
        let (leases, cached) = (net.leases(), net.cached());
        if leases == [ip.clone()] && !cached.iter().any(|c| c.contains(&first_sandbox)) && net.veths().len() == 1 {
            Ok(())
        } else {
            Err(format!("leases {leases:?}, cache {cached:?}, veths {:?}", net.veths()))
        }
    });
    assert!(
        agent
            .log()
            .contains("its CNI ADD never finished (the agent stopped during it)"),
        "the replacement is logged with its reason"
    );
    manifests.remove("slow.yaml");
    wait_pod_gone(&agent, "slow");
    wait_nothing_left(&net, &[first_sandbox, sandbox, ip, leases[0].clone()]);
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
