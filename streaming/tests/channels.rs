//! The upgrade handshake, stream headers, WebSocket channel protocols and the exec status.

use bytes::Bytes;
use dockerlet_streaming::spdy::Headers;
use dockerlet_streaming::status::{ExecOutcome, ResizeDecoder, TerminalSize};
use dockerlet_streaming::upgrade::{
    check_spdy_upgrade, negotiate, switching_protocols_response, RemoteCommandProtocol, StreamHeaderError,
    StreamHeaders, StreamType, UpgradeError, PORT_FORWARD_PROTOCOL, REMOTE_COMMAND_PROTOCOLS,
};
use dockerlet_streaming::websocket::{
    decode, encode, encode_close, port_forward_channels, port_prefix, ChannelError, ChannelProtocol, Incoming,
    WsMessage,
};

fn h(pairs: &[(&str, &str)]) -> Headers {
    pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
}

/// `Connection: Upgrade` + `Upgrade: SPDY/3.1` (any case, `Connection` among other tokens) is an
/// upgrade; anything else is refused with 400.
#[test]
fn the_spdy_upgrade_headers_are_checked() {
    assert_eq!(check_spdy_upgrade(["keep-alive, Upgrade"], Some("spdy/3.1")), Ok(()));
    assert_eq!(check_spdy_upgrade(["Upgrade"], Some("SPDY/3.1")), Ok(()));
    let err = check_spdy_upgrade(["Upgrade"], Some("websocket")).unwrap_err();
    assert_eq!(
        err,
        UpgradeError::NotSpdyUpgrade {
            upgrade: Some("websocket".into())
        }
    );
    assert_eq!(err.http_status(), 400);
    assert!(check_spdy_upgrade(["close"], Some("SPDY/3.1")).is_err());
    assert!(check_spdy_upgrade([], None).is_err());
}

/// The client's first version the server speaks wins; none is 400, no overlap 403 listing both.
#[test]
fn stream_protocol_versions_are_negotiated_in_client_order() {
    assert_eq!(
        negotiate(&["v4.channel.k8s.io", "v5.channel.k8s.io"], &REMOTE_COMMAND_PROTOCOLS),
        Ok("v4.channel.k8s.io")
    );
    assert_eq!(
        negotiate(&["v9.channel.k8s.io", "channel.k8s.io"], &REMOTE_COMMAND_PROTOCOLS),
        Ok("channel.k8s.io")
    );
    assert_eq!(
        negotiate(&["v3.channel.k8s.io, v2.channel.k8s.io"], &REMOTE_COMMAND_PROTOCOLS),
        Ok("v3.channel.k8s.io")
    );
    assert_eq!(
        negotiate(&[PORT_FORWARD_PROTOCOL], &[PORT_FORWARD_PROTOCOL]),
        Ok(PORT_FORWARD_PROTOCOL)
    );
    assert_eq!(
        negotiate(&[], &REMOTE_COMMAND_PROTOCOLS),
        Err(UpgradeError::ProtocolRequired)
    );
    let err = negotiate(&["v4.channel.k8s.io"], &[PORT_FORWARD_PROTOCOL]).unwrap_err();
    assert_eq!(err.http_status(), 403);
    assert_eq!(
        err.to_string(),
        "unable to upgrade: unable to negotiate protocol: client supports [\"v4.channel.k8s.io\"], server accepts [\"portforward.k8s.io\"]"
    );
    let p = RemoteCommandProtocol::from_name("v3.channel.k8s.io").unwrap();
    assert!(p.has_resize() && !p.status_is_json());
    assert!(RemoteCommandProtocol::V4.status_is_json() && !RemoteCommandProtocol::V2.has_resize());
    for name in REMOTE_COMMAND_PROTOCOLS {
        assert_eq!(RemoteCommandProtocol::from_name(name).unwrap().name(), name);
    }
    assert_eq!(
        switching_protocols_response("v4.channel.k8s.io"),
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"
    );
}

