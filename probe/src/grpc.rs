//! gRPC probe handler: kubelet's `pkg/probe/grpc/grpc.go`.
//!
//! The probe dials `host:port` over plain HTTP/2 (no TLS), calls `grpc.health.v1.Health/Check` with the
//! configured service name and succeeds only when the answer is `SERVING`. Connecting and calling share one
//! deadline of `timeout`; every failure (connect timeout, RPC error, other status) is a probe failure with a
//! message in kubelet's wording. kubelet dials with `grpc.WithBlock()`, so a refused connection is tried
//! again on grpc-go's reconnect back-off (1 s, times 1.6) until the deadline, and then fails as a timeout.

use dockerlet_pod::go::error_chain;
use std::time::Duration;

use tokio::time::Instant;
use tonic::transport::Endpoint;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// The user agent kubelet sends on probes (`kube-probe/<major>.<minor>`); tonic appends its own token.
const USER_AGENT: &str = dockerlet_pod::version::PROBE_USER_AGENT;

/// Longest timeout actually armed (about 136 years): larger values would overflow `Instant` arithmetic or
/// tonic's `grpc-timeout` encoding, both of which panic.
const MAX_TIMEOUT: Duration = Duration::from_secs(u32::MAX as u64);

/// grpc-go's first reconnect back-off (`BaseDelay`).
const RECONNECT_BASE: Duration = Duration::from_secs(1);
/// Its growth per attempt (`Multiplier`).
const RECONNECT_FACTOR: f64 = 1.6;

/// Why a gRPC health check failed: the probe's failure, printed in kubelet's wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrpcCheckFailed {
    /// The endpoint is malformed.
    #[error("error: failed to connect service at {addr:?}: {chain}")]
    Connect {
        /// `host:port`.
        addr: String,
        /// tonic's error and its sources.
        chain: String,
    },
    /// No connection within the probe's timeout (refused, or not answered).
    #[error("timeout: failed to connect service {addr:?} within {timeout:?}: context deadline exceeded")]
    ConnectTimeout {
        /// `host:port`.
        addr: String,
        /// The probe's timeout.
        timeout: Duration,
    },
    /// The call failed with a gRPC status.
    #[error("rpc error: code = {code:?} desc = {message}")]
    Rpc {
        /// The status code.
        code: tonic::Code,
        /// Its message.
        message: String,
    },
    /// The call ran past the deadline.
    #[error(
        "rpc error: code = {:?} desc = context deadline exceeded",
        tonic::Code::DeadlineExceeded
    )]
    DeadlineExceeded,
    /// The server answered, but not SERVING (the status as the server named it).
    #[error("service unhealthy (responded with {0})")]
    Unhealthy(String),
}

/// Kubelet's gRPC probe: `grpc.health.v1.Health/Check` on `host:port` (plain HTTP/2, no TLS),
/// `service` may be empty. Ok(message) when the answer is SERVING.
pub async fn check(
    host: &str,
    port: u16,
    service: &str,
    timeout: std::time::Duration,
) -> Result<String, GrpcCheckFailed> {
    let armed = timeout.min(MAX_TIMEOUT);
    let deadline = Instant::now() + armed;
    let addr = join_host_port(host, port);

    let endpoint = Endpoint::from_shared(format!("http://{addr}"))
        .and_then(|e| e.user_agent(USER_AGENT))
        .map_err(|e| GrpcCheckFailed::Connect {
            addr: addr.clone(),
            chain: error_chain(&e),
        })?
        .connect_timeout(armed)
        .timeout(armed);

    let mut wait = RECONNECT_BASE;
    let channel = loop {
        let tried = Instant::now();
        match tokio::time::timeout_at(deadline, endpoint.connect()).await {
            // A connection that only completes at the deadline leaves no time for the call: a connect timeout.
            Ok(Ok(channel)) if Instant::now() < deadline => break channel,
            // Refused (or reset): grpc-go's blocking dial tries again after its back-off.
            Ok(Err(e)) if Instant::now() < deadline => {
                tracing::trace!(addr, error = %error_chain(&e), "gRPC probe cannot connect yet");
                tokio::time::sleep_until((tried + wait).min(deadline)).await;
                wait = wait.mul_f64(RECONNECT_FACTOR);
            }
            // Our deadline fired, or the connect timeout (same length) did, or connecting used up the time.
            Ok(_) | Err(_) => return Err(GrpcCheckFailed::ConnectTimeout { addr, timeout }),
        }
    };

    let mut client = HealthClient::new(channel);
    let mut request = tonic::Request::new(HealthCheckRequest {
        service: service.to_string(),
    });
    // Tell the server the deadline too (`grpc-timeout`), like grpc-go does with the context deadline.
    request.set_timeout(deadline.saturating_duration_since(Instant::now()));

    let response = match tokio::time::timeout_at(deadline, client.check(request)).await {
        Ok(Ok(response)) => response.into_inner(),
        Ok(Err(status)) if Instant::now() < deadline => {
            return Err(GrpcCheckFailed::Rpc {
                code: status.code(),
                message: status.message().to_string(),
            });
        }
        // Our deadline or the channel's per-request timeout (reported as Cancelled) expired.
        Ok(Err(_)) | Err(_) => return Err(GrpcCheckFailed::DeadlineExceeded),
    };

    match ServingStatus::try_from(response.status) {
        Ok(ServingStatus::Serving) => Ok("service healthy".to_string()),
        Ok(other) => Err(GrpcCheckFailed::Unhealthy(format!("{:?}", other.as_str_name()))),
        Err(_) => Err(GrpcCheckFailed::Unhealthy(format!("\"{}\"", response.status))),
    }
}

