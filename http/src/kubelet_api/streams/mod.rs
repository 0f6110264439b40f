//! The two streaming transports on actix-web, for exec, attach and port-forward.
//!
//! - [`spdy`]: the `Upgrade: SPDY/3.1` handshake with `X-Stream-Protocol-Version`
//!   negotiation, then [`dockerlet_streaming::spdy::conn`]'s driver over the upgraded
//!   connection (actix hands an upgrade request's payload over as the rest of the connection,
//!   and writes a 101 response's streaming body as raw bytes).
//! - [`tunnel`]: SPDY inside binary WebSocket messages (`SPDY/3.1+<protocol>`, kubectl's
//!   port-forward since 1.30), on the same SPDY driver.
//! - [`ws`]: the WebSocket handshake with a channel subprotocol (actix-ws), then whole
//!   messages mapped to channels by [`dockerlet_streaming::websocket`].
//!
//! - [`idle`]: `--streaming-connection-idle-timeout` for all three.
//! - [`shim`]: below actix-http, makes a SPDY upgrade's head look like a WebSocket upgrade so
//!   that actix streams the connection to the handler.
//!
//! Both are generic: they know streams and channels, not what exec or port-forward put on them.

pub mod idle;
pub mod shim;
pub mod spdy;
pub mod tunnel;
pub mod ws;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, ResponseError};

/// An upgrade refused before switching protocols: answered with its status and message (and,
/// for a failed SPDY version negotiation, `X-Accepted-Stream-Protocol-Versions`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// 400 or 403.
    pub status: StatusCode,
    /// Why, as the body.
    pub message: String,
    /// The versions the server speaks, when none was shared.
    pub accepted_versions: Vec<&'static str>,
}

impl ResponseError for Refused {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status);
        for v in &self.accepted_versions {
            response.append_header((dockerlet_streaming::upgrade::HEADER_ACCEPTED_PROTOCOL_VERSIONS, *v));
        }
        response
            .content_type("text/plain; charset=utf-8")
            .body(self.message.clone())
    }
}

/// Whether `req` asks for a WebSocket (`Upgrade: websocket` and `Connection: upgrade`), as
/// wsstream's `IsWebSocketRequest`.
pub fn is_websocket(req: &HttpRequest) -> bool {
    upgrade_protocol(req).is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket")) && connection_upgrade(req)
}

/// The protocol the request asks to upgrade to: the `Upgrade` header, or the value [`shim`]
/// moved into its marker.
pub fn upgrade_protocol(req: &HttpRequest) -> Option<&str> {
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    header(shim::MARKER).or_else(|| header(actix_web::http::header::UPGRADE.as_str()))
}

/// kubelet's answer to an exec, attach or port-forward that is not an upgrade request: it
/// proxies those to the runtime's streaming server with `upgradeRequired`, and its responder
/// writes the `Upgrade request required` error with Go's `http.Error` (500, a newline added;
/// `pkg/kubelet/server/server.go` getExec, `responder.Error`). `None` for an upgrade request
/// (`Connection: upgrade`, as `httpstream.IsUpgradeRequest`).
pub fn upgrade_required(req: &HttpRequest) -> Option<HttpResponse> {
    (!connection_upgrade(req)).then(|| {
        HttpResponse::InternalServerError()
            .content_type("text/plain; charset=utf-8")
            .insert_header(("X-Content-Type-Options", "nosniff"))
            .body("Upgrade request required\n")
    })
}

fn connection_upgrade(req: &HttpRequest) -> bool {
    req.headers()
        .get_all(actix_web::http::header::CONNECTION)
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("upgrade"))
}
