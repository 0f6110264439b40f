//! The Docker side of a PodWorker: one sync ([`sync_pod`], kubelet's `SyncPod` of
//! `pkg/kubelet/kuberuntime/kuberuntime_manager.go`), a future that owns everything it uses, so
//! the actor's mailbox stays open while it runs. It orchestrates: read the pod cache, set up
//! volumes, decide with the pure plan, then carry the actions out — stops in
//! [`teardown`](super::teardown), the sandbox in [`sandbox`](super::sandbox), each container's
//! start in [`start`](super::start). The termination is [`terminate_pod`](super::teardown::terminate_pod).

use dockerlet_messages::debug::EventType;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dockerlet_messages::probe::ProbeResults;
use dockerlet_messages::runtime::{ContainerRole, ObservedContainer, RuntimeState};
use dockerlet_messages::PodUid;
use dockerlet_pod::plan::{compute_pod_actions_keeping, PodActions, SANDBOX_CHANGED};
use dockerlet_pod::spec::{pod_grace, pod_identity, MIN_GRACE};
use dockerlet_pod::status::WaitingReason;
use dockerlet_runtime::RuntimeError;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::context::{SyncContext, CACHE_WAIT};
use super::network::SandboxNetworkError;
use super::outcome::{Notes, SyncError, SyncNote, SyncOutcome, WorkerEvent};
use super::pod_cgroup::ensure_pod_cgroup;
use super::sandbox::{sandbox_ip, PodSandbox};
use super::start::Starter;
use super::teardown::{
    remove_dangling_logs, remove_dir_with_mounts, stop_all, stop_container, PodStop, Settle, StopTarget,
};

/// kubelet's event reason for a volume that could not be set up.
pub const FAILED_MOUNT: &str = "FailedMount";

/// How soon a pod whose volumes could not be set up is synced again (kubelet's volume
/// reconciler retries within seconds; the pod's error back-off is 10 s).
const VOLUME_RETRY: Duration = Duration::from_secs(2);

/// What a sync may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Make Docker match the pod.
    Run,
    /// The node failed the pod (its deadline passed, the node shuts down): only stop what
    /// still runs, with `grace` instead of the pod's own grace period when given.
    StopOnly {
        /// The grace period to stop with.
        grace: Option<Duration>,
    },
}

