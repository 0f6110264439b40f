//! Plain-HTTP GET for httpGet probes and hooks: one new TCP connection per request, as kubelet
//! (no keep-alive), with the request written in one piece and the response parsed with httparse.
//!
//! At 110 probes a second reqwest's client stack (pool, connector layers, a spawned connection
//! task, URL and header maps) cost the agent more CPU than the kernel's connect and close
//! (BENCHMARKS.md, P5). HTTPS, and redirects to HTTPS, still go through reqwest
//! (the crate root, `lib.rs`).

use std::io::{self, Write as _};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Longest response head (status line and headers) read.
const HEAD_LIMIT: usize = 64 * 1024;
/// Most response headers parsed (hyper's default).
const MAX_HEADERS: usize = 100;
/// Read buffer size.
const READ_CHUNK: usize = 4 * 1024;

/// Why a GET got no response head.
#[derive(Debug, thiserror::Error)]
pub enum HttpGetError {
    /// A header name or value can't be sent (a name that is not an HTTP token, or a control
    /// character in a value). Not retried: the probe fails every time.
    #[error("invalid header {name:?}")]
    InvalidHeader {
        /// The header name as given.
        name: String,
    },
    /// The TCP connection could not be opened (refused, unreachable, name not resolved).
    #[error("dial tcp {addr}")]
    ConnectFailed {
        /// `host:port`.
        addr: String,
        /// The socket error.
        #[source]
        source: ConnectError,
    },
    /// Sending the request or reading the response head failed.
    #[error("connection error")]
    Io(#[from] io::Error),
    /// The server closed the connection before a complete response head.
    #[error("server closed the connection before sending a response (EOF)")]
    ClosedEarly,
    /// The response head is not HTTP/1.x, or is larger than the limit.
    #[error("malformed HTTP response: {0}")]
    Malformed(String),
    /// The deadline passed before the response head arrived.
    #[error("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")]
    Timeout,
}

/// A failed connect in Go's words, as kubelet's probe messages say it (`connect: connection
/// refused`, `connect: no route to host`: the system's text, lower-case first, without Rust's
/// "(os error N)"); the socket error itself is kept in the field.
#[derive(Debug, thiserror::Error)]
#[error("connect: {}", go_text(.0))]
pub struct ConnectError(pub io::Error);

/// An I/O error as Go's syscall errors read.
fn go_text(error: &io::Error) -> String {
    let Some(code) = error.raw_os_error() else {
        return error.to_string();
    };
    let text = io::Error::from_raw_os_error(code).to_string();
    let text = text.split(" (os error").next().unwrap_or_default();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text.to_string(),
    }
}

/// A response: its status, `Location` if any, and at most `body_limit` bytes of its body.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// The `Location` header.
    pub location: Option<String>,
    /// The body, decoded if chunked, cut at the limit (or where the deadline or an error cut it).
    pub body: Vec<u8>,
}

/// One GET request, rendered once and sent as a single write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    bytes: Vec<u8>,
}

fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn is_field_value(value: &str) -> bool {
    value.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

impl Request {
    /// `GET path HTTP/1.1` with the headers kubelet sends: `Host` (`host:port`, unless `headers`
    /// set one), `User-Agent` and `Accept: */*` unless `headers` set them (an empty `Accept`
    /// removes it), `Connection: close`, then `headers` in order.
    pub fn get(
        host: &str,
        port: u16,
        path: &str,
        user_agent: &str,
        headers: &[(String, String)],
    ) -> Result<Self, HttpGetError> {
        let named = |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name));
        let mut bytes = Vec::with_capacity(128 + path.len() + host.len());
        bytes.extend_from_slice(b"GET ");
        bytes.extend_from_slice(path.as_bytes());
        bytes.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        match named("host") {
            Some((_, host)) if !host.is_empty() => bytes.extend_from_slice(host.as_bytes()),
            _ => write_authority(&mut bytes, host, port),
        }
        bytes.extend_from_slice(b"\r\n");
        if named("user-agent").is_none() {
            bytes.extend_from_slice(b"User-Agent: ");
            bytes.extend_from_slice(user_agent.as_bytes());
            bytes.extend_from_slice(b"\r\n");
        }
        if named("accept").is_none() {
            bytes.extend_from_slice(b"Accept: */*\r\n");
        }
        if named("connection").is_none() {
            bytes.extend_from_slice(b"Connection: close\r\n");
        }
        for (name, value) in headers {
            if !is_token(name) || !is_field_value(value) {
                return Err(HttpGetError::InvalidHeader { name: name.clone() });
            }
            let skip = name.eq_ignore_ascii_case("host") || (name.eq_ignore_ascii_case("accept") && value.is_empty());
            if !skip {
                bytes.extend_from_slice(name.as_bytes());
                bytes.extend_from_slice(b": ");
                bytes.extend_from_slice(value.as_bytes());
                bytes.extend_from_slice(b"\r\n");
            }
        }
        bytes.extend_from_slice(b"\r\n");
        Ok(Request { bytes })
    }
}

