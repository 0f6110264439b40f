//! The EventRecorder actor: every noteworthy event goes to the debug page's ring buffer and, in
//! cluster mode, to the API as a v1 Event (kubelet's `pkg/kubelet/events` reasons through
//! client-go's recorder: counted, combined and rate-limited by
//! [`dockerlet_kube::recorder::EventCorrelator`]). Senders (workers, the prober, the OOM
//! watcher, the Supervisor) send [`RecordEvent`] here directly; each chose the event's type and,
//! having the pod, its container's field path.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;

use actix::prelude::*;
use dockerlet_kube::recorder::{Correlated, EventCorrelator, EventLimits};
use dockerlet_kube::{KubeClient, PodEventRef};
use dockerlet_messages::debug::{DebugEvent, EventSubject, ForgetPodEvents, GetRecentEvents, RecordEvent};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use crate::inspect::Inspect;

/// How many debug events are kept.
const EVENT_LOG_SIZE: usize = 200;

/// Reasons kubelet does not record, kept for the debug endpoint only (never written to the API,
/// where a client counting a pod's events would find them): a container's death.
const DEBUG_ONLY: [&str; 1] = ["ContainerDied"];

/// The debug ring and, in cluster mode, the API's events.
pub struct EventRecorder {
    /// Recent events, newest last.
    ring: VecDeque<DebugEvent>,
    /// Where events go in cluster mode.
    api: Option<Arc<dyn KubeClient>>,
    /// Events written to the API: counted, combined, rate-limited.
    correlator: EventCorrelator,
    /// API writes started.
    api_writes: u64,
    /// Messages handled.
    handled: u64,
}

impl EventRecorder {
    /// A recorder; with `api`, pod events are also written to the API, at most `limits`.
    pub fn new(api: Option<Arc<dyn KubeClient>>, limits: EventLimits) -> Self {
        EventRecorder {
            ring: VecDeque::new(),
            api,
            correlator: EventCorrelator::new(limits),
            api_writes: 0,
            handled: 0,
        }
    }

    /// Keep `event` for the debug page; for a pod in cluster mode, also return the API write to
    /// run (`None` when rate-limited, standalone, or about anything but a pod).
    pub fn record(&mut self, event: RecordEvent) -> Option<impl Future<Output = ()> + 'static> {
        let write = (!DEBUG_ONLY.contains(&event.reason.as_str()))
            .then(|| self.api_write(&event))
            .flatten();
        self.keep(event.to_debug());
        write
    }

    /// The recent events, oldest first.
    pub fn recent(&self) -> Vec<DebugEvent> {
        self.ring.iter().cloned().collect()
    }

    /// Drop a terminated pod's event counts (kept here, not scanned on every event).
    pub fn forget(&mut self, uid: &str) {
        self.correlator.forget(uid);
    }

    fn keep(&mut self, event: DebugEvent) {
        if self.ring.len() == EVENT_LOG_SIZE {
            self.ring.pop_front();
        }
        self.ring.push_back(event);
    }

    fn api_write(&mut self, event: &RecordEvent) -> Option<std::pin::Pin<Box<dyn Future<Output = ()> + 'static>>> {
        let api = self.api.clone()?;
        let id = match &event.about {
            EventSubject::Pod(id) => id,
            EventSubject::Node(_) => {
                self.api_writes += 1;
                let (kind, reason, message) = (event.type_, event.reason.clone(), event.message.clone());
                return Some(Box::pin(async move {
                    if let Err(e) = api.record_node_event(kind, &reason, &message).await {
                        tracing::warn!(reason = %reason, error = %e, "cannot record the Node's event");
                    }
                }));
            }
            EventSubject::Other(_) => return None,
        };
        // Named as kubelet names them: `<pod>.<unix nanoseconds in hex>`.
        let Correlated {
            name: event_name,
            message,
            count,
        } = self.correlator.observe(
            (&id.uid.0, &id.name),
            &event.reason,
            event.field_path.as_deref().unwrap_or_default(),
            &event.message,
            std::time::Instant::now(),
            || format!("{:x}", Timestamp::now().as_nanosecond()),
        )?;
        self.api_writes += 1;
        let (id, kind, reason) = (id.clone(), event.type_, event.reason.clone());
        let (field_path, annotations) = (event.field_path.clone(), event.annotations.clone());
        Some(Box::pin(async move {
            let involved = PodEventRef {
                namespace: &id.namespace,
                pod: &id.name,
                uid: &id.uid.0,
                field_path: field_path.as_deref(),
                annotations: &annotations,
            };
            let written = api
                .record_pod_event(&event_name, involved, kind, &reason, &message, count)
                .await;
            if let Err(e) = written {
                tracing::debug!(parent: &id.span(), reason = %reason, error = %e, "cannot record event");
            }
        }))
    }
}

