//! Stopping and removing a pod's containers (kubelet's `killPodWithSyncResult` and
//! `killContainer`, `pkg/kubelet/kuberuntime/kuberuntime_container.go`): each container's preStop
//! hook within its grace period, sidecars after the others in reverse order, the sandbox last;
//! then, for a pod that goes, its containers, directory, log files and cgroup.

use dockerlet_messages::debug::EventType;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dockerlet_messages::runtime::{ContainerRole, ObservedContainer, RuntimeState};
use dockerlet_messages::{ContainerId, PodUid};
use dockerlet_pod::spec::MIN_GRACE;
use dockerlet_runtime::RuntimeError;
use k8s_openapi::api::core::v1::Pod;

use super::context::SyncContext;
use super::context::CACHE_WAIT;
use super::outcome::{Notes, SyncError, TerminateOutcome, WorkerEvent};
use super::pod_cgroup::remove_pod_cgroup;
use super::sandbox::sandbox_ip;
use dockerlet_probe::{Caller, Outcome, Target};

/// How long a preStop hook may run past the stop that follows its grace period before the agent
/// ends it itself (the stop normally ends it with the container).
const PRE_STOP_OVERRUN: Duration = Duration::from_secs(5);

/// Grace period for stopping a sandbox: the pause process exits on SIGTERM at once.
const SANDBOX_STOP_GRACE: Duration = Duration::from_secs(2);

/// Unmount everything under `dir` and remove it, on the blocking pool.
pub(super) async fn remove_dir_with_mounts(dir: std::path::PathBuf) -> Result<(), SyncError> {
    let target = dir.clone();
    match tokio::task::spawn_blocking(move || dockerlet_host::volume_dirs::remove_pod_dir(&target)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(SyncError::RemovePodDir { path: dir, source }),
        Err(e) => Err(SyncError::RemovePodDir {
            path: dir,
            source: dockerlet_host::volume_dirs::VolumeDirError::Io {
                op: "finish removing",
                path: std::path::PathBuf::new(),
                source: std::io::Error::other(e.to_string()),
            },
        }),
    }
}

/// Stop every container of the pod (app and init first, with the grace period; then the
/// sandbox) and remove them all; then make sure with Docker that none is left (a create that
/// was in flight when termination began may have landed since).
pub async fn terminate_pod(
    sync: SyncContext,
    pod: Arc<Pod>,
    grace: Option<Duration>,
    notes: Notes,
    reason: String,
) -> TerminateOutcome {
    let uid = PodUid::of(&pod);
    let mut outcome = TerminateOutcome {
        notes,
        ..TerminateOutcome::default()
    };
    let observed = match sync.cache.get_newer_than(&uid, None, CACHE_WAIT).await {
        Ok(o) => o,
        Err(e) => {
            outcome.errors.push(e.into());
            return outcome;
        }
    };
    let grace = grace
        .or_else(|| {
            observed
                .iter()
                .find_map(|c| c.pod_grace_seconds)
                .map(|s| Duration::from_secs(s.max(0) as u64))
        })
        .unwrap_or(Duration::from_secs(30))
        .max(MIN_GRACE);
    // An API pod deleted while it ran reports how its containers ended before it goes.
    let deleted_api_pod = pod.metadata.deletion_timestamp.is_some() && dockerlet_pod::annotations::from_api(&pod);
    let settle = if deleted_api_pod { Settle::Observe } else { Settle::No };
    let how = PodStop {
        grace,
        settle,
        reason: &reason,
    };
    if let Err(errors) = stop_all(&sync, Some(&pod), &observed, how, &mut outcome.events, &outcome.notes).await {
        outcome.errors.extend(errors.into_iter().map(SyncError::from));
        return outcome;
    }
    if deleted_api_pod {
        outcome.stopped = sync.cache.pod(&uid);
    }
    let mut remaining: Vec<ContainerId> = observed.into_iter().map(|c| c.id).collect();
    for _ in 0..3 {
        let removals = remaining.iter().map(|id| sync.remove(id, &reason));
        let failed: Vec<SyncError> = futures::future::join_all(removals)
            .await
            .into_iter()
            .filter_map(|r| r.err().map(SyncError::from))
            .collect();
        if !failed.is_empty() {
            outcome.errors.extend(failed);
            return outcome;
        }
        remaining = match sync.runtime.list_pod_containers(&sync.config.node_name, &uid).await {
            Ok(listing) => listing.into_iter().map(|c| c.id).collect(),
            Err(e) => {
                outcome.errors.push(e.into());
                return outcome;
            }
        };
        if remaining.is_empty() {
            // The pod's directory (its volumes) goes with it, as in kubelet: every mount under it
            // (tmpfs, subPath binds) unmounted first.
            let dir = dockerlet_pod::volume::pod_dir(&sync.config.root_dir, &uid.0);
            if let Err(e) = remove_dir_with_mounts(dir).await {
                outcome.errors.push(e);
            }
            // Its log files (kubelet's container GC removes a deleted pod's log directory).
            if let Some(links) = sync.config.log_links.clone() {
                let pod_uid = uid.0.clone();
                match tokio::task::spawn_blocking(move || links.remove_pod(&pod_uid)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::warn!(error = %e, "cannot remove the pod's log files"),
                    Err(e) => tracing::warn!(error = %e, "cannot remove the pod's log files"),
                }
                remove_dangling_logs(&sync).await;
            }
            // And the pod cgroup, once no container is left in it (kubelet's pod cgroup
            // cleanup).
            if let Err(e) = remove_pod_cgroup(&sync, &uid).await {
                outcome.errors.push(e);
            }
            return outcome;
        }
    }
    outcome
}

