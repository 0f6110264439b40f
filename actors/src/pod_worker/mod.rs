//! PodWorker: makes Docker match one pod, and reports the pod's status.
//!
//! | Message        | From       | Effect                                                   |
//! |----------------|------------|----------------------------------------------------------|
//! | UpdatePod      | Supervisor | new desired spec; sync                                   |
//! | SyncPod        | Supervisor | PLEG saw a change, or periodic resync; sync              |
//! | RuntimeBack    | Supervisor | the engine answers again; sync past the error back-off   |
//! | TerminatePod   | Supervisor | cancel any sync in flight, stop and remove every container |
//! | PublishStatus  | Supervisor | send the last status again (StatusActor re-created)      |
//! | StopActor      | Supervisor | stop the actor (containers untouched)                    |
//! | GetActorState  | Supervisor | debug snapshot                                           |
//! | Panic          | Supervisor | test-only fault hook                                     |
//! | every `sync_frequency`, or when a back-off expires | self | sync              |
//!
//! Sends `SetPodStatus` and `RemovePodStatus` to the StatusActor and `WatchContainers` and
//! `ForgetPod` to the ProbeActor (through [`Link`]s that reach the current instance), and
//! `RecordEvent` to the EventRecorder, `PodFinished` and `PodTerminated` to the Supervisor.
//!
//! A sync runs as a spawned future ([`sync::sync_pod`]): read the pod's containers from the
//! [`PodCache`](crate::pod_cache::PodCache) (no Docker call), decide with the pure
//! `plan::compute_pod_actions`, act, and inspect each container it acted on into the cache, so
//! the next sync sees its own work. The mailbox stays open meanwhile, so a
//! `TerminatePod` cancels a slow start at once. Requests that arrive during a sync are coalesced
//! into one follow-up sync; a pending termination is never replaced by a sync.

mod context;
mod debug;
mod handlers;
pub mod image_manager;
mod mount_events;
pub mod network;
pub mod outcome;
mod parts;
mod pod_cgroup;
mod sandbox;
pub mod start;
pub mod state;
pub mod sync;
pub mod teardown;
pub mod volumes;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dockerlet_metrics::WorkerOperation;

use actix::prelude::*;
use dockerlet_messages::debug::{DebugView, EventSubject, EventType, RecordEvent};
use dockerlet_messages::node::EvictPod;
use dockerlet_messages::probe::{
    ForgetPod, ProbeKind, ProbeResult, ProbeResultChanged, ProbeResults, ProbeTarget, ResendProbeTargets,
    WatchContainers,
};
use dockerlet_messages::runtime::ContainerRole;
use dockerlet_messages::runtime::{ObservedContainer, RuntimeState};
use dockerlet_messages::status::{RemovePodStatus, SetPodStatus};
use dockerlet_messages::worker::{
    PodFinished, PodTerminated, PublishStatus, RuntimeBack, ShutdownPod, StopActor, SyncPod, TerminatePod, UpdatePod,
};
use dockerlet_messages::{ContainerId, PodRef};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use crate::inspect::Inspect;
use crate::registry::Link;
pub use context::SyncContext;
use dockerlet_pod::admission::{rejected_status, Rejection};
use dockerlet_pod::backoff::BackoffConfig;
use dockerlet_pod::deadline::PodFailure;
use dockerlet_pod::status::{generate, StatusInput};
pub use image_manager::ImagePullLimit;
use outcome::{SyncOutcome, TerminateOutcome, WorkerEvent};
use state::{Effect, Input, Phase, Trigger, WorkerState};
use tracing::Instrument;

/// How long a terminated pod waits for its final status to be written before it is reported
/// terminated (and a deleted API pod deleted for good).
const FINAL_STATUS_WAIT: Duration = Duration::from_secs(30);

/// How long after a container's death by SIGKILL (exit code 137) its status waits for Docker's
/// OOM verdict. Docker sends the `oom` event and sets `OOMKilled` when containerd reports the
/// kill, which is usually before the `die` but can come after it (measured: after it on a
/// loaded host and under the systemd driver on cgroup v2); a status published between them
/// would say `Error` where kubelet's says `OOMKilled`.
const OOM_VERDICT_WAIT: Duration = Duration::from_secs(2);

