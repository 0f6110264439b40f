//! NodeShutdownActor: graceful node shutdown, as kubelet's shutdown manager
//! (`pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go`).
//!
//! At start it raises logind's `InhibitDelayMaxSec` to the sum of the groups' periods (a
//! `logind.conf.d` drop-in and a reload) when it is lower, takes a delay inhibitor lock and
//! watches `PrepareForShutdown` on a thread of its own (reconnecting a second after the bus
//! connection ends). On a shutdown it records the Node event `NodeShutdown`, tells the
//! Supervisor (new pods are rejected, the Node is not Ready), stops the pods group by group from
//! the lowest priority up — each group's pods at once, each with the smaller of the group's
//! period and its own grace, the group given up after its period — and then releases the lock
//! so the shutdown goes on. A cancelled shutdown takes the lock again.
//!
//! As kubelet, the Node's status is written at once when a shutdown begins (Ready False, "node
//! is shutting down"), and the shutdown's start and end are kept in
//! `<root-dir>/graceful_node_shutdown_state` and in `kubelet_graceful_shutdown_start_time_seconds`
//! / `_end_time_seconds` (read back from the file at start, so they tell of the last shutdown).
//!
//! | message              | from              | effect                                        |
//! |----------------------|-------------------|-----------------------------------------------|
//! | `LogindArmed`        | its watch thread  | keeps the inhibitor lock                      |
//! | `PrepareForShutdown` | watch thread, USR1| shutdown (`true`) or its cancellation         |
//! | `GetActorState`      | Supervisor        | state for `/debug/actors`                     |
//!
//! Like kubelet, SIGUSR1 starts a shutdown too; here also on a host without logind (documented in
//! the README), which lets a test drive it without powering a machine off.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use dockerlet_host::logind::{InhibitLock, Logind, WatchEvent};
use dockerlet_host::shutdown_state::{epoch_seconds, ShutdownState};
use dockerlet_kube::KubeClient;
use dockerlet_messages::debug::EventType;
use dockerlet_messages::node::SyncNodeStatus;
use dockerlet_messages::worker::{GetShutdownTargets, NodeShuttingDown, ShutdownPod, ShutdownTarget};
use dockerlet_metrics::Metrics;
use dockerlet_pod::shutdown::{group_of, period_requested, pod_grace, ShutdownGroup};
use serde_json::json;

use crate::inspect::Inspect;
use crate::registry::Link;

/// How long after the bus connection ended the watch starts again (kubelet's
/// `dbusReconnectPeriod`).
const RECONNECT_PERIOD: Duration = Duration::from_secs(1);

/// The node event's reason.
const NODE_SHUTDOWN_EVENT: &str = "NodeShutdown";

/// The shutdown manager's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeShutdownConfig {
    /// The priority groups, sorted from the lowest priority up (never empty: no groups, no
    /// actor).
    pub groups: Vec<ShutdownGroup>,
    /// Where the logind drop-in goes (`/etc/systemd/logind.conf.d`).
    pub logind_conf_dir: PathBuf,
    /// The root directory, where `graceful_node_shutdown_state` is kept.
    pub state_dir: PathBuf,
}

/// Where the actor's requests go.
pub struct NodeShutdownLinks {
    /// The pods to stop.
    pub targets: Recipient<GetShutdownTargets>,
    /// Admission and the Node's readiness.
    pub shutting_down: Recipient<NodeShuttingDown>,
    /// The API, for the Node event.
    pub api: Option<Arc<dyn KubeClient>>,
    /// The NodeStatusActor, told to write the Node's status at once (cluster mode).
    pub sync_node_status: Option<Link<SyncNodeStatus>>,
    /// `kubelet_graceful_shutdown_{start,end}_time_seconds`.
    pub metrics: Option<Arc<Metrics>>,
}

/// The watch thread took the inhibitor lock.
#[derive(Message)]
#[rtype(result = "()")]
struct LogindArmed {
    logind: Logind,
    lock: InhibitLock,
}

/// logind said a shutdown begins (`true`) or was cancelled (`false`).
#[derive(Message)]
#[rtype(result = "()")]
struct PrepareForShutdown(bool);

/// The watch failed or ended.
#[derive(Message)]
#[rtype(result = "()")]
struct WatchFailed(String);

/// Where the actor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// No inhibitor lock yet (logind not reached, or not yet).
    Starting,
    /// Holding the lock, waiting for a shutdown.
    Armed,
    /// Stopping pods.
    ShuttingDown,
    /// Pods stopped and the lock released: the node goes down.
    Done,
}

