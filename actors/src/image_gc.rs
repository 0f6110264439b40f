//! ImageGcActor: kubelet's image garbage collection — the image manager's collector
//! (`k/k pkg/kubelet/images/image_gc_manager.go`) and its 5-minute loop in
//! `pkg/kubelet/kubelet.go` (`StartGarbageCollection`). The policy, records and passes are
//! [`dockerlet_host::image_gc`]; this actor lists, removes, keeps the records' file and reports.
//!
//! | Message / trigger | From           | Effect                                                  |
//! |-------------------|----------------|---------------------------------------------------------|
//! | every `period`    | self (first at start) | detect images, the age pass, the space pass; failures reported as kubelet's loop does |
//! | ReclaimImages     | EvictionActor  | every unused image removed (`DeleteUnusedImages`); answers the bytes freed |
//! | every 30 s        | self           | the image list refreshed (kubelet's image cache)        |
//! | GetNodeImages     | NodeStatusActor (through the Supervisor) | the last listing, for `status.images` |
//! | GetActorState     | Supervisor     | debug snapshot: records, last run, last freed, last error |
//! | Panic             | Supervisor     | test-only fault hook                                    |
//!
//! With image GC off (`--image-gc-high-threshold 100`, no maximum age) the actor still lists
//! and detects — the Node's images and eviction's reclaim need it, as kubelet's image manager
//! runs whether its collection loop does or not — but the periodic run collects nothing.
//!
//! One run at a time: a ReclaimImages that comes during a run is served by a reclaim right
//! after it. "In use" is every container on the engine (`docker ps -a`: any node name, any
//! state, containers no agent made); the sandbox image is pinned. Removals never force, and one
//! Docker refuses is skipped. The records (first detected, last used) are kept in
//! `<root-dir>/image-gc.json`, so an agent restart neither forgets uses nor makes every image
//! "just pulled" again — kubelet keeps them in memory only.
//!
//! Events about the Node (debug ring always, the API in cluster mode): `InvalidDiskCapacity`,
//! `FreeDiskSpaceFailed` from the collection itself, and `ImageGCFailed` (the error's text)
//! when the periodic collection fails twice or more in a row; the first failure is only logged
//! ("Image garbage collection failed once. Stats initialization may not have completed yet").

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use dockerlet_host::image_gc::{
    self, GcEngine, GcError, GcReason, GcReport, ImageGcPolicy, ImageRecords, RemoveError, IMAGE_GC_FAILED,
};
use dockerlet_host::signals::FsStats;
use dockerlet_messages::debug::{EventSubject, EventType, RecordEvent};
use dockerlet_messages::node::{GetNodeImages, ReclaimImages, ReclaimedImages};
use dockerlet_messages::runtime::RuntimeImage;
use dockerlet_metrics::{ImageGcReason, ImageGcReasonLabel, Metrics};
use dockerlet_runtime::{ContainerRuntime, RuntimeError};
use futures::channel::oneshot;
use jiff::Timestamp;
use serde_json::json;

use crate::error_chain;
use crate::inspect::Inspect;
use crate::registry::Link;

/// kubelet's `ImageGCPeriod`.
pub const IMAGE_GC_PERIOD: Duration = Duration::from_secs(300);
/// How often the image list is refreshed (the image manager's image cache, 30 s).
pub const IMAGE_LIST_PERIOD: Duration = Duration::from_secs(30);

/// Reads the image filesystem; blocking (statvfs).
pub type ReadImageFs = Arc<dyn Fn() -> Option<FsStats> + Send + Sync>;

/// The collector's settings.
#[derive(Clone)]
pub struct ImageGcConfig {
    /// Thresholds and ages.
    pub policy: ImageGcPolicy,
    /// Collect at each period; false (image GC off): detect only.
    pub collect: bool,
    /// How often it runs (`--image-gc-period`, a dockerlet extension; kubelet's 5 m).
    pub period: Duration,
    /// The records' file, `<root-dir>/image-gc.json`.
    pub records_path: PathBuf,
    /// Images never collected: the sandbox image.
    pub pinned: Vec<String>,
    /// The image filesystem's reading.
    pub image_fs: ReadImageFs,
    /// The node the events are about.
    pub node_name: String,
}

