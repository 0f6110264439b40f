//! The Docker side of a PodWorker: one sync ([`sync_pod`]) and one termination
//! ([`terminate_pod`]), as futures that own everything they use, so the actor's mailbox stays
//! open while they run.

use dockerlet_messages::metrics::ContainerType;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dockerlet_messages::runtime::{ContainerRole, ObservedContainer, RuntimeState};
use dockerlet_messages::{ContainerId, PodUid};
use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use k8s_openapi::jiff::Timestamp;

use dockerlet_host::pod_files::{self, PodFileError};
use dockerlet_messages::probe::ProbeResults;
use dockerlet_pod::container::{
    container_env, container_spec, env_references, sandbox_spec, EnvObjects, ManagedFiles, PodContext,
};
use dockerlet_pod::credentials::DockerKeyring;
use dockerlet_pod::dns::{pod_dns, ResolvConf, ResolvConfError};
use dockerlet_pod::hosts::{self, HostnameError, PodHostname};
use dockerlet_pod::plan::{compute_pod_actions_with_probes, PodActions, StartAction};
use dockerlet_pod::spec::{host_network, pod_grace, pod_identity, MIN_GRACE};
use dockerlet_pod::status::WaitingReason;
use dockerlet_pod::volume::{Mount, VolumeError};
use dockerlet_runtime::{ContainerRuntime, RuntimeError};

use super::PodWorkerConfig;
use crate::actions::{self, Caller, Outcome, Target};
use crate::pod_cache::{NotRefreshed, PodCache};

/// How long a preStop hook may run past the stop that follows its grace period before the agent
/// ends it itself (the stop normally ends it with the container).
const PRE_STOP_OVERRUN: Duration = Duration::from_secs(5);

/// How long a postStart hook may take: as long as it likes, as kubelet's (its exec has no
/// timeout, its HTTP client none either); a pod deleted meanwhile cancels the sync.
const POST_START_TIMEOUT: Duration = actions::MAX_TIMEOUT;

/// Grace period for stopping a sandbox: the pause process exits on SIGTERM at once.
const SANDBOX_STOP_GRACE: Duration = Duration::from_secs(2);

/// kubelet's event reason for a volume that could not be set up.
pub const FAILED_MOUNT: &str = "FailedMount";

/// How soon a pod whose volumes could not be set up is synced again (kubelet's volume
/// reconciler retries within seconds; the pod's error back-off is 10 s).
const VOLUME_RETRY: Duration = Duration::from_secs(2);

/// How long a sync waits for the pod cache to be refreshed before it gives up (and retries
/// after its error back-off): far more than a relist takes, unless Docker does not answer.
const CACHE_WAIT: Duration = Duration::from_secs(10);