/// The actor.
pub struct NodeShutdownActor {
    config: NodeShutdownConfig,
    links: NodeShutdownLinks,
    logind: Option<Logind>,
    lock: Option<InhibitLock>,
    stage: Stage,
    /// What the last shutdown did, for the debug page.
    report: Option<ShutdownReport>,
    last_error: Option<String>,
    handled: u64,
}

impl NodeShutdownActor {
    /// A shutdown manager with `config`.
    pub fn new(config: NodeShutdownConfig, links: NodeShutdownLinks) -> Self {
        NodeShutdownActor {
            config,
            links,
            logind: None,
            lock: None,
            stage: Stage::Starting,
            report: None,
            last_error: None,
            handled: 0,
        }
    }

    fn node_event(&self, message: &'static str) {
        if let Some(api) = self.links.api.clone() {
            actix::spawn(async move {
                if let Err(e) = api
                    .record_node_event(EventType::Normal, NODE_SHUTDOWN_EVENT, message)
                    .await
                {
                    tracing::debug!(error = %e, "cannot record node event");
                }
            });
        }
    }

    /// Take the inhibitor lock again after a cancelled shutdown.
    fn rearm(&mut self, ctx: &mut Context<Self>) {
        let Some(logind) = self.logind.clone() else { return };
        let take = async move { tokio::task::spawn_blocking(move || logind.inhibit_shutdown()).await };
        ctx.spawn(take.into_actor(self).map(|taken, act, _| match taken {
            Ok(Ok(lock)) => {
                act.lock = Some(lock);
                act.stage = Stage::Armed;
            }
            Ok(Err(e)) => act.failed(e.to_string()),
            Err(e) => act.failed(e.to_string()),
        }));
    }

    fn failed(&mut self, error: String) {
        tracing::error!(error = %error, "Unable to watch the node for shutdown events");
        self.last_error = Some(error);
    }

    /// Stop every pod, group by group, then release the lock.
    fn shut_down(&mut self, ctx: &mut Context<Self>) {
        self.stage = Stage::ShuttingDown;
        if let Some(sync) = &self.links.sync_node_status {
            sync.do_send(SyncNodeStatus);
        }
        tracing::info!("Shutdown manager processing shutdown event");
        let (targets, groups) = (self.links.targets.clone(), self.config.groups.clone());
        let (dir, metrics) = (self.config.state_dir.clone(), self.links.metrics.clone());
        let work = async move {
            let start = jiff::Timestamp::now();
            record(&dir, metrics.as_deref(), start, None).await;
            let pods = targets.send(GetShutdownTargets).await.unwrap_or_default();
            let report = stop_in_groups(&groups, pods).await;
            record(&dir, metrics.as_deref(), start, Some(jiff::Timestamp::now())).await;
            report
        };
        ctx.spawn(work.into_actor(self).map(|report, act, _| {
            act.report = Some(report);
            act.lock = None;
            act.stage = Stage::Done;
            tracing::info!("Shutdown manager completed processing shutdown event, node will shutdown shortly");
        }));
    }
}

/// Keeps the shutdown's times in the state file and the metrics, as kubelet's
/// `processShutdownEvent`: at the start, the start time and an end of 0; at the end, both.
async fn record(
    dir: &std::path::Path,
    metrics: Option<&Metrics>,
    start: jiff::Timestamp,
    end: Option<jiff::Timestamp>,
) {
    if let Some(m) = metrics {
        m.graceful_shutdown_start_time.set(epoch_seconds(start));
        m.graceful_shutdown_end_time.set(end.map_or(0.0, epoch_seconds));
    }
    let state = ShutdownState {
        start_time: Some(start),
        end_time: end,
    };
    let dir = dir.to_path_buf();
    match tokio::task::spawn_blocking(move || state.store(&dir)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "Failed to store graceful shutdown state"),
        Err(e) => tracing::error!(error = %e, "Failed to store graceful shutdown state"),
    }
}

/// The last shutdown's times from the state file into the metrics (kubelet's `setMetrics`).
async fn load_metrics(dir: PathBuf, metrics: Arc<Metrics>) {
    match tokio::task::spawn_blocking(move || ShutdownState::load(&dir)).await {
        Ok(Ok(state)) => {
            if let Some(start) = state.start_time {
                metrics.graceful_shutdown_start_time.set(epoch_seconds(start));
            }
            if let Some(end) = state.end_time {
                metrics.graceful_shutdown_end_time.set(epoch_seconds(end));
            }
        }
        Ok(Err(e)) => tracing::error!(error = %e, "Failed to load graceful shutdown state"),
        Err(e) => tracing::error!(error = %e, "Failed to load graceful shutdown state"),
    }
}

