//! SPDY/3.1 frames (spec §2.2–§2.6): the types, and an encoder and decoder that each own one
//! direction's header compression context.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::headers::{HeaderDeflater, HeaderError, HeaderInflater, Headers, DEFAULT_MAX_HEADER_BLOCK};

/// The protocol version this crate speaks.
pub const VERSION: u16 = 3;
/// Bytes of every frame's fixed header.
pub const FRAME_HEADER_LEN: usize = 8;
/// The largest length the 24-bit field can express.
pub const MAX_WIRE_LENGTH: usize = (1 << 24) - 1;
/// Default cap on one incoming frame's payload: more than any data frame kubectl sends (32 KiB
/// copies) and any header block, far less than the 16 MiB the wire allows.
pub const DEFAULT_MAX_FRAME_LEN: usize = 1024 * 1024;

/// FLAG_FIN on SYN_STREAM, SYN_REPLY, HEADERS and data frames.
pub const FLAG_FIN: u8 = 0x01;
/// FLAG_UNIDIRECTIONAL on SYN_STREAM.
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;
/// FLAG_SETTINGS_CLEAR_SETTINGS on SETTINGS.
pub const FLAG_CLEAR_SETTINGS: u8 = 0x01;

/// Control frame type codes (spec §2.6).
pub mod kind {
    /// SYN_STREAM.
    pub const SYN_STREAM: u16 = 1;
    /// SYN_REPLY.
    pub const SYN_REPLY: u16 = 2;
    /// RST_STREAM.
    pub const RST_STREAM: u16 = 3;
    /// SETTINGS.
    pub const SETTINGS: u16 = 4;
    /// PING.
    pub const PING: u16 = 6;
    /// GOAWAY.
    pub const GOAWAY: u16 = 7;
    /// HEADERS.
    pub const HEADERS: u16 = 8;
    /// WINDOW_UPDATE.
    pub const WINDOW_UPDATE: u16 = 9;
}

/// RST_STREAM status codes (spec §2.6.3).
#[allow(missing_docs)]
pub mod rst {
    pub const PROTOCOL_ERROR: u32 = 1;
    pub const INVALID_STREAM: u32 = 2;
    pub const REFUSED_STREAM: u32 = 3;
    pub const UNSUPPORTED_VERSION: u32 = 4;
    pub const CANCEL: u32 = 5;
    pub const INTERNAL_ERROR: u32 = 6;
    pub const FLOW_CONTROL_ERROR: u32 = 7;
    pub const STREAM_IN_USE: u32 = 8;
    pub const STREAM_ALREADY_CLOSED: u32 = 9;
    pub const FRAME_TOO_LARGE: u32 = 11;
}

/// GOAWAY status codes (spec §2.6.6).
#[allow(missing_docs)]
pub mod goaway {
    pub const OK: u32 = 0;
    pub const PROTOCOL_ERROR: u32 = 1;
    pub const INTERNAL_ERROR: u32 = 2;
}

/// SETTINGS ids (spec §2.6.4); only INITIAL_WINDOW_SIZE changes this crate's behaviour.
#[allow(missing_docs)]
pub mod setting {
    pub const UPLOAD_BANDWIDTH: u32 = 1;
    pub const DOWNLOAD_BANDWIDTH: u32 = 2;
    pub const ROUND_TRIP_TIME: u32 = 3;
    pub const MAX_CONCURRENT_STREAMS: u32 = 4;
    pub const CURRENT_CWND: u32 = 5;
    pub const DOWNLOAD_RETRANS_RATE: u32 = 6;
    pub const INITIAL_WINDOW_SIZE: u32 = 7;
    pub const CLIENT_CERTIFICATE_VECTOR_SIZE: u32 = 8;
}

/// One SETTINGS entry: 8 bits of flags, a 24-bit id, a 32-bit value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// FLAG_SETTINGS_PERSIST_VALUE (1), FLAG_SETTINGS_PERSISTED (2).
    pub flags: u8,
    /// The id, see [`setting`].
    pub id: u32,
    /// The value.
    pub value: u32,
}