/// Why a sync or a termination did not finish. The worker retries: a sync after its error
/// back-off, a termination a second later.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Docker failed (unreachable, or refused an operation).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The pod cache was not refreshed in time (the PLEG cannot relist).
    #[error(transparent)]
    CacheNotRefreshed(#[from] NotRefreshed),
    /// The pod's host name cannot be formed (`spec.hostname`, `spec.subdomain`, an FQDN too
    /// long for `setHostnameAsFQDN`): the sandbox is not created.
    #[error(transparent)]
    Hostname(#[from] HostnameError),
    /// A file the agent keeps for the pod (`resolv.conf`, `etc-hosts`) or a node file it is made
    /// from cannot be read or written.
    #[error(transparent)]
    PodFile(#[from] PodFileError),
    /// The node's resolv.conf (`--resolv-conf`) does not parse.
    #[error("{}: {source}", path.display())]
    ResolvConf {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: ResolvConfError,
    },
    /// The pod cgroup could not be made (the sandbox is not created) or removed (the teardown
    /// is retried).
    #[error("pod cgroup: {0}")]
    PodCgroup(#[from] dockerlet_host::cgroup::tree::CgroupTreeError),
    /// The blocking task making or removing the pod cgroup did not finish.
    #[error("pod cgroup: the blocking task did not finish: {0}")]
    PodCgroupUnfinished(#[source] tokio::task::JoinError),
    /// The pod's RuntimeClass cannot be resolved to a runtime handler.
    #[error(transparent)]
    RuntimeClass(#[from] RuntimeClassError),
    /// The pod's directory (its volumes) could not be removed.
    #[error("remove {}: {source}", path.display())]
    RemovePodDir {
        /// `<root-dir>/pods/<uid>`.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: dockerlet_host::volume_dirs::VolumeDirError,
    },
}

/// Why the runtime handler of a pod's `runtimeClassName` is not known (kubelet's runtime class
/// manager): its sandbox is not created (FailedCreatePodSandBox) and the next sync tries again.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeClassError {
    /// A standalone node cannot read RuntimeClasses.
    #[error("failed to lookup RuntimeClass {name}: RuntimeClasses need the API server (--kubeconfig)")]
    NeedsApiServer {
        /// `spec.runtimeClassName`.
        name: String,
    },
    /// No such RuntimeClass.
    #[error("failed to lookup RuntimeClass {name}: runtimeclass.node.k8s.io {name:?} not found")]
    NotFound {
        /// `spec.runtimeClassName`.
        name: String,
    },
    /// The API server could not be asked (or the RuntimeClasses have not been listed yet).
    #[error("failed to lookup RuntimeClass {name}: {source}")]
    Api {
        /// `spec.runtimeClassName`.
        name: String,
        /// Why.
        #[source]
        source: dockerlet_kube::ApiError,
    },
}

/// Why the Secrets and ConfigMaps a container's env refers to could not be read; the container
/// waits with CreateContainerConfigError and the next sync tries again.
#[derive(Debug, thiserror::Error)]
pub enum EnvObjectsError {
    /// A standalone node has no API server to read them from.
    #[error("secrets and configmaps in env need the API server (--kubeconfig)")]
    NeedsApiServer,
    /// The API server could not be asked (or its Services have not been listed yet).
    #[error(transparent)]
    Api(#[from] dockerlet_kube::ApiError),
}

/// Why a container's security context could not be set up; the container waits with
/// CreateContainerConfigError and the next sync tries again.
#[derive(Debug, thiserror::Error)]
pub enum SecuritySetupError {
    /// The security context cannot be honoured (runAsNonRoot, a bad profile, …).
    #[error(transparent)]
    Security(#[from] dockerlet_pod::security::SecurityError),
    /// The image's user could not be inspected.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The Localhost seccomp profile could not be read.
    #[error(transparent)]
    Profile(#[from] dockerlet_host::security::SeccompProfileError),
    /// Reading the profile on the blocking pool did not finish.
    #[error("reading the seccomp profile did not finish: {0}")]
    Unfinished(#[source] tokio::task::JoinError),
}

/// What a sync did and saw.
#[derive(Debug, Default)]
pub struct SyncOutcome {
    /// Where events go as they happen.
    pub notes: Notes,
    /// Docker's view after the sync (none when Docker could not be read).
    pub observed: Option<Vec<ObservedContainer>>,
    /// Why containers wait.
    pub waiting: HashMap<String, WaitingReason>,
    /// One-line summary of the decision.
    pub actions_summary: String,
    /// Earliest back-off expiry.
    pub backoff_until: Option<Timestamp>,
    /// When each container in CrashLoopBackOff may start again (the debug page).
    pub restart_at: HashMap<String, Timestamp>,
    /// kubelet's FailedMount message of each volume that could not be set up.
    pub mount_failures: Vec<String>,
    /// Every error met; none means the sync finished.
    pub errors: Vec<SyncError>,
    /// Events to record.
    pub events: Vec<WorkerEvent>,
    /// When the last action whose result could not be observed (its inspect failed) ended: the
    /// next sync must read state from a relist after it.
    pub unobserved: Option<Instant>,
}

/// The shared things a sync or a termination works with.
#[derive(Clone)]
pub struct SyncContext {
    /// Docker.
    pub runtime: Arc<dyn ContainerRuntime>,
    /// The pod cache the PLEG fills; a sync reads it and writes what it observes itself.
    pub cache: Arc<PodCache>,
    /// The worker's settings.
    pub config: Arc<PodWorkerConfig>,
    /// kubelet's image pull back-off, of every pod (by pod UID and image).
    pub pulls: Arc<std::sync::Mutex<dockerlet_pod::backoff::PullBackoff>>,
    /// The node's image pulls at once (`serializeImagePulls`, `maxParallelImagePulls`): a pull
    /// holds a permit; none means no limit.
    pub pull_slots: Option<Arc<tokio::sync::Semaphore>>,
}

impl SyncContext {
    /// The context every worker of one node shares: no pull back-off yet, and the pull permits
    /// `config.image_pulls` allows.
    pub fn new(runtime: Arc<dyn ContainerRuntime>, cache: Arc<PodCache>, config: Arc<PodWorkerConfig>) -> Self {
        let pull_slots = match config.image_pulls {
            super::ImagePullLimit::Unlimited => None,
            super::ImagePullLimit::AtOnce(n) => Some(Arc::new(tokio::sync::Semaphore::new(n.get()))),
        };
        SyncContext {
            runtime,
            cache,
            config,
            pulls: Default::default(),
            pull_slots,
        }
    }

    /// Inspect `id` into the cache after an action on it. Returns what was seen; none if it is
    /// gone or could not be inspected (then `unobserved` says since when).
    async fn observe(&self, id: &ContainerId, unobserved: &mut Option<Instant>) -> Option<ObservedContainer> {
        match crate::pod_cache::refresh(&*self.runtime, &self.cache, id).await {
            Ok(refreshed) => refreshed.observed,
            Err(e) => {
                tracing::warn!(container = %id, error = %e, "cannot observe a container after acting on it");
                self.cache.unclaim(id);
                *unobserved = Some(Instant::now());
                None
            }
        }
    }

    /// Create a container and claim it in the cache (what its labels say; the relists leave it
    /// to this worker, which observes it after the start).
    async fn create(&self, spec: dockerlet_pod::container::CreateSpec) -> Result<ContainerId, RuntimeError> {
        let known = dockerlet_pod::labels::parse(&spec.labels);
        let image = spec.image.clone();
        tracing::debug!(name = %spec.name, "creating container");
        let id = self.runtime.create_container(spec).await?;
        if let Some(parsed) = known {
            self.cache.claim(
                parsed.observed(id.clone(), RuntimeState::Created, image),
                Instant::now(),
            );
        }
        Ok(id)
    }

    /// Remove a container and forget it.
    async fn remove(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        self.runtime.remove_container(id).await?;
        self.cache.remove(id, Instant::now());
        Ok(())
    }
}

/// An event to record about the pod, or about one of its containers (the event's fieldPath).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerEvent {
    /// Kubelet's reason (`Created`, `Killing`, …).
    pub reason: String,
    /// Kubelet's message.
    pub message: String,
    /// The container it is about, if any.
    pub container: Option<String>,
}

impl WorkerEvent {
    /// An event about a container.
    pub fn container(container: &str, reason: &str, message: String) -> Self {
        WorkerEvent {
            reason: reason.to_string(),
            message,
            container: Some(container.to_string()),
        }
    }

    /// An event about the pod as a whole.
    pub fn pod(reason: &str, message: String) -> Self {
        WorkerEvent {
            reason: reason.to_string(),
            message,
            container: None,
        }
    }
}

/// What a termination did.
#[derive(Debug, Default)]
pub struct TerminateOutcome {
    /// Where events go as they happen.
    pub notes: Notes,
    /// Every failure met while stopping and removing; the worker retries while any.
    pub errors: Vec<SyncError>,
    /// Events to record.
    pub events: Vec<WorkerEvent>,
    /// For an API pod deleted while it ran: its containers as they were once stopped, before
    /// they were removed — what its final status is made of.
    pub stopped: Option<Vec<ObservedContainer>>,
}

/// What a sync or termination tells its worker while it runs.
#[derive(actix::Message)]
#[rtype(result = "()")]
pub enum SyncNote {
    /// The sync found nothing of its pod created yet, before it creates anything (the worker
    /// publishes a first status then, if it has none out).
    NothingCreatedYet,
    /// Events that happened now: recorded as they happen (kubelet's recorder), so `Pulling`
    /// shows during a long pull and `Killing` when the stop begins, not when the sync ends.
    Events(Vec<WorkerEvent>),
}

/// What a sync tells its worker as it goes: the events so far, and that it found nothing
/// created (none in tests that call a sync directly: the events wait in the outcome, which the
/// worker records at the end either way).
#[derive(Clone, Default)]
pub struct Notes(Option<actix::Recipient<SyncNote>>);

impl Notes {
    /// Notes for `worker`.
    pub fn to(worker: actix::Recipient<SyncNote>) -> Self {
        Notes(Some(worker))
    }

    /// Send the events so far to the worker now.
    fn flush(&self, events: &mut Vec<WorkerEvent>) {
        if let Some(worker) = self.0.as_ref().filter(|_| !events.is_empty()) {
            worker.do_send(SyncNote::Events(std::mem::take(events)));
        }
    }

    fn send(&self, note: SyncNote) {
        if let Some(worker) = &self.0 {
            worker.do_send(note);
        }
    }
}

impl std::fmt::Debug for Notes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Notes").field(&self.0.is_some()).finish()
    }
}

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
    let uid = PodUid(pod.metadata.uid.clone().unwrap_or_default());
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
    if !stop_only {
        let mut failures = super::volumes::set_up(&sync, &pod).await;
        if !observed.iter().any(|c| c.role != ContainerRole::Sandbox) {
            failures.extend(super::volumes::check_host_paths(&pod).await);
        }
        if !failures.is_empty() {
            for f in &failures {
                tracing::warn!(volume = %f.volume, reason = %f.reason, "volume set-up failed");
                outcome.events.push(WorkerEvent::pod(FAILED_MOUNT, f.to_string()));
            }
            outcome.mount_failures = failures.iter().map(ToString::to_string).collect();
            // Containers that run already keep their mounts (kubelet only fails the refresh);
            // a pod none of whose containers was ever created waits for its volumes.
            let started = observed.iter().any(|c| c.role != ContainerRole::Sandbox);
            if !started {
                outcome.actions_summary = format!(
                    "wait for volumes: {}",
                    failures
                        .iter()
                        .map(|f| f.volume.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                outcome.backoff_until = Timestamp::now().checked_add(VOLUME_RETRY).ok();
                outcome.observed = Some(observed);
                return outcome;
            }
        }
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
    let mut actions = if stop_only {
        PodActions {
            kill_pod: observed.iter().any(|c| c.state == RuntimeState::Running),
            ..PodActions::default()
        }
    } else {
        compute_pod_actions_with_probes(&pod, &observed, Timestamp::now(), &sync.config.backoff, &probes)
    };
    // A pod that ran before under this UID counts its containers' attempts on.
    for start in &mut actions.start {
        if let Some(floor) = attempt_floor.get(&start.name) {
            start.attempt = start.attempt.max(*floor);
        }
    }
    outcome.actions_summary = actions.summary();
    let (name, namespace, uid_str) = pod_identity(&pod);
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
            &b.name,
            "BackOff",
            // kubelet's format.Pod: name_namespace(uid).
            format!(
                "Back-off restarting failed container {} in pod {name}_{namespace}({uid_str})",
                b.name
            ),
        ));
    }
    outcome.backoff_until = actions.backing_off.iter().map(|b| b.until).min();
    if actions.is_idle() {
        outcome.observed = Some(observed);
        return outcome;
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
    // A sidecar just started may let the next init or app container start: sync again at once
    // (kubelet's sync on the sidecar's ContainerStarted event; the worker observed its own start,
    // so no lifecycle event comes, and a sidecar without a startup probe has no probe result
    // to wake the worker either).
    let sidecar_started = actions.start.iter().any(|s| {
        s.role == ContainerRole::Init
            && pod
                .spec
                .as_ref()
                .and_then(|spec| spec.init_containers.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.name == s.name && dockerlet_pod::plan::is_sidecar(c))
    });
    if sidecar_started {
        let now = Timestamp::now();
        outcome.backoff_until = Some(outcome.backoff_until.map_or(now, |b| b.min(now)));
    }
    outcome
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

/// Unmount everything under `dir` and remove it, on the blocking pool.
async fn remove_dir_with_mounts(dir: std::path::PathBuf) -> Result<(), SyncError> {
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
) -> TerminateOutcome {
    let uid = PodUid(pod.metadata.uid.clone().unwrap_or_default());
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
    let deleted_api_pod = pod.metadata.deletion_timestamp.is_some()
        && dockerlet_pod::annotations::source(&pod) == Some(dockerlet_pod::annotations::SOURCE_API);
    let settle = if deleted_api_pod { Settle::Observe } else { Settle::No };
    if let Err(errors) = stop_all(
        &sync,
        Some(&pod),
        &observed,
        grace,
        settle,
        &mut outcome.events,
        &outcome.notes,
    )
    .await
    {
        outcome.errors.extend(errors.into_iter().map(SyncError::from));
        return outcome;
    }
    if deleted_api_pod {
        outcome.stopped = sync.cache.pod(&uid);
    }
    let mut remaining: Vec<ContainerId> = observed.into_iter().map(|c| c.id).collect();
    for _ in 0..3 {
        let removals = remaining.iter().map(|id| sync.remove(id));
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
async fn remove_dangling_logs(sync: &SyncContext) {
    let Some(links) = sync.config.log_links.clone() else {
        return;
    };
    match tokio::task::spawn_blocking(move || links.remove_dangling()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "cannot remove dangling container log links"),
        Err(e) => tracing::warn!(error = %e, "cannot remove dangling container log links"),
    }
}

/// Make (or check) the pod's cgroup with its limits, off the actor thread; returns the
/// `CgroupParent` of its containers (none for Docker's default).
async fn ensure_pod_cgroup(sync: &SyncContext, pod: &Arc<Pod>) -> Result<Option<String>, SyncError> {
    let Some(tree) = sync.config.cgroups.clone() else {
        return Ok(sync.config.cgroup_naming.parent_of(pod));
    };
    let pod = pod.clone();
    let cgroup = tokio::task::spawn_blocking(move || tree.ensure_pod(&pod))
        .await
        .map_err(SyncError::PodCgroupUnfinished)??;
    Ok(Some(cgroup))
}

/// cgroup v2: an OOM kills the container's whole cgroup, as kubelet has it
/// ([`dockerlet_host::cgroup::tree::PodCgroups::group_oom_kills`]); a failure is logged, the
/// container runs on.
async fn group_oom_kills(sync: &SyncContext, parent: Option<&str>, id: &ContainerId) {
    let (Some(tree), Some(parent)) = (sync.config.cgroups.clone(), parent) else {
        return;
    };
    if sync.config.single_process_oom_kill {
        return;
    }
    let (parent, container) = (parent.to_string(), id.0.clone());
    match tokio::task::spawn_blocking(move || tree.group_oom_kills(&parent, &container)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(container_id = %id, error = %e, "cannot set memory.oom.group"),
        Err(e) => tracing::warn!(container_id = %id, error = %e, "cannot set memory.oom.group"),
    }
}

/// Remove the pod's cgroup in every hierarchy, children first, off the actor thread.
async fn remove_pod_cgroup(sync: &SyncContext, uid: &PodUid) -> Result<(), SyncError> {
    let Some(tree) = sync.config.cgroups.clone() else {
        return Ok(());
    };
    let uid = uid.0.clone();
    tokio::task::spawn_blocking(move || tree.remove_pod(&uid))
        .await
        .map_err(SyncError::PodCgroupUnfinished)??;
    Ok(())
}

/// Whether a stop is followed by an observation of the stopped container (not when it is
/// removed right after).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// Put its exited state into the cache (unless the PLEG's `die` already did).
    Observe,
    /// It is about to be removed.
    No,
}

/// Stop one container as kubelet does: its preStop hook first, counted against the grace
/// period; then, for a sidecar, its turn (see [`Turn`]); then the stop signal, and SIGKILL when
/// what is left of the grace period runs out (never less than [`MIN_GRACE`]). Returns the result
/// and a FailedPreStopHook event, if any.
async fn stop_container(
    sync: &SyncContext,
    pod: Option<&Pod>,
    stop: StopTarget<'_>,
    grace: Duration,
    settle: Settle,
    unobserved: &mut Option<Instant>,
) -> (Result<(), RuntimeError>, Option<WorkerEvent>) {
    let StopTarget { id, name, pod_ip, turn } = stop;
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
                tokio::task::spawn_local(async move { actions::run(&action, &target, Caller::Lifecycle).await });
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
struct StopTarget<'a> {
    id: &'a ContainerId,
    name: &'a str,
    /// For an httpGet preStop hook.
    pod_ip: Option<String>,
    /// For a sidecar stopped with its pod: what its stop signal waits for.
    turn: Option<Turn>,
}

/// When a sidecar stopped with its pod gets its stop signal: once `done` (the groups stopped so
/// far: first every other container, then the sidecars one by one from the last declared) has
/// reached `after`.
struct Turn {
    done: tokio::sync::watch::Receiver<usize>,
    after: usize,
}

/// Stop the pod's running containers, each with its preStop hook and `grace`, then the
/// sandboxes. Every hook starts at once; app and ordinary init containers stop in parallel, and
/// sidecars after them in reverse order of declaration (kubelet's terminationOrdering), so a
/// sidecar serves the others until they stopped.
async fn stop_all(
    sync: &SyncContext,
    pod: Option<&Pod>,
    observed: &[ObservedContainer],
    grace: Duration,
    settle: Settle,
    events: &mut Vec<WorkerEvent>,
    notes: &Notes,
) -> Result<(), Vec<RuntimeError>> {
    let running = |sandbox: bool| {
        observed
            .iter()
            .filter(move |c| c.state == RuntimeState::Running && (c.role == ContainerRole::Sandbox) == sandbox)
    };
    let pod_ip = sandbox_ip(observed);
    for c in running(false) {
        events.push(WorkerEvent::container(
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
fn hook_event(sync: &SyncContext, container: &str, hook: &str, outcome: &Outcome) -> Option<WorkerEvent> {
    match outcome {
        Outcome::Success(_) => None,
        Outcome::Warning(message) => {
            sync.config.metrics.lifecycle_http_fallbacks.inc();
            Some(WorkerEvent::container(
                container,
                "LifecycleHTTPFallback",
                message.clone(),
            ))
        }
        Outcome::Failure(message) => {
            tracing::warn!(container = %container, error = %message, "{hook} failed");
            Some(WorkerEvent::container(
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
}

impl StopAll<'_> {
    async fn one(&self, c: &ObservedContainer, turn: Option<Turn>) -> (Result<(), RuntimeError>, Option<WorkerEvent>) {
        let target = StopTarget {
            id: &c.id,
            name: &c.name,
            pod_ip: self.pod_ip.map(str::to_string),
            turn,
        };
        let mut unobserved = None;
        stop_container(self.sync, self.pod, target, self.grace, self.settle, &mut unobserved).await
    }
}

pub(super) fn sandbox_ip(observed: &[ObservedContainer]) -> Option<String> {
    observed
        .iter()
        .filter(|c| c.role == ContainerRole::Sandbox)
        .find_map(|c| c.ip.clone())
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
        if actions.kill_pod {
            let (events, notes) = (&mut self.outcome.events, &self.outcome.notes);
            if let Err(errors) = stop_all(
                self.sync,
                Some(self.pod),
                observed,
                grace,
                Settle::Observe,
                events,
                notes,
            )
            .await
            {
                self.outcome.errors.extend(errors.into_iter().map(SyncError::from));
                return;
            }
        }
        for kill in &actions.kill {
            self.outcome
                .events
                .push(WorkerEvent::container(&kill.name, "Killing", kill.reason.clone()));
            self.flush_events();
            let Some(c) = observed.iter().find(|c| c.id == kill.id) else {
                continue;
            };
            let target = StopTarget {
                id: &c.id,
                name: &c.name,
                pod_ip: sandbox_ip(observed),
                turn: None,
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
            if let Err(e) = self.sync.remove(id).await {
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
        let sandbox = match actions.create_sandbox {
            Some(attempt) => match self.create_sandbox(attempt).await {
                Ok(s) => s,
                Err(e) => {
                    self.outcome.events.push(WorkerEvent::pod(
                        "FailedCreatePodSandBox",
                        format!("Failed to create pod sandbox: {e}"),
                    ));
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
            self.start_container(start, &sandbox, observed).await;
        }
    }

    fn fail(&mut self, error: RuntimeError) {
        self.outcome.errors.push(error.into());
    }

    /// Record the events so far now, before something that takes time.
    fn flush_events(&mut self) {
        self.outcome.notes.flush(&mut self.outcome.events);
    }

    /// Create and start the sandbox; its one inspect gives the pod IP. Its hostname and the
    /// pod's resolv.conf are formed first, as kubelet's generatePodSandboxConfig does.
    /// The Docker runtime of the pod's `runtimeClassName` (its RuntimeClass's handler, from the
    /// watch-backed cache): none without one. Docker refuses a handler it has no runtime for
    /// ("unknown or invalid runtime name"), which fails the sandbox as kubelet's CRI does.
    async fn runtime_handler(&self) -> Result<Option<String>, RuntimeClassError> {
        let Some(name) = self.pod.spec.as_ref().and_then(|s| s.runtime_class_name.clone()) else {
            return Ok(None);
        };
        let Some(api) = &self.sync.config.api else {
            return Err(RuntimeClassError::NeedsApiServer { name });
        };
        match api.runtime_class(&name).await {
            Ok(Some(class)) => Ok(Some(class.handler.clone())),
            Ok(None) => Err(RuntimeClassError::NotFound { name }),
            Err(source) => Err(RuntimeClassError::Api { name, source }),
        }
    }

    async fn create_sandbox(&mut self, attempt: u32) -> Result<ObservedContainer, SyncError> {
        let config = self.sync.config.clone();
        // kubelet's generatePodSandboxConfig names only a pod on the pod network; a hostNetwork
        // pod's bad FQDN fails its containers instead (see `start_container`).
        let hostname = if host_network(self.pod) {
            None
        } else {
            Some(PodHostname::of(self.pod, &config.dns.domain)?.kernel_hostname(self.pod)?)
        };
        let events = self.write_resolv_conf().await?;
        self.outcome.events.extend(events);
        // The pod cgroup first, with the pod's limits, as kubelet's EnsureExists before the sandbox.
        let cgroup_parent = ensure_pod_cgroup(self.sync, self.pod).await?;
        let mut spec = sandbox_spec(
            self.pod,
            &config.node_name,
            &config.sandbox_image,
            attempt,
            cgroup_parent.as_deref(),
        );
        spec.hostname = hostname;
        dockerlet_pod::security::apply_sandbox(&mut spec, self.pod);
        spec.oom_score_adj = spec.oom_score_adj.map(|v| v.max(config.min_oom_score_adj));
        spec.runtime = self.runtime_handler().await?;
        let id = self.sync.create(spec).await?;
        let started = self.sync.runtime.start_container(&id).await;
        let metrics = &self.sync.config.metrics;
        metrics.container_started(ContainerType::podsandbox, started.is_ok());
        metrics.started_pods.inc();
        if let Err(e) = started {
            metrics.started_pods_errors.inc();
            // A sandbox that cannot start is of no use; the next sync makes a new attempt.
            let _ = self.sync.remove(&id).await;
            return Err(e.into());
        }
        self.sync
            .observe(&id, &mut self.outcome.unobserved)
            .await
            .ok_or_else(|| {
                RuntimeError::NotFound {
                    what: format!("sandbox {id}"),
                }
                .into()
            })
    }

    /// Form the pod's resolv.conf (kubelet's GetPodDNS, from `--resolv-conf`) and write it to
    /// `<pod dir>/resolv.conf`, off the actor thread. Returns the events forming it produced
    /// (limits cut, no cluster DNS).
    async fn write_resolv_conf(&self) -> Result<Vec<WorkerEvent>, SyncError> {
        let config = self.sync.config.clone();
        let pod = self.pod.clone();
        let (_, _, uid) = pod_identity(self.pod);
        let path = hosts::resolv_conf_path(&config.root_dir, uid);
        let target = path.clone();
        let task = tokio::task::spawn_blocking(move || {
            let host = match &config.dns.resolv_conf {
                Some(path) => {
                    ResolvConf::parse(&pod_files::read_node_file(path)?).map_err(|source| SyncError::ResolvConf {
                        path: path.clone(),
                        source,
                    })?
                }
                None => ResolvConf::default(),
            };
            let node_ips: Vec<std::net::IpAddr> = config.host_ip.parse().into_iter().collect();
            let dns = pod_dns(&pod, &config.dns, &host, &node_ips);
            pod_files::write_pod_file(&target, &dns.resolv_conf.render())?;
            Ok::<_, SyncError>(dns.events)
        });
        let events = task.await.map_err(|e| {
            SyncError::from(PodFileError {
                what: "write",
                path,
                source: std::io::Error::other(e),
            })
        })??;
        Ok(events
            .into_iter()
            .map(|e| WorkerEvent::pod(e.reason, e.message))
            .collect())
    }

    /// The files every container of the pod mounts: `<pod dir>/resolv.conf` (formed again if
    /// it is missing, as for a sandbox an earlier agent made) and, once the pod has an IP,
    /// `<pod dir>/etc-hosts` — kubelet's managed hosts file, or the node's for host-network
    /// pods — rewritten before each container as kubelet's makeMounts does. A container that
    /// mounts its own `/etc/hosts` keeps it.
    async fn managed_files(
        &self,
        container: &Container,
        pod_ip: &str,
        names: PodHostname,
    ) -> Result<ManagedFiles, SyncError> {
        let config = self.sync.config.clone();
        let (_, _, uid) = pod_identity(self.pod);
        let resolv_conf = hosts::resolv_conf_path(&config.root_dir, uid);
        if !tokio::fs::try_exists(&resolv_conf).await.unwrap_or(false) {
            self.write_resolv_conf().await?;
        }
        let mut files = ManagedFiles {
            etc_hosts: None,
            resolv_conf: Some(resolv_conf),
        };
        if pod_ip.is_empty() || hosts::mounts_own(container, hosts::ETC_HOSTS) {
            return Ok(files);
        }
        let aliases = hosts::host_aliases(self.pod).to_vec();
        let host_net = host_network(self.pod);
        let ips = vec![pod_ip.to_string()];
        let path = hosts::etc_hosts_path(&config.root_dir, uid);
        let target = path.clone();
        let written = tokio::task::spawn_blocking(move || {
            let content = if host_net {
                let node = pod_files::read_node_file(std::path::Path::new(pod_files::NODE_HOSTS))?;
                hosts::host_network_hosts(&node, &aliases)
            } else {
                hosts::managed_hosts(&ips, &names, &aliases)
            };
            pod_files::write_pod_file(&target, &content)
        })
        .await;
        match written {
            Ok(result) => result?,
            Err(e) => {
                return Err(PodFileError {
                    what: "write",
                    path,
                    source: std::io::Error::other(e),
                }
                .into())
            }
        }
        files.etc_hosts = Some(path);
        Ok(files)
    }

    async fn start_container(
        &mut self,
        start: &StartAction,
        sandbox: &ObservedContainer,
        observed: &[ObservedContainer],
    ) {
        let spec = self.pod.spec.as_ref();
        let named = |c: &&Container| c.name == start.name;
        let (container, target) = match start.role {
            ContainerRole::Init => (
                spec.and_then(|s| s.init_containers.iter().flatten().find(named))
                    .map(Cow::Borrowed),
                None,
            ),
            ContainerRole::Ephemeral => match dockerlet_pod::spec::ephemeral_target(self.pod, &start.name) {
                Some((c, target)) => (Some(Cow::Owned(c)), target),
                None => (None, None),
            },
            _ => (
                spec.and_then(|s| s.containers.iter().find(named)).map(Cow::Borrowed),
                None,
            ),
        };
        let Some(container) = container else {
            return;
        };
        let container = container.as_ref();
        if let Err(reason) = self.ensure_image(container).await {
            // kubelet's startContainer: `Failed` "Error: ErrImagePull" (the reason alone).
            self.outcome.events.push(WorkerEvent::container(
                &container.name,
                "Failed",
                format!("Error: {}", reason.reason),
            ));
            self.outcome.waiting.insert(container.name.clone(), reason);
            return;
        }
        let config = &self.sync.config;
        let pod_ip = if host_network(self.pod) {
            config.host_ip.clone()
        } else {
            sandbox.ip.clone().unwrap_or_default()
        };
        // kubelet's GenerateRunContainerOptions works out the pod's kernel hostname for every
        // container first: a hostNetwork pod whose FQDN is too long fails here.
        let names =
            match PodHostname::of(self.pod, &config.dns.domain).and_then(|n| n.kernel_hostname(self.pod).map(|_| n)) {
                Ok(names) => names,
                Err(e) => return self.wait(container, "CreateContainerConfigError", e.to_string()),
            };
        let env_objects = match self.env_objects(container).await {
            Ok(objects) => objects,
            Err(e) => return self.wait(container, "CreateContainerConfigError", e.to_string()),
        };
        let managed_files = match self.managed_files(container, &pod_ip, names).await {
            Ok(files) => files,
            Err(e) => return self.wait(container, "CreateContainerConfigError", e.to_string()),
        };
        let config = &self.sync.config;
        let cgroup_parent = config.cgroup_naming.parent_of(self.pod);
        let ctx = PodContext {
            pod: self.pod,
            node_name: &config.node_name,
            host_ip: &config.host_ip,
            pod_ip: &pod_ip,
            sandbox_id: &sandbox.id,
            node_memory_bytes: config.node_memory_bytes,
            env_objects: &env_objects,
            allocatable: &config.allocatable,
            managed_files: &managed_files,
            cgroup_parent: cgroup_parent.as_deref(),
        };
        // The env first: subPathExpr expands with it.
        let env = match container_env(&ctx, container) {
            Ok(env) => env,
            Err(e) => return self.wait(container, "CreateContainerConfigError", e.to_string()),
        };
        let mounts = match self.prepare_mounts(container, &env).await {
            Ok(mounts) => mounts,
            Err(e) => return self.wait(container, "CreateContainerConfigError", e.to_string()),
        };
        let mut create = match container_spec(&ctx, container, start.role, start.attempt, start.backoff_step, &mounts) {
            Ok(mut c) => {
                c.oom_score_adj = c.oom_score_adj.map(|v| v.max(config.min_oom_score_adj));
                // kubelet's `--cpu-cfs-quota=false`: no quota, only the shares
                // (`pkg/kubelet/kuberuntime/kuberuntime_container_linux.go`, `if m.cpuCFSQuota`).
                if !config.cpu_cfs_quota {
                    (c.cpu_quota, c.cpu_period) = (None, None);
                }
                c
            }
            Err(e) => return self.wait(container, "CreateContainerConfigError", e.to_string()),
        };
        if let Err(e) = self.apply_security(&mut create, container, &sandbox.id).await {
            // kubelet hands a Localhost seccomp profile's path to the runtime, whose failure to
            // read it is a CreateContainerError; the rest are kubelet's own checks.
            let reason = match e {
                SecuritySetupError::Profile(_) => "CreateContainerError",
                _ => "CreateContainerConfigError",
            };
            return self.wait(container, reason, e.to_string());
        }
        match self.termination_message_bind(container, start.attempt).await {
            Ok(bind) => create.binds.extend(bind),
            Err(e) => return self.wait(container, "CreateContainerConfigError", e.to_string()),
        }
        create.runtime = match self.runtime_handler().await {
            Ok(handler) => handler,
            Err(e) => return self.wait(container, "CreateContainerConfigError", e.to_string()),
        };
        if let Some(target) = target.filter(|_| create.pid_mode.is_none()) {
            // An ephemeral container's targetContainerName: it joins that container's process
            // namespace (CRI's NamespaceMode TARGET).
            let running = observed
                .iter()
                .find(|c| c.name == target && c.role != ContainerRole::Sandbox && c.state == RuntimeState::Running);
            match running {
                Some(t) => create.pid_mode = Some(format!("container:{}", t.id)),
                None => {
                    let message = format!("target container {target:?} is not running");
                    return self.wait(container, "CreateContainerConfigError", message);
                }
            }
        }
        let id = match self.sync.create(create).await {
            Ok(id) => id,
            Err(e) => return self.wait(container, "CreateContainerError", e.to_string()),
        };
        self.outcome.events.push(WorkerEvent::container(
            &container.name,
            "Created",
            format!("Created container {}", container.name),
        ));
        self.link_logs(&container.name, start.attempt, &id).await;
        let started = self.sync.runtime.start_container(&id).await;
        let kind = match start.role {
            ContainerRole::Init => ContainerType::init_container,
            ContainerRole::Ephemeral => ContainerType::ephemeral_container,
            _ => ContainerType::container,
        };
        self.sync.config.metrics.container_started(kind, started.is_ok());
        // One inspect, started or not: the cache (and so the status) holds the result.
        self.sync.observe(&id, &mut self.outcome.unobserved).await;
        match started {
            Ok(()) => {
                self.outcome.events.push(WorkerEvent::container(
                    &container.name,
                    "Started",
                    format!("Started container {}", container.name),
                ));
                self.flush_events();
                group_oom_kills(self.sync, cgroup_parent.as_deref(), &id).await;
                self.post_start(container, &id, &pod_ip).await;
            }
            Err(e) => {
                // As kubelet's: the container waits with RunContainerError (its instance stays
                // Created with exit code 128, the last state) and the sync fails, so its error
                // back-off brings the next sync, where the dead container restarts under its
                // own back-off, not the periodic resync.
                tracing::warn!(container = %container.name, id = %id, error = %e, "container failed to start");
                self.wait(container, "RunContainerError", e.to_string());
                self.fail(e);
            }
        }
    }

    /// A new file for this instance's termination message, and its bind mount at the
    /// container's `terminationMessagePath` (none without a path). One file per instance, as
    /// kubelet's, so a restart starts from an empty message.
    async fn termination_message_bind(
        &self,
        container: &Container,
        attempt: u32,
    ) -> Result<Option<String>, PodFileError> {
        let (_, _, uid) = pod_identity(self.pod);
        let salt = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let file = dockerlet_pod::container::termination_message_file(
            &self.sync.config.root_dir,
            uid,
            &container.name,
            &format!("{attempt}-{salt:08x}"),
        );
        let Some(bind) = dockerlet_pod::container::termination_message_bind(container, &file) else {
            return Ok(None);
        };
        let target = file.clone();
        match tokio::task::spawn_blocking(move || pod_files::create_termination_message_file(&target)).await {
            Ok(created) => created.map(|()| Some(bind)),
            Err(e) => Err(PodFileError {
                what: "create",
                path: file,
                source: std::io::Error::other(e),
            }),
        }
    }

    /// The new instance's log files (`--pod-logs-dir`, `/var/log/containers`), off the actor
    /// thread. Without them the container still runs and `kubectl logs` works: a failure is
    /// logged, not the container's.
    async fn link_logs(&self, container: &str, attempt: u32, id: &ContainerId) {
        let Some(links) = self.sync.config.log_links.clone() else {
            return;
        };
        let (name, namespace, uid) = dockerlet_pod::spec::pod_identity(self.pod);
        let (name, namespace, uid) = (name.to_string(), namespace.to_string(), uid.to_string());
        let (container, id) = (container.to_string(), id.0.clone());
        let linked = tokio::task::spawn_blocking(move || {
            links.link(&dockerlet_host::pod_logs::Instance {
                namespace: &namespace,
                pod: &name,
                uid: &uid,
                container: &container,
                attempt,
                id: &id,
            })
        })
        .await;
        match linked {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "no container log file"),
            Err(e) => tracing::warn!(error = %e, "no container log file"),
        }
    }

    /// Fill the container's security fields: the image's user (one inspect per image) when
    /// runAsNonRoot or runAsGroup needs it, a Localhost seccomp profile read off the blocking
    /// pool. An error is the container's CreateContainerConfigError.
    async fn apply_security(
        &self,
        create: &mut dockerlet_pod::container::CreateSpec,
        container: &Container,
        sandbox_id: &ContainerId,
    ) -> Result<(), SecuritySetupError> {
        use dockerlet_pod::security;
        let config = &self.sync.config;
        let image_user = if security::needs_image_user(self.pod, container) {
            let image = container.image.clone().unwrap_or_default();
            Some(self.sync.runtime.image_user(&image).await?)
        } else {
            None
        };
        let profile = match security::localhost_seccomp_profile(self.pod, container)? {
            Some(name) => {
                let path = security::seccomp_profile_path(&config.root_dir, &name)?;
                let read = tokio::task::spawn_blocking(move || dockerlet_host::security::read_seccomp_profile(&path));
                Some(read.await.map_err(SecuritySetupError::Unfinished)??)
            }
            None => None,
        };
        let input = security::SecurityInput {
            pod: self.pod,
            container,
            sandbox_id,
            image_user: image_user.as_deref(),
            seccomp_profile: profile.as_deref(),
            config: &config.security,
        };
        Ok(security::apply_container(create, &input)?)
    }

    /// Resolve the container's volumeMounts and create what they need on the node (emptyDir
    /// directories and tmpfs, volume directories, hostPath type checks, subPath binds) off the
    /// actor thread.
    async fn prepare_mounts(&self, container: &Container, env: &[(String, String)]) -> Result<Vec<Mount>, VolumeError> {
        let config = &self.sync.config;
        let mounts = dockerlet_pod::volume::mounts(&config.root_dir, self.pod, container, env, &config.allocatable)?;
        let ownership = dockerlet_pod::volume::ownership(self.pod);
        tokio::task::spawn_blocking(move || dockerlet_host::volume_dirs::prepare(&mounts, ownership).map(|()| mounts))
            .await
            .unwrap_or_else(|e| {
                Err(VolumeError {
                    field: "volumeMounts".to_string(),
                    reason: format!("volume set-up did not finish: {e}"),
                })
            })
    }

    /// Read the Secrets and ConfigMaps the container's env refers to (API-server mode only;
    /// static pods may not reference them).
    async fn env_objects(&self, container: &Container) -> Result<EnvObjects, EnvObjectsError> {
        let (secrets, maps) = env_references(container);
        let mut objects = EnvObjects {
            services: self.service_env().await?,
            ..EnvObjects::default()
        };
        if secrets.is_empty() && maps.is_empty() {
            return Ok(objects);
        }
        let Some(api) = &self.sync.config.api else {
            return Err(EnvObjectsError::NeedsApiServer);
        };
        let (_, namespace, _) = pod_identity(self.pod);
        for name in secrets {
            let data = api.secret_data(namespace, &name).await?;
            objects.secrets.insert(name, data);
        }
        for name in maps {
            let data = api.config_map_data(namespace, &name).await?;
            objects.config_maps.insert(name, data);
        }
        Ok(objects)
    }

    /// The service link variables (kubelet's getServiceEnvVarMap) from the API's Service cache;
    /// none on a standalone node. An API pod waits for the cache's first list, as in kubelet; a
    /// static pod takes what the cache has.
    async fn service_env(&self) -> Result<Vec<(String, String)>, EnvObjectsError> {
        let Some(api) = &self.sync.config.api else {
            return Ok(Vec::new());
        };
        let from_api = self
            .pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(dockerlet_pod::annotations::CONFIG_SOURCE))
            .is_some_and(|s| s == "api");
        let services = api.services(from_api).await?;
        let (_, namespace, _) = pod_identity(self.pod);
        Ok(dockerlet_pod::envvars::service_env(
            services.iter().map(|s| &**s),
            namespace,
            dockerlet_pod::envvars::enable_service_links(self.pod),
        ))
    }

    /// Run the postStart hook; if it fails, kill the container (kubelet's FailedPostStartHook):
    /// the restart policy and back-off then apply.
    async fn post_start(&mut self, container: &Container, id: &ContainerId, pod_ip: &str) {
        let Some(hook) = container.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) else {
            return;
        };
        let Ok(action) = dockerlet_pod::action::hook_action("lifecycle.postStart", hook, container) else {
            return;
        };
        let target = Target {
            runtime: self.sync.runtime.clone(),
            container_id: id.clone(),
            pod_ip: Some(pod_ip.to_string()),
            timeout: POST_START_TIMEOUT,
        };
        let outcome = actions::run(&action, &target, Caller::Lifecycle).await;
        let event = hook_event(self.sync, &container.name, "PostStartHook", &outcome);
        self.outcome.events.extend(event);
        let Outcome::Failure(message) = outcome else {
            return;
        };
        // kubelet kills it (a Killing event saying why) and it waits with PostStartHookError
        // until the next sync restarts it under its restart policy and back-off.
        self.outcome.events.push(WorkerEvent::container(
            &container.name,
            "Killing",
            "FailedPostStartHook".to_string(),
        ));
        self.flush_events();
        self.outcome.waiting.insert(
            container.name.clone(),
            WaitingReason {
                reason: "PostStartHookError".to_string(),
                message: format!("PostStartHook failed: {message}"),
            },
        );
        let grace = pod_grace(self.pod);
        let stop = StopTarget {
            id,
            name: &container.name,
            pod_ip: target.pod_ip,
            turn: None,
        };
        let unobserved = &mut self.outcome.unobserved;
        let (result, event) = stop_container(self.sync, Some(self.pod), stop, grace, Settle::Observe, unobserved).await;
        self.outcome.events.extend(event);
        if let Err(e) = result {
            self.fail(e);
        }
    }

    /// The container waits with `reason`; kubelet's `Failed` event says `Error: <message>`.
    fn wait(&mut self, container: &Container, reason: &str, message: String) {
        self.outcome.events.push(WorkerEvent::container(
            &container.name,
            "Failed",
            format!("Error: {message}"),
        ));
        self.outcome.waiting.insert(
            container.name.clone(),
            WaitingReason {
                reason: reason.to_string(),
                message,
            },
        );
    }

    /// Make sure the image is there, per `imagePullPolicy`; the error is the waiting reason.
    async fn ensure_image(&mut self, container: &Container) -> Result<(), WaitingReason> {
        let image = container.image.clone().unwrap_or_default();
        if image.is_empty() {
            return Err(WaitingReason {
                reason: "InvalidImageName".into(),
                message: "image is empty".into(),
            });
        }
        // kubelet parses the reference before anything else: one that does not parse is
        // InvalidImageName (with its InspectFailed event), and Docker is not asked.
        if let Err(message) = dockerlet_pod::image_ref::check(&image) {
            self.outcome.events.push(WorkerEvent::container(
                &container.name,
                "InspectFailed",
                message.clone(),
            ));
            return Err(WaitingReason {
                reason: "InvalidImageName".into(),
                message,
            });
        }
        let policy = container
            .image_pull_policy
            .clone()
            .unwrap_or_else(|| dockerlet_pod::spec::default_pull_policy(&image).to_string());
        let present = self
            .sync
            .runtime
            .image_present(&image)
            .await
            .map_err(|e| WaitingReason {
                reason: "ImageInspectError".into(),
                message: e.to_string(),
            })?;
        match (policy.as_str(), present) {
            ("Never", false) => {
                // kubelet's image manager records it as a Warning of its own, besides the
                // container's Failed event.
                let message = format!("Container image \"{image}\" is not present with pull policy of Never");
                self.outcome.events.push(WorkerEvent::container(
                    &container.name,
                    "ErrImageNeverPull",
                    message.clone(),
                ));
                Err(WaitingReason {
                    reason: "ErrImageNeverPull".into(),
                    message,
                })
            }
            (_, true) if policy != "Always" => {
                self.outcome.events.push(WorkerEvent::container(
                    &container.name,
                    "Pulled",
                    format!("Container image \"{image}\" already present on machine"),
                ));
                Ok(())
            }
            _ => self.pull(container, &image, present).await,
        }
    }

    /// Pull `image` for `container` unless its pull is in back-off (kubelet's
    /// EnsureImageExists and PullImage): with each credential that matches it in turn (the
    /// pod's `imagePullSecrets`, then the node's Docker config), anonymously when none does.
    async fn pull(&mut self, container: &Container, image: &str, present: bool) -> Result<(), WaitingReason> {
        let (_, _, uid) = pod_identity(self.pod);
        let uid = uid.to_string();
        let backing_off = self
            .sync
            .pulls
            .lock()
            .expect("pull back-off")
            .backing_off(&uid, image, Instant::now());
        if let Some(off) = backing_off {
            let message = format!("Back-off pulling image \"{image}\"");
            self.outcome
                .events
                .push(WorkerEvent::container(&container.name, "BackOff", message.clone()));
            self.retry_at(off.until);
            return Err(WaitingReason {
                reason: "ImagePullBackOff".into(),
                message: format!("{message}: {}", off.last_error),
            });
        }
        let keyrings = self.pull_keyrings().await.map_err(|message| WaitingReason {
            reason: "ErrImagePull".into(),
            message,
        })?;
        let auths = dockerlet_pod::credentials::lookup(&keyrings, image);
        self.outcome.events.push(WorkerEvent::container(
            &container.name,
            "Pulling",
            format!("Pulling image \"{image}\""),
        ));
        self.flush_events();
        let asked = Instant::now();
        // kubelet's serial (or bounded parallel) puller: wait for a turn. The permit is
        // released when this pull ends, or when the sync is dropped while waiting.
        let _permit = match &self.sync.pull_slots {
            Some(slots) => {
                if slots.available_permits() == 0 {
                    tracing::debug!(image = %image, "waiting for another pull to end (serializeImagePulls / maxParallelImagePulls)");
                }
                Some(
                    slots
                        .clone()
                        .acquire_owned()
                        .await
                        .expect("the pull semaphore is never closed"),
                )
            }
            None => None,
        };
        let began = Instant::now();
        let mut errors = Vec::new();
        let mut size = 0;
        for auth in auths.iter().map(Some).chain(auths.is_empty().then_some(None)) {
            match self.sync.runtime.pull_image(image, auth).await {
                Ok(bytes) => {
                    errors.clear();
                    size = bytes;
                    break;
                }
                Err(e) => {
                    if let Some(auth) = auth {
                        tracing::debug!(image = %image, registry = %auth.server, error = %e, "pull with a credential failed");
                    }
                    errors.push(e);
                }
            }
        }
        let took = PullTimes {
            pulling: began.elapsed(),
            with_waiting: asked.elapsed(),
            size,
        };
        self.pulled(container, image, took, errors, present)
    }

    /// The credentials a pull may use: the pod's `imagePullSecrets` (a missing one is a
    /// `FailedToRetrieveImagePullSecret` Warning and the pull goes on, as in kubelet; one that
    /// is not a Docker config fails the pull), then the node's Docker config file.
    async fn pull_keyrings(&mut self) -> Result<Vec<DockerKeyring>, String> {
        let mut keyrings = Vec::new();
        let names: Vec<String> = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.image_pull_secrets.as_ref())
            .into_iter()
            .flatten()
            .map(|r| r.name.clone())
            .filter(|n| !n.is_empty())
            .collect();
        let (_, namespace, _) = pod_identity(self.pod);
        let mut missing = Vec::new();
        for name in names {
            let secret = match &self.sync.config.api {
                Some(api) => match api.secret(namespace, &name).await {
                    Ok(found) => found,
                    Err(e) => {
                        tracing::info!(secret = %name, error = %e, "unable to retrieve a pull secret; the image pull may not succeed");
                        None
                    }
                },
                None => None,
            };
            let Some(secret) = secret else {
                missing.push(name);
                continue;
            };
            if let Some(keyring) = pull_secret_keyring(&secret, namespace, &name)? {
                keyrings.push(keyring);
            }
        }
        if !missing.is_empty() {
            self.outcome.events.push(WorkerEvent::pod(
                "FailedToRetrieveImagePullSecret",
                format!(
                    "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
                    missing.join(", ")
                ),
            ));
        }
        let files = dockerlet_host::docker_config::candidates(&self.sync.config.root_dir);
        match tokio::task::spawn_blocking(move || dockerlet_host::docker_config::node_keyring(&files)).await {
            Ok(Ok(Some((path, keyring)))) => {
                tracing::debug!(path = %path.display(), "the node's Docker config");
                keyrings.push(keyring);
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the node's Docker config is not used"),
            Err(e) => tracing::warn!(error = %e, "reading the node's Docker config did not finish"),
        }
        Ok(keyrings)
    }

    /// Wake the worker for a sync at `until` (a pull back-off's end, or soon after a failed
    /// pull to show the back-off), unless something wakes it earlier.
    fn retry_at(&mut self, until: Instant) {
        let after = until.saturating_duration_since(Instant::now());
        let Ok(at) = Timestamp::now().checked_add(after) else {
            return;
        };
        self.outcome.backoff_until = Some(self.outcome.backoff_until.map_or(at, |b| b.min(at)));
    }

    /// The events and outcome of a pull: `errors` empty means it succeeded.
    fn pulled(
        &mut self,
        container: &Container,
        image: &str,
        took: PullTimes,
        errors: Vec<RuntimeError>,
        present: bool,
    ) -> Result<(), WaitingReason> {
        let (_, _, uid) = pod_identity(self.pod);
        let uid = uid.to_string();
        if errors.is_empty() {
            self.sync.pulls.lock().expect("pull back-off").succeeded(&uid, image);
            self.outcome
                .events
                .push(WorkerEvent::container(&container.name, "Pulled", took.message(image)));
            return Ok(());
        }
        // Offline first: a local copy serves when the registry cannot be reached, never when it
        // refused (no or wrong credentials must not run an image another pod pulled).
        if present && errors.iter().all(RuntimeError::registry_unreachable) {
            tracing::warn!(image = %image, error = %errors[0], "registry unreachable; using the local image");
            return Ok(());
        }
        // utilerrors.NewAggregate's text: one error alone, several in brackets.
        let error = match errors.as_slice() {
            [one] => one.to_string(),
            many => format!(
                "[{}]",
                many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            ),
        };
        self.outcome.events.push(WorkerEvent::container(
            &container.name,
            "Failed",
            format!("Failed to pull image \"{image}\": {error}"),
        ));
        let message = format!("failed to pull image \"{image}\": {error}");
        let until = self.sync.pulls.lock().expect("pull back-off").failed(
            &uid,
            image,
            format!("ErrImagePull: {message}"),
            Instant::now(),
        );
        // The next sync shows ImagePullBackOff; the one at its end pulls again.
        self.retry_at((Instant::now() + PULL_BACKOFF_SHOWN).min(until));
        Err(WaitingReason {
            reason: "ErrImagePull".into(),
            message,
        })
    }
}

/// How long a successful pull took, and what it brought.
#[derive(Debug, Clone, Copy)]
struct PullTimes {
    /// From the start of the pull to its end.
    pulling: Duration,
    /// From asking for the pull, the wait for a turn included.
    with_waiting: Duration,
    /// The image's size in bytes.
    size: u64,
}

impl PullTimes {
    /// kubelet's `Pulled` event text, its times truncated to the millisecond as Go prints them.
    fn message(&self, image: &str) -> String {
        use dockerlet_pod::go::go_duration;
        format!(
            "Successfully pulled image \"{image}\" in {} ({} including waiting). Image size: {} bytes.",
            go_duration(self.pulling),
            go_duration(self.with_waiting),
            self.size
        )
    }
}

/// How soon after a failed pull the status turns from ErrImagePull to ImagePullBackOff.
const PULL_BACKOFF_SHOWN: Duration = Duration::from_secs(1);

/// The keyring of an image pull Secret (kubelet's MakeDockerKeyring): `.dockerconfigjson` of a
/// `kubernetes.io/dockerconfigjson` Secret, `.dockercfg` of a `kubernetes.io/dockercfg` one;
/// other types and empty keys give none.
fn pull_secret_keyring(secret: &Secret, namespace: &str, name: &str) -> Result<Option<DockerKeyring>, String> {
    use dockerlet_pod::credentials::ConfigFormat;
    let (key, format) = match secret.type_.as_deref() {
        Some("kubernetes.io/dockerconfigjson") => (".dockerconfigjson", ConfigFormat::Json),
        Some("kubernetes.io/dockercfg") => (".dockercfg", ConfigFormat::Legacy),
        _ => return Ok(None),
    };
    let Some(bytes) = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .filter(|b| !b.0.is_empty())
    else {
        return Ok(None);
    };
    DockerKeyring::parse(&bytes.0, format, &format!("Secret {namespace}/{name}"))
        .map(Some)
        .map_err(|e| e.to_string())
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
