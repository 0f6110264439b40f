//! SPDY/3.1 frames: round trips, byte vectors, header compression, garbage input.

use bytes::{Bytes, BytesMut};
use dockerlet_streaming::spdy::frame::{rst, setting, FLAG_FIN, FLAG_UNIDIRECTIONAL};
use dockerlet_streaming::spdy::headers::{HeaderDeflater, HeaderInflater};
use dockerlet_streaming::spdy::{
    Frame, FrameDecoder, FrameEncoder, FrameError, HeaderError, Headers, Setting, SpdyCodec,
};

fn h(pairs: &[(&str, &str)]) -> Headers {
    pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn all_frames() -> Vec<Frame> {
    vec![
        Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 3,
            slot: 0,
            flags: FLAG_UNIDIRECTIONAL,
            headers: h(&[("streamtype", "error"), ("x", "a\0b")]),
        },
        Frame::SynReply {
            stream_id: 1,
            flags: 0,
            headers: h(&[("x-stream-protocol-version", "v4.channel.k8s.io")]),
        },
        Frame::RstStream {
            stream_id: 5,
            status: rst::CANCEL,
        },
        Frame::Settings {
            flags: 0,
            entries: vec![
                Setting {
                    flags: 1,
                    id: setting::INITIAL_WINDOW_SIZE,
                    value: 1 << 20,
                },
                Setting {
                    flags: 0,
                    id: setting::MAX_CONCURRENT_STREAMS,
                    value: 100,
                },
            ],
        },
        Frame::Ping { id: 7 },
        Frame::GoAway {
            last_good_stream_id: 9,
            status: 0,
        },
        Frame::Headers {
            stream_id: 3,
            flags: FLAG_FIN,
            headers: h(&[("port", "8080")]),
        },
        Frame::WindowUpdate {
            stream_id: 0,
            delta: 65536,
        },
        Frame::WindowUpdate { stream_id: 3, delta: 1 },
        Frame::Data {
            stream_id: 3,
            flags: FLAG_FIN,
            data: Bytes::from_static(b"hello"),
        },
        Frame::Data {
            stream_id: 3,
            flags: 0,
            data: Bytes::new(),
        },
        Frame::SynStream {
            stream_id: 0x7fff_ffff,
            associated_to: 0,
            priority: 7,
            slot: 2,
            flags: FLAG_FIN,
            headers: Headers::new(),
        },
    ]
}

/// Every frame type encodes and decodes back to itself, in sequence on one pair of contexts.
#[test]
fn every_frame_type_round_trips_on_one_connection() {
    let mut enc = FrameEncoder::new();
    let mut dec = FrameDecoder::default();
    let mut buf = BytesMut::new();
    let frames = all_frames();
    for f in &frames {
        enc.encode(f, &mut buf).unwrap();
    }
    let mut back = Vec::new();
    while let Some(f) = dec.decode(&mut buf).unwrap() {
        back.push(f);
    }
    assert_eq!(back, frames);
    assert!(buf.is_empty());
}

/// Frames without header blocks match byte vectors written out from the spec's layouts
/// (§2.2 data, §2.6.3 RST_STREAM, §2.6.4 SETTINGS, §2.6.5 PING, §2.6.6 GOAWAY, §2.6.8
/// WINDOW_UPDATE), both ways.
#[test]
fn fixed_frames_match_the_spec_layouts() {
    let cases = [
        (Frame::Ping { id: 1 }, "8003000600000004".to_owned() + "00000001"),
        (
            Frame::RstStream {
                stream_id: 1,
                status: rst::CANCEL,
            },
            "800300030000000800000001".to_owned() + "00000005",
        ),
        (
            Frame::GoAway {
                last_good_stream_id: 3,
                status: 2,
            },
            "800300070000000800000003".to_owned() + "00000002",
        ),
        (
            Frame::WindowUpdate {
                stream_id: 5,
                delta: 0x10000,
            },
            "800300090000000800000005".to_owned() + "00010000",
        ),
        (
            Frame::Settings {
                flags: 0,
                entries: vec![Setting {
                    flags: 1,
                    id: 7,
                    value: 0x10000,
                }],
            },
            "800300040000000c".to_owned() + "00000001" + "01000007" + "00010000",
        ),
        (
            Frame::Data {
                stream_id: 1,
                flags: FLAG_FIN,
                data: Bytes::from_static(b"hello"),
            },
            "0000000101000005".to_owned() + "68656c6c6f",
        ),
    ];
    for (frame, bytes) in cases {
        let mut out = BytesMut::new();
        FrameEncoder::new().encode(&frame, &mut out).unwrap();
        assert_eq!(out.as_ref(), hex(&bytes).as_slice(), "{frame:?}");
        let mut input = BytesMut::from(hex(&bytes).as_slice());
        assert_eq!(FrameDecoder::default().decode(&mut input).unwrap(), Some(frame));
    }
}

