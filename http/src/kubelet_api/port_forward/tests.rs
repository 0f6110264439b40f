use super::*;

fn arrived(id: u32, kind: &str, request: Option<&str>, port: &str) -> Arrived<u32> {
    Arrived {
        id,
        stream_type: Some(kind.to_string()),
        port: Some(port.to_string()),
        request_id: request.map(str::to_string),
        stream: id,
    }
}

/// `?port=` as kubelet reads it: repeatable, comma lists, with kubelet's errors.
#[::core::prelude::v1::test]
fn ports_come_from_the_query_as_kubelet_reads_them() {
    assert_eq!(ports_from_query("port=80&port=8080,9090"), Ok(vec![80, 8080, 9090]));
    assert_eq!(ports_from_query("ports=80"), Err("query parameter \"port\" is required".into()));
    assert_eq!(ports_from_query("port="), Err("query parameter \"port\" cannot be empty".into()));
    assert_eq!(
        ports_from_query("port=80,x"),
        Err("unable to parse \"80,x\" as a port: strconv.ParseUint: parsing \"x\": invalid syntax".into())
    );
    assert_eq!(
        ports_from_query("port=70000"),
        Err("unable to parse \"70000\" as a port: strconv.ParseUint: parsing \"70000\": value out of range".into())
    );
    assert_eq!(ports_from_query("port=0"), Err("port \"0\" must be > 0".into()));
    assert_eq!(ports_from_query("port=%38%30"), Ok(vec![80]));
}

/// Streams pair by `requestID` in either order; each pair completes once.
#[::core::prelude::v1::test]
fn streams_pair_by_request_id() {
    let mut pairs = Pairs::default();
    assert!(matches!(pairs.add(arrived(1, "error", Some("0"), "80")), Added::Waiting(id) if id == "0"));
    assert!(matches!(pairs.add(arrived(3, "data", Some("1"), "81")), Added::Waiting(_)));
    match pairs.add(arrived(5, "data", Some("0"), "80")) {
        Added::Complete(p) => assert_eq!((p.request_id.as_str(), p.port, p.data, p.error), ("0", 80, 5, 1)),
        other => panic!("{other:?}"),
    }
    match pairs.add(arrived(7, "error", Some("1"), "81")) {
        Added::Complete(p) => assert_eq!((p.port, p.data, p.error), (81, 3, 7)),
        other => panic!("{other:?}"),
    }
    assert_eq!(pairs.waiting(), 0);
}

/// Clients without `requestID` pair by stream id: the error stream `n`, the data stream `n+2`.
#[::core::prelude::v1::test]
fn old_clients_pair_by_stream_id() {
    let mut pairs = Pairs::default();
    assert!(matches!(pairs.add(arrived(1, "error", None, "80")), Added::Waiting(id) if id == "1"));
    assert!(matches!(pairs.add(arrived(3, "data", None, "80")), Added::Complete(p) if p.error == 1 && p.data == 3));
}

/// A second error stream, or an unknown type, is refused with kubelet's message, written on
/// the pair's error stream; an incomplete pair expires with kubelet's message.
#[::core::prelude::v1::test]
fn bad_streams_are_refused_and_incomplete_pairs_expire() {
    let mut pairs = Pairs::default();
    pairs.add(arrived(1, "error", Some("r"), "80"));
    match pairs.add(arrived(3, "error", Some("r"), "80")) {
        Added::Refused { message, error, close } => {
            assert_eq!(message, "error processing stream for request r: error stream already assigned");
            assert_eq!((error, close), (Some(1), vec![3]));
        }
        other => panic!("{other:?}"),
    }
    match pairs.add(arrived(5, "stdin", Some("s"), "80")) {
        Added::Refused { message, error, close } => {
            assert_eq!(message, "error processing stream for request s: invalid stream type \"stdin\"");
            assert_eq!((error, close), (None, vec![5]));
        }
        other => panic!("{other:?}"),
    }
    pairs.add(arrived(7, "data", Some("t"), "80"));
    let (message, error, close) = pairs.expire("t").unwrap();
    assert_eq!(message, "(conn=?, request=t) timed out waiting for streams");
    assert_eq!((error, close), (None, vec![7]));
    assert!(pairs.expire("t").is_none());
}

/// A failed connection is reported as kubelet reports it.
#[::core::prelude::v1::test]
fn forward_errors_use_kubelets_wording() {
    assert_eq!(
        forward_error(9999, &ContainerId("abc".into()), &"container not running (abc)"),
        "error forwarding port 9999 to pod abc, uid : container not running (abc)"
    );
}

/// Connects to `127.0.0.1:<port>` of the test process itself: the runtime's part, without a pod.
pub(crate) struct Loopback;

#[async_trait::async_trait]
impl PortForward for Loopback {
    async fn connect(&self, _: &ContainerId, port: u16) -> Result<TcpStream, dockerlet_runtime::PortForwardError> {
        TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| dockerlet_runtime::PortForwardError::Connect(Box::new(e)))
    }
}

