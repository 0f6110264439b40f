//! The kubelet API's query strings: the pairs as the handlers read them (actix-web's
//! `web::Query<Vec<(String, String)>>`), then exec/attach's `stream_options` and `command`,
//! containerLogs' `parse_options`, and portForward's `ports_from_query` on the raw string.
#![no_main]

use actix_web::web;
use dockerlet_http::kubelet_api::exec::{command, param, stream_options};
use dockerlet_http::kubelet_api::logs::parse_options;
use dockerlet_http::kubelet_api::port_forward::ports_from_query;
use k8s_openapi::jiff::Timestamp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else {
        return;
    };
    match ports_from_query(query) {
        Ok(ports) => assert!(!ports.is_empty() && !ports.contains(&0), "{ports:?}"),
        Err(e) => drop(e.to_string()),
    }
    let Ok(web::Query(pairs)) = web::Query::<Vec<(String, String)>>::from_query(query) else {
        return;
    };
    if let Ok(options) = stream_options(&pairs) {
        assert!(options.stdin || options.stdout || options.stderr);
        assert!(!(options.tty && options.stderr), "a terminal has one output");
    }
    let commands = command(&pairs);
    assert_eq!(
        commands.len(),
        pairs.iter().filter(|(k, _)| k == param::COMMAND).count()
    );
    let now = Timestamp::from_second(1_800_000_000).expect("a valid time");
    match parse_options(&pairs, now) {
        Ok(options) => {
            assert!(options.limit_bytes.is_none_or(|n| n >= 1));
            assert!(options.request.tail_lines.is_none_or(|n| n <= i64::MAX as u64));
        }
        Err(e) => drop(e.to_string()),
    }
});
