//! Pod status as kubelet computes it (`pkg/kubelet/kubelet_pods.go` generateAPIPodStatus, `pkg/kubelet/status/generate.go`): container states and reasons, phase
//! (getPhase) and conditions. Pure functions of the pod, what Docker runs, and the worker's
//! waiting reasons.

use std::collections::HashMap;

use dockerlet_messages::probe::{ProbeKind, ProbeResult, ProbeResults};
use dockerlet_messages::runtime::{ContainerRole, ObservedContainer, RuntimeState};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
    HostIP, Pod, PodCondition, PodIP, PodSpec, PodStatus, VolumeMountStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::plan::{has_exited, is_sidecar, PodView, RestartPolicy};
use crate::spec::{ephemeral_container, host_network, qos_class};

/// Why a container is waiting, as the PodWorker last decided (kubelet's reasonCache).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitingReason {
    /// `CrashLoopBackOff`, `ErrImageNeverPull`, `CreateContainerConfigError`, …
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
}

/// Inputs of [`generate`].
pub struct StatusInput<'a> {
    /// The desired pod.
    pub pod: &'a Pod,
    /// Its containers on Docker.
    pub observed: &'a [ObservedContainer],
    /// Waiting reasons per container name.
    pub waiting: &'a HashMap<String, WaitingReason>,
    /// Published probe results (readiness and startup decide `ready` and `started`).
    pub probes: &'a ProbeResults,
    /// The node's IP.
    pub host_ip: &'a str,
    /// The last status generated, to keep transition times and the pod IP.
    pub previous: Option<&'a PodStatus>,
    /// The pod IP its sandbox had when last seen running: kept once the sandbox stopped, as
    /// kubelet keeps a terminal pod's IP, though no status with it went out before.
    pub known_pod_ip: Option<&'a str>,
    /// Now.
    pub now: Timestamp,
    /// Set when the node failed the pod (`activeDeadlineSeconds` passed): phase Failed with
    /// this reason and message, whatever its containers say.
    pub failure: Option<&'a crate::deadline::PodFailure>,
}

/// Compute the pod's status.
pub fn generate(input: &StatusInput<'_>) -> PodStatus {
    let pod = input.pod;
    let spec = pod.spec.clone().unwrap_or_default();
    let view = PodView::new(input.observed);
    let policy = RestartPolicy::of(pod);
    let init_specs = spec.init_containers.clone().unwrap_or_default();

    let mut init_statuses = init_container_statuses(input, &view, &init_specs, policy);
    let app_started = view
        .containers
        .values()
        .flatten()
        .any(|c| c.role == ContainerRole::App && c.started_at.is_some());
    let initialized = app_started || incomplete_init(&init_specs, &init_statuses).is_empty();
    let mut app_statuses = app_container_statuses(input, &view, &spec.containers, policy, initialized);
    let mut ephemeral_statuses = ephemeral_container_statuses(input, &view, &spec);

    let phase = match input.failure {
        Some(_) => "Failed".to_string(),
        None => pod_phase(RestartPolicy::of(pod), &init_specs, &init_statuses, &app_statuses),
    };
    let sandbox_ready = view.sandbox().is_some_and(|s| s.state == RuntimeState::Running);
    let pod_ips = pod_ips(input, &view);
    let start_time = start_time(input, &view);

    if input.failure.is_some() {
        // A pod the node failed is never Ready while its containers stop (kubelet: a terminal
        // pod's containers are not ready; k/k#108594, Failed and Ready at once).
        for status in init_statuses.iter_mut().chain(&mut app_statuses) {
            status.ready = false;
        }
    }
    let conditions = conditions(&init_specs, &init_statuses, &app_statuses, &phase, sandbox_ready, input);
    let containers = spec.containers.len() + init_specs.len() + spec.ephemeral_containers.as_ref().map_or(0, Vec::len);
    cap_termination_messages(
        containers,
        init_statuses
            .iter_mut()
            .chain(&mut app_statuses)
            .chain(&mut ephemeral_statuses),
    );
    PodStatus {
        phase: Some(phase),
        conditions: Some(conditions),
        host_ip: Some(input.host_ip.to_string()),
        host_ips: Some(vec![HostIP {
            ip: input.host_ip.to_string(),
        }]),
        pod_ip: pod_ips.first().cloned(),
        pod_ips: (!pod_ips.is_empty()).then(|| pod_ips.into_iter().map(|ip| PodIP { ip }).collect()),
        start_time: Some(start_time),
        qos_class: Some(qos_class(pod).to_string()),
        init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
        container_statuses: Some(app_statuses),
        ephemeral_container_statuses: (!ephemeral_statuses.is_empty()).then_some(ephemeral_statuses),
        reason: input.failure.map(|f| f.reason.clone()),
        message: input.failure.map(|f| f.message.clone()),
        ..Default::default()
    }
}

