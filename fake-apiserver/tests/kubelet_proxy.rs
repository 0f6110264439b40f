//! The kubelet proxy against a fake kubelet (a TLS server that checks the API server's client
//! certificate, answers upgrades with 101 and echoes bytes): upgrade requests for
//! `pods/exec`, `pods/attach` and `pods/portforward` reach the kubelet's paths with the query
//! kube-apiserver builds (`pkg/registry/core/pod/strategy.go` `streamParams`: `input=1`, not the
//! client's `stdin=true`), the kubelet's 101 headers come back as they are, and bytes flow both
//! ways unchanged; a port-forward WebSocket tunnelling SPDY reaches the kubelet as a SPDY
//! upgrade (`streamtunnel.go`); `nodes/proxy` and `pods/log` pass ordinary requests and
//! statuses, and `nodes/proxy` refuses a Node at a loopback address
//! (`pkg/registry/core/node/strategy.go` `isProxyableHostname`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dockerlet_fake_apiserver::ApiServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;

/// What the fake kubelet saw: each request head, and whether a client certificate came.
#[derive(Default)]
struct Seen {
    heads: Vec<String>,
    client_certificates: usize,
}

/// A TLS server on `ip` requiring a client certificate signed by `ca_pem`. An upgrade request
/// is answered 101 with the first `X-Stream-Protocol-Version` offered (else
/// `v4.channel.k8s.io`) and an `X-Custom: Kept As Is` header, then every byte is echoed back
/// as an uppercase copy (so the direction is visible); `/fail` is answered 404
/// `no such thing`; anything else 200 with the request path as the body.
fn fake_kubelet(api: &ApiServer, ip: std::net::IpAddr) -> (SocketAddr, Arc<Mutex<Seen>>) {
    let acceptor = common::kubelet_tls(api, ip);
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let acceptor = acceptor.clone();
                let seen = seen2.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                    if tls.get_ref().1.peer_certificates().is_some() {
                        seen.lock().unwrap().client_certificates += 1;
                    }
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if tls.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    seen.lock().unwrap().heads.push(head.clone());
                    let path = head.split(' ').nth(1).unwrap_or_default().to_string();
                    if head.to_ascii_lowercase().contains("connection: upgrade") {
                        let version = head
                            .lines()
                            .find_map(|l| {
                                l.split_once(':')
                                    .filter(|(n, _)| n.eq_ignore_ascii_case("x-stream-protocol-version"))
                                    .map(|(_, v)| v.trim().to_string())
                            })
                            .unwrap_or_else(|| "v4.channel.k8s.io".to_string());
                        let answer = format!(
                            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
                             X-Stream-Protocol-Version: {version}\r\nX-Custom: Kept As Is\r\n\r\n"
                        );
                        tls.write_all(answer.as_bytes()).await.unwrap();
                        let mut buf = [0u8; 4096];
                        loop {
                            match tls.read(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => {
                                    let upper = buf[..n].to_ascii_uppercase();
                                    if tls.write_all(&upper).await.is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        let _ = tls.shutdown().await;
                    } else if path == "/fail" || path.starts_with("/containerLogs/default/p/missing") {
                        let _ = tls
                            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 13\r\nConnection: close\r\n\r\nno such thing")
                            .await;
                    } else {
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{path}",
                            path.len()
                        );
                        let _ = tls.write_all(answer.as_bytes()).await;
                    }
                    let _ = tls.shutdown().await;
                });
            }
        });
    });
    (addr, seen)
}

/// The fake kubelet's address: one `nodes/proxy` accepts.
fn host_ip() -> std::net::IpAddr {
    dockerlet_fake_apiserver::proxyable_host_ip().expect("a non-loopback IPv4 address on this host")
}

/// A fake kubelet on `ip` and the cluster around it: a Node at that kubelet and a pod `p`
/// (containers `a`, `missing`) bound to it; what the kubelet sees.
fn kubelet_cluster(api: &ApiServer, ip: std::net::IpAddr) -> Arc<Mutex<Seen>> {
    let (kubelet, seen) = fake_kubelet(api, ip);
    common::cluster(api, kubelet, &["a", "missing"]);
    seen
}

