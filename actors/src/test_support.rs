//! Helpers shared by the actors' unit tests.

use std::future::Future;
use std::time::Duration;

use dockerlet_messages::runtime::{ObservedContainer, RuntimeState};
use dockerlet_messages::ContainerId;

/// Container `id` named `name` of pod `pod_uid`, in `state`, as the runtime would report it
/// from the labels the agent writes (a `POD` is the sandbox).
pub(crate) fn observed(pod_uid: &str, name: &str, id: &str, state: RuntimeState) -> ObservedContainer {
    let labels = [
        (dockerlet_pod::labels::POD_UID, pod_uid),
        (dockerlet_pod::labels::CONTAINER_NAME, name),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let parsed = dockerlet_pod::labels::parse(&labels).expect("pod labels");
    parsed.observed(ContainerId(id.into()), state, String::new())
}

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
