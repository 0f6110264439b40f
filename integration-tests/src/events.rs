//! [`EventLog`]: every event the agent's `/debug/actors` showed while a test ran.
//!
//! The agent keeps only its most recent events (a ring buffer); probes that fail every second
//! push older ones out. An `EventLog` polls the endpoint in a background thread and keeps them
//! all, so a test can also assert that something did *not* happen.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

use crate::harness::Agent;
use crate::wait::wait_until;

/// How often the log polls `/debug/actors`.
const POLL_EVERY: Duration = Duration::from_millis(200);

/// One event of `/debug/actors`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Event {
    /// RFC 3339 time.
    pub time: String,
    /// Kubelet-style reason (`Unhealthy`, `Killing`, …).
    pub reason: String,
    /// `namespace/pod` or an actor name.
    pub object: String,
    /// Human-readable message.
    pub message: String,
}

impl Event {
    fn from_json(v: &Value) -> Option<Self> {
        Some(Self {
            time: v["time"].as_str()?.to_string(),
            reason: v["reason"].as_str()?.to_string(),
            object: v["object"].as_str()?.to_string(),
            message: v["message"].as_str()?.to_string(),
        })
    }
}

#[derive(Default)]
struct Seen {
    keys: BTreeSet<Event>,
    ordered: Vec<Event>,
}

/// Records the events of one agent from creation until dropped.
pub struct EventLog {
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    poller: Option<JoinHandle<()>>,
}

impl EventLog {
    /// Starts polling `agent`'s debug endpoint.
    pub fn watch(agent: &Agent) -> Self {
        let url = format!("http://127.0.0.1:{}/debug/actors", agent.ports().debug);
        let http: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .http_status_as_error(false)
            .proxy(None)
            .max_idle_connections(0)
            .build()
            .into();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (sink, stopped) = (Arc::clone(&seen), Arc::clone(&stop));
        let poller = std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                if let Some(events) = fetch(&http, &url) {
                    let mut seen = sink.lock().unwrap();
                    for event in events {
                        if seen.keys.insert(event.clone()) {
                            seen.ordered.push(event);
                        }
                    }
                }
                std::thread::sleep(POLL_EVERY);
            }
        });
        Self {
            seen,
            stop,
            poller: Some(poller),
        }
    }

    /// Every event seen so far, in the order the agent recorded them.
    pub fn all(&self) -> Vec<Event> {
        self.seen.lock().unwrap().ordered.clone()
    }

    /// The events about `object` (`namespace/pod`) with that reason.
    pub fn about(&self, object: &str, reason: &str) -> Vec<Event> {
        self.all()
            .into_iter()
            .filter(|e| e.object == object && e.reason == reason)
            .collect()
    }

    /// Waits until an event about `object` with that reason and a message satisfying
    /// `matches` was seen; returns it.
    pub fn wait_for(&self, object: &str, reason: &str, timeout: Duration, matches: impl Fn(&str) -> bool) -> Event {
        wait_until(&format!("a {reason} event about {object}"), timeout, || {
            let events = self.about(object, reason);
            events.iter().find(|e| matches(&e.message)).cloned().ok_or_else(|| {
                let about: Vec<String> = self
                    .all()
                    .into_iter()
                    .filter(|e| e.object == object)
                    .map(|e| format!("{} {}: {}", e.time, e.reason, e.message))
                    .collect();
                format!("events about {object}: {about:#?}")
            })
        })
    }
}

impl Drop for EventLog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(poller) = self.poller.take() {
            let _ = poller.join();
        }
    }
}

fn fetch(http: &ureq::Agent, url: &str) -> Option<Vec<Event>> {
    let mut resp = http.get(url).call().ok()?;
    if resp.status().as_u16() != 200 {
        return None;
    }
    let body = resp.body_mut().read_to_string().ok()?;
    let debug: Value = serde_json::from_str(&body).ok()?;
    Some(
        debug["events"]
            .as_array()?
            .iter()
            .filter_map(Event::from_json)
            .collect(),
    )
}