/// Settings every PodWorker shares.
#[derive(Debug, Clone)]
pub struct PodWorkerConfig {
    /// This node's name (label on every container).
    pub node_name: String,
    /// This node's IP (`status.hostIP`).
    pub host_ip: String,
    /// The sandbox image (built-in pause image unless configured).
    pub sandbox_image: String,
    /// CrashLoopBackOff settings.
    pub backoff: BackoffConfig,
    /// Container GC's policy: how many dead instances of a container a sync keeps.
    pub container_gc: dockerlet_pod::container_gc::GcPolicy,
    /// Periodic resync of a pod with nothing else happening (kubelet `syncFrequency`).
    pub sync_frequency: Duration,
    /// Node memory in bytes (OOM score adjustment of Burstable pods).
    pub node_memory_bytes: i64,
    /// The node's allocatable resources: what downward API `resourceFieldRef` limits default to
    /// and what bounds a `medium: Memory` emptyDir.
    pub allocatable: dockerlet_pod::resource::Allocatable,
    /// Lowest OOM score adjustment the host lets containers have: kubelet's -998/-997 need
    /// CAP_SYS_RESOURCE, which some hosts (nested containers) withhold; values are clamped to it.
    pub min_oom_score_adj: i64,
    /// `--root-dir`, absolute: per-pod directories (emptyDir volumes) live under it.
    pub root_dir: std::path::PathBuf,
    /// The API server (API-server mode): Secrets and ConfigMaps for env, Services for the
    /// service link variables.
    pub api: Option<Arc<dyn dockerlet_kube::KubeClient>>,
    /// The container log files under `--pod-logs-dir` and `/var/log/containers`; none when
    /// Docker's log driver is not json-file.
    pub log_links: Option<dockerlet_host::pod_logs::LogLinks>,
    /// `--cluster-dns`, `--cluster-domain`, `--resolv-conf`: the pods' DNS and FQDNs.
    pub dns: dockerlet_pod::dns::ClusterDns,
    /// `--seccomp-default`, `--allowed-unsafe-sysctls` and whether the host has AppArmor:
    /// what admission and the containers' security contexts depend on.
    pub security: dockerlet_pod::security::SecurityConfig,
    /// The agent's metrics (pod worker durations, pod starts, started containers).
    pub metrics: Arc<dockerlet_metrics::Metrics>,
    /// `--cgroup-root` and `--cgroups-per-qos`: the `CgroupParent` of every pod's containers.
    pub cgroup_naming: dockerlet_pod::cgroup::CgroupNaming,
    /// `singleProcessOOMKill`: an OOM kills one process, not the container's cgroup (cgroup v2's
    /// `memory.oom.group` left unset).
    pub single_process_oom_kill: bool,
    /// The kubepods tree the pod cgroups are made in and removed from (none with
    /// `--cgroups-per-qos=false`, and in tests that leave the node's cgroups alone).
    pub cgroups: Option<Arc<dockerlet_host::cgroup::tree::PodCgroups>>,
    /// `serializeImagePulls` and `maxParallelImagePulls`: how many image pulls the node runs at
    /// once.
    pub image_pulls: ImagePullLimit,
    /// `cpuCFSQuota`: CPU limits become CFS quotas of containers (and pod cgroups); false leaves
    /// them only their shares, as kubelet's `--cpu-cfs-quota=false`.
    pub cpu_cfs_quota: bool,
    /// The CNI pod network (`--network-plugin=cni`); none: sandboxes on Docker's bridge.
    pub network: Option<Arc<dockerlet_cni::Cni>>,
}

/// Where a PodWorker sends what it learns. In the agent the status and probe links reach the
/// StatusActor and the ProbeActor directly (whichever instance is current, see
/// [`Link`]), the rest the Supervisor; tests can plug in their own recipients.
#[derive(Clone)]
pub struct WorkerLinks {
    /// New pod status (the StatusActor).
    pub status: Link<SetPodStatus>,
    /// Whether the pod finished, with every new status (the Supervisor's admission).
    pub finished: Recipient<PodFinished>,
    /// Pod gone (the StatusActor, which answers once a deleted pod's final status is written).
    pub removed: Link<RemovePodStatus>,
    /// Noteworthy events.
    pub events: Link<RecordEvent>,
    /// Termination finished.
    pub terminated: Recipient<PodTerminated>,
    /// Running containers whose probes should run (the ProbeActor).
    pub watch: Link<WatchContainers>,
    /// Stop the pod's probes (the ProbeActor).
    pub forget: Link<ForgetPod>,
}

impl WorkerLinks {
    /// Send a new status of `pod` to the StatusActor, and whether it finished to the Supervisor.
    fn publish(&self, id: &PodRef, pod: Arc<Pod>, status: k8s_openapi::api::core::v1::PodStatus) {
        let finished = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
        let uid = id.uid.clone();
        self.status.do_send(SetPodStatus {
            id: id.clone(),
            pod,
            status,
        });
        self.finished.do_send(PodFinished { uid, finished });
    }
}

