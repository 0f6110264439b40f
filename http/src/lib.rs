//! dockerlet's HTTP servers (actix-web): healthz, the read-only kubelet API and the debug
//! endpoint.
//!
//! # Layout
//! - [`healthz`]: `GET /healthz` on `--healthz-bind-address:--healthz-port`.
//! - [`read_only`]: `GET /pods`, `GET /healthz`, `GET /metrics[/probes]`, `/stats/summary` on
//!   `--address:--read-only-port`.
//! - [`metrics`]: the `/metrics` and `/metrics/probes` handlers any server mounts, the request
//!   metrics middleware ([`metrics::track`]) and the process metrics collector.
//! - [`stats_metrics`]: `/metrics/resource` and `/metrics/cadvisor`, rendered from the stats
//!   collector's cached summary.
//! - [`kubelet_api`]: the authenticated kubelet API over HTTPS on `--address:--port`
//!   (`/healthz`, `/pods`, `/configz`, `/stats/summary`, `/containerLogs/…`).
//! - [`debug`]: `GET /debug/actors` (JSON), `GET /debug` (a page), and the test-only
//!   `POST /debug/fault` on `--debug-address`.
//! - [`debug_routes`]: which of kubelet's debugging routes are served
//!   (`enableDebuggingHandlers` and its kin) and kubelet's 405 answers for those that are not,
//!   mounted by the kubelet API and (all off) the read-only server.
//! - [`stats`]: `/stats/summary` (GET and POST, `only_cpu_and_memory`), mounted by the
//!   kubelet API and the read-only server.
//! - [`error`]: [`error::ApiError`], mapped to HTTP statuses.
//! - `gate`: every server's first wait — a connection gets its HTTP dispatcher (or TLS session)
//!   once it has sent something.
//!
//! Handlers reach the actors only through typed messages sent to the [`Handles`] recipients;
//! this crate never depends on the actors crate.

pub mod debug;
pub mod debug_routes;
pub mod error;
mod gate;
pub mod healthz;
pub mod kubelet_api;
pub mod metrics;
pub mod read_only;
pub mod stats;
pub mod stats_metrics;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix::Recipient;
use actix_web::dev::{AppConfig, Server};
use actix_web::{web, App};
use dockerlet_messages::debug::{GetDebugSnapshot, HealthCell, InjectFault};
use dockerlet_messages::stats::GetStatsView;
use dockerlet_messages::status::{GetPodSandbox, GetPods, GetRunningPods};
use dockerlet_metrics::Metrics;

/// The actor mailboxes the HTTP handlers talk to.
#[derive(Clone)]
pub struct Handles {
    /// Pods with status (`/pods`).
    pub pods: Recipient<GetPods>,
    /// The runtime's running pods (`/runningpods/`).
    pub running: Recipient<GetRunningPods>,
    /// A pod's sandbox (`/portForward`).
    pub sandbox: Recipient<GetPodSandbox>,
    /// The PLEG's health (`/healthz`), read on the HTTP thread.
    pub health: HealthCell,
    /// Debug snapshot (`/debug/actors`).
    pub debug: Recipient<GetDebugSnapshot>,
    /// The last statistics summary (`/stats/summary`).
    pub stats: Recipient<GetStatsView>,
    /// Fault hook; `None` unless fault injection is enabled.
    pub faults: Option<Recipient<InjectFault>>,
    /// The agent's metrics (`/metrics`, `/metrics/probes`, the request middleware).
    pub metrics: Arc<Metrics>,
    /// The kubelet API's port, for the debug page's links to container logs; `None` when it
    /// does not serve.
    pub logs_port: Option<u16>,
}

/// The listen backlog of every server: what Go's `net.Listen` asks for on Linux (kubelet's
/// servers), `net.core.somaxconn` (4096 on current kernels, which caps it). The standard
/// library's 128 dropped the SYNs of a burst of new connections (`make chaos`: 10,000 took 24 s
/// to open on the kubelet API's port, 0.4 s on the others with actix's 1024).
pub const LISTEN_BACKLOG: u32 = 4096;

/// How long a client of the plain servers may take to send its request head (actix-web's
/// `HttpServer` default, kept when the servers were built from its parts for [`gate`]).
const PLAIN_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an idle keep-alive connection to a plain server is kept (actix-web's default).
const PLAIN_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// A listening socket on `addr` with [`LISTEN_BACKLOG`] (the standard library's bind listens
/// with 128). Called on the agent's runtime.
pub(crate) fn listen(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)?.into_std()
}