mod spdy_end_to_end {
    use super::*;
    use crate::kubelet_api::auth::{AuthConfig, AuthorizationMode};
    use actix_web::{App, HttpServer};
    use dockerlet_streaming::spdy::conn::{self, Control};
    use dockerlet_streaming::spdy::{Role, SessionConfig};

    /// An echo server on a free port of the test process.
    async fn echo() -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        actix_web::rt::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                actix_web::rt::spawn(async move {
                    let (mut r, mut w) = socket.into_split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        port
    }

    /// The kubelet API routes on plain HTTP (anonymous, AlwaysAllow), over the stub actors.
    fn server() -> std::net::SocketAddr {
        let auth = web::Data::new(Arc::new(AuthConfig {
            node_name: "n1".into(),
            anonymous: true,
            authorization: AuthorizationMode::AlwaysAllow,
        }));
        let api = KubeletApi {
            handles: crate::tests::fake_handles(true),
            logs: Arc::new(dockerlet_runtime::fake::FakeRuntime::default()),
            configz: Arc::new(serde_json::json!({})),
            port_forward: Arc::new(Loopback),
        };
        let handles = web::Data::new(api.handles.clone());
        let api = web::Data::new(api);
        let server = HttpServer::new(move || {
            App::new()
                .app_data(handles.clone())
                .app_data(api.clone())
                .app_data(auth.clone())
                .configure(crate::kubelet_api::configure)
        })
        .workers(1)
        .disable_signals()
        .bind(("127.0.0.1", 0))
        .unwrap();
        let addr = server.addrs()[0];
        actix_web::rt::spawn(server.run());
        addr
    }

    /// A SPDY client: the upgrade by hand, then the session driver in the client role.
    async fn client(addr: std::net::SocketAddr, path: &str) -> Control {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: n1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
             X-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n"
        );
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            socket.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        assert!(head.to_ascii_lowercase().contains("x-stream-protocol-version: portforward.k8s.io"), "{head}");
        let (read, mut write) = socket.into_split();
        let input = futures::stream::unfold(read, |mut read| async move {
            let mut buf = vec![0u8; 16 * 1024];
            match read.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => Some((Ok(Bytes::copy_from_slice(&buf[..n])), read)),
                Err(e) => Some((Err(e), read)),
            }
        });
        let (connection, driver, mut output) = conn::connect(SessionConfig::new(Role::Client), Box::pin(input));
        actix_web::rt::spawn(async move {
            let _ = driver.await;
        });
        actix_web::rt::spawn(async move {
            while let Some(chunk) = output.next().await {
                if write.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        });
        let control = connection.control();
        // Keep accepting (the server opens none) so the connection is not refused.
        actix_web::rt::spawn(async move {
            let mut connection = connection;
            while connection.accept().await.is_some() {}
        });
        control
    }

    fn headers(kind: &str, port: u16, request: &str) -> Vec<(String, String)> {
        vec![
            ("streamtype".into(), kind.into()),
            ("port".into(), port.to_string()),
            ("requestid".into(), request.into()),
        ]
    }

    async fn read_all(stream: &mut SpdyStream) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some(chunk) = stream.reader.next().await {
            match chunk {
                Ok(chunk) => out.extend_from_slice(&chunk),
                Err(e) => panic!("stream {}: {e} after {out:?}", stream.id),
            }
        }
        out
    }

    /// Two connections to two ports at once round-trip their bytes; a port nobody listens on
    /// gets kubelet's message on the error stream; an unknown pod is 404.
    #[actix_web::test]
    async fn spdy_port_forward_round_trips_and_reports_errors() {
        let (a, b) = (echo().await, echo().await);
        let addr = server();
        let mut control = client(addr, "/portForward/default/web-n1").await;
        let mut streams = Vec::new();
        for (i, port) in [a, b].into_iter().enumerate() {
            let id = i.to_string();
            let error = control.open(headers("error", port, &id), true).await.unwrap();
            let data = control.open(headers("data", port, &id), false).await.unwrap();
            streams.push((error, data));
        }
        for (i, (_, data)) in streams.iter_mut().enumerate() {
            data.writer.write(Bytes::from(format!("hello {i}"))).await.unwrap();
            data.writer.finish().await.unwrap();
        }
        for (i, (error, data)) in streams.iter_mut().enumerate() {
            assert_eq!(read_all(data).await, format!("hello {i}").into_bytes());
            assert_eq!(read_all(error).await, b"");
        }
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut error = control.open(headers("error", closed, "9"), true).await.unwrap();
        let _data = control.open(headers("data", closed, "9"), false).await.unwrap();
        let message = String::from_utf8(read_all(&mut error).await).unwrap();
        assert!(
            message.starts_with(&format!("error forwarding port {closed} to pod sandbox1, uid : ")),
            "{message}"
        );
        let mut socket = TcpStream::connect(addr).await.unwrap();
        socket
            .write_all(b"GET /portForward/default/nope HTTP/1.1\r\nHost: n1\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 404") && answer.ends_with("pod does not exist"), "{answer}");
    }
}
