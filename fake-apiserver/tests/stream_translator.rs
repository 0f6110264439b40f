//! exec and attach over WebSocket `v5.channel.k8s.io` as kube-apiserver serves them
//! (`staging/src/k8s.io/apiserver/pkg/util/proxy/streamtranslator.go`, `websocket.go`): the API
//! server answers the WebSocket itself and reaches the kubelet over SPDY as client-go's SPDY
//! executor does. A fake kubelet speaking SPDY (the streaming crate in the server role) records
//! what it is asked and plays a command: stdin upper-cased onto stdout, then an exit code.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use dockerlet_fake_apiserver::ApiServer;
use dockerlet_streaming::spdy::{self, FlowControl, Role, SessionConfig};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::{client::IntoClientRequest, Message};

mod common;

/// What the fake kubelet saw of one connection.
#[derive(Debug, Default, Clone)]
struct Seen {
    head: String,
    streams: Vec<String>,
    resize: Vec<u8>,
}

/// How the fake kubelet answers.
#[derive(Clone, Copy)]
enum Kubelet {
    /// Upgrade; stdin upper-cased to stdout until stdin ends, then exit code 3.
    Runs,
    /// 404 `pod does not exist`, as kubelet refuses an unknown pod.
    Refuses,
}

/// Start the fake kubelet on 127.0.0.1 (on the caller's runtime), a Node at it and a pod `p`
/// (container `a`) bound to it; what the kubelet saw.
async fn kubelet_cluster(api: &ApiServer, behaviour: Kubelet) -> Arc<Mutex<Seen>> {
    let acceptor = common::kubelet_tls(api, IpAddr::from([127, 0, 0, 1]));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let kubelet = listener.local_addr().unwrap();
    common::cluster(api, kubelet, &["a"]);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = seen.clone();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(tcp).await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(tls.read(&mut byte).await.unwrap(), 1);
            head.push(byte[0]);
        }
        record.lock().unwrap().head = String::from_utf8_lossy(&head).into_owned();
        if let Kubelet::Refuses = behaviour {
            let _ = tls
                .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 19\r\n\r\npod does not exist\n")
                .await;
            return;
        }
        tls.write_all(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v5.channel.k8s.io\r\n\r\n",
        )
        .await
        .unwrap();
        play(tls, record).await;
    });
    seen
}

/// The SPDY side of a command: accept the client's streams, echo stdin upper-cased to stdout,
/// keep what arrives on `resize`, and at stdin's end write exit code 3 and end the streams.
async fn play<IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static>(
    io: IO,
    seen: Arc<Mutex<Seen>>,
) {
    let (read, mut write) = tokio::io::split(io);
    let input = futures::stream::unfold(read, |mut read| async move {
        let mut buf = vec![0u8; 16 * 1024];
        match read.read(&mut buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => Some((Ok(Bytes::copy_from_slice(&buf[..n])), read)),
        }
    })
    .boxed();
    let config = SessionConfig {
        flow_control: FlowControl::Lenient,
        ..SessionConfig::new(Role::Server)
    };
    let (mut connection, driver, mut output) = spdy::connect(config, input);
    tokio::spawn(async move {
        let _ = driver.await;
    });
    tokio::spawn(async move {
        while let Some(bytes) = output.next().await {
            if write.write_all(&bytes).await.is_err() {
                return;
            }
        }
    });
    let mut streams = std::collections::HashMap::new();
    let expected = |seen: &Seen| {
        let tty = seen.head.contains("tty=1");
        if tty {
            4
        } else {
            4 - usize::from(!seen.head.contains("error=1"))
        }
    };
    while let Some(stream) = connection.accept().await {
        let kind = spdy::header(&stream.headers, "streamtype")
            .unwrap_or_default()
            .to_string();
        let done = {
            let mut s = seen.lock().unwrap();
            s.streams.push(kind.clone());
            s.streams.len() == expected(&s)
        };
        streams.insert(kind, stream);
        if done {
            break;
        }
    }
    let mut stdin = streams.remove("stdin").unwrap().reader;
    let mut stdout = streams.remove("stdout").unwrap().writer;
    if let Some(mut resize) = streams.remove("resize") {
        let seen = seen.clone();
        tokio::spawn(async move {
            while let Some(Ok(data)) = resize.reader.next().await {
                seen.lock().unwrap().resize.extend_from_slice(&data);
            }
        });
    }
    while let Some(Ok(data)) = stdin.next().await {
        stdout.write(Bytes::from(data.to_ascii_uppercase())).await.unwrap();
    }
    stdout.finish().await.unwrap();
    if let Some(mut stderr) = streams.remove("stderr") {
        stderr.writer.finish().await.unwrap();
    }
    let mut error = streams.remove("error").unwrap().writer;
    let status = json!({"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
        "message": "command terminated with non-zero exit code: error executing command [cat], exit code 3",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}});
    error.write(Bytes::from(status.to_string())).await.unwrap();
    error.finish().await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
}

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

async fn open(api: &ApiServer, query: &str) -> Ws {
    let url = format!("ws://{}/api/v1/namespaces/default/pods/p/exec?{query}", api.addr());
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "v5.channel.k8s.io, v4.channel.k8s.io".parse().unwrap(),
    );
    let tcp = tokio::net::TcpStream::connect(api.addr()).await.unwrap();
    let (ws, response) = tokio_tungstenite::client_async(request, tcp).await.unwrap();
    assert_eq!(
        response
            .headers()
            .get("Sec-WebSocket-Protocol")
            .map(|v| v.to_str().unwrap()),
        Some("v5.channel.k8s.io")
    );
    ws
}

