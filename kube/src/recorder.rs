//! Kubelet's event correlator for events written to the API (client-go `tools/record/events_cache.go`):
//! identical events folded into one Event with a count; similar ones — same object, container
//! and reason, different messages — combined once ten distinct messages were seen within ten
//! minutes; client-go's spam filter, a token bucket per pod (25 events, then one every five
//! minutes), so a pod that fails for hours (a readiness probe, a missing volume) does not write
//! to the API every few seconds; and a token bucket over all pods (eventRecordQPS 50, burst 100).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// How many events go to the API over all pods: `eventRecordQPS` (`--event-qps`) and
/// `eventBurst` (`--event-burst`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventLimits {
    /// Events per second once the burst is spent.
    pub qps: f64,
    /// Events at once.
    pub burst: f64,
}

impl Default for EventLimits {
    /// kubelet's: 50 per second, 100 at once.
    fn default() -> Self {
        EventLimits {
            qps: 50.0,
            burst: 100.0,
        }
    }
}

/// Events about one pod at once (client-go's `defaultSpamBurst`).
const SPAM_BURST: f64 = 25.0;
/// Events about one pod per second once its burst is spent (`defaultSpamQPS`: one in 5 minutes).
const SPAM_QPS: f64 = 1.0 / 300.0;
/// Distinct messages of similar events before they are combined (`maxSimilarEvents`).
const MAX_SIMILAR: usize = 10;
/// Window over which similar events are counted (`defaultAggregateIntervalInSeconds`).
const SIMILAR_WINDOW: Duration = Duration::from_secs(600);
/// Prefix of a combined event's message.
const COMBINED: &str = "(combined from similar events): ";

/// What to write for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Correlated {
    /// The Event's name: `<pod>.<unique>`; the same name for repeats.
    pub name: String,
    /// Its message (prefixed when combined).
    pub message: String,
    /// Its count: 1 creates the Event, more updates it.
    pub count: i32,
}

/// (pod UID, reason, fieldPath): events about the same thing for the same reason.
type Similar = (String, String, String);

/// The correlator.
#[derive(Debug)]
pub struct EventCorrelator {
    /// The limits over all pods.
    limits: EventLimits,
    /// Tokens left and when they were last counted.
    tokens: (f64, Instant),
    /// The spam filter's tokens left per pod UID, and when they were last counted.
    spam: HashMap<String, (f64, Instant)>,
    /// Distinct messages per similar-event key and when one was last seen.
    similar: HashMap<Similar, (HashSet<String>, Instant)>,
    /// Written events by (similar key, message): their name and count.
    written: HashMap<(Similar, String), (String, i32)>,
}

impl Default for EventCorrelator {
    fn default() -> Self {
        EventCorrelator::new(EventLimits::default())
    }
}

impl EventCorrelator {
    /// A correlator writing at most `limits` over all pods.
    pub fn new(limits: EventLimits) -> Self {
        EventCorrelator {
            limits,
            tokens: (limits.burst, Instant::now()),
            spam: HashMap::new(),
            similar: HashMap::new(),
            written: HashMap::new(),
        }
    }

    /// Decide how to write an event about pod `pod_name` (UID `uid`); `None` when the rate limit
    /// drops it. `unique` names a new Event (kubelet: the time in hex nanoseconds).
    pub fn observe(
        &mut self,
        (uid, pod_name): (&str, &str),
        reason: &str,
        field_path: &str,
        message: &str,
        now: Instant,
        unique: impl FnOnce() -> String,
    ) -> Option<Correlated> {
        let similar: Similar = (uid.to_string(), reason.to_string(), field_path.to_string());
        let (messages, last) = self
            .similar
            .entry(similar.clone())
            .or_insert_with(|| (HashSet::new(), now));
        if now.saturating_duration_since(*last) > SIMILAR_WINDOW {
            messages.clear();
        }
        *last = now;
        messages.insert(message.to_string());
        let (key, message) = if messages.len() < MAX_SIMILAR {
            (message.to_string(), message.to_string())
        } else {
            (String::new(), format!("{COMBINED}{message}"))
        };
        let entry = self
            .written
            .entry((similar, key))
            .or_insert_with(|| (format!("{pod_name}.{}", unique()), 0));
        // Counted even when the spam filter drops it, as client-go's correlator counts before it
        // filters: the next write carries every occurrence.
        entry.1 += 1;
        let spam = self.spam.entry(uid.to_string()).or_insert((SPAM_BURST, now));
        if !take(spam, now, SPAM_QPS, SPAM_BURST) || !take(&mut self.tokens, now, self.limits.qps, self.limits.burst) {
            return None;
        }
        Some(Correlated {
            name: entry.0.clone(),
            message,
            count: entry.1,
        })
    }

    /// Forget a pod's events (it is gone).
    pub fn forget(&mut self, uid: &str) {
        self.spam.remove(uid);
        self.similar.retain(|(u, _, _), _| u != uid);
        self.written.retain(|((u, _, _), _), _| u != uid);
    }
}