impl ImageGcConfig {
    /// The image filesystem of this node: Docker's root directory's, else the agent's root
    /// directory's (as the eviction signals read `imagefs`).
    pub fn image_fs_of(root_dir: PathBuf, image_dir: Option<PathBuf>) -> ReadImageFs {
        Arc::new(move || dockerlet_host::signals::imagefs(&root_dir, image_dir.as_deref()))
    }
}

impl std::fmt::Debug for ImageGcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageGcConfig")
            .field("policy", &self.policy)
            .field("period", &self.period)
            .field("records_path", &self.records_path)
            .field("pinned", &self.pinned)
            .finish_non_exhaustive()
    }
}

/// Which pass a run makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunKind {
    /// The periodic `GarbageCollect`.
    Periodic,
    /// Eviction's `DeleteUnusedImages`.
    Reclaim,
}

/// What a run gives back to the actor.
struct RunResult {
    kind: RunKind,
    records: ImageRecords,
    /// The listing, less what was removed; none when listing failed.
    images: Option<Vec<RuntimeImage>>,
    report: GcReport,
}

/// Where the collector reports.
pub struct ImageGcLinks {
    /// The EventRecorder: the debug ring and, in cluster mode, the Node's events in the API.
    pub events: Link<RecordEvent>,
    /// `kubelet_image_garbage_collected_total`.
    pub metrics: Option<Arc<Metrics>>,
}

/// The collector.
pub struct ImageGcActor {
    config: ImageGcConfig,
    runtime: Arc<dyn ContainerRuntime>,
    links: ImageGcLinks,
    /// The records; none while a run has them.
    records: Option<ImageRecords>,
    /// When this instance began collecting (the age pass waits `max_age` from here).
    began: Timestamp,
    /// Reclaims waiting for the run in progress to end.
    reclaims: Vec<oneshot::Sender<ReclaimedImages>>,
    /// Periodic runs that failed in a row.
    failures_in_a_row: u32,
    /// The last listing, for the Node's `status.images`; none before the first.
    images: Option<Vec<RuntimeImage>>,
    /// A listing refresh is in flight.
    refreshing: bool,
    last_run: Option<Timestamp>,
    last_freed: u64,
    last_error: Option<String>,
    removed_total: u64,
    runs: u64,
    handled: u64,
}

impl ImageGcActor {
    /// A collector over `runtime`, its records loaded from `config.records_path` (a file that
    /// cannot be read is logged and replaced).
    pub fn new(config: ImageGcConfig, runtime: Arc<dyn ContainerRuntime>, links: ImageGcLinks) -> Self {
        let records = ImageRecords::load(&config.records_path).unwrap_or_else(|e| {
            tracing::warn!(error = %error_chain(&e), "starting image GC with no records");
            ImageRecords::default()
        });
        ImageGcActor {
            config,
            runtime,
            links,
            records: Some(records),
            began: Timestamp::now(),
            reclaims: Vec::new(),
            failures_in_a_row: 0,
            images: None,
            refreshing: false,
            last_run: None,
            last_freed: 0,
            last_error: None,
            removed_total: 0,
            runs: 0,
            handled: 0,
        }
    }

    /// Start a run unless one is under way (then a reclaim waits for it, and a periodic one is
    /// skipped: the next period comes soon enough).
    fn start_run(&mut self, kind: RunKind, ctx: &mut Context<Self>) {
        let Some(records) = self.records.take() else {
            return;
        };
        let run = run(kind, records, self.config.clone(), self.runtime.clone(), self.began);
        ctx.spawn(run.into_actor(self).map(|result, act, ctx| act.finished(result, ctx)));
    }

