//! The actor graph: every long-lived child of the Supervisor, in start order, and the registry
//! that keeps them alive.

use dockerlet_messages::pleg::ContainerOomKilled;
use std::sync::Arc;

use actix::prelude::*;
use dockerlet_messages::worker::{StopActor, TerminatePod, UpdatePod};
use dockerlet_runtime::ContainerRuntime;
use k8s_openapi::api::core::v1::Pod;

use super::{Mode, Supervisor, SupervisorConfig};
use crate::node_shutdown::{NodeShutdownActor, NodeShutdownLinks};
use crate::node_status::NodeStatusActor;
use crate::oom_watcher::OomWatcherActor;
use crate::pleg::{PlegActor, PlegLinks};
use crate::pod_cache::PodCache;
use crate::pod_manager::{Worker, WorkerStart};
use crate::pod_worker::{PodWorker, SyncContext, WorkerLinks};
use crate::pressure::PressureActor;
use crate::prober::{ProbeActor, ProbeLinks};
use crate::registry::{AfterRestart, Child, Registry};
use crate::source::api::ApiSource;
use crate::source::http::HttpSource;
use crate::source::FileSource;
use crate::stats::StatsActor;
use crate::status::StatusActor;
use crate::system_cgroups::SystemCgroupsActor;

/// The long-lived children, typed for routing, and the registry that keeps them alive.
pub(super) struct Children {
    pub(super) registry: Registry,
    pub(super) status: Child<StatusActor>,
    pub(super) probe: Child<ProbeActor>,
    pub(super) pleg: Child<PlegActor>,
    pub(super) pressure: Child<PressureActor>,
    pub(super) stats: Option<Child<StatsActor>>,
    pub(super) api_source: Option<Child<ApiSource>>,
}

