//! Pod status as kubelet computes it (`pkg/kubelet/kubelet_pods.go` generateAPIPodStatus, `pkg/kubelet/status/generate.go`): container states and reasons, phase
//! (getPhase) and conditions. Pure functions of the pod, what Docker runs, and the worker's
//! waiting reasons.

use std::collections::HashMap;

use dockerlet_messages::probe::{ProbeKind, ProbeResult, ProbeResults};
use dockerlet_messages::runtime::{ContainerRole, ObservedContainer, RuntimeState};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
    HostIP, Pod, PodCondition, PodIP, PodStatus, VolumeMountStatus,
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

    let mut init_statuses: Vec<ContainerStatus> = init_specs
        .iter()
        .map(|c| {
            let mut status = container_status(&view, c, input.waiting, policy, true, false);
            if is_sidecar(c) {
                // A sidecar is started and ready as an app container is, by its probes.
                apply_probes(&mut status, c, input.probes);
            }
            status
        })
        .collect();
    let app_started = view
        .containers
        .values()
        .flatten()
        .any(|c| c.role == ContainerRole::App && c.started_at.is_some());
    let initialized = app_started || incomplete_init(&init_specs, &init_statuses).is_empty();
    let mut app_statuses: Vec<ContainerStatus> = spec
        .containers
        .iter()
        .map(|c| {
            let mut status = container_status(&view, c, input.waiting, policy, false, !initialized);
            apply_probes(&mut status, c, input.probes);
            status
        })
        .collect();

    // Ephemeral containers: never ready, no `started` (kubelet's prober does not see them).
    let mut ephemeral_statuses: Vec<ContainerStatus> = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|e| ContainerStatus {
            ready: false,
            started: None,
            ..container_status(
                &view,
                &ephemeral_container(e),
                input.waiting,
                RestartPolicy::Never,
                false,
                false,
            )
        })
        .collect();

    let phase = match input.failure {
        Some(_) => "Failed".to_string(),
        None => pod_phase(RestartPolicy::of(pod), &init_specs, &init_statuses, &app_statuses),
    };
    let sandbox_ready = view.sandbox().is_some_and(|s| s.state == RuntimeState::Running);
    let host_net = host_network(pod);
    let pod_ip = if host_net {
        Some(input.host_ip.to_string())
    } else {
        view.sandbox()
            .and_then(|s| s.ip.clone())
            .or_else(|| input.previous.and_then(|p| p.pod_ip.clone()))
            .or_else(|| input.known_pod_ip.map(str::to_string))
    };
    let start_time = input
        .previous
        .and_then(|p| p.start_time.clone())
        .or_else(|| {
            view.sandboxes
                .iter()
                .filter_map(|s| s.created_at.clone())
                .min_by_key(|t| t.0)
        })
        .unwrap_or(Time(input.now));

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
        pod_ips: pod_ip.clone().map(|ip| vec![PodIP { ip }]),
        pod_ip,
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
mod tests {
    use super::*;
    use dockerlet_messages::runtime::ContainerRole;
    use dockerlet_messages::{ContainerId, PodUid};
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn pod(policy: &str, init: &[&str], apps: &[&str]) -> Pod {
        let c = |n: &&str| Container {
            name: n.to_string(),
            image: Some("img:1".into()),
            ..Default::default()
        };
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                restart_policy: Some(policy.into()),
                init_containers: (!init.is_empty()).then(|| init.iter().map(c).collect()),
                containers: apps.iter().map(c).collect(),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn cstatus(name: &str, state: ContainerState) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            state: Some(state),
            ..Default::default()
        }
    }

    fn waiting_state() -> ContainerState {
        waiting("ContainerCreating", None)
    }

    fn ended(exit_code: i32) -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code,
                reason: Some(if exit_code == 0 { "Completed" } else { "Error" }.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn reason_of(c: &ContainerStatus) -> Option<&str> {
        let s = c.state.as_ref()?;
        s.terminated
            .as_ref()
            .and_then(|t| t.reason.as_deref())
            .or_else(|| s.waiting.as_ref().and_then(|w| w.reason.as_deref()))
    }

    /// Termination messages share the pod's 12 KiB: with four containers each keeps its first
    /// 3072 bytes, in its current and its last state.
    #[test]
    fn termination_messages_share_twelve_kib() {
        let message = |n: usize| ContainerState {
            terminated: Some(ContainerStateTerminated {
                message: Some("B".repeat(n)),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut statuses = [
            ContainerStatus {
                state: Some(message(4096)),
                last_state: Some(message(4000)),
                ..cstatus("c1", message(0))
            },
            cstatus("c2", message(100)),
        ];
        cap_termination_messages(4, statuses.iter_mut());
        let len = |s: &Option<ContainerState>| {
            s.as_ref()
                .and_then(|s| s.terminated.as_ref())
                .and_then(|t| t.message.as_ref())
                .map(String::len)
        };
        assert_eq!(
            (len(&statuses[0].state), len(&statuses[0].last_state)),
            (Some(3072), Some(3072))
        );
        assert_eq!(len(&statuses[1].state), Some(100));
        // One container keeps up to 12 KiB; a multi-byte character is never split.
        let mut one = [ContainerStatus {
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    message: Some(format!("{}é", "a".repeat(12 * 1024 - 1))),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }];
        cap_termination_messages(1, one.iter_mut());
        assert_eq!(len(&one[0].state), Some(12 * 1024 - 1));
    }

    /// A pod deleted before its container started: the container ends "ContainerStatusUnknown"
    /// with 137, as kubelet's TerminatePod; a container that ended keeps its end.
    #[test]
    fn a_terminated_pod_has_no_container_without_an_end() {
        let p = pod("Always", &[], &["a", "b"]);
        let mut status = PodStatus {
            container_statuses: Some(vec![cstatus("a", waiting_state()), cstatus("b", ended(2))]),
            ..Default::default()
        };
        default_unterminated(&p, &mut status);
        let apps = status.container_statuses.as_ref().unwrap();
        let a = apps[0].state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!((a.reason.as_deref(), a.exit_code), (Some(STATUS_UNKNOWN), 137));
        assert_eq!(
            a.message.as_deref(),
            Some("The container could not be located when the pod was terminated")
        );
        assert_eq!(reason_of(&apps[1]), Some("Error"));
        assert_eq!(status.init_container_statuses, None);
    }

    /// Before the pod initialized, regular containers keep waiting; of the init containers only
    /// those up to the last that started are ended (at least the first).
    #[test]
    fn an_uninitialized_pod_ends_only_the_init_containers_that_started() {
        let p = pod("Always", &["i1", "i2", "i3"], &["a"]);
        let running = ContainerState {
            running: Some(Default::default()),
            ..Default::default()
        };
        let mut status = PodStatus {
            init_container_statuses: Some(vec![
                cstatus("i1", ended(0)),
                cstatus("i2", running),
                cstatus("i3", waiting_state()),
            ]),
            container_statuses: Some(vec![cstatus("a", waiting("PodInitializing", None))]),
            ..Default::default()
        };
        default_unterminated(&p, &mut status);
        let inits = status.init_container_statuses.as_ref().unwrap();
        let reasons: Vec<_> = inits.iter().map(reason_of).collect();
        assert_eq!(
            reasons,
            [Some("Completed"), Some(STATUS_UNKNOWN), Some("ContainerCreating")]
        );
        assert_eq!(
            reason_of(&status.container_statuses.as_ref().unwrap()[0]),
            Some("PodInitializing")
        );

        // None started: the first is ended all the same.
        let mut none = PodStatus {
            init_container_statuses: Some(vec![cstatus("i1", waiting_state()), cstatus("i2", waiting_state())]),
            container_statuses: Some(vec![cstatus("a", waiting("PodInitializing", None))]),
            ..Default::default()
        };
        default_unterminated(&p, &mut none);
        let reasons: Vec<_> = none
            .init_container_statuses
            .as_ref()
            .unwrap()
            .iter()
            .map(reason_of)
            .collect();
        assert_eq!(reasons, [Some(STATUS_UNKNOWN), Some("ContainerCreating")]);

        // The last init container ended with 0: initialized, the waiting app container ends too.
        let mut done = PodStatus {
            init_container_statuses: Some(vec![
                cstatus("i1", ended(0)),
                cstatus("i2", ended(0)),
                cstatus("i3", ended(0)),
            ]),
            container_statuses: Some(vec![cstatus("a", waiting_state())]),
            ..Default::default()
        };
        default_unterminated(&p, &mut done);
        assert_eq!(
            reason_of(&done.container_statuses.as_ref().unwrap()[0]),
            Some(STATUS_UNKNOWN)
        );
    }

    fn obs(name: &str, role: ContainerRole, attempt: u32, state: RuntimeState, exit_code: i64) -> ObservedContainer {
        ObservedContainer {
            id: ContainerId(format!("{name}{attempt}")),
            pod_uid: PodUid("u".into()),
            pod_name: String::new(),
            pod_namespace: String::new(),
            name: name.into(),
            role,
            attempt,
            spec_hash: String::new(),
            backoff_step: 0,
            sandbox_id: Some(ContainerId("POD0".into())),
            state,
            exit_code,
            oom_killed: false,
            error: String::new(),
            created_at: Some(Time(at(10))),
            started_at: Some(Time(at(11))),
            finished_at: (state == RuntimeState::Exited).then(|| Time(at(12))),
            image: "img:1".into(),
            image_id: "sha256:1".into(),
            ip: (role == ContainerRole::Sandbox).then(|| "172.17.0.9".to_string()),
            host_network: false,
            pod_grace_seconds: None,
            pid: None,
            cgroup_parent: String::new(),
            termination_message: String::new(),
            details_pending: false,
        }
    }

    fn status_of(p: &Pod, observed: &[ObservedContainer], waiting: &HashMap<String, WaitingReason>) -> PodStatus {
        generate(&StatusInput {
            pod: p,
            observed,
            waiting,
            probes: &ProbeResults::new(),
            host_ip: "10.0.0.1",
            previous: None,
            known_pod_ip: None,
            now: at(100),
            failure: None,
        })
    }

    fn condition(s: &PodStatus, kind: &str) -> String {
        s.conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == kind)
            .unwrap()
            .status
            .clone()
    }

    /// A pod the node stopped for its shutdown (kubelet's node shutdown manager): phase Failed,
    /// reason `Terminated` with kubelet's message, and a `DisruptionTarget` condition (reason
    /// `TerminationByKubelet`); a pod failed by its deadline has no such condition.
    #[test]
    fn node_shutdown_failure_reports_a_disruption_target() {
        let p = pod("Always", &[], &["a"]);
        let observed = [
            obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Exited, 0),
            obs("a", ContainerRole::App, 0, RuntimeState::Exited, 137),
        ];
        let none = HashMap::new();
        let with = |failure: &crate::deadline::PodFailure| {
            generate(&StatusInput {
                pod: &p,
                observed: &observed,
                waiting: &none,
                probes: &ProbeResults::new(),
                host_ip: "10.0.0.1",
                previous: None,
                known_pod_ip: None,
                now: at(100),
                failure: Some(failure),
            })
        };
        let s = with(&crate::deadline::PodFailure::node_shutdown());
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        assert_eq!(s.reason.as_deref(), Some("Terminated"));
        assert_eq!(
            s.message.as_deref(),
            Some("Pod was terminated in response to imminent node shutdown.")
        );
        let target = s
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == "DisruptionTarget")
            .expect("DisruptionTarget");
        assert_eq!(target.status, "True");
        assert_eq!(target.reason.as_deref(), Some("TerminationByKubelet"));
        assert_eq!(target.message, s.message);
        assert_eq!(condition(&s, "ContainersReady"), "False");

        let s = with(&crate::deadline::PodFailure::deadline_exceeded());
        assert!(s.conditions.unwrap().iter().all(|c| c.type_ != "DisruptionTarget"));

        // Still running while it stops: Failed, and never Ready at the same time.
        let running = [
            obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
            obs("a", ContainerRole::App, 0, RuntimeState::Running, 0),
        ];
        let s = generate(&StatusInput {
            pod: &p,
            observed: &running,
            waiting: &none,
            probes: &ProbeResults::new(),
            host_ip: "10.0.0.1",
            previous: None,
            known_pod_ip: None,
            now: at(100),
            failure: Some(&crate::deadline::PodFailure::node_shutdown()),
        });
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        assert_eq!(condition(&s, "Ready"), "False");
        assert!(!s.container_statuses.unwrap()[0].ready);
    }

    /// kubelet's `volumeMounts` in the status of a container the runtime has: each mount, a
    /// read-only one with recursiveReadOnly `Disabled` (Docker has no recursively read-only
    /// mounts), a writable one without; none for a container not created yet.
    #[test]
    fn created_containers_report_their_volume_mounts() {
        use k8s_openapi::api::core::v1::VolumeMount;
        let mut p = pod("Always", &[], &["a", "b"]);
        let mount = |name: &str, path: &str, read_only: Option<bool>, rro: Option<&str>| VolumeMount {
            name: name.into(),
            mount_path: path.into(),
            read_only,
            recursive_read_only: rro.map(str::to_string),
            ..Default::default()
        };
        for c in &mut p.spec.as_mut().unwrap().containers {
            c.volume_mounts = Some(vec![
                mount("mnt", "/mnt-rro-if-possible", Some(true), Some("IfPossible")),
                mount("mnt", "/mnt-ro", Some(true), None),
                mount("mnt", "/mnt-rw", None, None),
            ]);
        }
        let observed = [
            obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
            obs("a", ContainerRole::App, 0, RuntimeState::Running, 0),
        ];
        let s = status_of(&p, &observed, &HashMap::new());
        let statuses = s.container_statuses.unwrap();
        let mounts = statuses[0].volume_mounts.as_ref().unwrap();
        let seen: Vec<(&str, Option<bool>, Option<&str>)> = mounts
            .iter()
            .map(|m| (m.mount_path.as_str(), m.read_only, m.recursive_read_only.as_deref()))
            .collect();
        assert_eq!(
            seen,
            [
                ("/mnt-rro-if-possible", Some(true), Some("Disabled")),
                ("/mnt-ro", Some(true), Some("Disabled")),
                ("/mnt-rw", None, None),
            ]
        );
        assert_eq!(statuses[1].volume_mounts, None, "b was never created");
    }

    /// A running pod is Running and Ready, with the sandbox's IP.
    #[test]
    fn running_pod_is_running_and_ready() {
        let p = pod("Always", &[], &["a"]);
        let observed = [
            obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
            obs("a", ContainerRole::App, 0, RuntimeState::Running, 0),
        ];
        let s = status_of(&p, &observed, &HashMap::new());
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(s.pod_ip.as_deref(), Some("172.17.0.9"));
        for kind in [
            "Ready",
            "ContainersReady",
            "Initialized",
            "PodScheduled",
            "PodReadyToStartContainers",
        ] {
            assert_eq!(condition(&s, kind), "True", "{kind}");
        }
        let cs = &s.container_statuses.unwrap()[0];
        assert!(cs.ready);
        assert_eq!(cs.container_id.as_deref(), Some("docker://a0"));
    }

    /// The terminated state's message is Docker's error, then what the container wrote, joined
    /// as kubelet joins them.
    #[test]
    fn the_termination_message_follows_the_runtimes_error() {
        let with = |error: &str, written: &str| {
            let mut c = obs("a", ContainerRole::App, 0, RuntimeState::Exited, 1);
            c.error = error.into();
            c.termination_message = written.into();
            terminated(&c).message
        };
        assert_eq!(with("", ""), None);
        assert_eq!(with("", "DONE").as_deref(), Some("DONE"));
        assert_eq!(with("oci error", "").as_deref(), Some("oci error"));
        assert_eq!(with("oci error", "DONE").as_deref(), Some("oci error: DONE"));
    }

    /// Phases for every restart policy and exit code, as kubelet's getPhase gives them.
    /// A start failure's waiting reason shows only where the container will be started again:
    /// under Never the failed instance stays terminated (and the pod Failed), as kubelet's
    /// reason cache applies only where ShouldContainerBeRestarted.
    #[test]
    fn a_waiting_reason_shows_only_for_a_container_that_restarts() {
        let mut failed = obs("a", ContainerRole::App, 0, RuntimeState::Created, 127);
        failed.started_at = None;
        let observed = [obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0), failed];
        let waiting = HashMap::from([(
            "a".to_string(),
            WaitingReason {
                reason: "RunContainerError".into(),
                message: "exec: no such file".into(),
            },
        )]);
        let state = |policy: &str| {
            let s = status_of(&pod(policy, &[], &["a"]), &observed, &waiting);
            let state = s.container_statuses.unwrap()[0].state.clone().unwrap();
            (
                s.phase.unwrap(),
                state.waiting.and_then(|w| w.reason),
                state.terminated.map(|t| t.exit_code),
            )
        };
        assert_eq!(state("Never"), ("Failed".into(), None, Some(127)));
        assert_eq!(
            state("Always"),
            ("Running".into(), Some("RunContainerError".into()), None)
        );
        assert_eq!(
            state("OnFailure"),
            ("Running".into(), Some("RunContainerError".into()), None)
        );
    }

    /// A pod whose sandbox stopped before any status carried its IP keeps the IP it had, as
    /// kubelet keeps a terminal pod's.
    #[test]
    fn a_finished_pod_keeps_the_ip_its_sandbox_had() {
        let p = pod("Never", &[], &["a"]);
        let observed = [
            obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Exited, 0),
            obs("a", ContainerRole::App, 0, RuntimeState::Exited, 0),
        ];
        let mut observed = observed.to_vec();
        observed[0].ip = None;
        let status = |known: Option<&str>| {
            generate(&StatusInput {
                pod: &p,
                observed: &observed,
                waiting: &HashMap::new(),
                probes: &ProbeResults::new(),
                host_ip: "10.0.0.1",
                previous: None,
                known_pod_ip: known,
                now: at(100),
                failure: None,
            })
        };
        assert_eq!(status(None).pod_ip, None);
        let s = status(Some("172.17.0.9"));
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
        assert_eq!(s.pod_ip.as_deref(), Some("172.17.0.9"));
        assert_eq!(s.pod_ips.unwrap()[0].ip, "172.17.0.9");
    }

    /// kubelet reports the image of the instance that exists (the runtime's), so a spec image
    /// changed under a finished init container or a terminating one does not show as if it ran.
    #[test]
    fn the_status_image_is_the_instances_until_a_new_one_runs() {
        let mut p = pod("Always", &[], &["a", "b"]);
        for c in p.spec.as_mut().unwrap().containers.iter_mut() {
            c.image = Some("img:2".into());
        }
        let observed = [
            obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
            obs("a", ContainerRole::App, 0, RuntimeState::Running, 0),
        ];
        let s = status_of(&p, &observed, &HashMap::new());
        let images: Vec<&str> = s
            .container_statuses
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.image.as_str())
            .collect();
        assert_eq!(images, ["img:1", "img:2"], "a runs img:1; b has no instance yet");
    }

    #[test]
    fn phase_matrix_matches_kubelet() {
        for (policy, code, phase) in [
            ("Always", 0, "Running"),
            ("Always", 1, "Running"),
            ("OnFailure", 0, "Succeeded"),
            ("OnFailure", 1, "Running"),
            ("Never", 0, "Succeeded"),
            ("Never", 1, "Failed"),
        ] {
            let p = pod(policy, &[], &["a"]);
            let observed = [
                obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Exited, 0),
                obs("a", ContainerRole::App, 0, RuntimeState::Exited, code),
            ];
            let s = status_of(&p, &observed, &HashMap::new());
            assert_eq!(s.phase.as_deref(), Some(phase), "{policy} exit {code}");
            let t = s.container_statuses.unwrap()[0]
                .state
                .clone()
                .unwrap()
                .terminated
                .unwrap();
            assert_eq!(t.reason.as_deref(), Some(if code == 0 { "Completed" } else { "Error" }));
        }
    }

    /// A container in back-off waits with CrashLoopBackOff and shows its last termination.
    #[test]
    fn crash_looping_container_waits_with_last_state() {
        let p = pod("Always", &[], &["a"]);
        let observed = [
            obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
            obs("a", ContainerRole::App, 2, RuntimeState::Exited, 1),
        ];
        let waiting = HashMap::from([(
            "a".to_string(),
            WaitingReason {
                reason: "CrashLoopBackOff".into(),
                message: "back-off 20s".into(),
            },
        )]);
        let s = status_of(&p, &observed, &waiting);
        let cs = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!(
            cs.state.as_ref().unwrap().waiting.as_ref().unwrap().reason.as_deref(),
            Some("CrashLoopBackOff")
        );
        assert_eq!(
            cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code,
            1
        );
        assert_eq!(cs.restart_count, 2);
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(condition(&s, "Ready"), "False");
    }

    /// While init containers run the pod is Pending, apps wait PodInitializing, and
    /// Initialized is False; a failed init container fails a Never pod.
    #[test]
    fn init_containers_gate_the_pod() {
        let p = pod("Never", &["i"], &["a"]);
        let sb = obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0);
        let s = status_of(
            &p,
            &[sb.clone(), obs("i", ContainerRole::Init, 0, RuntimeState::Running, 0)],
            &HashMap::new(),
        );
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        assert_eq!(condition(&s, "Initialized"), "False");
        let app = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!(
            app.state.as_ref().unwrap().waiting.as_ref().unwrap().reason.as_deref(),
            Some("PodInitializing")
        );
        let s = status_of(
            &p,
            &[sb, obs("i", ContainerRole::Init, 0, RuntimeState::Exited, 1)],
            &HashMap::new(),
        );
        assert_eq!(s.phase.as_deref(), Some("Failed"));
    }

    /// A pod whose image is missing is Pending with the worker's reason.
    #[test]
    fn missing_image_shows_the_waiting_reason() {
        let p = pod("Always", &[], &["a"]);
        let waiting = HashMap::from([(
            "a".to_string(),
            WaitingReason {
                reason: "ErrImageNeverPull".into(),
                message: "no image".into(),
            },
        )]);
        let s = status_of(
            &p,
            &[obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0)],
            &waiting,
        );
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        let st = s.container_statuses.unwrap()[0].state.clone().unwrap();
        assert_eq!(st.waiting.unwrap().reason.as_deref(), Some("ErrImageNeverPull"));
    }

    /// OOM-killed containers report OOMKilled even with exit code 0.
    #[test]
    fn oom_killed_wins_over_exit_code() {
        let mut c = obs("a", ContainerRole::App, 0, RuntimeState::Exited, 137);
        c.oom_killed = true;
        assert_eq!(terminated(&c).reason.as_deref(), Some("OOMKilled"));
    }

    /// A sidecar counts for Initialized once started and for Ready while ready; it keeps a
    /// Never pod Running while it runs beside a finished app container, and does not count once
    /// it stopped (the pod Succeeded).
    #[test]
    fn sidecars_in_status_phase_and_conditions() {
        let mut p = pod("Never", &["s"], &["a"]);
        let sidecar = &mut p.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0];
        sidecar.restart_policy = Some("Always".into());
        sidecar.startup_probe = Some(Default::default());
        let sb = obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0);
        let s_running = obs("s", ContainerRole::Init, 0, RuntimeState::Running, 0);
        let none = HashMap::new();

        // Started only once its startup probe passed: until then the pod is Pending.
        let s = status_of(&p, &[sb.clone(), s_running.clone()], &none);
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        let init = &s.init_container_statuses.as_ref().unwrap()[0];
        assert_eq!((init.started, init.ready), (Some(false), false));
        let c = s
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == "Initialized")
            .unwrap();
        assert_eq!(c.message.as_deref(), Some("containers with incomplete status: [s]"));
        assert_eq!(
            s.container_statuses.as_ref().unwrap()[0]
                .state
                .as_ref()
                .unwrap()
                .waiting
                .as_ref()
                .unwrap()
                .reason
                .as_deref(),
            Some("PodInitializing")
        );

        let probes = ProbeResults::from([(
            ("s".to_string(), ProbeKind::Startup),
            (s_running.id.clone(), ProbeResult::Success),
        )]);
        let with = |observed: &[ObservedContainer]| {
            generate(&StatusInput {
                pod: &p,
                observed,
                waiting: &none,
                probes: &probes,
                host_ip: "10.0.0.1",
                previous: None,
                known_pod_ip: None,
                now: at(100),
                failure: None,
            })
        };
        let a_running = obs("a", ContainerRole::App, 0, RuntimeState::Running, 0);
        let s = with(&[sb.clone(), s_running.clone(), a_running]);
        assert_eq!(s.phase.as_deref(), Some("Running"));
        let init = &s.init_container_statuses.as_ref().unwrap()[0];
        assert_eq!((init.started, init.ready), (Some(true), true));
        assert_eq!(condition(&s, "Initialized"), "True");
        assert_eq!(condition(&s, "Ready"), "True");

        let a_done = obs("a", ContainerRole::App, 0, RuntimeState::Exited, 0);
        let s = with(&[sb.clone(), s_running, a_done.clone()]);
        assert_eq!(s.phase.as_deref(), Some("Running"), "the sidecar still runs");
        let s_stopped = obs("s", ContainerRole::Init, 0, RuntimeState::Exited, 143);
        let s = with(&[sb, s_stopped, a_done]);
        assert_eq!(
            s.phase.as_deref(),
            Some("Succeeded"),
            "a stopped sidecar does not count"
        );
        assert_eq!(condition(&s, "Initialized"), "True");
    }

    /// Ready waits for the readiness gates' conditions (set by others) to be True, with
    /// kubelet's reason and messages; ContainersReady does not.
    #[test]
    fn readiness_gates_hold_ready_back() {
        let mut p = pod("Always", &[], &["a"]);
        p.spec.as_mut().unwrap().readiness_gates = Some(
            ["k8s.io/test-condition1", "k8s.io/test-condition2"]
                .iter()
                .map(|t| k8s_openapi::api::core::v1::PodReadinessGate {
                    condition_type: t.to_string(),
                })
                .collect(),
        );
        let observed = [
            obs("POD", ContainerRole::Sandbox, 0, RuntimeState::Running, 0),
            obs("a", ContainerRole::App, 0, RuntimeState::Running, 0),
        ];
        let ready = |p: &Pod| {
            let s = status_of(p, &observed, &HashMap::new());
            assert_eq!(condition(&s, "ContainersReady"), "True");
            let c = s.conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
            (c.status, c.reason, c.message)
        };
        assert_eq!(
            ready(&p),
            (
                "False".to_string(),
                Some("ReadinessGatesNotReady".to_string()),
                Some(r#"corresponding condition of pod readiness gate "k8s.io/test-condition1" does not exist., corresponding condition of pod readiness gate "k8s.io/test-condition2" does not exist."#.to_string())
            )
        );
        let set = |p: &mut Pod, one: &str, two: &str| {
            p.status = Some(PodStatus {
                conditions: Some(vec![
                    PodCondition {
                        type_: "k8s.io/test-condition1".into(),
                        status: one.into(),
                        ..Default::default()
                    },
                    PodCondition {
                        type_: "k8s.io/test-condition2".into(),
                        status: two.into(),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            });
        };
        set(&mut p, "True", "False");
        assert_eq!(
            ready(&p).2.as_deref(),
            Some(r#"the status of pod readiness gate "k8s.io/test-condition2" is not "True", but False"#)
        );
        set(&mut p, "True", "True");
        assert_eq!(ready(&p), ("True".to_string(), None, None));
    }
}