/// Read the pod cache (newer than `newer_than`, the end of an earlier action nobody observed),
/// decide, act — observing each container acted on, so the cache holds the result. With
/// [`SyncMode::StopOnly`] (the node failed the pod) the only action is stopping whatever still
/// runs.
pub async fn sync_pod(
    sync: SyncContext,
    pod: Arc<Pod>,
    probes: ProbeResults,
    newer_than: Option<Instant>,
    mode: SyncMode,
    attempt_floor: std::collections::BTreeMap<String, u32>,
    notes: Notes,
) -> SyncOutcome {
    let uid = PodUid::of(&pod);
    let mut outcome = SyncOutcome {
        notes,
        ..SyncOutcome::default()
    };
    let observed = match sync.cache.get_newer_than(&uid, newer_than, CACHE_WAIT).await {
        Ok(o) => o,
        Err(e) => {
            outcome.errors.push(e.into());
            outcome.actions_summary = "retry: pod cache not refreshed (docker unreachable?)".to_string();
            outcome.unobserved = newer_than;
            return outcome;
        }
    };
    if observed.is_empty() {
        outcome.notes.send(SyncNote::NothingCreatedYet);
    }
    let stop_only = mode != SyncMode::Run;
    if finished(&sync, &pod, &observed, &probes, stop_only) {
        // kubelet's volume manager unmounts the volumes of a pod that finished (Succeeded or
        // Failed, nothing running), and its pod worker never starts it again.
        if let Err(e) = tear_down_volumes(&sync, &uid).await {
            tracing::warn!(error = %e, "cannot tear down the volumes of a finished pod");
            outcome.errors.push(e);
        }
        outcome.actions_summary = "none: the pod finished".to_string();
        outcome.observed = Some(observed);
        return outcome;
    }
    if !stop_only && !set_up_volumes(&sync, &pod, &observed, &mut outcome).await {
        outcome.observed = Some(observed);
        return outcome;
    }
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let cgroup_unknown = sync.config.cgroups.as_ref().is_some_and(|t| !t.knows(pod_uid));
    if !stop_only && !observed.is_empty() && cgroup_unknown {
        // A pod an earlier agent started: its cgroup (and its share of the burstable cgroup) is
        // set up at its first sync; later syncs of the pod (one this agent set up) skip the
        // check, which is file I/O on the blocking pool.
        if let Err(e) = ensure_pod_cgroup(&sync, &pod).await {
            tracing::warn!(error = %e, "could not set up the pod cgroup");
        }
    }
    let actions = plan(&sync, &pod, &observed, &probes, stop_only, &attempt_floor);
    outcome.actions_summary = actions.summary();
    note_backing_off(&pod, &actions, &mut outcome);
    outcome.backoff_until = actions.backing_off.iter().map(|b| b.until).min();
    if actions.is_idle() {
        outcome.observed = Some(observed);
        return outcome;
    }
    if !observed.is_empty() {
        outcome.notes.send(SyncNote::Observed(observed.clone()));
    }
    let mut executor = Executor {
        sync: &sync,
        pod: &pod,
        outcome: &mut outcome,
        kill_grace: match mode {
            SyncMode::StopOnly { grace } => grace,
            SyncMode::Run => None,
        },
    };
    executor.run(&actions, &observed).await;
    outcome.observed = sync.cache.pod(&uid);
    if started_a_sidecar(&pod, &actions) {
        let now = Timestamp::now();
        outcome.backoff_until = Some(outcome.backoff_until.map_or(now, |b| b.min(now)));
    }
    outcome
}

/// What the sync does: only stop what runs when the node failed the pod (`stop_only`), else
/// kubelet's computePodActions; a pod that ran before under this UID counts its containers'
/// attempts on from `attempt_floor`.
fn plan(
    sync: &SyncContext,
    pod: &Pod,
    observed: &[ObservedContainer],
    probes: &ProbeResults,
    stop_only: bool,
    attempt_floor: &std::collections::BTreeMap<String, u32>,
) -> PodActions {
    let mut actions = if stop_only {
        PodActions {
            kill_pod: observed.iter().any(|c| c.state == RuntimeState::Running),
            kill_reason: "the pod is being stopped (evicted, shut down or failed by the node)".into(),
            ..PodActions::default()
        }
    } else {
        let keep = sync.config.container_gc.instances_kept_by_sync();
        compute_pod_actions_keeping(pod, observed, Timestamp::now(), &sync.config.backoff, probes, keep)
    };
    // A pod that ran before under this UID counts its containers' attempts on.
    for start in &mut actions.start {
        if let Some(floor) = attempt_floor.get(&start.name) {
            start.attempt = start.attempt.max(*floor);
        }
    }
    actions
}

