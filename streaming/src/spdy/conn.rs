//! A SPDY/3.1 connection driven over byte streams: [`connect`] wraps a [`Session`] in a future
//! ([`Driver`]) that reads the peer's bytes from any `Stream` of byte chunks and hands the bytes
//! to write to a channel, and gives handles for streams: [`Connection::accept`] yields the
//! streams the peer opens (with their headers, already answered with SYN_REPLY),
//! [`Control::open`] opens one; each [`SpdyStream`] is a [`StreamReader`] (a `Stream` of data
//! chunks) and a [`StreamWriter`] (write, FIN, reset).
//!
//! Runtime-agnostic (only `futures`): the caller spawns the driver on its executor and copies
//! [`connect`]'s output receiver to the socket (or makes it an HTTP response body).
//!
//! Backpressure, both ways, with bounded memory:
//! - incoming data goes to a bounded channel per stream; while a stream's reader is behind, the
//!   driver stops reading the socket (as spdystream does), so a peer cannot make it buffer
//!   without limit. A dropped reader's data is discarded.
//! - outgoing: writes are commands on a bounded channel the driver takes only while the socket
//!   keeps up (the output channel has room) and the session's flow-control queues are under
//!   [`MAX_QUEUED`]; a writer waits otherwise.
//!
//! The connection ends when the peer's bytes end (EOF or a read error), when the peer breaks the
//! protocol (GOAWAY PROTOCOL_ERROR is written first), or on [`Control::close`] once the queued
//! output is handed over. Readers of streams still open then get
//! [`StreamError::ConnectionClosed`].

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::channel::{mpsc, oneshot};
use futures::future::{FutureExt, Shared};
use futures::{SinkExt, Stream, StreamExt};

use super::frame::rst;
use super::headers::Headers;
use super::session::{Event, Session, SessionConfig, SessionError};

/// Data chunks buffered per stream before the driver stops reading the socket.
pub const STREAM_BUFFER: usize = 8;
/// Chunks of output waiting for the socket before the driver stops taking commands.
pub const OUTPUT_BUFFER: usize = 4;
/// Bytes queued by flow control (peer's window closed) before writers wait.
pub const MAX_QUEUED: usize = 256 * 1024;
const COMMAND_BUFFER: usize = 16;

/// Why a stream's reader ended without the peer's FIN.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// The stream was reset (by the peer, or by this end for a protocol error on it).
    #[error("SPDY stream reset with status {status}")]
    Reset {
        /// The RST_STREAM status ([`super::frame::rst`]).
        status: u32,
    },
    /// The connection ended.
    #[error("SPDY connection closed")]
    ConnectionClosed,
}

/// The connection is gone: the command cannot be carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("SPDY connection closed")]
pub struct Closed;

/// Why the driver ended other than by EOF or [`Control::close`].
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The peer sent bytes that are not SPDY/3.1, or broke a session rule (a GOAWAY
    /// PROTOCOL_ERROR was written).
    #[error("SPDY peer broke the protocol")]
    Protocol(#[source] SessionError),
    /// Reading the peer's bytes failed.
    #[error("reading the SPDY connection failed")]
    Input(#[source] std::io::Error),
}

enum Command {
    Open {
        headers: Headers,
        fin: bool,
        reply: oneshot::Sender<Result<SpdyStream, SessionError>>,
    },
    Data {
        stream_id: u32,
        data: Bytes,
        fin: bool,
    },
    Reset {
        stream_id: u32,
        status: u32,
    },
    GoAway {
        status: u32,
    },
    Close,
}

/// A stream: its id and headers, and its two halves.
#[derive(Debug)]
pub struct SpdyStream {
    /// The stream id.
    pub id: u32,
    /// The SYN_STREAM's headers (empty for a stream this end opened).
    pub headers: Headers,
    /// What the peer sends on it.
    pub reader: StreamReader,
    /// What this end sends on it.
    pub writer: StreamWriter,
}

/// The peer's data on one stream, chunk by chunk; ends at the peer's FIN, or with a
/// [`StreamError`].
#[derive(Debug)]
pub struct StreamReader {
    id: u32,
    rx: mpsc::Receiver<Result<Bytes, StreamError>>,
}

impl StreamReader {
    /// The stream id.
    pub fn id(&self) -> u32 {
        self.id
    }
}

impl Stream for StreamReader {
    type Item = Result<Bytes, StreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_next_unpin(cx)
    }
}

/// This end's half of one stream. Cloneable; the stream's half ends with [`StreamWriter::finish`]
/// (FIN), not when a writer is dropped.
#[derive(Debug, Clone)]
pub struct StreamWriter {
    id: u32,
    commands: mpsc::Sender<Command>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Open { .. } => f.write_str("Open"),
            Command::Data { stream_id, data, fin } => write!(f, "Data({stream_id}, {} bytes, fin {fin})", data.len()),
            Command::Reset { stream_id, status } => write!(f, "Reset({stream_id}, {status})"),
            Command::GoAway { status } => write!(f, "GoAway({status})"),
            Command::Close => f.write_str("Close"),
        }
    }
}

