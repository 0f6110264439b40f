//! The thin tokio adapter: [`SpdyCodec`] frames a byte stream with `tokio_util::codec`
//! (`Framed::new(socket, SpdyCodec::default())`). A caller that wants the connection state machine
//! instead feeds the socket's bytes to [`super::Session::receive`] and writes
//! [`super::Session::take_output`].

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use super::frame::{Frame, FrameDecoder, FrameEncoder, FrameError};

/// Frames in both directions, each with its own header compression context.
#[derive(Debug, Default)]
pub struct SpdyCodec {
    decoder: FrameDecoder,
    encoder: FrameEncoder,
}

impl SpdyCodec {
    /// A codec with the given incoming caps (see [`FrameDecoder::new`]).
    pub fn new(max_frame_len: usize, max_header_block: usize) -> Self {
        Self {
            decoder: FrameDecoder::new(max_frame_len, max_header_block),
            encoder: FrameEncoder::new(),
        }
    }
}

/// A socket error or bad frame.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// Reading or writing the socket failed.
    #[error("SPDY connection I/O failed")]
    Io(#[from] std::io::Error),
    /// The bytes are not a SPDY/3.1 frame.
    #[error(transparent)]
    Frame(#[from] FrameError),
}

impl Decoder for SpdyCodec {
    type Item = Frame;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        Ok(self.decoder.decode(src)?)
    }
}

impl Encoder<Frame> for SpdyCodec {
    type Error = CodecError;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), CodecError> {
        Ok(self.encoder.encode(&frame, dst)?)
    }
}