// Two SYN_STREAMs on one compression context, made by C zlib (Python's `zlib.compressobj(level=-1,
// wbits=15, zdict=<SPDY/3 dictionary>)`, each block ended with `Z_SYNC_FLUSH`), frame headers
// laid out by hand from the spec: stream 1 `streamtype: error`, then stream 3 `streamtype: stdout`.
// The zlib header `78 bb e3 c6 a7 c2` names the dictionary by its Adler-32.
const C_ZLIB_SYN_1: &str =
    "80030001000000280000000100000000000078bbe3c6a7c202a62346703a2b294a4dcc851625aca9a08006000000ffff";
const C_ZLIB_SYN_3: &str = "800300010000001900000003000000000000c22a054ccc29f9a52500000000ffff";

/// Header blocks compressed by the reference zlib decode, the second only with the context the
/// first left (it refers back to it).
#[test]
fn decodes_syn_streams_compressed_by_c_zlib_on_one_context() {
    let mut dec = FrameDecoder::default();
    let mut input = BytesMut::from([hex(C_ZLIB_SYN_1), hex(C_ZLIB_SYN_3)].concat().as_slice());
    let first = dec.decode(&mut input).unwrap().unwrap();
    let second = dec.decode(&mut input).unwrap().unwrap();
    assert_eq!(
        first,
        Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            slot: 0,
            flags: 0,
            headers: h(&[("streamtype", "error")])
        }
    );
    assert_eq!(
        second,
        Frame::SynStream {
            stream_id: 3,
            associated_to: 0,
            priority: 0,
            slot: 0,
            flags: 0,
            headers: h(&[("streamtype", "stdout")])
        }
    );
    // Alone, the second block is not decodable: the context is the connection's.
    let err = FrameDecoder::default()
        .decode(&mut BytesMut::from(hex(C_ZLIB_SYN_3).as_slice()))
        .unwrap_err();
    assert!(matches!(err, FrameError::Header(HeaderError::Inflate(_))), "{err:?}");
}

/// This crate's compressor starts its stream with the same zlib header as C zlib (dictionary id
/// of SPDY/3's dictionary), and its blocks decode with a fresh context in order.
#[test]
fn encoder_names_the_spdy3_dictionary_and_shares_context_across_frames() {
    let mut enc = FrameEncoder::new();
    let mut out = BytesMut::new();
    let headers = h(&[("streamtype", "stdout"), ("requestid", "0"), ("port", "80")]);
    let mut sizes = Vec::new();
    for id in [1u32, 3, 5, 7] {
        let before = out.len();
        enc.encode(
            &Frame::SynStream {
                stream_id: id,
                associated_to: 0,
                priority: 0,
                slot: 0,
                flags: 0,
                headers: headers.clone(),
            },
            &mut out,
        )
        .unwrap();
        sizes.push(out.len() - before);
    }
    assert_eq!(
        &out[18..24],
        &hex("78bbe3c6a7c2")[..],
        "zlib header with FDICT and the dictionary id"
    );
    assert!(
        sizes[1] < sizes[0],
        "repeated headers compress against the earlier frame: {sizes:?}"
    );
    let mut dec = FrameDecoder::default();
    for id in [1u32, 3, 5, 7] {
        match dec.decode(&mut out).unwrap().unwrap() {
            Frame::SynStream {
                stream_id,
                headers: got,
                ..
            } => {
                assert_eq!(stream_id, id);
                assert_eq!(got, headers);
            }
            other => panic!("{other:?}"),
        }
    }
}