impl StreamWriter {
    /// The stream id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Send `data`; waits while the socket or the peer's window is behind. Data on a stream
    /// that has been reset is discarded.
    pub async fn write(&mut self, data: Bytes) -> Result<(), Closed> {
        if data.is_empty() {
            return Ok(());
        }
        self.send(Command::Data {
            stream_id: self.id,
            data,
            fin: false,
        })
        .await
    }

    /// End this end's half of the stream (a DATA frame with FIN).
    pub async fn finish(&mut self) -> Result<(), Closed> {
        self.send(Command::Data {
            stream_id: self.id,
            data: Bytes::new(),
            fin: true,
        })
        .await
    }

    /// Reset the stream (RST_STREAM `status`, e.g. [`rst::CANCEL`]).
    pub async fn reset(&mut self, status: u32) -> Result<(), Closed> {
        self.send(Command::Reset {
            stream_id: self.id,
            status,
        })
        .await
    }

    async fn send(&mut self, command: Command) -> Result<(), Closed> {
        self.commands.send(command).await.map_err(|_| Closed)
    }
}

/// Commands on the whole connection; cloneable, usable from any task.
#[derive(Debug, Clone)]
pub struct Control {
    commands: mpsc::Sender<Command>,
    done: Shared<oneshot::Receiver<()>>,
}

impl Control {
    /// Open a stream with `headers` (SYN_STREAM; `fin` when this end sends nothing on it). The
    /// peer's SYN_REPLY is not waited for.
    pub async fn open(&mut self, headers: Headers, fin: bool) -> Result<SpdyStream, OpenError> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Open { headers, fin, reply })
            .await
            .map_err(|_| OpenError::Closed)?;
        answer.await.map_err(|_| OpenError::Closed)?.map_err(OpenError::Refused)
    }

    /// Send GOAWAY: no new streams either way; open ones go on.
    pub async fn go_away(&mut self, status: u32) -> Result<(), Closed> {
        self.commands.send(Command::GoAway { status }).await.map_err(|_| Closed)
    }

    /// End the connection once what was written before is handed to the output.
    pub async fn close(&mut self) -> Result<(), Closed> {
        self.commands.send(Command::Close).await.map_err(|_| Closed)
    }

    /// Resolves when the driver has ended (the peer went away, broke the protocol, or
    /// [`Control::close`]).
    pub fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        self.done.clone().map(|_| ())
    }

    /// Whether the driver has ended.
    pub fn is_closed(&self) -> bool {
        self.done.peek().is_some() || self.commands.is_closed()
    }
}

/// Why [`Control::open`] failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The connection is gone.
    #[error("SPDY connection closed")]
    Closed,
    /// The session refused (going away, ids exhausted).
    #[error("SPDY stream cannot be opened")]
    Refused(#[source] SessionError),
}

