//! StatsActor: the node's and the pods' statistics without cAdvisor, for `/stats/summary`
//! (kubelet's `pkg/kubelet/stats` over cAdvisor's housekeeping).
//!
//! | Message            | From                      | Effect                                        |
//! |--------------------|---------------------------|-----------------------------------------------|
//! | GetStatsSummary    | HTTP (through the Supervisor) | the last summary; none before the first    |
//! | GetStatsView       | HTTP (through the Supervisor) | the last summary with its containers (IDs, cgroups, images) and the machine's size |
//! | GetFreshStatsSummary | EvictionActor           | a pass now (or the one under way), answered with its summary |
//! | GetActorState      | Supervisor                | debug snapshot: passes, last duration, pods   |
//! | Panic              | Supervisor                | test-only fault hook                          |
//! | at start, every `--housekeeping-interval` | self | one pass of [`dockerlet_host::stats::Collector`] on the blocking pool |
//!
//! Containers come from the [`PodCache`] (no Docker call); every figure is read from cgroupfs,
//! /proc and statvfs by `dockerlet_host`, off the actor thread. The summary is kept as an
//! `Arc`, so a request never touches the node.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use dockerlet_messages::stats::{GetFreshStatsSummary, GetStatsSummary, GetStatsView, MachineInfo, StatsView, Summary};
use dockerlet_metrics::Metrics;
use serde_json::json;

use dockerlet_host::stats::{Collected, Collector};
pub use dockerlet_host::stats::{Paths as StatsPaths, SystemCgroupNames};

use crate::inspect::Inspect;
use crate::pod_cache::PodCache;

/// How soon to look again when the pod cache has not been filled by a first relist yet.
const CACHE_RETRY: Duration = Duration::from_millis(200);

/// What the StatsActor reads and how often.
#[derive(Debug, Clone)]
pub struct StatsConfig {
    /// Where things are.
    pub paths: StatsPaths,
    /// `--housekeeping-interval` (10 s).
    pub interval: Duration,
}

/// The actor.
pub struct StatsActor {
    config: StatsConfig,
    cache: Arc<PodCache>,
    /// The collector between passes; none while a pass runs (so passes never overlap).
    collector: Option<Collector>,
    /// The last pass's summary and containers.
    view: Option<Arc<StatsView>>,
    /// The machine's size, read once.
    machine: MachineInfo,
    /// The collector's CPU time and pass durations are counted here.
    metrics: Option<Arc<Metrics>>,
    /// Passes done.
    passes: u64,
    /// How long the last pass took.
    last_pass: Duration,
    /// Who waits for the pass under way (or the next one).
    fresh_waiters: Vec<futures::channel::oneshot::Sender<Option<Arc<Summary>>>>,
    /// Messages handled.
    handled: u64,
}

impl StatsActor {
    /// A stats actor over the pod cache.
    pub fn new(config: StatsConfig, cache: Arc<PodCache>) -> Self {
        StatsActor {
            collector: Some(Collector::new(config.paths.clone())),
            config,
            cache,
            view: None,
            machine: machine_info(),
            metrics: None,
            passes: 0,
            last_pass: Duration::ZERO,
            fresh_waiters: Vec::new(),
            handled: 0,
        }
    }

    /// Count the collector's CPU time and pass durations in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn housekeep(&mut self, ctx: &mut Context<Self>) {
        let Some(running) = self.cache.running() else {
            ctx.run_later(CACHE_RETRY, |act, ctx| act.housekeep(ctx));
            return;
        };
        let Some(mut collector) = self.collector.take() else {
            return;
        };
        let started = Instant::now();
        let pass = tokio::task::spawn_blocking(move || {
            // The pass's own CPU time: it runs on this one blocking-pool thread.
            let cpu = thread_cpu();
            let collected = collector.collect(&running);
            (collector, collected, thread_cpu().saturating_sub(cpu))
        });
        ctx.spawn(
            pass.into_actor(self)
                .map(move |result, act, _| match result {
                    Ok((
                        collector,
                        Collected {
                            summary,
                            containers,
                            block_io,
                            extras,
                            other_cgroups,
                            sandboxes,
                        },
                        cpu,
                    )) => {
                        act.collector = Some(collector);
                        act.passes += 1;
                        act.last_pass = started.elapsed();
                        if let Some(m) = &act.metrics {
                            m.stats_collection_cpu.inc_by(cpu.as_secs_f64());
                            m.stats_collection_duration.observe(act.last_pass.as_secs_f64());
                        }
                        tracing::debug!(
                            pods = summary.pods.len(),
                            took_ms = act.last_pass.as_millis() as u64,
                            "stats housekeeping"
                        );
                        act.view = Some(Arc::new(StatsView {
                            summary: Arc::new(summary),
                            containers: Arc::new(containers),
                            machine: act.machine,
                            block_io: Arc::new(block_io),
                            extras: Arc::new(extras),
                            other_cgroups: Arc::new(other_cgroups),
                            sandboxes: Arc::new(sandboxes),
                        }));
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "stats housekeeping failed; starting again with no history");
                        act.collector = Some(Collector::new(act.config.paths.clone()));
                    }
                })
                .map(|(), act, _| {
                    let summary = act.view.as_ref().map(|v| v.summary.clone());
                    for waiter in act.fresh_waiters.drain(..) {
                        let _ = waiter.send(summary.clone());
                    }
                }),
        );
    }
}