/// A frame arriving in pieces decodes once complete; before that the buffer is left alone.
#[test]
fn truncated_frames_wait_for_more_bytes() {
    let mut whole = BytesMut::new();
    let mut enc = FrameEncoder::new();
    for f in all_frames() {
        enc.encode(&f, &mut whole).unwrap();
    }
    let bytes = whole.freeze();
    let mut dec = FrameDecoder::default();
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    for b in bytes.iter() {
        buf.extend_from_slice(&[*b]);
        while let Some(f) = dec.decode(&mut buf).unwrap() {
            got.push(f);
        }
    }
    assert_eq!(got, all_frames());
}

fn decode_err(bytes: &[u8]) -> FrameError {
    FrameDecoder::new(1024, 1024)
        .decode(&mut BytesMut::from(bytes))
        .unwrap_err()
}

/// Garbage gives typed errors, never a panic.
#[test]
fn garbage_frames_give_typed_errors() {
    // SPDY/2 frames from spdystream's tests (TestReadMalformedZlibHeader): another version.
    let spdy2 = hex("800200010000001800000002000000000000");
    assert!(matches!(decode_err(&spdy2), FrameError::UnsupportedVersion(2)));
    // A length over the cap is refused from the 8-byte header alone.
    assert!(matches!(
        decode_err(&hex("80030000ffffffff")),
        FrameError::TooLarge {
            len: 0xff_ffff,
            max: 1024
        }
    ));
    assert!(matches!(
        decode_err(&hex("00000001000fffff")),
        FrameError::TooLarge { .. }
    ));
    // Fixed-size frames of the wrong size.
    assert!(matches!(
        decode_err(&hex("800300060000000300000000")),
        FrameError::BadLength { kind: "PING", .. }
    ));
    assert!(matches!(
        decode_err(&hex("80030004000000050000000200")),
        FrameError::BadLength { kind: "SETTINGS", .. }
    ));
    assert!(matches!(
        decode_err(&hex("800300030000000400000001")),
        FrameError::BadLength { kind: "RST_STREAM", .. }
    ));
    // Stream 0 where a stream is needed; a zero window delta.
    assert!(matches!(
        decode_err(&hex("0000000000000000")),
        FrameError::StreamIdZero("data")
    ));
    assert!(matches!(
        decode_err(&hex("80030003000000080000000000000001")),
        FrameError::StreamIdZero("RST_STREAM")
    ));
    assert!(matches!(
        decode_err(&hex("80030009000000080000000100000000")),
        FrameError::ZeroWindowDelta(1)
    ));
    // A header block that is not zlib.
    let mut bad = hex("800300020000000c00000001");
    bad.extend_from_slice(b"notzlib!");
    assert!(matches!(decode_err(&bad), FrameError::Header(HeaderError::Inflate(_))));
    // A SYN_STREAM too short for its fields.
    assert!(matches!(
        decode_err(&hex("800300010000000400000001")),
        FrameError::BadLength { kind: "SYN_STREAM", .. }
    ));
    // Unknown control types are skipped, as the spec says.
    let mut noop = BytesMut::from(hex("8003000500000002abcd").as_slice());
    assert_eq!(
        FrameDecoder::default().decode(&mut noop).unwrap(),
        Some(Frame::Unknown { kind: 5, len: 2 })
    );
}

/// A zlib stream with another dictionary is named as such.
#[test]
fn a_header_block_with_another_dictionary_is_refused() {
    use flate2::{Compress, Compression, FlushCompress};
    let mut z = Compress::new(Compression::default(), true);
    z.set_dictionary(b"some other dictionary").unwrap();
    let mut block = Vec::with_capacity(128);
    z.compress_vec(&[0, 0, 0, 0], &mut block, FlushCompress::Sync).unwrap();
    let err = HeaderInflater::default().decompress(&block).unwrap_err();
    assert!(matches!(err, HeaderError::WrongDictionary(_)), "{err:?}");
}

