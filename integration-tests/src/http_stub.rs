//! [`HttpStub`]: a tiny HTTP/1.1 server in the test process (std::net, a thread per
//! connection) that answers each path as told and records every request it saw.
//!
//! Probes and lifecycle hooks with `host: 127.0.0.1` reach it from the agent, so a test chooses
//! the status codes, redirects and delays the agent sees, and checks the headers it sent.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a connection may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How the stub answers one path.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// `Location` header, for redirects.
    pub location: Option<String>,
    /// Wait this long before answering.
    pub delay: Duration,
    /// Response body.
    pub body: String,
}

impl Reply {
    /// `status` at once, with a short body.
    pub fn status(status: u16) -> Self {
        Self {
            status,
            location: None,
            delay: Duration::ZERO,
            body: format!("stub says {status}\n"),
        }
    }

    /// A redirect with that status to `location`.
    pub fn redirect(status: u16, location: impl Into<String>) -> Self {
        Self {
            location: Some(location.into()),
            ..Self::status(status)
        }
    }

    /// `status`, but only after `delay`.
    pub fn slow(status: u16, delay: Duration) -> Self {
        Self {
            delay,
            ..Self::status(status)
        }
    }
}

/// One request the stub received.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    /// Request method.
    pub method: String,
    /// Path with query, as sent.
    pub path: String,
    /// Header names (lowercase) and values, in order.
    pub headers: Vec<(String, String)>,
    /// When the request head was read.
    pub at: Instant,
}

impl SeenRequest {
    /// The value of header `name` (case-insensitive), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Shared {
    routes: Mutex<BTreeMap<String, Reply>>,
    seen: Mutex<Vec<SeenRequest>>,
    stop: AtomicBool,
}

/// A tiny HTTP server on `127.0.0.1:<free port>`; stops when dropped.
///
/// Unknown paths get 404. Each connection answers one request and closes.
pub struct HttpStub {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl HttpStub {
    /// Binds `127.0.0.1:0` and starts serving.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("cannot bind the HTTP stub");
        let port = listener.local_addr().expect("stub address").port();
        let shared = Arc::new(Shared::default());
        let acceptor_shared = Arc::clone(&shared);
        let acceptor = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if acceptor_shared.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let conn_shared = Arc::clone(&acceptor_shared);
                std::thread::spawn(move || serve(stream, &conn_shared));
            }
        });
        Self {
            port,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// The port it listens on (host `127.0.0.1`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Answers `path` (without query) with `reply` from now on.
    pub fn route(&self, path: &str, reply: Reply) {
        self.shared.routes.lock().unwrap().insert(path.to_string(), reply);
    }

    /// Every request seen so far, oldest first.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// The requests seen so far for `path` (query ignored).
    pub fn requests_to(&self, path: &str) -> Vec<SeenRequest> {
        self.requests()
            .into_iter()
            .filter(|r| strip_query(&r.path) == path)
            .collect()
    }
}

impl Drop for HttpStub {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the thread sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn strip_query(path: &str) -> &str {
    path.split('?').next().unwrap_or(path)
}

/// Reads one request head, records it, answers per the routes and closes.
fn serve(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let Ok(read_half) = stream.try_clone() else { return };
    let mut reader = BufReader::new(read_half);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let reply = shared
        .routes
        .lock()
        .unwrap()
        .get(strip_query(&path))
        .cloned()
        .unwrap_or_else(|| Reply::status(404));
    shared.seen.lock().unwrap().push(SeenRequest {
        method,
        path,
        headers,
        at: Instant::now(),
    });
    if !reply.delay.is_zero() {
        std::thread::sleep(reply.delay);
    }
    let location = reply
        .location
        .as_ref()
        .map(|l| format!("Location: {l}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{location}Connection: close\r\n\r\n",
        reply.status,
        reason_phrase(reply.status),
        reply.body.len()
    );
    let mut stream = stream;
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(reply.body.as_bytes());
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Both);
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        302 => "Found",
        400 => "Bad Request",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Whatever",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn get(port: u16, path: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nUser-Agent: t/1\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    /// The stub answers routes with their status and Location, 404 otherwise, and records headers.
    #[test]
    fn the_stub_answers_routes_and_records_requests() {
        let stub = HttpStub::start();
        stub.route("/moved", Reply::redirect(302, "http://127.0.0.2:1/x"));
        stub.route("/odd", Reply::status(399));
        let moved = get(stub.port(), "/moved?a=1");
        assert!(moved.starts_with("HTTP/1.1 302 Found\r\n"), "{moved}");
        assert!(moved.contains("\r\nLocation: http://127.0.0.2:1/x\r\n"), "{moved}");
        assert!(get(stub.port(), "/odd").starts_with("HTTP/1.1 399 "));
        assert!(get(stub.port(), "/nope").starts_with("HTTP/1.1 404 "));
        let seen = stub.requests_to("/moved");
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].method, "GET");
        assert_eq!(seen[0].header("USER-AGENT"), Some("t/1"));
        assert_eq!(stub.requests().len(), 3);
    }
}
