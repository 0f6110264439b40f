//! The HTTP/1.1 upgrade kubectl (or the API server proxying it) sends before speaking SPDY, and
//! the headers that name each stream — as `k8s.io/apimachinery/pkg/util/httpstream` and kubelet's
//! `pkg/kubelet/cri/streaming` define them. Pure: the HTTP server hands in header values and
//! writes the response this module describes.

use crate::spdy::headers::{header, Headers};

/// `Upgrade` value for SPDY/3.1 (compared case-insensitively).
pub const SPDY_31: &str = "SPDY/3.1";
/// Request and response header carrying the stream protocol version.
pub const HEADER_PROTOCOL_VERSION: &str = "X-Stream-Protocol-Version";
/// Response header listing the server's versions when negotiation fails.
pub const HEADER_ACCEPTED_PROTOCOL_VERSIONS: &str = "X-Accepted-Stream-Protocol-Versions";
/// The stream header naming a stream's role.
pub const HEADER_STREAM_TYPE: &str = "streamType";
/// Port-forward's stream header: the pod port.
pub const HEADER_PORT: &str = "port";
/// Port-forward's stream header pairing a data stream with its error stream.
pub const HEADER_REQUEST_ID: &str = "requestID";
/// The only port-forward protocol over SPDY.
pub const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";

/// The remote-command (exec, attach) protocol versions, newest first: the server's preference
/// list for [`negotiate`].
pub const REMOTE_COMMAND_PROTOCOLS: [&str; 5] = [
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];

/// A remote-command protocol version and what it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RemoteCommandProtocol {
    /// `channel.k8s.io`: stdin/stdout/stderr/error; the error stream carries the message text.
    V1,
    /// `v2.channel.k8s.io`: streams may arrive in any order, the error stream first.
    V2,
    /// `v3.channel.k8s.io`: adds the `resize` stream.
    V3,
    /// `v4.channel.k8s.io`: the error stream carries a `Status` JSON (see [`crate::status`]).
    V4,
    /// `v5.channel.k8s.io`: as v4; over WebSocket, adds closing a single channel.
    V5,
}

impl RemoteCommandProtocol {
    /// From its wire name.
    pub fn from_name(name: &str) -> Option<Self> {
        REMOTE_COMMAND_PROTOCOLS
            .iter()
            .position(|p| *p == name)
            .map(|i| [Self::V5, Self::V4, Self::V3, Self::V2, Self::V1][i])
    }

    /// Its wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::V5 => REMOTE_COMMAND_PROTOCOLS[0],
            Self::V4 => REMOTE_COMMAND_PROTOCOLS[1],
            Self::V3 => REMOTE_COMMAND_PROTOCOLS[2],
            Self::V2 => REMOTE_COMMAND_PROTOCOLS[3],
            Self::V1 => REMOTE_COMMAND_PROTOCOLS[4],
        }
    }

    /// Whether the client may open a `resize` stream.
    pub fn has_resize(self) -> bool {
        self >= Self::V3
    }

    /// Whether the error stream carries `Status` JSON (else the failure message as text, and
    /// nothing on success).
    pub fn status_is_json(self) -> bool {
        self >= Self::V4
    }
}

/// Why an upgrade request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpgradeError {
    /// No `Connection: Upgrade`, or `Upgrade` is not SPDY/3.1.
    #[error("unable to upgrade: missing upgrade headers in request (want Connection: Upgrade and Upgrade: SPDY/3.1, got Upgrade: {upgrade:?})")]
    NotSpdyUpgrade {
        /// The `Upgrade` header sent, if any.
        upgrade: Option<String>,
    },
    /// No `X-Stream-Protocol-Version`.
    #[error("unable to upgrade: X-Stream-Protocol-Version is required")]
    ProtocolRequired,
    /// No version both sides speak.
    #[error("unable to upgrade: unable to negotiate protocol: client supports {client:?}, server accepts {server:?}")]
    NoCommonProtocol {
        /// The client's versions.
        client: Vec<String>,
        /// The server's versions.
        server: Vec<String>,
    },
}

impl UpgradeError {
    /// The HTTP status kubelet answers with: 403 for a failed negotiation (with
    /// `X-Accepted-Stream-Protocol-Versions`), 400 otherwise.
    pub fn http_status(&self) -> u16 {
        match self {
            Self::NoCommonProtocol { .. } => 403,
            _ => 400,
        }
    }
}

/// Check a request asks to upgrade to SPDY/3.1: a `Connection` value containing `upgrade`, and
/// `Upgrade: SPDY/3.1`, both case-insensitive.
pub fn check_spdy_upgrade<'a>(
    connection: impl IntoIterator<Item = &'a str>,
    upgrade: Option<&str>,
) -> Result<(), UpgradeError> {
    let wants_upgrade = connection
        .into_iter()
        .any(|v| v.to_ascii_lowercase().contains("upgrade"));
    if wants_upgrade && upgrade.is_some_and(|u| u.trim().eq_ignore_ascii_case(SPDY_31)) {
        Ok(())
    } else {
        Err(UpgradeError::NotSpdyUpgrade {
            upgrade: upgrade.map(str::to_owned),
        })
    }
}

