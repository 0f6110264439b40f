//! WebSocket channels on actix-web (actix-ws): the handshake with a channel subprotocol, then a
//! [`Sender`] of channel data (cloneable) and a [`Receiver`] of decoded client messages. Pings
//! are answered here; the client's close ends the receiver.

use actix_web::http::{header, StatusCode};

use super::idle::Activity;
use super::Refused;
use actix_web::{web, HttpRequest, HttpResponse};
use dockerlet_streaming::websocket::{self, ChannelError, ChannelProtocol, Incoming, WsMessage};
use std::time::Duration;

/// The largest message accepted from a client (kubectl sends stdin in 32 KiB pieces).
pub const MAX_MESSAGE: usize = 1024 * 1024;

/// The connection is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("WebSocket connection closed")]
pub struct Closed;

/// An accepted WebSocket.
pub struct Accepted {
    /// The channel protocol negotiated (`channel.k8s.io` framing when the client named none).
    pub protocol: ChannelProtocol,
    /// The 101 response to return from the handler.
    pub response: HttpResponse,
    /// Writes channel data.
    pub sender: Sender,
    /// The client's messages.
    pub receiver: Receiver,
}

impl std::fmt::Debug for Accepted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accepted")
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

/// Handshake with the first subprotocol the client offers that the server speaks for a
/// remote command (`port_forward` false) or a port-forward; 403 when it offers only unknown
/// ones (as wsstream's handshake), 400 for a bad WebSocket handshake. With `idle`, the
/// receiver ends (and the socket is closed) once no message has moved either way for that long.
pub fn accept(
    req: &HttpRequest,
    payload: web::Payload,
    port_forward: bool,
    idle: Option<Duration>,
) -> Result<Accepted, Refused> {
    let offered: Vec<&str> = req
        .headers()
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .filter_map(|v| v.to_str().ok())
        .collect();
    let Some(protocol) = ChannelProtocol::negotiate(&offered, port_forward) else {
        return Err(Refused {
            status: StatusCode::FORBIDDEN,
            message: format!("requested protocol(s) are not supported: {offered:?}"),
            accepted_versions: Vec::new(),
        });
    };
    let (response, session, stream) =
        actix_ws::handle_with_protocols(req, payload, &[protocol.name()]).map_err(|e| Refused {
            status: StatusCode::BAD_REQUEST,
            message: format!("unable to upgrade websocket connection: {e}"),
            accepted_versions: Vec::new(),
        })?;
    let stream = stream
        .max_frame_size(MAX_MESSAGE)
        .aggregate_continuations()
        .max_continuation_size(MAX_MESSAGE);
    let activity = Activity::new(idle);
    Ok(Accepted {
        protocol,
        response,
        sender: Sender {
            protocol,
            session: session.clone(),
            activity: activity.clone(),
        },
        receiver: Receiver {
            protocol,
            session,
            stream,
            activity,
        },
    })
}

/// Writes data on channels; waits while the socket is behind.
#[derive(Clone)]
pub struct Sender {
    protocol: ChannelProtocol,
    session: actix_ws::Session,
    activity: Activity,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").field("protocol", &self.protocol).finish()
    }
}

impl Sender {
    /// The negotiated protocol.
    pub fn protocol(&self) -> ChannelProtocol {
        self.protocol
    }

    /// Send `data` on `channel` (an empty `data` is a message with the channel alone).
    pub async fn send(&mut self, channel: u8, data: &[u8]) -> Result<(), Closed> {
        let message = websocket::encode(self.protocol, channel, data).map_err(|_| Closed)?;
        self.send_message(message).await
    }

    /// v5: tell the client `channel` is done; nothing for older protocols.
    pub async fn close_channel(&mut self, channel: u8) -> Result<(), Closed> {
        match websocket::encode_close(self.protocol, channel) {
            Ok(message) => self.send_message(message).await,
            Err(_) => Ok(()),
        }
    }

    /// Close the WebSocket (normal closure).
    pub async fn close(self) {
        let _ = self
            .session
            .close(Some(actix_ws::CloseReason {
                code: actix_ws::CloseCode::Normal,
                description: None,
            }))
            .await;
    }

    async fn send_message(&mut self, message: WsMessage) -> Result<(), Closed> {
        self.activity.touch();
        match message {
            WsMessage::Binary(b) => self.session.binary(b).await,
            WsMessage::Text(t) => self.session.text(t).await,
        }
        .map_err(|_| Closed)
    }
}

/// Why the client's messages ended badly.
#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    /// Not a WebSocket frame, or too large.
    #[error("WebSocket protocol error: {0}")]
    Protocol(String),
    /// A message the channel protocol does not allow.
    #[error(transparent)]
    Channel(#[from] ChannelError),
}

/// The client's messages, decoded to channels.
pub struct Receiver {
    protocol: ChannelProtocol,
    session: actix_ws::Session,
    stream: actix_ws::AggregatedMessageStream,
    activity: Activity,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").field("protocol", &self.protocol).finish()
    }
}

impl Receiver {
    /// The next data or close message; `None` when the client closed the WebSocket or went
    /// away, or the connection was idle for the timeout (the socket is then closed). Pings are
    /// answered, pongs and empty messages skipped.
    pub async fn recv(&mut self) -> Option<Result<Incoming, ReceiveError>> {
        loop {
            let received = tokio::select! {
                received = self.stream.recv() => received?,
                () = self.activity.clone().expired() => {
                    tracing::info!("closing a WebSocket stream idle for --streaming-connection-idle-timeout");
                    let _ = self.session.clone().close(None).await;
                    return None;
                }
            };
            self.activity.touch();
            let message = match received {
                Ok(m) => m,
                // The connection ended without a close frame (kubectl through the API server's
                // proxy just closes it): the client went away, not a protocol breach.
                Err(actix_ws::ProtocolError::Io(e)) => {
                    tracing::debug!(error = %e, "WebSocket client went away without a close frame");
                    return None;
                }
                Err(e) => return Some(Err(ReceiveError::Protocol(e.to_string()))),
            };
            let message = match message {
                actix_ws::AggregatedMessage::Binary(b) => WsMessage::Binary(b),
                actix_ws::AggregatedMessage::Text(t) => WsMessage::Text(t.to_string()),
                actix_ws::AggregatedMessage::Ping(p) => {
                    let _ = self.session.pong(&p).await;
                    continue;
                }
                actix_ws::AggregatedMessage::Pong(_) => continue,
                actix_ws::AggregatedMessage::Close(_) => return None,
            };
            match websocket::decode(self.protocol, message) {
                Ok(Incoming::Empty) => continue,
                other => return Some(other.map_err(ReceiveError::from)),
            }
        }
    }
}
