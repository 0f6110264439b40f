//! kubelet's computePodActions (`pkg/kubelet/kuberuntime/kuberuntime_manager.go`) as one pure function: given the desired pod and
//! what Docker runs, decide what to kill, remove, create and start.

use std::collections::HashMap;
use std::time::Duration;

use dockerlet_messages::probe::{ProbeKind, ProbeResult, ProbeResults};
use dockerlet_messages::runtime::{ContainerRole, ObservedContainer, RuntimeState};
use dockerlet_messages::ContainerId;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::backoff::{restart_decision, BackoffConfig, RestartDecision};
use crate::spec::{container_hash, host_network};

/// How many instances of one container a sync keeps by default: the newest, and the one before
/// it (for `lastState`); older dead ones are removed. kubelet's pod container deletor, with
/// `--maximum-dead-containers-per-container` 1 ([`crate::container_gc::GcPolicy`]).
pub const KEEP_INSTANCES: usize = 2;

/// kubelet's words when a pod's sandbox is gone or changed: the reason its containers are killed
/// and the message of the `SandboxChanged` event (`kuberuntime_manager.go`).
pub const SANDBOX_CHANGED: &str = "Pod sandbox changed, it will be killed and re-created.";

/// The pod's `restartPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RestartPolicy {
    /// Always restart (default).
    Always,
    /// Restart when the exit code is not 0.
    OnFailure,
    /// Never restart.
    Never,
}

impl RestartPolicy {
    /// The policy of `pod`, defaulting to Always.
    pub fn of(pod: &Pod) -> Self {
        match pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) {
            Some("OnFailure") => RestartPolicy::OnFailure,
            Some("Never") => RestartPolicy::Never,
            _ => RestartPolicy::Always,
        }
    }

    /// kubelet's ShouldContainerBeRestarted for an exited container.
    pub fn restarts(self, exit_code: i64) -> bool {
        match self {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => exit_code != 0,
            RestartPolicy::Never => false,
        }
    }
}

/// Stop one container.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KillAction {
    /// The container.
    pub id: ContainerId,
    /// Its name in the pod.
    pub name: String,
    /// Why (kubelet's message).
    pub reason: String,
    /// Grace period override (a probe's `terminationGracePeriodSeconds`).
    pub grace: Option<Duration>,
}

/// Create and start one container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StartAction {
    /// Name in the pod spec.
    pub name: String,
    /// Init or app.
    pub role: ContainerRole,
    /// The attempt (restart count) of the new container.
    pub attempt: u32,
    /// Its back-off step.
    pub backoff_step: u32,
}

/// A container that should run again but is in CrashLoopBackOff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackingOff {
    /// Name in the pod spec.
    pub name: String,
    /// When it may start.
    pub until: Timestamp,
    /// The delay being served.
    pub delay: Duration,
}

/// Everything one sync should do, in execution order.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PodActions {
    /// Stop every container and sandbox of the pod first.
    pub kill_pod: bool,
    /// Why the whole pod is stopped (empty unless `kill_pod`), for the log of each stop.
    pub kill_reason: String,
    /// Containers to stop (when not killing the whole pod).
    pub kill: Vec<KillAction>,
    /// Dead containers no status needs any more.
    pub remove: Vec<ContainerId>,
    /// Create a new sandbox with this attempt number.
    pub create_sandbox: Option<u32>,
    /// Containers to create and start, in order.
    pub start: Vec<StartAction>,
    /// Containers waiting out their back-off.
    pub backing_off: Vec<BackingOff>,
}

impl PodActions {
    /// Nothing to do but wait.
    pub fn is_idle(&self) -> bool {
        !self.kill_pod
            && self.kill.is_empty()
            && self.remove.is_empty()
            && self.create_sandbox.is_none()
            && self.start.is_empty()
    }