/// Every binary message until the server's close frame.
async fn until_close(ws: &mut Ws) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => got.push(b.to_vec()),
            Ok(Some(Ok(Message::Close(_)))) | Ok(None) => return got,
            Ok(Some(Ok(_))) => {}
            other => panic!("reading the WebSocket: {other:?} after {got:?}"),
        }
    }
}

fn status_of(messages: &[Vec<u8>]) -> Value {
    let error = messages
        .iter()
        .find(|m| m.first() == Some(&3))
        .expect("a status on channel 3");
    serde_json::from_slice(&error[1..]).unwrap()
}

/// stdin, its v5 close and stdout cross the translation; the kubelet is asked as client-go's
/// SPDY executor asks (`POST`, kube-apiserver's query, v5 … v1 offered, the streams in
/// `createStreams` order); the exit code comes back re-worded by `codeExitToStatusError`.
#[test]
fn exec_over_websocket_v5_reaches_the_kubelet_over_spdy() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = ApiServer::start();
    rt.block_on(async {
        let seen = kubelet_cluster(&api, Kubelet::Runs).await;
        let mut ws = open(&api, "command=cat&container=a&stdin=true&stdout=true&stderr=true").await;
        // The translator's "connection established": an empty message on stdout.
        match ws.next().await {
            Some(Ok(Message::Binary(b))) => assert_eq!(&b[..], [1]),
            other => panic!("{other:?}"),
        }
        ws.send(Message::Binary(Bytes::from_static(b"\x00hello")))
            .await
            .unwrap();
        ws.send(Message::Binary(Bytes::from_static(&[255, 0]))).await.unwrap();
        let got = until_close(&mut ws).await;
        let stdout: Vec<u8> = got.iter().filter(|m| m[0] == 1).flat_map(|m| m[1..].to_vec()).collect();
        assert_eq!(stdout, b"HELLO");
        assert_eq!(
            status_of(&got),
            json!({"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                "message": "command terminated with non-zero exit code: command terminated with exit code 3",
                "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}})
        );
        let _ = ws.close(None).await;
        let seen = seen.lock().unwrap().clone();
        assert!(
            seen.head
                .starts_with("POST /exec/default/p/a?command=cat&error=1&input=1&output=1 HTTP/1.1\r\n"),
            "{}",
            seen.head
        );
        let offered: Vec<&str> = seen
            .head
            .lines()
            .filter_map(|l| {
                l.split_once(": ")
                    .filter(|(n, _)| n.eq_ignore_ascii_case("x-stream-protocol-version"))
            })
            .map(|(_, v)| v)
            .collect();
        assert_eq!(
            offered,
            [
                "v5.channel.k8s.io",
                "v4.channel.k8s.io",
                "v3.channel.k8s.io",
                "v2.channel.k8s.io",
                "channel.k8s.io"
            ]
        );
        assert!(
            !seen.head.to_ascii_lowercase().contains("sec-websocket"),
            "{}",
            seen.head
        );
        assert_eq!(seen.streams, ["error", "stdin", "stdout", "stderr"]);
    });
}

/// With a TTY there is no stderr stream but a resize stream, and the client's terminal sizes
/// (channel 4) reach it as client-go's JSON encoder writes them.
#[test]
fn tty_sizes_cross_the_translation() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = ApiServer::start();
    rt.block_on(async {
        let seen = kubelet_cluster(&api, Kubelet::Runs).await;
        let mut ws = open(&api, "command=sh&stdin=true&stdout=true&tty=true").await;
        assert!(matches!(ws.next().await, Some(Ok(Message::Binary(_)))));
        ws.send(Message::Binary(Bytes::from_static(b"\x04{\"Width\":80,\"Height\":24}")))
            .await
            .unwrap();
        ws.send(Message::Binary(Bytes::from_static(b"\x00x"))).await.unwrap();
        // The echo shows the kubelet is past the resize message.
        loop {
            match tokio::time::timeout(Duration::from_secs(20), ws.next()).await {
                Ok(Some(Ok(Message::Binary(b)))) if b[..] == *b"\x01X" => break,
                Ok(Some(Ok(_))) => {}
                other => panic!("{other:?}"),
            }
        }
        ws.send(Message::Binary(Bytes::from_static(&[255, 0]))).await.unwrap();
        let got = until_close(&mut ws).await;
        assert_eq!(status_of(&got)["reason"], "NonZeroExitCode");
        let seen = seen.lock().unwrap().clone();
        assert!(
            seen.head.contains("?command=sh&input=1&output=1&tty=1 "),
            "{}",
            seen.head
        );
        assert_eq!(seen.streams, ["error", "stdin", "stdout", "resize"]);
        assert_eq!(String::from_utf8_lossy(&seen.resize), "{\"Width\":80,\"Height\":24}\n");
    });
}

/// A kubelet that refuses the SPDY upgrade: the WebSocket was already accepted, so the refusal
/// arrives as the status, wrapped as client-go wraps a plain-text refusal.
#[test]
fn a_kubelet_refusal_arrives_as_the_status() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api = ApiServer::start();
    rt.block_on(async {
        kubelet_cluster(&api, Kubelet::Refuses).await;
        let mut ws = open(&api, "command=true&stdout=true").await;
        let got = until_close(&mut ws).await;
        assert_eq!(got[0], [1]);
        let status = status_of(&got);
        assert_eq!(
            (status["code"].clone(), status["message"].clone()),
            (
                json!(500),
                json!("Internal error occurred: unable to upgrade connection: pod does not exist")
            )
        );
    });
}