/// Stream headers: `streamType` (lower-cased on the wire by SPDY), and for port-forward `port`
/// and `requestID`; a bad one names the header.
#[test]
fn stream_headers_are_read_and_bad_ones_named() {
    let exec = StreamHeaders::remote_command(&h(&[("streamtype", "stderr")])).unwrap();
    assert_eq!(exec.stream_type, StreamType::Stderr);
    let pf = StreamHeaders::port_forward(&h(&[("streamtype", "data"), ("port", "8080"), ("requestid", "3")])).unwrap();
    assert_eq!(
        (pf.stream_type, pf.port, pf.request_id.as_deref()),
        (StreamType::Data, Some(8080), Some("3"))
    );
    assert_eq!(
        StreamHeaders::remote_command(&Headers::new()),
        Err(StreamHeaderError::Missing("streamType"))
    );
    let err = StreamHeaders::remote_command(&h(&[("streamtype", "video")])).unwrap_err();
    assert!(
        err.to_string().contains("\"streamType\" has invalid value \"video\""),
        "{err}"
    );
    let err =
        StreamHeaders::port_forward(&h(&[("streamtype", "data"), ("port", "0"), ("requestid", "1")])).unwrap_err();
    assert!(matches!(err, StreamHeaderError::Invalid { name: "port", .. }));
    let err =
        StreamHeaders::port_forward(&h(&[("streamtype", "stdin"), ("port", "80"), ("requestid", "1")])).unwrap_err();
    assert!(matches!(err, StreamHeaderError::Invalid { name: "streamType", .. }));
    assert_eq!(
        StreamHeaders::port_forward(&h(&[("streamtype", "error"), ("port", "80")])),
        Err(StreamHeaderError::Missing("requestID"))
    );
}

/// Binary channel protocols: the first byte is the channel.
#[test]
fn binary_channel_messages_carry_the_channel_byte() {
    for p in [
        ChannelProtocol::Channel,
        ChannelProtocol::V4,
        ChannelProtocol::V5,
        ChannelProtocol::PortForward,
    ] {
        let msg = encode(p, 1, b"hello").unwrap();
        assert_eq!(msg, WsMessage::Binary(Bytes::from_static(b"\x01hello")));
        assert_eq!(
            decode(p, msg).unwrap(),
            Incoming::Data {
                channel: 1,
                data: Bytes::from_static(b"hello")
            }
        );
        assert_eq!(decode(p, WsMessage::Binary(Bytes::new())).unwrap(), Incoming::Empty);
        // A text frame carries the same bytes (wsstream reads both kinds; the Python client
        // sends text).
        assert_eq!(
            decode(p, WsMessage::Text("\u{0}hi".into())).unwrap(),
            Incoming::Data {
                channel: 0,
                data: Bytes::from_static(b"hi")
            }
        );
    }
}

/// Base64 channel protocols: an ASCII channel digit, then base64.
#[test]
fn base64_channel_messages_carry_a_digit_and_base64() {
    for p in [ChannelProtocol::Base64, ChannelProtocol::V4Base64] {
        let msg = encode(p, 2, b"hi").unwrap();
        assert_eq!(msg, WsMessage::Text("2aGk=".into()));
        assert_eq!(
            decode(p, msg).unwrap(),
            Incoming::Data {
                channel: 2,
                data: Bytes::from_static(b"hi")
            }
        );
        assert_eq!(
            decode(p, WsMessage::Text("0".into())).unwrap(),
            Incoming::Data {
                channel: 0,
                data: Bytes::new()
            }
        );
        // wsstream's `channel - '0'`: not a digit is a channel no one reads.
        assert_eq!(
            decode(p, WsMessage::Text("xaGk=".into())).unwrap(),
            Incoming::Data {
                channel: b'x' - b'0',
                data: Bytes::from_static(b"hi")
            }
        );
        assert!(matches!(
            decode(p, WsMessage::Text("0!!!".into())),
            Err(ChannelError::BadBase64(_))
        ));
        assert_eq!(
            decode(p, WsMessage::Binary(Bytes::from_static(b"1aGk="))).unwrap(),
            Incoming::Data {
                channel: 1,
                data: Bytes::from_static(b"hi")
            },
            "a binary frame on a base64 protocol"
        );
        assert!(matches!(
            encode(p, 10, b""),
            Err(ChannelError::ChannelOutOfRange { channel: 10, .. })
        ));
    }
}

/// v5 alone has the close message `[255, channel]`.
#[test]
fn v5_closes_a_single_channel() {
    let msg = encode_close(ChannelProtocol::V5, 0).unwrap();
    assert_eq!(msg, WsMessage::Binary(Bytes::from_static(&[255, 0])));
    assert_eq!(
        decode(ChannelProtocol::V5, msg.clone()).unwrap(),
        Incoming::Close { channel: 0 }
    );
    assert!(matches!(
        decode(ChannelProtocol::V5, WsMessage::Binary(Bytes::from_static(&[255]))),
        Err(ChannelError::BadClose(_))
    ));
    // Before v5, 255 is just a channel.
    assert_eq!(
        decode(ChannelProtocol::V4, msg).unwrap(),
        Incoming::Data {
            channel: 255,
            data: Bytes::from_static(&[0])
        }
    );
    assert!(encode_close(ChannelProtocol::V4, 0).is_err());
}

