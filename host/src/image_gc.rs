//! Image garbage collection's policy, records and passes, as kubelet's image manager has them
//! (`k/k pkg/kubelet/images/image_gc_manager.go`): pure logic, with the engine behind
//! [`GcEngine`] so the ImageGcActor supplies Docker and the tests a fake.
//!
//! - [`ImageGcPolicy`]: the thresholds and ages, validated with kubelet's words.
//! - [`ImageRecords`]: per image ID, first detected, last used, size, pinned
//!   ([`ImageRecords::detect`] is kubelet's `detectImages`), kept in `<root-dir>/image-gc.json`
//!   ([`ImageRecords::load`], [`ImageRecords::save`]) — kubelet keeps them in memory only, so
//!   after its restart every image is "just detected" and no use is remembered; the file keeps
//!   both across an agent restart, as issue 31 asks.
//! - [`garbage_collect`] (kubelet's `GarbageCollect`: the age pass, then the space pass down to
//!   the low threshold) and [`delete_unused`] (`DeleteUnusedImages`, eviction's reclaim).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use dockerlet_messages::runtime::RuntimeImage;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The records' file under the root directory.
pub const RECORDS_FILE: &str = "image-gc.json";

/// Event reason: the space pass freed less than it had to (kubelet's `events.FreeDiskSpaceFailed`).
pub const FREE_DISK_SPACE_FAILED: &str = "FreeDiskSpaceFailed";
/// Event reason: the image filesystem reports no capacity (`events.InvalidDiskCapacity`).
pub const INVALID_DISK_CAPACITY: &str = "InvalidDiskCapacity";
/// Event reason: the periodic collection failed twice in a row (`events.ImageGCFailed`).
pub const IMAGE_GC_FAILED: &str = "ImageGCFailed";

/// When images are collected (kubelet's `ImageGCPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// `imageGCHighThresholdPercent`: at or above this disk usage the space pass runs.
    pub high_threshold_percent: i64,
    /// `imageGCLowThresholdPercent`: the space pass frees down to this usage.
    pub low_threshold_percent: i64,
    /// `imageMinimumGCAge`: an image detected more recently is never collected.
    pub min_age: Duration,
    /// `imageMaximumGCAge`: an image unused for longer is collected whatever the disk usage;
    /// zero: never.
    pub max_age: Duration,
}

impl Default for ImageGcPolicy {
    /// kubelet's defaults (`pkg/kubelet/apis/config/v1beta1/defaults.go`).
    fn default() -> Self {
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age: Duration::from_secs(120),
            max_age: Duration::ZERO,
        }
    }
}

/// A policy kubelet refuses (`NewImageGCManager`'s validation, its words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// High threshold outside 0–100.
    #[error("invalid HighThresholdPercent {0}, must be in range [0-100]")]
    High(i64),
    /// Low threshold outside 0–100.
    #[error("invalid LowThresholdPercent {0}, must be in range [0-100]")]
    Low(i64),
    /// Low above high.
    #[error("LowThresholdPercent {low} can not be higher than HighThresholdPercent {high}")]
    LowAboveHigh {
        /// The low threshold.
        low: i64,
        /// The high threshold.
        high: i64,
    },
}

impl ImageGcPolicy {
    /// Check the thresholds as kubelet does, in its order.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let (high, low) = (self.high_threshold_percent, self.low_threshold_percent);
        if !(0..=100).contains(&high) {
            return Err(PolicyError::High(high));
        }
        if !(0..=100).contains(&low) {
            return Err(PolicyError::Low(low));
        }
        if low > high {
            return Err(PolicyError::LowAboveHigh { low, high });
        }
        Ok(())
    }

    /// Image GC is off (kubelet's `StartGarbageCollection`: "ImageGCHighThresholdPercent is set
    /// 100 and ImageMaximumGCAge is 0, Disable image GC").
    pub fn disabled(&self) -> bool {
        self.high_threshold_percent == 100 && self.max_age.is_zero()
    }
}

/// What is known of one image (kubelet's `imageRecord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageRecord {
    /// When this agent first saw it.
    pub first_detected: Timestamp,
    /// When a container last used it; the epoch when never seen used.
    pub last_used: Timestamp,
    /// Its size in bytes.
    pub size: u64,
    /// Never collected (the sandbox image, as cri-dockerd pins the pod-infra image).
    pub pinned: bool,
}

/// The records, by image ID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageRecords(pub BTreeMap<String, ImageRecord>);