impl Actor for StatsActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        tracing::info!(
            interval_ms = self.config.interval.as_millis() as u64,
            cgroups = self.config.paths.layout.is_some(),
            docker_root = ?self.config.paths.docker_root,
            "stats housekeeping started"
        );
        self.housekeep(ctx);
        ctx.run_interval(self.config.interval, |act, ctx| act.housekeep(ctx));
    }
}

impl Handler<GetStatsSummary> for StatsActor {
    type Result = Option<Arc<Summary>>;

    /// The last summary, shared.
    fn handle(&mut self, _: GetStatsSummary, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        self.view.as_ref().map(|v| v.summary.clone())
    }
}

impl Handler<GetFreshStatsSummary> for StatsActor {
    type Result = ResponseFuture<Option<Arc<Summary>>>;

    /// A pass now, or the one under way; answered with its summary.
    fn handle(&mut self, _: GetFreshStatsSummary, ctx: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let (answer, answered) = futures::channel::oneshot::channel();
        self.fresh_waiters.push(answer);
        self.housekeep(ctx);
        Box::pin(async move { answered.await.ok().flatten() })
    }
}

impl Handler<GetStatsView> for StatsActor {
    type Result = Option<Arc<StatsView>>;

    /// The last pass's view, shared.
    fn handle(&mut self, _: GetStatsView, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        self.view.clone()
    }
}

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec.max(0) as u64, t.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// Logical CPUs and installed memory, as cAdvisor's `machine_*` series give them.
fn machine_info() -> MachineInfo {
    let memory = dockerlet_host::meminfo::MemInfo::read().total();
    MachineInfo {
        cpu_cores: std::thread::available_parallelism().ok().map(|n| n.get() as u64),
        memory_bytes: u64::try_from(memory).ok().filter(|m| *m > 0),
    }
}

impl Inspect for StatsActor {
    const KIND: &'static str = "StatsActor";
    const NAME: &'static str = "stats";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn detail(&self) -> serde_json::Value {
        json!({
            "passes": self.passes,
            "last_pass_ms": self.last_pass.as_secs_f64() * 1000.0,
            "pods": self.view.as_ref().map(|v| v.summary.pods.len()),
            "interval_ms": self.config.interval.as_millis() as u64,
        })
    }
}

crate::supervised!(StatsActor);

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_messages::runtime::{ContainerRole, RuntimeState};
    use dockerlet_messages::PodUid;

    fn container(id: &str, name: &str, role: ContainerRole) -> dockerlet_messages::runtime::ObservedContainer {
        let mut c = crate::test_support::observed("u1", name, id, RuntimeState::Running);
        c.role = role;
        c.pod_uid = PodUid("u1".into());
        c
    }

    /// Nothing is served before the first pass; then a summary of this node, with the pod
    /// whose sandbox runs (its containers' cgroups are absent here: their figures left out,
    /// never zero).
    #[actix::test]
    async fn serves_a_summary_after_the_first_pass() {
        let root = tempfile::tempdir().unwrap();
        let cache = Arc::new(PodCache::default());
        let config = StatsConfig {
            paths: StatsPaths {
                node_name: "n1".into(),
                root_dir: root.path().to_path_buf(),
                docker_root: None,
                layout: dockerlet_host::cgroup::CgroupLayout::detect().ok(),
                system: SystemCgroupNames::default(),
                engine_cgroup_driver: dockerlet_pod::cgroup::CgroupDriver::Cgroupfs,
            },
            interval: Duration::from_secs(3600),
        };
        let addr = StatsActor::new(config, cache.clone()).start();
        assert_eq!(addr.send(GetStatsSummary).await.unwrap(), None);
        cache.put(container("s1", "POD", ContainerRole::Sandbox), Instant::now());
        cache.put(container("a1", "app", ContainerRole::App), Instant::now());
        cache.relisted(Instant::now());
        let summary = loop {
            if let Some(s) = addr.send(GetStatsSummary).await.unwrap() {
                break s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(summary.node.node_name, "n1");
        assert!(summary.node.cpu.as_ref().unwrap().usage_core_nano_seconds.unwrap() > 0);
        assert!(summary.node.fs.is_some() && summary.node.rlimit.is_some());
        assert_eq!(summary.pods.len(), 1);
        let pod = &summary.pods[0];
        assert_eq!(pod.pod_ref.uid, "u1");
        assert_eq!(pod.containers.len(), 1);
        assert_eq!(pod.containers[0].name, "app");
        assert!(pod.containers[0].cpu.is_none() && pod.containers[0].memory.is_none());
        let view = addr.send(GetStatsView).await.unwrap().unwrap();
        assert_eq!(view.containers[0].id, "a1");
        assert_eq!(view.containers[0].cgroup, "/docker/a1", "Docker's default parent");
        assert!(view.machine.cpu_cores.is_some_and(|n| n > 0));
    }
}