/// The parsed head of a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Status code.
    pub status: u16,
    /// The `Location` header.
    pub location: Option<String>,
    /// How the body ends.
    pub framing: Framing,
    /// Bytes of the buffer the head took.
    pub len: usize,
}

/// How the body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (204, 304).
    Empty,
    /// `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the server closes.
    Close,
}

/// Parses a head from `buf`: `None` while incomplete.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, HttpGetError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HttpGetError::Malformed(e.to_string())),
    };
    let status = response.code.unwrap_or_default();
    let mut location = None;
    let mut length = None;
    let mut chunked = false;
    for header in response.headers.iter() {
        if header.name.eq_ignore_ascii_case("location") {
            location = Some(String::from_utf8_lossy(header.value).into_owned());
        } else if header.name.eq_ignore_ascii_case("content-length") {
            let text = std::str::from_utf8(header.value).unwrap_or_default().trim();
            length = Some(
                text.parse::<u64>()
                    .map_err(|_| HttpGetError::Malformed(format!("invalid Content-Length {text:?}")))?,
            );
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            // The last coding decides (RFC 9112 §6.3).
            chunked = header
                .value
                .rsplit(|b| *b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        }
    }
    let framing = if matches!(status, 204 | 304) {
        Framing::Empty
    } else if chunked {
        Framing::Chunked
    } else {
        length.map_or(Framing::Close, Framing::Length)
    };
    Ok(Some(Head {
        status,
        location,
        framing,
        len,
    }))
}

/// Decodes the chunked body in `raw` into `out`, at most `limit` bytes; true when the last chunk
/// was seen (or the encoding is broken: nothing more can be decoded).
pub fn dechunk(raw: &[u8], out: &mut Vec<u8>, limit: usize) -> bool {
    out.clear();
    let mut rest = raw;
    loop {
        let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") else {
            return false;
        };
        let size_text = rest[..line_end].split(|b| *b == b';').next().unwrap_or_default();
        let Some(size) = std::str::from_utf8(size_text)
            .ok()
            .and_then(|t| usize::from_str_radix(t.trim(), 16).ok())
        else {
            return true;
        };
        if size == 0 {
            return true;
        }
        rest = &rest[line_end + 2..];
        let available = size.min(rest.len());
        out.extend_from_slice(&rest[..available.min(limit - out.len())]);
        if out.len() >= limit || available < size {
            return out.len() >= limit;
        }
        rest = &rest[size..];
        if rest.len() < 2 {
            return false;
        }
        rest = &rest[2..];
    }
}

/// GET `request` from `host:port` on a new connection; the response head must arrive before
/// `deadline`. The body is read until it ends, `body_limit` bytes were read, an error, or the
/// deadline, whichever comes first. The connection is closed on return.
pub async fn get(
    host: &str,
    port: u16,
    request: &Request,
    body_limit: usize,
    deadline: Instant,
) -> Result<Response, HttpGetError> {
    let mut response = None;
    match tokio::time::timeout_at(deadline, exchange(host, port, request, body_limit, &mut response)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        // The head arrived: keep the body read so far, as reqwest did.
        Err(_) if response.is_some() => {}
        Err(_) => return Err(HttpGetError::Timeout),
    }
    Ok(response.expect("a response when the exchange succeeded"))
}

