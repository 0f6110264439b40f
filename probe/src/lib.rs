//! Probe and lifecycle-hook handlers, all run from the agent (kubelet's `pkg/probe/{http,tcp,exec,grpc}` and `pkg/kubelet/lifecycle/handlers.go`):
//! httpGet and tcpSocket from the node, exec through Docker's exec API, gRPC health checks,
//! and the `sleep` hook. [`Action`] is a validated handler; [`run`] performs it once.
//!
//! An adapter beside `dockerlet-runtime` (it execs through [`ContainerRuntime`]): no actors. The
//! ProbeActor runs probes with it, the pod workers their postStart and preStop hooks.

use dockerlet_pod::go::error_chain;
use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use dockerlet_messages::ContainerId;
use tokio::time::Instant;

use dockerlet_pod::action::Action;

mod grpc;
/// The plain-HTTP GET; public for the fuzz targets (`fuzz/`, `probe_http_response`), which
/// feed its response parsing bytes.
#[doc(hidden)]
pub mod http;
use dockerlet_runtime::ContainerRuntime;

/// Most response body read from an HTTP probe or hook.
const BODY_LIMIT: usize = 10 * 1024;
/// Most redirects followed (same host only).
const MAX_REDIRECTS: usize = 10;
/// Longest timeout armed (about 136 years): `Instant` arithmetic panics on overflow.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(u32::MAX as u64);

/// What one run of a handler gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Passed; the output.
    Success(String),
    /// Passed with a warning: a probe's redirect to another host was not followed (kubelet's
    /// `ProbeWarning`), or a hook's HTTPS request was answered in plain HTTP and passed when
    /// retried with HTTP (kubelet's `LifecycleHTTPFallback`); the event's message.
    Warning(String),
    /// Failed; why.
    Failure(String),
}

impl Outcome {
    /// Did it pass?
    pub fn passed(&self) -> bool {
        !matches!(self, Outcome::Failure(_))
    }
}

/// Who is asking: probes and hooks use different user agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// `kube-probe/<version>`.
    Probe,
    /// `kube-lifecycle/<version>`.
    Lifecycle,
}

/// Where and how to run an action.
#[derive(Clone)]
pub struct Target {
    /// Docker (exec).
    pub runtime: Arc<dyn ContainerRuntime>,
    /// The container.
    pub container_id: ContainerId,
    /// The pod IP (default host).
    pub pod_ip: Option<String>,
    /// Total time allowed.
    pub timeout: Duration,
}

/// The one HTTP client of the agent's probes and hooks: no proxies, no keep-alive, no
/// certificate verification (as kubelet), redirects followed only to the same host.
fn http_client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let same_host = attempt.previous().first().and_then(|u| u.host_str()) == attempt.url().host_str();
            if same_host && attempt.previous().len() <= MAX_REDIRECTS {
                attempt.follow()
            } else {
                attempt.stop()
            }
        });
        reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .redirect(policy)
            .no_proxy()
            .pool_max_idle_per_host(0)
            .build()
            .expect("the probe HTTP client builds")
    })
}

fn host_for<'a>(host: &'a Option<String>, pod_ip: &'a Option<String>) -> &'a str {
    host.as_deref().or(pod_ip.as_deref()).unwrap_or("127.0.0.1")
}

/// `[v6]` for URLs and socket addresses.
fn bracket(host: &str) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(_)) => format!("[{host}]"),
        _ => host.to_string(),
    }
}

/// Run `action` once against `target`.
pub async fn run(action: &Action, target: &Target, caller: Caller) -> Outcome {
    match action {
        Action::Http {
            scheme,
            host,
            port,
            path,
            headers,
        } => {
            let host = host_for(host, &target.pod_ip);
            http_get(scheme, host, *port, path, headers, target.timeout, caller).await
        }
        Action::Tcp { host, port } => {
            let addr = format!("{}:{port}", bracket(host_for(host, &target.pod_ip)));
            match tokio::time::timeout(target.timeout, tokio::net::TcpStream::connect(&addr)).await {
                Ok(Ok(_)) => Outcome::Success(String::new()),
                Ok(Err(e)) => Outcome::Failure(format!("dial tcp {addr}: {}", http::ConnectError(e))),
                Err(_) => Outcome::Failure(format!("dial tcp {addr}: i/o timeout")),
            }
        }
        Action::Exec { command } => {
            match target
                .runtime
                .exec(&target.container_id, command.clone(), target.timeout)
                .await
            {
                Ok(out) => match out.exit_code {
                    Some(0) => Outcome::Success(out.output),
                    // kubelet's message is the command's output, even empty ("Liveness probe
                    // failed: "); the exit code is in the agent's log.
                    Some(code) => {
                        tracing::debug!(command = ?command, exit_code = code, "exec handler failed");
                        Outcome::Failure(out.output)
                    }
                    // kubelet's TimeoutError text: the command joined by spaces, quoted.
                    None => Outcome::Failure(format!("command {:?} timed out", command.join(" "))),
                },
                Err(e) => Outcome::Failure(e.to_string()),
            }
        }
        Action::Grpc { port, service } => {
            let host = host_for(&None, &target.pod_ip);
            match grpc::check(host, *port, service, target.timeout).await {
                Ok(message) => Outcome::Success(message),
                Err(failed) => Outcome::Failure(failed.to_string()),
            }
        }
        Action::Sleep { seconds } => {
            tokio::time::sleep(Duration::from_secs(*seconds).min(target.timeout)).await;
            Outcome::Success(String::new())
        }
    }
}

