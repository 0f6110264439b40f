//! The CNI tests' node networks (`cni_network.rs`, `cni_restart.rs`): Debian's plugins
//! (`containernetworking-plugins`, in `/usr/lib/cni`), one bridge, subnet, configuration, IPAM
//! and cache directory per node, and what of them is left after the pods.

use std::path::{Path, PathBuf};
use std::process::Command;

use dockerlet_integration_tests::docker::{docker, exec};
use dockerlet_integration_tests::harness::random_hex;
use dockerlet_integration_tests::{wait_until, Agent, PodExt, CHANGE_TIMEOUT};
use serde_json::{json, Value};

/// Debian's plugins.
pub const PLUGINS: &str = "/usr/lib/cni";

/// Fails (never passes silently) when the plugins are missing: `scripts/ensure-test-tools.sh`
/// installs them.
pub fn require_plugins() {
    for plugin in ["bridge", "host-local", "portmap", "firewall", "loopback"] {
        assert!(
            Path::new(PLUGINS).join(plugin).exists(),
            "{PLUGINS}/{plugin} is missing: install containernetworking-plugins (scripts/ensure-test-tools.sh)"
        );
    }
}

/// One node's network: its bridge, subnet, configuration, IPAM and cache directories. Dropping
/// it deletes the bridge (the plugins leave it, as kubenet's cbr0 stays).
pub struct NodeNet {
    pub dir: tempfile::TempDir,
    pub name: String,
    pub bridge: String,
    /// `10.<a>.<b>`: the /24's first three octets.
    pub prefix: String,
    /// A second, IPv6 range (`fd..::/64`) for a dual-stack network; none for IPv4 only.
    pub v6_prefix: Option<String>,
}

impl NodeNet {
    pub fn new(extra_plugins: &[Value]) -> NodeNet {
        NodeNet::with_ranges(extra_plugins, false)
    }

    /// A dual-stack network: host-local hands out an IPv4 and an IPv6 address.
    pub fn dual_stack() -> NodeNet {
        NodeNet::with_ranges(&[], true)
    }

    pub fn with_ranges(extra_plugins: &[Value], dual_stack: bool) -> NodeNet {
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
            // Groups as an address prints them (no leading zero, never zero: `fd42:fb3:…`,
            // not `fd42:0fb3:…`), so an address of the range starts with the prefix's text.
            v6_prefix: dual_stack.then(|| format!("fd42:{}:{}:", v6_group(&hex[..4]), v6_group(&hex[4..8]))),
        };
        std::fs::create_dir_all(net.conf_dir()).expect("conf dir");
        net.write_config(extra_plugins);
        net
    }

    /// The configuration file.
    pub fn config_file(&self) -> PathBuf {
        self.conf_dir().join(format!("10-{}.conflist", self.name))
    }

    /// Moves the configuration out of libcni's sight (a name it does not read) and back.
    pub fn hide_config(&self, hidden: bool) {
        let off = self.config_file().with_extension("off");
        let (from, to) = if hidden {
            (self.config_file(), off)
        } else {
            (off, self.config_file())
        };
        std::fs::rename(from, to).expect("move the CNI configuration");
    }

    pub fn conf_dir(&self) -> PathBuf {
        self.dir.path().join("net.d")
    }

    pub fn cache_dir(&self) -> PathBuf {
        self.dir.path().join("cache")
    }

    pub fn ipam_dir(&self) -> PathBuf {
        self.dir.path().join("ipam")
    }

    pub fn bin_dir(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    /// `10-<name>.conflist`: bridge + host-local, firewall, portmap, then `extra`.
    pub fn write_config(&self, extra: &[Value]) {
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
    pub fn ranges(&self) -> Value {
        let mut ranges = vec![json!([{"subnet": format!("{}.0/24", self.prefix)}])];
        if let Some(v6) = &self.v6_prefix {
            ranges.push(json!([{"subnet": format!("{v6}:/64")}]));
        }
        Value::Array(ranges)
    }

    /// The pods' default routes through the bridge: IPv4's, and IPv6's on a dual-stack network.
    pub fn routes(&self) -> Value {
        let mut routes = vec![json!({"dst": "0.0.0.0/0"})];
        if self.v6_prefix.is_some() {
            routes.push(json!({"dst": "::/0"}));
        }
        Value::Array(routes)
    }

    /// The agent's flags for this network (the test's own plugin directory first).
    pub fn args(&self) -> Vec<String> {
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
    pub fn veths(&self) -> Vec<String> {
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
    pub fn leases(&self) -> Vec<String> {
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
    pub fn cached(&self) -> Vec<String> {
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
    pub fn leftovers(&self, needles: &[String]) -> Vec<String> {
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
pub fn wait_pod_gone(agent: &Agent, manifest: &str) {
    wait_until(&format!("{manifest} gone"), CHANGE_TIMEOUT, || {
        match agent.pod(manifest) {
            None => Ok(()),
            Some(p) => Err(p.summary()),
        }
    });
}

/// Waits until nothing of `net` is left ([`NodeNet::leftovers`]).
pub fn wait_nothing_left(net: &NodeNet, needles: &[String]) {
    wait_until(&format!("nothing of {} left", net.name), CHANGE_TIMEOUT, || {
        let left = net.leftovers(needles);
        left.is_empty().then_some(()).ok_or(left.join("\n"))
    });
}

/// A pod serving `text` on port 8080 with busybox httpd, `hostPort` published if given.
pub fn web_pod(name: &str, text: &str, host_port: Option<u16>) -> String {
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
pub fn running(agent: &Agent, manifest: &str, net: &NodeNet) -> (String, String, String) {
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
pub fn fetch(from: &str, ip: &str, port: u16) -> String {
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

/// The host end of the veth of running sandbox `sandbox` (the peer of its `eth0`).
pub fn host_veth(sandbox: &str) -> String {
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

/// Four hex digits as an IPv6 address prints the group: without leading zeros, and never `0`
/// (which an address would compress away).
fn v6_group(hex: &str) -> String {
    format!("{:x}", u16::from_str_radix(hex, 16).unwrap_or(0).max(1))
}