/// Connects, sends, reads the head into `out` as soon as it is complete, then the body.
async fn exchange(
    host: &str,
    port: u16,
    request: &Request,
    body_limit: usize,
    out: &mut Option<Response>,
) -> Result<(), HttpGetError> {
    let mut stream = TcpStream::connect((host, port))
        .await
        .map_err(|source| HttpGetError::ConnectFailed {
            addr: join_host_port(host, port),
            source: ConnectError(source),
        })?;
    stream.write_all(&request.bytes).await?;
    let mut buf = Vec::with_capacity(READ_CHUNK);
    let head = loop {
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        if stream.read_buf(&mut buf).await? == 0 {
            if buf.is_empty() {
                return Err(HttpGetError::ClosedEarly);
            }
            return Err(HttpGetError::Malformed(
                "connection closed inside the response head".into(),
            ));
        }
        match parse_head(&buf)? {
            // 1xx responses (100 Continue, 103 Early Hints) come before the real one.
            Some(head) if (100..200).contains(&head.status) && head.status != 101 => {
                buf.drain(..head.len);
            }
            Some(head) => break head,
            None if buf.len() > HEAD_LIMIT => {
                return Err(HttpGetError::Malformed(format!(
                    "response head larger than {HEAD_LIMIT} bytes"
                )))
            }
            None => {}
        }
    };
    buf.drain(..head.len);
    let response = out.insert(Response {
        status: head.status,
        location: head.location,
        body: Vec::new(),
    });
    // Body read errors end the body; the response stands (as with reqwest). The body is read
    // into `out`, so the part read before the deadline is kept.
    match head.framing {
        Framing::Empty => {}
        Framing::Length(_) | Framing::Close => {
            let want = match head.framing {
                Framing::Length(length) => usize::try_from(length).unwrap_or(usize::MAX).min(body_limit),
                _ => body_limit,
            };
            buf.truncate(want);
            response.body = buf;
            while response.body.len() < want {
                response.body.reserve(READ_CHUNK.min(want - response.body.len()));
                match stream.read_buf(&mut response.body).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            response.body.truncate(want);
        }
        Framing::Chunked => {
            // Chunk framing adds little; 4× the limit of raw bytes always holds `body_limit`
            // decoded bytes unless the chunks are tiny, and then a shorter body is kept.
            let raw_limit = body_limit.saturating_mul(4).max(READ_CHUNK);
            while !dechunk(&buf, &mut response.body, body_limit) && buf.len() < raw_limit {
                buf.reserve(READ_CHUNK);
                match stream.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        }
    }
    Ok(())
}

/// `net.JoinHostPort`: IPv6 literals in brackets.
pub fn join_host_port(host: &str, port: u16) -> String {
    let mut authority = Vec::with_capacity(host.len() + 8);
    write_authority(&mut authority, host, port);
    String::from_utf8(authority).expect("host and port are UTF-8")
}

/// Appends `host:port`, with an IPv6 literal in brackets.
fn write_authority(out: &mut Vec<u8>, host: &str, port: u16) {
    let bracketed = host.contains(':') && !host.starts_with('[');
    if bracketed {
        out.push(b'[');
    }
    out.extend_from_slice(host.as_bytes());
    if bracketed {
        out.push(b']');
    }
    // Writing to a Vec cannot fail.
    let _ = write!(out, ":{port}");
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Duration;

    /// A one-connection server on loopback: answers with `chunks`, returns the request it read.
    pub(crate) fn serve(chunks: Vec<&'static [u8]>) -> (u16, std::thread::JoinHandle<String>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let handle = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let n = stream.read(&mut buf).unwrap();
            for chunk in chunks {
                stream.write_all(chunk).unwrap();
                stream.flush().unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        (port, handle)
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(2)
    }

    fn plain(headers: &[(&str, &str)]) -> Request {
        let headers: Vec<(String, String)> = headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        Request::get("127.0.0.1", 80, "/x?y=1", "kube-probe/1.37", &headers).unwrap()
    }

    /// The request is kubelet's: Host, User-Agent, Accept */*, Connection: close; given headers
    /// replace ours, an empty Accept removes it, and a Host header sets the Host line.
    #[test]
    fn requests_carry_kubelet_headers_and_given_ones_win() {
        let text = |r: Request| String::from_utf8(r.bytes).unwrap();
        assert_eq!(
            text(plain(&[])),
            "GET /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:80\r\nUser-Agent: kube-probe/1.37\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(
            text(plain(&[
                ("accept", ""),
                ("user-agent", "me"),
                ("Host", "example.com"),
                ("X-A", "b")
            ])),
            "GET /x?y=1 HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\nuser-agent: me\r\nX-A: b\r\n\r\n"
        );
        let bad = Request::get("h", 1, "/", "ua", &[("X-A".into(), "b\r\nEvil: 1".into())]);
        assert!(matches!(bad, Err(HttpGetError::InvalidHeader { .. })), "{bad:?}");
        let bad = Request::get("h", 1, "/", "ua", &[("X A".into(), "b".into())]);
        assert!(matches!(bad, Err(HttpGetError::InvalidHeader { .. })), "{bad:?}");
    }

    /// What the server sends (in pieces), and the status and body expected.
    type Case = (Vec<&'static [u8]>, u16, &'static [u8]);

    /// Content-Length, chunked and close-delimited bodies are read, split across reads, and cut
    /// at the limit; 1xx responses before the real one are skipped.
    #[tokio::test]
    async fn bodies_are_read_by_their_framing_up_to_the_limit() {
        let cases: Vec<Case> = vec![
            (
                vec![b"HTTP/1.1 200 OK\r\nContent-Le", b"ngth: 5\r\n\r\nhel", b"loEXTRA"],
                200,
                b"hello",
            ),
            (
                vec![
                    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r",
                    b"\n4;ext=1\r\ndefg\r\n0\r\n\r\n",
                ],
                201,
                b"abcdefg",
            ),
            (vec![b"HTTP/1.0 500 Oops\r\n\r\nsome", b" text"], 500, b"some text"),
            (vec![b"HTTP/1.1 200 OK\r\n\r\n0123456789abcdef"], 200, b"0123456789"),
            (vec![b"HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n0123456789abcdef"], 200, b"0123456789"),
            (
                vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n"],
                200,
                b"0123456789",
            ),
            (vec![b"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n"], 204, b""),
        ];
        for (chunks, status, body) in cases {
            let (port, seen) = serve(chunks);
            let response = get("127.0.0.1", port, &plain(&[]), 10, soon()).await.unwrap();
            assert_eq!(response.status, status);
            assert_eq!(String::from_utf8_lossy(&response.body), String::from_utf8_lossy(body));
            assert!(seen.join().unwrap().starts_with("GET /x?y=1 HTTP/1.1\r\n"));
        }
    }

    /// Refused connections, early closes, garbage and silence are errors in kubelet's words; a
    /// head that arrived in time keeps its status when the body is cut by the deadline.
    #[tokio::test]
    async fn failures_name_their_cause() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let e = get("127.0.0.1", port, &plain(&[]), 10, soon()).await.unwrap_err();
        assert!(matches!(e, HttpGetError::ConnectFailed { .. }), "{e:?}");
        assert_eq!(e.to_string(), format!("dial tcp 127.0.0.1:{port}"));
        assert_eq!(
            dockerlet_pod::go::error_chain(&e),
            format!("dial tcp 127.0.0.1:{port}: connect: connection refused"),
            "Go's words, as kubelet's messages"
        );

        let (port, _) = serve(vec![]);
        let e = get("127.0.0.1", port, &plain(&[]), 10, soon()).await.unwrap_err();
        assert!(matches!(e, HttpGetError::ClosedEarly), "{e:?}");

        let (port, _) = serve(vec![b"SSH-2.0-OpenSSH\r\n\r\n"]);
        let e = get("127.0.0.1", port, &plain(&[]), 10, soon()).await.unwrap_err();
        assert!(matches!(e, HttpGetError::Malformed(_)), "{e:?}");

        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let deadline = Instant::now() + Duration::from_millis(100);
        let e = get("127.0.0.1", port, &plain(&[]), 10, deadline).await.unwrap_err();
        assert!(matches!(e, HttpGetError::Timeout), "{e:?}");

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let handle = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).unwrap();
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc")
                .unwrap();
            std::thread::sleep(Duration::from_millis(500));
        });
        let deadline = Instant::now() + Duration::from_millis(200);
        let response = get("127.0.0.1", port, &plain(&[]), 10, deadline).await.unwrap();
        assert_eq!((response.status, response.body.as_slice()), (200, &b"abc"[..]));
        handle.join().unwrap();
    }
}