impl Children {
    /// The actor graph: every child of the Supervisor, in start order. Adding a subsystem is one
    /// `Child::start` here and its `registry.add`.
    pub(super) fn start(
        config: &SupervisorConfig,
        runtime: &Arc<dyn ContainerRuntime>,
        cache: &Arc<PodCache>,
        me: Addr<Supervisor>,
    ) -> Self {
        let node = config.worker.node_name.clone();
        let api = config.mode.api().cloned();
        let status = {
            let api = api.clone();
            Child::start(AfterRestart::PublishStatus, move || {
                StatusActor::new(api.clone()).start()
            })
        };
        let probe = {
            let (runtime, me, metrics) = (runtime.clone(), me.clone(), config.worker.metrics.clone());
            Child::start(AfterRestart::ResendProbeTargets, move || {
                let links = ProbeLinks {
                    results: me.clone().recipient(),
                    events: me.clone().recipient(),
                };
                ProbeActor::new(runtime.clone(), links)
                    .with_metrics(metrics.clone())
                    .start()
            })
        };
        let pleg = {
            let (runtime, cache, me) = (runtime.clone(), cache.clone(), me.clone());
            let (node, period, metrics) = (node.clone(), config.relist_period, config.worker.metrics.clone());
            let health = config.health.clone();
            Child::start(AfterRestart::Nothing, move || {
                let links = PlegLinks {
                    events: me.clone().recipient(),
                    relisted: me.clone().recipient(),
                    health: health.clone(),
                };
                PlegActor::new(runtime.clone(), cache.clone(), node.clone(), links, period)
                    .with_metrics(metrics.clone())
                    .start()
            })
        };
        let pressure = {
            let pressure = config.pressure.clone();
            Child::start(AfterRestart::Nothing, move || {
                PressureActor::new(pressure.clone()).start()
            })
        };
        let stats = config.stats.clone().map(|stats| {
            let (cache, metrics) = (cache.clone(), config.worker.metrics.clone());
            Child::start(AfterRestart::Nothing, move || {
                StatsActor::new(stats.clone(), cache.clone())
                    .with_metrics(metrics.clone())
                    .start()
            })
        });
        let file_source = config.manifest_path.clone().map(|path| {
            let (me, node, every) = (me.clone(), node.clone(), config.file_check_frequency);
            Child::start(AfterRestart::Nothing, move || {
                FileSource::new(path.clone(), node.clone(), every, me.clone().recipient()).start()
            })
        });
        let api_source = api.clone().map(|api| {
            let me = me.clone();
            Child::start(AfterRestart::Nothing, move || {
                ApiSource::new(api.clone(), me.clone().recipient()).start()
            })
        });
        let http_source = config.manifest_url.clone().map(|url| {
            let (me, node) = (me.clone(), node.clone());
            Child::start(AfterRestart::Nothing, move || {
                HttpSource::new(url.clone(), node.clone(), me.clone().recipient()).start()
            })
        });
        let node_status = match &config.mode {
            Mode::Standalone => None,
            Mode::Cluster { api, node } => {
                let (api, node, me) = (api.clone(), (**node).clone(), me.clone());
                Some(Child::start(AfterRestart::Nothing, move || {
                    NodeStatusActor::new(
                        api.clone(),
                        node.clone(),
                        me.clone().recipient(),
                        me.clone().recipient(),
                    )
                    .start()
                }))
            }
        };
        let oom = config.oom.clone().map(|oom| {
            let (api, me, pleg) = (api.clone(), me.clone(), pleg.link::<ContainerOomKilled>());
            Child::start(AfterRestart::Nothing, move || {
                OomWatcherActor::new(oom.clone(), api.clone(), me.clone().recipient())
                    .with_container_ooms_to(pleg.clone())
                    .start()
            })
        });
        let system_cgroups = config.system_cgroups.clone().map(|config| {
            Child::start(AfterRestart::Nothing, move || {
                SystemCgroupsActor::new(config.clone()).start()
            })
        });
        let node_shutdown = config.node_shutdown.clone().map(|shutdown| {
            let (api, me) = (api.clone(), me.clone());
            Child::start(AfterRestart::Nothing, move || {
                let links = NodeShutdownLinks {
                    targets: me.clone().recipient(),
                    shutting_down: me.clone().recipient(),
                    api: api.clone(),
                };
                NodeShutdownActor::new(shutdown.clone(), links).start()
            })
        });
        let mut registry = Registry::default();
        registry.add(&status);
        registry.add(&probe);
        registry.add(&pleg);
        registry.add(&pressure);
        registry.add_some(&stats);
        registry.add_some(&file_source);
        registry.add_some(&api_source);
        registry.add_some(&http_source);
        registry.add_some(&node_status);
        registry.add_some(&oom);
        registry.add_some(&system_cgroups);
        registry.add_some(&node_shutdown);
        Children {
            registry,
            status,
            probe,
            pleg,
            pressure,
            stats,
            api_source,
        }
    }
}

impl Children {
    /// Where a PodWorker sends what it learns: statuses and probe targets straight to the
    /// current StatusActor and ProbeActor, the rest to the Supervisor `me`.
    pub(super) fn worker_links(&self, me: Addr<Supervisor>) -> WorkerLinks {
        let (status, probe) = (&self.status, &self.probe);
        WorkerLinks {
            status: status.link(),
            finished: me.clone().recipient(),
            removed: status.link(),
            events: me.clone().recipient(),
            terminated: me.recipient(),
            watch: probe.link(),
            forget: probe.link(),
        }
    }
}

/// A PodWorker as the pod manager sees it.
impl Worker for Addr<PodWorker> {
    fn update(&self, pod: Arc<Pod>) {
        self.do_send(UpdatePod { pod });
    }

    fn terminate(&self) {
        self.do_send(TerminatePod { grace_period: None });
    }

    fn stop(&self) {
        self.do_send(StopActor);
    }

    fn dead(&self) -> bool {
        !self.connected()
    }
}

/// Start a PodWorker as `start` says, with Docker, the pod cache and the worker settings.
pub(super) fn start_worker(sync: &SyncContext, links: &WorkerLinks, start: WorkerStart) -> Addr<PodWorker> {
    let mut worker = PodWorker::new(start.pod, sync.clone(), links.clone()).attempts_from(start.next_attempts);
    if let Some(rejection) = start.rejection {
        worker = worker.rejected(rejection);
    }
    match start.termination {
        Some(t) => worker.terminating(t.grace).start(),
        None => worker.start(),
    }
}
