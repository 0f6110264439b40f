use super::*;

use std::sync::Mutex;

use dockerlet_messages::debug::{DebugEvent, GetActorState};
use dockerlet_messages::node::GetNodeImages;
use dockerlet_runtime::fake::{Call, FakeRuntime};

use crate::test_support::{eventually, eventually_async};

/// Collects the events the collector records.
struct Sink(Arc<Mutex<Vec<DebugEvent>>>);

impl Actor for Sink {
    type Context = Context<Self>;
}

impl Handler<RecordEvent> for Sink {
    type Result = ();
    fn handle(&mut self, msg: RecordEvent, _: &mut Context<Self>) {
        self.0.lock().unwrap().push(msg.to_debug());
    }
}

fn image(id: &str, tag: &str, size: u64) -> RuntimeImage {
    RuntimeImage {
        id: id.to_string(),
        repo_tags: vec![tag.to_string()],
        repo_digests: vec![],
        size,
        created: 0,
        parent: None,
    }
}

/// A node whose image filesystem is full (capacity 1000, nothing available), thresholds 1/0,
/// minimum age 60 s; records as a previous agent left them: every image first seen an hour ago
/// but `young`.
struct Node {
    runtime: FakeRuntime,
    dir: tempfile::TempDir,
    events: Arc<Mutex<Vec<DebugEvent>>>,
    metrics: Arc<Metrics>,
}

impl Node {
    fn new() -> Self {
        let runtime = FakeRuntime::default();
        {
            let mut state = runtime.state.lock().unwrap();
            state.image_list = vec![
                image("sha256:old", "old:1", 100),
                image("sha256:older", "older:1", 200),
                image("sha256:foreign", "foreign:1", 300),
                image("sha256:pause", "registry.k8s.io/pause:3.10", 400),
                image("sha256:young", "young:1", 500),
            ];
            state.foreign_image_users.insert("sha256:foreign".into());
        }
        let dir = tempfile::tempdir().unwrap();
        let hour_ago = Timestamp::now()
            .checked_sub(jiff::SignedDuration::from_hours(1))
            .unwrap();
        let mut records = ImageRecords::default();
        let listed = runtime.state.lock().unwrap().image_list.clone();
        records.detect(&listed[..4], &Default::default(), &[], hour_ago);
        records.save(&dir.path().join(image_gc::RECORDS_FILE)).unwrap();
        Node {
            runtime,
            dir,
            events: Arc::default(),
            metrics: Arc::new(Metrics::default()),
        }
    }

    /// The collector, every `period`, on a full image filesystem or an empty one.
    fn start(&self, period: Duration, full: bool) -> Addr<ImageGcActor> {
        self.start_with(period, full, true)
    }

    /// [`Node::start`], collecting or (image GC off) not.
    fn start_with(&self, period: Duration, full: bool, collect: bool) -> Addr<ImageGcActor> {
        let available_bytes = if full { 0 } else { 1000 };
        let config = ImageGcConfig {
            policy: ImageGcPolicy {
                high_threshold_percent: 1,
                low_threshold_percent: 0,
                min_age: Duration::from_secs(60),
                max_age: Duration::ZERO,
            },
            collect,
            period,
            records_path: self.dir.path().join(image_gc::RECORDS_FILE),
            pinned: vec!["registry.k8s.io/pause:3.10".into()],
            image_fs: Arc::new(move || {
                Some(FsStats {
                    capacity_bytes: 1000,
                    available_bytes,
                    ..FsStats::default()
                })
            }),
            node_name: "n1".into(),
        };
        let links = ImageGcLinks {
            events: Sink(self.events.clone()).start().recipient().into(),
            metrics: Some(self.metrics.clone()),
        };
        ImageGcActor::new(config, Arc::new(self.runtime.clone()), links).start()
    }

    fn removed(&self) -> Vec<String> {
        let state = self.runtime.state.lock().unwrap();
        let removed = state.calls.iter().filter_map(|c| match c {
            Call::RemoveImage(id) => Some(id.clone()),
            _ => None,
        });
        removed.collect()
    }
}

