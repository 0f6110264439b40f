//! `/portForward` on the kubelet API against the real agent and Docker, with a client
//! certificate: SPDY/3.1 (`portforward.k8s.io`), WebSocket (`v4.channel.k8s.io`, `?port=`) and
//! SPDY tunnelled in WebSocket (`SPDY/3.1+portforward.k8s.io`, kubectl's default), into the
//! pod's network namespace.

use std::time::Duration;

use bytes::Bytes;
use dockerlet_integration_tests::kubelet_stream::{ClientPki, KubeletClient};
use dockerlet_integration_tests::{Agent, ManifestDir};
use dockerlet_streaming::spdy::conn::{self, Control, SpdyStream};
use dockerlet_streaming::spdy::{FlowControl, Role, SessionConfig};
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

const END: Duration = Duration::from_secs(60);

/// Echo servers on 8080 and 8081 (every interface) and an HTTP server on 127.0.0.1:9090 only.
const POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: ports
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: echo
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["nc", "-ll", "-p", "8080", "-e", "cat"]
  - name: echo2
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["nc", "-ll", "-p", "8081", "-e", "cat"]
  - name: local
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "mkdir -p /www && echo hello-local > /www/index.html && exec httpd -f -p 127.0.0.1:9090 -h /www"]
"#;