impl Actor for EventRecorder {
    type Context = Context<Self>;
}

impl Handler<RecordEvent> for EventRecorder {
    type Result = ();

    /// Keep the event for the debug page and, in cluster mode, write a pod's to the API.
    fn handle(&mut self, msg: RecordEvent, ctx: &mut Self::Context) {
        self.handled += 1;
        if let Some(write) = self.record(msg) {
            ctx.spawn(write.into_actor(self));
        }
    }
}

impl Handler<GetRecentEvents> for EventRecorder {
    type Result = MessageResult<GetRecentEvents>;

    fn handle(&mut self, _: GetRecentEvents, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        MessageResult(self.recent())
    }
}

impl Handler<ForgetPodEvents> for EventRecorder {
    type Result = ();

    fn handle(&mut self, msg: ForgetPodEvents, _: &mut Self::Context) {
        self.handled += 1;
        self.forget(&msg.uid.0);
    }
}

impl Inspect for EventRecorder {
    const KIND: &'static str = "EventRecorder";
    const NAME: &'static str = "events";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn detail(&self) -> serde_json::Value {
        json!({ "kept": self.ring.len(), "api_writes": self.api_writes, "to_api": self.api.is_some() })
    }
}

crate::supervised!(EventRecorder);

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_messages::debug::EventType;

    /// A container's death is kept for the debug endpoint, never written to the API (kubelet
    /// records no such reason); kubelet's reasons are; nothing but a pod's events go to the API.
    #[test]
    fn container_deaths_and_other_objects_stay_off_the_api() {
        let api = Arc::new(dockerlet_kube::fake::FakeKube::new("n1"));
        let mut recorder = EventRecorder::new(Some(api), EventLimits::default());
        let id = dockerlet_messages::PodRef {
            uid: "u1".into(),
            namespace: "default".into(),
            name: "p".into(),
        };
        let event = |reason: &str| {
            RecordEvent::pod(&id, EventType::Normal, reason, "m".into()).in_container("c", "spec.containers{c}".into())
        };
        assert!(recorder.record(event("ContainerDied")).is_none());
        assert!(recorder.record(event("Started")).is_some());
        let orphan = RecordEvent::about(
            EventSubject::Other("orphan-u9".into()),
            EventType::Normal,
            "Killing",
            "m".into(),
        );
        assert!(recorder.record(orphan).is_none(), "no pod behind it");
        let reasons: Vec<String> = recorder.recent().into_iter().map(|e| e.reason).collect();
        assert_eq!(
            reasons,
            ["ContainerDied", "Started", "Killing"],
            "all on the debug endpoint"
        );
    }

    /// The ring keeps the newest events only; standalone, nothing goes to an API.
    #[test]
    fn the_ring_keeps_the_newest_events() {
        let mut recorder = EventRecorder::new(None, EventLimits::default());
        for i in 0..EVENT_LOG_SIZE + 5 {
            let about = EventSubject::Other(format!("o{i}"));
            assert!(recorder
                .record(RecordEvent::about(about, EventType::Normal, "Test", String::new()))
                .is_none());
        }
        let recent = recorder.recent();
        assert_eq!(recent.len(), EVENT_LOG_SIZE);
        assert_eq!(recent[0].object, "o5");
        let about_a_pod = RecordEvent::pod(&Default::default(), EventType::Normal, "Test", String::new());
        assert!(recorder.record(about_a_pod).is_none(), "standalone: no API write");
    }
}
