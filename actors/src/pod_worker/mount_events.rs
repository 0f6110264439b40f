//! How often a volume's `FailedMount` event is repeated. kubelet's volume manager tries a failed
//! mount again after an exponential back-off (`nestedpendingoperations`: 500 ms, doubling, at
//! most 2m2s) and records the event at each try: about 8 events in the first 90 s. The worker
//! tries every 2 s, so that a pod starts soon after its volume's source appears, and records the
//! event on kubelet's schedule. Without it a pod waiting for a ConfigMap spent its 25 events
//! (client-go's spam filter) in under a minute, and its later events were dropped.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The first wait before the event is repeated (`initialDurationBeforeRetry`).
const INITIAL: Duration = Duration::from_millis(500);
/// The longest wait (`maxDurationBeforeRetry`).
const MAX: Duration = Duration::from_secs(122);

/// When each failing volume's event is next due, and the wait after that.
#[derive(Debug, Default)]
pub struct MountEventBackoff {
    due: HashMap<String, (Instant, Duration)>,
}

impl MountEventBackoff {
    /// Forget the messages not in `failing` (this sync's failures): a volume that failed again
    /// after it was set up gets its event at once.
    pub fn keep_only(&mut self, failing: &[String]) {
        self.due.retain(|message, _| failing.contains(message));
    }

    /// Whether to record the event with `message` at `now`; if so, when it is due next.
    pub fn admit(&mut self, message: &str, now: Instant) -> bool {
        match self.due.get_mut(message) {
            None => {
                self.due.insert(message.to_string(), (now + INITIAL, INITIAL * 2));
                true
            }
            Some((at, _)) if now < *at => false,
            Some((at, wait)) => {
                *at = now + *wait;
                *wait = (*wait * 2).min(MAX);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Failing every 2 s for 90 s gives kubelet's count of events, not 45.
    #[test]
    fn a_volume_failing_every_two_seconds_is_reported_about_eight_times_in_ninety() {
        let mut backoff = MountEventBackoff::default();
        let start = Instant::now();
        let message = r#"MountVolume.SetUp failed for volume "cfg" : configmap "c" not found"#.to_string();
        let admitted: Vec<u64> = (0..=45u64)
            .map(|i| i * 2)
            .filter(|s| {
                backoff.keep_only(std::slice::from_ref(&message));
                backoff.admit(&message, start + Duration::from_secs(*s))
            })
            .collect();
        assert_eq!(admitted, [0, 2, 4, 6, 10, 18, 34, 66]);
    }

    /// The wait stops growing at 2m2s.
    #[test]
    fn the_wait_is_at_most_two_minutes_two_seconds() {
        let mut backoff = MountEventBackoff::default();
        let start = Instant::now();
        let admitted: Vec<u64> = (0..=1200u64)
            .filter(|s| backoff.admit("m", start + Duration::from_secs(*s)))
            .collect();
        let gaps: Vec<u64> = admitted.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps.iter().max(), Some(&122), "{admitted:?}");
        assert!(gaps.ends_with(&[122, 122]), "{gaps:?}");
    }

    /// A volume that mounted and then fails again, or another volume, is reported at once.
    #[test]
    fn a_new_failure_is_reported_at_once() {
        let mut backoff = MountEventBackoff::default();
        let now = Instant::now();
        assert!(backoff.admit("a", now));
        assert!(!backoff.admit("a", now));
        assert!(backoff.admit("b", now), "another volume has its own schedule");
        backoff.keep_only(&["b".to_string()]);
        assert!(backoff.admit("a", now), "a recovered and fails again");
        assert!(!backoff.admit("b", now));
    }
}
