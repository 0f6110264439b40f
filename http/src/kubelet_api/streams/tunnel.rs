//! SPDY tunnelled through a WebSocket: what kubectl ≥ 1.30 sends for a port-forward by default
//! (`KUBECTL_PORT_FORWARD_WEBSOCKETS`; client-go `tools/portforward/tunneling_dialer.go`). The
//! client offers the subprotocol `SPDY/3.1+portforward.k8s.io` and then speaks plain SPDY/3.1,
//! its bytes carried in binary WebSocket messages, with no inner HTTP upgrade. An API server
//! translates this to a SPDY upgrade towards the kubelet (apiserver `streamtunnel.go`); a proxy
//! that passes the upgrade through unchanged brings it here, where the same SPDY driver runs
//! over the messages' bytes.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use dockerlet_streaming::spdy::conn::{self, Connection};
use futures::StreamExt;

use super::idle::Activity;
use super::spdy::server_config;
use super::Refused;
use std::time::Duration;

/// The subprotocol prefix of a SPDY tunnel (client-go `constants.WebsocketsSPDYTunnelingPrefix`).
pub const TUNNELING_PREFIX: &str = "SPDY/3.1+";

/// The largest WebSocket message accepted from the client (a SPDY frame is at most 16 MiB,
/// kubectl writes up to 32 KiB of data at once).
pub const MAX_MESSAGE: usize = 1024 * 1024;

/// The SPDY protocol a tunnelling client offers among `protocols` (the server's, in preference
/// order): the first of the client's `SPDY/3.1+<protocol>` offers the server speaks.
pub fn tunnelled_protocol(req: &HttpRequest, protocols: &[&'static str]) -> Option<&'static str> {
    req.headers()
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter_map(|offer| offer.strip_prefix(TUNNELING_PREFIX))
        .find_map(|p| protocols.iter().copied().find(|ours| *ours == p))
}

/// Accept the WebSocket with `SPDY/3.1+<protocol>` and start the SPDY driver over its binary
/// messages; each chunk the driver writes goes out as one binary message. Pings are answered;
/// a text message ends the connection (it cannot carry SPDY). With `idle`, the connection is
/// closed once no message has moved either way for that long.
pub fn accept(
    req: &HttpRequest,
    payload: web::Payload,
    protocol: &str,
    idle: Option<Duration>,
) -> Result<(HttpResponse, Connection), Refused> {
    let name = format!("{TUNNELING_PREFIX}{protocol}");
    let (response, session, stream) =
        actix_ws::handle_with_protocols(req, payload, &[name.as_str()]).map_err(|e| Refused {
            status: actix_web::http::StatusCode::BAD_REQUEST,
            message: format!("unable to upgrade websocket connection: {e}"),
            accepted_versions: Vec::new(),
        })?;
    let stream = stream
        .max_frame_size(MAX_MESSAGE)
        .aggregate_continuations()
        .max_continuation_size(MAX_MESSAGE);
    let pong = session.clone();
    let activity = Activity::new(idle);
    let input = activity
        .watch(stream)
        .take_until(activity.clone().expired())
        .take_while(|m| std::future::ready(!matches!(m, Ok(actix_ws::AggregatedMessage::Close(_)))))
        .filter_map(move |m| {
            let mut pong = pong.clone();
            async move {
                match m {
                    Ok(actix_ws::AggregatedMessage::Binary(b)) => Some(Ok(b)),
                    Ok(actix_ws::AggregatedMessage::Ping(p)) => {
                        let _ = pong.pong(&p).await;
                        None
                    }
                    Ok(actix_ws::AggregatedMessage::Pong(_) | actix_ws::AggregatedMessage::Close(_)) => None,
                    Ok(actix_ws::AggregatedMessage::Text(_)) => {
                        Some(Err(std::io::Error::other("text message in a SPDY tunnel")))
                    }
                    Err(e) => Some(Err(std::io::Error::other(e.to_string()))),
                }
            }
        });
    let (connection, driver, mut output) = conn::connect(server_config(), Box::pin(input));
    actix_web::rt::spawn(async move {
        if let Err(e) = driver.await {
            tracing::info!(error = %e, "tunnelled SPDY connection ended");
        }
    });
    let mut writer = session;
    actix_web::rt::spawn(async move {
        while let Some(chunk) = output.next().await {
            activity.touch();
            if writer.binary(chunk).await.is_err() {
                return;
            }
        }
        let _ = writer.close(None).await;
    });
    Ok((response, connection))
}