/// Pick the protocol: the first of the client's `X-Stream-Protocol-Version` values (each header
/// value, and each comma-separated item in it) that the server speaks.
pub fn negotiate<'s>(client: &[&str], server: &[&'s str]) -> Result<&'s str, UpgradeError> {
    let offered: Vec<&str> = client
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    if offered.is_empty() {
        return Err(UpgradeError::ProtocolRequired);
    }
    offered
        .iter()
        .find_map(|c| server.iter().find(|s| *s == c).copied())
        .ok_or_else(|| UpgradeError::NoCommonProtocol {
            client: offered.iter().map(|s| (*s).to_owned()).collect(),
            server: server.iter().map(|s| (*s).to_owned()).collect(),
        })
}

/// The 101 response switching to SPDY/3.1 with `protocol`, as raw HTTP/1.1 bytes.
pub fn switching_protocols_response(protocol: &str) -> String {
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: {SPDY_31}\r\n{HEADER_PROTOCOL_VERSION}: {protocol}\r\n\r\n"
    )
}

/// A stream's role (its `streamType` header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamType {
    /// Status of the command or port-forward.
    Error,
    /// The command's stdin.
    Stdin,
    /// The command's stdout.
    Stdout,
    /// The command's stderr.
    Stderr,
    /// Terminal size changes (v3+).
    Resize,
    /// Port-forward's bytes.
    Data,
}

impl StreamType {
    /// From the header value.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "error" => Self::Error,
            "stdin" => Self::Stdin,
            "stdout" => Self::Stdout,
            "stderr" => Self::Stderr,
            "resize" => Self::Resize,
            "data" => Self::Data,
            _ => return None,
        })
    }

    /// The header value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Stdin => "stdin",
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
            Self::Resize => "resize",
            Self::Data => "data",
        }
    }
}

/// Why a stream's headers are refused (the stream is reset).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamHeaderError {
    /// A required header is absent.
    #[error("stream header {0:?} is missing")]
    Missing(&'static str),
    /// A header's value is not valid.
    #[error("stream header {name:?} has invalid value {value:?}: {reason}")]
    Invalid {
        /// The header.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        reason: &'static str,
    },
}

/// The headers of a stream the client opened, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamHeaders {
    /// `streamType`.
    pub stream_type: StreamType,
    /// `port` (port-forward only).
    pub port: Option<u16>,
    /// `requestID` (port-forward only; pairs data and error streams).
    pub request_id: Option<String>,
}

impl StreamHeaders {
    /// Read a remote-command stream's headers: `streamType` required.
    pub fn remote_command(headers: &Headers) -> Result<Self, StreamHeaderError> {
        Ok(Self {
            stream_type: stream_type(headers)?,
            port: None,
            request_id: None,
        })
    }

    /// Read a port-forward stream's headers: `streamType` (`data` or `error`), `port` (1–65535)
    /// and `requestID` required.
    pub fn port_forward(headers: &Headers) -> Result<Self, StreamHeaderError> {
        let stream_type = stream_type(headers)?;
        if !matches!(stream_type, StreamType::Data | StreamType::Error) {
            return Err(StreamHeaderError::Invalid {
                name: HEADER_STREAM_TYPE,
                value: stream_type.name().to_owned(),
                reason: "port-forward streams are data or error",
            });
        }
        let raw = header(headers, HEADER_PORT).ok_or(StreamHeaderError::Missing(HEADER_PORT))?;
        let port = match raw.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => {
                return Err(StreamHeaderError::Invalid {
                    name: HEADER_PORT,
                    value: raw.to_owned(),
                    reason: "not a port number 1-65535",
                })
            }
        };
        let request_id = header(headers, HEADER_REQUEST_ID).ok_or(StreamHeaderError::Missing(HEADER_REQUEST_ID))?;
        Ok(Self {
            stream_type,
            port: Some(port),
            request_id: Some(request_id.to_owned()),
        })
    }
}

fn stream_type(headers: &Headers) -> Result<StreamType, StreamHeaderError> {
    let raw = header(headers, HEADER_STREAM_TYPE).ok_or(StreamHeaderError::Missing(HEADER_STREAM_TYPE))?;
    StreamType::from_name(raw).ok_or_else(|| StreamHeaderError::Invalid {
        name: HEADER_STREAM_TYPE,
        value: raw.to_owned(),
        reason: "not one of error, stdin, stdout, stderr, resize, data",
    })
}