/// `net.JoinHostPort`: brackets around IPv6 literals (hosts containing ':') that are not bracketed yet.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use tonic_health::ServingStatus as ReportedStatus;

    /// Outer bound so that no test can hang even if `check` ignored its timeout.
    const HANG_GUARD: Duration = Duration::from_secs(20);

    /// Starts an in-process tonic-health server on 127.0.0.1:0; returns its address and its reporter.
    async fn start_health_server() -> (SocketAddr, tonic_health::server::HealthReporter) {
        let (reporter, service) = tonic_health::server::health_reporter();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming),
        );
        (addr, reporter)
    }

    /// Runs `check` under the hang guard.
    async fn guarded_check(port: u16, service: &str, timeout: Duration) -> Result<String, String> {
        tokio::time::timeout(HANG_GUARD, check("127.0.0.1", port, service, timeout))
            .await
            .expect("check did not return within the hang guard")
            .map_err(|e| e.to_string())
    }

    /// The overall server status (empty service name) SERVING is a success.
    #[tokio::test]
    async fn serving_server_is_healthy() {
        let (addr, _reporter) = start_health_server().await;
        let result = guarded_check(addr.port(), "", Duration::from_secs(5)).await;
        assert_eq!(result, Ok("service healthy".to_string()));
    }

    /// The request carries kubelet's probe user agent (tonic appends its own token after it).
    #[tokio::test]
    async fn request_carries_the_kube_probe_user_agent() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
        let record = seen.clone();
        let (_reporter, service) = tonic_health::server::health_reporter();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(
            tonic::transport::Server::builder()
                .layer(tonic::service::InterceptorLayer::new(move |req: tonic::Request<()>| {
                    let agent = req.metadata().get("user-agent").and_then(|v| v.to_str().ok());
                    *record.lock().unwrap() = agent.map(str::to_string);
                    Ok(req)
                }))
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        assert_eq!(
            guarded_check(port, "", Duration::from_secs(5)).await,
            Ok("service healthy".to_string())
        );
        let agent = seen.lock().unwrap().clone().unwrap_or_default();
        assert!(agent.starts_with("kube-probe/1.37"), "{agent}");
    }

    /// A named service that reports NOT_SERVING is a failure naming that status.
    #[tokio::test]
    async fn not_serving_service_is_unhealthy() {
        let (addr, reporter) = start_health_server().await;
        reporter.set_service_status("db", ReportedStatus::NotServing).await;
        let result = guarded_check(addr.port(), "db", Duration::from_secs(5)).await;
        assert_eq!(
            result,
            Err("service unhealthy (responded with \"NOT_SERVING\")".to_string())
        );
    }

    /// A named service that reports SERVING is a success.
    #[tokio::test]
    async fn serving_named_service_is_healthy() {
        let (addr, reporter) = start_health_server().await;
        reporter.set_service_status("db", ReportedStatus::Serving).await;
        let result = guarded_check(addr.port(), "db", Duration::from_secs(5)).await;
        assert_eq!(result, Ok("service healthy".to_string()));
    }

    /// A service the server does not know is a failure carrying the NotFound RPC code.
    #[tokio::test]
    async fn unknown_service_is_a_not_found_rpc_error() {
        let (addr, _reporter) = start_health_server().await;
        let err = guarded_check(addr.port(), "nope", Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(err.starts_with("rpc error: code = NotFound desc = "), "{err}");
    }

    /// A port nobody listens on fails as kubelet's blocking dial does: tried until the timeout, then
    /// kubelet's connect-timeout message.
    #[tokio::test]
    async fn closed_port_fails_with_a_connect_timeout_once_the_timeout_is_over() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let started = std::time::Instant::now();
        let err = guarded_check(port, "", Duration::from_secs(1)).await.unwrap_err();
        assert_eq!(
            err,
            format!("timeout: failed to connect service \"127.0.0.1:{port}\" within 1s: context deadline exceeded")
        );
        assert!(
            started.elapsed() >= Duration::from_millis(990),
            "took {:?}",
            started.elapsed()
        );
    }

    /// A server that starts listening while the probe waits is reached at the next attempt.
    #[tokio::test]
    async fn a_server_that_comes_up_within_the_timeout_is_reached() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
            let (_reporter, service) = tonic_health::server::health_reporter();
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await
        });
        let result = guarded_check(addr.port(), "", Duration::from_secs(5)).await;
        assert_eq!(result, Ok("service healthy".to_string()));
    }

    /// A peer that accepts TCP but never speaks HTTP/2 makes the probe fail once the timeout elapses.
    #[tokio::test]
    async fn silent_server_fails_after_the_timeout() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let err = guarded_check(port, "", Duration::from_millis(300)).await.unwrap_err();
        assert!(
            err.contains("deadline exceeded") || err.starts_with("timeout: "),
            "{err}"
        );
        drop(listener);
    }

    /// IPv6 literals are bracketed in the address, others are left alone.
    #[test]
    fn ipv6_hosts_get_brackets() {
        assert_eq!(join_host_port("::1", 80), "[::1]:80");
        assert_eq!(join_host_port("[::1]", 80), "[::1]:80");
        assert_eq!(join_host_port("10.0.0.1", 80), "10.0.0.1:80");
        assert_eq!(join_host_port("localhost", 80), "localhost:80");
    }

    /// An IPv6 loopback target reaches a server listening on [::1] (skipped when IPv6 is unavailable).
    #[tokio::test]
    async fn ipv6_loopback_is_reachable() {
        let Ok(listener) = tokio::net::TcpListener::bind("[::1]:0").await else {
            return;
        };
        let port = listener.local_addr().unwrap().port();
        let (_reporter, service) = tonic_health::server::health_reporter();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        let result = tokio::time::timeout(HANG_GUARD, check("::1", port, "", Duration::from_secs(5)))
            .await
            .unwrap();
        assert_eq!(result, Ok("service healthy".to_string()));
    }

    /// A zero timeout fails with kubelet's connect-timeout message instead of trying forever.
    #[tokio::test]
    async fn zero_timeout_is_a_connect_timeout() {
        let (addr, _reporter) = start_health_server().await;
        let err = guarded_check(addr.port(), "", Duration::ZERO).await.unwrap_err();
        assert_eq!(
            err,
            format!(
                "timeout: failed to connect service \"127.0.0.1:{}\" within 0ns: context deadline exceeded",
                addr.port()
            )
        );
    }

    /// An absurdly large timeout neither panics nor changes the result.
    #[tokio::test]
    async fn huge_timeout_does_not_panic() {
        let (addr, _reporter) = start_health_server().await;
        let result = guarded_check(addr.port(), "", Duration::MAX).await;
        assert_eq!(result, Ok("service healthy".to_string()));
    }

    /// An unparsable host is reported as a failure instead of panicking.
    #[tokio::test]
    async fn invalid_host_is_an_error_not_a_panic() {
        let result = tokio::time::timeout(HANG_GUARD, check("bad host", 80, "", Duration::from_secs(1)))
            .await
            .unwrap();
        assert!(result.is_err(), "{result:?}");
    }
}
