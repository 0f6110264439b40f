//! `kubectl port-forward` through the test API server's kubelet proxy to the agent, both with
//! kubectl's default (`SPDY/3.1+portforward.k8s.io` tunnelled in WebSocket) and with
//! `KUBECTL_PORT_FORWARD_WEBSOCKETS=false` (SPDY/3.1 end to end): two ports at once, two
//! connections at once through one forward, a connection closed mid-transfer, a port nobody
//! listens on. The output kubectl prints is read as upstream's `test/e2e/kubectl/portforward.go`
//! reads it (`Forwarding from 127.0.0.1:<port> -> <remote>`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use dockerlet_fake_apiserver::{ApiServer, KUBECTL};
use dockerlet_integration_tests::{wait_for, Agent, ManifestDir, CHANGE_TIMEOUT, POD_START_TIMEOUT};

const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// An HTTP server on 8080 (a small page and a 16 MiB file) and an echo server on 8081.
fn start(name: &str) -> (ApiServer, Agent, ManifestDir) {
    let (api, agent, manifests) = common::proxied_node(name);
    let path = api.dir().join("ports.yaml");
    std::fs::write(
        &path,
        format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: ports
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "mkdir -p /www && echo hello-web > /www/index.html && head -c 16777216 /dev/zero > /www/big && exec httpd -f -p 8080 -h /www"]
  - name: echo
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["nc", "-ll", "-p", "8081", "-e", "cat"]
"#,
            node = agent.node()
        ),
    )
    .unwrap();
    api.kubectl_ok(&["create", "-f", path.to_str().unwrap()]);
    wait_for("ports Running", POD_START_TIMEOUT, || {
        api.get("pods", "default", "ports")
            .filter(|p| p["status"]["phase"] == "Running")
    });
    (api, agent, manifests)
}