/// The init containers' statuses; a sidecar's `started` and `ready` come from its probes.
fn init_container_statuses(
    input: &StatusInput<'_>,
    view: &PodView<'_>,
    init_specs: &[Container],
    policy: RestartPolicy,
) -> Vec<ContainerStatus> {
    init_specs
        .iter()
        .map(|c| {
            let mut status = container_status(view, c, input.waiting, policy, true, false);
            if is_sidecar(c) {
                // A sidecar is started and ready as an app container is, by its probes.
                apply_probes(&mut status, c, input.probes);
            }
            status
        })
        .collect()
}

/// The app containers' statuses (waiting `PodInitializing` until the pod is `initialized`).
fn app_container_statuses(
    input: &StatusInput<'_>,
    view: &PodView<'_>,
    containers: &[Container],
    policy: RestartPolicy,
    initialized: bool,
) -> Vec<ContainerStatus> {
    containers
        .iter()
        .map(|c| {
            let mut status = container_status(view, c, input.waiting, policy, false, !initialized);
            apply_probes(&mut status, c, input.probes);
            status
        })
        .collect()
}

/// Ephemeral containers: never ready, no `started` (kubelet's prober does not see them).
fn ephemeral_container_statuses(input: &StatusInput<'_>, view: &PodView<'_>, spec: &PodSpec) -> Vec<ContainerStatus> {
    spec.ephemeral_containers
        .iter()
        .flatten()
        .map(|e| ContainerStatus {
            ready: false,
            started: None,
            ..container_status(
                view,
                &ephemeral_container(e),
                input.waiting,
                RestartPolicy::Never,
                false,
                false,
            )
        })
        .collect()
}

/// The pod's IPs: the node's for a host-network pod, else its sandbox's (two on a dual-stack
/// pod network, the node IP's family first), else the ones it had.
fn pod_ips(input: &StatusInput<'_>, view: &PodView<'_>) -> Vec<String> {
    if host_network(input.pod) {
        return vec![input.host_ip.to_string()];
    }
    if let Some(ip) = view.sandbox().and_then(|s| s.ip.clone()) {
        let secondary = view.sandbox().and_then(|s| s.secondary_ip.clone());
        return std::iter::once(ip).chain(secondary).collect();
    }
    if let Some(previous) = input.previous.filter(|p| p.pod_ip.is_some()) {
        let kept: Vec<String> = previous.pod_ips.iter().flatten().map(|p| p.ip.clone()).collect();
        return if kept.is_empty() {
            previous.pod_ip.clone().into_iter().collect()
        } else {
            kept
        };
    }
    input.known_pod_ip.map(str::to_string).into_iter().collect()
}

/// The pod's `startTime`: kept once set, else its first sandbox's creation, else now.
fn start_time(input: &StatusInput<'_>, view: &PodView<'_>) -> Time {
    input
        .previous
        .and_then(|p| p.start_time.clone())
        .or_else(|| {
            view.sandboxes
                .iter()
                .filter_map(|s| s.created_at.clone())
                .min_by_key(|t| t.0)
        })
        .unwrap_or(Time(input.now))
}

/// The most termination message bytes a pod's status carries, shared by its containers
/// (kubelet's `MaxPodTerminationMessageLogLength`).
pub const MAX_POD_TERMINATION_MESSAGE: usize = 12 * 1024;