/// The actor for one pod.
pub struct PodWorker {
    /// The pod this worker owns.
    id: PodRef,
    /// The desired pod; replaced by `UpdatePod`.
    pod: Arc<Pod>,
    /// Docker, the pod cache and the shared settings.
    sync: SyncContext,
    /// The end of the last action whose result this worker could not observe (a failed inspect,
    /// a cancelled sync): the next sync reads the cache only once a relist after it completed.
    newer_than: Option<Instant>,
    /// Where reports go.
    links: WorkerLinks,
    /// Where it is in its lifecycle; every transition is [`WorkerState::on`].
    state: WorkerState,
    /// Every log line of this pod's worker, its syncs and Docker errors included, carries the
    /// pod's UID and name through this span.
    span: tracing::Span,
    /// The sync or termination future in flight; cancelled by `TerminatePod`.
    in_flight: Option<SpawnHandle>,
    /// The next timed sync (back-off expiry or periodic resync).
    timer: Option<SpawnHandle>,
    /// The first attempt of each container, for a pod that ran before under this UID.
    attempt_floor: std::collections::BTreeMap<String, u32>,
    /// Set once the node failed the pod (its `activeDeadlineSeconds` passed, the node shuts
    /// down): its containers are stopped and never started again, and its phase is Failed.
    failure: Option<PodFailure>,
    /// A node shutdown's stop: its grace period, and who waits for nothing to run any more.
    shutdown: Option<ShutdownStop>,
    /// Why the pod is terminated, once it is: logged with each container stopped and removed.
    termination_reason: String,
    /// Messages handled.
    handled: u64,
    /// Why admission refused the pod (kubelet's admit handlers, checked once, before the first
    /// sync): a rejected pod never runs and reports phase Failed with the reason.
    rejection: Option<Rejection>,
    /// What the worker last saw of its containers and why they wait.
    observed: parts::Observed,
    /// What the worker last reported (status, probe targets, final status).
    published: parts::Published,
    /// Why the worker does what it does, for the debug page and events.
    diagnostics: parts::Diagnostics,
    /// What the worker measures (pod start and pod worker durations).
    timing: parts::Timing,
}

