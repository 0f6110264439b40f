//! The Kubernetes WebSocket channel protocols: `dockerlet_streaming::websocket::decode` of a
//! binary and a text message under every subprotocol (data decoded is encoded back by `encode`
//! to the same data), subprotocol negotiation, and the resize stream's `ResizeDecoder` fed the
//! bytes in two pieces.
#![no_main]

use bytes::Bytes;
use dockerlet_streaming::status::ResizeDecoder;
use dockerlet_streaming::websocket::{decode, encode, ChannelProtocol, Incoming, WsMessage};
use libfuzzer_sys::fuzz_target;

const PROTOCOLS: [ChannelProtocol; 6] = [
    ChannelProtocol::V5,
    ChannelProtocol::V4,
    ChannelProtocol::V4Base64,
    ChannelProtocol::Channel,
    ChannelProtocol::Base64,
    ChannelProtocol::PortForward,
];

fn round_trip(protocol: ChannelProtocol, message: WsMessage) {
    match decode(protocol, message) {
        Ok(Incoming::Data { channel, data }) => {
            if let Ok(encoded) = encode(protocol, channel, &data) {
                let again = decode(protocol, encoded).expect("an encoded message decodes");
                assert_eq!(again, Incoming::Data { channel, data });
            }
        }
        Ok(Incoming::Close { .. }) => assert_eq!(protocol, ChannelProtocol::V5),
        Ok(Incoming::Empty) => {}
        Err(e) => drop(e.to_string()),
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    for protocol in PROTOCOLS {
        round_trip(protocol, WsMessage::Binary(Bytes::copy_from_slice(data)));
        round_trip(protocol, WsMessage::Text(text.clone()));
    }
    let offers: Vec<&str> = text.split('\n').collect();
    for port_forward in [false, true] {
        if let Some(protocol) = ChannelProtocol::negotiate(&offers, port_forward) {
            assert!(!(port_forward && protocol == ChannelProtocol::V5));
        }
    }
    let mut resize = ResizeDecoder::default();
    let at = data.len() / 2;
    for piece in [&data[..at], &data[at..]] {
        match resize.push(piece) {
            Ok(sizes) => drop(sizes),
            Err(e) => return drop(e.to_string()),
        }
    }
});