/// Sends `head` to the API server and reads the response head (up to the blank line).
fn send_head(api: &ApiServer, head: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(api.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut response = Vec::new();
    let mut byte = [0u8; 1];
    while !response.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut byte).unwrap(),
            1,
            "connection closed in {:?}",
            String::from_utf8_lossy(&response)
        );
        response.push(byte[0]);
    }
    (s, String::from_utf8_lossy(&response).into_owned())
}

/// exec, attach and portforward upgrades (SPDY, and WebSocket protocols older than v5) go to
/// the kubelet's paths with the query kube-apiserver builds from the client's options and the
/// upgrade headers (without the caller's Authorization); its 101 headers come back unchanged;
/// then bytes go both ways until the client closes.
#[test]
fn upgrades_pass_through_byte_for_byte() {
    let api = ApiServer::start();
    let seen = kubelet_cluster(&api, host_ip());
    for (method, upgrade, path, expected) in [
        (
            "POST",
            "SPDY/3.1",
            "/api/v1/namespaces/default/pods/p/exec?command=sh&container=a&stdin=true&stdout=true",
            "/exec/default/p/a?command=sh&input=1&output=1",
        ),
        (
            "GET",
            "websocket",
            "/api/v1/namespaces/default/pods/p/exec?command=sh&command=-c&command=echo+a%26b&container=a&stderr=true&tty=true",
            "/exec/default/p/a?command=sh&command=-c&command=echo+a%26b&error=1&tty=1",
        ),
        (
            "POST",
            "SPDY/3.1",
            "/api/v1/namespaces/default/pods/p/attach?container=missing&stdout=true",
            "/attach/default/p/missing?output=1",
        ),
        (
            "GET",
            "websocket",
            "/api/v1/namespaces/default/pods/p/portforward?ports=80&ports=8080",
            "/portForward/default/p?port=80%2C8080",
        ),
    ] {
        let (mut s, head) = send_head(
            &api,
            &format!(
                "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nConnection: Upgrade\r\nUpgrade: {upgrade}\r\n\
                 X-Stream-Protocol-Version: v4.channel.k8s.io\r\nX-Stream-Protocol-Version: channel.k8s.io\r\n\r\n",
                api.token()
            ),
        );
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("upgrade: spdy/3.1"), "{head}");
        assert!(lower.contains("connection: upgrade"), "{head}");
        assert!(head.contains("x-stream-protocol-version: v4.channel.k8s.io"), "{head}");
        assert!(head.contains("x-custom: Kept As Is"), "{head}");
        let payload: Vec<u8> = (0u8..=255)
            .cycle()
            .take(100_000)
            .filter(|b| !b.is_ascii_lowercase())
            .collect();
        s.write_all(&payload).unwrap();
        s.write_all(b"abc\x00\xff").unwrap();
        let mut back = vec![0u8; payload.len() + 5];
        s.read_exact(&mut back).unwrap();
        assert_eq!(&back[..payload.len()], &payload[..]);
        assert_eq!(&back[payload.len()..], b"ABC\x00\xff");
        drop(s);
        let heads = seen.lock().unwrap().heads.clone();
        let kubelet_head = heads.last().unwrap();
        assert!(
            kubelet_head.starts_with(&format!("{method} {expected} HTTP/1.1\r\n")),
            "{kubelet_head}"
        );
        let lower = kubelet_head.to_ascii_lowercase();
        assert!(
            lower.contains(&format!("upgrade: {}", upgrade.to_ascii_lowercase()))
                && lower.contains("connection: upgrade"),
            "{kubelet_head}"
        );
        assert_eq!(lower.matches("x-stream-protocol-version").count(), 2, "{kubelet_head}");
        assert!(!lower.contains("authorization"), "{kubelet_head}");
    }
    assert_eq!(seen.lock().unwrap().client_certificates, 4);
    // The client's own parameter names never reach the kubelet.
    for head in seen.lock().unwrap().heads.iter() {
        let target = head.split(' ').nth(1).unwrap_or_default();
        assert!(!target.contains("stdin=") && !target.contains("container="), "{head}");
    }
    // Without an upgrade, exec is refused by the API server itself.
    let out = api.kubectl(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/pods/p/exec?command=true&container=a",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Upgrade request required"), "{stderr}");
}