    /// One line for the debug endpoint.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.kill_pod {
            parts.push("kill pod".to_string());
        }
        parts.extend(self.kill.iter().map(|k| format!("kill {}", k.name)));
        if let Some(a) = self.create_sandbox {
            parts.push(format!("create sandbox (attempt {a})"));
        }
        parts.extend(
            self.start
                .iter()
                .map(|s| format!("start {} (attempt {})", s.name, s.attempt)),
        );
        parts.extend(
            self.backing_off
                .iter()
                .map(|b| format!("wait back-off {}s for {}", b.delay.as_secs(), b.name)),
        );
        if !self.remove.is_empty() {
            parts.push(format!("remove {} dead container(s)", self.remove.len()));
        }
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// A pod's containers as Docker reports them, grouped for decisions.
#[derive(Debug, Default)]
pub struct PodView<'a> {
    /// Sandboxes, newest attempt first.
    pub sandboxes: Vec<&'a ObservedContainer>,
    /// Instances per container name, newest attempt first.
    pub containers: HashMap<&'a str, Vec<&'a ObservedContainer>>,
}

impl<'a> PodView<'a> {
    /// Group observed containers.
    pub fn new(observed: &'a [ObservedContainer]) -> Self {
        let mut view = PodView::default();
        for c in observed {
            match c.role {
                ContainerRole::Sandbox => view.sandboxes.push(c),
                _ => view.containers.entry(c.name.as_str()).or_default().push(c),
            }
        }
        let newest_first = |a: &&ObservedContainer, b: &&ObservedContainer| {
            b.attempt.cmp(&a.attempt).then_with(|| {
                b.created_at
                    .as_ref()
                    .map(|t| t.0)
                    .cmp(&a.created_at.as_ref().map(|t| t.0))
            })
        };
        view.sandboxes.sort_by(newest_first);
        for instances in view.containers.values_mut() {
            instances.sort_by(newest_first);
        }
        view
    }

    /// The newest instance of a container.
    pub fn latest(&self, name: &str) -> Option<&'a ObservedContainer> {
        self.containers.get(name).and_then(|v| v.first().copied())
    }

    /// The instance before the newest.
    pub fn previous(&self, name: &str) -> Option<&'a ObservedContainer> {
        self.containers.get(name).and_then(|v| v.get(1).copied())
    }

    /// The newest sandbox.
    pub fn sandbox(&self) -> Option<&'a ObservedContainer> {
        self.sandboxes.first().copied()
    }
}

/// Is this instance finished (exited, or a start that failed)?
pub fn has_exited(c: &ObservedContainer) -> bool {
    c.state == RuntimeState::Exited || (c.state == RuntimeState::Created && c.exit_code != 0)
}

/// Decide what to do for `pod` given `observed` at `now`.
pub fn compute_pod_actions(
    pod: &Pod,
    observed: &[ObservedContainer],
    now: Timestamp,
    backoff: &BackoffConfig,
) -> PodActions {
    compute_pod_actions_with_probes(pod, observed, now, backoff, &ProbeResults::new())
}

/// [`compute_pod_actions`] with the published probe results: kubelet kills a running container
/// whose liveness or startup probe failed (the restart policy and back-off apply once it is seen
/// dead), and a sidecar with a startup probe holds back the next init container until it passed.
/// The steps follow kubelet's `computePodActions` (`pkg/kubelet/kuberuntime/kuberuntime_manager.go`).
pub fn compute_pod_actions_with_probes(
    pod: &Pod,
    observed: &[ObservedContainer],
    now: Timestamp,
    backoff: &BackoffConfig,
    probes: &ProbeResults,
) -> PodActions {
    compute_pod_actions_keeping(pod, observed, now, backoff, probes, KEEP_INSTANCES)
}

/// [`compute_pod_actions_with_probes`] keeping `keep_instances` instances of each container
/// (running or dead; [`crate::container_gc::GcPolicy::instances_kept_by_sync`]).
pub fn compute_pod_actions_keeping(
    pod: &Pod,
    observed: &[ObservedContainer],
    now: Timestamp,
    backoff: &BackoffConfig,
    probes: &ProbeResults,
    keep_instances: usize,
) -> PodActions {
    let view = PodView::new(observed);
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = RestartPolicy::of(pod);
    let mut planner = Planner {
        view: &view,
        now,
        backoff,
        probes,
        keep_instances,
        actions: PodActions::default(),
    };
    planner.remove_stale();

    let want_host_network = host_network(pod);
    let sandbox = view.sandbox().filter(|s| {
        s.state == RuntimeState::Running && s.host_network == want_host_network && (want_host_network || s.ip.is_some())
    });
    let Some(sandbox) = sandbox else {
        planner.recreate_sandbox(&spec.init_containers.unwrap_or_default(), &spec.containers, policy);
        return planner.actions;
    };
    planner.start_ephemeral(&spec);
    if planner.init_containers(&spec, &sandbox.id, policy) == InitProgress::Done {
        planner.app_containers(&spec.containers, &sandbox.id, policy);
    }
    planner.actions
}