/// The streams the peer opens, and the connection's [`Control`].
#[derive(Debug)]
pub struct Connection {
    accept: mpsc::Receiver<SpdyStream>,
    control: Control,
}

impl Connection {
    /// The next stream the peer opened (already replied to); `None` once the connection ended
    /// or the peer sent GOAWAY. Streams the peer opens after this `Connection` is dropped are
    /// refused (RST_STREAM REFUSED_STREAM).
    pub async fn accept(&mut self) -> Option<SpdyStream> {
        self.accept.next().await
    }

    /// The connection's commands.
    pub fn control(&self) -> Control {
        self.control.clone()
    }
}

/// Drive a SPDY session over `input` (the peer's bytes): returns the stream handles, the future
/// to spawn, and the receiver of the bytes to write to the peer, in order (ends when the driver
/// does).
pub fn connect<I>(config: SessionConfig, input: I) -> (Connection, Driver<I>, mpsc::Receiver<Bytes>)
where
    I: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    let (commands_tx, commands) = mpsc::channel(COMMAND_BUFFER);
    let (accept_tx, accept) = mpsc::channel(1);
    let (output, output_rx) = mpsc::channel(OUTPUT_BUFFER);
    let (done_tx, done) = oneshot::channel();
    let driver = Driver {
        session: Session::new(config),
        input,
        output,
        pending_output: None,
        commands,
        command_sender: commands_tx.clone(),
        accept: Some(accept_tx),
        streams: HashMap::new(),
        held: VecDeque::new(),
        closing: false,
        failure: None,
        done: Some(done_tx),
    };
    let control = Control {
        commands: commands_tx,
        done: done.shared(),
    };
    (Connection { accept, control }, driver, output_rx)
}

/// The future running the connection; spawn it. Ends `Ok` on EOF or [`Control::close`].
pub struct Driver<I> {
    session: Session,
    input: I,
    output: mpsc::Sender<Bytes>,
    pending_output: Option<Bytes>,
    commands: mpsc::Receiver<Command>,
    command_sender: mpsc::Sender<Command>,
    accept: Option<mpsc::Sender<SpdyStream>>,
    /// Open streams' data senders (none once the reader was dropped or the peer's half ended).
    streams: HashMap<u32, Option<mpsc::Sender<Result<Bytes, StreamError>>>>,
    /// Events read but not yet delivered (a reader or the acceptor is behind).
    held: VecDeque<Event>,
    closing: bool,
    failure: Option<DriverError>,
    done: Option<oneshot::Sender<()>>,
}

impl<I> std::fmt::Debug for Driver<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("streams", &self.streams.len())
            .field("held", &self.held.len())
            .field("closing", &self.closing)
            .finish()
    }
}

impl<I> Driver<I> {
    fn new_stream(&mut self, id: u32, headers: Headers, peer_fin: bool) -> SpdyStream {
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        self.streams.insert(id, (!peer_fin).then_some(tx));
        SpdyStream {
            id,
            headers,
            reader: StreamReader { id, rx },
            writer: StreamWriter {
                id,
                commands: self.command_sender.clone(),
            },
        }
    }