/// Bind and start one server with `configure`; returns the bound address (port 0 picks one).
/// The read-only server's requests are counted (`kubelet_http_*{server_type="readonly"}`).
///
/// Built from actix's parts as `HttpServer` builds it (one worker, HTTP/1.1, the same timeouts),
/// with [`gate::readable`] first: a connection gets its HTTP dispatcher once it has sent
/// something.
pub fn serve(
    name: &'static str,
    addr: SocketAddr,
    handles: Handles,
    configure: fn(&mut web::ServiceConfig),
) -> std::io::Result<(Server, SocketAddr)> {
    use actix_http::HttpService;
    use actix_service::{fn_service, map_config, ServiceFactoryExt as _};
    use actix_web::rt::net::TcpStream;

    let cannot = |e: std::io::Error| std::io::Error::new(e.kind(), format!("{name} server: cannot bind {addr}: {e}"));
    let listener = listen(addr).map_err(cannot)?;
    let bound = listener.local_addr().unwrap_or(addr);
    let data = web::Data::new(handles);
    let tracked = name == "read-only";
    let server = actix_server::Server::build()
        .workers(1)
        .disable_signals()
        .listen(name, listener, move || {
            let app = App::new()
                .app_data(data.clone())
                .wrap(actix_web::middleware::Condition::new(
                    tracked,
                    actix_web::middleware::from_fn(|r, n| metrics::track(r, n, "readonly")),
                ))
                .configure(configure);
            let http = HttpService::build()
                .client_request_timeout(PLAIN_READ_TIMEOUT)
                .client_disconnect_timeout(Duration::from_secs(1))
                .keep_alive(PLAIN_IDLE_TIMEOUT)
                .local_addr(bound)
                .finish(map_config(app, |_| AppConfig::default()))
                .tcp();
            fn_service(|io: TcpStream| async move {
                gate::readable(io, PLAIN_READ_TIMEOUT)
                    .await
                    .map_err(|_| actix_http::error::DispatchError::SlowRequestTimeout)
            })
            // Boxed: a connection waiting at the gate holds a pointer to the dispatcher's future,
            // not its state.
            .and_then(actix_service::boxed::factory(http))
        })
        .map_err(cannot)?
        .run();
    tracing::info!(server = name, address = %bound, "listening");
    Ok((server, bound))
}

#[cfg(test)]
mod tests {
    //! A stand-in actor answering every query, for handler tests.

    use actix::{Actor, Context, Handler, MessageResult};
    use dockerlet_messages::debug::{
        ActorState, ContainerDebug, ContainerStateDebug, DebugSnapshot, DebugView, GetDebugSnapshot, HealthCell,
        PlegDebug, PodDebug,
    };
    use dockerlet_messages::source::ManifestError;
    use dockerlet_messages::status::{GetPodSandbox, GetPods, GetRunningPods};
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::Handles;

    struct Stub {
        healthy: bool,
    }

    impl Actor for Stub {
        type Context = Context<Self>;
    }

