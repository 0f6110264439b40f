//! ContainerGcActor: kubelet's container garbage collection, every minute
//! (`ContainerGCPeriod`, `pkg/kubelet/kubelet.go`), by the policy of
//! [`dockerlet_pod::container_gc`]: dead containers beyond what each container and the node
//! keep, every dead container and inactive sandbox of a pod that is gone, then the log
//! directories of gone pods and dangling `/var/log/containers` links.
//!
//! | Message / trigger | From       | Effect                                                    |
//! |-------------------|------------|-----------------------------------------------------------|
//! | every `period`    | self       | one pass (never two at once): [`GetKeptPods`] from the Supervisor, the pod cache's containers, the removals, then the log directories |
//! | ReclaimContainers | EvictionActor | a pass now (kubelet's `DeleteAllUnusedContainers`, disk reclaim before images); answers what it removed |
//! | GetActorState     | Supervisor | debug snapshot: the policy, passes, containers removed, last error |
//! | Panic             | Supervisor | test-only fault hook                                      |
//!
//! The containers come from the pod cache, which holds this node's alone: a container of
//! another node name on the same engine is never looked at. A pass that fails records
//! kubelet's Node event `ContainerGCFailed` with the error.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use dockerlet_host::pod_logs::LogLinks;
use dockerlet_messages::debug::{EventSubject, EventType, RecordEvent};
use dockerlet_messages::gc::{GetKeptPods, ReclaimContainers, ReclaimedContainers};
use dockerlet_messages::runtime::RuntimeState;
use dockerlet_messages::{PodRef, PodUid};
use dockerlet_pod::container_gc::{plan, GcPolicy, Removal};
use dockerlet_runtime::ContainerRuntime;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use crate::inspect::Inspect;
use crate::pod_cache::PodCache;
use crate::registry::Link;

/// kubelet's `ContainerGCPeriod`.
pub const PERIOD: Duration = Duration::from_secs(60);

/// kubelet's Node event of a failed pass (`pkg/kubelet/events/event.go`).
pub const CONTAINER_GC_FAILED: &str = "ContainerGCFailed";

/// What container GC keeps and how often it runs.
#[derive(Debug, Clone)]
pub struct ContainerGcConfig {
    /// The node, for its events.
    pub node_name: String,
    /// `--minimum-container-ttl-duration`, `--maximum-dead-containers-per-container`,
    /// `--maximum-dead-containers`.
    pub policy: GcPolicy,
    /// [`PERIOD`]; shorter in tests.
    pub period: Duration,
    /// The pod log directories and links; none when the agent keeps none.
    pub log_links: Option<LogLinks>,
}

/// Whom the actor asks and tells.
#[derive(Clone)]
pub struct ContainerGcLinks {
    /// The Supervisor: which pods are kept.
    pub kept: Recipient<GetKeptPods>,
    /// The EventRecorder: `ContainerGCFailed` about the Node.
    pub events: Link<RecordEvent>,
}

/// What one pass did.
#[derive(Debug, Default)]
struct PassOutcome {
    removed: u64,
    log_dirs_removed: u64,
    errors: Vec<PassError>,
}

impl PassOutcome {
    /// The errors' chains, `; `-joined; none when the pass went well.
    fn error_text(&self) -> Option<String> {
        (!self.errors.is_empty()).then(|| {
            self.errors
                .iter()
                .map(|e| crate::error_chain(e))
                .collect::<Vec<_>>()
                .join("; ")
        })
    }
}

