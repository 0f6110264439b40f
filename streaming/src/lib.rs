//! The framing of the kubelet's streaming protocols (exec, attach, port-forward), without I/O,
//! for the HTTP server's handlers to drive.
//!
//! # Layout
//! - [`spdy`]: SPDY/3.1 frames, header compression, a sans-I/O [`spdy::Session`] with flow
//!   control, a `tokio_util` codec. No crate on crates.io implements SPDY/3.1.
//! - [`upgrade`]: the HTTP/1.1 upgrade handshake kubectl starts (`Upgrade: SPDY/3.1`,
//!   `X-Stream-Protocol-Version` negotiation) and the stream headers (`streamType`, `port`,
//!   `requestID`).
//! - [`websocket`]: the channel protocols over WebSocket messages (`v5.channel.k8s.io` …
//!   `channel.k8s.io`, `base64.channel.k8s.io`, port-forward's `portforward.k8s.io`); WebSocket
//!   frames themselves come from the HTTP server's WebSocket codec (actix-http's `ws`).
//! - [`status`]: the `Status` JSON kubelet writes on exec's error stream.
//!
//! Not implemented: SPDY server push, priorities (carried, not scheduled), SPDY/2; the
//! CREDENTIAL frame (ignored).

pub mod spdy;
pub mod status;
pub mod upgrade;
pub mod websocket;
