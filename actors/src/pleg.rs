//! PlegActor: the Pod Lifecycle Event Generator (kubelet's `pkg/kubelet/pleg/generic.go`). Keeps the agent's view of Docker
//! current and tells the Supervisor which pods changed.
//!
//! | Message / trigger      | From       | Effect                                          |
//! |------------------------|------------|-------------------------------------------------|
//! | every `relist_period`  | self       | relist (the safety net)                          |
//! | Docker event           | Docker     | relist now (low latency)                         |
//! | GetHealth              | Supervisor | healthy unless no relist succeeded for 3 min or the last one failed |
//! | GetActorState          | Supervisor | debug snapshot (relist time and duration)        |
//! | Panic                  | Supervisor | test-only fault hook                             |
//!
//! Sends `PodLifecycleEvent` and `RelistCompleted` to the Supervisor. A relist compares every
//! container's state with the previous relist: running → ContainerStarted, exited →
//! ContainerDied, gone → ContainerRemoved (after ContainerDied if it was not exited), anything
//! else → ContainerChanged.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use dockerlet_messages::debug::{ActorState, GetActorState, GetHealth, Health, Panic};
use dockerlet_messages::pleg::{LifecycleEventKind, PodLifecycleEvent, RelistCompleted};
use dockerlet_messages::runtime::{ContainerListing, RuntimeState};
use dockerlet_messages::ContainerId;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use dockerlet_runtime::{ContainerRuntime, RuntimeError, RuntimeEvent};

/// Relist period (kubelet `genericPlegRelistPeriod`).
pub const RELIST_PERIOD: Duration = Duration::from_secs(1);
/// PLEG is unhealthy when no relist succeeded for this long (`genericPlegRelistThreshold`).
pub const RELIST_THRESHOLD: Duration = Duration::from_secs(180);
/// A second relist this long after a Docker event catches state Docker had not listed yet.
const EVENT_RELIST_AGAIN: Duration = Duration::from_millis(50);
/// Wait before re-subscribing to Docker's events after the stream ended.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(1);

/// Where PLEG sends what it finds.
#[derive(Clone)]
pub struct PlegLinks {
    /// Per-container lifecycle events.
    pub events: Recipient<PodLifecycleEvent>,
    /// End of every relist.
    pub relisted: Recipient<RelistCompleted>,
}

/// The PLEG actor.
pub struct PlegActor {
    /// Docker.
    runtime: Arc<dyn ContainerRuntime>,
    /// Only containers labelled with this node are seen.
    node_name: String,
    /// Where events go.
    links: PlegLinks,
    /// Relist period.
    period: Duration,
    /// Each container's state at the previous relist.
    previous: HashMap<ContainerId, ContainerListing>,
    /// A relist is running.
    relisting: bool,
    /// Another relist was asked for while one ran.
    relist_pending: bool,
    /// When the actor started (health before the first relist).
    started: Instant,
    /// Last successful relist: when, and wall-clock time for the debug page.
    last_relist: Option<(Instant, Timestamp)>,
    /// How long the last relist took.
    last_duration: Option<Duration>,
    /// Relists completed.
    relists: u64,
    /// Docker events received.
    docker_events: u64,
    /// Error of the last relist, cleared by a successful one.
    last_error: Option<String>,
    /// Messages handled.
    handled: u64,
}

impl PlegActor {
    /// A PLEG for `node_name` relisting every `period`.
    pub fn new(runtime: Arc<dyn ContainerRuntime>, node_name: String, links: PlegLinks, period: Duration) -> Self {
        PlegActor {
            runtime,
            node_name,
            links,
            period,
            previous: HashMap::new(),
            relisting: false,
            relist_pending: false,
            started: Instant::now(),
            last_relist: None,
            last_duration: None,
            relists: 0,
            docker_events: 0,
            last_error: None,
            handled: 0,
        }
    }

    fn relist(&mut self, ctx: &mut Context<Self>) {
        if self.relisting {
            self.relist_pending = true;
            return;
        }
        self.relisting = true;
        let runtime = self.runtime.clone();
        let node = self.node_name.clone();
        let began = Instant::now();
        let future = async move { runtime.list_node_containers(&node).await };
        ctx.spawn(future.into_actor(self).map(move |result, act, ctx| {
            act.relisting = false;
            act.relist_done(result, began);
            if std::mem::take(&mut act.relist_pending) {
                act.relist(ctx);
            }
        }));
    }

