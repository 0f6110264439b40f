//! `kubectl port-forward` through the test API server's kubelet proxy to the agent, both with
//! kubectl's default (`SPDY/3.1+portforward.k8s.io` tunnelled in WebSocket) and with
//! `KUBECTL_PORT_FORWARD_WEBSOCKETS=false` (SPDY/3.1 end to end): two ports at once, two
//! connections at once through one forward, a connection closed mid-transfer, a port nobody
//! listens on. The output kubectl prints is read as upstream's `test/e2e/kubectl/portforward.go`
//! reads it (`Forwarding from 127.0.0.1:<port> -> <remote>`).

use std::io::{Read, Write};
use std::net::TcpStream;

mod common;

use common::port_forward::{connect, http_get, PortForward};

use dockerlet_fake_apiserver::ApiServer;
use dockerlet_integration_tests::{wait_for, Agent, ManifestDir, CHANGE_TIMEOUT, POD_START_TIMEOUT};

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

/// Read until `want` bytes came (or the end), for the echo server, which never closes first.
fn read_exactly(stream: &mut TcpStream, want: usize) -> String {
    let mut got = vec![0u8; want];
    stream.read_exact(&mut got).expect("the echo back");
    String::from_utf8_lossy(&got).into_owned()
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