/// `nodes/proxy` passes path, query and status as they are; `pods/log` turns a kubelet 404
/// into kube-apiserver's NotFound Status, and validates the container first.
#[test]
fn node_proxy_and_logs_pass_ordinary_requests() {
    let api = ApiServer::start();
    kubelet_cluster(&api, host_ip());
    assert_eq!(
        api.kubectl_ok(&["get", "--raw", "/api/v1/nodes/n1/proxy/pods?x=1"]),
        "/pods?x=1"
    );
    let out = api.kubectl(&["get", "--raw", "/api/v1/nodes/n1/proxy/fail"]);
    assert!(!out.status.success());
    assert_eq!(
        api.kubectl_ok(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods/p/log?container=a&tailLines=2"
        ]),
        "/containerLogs/default/p/a?tailLines=2"
    );
    let out = api.kubectl(&["logs", "p", "-c", "missing"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the server could not find the requested resource"),
        "{stderr}"
    );
    let out = api.kubectl(&["get", "--raw", "/api/v1/namespaces/default/pods/p/log"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("a container name must be specified for pod p, choose one of: [a missing]"),
        "{stderr}"
    );
    let out = api.kubectl(&["get", "--raw", "/api/v1/nodes/nope/proxy/pods"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("nodes \"nope\" not found"));
}

/// `nodes/proxy` to a Node whose address is loopback is refused before any connection, as
/// kube-apiserver's `isProxyableHostname` refuses it; `pods/exec` to the same kubelet is not
/// (the pod subresources use the connection info as it is).
#[test]
fn node_proxy_refuses_a_loopback_node_but_exec_reaches_it() {
    let api = ApiServer::start();
    let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
    let seen = kubelet_cluster(&api, loopback);
    let out = api.kubectl(&["get", "--raw", "/api/v1/nodes/n1/proxy/pods"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("address not allowed"),
        "{stderr}"
    );
    assert!(seen.lock().unwrap().heads.is_empty(), "the kubelet was not asked");
    let (_s, head) = send_head(
        &api,
        "POST /api/v1/namespaces/default/pods/p/exec?command=true&container=a&stdout=true HTTP/1.1\r\nHost: x\r\n\
         Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
}

/// A port-forward WebSocket offering `SPDY/3.1+portforward.k8s.io` (kubectl's default) reaches
/// the kubelet as kube-apiserver's `TunnelingHandler` sends it: `POST`, `Upgrade: SPDY/3.1`, the
/// tunnelled protocol as `X-Stream-Protocol-Version`, no WebSocket headers; the client's
/// WebSocket is answered with `SPDY/3.1+<the kubelet's choice>`, and each message's bytes are
/// the SPDY connection's.
#[test]
fn port_forward_websockets_tunnel_spdy_to_the_kubelet() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::{client::IntoClientRequest, Message};
    let api = ApiServer::start();
    let seen = kubelet_cluster(&api, host_ip());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let url = format!("ws://{}/api/v1/namespaces/default/pods/p/portforward", api.addr());
        let mut request = url.into_client_request().unwrap();
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", "SPDY/3.1+portforward.k8s.io".parse().unwrap());
        let tcp = tokio::net::TcpStream::connect(api.addr()).await.unwrap();
        let (mut ws, response) = tokio_tungstenite::client_async(request, tcp).await.unwrap();
        assert_eq!(
            response
                .headers()
                .get("Sec-WebSocket-Protocol")
                .map(|v| v.to_str().unwrap()),
            Some("SPDY/3.1+portforward.k8s.io")
        );
        ws.send(Message::Binary(bytes::Bytes::from_static(b"spdy\x80frames")))
            .await
            .unwrap();
        let mut back = Vec::new();
        while back.len() < 11 {
            match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
                Ok(Some(Ok(Message::Binary(b)))) => back.extend_from_slice(&b),
                other => panic!("no echo: {other:?}"),
            }
        }
        assert_eq!(back, b"SPDY\x80FRAMES");
    });
    let head = seen.lock().unwrap().heads.last().cloned().unwrap();
    let lower = head.to_ascii_lowercase();
    assert!(head.starts_with("POST /portForward/default/p HTTP/1.1\r\n"), "{head}");
    assert!(
        lower.contains("upgrade: spdy/3.1") && lower.contains("connection: upgrade"),
        "{head}"
    );
    assert!(
        lower.contains("x-stream-protocol-version: portforward.k8s.io"),
        "{head}"
    );
    assert!(!lower.contains("sec-websocket"), "{head}");
}