/// A plain-HTTP location: where to connect and what to ask for (borrowed for the first hop).
struct Hop<'a> {
    host: Cow<'a, str>,
    port: u16,
    path: Cow<'a, str>,
}

impl Hop<'_> {
    /// The URL, for messages and for resolving a redirect (made only when needed).
    fn url(&self) -> String {
        format!("http://{}{}", http::join_host_port(&self.host, self.port), self.path)
    }

    /// Where a redirect from this hop leads: None unless it is a same-host redirect that can be
    /// followed (on no Location, a Location that does not parse, or another host, the redirect
    /// response itself is the answer, as it was with reqwest's policy).
    fn redirect(&self, first: &Hop, location: Option<&str>) -> Option<reqwest::Url> {
        let next = reqwest::Url::parse(&self.url()).ok()?.join(location?).ok()?;
        let first_host = reqwest::Url::parse(&first.url()).ok()?.host_str().map(str::to_owned);
        (next.host_str().map(str::to_owned) == first_host).then_some(next)
    }

    fn from_url(url: &reqwest::Url) -> Hop<'static> {
        let host = url.host_str().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let path = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_string(),
        };
        Hop {
            host: Cow::Owned(host.to_string()),
            port: url.port_or_known_default().unwrap_or(80),
            path: Cow::Owned(path),
        }
    }
}

fn user_agent(caller: Caller) -> &'static str {
    match caller {
        Caller::Probe => dockerlet_pod::version::PROBE_USER_AGENT,
        Caller::Lifecycle => dockerlet_pod::version::LIFECYCLE_USER_AGENT,
    }
}

/// What kubelet makes of a response: for a probe, 2xx passes, 3xx passes with a warning (a
/// redirect that was not followed), anything else fails; for a hook, any answer passes
/// (`runHTTPHandler` fails only when no response came).
fn http_outcome(status: u16, body: Vec<u8>, caller: Caller) -> Outcome {
    let body = String::from_utf8(body).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    match (caller, status) {
        (Caller::Lifecycle, _) => Outcome::Success(body),
        (Caller::Probe, 300..=399) => Outcome::Warning(format!("Probe terminated redirects, Response body: {body}")),
        (Caller::Probe, 200..=299) => Outcome::Success(body),
        (Caller::Probe, _) => Outcome::Failure(format!("HTTP probe failed with statuscode: {status}")),
    }
}

/// Whether an HTTPS request failed because the server answered in plain HTTP (Go's "server gave
/// HTTP response to HTTPS client"; rustls sees an `H` where a TLS record type belongs).
fn answered_in_plain_http(error: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.to_string().contains("InvalidContentType") {
            return true;
        }
        source = e.source();
    }
    false
}

/// An httpGet: plain HTTP through [`http::get`], HTTPS through reqwest. Same-host redirects are
/// followed (at most [`MAX_REDIRECTS`]), all within one `timeout`.
async fn http_get(
    scheme: &str,
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
    timeout: Duration,
    caller: Caller,
) -> Outcome {
    let deadline = Instant::now() + timeout.min(MAX_TIMEOUT);
    if scheme == "http" {
        return plain_get(host, port, path, headers, deadline, caller).await;
    }
    let url = format!("{scheme}://{}{path}", http::join_host_port(host, port));
    match reqwest_get(&url, headers, timeout, caller).await {
        Ok((status, body)) => http_outcome(status, body, caller),
        // kubelet's lifecycle handler retries over HTTP, without the Authorization header;
        // a failed retry reports the HTTPS error.
        Err(e) if caller == Caller::Lifecycle && answered_in_plain_http(&e) => {
            let headers: Vec<(String, String)> = headers
                .iter()
                .filter(|(name, _)| !name.eq_ignore_ascii_case("authorization"))
                .cloned()
                .collect();
            match plain_get(host, port, path, &headers, deadline, caller).await {
                Outcome::Failure(_) => get_failed(&url, &e),
                _ => Outcome::Warning(format!(
                    "request to HTTPS lifecycle hook {} got HTTP response, retry with HTTP succeeded",
                    http::join_host_port(host, port)
                )),
            }
        }
        Err(e) => get_failed(&url, &e),
    }
}

