//! The Kubernetes channel protocols over WebSocket (`k8s.io/apimachinery/pkg/util/httpstream/wsstream`
//! and kubelet's port-forward over WebSocket): which channel a message belongs to.
//!
//! WebSocket framing itself is the HTTP server's: actix-web already serves the kubelet API, and
//! its `actix-http` `ws` codec (or `actix-ws`) does the handshake, masking and control frames, so
//! this module only maps whole messages ([`WsMessage`]) to channels and back and stays free of the
//! server crate.
//!
//! - Binary protocols (`channel.k8s.io`, `v4.channel.k8s.io`, `v5.channel.k8s.io`, port-forward's
//!   `portforward.k8s.io`): the first byte of a binary message is the channel.
//! - Base64 protocols (`base64.channel.k8s.io`, `v4.base64.channel.k8s.io`): text messages, an
//!   ASCII digit `'0' + channel`, then the data in standard base64.
//! - `v5.channel.k8s.io` adds the close message: channel 255 with one byte, the channel to close.
//! - Port-forward: port `i` of the request's `ports` has data channel `2i` and error channel
//!   `2i+1`; the server's first message on each carries the port, 2 bytes little-endian.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;

/// Remote command's stdin channel.
pub const STDIN: u8 = 0;
/// Remote command's stdout channel.
pub const STDOUT: u8 = 1;
/// Remote command's stderr channel.
pub const STDERR: u8 = 2;
/// Remote command's error (status) channel.
pub const ERROR: u8 = 3;
/// Remote command's resize channel.
pub const RESIZE: u8 = 4;
/// v5's close signal "channel".
pub const CLOSE: u8 = 255;

/// A whole WebSocket message, as the server's WebSocket codec hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WsMessage {
    /// A binary message.
    Binary(Bytes),
    /// A text message.
    Text(String),
}

/// A channel subprotocol (`Sec-WebSocket-Protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelProtocol {
    /// `v5.channel.k8s.io`: binary, status JSON, close messages.
    V5,
    /// `v4.channel.k8s.io`: binary, status JSON on the error channel.
    V4,
    /// `v4.base64.channel.k8s.io`: base64 text, status JSON.
    V4Base64,
    /// `channel.k8s.io` (also when the client names none): binary, text on the error channel.
    Channel,
    /// `base64.channel.k8s.io`: base64 text.
    Base64,
    /// `portforward.k8s.io`: binary, port-forward channels.
    PortForward,
}

impl ChannelProtocol {
    /// Its `Sec-WebSocket-Protocol` name.
    pub fn name(self) -> &'static str {
        match self {
            Self::V5 => "v5.channel.k8s.io",
            Self::V4 => "v4.channel.k8s.io",
            Self::V4Base64 => "v4.base64.channel.k8s.io",
            Self::Channel => "channel.k8s.io",
            Self::Base64 => "base64.channel.k8s.io",
            Self::PortForward => "portforward.k8s.io",
        }
    }

    /// From its name.
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::V5,
            Self::V4,
            Self::V4Base64,
            Self::Channel,
            Self::Base64,
            Self::PortForward,
        ]
        .into_iter()
        .find(|p| p.name() == name)
    }

    /// Whether messages are base64 text.
    pub fn is_base64(self) -> bool {
        matches!(self, Self::V4Base64 | Self::Base64)
    }

    /// Whether the error channel carries `Status` JSON.
    pub fn status_is_json(self) -> bool {
        matches!(self, Self::V5 | Self::V4 | Self::V4Base64)
    }

    /// Pick the subprotocol for a remote-command (`port_forward` false) or port-forward request:
    /// the first of the client's offers (comma-separated `Sec-WebSocket-Protocol` values) that the
    /// server speaks for it; `channel.k8s.io` framing when the client offers none. `None`: the
    /// client offered only unknown protocols (refuse the upgrade).
    pub fn negotiate(offered: &[&str], port_forward: bool) -> Option<Self> {
        let offers: Vec<&str> = offered
            .iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect();
        if offers.is_empty() {
            return Some(if port_forward { Self::PortForward } else { Self::Channel });
        }
        offers.into_iter().filter_map(Self::from_name).find(|p| match p {
            Self::PortForward | Self::V4 | Self::V4Base64 | Self::Channel | Self::Base64 => true,
            Self::V5 => !port_forward,
        })
    }
}