/// Where the init containers stand after [`Planner::init_containers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InitProgress {
    /// All ran (or the pod was initialized before): the app containers are next.
    Done,
    /// An init container runs, starts or failed for good: nothing more this sync.
    Pending,
}

/// Is this init container a sidecar (`restartPolicy: Always`, kubelet's restartable init
/// container)? It starts in order with the other init containers, but keeps running beside the
/// app containers, is restarted whenever it exits, and stops after them.
pub fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

struct Planner<'v, 'a> {
    view: &'v PodView<'a>,
    now: Timestamp,
    backoff: &'v BackoffConfig,
    probes: &'v ProbeResults,
    keep_instances: usize,
    actions: PodActions,
}

impl<'a> Planner<'_, 'a> {
    /// The latest instance of `name` if it belongs to sandbox `sandbox_id`.
    fn in_sandbox(&self, name: &str, sandbox_id: &ContainerId) -> Option<&'a ObservedContainer> {
        self.view
            .latest(name)
            .filter(|c| c.sandbox_id.as_ref() == Some(sandbox_id))
    }

    /// kubelet: ephemeral containers start once each, before the init containers finished if need
    /// be, and are never restarted (nor run again in a new sandbox).
    fn start_ephemeral(&mut self, spec: &PodSpec) {
        for e in spec.ephemeral_containers.iter().flatten() {
            if self.view.latest(&e.name).is_none() {
                self.actions.start.push(StartAction {
                    name: e.name.clone(),
                    role: ContainerRole::Ephemeral,
                    attempt: 0,
                    backoff_step: 0,
                });
            }
        }
    }

    /// kubelet's computeInitContainerActions. Once an app container ran in this sandbox the pod
    /// is initialized: ordinary init containers never run again, sidecars are kept running.
    fn init_containers(&mut self, spec: &PodSpec, sandbox_id: &ContainerId, policy: RestartPolicy) -> InitProgress {
        let initialized_before = spec
            .containers
            .iter()
            .any(|c| self.in_sandbox(&c.name, sandbox_id).is_some());
        for init in spec.init_containers.iter().flatten() {
            let latest = self.in_sandbox(&init.name, sandbox_id);
            if is_sidecar(init) {
                let started = self.sidecar(init, latest);
                if !started && !initialized_before {
                    // The next init container waits until this one runs (and its startup probe
                    // passed).
                    return InitProgress::Pending;
                }
                continue;
            }
            if initialized_before {
                continue;
            }
            match latest {
                Some(c) if c.state == RuntimeState::Running => return InitProgress::Pending,
                Some(c) if has_exited(c) && c.exit_code == 0 => continue,
                Some(c) if has_exited(c) && policy == RestartPolicy::Never => {
                    // Init failed and the pod will not restart: the pod is Failed; stop the sandbox.
                    self.actions.kill_pod = true;
                    self.actions.kill_reason = format!(
                        "init container {} failed and the pod does not restart: the pod is done",
                        init.name
                    );
                    return InitProgress::Pending;
                }
                _ => {
                    self.schedule_start(init, ContainerRole::Init, latest);
                    return InitProgress::Pending;
                }
            }
        }
        InitProgress::Done
    }

    /// The app containers: each kept, started or killed; then rule 5, stopping a pod none of
    /// whose app containers runs or will run.
    fn app_containers(&mut self, containers: &[Container], sandbox_id: &ContainerId, policy: RestartPolicy) {
        let (sidecar_starts, sidecar_waits) = (self.actions.start.len(), self.actions.backing_off.len());
        let mut keep = 0;
        for container in containers {
            if self.app_container(container, sandbox_id, policy) {
                keep += 1;
            }
        }
        let app_starts = self.actions.start.len() - sidecar_starts;
        let app_waits = self.actions.backing_off.len() - sidecar_waits;
        if keep == 0 && app_starts == 0 && app_waits == 0 {
            // Rule 5: no app container runs and none will: stop the sandbox. Sidecars do not keep
            // a finished pod alive, so none is restarted either (kubelet drops their starts).
            self.actions.kill_pod = true;
            self.actions.kill_reason = "no app container runs or will run: the pod is done".into();
            self.actions.start.clear();
            self.actions.backing_off.clear();
        }
    }

    /// One app container's action. True when it is kept running (or, killed by a failed probe
    /// under `Always`, will restart once seen dead).
    fn app_container(&mut self, container: &Container, sandbox_id: &ContainerId, policy: RestartPolicy) -> bool {
        let latest = self.view.latest(&container.name);
        match latest {
            Some(c) if c.state == RuntimeState::Running => {
                if c.sandbox_id.as_ref() != Some(sandbox_id) {
                    self.kill(
                        c,
                        format!("Container {} is in an old sandbox, will be restarted", container.name),
                    );
                    self.schedule_start(container, ContainerRole::App, latest);
                } else if c.spec_hash != container_hash(container) {
                    self.kill(
                        c,
                        format!("Container {} definition changed, will be restarted", container.name),
                    );
                    self.schedule_start(container, ContainerRole::App, latest);
                } else if let Some(kill) = self.probe_kill(container, c, "Container", ", will be restarted") {
                    self.actions.kill.push(kill);
                    // A probe kill counts as a failure: it runs again unless the policy is Never.
                    // Under OnFailure it is started again in this sync, as kubelet does
                    // (ContainersToStart): killed, it may well exit 0, which alone would not
                    // restart it. Under Always it restarts once seen dead, with the back-off.
                    match policy {
                        RestartPolicy::OnFailure => self.schedule_start(container, ContainerRole::App, latest),
                        RestartPolicy::Always => return true,
                        RestartPolicy::Never => {}
                    }
                } else {
                    return true;
                }
            }
            Some(c) if has_exited(c) => {
                if policy.restarts(c.exit_code) {
                    self.schedule_start(container, ContainerRole::App, latest);
                }
            }
            _ => self.schedule_start(container, ContainerRole::App, latest),
        }
        false
    }

    fn remove_stale(&mut self) {
        for instances in self.view.containers.values() {
            let stale = instances
                .iter()
                .skip(self.keep_instances)
                .filter(|c| c.state != RuntimeState::Running);
            self.actions.remove.extend(stale.map(|c| c.id.clone()));
        }
        let stale_sandboxes = self
            .view
            .sandboxes
            .iter()
            .skip(1)
            .filter(|c| c.state != RuntimeState::Running);
        self.actions.remove.extend(stale_sandboxes.map(|c| c.id.clone()));
    }

    /// The published result of `container`'s `kind` probe for the running instance `c`.
    fn probe(&self, container: &Container, c: &ObservedContainer, kind: ProbeKind) -> Option<ProbeResult> {
        self.probes
            .get(&(container.name.clone(), kind))
            .filter(|(id, _)| *id == c.id)
            .map(|(_, result)| *result)
    }

    /// The kill a failed liveness or startup probe of the running `c` asks for (kubelet's
    /// message: `<what> <name> failed <which> probe<tail>`), with the probe's own grace period.
    fn probe_kill(&self, container: &Container, c: &ObservedContainer, what: &str, tail: &str) -> Option<KillAction> {
        let failed = |kind| self.probe(container, c, kind) == Some(ProbeResult::Failure);
        let (which, probe) = if failed(ProbeKind::Startup) {
            ("startup", container.startup_probe.as_ref())
        } else if failed(ProbeKind::Liveness) {
            ("liveness", container.liveness_probe.as_ref())
        } else {
            return None;
        };
        let grace = probe
            .and_then(|p| p.termination_grace_period_seconds)
            .map(|s| Duration::from_secs(s.max(0) as u64));
        Some(KillAction {
            id: c.id.clone(),
            name: c.name.clone(),
            reason: format!("{what} {} failed {which} probe{tail}", container.name),
            grace,
        })
    }

    /// A sidecar in the current sandbox: (re)started whenever it does not run, whatever the
    /// pod's restart policy (with the usual back-off); killed and restarted when its definition
    /// changed or its startup or liveness probe failed. True once it runs and its startup probe,
    /// if it has one, passed: then the next init container may start.
    fn sidecar(&mut self, sidecar: &Container, latest: Option<&ObservedContainer>) -> bool {
        let Some(c) = latest.filter(|c| c.state == RuntimeState::Running) else {
            self.schedule_start(sidecar, ContainerRole::Init, latest);
            return false;
        };
        if c.spec_hash != container_hash(sidecar) {
            self.kill(c, format!("Init container {} definition changed", sidecar.name));
            self.schedule_start(sidecar, ContainerRole::Init, latest);
            return false;
        }
        if let Some(kill) = self.probe_kill(sidecar, c, "Init container", "") {
            // Started again once it is seen dead, after its back-off.
            self.actions.kill.push(kill);
            return false;
        }
        sidecar.startup_probe.is_none() || self.probe(sidecar, c, ProbeKind::Startup) == Some(ProbeResult::Success)
    }

    fn kill(&mut self, c: &ObservedContainer, reason: String) {
        self.actions.kill.push(KillAction {
            id: c.id.clone(),
            name: c.name.clone(),
            reason,
            grace: None,
        });
    }

    /// Rule 1: no usable sandbox. Kill what runs, then start over in a new sandbox unless the
    /// policy says the pod is done.
    fn recreate_sandbox(&mut self, init: &[Container], containers: &[Container], policy: RestartPolicy) {
        let view = self.view;
        let anything_running = view
            .sandboxes
            .iter()
            .chain(view.containers.values().flatten())
            .any(|c| c.state == RuntimeState::Running);
        self.actions.kill_pod = anything_running;
        if anything_running {
            self.actions.kill_reason = SANDBOX_CHANGED.into();
        }
        let attempt = view.sandbox().map_or(0, |s| s.attempt + 1);
        let any_ran = view.containers.values().flatten().any(|c| c.started_at.is_some());
        if policy == RestartPolicy::Never && attempt != 0 && any_ran {
            return;
        }
        // kubelet: app containers that finished for good are not run again, and a pod none of
        // whose app containers would run gets no new sandbox (nor its init containers again).
        let to_start: Vec<&Container> = containers
            .iter()
            .filter(|c| {
                let latest = view.latest(&c.name);
                !latest.is_some_and(|l| has_exited(l) && !policy.restarts(l.exit_code))
            })
            .collect();
        if to_start.is_empty() {
            return;
        }
        if let Some(first) = init.first() {
            self.schedule_start(first, ContainerRole::Init, view.latest(&first.name));
        } else {
            for c in to_start {
                self.schedule_start(c, ContainerRole::App, view.latest(&c.name));
            }
        }
        if !self.actions.start.is_empty() || !self.actions.backing_off.is_empty() {
            self.actions.create_sandbox = Some(attempt);
        }
    }

    /// Start a new instance of `container` now, or note the back-off it still owes.
    fn schedule_start(&mut self, container: &Container, role: ContainerRole, latest: Option<&ObservedContainer>) {
        let attempt = latest.map_or(0, |l| l.attempt + 1);
        let step = match latest {
            None => 0,
            Some(l) if !has_exited(l) => {
                if l.state == RuntimeState::Running {
                    0
                } else {
                    // Created but never started (or unknown): replace it.
                    self.actions.remove.push(l.id.clone());
                    l.backoff_step
                }
            }
            Some(l) => match restart_decision(self.backoff, l, &container_hash(container), self.now) {
                RestartDecision::StartNow { step } => step,
                RestartDecision::Wait { until, delay } => {
                    self.actions.backing_off.push(BackingOff {
                        name: container.name.clone(),
                        until,
                        delay,
                    });
                    return;
                }
            },
        };
        self.actions.start.push(StartAction {
            name: container.name.clone(),
            role,
            attempt,
            backoff_step: step,
        });
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