/// One SPDY/3.1 frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// SYN_STREAM: the peer opens a stream.
    SynStream {
        /// 31-bit stream id.
        stream_id: u32,
        /// For server push; 0 otherwise.
        associated_to: u32,
        /// 0 (highest) to 7.
        priority: u8,
        /// CREDENTIAL slot (unused by Kubernetes).
        slot: u8,
        /// [`FLAG_FIN`], [`FLAG_UNIDIRECTIONAL`].
        flags: u8,
        /// The stream's headers.
        headers: Headers,
    },
    /// SYN_REPLY: the answer to a SYN_STREAM.
    SynReply {
        /// 31-bit stream id.
        stream_id: u32,
        /// [`FLAG_FIN`].
        flags: u8,
        /// The reply's headers.
        headers: Headers,
    },
    /// RST_STREAM: abnormal end of a stream.
    RstStream {
        /// 31-bit stream id.
        stream_id: u32,
        /// See [`rst`].
        status: u32,
    },
    /// SETTINGS.
    Settings {
        /// [`FLAG_CLEAR_SETTINGS`].
        flags: u8,
        /// The entries.
        entries: Vec<Setting>,
    },
    /// PING.
    Ping {
        /// Odd from clients, even from servers.
        id: u32,
    },
    /// GOAWAY: the sender opens no more streams and accepts none above `last_good_stream_id`.
    GoAway {
        /// The last stream id the sender acted on.
        last_good_stream_id: u32,
        /// See [`goaway`].
        status: u32,
    },
    /// HEADERS: more headers on an open stream.
    Headers {
        /// 31-bit stream id.
        stream_id: u32,
        /// [`FLAG_FIN`].
        flags: u8,
        /// The extra headers.
        headers: Headers,
    },
    /// WINDOW_UPDATE: the receiver has room for `delta` more bytes (stream 0: the connection).
    WindowUpdate {
        /// 31-bit stream id, 0 for the connection window (SPDY/3.1).
        stream_id: u32,
        /// 1 to 2^31-1.
        delta: u32,
    },
    /// A data frame.
    Data {
        /// 31-bit stream id.
        stream_id: u32,
        /// [`FLAG_FIN`].
        flags: u8,
        /// The payload.
        data: Bytes,
    },
    /// A control frame of a type this crate does not know (NOOP, CREDENTIAL, later types): the
    /// spec says to ignore it.
    Unknown {
        /// Its type code.
        kind: u16,
        /// Payload length (the payload is skipped).
        len: usize,
    },
}

impl Frame {
    /// The frame's stream id, if it belongs to a stream.
    pub fn stream_id(&self) -> Option<u32> {
        match self {
            Frame::SynStream { stream_id, .. }
            | Frame::SynReply { stream_id, .. }
            | Frame::RstStream { stream_id, .. }
            | Frame::Headers { stream_id, .. }
            | Frame::WindowUpdate { stream_id, .. }
            | Frame::Data { stream_id, .. } => Some(*stream_id),
            _ => None,
        }
    }

    /// Whether FLAG_FIN is set.
    pub fn is_fin(&self) -> bool {
        match self {
            Frame::SynStream { flags, .. }
            | Frame::SynReply { flags, .. }
            | Frame::Headers { flags, .. }
            | Frame::Data { flags, .. } => flags & FLAG_FIN != 0,
            _ => false,
        }
    }
}

/// Why bytes are not a valid frame. Every variant ends the connection (a session error).
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// A control frame of another SPDY version.
    #[error("SPDY frame has version {0}, only version 3 is supported")]
    UnsupportedVersion(u16),
    /// A length above the cap (checked before any of the payload is buffered).
    #[error("SPDY frame length {len} exceeds the limit of {max} bytes")]
    TooLarge {
        /// The frame's length field (or a data frame's size when encoding).
        len: usize,
        /// The cap.
        max: usize,
    },
    /// A fixed-size frame of the wrong size, or a variable one too short for its fields.
    #[error("SPDY {kind} frame has length {len}, {expected}")]
    BadLength {
        /// The frame type.
        kind: &'static str,
        /// Its length field.
        len: usize,
        /// What the spec asks for.
        expected: &'static str,
    },
    /// A frame that needs a stream on stream 0.
    #[error("SPDY {0} frame on stream 0")]
    StreamIdZero(&'static str),
    /// A WINDOW_UPDATE of 0.
    #[error("SPDY WINDOW_UPDATE on stream {0} with delta 0")]
    ZeroWindowDelta(u32),
    /// A bad header block.
    #[error(transparent)]
    Header(#[from] HeaderError),
}

/// Decodes frames from bytes, owning the receive direction's header decompression context.
#[derive(Debug)]
pub struct FrameDecoder {
    inflater: HeaderInflater,
    max_frame_len: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_LEN, DEFAULT_MAX_HEADER_BLOCK)
    }
}

impl FrameDecoder {
    /// A decoder refusing frames longer than `max_frame_len` and header blocks decompressing to
    /// more than `max_header_block` bytes.
    pub fn new(max_frame_len: usize, max_header_block: usize) -> Self {
        Self {
            inflater: HeaderInflater::new(max_header_block),
            max_frame_len,
        }
    }

