//! The PodWorker's state besides its lifecycle, in named groups: what it observed, what it
//! published, its diagnostics and its timing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use dockerlet_messages::probe::{ProbeResults, ProbeTarget};
use dockerlet_messages::runtime::ObservedContainer;
use dockerlet_messages::ContainerId;
use dockerlet_metrics::WorkerOperation;
use dockerlet_pod::status::WaitingReason;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;

use super::mount_events;

/// What the worker last saw of its containers and why they wait.
#[derive(Default)]
pub(super) struct Observed {
    /// Docker's view after the last sync, to recompute status when a probe result changes.
    pub(super) last_observed: Vec<ObservedContainer>,
    /// The IP of the pod's sandbox when last seen running (kept for the status of a pod whose
    /// sandbox stopped before a status with it went out).
    pub(super) pod_ip: Option<String>,
    /// Containers already known to have exited, so each death is reported once.
    pub(super) known_exited: HashSet<ContainerId>,
    /// Exited containers whose OOM kill was reported (Docker's OOMKilled may come with the
    /// inspect after the death was seen).
    pub(super) known_oom_killed: HashSet<ContainerId>,
    /// False until the first observation; deaths before the worker existed are not events.
    pub(super) observed_once: bool,
    /// Why containers wait, from the last sync (kubelet's reasonCache).
    pub(super) waiting: HashMap<String, WaitingReason>,
    /// When each container in CrashLoopBackOff starts again, from the last sync.
    pub(super) restart_at: HashMap<String, Timestamp>,
    /// Earliest back-off expiry among waiting containers.
    pub(super) backoff_until: Option<Timestamp>,
    /// Published probe results, for status and for killing containers whose liveness or
    /// startup probe failed.
    pub(super) probes: ProbeResults,
}

/// What the worker last reported (status, probe targets, final status).
#[derive(Default)]
pub(super) struct Published {
    /// Last status sent, to skip unchanged ones and keep transition times.
    pub(super) last_status: Option<PodStatus>,
    /// The pod object last sent with a status.
    pub(super) published_pod: Option<Arc<Pod>>,
    /// The running containers last given to the ProbeActor.
    pub(super) watched: Vec<ProbeTarget>,
    /// The final status of an API pod deleted while it ran, sent with `RemovePodStatus`.
    pub(super) final_status: Option<Pod>,
    /// The status held for Docker's OOM verdict: when it is published anyway.
    pub(super) verdict_timer: Option<actix::SpawnHandle>,
    /// SIGKILLed containers whose OOM verdict was waited for in vain: published as they are.
    pub(super) oom_waited: HashSet<ContainerId>,
}

/// Why the worker does what it does, for the debug page and events.
pub(super) struct Diagnostics {
    /// Summary of the last decision, for the debug endpoint.
    pub(super) next_action: String,
    /// Last error met.
    pub(super) last_error: Option<String>,
    /// When the last failed sync or termination ended.
    pub(super) last_error_at: Option<Timestamp>,
    /// When a failed sync or termination is tried again; `None` once one succeeded.
    pub(super) retry_at: Option<Timestamp>,
    /// FailedMount messages of the last sync's volume set-up.
    pub(super) mount_failures: Vec<String>,
    /// When each failing volume's FailedMount event is repeated (kubelet's back-off).
    pub(super) mount_events: mount_events::MountEventBackoff,
}

/// What the worker measures (pod start and pod worker durations).
pub(super) struct Timing {
    /// When the worker first saw the pod (`kubelet_pod_start_duration_seconds` starts here).
    pub(super) first_seen: Instant,
    /// Set once the pod ran: its start duration is observed once.
    pub(super) start_observed: bool,
    /// What the next sync counts as (`kubelet_pod_worker_duration_seconds{operation}`).
    pub(super) next_operation: WorkerOperation,
    /// When the sync or termination in flight began.
    pub(super) operation_began: Instant,
}

impl Default for Diagnostics {
    fn default() -> Self {
        Diagnostics {
            next_action: "sync".to_string(),
            last_error: None,
            last_error_at: None,
            retry_at: None,
            mount_failures: Vec::new(),
            mount_events: Default::default(),
        }
    }
}

impl Timing {
    /// Timing from now: the pod first seen, its first operation a create.
    pub(super) fn new() -> Self {
        Timing {
            first_seen: Instant::now(),
            start_observed: false,
            next_operation: WorkerOperation::create,
            operation_began: Instant::now(),
        }
    }
}
