//! The httpGet probe client's response parsing: `dockerlet_probe::http::parse_head` on the
//! bytes as they arrive (every prefix the fuzzer picks), then `dechunk` on the body.
#![no_main]

use dockerlet_probe::http::{dechunk, parse_head, Framing};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the body limit (the probe's is 10 KiB; small ones reach the cut).
    let Some((&limit, data)) = data.split_first() else {
        return;
    };
    let limit = usize::from(limit) * 16;
    let head = match parse_head(data) {
        Ok(Some(head)) => head,
        Ok(None) => return,
        Err(e) => return drop(e.to_string()),
    };
    assert!(head.len <= data.len(), "a head within the buffer");
    // A complete head is complete in any longer buffer, with the same length.
    assert_eq!(
        parse_head(&data[..head.len]).ok().flatten().map(|h| h.len),
        Some(head.len)
    );
    let body = &data[head.len..];
    let mut out = Vec::new();
    if head.framing == Framing::Chunked {
        dechunk(body, &mut out, limit);
    } else {
        // Any body, read as chunked (the decoder sees whatever the server sends).
        dechunk(data, &mut out, limit);
    }
    assert!(out.len() <= limit, "{} bytes past the limit of {limit}", out.len());
});