/// A GET that got no response, in kubelet's words (Go's `url.Error`).
fn get_failed(url: &str, error: &reqwest::Error) -> Outcome {
    Outcome::Failure(format!("Get {url:?}: {}", error_chain(error)))
}

/// A plain-HTTP GET through [`http::get`], following same-host redirects (an HTTPS one through
/// reqwest), all before `deadline`.
async fn plain_get(
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
    deadline: Instant,
    caller: Caller,
) -> Outcome {
    let first = Hop {
        host: Cow::Borrowed(host),
        port,
        path: Cow::Borrowed(path),
    };
    let mut next = None;
    for redirects in 0.. {
        let hop = next.as_ref().unwrap_or(&first);
        let response = match http::Request::get(&hop.host, hop.port, &hop.path, user_agent(caller), headers) {
            Ok(request) => http::get(&hop.host, hop.port, &request, BODY_LIMIT, deadline).await,
            Err(e) => Err(e),
        };
        let response = match response {
            Ok(r) => r,
            Err(e) => return Outcome::Failure(format!("Get {:?}: {}", hop.url(), error_chain(&e))),
        };
        let followed = redirects < MAX_REDIRECTS && matches!(response.status, 301 | 302 | 303 | 307 | 308);
        if let Some(url) = followed
            .then(|| hop.redirect(&first, response.location.as_deref()))
            .flatten()
        {
            match url.scheme() {
                "http" => {
                    next = Some(Hop::from_url(&url));
                    continue;
                }
                "https" => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    return match reqwest_get(url.as_str(), headers, left, caller).await {
                        Ok((status, body)) => http_outcome(status, body, caller),
                        Err(e) => get_failed(url.as_str(), &e),
                    };
                }
                _ => {}
            }
        }
        return http_outcome(response.status, response.body, caller);
    }
    unreachable!("the redirect loop returns")
}

