//! Property-based fuzzing (proptest): random and mutated frames into the decoder and the
//! session never panic, never allocate past the caps, and fail only with typed errors. Bounded
//! case counts keep the run to a few seconds in `cargo test`; `make fuzz` runs 100 times as many
//! (`PROPTEST_CASES`), then the libFuzzer targets of `fuzz/` (cargo-fuzz on the stable toolchain:
//! `scripts/fuzz.sh`), `spdy` and `websocket` among them.

use bytes::{Bytes, BytesMut};
use dockerlet_streaming::spdy::frame::{FLAG_FIN, MAX_WIRE_LENGTH};
use dockerlet_streaming::spdy::{Frame, FrameDecoder, FrameEncoder, Headers, Role, Session, SessionConfig, Setting};
use dockerlet_streaming::websocket::{decode, ChannelProtocol, WsMessage};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    }
}

fn headers() -> impl Strategy<Value = Headers> {
    prop::collection::btree_map("[a-z][a-z0-9-]{0,12}", "[ -~]{0,24}", 0..5).prop_map(|m| m.into_iter().collect())
}

fn stream_id() -> impl Strategy<Value = u32> {
    1..=0x7fff_ffffu32
}

fn frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        (stream_id(), 0..0x8000_0000u32, 0..8u8, any::<u8>(), 0..4u8, headers()).prop_map(
            |(stream_id, associated_to, priority, slot, flags, headers)| {
                Frame::SynStream {
                    stream_id,
                    associated_to,
                    priority,
                    slot,
                    flags,
                    headers,
                }
            }
        ),
        (stream_id(), 0..2u8, headers()).prop_map(|(stream_id, flags, headers)| Frame::SynReply {
            stream_id,
            flags,
            headers
        }),
        (stream_id(), 0..2u8, headers()).prop_map(|(stream_id, flags, headers)| Frame::Headers {
            stream_id,
            flags,
            headers
        }),
        (stream_id(), any::<u32>()).prop_map(|(stream_id, status)| Frame::RstStream { stream_id, status }),
        (
            0..2u8,
            prop::collection::vec((any::<u8>(), 0..0x0100_0000u32, any::<u32>()), 0..4)
        )
            .prop_map(|(flags, e)| Frame::Settings {
                flags,
                entries: e
                    .into_iter()
                    .map(|(flags, id, value)| Setting { flags, id, value })
                    .collect()
            }),
        any::<u32>().prop_map(|id| Frame::Ping { id }),
        (0..0x8000_0000u32, any::<u32>()).prop_map(|(last_good_stream_id, status)| Frame::GoAway {
            last_good_stream_id,
            status
        }),
        (0..0x8000_0000u32, 1..0x8000_0000u32).prop_map(|(stream_id, delta)| Frame::WindowUpdate { stream_id, delta }),
        (stream_id(), 0..2u8, prop::collection::vec(any::<u8>(), 0..300)).prop_map(|(stream_id, flags, data)| {
            Frame::Data {
                stream_id,
                flags,
                data: Bytes::from(data),
            }
        }),
    ]
}

fn encode_all(frames: &[Frame]) -> Vec<u8> {
    let mut enc = FrameEncoder::new();
    let mut out = BytesMut::new();
    for f in frames {
        enc.encode(f, &mut out).unwrap();
    }
    out.to_vec()
}