    /// Deliver the first held event; `Pending` if its receiver is behind.
    fn deliver(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(event) = self.held.front() else {
            return Poll::Ready(());
        };
        match event {
            Event::StreamOpened { stream_id, .. } => {
                let stream_id = *stream_id;
                let ready = match self.accept.as_mut() {
                    None => false,
                    Some(accept) => match accept.poll_ready(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(r) => r.is_ok(),
                    },
                };
                let Some(Event::StreamOpened { headers, fin, .. }) = self.held.pop_front() else {
                    unreachable!("front was StreamOpened")
                };
                if !ready {
                    self.accept = None;
                }
                if !ready || !self.session.is_open(stream_id) {
                    let _ = self.session.reset(stream_id, rst::REFUSED_STREAM);
                    return Poll::Ready(());
                }
                let stream = self.new_stream(stream_id, headers, fin);
                let _ = self.session.reply(stream_id, Headers::new(), false);
                if let Some(accept) = self.accept.as_mut() {
                    if accept.start_send(stream).is_err() {
                        self.accept = None;
                    }
                }
            }
            Event::Data { stream_id, data, .. } => {
                let (stream_id, empty) = (*stream_id, data.is_empty());
                if let Some(Some(tx)) = self.streams.get_mut(&stream_id) {
                    if !empty {
                        match tx.poll_ready(cx) {
                            Poll::Pending => return Poll::Pending,
                            Poll::Ready(Err(_)) => {
                                // The reader is gone: discard.
                                self.streams.insert(stream_id, None);
                            }
                            Poll::Ready(Ok(())) => {}
                        }
                    }
                }
                let Some(Event::Data { data, fin, .. }) = self.held.pop_front() else {
                    unreachable!("front was Data")
                };
                if let Some(slot) = self.streams.get_mut(&stream_id) {
                    if let Some(tx) = slot.as_mut() {
                        if !data.is_empty() {
                            let _ = tx.start_send(Ok(data));
                        }
                    }
                    if fin {
                        *slot = None;
                    }
                }
            }
            Event::StreamReset { stream_id, status, .. } => {
                let (stream_id, status) = (*stream_id, *status);
                self.held.pop_front();
                if let Some(Some(mut tx)) = self.streams.remove(&stream_id) {
                    let _ = tx.try_send(Err(StreamError::Reset { status }));
                }
            }
            Event::StreamClosed { stream_id } => {
                let stream_id = *stream_id;
                self.held.pop_front();
                self.streams.remove(&stream_id);
            }
            Event::GoAway { .. } => {
                self.held.pop_front();
                self.accept = None;
            }
            _ => {
                self.held.pop_front();
            }
        }
        Poll::Ready(())
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::Open { headers, fin, reply } => {
                let result = self
                    .session
                    .open_stream(headers, fin)
                    .map(|id| self.new_stream(id, Headers::new(), false));
                let _ = reply.send(result);
            }
            Command::Data { stream_id, data, fin } => {
                // A stream reset meanwhile: the data has nowhere to go.
                let _ = self.session.send_data(stream_id, data, fin);
            }
            Command::Reset { stream_id, status } => {
                if self.session.reset(stream_id, status).is_ok() {
                    if let Some(Some(mut tx)) = self.streams.remove(&stream_id) {
                        let _ = tx.try_send(Err(StreamError::Reset { status }));
                    }
                }
            }
            Command::GoAway { status } => {
                let _ = self.session.go_away(status);
            }
            Command::Close => self.closing = true,
        }
    }

    fn queued(&self) -> usize {
        self.streams.keys().map(|id| self.session.queued(*id)).sum()
    }

    fn finish(&mut self) -> Poll<Result<(), DriverError>> {
        for (_, tx) in self.streams.drain() {
            if let Some(mut tx) = tx {
                let _ = tx.try_send(Err(StreamError::ConnectionClosed));
            }
        }
        self.accept = None;
        self.commands.close();
        self.output.close_channel();
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
        Poll::Ready(self.failure.take().map_or(Ok(()), Err))
    }
}

