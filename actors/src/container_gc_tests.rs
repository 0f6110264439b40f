//! The ContainerGcActor against the recording fake runtime: what a pass removes, and the Node
//! event of a pass that fails.

use std::time::Instant;

use dockerlet_messages::debug::GetActorState;
use dockerlet_messages::runtime::{ObservedContainer, RuntimeState};
use dockerlet_runtime::fake::{Call, FakeRuntime};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::test_support::eventually_async;

/// Answers which pods are kept, and collects events.
struct Sink {
    kept: Option<HashSet<PodUid>>,
    events: Vec<RecordEvent>,
}

impl Actor for Sink {
    type Context = Context<Self>;
}

impl Handler<GetKeptPods> for Sink {
    type Result = MessageResult<GetKeptPods>;
    fn handle(&mut self, _: GetKeptPods, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.kept.clone())
    }
}

impl Handler<RecordEvent> for Sink {
    type Result = ();
    fn handle(&mut self, msg: RecordEvent, _: &mut Context<Self>) {
        self.events.push(msg);
    }
}

struct Events;
impl Message for Events {
    type Result = Vec<(String, String, String)>;
}
impl Handler<Events> for Sink {
    type Result = MessageResult<Events>;
    fn handle(&mut self, _: Events, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.events
                .iter()
                .map(|e| (e.about.to_string(), e.reason.clone(), e.message.clone()))
                .collect(),
        )
    }
}

/// A dead container of pod `pod`, created `age` seconds ago.
fn dead(pod: &str, name: &str, attempt: u32, age: i64) -> ObservedContainer {
    let id = format!("{pod}-{name}-{attempt}");
    let mut c = crate::test_support::observed(pod, name, &id, RuntimeState::Exited);
    c.created_at = Some(Time(
        Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(age),
    ));
    c
}

/// A collector of `containers` whose Supervisor keeps `kept` (`None`: sources not ready).
fn start(
    runtime: &FakeRuntime,
    kept: Option<&[&str]>,
    containers: Vec<ObservedContainer>,
) -> (Addr<ContainerGcActor>, Addr<Sink>) {
    let cache = Arc::new(PodCache::default());
    for c in containers {
        // Docker knows them as the cache does (the pass asks it again before each removal).
        runtime.state.lock().unwrap().containers.insert(
            c.id.0.clone(),
            dockerlet_runtime::fake::FakeContainer {
                spec: Default::default(),
                observed: c.clone(),
            },
        );
        cache.put(c, Instant::now());
    }
    cache.relisted(Instant::now());
    let sink = Sink {
        kept: kept.map(|kept| kept.iter().map(|uid| PodUid(uid.to_string())).collect()),
        events: Vec::new(),
    }
    .start();
    let config = ContainerGcConfig {
        node_name: "n1".into(),
        policy: GcPolicy::default(),
        period: Duration::from_millis(50),
        log_links: None,
    };
    let links = ContainerGcLinks {
        kept: sink.clone().recipient(),
        events: sink.clone().recipient().into(),
    };
    let gc = ContainerGcActor::new(config, Arc::new(runtime.clone()), cache, links).start();
    (gc, sink)
}

fn removed(runtime: &FakeRuntime) -> Vec<String> {
    let mut ids: Vec<String> = runtime
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Remove(id) => Some(id.0),
            _ => None,
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// A kept pod keeps the newest dead instance of each container; a gone pod loses every dead
/// one; the removals are counted on the debug page.
#[actix::test]
async fn a_pass_removes_what_the_policy_says() {
    let runtime = FakeRuntime::default();
    let containers = vec![
        dead("kept", "app", 0, 300),
        dead("kept", "app", 1, 200),
        dead("kept", "app", 2, 100),
        dead("gone", "app", 0, 300),
    ];
    let (gc, _sink) = start(&runtime, Some(&["kept"]), containers);
    eventually_async("a pass", || {
        let gc = gc.clone();
        async move { gc.send(GetActorState).await.unwrap().detail["containers_removed"].as_u64() >= Some(3) }
    })
    .await;
    assert_eq!(removed(&runtime), vec!["gone-app-0", "kept-app-0", "kept-app-1"]);
    let state = gc.send(GetActorState).await.unwrap();
    assert_eq!(state.last_error, None);
}

/// A container the cache holds dead but Docker runs now (started since the pass's snapshot, or
/// a cache entry that was wrong) is not removed, and the cache learns it runs.
#[actix::test]
async fn a_container_that_runs_now_is_never_removed() {
    let runtime = FakeRuntime::default();
    let containers = vec![dead("gone", "app", 0, 300), dead("gone", "POD", 0, 300)];
    let (gc, _sink) = start(&runtime, Some(&[]), containers);
    runtime
        .state
        .lock()
        .unwrap()
        .containers
        .get_mut("gone-POD-0")
        .unwrap()
        .observed
        .state = RuntimeState::Running;
    eventually_async("a pass", || {
        let gc = gc.clone();
        async move { gc.send(GetActorState).await.unwrap().detail["containers_removed"].as_u64() >= Some(1) }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(removed(&runtime), vec!["gone-app-0"]);
}

/// A removal Docker refuses fails the pass: kubelet's Warning `ContainerGCFailed` about the
/// Node, with the error, and the error on the debug page.
#[actix::test]
async fn a_failed_removal_is_a_node_event() {
    let runtime = FakeRuntime::default();
    runtime.state.lock().unwrap().remove_fails = true;
    let (gc, sink) = start(&runtime, Some(&[]), vec![dead("gone", "app", 0, 300)]);
    eventually_async("the ContainerGCFailed event", || {
        let sink = sink.clone();
        async move { !sink.send(Events).await.unwrap().is_empty() }
    })
    .await;
    let events = sink.send(Events).await.unwrap();
    let (about, reason, message) = &events[0];
    assert_eq!((about.as_str(), reason.as_str()), ("node/n1", CONTAINER_GC_FAILED));
    assert!(message.contains("gone-app-0"), "{message}");
    let state = gc.send(GetActorState).await.unwrap();
    assert!(state.last_error.is_some_and(|e| e.contains("remove")));
}

/// Before every source delivered no pod is taken for gone (kubelet's `allSourcesReady`); the
/// per-container cap still applies.
#[actix::test]
async fn nothing_of_a_pod_is_taken_for_gone_before_the_sources_are_ready() {
    let runtime = FakeRuntime::default();
    let containers = vec![dead("unknown", "app", 0, 300), dead("unknown", "app", 1, 200)];
    let (gc, _sink) = start(&runtime, None, containers);
    eventually_async("two passes", || {
        let gc = gc.clone();
        async move { gc.send(GetActorState).await.unwrap().detail["passes"].as_u64() >= Some(2) }
    })
    .await;
    assert_eq!(removed(&runtime), vec!["unknown-app-0"]);
}