/// What went wrong in a pass (each kept for the `ContainerGCFailed` event).
#[derive(Debug, thiserror::Error)]
enum PassError {
    #[error("cannot ask which pods are kept")]
    Kept(#[source] MailboxError),
    #[error("failed to remove container {id}")]
    Remove {
        id: dockerlet_messages::ContainerId,
        #[source]
        source: dockerlet_runtime::RuntimeError,
    },
    #[error("cannot clean up the pod log directories")]
    Logs(#[source] dockerlet_host::pod_logs::LogLinkError),
    #[error("the pod log clean-up did not finish")]
    LogsTask(#[source] tokio::task::JoinError),
}

/// The actor.
pub struct ContainerGcActor {
    config: ContainerGcConfig,
    runtime: Arc<dyn ContainerRuntime>,
    cache: Arc<PodCache>,
    links: ContainerGcLinks,
    /// Passes done, containers and log directories removed (this instance).
    passes: u64,
    removed: u64,
    log_dirs_removed: u64,
    last_pass: Option<Timestamp>,
    /// The last pass's errors, joined.
    last_error: Option<String>,
    /// A pass runs (they never overlap).
    running: bool,
    handled: u64,
}

impl ContainerGcActor {
    /// A collector of `cache`'s dead containers through `runtime`.
    pub fn new(
        config: ContainerGcConfig,
        runtime: Arc<dyn ContainerRuntime>,
        cache: Arc<PodCache>,
        links: ContainerGcLinks,
    ) -> Self {
        ContainerGcActor {
            config,
            runtime,
            cache,
            links,
            passes: 0,
            removed: 0,
            log_dirs_removed: 0,
            last_pass: None,
            last_error: None,
            running: false,
            handled: 0,
        }
    }

    /// The pass to run, unless one runs already (passes never overlap).
    fn start_pass(&mut self) -> Option<impl std::future::Future<Output = PassOutcome> + 'static> {
        if self.running {
            return None;
        }
        self.running = true;
        Some(collect(
            self.config.clone(),
            self.runtime.clone(),
            self.cache.clone(),
            self.links.kept.clone(),
        ))
    }

    fn pass(&mut self, ctx: &mut Context<Self>) {
        if let Some(work) = self.start_pass() {
            ctx.spawn(work.into_actor(self).map(|outcome, act, _| act.finished(outcome)));
        }
    }

    fn finished(&mut self, outcome: PassOutcome) {
        self.running = false;
        self.passes += 1;
        self.removed += outcome.removed;
        self.log_dirs_removed += outcome.log_dirs_removed;
        self.last_pass = Some(Timestamp::now());
        let Some(error) = outcome.error_text() else {
            tracing::debug!(removed = outcome.removed, "Container garbage collection succeeded");
            self.last_error = None;
            return;
        };
        tracing::error!(error = %error, "Container garbage collection failed");
        let about = EventSubject::Node(self.config.node_name.clone());
        self.links.events.do_send(RecordEvent::about(
            about,
            EventType::Warning,
            CONTAINER_GC_FAILED,
            error.clone(),
        ));
        self.last_error = Some(error);
    }
}

/// One pass: what the policy removes, removed (each logged with the pod and the reason); then
/// the log directories of gone pods and the links left dangling.
async fn collect(
    config: ContainerGcConfig,
    runtime: Arc<dyn ContainerRuntime>,
    cache: Arc<PodCache>,
    kept: Recipient<GetKeptPods>,
) -> PassOutcome {
    let mut outcome = PassOutcome::default();
    // The containers first, then the pods kept: a pod whose worker ended in between is gone,
    // and only its dead containers are taken.
    let Some(containers) = cache.all() else {
        return outcome;
    };
    let kept = match kept.send(GetKeptPods).await {
        Ok(kept) => kept,
        Err(e) => {
            outcome.errors.push(PassError::Kept(e));
            return outcome;
        }
    };
    let keep = kept.as_ref().map(|kept| move |uid: &PodUid| kept.contains(uid));
    let keep_ref = keep.as_ref().map(|k| k as &dyn Fn(&PodUid) -> bool);
    let removals = plan(&containers, &config.policy, Timestamp::now(), keep_ref);
    for removal in &removals {
        match remove(&*runtime, &cache, removal).await {
            Ok(true) => outcome.removed += 1,
            Ok(false) => {}
            Err(e) => outcome.errors.push(e),
        }
    }
    if let Some(links) = config.log_links.clone() {
        let present: HashSet<PodUid> = containers.iter().map(|c| c.pod_uid.clone()).collect();
        clean_logs(links, kept, present, &mut outcome).await;
    }
    outcome
}

/// Removes what `removal` names unless Docker says it runs now or is gone; whether it did.
async fn remove(runtime: &dyn ContainerRuntime, cache: &PodCache, removal: &Removal) -> Result<bool, PassError> {
    let c = &removal.container;
    let pod = PodRef {
        uid: c.pod_uid.clone(),
        namespace: c.pod_namespace.clone(),
        name: c.pod_name.clone(),
    };
    // The pass works from one snapshot of the pod cache and removes one container after
    // another; Docker is asked again right before each removal, so a container that runs now
    // (started since, or one the cache held wrongly) is never removed: `make chaos` saw a pass
    // during the recovery from a dockerd restart remove a running sandbox.
    match runtime.inspect_container(&c.id).await {
        Ok(Some(now)) if now.state == RuntimeState::Running => {
            tracing::info!(parent: &pod.span(), container = %c.name, container_id = %c.id, "not removing a container that runs now");
            cache.put(now, std::time::Instant::now());
            return Ok(false);
        }
        Ok(None) => {
            cache.remove(&c.id, std::time::Instant::now());
            return Ok(false);
        }
        Ok(Some(_)) | Err(_) => {}
    }
    tracing::info!(parent: &pod.span(), container = %c.name, container_id = %c.id, reason = %removal.reason, "removing container");
    runtime
        .remove_container(&c.id)
        .await
        .map_err(|source| PassError::Remove {
            id: c.id.clone(),
            source,
        })?;
    cache.remove(&c.id, std::time::Instant::now());
    Ok(true)
}

/// The log directories of pods that are gone (once every source delivered) and the
/// `/var/log/containers` links whose logs went with their containers.
async fn clean_logs(
    links: LogLinks,
    kept: Option<HashSet<PodUid>>,
    present: HashSet<PodUid>,
    outcome: &mut PassOutcome,
) {
    let work = tokio::task::spawn_blocking(move || {
        let dirs = match &kept {
            Some(kept) => links.remove_gone_pods(|uid| {
                let uid = PodUid(uid.to_string());
                !kept.contains(&uid) && !present.contains(&uid)
            })?,
            None => Vec::new(),
        };
        links.remove_dangling()?;
        Ok::<_, dockerlet_host::pod_logs::LogLinkError>(dirs)
    });
    match work.await {
        Ok(Ok(dirs)) => {
            for uid in &dirs {
                tracing::info!(pod.uid = %uid, "Removing pod logs");
            }
            outcome.log_dirs_removed += dirs.len() as u64;
        }
        Ok(Err(e)) => outcome.errors.push(PassError::Logs(e)),
        Err(e) => outcome.errors.push(PassError::LogsTask(e)),
    }
}

impl Actor for ContainerGcActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // kubelet's first pass comes at start, then every period.
        self.pass(ctx);
        ctx.run_interval(self.config.period, |act, ctx| act.pass(ctx));
    }
}