/// The first run at start removes the unused images old enough, least recently used first,
/// and keeps the one another node's container uses, the sandbox image and the young one; it
/// cannot free the 1000 bytes asked, so FreeDiskSpaceFailed is recorded with kubelet's message.
#[actix::test]
async fn the_first_run_removes_only_unused_old_images() {
    let node = Node::new();
    let gc = node.start(Duration::from_secs(3600), true);
    eventually("the first run", || node.removed().len() == 2).await;
    let mut removed = node.removed();
    removed.sort();
    assert_eq!(removed, vec!["sha256:old", "sha256:older"]);
    eventually("the event", || !node.events.lock().unwrap().is_empty()).await;
    let events = node.events.lock().unwrap().clone();
    assert_eq!(events[0].reason, image_gc::FREE_DISK_SPACE_FAILED);
    assert_eq!(events[0].object, "node/n1");
    assert_eq!(
        events[0].message,
        "Failed to garbage collect required amount of images. Attempted to free 1000 bytes, but only found 300 bytes eligible to free."
    );
    let state = gc.send(GetActorState).await.unwrap();
    assert_eq!(state.detail["records"], 3, "{:?}", state.detail);
    assert_eq!(state.detail["last_freed"], 300);
    let mut scrape = String::new();
    prometheus_client::encoding::text::encode(&mut scrape, node.metrics.registry()).unwrap();
    assert!(
        scrape.contains("kubelet_image_garbage_collected_total{reason=\"space\"} 2"),
        "{scrape}"
    );
    // The young image's first detection was kept for the next agent.
    let kept = ImageRecords::load(&node.dir.path().join(image_gc::RECORDS_FILE)).unwrap();
    assert!(kept.0.contains_key("sha256:young"));
    assert!(!kept.0.contains_key("sha256:old"));
}

/// With room on the disk the periodic run removes nothing; ReclaimImages (coming during it,
/// served right after) removes every unused image old enough and answers the bytes freed.
#[actix::test]
async fn reclaim_answers_the_bytes_freed() {
    let node = Node::new();
    let gc = node.start(Duration::from_secs(3600), false);
    let answer = gc.send(ReclaimImages).await.unwrap();
    assert_eq!(
        answer,
        ReclaimedImages {
            freed: 300,
            error: None
        }
    );
    let mut removed = node.removed();
    removed.sort();
    assert_eq!(removed, vec!["sha256:old", "sha256:older"]);
    let again = gc.send(ReclaimImages).await.unwrap();
    assert_eq!(again, ReclaimedImages { freed: 0, error: None });
    assert!(node.events.lock().unwrap().is_empty());
}

/// A failed run is logged only; the second failure in a row is an ImageGCFailed Node event.
#[actix::test]
async fn the_second_failure_in_a_row_is_an_event() {
    let node = Node::new();
    node.runtime.state.lock().unwrap().unreachable = true;
    let gc = node.start(Duration::from_millis(50), true);
    eventually("two failures", || {
        node.events.lock().unwrap().iter().any(|e| e.reason == IMAGE_GC_FAILED)
    })
    .await;
    let events = node.events.lock().unwrap().clone();
    assert_eq!(
        events[0].reason, IMAGE_GC_FAILED,
        "the first failure is not an event: {events:?}"
    );
    assert!(events[0].message.contains("list images"), "{events:?}");
    let state = gc.send(GetActorState).await.unwrap();
    assert!(state.detail["failures_in_a_row"].as_u64().unwrap() >= 2);
    assert!(state.last_error.is_some());
}

/// With image GC off the runs detect and list only: nothing is removed, the Node's images are
/// answered, and a reclaim still removes the unused images.
#[actix::test]
async fn off_it_lists_and_reclaims_only() {
    let node = Node::new();
    let gc = node.start_with(Duration::from_millis(50), true, false);
    eventually_async("a listing", || {
        let gc = gc.clone();
        async move { gc.send(GetNodeImages).await.unwrap().is_some_and(|i| i.len() == 5) }
    })
    .await;
    eventually_async("three runs", || {
        let gc = gc.clone();
        async move { gc.send(GetActorState).await.unwrap().detail["runs"].as_u64() >= Some(3) }
    })
    .await;
    assert!(node.removed().is_empty());
    assert!(node.events.lock().unwrap().is_empty());
    let answer = gc.send(ReclaimImages).await.unwrap();
    assert_eq!(answer.freed, 300);
    let listed = gc.send(GetNodeImages).await.unwrap().unwrap();
    assert_eq!(listed.len(), 3, "{listed:?}");
}
