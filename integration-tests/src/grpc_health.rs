//! [`GrpcHealthServer`]: a `grpc.health.v1.Health` server in the test process, on
//! `0.0.0.0:<free port>`, whose overall serving status (service `""`) a test flips.
//!
//! gRPC probes go to the pod IP (the host is not configurable), so tests point them at a
//! `hostNetwork` pod, whose pod IP is the node's, where this server listens.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::sync::oneshot;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

/// A gRPC health server on its own multi-threaded runtime; stops when dropped.
pub struct GrpcHealthServer {
    runtime: Option<Runtime>,
    reporter: HealthReporter,
    port: u16,
    shutdown: Option<oneshot::Sender<()>>,
}

impl GrpcHealthServer {
    /// Starts serving on `0.0.0.0:<free port>`, SERVING.
    pub fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("grpc-health-stub")
            .enable_all()
            .build()
            .expect("cannot build the gRPC server's runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], 0))))
            .expect("cannot bind the gRPC health server");
        let port = listener.local_addr().expect("gRPC server address").port();
        let (reporter, service) = tonic_health::server::health_reporter();
        let (shutdown, stopped) = oneshot::channel::<()>();
        runtime.spawn(async move {
            let served = Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(TcpIncoming::from(listener), async {
                    let _ = stopped.await;
                })
                .await;
            if let Err(e) = served {
                eprintln!("gRPC health stub stopped with an error: {e}");
            }
        });
        Self {
            runtime: Some(runtime),
            reporter,
            port,
            shutdown: Some(shutdown),
        }
    }

    /// The port it listens on (all interfaces).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Sets the overall status (service `""`) to SERVING or NOT_SERVING.
    pub fn set_serving(&self, serving: bool) {
        let status = if serving {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        let runtime = self.runtime.as_ref().expect("runtime");
        runtime.block_on(self.reporter.set_service_status("", status));
    }
}

impl Drop for GrpcHealthServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;

    /// The server answers Health/Check with SERVING, then NOT_SERVING after a flip.
    #[test]
    fn the_health_server_reports_what_the_test_sets() {
        let server = GrpcHealthServer::start();
        let check = |server: &GrpcHealthServer| {
            let url = format!("http://127.0.0.1:{}", server.port());
            server.runtime.as_ref().unwrap().block_on(async move {
                let channel = tonic::transport::Endpoint::from_shared(url)
                    .expect("endpoint")
                    .connect()
                    .await
                    .expect("connect");
                let mut client = HealthClient::new(channel);
                let reply = client
                    .check(HealthCheckRequest { service: String::new() })
                    .await
                    .expect("check");
                reply.into_inner().status
            })
        };
        assert_eq!(check(&server), ServingStatus::Serving as i32);
        server.set_serving(false);
        assert_eq!(check(&server), ServingStatus::NotServing as i32);
    }
}