/// An image that may be collected, in eviction order (kubelet's `evictionInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Image ID.
    pub id: String,
    /// Its record when the order was made.
    pub record: ImageRecord,
}

impl ImageRecords {
    /// Update the records from a listing (kubelet's `detectImages`): new images are detected at
    /// `now`, images in `in_use` were used at `now`, sizes and pins follow the listing, and
    /// images no longer listed are forgotten. (Docker's parents of other images count as in use:
    /// see [`in_use_with_parents`].)
    pub fn detect(&mut self, images: &[RuntimeImage], in_use: &BTreeSet<String>, pinned: &[String], now: Timestamp) {
        let listed: BTreeSet<&str> = images.iter().map(|i| i.id.as_str()).collect();
        self.0.retain(|id, _| listed.contains(id.as_str()));
        for image in images {
            let record = self.0.entry(image.id.clone()).or_insert(ImageRecord {
                first_detected: now,
                last_used: Timestamp::UNIX_EPOCH,
                size: 0,
                pinned: false,
            });
            if in_use.contains(&image.id) {
                record.last_used = now;
            }
            record.size = image.size;
            record.pinned = is_pinned(image, pinned);
        }
    }

    /// The images that may be collected — neither in use nor pinned — least recently used
    /// first, ties broken by first detection (kubelet's `imagesInEvictionOrder`,
    /// `byLastUsedAndDetected`).
    pub fn eviction_order(&self, in_use: &BTreeSet<String>) -> Vec<Candidate> {
        let mut candidates: Vec<Candidate> = self
            .0
            .iter()
            .filter(|(id, r)| !in_use.contains(*id) && !r.pinned)
            .map(|(id, record)| Candidate {
                id: id.clone(),
                record: *record,
            })
            .collect();
        candidates.sort_by_key(|c| (c.record.last_used, c.record.first_detected));
        candidates
    }

    /// The records kept in `path`; none when it does not exist. A file that cannot be parsed
    /// is an error naming it (the caller starts afresh).
    pub fn load(path: &Path) -> Result<ImageRecords, RecordsError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ImageRecords::default()),
            Err(source) => {
                return Err(RecordsError::Read {
                    path: path.display().to_string(),
                    source,
                })
            }
        };
        let file: RecordsFile = serde_json::from_str(&text).map_err(|source| RecordsError::Parse {
            path: path.display().to_string(),
            source,
        })?;
        let records = file
            .images
            .into_iter()
            .filter_map(|(id, r)| {
                let first_detected = Timestamp::from_millisecond(r.first_detected_ms).ok()?;
                let last_used = Timestamp::from_millisecond(r.last_used_ms).ok()?;
                Some((
                    id,
                    ImageRecord {
                        first_detected,
                        last_used,
                        size: r.size,
                        pinned: r.pinned,
                    },
                ))
            })
            .collect();
        Ok(ImageRecords(records))
    }

    /// Write the records to `path` atomically (a temporary file renamed over the old one).
    pub fn save(&self, path: &Path) -> Result<(), RecordsError> {
        let file = RecordsFile {
            images: self
                .0
                .iter()
                .map(|(id, r)| {
                    let saved = SavedRecord {
                        first_detected_ms: r.first_detected.as_millisecond(),
                        last_used_ms: r.last_used.as_millisecond(),
                        size: r.size,
                        pinned: r.pinned,
                    };
                    (id.clone(), saved)
                })
                .collect(),
        };
        let failed = |source| RecordsError::Write {
            path: path.display().to_string(),
            source,
        };
        let text = serde_json::to_vec_pretty(&file).map_err(|e| failed(std::io::Error::other(e)))?;
        let temporary = path.with_extension("json.tmp");
        std::fs::write(&temporary, text).map_err(failed)?;
        std::fs::rename(&temporary, path).map_err(failed)
    }
}

/// The images in use: those containers use (`in_use`) and, on Docker, those other listed
/// images are built on — Docker refuses to delete a parent ("image has dependent child
/// images"), and removing its tags first would leave it untagged and still there. kubelet's
/// runtimes list pulled images only, which have no local parents.
pub fn in_use_with_parents(images: &[RuntimeImage], in_use: BTreeSet<String>) -> BTreeSet<String> {
    let mut used = in_use;
    used.extend(images.iter().filter_map(|i| i.parent.clone()));
    used
}

/// kubelet's `MaxNamesPerImageInNodeStatus`.
pub const MAX_NAMES_PER_IMAGE: usize = 5;