/// kubelet's status manager `normalizeStatus`: each termination message (current and last
/// state) is cut to the pod's 12 KiB shared by its regular, init and ephemeral containers,
/// keeping its beginning (at a character boundary: Go cuts bytes).
fn cap_termination_messages<'a>(containers: usize, statuses: impl Iterator<Item = &'a mut ContainerStatus>) {
    let per_container = MAX_POD_TERMINATION_MESSAGE / containers.max(1);
    for status in statuses {
        for state in [status.state.as_mut(), status.last_state.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Some(message) = state.terminated.as_mut().and_then(|t| t.message.as_mut()) {
                if message.len() > per_container {
                    let mut cut = per_container;
                    while !message.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    message.truncate(cut);
                }
            }
        }
    }
}

/// The reason of a container the terminated pod has no record of ending (kubelet's
/// `ContainerReasonStatusUnknown`).
pub const STATUS_UNKNOWN: &str = "ContainerStatusUnknown";

/// What a terminated pod's containers without an end show, as kubelet's status manager
/// `TerminatePod`: once the pod has initialized, every regular container not terminated is
/// terminated `ContainerStatusUnknown` with exit code 137 (whether it succeeded is not known, so
/// an error); so is every init container but the trailing ones that never started.
pub fn default_unterminated(pod: &Pod, status: &mut PodStatus) {
    let unknown = || ContainerState {
        terminated: Some(ContainerStateTerminated {
            reason: Some(STATUS_UNKNOWN.into()),
            message: Some("The container could not be located when the pod was terminated".into()),
            exit_code: 137,
            ..Default::default()
        }),
        ..Default::default()
    };
    let ended = |c: &ContainerStatus| c.state.as_ref().is_some_and(|s| s.terminated.is_some());
    if has_initialized(pod, status) {
        for c in status.container_statuses.iter_mut().flatten() {
            if !ended(c) {
                c.state = Some(unknown());
            }
        }
    }
    if let Some(inits) = status.init_container_statuses.as_mut() {
        let started = initialized_prefix(inits);
        for c in &mut inits[..started] {
            if !ended(c) {
                c.state = Some(unknown());
            }
        }
    }
}

fn is_waiting(c: &ContainerStatus) -> bool {
    c.state.as_ref().is_none_or(|s| s.waiting.is_some())
}

fn last_terminated(c: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    c.last_state.as_ref().and_then(|s| s.terminated.as_ref())
}

/// kubelet's `hasPodInitialized`: no init containers, a regular container that left waiting
/// once, or the last init container ended with 0.
fn has_initialized(pod: &Pod, status: &PodStatus) -> bool {
    let inits = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default();
    let Some(last) = inits.last() else {
        return true;
    };
    if status
        .container_statuses
        .iter()
        .flatten()
        .any(|c| last_terminated(c).is_some() || !is_waiting(c))
    {
        return true;
    }
    status
        .init_container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == last.name)
        .is_some_and(|c| {
            let now = c.state.as_ref().and_then(|s| s.terminated.as_ref());
            now.is_some_and(|t| t.exit_code == 0) || last_terminated(c).is_some_and(|t| t.exit_code == 0)
        })
}

/// kubelet's `initializedContainers`: how many of the statuses, from the first, are not the
/// trailing run of containers waiting with no earlier end (at least one, when there are any).
fn initialized_prefix(statuses: &[ContainerStatus]) -> usize {
    statuses
        .iter()
        .rposition(|c| !is_waiting(c) || last_terminated(c).is_some())
        .map_or(statuses.len().min(1), |i| i + 1)
}

fn time(t: &Option<Time>) -> Option<Time> {
    t.clone()
}

/// The Terminated state of a finished instance (dockershim's reasons).
fn terminated(c: &ObservedContainer) -> ContainerStateTerminated {
    let never_ran = c.started_at.is_none();
    let reason = if c.oom_killed {
        "OOMKilled"
    } else if c.exit_code == 0 {
        "Completed"
    } else if never_ran {
        "ContainerCannotRun"
    } else {
        "Error"
    };
    ContainerStateTerminated {
        exit_code: c.exit_code as i32,
        reason: Some(reason.to_string()),
        // The runtime's reason first, then what the container wrote (kubelet's
        // toKubeContainerStatus).
        message: match (c.error.as_str(), c.termination_message.as_str()) {
            ("", "") => None,
            (error, "") => Some(error.to_string()),
            ("", written) => Some(written.to_string()),
            (error, written) => Some(format!("{error}: {written}")),
        },
        started_at: if never_ran {
            time(&c.created_at)
        } else {
            time(&c.started_at)
        },
        finished_at: time(&c.finished_at).or_else(|| time(&c.created_at)),
        container_id: Some(format!("docker://{}", c.id)),
        ..Default::default()
    }
}

fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message,
        }),
        ..Default::default()
    }
}

fn container_status(
    view: &PodView<'_>,
    spec: &Container,
    reasons: &HashMap<String, WaitingReason>,
    policy: RestartPolicy,
    is_init: bool,
    pod_initializing: bool,
) -> ContainerStatus {
    let latest = view.latest(&spec.name);
    let previous = view.previous(&spec.name);
    let cached = reasons.get(&spec.name);
    let default_waiting = if is_init || pod_initializing {
        "PodInitializing"
    } else {
        "ContainerCreating"
    };
    let restarts = |c: &ObservedContainer| {
        if is_init && !is_sidecar(spec) {
            c.exit_code != 0 && policy != RestartPolicy::Never
        } else {
            is_sidecar(spec) || policy.restarts(c.exit_code)
        }
    };
    let last_of = |c: Option<&ObservedContainer>| {
        c.filter(|c| has_exited(c)).map(|c| ContainerState {
            terminated: Some(terminated(c)),
            ..Default::default()
        })
    };
    let (state, last_state) = match latest {
        None => {
            let (reason, message) = cached.map_or((default_waiting, None), |w| {
                (w.reason.as_str(), Some(w.message.clone()))
            });
            (waiting(reason, message), None)
        }
        Some(c) if c.state == RuntimeState::Running => (
            ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: time(&c.started_at),
                }),
                ..Default::default()
            },
            last_of(previous),
        ),
        // A waiting reason only for an instance that will be started again (kubelet applies its
        // reason cache only where ShouldContainerBeRestarted): a container that failed to start
        // under Never stays terminated.
        Some(c) if has_exited(c) => match cached.filter(|_| restarts(c)) {
            Some(w) => (waiting(&w.reason, Some(w.message.clone())), last_of(Some(c))),
            None => (
                ContainerState {
                    terminated: Some(terminated(c)),
                    ..Default::default()
                },
                last_of(previous),
            ),
        },
        Some(_) => {
            let (reason, message) = cached.map_or((default_waiting, None), |w| {
                (w.reason.as_str(), Some(w.message.clone()))
            });
            (waiting(reason, message), last_of(previous))
        }
    };
    let running = state.running.is_some();
    let ready = if is_init {
        state.terminated.as_ref().is_some_and(|t| t.exit_code == 0)
    } else {
        // Probes refine this in `apply_probes`.
        running
    };
    ContainerStatus {
        name: spec.name.clone(),
        // kubelet reports the stop signal a container asked for (ContainerStopSignals).
        stop_signal: spec.lifecycle.as_ref().and_then(|l| l.stop_signal.clone()),
        // The image its instance was created from (kubelet reports the runtime's): a changed
        // spec image shows only once a new instance runs it.
        image: latest
            .map(|c| c.image.clone())
            .filter(|image| !image.is_empty())
            .or_else(|| spec.image.clone())
            .unwrap_or_default(),
        image_id: latest.map(|c| format!("docker://{}", c.image_id)).unwrap_or_default(),
        container_id: latest.map(|c| format!("docker://{}", c.id)),
        restart_count: latest.map_or(0, |c| c.attempt as i32),
        started: Some(running),
        ready,
        state: Some(state),
        last_state: Some(last_state.unwrap_or_default()),
        volume_mounts: latest.and_then(|_| volume_mount_statuses(spec)),
        ..Default::default()
    }
}

/// kubelet's `containerStatuses[].volumeMounts` for a container the runtime has: each of its
/// volumeMounts, a read-only one with the recursive read-only mode it got, which on Docker is
/// always `Disabled` (`IfPossible` falls back to a plain read-only mount; `Enabled` never
/// starts).
fn volume_mount_statuses(spec: &Container) -> Option<Vec<VolumeMountStatus>> {
    let mounts = spec.volume_mounts.as_ref().filter(|m| !m.is_empty())?;
    Some(
        mounts
            .iter()
            .map(|m| {
                let read_only = m.read_only == Some(true);
                VolumeMountStatus {
                    name: m.name.clone(),
                    mount_path: m.mount_path.clone(),
                    read_only: read_only.then_some(true),
                    recursive_read_only: read_only.then(|| "Disabled".to_string()),
                    ..Default::default()
                }
            })
            .collect(),
    )
}