/// A running `kubectl port-forward`: its stdout lines as they come, its stderr so far; killed on
/// drop.
struct PortForward {
    child: Child,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl PortForward {
    fn start(api: &ApiServer, websockets: &str, args: &[&str]) -> PortForward {
        let mut child = Command::new(KUBECTL)
            .arg("--kubeconfig")
            .arg(api.kubeconfig_path())
            .arg("--cache-dir")
            .arg(api.dir().join("kube-cache"))
            .arg("port-forward")
            .args(args)
            .env_remove("KUBECONFIG")
            .env("KUBECTL_PORT_FORWARD_WEBSOCKETS", websockets)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl port-forward");
        let (send, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = err.read(&mut buf) {
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        PortForward { child, lines, stderr }
    }

    /// The local port of each remote port, from kubectl's `Forwarding from 127.0.0.1:<local> ->
    /// <remote>` lines.
    fn local_ports(&self, remotes: &[u16]) -> Vec<u16> {
        let deadline = Instant::now() + CHANGE_TIMEOUT;
        let mut found: Vec<Option<u16>> = vec![None; remotes.len()];
        let mut seen = Vec::new();
        while found.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = self.lines.recv_timeout(left) else {
                panic!("kubectl printed {seen:?}, stderr {:?}", self.stderr());
            };
            if let Some((local, remote)) = line
                .strip_prefix("Forwarding from 127.0.0.1:")
                .and_then(|rest| rest.split_once(" -> "))
            {
                let remote: u16 = remote.trim().parse().unwrap();
                if let Some(i) = remotes.iter().position(|r| *r == remote) {
                    found[i] = Some(local.parse().unwrap());
                }
            }
            seen.push(line);
        }
        found.into_iter().map(Option::unwrap).collect()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to kubectl's local port");
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
}

/// Read until `want` bytes came (or the end), for the echo server, which never closes first.
fn read_exactly(stream: &mut TcpStream, want: usize) -> String {
    let mut got = vec![0u8; want];
    stream.read_exact(&mut got).expect("the echo back");
    String::from_utf8_lossy(&got).into_owned()
}

/// `GET <path>` over HTTP/1.0 and the whole response.
fn http_get(port: u16, path: &str) -> String {
    let mut stream = connect(port);
    write!(stream, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut body = Vec::new();
    stream.read_to_end(&mut body).expect("the HTTP response");
    String::from_utf8_lossy(&body).into_owned()
}

fn forwards_two_ports_and_connections(websockets: &str, name: &str) {
    let (api, _agent, _manifests) = start(name);
    let forward = PortForward::start(&api, websockets, &["pod/ports", ":8080", ":8081"]);
    let [web, echo] = forward.local_ports(&[8080, 8081])[..] else {
        unreachable!()
    };

    // Two connections to the echo server open at once, written to in turn, and a page from the
    // other port in between.
    let mut a = connect(echo);
    let mut b = connect(echo);
    a.write_all(b"first-a\n").unwrap();
    b.write_all(b"first-b\n").unwrap();
    let page = http_get(web, "/");
    assert!(page.contains("200 OK") && page.contains("hello-web"), "{page:?}");
    assert_eq!(read_exactly(&mut b, 8), "first-b\n");
    assert_eq!(read_exactly(&mut a, 8), "first-a\n");
    let chunk: String = (0..4000).map(|i| format!("{i:07}\n")).collect();
    a.write_all(chunk.as_bytes()).unwrap();
    b.write_all(b"second-b\n").unwrap();
    assert_eq!(read_exactly(&mut b, 9), "second-b\n");
    assert_eq!(read_exactly(&mut a, chunk.len()), chunk, "32 kB through one connection");
    drop(a);
    drop(b);

    // A connection closed while the pod still writes to it (upstream's "port-forward should
    // keep working after detect broken connection"): the forward goes on serving.
    let mut big = connect(web);
    big.write_all(b"GET /big HTTP/1.0\r\n\r\n").unwrap();
    let mut one = [0u8; 1];
    big.read_exact(&mut one).expect("the first byte of /big");
    drop(big);
    let page = http_get(web, "/");
    assert!(page.contains("hello-web"), "after a broken connection: {page:?}");
    let mut c = connect(echo);
    c.write_all(b"still-here\n").unwrap();
    assert_eq!(read_exactly(&mut c, 11), "still-here\n");
    drop(c);

    // A port nobody listens on: the local connection is closed, and kubectl reports kubelet's
    // error (client-go's "an error occurred forwarding <local> -> <remote>: …").
    let refused = PortForward::start(&api, websockets, &["pod/ports", ":9999"]);
    let [local] = refused.local_ports(&[9999])[..] else {
        unreachable!()
    };
    let mut d = connect(local);
    let _ = d.write_all(b"anyone?\n");
    let mut rest = Vec::new();
    let _ = d.read_to_end(&mut rest);
    assert!(rest.is_empty(), "data from a port nobody listens on: {rest:?}");
    let expected = format!("an error occurred forwarding {local} -> 9999: error forwarding port 9999 to pod ");
    wait_for("kubectl's port-forward error", CHANGE_TIMEOUT, || {
        let stderr = refused.stderr();
        (stderr.contains(&expected) && stderr.contains("connection refused")).then_some(())
    });
    let stderr = refused.stderr();
    assert!(
        stderr.contains("failed to connect to localhost:9999 inside namespace "),
        "{stderr}"
    );
    // The first forward was not disturbed by the other one's error.
    let page = http_get(web, "/");
    assert!(page.contains("hello-web"), "{page:?} {}", forward.stderr());
}

/// kubectl's default: SPDY tunnelled in WebSocket to the API server, passed through to the node.
#[test]
fn kubectl_port_forward_over_websocket() {
    forwards_two_ports_and_connections("true", "kpf-ws");
}

/// `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`: SPDY/3.1 end to end.
#[test]
fn kubectl_port_forward_over_spdy() {
    forwards_two_ports_and_connections("false", "kpf-spdy");
}