/// The Node's `status.images` (kubelet's `nodestatus.Images` setter, `pkg/kubelet/nodestatus/
/// setters.go`, over the image manager's list sorted by size, largest first): at most `max`
/// images (`nodeStatusMaxImages`; -1: all), each named by its digests then its tags, at most
/// five names.
pub fn node_images(images: &[RuntimeImage], max: i64) -> Vec<k8s_openapi::api::core::v1::ContainerImage> {
    let mut sorted: Vec<&RuntimeImage> = images.iter().collect();
    sorted.sort_by_key(|image| std::cmp::Reverse(image.size));
    if let Ok(max) = usize::try_from(max) {
        sorted.truncate(max);
    }
    sorted
        .into_iter()
        .map(|image| k8s_openapi::api::core::v1::ContainerImage {
            names: Some(
                image
                    .repo_digests
                    .iter()
                    .chain(&image.repo_tags)
                    .take(MAX_NAMES_PER_IMAGE)
                    .cloned()
                    .collect(),
            ),
            size_bytes: Some(image.size.min(i64::MAX as u64) as i64),
        })
        .collect()
}

/// Whether `image` is the sandbox image (or another of `pinned`): one of its tags, its ID or a
/// digest names it. Docker lists `busybox` as `busybox:latest` and drops `docker.io/library/`.
fn is_pinned(image: &RuntimeImage, pinned: &[String]) -> bool {
    pinned.iter().any(|reference| {
        let normal = normalize(reference);
        image.id == *reference
            || image.repo_tags.iter().any(|t| normalize(t) == normal)
            || image.repo_digests.iter().any(|d| normalize(d) == normal)
    })
}

/// A reference as Docker lists it: no `docker.io/library/` or `docker.io/`, `:latest` when it
/// names neither tag nor digest.
fn normalize(reference: &str) -> String {
    let short = reference
        .strip_prefix("docker.io/library/")
        .or_else(|| reference.strip_prefix("docker.io/"))
        .unwrap_or(reference);
    let last = short.rsplit('/').next().unwrap_or(short);
    if short.contains('@') || last.contains(':') {
        short.to_string()
    } else {
        format!("{short}:latest")
    }
}

/// The file's layout.
#[derive(Debug, Serialize, Deserialize)]
struct RecordsFile {
    images: BTreeMap<String, SavedRecord>,
}

/// One record in the file, times as Unix milliseconds.
#[derive(Debug, Serialize, Deserialize)]
struct SavedRecord {
    first_detected_ms: i64,
    last_used_ms: i64,
    size: u64,
    #[serde(default)]
    pinned: bool,
}

/// The records' file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    /// It cannot be read.
    #[error("cannot read the image GC records {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not a records file.
    #[error("cannot parse the image GC records {path}")]
    Parse {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// It cannot be written.
    #[error("cannot write the image GC records {path}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Why an image was removed (`kubelet_image_garbage_collected_total{reason}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcReason {
    /// Unused for longer than `imageMaximumGCAge`.
    Age,
    /// To bring the disk usage down (also eviction's reclaim).
    Space,
}

impl GcReason {
    /// The metric's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            GcReason::Age => "age",
            GcReason::Space => "space",
        }
    }
}

/// Why an image was not removed.
#[derive(Debug, thiserror::Error)]
pub enum RemoveError {
    /// The collector's last listing does not hold it.
    #[error("image {0} not listed")]
    NotListed(String),
    /// The engine refused (a container uses it) or failed.
    #[error("{0}")]
    Engine(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl RemoveError {
    /// The engine's error.
    pub fn engine(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        RemoveError::Engine(Box::new(source))
    }

    /// The error with its causes, `a: b: c`, as kubelet's aggregated texts carry them.
    fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self).and_then(std::error::Error::source);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        text
    }
}

/// What the collector needs of the engine and the node.
pub trait GcEngine {
    /// Remove the image (never forced).
    fn remove(&mut self, image_id: &str) -> impl Future<Output = Result<(), RemoveError>>;
    /// The image filesystem's (capacity, available) bytes; none when it cannot be read.
    fn image_fs(&mut self) -> impl Future<Output = Option<(u64, u64)>>;
}

/// A run's result: what was removed, and why the run failed if it did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Bytes freed (the removed images' sizes).
    pub freed: u64,
    /// Removed image IDs, with why.
    pub removed: Vec<(String, GcReason)>,
    /// The failure, in kubelet's words.
    pub error: Option<GcError>,
}