/// An httpGet through reqwest (HTTPS): the status and the start of the body.
async fn reqwest_get(
    url: &str,
    headers: &[(String, String)],
    timeout: Duration,
    caller: Caller,
) -> Result<(u16, Vec<u8>), reqwest::Error> {
    let agent = user_agent(caller);
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut request = http_client().get(url).timeout(timeout);
    if !has("user-agent") {
        request = request.header(reqwest::header::USER_AGENT, agent);
    }
    if !has("accept") {
        request = request.header(reqwest::header::ACCEPT, "*/*");
    }
    for (name, value) in headers {
        // An empty Accept removes the header (kubelet); other headers are sent as given.
        if name.eq_ignore_ascii_case("accept") && value.is_empty() {
            continue;
        }
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    Ok((status, read_limited(response).await))
}

async fn read_limited(mut response: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < BODY_LIMIT {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(BODY_LIMIT - body.len())]),
            _ => break,
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_pod::version::KUBE_VERSION;
    use std::io::{Read, Write};

    fn serve_once(response: &'static str) -> (u16, std::thread::JoinHandle<String>) {
        http::tests::serve(vec![response.as_bytes()])
    }

    fn target() -> Target {
        Target {
            runtime: Arc::new(dockerlet_runtime::fake::FakeRuntime::default()),
            container_id: ContainerId("c".into()),
            pod_ip: Some("127.0.0.1".into()),
            timeout: Duration::from_secs(2),
        }
    }

    fn http_action(port: u16) -> Action {
        Action::Http {
            scheme: "http".into(),
            host: None,
            port,
            path: "/x".into(),
            headers: vec![],
        }
    }

    /// 2xx passes, 4xx and 5xx fail with kubelet's message, and the request carries kubelet's
    /// User-Agent and Accept headers.
    #[tokio::test]
    async fn http_status_decides_and_headers_match_kubelet() {
        let (port, seen) = serve_once("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        assert_eq!(
            run(&http_action(port), &target(), Caller::Probe).await,
            Outcome::Success("ok".into())
        );
        let request = seen.join().unwrap().to_lowercase();
        assert!(
            request.contains(&format!("user-agent: kube-probe/{KUBE_VERSION}")),
            "{request}"
        );
        assert!(request.contains("accept: */*"), "{request}");
        let (port, _) = serve_once("HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        assert_eq!(
            run(&http_action(port), &target(), Caller::Probe).await,
            Outcome::Failure("HTTP probe failed with statuscode: 500".into())
        );
    }

    /// A hook passes whatever status answers it (kubelet's runHTTPHandler fails only when no
    /// response came).
    #[tokio::test]
    async fn a_hook_passes_on_any_answer() {
        let (port, _) = serve_once("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        assert!(run(&http_action(port), &target(), Caller::Lifecycle).await.passed());
        let (port, _) = serve_once("HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        assert!(run(&http_action(port), &target(), Caller::Lifecycle).await.passed());
    }

    /// An HTTPS hook answered in plain HTTP is retried with HTTP, without its Authorization
    /// header, and passes with kubelet's LifecycleHTTPFallback text; a probe is not retried.
    #[tokio::test]
    async fn an_https_hook_answered_in_plain_http_falls_back_to_http() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let mut requests = Vec::new();
            for _ in 0..2 {
                let (mut stream, _) = listener.accept().unwrap();
                let mut buf = [0u8; 4096];
                let n = stream.read(&mut buf).unwrap_or(0);
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                requests.push(buf[..n].to_vec());
            }
            requests
        });
        let https = Action::Http {
            scheme: "https".into(),
            host: None,
            port,
            path: "/hook".into(),
            headers: vec![("Authorization".into(), "Bearer secret".into())],
        };
        assert_eq!(
            run(&https, &target(), Caller::Lifecycle).await,
            Outcome::Warning(format!(
                "request to HTTPS lifecycle hook 127.0.0.1:{port} got HTTP response, retry with HTTP succeeded"
            ))
        );
        let requests = server.join().unwrap();
        assert_eq!(requests[0][0], 0x16, "the first request was a TLS handshake");
        let retry = String::from_utf8_lossy(&requests[1]).to_lowercase();
        assert!(retry.starts_with("get /hook http/1.1\r\n"), "{retry}");
        assert!(!retry.contains("authorization"), "{retry}");

        let (port, _) = serve_once("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        let probe = Action::Http {
            scheme: "https".into(),
            host: None,
            port,
            path: "/".into(),
            headers: vec![],
        };
        assert!(!run(&probe, &target(), Caller::Probe).await.passed());
    }

    /// A redirect to another host is not followed: success with a warning.
    #[tokio::test]
    async fn redirect_to_another_host_is_a_warning() {
        let (port, _) = serve_once(
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.2:1/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        let outcome = run(&http_action(port), &target(), Caller::Probe).await;
        assert!(
            matches!(outcome, Outcome::Warning(ref m) if m.starts_with("Probe terminated redirects")),
            "{outcome:?}"
        );
    }

    /// A relative same-host redirect is followed on a new connection (with kubelet's headers
    /// again); a refused connection fails with the URL and the dial error.
    #[tokio::test]
    async fn same_host_redirects_are_followed_and_errors_name_the_url() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let replies = [
                "HTTP/1.1 302 Found\r\nLocation: /next?a=1\r\nContent-Length: 0\r\n\r\n",
                "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nhere",
            ];
            let mut requests = Vec::new();
            for reply in replies {
                let (mut stream, _) = listener.accept().unwrap();
                let mut buf = [0u8; 4096];
                let n = stream.read(&mut buf).unwrap();
                stream.write_all(reply.as_bytes()).unwrap();
                requests.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
            requests
        });
        assert_eq!(
            run(&http_action(port), &target(), Caller::Lifecycle).await,
            Outcome::Success("here".into())
        );
        let requests = server.join().unwrap();
        assert!(requests[1].starts_with("GET /next?a=1 HTTP/1.1\r\n"), "{requests:?}");
        assert!(
            requests[1].contains(&format!("User-Agent: kube-lifecycle/{KUBE_VERSION}\r\n")),
            "{requests:?}"
        );

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let outcome = run(&http_action(port), &target(), Caller::Probe).await;
        let expected = format!("Get \"http://127.0.0.1:{port}/x\": dial tcp 127.0.0.1:{port}: ");
        assert!(
            matches!(outcome, Outcome::Failure(ref m) if m.starts_with(&expected)),
            "{outcome:?}"
        );
    }

    /// TCP passes when something listens and fails when nothing does.
    #[tokio::test]
    async fn tcp_connects_or_fails() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let tcp = Action::Tcp { host: None, port };
        assert!(run(&tcp, &target(), Caller::Probe).await.passed());
        drop(listener);
        assert!(!run(&tcp, &target(), Caller::Probe).await.passed());
    }
}
