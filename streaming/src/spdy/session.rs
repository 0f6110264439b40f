//! The SPDY/3.1 connection as a sans-I/O state machine: bytes in ([`Session::receive`]),
//! events out ([`Session::poll_event`]), commands ([`Session::reply`], [`Session::send_data`],
//! [`Session::reset`], [`Session::ping`], [`Session::go_away`]) whose frames collect in an output
//! buffer ([`Session::take_output`]) the caller writes to the socket in order.
//!
//! Flow control (spec §2.6.8, 3.1's connection window): every stream and the connection start
//! with a 64 KiB send window; data beyond it waits in the stream's queue until the peer's
//! WINDOW_UPDATE (or a SETTINGS INITIAL_WINDOW_SIZE) opens it. Received data is granted back with
//! WINDOW_UPDATE once half a window has arrived, so backpressure on the receive side comes from
//! the caller reading the socket more slowly, not from the window.
//!
//! Kubernetes' SPDY peers (moby/spdystream, used by kubectl and client-go) ignore WINDOW_UPDATE
//! and SETTINGS and never send either: with them a spec-enforcing sender would stall after 64 KiB
//! and a spec-enforcing receiver would reset streams that overrun. [`FlowControl::Lenient`] is
//! that interoperable mode (kubelet's own server, spdystream, behaves the same); the windows are
//! still counted and updates still sent.

use std::collections::{BTreeMap, VecDeque};

use bytes::{Bytes, BytesMut};

use super::frame::{
    goaway, rst, setting, Frame, FrameDecoder, FrameEncoder, FrameError, Setting, FLAG_FIN, FLAG_UNIDIRECTIONAL,
};
use super::headers::{Headers, DEFAULT_MAX_HEADER_BLOCK};

/// The initial window of every stream and of the connection (spec §2.6.8).
pub const DEFAULT_WINDOW: u32 = 64 * 1024;
const MAX_WINDOW: i64 = 0x7fff_ffff;

/// Which end of the connection this is: clients open odd streams and pings, servers even.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Opened the TCP connection (kubectl, or the API server proxying it).
    Client,
    /// Accepted it (the kubelet).
    Server,
}

/// Whether the peer's windows bind this end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowControl {
    /// As the spec says: sends wait for window; a peer overrunning ours gets RST_STREAM
    /// FLOW_CONTROL_ERROR.
    Spec,
    /// As spdystream does: sends never wait, overruns are accepted (see the module docs).
    Lenient,
}

/// How a [`Session`] behaves.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// This end's role.
    pub role: Role,
    /// Whether windows bind.
    pub flow_control: FlowControl,
    /// The largest data frame this end sends.
    pub max_send_frame: usize,
    /// The largest incoming frame accepted.
    pub max_frame_len: usize,
    /// The largest decompressed incoming header block accepted.
    pub max_header_block: usize,
    /// Streams open at once; further SYN_STREAMs are refused.
    pub max_streams: usize,
}

impl SessionConfig {
    /// Defaults for `role`: spec flow control, 32 KiB data frames, 1 MiB frames, 64 KiB header
    /// blocks, 128 streams.
    pub fn new(role: Role) -> Self {
        Self {
            role,
            flow_control: FlowControl::Spec,
            max_send_frame: 32 * 1024,
            max_frame_len: super::frame::DEFAULT_MAX_FRAME_LEN,
            max_header_block: DEFAULT_MAX_HEADER_BLOCK,
            max_streams: 128,
        }
    }
}