/// `/var/log/containers` links whose container is gone (kubelet's container GC), off the
/// actor thread.
pub(super) async fn remove_dangling_logs(sync: &SyncContext) {
    let Some(links) = sync.config.log_links.clone() else {
        return;
    };
    match tokio::task::spawn_blocking(move || links.remove_dangling()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "cannot remove dangling container log links"),
        Err(e) => tracing::warn!(error = %e, "cannot remove dangling container log links"),
    }
}

/// Whether a stop is followed by an observation of the stopped container (not when it is
/// removed right after).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Settle {
    /// Put its exited state into the cache (unless the PLEG's `die` already did).
    Observe,
    /// It is about to be removed.
    No,
}

/// Stop one container as kubelet does: its preStop hook first, counted against the grace
/// period; then, for a sidecar, its turn (see [`Turn`]); then the stop signal, and SIGKILL when
/// what is left of the grace period runs out (never less than [`MIN_GRACE`]). Returns the result
/// and a FailedPreStopHook event, if any.
pub(super) async fn stop_container(
    sync: &SyncContext,
    pod: Option<&Pod>,
    stop: StopTarget<'_>,
    grace: Duration,
    settle: Settle,
    unobserved: &mut Option<Instant>,
) -> (Result<(), RuntimeError>, Option<WorkerEvent>) {
    let StopTarget {
        id,
        name,
        pod_ip,
        turn,
        reason,
    } = stop;
    tracing::info!(container = %name, id = %id, reason = %reason, grace = ?grace, "stopping container");
    let began = std::time::Instant::now();
    let spec = pod.and_then(|p| p.spec.as_ref()).and_then(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
            .find(|spec| spec.name == name)
    });
    let mut event = None;
    if let Some((hook, spec)) = spec.and_then(|s| s.lifecycle.as_ref()?.pre_stop.as_ref().map(|h| (h, s))) {
        if let Ok(action) = dockerlet_pod::action::hook_action("lifecycle.preStop", hook, spec) {
            // kubelet waits for the hook up to the grace period, then stops the container with
            // what is left (at least 2 s); a hook still running goes on until the container is
            // killed. So the hook gets its own, later deadline and runs on its own task.
            let target = Target {
                runtime: sync.runtime.clone(),
                container_id: id.clone(),
                pod_ip,
                timeout: grace + MIN_GRACE + PRE_STOP_OVERRUN,
            };
            let mut running =
                tokio::task::spawn_local(
                    async move { dockerlet_probe::run(&action, &target, Caller::Lifecycle).await },
                );
            match tokio::time::timeout(grace, &mut running).await {
                Ok(Ok(outcome)) => event = hook_event(sync, name, "PreStopHook", &outcome),
                Ok(Err(e)) => tracing::warn!(container = %name, error = %e, "the preStop hook's task failed"),
                Err(_) => {
                    tracing::info!(container = %name, "preStop hook not completed in the grace period; stopping the container")
                }
            }
        }
    }
    if let Some(Turn { mut done, after }) = turn {
        // kubelet's terminationOrdering: wait, within the grace period, for the containers
        // this one outlives to stop.
        let left = grace.saturating_sub(began.elapsed());
        let _ = tokio::time::timeout(left, done.wait_for(|stopped| *stopped >= after)).await;
    }
    let remaining = grace.saturating_sub(began.elapsed()).max(MIN_GRACE);
    let result = sync.runtime.stop_container(id, remaining).await;
    // An exited container never runs again: if the PLEG's `die` already put it, it is known.
    if result.is_ok() && settle == Settle::Observe && sync.cache.state_of(id) != Some(RuntimeState::Exited) {
        sync.observe(id, unobserved).await;
    }
    (result, event)
}

