//! The event recorder: every noteworthy event goes to the debug page's ring buffer and, in
//! cluster mode, to the API as a v1 Event (kubelet's `pkg/kubelet/events` reasons through
//! client-go's recorder: counted, combined and rate-limited by
//! [`dockerlet_kube::recorder::EventCorrelator`]). Owned by the Supervisor, which knows the pods.

use std::collections::VecDeque;
use std::future::Future;

use dockerlet_kube::recorder::{Correlated, EventCorrelator, EventLimits};
use std::sync::Arc;

use dockerlet_kube::{KubeClient, PodEventRef};
use dockerlet_messages::debug::{DebugEvent, EventSubject, EventType, RecordEvent};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

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
}

impl EventRecorder {
    /// A recorder; with `api`, pod events are also written to the API, at most `limits`.
    pub fn new(api: Option<Arc<dyn KubeClient>>, limits: EventLimits) -> Self {
        EventRecorder {
            ring: VecDeque::new(),
            api,
            correlator: EventCorrelator::new(limits),
        }
    }

    /// Keep an event about `object` that has no pod behind it (orphans, actor restarts).
    pub fn note(&mut self, reason: &str, object: String, message: String) {
        self.keep(DebugEvent {
            time: Timestamp::now(),
            type_: EventType::Normal,
            reason: reason.to_string(),
            object,
            container: None,
            message,
        });
    }

    /// Keep `event` for the debug page; for a pod the node runs (`pod`, found by the caller from
    /// the event's [`EventSubject::Pod`]) in cluster mode, also return the API write to run
    /// (`None` when rate-limited or standalone).
    pub fn record(&mut self, event: RecordEvent, pod: Option<&Pod>) -> Option<impl Future<Output = ()> + 'static> {
        let write = pod
            .filter(|_| !DEBUG_ONLY.contains(&event.reason.as_str()))
            .and_then(|pod| self.api_write(&event, pod));
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

    fn api_write(&mut self, event: &RecordEvent, pod: &Pod) -> Option<impl Future<Output = ()> + 'static> {
        let api = self.api.clone()?;
        let EventSubject::Pod(id) = &event.about else {
            return None;
        };
        let field_path = event.container.as_deref().map(|c| field_path(pod, c));
        // Named as kubelet names them: `<pod>.<unix nanoseconds in hex>`.
        let Correlated {
            name: event_name,
            message,
            count,
        } = self.correlator.observe(
            (&id.uid.0, &id.name),
            &event.reason,
            field_path.as_deref().unwrap_or_default(),
            &event.message,
            std::time::Instant::now(),
            || format!("{:x}", Timestamp::now().as_nanosecond()),
        )?;
        let (id, kind, reason) = (id.clone(), event.type_, event.reason.clone());
        Some(async move {
            let involved = PodEventRef {
                namespace: &id.namespace,
                pod: &id.name,
                uid: &id.uid.0,
                field_path: field_path.as_deref(),
            };
            let written = api
                .record_pod_event(&event_name, involved, kind, &reason, &message, count)
                .await;
            if let Err(e) = written {
                tracing::debug!(parent: &id.span(), reason = %reason, error = %e, "cannot record event");
            }
        })
    }
}

/// kubelet's container reference (`pkg/kubelet/container/ref.go`): `spec.containers{name}`,
/// `spec.initContainers{name}` or `spec.ephemeralContainers{name}`.
fn field_path(pod: &Pod, container: &str) -> String {
    let spec = pod.spec.as_ref();
    let named = |names: Option<Vec<&str>>| names.is_some_and(|names| names.contains(&container));
    if named(
        spec.and_then(|s| s.init_containers.as_ref())
            .map(|cs| cs.iter().map(|c| c.name.as_str()).collect()),
    ) {
        format!("spec.initContainers{{{container}}}")
    } else if named(
        spec.and_then(|s| s.ephemeral_containers.as_ref())
            .map(|cs| cs.iter().map(|c| c.name.as_str()).collect()),
    ) {
        format!("spec.ephemeralContainers{{{container}}}")
    } else {
        format!("spec.containers{{{container}}}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events about an ephemeral container point at `spec.ephemeralContainers{name}`.
    #[test]
    fn field_paths_name_the_container_list() {
        let c = |name: &str| k8s_openapi::api::core::v1::Container {
            name: name.into(),
            ..Default::default()
        };
        let pod = Pod {
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                containers: vec![c("app")],
                init_containers: Some(vec![c("init")]),
                ephemeral_containers: Some(vec![k8s_openapi::api::core::v1::EphemeralContainer {
                    name: "debugger".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(field_path(&pod, "app"), "spec.containers{app}");
        assert_eq!(field_path(&pod, "init"), "spec.initContainers{init}");
        assert_eq!(field_path(&pod, "debugger"), "spec.ephemeralContainers{debugger}");
    }

    /// A container's death is kept for the debug endpoint, never written to the API (kubelet
    /// records no such reason); kubelet's reasons are.
    #[test]
    fn container_deaths_stay_off_the_api() {
        let api = Arc::new(dockerlet_kube::fake::FakeKube::new("n1"));
        let mut recorder = EventRecorder::new(Some(api), EventLimits::default());
        let pod = Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("p".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let id = dockerlet_messages::PodRef::of(&pod);
        let event = |reason: &str| RecordEvent::pod(&id, EventType::Normal, reason, "m".into()).in_container(Some("c"));
        assert!(recorder.record(event("ContainerDied"), Some(&pod)).is_none());
        assert!(recorder.record(event("Started"), Some(&pod)).is_some());
        let reasons: Vec<String> = recorder.recent().into_iter().map(|e| e.reason).collect();
        assert_eq!(reasons, ["ContainerDied", "Started"], "both on the debug endpoint");
    }

    /// The ring keeps the newest events only.
    #[test]
    fn the_ring_keeps_the_newest_events() {
        let mut recorder = EventRecorder::new(None, EventLimits::default());
        for i in 0..EVENT_LOG_SIZE + 5 {
            recorder.note("Test", format!("o{i}"), String::new());
        }
        let recent = recorder.recent();
        assert_eq!(recent.len(), EVENT_LOG_SIZE);
        assert_eq!(recent[0].object, "o5");
        let about_a_pod = RecordEvent::pod(&Default::default(), EventType::Normal, "Test", String::new());
        assert!(recorder.record(about_a_pod, None).is_none(), "standalone: no API write");
    }
}