    fn relist_done(&mut self, result: Result<Vec<ContainerListing>, RuntimeError>, began: Instant) {
        let listing = match result {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "PLEG relist failed");
                self.last_error = Some(e.to_string());
                return;
            }
        };
        let current: HashMap<ContainerId, ContainerListing> = listing.into_iter().map(|c| (c.id.clone(), c)).collect();
        for event in diff(&self.previous, &current) {
            tracing::debug!(pod.uid = %event.pod_uid, container = %event.container_name, kind = ?event.kind, "pod lifecycle event");
            self.links.events.do_send(event);
        }
        let pods: BTreeSet<_> = current.values().map(|c| c.pod_uid.clone()).collect();
        self.previous = current;
        self.links.relisted.do_send(RelistCompleted { pods });
        self.last_duration = Some(began.elapsed());
        self.last_relist = Some((Instant::now(), Timestamp::now()));
        self.last_error = None;
        self.relists += 1;
    }

    fn subscribe(&mut self, ctx: &mut Context<Self>) {
        ctx.add_stream(self.runtime.events(&self.node_name));
    }
}

/// Lifecycle events between two relists.
pub fn diff(
    previous: &HashMap<ContainerId, ContainerListing>,
    current: &HashMap<ContainerId, ContainerListing>,
) -> Vec<PodLifecycleEvent> {
    let event = |c: &ContainerListing, kind| PodLifecycleEvent {
        pod_uid: c.pod_uid.clone(),
        container_id: c.id.clone(),
        container_name: c.name.clone(),
        kind,
    };
    let mut events = Vec::new();
    for (id, now) in current {
        let before = previous.get(id).map(|c| c.state);
        if before == Some(now.state) {
            continue;
        }
        let kind = match now.state {
            RuntimeState::Running => LifecycleEventKind::ContainerStarted,
            RuntimeState::Exited => LifecycleEventKind::ContainerDied,
            RuntimeState::Created | RuntimeState::Unknown => LifecycleEventKind::ContainerChanged,
        };
        events.push(event(now, kind));
    }
    for (id, gone) in previous {
        if current.contains_key(id) {
            continue;
        }
        if gone.state != RuntimeState::Exited {
            events.push(event(gone, LifecycleEventKind::ContainerDied));
        }
        events.push(event(gone, LifecycleEventKind::ContainerRemoved));
    }
    events
}

impl Actor for PlegActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.subscribe(ctx);
        self.relist(ctx);
        ctx.run_interval(self.period, |act, ctx| act.relist(ctx));
    }
}

impl StreamHandler<Result<RuntimeEvent, RuntimeError>> for PlegActor {
    /// A Docker event: relist now rather than at the next tick.
    fn handle(&mut self, event: Result<RuntimeEvent, RuntimeError>, ctx: &mut Self::Context) {
        match event {
            Ok(e) => {
                self.docker_events += 1;
                tracing::trace!(container = %e.id, action = %e.action, "docker event");
                self.relist(ctx);
                // Docker 20.10 sends `die` before its container list shows the exit: look again
                // shortly, rather than at the next periodic relist a second later.
                ctx.run_later(EVENT_RELIST_AGAIN, |act, ctx| act.relist(ctx));
            }
            Err(e) => tracing::debug!(error = %e, "docker event stream error"),
        }
    }

    /// The stream ends when Docker restarts: subscribe again (the default would stop the actor).
    fn finished(&mut self, ctx: &mut Self::Context) {
        ctx.run_later(RESUBSCRIBE_AFTER, |act, ctx| act.subscribe(ctx));
    }
}

impl Handler<GetHealth> for PlegActor {
    type Result = MessageResult<GetHealth>;

    /// kubelet's PLEG Healthy(), plus "the runtime answered the last relist".
    fn handle(&mut self, _: GetHealth, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let since = self.last_relist.map(|(at, _)| at.elapsed());
        let reason = match (&self.last_error, since) {
            (Some(e), _) => Some(format!("container runtime is down: {e}")),
            (None, None) if self.started.elapsed() > RELIST_THRESHOLD => {
                Some("pleg has yet to be successful".to_string())
            }
            (None, Some(d)) if d > RELIST_THRESHOLD => Some(format!(
                "pleg was last seen active {} ago; threshold is {}",
                humanize(d),
                humanize(RELIST_THRESHOLD)
            )),
            _ => None,
        };
        MessageResult(Health {
            healthy: reason.is_none(),
            reason,
        })
    }
}

fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}m{}s", s / 60, s % 60)
}

impl Handler<GetActorState> for PlegActor {
    type Result = MessageResult<GetActorState>;

    fn handle(&mut self, _: GetActorState, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        MessageResult(ActorState {
            kind: "PlegActor".to_string(),
            name: "pleg".to_string(),
            messages_handled: self.handled,
            restarts: 0,
            last_error: self.last_error.clone(),
            detail: json!({
                "last_relist": self.last_relist.map(|(_, t)| t.to_string()),
                "last_relist_duration_ms": self.last_duration.map(|d| d.as_secs_f64() * 1000.0),
                "relists": self.relists,
                "docker_events": self.docker_events,
                "containers": self.previous.len(),
            }),
        })
    }
}

impl Handler<Panic> for PlegActor {
    type Result = ();

    fn handle(&mut self, _: Panic, _: &mut Self::Context) {
        panic!("fault injection: PlegActor asked to panic");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_messages::PodUid;

    fn listing(id: &str, state: RuntimeState) -> (ContainerId, ContainerListing) {
        let c = ContainerListing {
            id: ContainerId(id.into()),
            pod_uid: PodUid("p".into()),
            name: "app".into(),
            state,
        };
        (c.id.clone(), c)
    }

    fn kinds(events: Vec<PodLifecycleEvent>) -> Vec<(String, LifecycleEventKind)> {
        let mut v: Vec<_> = events.into_iter().map(|e| (e.container_id.0, e.kind)).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0).then(format!("{:?}", a.1).cmp(&format!("{:?}", b.1))));
        v
    }

    /// State changes between relists map to kubelet's lifecycle events.
    #[test]
    fn relist_diff_emits_kubelet_events() {
        let before = HashMap::from([
            listing("a", RuntimeState::Running),
            listing("b", RuntimeState::Running),
            listing("c", RuntimeState::Exited),
            listing("d", RuntimeState::Running),
        ]);
        let after = HashMap::from([
            listing("a", RuntimeState::Exited),
            listing("d", RuntimeState::Running),
            listing("e", RuntimeState::Running),
            listing("f", RuntimeState::Created),
        ]);
        use LifecycleEventKind::*;
        assert_eq!(
            kinds(diff(&before, &after)),
            vec![
                ("a".to_string(), ContainerDied),
                ("b".to_string(), ContainerDied),
                ("b".to_string(), ContainerRemoved),
                ("c".to_string(), ContainerRemoved),
                ("e".to_string(), ContainerStarted),
                ("f".to_string(), ContainerChanged),
            ]
        );
    }

    struct Nothing;
    impl Actor for Nothing {
        type Context = Context<Self>;
    }
    impl Handler<PodLifecycleEvent> for Nothing {
        type Result = ();
        fn handle(&mut self, _: PodLifecycleEvent, _: &mut Context<Self>) {}
    }
    impl Handler<RelistCompleted> for Nothing {
        type Result = ();
        fn handle(&mut self, _: RelistCompleted, _: &mut Context<Self>) {}
    }

    /// PLEG is healthy while relists succeed, and names the runtime as the reason once Docker
    /// stops answering (what `/healthz` reports).
    #[actix::test]
    async fn health_follows_the_runtime() {
        tokio::time::pause();
        let runtime = dockerlet_runtime::fake::FakeRuntime::default();
        let sink = Nothing.start();
        let links = PlegLinks {
            events: sink.clone().recipient(),
            relisted: sink.recipient(),
        };
        let pleg = PlegActor::new(Arc::new(runtime.clone()), "n1".into(), links, Duration::from_millis(20)).start();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let health = pleg.send(GetHealth).await.unwrap();
        assert!(health.healthy, "{health:?}");
        runtime.state.lock().unwrap().unreachable = true;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let health = pleg.send(GetHealth).await.unwrap();
        assert!(!health.healthy);
        assert!(health.reason.unwrap().starts_with("container runtime is down"));
        runtime.state.lock().unwrap().unreachable = false;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(pleg.send(GetHealth).await.unwrap().healthy);
    }
}
