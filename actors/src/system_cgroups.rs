//! SystemCgroupsActor: keeps the agent in `--kubelet-cgroups` and the root cgroup's other
//! processes in `--system-cgroups`, as kubelet's container manager re-applies its system
//! containers every minute (`pkg/kubelet/cm/container_manager_linux.go`, `periodicTasks`):
//! processes started in the root cgroup since the last pass are moved too.
//!
//! | Message / trigger | From       | Effect                                                   |
//! |-------------------|------------|----------------------------------------------------------|
//! | every `period`    | self       | [`ensure`] on the blocking pool; an error is logged and kept for the debug page |
//! | GetActorState     | Supervisor | debug snapshot: passes, processes moved, last error      |
//! | Panic             | Supervisor | test-only fault hook                                     |
//!
//! The first pass is the agent's own at start ([`ensure`] from the wiring), where an error stops
//! the start, as kubelet's container manager fails to start.

use std::time::Duration;

use actix::prelude::*;
use dockerlet_host::cgroup::system::{ensure_process_in, is_kernel_thread, move_root_processes, SystemCgroupError};
use dockerlet_host::cgroup::CgroupLayout;
use serde_json::json;

use crate::inspect::Inspect;

/// kubelet's period for its container manager's periodic tasks.
pub const PERIOD: Duration = Duration::from_secs(60);

/// The system cgroups to keep.
#[derive(Debug, Clone)]
pub struct SystemCgroupsConfig {
    /// The cgroup filesystems.
    pub layout: CgroupLayout,
    /// `--kubelet-cgroups`.
    pub kubelet: Option<String>,
    /// `--system-cgroups`.
    pub system: Option<String>,
    /// How often ([`PERIOD`]; shorter in tests).
    pub period: Duration,
}

impl SystemCgroupsConfig {
    /// Whether there is anything to keep.
    pub fn is_empty(&self) -> bool {
        self.kubelet.is_none() && self.system.is_none()
    }
}

/// One pass: the agent into `kubelet`, then the root's other processes into `system` (so the
/// agent, already moved, stays where it is). Returns how many processes were moved to `system`.
pub fn ensure(config: &SystemCgroupsConfig) -> Result<usize, SystemCgroupError> {
    if let Some(kubelet) = &config.kubelet {
        ensure_process_in(&config.layout, kubelet, std::process::id())?;
    }
    match &config.system {
        Some(system) => move_root_processes(&config.layout, system, &is_kernel_thread),
        None => Ok(0),
    }
}

/// The actor.
pub struct SystemCgroupsActor {
    config: SystemCgroupsConfig,
    /// Passes done (this instance), and processes moved to the system cgroup by them.
    passes: u64,
    moved: u64,
    /// The last pass's error, with its causes.
    last_error: Option<String>,
    /// A pass runs (they never overlap).
    running: bool,
    handled: u64,
}

impl SystemCgroupsActor {
    /// An actor keeping `config`.
    pub fn new(config: SystemCgroupsConfig) -> Self {
        SystemCgroupsActor {
            config,
            passes: 0,
            moved: 0,
            last_error: None,
            running: false,
            handled: 0,
        }
    }

    fn pass(&mut self, ctx: &mut Context<Self>) {
        if self.running {
            return;
        }
        self.running = true;
        let config = self.config.clone();
        let work = tokio::task::spawn_blocking(move || ensure(&config));
        ctx.spawn(work.into_actor(self).map(|result, act, _| {
            act.running = false;
            act.passes += 1;
            match result {
                Ok(Ok(moved)) => {
                    if moved > 0 {
                        tracing::info!(moved, cgroup = ?act.config.system, "moved processes to the system cgroup");
                    }
                    act.moved += moved as u64;
                    act.last_error = None;
                }
                Ok(Err(e)) => {
                    let text = crate::error_chain(&e);
                    tracing::warn!(error = %text, "cannot keep the system cgroups");
                    act.last_error = Some(text);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot keep the system cgroups");
                    act.last_error = Some(e.to_string());
                }
            }
        }));
    }
}

impl Actor for SystemCgroupsActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(self.config.period, |act, ctx| act.pass(ctx));
    }
}

impl Inspect for SystemCgroupsActor {
    const KIND: &'static str = "SystemCgroupsActor";
    const NAME: &'static str = "system-cgroups";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.clone()
    }

    fn detail(&self) -> serde_json::Value {
        json!({
            "kubelet_cgroups": self.config.kubelet,
            "system_cgroups": self.config.system,
            "period_s": self.config.period.as_secs_f64(),
            "passes": self.passes,
            "processes_moved": self.moved,
        })
    }
}

crate::supervised!(SystemCgroupsActor);

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // The tests arrange and read a recorded tree.
mod tests {
    use super::*;
    use crate::test_support::eventually_async;
    use dockerlet_messages::debug::GetActorState;

    /// Every period the agent is put back in its cgroup and new root processes are moved; the
    /// debug state counts them.
    #[actix::test]
    async fn passes_repeat_and_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("memory")).unwrap();
        // A recorded root with one process besides PID 1 (this test's, which is no kernel thread).
        let me = std::process::id();
        std::fs::write(dir.path().join("memory/cgroup.procs"), format!("1\n{me}\n")).unwrap();
        let config = SystemCgroupsConfig {
            layout: CgroupLayout::v1_at(dir.path(), &["memory"]),
            kubelet: Some("/kubelet".into()),
            system: Some("/system".into()),
            period: Duration::from_millis(20),
        };
        let addr = SystemCgroupsActor::new(config).start();
        eventually_async("two passes", || {
            let addr = addr.clone();
            async move { addr.send(GetActorState).await.unwrap().detail["passes"].as_u64() >= Some(2) }
        })
        .await;
        let state = addr.send(GetActorState).await.unwrap();
        assert_eq!(state.last_error, None);
        // The recorded root never empties: 5 rounds of one process per pass.
        assert_eq!(state.detail["processes_moved"].as_u64().unwrap() % 5, 0);
        assert!(state.detail["processes_moved"].as_u64().unwrap() >= 10);
        let kubelet = std::fs::read_to_string(dir.path().join("memory/kubelet/cgroup.procs")).unwrap();
        assert_eq!(kubelet, format!("{me}\n"));
    }

    #[actix::test]
    async fn an_error_is_kept_for_the_debug_page() {
        let dir = tempfile::tempdir().unwrap();
        // No hierarchy directory: the cgroup cannot be made.
        let config = SystemCgroupsConfig {
            layout: CgroupLayout::v1_at(&dir.path().join("missing/deeper"), &["memory"]),
            kubelet: None,
            system: Some("/system".into()),
            period: Duration::from_millis(20),
        };
        std::fs::write(dir.path().join("missing"), "a file, not a directory").unwrap();
        let addr = SystemCgroupsActor::new(config).start();
        eventually_async("an error", || {
            let addr = addr.clone();
            async move { addr.send(GetActorState).await.unwrap().last_error.is_some() }
        })
        .await;
        let error = addr.send(GetActorState).await.unwrap().last_error.unwrap();
        assert!(error.contains("create cgroup"), "{error}");
    }
}
