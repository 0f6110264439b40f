//! Hostile HTTP clients on every port the agent serves: idle connections by the thousand
//! (healthz, read-only, debug and the kubelet API's TLS port), slowloris heads, oversized heads
//! and bodies (the plain-HTTP ports: the TLS port's heads go through the same actix-http codec),
//! and floods on `/healthz` and `/pods`. The agent must keep answering other clients, close
//! what its limits say, keep its memory bounded and leave its pods alone.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::process::Command;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

use super::agent_faults::start_timeout;
use super::node::{describe, difference, ChaosNode};
use super::{ChaosSettings, Outcome};
use crate::load;
use crate::scenarios::Ctx;

/// Pods on the node (so `/pods` has something to say).
const PODS: usize = 20;
/// Slowloris connections per port.
const SLOW_CLIENTS: usize = 500;
/// What an idle connection may cost the agent while it is open: it gets no HTTP dispatcher or
/// TLS session until it sends something (`http/src/gate.rs`): 1.7 KiB measured on the first
/// port, 11.8 KiB before the gate (10,000 idle connections: +112 MiB).
const IDLE_BYTES: usize = 4096;
/// How long a port has, past its own limit, to close idle and slow clients.
const CLOSE_WITHIN: Duration = Duration::from_secs(15);

/// One port the agent serves.
struct Port {
    name: &'static str,
    port: u16,
    tls: bool,
    path: &'static str,
}

fn ports(node: &ChaosNode) -> [Port; 4] {
    let p = node.agent.ports();
    [
        Port {
            name: "healthz",
            port: p.healthz,
            tls: false,
            path: "/healthz",
        },
        Port {
            name: "read-only",
            port: p.read_only,
            tls: false,
            path: "/pods",
        },
        Port {
            name: "debug",
            port: p.debug,
            tls: false,
            path: "/debug/actors",
        },
        Port {
            name: "kubelet API (TLS)",
            port: p.kubelet,
            tls: true,
            path: "/healthz",
        },
    ]
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A new client's request: its status and how long it took; none if not answered in 5 s.
fn served(p: &Port) -> Option<(u16, f64)> {
    let t = Instant::now();
    let status = if p.tls {
        let out = Command::new("curl")
            .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5"])
            .arg(format!("https://127.0.0.1:{}{}", p.port, p.path))
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .ok()
            .filter(|s| *s > 0)?
    } else {
        let head = format!("GET {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", p.path);
        status_of(p.port, head.as_bytes(), Duration::from_secs(5))?
    };
    Some((status, t.elapsed().as_secs_f64()))
}

/// Sends `bytes` on a new connection and reads the status line; none if none comes.
fn status_of(port: u16, bytes: &[u8], timeout: Duration) -> Option<u16> {
    let mut s = StdStream::connect_timeout(&addr(port), timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.set_write_timeout(Some(timeout)).ok()?;
    // A server may answer and close before all of an oversized request is written.
    let _ = s.write_all(bytes);
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    let line = String::from_utf8_lossy(&buf[..n]);
    line.split(' ').nth(1)?.parse().ok()
}

/// Opens `count` connections to `port` and sends `first` on each.
async fn open(port: u16, count: usize, first: &'static [u8]) -> Vec<TcpStream> {
    let mut conns = Vec::with_capacity(count);
    for batch in (0..count).collect::<Vec<_>>().chunks(256) {
        let opened = futures::future::join_all(batch.iter().map(|_| async {
            let mut c = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr(port)))
                .await
                .ok()?
                .ok()?;
            if !first.is_empty() {
                c.write_all(first).await.ok()?;
            }
            Some(c)
        }))
        .await;
        conns.extend(opened.into_iter().flatten());
    }
    conns
}