/// The watch thread: forwards what logind says to the actor while it lives.
fn watch(config: NodeShutdownConfig, actor: Addr<NodeShutdownActor>) {
    let requested = period_requested(&config.groups);
    dockerlet_host::logind::watch(requested, &config.logind_conf_dir, RECONNECT_PERIOD, |event| {
        match event {
            WatchEvent::Armed { logind, lock } => actor.do_send(LogindArmed { logind, lock }),
            WatchEvent::Raised { path, from, to } => {
                tracing::info!(file = %path.display(), delay = ?to, was = ?from, "raised logind's InhibitDelayMaxSec")
            }
            WatchEvent::PrepareForShutdown(active) => actor.do_send(PrepareForShutdown(active)),
            WatchEvent::Failed(e) => actor.do_send(WatchFailed(e.to_string())),
        }
        actor.connected()
    });
}

/// What a shutdown did: per group, how many pods it stopped and whether it ran out of time.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShutdownReport {
    /// `(priority, pods, timed_out)` per group with pods, in the order stopped.
    pub groups: Vec<(i32, usize, bool)>,
}

/// Stop `pods` in `groups` (sorted from the lowest priority up): each group's pods at once,
/// each with the smaller of the group's period and its own grace; a group is given up after its
/// period (kubelet's `processShutdownEvent`).
pub async fn stop_in_groups(groups: &[ShutdownGroup], pods: Vec<ShutdownTarget>) -> ShutdownReport {
    let mut grouped: Vec<Vec<ShutdownTarget>> = groups.iter().map(|_| Vec::new()).collect();
    for pod in pods {
        if let Some(index) = group_of(groups, pod.priority) {
            grouped[index].push(pod);
        }
    }
    let mut report = ShutdownReport::default();
    for (group, pods) in groups.iter().zip(grouped) {
        if pods.is_empty() {
            continue;
        }
        let period = group.shutdown_grace_period_seconds;
        let stops = pods.iter().map(|pod| {
            let grace = pod_grace(period, pod.termination_grace_seconds);
            tracing::info!(pod = %pod.name, pod.uid = %pod.uid, grace = ?grace, "Shutdown manager killing pod with gracePeriod");
            pod.worker.send(ShutdownPod { grace })
        });
        let all = futures::future::join_all(stops);
        let timed_out = tokio::time::timeout(Duration::from_secs(period.max(0) as u64), all)
            .await
            .is_err();
        if timed_out {
            tracing::info!(
                grace_period = period,
                priority = group.priority,
                "Shutdown manager pod killing time out"
            );
        }
        report.groups.push((group.priority, pods.len(), timed_out));
    }
    report
}

impl Actor for NodeShutdownActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        tracing::info!(groups = ?self.config.groups, "Creating node shutdown manager");
        if let Some(metrics) = self.links.metrics.clone() {
            ctx.spawn(load_metrics(self.config.state_dir.clone(), metrics).into_actor(self));
        }
        let (config, me) = (self.config.clone(), ctx.address());
        if let Err(e) = std::thread::Builder::new()
            .name("logind-watch".to_string())
            .spawn(move || watch(config, me))
        {
            self.failed(format!("cannot start the logind watch thread: {e}"));
        }
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1()) {
            Ok(mut usr1) => {
                let me = ctx.address();
                ctx.spawn(
                    async move {
                        while usr1.recv().await.is_some() {
                            tracing::info!("Received shutdown signal from USR1");
                            me.do_send(PrepareForShutdown(true));
                        }
                    }
                    .into_actor(self),
                );
            }
            Err(e) => self.failed(format!("cannot install the SIGUSR1 handler: {e}")),
        }
    }
}

impl Handler<LogindArmed> for NodeShutdownActor {
    type Result = ();

    fn handle(&mut self, msg: LogindArmed, _: &mut Self::Context) {
        self.handled += 1;
        tracing::info!("holding a logind delay inhibitor lock for a graceful node shutdown");
        self.logind = Some(msg.logind);
        // A reconnect during a shutdown keeps nothing: the node goes down once pods stopped.
        if matches!(self.stage, Stage::Starting | Stage::Armed) {
            self.lock = Some(msg.lock);
            self.stage = Stage::Armed;
        }
    }
}

impl Handler<PrepareForShutdown> for NodeShutdownActor {
    type Result = ();

