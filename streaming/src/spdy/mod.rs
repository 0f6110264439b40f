//! SPDY/3.1 (<https://www.chromium.org/spdy/spdy-protocol/spdy-protocol-draft3-1/>), the
//! multiplexing `kubectl exec/attach/port-forward` speak after `Upgrade: SPDY/3.1`.
//!
//! # Layout
//! - [`frame`]: every frame type, [`FrameEncoder`]/[`FrameDecoder`] (each owning one
//!   direction's zlib context), length caps.
//! - [`headers`]: header blocks, zlib with SPDY/3's dictionary.
//! - [`session`]: the sans-I/O connection state machine with flow control.
//! - [`codec`]: `tokio_util::codec` adapters for frames.
//! - [`conn`]: the session driven over byte streams (a future to spawn), with a reader and a
//!   writer per stream, flow control and backpressure.
//!
//! Not implemented: server push (a SYN_STREAM with `associated_to` ≠ 0 is refused with
//! RST_STREAM REFUSED_STREAM), priorities (carried, not scheduled), CREDENTIAL frames (ignored as
//! unknown control frames, as the spec allows), SETTINGS other than INITIAL_WINDOW_SIZE
//! (reported, otherwise ignored).

pub mod codec;
pub mod conn;
pub mod frame;
pub mod headers;
pub mod session;

pub use codec::SpdyCodec;
pub use conn::{connect, Connection, Control, Driver, SpdyStream, StreamReader, StreamWriter};
pub use frame::{Frame, FrameDecoder, FrameEncoder, FrameError, Setting};
pub use headers::{header, HeaderError, Headers};
pub use session::{Event, FlowControl, Role, Session, SessionConfig, SessionError};