/// Polls the connections until the server has closed all (or answered and closed) or `limit`
/// passed, writing `drip` on each still open every second: (closed, seconds until the last).
async fn wait_closed(mut conns: Vec<TcpStream>, limit: Duration, drip: &'static [u8]) -> (usize, f64) {
    let t = Instant::now();
    let total = conns.len();
    let mut last = 0.0;
    let mut since_drip = Instant::now();
    while !conns.is_empty() && t.elapsed() < limit {
        let mut buf = [0u8; 1024];
        conns.retain(|c| loop {
            match c.try_read(&mut buf) {
                Ok(0) => break false,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break true,
                Err(_) => break false,
            }
        });
        if conns.len() < total {
            last = t.elapsed().as_secs_f64();
        }
        if !drip.is_empty() && since_drip.elapsed() >= Duration::from_secs(1) {
            since_drip = Instant::now();
            for c in conns.iter_mut() {
                let _ = c.try_write(drip);
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    (total - conns.len(), last)
}

pub fn hostile_http(ctx: &Ctx, s: &ChaosSettings) -> anyhow::Result<Outcome> {
    let node = ChaosNode::start(ctx, "http", &[])?;
    node.add_pods("http", PODS);
    node.wait_ready("http", PODS, start_timeout(PODS))?;
    let before = node.running();
    let rss_start = node.rss_kb().unwrap_or(0);
    let mut o = Outcome::default();
    for p in ports(&node) {
        idle_clients(ctx, s, &node, &p, &mut o);
    }
    for p in ports(&node).into_iter().filter(|p| !p.tls) {
        slow_clients(ctx, &p, &mut o);
        oversized(&node, &p, &mut o);
    }
    let p = node.agent.ports();
    for (name, url) in [
        ("/healthz", format!("http://127.0.0.1:{}/healthz", p.healthz)),
        ("/pods", format!("http://127.0.0.1:{}/pods", p.read_only)),
    ] {
        let rss = node.rss_kb().unwrap_or(0);
        let r = load::paced(&url, s.flood_rate, s.flood_time, 8);
        let after = node.rss_kb().unwrap_or(0);
        let (p50, p99) = r.latencies.p50_p99().unzip();
        o.check(
            format!("{name} flooded at {:.0} req/s: every request answered", s.flood_rate),
            format!(
                "{:.0} req/s achieved, {} errors, p50 {:.2} ms, p99 {:.2} ms, RSS {:.1} → {:.1} MiB",
                r.achieved_rate,
                r.errors,
                p50.unwrap_or(f64::NAN) * 1e3,
                p99.unwrap_or(f64::NAN) * 1e3,
                rss as f64 / 1024.0,
                after as f64 / 1024.0
            ),
            r.errors == 0 && r.ok > 0,
        );
        o.figure(&format!("flood{}_rate", name.replace('/', "_")), r.achieved_rate);
    }
    let rss_end = node.rss_kb().unwrap_or(0);
    o.check(
        "memory bounded: RSS after everything ≤ +16 MiB",
        format!("{:.1} → {:.1} MiB", rss_start as f64 / 1024.0, rss_end as f64 / 1024.0),
        rss_end <= rss_start + 16 * 1024,
    );
    let after = node.running();
    o.check(
        format!("{PODS} pods untouched"),
        describe(&before, &after),
        difference(&before, &after).is_none(),
    );
    Ok(o)
}

/// `idle_connections` connections that send nothing: another client is served meanwhile, and
/// the agent closes them all by its own limit.
fn idle_clients(ctx: &Ctx, s: &ChaosSettings, node: &ChaosNode, p: &Port, o: &mut Outcome) {
    let k = s.idle_connections;
    let rss_before = node.rss_kb().unwrap_or(0);
    let t = Instant::now();
    let conns = ctx.rt.block_on(open(p.port, k, b""));
    let opened = conns.len();
    let open_s = t.elapsed().as_secs_f64();
    let rss = node.rss_kb().unwrap_or(0);
    let answer = served(p);
    let (closed, last) = ctx.rt.block_on(wait_closed(conns, CLOSE_WITHIN, b""));
    let per_connection = rss.saturating_sub(rss_before) as f64 * 1024.0 / opened.max(1) as f64;
    o.check(
        format!(
            "{}: {k} idle connections; another client served; all closed by the agent; \
             ≤ {IDLE_BYTES} bytes of RSS each while open",
            p.name
        ),
        format!(
            "{opened} opened in {open_s:.1} s (RSS {:.1} → {:.1} MiB, {per_connection:.0} bytes each); other client: {}; \
             {closed} closed, the last after {last:.1} s",
            rss_before as f64 / 1024.0,
            rss as f64 / 1024.0,
            answer.map_or("not served".into(), |(st, secs)| format!("{st} in {:.0} ms", secs * 1e3)),
        ),
        opened == k && answer.is_some() && closed == opened && per_connection <= IDLE_BYTES as f64,
    );
    o.figure(
        &format!("idle_bytes_{}", p.name.split(' ').next().unwrap_or("port")),
        per_connection,
    );
}

/// `SLOW_CLIENTS` connections sending their head a header line a second.
fn slow_clients(ctx: &Ctx, p: &Port, o: &mut Outcome) {
    let conns = ctx
        .rt
        .block_on(open(p.port, SLOW_CLIENTS, b"GET /healthz HTTP/1.1\r\nHost: x\r\n"));
    let opened = conns.len();
    let answer = served(p);
    let (closed, last) = ctx.rt.block_on(wait_closed(conns, CLOSE_WITHIN, b"X-Slow: 1\r\n"));
    o.check(
        format!(
            "{}: {SLOW_CLIENTS} slowloris heads cut off; another client served",
            p.name
        ),
        format!(
            "{closed} of {opened} closed, the last after {last:.1} s; other client: {}",
            answer.map_or("not served".into(), |(st, _)| st.to_string())
        ),
        opened == SLOW_CLIENTS && closed == opened && answer.is_some(),
    );
}

/// A 1 MiB header and a 64 MiB body announced as 1 GiB: refused, memory flat.
fn oversized(node: &ChaosNode, p: &Port, o: &mut Outcome) {
    let rss = node.rss_kb().unwrap_or(0);
    let head = format!(
        "GET {} HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        p.path,
        "a".repeat(1 << 20)
    );
    let big_head = status_of(p.port, head.as_bytes(), Duration::from_secs(10));
    let mut body = format!(
        "POST {} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        p.path,
        1u64 << 30
    )
    .into_bytes();
    body.extend(std::iter::repeat_n(b'b', 64 << 20));
    let big_body = status_of(p.port, &body, Duration::from_secs(10));
    let after = node.rss_kb().unwrap_or(0);
    let refused = |s: Option<u16>| s.is_none_or(|s| s >= 400);
    o.check(
        format!(
            "{}: a 1 MiB header and a 1 GiB body refused, memory flat (≤ +8 MiB)",
            p.name
        ),
        format!(
            "header: {}, body: {}, RSS {:.1} → {:.1} MiB",
            big_head.map_or("closed".into(), |s| s.to_string()),
            big_body.map_or("closed".into(), |s| s.to_string()),
            rss as f64 / 1024.0,
            after as f64 / 1024.0
        ),
        refused(big_head) && refused(big_body) && after <= rss + 8 * 1024,
    );
}