/// Subprotocol choice follows the client's order; no offer means `channel.k8s.io` framing; v5 is
/// not a port-forward protocol.
#[test]
fn websocket_subprotocols_are_negotiated() {
    assert_eq!(
        ChannelProtocol::negotiate(&["v5.channel.k8s.io", "v4.channel.k8s.io"], false),
        Some(ChannelProtocol::V5)
    );
    assert_eq!(
        ChannelProtocol::negotiate(&["bogus, base64.channel.k8s.io"], false),
        Some(ChannelProtocol::Base64)
    );
    assert_eq!(ChannelProtocol::negotiate(&[], false), Some(ChannelProtocol::Channel));
    assert_eq!(
        ChannelProtocol::negotiate(&[], true),
        Some(ChannelProtocol::PortForward)
    );
    assert_eq!(
        ChannelProtocol::negotiate(&["v5.channel.k8s.io", "v4.channel.k8s.io"], true),
        Some(ChannelProtocol::V4)
    );
    assert_eq!(ChannelProtocol::negotiate(&["bogus"], false), None);
}

/// Port-forward: port i uses channels 2i and 2i+1, each opened with the port little-endian.
#[test]
fn port_forward_channels_and_port_prefix() {
    assert_eq!(port_forward_channels(0), Some((0, 1)));
    assert_eq!(port_forward_channels(2), Some((4, 5)));
    assert_eq!(port_forward_channels(127), Some((254, 255)));
    assert_eq!(port_forward_channels(128), None);
    assert_eq!(
        port_prefix(ChannelProtocol::PortForward, 2, 8080).unwrap(),
        WsMessage::Binary(Bytes::from_static(&[2, 0x90, 0x1f]))
    );
    assert_eq!(
        port_prefix(ChannelProtocol::V4Base64, 1, 80).unwrap(),
        WsMessage::Text("1UAA=".into())
    );
}

/// The error stream's Status, byte for byte as Go's `json.Marshal(metav1.Status)` writes it for
/// kubelet's three outcomes (field order and omitempty as in metav1.Status).
#[test]
fn exec_status_json_matches_kubelet() {
    assert_eq!(
        String::from_utf8(ExecOutcome::Success.error_stream_bytes(true)).unwrap(),
        r#"{"metadata":{},"status":"Success"}"#
    );
    let exit = ExecOutcome::NonZeroExit {
        code: 3,
        command: vec!["sh".into(), "-c".into(), "exit 3".into()],
    };
    assert_eq!(
        String::from_utf8(exit.error_stream_bytes(true)).unwrap(),
        r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#
    );
    let internal = ExecOutcome::Internal {
        message: "container not running".into(),
    };
    assert_eq!(
        String::from_utf8(internal.error_stream_bytes(true)).unwrap(),
        r#"{"metadata":{},"status":"Failure","message":"Internal error occurred: error executing command in container: container not running","reason":"InternalError","details":{"causes":[{"message":"error executing command in container: container not running"}]},"code":500}"#
    );
    // Before v4: the message text on failure, nothing on success.
    assert!(ExecOutcome::Success.error_stream_bytes(false).is_empty());
    assert_eq!(
        String::from_utf8(exit.error_stream_bytes(false)).unwrap(),
        "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
    );
}

/// Resize objects split anywhere across frames come out whole; garbage is an error.
#[test]
fn resize_messages_split_across_frames_are_decoded() {
    let mut d = ResizeDecoder::default();
    assert_eq!(d.push(br#"{"Width":80,"He"#).unwrap(), vec![]);
    assert_eq!(
        d.push(br#"ight":24}{"Width":100,"Height":50}{"#).unwrap(),
        vec![
            TerminalSize { width: 80, height: 24 },
            TerminalSize { width: 100, height: 50 }
        ]
    );
    assert_eq!(
        d.push(br#""Width":1,"Height":2}"#).unwrap(),
        vec![TerminalSize { width: 1, height: 2 }]
    );
    assert!(ResizeDecoder::default().push(b"not json").is_err());
    assert!(ResizeDecoder::default()
        .push(format!("{{\"Width\":{}", " ".repeat(5000)).as_bytes())
        .is_err());
}
