//! A counting proxy on the Docker socket: the agent (or the baseline) talks to it as to
//! dockerd, it forwards every byte both ways, and counts each request line it sees going up,
//! by method and path with IDs and names folded (`POST /containers/{id}/start`).
//!
//! Requests are found by their request line (`METHOD /path HTTP/1.1\r\n`) in the client's
//! bytes; bodies are JSON and hijacked streams (exec, attach) carry no such line, so the count
//! is exact for what the agent sends.
//!
//! [`DockerProxy::start_delayed`] also holds each request back before it goes up (a slow
//! engine, for `make chaos`), and every proxy counts the connections open through it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::runtime::Runtime;

/// Requests seen, by folded request line.
pub type Counts = BTreeMap<String, u64>;

/// The proxy; dropping it stops accepting (connections already open run on).
pub struct DockerProxy {
    path: PathBuf,
    counts: Arc<Mutex<Counts>>,
    /// Every request seen: its folded line and when its line ended (ns since the epoch).
    log: Arc<Mutex<Vec<(String, i64)>>>,
    connections: Arc<Connections>,
    accept: tokio::task::JoinHandle<()>,
}

/// Connections through the proxy: open now, and the most open at once.
#[derive(Debug, Default)]
pub struct Connections {
    open: AtomicUsize,
    max: AtomicUsize,
}

impl Connections {
    fn opened(&self) {
        let now = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.max.fetch_max(now, Ordering::Relaxed);
    }

