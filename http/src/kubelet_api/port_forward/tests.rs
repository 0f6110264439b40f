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
    // The errors as the client reads them (the 400's body).
    let ports_from_query = |q| ports_from_query(q).map_err(|e| e.to_string());
    assert_eq!(ports_from_query("port=80&port=8080,9090"), Ok(vec![80, 8080, 9090]));
    assert_eq!(
        ports_from_query("ports=80"),
        Err("query parameter \"port\" is required".into())
    );
    assert_eq!(
        ports_from_query("port="),
        Err("query parameter \"port\" cannot be empty".into())
    );
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

/// A `%` before a multi-byte character, or before anything but two hex digits, is kept as
/// text: the query is read, not a panic (the `kubelet_query` fuzz target's crash input,
/// fuzz/corpus/kubelet_query/crash-percent-before-multibyte).
#[::core::prelude::v1::test]
fn a_percent_before_a_multibyte_character_is_text() {
    let ports_from_query = |q| ports_from_query(q).map_err(|e| e.to_string());
    assert_eq!(
        ports_from_query("siin]csdi&\u{1}\0\0\0tim%B\u{61b}=n&port=80"),
        Ok(vec![80])
    );
    assert_eq!(
        ports_from_query("port=8%\u{e9}0"),
        Err("unable to parse \"8%\u{e9}0\" as a port: strconv.ParseUint: parsing \"8%\u{e9}0\": invalid syntax".into())
    );
    assert!(ports_from_query("port=%+1").is_err(), "a sign is not a hex digit");
    assert_eq!(
        ports_from_query("port=%3%38"),
        Err("unable to parse \"%38\" as a port: strconv.ParseUint: parsing \"%38\": invalid syntax".into())
    );
}

/// Streams pair by `requestID` in either order; each pair completes once.
#[::core::prelude::v1::test]
fn streams_pair_by_request_id() {
    let mut pairs = Pairs::default();
    assert!(matches!(pairs.add(arrived(1, "error", Some("0"), "80")), Added::Waiting(id) if id == "0"));
    assert!(matches!(
        pairs.add(arrived(3, "data", Some("1"), "81")),
        Added::Waiting(_)
    ));
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
            assert_eq!(
                message,
                "error processing stream for request r: error stream already assigned"
            );
            assert_eq!((error, close), (Some(1), vec![3]));
        }
        other => panic!("{other:?}"),
    }
    match pairs.add(arrived(5, "stdin", Some("s"), "80")) {
        Added::Refused { message, error, close } => {
            assert_eq!(
                message,
                "error processing stream for request s: invalid stream type \"stdin\""
            );
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