/// How a pod is stopped for the node: its shutdown, or an eviction.
#[derive(Debug)]
struct ShutdownStop {
    /// Its grace period (the shutdown group's, or the pod's own when shorter).
    grace: Duration,
    /// Answered when nothing of the pod runs any more.
    waiters: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl PodWorker {
    /// A worker for `pod`. Call [`PodWorker::terminating`] for a pod that is only to be removed.
    pub fn new(pod: Arc<Pod>, sync: SyncContext, links: WorkerLinks) -> Self {
        let id = PodRef::of(&pod);
        let span = id.span();
        let rejection = dockerlet_pod::admission::admit(&pod, &sync.config.security).err();
        PodWorker {
            id,
            pod,
            sync,
            newer_than: None,
            links,
            state: WorkerState::default(),
            span,
            in_flight: None,
            timer: None,
            attempt_floor: Default::default(),
            failure: None,
            termination_reason: "the pod is terminating".into(),
            shutdown: None,
            handled: 0,
            observed: Default::default(),
            published: Default::default(),
            diagnostics: Default::default(),
            timing: parts::Timing::new(),
            rejection,
        }
    }

    /// Refuse the pod for why the node cannot take it (kubelet's predicate admission, which the
    /// Supervisor runs knowing the other pods), unless the pod itself was refused already.
    pub fn rejected(mut self, rejection: Rejection) -> Self {
        self.rejection.get_or_insert(rejection);
        self
    }

    /// Count container attempts on from `next_attempts` (the pod ran before under this UID and
    /// was stopped; its containers are gone).
    pub fn attempts_from(mut self, next_attempts: std::collections::BTreeMap<String, u32>) -> Self {
        self.attempt_floor = next_attempts;
        self
    }

    /// Start in the terminating state (an orphaned pod, or re-creation during termination),
    /// for `reason`.
    pub fn terminating(mut self, grace: Option<Duration>, reason: String) -> Self {
        self.termination_reason = reason;
        let config = self.sync.config.clone();
        self.state
            .on(Input::Terminate { grace }, Instant::now(), &config.backoff);
        self
    }

    /// Feed `input` to the state machine and carry out what it says.
    fn step(&mut self, input: Input, ctx: &mut Context<Self>) {
        let effect = self.state.on(input, Instant::now(), &self.sync.config.backoff);
        match effect {
            Effect::None => {}
            Effect::StartSync => self.start_sync(ctx),
            Effect::ScheduleNext { error } => self.schedule_next(error, ctx),
            Effect::StartTermination { grace } => self.start_termination(grace, ctx),
            Effect::RetryTermination { after, grace } => {
                self.diagnostics.retry_at = Timestamp::now().checked_add(after).ok();
                ctx.run_later(after, move |act, ctx| act.start_termination(grace, ctx));
            }
            Effect::ReportTerminated => {
                tracing::info!("pod terminated");
                self.diagnostics.next_action = "none".to_string();
                self.links.forget.do_send(ForgetPod {
                    pod_uid: self.id.uid.clone(),
                    keep_readiness: false,
                });
                if let Some(api) = &self.sync.config.api {
                    api.forget_pod(&self.id.uid.0);
                }
                self.sync.images.forget_pod(&self.id.uid.0);
                let removed = self.links.removed.send(RemovePodStatus {
                    uid: self.id.uid.clone(),
                    final_status: self.published.final_status.take(),
                });
                let (terminated, uid) = (self.links.terminated.clone(), self.id.uid.clone());
                let mut next_attempts = self.attempt_floor.clone();
                for c in self
                    .observed
                    .last_observed
                    .iter()
                    .filter(|c| c.role != ContainerRole::Sandbox)
                {
                    let next = next_attempts.entry(c.name.clone()).or_default();
                    *next = (*next).max(c.attempt + 1);
                }
                // The final status of a deleted API pod is written before the Supervisor may
                // delete the pod for good: watchers see its final phase, then its deletion (as
                // kubelet's status manager orders them).
                ctx.spawn(
                    async move {
                        // Bounded: an API server that does not answer must not hold the pod's
                        // end (nor a static pod's next version) for ever.
                        match tokio::time::timeout(FINAL_STATUS_WAIT, removed).await {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => {
                                tracing::warn!(error = %e, "the status actor did not answer the pod's removal")
                            }
                            Err(_) => {
                                tracing::warn!("the final status was not written in time; the pod ends without it")
                            }
                        }
                        terminated.do_send(PodTerminated { uid, next_attempts });
                    }
                    .into_actor(self),
                );
            }
        }
    }

    /// Record a sync's events; a failing volume's `FailedMount` is repeated on kubelet's
    /// back-off, not at every try.
    fn record_events(&mut self, events: &[WorkerEvent]) {
        let now = Instant::now();
        for event in events {
            if event.reason == sync::FAILED_MOUNT && !self.diagnostics.mount_events.admit(&event.message, now) {
                continue;
            }
            self.record_about(
                event.container.as_deref(),
                event.type_,
                &event.reason,
                event.message.clone(),
            );
        }
    }

    fn record(&self, type_: EventType, reason: &str, message: String) {
        self.record_about(None, type_, reason, message);
    }

    fn record_about(&self, container: Option<&str>, type_: EventType, reason: &str, message: String) {
        // An orphan's stand-in (no config source) is no pod of the API: its events stay on the
        // debug page.
        let about = match dockerlet_pod::annotations::source(&self.pod) {
            Some(_) => EventSubject::Pod(self.id.clone()),
            None => EventSubject::Other(self.id.to_string()),
        };
        let mut event = RecordEvent::about(about, type_, reason, message);
        if let Some(container) = container {
            event = event.in_container(container, dockerlet_pod::spec::field_path(&self.pod, container));
        }
        self.links.events.do_send(event);
    }

    /// Start a sync (the state machine said so): cancel the timer, spawn the sync future.
    fn start_sync(&mut self, ctx: &mut Context<Self>) {
        if let Some(timer) = self.timer.take() {
            ctx.cancel_future(timer);
        }
        if let Some(rejection) = self.rejection.clone() {
            self.report_rejection(&rejection);
            return self.step(Input::SyncFinished { ok: true }, ctx);
        }
        self.check_deadline();
        let mode = match (&self.failure, &self.shutdown) {
            (None, _) => sync::SyncMode::Run,
            (Some(_), shutdown) => sync::SyncMode::StopOnly {
                grace: shutdown.as_ref().map(|s| s.grace),
            },
        };
        self.timing.operation_began = Instant::now();
        let probes = self.observed.probes.clone();
        let floor = self.attempt_floor.clone();
        let future = sync::sync_pod(
            self.sync.clone(),
            self.pod.clone(),
            probes,
            self.newer_than,
            mode,
            floor,
            outcome::Notes::to(ctx.address().recipient()),
        )
        .instrument(self.span.clone());
        let handle = ctx.spawn(
            future
                .into_actor(self)
                .map(|outcome, act, ctx| act.sync_finished(outcome, ctx)),
        );
        self.in_flight = Some(handle);
    }

    /// The pod with its final status, from its containers as they stopped: phase Succeeded when
    /// every regular container ended with 0, Failed otherwise (kubelet's status manager on
    /// TerminatePod, and getPhase for a terminal pod).
    fn final_status_of(&self, stopped: &[ObservedContainer]) -> Pod {
        let mut status = generate(&StatusInput {
            pod: &self.pod,
            observed: stopped,
            waiting: &HashMap::new(),
            probes: &ProbeResults::new(),
            host_ip: &self.sync.config.host_ip,
            previous: self.published.last_status.as_ref(),
            known_pod_ip: self.observed.pod_ip.as_deref(),
            now: Timestamp::now(),
            failure: self.failure.as_ref(),
        });
        // kubelet's TerminatePod: no container of a terminated pod is left without an end.
        dockerlet_pod::status::default_unterminated(&self.pod, &mut status);
        // kubelet's getPhase for a terminal pod: whatever the restart policy, Succeeded when
        // every regular container ran and ended with 0, otherwise Failed.
        let all_succeeded = status.container_statuses.as_ref().is_some_and(|statuses| {
            !statuses.is_empty()
                && statuses.iter().all(|c| {
                    c.state
                        .as_ref()
                        .and_then(|s| s.terminated.as_ref())
                        .is_some_and(|t| t.exit_code == 0)
                })
        });
        if status.phase.as_deref() != Some("Succeeded") {
            status.phase = Some(if all_succeeded { "Succeeded" } else { "Failed" }.to_string());
        }
        let mut pod = (*self.pod).clone();
        pod.status = Some(status);
        pod
    }

    /// When the pod started on this node (its status's `startTime`), once it has a status.
    fn start_time(&self) -> Option<Timestamp> {
        self.published.last_status.as_ref()?.start_time.as_ref().map(|t| t.0)
    }

    /// Fail the pod once its `activeDeadlineSeconds` has passed (kubelet's active deadline
    /// handler): an event, and from now on syncs only stop its containers.
    fn check_deadline(&mut self) {
        if self.failure.is_some() {
            return;
        }
        let Some(started) = self.start_time() else { return };
        if dockerlet_pod::deadline::exceeded(&self.pod, started, Timestamp::now()) {
            let failure = PodFailure::deadline_exceeded();
            tracing::info!(reason = %failure.reason, "pod failed: active deadline exceeded");
            // kubelet's active deadline handler records it as Normal.
            self.record(EventType::Normal, &failure.reason, failure.message.clone());
            self.failure = Some(failure);
        }
    }

    /// Once nothing of a pod stopped for the node's shutdown runs, tell whoever waits.
    fn answer_shutdown_if_stopped(&mut self) {
        let running = self
            .observed
            .last_observed
            .iter()
            .any(|c| c.state == RuntimeState::Running);
        if let Some(shutdown) = self.shutdown.as_mut().filter(|_| !running) {
            for waiter in shutdown.waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
    }

    fn sync_finished(&mut self, outcome: SyncOutcome, ctx: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        self.in_flight = None;
        let operation = std::mem::replace(&mut self.timing.next_operation, WorkerOperation::sync);
        self.sync
            .config
            .metrics
            .worker_operation(operation, self.timing.operation_began.elapsed().as_secs_f64());
        self.newer_than = outcome.unobserved;
        self.diagnostics.mount_events.keep_only(&outcome.mount_failures);
        self.record_events(&outcome.events);
        for error in &outcome.errors {
            tracing::warn!(error = %error, "pod sync failed");
        }
        if !outcome.errors.is_empty() {
            self.diagnostics.last_error = Some(join_errors(&outcome.errors));
            self.diagnostics.last_error_at = Some(Timestamp::now());
        }
        self.observed.restart_at = outcome.restart_at;
        self.diagnostics.mount_failures = outcome.mount_failures;
        if let Some(observed) = outcome.observed {
            self.note_deaths(&observed);
            self.observed.waiting = outcome.waiting;
            self.observed
                .probes
                .retain(|_, (id, _)| observed.iter().any(|c| &c.id == id && c.state == RuntimeState::Running));
            // Docker clears a stopped container's IP: what is found is the running sandbox's.
            if let Some(ip) = sandbox::sandbox_ip(&observed) {
                self.observed.pod_ip = Some(ip);
            }
            self.observed.last_observed = observed;
            self.publish_status(ctx);
            self.watch_probes(false);
            self.answer_shutdown_if_stopped();
        }
        self.diagnostics.next_action = outcome.actions_summary;
        self.observed.backoff_until = outcome.backoff_until;
        self.step(
            Input::SyncFinished {
                ok: outcome.errors.is_empty() && !outcome.start_failed,
            },
            ctx,
        );
    }

    /// The pod was not admitted (kubelet's `rejectPod`): a Warning event with the reason and
    /// the status phase Failed, once; nothing is created.
    fn report_rejection(&mut self, rejection: &Rejection) {
        self.diagnostics.next_action = format!("none: rejected ({})", rejection.reason);
        let status = rejected_status(&self.pod, rejection);
        if self.published.last_status.as_ref() == Some(&status) {
            return;
        }
        tracing::warn!(reason = %rejection.reason, message = %rejection.message, "pod rejected at admission");
        // kubelet's rejectPod: a Warning.
        self.record(EventType::Warning, &rejection.reason, rejection.message.clone());
        self.published.last_status = Some(status.clone());
        self.published.published_pod = Some(self.pod.clone());
        self.links.publish(&self.id, self.pod.clone(), status);
    }

    /// Arm the timer of the next sync: the error back-off after a failure, else the earliest
    /// container back-off expiry, else the periodic resync.
    fn schedule_next(&mut self, error: Option<Duration>, ctx: &mut Context<Self>) {
        let delay = match (self.observed.backoff_until, error) {
            (_, Some(delay)) => delay,
            (Some(until), None) => {
                Duration::try_from(until.duration_since(Timestamp::now())).unwrap_or_default()
                    + Duration::from_millis(20)
            }
            (None, None) => self.sync.config.sync_frequency,
        };
        self.diagnostics.retry_at = error.and_then(|d| Timestamp::now().checked_add(d).ok());
        // Wake at the pod's active deadline, if it comes first.
        let deadline = self
            .start_time()
            .filter(|_| self.failure.is_none())
            .and_then(|started| dockerlet_pod::deadline::deadline(&self.pod, started))
            .map(|d| Duration::try_from(d.duration_since(Timestamp::now())).unwrap_or_default());
        let delay = deadline.map_or(delay, |d| delay.min(d + Duration::from_millis(20)));
        self.timer = Some(ctx.run_later(delay, |act, ctx| {
            act.timer = None;
            act.step(Input::Sync(Trigger::Timer), ctx);
        }));
    }

    /// Publish the status of `observed`, fresh from Docker, when a container the last status was
    /// made of running, or the last status published calls running, no longer runs (not while
    /// the pod terminates: its own statuses follow). Only then: a sandbox that died under running
    /// containers is replaced within the sync, and the status that follows it carries the new
    /// sandbox's IP. The published status counts too because a status can be held back after
    /// `last_observed` took a death (its details pending, while Docker went away): the engine's
    /// return must still correct it before the sync that recreates the pod ends (`make chaos`:
    /// 22 s at 110 pods).
    fn publish_observed(&mut self, observed: Vec<ObservedContainer>, ctx: &mut Context<Self>) {
        let stopped = running_container_stopped(&self.observed.last_observed, &observed)
            || claims_stopped(self.published.last_status.as_ref(), &observed);
        if !self.state.is_terminating() && stopped {
            self.note_deaths(&observed);
            self.observed.last_observed = observed;
            self.publish_status(ctx);
        }
    }

    /// Report each container death once, and each OOM kill once more as a Warning (the debug endpoint's `ContainerDied` events).
    fn note_deaths(&mut self, observed: &[ObservedContainer]) {
        for c in observed.iter().filter(|c| c.state == RuntimeState::Exited) {
            if self.observed.known_exited.insert(c.id.clone()) && self.observed.observed_once {
                tracing::info!(container = %c.name, exit_code = c.exit_code, "container died");
                self.record(
                    EventType::Normal,
                    "ContainerDied",
                    format!(
                        "container {} ({}) exited with code {}{}",
                        c.name,
                        short(&c.id),
                        c.exit_code,
                        if c.oom_killed { " (OOMKilled)" } else { "" }
                    ),
                );
            }
        }
        // Not the sandbox: an OOM of the pod cgroup is notified to every cgroup under it, so
        // Docker flags the pause container OOMKilled too, though the kernel killed an app's
        // process (and the pause container is only stopped later, with the pod).
        for c in observed
            .iter()
            .filter(|c| c.state == RuntimeState::Exited && c.oom_killed && c.role != ContainerRole::Sandbox)
        {
            if self.observed.known_oom_killed.insert(c.id.clone()) && self.observed.observed_once {
                tracing::info!(container = %c.name, "container OOM-killed");
                self.record_about(
                    Some(&c.name),
                    EventType::Warning,
                    "OOMKilled",
                    oom_killed_message(&c.name),
                );
            }
        }
        self.observed
            .known_exited
            .retain(|id| observed.iter().any(|c| &c.id == id));
        self.observed
            .known_oom_killed
            .retain(|id| observed.iter().any(|c| &c.id == id));
        self.published
            .oom_waited
            .retain(|id| observed.iter().any(|c| &c.id == id));
        self.observed.observed_once = true;
    }

    /// Tell the ProbeActor which containers run now (when that changed, or when asked).
    fn watch_probes(&mut self, always: bool) {
        if self.state.is_terminating() {
            return;
        }
        let running: Vec<ProbeTarget> = self
            .observed
            .last_observed
            .iter()
            .filter(|c| c.state == RuntimeState::Running && self.probed(c))
            .map(|c| ProbeTarget {
                container_name: c.name.clone(),
                container_id: c.id.clone(),
                started_at: c.started_at.clone(),
            })
            .collect();
        if !always && running == self.published.watched {
            return;
        }
        let pod_ip = self.published.last_status.as_ref().and_then(|s| s.pod_ip.clone());
        self.published.watched = running.clone();
        self.links.watch.do_send(WatchContainers {
            id: self.id.clone(),
            pod: self.pod.clone(),
            pod_ip,
            running,
        });
    }

    /// Whether `c`'s probes run: app containers' and sidecars' (ordinary init containers have
    /// none).
    fn probed(&self, c: &ObservedContainer) -> bool {
        match c.role {
            ContainerRole::App => true,
            ContainerRole::Init => self.is_sidecar(&c.name),
            _ => false,
        }
    }

    /// Whether the init container `name` is a sidecar.
    fn is_sidecar(&self, name: &str) -> bool {
        self.pod
            .spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten())
            .any(|c| c.name == name && dockerlet_pod::plan::is_sidecar(c))
    }

    fn publish_status(&mut self, ctx: &mut Context<Self>) {
        // A container known dead from its `die` event alone: its termination message and exit
        // details come with the inspect that follows (milliseconds later, or the next relist),
        // and a status without them must not be the one a client reads as final.
        if self.observed.last_observed.iter().any(|c| c.details_pending) {
            return;
        }
        // A container SIGKILLed moments ago may yet be found OOM-killed: publish once Docker
        // said so (the PLEG's `oom` makes a new sync) or the wait is over.
        let pending = oom_verdict_pending(
            &self.observed.last_observed,
            &self.published.oom_waited,
            Timestamp::now(),
        );
        if let Some(wait) = pending {
            if self.published.verdict_timer.is_none() {
                tracing::debug!(?wait, "status held for Docker's OOM verdict");
                self.published.verdict_timer = Some(ctx.run_later(wait, |act, ctx| {
                    act.published.verdict_timer = None;
                    let undecided = oom_undecided(&act.observed.last_observed).map(|c| c.id.clone());
                    act.published.oom_waited.extend(undecided);
                    let _span = act.span.clone().entered();
                    act.publish_status(ctx);
                }));
            }
            return;
        }
        let status = generate(&StatusInput {
            pod: &self.pod,
            observed: &self.observed.last_observed,
            waiting: &self.observed.waiting,
            probes: &self.observed.probes,
            host_ip: &self.sync.config.host_ip,
            previous: self.published.last_status.as_ref(),
            known_pod_ip: self.observed.pod_ip.as_deref(),
            now: Timestamp::now(),
            failure: self.failure.as_ref(),
        });
        // The same status of the same pod object: nothing to tell. A new pod object (labels, a
        // deletionTimestamp) goes out with its status, so `/pods` shows the pod as it is now.
        let same_pod = self
            .published
            .published_pod
            .as_ref()
            .is_some_and(|p| Arc::ptr_eq(p, &self.pod));
        if same_pod && self.published.last_status.as_ref() == Some(&status) {
            return;
        }
        if self.published.last_status.as_ref().and_then(|s| s.phase.as_ref()) != status.phase.as_ref() {
            tracing::info!(phase = status.phase.as_deref().unwrap_or_default(), "pod phase");
        }
        if !self.timing.start_observed && status.phase.as_deref() == Some("Running") {
            // kubelet: from first seeing the pod to it running (image pulls included).
            self.timing.start_observed = true;
            let metrics = &self.sync.config.metrics;
            metrics
                .pod_start_duration
                .observe(self.timing.first_seen.elapsed().as_secs_f64());
        }
        self.published.last_status = Some(status.clone());
        self.links.publish(&self.id, self.pod.clone(), status);
    }

    /// The API deleted the pod (deletionTimestamp set): stop it with the deletion's grace period.
    fn terminate_deleted(&mut self, ctx: &mut Context<Self>) {
        // `/pods` shows it terminating (its deletionTimestamp), as kubelet's pod manager does.
        if self.published.last_status.is_some() {
            self.publish_status(ctx);
        }
        let grace = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .map(|s| Duration::from_secs(s.max(0) as u64));
        self.termination_reason = "the pod was deleted (its deletionTimestamp is set)".into();
        self.step(Input::Terminate { grace }, ctx);
    }

    fn start_termination(&mut self, grace: Option<Duration>, ctx: &mut Context<Self>) {
        if let Some(handle) = self.in_flight.take() {
            ctx.cancel_future(handle);
            // What the cancelled sync did, nobody observed.
            self.newer_than = Some(Instant::now());
        }
        if let Some(timer) = self.timer.take() {
            ctx.cancel_future(timer);
        }
        self.diagnostics.next_action = "stop and remove every container".to_string();
        let grace = grace.or_else(|| {
            self.pod
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
                .map(|s| Duration::from_secs(s.max(0) as u64))
        });
        tracing::info!(grace = ?grace, reason = %self.termination_reason, "terminating pod");
        // Readiness keeps being probed while the pod terminates (kubelet), liveness and
        // startup not.
        self.links.forget.do_send(ForgetPod {
            pod_uid: self.id.uid.clone(),
            keep_readiness: true,
        });
        self.timing.operation_began = Instant::now();
        let notes = outcome::Notes::to(ctx.address().recipient());
        let future = teardown::terminate_pod(
            self.sync.clone(),
            self.pod.clone(),
            grace,
            notes,
            self.termination_reason.clone(),
        )
        .instrument(self.span.clone());
        let handle = ctx.spawn(
            future
                .into_actor(self)
                .map(|outcome, act, ctx| act.termination_finished(outcome, ctx)),
        );
        self.in_flight = Some(handle);
    }

    fn termination_finished(&mut self, outcome: TerminateOutcome, ctx: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        self.in_flight = None;
        self.sync.config.metrics.worker_operation(
            WorkerOperation::kill,
            self.timing.operation_began.elapsed().as_secs_f64(),
        );
        self.record_events(&outcome.events);
        for error in &outcome.errors {
            tracing::warn!(error = %error, "pod termination failed; retrying");
        }
        if !outcome.errors.is_empty() {
            self.diagnostics.last_error = Some(join_errors(&outcome.errors));
            self.diagnostics.last_error_at = Some(Timestamp::now());
        }
        if let Some(stopped) = outcome.stopped.filter(|_| outcome.errors.is_empty()) {
            self.published.final_status = Some(self.final_status_of(&stopped));
        }
        self.step(
            Input::TerminationFinished {
                ok: outcome.errors.is_empty(),
            },
            ctx,
        );
    }
}

/// The app and init containers that died by SIGKILL (137) and are not (yet) known OOM-killed.
fn oom_undecided(observed: &[ObservedContainer]) -> impl Iterator<Item = &ObservedContainer> {
    observed.iter().filter(|c| {
        c.state == RuntimeState::Exited && c.exit_code == 137 && !c.oom_killed && c.role != ContainerRole::Sandbox
    })
}

/// How much longer a status must wait for Docker's OOM verdict on `observed`: the longest of
/// [`OOM_VERDICT_WAIT`] after each undecided death not `waited` for already; none when nothing
/// waits.
fn oom_verdict_pending(
    observed: &[ObservedContainer],
    waited: &std::collections::HashSet<ContainerId>,
    now: Timestamp,
) -> Option<Duration> {
    oom_undecided(observed)
        .filter(|c| !waited.contains(&c.id))
        .filter_map(|c| {
            let since = Duration::try_from(now.duration_since(c.finished_at.as_ref()?.0)).ok()?;
            OOM_VERDICT_WAIT.checked_sub(since).filter(|left| !left.is_zero())
        })
        .max()
}

/// Every error of a sync, for the debug endpoint's `last_error`.
fn join_errors(errors: &[outcome::SyncError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// The `OOMKilled` event's message: the container the kernel killed over its memory limit.
fn oom_killed_message(container: &str) -> String {
    format!("Container {container} was killed by the OOM killer: its memory use reached its limit")
}

fn short(id: &ContainerId) -> &str {
    &id.0[..id.0.len().min(12)]
}

/// Whether a container (not a sandbox) that ran in `before` no longer runs in `now`, or is gone.
fn running_container_stopped(before: &[ObservedContainer], now: &[ObservedContainer]) -> bool {
    before.iter().any(|old| {
        old.role != ContainerRole::Sandbox
            && old.state == RuntimeState::Running
            && now
                .iter()
                .find(|c| c.id == old.id)
                .is_none_or(|c| c.state != RuntimeState::Running)
    })
}

/// Whether `status` calls running a container (not a sandbox: it has no status) that `now` has
/// stopped, or does not have.
fn claims_stopped(status: Option<&k8s_openapi::api::core::v1::PodStatus>, now: &[ObservedContainer]) -> bool {
    let Some(status) = status else { return false };
    [
        &status.init_container_statuses,
        &status.container_statuses,
        &status.ephemeral_container_statuses,
    ]
    .into_iter()
    .flatten()
    .flatten()
    .filter(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()))
    .filter_map(|s| s.container_id.as_deref())
    .any(|id| {
        let id = id.strip_prefix("docker://").unwrap_or(id);
        now.iter()
            .find(|c| c.id.0 == id)
            .is_none_or(|c| c.state != RuntimeState::Running)
    })
}

#[cfg(test)]
mod tests;
