//! dockerlet's HTTP servers (actix-web): healthz, the read-only kubelet API and the debug
//! endpoint.
//!
//! # Layout
//! - [`healthz`]: `GET /healthz` on `--healthz-bind-address:--healthz-port`.
//! - [`read_only`]: `GET /pods`, `GET /healthz` on `--address:--read-only-port`.
//! - [`kubelet_api`]: the authenticated kubelet API over HTTPS on `--address:--port`
//!   (`/healthz`, `/pods`, `/containerLogs/…`).
//! - [`debug`]: `GET /debug/actors` (JSON), `GET /debug` (a page), and the test-only
//!   `POST /debug/fault` on `--debug-address`.
//! - [`error`]: [`error::ApiError`], mapped to HTTP statuses.
//!
//! Handlers reach the actors only through typed messages sent to the [`Handles`] recipients;
//! this crate never depends on the actors crate.

pub mod debug;
pub mod error;
pub mod healthz;
pub mod kubelet_api;
pub mod read_only;

use std::net::SocketAddr;

use actix::Recipient;
use actix_web::dev::Server;
use actix_web::{web, App, HttpServer};
use dockerlet_messages::debug::{GetDebugSnapshot, GetHealth, InjectFault};
use dockerlet_messages::status::GetPods;

/// The actor mailboxes the HTTP handlers talk to.
#[derive(Clone)]
pub struct Handles {
    /// Pods with status (`/pods`).
    pub pods: Recipient<GetPods>,
    /// Health (`/healthz`).
    pub health: Recipient<GetHealth>,
    /// Debug snapshot (`/debug/actors`).
    pub debug: Recipient<GetDebugSnapshot>,
    /// Fault hook; `None` unless fault injection is enabled.
    pub faults: Option<Recipient<InjectFault>>,
}

/// Bind and start one server with `configure`; returns the bound address (port 0 picks one).
pub fn serve(
    name: &'static str,
    addr: SocketAddr,
    handles: Handles,
    configure: fn(&mut web::ServiceConfig),
) -> std::io::Result<(Server, SocketAddr)> {
    let data = web::Data::new(handles);
    let server = HttpServer::new(move || App::new().app_data(data.clone()).configure(configure))
        .workers(1)
        .disable_signals()
        .bind(addr)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{name} server: cannot bind {addr}: {e}")))?;
    let bound = server.addrs().first().copied().unwrap_or(addr);
    tracing::info!(server = name, address = %bound, "listening");
    Ok((server.run(), bound))
}

#[cfg(test)]
mod tests {
    //! A stand-in actor answering every query, for handler tests.

    use actix::{Actor, Context, Handler, MessageResult};
    use dockerlet_messages::debug::{ActorState, DebugSnapshot, GetDebugSnapshot, GetHealth, Health};
    use dockerlet_messages::source::ManifestError;
    use dockerlet_messages::status::GetPods;
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
            MessageResult(vec![Pod {
                metadata: ObjectMeta {
                    name: Some("web-n1".into()),
                    ..Default::default()
                },
                ..Default::default()
            }])
        }
    }

    impl Handler<GetHealth> for Stub {
        type Result = MessageResult<GetHealth>;
        fn handle(&mut self, _: GetHealth, _: &mut Context<Self>) -> Self::Result {
            MessageResult(Health {
                healthy: self.healthy,
                reason: (!self.healthy).then(|| "pleg was last seen active 3m1s ago; threshold is 3m0s".to_string()),
            })
        }
    }

    impl Handler<GetDebugSnapshot> for Stub {
        type Result = MessageResult<GetDebugSnapshot>;
        fn handle(&mut self, _: GetDebugSnapshot, _: &mut Context<Self>) -> Self::Result {
            MessageResult(DebugSnapshot {
                node_name: "n1".into(),
                actors: vec![ActorState {
                    kind: "PlegActor".into(),
                    name: "pleg".into(),
                    messages_handled: 1,
                    restarts: 0,
                    last_error: None,
                    detail: serde_json::json!({}),
                }],
                manifest_errors: vec![ManifestError {
                    file: "bad.yaml".into(),
                    reason: "invalid YAML".into(),
                }],
                events: vec![],
            })
        }
    }

    /// Handles backed by a stub actor.
    pub fn fake_handles(healthy: bool) -> Handles {
        let addr = Stub { healthy }.start();
        Handles {
            pods: addr.clone().recipient(),
            health: addr.clone().recipient(),
            debug: addr.recipient(),
            faults: None,
        }
    }
}