    /// Take one frame off the front of `buf`: `Ok(None)` while it is incomplete (then `buf` is
    /// untouched). After an error the decoder must not be used again.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let Some(head) = buf.first_chunk::<FRAME_HEADER_LEN>() else {
            return Ok(None);
        };
        let word = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let flags = head[4];
        let len = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
        let control = word & 0x8000_0000 != 0;
        if control {
            let version = ((word >> 16) & 0x7fff) as u16;
            if version != VERSION {
                return Err(FrameError::UnsupportedVersion(version));
            }
        }
        if len > self.max_frame_len {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_frame_len,
            });
        }
        if buf.len() < FRAME_HEADER_LEN + len {
            buf.reserve(FRAME_HEADER_LEN + len - buf.len());
            return Ok(None);
        }
        buf.advance(FRAME_HEADER_LEN);
        let payload = buf.split_to(len);
        if !control {
            let stream_id = word & 0x7fff_ffff;
            if stream_id == 0 {
                return Err(FrameError::StreamIdZero("data"));
            }
            return Ok(Some(Frame::Data {
                stream_id,
                flags,
                data: payload.freeze(),
            }));
        }
        let kind = (word & 0xffff) as u16;
        self.control_frame(kind, flags, len, payload).map(Some)
    }

    /// A control frame of type `kind` from its payload (spec §2.6, one arm per frame type).
    fn control_frame(&mut self, kind: u16, flags: u8, len: usize, mut payload: BytesMut) -> Result<Frame, FrameError> {
        let frame = match kind {
            kind::SYN_STREAM => self.syn_stream(flags, payload)?,
            kind::SYN_REPLY | kind::HEADERS => self.headers_frame(kind, flags, payload)?,
            kind::RST_STREAM => {
                exact(&payload, 8, "RST_STREAM", "expected 8")?;
                let stream_id = stream(payload.get_u32(), "RST_STREAM")?;
                Frame::RstStream {
                    stream_id,
                    status: payload.get_u32(),
                }
            }
            kind::SETTINGS => settings(flags, len, payload)?,
            kind::PING => {
                exact(&payload, 4, "PING", "expected 4")?;
                Frame::Ping { id: payload.get_u32() }
            }
            kind::GOAWAY => {
                exact(&payload, 8, "GOAWAY", "expected 8")?;
                Frame::GoAway {
                    last_good_stream_id: payload.get_u32() & 0x7fff_ffff,
                    status: payload.get_u32(),
                }
            }
            kind::WINDOW_UPDATE => {
                exact(&payload, 8, "WINDOW_UPDATE", "expected 8")?;
                let stream_id = payload.get_u32() & 0x7fff_ffff;
                let delta = payload.get_u32() & 0x7fff_ffff;
                if delta == 0 {
                    return Err(FrameError::ZeroWindowDelta(stream_id));
                }
                Frame::WindowUpdate { stream_id, delta }
            }
            other => Frame::Unknown { kind: other, len },
        };
        Ok(frame)
    }

    /// A SYN_STREAM (spec §2.6.1).
    fn syn_stream(&mut self, flags: u8, mut payload: BytesMut) -> Result<Frame, FrameError> {
        need(&payload, 10, "SYN_STREAM", "at least 10")?;
        let stream_id = stream(payload.get_u32(), "SYN_STREAM")?;
        let associated_to = payload.get_u32() & 0x7fff_ffff;
        let priority = payload.get_u8() >> 5;
        let slot = payload.get_u8();
        let headers = self.inflater.decompress(&payload)?;
        Ok(Frame::SynStream {
            stream_id,
            associated_to,
            priority,
            slot,
            flags,
            headers,
        })
    }

    /// A SYN_REPLY or HEADERS (spec §2.6.2, §2.6.7): a stream id and a header block.
    fn headers_frame(&mut self, kind: u16, flags: u8, mut payload: BytesMut) -> Result<Frame, FrameError> {
        let name = if kind == kind::SYN_REPLY {
            "SYN_REPLY"
        } else {
            "HEADERS"
        };
        need(&payload, 4, name, "at least 4")?;
        let stream_id = stream(payload.get_u32(), name)?;
        let headers = self.inflater.decompress(&payload)?;
        Ok(if kind == kind::SYN_REPLY {
            Frame::SynReply {
                stream_id,
                flags,
                headers,
            }
        } else {
            Frame::Headers {
                stream_id,
                flags,
                headers,
            }
        })
    }
}

/// A SETTINGS frame (spec §2.6.4): a count, then 8 bytes per entry.
fn settings(flags: u8, len: usize, mut payload: BytesMut) -> Result<Frame, FrameError> {
    need(&payload, 4, "SETTINGS", "at least 4")?;
    let count = payload.get_u32() as usize;
    if count.checked_mul(8) != Some(payload.len()) {
        return Err(FrameError::BadLength {
            kind: "SETTINGS",
            len,
            expected: "4 + 8 per entry",
        });
    }
    let entries = (0..count)
        .map(|_| {
            let word = payload.get_u32();
            Setting {
                flags: (word >> 24) as u8,
                id: word & 0x00ff_ffff,
                value: payload.get_u32(),
            }
        })
        .collect();
    Ok(Frame::Settings { flags, entries })
}

