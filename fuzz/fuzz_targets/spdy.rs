//! SPDY/3.1 framing: `dockerlet_streaming::spdy::FrameDecoder` on the bytes all at once and in
//! two pieces (the same frames either way), the decoded frames encoded by `FrameEncoder` and
//! decoded again (the same frames, but for unknown control frames' skipped payloads), and a
//! server and a client `Session` receiving the bytes (whatever they write back is valid SPDY;
//! a failed session says GOAWAY).
#![no_main]

use bytes::BytesMut;
use dockerlet_streaming::spdy::{Frame, FrameDecoder, FrameEncoder, Role, Session, SessionConfig};
use libfuzzer_sys::fuzz_target;

/// The decoder's caps in the fuzz runs: small, so the limits are reached.
const MAX_FRAME: usize = 64 * 1024;

/// Frames from `chunks` fed one after another; whether decoding ended in an error.
fn decode_chunks(chunks: &[&[u8]]) -> (Vec<Frame>, bool) {
    let mut decoder = FrameDecoder::new(MAX_FRAME, MAX_FRAME);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(e) => {
                    drop(e.to_string());
                    return (frames, true);
                }
            }
        }
    }
    (frames, false)
}

/// Everything a session wrote decodes as SPDY, to the last byte.
fn check_output(session: &mut Session) -> usize {
    let out = session.take_output();
    let (frames, failed) = decode_chunks(&[&out]);
    assert!(!failed, "session output decodes");
    frames.len()
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let (whole, failed) = decode_chunks(&[data]);
    let at = usize::from(split).min(data.len());
    let (pieces, pieces_failed) = decode_chunks(&[&data[..at], &data[at..]]);
    assert_eq!(pieces, whole, "split at {at}");
    assert_eq!(pieces_failed, failed);

    let mut encoder = FrameEncoder::new();
    let mut encoded = BytesMut::new();
    let mut sent = Vec::new();
    for frame in &whole {
        if encoder.encode(frame, &mut encoded).is_err() {
            break;
        }
        // An unknown control frame's payload is skipped, not kept: it is encoded empty.
        sent.push(match frame {
            Frame::Unknown { kind, .. } => Frame::Unknown { kind: *kind, len: 0 },
            frame => frame.clone(),
        });
    }
    let (again, again_failed) = decode_chunks(&[&encoded]);
    assert!(!again_failed, "encoded frames decode");
    assert_eq!(again, sent);

    for role in [Role::Server, Role::Client] {
        let mut session = Session::new(SessionConfig::new(role));
        let result = session.receive(data);
        while session.poll_event().is_some() {}
        let written = check_output(&mut session);
        if result.is_err() {
            assert!(written > 0, "a failed session says GOAWAY");
            assert!(session.receive(&[]).is_err(), "a failed session stays failed");
        }
    }
});