/// `started` waits for a startup probe's success, `ready` for a readiness probe's (kubelet:
/// readiness starts false; a container not yet started is not ready).
fn apply_probes(status: &mut ContainerStatus, spec: &Container, probes: &ProbeResults) {
    let Some(id) = status
        .container_id
        .as_deref()
        .and_then(|id| id.strip_prefix("docker://"))
    else {
        return;
    };
    let passed = |kind| {
        probes
            .get(&(spec.name.clone(), kind))
            .is_some_and(|(cid, result)| cid.0 == id && *result == ProbeResult::Success)
    };
    let running = status.state.as_ref().is_some_and(|s| s.running.is_some());
    let started = running && (spec.startup_probe.is_none() || passed(ProbeKind::Startup));
    status.started = Some(started);
    status.ready = started && (spec.readiness_probe.is_none() || passed(ProbeKind::Readiness));
}

/// The init containers that keep the pod from being initialized (kubelet's
/// GeneratePodInitializedCondition): an ordinary one until it exited 0, a sidecar until it
/// started.
fn incomplete_init(specs: &[Container], statuses: &[ContainerStatus]) -> Vec<String> {
    specs
        .iter()
        .zip(statuses)
        .filter(|(spec, status)| {
            if is_sidecar(spec) {
                status.started != Some(true)
            } else {
                status
                    .state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .is_none_or(|t| t.exit_code != 0)
            }
        })
        .map(|(spec, _)| spec.name.clone())
        .collect()
}

/// kubelet's getPhase (`pkg/kubelet/kubelet_pods.go`) over the generated container statuses.
/// Sidecars count as running while they run, hold the pod Pending until they started (unless an
/// app container already ran), and do not count once they stopped.
pub fn pod_phase(
    policy: RestartPolicy,
    init_specs: &[Container],
    init: &[ContainerStatus],
    apps: &[ContainerStatus],
) -> String {
    let exit_of = |s: &ContainerStatus| {
        s.state
            .as_ref()
            .and_then(|st| st.terminated.as_ref())
            .map(|t| t.exit_code)
    };
    let last_exit_of = |s: &ContainerStatus| last_terminated(s).map(|t| t.exit_code);

    let (mut pending_init, mut failed_init, mut pending_sidecars) = (0, 0, 0);
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for (spec, s) in init_specs.iter().zip(init) {
        let st = s.state.clone().unwrap_or_default();
        if is_sidecar(spec) {
            if st.running.is_some() {
                running += 1;
                if s.started != Some(true) {
                    pending_sidecars += 1;
                }
            } else if st.waiting.is_some() && last_exit_of(s).is_none() {
                pending_sidecars += 1;
                waiting += 1;
            }
            continue;
        }
        if st.running.is_some() {
            pending_init += 1;
        } else if let Some(code) = exit_of(s) {
            if code != 0 {
                failed_init += 1;
            }
        } else if st.waiting.is_some() {
            match last_exit_of(s) {
                Some(code) if code != 0 => failed_init += 1,
                Some(_) => {}
                None => pending_init += 1,
            }
        } else {
            pending_init += 1;
        }
    }

    let app_ran = app_container_ran(apps);
    for s in apps {
        let st = s.state.clone().unwrap_or_default();
        if st.running.is_some() {
            running += 1;
        } else if let Some(code) = exit_of(s) {
            stopped += 1;
            if code == 0 {
                succeeded += 1;
            }
        } else if st.waiting.is_some() {
            match last_exit_of(s) {
                Some(_) => stopped += 1,
                None => waiting += 1,
            }
        }
    }

    let phase = if failed_init > 0 && policy == RestartPolicy::Never {
        "Failed"
    } else if pending_init > 0
        || (pending_sidecars > 0 && !app_ran)
        || waiting > 0
        || (failed_init > 0 && running == 0 && stopped == 0)
    {
        "Pending"
    } else if running > 0 {
        "Running"
    } else if stopped > 0 {
        match policy {
            RestartPolicy::Always => "Running",
            _ if stopped == succeeded => "Succeeded",
            RestartPolicy::Never => "Failed",
            RestartPolicy::OnFailure => "Running",
        }
    } else {
        "Pending"
    };
    phase.to_string()
}