fn need(payload: &BytesMut, min: usize, kind: &'static str, expected: &'static str) -> Result<(), FrameError> {
    if payload.len() < min {
        return Err(FrameError::BadLength {
            kind,
            len: payload.len(),
            expected,
        });
    }
    Ok(())
}

fn exact(payload: &BytesMut, size: usize, kind: &'static str, expected: &'static str) -> Result<(), FrameError> {
    if payload.len() != size {
        return Err(FrameError::BadLength {
            kind,
            len: payload.len(),
            expected,
        });
    }
    Ok(())
}

fn stream(word: u32, kind: &'static str) -> Result<u32, FrameError> {
    match word & 0x7fff_ffff {
        0 => Err(FrameError::StreamIdZero(kind)),
        id => Ok(id),
    }
}

/// Encodes frames to bytes, owning the send direction's header compression context.
#[derive(Debug, Default)]
pub struct FrameEncoder {
    deflater: HeaderDeflater,
}

impl FrameEncoder {
    /// A fresh encoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append `frame`'s bytes to `dst`. Headers are compressed in call order: frames must reach
    /// the wire in the order they were encoded.
    pub fn encode(&mut self, frame: &Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
        let mut body = Vec::new();
        let (kind, flags) = match frame {
            Frame::Data { stream_id, flags, data } => {
                if data.len() > MAX_WIRE_LENGTH {
                    return Err(FrameError::TooLarge {
                        len: data.len(),
                        max: MAX_WIRE_LENGTH,
                    });
                }
                dst.reserve(FRAME_HEADER_LEN + data.len());
                dst.put_u32(stream_id & 0x7fff_ffff);
                dst.put_u8(*flags);
                put_u24(dst, data.len());
                dst.put_slice(data);
                return Ok(());
            }
            Frame::SynStream {
                stream_id,
                associated_to,
                priority,
                slot,
                flags,
                headers,
            } => {
                body.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
                body.extend_from_slice(&(associated_to & 0x7fff_ffff).to_be_bytes());
                body.push((priority & 0x7) << 5);
                body.push(*slot);
                self.deflater.compress(headers, &mut body)?;
                (kind::SYN_STREAM, *flags)
            }
            Frame::SynReply {
                stream_id,
                flags,
                headers,
            }
            | Frame::Headers {
                stream_id,
                flags,
                headers,
            } => {
                body.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
                self.deflater.compress(headers, &mut body)?;
                let kind = if matches!(frame, Frame::SynReply { .. }) {
                    kind::SYN_REPLY
                } else {
                    kind::HEADERS
                };
                (kind, *flags)
            }
            Frame::RstStream { stream_id, status } => {
                body.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
                body.extend_from_slice(&status.to_be_bytes());
                (kind::RST_STREAM, 0)
            }
            Frame::Settings { flags, entries } => {
                body.extend_from_slice(&(entries.len() as u32).to_be_bytes());
                for e in entries {
                    body.extend_from_slice(&((u32::from(e.flags) << 24) | (e.id & 0x00ff_ffff)).to_be_bytes());
                    body.extend_from_slice(&e.value.to_be_bytes());
                }
                (kind::SETTINGS, *flags)
            }
            Frame::Ping { id } => {
                body.extend_from_slice(&id.to_be_bytes());
                (kind::PING, 0)
            }
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                body.extend_from_slice(&(last_good_stream_id & 0x7fff_ffff).to_be_bytes());
                body.extend_from_slice(&status.to_be_bytes());
                (kind::GOAWAY, 0)
            }
            Frame::WindowUpdate { stream_id, delta } => {
                body.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
                body.extend_from_slice(&(delta & 0x7fff_ffff).to_be_bytes());
                (kind::WINDOW_UPDATE, 0)
            }
            Frame::Unknown { kind, .. } => (*kind, 0),
        };
        if body.len() > MAX_WIRE_LENGTH {
            return Err(FrameError::TooLarge {
                len: body.len(),
                max: MAX_WIRE_LENGTH,
            });
        }
        dst.reserve(FRAME_HEADER_LEN + body.len());
        dst.put_u16(0x8000 | VERSION);
        dst.put_u16(kind);
        dst.put_u8(flags);
        put_u24(dst, body.len());
        dst.put_slice(&body);
        Ok(())
    }
}

fn put_u24(dst: &mut BytesMut, n: usize) {
    dst.put_slice(&(n as u32).to_be_bytes()[1..]);
}