impl<I> Future for Driver<I>
where
    I: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    type Output = Result<(), DriverError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        loop {
            let mut progress = false;
            // 1. Hand the session's output to the writer of the socket.
            if this.pending_output.is_none() && this.session.has_output() {
                this.pending_output = Some(this.session.take_output());
            }
            if this.pending_output.is_some() {
                match this.output.poll_ready(cx) {
                    Poll::Ready(Ok(())) => {
                        let chunk = this.pending_output.take().expect("checked");
                        if this.output.start_send(chunk).is_err() {
                            return this.finish();
                        }
                        progress = true;
                    }
                    // Nobody writes the socket any more: the connection is gone.
                    Poll::Ready(Err(_)) => return this.finish(),
                    Poll::Pending => {}
                }
            }
            let flushed = this.pending_output.is_none() && !this.session.has_output();
            if (this.closing || this.failure.is_some()) && flushed {
                return this.finish();
            }
            if this.failure.is_some() {
                if !progress {
                    return Poll::Pending;
                }
                continue;
            }
            // 2. Deliver what was read.
            while !this.held.is_empty() {
                if this.deliver(cx).is_pending() {
                    break;
                }
                progress = true;
            }
            // 3. Read the socket while nothing is held back.
            if this.held.is_empty() && this.pending_output.is_none() && !this.closing {
                match this.input.poll_next_unpin(cx) {
                    Poll::Ready(Some(Ok(bytes))) => {
                        if let Err(e) = this.session.receive(&bytes) {
                            this.failure = Some(DriverError::Protocol(e));
                        }
                        while let Some(event) = this.session.poll_event() {
                            this.held.push_back(event);
                        }
                        progress = true;
                    }
                    Poll::Ready(Some(Err(e))) => {
                        this.failure = Some(DriverError::Input(e));
                        return this.finish();
                    }
                    Poll::Ready(None) => return this.finish(),
                    Poll::Pending => {}
                }
            }
            // 4. Take commands while the output keeps up.
            if this.pending_output.is_none() && !this.closing && this.queued() < MAX_QUEUED {
                match this.commands.poll_next_unpin(cx) {
                    Poll::Ready(Some(command)) => {
                        this.apply(command);
                        while let Some(event) = this.session.poll_event() {
                            this.held.push_back(event);
                        }
                        progress = true;
                    }
                    // Every handle is gone: nothing more will be written.
                    Poll::Ready(None) => this.closing = true,
                    Poll::Pending => {}
                }
            }
            if !(progress || this.closing && this.pending_output.is_none()) {
                return Poll::Pending;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spdy::session::{FlowControl, Role};

    fn config(role: Role) -> SessionConfig {
        SessionConfig {
            flow_control: FlowControl::Lenient,
            ..SessionConfig::new(role)
        }
    }

    /// A client and a server connection joined by in-memory pipes, their drivers spawned.
    fn pair() -> (Connection, Connection) {
        let (c_in_tx, c_in) = mpsc::channel::<std::io::Result<Bytes>>(4);
        let (s_in_tx, s_in) = mpsc::channel::<std::io::Result<Bytes>>(4);
        let (client, c_driver, c_out) = connect(config(Role::Client), c_in);
        let (server, s_driver, s_out) = connect(config(Role::Server), s_in);
        tokio::spawn(c_driver);
        tokio::spawn(s_driver);
        tokio::spawn(pipe(c_out, s_in_tx));
        tokio::spawn(pipe(s_out, c_in_tx));
        (client, server)
    }

    /// Copy one end's output to the other's input, as a socket would.
    async fn pipe(mut from: mpsc::Receiver<Bytes>, mut to: mpsc::Sender<std::io::Result<Bytes>>) {
        while let Some(bytes) = from.next().await {
            if to.send(Ok(bytes)).await.is_err() {
                return;
            }
        }
    }

    async fn read_all(reader: &mut StreamReader) -> Result<Vec<u8>, StreamError> {
        let mut all = Vec::new();
        while let Some(chunk) = reader.next().await {
            all.extend_from_slice(&chunk?);
        }
        Ok(all)
    }

    /// Streams the client opens reach the server with their headers; data flows both ways and
    /// FIN ends each half.
    #[tokio::test]
    async fn streams_carry_headers_and_data_both_ways() {
        let (client, mut server) = pair();
        let mut control = client.control();
        let mut stream = control
            .open(vec![("streamtype".into(), "stdin".into())], false)
            .await
            .unwrap();
        stream.writer.write(Bytes::from_static(b"hello ")).await.unwrap();
        stream.writer.write(Bytes::from_static(b"world")).await.unwrap();
        stream.writer.finish().await.unwrap();
        let mut accepted = server.accept().await.unwrap();
        assert_eq!(accepted.headers, vec![("streamtype".to_string(), "stdin".to_string())]);
        assert_eq!(read_all(&mut accepted.reader).await.unwrap(), b"hello world");
        accepted.writer.write(Bytes::from_static(b"back")).await.unwrap();
        accepted.writer.finish().await.unwrap();
        assert_eq!(read_all(&mut stream.reader).await.unwrap(), b"back");
    }

    /// A reader that does not read holds the driver back (bounded buffering) without losing
    /// data; once it reads, everything arrives in order.
    #[tokio::test]
    async fn a_slow_reader_gets_everything_in_order() {
        let (client, mut server) = pair();
        let mut control = client.control();
        let mut stream = control.open(vec![], false).await.unwrap();
        let writer = tokio::spawn(async move {
            for i in 0..200u32 {
                stream
                    .writer
                    .write(Bytes::from(i.to_be_bytes().to_vec()))
                    .await
                    .unwrap();
            }
            stream.writer.finish().await.unwrap();
            stream
        });
        let mut accepted = server.accept().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let all = read_all(&mut accepted.reader).await.unwrap();
        let expected: Vec<u8> = (0..200u32).flat_map(|i| i.to_be_bytes()).collect();
        assert_eq!(all, expected);
        writer.await.unwrap();
    }

    /// A reset reaches the other side's reader as [`StreamError::Reset`]; closing the
    /// connection ends the peer's readers with [`StreamError::ConnectionClosed`] and resolves
    /// `closed` on both ends.
    #[tokio::test]
    async fn resets_and_close_reach_the_readers() {
        let (client, mut server) = pair();
        let mut control = client.control();
        let mut a = control.open(vec![], false).await.unwrap();
        let mut b = control.open(vec![], false).await.unwrap();
        let mut sa = server.accept().await.unwrap();
        let mut sb = server.accept().await.unwrap();
        a.writer.reset(rst::CANCEL).await.unwrap();
        assert_eq!(
            sa.reader.next().await,
            Some(Err(StreamError::Reset { status: rst::CANCEL }))
        );
        let mut server_control = server.control();
        sb.writer.write(Bytes::from_static(b"last")).await.unwrap();
        server_control.close().await.unwrap();
        server_control.closed().await;
        assert_eq!(b.reader.next().await, Some(Ok(Bytes::from_static(b"last"))));
        assert_eq!(b.reader.next().await, Some(Err(StreamError::ConnectionClosed)));
        control.closed().await;
        assert!(control.is_closed());
    }

    /// Garbage from the peer ends the driver with a protocol error after writing GOAWAY.
    #[tokio::test]
    async fn garbage_ends_the_connection_with_goaway() {
        let (mut input, rx) = mpsc::channel::<std::io::Result<Bytes>>(4);
        let (mut connection, driver, mut output) = connect(config(Role::Server), rx);
        let driver = tokio::spawn(driver);
        input
            .send(Ok(Bytes::from_static(&[
                0x80, 0x03, 0x00, 0x01, 0xff, 0xff, 0xff, 0xff, 1, 2, 3,
            ])))
            .await
            .unwrap();
        let goaway = output.next().await.unwrap();
        assert_eq!(&goaway[..4], &[0x80, 0x03, 0x00, 0x07], "GOAWAY");
        assert!(matches!(driver.await.unwrap(), Err(DriverError::Protocol(_))));
        assert!(connection.accept().await.is_none());
    }

    /// Streams the peer opens after the acceptor is gone are refused, and EOF ends the driver.
    #[tokio::test]
    async fn eof_ends_the_driver_and_resolves_closed() {
        let (input, rx) = mpsc::channel::<std::io::Result<Bytes>>(4);
        let (connection, driver, _output) = connect(config(Role::Server), rx);
        let closed = connection.control().closed();
        let driver = tokio::spawn(driver);
        drop(input);
        closed.await;
        assert!(driver.await.unwrap().is_ok());
    }
}