/// Set up the pod's volumes (kubelet's volume manager, before any container); their failures
/// are FailedMount events. Returns whether the sync goes on: containers that run already keep
/// their mounts (kubelet only fails the refresh), a pod none of whose containers was ever
/// created waits for its volumes.
async fn set_up_volumes(
    sync: &SyncContext,
    pod: &Arc<Pod>,
    observed: &[ObservedContainer],
    outcome: &mut SyncOutcome,
) -> bool {
    let started = observed.iter().any(|c| c.role != ContainerRole::Sandbox);
    let mut failures = super::volumes::set_up(sync, pod).await;
    if !started {
        failures.extend(super::volumes::check_host_paths(pod).await);
    }
    if failures.is_empty() {
        return true;
    }
    for f in &failures {
        tracing::warn!(volume = %f.volume, reason = %f.reason, "volume set-up failed");
        outcome
            .events
            .push(WorkerEvent::pod(EventType::Warning, FAILED_MOUNT, f.to_string()));
    }
    outcome.mount_failures = failures.iter().map(ToString::to_string).collect();
    if started {
        return true;
    }
    outcome.actions_summary = format!(
        "wait for volumes: {}",
        failures
            .iter()
            .map(|f| f.volume.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    outcome.backoff_until = Timestamp::now().checked_add(VOLUME_RETRY).ok();
    false
}

/// The containers in CrashLoopBackOff: their waiting reason, BackOff event and restart time.
fn note_backing_off(pod: &Pod, actions: &PodActions, outcome: &mut SyncOutcome) {
    let dockerlet_pod::spec::PodIdentity {
        name,
        namespace,
        uid: uid_str,
    } = pod_identity(pod);
    for b in &actions.backing_off {
        outcome.restart_at.insert(b.name.clone(), b.until);
        outcome.waiting.insert(
            b.name.clone(),
            WaitingReason {
                reason: "CrashLoopBackOff".to_string(),
                message: format!(
                    "back-off {} restarting failed container={} pod={name}_{namespace}({uid_str})",
                    humanize(b.delay),
                    b.name
                ),
            },
        );
        outcome.events.push(WorkerEvent::container(
            EventType::Warning,
            &b.name,
            "BackOff",
            // kubelet's format.Pod: name_namespace(uid).
            format!(
                "Back-off restarting failed container {} in pod {name}_{namespace}({uid_str})",
                b.name
            ),
        ));
    }
}

/// Whether the sync started a sidecar, which may let the next init or app container start: the
/// worker syncs again at once (kubelet's sync on the sidecar's ContainerStarted event; the worker
/// observed its own start, so no lifecycle event comes, and a sidecar without a startup probe has
/// no probe result to wake the worker either).
fn started_a_sidecar(pod: &Pod, actions: &PodActions) -> bool {
    actions.start.iter().any(|s| {
        s.role == ContainerRole::Init
            && pod
                .spec
                .as_ref()
                .and_then(|spec| spec.init_containers.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.name == s.name && dockerlet_pod::plan::is_sidecar(c))
    })
}

/// Whether the pod is done on this node: nothing of it runs and its phase is Succeeded or Failed
/// (from the containers as observed, or `failed_by_node`: its deadline passed).
fn finished(
    sync: &SyncContext,
    pod: &Pod,
    observed: &[ObservedContainer],
    probes: &ProbeResults,
    failed_by_node: bool,
) -> bool {
    if observed.is_empty() || observed.iter().any(|c| c.state != RuntimeState::Exited) {
        return false;
    }
    if failed_by_node {
        return true;
    }
    let status = dockerlet_pod::status::generate(&dockerlet_pod::status::StatusInput {
        pod,
        observed,
        waiting: &HashMap::new(),
        probes,
        host_ip: &sync.config.host_ip,
        previous: None,
        known_pod_ip: None,
        now: Timestamp::now(),
        failure: None,
    });
    matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"))
}

/// Unmount and remove a finished pod's volumes (`<pod dir>/volumes`, `<pod dir>/volume-subpaths`);
/// the rest of its directory (hosts file, termination messages) stays until the pod is removed.
async fn tear_down_volumes(sync: &SyncContext, uid: &PodUid) -> Result<(), SyncError> {
    let pod_dir = dockerlet_pod::volume::pod_dir(&sync.config.root_dir, &uid.0);
    remove_dir_with_mounts(pod_dir.join("volumes")).await?;
    remove_dir_with_mounts(pod_dir.join("volume-subpaths")).await
}

/// Carries out one [`PodActions`].
struct Executor<'a> {
    sync: &'a SyncContext,
    pod: &'a Arc<Pod>,
    outcome: &'a mut SyncOutcome,
    /// Stops the pod with this grace period instead of its own (a node shutdown's).
    kill_grace: Option<Duration>,
}

impl Executor<'_> {
    async fn run(&mut self, actions: &PodActions, observed: &[ObservedContainer]) {
        let grace = self
            .kill_grace
            .map_or_else(|| pod_grace(self.pod), |g| g.max(MIN_GRACE));
        // kubelet's SyncPod records this when it creates a sandbox while the pod had one.
        if actions.create_sandbox.is_some() && observed.iter().any(|c| c.role == ContainerRole::Sandbox) {
            self.outcome.events.push(WorkerEvent::pod(
                EventType::Normal,
                "SandboxChanged",
                SANDBOX_CHANGED.to_string(),
            ));
        }
        if actions.kill_pod {
            let (events, notes) = (&mut self.outcome.events, &self.outcome.notes);
            let how = PodStop {
                grace,
                settle: Settle::Observe,
                reason: &actions.kill_reason,
            };
            if let Err(errors) = stop_all(self.sync, Some(self.pod), observed, how, events, notes).await {
                self.outcome.errors.extend(errors.into_iter().map(SyncError::from));
                return;
            }
        }
        for kill in &actions.kill {
            self.outcome.events.push(WorkerEvent::container(
                EventType::Normal,
                &kill.name,
                "Killing",
                kill.reason.clone(),
            ));
            self.flush_events();
            let Some(c) = observed.iter().find(|c| c.id == kill.id) else {
                continue;
            };
            let target = StopTarget {
                id: &c.id,
                name: &c.name,
                pod_ip: sandbox_ip(observed),
                turn: None,
                reason: &kill.reason,
            };
            let grace = kill.grace.unwrap_or(grace);
            let unobserved = &mut self.outcome.unobserved;
            let (result, event) =
                stop_container(self.sync, Some(self.pod), target, grace, Settle::Observe, unobserved).await;
            self.outcome.events.extend(event);
            if let Err(e) = result {
                return self.fail(e);
            }
        }
        self.start_all(actions, observed).await;
        // Dead instances go after the restart, which should not wait for them; then the log
        // links left dangling by removed instances.
        for id in &actions.remove {
            if let Err(e) = self.sync.remove(id, "a dead instance no status needs any more").await {
                tracing::warn!(container = %id, error = %e, "could not remove dead container");
            }
        }
        if !actions.remove.is_empty() {
            remove_dangling_logs(self.sync).await;
        }
    }

    /// The sandbox, if it needs one, then every container to start.
    async fn start_all(&mut self, actions: &PodActions, observed: &[ObservedContainer]) {
        if actions.start.is_empty() {
            return;
        }
        let sandbox = PodSandbox {
            sync: self.sync,
            pod: self.pod,
        };
        let sandbox = match actions.create_sandbox {
            Some(attempt) => match sandbox.create(attempt, self.outcome).await {
                Ok(s) => s,
                Err(e) => {
                    // kubelet refuses a pod needing the network while there is none with
                    // NetworkNotReady, before any sandbox.
                    let event = match &e {
                        SyncError::Network(n @ SandboxNetworkError::NotReady) => {
                            WorkerEvent::pod(EventType::Warning, "NetworkNotReady", n.to_string())
                        }
                        _ => WorkerEvent::pod(
                            EventType::Warning,
                            "FailedCreatePodSandBox",
                            format!("Failed to create pod sandbox: {e}"),
                        ),
                    };
                    self.outcome.events.push(event);
                    return self.outcome.errors.push(e);
                }
            },
            None => match observed
                .iter()
                .find(|c| c.role == ContainerRole::Sandbox && c.state == RuntimeState::Running)
            {
                Some(s) => s.clone(),
                None => return,
            },
        };
        for start in &actions.start {
            let mut starter = Starter {
                sync: self.sync,
                pod: self.pod,
                outcome: self.outcome,
            };
            starter.start(start, &sandbox, observed).await;
        }
    }

    fn fail(&mut self, error: RuntimeError) {
        self.outcome.errors.push(error.into());
    }

    /// Record the events so far now, before something that takes time.
    fn flush_events(&mut self) {
        self.outcome.notes.flush(&mut self.outcome.events);
    }
}

fn humanize(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 {
        format!("{}m{}s", secs / 60, secs % 60)
    } else if secs > 0 {
        format!("{secs}s")
    } else {
        format!("{}ms", d.as_millis())
    }
}
