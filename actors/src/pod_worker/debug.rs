//! What the debug page shows of a PodWorker (`/debug/pods`): built on request only, from the
//! worker's own state.

use dockerlet_messages::debug::{ContainerDebug, ContainerStateDebug, ExitDebug, PodDebug};
use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, ContainerStatus};
use k8s_openapi::jiff::Timestamp;

use super::state::Phase;
use super::PodWorker;

impl PodWorker {
    /// What the debug page explains: built on request only, from the worker's own state.
    pub(super) fn debug_view(&self) -> PodDebug {
        let dockerlet_pod::spec::PodIdentity { name, namespace, .. } = dockerlet_pod::spec::pod_identity(&self.pod);
        let spec = self.pod.spec.as_ref();
        let status = self.published.last_status.as_ref();
        let statuses = |init: bool| {
            let (specs, statuses) = if init {
                (
                    spec.and_then(|s| s.init_containers.as_deref()),
                    status.and_then(|s| s.init_container_statuses.as_deref()),
                )
            } else {
                (
                    spec.map(|s| s.containers.as_slice()),
                    status.and_then(|s| s.container_statuses.as_deref()),
                )
            };
            specs
                .unwrap_or_default()
                .iter()
                .map(|c| {
                    let found = statuses.unwrap_or_default().iter().find(|s| s.name == c.name);
                    let mut view = found.map(container_debug).unwrap_or_default();
                    view.name = c.name.clone();
                    view.init = init;
                    view.sidecar = init && dockerlet_pod::plan::is_sidecar(c);
                    view.image = c.image.clone().unwrap_or_default();
                    view.restart_at = self.observed.restart_at.get(&c.name).map(ToString::to_string);
                    view
                })
                .collect::<Vec<_>>()
        };
        let mut containers = statuses(true);
        containers.extend(statuses(false));
        let stamp = |t: &Option<Timestamp>| t.map(|t| t.to_string());
        PodDebug {
            pod_uid: self.id.uid.clone(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            phase: phase_name(self.state.phase()).to_string(),
            pod_phase: status.and_then(|s| s.phase.clone()),
            restart_policy: spec
                .and_then(|s| s.restart_policy.clone())
                .unwrap_or_else(|| "Always".to_string()),
            next_action: self.diagnostics.next_action.clone(),
            backoff_until: stamp(&self.observed.backoff_until),
            last_error: self.diagnostics.last_error.clone(),
            last_error_at: stamp(&self.diagnostics.last_error_at),
            retry_at: stamp(&self.diagnostics.retry_at),
            rejected: self.rejection.as_ref().map(|r| format!("{}: {}", r.reason, r.message)),
            failed: self.failure.as_ref().map(|f| format!("{}: {}", f.reason, f.message)),
            mount_failures: self.diagnostics.mount_failures.clone(),
            containers,
        }
    }
}

/// A container's status as the debug page shows it.
fn container_debug(status: &ContainerStatus) -> ContainerDebug {
    let exit = |t: &ContainerStateTerminated| ExitDebug {
        exit_code: t.exit_code,
        reason: t.reason.clone().unwrap_or_default(),
        finished_at: t.finished_at.as_ref().map(|f| f.0.to_string()),
    };
    let state = match &status.state {
        Some(ContainerState { running: Some(r), .. }) => ContainerStateDebug::Running {
            started_at: r.started_at.as_ref().map(|t| t.0.to_string()),
        },
        Some(ContainerState {
            terminated: Some(t), ..
        }) => ContainerStateDebug::Terminated(exit(t)),
        Some(ContainerState { waiting: Some(w), .. }) => ContainerStateDebug::Waiting {
            reason: w.reason.clone().unwrap_or_default(),
            message: w.message.clone().unwrap_or_default(),
        },
        _ => ContainerStateDebug::Unknown,
    };
    ContainerDebug {
        state,
        ready: status.ready,
        restart_count: status.restart_count,
        last_exit: status.last_state.as_ref().and_then(|s| s.terminated.as_ref()).map(exit),
        ..ContainerDebug::default()
    }
}

/// The phase as the debug endpoint names it.
fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Idle => "Idle",
        Phase::Syncing { .. } => "Syncing",
        Phase::Terminating { .. } => "Terminating",
        Phase::Terminated => "Terminated",
    }
}