/// A collection that failed (kubelet's errors, its words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GcError {
    /// The images or containers could not be listed.
    #[error("{0}")]
    Detect(String),
    /// The image filesystem could not be read (kubelet: the stats provider's error).
    #[error("failed to get image filesystem stats")]
    NoImageFs,
    /// The image filesystem reports no capacity.
    #[error("invalid capacity 0 on image filesystem")]
    InvalidCapacity,
    /// The space pass found too little to remove.
    #[error(
        "Failed to garbage collect required amount of images. Attempted to free {wanted} bytes, but only found {freed} bytes eligible to free."
    )]
    NotEnoughFreed {
        /// Bytes it had to free.
        wanted: u64,
        /// Bytes it freed.
        freed: u64,
    },
    /// Removals failed in the age pass.
    #[error("wanted to free images older than {max_age}, encountered errors in image deletion: {errors}")]
    AgeDeletion {
        /// `imageMaximumGCAge`, as Go prints a duration.
        max_age: String,
        /// The engine's refusals, aggregated as Go's `errors.NewAggregate` prints them.
        errors: String,
    },
    /// Removals failed in the space pass.
    #[error("wanted to free {wanted} bytes, but freed {freed} bytes space with errors in image deletion: {errors}")]
    SpaceDeletion {
        /// Bytes it had to free (`u64::MAX`: all it could).
        wanted: u64,
        /// Bytes it freed.
        freed: u64,
        /// The engine's refusals, aggregated.
        errors: String,
    },
}

impl GcError {
    /// The Node event kubelet's image manager records for this failure itself, if any.
    pub fn event_reason(&self) -> Option<&'static str> {
        match self {
            GcError::InvalidCapacity => Some(INVALID_DISK_CAPACITY),
            GcError::NotEnoughFreed { .. } => Some(FREE_DISK_SPACE_FAILED),
            _ => None,
        }
    }
}

/// One periodic collection (kubelet's `GarbageCollect`) over `candidates` (in eviction order,
/// detected at `free_time`): the age pass once `max_age` has passed since `began_gc`, then, if
/// the image filesystem's usage is at or above the high threshold, the space pass down to the
/// low threshold.
pub async fn garbage_collect(
    policy: &ImageGcPolicy,
    records: &mut ImageRecords,
    candidates: Vec<Candidate>,
    began_gc: Timestamp,
    free_time: Timestamp,
    engine: &mut impl GcEngine,
) -> GcReport {
    let mut report = GcReport::default();
    let candidates = match free_old_images(policy, records, candidates, began_gc, free_time, engine, &mut report).await
    {
        Ok(remaining) => remaining,
        Err(e) => {
            report.error = Some(e);
            return report;
        }
    };
    let Some((capacity, available)) = engine.image_fs().await else {
        report.error = Some(GcError::NoImageFs);
        return report;
    };
    if available > capacity {
        tracing::info!(available, capacity, "Availability is larger than capacity");
    }
    let available = available.min(capacity);
    if capacity == 0 {
        report.error = Some(GcError::InvalidCapacity);
        return report;
    }
    let Some(wanted) = amount_to_free(policy, capacity, available) else {
        return report;
    };
    tracing::info!(
        usage = usage_percent(capacity, available),
        high_threshold = policy.high_threshold_percent,
        amount_to_free = wanted,
        low_threshold = policy.low_threshold_percent,
        "Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold"
    );
    let freed_before = report.freed;
    let result = free_space(policy, records, candidates, wanted, free_time, engine, &mut report).await;
    let freed = report.freed - freed_before;
    report.error = match result {
        Err(e) => Some(e),
        Ok(()) if freed < wanted => Some(GcError::NotEnoughFreed { wanted, freed }),
        Ok(()) => None,
    };
    report
}

/// Eviction's reclaim (kubelet's `DeleteUnusedImages`): the space pass with no limit.
pub async fn delete_unused(
    policy: &ImageGcPolicy,
    records: &mut ImageRecords,
    candidates: Vec<Candidate>,
    free_time: Timestamp,
    engine: &mut impl GcEngine,
) -> GcReport {
    tracing::info!("Attempting to delete unused images");
    let mut report = GcReport::default();
    let result = free_space(policy, records, candidates, u64::MAX, free_time, engine, &mut report).await;
    report.error = result.err();
    report
}

/// kubelet's `usagePercent`: 100 − ⌊available × 100 / capacity⌋.
pub fn usage_percent(capacity: u64, available: u64) -> i64 {
    100 - (u128::from(available) * 100 / u128::from(capacity.max(1))) as i64
}

