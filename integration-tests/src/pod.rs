//! Reading pod status from `/pods` at a glance.

use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod};
use k8s_openapi::jiff::Timestamp;

/// Shortcuts into a [`Pod`] as the agent reports it.
pub trait PodExt {
    /// `metadata.name` (for static pods `<manifest name>-<node>`).
    fn name(&self) -> &str;
    /// `metadata.uid`, or `""`.
    fn uid(&self) -> &str;
    /// `status.phase`, or `""`.
    fn phase(&self) -> &str;
    /// The status (`True`, `False`, `Unknown`) of the condition of that type.
    fn condition(&self, type_: &str) -> Option<&str>;
    /// The status of the regular container `name`.
    fn container(&self, name: &str) -> Option<&ContainerStatus>;
    /// The status of the init container `name`.
    fn init_container(&self, name: &str) -> Option<&ContainerStatus>;
    /// `status.podIP`.
    fn pod_ip(&self) -> Option<&str>;
    /// `status.hostIP`.
    fn host_ip(&self) -> Option<&str>;
    /// One line for failure messages: phase, conditions and every container's state.
    fn summary(&self) -> String;
}

impl PodExt for Pod {
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    fn uid(&self) -> &str {
        self.metadata.uid.as_deref().unwrap_or("")
    }

    fn phase(&self) -> &str {
        self.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
    }

    fn condition(&self, type_: &str) -> Option<&str> {
        let conditions = self.status.as_ref()?.conditions.as_ref()?;
        conditions.iter().find(|c| c.type_ == type_).map(|c| c.status.as_str())
    }

    fn container(&self, name: &str) -> Option<&ContainerStatus> {
        let statuses = self.status.as_ref()?.container_statuses.as_ref()?;
        statuses.iter().find(|c| c.name == name)
    }

    fn init_container(&self, name: &str) -> Option<&ContainerStatus> {
        let statuses = self.status.as_ref()?.init_container_statuses.as_ref()?;
        statuses.iter().find(|c| c.name == name)
    }

    fn pod_ip(&self) -> Option<&str> {
        self.status.as_ref()?.pod_ip.as_deref()
    }

    fn host_ip(&self) -> Option<&str> {
        self.status.as_ref()?.host_ip.as_deref()
    }

    fn summary(&self) -> String {
        let Some(status) = &self.status else {
            return format!("{} (uid {}): no status", self.name(), self.uid());
        };
        let conditions: Vec<String> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| format!("{}={}", c.type_, c.status))
            .collect();
        let containers: Vec<String> = status
            .init_container_statuses
            .iter()
            .flatten()
            .map(|c| format!("init {}", c.summary()))
            .chain(status.container_statuses.iter().flatten().map(|c| c.summary()))
            .collect();
        format!(
            "{} (uid {}): phase {:?}, [{}], containers [{}]",
            self.name(),
            self.uid(),
            self.phase(),
            conditions.join(" "),
            containers.join("; ")
        )
    }
}

/// Shortcuts into a [`ContainerStatus`].
pub trait ContainerStatusExt {
    /// The Docker container ID from `containerID` (`docker://<id>`).
    fn docker_id(&self) -> Option<&str>;
    /// True if `state.running` is set.
    fn is_running(&self) -> bool;
    /// `state.running.startedAt`.
    fn running_since(&self) -> Option<Timestamp>;
    /// `state.waiting.reason`.
    fn waiting_reason(&self) -> Option<&str>;
    /// `state.waiting.message`.
    fn waiting_message(&self) -> Option<&str>;
    /// True if `started` is true (running, and its startup probe, if any, succeeded).
    fn is_started(&self) -> bool;
    /// `state.terminated`.
    fn terminated(&self) -> Option<&ContainerStateTerminated>;
    /// `lastState.terminated`.
    fn last_terminated(&self) -> Option<&ContainerStateTerminated>;
    /// One line: name, state with reason and exit code, restart count, readiness.
    fn summary(&self) -> String;
}

impl ContainerStatusExt for ContainerStatus {
    fn docker_id(&self) -> Option<&str> {
        self.container_id.as_deref()?.strip_prefix("docker://")
    }

    fn is_running(&self) -> bool {
        self.state.as_ref().is_some_and(|s| s.running.is_some())
    }

    fn running_since(&self) -> Option<Timestamp> {
        let running = self.state.as_ref()?.running.as_ref()?;
        running.started_at.as_ref().map(|t| t.0)
    }

    fn waiting_reason(&self) -> Option<&str> {
        self.state.as_ref()?.waiting.as_ref()?.reason.as_deref()
    }

    fn waiting_message(&self) -> Option<&str> {
        self.state.as_ref()?.waiting.as_ref()?.message.as_deref()
    }

    fn is_started(&self) -> bool {
        self.started == Some(true)
    }

    fn terminated(&self) -> Option<&ContainerStateTerminated> {
        self.state.as_ref()?.terminated.as_ref()
    }

    fn last_terminated(&self) -> Option<&ContainerStateTerminated> {
        self.last_state.as_ref()?.terminated.as_ref()
    }

    fn summary(&self) -> String {
        let state = if self.is_running() {
            "running".to_string()
        } else if let Some(t) = self.terminated() {
            format!("terminated({:?}, exit {})", t.reason, t.exit_code)
        } else if let Some(reason) = self.waiting_reason() {
            format!("waiting({reason})")
        } else if self.state.as_ref().is_some_and(|s| s.waiting.is_some()) {
            "waiting".to_string()
        } else {
            "no state".to_string()
        };
        let last = self
            .last_terminated()
            .map(|t| format!(" last=terminated({:?}, exit {})", t.reason, t.exit_code))
            .unwrap_or_default();
        let started = self.started.map(|s| format!(" started={s}")).unwrap_or_default();
        format!(
            "{}: {state}{last} restarts={} ready={}{started} id={}",
            self.name,
            self.restart_count,
            self.ready,
            self.docker_id().map(|id| &id[..id.len().min(12)]).unwrap_or("-")
        )
    }
}