/// Decode everything, as the session does; returns frames until the first error.
fn decode_all(bytes: &[u8], dec: &mut FrameDecoder) -> Vec<Frame> {
    let mut buf = BytesMut::from(bytes);
    let mut frames = Vec::new();
    while let Ok(Some(f)) = dec.decode(&mut buf) {
        frames.push(f);
    }
    frames
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, bit: u8 },
    Truncate { at: usize },
    Insert { at: usize, byte: u8 },
    Length { frame_start: usize, len: u32 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0..8u8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        (any::<usize>(), 0..=MAX_WIRE_LENGTH as u32)
            .prop_map(|(frame_start, len)| Mutation::Length { frame_start, len }),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        if bytes.is_empty() {
            break;
        }
        match *m {
            Mutation::Flip { at, bit } => {
                let i = at % bytes.len();
                bytes[i] ^= 1 << bit;
            }
            Mutation::Truncate { at } => bytes.truncate(at % bytes.len()),
            Mutation::Insert { at, byte } => {
                let i = at % (bytes.len() + 1);
                bytes.insert(i, byte);
            }
            Mutation::Length { frame_start, len } => {
                // Rewrite a 24-bit length field (bytes 5..8 of a frame header) somewhere.
                if bytes.len() >= 8 {
                    let i = frame_start % (bytes.len() - 7);
                    bytes[i + 5..i + 8].copy_from_slice(&len.to_be_bytes()[1..]);
                }
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(config())]

    /// Any frame sequence round-trips through one encoder/decoder pair.
    #[test]
    fn random_frames_round_trip(frames in prop::collection::vec(frame(), 1..12)) {
        let bytes = encode_all(&frames);
        let mut dec = FrameDecoder::default();
        prop_assert_eq!(decode_all(&bytes, &mut dec), frames);
    }

    /// Random bytes never panic the decoder, whatever the chunking.
    #[test]
    fn random_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..2048), split in any::<usize>()) {
        let mut dec = FrameDecoder::new(4096, 4096);
        let mut buf = BytesMut::new();
        let split = split % (bytes.len() + 1);
        for chunk in [&bytes[..split], &bytes[split..]] {
            buf.extend_from_slice(chunk);
            loop {
                match dec.decode(&mut buf) {
                    Ok(Some(_)) => continue,
                    Ok(None) => break,
                    Err(e) => { let _ = e.to_string(); return Ok(()); }
                }
            }
            // Never buffers more than a frame's cap plus its header waiting for the rest.
            prop_assert!(buf.len() <= bytes.len());
        }
    }

    /// Valid frames with flipped bits, cut short, bytes inserted or lengths rewritten: the
    /// decoder gives frames or a typed error, the session events or a typed error (then a GOAWAY).
    #[test]
    fn mutated_frames_never_panic_decoder_or_session(
        frames in prop::collection::vec(frame(), 1..8),
        mutations in prop::collection::vec(mutation(), 1..4),
        server in any::<bool>(),
    ) {
        let bytes = mutate(encode_all(&frames), &mutations);
        let mut dec = FrameDecoder::new(64 * 1024, 64 * 1024);
        let _ = decode_all(&bytes, &mut dec);
        let mut session = Session::new(SessionConfig::new(if server { Role::Server } else { Role::Client }));
        let result = session.receive(&bytes);
        while session.poll_event().is_some() {}
        let out = session.take_output();
        if result.is_err() {
            prop_assert!(!out.is_empty(), "a failed session says GOAWAY");
            prop_assert!(session.receive(&[]).is_err());
        }
        // Whatever the session wrote is valid SPDY.
        let mut peer = FrameDecoder::default();
        let mut buf = BytesMut::from(out.as_ref());
        while let Some(f) = peer.decode(&mut buf).expect("session output decodes") { let _ = f; }
        prop_assert!(buf.is_empty());
    }

    /// A session driven by valid random frames never panics and its output always decodes,
    /// with commands interleaved.
    #[test]
    fn sessions_survive_random_valid_traffic(frames in prop::collection::vec(frame(), 1..16), cmds in prop::collection::vec((0..5u8, 1..12u32, any::<u8>(), 0..70_000usize), 0..6)) {
        let mut session = Session::new(SessionConfig::new(Role::Server));
        let mut peer = FrameDecoder::default();
        let mut out = BytesMut::new();
        let bytes = encode_all(&frames);
        let _ = session.receive(&bytes);
        for (cmd, id, byte, len) in cmds {
            let _ = match cmd {
                0 => session.reply(id, Headers::new(), false),
                1 => session.send_data(id, Bytes::from(vec![byte; len]), id % 2 == 0),
                2 => session.reset(id, 5),
                3 => session.ping().map(|_| ()),
                _ => session.go_away(0),
            };
            out.extend_from_slice(&session.take_output());
        }
        while session.poll_event().is_some() {}
        while let Some(f) = peer.decode(&mut out).expect("session output decodes") {
            if let Frame::Data { data, flags, .. } = &f {
                prop_assert!(data.len() <= 32 * 1024 && flags & !FLAG_FIN == 0);
            }
        }
        prop_assert!(out.is_empty());
    }

    /// WebSocket channel decoding never panics on any message.
    #[test]
    fn random_websocket_messages_never_panic(binary in prop::collection::vec(any::<u8>(), 0..64), text in ".{0,64}") {
        for p in [ChannelProtocol::V5, ChannelProtocol::V4, ChannelProtocol::V4Base64, ChannelProtocol::Channel, ChannelProtocol::Base64, ChannelProtocol::PortForward] {
            let _ = decode(p, WsMessage::Binary(Bytes::from(binary.clone())));
            let _ = decode(p, WsMessage::Text(text.clone()));
        }
    }
}