/// Bytes to free to get down to the low threshold when usage is at or above the high one:
/// capacity × (100 − low) / 100 − available.
pub fn amount_to_free(policy: &ImageGcPolicy, capacity: u64, available: u64) -> Option<u64> {
    if usage_percent(capacity, available) < policy.high_threshold_percent {
        return None;
    }
    let keep_free = u128::from(capacity) * (100 - policy.low_threshold_percent).clamp(0, 100) as u128 / 100;
    Some((keep_free as u64).saturating_sub(available))
}

/// kubelet's `freeOldImages`: remove every candidate unused for longer than `max_age`, once
/// `max_age` has passed since image GC began; returns the rest (and the ones that failed).
async fn free_old_images(
    policy: &ImageGcPolicy,
    records: &mut ImageRecords,
    candidates: Vec<Candidate>,
    began_gc: Timestamp,
    free_time: Timestamp,
    engine: &mut impl GcEngine,
    report: &mut GcReport,
) -> Result<Vec<Candidate>, GcError> {
    if policy.max_age.is_zero() || since(free_time, began_gc) <= policy.max_age {
        return Ok(candidates);
    }
    let (mut remaining, mut errors) = (Vec::new(), Vec::new());
    for candidate in candidates {
        if since(free_time, candidate.record.last_used) <= policy.max_age {
            remaining.push(candidate);
            continue;
        }
        match free_image(records, &candidate, GcReason::Age, engine, report).await {
            Ok(()) => {}
            Err(e) => {
                errors.push(e);
                remaining.push(candidate);
            }
        }
    }
    if errors.is_empty() {
        return Ok(remaining);
    }
    Err(GcError::AgeDeletion {
        max_age: go_duration(policy.max_age),
        errors: aggregate(&errors),
    })
}

/// kubelet's `freeSpace`: walk the candidates, skipping one used at or after `free_time` or
/// detected less than `min_age` before it, removing the rest until `wanted` bytes are freed.
/// Refusals do not stop the walk.
async fn free_space(
    policy: &ImageGcPolicy,
    records: &mut ImageRecords,
    candidates: Vec<Candidate>,
    wanted: u64,
    free_time: Timestamp,
    engine: &mut impl GcEngine,
    report: &mut GcReport,
) -> Result<(), GcError> {
    let (freed_before, mut errors) = (report.freed, Vec::new());
    for candidate in candidates {
        if candidate.record.last_used >= free_time {
            tracing::debug!(image = %candidate.id, "Image ID was used too recently, not eligible for garbage collection");
            continue;
        }
        if since(free_time, candidate.record.first_detected) < policy.min_age {
            tracing::debug!(image = %candidate.id, "Image ID's age is less than the policy's minAge, not eligible for garbage collection");
            continue;
        }
        if let Err(e) = free_image(records, &candidate, GcReason::Space, engine, report).await {
            errors.push(e);
            continue;
        }
        if report.freed - freed_before >= wanted {
            break;
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    Err(GcError::SpaceDeletion {
        wanted,
        freed: report.freed - freed_before,
        errors: aggregate(&errors),
    })
}

/// Remove one image and forget its record (kubelet's `freeImage`).
async fn free_image(
    records: &mut ImageRecords,
    candidate: &Candidate,
    reason: GcReason,
    engine: &mut impl GcEngine,
    report: &mut GcReport,
) -> Result<(), RemoveError> {
    tracing::info!(image = %candidate.id, size = candidate.record.size, "Removing image to free bytes");
    engine.remove(&candidate.id).await?;
    records.0.remove(&candidate.id);
    report.freed += candidate.record.size;
    report.removed.push((candidate.id.clone(), reason));
    Ok(())
}

/// `later − earlier`, zero when negative.
fn since(later: Timestamp, earlier: Timestamp) -> Duration {
    Duration::try_from(later.duration_since(earlier)).unwrap_or(Duration::ZERO)
}

/// Go's `errors.NewAggregate(errs).Error()`: the one error, or `[a, b]`.
fn aggregate(errors: &[RemoveError]) -> String {
    match errors {
        [one] => one.chain(),
        many => format!(
            "[{}]",
            many.iter().map(RemoveError::chain).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// A duration as Go's `time.Duration.String()` prints whole seconds: `2m0s`, `1h0m0s`, `3s`.
pub fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let frac = d.subsec_millis();
    let s = if frac > 0 {
        format!("{s}.{frac:03}").trim_end_matches('0').to_string()
    } else {
        s.to_string()
    };
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests;
