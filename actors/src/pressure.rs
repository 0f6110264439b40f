//! PressureActor: observes the eviction signals on every node, standalone or in a cluster
//! (kubelet's eviction manager `synchronize` loop, `pkg/kubelet/eviction/eviction_manager.go`,
//! without evicting yet).
//!
//! | Message           | From             | Effect                                            |
//! |-------------------|------------------|---------------------------------------------------|
//! | GetNodePressure   | NodeStatusActor (through the Supervisor) | the conditions in force and the thresholds met |
//! | GetActorState     | Supervisor       | debug snapshot: conditions, thresholds met         |
//! | Panic             | Supervisor       | test-only fault hook                               |
//! | every `period`    | self             | observe (off the actor thread), apply the thresholds |
//!
//! The reading itself ([`dockerlet_host::signals::observe`]: /proc and statvfs) is blocking
//! I/O and runs on `spawn_blocking`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use dockerlet_host::signals::{self, Observation, PressureTracker, Thresholds};
use dockerlet_messages::node::{GetNodePressure, NodePressure, ThresholdMet};
use serde_json::json;

use crate::inspect::Inspect;

/// Reads the node's signals; blocking.
pub type Observe = Arc<dyn Fn() -> Observation + Send + Sync>;

/// What the PressureActor watches and how often.
#[derive(Clone)]
pub struct PressureConfig {
    /// Hard eviction thresholds (`evictionHard`).
    pub thresholds: Thresholds,
    /// `evictionPressureTransitionPeriod` (5 m): how long a condition stays True.
    pub transition_period: Duration,
    /// How often the signals are read (kubelet's eviction monitoring interval, 10 s).
    pub period: Duration,
    /// The reading; [`PressureConfig::observe_node`] on a real node, a stand-in in tests.
    pub observe: Observe,
}

impl PressureConfig {
    /// Read this node: the filesystems of `root_dir` (nodefs) and `image_dir` (imagefs).
    pub fn observe_node(root_dir: PathBuf, image_dir: Option<PathBuf>) -> Observe {
        Arc::new(move || signals::observe(&root_dir, image_dir.as_deref()))
    }
}

impl std::fmt::Debug for PressureConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PressureConfig")
            .field("thresholds", &self.thresholds)
            .field("transition_period", &self.transition_period)
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

/// The actor.
pub struct PressureActor {
    config: PressureConfig,
    /// Conditions held for the transition period.
    tracker: PressureTracker,
    /// The last result.
    current: NodePressure,
    /// An observation is running on the blocking pool.
    observing: bool,
    /// Observations done.
    observations: u64,
    /// Queries that came before the first observation: answered by it, so the Node's first
    /// status never reports pressure nobody has looked at yet.
    waiting: Vec<futures::channel::oneshot::Sender<NodePressure>>,
    /// Messages handled.
    handled: u64,
}

impl PressureActor {
    /// A pressure actor.
    pub fn new(config: PressureConfig) -> Self {
        PressureActor {
            tracker: PressureTracker::new(config.transition_period),
            config,
            current: NodePressure::default(),
            observing: false,
            observations: 0,
            waiting: Vec::new(),
            handled: 0,
        }
    }

    fn observe(&mut self, ctx: &mut Context<Self>) {
        if self.observing {
            return;
        }
        self.observing = true;
        let observe = self.config.observe.clone();
        let reading = async move { tokio::task::spawn_blocking(move || observe()).await };
        ctx.spawn(reading.into_actor(self).map(|reading, act, _| {
            act.observing = false;
            match reading {
                Ok(observation) => act.apply(&observation, Instant::now()),
                Err(e) => tracing::warn!(error = %e, "reading the eviction signals failed"),
            }
            for waiting in act.waiting.drain(..) {
                let _ = waiting.send(act.current.clone());
            }
        }));
    }

    /// Apply the thresholds to an observation; log thresholds newly met.
    fn apply(&mut self, observation: &Observation, now: Instant) {
        self.observations += 1;
        let met = signals::met(&self.config.thresholds, observation);
        let conditions = self.tracker.update(&met, now);
        let met: Vec<ThresholdMet> = met
            .into_iter()
            .map(|(signal, observed, threshold)| ThresholdMet {
                signal: signal.name(),
                observed,
                threshold,
            })
            .collect();
        let names = |m: &[ThresholdMet]| m.iter().map(|t| t.signal).collect::<Vec<_>>();
        if names(&met) != names(&self.current.met) {
            for t in &met {
                tracing::warn!(
                    signal = t.signal,
                    observed = t.observed,
                    threshold = t.threshold,
                    "eviction threshold met"
                );
            }
        }
        self.current = NodePressure { conditions, met };
    }
}

impl Actor for PressureActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.observe(ctx);
        ctx.run_interval(self.config.period, |act, ctx| act.observe(ctx));
    }
}

impl Handler<GetNodePressure> for PressureActor {
    type Result = ResponseFuture<NodePressure>;

    /// The last reading; before the first one, the first one.
    fn handle(&mut self, _: GetNodePressure, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        if self.observations > 0 {
            let current = self.current.clone();
            return Box::pin(async move { current });
        }
        let (answer, answered) = futures::channel::oneshot::channel();
        self.waiting.push(answer);
        Box::pin(async move { answered.await.unwrap_or_default() })
    }
}

impl Inspect for PressureActor {
    const KIND: &'static str = "PressureActor";
    const NAME: &'static str = "pressure";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn detail(&self) -> serde_json::Value {
        let conditions: Vec<&str> = self.current.conditions.iter().map(|c| c.condition_type()).collect();
        json!({
            "conditions": conditions,
            "thresholds_met": self.current.met,
            "observations": self.observations,
        })
    }
}

crate::supervised!(PressureActor);

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_messages::node::Pressure;

    fn config(memory_available: i64) -> PressureConfig {
        PressureConfig {
            thresholds: Thresholds::default(),
            transition_period: Duration::from_secs(300),
            period: Duration::from_millis(20),
            observe: Arc::new(move || Observation {
                memory_capacity: 8 << 30,
                memory_available,
                nodefs: None,
                imagefs: None,
                pids: None,
            }),
        }
    }

    /// A query that arrives before the first reading is answered by it, not with "no pressure"
    /// (the Node's first status would otherwise claim sufficient memory).
    #[actix::test]
    async fn the_first_query_waits_for_the_first_reading() {
        let mut slow = config(50 << 20);
        let observe = slow.observe.clone();
        slow.observe = Arc::new(move || {
            // On the blocking pool, never the actor thread.
            #[allow(clippy::disallowed_methods)]
            std::thread::sleep(Duration::from_millis(100));
            observe()
        });
        let actor = PressureActor::new(slow).start();
        let p = actor.send(GetNodePressure).await.unwrap();
        assert_eq!(p.conditions, vec![Pressure::Memory]);
    }

    /// A node short of memory reports MemoryPressure with the threshold met; one with room
    /// reports none.
    #[actix::test]
    async fn pressure_follows_the_thresholds() {
        tokio::time::pause();
        let short = PressureActor::new(config(50 << 20)).start();
        let roomy = PressureActor::new(config(4 << 30)).start();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let p = short.send(GetNodePressure).await.unwrap();
        assert_eq!(p.conditions, vec![Pressure::Memory]);
        assert_eq!(p.met[0].signal, "memory.available");
        assert!(roomy.send(GetNodePressure).await.unwrap().conditions.is_empty());
    }
}