    fn finished(&mut self, result: RunResult, ctx: &mut Context<Self>) {
        let RunResult {
            kind,
            records,
            images,
            report,
        } = result;
        self.records = Some(records);
        if images.is_some() {
            self.images = images;
        }
        self.runs += 1;
        self.last_run = Some(Timestamp::now());
        self.last_freed = report.freed;
        self.count(&report.removed);
        if let Some(reason) = report.error.as_ref().and_then(GcError::event_reason) {
            let message = report.error.as_ref().map(ToString::to_string).unwrap_or_default();
            self.node_event(reason, message);
        }
        self.last_error = report.error.as_ref().map(ToString::to_string);
        match kind {
            RunKind::Periodic => self.periodic_outcome(report.error.as_ref()),
            RunKind::Reclaim => {
                let answer = ReclaimedImages {
                    freed: report.freed,
                    error: self.last_error.clone(),
                };
                for waiting in self.reclaims.drain(..) {
                    let _ = waiting.send(answer.clone());
                }
            }
        }
        if !self.reclaims.is_empty() {
            self.start_run(RunKind::Reclaim, ctx);
        }
    }

    /// Refresh the image list (kubelet's 30-second image cache loop); skipped while a run or
    /// another refresh is under way (a run lists too).
    fn refresh(&mut self, ctx: &mut Context<Self>) {
        if self.refreshing || self.records.is_none() {
            return;
        }
        self.refreshing = true;
        let runtime = self.runtime.clone();
        let listing = async move { runtime.list_images().await };
        ctx.spawn(listing.into_actor(self).map(|listed, act, _| {
            act.refreshing = false;
            match listed {
                Ok(images) => act.images = Some(images),
                Err(e) => tracing::warn!(error = %error_chain(&e), "Failed to update image list"),
            }
        }));
    }

    /// kubelet's loop around `GarbageCollect`: the first failure logged, the next ones also a
    /// Node event.
    fn periodic_outcome(&mut self, error: Option<&GcError>) {
        match error {
            None => {
                if self.failures_in_a_row > 0 {
                    tracing::info!("Image garbage collection succeeded");
                } else {
                    tracing::debug!("Image garbage collection succeeded");
                }
                self.failures_in_a_row = 0;
            }
            Some(e) => {
                self.failures_in_a_row += 1;
                if self.failures_in_a_row == 1 {
                    tracing::error!(error = %e, "Image garbage collection failed once. Stats initialization may not have completed yet");
                } else {
                    tracing::error!(error = %e, "Image garbage collection failed multiple times in a row");
                    self.node_event(IMAGE_GC_FAILED, e.to_string());
                }
            }
        }
    }

    /// Count the removals in `kubelet_image_garbage_collected_total`.
    fn count(&mut self, removed: &[(String, GcReason)]) {
        self.removed_total += removed.len() as u64;
        let Some(metrics) = &self.links.metrics else {
            return;
        };
        for (_, reason) in removed {
            let reason = match reason {
                GcReason::Age => ImageGcReason::age,
                GcReason::Space => ImageGcReason::space,
            };
            metrics
                .image_garbage_collected
                .get_or_create(&ImageGcReasonLabel { reason })
                .inc();
        }
    }

    /// A Warning event about the Node: to the debug ring, and to the API in cluster mode.
    fn node_event(&self, reason: &'static str, message: String) {
        let about = EventSubject::Node(self.config.node_name.clone());
        self.links
            .events
            .do_send(RecordEvent::about(about, EventType::Warning, reason, message));
    }
}

/// One run, off the actor: detect, collect, keep the records.
async fn run(
    kind: RunKind,
    mut records: ImageRecords,
    config: ImageGcConfig,
    runtime: Arc<dyn ContainerRuntime>,
    began: Timestamp,
) -> RunResult {
    let free_time = Timestamp::now();
    let listed = async { Ok::<_, RuntimeError>((runtime.list_images().await?, runtime.image_ids_in_use().await?)) };
    let (images, in_use) = match listed.await {
        Ok(listed) => listed,
        Err(e) => {
            let report = GcReport {
                error: Some(GcError::Detect(error_chain(&e))),
                ..GcReport::default()
            };
            return RunResult {
                kind,
                records,
                images: None,
                report,
            };
        }
    };
    let in_use = image_gc::in_use_with_parents(&images, in_use);
    records.detect(&images, &in_use, &config.pinned, free_time);
    let candidates = records.eviction_order(&in_use);
    let mut engine = Engine {
        runtime,
        images: images.iter().map(|i| (i.id.clone(), i.clone())).collect(),
        image_fs: config.image_fs.clone(),
    };
    let policy = &config.policy;
    let report = match kind {
        RunKind::Periodic if !config.collect => GcReport::default(),
        RunKind::Periodic => {
            image_gc::garbage_collect(policy, &mut records, candidates, began, free_time, &mut engine).await
        }
        RunKind::Reclaim => image_gc::delete_unused(policy, &mut records, candidates, free_time, &mut engine).await,
    };
    save(&records, &config.records_path).await;
    let images = Some(
        images
            .into_iter()
            .filter(|i| !report.removed.iter().any(|(id, _)| *id == i.id))
            .collect(),
    );
    RunResult {
        kind,
        records,
        images,
        report,
    }
}

