//! Helpers shared by the actors' unit tests.

use std::future::Future;
use std::time::Duration;

/// How often a condition is checked, and for how long.
const POLL: Duration = Duration::from_millis(20);
const POLLS: u32 = 250;

/// Wait until `check` holds, checking every 20 ms for up to 5 s; panic naming `what` if it
/// never does.
pub(crate) async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    eventually_async(what, || std::future::ready(check())).await
}

/// [`eventually`] for a check that has to await (an actor's answer).
pub(crate) async fn eventually_async<F: Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    for _ in 0..POLLS {
        if check().await {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
    panic!("timed out waiting for: {what}");
}