fn start(test: &str) -> (Agent, ManifestDir, ClientPki) {
    let pki = ClientPki::new().unwrap();
    let manifests = ManifestDir::new();
    manifests.write("ports.yaml", POD);
    let ca = pki.ca.display().to_string();
    let agent = Agent::start(
        test,
        manifests.path(),
        &["--client-ca-file", &ca, "--authorization-mode", "AlwaysAllow"],
    );
    agent.wait_for_running("ports");
    (agent, manifests, pki)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn headers(kind: &str, port: u16, request: &str) -> Vec<(String, String)> {
    vec![
        ("streamType".into(), kind.into()),
        ("port".into(), port.to_string()),
        ("requestID".into(), request.into()),
    ]
}

/// Everything the server sends on a stream until its FIN.
async fn read_all(stream: &mut SpdyStream) -> String {
    let mut out = Vec::new();
    let read = async {
        while let Some(Ok(chunk)) = stream.reader.next().await {
            out.extend_from_slice(&chunk);
        }
    };
    tokio::time::timeout(END, read).await.expect("the stream to end");
    String::from_utf8_lossy(&out).into_owned()
}

/// One connection (an error and a data stream, as kubectl opens them): send `request`, FIN,
/// and return what came back on the data and the error stream.
async fn round_trip(mut control: Control, port: u16, id: &str, request: &str) -> (String, String) {
    let mut error = control.open(headers("error", port, id), true).await.unwrap();
    let mut data = control.open(headers("data", port, id), false).await.unwrap();
    data.writer.write(Bytes::from(request.to_string())).await.unwrap();
    data.writer.finish().await.unwrap();
    let back = read_all(&mut data).await;
    (back, read_all(&mut error).await)
}

/// The checks every SPDY transport passes: two ports and two connections at once, a port
/// bound to 127.0.0.1 in the pod, and a port nobody listens on.
async fn spdy_checks(control: Control) {
    let (a, b, c) = tokio::join!(
        round_trip(control.clone(), 8080, "0", "one\n"),
        round_trip(control.clone(), 8081, "1", "two\n"),
        round_trip(control.clone(), 8080, "2", "three\n"),
    );
    assert_eq!(a, ("one\n".into(), String::new()));
    assert_eq!(b, ("two\n".into(), String::new()));
    assert_eq!(c, ("three\n".into(), String::new()));
    let (page, error) = round_trip(control.clone(), 9090, "3", "GET / HTTP/1.0\r\n\r\n").await;
    assert!(page.contains("hello-local"), "{page:?} {error:?}");
    let (data, error) = round_trip(control, 9999, "4", "x").await;
    assert_eq!(data, "");
    assert!(
        error.starts_with("error forwarding port 9999 to pod ")
            && error.contains(", uid : failed to connect to localhost:9999 inside namespace ")
            && error.contains("IPv4: dial tcp4 127.0.0.1:9999: connect: connection refused"),
        "{error}"
    );
}

/// SPDY/3.1 with `portforward.k8s.io`, as kubectl with `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`.
#[test]
fn spdy_port_forward_reaches_the_pods_ports() {
    let (agent, _manifests, pki) = start("pf-spdy");
    let client = pki.client(agent.ports().kubelet).unwrap();
    let path = format!("/portForward/default/{}", agent.pod_name("ports"));
    runtime().block_on(async {
        let spdy = client.spdy(&path, &["portforward.k8s.io"]).await.unwrap();
        assert_eq!(spdy.protocol, "portforward.k8s.io");
        spdy_checks(spdy.connection.control()).await;
        // An unknown pod is 404 with kubelet's message.
        let Err(err) = client.spdy("/portForward/default/nope", &["portforward.k8s.io"]).await else {
            panic!("an unknown pod was upgraded");
        };
        assert!(err.to_string().contains("pod does not exist"), "{err:#}");
    });
}

/// SPDY tunnelled in binary WebSocket messages (`SPDY/3.1+portforward.k8s.io`), kubectl's
/// default, as a proxy that passes the upgrade through delivers it.
#[test]
fn spdy_tunnelled_in_websocket_reaches_the_pods_ports() {
    let (agent, _manifests, pki) = start("pf-tunnel");
    let client = pki.client(agent.ports().kubelet).unwrap();
    let path = format!("/portForward/default/{}", agent.pod_name("ports"));
    runtime().block_on(async {
        let ws = client.websocket(&path, &["SPDY/3.1+portforward.k8s.io"]).await.unwrap();
        assert_eq!(ws.protocol, "SPDY/3.1+portforward.k8s.io");
        let control = spdy_over(ws.socket);
        spdy_checks(control).await;
    });
}

/// A SPDY client whose bytes travel in binary WebSocket messages (client-go's
/// `TunnelingConnection`).
fn spdy_over(
    socket: tokio_tungstenite::WebSocketStream<
        impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    >,
) -> Control {
    let (mut sink, stream) = socket.split();
    let input = stream
        .filter_map(|m| async move {
            match m {
                Ok(Message::Binary(b)) => Some(Ok(b)),
                Ok(_) => None,
                Err(e) => Some(Err(std::io::Error::other(e))),
            }
        })
        .boxed();
    let config = SessionConfig {
        flow_control: FlowControl::Lenient,
        ..SessionConfig::new(Role::Client)
    };
    let (connection, driver, mut output) = conn::connect(config, input);
    tokio::spawn(async move {
        let _ = driver.await;
    });
    tokio::spawn(async move {
        while let Some(bytes) = output.next().await {
            if sink.send(Message::Binary(bytes)).await.is_err() {
                return;
            }
        }
    });
    let control = connection.control();
    tokio::spawn(async move {
        let mut connection = connection;
        while connection.accept().await.is_some() {}
    });
    control
}

/// WebSocket `v4.channel.k8s.io` with `?port=`: each port's data and error channels open with
/// the port (two bytes, little-endian); data round-trips on two ports at once; a port nobody
/// listens on gets kubelet's message on its error channel.
#[test]
fn websocket_port_forward_uses_two_channels_per_port() {
    let (agent, _manifests, pki) = start("pf-ws");
    let client: KubeletClient = pki.client(agent.ports().kubelet).unwrap();
    let path = format!(
        "/portForward/default/{}?port=8080&port=8081,9999",
        agent.pod_name("ports")
    );
    runtime().block_on(async {
        let ws = client.websocket(&path, &["v4.channel.k8s.io"]).await.unwrap();
        assert_eq!(ws.protocol, "v4.channel.k8s.io");
        let mut socket = ws.socket;
        let mut by_channel: std::collections::BTreeMap<u8, Vec<Vec<u8>>> = Default::default();
        let mut sent = false;
        let done = tokio::time::timeout(END, async {
            while let Some(message) = socket.next().await {
                let Ok(Message::Binary(b)) = message else { continue };
                by_channel.entry(b[0]).or_default().push(b[1..].to_vec());
                let prefixes = (0u8..6).all(|c| by_channel.contains_key(&c));
                if prefixes && !sent {
                    sent = true;
                    for (channel, text) in [(0u8, "alpha\n"), (2, "beta\n")] {
                        let mut m = vec![channel];
                        m.extend_from_slice(text.as_bytes());
                        socket.send(Message::Binary(m.into())).await.unwrap();
                    }
                }
                let joined = |c: u8| by_channel.get(&c).map(|v| v[1..].concat()).unwrap_or_default();
                if joined(0) == b"alpha\n" && joined(2) == b"beta\n" && !joined(5).is_empty() {
                    return;
                }
            }
        })
        .await;
        assert!(done.is_ok(), "channels seen: {by_channel:?}");
        for (channel, port) in [(0u8, 8080u16), (1, 8080), (2, 8081), (3, 8081), (4, 9999), (5, 9999)] {
            assert_eq!(
                by_channel[&channel][0],
                port.to_le_bytes().to_vec(),
                "channel {channel}'s prefix"
            );
        }
        let error = String::from_utf8(by_channel[&5][1..].concat()).unwrap();
        assert!(
            error.starts_with("error forwarding port 9999 to pod ") && error.contains("connection refused"),
            "{error}"
        );
        // A bad port list is 400 with kubelet's message.
        let bad = format!("/portForward/default/{}?port=x", agent.pod_name("ports"));
        let Err(err) = client.websocket(&bad, &["v4.channel.k8s.io"]).await else {
            panic!("a bad port list was upgraded");
        };
        assert!(
            format!("{err:#}").contains("unable to parse \"x\" as a port"),
            "{err:#}"
        );
    });
}