/// Whether some app container runs or ran (its state is running or terminated).
fn app_container_ran(apps: &[ContainerStatus]) -> bool {
    apps.iter().any(|s| {
        s.state
            .as_ref()
            .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
    })
}

/// A condition's truth, reason and message.
type Verdict = (bool, Option<&'static str>, Option<String>);

/// The pod's `readinessGates` against the conditions others set in its status (kubelet's
/// messages): ready when each gate's condition is True.
fn readiness_gates(pod: &Pod) -> Verdict {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let unready: Vec<String> = pod
        .spec
        .iter()
        .flat_map(|s| s.readiness_gates.iter().flatten())
        .filter_map(|gate| {
            let kind = &gate.condition_type;
            match conditions.into_iter().flatten().find(|c| &c.type_ == kind) {
                None => Some(format!(
                    "corresponding condition of pod readiness gate {kind:?} does not exist."
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate {kind:?} is not \"True\", but {}",
                    c.status
                )),
                Some(_) => None,
            }
        })
        .collect();
    if unready.is_empty() {
        (true, None, None)
    } else {
        (false, Some("ReadinessGatesNotReady"), Some(unready.join(", ")))
    }
}

fn conditions(
    init_specs: &[Container],
    init: &[ContainerStatus],
    apps: &[ContainerStatus],
    phase: &str,
    sandbox_ready: bool,
    input: &StatusInput<'_>,
) -> Vec<PodCondition> {
    let succeeded = phase == "Succeeded";
    // kubelet: once an app container ran, the pod stays initialized.
    let incomplete = if app_container_ran(apps) {
        Vec::new()
    } else {
        incomplete_init(init_specs, init)
    };
    // Ready counts the sidecars with the app containers.
    let unready: Vec<String> = init_specs
        .iter()
        .zip(init)
        .filter(|(spec, status)| is_sidecar(spec) && !status.ready)
        .map(|(_, status)| status.name.clone())
        .chain(apps.iter().filter(|s| !s.ready).map(|s| s.name.clone()))
        .collect();
    let initialized = match (succeeded, incomplete.is_empty()) {
        (true, _) => (true, Some("PodCompleted"), None),
        (false, true) => (true, None, None),
        (false, false) => (
            false,
            Some("ContainersNotInitialized"),
            Some(format!("containers with incomplete status: [{}]", incomplete.join(" "))),
        ),
    };
    let containers_ready = match (succeeded, unready.is_empty()) {
        (true, _) => (false, Some("PodCompleted"), None),
        (false, true) => (true, None, None),
        (false, false) => (
            false,
            Some("ContainersNotReady"),
            Some(format!("containers with unready status: [{}]", unready.join(" "))),
        ),
    };
    // kubelet's GeneratePodReadyCondition: ContainersReady, then the readiness gates.
    let ready = match containers_ready {
        (true, _, _) => readiness_gates(input.pod),
        ref unready => unready.clone(),
    };
    let wanted = [
        ("PodReadyToStartContainers", (sandbox_ready, None, None)),
        ("Initialized", initialized),
        ("Ready", ready),
        ("ContainersReady", containers_ready),
        ("PodScheduled", (true, None, None)),
    ];
    let previous = input.previous.and_then(|p| p.conditions.as_ref());
    // kubelet's disruptions (node shutdown) add DisruptionTarget to the conditions it sets.
    let disruption = input.failure.filter(|f| f.disruption_target).map(|f| {
        (
            "DisruptionTarget",
            (
                true,
                Some(crate::deadline::TERMINATION_BY_KUBELET),
                Some(f.message.clone()),
            ),
        )
    });
    disruption
        .into_iter()
        .chain(wanted)
        .map(|(kind, (ok, reason, message))| {
            let status = if ok { "True" } else { "False" };
            let unchanged = previous.and_then(|prev| prev.iter().find(|c| c.type_ == kind && c.status == status));
            PodCondition {
                type_: kind.to_string(),
                status: status.to_string(),
                reason: reason.map(str::to_string),
                message,
                last_transition_time: Some(
                    unchanged
                        .and_then(|c| c.last_transition_time.clone())
                        .unwrap_or(Time(input.now)),
                ),
                ..Default::default()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