/// What the peer did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The peer opened a stream (SYN_STREAM); answer with [`Session::reply`].
    StreamOpened {
        /// Its id.
        stream_id: u32,
        /// Its headers (`streamtype`, `port`, `requestid`, …).
        headers: Headers,
        /// The peer sends nothing more on it.
        fin: bool,
        /// This end may not send on it.
        unidirectional: bool,
        /// 0 (highest) to 7.
        priority: u8,
    },
    /// The peer answered a stream this end opened (SYN_REPLY).
    Replied {
        /// The stream.
        stream_id: u32,
        /// The reply's headers.
        headers: Headers,
        /// The peer sends nothing more on it.
        fin: bool,
    },
    /// More headers on a stream (HEADERS).
    Headers {
        /// The stream.
        stream_id: u32,
        /// The headers.
        headers: Headers,
        /// The peer sends nothing more on it.
        fin: bool,
    },
    /// Data on a stream.
    Data {
        /// The stream.
        stream_id: u32,
        /// The bytes (may be empty with `fin`).
        data: Bytes,
        /// The peer's half of the stream ends here.
        fin: bool,
    },
    /// The peer reset a stream, or this end reset it because the peer broke the protocol on it.
    StreamReset {
        /// The stream.
        stream_id: u32,
        /// The RST_STREAM status ([`super::frame::rst`]).
        status: u32,
        /// Whether the peer sent the reset (else this end did).
        by_peer: bool,
    },
    /// Both halves of a stream have ended; it is forgotten.
    StreamClosed {
        /// The stream.
        stream_id: u32,
    },
    /// The peer pinged (already answered).
    Ping {
        /// The ping id.
        id: u32,
    },
    /// The peer answered this end's ping.
    PingAck {
        /// The ping id.
        id: u32,
    },
    /// The peer sent SETTINGS.
    Settings {
        /// Its entries.
        entries: Vec<Setting>,
    },
    /// The peer goes away: no new streams.
    GoAway {
        /// The last stream it acted on.
        last_good_stream_id: u32,
        /// Its status ([`super::frame::goaway`]).
        status: u32,
    },
}

