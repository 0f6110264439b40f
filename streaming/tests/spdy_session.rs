//! The SPDY/3.1 session state machine: streams, flow control, pings, GOAWAY, bad peers.

use bytes::{Bytes, BytesMut};
use dockerlet_streaming::spdy::frame::{goaway, rst, setting, FLAG_FIN};
use dockerlet_streaming::spdy::session::DEFAULT_WINDOW;
use dockerlet_streaming::spdy::{
    Event, FlowControl, Frame, FrameDecoder, FrameEncoder, Headers, Role, Session, SessionConfig, SessionError, Setting,
};

fn h(pairs: &[(&str, &str)]) -> Headers {
    pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
}

fn server() -> Session {
    Session::new(SessionConfig::new(Role::Server))
}

fn client() -> Session {
    Session::new(SessionConfig::new(Role::Client))
}

/// Move bytes both ways until neither side has anything to write.
fn pump(a: &mut Session, b: &mut Session) {
    loop {
        let (ab, ba) = (a.take_output(), b.take_output());
        if ab.is_empty() && ba.is_empty() {
            return;
        }
        b.receive(&ab).unwrap();
        a.receive(&ba).unwrap();
    }
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

/// The frames a session wrote, decoded by an independent peer decoder.
fn frames(peer: &mut FrameDecoder, s: &mut Session) -> Vec<Frame> {
    let mut buf = BytesMut::from(s.take_output().as_ref());
    std::iter::from_fn(|| peer.decode(&mut buf).unwrap()).collect()
}

/// Feed a session frames from a scripted peer.
struct Peer {
    enc: FrameEncoder,
    dec: FrameDecoder,
}

impl Peer {
    fn new() -> Self {
        Self {
            enc: FrameEncoder::new(),
            dec: FrameDecoder::default(),
        }
    }
    fn send(&mut self, s: &mut Session, f: Frame) -> Result<(), SessionError> {
        let mut buf = BytesMut::new();
        self.enc.encode(&f, &mut buf).unwrap();
        s.receive(&buf)
    }
    fn read(&mut self, s: &mut Session) -> Vec<Frame> {
        frames(&mut self.dec, s)
    }
}

fn syn(stream_id: u32, stream_type: &str) -> Frame {
    Frame::SynStream {
        stream_id,
        associated_to: 0,
        priority: 0,
        slot: 0,
        flags: 0,
        headers: h(&[("streamtype", stream_type)]),
    }
}

fn data_bytes(frames: &[Frame]) -> usize {
    frames
        .iter()
        .map(|f| {
            if let Frame::Data { data, .. } = f {
                data.len()
            } else {
                0
            }
        })
        .sum()
}

/// kubectl's shape: the client opens streams, the server replies, data flows both ways, both
/// halves end with FIN and the stream is closed on both sides.
#[test]
fn a_client_stream_is_opened_replied_used_and_closed() {
    let (mut c, mut s) = (client(), server());
    let id = c.open_stream(h(&[("streamtype", "stdin")]), false).unwrap();
    assert_eq!(id, 1);
    pump(&mut c, &mut s);
    let ev = events(&mut s);
    assert_eq!(
        ev,
        vec![Event::StreamOpened {
            stream_id: 1,
            headers: h(&[("streamtype", "stdin")]),
            fin: false,
            unidirectional: false,
            priority: 0
        }]
    );
    s.reply(1, Headers::new(), false).unwrap();
    c.send_data(1, Bytes::from_static(b"echo hi\n"), true).unwrap();
    s.send_data(1, Bytes::from_static(b"hi\n"), true).unwrap();
    pump(&mut c, &mut s);
    assert_eq!(
        events(&mut s),
        vec![
            Event::Data {
                stream_id: 1,
                data: Bytes::from_static(b"echo hi\n"),
                fin: true
            },
            Event::StreamClosed { stream_id: 1 }
        ]
    );
    assert_eq!(
        events(&mut c),
        vec![
            Event::Replied {
                stream_id: 1,
                headers: Headers::new(),
                fin: false
            },
            Event::Data {
                stream_id: 1,
                data: Bytes::from_static(b"hi\n"),
                fin: true
            },
            Event::StreamClosed { stream_id: 1 }
        ]
    );
    assert!(!s.is_open(1) && !c.is_open(1));
    assert!(matches!(
        s.send_data(1, Bytes::new(), true),
        Err(SessionError::UnknownStream(1))
    ));
}

/// A sender stops at the 64 KiB window (stream and connection) and resumes, in order, when the
/// peer's WINDOW_UPDATEs arrive.
#[test]
fn a_sender_blocks_at_the_window_and_resumes_on_window_update() {
    let mut s = server();
    let mut peer = Peer::new();
    peer.send(&mut s, syn(1, "stdout")).unwrap();
    s.reply(1, Headers::new(), false).unwrap();
    let payload: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    s.send_data(1, Bytes::from(payload.clone()), true).unwrap();
    let first = peer.read(&mut s);
    assert_eq!(data_bytes(&first), DEFAULT_WINDOW as usize);
    assert!(first.iter().all(|f| !matches!(f, Frame::Data { .. }) || !f.is_fin()));
    assert_eq!(s.queued(1), 100_000 - 65_536);
    assert_eq!(s.send_window(1), Some(0));
    // The stream's window alone is not enough: the connection's is shut too.
    peer.send(
        &mut s,
        Frame::WindowUpdate {
            stream_id: 1,
            delta: 20_000,
        },
    )
    .unwrap();
    assert!(peer.read(&mut s).is_empty());
    peer.send(
        &mut s,
        Frame::WindowUpdate {
            stream_id: 0,
            delta: 20_000,
        },
    )
    .unwrap();
    let second = peer.read(&mut s);
    assert_eq!(data_bytes(&second), 20_000);
    peer.send(
        &mut s,
        Frame::WindowUpdate {
            stream_id: 1,
            delta: 65_536,
        },
    )
    .unwrap();
    peer.send(
        &mut s,
        Frame::WindowUpdate {
            stream_id: 0,
            delta: 65_536,
        },
    )
    .unwrap();
    let third = peer.read(&mut s);
    assert_eq!(data_bytes(&third), 100_000 - 65_536 - 20_000);
    assert!(third.last().unwrap().is_fin());
    let got: Vec<u8> = first
        .iter()
        .chain(&second)
        .chain(&third)
        .flat_map(|f| {
            if let Frame::Data { data, .. } = f {
                data.to_vec()
            } else {
                Vec::new()
            }
        })
        .collect();
    assert_eq!(got, payload);
    assert_eq!(s.queued(1), 0);
}

/// SETTINGS INITIAL_WINDOW_SIZE resizes the windows of open streams (and may open them).
#[test]
fn settings_initial_window_size_changes_open_streams_windows() {
    let mut s = server();
    let mut peer = Peer::new();
    peer.send(&mut s, syn(1, "stdout")).unwrap();
    s.reply(1, Headers::new(), false).unwrap();
    peer.read(&mut s);
    peer.send(
        &mut s,
        Frame::Settings {
            flags: 0,
            entries: vec![Setting {
                flags: 0,
                id: setting::INITIAL_WINDOW_SIZE,
                value: 1000,
            }],
        },
    )
    .unwrap();
    assert_eq!(s.send_window(1), Some(1000));
    s.send_data(1, Bytes::from(vec![1; 3000]), false).unwrap();
    assert_eq!(data_bytes(&peer.read(&mut s)), 1000);
    peer.send(
        &mut s,
        Frame::Settings {
            flags: 0,
            entries: vec![Setting {
                flags: 0,
                id: setting::INITIAL_WINDOW_SIZE,
                value: 3000,
            }],
        },
    )
    .unwrap();
    assert_eq!(data_bytes(&peer.read(&mut s)), 2000);
}

/// With spdystream-style peers (no WINDOW_UPDATE ever) the lenient mode sends everything.
#[test]
fn lenient_flow_control_sends_past_the_window() {
    let mut config = SessionConfig::new(Role::Server);
    config.flow_control = FlowControl::Lenient;
    let mut s = Session::new(config);
    let mut peer = Peer::new();
    peer.send(&mut s, syn(1, "stdout")).unwrap();
    s.reply(1, Headers::new(), false).unwrap();
    s.send_data(1, Bytes::from(vec![7; 200_000]), true).unwrap();
    let out = peer.read(&mut s);
    assert_eq!(data_bytes(&out), 200_000);
    assert!(
        out.iter()
            .all(|f| !matches!(f, Frame::Data { data, .. } if data.len() > 32 * 1024)),
        "frames are chunked"
    );
}

/// Received data is granted back with WINDOW_UPDATE at half a window; a peer overrunning the
/// window is reset with FLOW_CONTROL_ERROR (spec mode) or accepted (lenient).
#[test]
fn receive_windows_are_granted_and_overruns_reset() {
    for (mode, overrun_ok) in [(FlowControl::Spec, false), (FlowControl::Lenient, true)] {
        let mut config = SessionConfig::new(Role::Server);
        config.flow_control = mode;
        let mut s = Session::new(config);
        let mut peer = Peer::new();
        peer.send(&mut s, syn(1, "stdin")).unwrap();
        peer.send(
            &mut s,
            Frame::Data {
                stream_id: 1,
                flags: 0,
                data: Bytes::from(vec![0; 32 * 1024]),
            },
        )
        .unwrap();
        let grants = peer.read(&mut s);
        assert!(
            grants.contains(&Frame::WindowUpdate {
                stream_id: 1,
                delta: 32 * 1024
            }),
            "{grants:?}"
        );
        assert!(
            grants.contains(&Frame::WindowUpdate {
                stream_id: 0,
                delta: 32 * 1024
            }),
            "{grants:?}"
        );
        // The window is 64 KiB again (32 KiB left + the 32 KiB granted); the peer sends 96 KiB.
        peer.send(
            &mut s,
            Frame::Data {
                stream_id: 1,
                flags: 0,
                data: Bytes::from(vec![0; 96 * 1024]),
            },
        )
        .unwrap();
        let out = peer.read(&mut s);
        let reset = out.contains(&Frame::RstStream {
            stream_id: 1,
            status: rst::FLOW_CONTROL_ERROR,
        });
        assert_eq!(reset, !overrun_ok, "{mode:?}: {out:?}");
        assert_eq!(s.is_open(1), overrun_ok);
    }
}

/// The peer's ping is answered with the same id; this end's ping comes back as PingAck.
#[test]
fn pings_are_answered_and_acknowledged() {
    let (mut c, mut s) = (client(), server());
    let id = c.ping().unwrap();
    assert_eq!(id % 2, 1, "client pings are odd");
    pump(&mut c, &mut s);
    assert_eq!(events(&mut s), vec![Event::Ping { id }]);
    assert_eq!(events(&mut c), vec![Event::PingAck { id }]);
}

/// After GOAWAY no new streams either way; open streams go on.
#[test]
fn goaway_stops_new_streams_but_not_open_ones() {
    let mut s = server();
    let mut peer = Peer::new();
    peer.send(&mut s, syn(1, "stdout")).unwrap();
    s.reply(1, Headers::new(), false).unwrap();
    s.go_away(goaway::OK).unwrap();
    let out = peer.read(&mut s);
    assert!(out.contains(&Frame::GoAway {
        last_good_stream_id: 1,
        status: goaway::OK
    }));
    peer.send(&mut s, syn(3, "stderr")).unwrap();
    assert_eq!(
        peer.read(&mut s),
        vec![Frame::RstStream {
            stream_id: 3,
            status: rst::REFUSED_STREAM
        }]
    );
    s.send_data(1, Bytes::from_static(b"still"), false).unwrap();
    assert_eq!(data_bytes(&peer.read(&mut s)), 5);
    let (mut c, mut s2) = (client(), server());
    s2.go_away(goaway::OK).unwrap();
    pump(&mut c, &mut s2);
    assert_eq!(
        events(&mut c),
        vec![Event::GoAway {
            last_good_stream_id: 0,
            status: 0
        }]
    );
    assert!(matches!(
        c.open_stream(Headers::new(), false),
        Err(SessionError::GoingAway)
    ));
}

/// Stream-level mistakes reset the stream and leave the session and the other streams alone.
#[test]
fn stream_errors_reset_only_that_stream() {
    let mut s = server();
    let mut peer = Peer::new();
    peer.send(&mut s, syn(1, "stdin")).unwrap();
    s.reply(1, Headers::new(), false).unwrap();
    peer.read(&mut s);
    // Data on a stream never opened.
    peer.send(
        &mut s,
        Frame::Data {
            stream_id: 9,
            flags: 0,
            data: Bytes::from_static(b"x"),
        },
    )
    .unwrap();
    // Server push is not supported.
    peer.send(
        &mut s,
        Frame::SynStream {
            stream_id: 3,
            associated_to: 1,
            priority: 0,
            slot: 0,
            flags: 0,
            headers: Headers::new(),
        },
    )
    .unwrap();
    // A stream id of the server's parity.
    peer.send(&mut s, syn(4, "stdout")).unwrap();
    let out = peer.read(&mut s);
    assert_eq!(
        out,
        vec![
            Frame::RstStream {
                stream_id: 9,
                status: rst::INVALID_STREAM
            },
            Frame::RstStream {
                stream_id: 3,
                status: rst::REFUSED_STREAM
            },
            Frame::RstStream {
                stream_id: 4,
                status: rst::PROTOCOL_ERROR
            },
        ]
    );
    // Data after the peer's FIN.
    peer.send(
        &mut s,
        Frame::Data {
            stream_id: 1,
            flags: FLAG_FIN,
            data: Bytes::new(),
        },
    )
    .unwrap();
    peer.send(
        &mut s,
        Frame::Data {
            stream_id: 1,
            flags: 0,
            data: Bytes::from_static(b"late"),
        },
    )
    .unwrap();
    assert_eq!(
        peer.read(&mut s),
        vec![Frame::RstStream {
            stream_id: 1,
            status: rst::STREAM_ALREADY_CLOSED
        }]
    );
    // The session still works.
    peer.send(&mut s, syn(5, "stdout")).unwrap();
    assert!(s.is_open(5));
}

/// A peer's reset is reported and the stream forgotten.
#[test]
fn a_peer_reset_closes_the_stream() {
    let mut s = server();
    let mut peer = Peer::new();
    peer.send(&mut s, syn(1, "stdin")).unwrap();
    events(&mut s);
    peer.send(
        &mut s,
        Frame::RstStream {
            stream_id: 1,
            status: rst::CANCEL,
        },
    )
    .unwrap();
    assert_eq!(
        events(&mut s),
        vec![Event::StreamReset {
            stream_id: 1,
            status: rst::CANCEL,
            by_peer: true
        }]
    );
    assert!(matches!(
        s.reply(1, Headers::new(), false),
        Err(SessionError::UnknownStream(1))
    ));
}

/// Bytes that are not SPDY end the session with GOAWAY PROTOCOL_ERROR; later input is refused.
#[test]
fn garbage_ends_the_session_with_goaway() {
    let mut s = server();
    let err = s.receive(b"GET / HTTP/1.1\r\n\r\n").unwrap_err();
    assert!(matches!(err, SessionError::Frame(_)), "{err:?}");
    let out = frames(&mut FrameDecoder::default(), &mut s);
    assert_eq!(
        out,
        vec![Frame::GoAway {
            last_good_stream_id: 0,
            status: goaway::PROTOCOL_ERROR
        }]
    );
    assert!(matches!(s.receive(&[]), Err(SessionError::Failed)));
    assert!(matches!(s.ping(), Err(SessionError::Failed)));
}

/// A SYN_STREAM id not above the previous one is a session error.
#[test]
fn a_decreasing_stream_id_is_a_session_error() {
    let mut s = server();
    let mut peer = Peer::new();
    peer.send(&mut s, syn(5, "stdin")).unwrap();
    let err = peer.send(&mut s, syn(3, "stdout")).unwrap_err();
    assert!(matches!(err, SessionError::Protocol(_)), "{err:?}");
    assert!(peer.read(&mut s).contains(&Frame::GoAway {
        last_good_stream_id: 5,
        status: goaway::PROTOCOL_ERROR
    }));
}

/// Replies are only for streams the peer opened, once.
#[test]
fn replies_are_checked() {
    let (mut c, mut s) = (client(), server());
    let id = c.open_stream(Headers::new(), false).unwrap();
    assert!(matches!(
        c.reply(id, Headers::new(), false),
        Err(SessionError::BadReply(..))
    ));
    pump(&mut c, &mut s);
    s.reply(id, Headers::new(), false).unwrap();
    assert!(matches!(
        s.reply(id, Headers::new(), false),
        Err(SessionError::BadReply(..))
    ));
    assert!(matches!(
        s.reply(99, Headers::new(), false),
        Err(SessionError::UnknownStream(99))
    ));
}

/// A unidirectional stream from the peer cannot be written to; too many streams are refused.
#[test]
fn unidirectional_streams_and_the_stream_limit() {
    let mut config = SessionConfig::new(Role::Server);
    config.max_streams = 1;
    let mut s = Session::new(config);
    let mut peer = Peer::new();
    peer.send(
        &mut s,
        Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            slot: 0,
            flags: 2,
            headers: Headers::new(),
        },
    )
    .unwrap();
    assert!(matches!(
        s.send_data(1, Bytes::from_static(b"x"), false),
        Err(SessionError::SendClosed(1))
    ));
    peer.send(&mut s, syn(3, "stdout")).unwrap();
    assert_eq!(
        peer.read(&mut s),
        vec![Frame::RstStream {
            stream_id: 3,
            status: rst::REFUSED_STREAM
        }]
    );
}
