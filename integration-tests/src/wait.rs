//! Polling helpers: wait for something to become true, or check that it stays true.

use std::time::{Duration, Instant};

/// How often the helpers poll.
pub const POLL_EVERY: Duration = Duration::from_millis(250);

/// Polls `probe` until it returns `Some`, and returns that value.
///
/// Panics after `timeout`, naming `what` was awaited.
pub fn wait_for<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    wait_until(what, timeout, || probe().ok_or_else(|| "not yet".to_string()))
}

/// Polls `probe` until it returns `Ok`, and returns that value.
///
/// `Err` describes the state seen instead; on timeout the panic message shows the last one,
/// which usually explains the failure.
pub fn wait_until<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let start = Instant::now();
    loop {
        match probe() {
            Ok(value) => return value,
            Err(last) if start.elapsed() >= timeout => {
                panic!(
                    "timed out after {:.0?} waiting for {what}; last seen: {last}",
                    start.elapsed()
                )
            }
            Err(_) => std::thread::sleep(POLL_EVERY),
        }
    }
}

/// Checks that `check` keeps returning `Ok` for the whole `duration`.
///
/// Panics on the first `Err`, naming `what` should have held and what was seen instead.
pub fn holds_for(what: &str, duration: Duration, mut check: impl FnMut() -> Result<(), String>) {
    let start = Instant::now();
    loop {
        if let Err(seen) = check() {
            panic!(
                "expected {what} to hold for {duration:?}, but after {:.1?}: {seen}",
                start.elapsed()
            );
        }
        if start.elapsed() >= duration {
            return;
        }
        std::thread::sleep(POLL_EVERY);
    }
}