impl Handler<ReclaimContainers> for ContainerGcActor {
    type Result = ResponseActFuture<Self, ReclaimedContainers>;

    /// A pass now, unless one runs (its removals are what there is to reclaim).
    fn handle(&mut self, _: ReclaimContainers, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let Some(work) = self.start_pass() else {
            let busy = ReclaimedContainers {
                removed: 0,
                error: Some("a container garbage collection pass is running".into()),
            };
            return Box::pin(actix::fut::ready(busy));
        };
        Box::pin(work.into_actor(self).map(|outcome, act, _| {
            let answer = ReclaimedContainers {
                removed: outcome.removed,
                error: outcome.error_text(),
            };
            act.finished(outcome);
            answer
        }))
    }
}

impl Inspect for ContainerGcActor {
    const KIND: &'static str = "ContainerGcActor";
    const NAME: &'static str = "container-gc";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.clone()
    }

    fn detail(&self) -> serde_json::Value {
        let policy = &self.config.policy;
        json!({
            "minimum_container_ttl_s": policy.min_age.as_secs_f64(),
            "maximum_dead_containers_per_container": policy.max_per_pod_container,
            "maximum_dead_containers": policy.max_containers,
            "period_s": self.config.period.as_secs_f64(),
            "passes": self.passes,
            "containers_removed": self.removed,
            "log_dirs_removed": self.log_dirs_removed,
            "last_pass": self.last_pass.map(|t| t.to_string()),
        })
    }
}

crate::supervised!(ContainerGcActor);

#[cfg(test)]
#[path = "container_gc_tests.rs"]
mod tests;
