//! Kubelet's event correlator for events written to the API (client-go `tools/record/events_cache.go`): a token bucket
//! (eventRecordQPS 50, burst 100), identical events folded into one Event with a count, and
//! similar ones — same object, container and reason, different messages — combined once ten
//! distinct messages were seen within ten minutes.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Events per second once the burst is spent (`eventRecordQPS`).
pub const EVENT_QPS: f64 = 50.0;
/// Events at once (`eventBurst`).
pub const EVENT_BURST: f64 = 100.0;
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
    /// Tokens left and when they were last counted.
    tokens: (f64, Instant),
    /// Distinct messages per similar-event key and when one was last seen.
    similar: HashMap<Similar, (HashSet<String>, Instant)>,
    /// Written events by (similar key, message): their name and count.
    written: HashMap<(Similar, String), (String, i32)>,
}

impl Default for EventCorrelator {
    fn default() -> Self {
        EventCorrelator {
            tokens: (EVENT_BURST, Instant::now()),
            similar: HashMap::new(),
            written: HashMap::new(),
        }
    }
}

impl EventCorrelator {
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
        let refill = now.saturating_duration_since(self.tokens.1).as_secs_f64() * EVENT_QPS;
        self.tokens = ((self.tokens.0 + refill).min(EVENT_BURST), now);
        if self.tokens.0 < 1.0 {
            return None;
        }
        self.tokens.0 -= 1.0;
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
        entry.1 += 1;
        Some(Correlated {
            name: entry.0.clone(),
            message,
            count: entry.1,
        })
    }

    /// Forget a pod's events (it is gone).
    pub fn forget(&mut self, uid: &str) {
        self.similar.retain(|(u, _, _), _| u != uid);
        self.written.retain(|((u, _, _), _), _| u != uid);
    }
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
            .filter(|i| observe(&mut c, "Pulled", &format!("{}", i % 5), now).is_some())
            .count();
        assert_eq!(kept, EVENT_BURST as usize);
        assert!(observe(&mut c, "Pulled", "x", now + Duration::from_secs(1)).is_some());
    }
}