    fn handle(&mut self, msg: PrepareForShutdown, ctx: &mut Self::Context) {
        self.handled += 1;
        let shutting_down = msg.0;
        let kind = if shutting_down { "shutdown" } else { "cancelled" };
        tracing::info!(event = kind, "Shutdown manager detected new shutdown event");
        if shutting_down && matches!(self.stage, Stage::ShuttingDown | Stage::Done) {
            return;
        }
        self.node_event(if shutting_down {
            "Shutdown manager detected shutdown event"
        } else {
            "Shutdown manager detected shutdown cancellation"
        });
        self.links.shutting_down.do_send(NodeShuttingDown(shutting_down));
        if shutting_down {
            self.shut_down(ctx);
        } else {
            self.rearm(ctx);
        }
    }
}

impl Handler<WatchFailed> for NodeShutdownActor {
    type Result = ();

    fn handle(&mut self, msg: WatchFailed, _: &mut Self::Context) {
        self.handled += 1;
        self.failed(msg.0);
    }
}

impl Inspect for NodeShutdownActor {
    const KIND: &'static str = "NodeShutdownActor";
    const NAME: &'static str = "node-shutdown";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.clone()
    }

    fn detail(&self) -> serde_json::Value {
        let stage = match self.stage {
            Stage::Starting => "starting: no logind inhibitor lock (a shutdown is then immediate, SIGUSR1 still works)",
            Stage::Armed => "armed: holding a logind delay inhibitor lock",
            Stage::ShuttingDown => "shutting down: stopping pods by priority group",
            Stage::Done => "done: pods stopped, lock released",
        };
        json!({
            "stage": stage,
            "groups": self.config.groups,
            "inhibit_delay_needed": format!("{:?}", period_requested(&self.config.groups)),
            "last_shutdown": self.report,
        })
    }
}

crate::supervised!(NodeShutdownActor);

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_messages::PodUid;
    use std::sync::Mutex;
    use tokio::time::Instant;

    /// A pod worker that takes `takes` to stop and records when it was asked and with what grace.
    /// Which pod was asked to stop, with what grace, when.
    type AskLog = Arc<Mutex<Vec<(&'static str, Duration, Instant)>>>;

    struct FakeWorker {
        name: &'static str,
        takes: Duration,
        log: AskLog,
    }

    impl Actor for FakeWorker {
        type Context = Context<Self>;
    }

    impl Handler<ShutdownPod> for FakeWorker {
        type Result = ResponseFuture<()>;

        fn handle(&mut self, msg: ShutdownPod, _: &mut Self::Context) -> Self::Result {
            self.log.lock().unwrap().push((self.name, msg.grace, Instant::now()));
            Box::pin(tokio::time::sleep(self.takes))
        }
    }

    /// Groups are stopped from the lowest priority up, one after the other; a group that does
    /// not finish in its period is given up; each pod gets the smaller grace.
    #[actix::test]
    async fn groups_stop_in_priority_order_within_their_periods() {
        tokio::time::pause();
        let log = Arc::new(Mutex::new(Vec::new()));
        let target = |name: &'static str, priority: i32, grace: Option<i64>, takes: u64| ShutdownTarget {
            uid: PodUid(name.to_string()),
            name: format!("default/{name}"),
            priority,
            termination_grace_seconds: grace,
            worker: FakeWorker {
                name,
                takes: Duration::from_secs(takes),
                log: log.clone(),
            }
            .start()
            .recipient(),
        };
        let groups = dockerlet_pod::shutdown::groups_from_periods(Duration::from_secs(30), Duration::from_secs(10));
        let critical = dockerlet_pod::shutdown::SYSTEM_NODE_CRITICAL_PRIORITY;
        let began = Instant::now();
        let report = stop_in_groups(
            &groups,
            vec![
                target("critical", critical, Some(120), 1),
                target("slow", 0, Some(120), 60),
                target("quick", 0, Some(5), 1),
            ],
        )
        .await;
        assert_eq!(
            report.groups,
            vec![
                (0, 2, true),
                (dockerlet_pod::shutdown::SYSTEM_CRITICAL_PRIORITY, 1, false)
            ]
        );
        let log = log.lock().unwrap().clone();
        let asked = |name: &str| log.iter().find(|(n, _, _)| *n == name).cloned().unwrap();
        assert_eq!(asked("slow").1, Duration::from_secs(20));
        assert_eq!(asked("quick").1, Duration::from_secs(5));
        assert_eq!(asked("critical").1, Duration::from_secs(10));
        // The critical pod is asked only once the first group's 20 s ran out.
        assert!(asked("critical").2 - began >= Duration::from_secs(20));
        assert!(asked("slow").2 - began < Duration::from_secs(1));
    }
}