/// A block that inflates past the cap (a zlib bomb) stops at the cap.
#[test]
fn a_header_block_inflating_past_the_cap_is_refused() {
    let mut deflater = HeaderDeflater::new();
    let mut block = Vec::new();
    deflater
        .compress(&h(&[("x", &"a".repeat(200_000))]), &mut block)
        .unwrap();
    assert!(block.len() < 2000, "compresses well: {}", block.len());
    let err = HeaderInflater::new(64 * 1024).decompress(&block).unwrap_err();
    assert!(matches!(err, HeaderError::TooLarge { max: 65536 }), "{err:?}");
}

/// Malformed name/value blocks inside valid zlib.
#[test]
fn malformed_name_value_blocks_are_refused() {
    fn raw_block(raw: &[u8]) -> Vec<u8> {
        use flate2::{Compress, Compression, FlushCompress};
        let mut z = Compress::new(Compression::default(), true);
        z.set_dictionary(dockerlet_streaming::spdy::headers::DICTIONARY)
            .unwrap();
        let mut out = Vec::with_capacity(raw.len() + 128);
        z.compress_vec(raw, &mut out, FlushCompress::Sync).unwrap();
        out
    }
    type Check = fn(&HeaderError) -> bool;
    let cases: Vec<(Vec<u8>, Check)> = vec![
        (vec![0xff, 0xff, 0xff, 0xff], |e| {
            matches!(e, HeaderError::TooManyPairs { .. })
        }),
        (vec![0, 0, 0, 2, 0, 0, 0, 1, b'a'], |e| {
            matches!(e, HeaderError::Truncated)
        }),
        ([&[0, 0, 0, 1, 0, 0, 0, 1][..], b"A", &[0, 0, 0, 0]].concat(), |e| {
            matches!(e, HeaderError::InvalidName(_))
        }),
        ([&[0, 0, 0, 1, 0, 0, 0, 0][..], &[0, 0, 0, 0]].concat(), |e| {
            matches!(e, HeaderError::InvalidName(_))
        }),
        (
            [
                &[0, 0, 0, 2, 0, 0, 0, 1][..],
                b"a",
                &[0, 0, 0, 0, 0, 0, 0, 1],
                b"a",
                &[0, 0, 0, 0],
            ]
            .concat(),
            |e| matches!(e, HeaderError::DuplicateName(_)),
        ),
        (
            [&[0, 0, 0, 1, 0, 0, 0, 1][..], b"a", &[0, 0, 0, 1, 0xff]].concat(),
            |e| matches!(e, HeaderError::NotUtf8(_)),
        ),
        ([&[0, 0, 0, 0][..], b"junk"].concat(), |e| {
            matches!(e, HeaderError::TrailingBytes(4))
        }),
        (vec![0, 0], |e| matches!(e, HeaderError::Truncated)),
    ];
    for (raw, check) in cases {
        let err = HeaderInflater::default().decompress(&raw_block(&raw)).unwrap_err();
        assert!(check(&err), "{raw:?}: {err:?}");
    }
}

/// Encoding a data frame larger than the 24-bit length is refused.
#[test]
fn oversized_data_frames_are_not_encoded() {
    let frame = Frame::Data {
        stream_id: 1,
        flags: 0,
        data: Bytes::from(vec![0; 1 << 24]),
    };
    assert!(matches!(
        FrameEncoder::new().encode(&frame, &mut BytesMut::new()),
        Err(FrameError::TooLarge { .. })
    ));
}

/// The tokio codec carries frames over an in-memory duplex socket.
#[tokio::test]
async fn the_codec_frames_a_tokio_stream() {
    use futures::{SinkExt, StreamExt};
    use tokio_util::codec::Framed;
    let (a, b) = tokio::io::duplex(1024);
    let mut tx = Framed::new(a, SpdyCodec::default());
    let mut rx = Framed::new(b, SpdyCodec::default());
    let frames = all_frames();
    let sent = frames.clone();
    let writer = tokio::spawn(async move {
        for f in sent {
            tx.send(f).await.unwrap();
        }
    });
    let mut got = Vec::new();
    while got.len() < frames.len() {
        got.push(rx.next().await.unwrap().unwrap());
    }
    writer.await.unwrap();
    assert_eq!(got, frames);
}