    impl Handler<GetPods> for Stub {
        type Result = MessageResult<GetPods>;
        fn handle(&mut self, _: GetPods, _: &mut Context<Self>) -> Self::Result {
            use k8s_openapi::api::core::v1::{
                Container, ContainerState, ContainerStateRunning, ContainerStatus, PodSpec, PodStatus,
            };
            MessageResult(vec![Pod {
                metadata: ObjectMeta {
                    name: Some("web-n1".into()),
                    namespace: Some("default".into()),
                    uid: Some("u1".into()),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                status: Some(PodStatus {
                    container_statuses: Some(vec![ContainerStatus {
                        name: "app".into(),
                        container_id: Some("docker://c1".into()),
                        state: Some(ContainerState {
                            running: Some(ContainerStateRunning::default()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            }])
        }
    }

    impl Handler<GetRunningPods> for Stub {
        type Result = MessageResult<GetRunningPods>;
        fn handle(&mut self, _: GetRunningPods, _: &mut Context<Self>) -> Self::Result {
            let pod = Pod {
                metadata: ObjectMeta {
                    name: Some("web-n1".into()),
                    namespace: Some("default".into()),
                    uid: Some("u1".into()),
                    ..Default::default()
                },
                spec: Some(k8s_openapi::api::core::v1::PodSpec {
                    containers: vec![k8s_openapi::api::core::v1::Container {
                        name: "c".into(),
                        image: Some("busybox".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                status: None,
            };
            MessageResult(self.healthy.then(|| vec![pod]))
        }
    }

    impl Handler<GetPodSandbox> for Stub {
        type Result = MessageResult<GetPodSandbox>;
        fn handle(&mut self, msg: GetPodSandbox, _: &mut Context<Self>) -> Self::Result {
            MessageResult((msg.uid.0 == "u1").then(|| dockerlet_messages::ContainerId("sandbox1".into())))
        }
    }

    impl Handler<dockerlet_messages::stats::GetStatsView> for Stub {
        type Result = Option<std::sync::Arc<dockerlet_messages::stats::StatsView>>;
        fn handle(&mut self, _: dockerlet_messages::stats::GetStatsView, _: &mut Context<Self>) -> Self::Result {
            let t = "2026-12-01T10:00:00Z";
            let fs = serde_json::json!({"time": t, "availableBytes": 1, "capacityBytes": 2, "usedBytes": 1});
            let summary = serde_json::json!({
                "node": {
                    "nodeName": "n1",
                    "startTime": t,
                    "cpu": {"time": t, "usageNanoCores": 5, "usageCoreNanoSeconds": 9},
                    "memory": {"time": t, "workingSetBytes": 7},
                    "fs": fs,
                },
                "pods": [],
            });
            Some(std::sync::Arc::new(dockerlet_messages::stats::StatsView {
                summary: std::sync::Arc::new(serde_json::from_value(summary).expect("a summary")),
                containers: Default::default(),
                machine: Default::default(),
                block_io: Default::default(),
                extras: Default::default(),
                other_cgroups: Default::default(),
                sandboxes: Default::default(),
            }))
        }
    }

    /// A StatsActor stand-in before its first pass.
    pub struct NoStats;

    impl Actor for NoStats {
        type Context = Context<Self>;
    }

    impl Handler<dockerlet_messages::stats::GetStatsView> for NoStats {
        type Result = Option<std::sync::Arc<dockerlet_messages::stats::StatsView>>;
        fn handle(&mut self, _: dockerlet_messages::stats::GetStatsView, _: &mut Context<Self>) -> Self::Result {
            None
        }
    }

    impl Handler<GetDebugSnapshot> for Stub {
        type Result = MessageResult<GetDebugSnapshot>;
        fn handle(&mut self, _: GetDebugSnapshot, _: &mut Context<Self>) -> Self::Result {
            MessageResult(DebugSnapshot {
                node_name: "n1".into(),
                actors: vec![
                    ActorState {
                        kind: "PlegActor".into(),
                        name: "pleg".into(),
                        messages_handled: 1,
                        restarts: 0,
                        last_error: None,
                        detail: serde_json::json!({}),
                        view: Some(DebugView::Pleg(PlegDebug::default())),
                    },
                    ActorState {
                        kind: "PodWorker".into(),
                        name: "default/web-n1".into(),
                        messages_handled: 1,
                        restarts: 0,
                        last_error: None,
                        detail: serde_json::json!({}),
                        view: Some(DebugView::Pod(Box::new(PodDebug {
                            namespace: "default".into(),
                            name: "web-n1".into(),
                            phase: "Idle".into(),
                            containers: vec![ContainerDebug {
                                name: "c".into(),
                                state: ContainerStateDebug::Waiting {
                                    reason: "ErrImageNeverPull".into(),
                                    message: "Container image \"x\" is not present with pull policy of Never".into(),
                                },
                                ..ContainerDebug::default()
                            }],
                            ..PodDebug::default()
                        }))),
                    },
                ],
                manifest_errors: vec![ManifestError {
                    file: "bad.yaml".into(),
                    reason: "invalid YAML".into(),
                }],
                events: vec![],
            })
        }
    }

    /// Metrics of node `n1` with one readiness probe counted.
    pub fn test_metrics() -> dockerlet_metrics::Metrics {
        use dockerlet_metrics::{BuildInfo, Metrics, ProbeOutcome};
        let build = BuildInfo {
            build_date: String::new(),
            compiler: "rustc".into(),
            git_commit: String::new(),
            git_tree_state: String::new(),
            git_version: "v0.1.0".into(),
            go_version: String::new(),
            major: "0".into(),
            minor: "1".into(),
            platform: "linux/amd64".into(),
        };
        let mut m = Metrics::new("n1", build);
        m.register_collector(Box::new(crate::metrics::ProcessCollector));
        m.probe_series("Readiness", "c", "web", "default", "u1")
            .observe(ProbeOutcome::Successful, 0.01);
        m
    }

    /// Handles backed by a stub actor.
    pub fn fake_handles(healthy: bool) -> Handles {
        let addr = Stub { healthy }.start();
        let health = HealthCell::default();
        if !healthy {
            health.failed("Cannot connect to the Docker daemon".into());
        }
        Handles {
            pods: addr.clone().recipient(),
            running: addr.clone().recipient(),
            sandbox: addr.clone().recipient(),
            health,
            debug: addr.clone().recipient(),
            stats: addr.recipient(),
            faults: None,
            metrics: std::sync::Arc::new(test_metrics()),
            logs_port: Some(10250),
        }
    }
}