/// Write the records on the blocking pool; a failure is logged (the next run writes again).
async fn save(records: &ImageRecords, path: &std::path::Path) {
    let (records, path) = (records.clone(), path.to_path_buf());
    match tokio::task::spawn_blocking(move || records.save(&path)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %error_chain(&e), "cannot keep the image GC records"),
        Err(e) => tracing::warn!(error = %e, "cannot keep the image GC records"),
    }
}

/// Docker and the node, as the collector needs them.
struct Engine {
    runtime: Arc<dyn ContainerRuntime>,
    images: BTreeMap<String, RuntimeImage>,
    image_fs: ReadImageFs,
}

impl GcEngine for Engine {
    async fn remove(&mut self, image_id: &str) -> Result<(), RemoveError> {
        let Some(image) = self.images.get(image_id) else {
            return Err(RemoveError::NotListed(image_id.to_string()));
        };
        self.runtime.remove_image(image).await.map_err(|e| {
            if matches!(e, RuntimeError::ImageInUse { .. }) {
                tracing::info!(image = image_id, error = %e, "skipping an image a container uses");
            }
            RemoveError::engine(e)
        })
    }

    async fn image_fs(&mut self) -> Option<(u64, u64)> {
        let read = self.image_fs.clone();
        let fs = tokio::task::spawn_blocking(move || read()).await.ok().flatten()?;
        Some((fs.capacity_bytes.max(0) as u64, fs.available_bytes.max(0) as u64))
    }
}

impl Actor for ImageGcActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let policy = &self.config.policy;
        tracing::info!(
            high_threshold = policy.high_threshold_percent,
            low_threshold = policy.low_threshold_percent,
            min_age = ?policy.min_age,
            max_age = ?policy.max_age,
            period = ?self.config.period,
            collect = self.config.collect,
            "image garbage collection"
        );
        self.start_run(RunKind::Periodic, ctx);
        ctx.run_interval(self.config.period, |act, ctx| act.start_run(RunKind::Periodic, ctx));
        ctx.run_interval(IMAGE_LIST_PERIOD, |act, ctx| act.refresh(ctx));
    }
}

impl Handler<ReclaimImages> for ImageGcActor {
    type Result = ResponseFuture<ReclaimedImages>;

    fn handle(&mut self, _: ReclaimImages, ctx: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let (answer, answered) = oneshot::channel();
        self.reclaims.push(answer);
        if self.records.is_some() {
            self.start_run(RunKind::Reclaim, ctx);
        }
        Box::pin(async move { answered.await.unwrap_or_default() })
    }
}

impl Handler<GetNodeImages> for ImageGcActor {
    type Result = MessageResult<GetNodeImages>;

    fn handle(&mut self, _: GetNodeImages, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        MessageResult(self.images.clone())
    }
}

impl Inspect for ImageGcActor {
    const KIND: &'static str = "ImageGcActor";
    const NAME: &'static str = "image-gc";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.clone()
    }

    fn detail(&self) -> serde_json::Value {
        json!({
            "records": self.records.as_ref().map(|r| r.0.len()),
            "running": self.records.is_none(),
            "images": self.images.as_ref().map(Vec::len),
            "collect": self.config.collect,
            "runs": self.runs,
            "last_run": self.last_run.map(|t| t.to_string()),
            "last_freed": self.last_freed,
            "removed_total": self.removed_total,
            "failures_in_a_row": self.failures_in_a_row,
        })
    }
}

crate::supervised!(ImageGcActor);

#[cfg(test)]
mod tests;
