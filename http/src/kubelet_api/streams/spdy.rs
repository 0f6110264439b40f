//! SPDY/3.1 on actix-web: the upgrade handshake and the connection driver, spawned.
//!
//! ```text
//! let upgraded = spdy::upgrade(&req, payload, &REMOTE_COMMAND_SPDY)?;   // or the error response
//! // respond with upgraded.response; then:
//! while let Some(stream) = upgraded.connection.accept().await { … stream.reader / stream.writer … }
//! ```

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use dockerlet_streaming::spdy::conn::{self, Connection};
use dockerlet_streaming::spdy::{FlowControl, Role, SessionConfig};
use dockerlet_streaming::upgrade::{check_spdy_upgrade, negotiate, UpgradeError, HEADER_PROTOCOL_VERSION, SPDY_31};
use futures::StreamExt;

use super::idle::Activity;
use super::Refused;
use std::time::Duration;

/// An accepted SPDY upgrade.
#[derive(Debug)]
pub struct Upgraded {
    /// The protocol version negotiated (one of the server's).
    pub protocol: &'static str,
    /// The 101 response to return from the handler; its body is the connection's output.
    pub response: HttpResponse,
    /// The connection's streams (its driver is already spawned on the actix runtime).
    pub connection: Connection,
}

/// The session configuration for kubectl/client-go peers (moby/spdystream honours no windows).
pub fn server_config() -> SessionConfig {
    SessionConfig {
        flow_control: FlowControl::Lenient,
        ..SessionConfig::new(Role::Server)
    }
}

/// Check the upgrade headers, negotiate `X-Stream-Protocol-Version` among `protocols` (the
/// server's preference order), and start the driver over the rest of the connection. Refused
/// with 400 for a request that is not a SPDY upgrade or names no version, 403 with
/// `X-Accepted-Stream-Protocol-Versions` when no version is shared. With `idle`, the connection
/// is closed once no frame has moved either way for that long.
pub fn upgrade(
    req: &HttpRequest,
    payload: web::Payload,
    protocols: &[&'static str],
    idle: Option<Duration>,
) -> Result<Upgraded, Refused> {
    let connection_values = req
        .headers()
        .get_all(header::CONNECTION)
        .filter_map(|v| v.to_str().ok());
    let upgrade_value = super::upgrade_protocol(req);
    let negotiated = check_spdy_upgrade(connection_values, upgrade_value).and_then(|()| {
        let offered: Vec<&str> = req
            .headers()
            .get_all(HEADER_PROTOCOL_VERSION)
            .filter_map(|v| v.to_str().ok())
            .collect();
        negotiate(&offered, protocols)
    });
    let protocol = negotiated.map_err(|e| refusal(&e, protocols))?;
    let activity = Activity::new(idle);
    let input = payload.map(|chunk| chunk.map_err(std::io::Error::other));
    let input = activity.watch(input).take_until(activity.clone().expired());
    let (connection, driver, output) = conn::connect(server_config(), Box::pin(input));
    let output = activity.watch(output);
    actix_web::rt::spawn(async move {
        if let Err(e) = driver.await {
            tracing::info!(error = %e, source = ?std::error::Error::source(&e), "SPDY connection ended");
        }
    });
    let response = HttpResponse::SwitchingProtocols()
        .upgrade(SPDY_31)
        .insert_header((HEADER_PROTOCOL_VERSION, protocol))
        .streaming(output.map(Ok::<_, std::io::Error>));
    Ok(Upgraded {
        protocol,
        response,
        connection,
    })
}

fn refusal(error: &UpgradeError, protocols: &[&'static str]) -> Refused {
    Refused {
        status: StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::BAD_REQUEST),
        message: error.to_string(),
        accepted_versions: if matches!(error, UpgradeError::NoCommonProtocol { .. }) {
            protocols.to_vec()
        } else {
            Vec::new()
        },
    }
}
