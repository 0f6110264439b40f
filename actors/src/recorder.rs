//! The event recorder: every noteworthy event goes to the debug page's ring buffer and, in
//! cluster mode, to the API as a v1 Event (kubelet's `pkg/kubelet/events` reasons through
//! client-go's recorder: counted, combined and rate-limited by
//! [`dockerlet_kube::recorder::EventCorrelator`]). Owned by the Supervisor, which knows the pods.

use std::collections::VecDeque;
use std::future::Future;

use dockerlet_kube::recorder::{Correlated, EventCorrelator, EventLimits};
use std::sync::Arc;

use dockerlet_kube::{KubeClient, PodEventRef};
use dockerlet_messages::debug::DebugEvent;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

/// How many debug events are kept.
const EVENT_LOG_SIZE: usize = 200;

/// Reasons kubelet does not record, kept for the debug endpoint only (never written to the API,
/// where a client counting a pod's events would find them): a container's death.
const DEBUG_ONLY: [&str; 1] = ["ContainerDied"];

/// Whether an event reports trouble (kubelet's `v1.EventTypeWarning`) or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Routine.
    Normal,
    /// Something failed.
    Warning,
}

impl EventType {
    /// The type kubelet gives events of this reason (`pkg/kubelet/events/event.go`).
    pub fn of(reason: &str) -> EventType {
        const WARNINGS: [&str; 21] = [
            "BackOff",
            "InspectFailed",
            "ErrImageNeverPull",
            "LifecycleHTTPFallback",
            "FailedToRetrieveImagePullSecret",
            crate::pod_worker::sync::FAILED_MOUNT,
            "Failed",
            "Unhealthy",
            "FailedPostStartHook",
            "FailedPreStopHook",
            "ProbeWarning",
            "FailedCreatePodSandBox",
            "DNSConfigForming",
            "MissingClusterDNS",
            // The OOM killer: a container over its limit, or the node out of memory.
            "OOMKilled",
            "SystemOOM",
            // Admission rejections (kubelet's rejectPod records them as warnings).
            dockerlet_pod::admission::SYSCTL_FORBIDDEN,
            dockerlet_pod::admission::APPARMOR,
            dockerlet_pod::admission::SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED,
            dockerlet_pod::admission::UNSUPPORTED_SECURITY_CONTEXT,
            dockerlet_pod::admission::UNSUPPORTED_POD_SPEC,
        ];
        // kubelet's predicate admission: OutOfcpu, OutOfpods, …, and the predicates' names.
        let refused_by_node = reason.starts_with("OutOf")
            || dockerlet_pod::node_fit::PREDICATES.contains(&reason)
            || reason == dockerlet_pod::admission::POD_OS_NOT_SUPPORTED
            || reason == dockerlet_pod::admission::POD_OS_SELECTOR_NODE_LABEL_DOES_NOT_MATCH;
        if WARNINGS.contains(&reason) || refused_by_node {
            EventType::Warning
        } else {
            EventType::Normal
        }
    }

    /// The type of an event: as [`EventType::of`], except that an image pull's back-off is
    /// Normal (kubelet's image manager records `BackOff` "Back-off pulling image …" as Normal,
    /// its crash-loop `BackOff` as Warning).
    pub fn of_event(reason: &str, message: &str) -> EventType {
        if reason == "BackOff" && message.starts_with("Back-off pulling image") {
            return EventType::Normal;
        }
        EventType::of(reason)
    }

    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

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
            time: Timestamp::now().to_string(),
            reason: reason.to_string(),
            object,
            container: None,
            message,
        });
    }

    /// Keep `event` for the debug page; for a pod in cluster mode, also return the API write to
    /// run (`None` when rate-limited or standalone).
    pub fn record(&mut self, event: DebugEvent, pod: Option<&Pod>) -> Option<impl Future<Output = ()> + 'static> {
        let write = pod
            .filter(|_| !DEBUG_ONLY.contains(&event.reason.as_str()))
            .and_then(|pod| self.api_write(&event, pod));
        self.keep(event);
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

    fn api_write(&mut self, event: &DebugEvent, pod: &Pod) -> Option<impl Future<Output = ()> + 'static> {
        let api = self.api.clone()?;
        let field_path = event.container.as_deref().map(|c| field_path(pod, c));
        let (name, namespace, uid) = dockerlet_pod::spec::pod_identity(pod);
        let (name, namespace, uid) = (name.to_string(), namespace.to_string(), uid.to_string());
        // Named as kubelet names them: `<pod>.<unix nanoseconds in hex>`.
        let Correlated {
            name: event_name,
            message,
            count,
        } = self.correlator.observe(
            (&uid, &name),
            &event.reason,
            field_path.as_deref().unwrap_or_default(),
            &event.message,
            std::time::Instant::now(),
            || format!("{:x}", Timestamp::now().as_nanosecond()),
        )?;
        let kind = EventType::of_event(&event.reason, &event.message);
        let reason = event.reason.clone();
        Some(async move {
            let involved = PodEventRef {
                namespace: &namespace,
                pod: &name,
                uid: &uid,
                field_path: field_path.as_deref(),
            };
            let written = api
                .record_pod_event(&event_name, involved, kind.as_str(), &reason, &message, count)
                .await;
            if let Err(e) = written {
                tracing::debug!(pod.uid = %uid, pod.name = %name, reason = %reason, error = %e, "cannot record event");
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

    /// Failures are Warnings, everything else Normal, as kubelet types them.
    #[test]
    fn failures_are_warnings() {
        assert_eq!(EventType::of("BackOff"), EventType::Warning);
        assert_eq!(EventType::of("Unhealthy"), EventType::Warning);
        assert_eq!(EventType::of("SysctlForbidden"), EventType::Warning);
        assert_eq!(EventType::of("Started"), EventType::Normal);
        assert_eq!(EventType::of("Pulled"), EventType::Normal);
        assert_eq!(
            EventType::of_event("BackOff", "Back-off restarting failed container c in pod p_ns(u)"),
            EventType::Warning
        );
        assert_eq!(
            EventType::of_event("BackOff", "Back-off pulling image \"busybox\""),
            EventType::Normal
        );
    }

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
        let event = |reason: &str| DebugEvent {
            time: Timestamp::now().to_string(),
            reason: reason.into(),
            object: "default/p".into(),
            container: Some("c".into()),
            message: "m".into(),
        };
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
        assert!(
            recorder.record(recent[0].clone(), None).is_none(),
            "standalone: no API write"
        );
    }
}