/// A command this session cannot carry out, or the connection failing.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The peer sent bytes that are not SPDY/3.1; a GOAWAY PROTOCOL_ERROR is queued and the
    /// session is dead.
    #[error("SPDY session: invalid input from the peer")]
    Frame(#[from] FrameError),
    /// The peer broke a session-level rule; a GOAWAY PROTOCOL_ERROR is queued.
    #[error("SPDY session: protocol error: {0}")]
    Protocol(&'static str),
    /// The session failed earlier.
    #[error("SPDY session has failed and takes no more input or commands")]
    Failed,
    /// No such open stream.
    #[error("SPDY stream {0} is not open")]
    UnknownStream(u32),
    /// This end's half of the stream has ended (FIN sent, or unidirectional from the peer).
    #[error("SPDY stream {0} is closed for sending")]
    SendClosed(u32),
    /// A reply to a stream this end opened, or a second reply.
    #[error("SPDY stream {0} cannot be replied to: {1}")]
    BadReply(u32, &'static str),
    /// A GOAWAY was sent or received: no new streams.
    #[error("SPDY session is going away: no new streams")]
    GoingAway,
    /// All 2^31 stream ids of this end's parity are used.
    #[error("SPDY session: stream ids exhausted")]
    StreamIdsExhausted,
}

#[derive(Debug)]
struct Stream {
    send_window: i64,
    recv_window: i64,
    recv_unacked: u32,
    pending: VecDeque<Bytes>,
    pending_fin: bool,
    local_fin: bool,
    remote_fin: bool,
    by_peer: bool,
    replied: bool,
}

/// One SPDY/3.1 connection's state.
#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    decoder: FrameDecoder,
    encoder: FrameEncoder,
    input: BytesMut,
    output: BytesMut,
    events: VecDeque<Event>,
    streams: BTreeMap<u32, Stream>,
    next_stream_id: u32,
    next_ping_id: u32,
    last_peer_stream_id: u32,
    conn_send_window: i64,
    conn_recv_unacked: u32,
    initial_send_window: i64,
    going_away: bool,
    failed: bool,
}

impl Session {
    /// A new session.
    pub fn new(config: SessionConfig) -> Self {
        let first = if config.role == Role::Client { 1 } else { 2 };
        Self {
            decoder: FrameDecoder::new(config.max_frame_len, config.max_header_block),
            encoder: FrameEncoder::new(),
            input: BytesMut::new(),
            output: BytesMut::new(),
            events: VecDeque::new(),
            streams: BTreeMap::new(),
            next_stream_id: first,
            next_ping_id: first,
            last_peer_stream_id: 0,
            conn_send_window: i64::from(DEFAULT_WINDOW),
            conn_recv_unacked: 0,
            initial_send_window: i64::from(DEFAULT_WINDOW),
            going_away: false,
            failed: false,
            config,
        }
    }

    /// Feed bytes read from the socket. On error the session is dead; write out
    /// [`Session::take_output`] (a GOAWAY) and close the connection.
    pub fn receive(&mut self, bytes: &[u8]) -> Result<(), SessionError> {
        if self.failed {
            return Err(SessionError::Failed);
        }
        self.input.extend_from_slice(bytes);
        loop {
            let result = match self.decoder.decode(&mut self.input) {
                Ok(None) => return Ok(()),
                Ok(Some(frame)) => self.handle(frame),
                Err(e) => Err(e.into()),
            };
            if let Err(e) = result {
                self.fail();
                return Err(e);
            }
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The bytes to write to the socket, in order; empties the buffer.
    pub fn take_output(&mut self) -> Bytes {
        self.output.split().freeze()
    }

    /// Whether there are bytes to write.
    pub fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

    /// Open a stream (SYN_STREAM) with `headers`; `fin` if nothing will be sent on it.
    pub fn open_stream(&mut self, headers: Headers, fin: bool) -> Result<u32, SessionError> {
        self.usable()?;
        if self.going_away {
            return Err(SessionError::GoingAway);
        }
        let stream_id = self.next_stream_id;
        if stream_id > 0x7fff_ffff {
            return Err(SessionError::StreamIdsExhausted);
        }
        self.next_stream_id += 2;
        let flags = if fin { FLAG_FIN } else { 0 };
        self.write(&Frame::SynStream {
            stream_id,
            associated_to: 0,
            priority: 0,
            slot: 0,
            flags,
            headers,
        })?;
        let mut stream = self.new_stream(false);
        stream.local_fin = fin;
        stream.replied = true;
        self.streams.insert(stream_id, stream);
        Ok(stream_id)
    }

    /// Answer a stream the peer opened (SYN_REPLY); `fin` if nothing will be sent on it.
    pub fn reply(&mut self, stream_id: u32, headers: Headers, fin: bool) -> Result<(), SessionError> {
        self.usable()?;
        let stream = self
            .streams
            .get(&stream_id)
            .ok_or(SessionError::UnknownStream(stream_id))?;
        if !stream.by_peer {
            return Err(SessionError::BadReply(stream_id, "this end opened it"));
        }
        if stream.replied {
            return Err(SessionError::BadReply(stream_id, "already replied"));
        }
        let fin = fin || stream.local_fin;
        self.write(&Frame::SynReply {
            stream_id,
            flags: if fin { FLAG_FIN } else { 0 },
            headers,
        })?;
        let stream = self.streams.get_mut(&stream_id).expect("looked up above");
        stream.replied = true;
        if fin {
            stream.local_fin = true;
            stream.pending_fin = true;
        }
        self.close_if_done(stream_id);
        Ok(())
    }

    /// Queue `data` on a stream (and end this end's half with `fin`). What the windows allow is
    /// encoded at once, the rest when the peer opens its window.
    pub fn send_data(&mut self, stream_id: u32, data: Bytes, fin: bool) -> Result<(), SessionError> {
        self.usable()?;
        let stream = self
            .streams
            .get_mut(&stream_id)
            .ok_or(SessionError::UnknownStream(stream_id))?;
        if stream.local_fin || stream.pending_fin {
            return Err(SessionError::SendClosed(stream_id));
        }
        if !data.is_empty() {
            stream.pending.push_back(data);
        }
        stream.pending_fin = fin;
        self.flush_stream(stream_id)
    }

    /// Bytes queued on a stream waiting for window (0 for an unknown stream): callers stop
    /// reading their source while this is above their limit.
    pub fn queued(&self, stream_id: u32) -> usize {
        self.streams
            .get(&stream_id)
            .map_or(0, |s| s.pending.iter().map(Bytes::len).sum())
    }

    /// The stream's send window now (`None` if it is not open); may be negative after the peer
    /// shrank the initial window.
    pub fn send_window(&self, stream_id: u32) -> Option<i64> {
        self.streams.get(&stream_id).map(|s| s.send_window)
    }

    /// The connection's send window now.
    pub fn connection_send_window(&self) -> i64 {
        self.conn_send_window
    }

    /// Whether a stream is open (not closed nor reset).
    pub fn is_open(&self, stream_id: u32) -> bool {
        self.streams.contains_key(&stream_id)
    }

    /// Reset a stream (RST_STREAM `status`) and forget it.
    pub fn reset(&mut self, stream_id: u32, status: u32) -> Result<(), SessionError> {
        self.usable()?;
        if self.streams.remove(&stream_id).is_none() {
            return Err(SessionError::UnknownStream(stream_id));
        }
        self.write(&Frame::RstStream { stream_id, status })
    }

    /// Send a PING; returns its id, answered by [`Event::PingAck`].
    pub fn ping(&mut self) -> Result<u32, SessionError> {
        self.usable()?;
        let id = self.next_ping_id;
        self.next_ping_id = self.next_ping_id.wrapping_add(2);
        self.write(&Frame::Ping { id })?;
        Ok(id)
    }

    /// Send SETTINGS (e.g. INITIAL_WINDOW_SIZE).
    pub fn settings(&mut self, entries: Vec<Setting>) -> Result<(), SessionError> {
        self.usable()?;
        self.write(&Frame::Settings { flags: 0, entries })
    }

    /// Send GOAWAY: no new streams either way; open streams go on.
    pub fn go_away(&mut self, status: u32) -> Result<(), SessionError> {
        self.usable()?;
        self.going_away = true;
        self.write(&Frame::GoAway {
            last_good_stream_id: self.last_peer_stream_id,
            status,
        })
    }

    fn usable(&self) -> Result<(), SessionError> {
        if self.failed {
            Err(SessionError::Failed)
        } else {
            Ok(())
        }
    }

    fn fail(&mut self) {
        self.failed = true;
        let frame = Frame::GoAway {
            last_good_stream_id: self.last_peer_stream_id,
            status: goaway::PROTOCOL_ERROR,
        };
        // GOAWAY has no header block: encoding cannot fail.
        let _ = self.encoder.encode(&frame, &mut self.output);
    }

    fn write(&mut self, frame: &Frame) -> Result<(), SessionError> {
        self.encoder.encode(frame, &mut self.output).map_err(SessionError::from)
    }

    fn new_stream(&self, by_peer: bool) -> Stream {
        Stream {
            send_window: self.initial_send_window,
            recv_window: i64::from(DEFAULT_WINDOW),
            recv_unacked: 0,
            pending: VecDeque::new(),
            pending_fin: false,
            local_fin: false,
            remote_fin: false,
            by_peer,
            replied: false,
        }
    }

    fn is_peer_id(&self, id: u32) -> bool {
        (id % 2 == 1) == (self.config.role == Role::Server)
    }

    fn rst(&mut self, stream_id: u32, status: u32) -> Result<(), SessionError> {
        self.streams.remove(&stream_id);
        self.events.push_back(Event::StreamReset {
            stream_id,
            status,
            by_peer: false,
        });
        self.write(&Frame::RstStream { stream_id, status })
    }

    fn handle(&mut self, frame: Frame) -> Result<(), SessionError> {
        match frame {
            Frame::SynStream {
                stream_id,
                associated_to,
                priority,
                flags,
                headers,
                ..
            } => self.handle_syn_stream(stream_id, associated_to, priority, flags, headers),
            Frame::SynReply {
                stream_id,
                flags,
                headers,
            } => self.handle_syn_reply(stream_id, flags, headers),
            Frame::Headers {
                stream_id,
                flags,
                headers,
            } => self.handle_headers(stream_id, flags, headers),
            Frame::Data { stream_id, flags, data } => self.handle_data(stream_id, flags & FLAG_FIN != 0, data),
            Frame::RstStream { stream_id, status } => {
                if self.streams.remove(&stream_id).is_some() {
                    self.events.push_back(Event::StreamReset {
                        stream_id,
                        status,
                        by_peer: true,
                    });
                }
                Ok(())
            }
            Frame::Settings { entries, .. } => self.handle_settings(entries),
            Frame::Ping { id } => {
                if self.is_peer_id(id) {
                    self.write(&Frame::Ping { id })?;
                    self.events.push_back(Event::Ping { id });
                } else {
                    self.events.push_back(Event::PingAck { id });
                }
                Ok(())
            }
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                self.going_away = true;
                self.events.push_back(Event::GoAway {
                    last_good_stream_id,
                    status,
                });
                Ok(())
            }
            Frame::WindowUpdate { stream_id, delta } => self.handle_window_update(stream_id, delta),
            Frame::Unknown { .. } => Ok(()),
        }
    }

    /// The peer opens a stream: refused when its id is not the peer's or not above the last,
    /// when it is a server push, when the session goes away or has its most streams.
    fn handle_syn_stream(
        &mut self,
        stream_id: u32,
        associated_to: u32,
        priority: u8,
        flags: u8,
        headers: Headers,
    ) -> Result<(), SessionError> {
        if !self.is_peer_id(stream_id) {
            return self.write(&Frame::RstStream {
                stream_id,
                status: rst::PROTOCOL_ERROR,
            });
        }
        if stream_id <= self.last_peer_stream_id {
            return Err(SessionError::Protocol("SYN_STREAM id not above the previous one"));
        }
        self.last_peer_stream_id = stream_id;
        let refused = associated_to != 0 || self.going_away || self.streams.len() >= self.config.max_streams;
        if refused {
            return self.write(&Frame::RstStream {
                stream_id,
                status: rst::REFUSED_STREAM,
            });
        }
        let fin = flags & FLAG_FIN != 0;
        let unidirectional = flags & FLAG_UNIDIRECTIONAL != 0;
        let mut stream = self.new_stream(true);
        stream.remote_fin = fin;
        stream.local_fin = unidirectional;
        self.streams.insert(stream_id, stream);
        self.events.push_back(Event::StreamOpened {
            stream_id,
            headers,
            fin,
            unidirectional,
            priority,
        });
        Ok(())
    }

    /// The peer replies to a stream this side opened.
    fn handle_syn_reply(&mut self, stream_id: u32, flags: u8, headers: Headers) -> Result<(), SessionError> {
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            return self.write(&Frame::RstStream {
                stream_id,
                status: rst::INVALID_STREAM,
            });
        };
        if stream.by_peer {
            return self.rst(stream_id, rst::PROTOCOL_ERROR);
        }
        let fin = flags & FLAG_FIN != 0;
        stream.remote_fin |= fin;
        self.events.push_back(Event::Replied {
            stream_id,
            headers,
            fin,
        });
        self.close_if_done(stream_id);
        Ok(())
    }

    /// More headers on a stream the peer has not closed.
    fn handle_headers(&mut self, stream_id: u32, flags: u8, headers: Headers) -> Result<(), SessionError> {
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            return self.write(&Frame::RstStream {
                stream_id,
                status: rst::INVALID_STREAM,
            });
        };
        if stream.remote_fin {
            return self.rst(stream_id, rst::STREAM_ALREADY_CLOSED);
        }
        let fin = flags & FLAG_FIN != 0;
        stream.remote_fin = fin;
        self.events.push_back(Event::Headers {
            stream_id,
            headers,
            fin,
        });
        self.close_if_done(stream_id);
        Ok(())
    }

    /// The peer's settings: a new initial window changes every stream's send window by the
    /// difference.
    fn handle_settings(&mut self, entries: Vec<Setting>) -> Result<(), SessionError> {
        for e in &entries {
            if e.id == setting::INITIAL_WINDOW_SIZE {
                let value = i64::from(e.value);
                if value > MAX_WINDOW {
                    return Err(SessionError::Protocol("SETTINGS INITIAL_WINDOW_SIZE above 2^31-1"));
                }
                let delta = value - self.initial_send_window;
                self.initial_send_window = value;
                for s in self.streams.values_mut() {
                    s.send_window += delta;
                }
            }
        }
        self.events.push_back(Event::Settings { entries });
        self.flush_all()
    }

    /// The peer's window grew: the connection's (stream 0) or a stream's.
    fn handle_window_update(&mut self, stream_id: u32, delta: u32) -> Result<(), SessionError> {
        if stream_id == 0 {
            self.conn_send_window += i64::from(delta);
            if self.conn_send_window > MAX_WINDOW {
                return Err(SessionError::Protocol("connection window above 2^31-1"));
            }
            return self.flush_all();
        }
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            // A stream that just closed: updates may cross the FIN, ignore.
            return Ok(());
        };
        stream.send_window += i64::from(delta);
        if stream.send_window > MAX_WINDOW {
            return self.rst(stream_id, rst::FLOW_CONTROL_ERROR);
        }
        self.flush_stream(stream_id)
    }

    fn handle_data(&mut self, stream_id: u32, fin: bool, data: Bytes) -> Result<(), SessionError> {
        let len = data.len() as u32;
        // The connection window counts every data frame, on a live stream or not.
        self.conn_recv_unacked += len;
        if self.conn_recv_unacked >= DEFAULT_WINDOW / 2 {
            let delta = std::mem::take(&mut self.conn_recv_unacked);
            self.write(&Frame::WindowUpdate { stream_id: 0, delta })?;
        }
        let lenient = self.config.flow_control == FlowControl::Lenient;
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            return self.write(&Frame::RstStream {
                stream_id,
                status: rst::INVALID_STREAM,
            });
        };
        if stream.remote_fin {
            return self.rst(stream_id, rst::STREAM_ALREADY_CLOSED);
        }
        stream.recv_window -= i64::from(len);
        if stream.recv_window < 0 && !lenient {
            return self.rst(stream_id, rst::FLOW_CONTROL_ERROR);
        }
        stream.recv_unacked += len;
        stream.remote_fin = fin;
        let grant = (!fin && stream.recv_unacked >= DEFAULT_WINDOW / 2).then(|| {
            stream.recv_window += i64::from(stream.recv_unacked);
            std::mem::take(&mut stream.recv_unacked)
        });
        self.events.push_back(Event::Data { stream_id, data, fin });
        if let Some(delta) = grant {
            self.write(&Frame::WindowUpdate { stream_id, delta })?;
        }
        self.close_if_done(stream_id);
        Ok(())
    }

    fn flush_all(&mut self) -> Result<(), SessionError> {
        let ids: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| !s.pending.is_empty() || s.pending_fin)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.flush_stream(id)?;
        }
        Ok(())
    }

    fn flush_stream(&mut self, stream_id: u32) -> Result<(), SessionError> {
        let lenient = self.config.flow_control == FlowControl::Lenient;
        loop {
            let Some(stream) = self.streams.get_mut(&stream_id) else {
                return Ok(());
            };
            if stream.local_fin {
                break;
            }
            let Some(front) = stream.pending.front_mut() else {
                if stream.pending_fin {
                    stream.local_fin = true;
                    let frame = Frame::Data {
                        stream_id,
                        flags: FLAG_FIN,
                        data: Bytes::new(),
                    };
                    self.write(&frame)?;
                }
                break;
            };
            let window = if lenient {
                i64::MAX
            } else {
                stream.send_window.min(self.conn_send_window)
            };
            if window <= 0 {
                break;
            }
            let n = front
                .len()
                .min(self.config.max_send_frame)
                .min(usize::try_from(window).unwrap_or(usize::MAX));
            let chunk = front.split_to(n);
            if front.is_empty() {
                stream.pending.pop_front();
            }
            let fin = stream.pending.is_empty() && stream.pending_fin;
            stream.send_window -= n as i64;
            stream.local_fin = fin;
            self.conn_send_window -= n as i64;
            self.write(&Frame::Data {
                stream_id,
                flags: if fin { FLAG_FIN } else { 0 },
                data: chunk,
            })?;
        }
        self.close_if_done(stream_id);
        Ok(())
    }

    fn close_if_done(&mut self, stream_id: u32) {
        if self
            .streams
            .get(&stream_id)
            .is_some_and(|s| s.local_fin && s.remote_fin)
        {
            self.streams.remove(&stream_id);
            self.events.push_back(Event::StreamClosed { stream_id });
        }
    }
}