/// The container a stop is for.
pub(super) struct StopTarget<'a> {
    pub(super) id: &'a ContainerId,
    pub(super) name: &'a str,
    /// For an httpGet preStop hook.
    pub(super) pod_ip: Option<String>,
    /// For a sidecar stopped with its pod: what its stop signal waits for.
    pub(super) turn: Option<Turn>,
    /// Why it is stopped, for the log.
    pub(super) reason: &'a str,
}

/// How a whole pod is stopped.
pub(super) struct PodStop<'a> {
    /// Each container's grace period.
    pub(super) grace: Duration,
    /// Whether the stopped containers' states go into the cache.
    pub(super) settle: Settle,
    /// Why, for the log.
    pub(super) reason: &'a str,
}

/// When a sidecar stopped with its pod gets its stop signal: once `done` (the groups stopped so
/// far: first every other container, then the sidecars one by one from the last declared) has
/// reached `after`.
pub(super) struct Turn {
    done: tokio::sync::watch::Receiver<usize>,
    after: usize,
}

/// Stop the pod's running containers, each with its preStop hook and `grace`, then the
/// sandboxes. Every hook starts at once; app and ordinary init containers stop in parallel, and
/// sidecars after them in reverse order of declaration (kubelet's terminationOrdering), so a
/// sidecar serves the others until they stopped.
pub(super) async fn stop_all(
    sync: &SyncContext,
    pod: Option<&Pod>,
    observed: &[ObservedContainer],
    how: PodStop<'_>,
    events: &mut Vec<WorkerEvent>,
    notes: &Notes,
) -> Result<(), Vec<RuntimeError>> {
    let PodStop { grace, settle, reason } = how;
    let running = |sandbox: bool| {
        observed
            .iter()
            .filter(move |c| c.state == RuntimeState::Running && (c.role == ContainerRole::Sandbox) == sandbox)
    };
    let pod_ip = sandbox_ip(observed);
    for c in running(false) {
        events.push(WorkerEvent::container(
            EventType::Normal,
            &c.name,
            "Killing",
            format!("Stopping container {}", c.name),
        ));
    }
    notes.flush(events);
    // Running sidecars by rank: 0 is the last declared, which stops first.
    let sidecar_running = |name: &str| running(false).any(|c| c.role == ContainerRole::Init && c.name == name);
    let sidecars: Vec<&str> = pod
        .and_then(|p| p.spec.as_ref())
        .map(|s| {
            s.init_containers
                .iter()
                .flatten()
                .rev()
                .filter(|c| dockerlet_pod::plan::is_sidecar(c) && sidecar_running(&c.name))
                .map(|c| c.name.as_str())
                .collect()
        })
        .unwrap_or_default();
    let rank = |c: &ObservedContainer| {
        (c.role == ContainerRole::Init)
            .then(|| sidecars.iter().position(|n| *n == c.name))
            .flatten()
    };
    let (stopped, done) = tokio::sync::watch::channel(0usize);
    let stop = StopAll {
        sync,
        pod,
        pod_ip: pod_ip.as_deref(),
        grace,
        settle,
        reason,
    };
    let others = async {
        let results =
            futures::future::join_all(running(false).filter(|c| rank(c).is_none()).map(|c| stop.one(c, None))).await;
        stopped.send_modify(|n| *n = (*n).max(1));
        results
    };
    let sidecar_stops = running(false).filter_map(|c| {
        let rank = rank(c)?;
        let turn = Turn {
            done: done.clone(),
            after: rank + 1,
        };
        let stopped = &stopped;
        let stop = stop.one(c, Some(turn));
        Some(async move {
            let result = stop.await;
            stopped.send_modify(|n| *n = (*n).max(rank + 2));
            result
        })
    });
    let (others, sidecars) = futures::join!(others, futures::future::join_all(sidecar_stops));
    let mut errors = Vec::new();
    for (result, event) in others.into_iter().chain(sidecars) {
        events.extend(event);
        errors.extend(result.err());
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let sandboxes = running(true).map(|c| async move {
        tracing::info!(id = %c.id, reason = %reason, "stopping sandbox");
        sync.runtime.stop_container(&c.id, SANDBOX_STOP_GRACE).await?;
        if settle == Settle::Observe {
            sync.observe(&c.id, &mut None).await;
        }
        Ok::<_, RuntimeError>(())
    });
    errors.extend(
        futures::future::join_all(sandboxes)
            .await
            .into_iter()
            .filter_map(Result::err),
    );
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The event of a hook's outcome (`hook` is `PostStartHook` or `PreStopHook`), as kubelet's:
/// a failure says only "<hook> failed" (its message may hold secrets; the agent's log has it),
/// and an HTTPS hook answered in plain HTTP that passed over HTTP is a `LifecycleHTTPFallback`
/// warning, counted in `kubelet_lifecycle_handler_http_fallbacks_total`.
pub(super) fn hook_event(sync: &SyncContext, container: &str, hook: &str, outcome: &Outcome) -> Option<WorkerEvent> {
    match outcome {
        Outcome::Success(_) => None,
        Outcome::Warning(message) => {
            sync.config.metrics.lifecycle_http_fallbacks.inc();
            Some(WorkerEvent::container(
                EventType::Warning,
                container,
                "LifecycleHTTPFallback",
                message.clone(),
            ))
        }
        Outcome::Failure(message) => {
            tracing::warn!(container = %container, error = %message, "{hook} failed");
            Some(WorkerEvent::container(
                EventType::Warning,
                container,
                &format!("Failed{hook}"),
                format!("{hook} failed"),
            ))
        }
    }
}

/// What every stop of [`stop_all`] shares.
struct StopAll<'a> {
    sync: &'a SyncContext,
    pod: Option<&'a Pod>,
    pod_ip: Option<&'a str>,
    grace: Duration,
    settle: Settle,
    reason: &'a str,
}

impl StopAll<'_> {
    async fn one(&self, c: &ObservedContainer, turn: Option<Turn>) -> (Result<(), RuntimeError>, Option<WorkerEvent>) {
        let target = StopTarget {
            id: &c.id,
            name: &c.name,
            pod_ip: self.pod_ip.map(str::to_string),
            turn,
            reason: self.reason,
        };
        let mut unobserved = None;
        stop_container(self.sync, self.pod, target, self.grace, self.settle, &mut unobserved).await
    }
}