/// What a client's message says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// Data for a channel.
    Data {
        /// The channel.
        channel: u8,
        /// The bytes (decoded from base64 for base64 protocols).
        data: Bytes,
    },
    /// v5: the client closed its side of `channel` (stdin EOF).
    Close {
        /// The channel.
        channel: u8,
    },
    /// An empty message: nothing (wsstream ignores these).
    Empty,
}

/// Why a client's message is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// The base64 payload does not decode.
    #[error("websocket channel protocol {0}: payload is not valid base64")]
    BadBase64(&'static str),
    /// A close message without exactly one channel byte, or on a protocol without close.
    #[error("websocket channel protocol {0}: invalid close message")]
    BadClose(&'static str),
    /// A channel this end cannot encode (base64 needs a single digit).
    #[error("websocket channel protocol {protocol}: channel {channel} cannot be encoded")]
    ChannelOutOfRange {
        /// The protocol.
        protocol: &'static str,
        /// The channel.
        channel: u8,
    },
}

/// Decode a client's message as kubelet's `wsstream.Conn` does
/// (`k8s.io/apimachinery/pkg/util/httpstream/wsstream/conn.go` `handle`): the payload is taken
/// whatever the frame's kind (`websocket.Message.Receive` into bytes reads text and binary
/// frames alike; the Python client writes its stdin as text frames), then read by the
/// protocol's codec: a channel byte (v5's `[255, c]` closes channel `c`), or on the base64
/// protocols a channel character (`'0' + c`) and base64.
pub fn decode(protocol: ChannelProtocol, message: WsMessage) -> Result<Incoming, ChannelError> {
    let name = protocol.name();
    let mut data = match message {
        WsMessage::Binary(data) => data,
        WsMessage::Text(text) => Bytes::from(text),
    };
    if data.is_empty() {
        return Ok(Incoming::Empty);
    }
    if data[0] == CLOSE && protocol == ChannelProtocol::V5 {
        return match &data[1..] {
            [c] => Ok(Incoming::Close { channel: *c }),
            _ => Err(ChannelError::BadClose(name)),
        };
    }
    let rest = data.split_off(1);
    if !protocol.is_base64() {
        return Ok(Incoming::Data {
            channel: data[0],
            data: rest,
        });
    }
    // wsstream subtracts '0' from the byte: anything else lands on a channel no one reads.
    let channel = data[0].wrapping_sub(b'0');
    let decoded = STANDARD.decode(&rest).map_err(|_| ChannelError::BadBase64(name))?;
    Ok(Incoming::Data {
        channel,
        data: Bytes::from(decoded),
    })
}

/// Encode data for `channel`.
pub fn encode(protocol: ChannelProtocol, channel: u8, data: &[u8]) -> Result<WsMessage, ChannelError> {
    if protocol.is_base64() {
        if channel > 9 {
            return Err(ChannelError::ChannelOutOfRange {
                protocol: protocol.name(),
                channel,
            });
        }
        let mut text = String::with_capacity(1 + data.len().div_ceil(3) * 4);
        text.push(char::from(b'0' + channel));
        STANDARD.encode_string(data, &mut text);
        return Ok(WsMessage::Text(text));
    }
    let mut out = Vec::with_capacity(1 + data.len());
    out.push(channel);
    out.extend_from_slice(data);
    Ok(WsMessage::Binary(Bytes::from(out)))
}

/// v5's message closing `channel`.
pub fn encode_close(protocol: ChannelProtocol, channel: u8) -> Result<WsMessage, ChannelError> {
    if protocol != ChannelProtocol::V5 {
        return Err(ChannelError::BadClose(protocol.name()));
    }
    Ok(WsMessage::Binary(Bytes::from(vec![CLOSE, channel])))
}

/// Port-forward: the data and error channels of the `index`-th requested port, or `None` past
/// the 127th (channels are one byte).
pub fn port_forward_channels(index: usize) -> Option<(u8, u8)> {
    let data = u8::try_from(index.checked_mul(2)?).ok()?;
    Some((data, data.checked_add(1)?))
}

/// Port-forward: the server's first message on a channel, the port as 2 bytes little-endian.
pub fn port_prefix(protocol: ChannelProtocol, channel: u8, port: u16) -> Result<WsMessage, ChannelError> {
    encode(protocol, channel, &port.to_le_bytes())
}
