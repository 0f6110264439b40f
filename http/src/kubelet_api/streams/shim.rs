//! Makes a SPDY/3.1 upgrade look like a WebSocket upgrade to actix-http, which streams an
//! upgrade request's connection to the handler (`web::Payload` until EOF) only for
//! `Upgrade: websocket` (and CONNECT); any other upgrade gets no payload, and the SPDY frames
//! that follow would be parsed as the next request.
//!
//! [`UpgradeShim`] wraps the connection below actix-http and reads the first request head
//! itself (up to [`MAX_HEAD`]): when it asks `Connection: upgrade` with `Upgrade: SPDY/3.1`, the
//! head is re-serialized with `Upgrade: websocket` and the marker header [`MARKER`] carrying the
//! original value; any `MARKER` the client sent is dropped. The bytes after the head pass
//! through untouched. Later requests on a kept-alive connection are not looked at (kubectl and
//! the API server dial a connection per upgrade). The SPDY handler reads the protocol with
//! [`super::upgrade_protocol`], which prefers the marker.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The header naming the protocol a rewritten upgrade asked for.
pub const MARKER: &str = "x-dockerlet-upgrade";

/// The longest request head looked at (actix-http's own limit answers larger ones).
pub const MAX_HEAD: usize = 1024 * 1024;

enum State {
    /// Reading the first request head.
    Head(Vec<u8>),
    /// Handing out the (rewritten) head and what came after it.
    Replay(Vec<u8>, usize),
    /// Passing bytes through.
    Pass,
}

/// A connection whose first request head may be rewritten (see the module docs).
pub struct UpgradeShim<T> {
    inner: T,
    state: State,
}

impl<T> UpgradeShim<T> {
    /// Wrap `inner`; `look` false passes everything through (HTTP/2).
    pub fn new(inner: T, look: bool) -> Self {
        Self {
            inner,
            state: if look { State::Head(Vec::new()) } else { State::Pass },
        }
    }

    /// The wrapped connection.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

/// The head to hand to actix-http for `buf` (a complete head followed by whatever was read).
fn rewrite(buf: &[u8]) -> Option<Vec<u8>> {
    let mut headers = vec![httparse::EMPTY_HEADER; 256];
    let mut request = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(len) = request.parse(buf).ok()? else {
        return None;
    };
    let value = |name: &'static str| {
        request
            .headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .filter_map(|h| std::str::from_utf8(h.value).ok())
    };
    let upgrade = value("upgrade").next()?.trim().to_string();
    let connection_upgrade = value("connection").any(|v| v.to_ascii_lowercase().contains("upgrade"));
    if !connection_upgrade || !upgrade.eq_ignore_ascii_case(dockerlet_streaming::upgrade::SPDY_31) {
        return None;
    }
    let mut out = Vec::with_capacity(buf.len() + 64);
    out.extend_from_slice(format!("{} {} HTTP/1.{}\r\n", request.method?, request.path?, request.version?).as_bytes());
    for h in request.headers.iter() {
        if h.name.eq_ignore_ascii_case(MARKER) {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        if h.name.eq_ignore_ascii_case("upgrade") {
            out.extend_from_slice(b"websocket");
        } else {
            out.extend_from_slice(h.value);
        }
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("{MARKER}: {upgrade}\r\n\r\n").as_bytes());
    out.extend_from_slice(&buf[len..]);
    Some(out)
}

impl<T: AsyncRead + Unpin> AsyncRead for UpgradeShim<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, out: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            match &mut this.state {
                State::Pass => return Pin::new(&mut this.inner).poll_read(cx, out),
                State::Replay(bytes, at) => {
                    let n = (bytes.len() - *at).min(out.remaining());
                    out.put_slice(&bytes[*at..*at + n]);
                    *at += n;
                    if *at == bytes.len() {
                        this.state = State::Pass;
                    }
                    return Poll::Ready(Ok(()));
                }
                State::Head(buf) => {
                    let mut chunk = [0u8; 8192];
                    let mut read = ReadBuf::new(&mut chunk);
                    match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        Poll::Ready(Ok(())) => {}
                    }
                    let filled = read.filled();
                    let eof = filled.is_empty();
                    buf.extend_from_slice(filled);
                    let complete = buf.windows(4).any(|w| w == b"\r\n\r\n");
                    if !(complete || eof || buf.len() > MAX_HEAD) {
                        continue;
                    }
                    let bytes = std::mem::take(buf);
                    let bytes = if complete {
                        rewrite(&bytes).unwrap_or(bytes)
                    } else {
                        bytes
                    };
                    if bytes.is_empty() {
                        this.state = State::Pass;
                        return Poll::Ready(Ok(()));
                    }
                    this.state = State::Replay(bytes, 0);
                }
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for UpgradeShim<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn through(input: &[u8]) -> Vec<u8> {
        let mut shim = UpgradeShim::new(input, true);
        let mut out = Vec::new();
        shim.read_to_end(&mut out).await.unwrap();
        out
    }

    /// A SPDY upgrade's head is rewritten to a WebSocket-style upgrade with the marker (a
    /// forged marker dropped); the bytes after it, and every other request, pass unchanged.
    #[tokio::test]
    async fn only_spdy_upgrades_are_rewritten() {
        let spdy = b"POST /exec/a/b/c?command=true HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Dockerlet-Upgrade: forged\r\n\r\n\x80\x03\x00\x01";
        let out = through(spdy).await;
        assert_eq!(
            String::from_utf8_lossy(&out),
            "POST /exec/a/b/c?command=true HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nx-dockerlet-upgrade: SPDY/3.1\r\n\r\n\u{fffd}\u{3}\u{0}\u{1}"
        );
        assert!(out.ends_with(b"\x80\x03\x00\x01"));
        let plain = b"GET /pods HTTP/1.1\r\nHost: x\r\n\r\nGET /pods HTTP/1.1\r\n\r\n";
        assert_eq!(through(plain).await, plain);
        let ws = b"GET /exec HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
        assert_eq!(through(ws).await, ws);
        assert_eq!(through(b"partial head").await, b"partial head");
    }
}
