//! Upstream `pods.go` "should support retrieving logs from the container over websockets" and
//! "should support remote command execution over websockets": a client opens a WebSocket to the
//! API server's `pods/log` and `pods/exec` (not kubectl: client-go's websocket helper, here
//! tokio-tungstenite), the API server reaches the agent, and the messages carry the output.

mod common;

use std::time::Duration;

use dockerlet_integration_tests::kubelet_stream::KubeletClient;
use dockerlet_integration_tests::POD_START_TIMEOUT;
use futures::StreamExt;
use tokio_tungstenite::tungstenite::Message;

/// Every message until the server closes the socket (at most 60 s).
async fn messages(client: &KubeletClient, path: &str, protocols: &[&str]) -> (String, Vec<Message>) {
    let ws = client.websocket(path, protocols).await.expect("the WebSocket opens");
    let protocol = ws.protocol.clone();
    let mut socket = ws.socket;
    let mut got = Vec::new();
    let read = async {
        while let Some(message) = socket.next().await {
            match message {
                Ok(Message::Close(_)) => break,
                Ok(m) => got.push(m),
                Err(e) => panic!("reading {path}: {e}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("the server closes the socket");
    (protocol, got)
}

#[test]
fn logs_and_exec_over_websockets_through_the_api_server() {
    let (api, agent, _manifests) = common::proxied_node("api-websockets");
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: pod-logs-websocket}}
spec:
  nodeName: {node}
  restartPolicy: Never
  containers:
  - name: main
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo container is alive; sleep 3600"]
"#,
        node = agent.node()
    );
    common::kubectl_create(&api, "pod.yaml", &yaml);
    common::wait_for_phase(&api, "pod-logs-websocket", "Running", POD_START_TIMEOUT);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(read_over_websockets(&api));
}

async fn read_over_websockets(api: &dockerlet_fake_apiserver::ApiServer) {
    let (cert, key) = api.client_certificate_files().expect("client certificate");
    let client = KubeletClient::new(api.addr().port(), &cert, &key).expect("client");
    let log = "/api/v1/namespaces/default/pods/pod-logs-websocket/log?container=main";

    // The log appears once the container wrote it; binary messages, as upstream reads them.
    let mut text = String::new();
    for _ in 0..50 {
        let (protocol, got) = messages(&client, log, &["binary.k8s.io"]).await;
        assert_eq!(protocol, "binary.k8s.io");
        text = got
            .iter()
            .map(|m| match m {
                Message::Binary(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("not a binary message: {other:?}"),
            })
            .collect();
        if !text.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(text, "container is alive\n");

    // base64.binary.k8s.io: text messages, base64.
    let (protocol, got) = messages(&client, log, &["base64.binary.k8s.io"]).await;
    assert_eq!(protocol, "base64.binary.k8s.io");
    let decoded: Vec<u8> = got
        .iter()
        .flat_map(|m| match m {
            Message::Text(t) => {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD
                    .decode(t.as_bytes())
                    .expect("base64")
            }
            other => panic!("not a text message: {other:?}"),
        })
        .collect();
    assert_eq!(decoded, b"container is alive\n");

    // Exec: channel.k8s.io, the first byte of each message its stream (1: stdout).
    let exec = "/api/v1/namespaces/default/pods/pod-logs-websocket/exec\
                ?command=cat&command=/etc/resolv.conf&container=main&stderr=1&stdout=1";
    let (protocol, got) = messages(&client, exec, &["channel.k8s.io"]).await;
    assert_eq!(protocol, "channel.k8s.io");
    let stdout: Vec<u8> = got
        .iter()
        .filter_map(|m| match m {
            Message::Binary(b) if b.first() == Some(&1) => Some(b[1..].to_vec()),
            _ => None,
        })
        .flatten()
        .collect();
    let stdout = String::from_utf8_lossy(&stdout);
    assert!(stdout.contains("nameserver"), "stdout: {stdout:?}");
}