    fn closed(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// (open now, most open at once).
    pub fn get(&self) -> (usize, usize) {
        (self.open.load(Ordering::Relaxed), self.max.load(Ordering::Relaxed))
    }

    /// Starts counting the most open at once from now.
    pub fn reset_max(&self) {
        self.max.store(self.open.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

impl DockerProxy {
    /// Listen on a new socket in the temp dir, forwarding to `upstream`.
    pub fn start(rt: &Runtime, upstream: &Path) -> anyhow::Result<Self> {
        Self::start_delayed(rt, upstream, Duration::ZERO)
    }

    /// Like [`DockerProxy::start`], holding every request back for `delay` before it goes up.
    pub fn start_delayed(rt: &Runtime, upstream: &Path, delay: Duration) -> anyhow::Result<Self> {
        let path = std::env::temp_dir().join(format!(
            "dockerlet-bench-proxy-{}.sock",
            dockerlet_integration_tests::harness::random_hex()
        ));
        let listener = rt
            .block_on(async { UnixListener::bind(&path) })
            .with_context(|| format!("bind {}", path.display()))?;
        let counts = Arc::new(Mutex::new(Counts::new()));
        let log = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(Connections::default());
        let (up, shared, shared_log, open) = (upstream.to_path_buf(), counts.clone(), log.clone(), connections.clone());
        let accept = rt.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (up, counts, log, open) = (up.clone(), shared.clone(), shared_log.clone(), open.clone());
                tokio::spawn(async move {
                    if let Ok(server) = UnixStream::connect(&up).await {
                        open.opened();
                        forward(client, server, Tally { counts, log, delay }).await;
                        open.closed();
                    }
                });
            }
        });
        Ok(DockerProxy {
            path,
            counts,
            log,
            connections,
            accept,
        })
    }

    /// `unix://<socket>`, for `--container-runtime-endpoint`.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// When each request of kind `line` (`POST /containers/create`) was sent, ns since the epoch.
    pub fn times(&self, line: &str) -> Vec<i64> {
        let log = self.log.lock().expect("proxy log");
        log.iter().filter(|(l, _)| l == line).map(|(_, t)| *t).collect()
    }

    /// The connections through the proxy.
    pub fn connections(&self) -> &Connections {
        &self.connections
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        self.counts.lock().expect("proxy counts").clone()
    }
}

impl Drop for DockerProxy {
    fn drop(&mut self) {
        self.accept.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Where a connection's requests are counted, and how long each is held back.
struct Tally {
    counts: Arc<Mutex<Counts>>,
    log: Arc<Mutex<Vec<(String, i64)>>>,
    delay: Duration,
}

/// Copy both ways; count the requests going up (each held back by the delay).
async fn forward(client: UnixStream, server: UnixStream, tally: Tally) {
    let Tally { counts, log, delay } = tally;
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = async {
        let mut scanner = Scanner::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let found = scanner.feed(&buf[..n]);
            if !found.is_empty() {
                {
                    let now = crate::engine::now_nanos();
                    let mut counts = counts.lock().expect("proxy counts");
                    let mut log = log.lock().expect("proxy log");
                    for line in found {
                        *counts.entry(line.clone()).or_default() += 1;
                        log.push((line, now));
                    }
                }
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let down = async {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(up, down);
}

/// Finds request lines in a client's byte stream that arrives in pieces: a request line,
/// headers up to the empty line, then `Content-Length` bytes of body (bollard sends every body
/// with a length), then the next request.
#[derive(Default)]
struct Scanner {
    /// The bytes since the last line end.
    line: Vec<u8>,
    /// The current request's `Content-Length`.
    length: usize,
    /// Body bytes still to skip.
    body: usize,
}

impl Scanner {
    /// Feed bytes; the folded request lines completed in them.
    fn feed(&mut self, mut bytes: &[u8]) -> Vec<String> {
        let mut found = Vec::new();
        while !bytes.is_empty() {
            if self.body > 0 {
                let skip = self.body.min(bytes.len());
                self.body -= skip;
                bytes = &bytes[skip..];
                continue;
            }
            let b = bytes[0];
            bytes = &bytes[1..];
            if b != b'\n' {
                if self.line.len() < 4096 {
                    self.line.push(b);
                }
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches('\r');
            if text.is_empty() {
                self.body = std::mem::take(&mut self.length);
            } else if let Some(request) = request_line(text) {
                found.push(request);
                self.length = 0;
            } else if let Some((name, value)) = text.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    self.length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        found
    }
}

/// `POST /v1.41/containers/abc/start?x=1 HTTP/1.1\r` → `POST /containers/{id}/start`.
fn request_line(line: &str) -> Option<String> {
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || !version.starts_with("HTTP/1.")
        || !matches!(method, "GET" | "POST" | "PUT" | "DELETE" | "HEAD")
    {
        return None;
    }
    let path = target.split('?').next()?;
    let mut segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segments.first().is_some_and(|s| s.starts_with("v1.")) {
        segments.remove(0);
    }
    Some(format!("{method} /{}", fold(&segments)))
}

/// Replace the object in `containers/<id>/…`, `exec/<id>/…` and `images/<name>/json` by a
/// placeholder, so requests count by kind.
fn fold(segments: &[&str]) -> String {
    match segments {
        ["containers", "json" | "create" | "prune"] => segments.join("/"),
        ["containers", _, rest @ ..] => format!("containers/{{id}}/{}", rest.join("/")),
        ["exec", _, rest @ ..] => format!("exec/{{id}}/{}", rest.join("/")),
        ["images", "json" | "create" | "load" | "prune"] => segments.join("/"),
        ["images", .., last] => format!("images/{{name}}/{last}"),
        _ => segments.join("/"),
    }
}

/// The counts of `after` minus those of `before`.
pub fn delta(before: &Counts, after: &Counts) -> Counts {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// Sum of the counts.
pub fn total(counts: &Counts) -> u64 {
    counts.values().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Request lines are found across chunk boundaries and folded by kind; bodies are not
    /// mistaken for requests.
    #[test]
    fn counts_request_lines_by_kind() {
        let body = "{\"Cmd\":\"GET /x HTTP/1.1\\r\\n\"}\nPOST /not/a/request HTTP/1.1\r\n";
        let stream = format!(
            "POST /v1.41/containers/create?name=k8s_x HTTP/1.1\r\nHost: d\r\ncontent-length: {}\r\n\r\n{body}\
             POST /v1.41/containers/abc123/start HTTP/1.1\r\nHost: d\r\n\r\n\
             GET /v1.41/images/dockerlet.local/busybox:1/json HTTP/1.1\r\n\r\n\
             GET /v1.41/exec/e1/json HTTP/1.1\r\n\r\nGET /v1.41/containers/json?all=true HTTP/1.1\r\n\r\n",
            body.len()
        );
        let mut s = Scanner::default();
        let mut found = Vec::new();
        for chunk in stream.as_bytes().chunks(7) {
            found.extend(s.feed(chunk));
        }
        assert_eq!(
            found,
            vec![
                "POST /containers/create",
                "POST /containers/{id}/start",
                "GET /images/{name}/json",
                "GET /exec/{id}/json",
                "GET /containers/json",
            ]
        );
    }
}