/// Take a token from `bucket` (tokens, last counted) refilled at `rate` per second up to `burst`.
fn take(bucket: &mut (f64, Instant), now: Instant, rate: f64, burst: f64) -> bool {
    let refill = now.saturating_duration_since(bucket.1).as_secs_f64() * rate;
    *bucket = ((bucket.0 + refill).min(burst), now);
    if bucket.0 < 1.0 {
        return false;
    }
    bucket.0 -= 1.0;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observe(c: &mut EventCorrelator, reason: &str, message: &str, now: Instant) -> Option<Correlated> {
        let mut n = 0;
        c.observe(("uid1", "web"), reason, "spec.containers{app}", message, now, || {
            n += 1;
            format!("{:x}", now.elapsed().as_nanos() + n)
        })
    }

    /// Repeats of one event bump the count of one Event.
    #[test]
    fn identical_events_are_counted() {
        let mut c = EventCorrelator::default();
        let now = Instant::now();
        let first = observe(&mut c, "BackOff", "Back-off restarting", now).unwrap();
        let second = observe(&mut c, "BackOff", "Back-off restarting", now).unwrap();
        assert_eq!((first.count, second.count), (1, 2));
        assert_eq!(first.name, second.name);
        let other = observe(&mut c, "Started", "Started container app", now).unwrap();
        assert_ne!(other.name, first.name);
    }

    /// From the tenth distinct message of one reason on, similar events are combined into one
    /// Event whose count grows.
    #[test]
    fn similar_events_are_combined_after_ten() {
        let mut c = EventCorrelator::default();
        let now = Instant::now();
        let results: Vec<Correlated> = (0..12)
            .map(|i| observe(&mut c, "Unhealthy", &format!("probe failed: {i}"), now).unwrap())
            .collect();
        assert!(results[..9]
            .iter()
            .all(|r| r.count == 1 && !r.message.starts_with(COMBINED)));
        assert_eq!(results[9].message, format!("{COMBINED}probe failed: 9"));
        assert_eq!(
            (results[10].name.as_str(), results[11].count),
            (results[9].name.as_str(), 3)
        );
        let later = observe(&mut c, "Unhealthy", "probe failed: 0", now + SIMILAR_WINDOW * 2).unwrap();
        assert!(!later.message.starts_with(COMBINED), "the window starts over");
    }

    /// Beyond the burst, events are dropped until tokens refill.
    #[test]
    fn the_burst_is_limited() {
        let mut c = EventCorrelator::default();
        let now = Instant::now();
        let kept = (0..150)
            .filter(|i| {
                c.observe((&format!("uid{i}"), "web"), "Pulled", "", "x", now, || i.to_string())
                    .is_some()
            })
            .count();
        assert_eq!(kept, EventLimits::default().burst as usize);
        assert!(observe(&mut c, "Pulled", "x", now + Duration::from_secs(1)).is_some());
    }

    /// The limits over all pods are the ones given (`--event-qps`, `--event-burst`).
    #[test]
    fn the_limits_over_all_pods_are_configurable() {
        let mut c = EventCorrelator::new(EventLimits { qps: 1.0, burst: 3.0 });
        let now = Instant::now();
        let kept = (0..10)
            .filter(|i| {
                c.observe((&format!("uid{i}"), "web"), "Pulled", "", "x", now, || i.to_string())
                    .is_some()
            })
            .count();
        assert_eq!(kept, 3);
        let later = c.observe(("uid9", "web"), "Pulled", "", "x", now + Duration::from_secs(1), || {
            "9".into()
        });
        assert!(later.is_some(), "one more after a second");
    }

    /// client-go's spam filter: 25 events about one pod, then one every five minutes; the
    /// dropped ones are still counted, and other pods are not held back.
    #[test]
    fn one_pod_gets_twenty_five_events_then_one_every_five_minutes() {
        let mut c = EventCorrelator::default();
        let now = Instant::now();
        let kept: Vec<Correlated> = (0..40)
            .filter_map(|_| observe(&mut c, "Unhealthy", "Readiness probe failed", now))
            .collect();
        assert_eq!(kept.len(), SPAM_BURST as usize);
        assert_eq!(kept.last().map(|k| k.count), Some(25));
        assert!(observe(
            &mut c,
            "Started",
            "Started container app",
            now + Duration::from_secs(299)
        )
        .is_none());
        let later = observe(
            &mut c,
            "Unhealthy",
            "Readiness probe failed",
            now + Duration::from_secs(301),
        );
        assert_eq!(later.map(|k| k.count), Some(41), "the dropped repeats are counted");
        assert!(observe(
            &mut c,
            "Unhealthy",
            "Readiness probe failed",
            now + Duration::from_secs(302)
        )
        .is_none());
        let other = c.observe(("uid2", "db"), "Started", "", "Started container db", now, || {
            "1".into()
        });
        assert!(other.is_some(), "another pod has its own bucket");
        c.forget("uid1");
        assert!(observe(
            &mut c,
            "Started",
            "Started container app",
            now + Duration::from_secs(303)
        )
        .is_some());
    }
}
