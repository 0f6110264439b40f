//! The actor graph: the settings of every long-lived child of the Supervisor
//! ([`SupervisorConfig`]), the children in start order, and the registry that keeps them alive.
//! A new subsystem adds its settings field and its `Child::start` here, side by side.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use dockerlet_kube::certificates::CertificateRotation;
use dockerlet_kube::recorder::EventLimits;
use dockerlet_kube::KubeClient;
#[cfg(doc)]
use dockerlet_messages::debug::InjectFault;
use dockerlet_messages::debug::{HealthCell, RecordEvent};
use dockerlet_messages::gc::ReclaimContainers;
use dockerlet_messages::node::{ReclaimImages, SyncNodeStatus};
use dockerlet_messages::pleg::ContainerOomKilled;
use dockerlet_messages::source::PodSource;
use dockerlet_messages::stats::GetFreshStatsSummary;
use dockerlet_messages::worker::{StopActor, TerminatePod, UpdatePod};
use dockerlet_runtime::ContainerRuntime;
use k8s_openapi::api::core::v1::{Node, Pod};

use super::Supervisor;
use crate::certificates::CertificateManagerActor;
use crate::container_gc::{ContainerGcActor, ContainerGcConfig, ContainerGcLinks};
use crate::eviction::{EvictionActor, EvictionConfig, EvictionLinks};
use crate::image_gc::{ImageGcActor, ImageGcConfig, ImageGcLinks};
use crate::node_shutdown::{NodeShutdownActor, NodeShutdownConfig, NodeShutdownLinks};
use crate::node_status::{NodeStatusActor, NodeStatusConfig};
use crate::oom_watcher::{OomWatcherActor, OomWatcherConfig};
use crate::pleg::{PlegActor, PlegLinks};
use crate::pod_cache::PodCache;
use crate::pod_manager::{Worker, WorkerStart};
use crate::pod_worker::{PodWorker, PodWorkerConfig, SyncContext, WorkerLinks};
use crate::prober::{ProbeActor, ProbeLinks};
use crate::recorder::EventRecorder;
use crate::registry::{AfterRestart, Child, Registry};
use crate::source::api::ApiSource;
use crate::source::http::{HttpSource, HttpSourceConfig};
use crate::source::FileSource;
use crate::stats::{StatsActor, StatsConfig};
use crate::status::StatusActor;
use crate::system_cgroups::{SystemCgroupsActor, SystemCgroupsConfig};

/// Standalone node or member of a cluster: one type, so no half-configured mix can exist.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Static pods only (`--pod-manifest-path`, `--manifest-url`); no API server.
    Standalone,
    /// A node of the cluster behind `api` (`--kubeconfig` or `--in-cluster`).
    Cluster {
        /// The API server.
        api: Arc<dyn KubeClient>,
        /// Registration and heartbeats of the Node (boxed: the Node object is large).
        node: Box<NodeStatusConfig>,
    },
}

impl Mode {
    /// The API server, in cluster mode.
    pub fn api(&self) -> Option<&Arc<dyn KubeClient>> {
        match self {
            Mode::Standalone => None,
            Mode::Cluster { api, .. } => Some(api),
        }
    }
}

/// Settings of the actor system.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// Shared PodWorker settings (node name included).
    pub worker: Arc<PodWorkerConfig>,
    /// `--pod-manifest-path`, if any.
    pub manifest_path: Option<PathBuf>,
    /// `--file-check-frequency`.
    pub file_check_frequency: Duration,
    /// PLEG relist period while Docker's events flow (every second otherwise).
    pub relist_period: Duration,
    /// Honour [`InjectFault`] (tests only).
    pub fault_injection: bool,
    /// Standalone or cluster.
    pub mode: Mode,
    /// Static pods from a URL (`--manifest-url`).
    pub manifest_url: Option<HttpSourceConfig>,
    /// The eviction signals and thresholds (observed, and acted on, in both modes).
    pub eviction: EvictionConfig,
    /// Image garbage collection and the image list (collecting or not: `ImageGcConfig::collect`);
    /// none: no ImageGcActor (tests).
    pub image_gc: Option<ImageGcConfig>,
    /// The OOM watcher's kernel log and checkpoint; `None` runs none.
    pub oom: Option<OomWatcherConfig>,
    /// Statistics housekeeping (`/stats/summary`); none: no StatsActor.
    pub stats: Option<StatsConfig>,
    /// `--kubelet-cgroups` and `--system-cgroups`, kept every minute; none: no
    /// SystemCgroupsActor.
    pub system_cgroups: Option<SystemCgroupsConfig>,
    /// How many pod events go to the API (`--event-qps`, `--event-burst`).
    pub events: EventLimits,
    /// The PLEG's health, shared with `/healthz` (which reads it without a message).
    pub health: HealthCell,
    /// The Node as the agent registers it (labels, taints, allocatable): new pods are admitted
    /// against it (kubelet's `initialNode`), or against the API's Node once the agent sees it.
    pub node: Arc<Node>,
    /// Graceful node shutdown (`shutdownGracePeriod…`); none: no NodeShutdownActor, a
    /// shutdown is immediate.
    pub node_shutdown: Option<NodeShutdownConfig>,
    /// Container GC's policy and period; none: no ContainerGcActor (dead containers are then
    /// pruned only by their pod's syncs).
    pub container_gc: Option<ContainerGcConfig>,
    /// The client certificate to renew (`rotateCertificates`); none: no
    /// CertificateManagerActor.
    pub client_certificates: Option<Arc<dyn CertificateRotation>>,
}

impl SupervisorConfig {
    /// The pod sources this configuration starts.
    pub(super) fn sources(&self) -> Vec<PodSource> {
        [
            self.manifest_path.is_some().then_some(PodSource::File),
            self.manifest_url.is_some().then_some(PodSource::Http),
            self.mode.api().is_some().then_some(PodSource::Api),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// The long-lived children, typed for routing, and the registry that keeps them alive.
pub(super) struct Children {
    pub(super) registry: Registry,
    pub(super) events: Child<EventRecorder>,
    pub(super) status: Child<StatusActor>,
    pub(super) probe: Child<ProbeActor>,
    pub(super) pleg: Child<PlegActor>,
    pub(super) eviction: Child<EvictionActor>,
    pub(super) stats: Option<Child<StatsActor>>,
    pub(super) image_gc: Option<Child<ImageGcActor>>,
    pub(super) api_source: Option<Child<ApiSource>>,
}

/// What every child's start may need.
struct Start<'a> {
    config: &'a SupervisorConfig,
    runtime: &'a Arc<dyn ContainerRuntime>,
    cache: &'a Arc<PodCache>,
    me: Addr<Supervisor>,
}

impl Children {
    /// The actor graph: every child of the Supervisor, in start order. Adding a subsystem is one
    /// `Child::start` in the group it belongs to, and its `registry.add`.
    pub(super) fn start(
        config: &SupervisorConfig,
        runtime: &Arc<dyn ContainerRuntime>,
        cache: &Arc<PodCache>,
        me: Addr<Supervisor>,
    ) -> Self {
        let start = Start {
            config,
            runtime,
            cache,
            me,
        };
        let api = config.mode.api().cloned();
        let events = Child::start(AfterRestart::Nothing, {
            let (api, limits) = (api.clone(), config.events);
            move || EventRecorder::new(api.clone(), limits).start()
        });
        let status = Child::start(AfterRestart::PublishStatus, move || {
            StatusActor::new(api.clone()).start()
        });
        let probe = start.prober(&events);
        let pleg = start.pleg();
        let stats = start.stats();
        let image_gc = start.image_gc(&events);
        let container_gc = start.container_gc(&events);
        let eviction = start.eviction(&events, stats.as_ref(), image_gc.as_ref(), container_gc.as_ref());
        let mut registry = Registry::default();
        registry.add(&events);
        registry.add(&status);
        registry.add(&probe);
        registry.add(&pleg);
        registry.add(&eviction);
        registry.add_some(&stats);
        registry.add_some(&image_gc);
        registry.add_some(&container_gc);
        let api_source = start.sources(&mut registry);
        start.node_keepers(&mut registry, &events, &pleg);
        Children {
            registry,
            events,
            status,
            probe,
            pleg,
            eviction,
            stats,
            image_gc,
            api_source,
        }
    }
}

impl Start<'_> {
    fn prober(&self, events: &Child<EventRecorder>) -> Child<ProbeActor> {
        let (runtime, me, metrics) = (
            self.runtime.clone(),
            self.me.clone(),
            self.config.worker.metrics.clone(),
        );
        let events = events.link::<RecordEvent>();
        Child::start(AfterRestart::ResendProbeTargets, move || {
            let links = ProbeLinks {
                results: me.clone().recipient(),
                events: events.clone(),
            };
            ProbeActor::new(runtime.clone(), links)
                .with_metrics(metrics.clone())
                .start()
        })
    }

    fn pleg(&self) -> Child<PlegActor> {
        let (runtime, cache, me) = (self.runtime.clone(), self.cache.clone(), self.me.clone());
        let config = self.config;
        let (node, period, metrics) = (
            config.worker.node_name.clone(),
            config.relist_period,
            config.worker.metrics.clone(),
        );
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
    }

    /// The image collector (also the Node's image list).
    fn image_gc(&self, events: &Child<EventRecorder>) -> Option<Child<ImageGcActor>> {
        let config = self.config;
        config.image_gc.clone().map(|gc| {
            let (events, runtime) = (events.link::<RecordEvent>(), self.runtime.clone());
            let metrics = config.worker.metrics.clone();
            Child::start(AfterRestart::Nothing, move || {
                let links = ImageGcLinks {
                    events: events.clone(),
                    metrics: Some(metrics.clone()),
                };
                ImageGcActor::new(gc.clone(), runtime.clone(), links).start()
            })
        })
    }

    fn eviction(
        &self,
        events: &Child<EventRecorder>,
        stats: Option<&Child<StatsActor>>,
        image_gc: Option<&Child<ImageGcActor>>,
        container_gc: Option<&Child<ContainerGcActor>>,
    ) -> Child<EvictionActor> {
        let config = self.config.eviction.clone();
        let links = EvictionLinks {
            pressure_changed: self.me.clone().recipient(),
            candidates: self.me.clone().recipient(),
            stats: stats.map(|s| s.link::<GetFreshStatsSummary>()),
            events: events.link::<RecordEvent>(),
            metrics: self.config.worker.metrics.clone(),
            reclaim_images: image_gc.map(|gc| gc.link::<ReclaimImages>()),
            reclaim_containers: container_gc.map(|gc| gc.link::<ReclaimContainers>()),
        };
        Child::start(AfterRestart::Nothing, move || {
            EvictionActor::new(config.clone())
                .evicting_through(links.clone())
                .start()
        })
    }

    /// Container GC (also the eviction manager's first disk reclaim).
    fn container_gc(&self, events: &Child<EventRecorder>) -> Option<Child<ContainerGcActor>> {
        self.config.container_gc.clone().map(|gc| {
            let (runtime, cache) = (self.runtime.clone(), self.cache.clone());
            let links = ContainerGcLinks {
                kept: self.me.clone().recipient(),
                events: events.link::<RecordEvent>(),
            };
            Child::start(AfterRestart::Nothing, move || {
                ContainerGcActor::new(gc.clone(), runtime.clone(), cache.clone(), links.clone()).start()
            })
        })
    }

    fn stats(&self) -> Option<Child<StatsActor>> {
        self.config.stats.clone().map(|stats| {
            let (cache, metrics) = (self.cache.clone(), self.config.worker.metrics.clone());
            Child::start(AfterRestart::Nothing, move || {
                StatsActor::new(stats.clone(), cache.clone())
                    .with_metrics(metrics.clone())
                    .start()
            })
        })
    }

    /// The pod sources the configuration names; the API source is returned for routing.
    fn sources(&self, registry: &mut Registry) -> Option<Child<ApiSource>> {
        let config = self.config;
        let node = config.worker.node_name.clone();
        let file_source = config.manifest_path.clone().map(|path| {
            let (me, node, every) = (self.me.clone(), node.clone(), config.file_check_frequency);
            Child::start(AfterRestart::Nothing, move || {
                FileSource::new(path.clone(), node.clone(), every, me.clone().recipient()).start()
            })
        });
        let api_source = config.mode.api().cloned().map(|api| {
            let me = self.me.clone();
            Child::start(AfterRestart::Nothing, move || {
                ApiSource::new(api.clone(), me.clone().recipient()).start()
            })
        });
        let http_source = config.manifest_url.clone().map(|url| {
            let (me, node) = (self.me.clone(), node.clone());
            Child::start(AfterRestart::Nothing, move || {
                HttpSource::new(url.clone(), node.clone(), me.clone().recipient()).start()
            })
        });
        registry.add_some(&file_source);
        registry.add_some(&api_source);
        registry.add_some(&http_source);
        api_source
    }

    /// The actors that look after the node itself: its status in the API, its client
    /// certificate, OOM kills, the system cgroups and graceful shutdown.
    fn node_keepers(&self, registry: &mut Registry, events: &Child<EventRecorder>, pleg: &Child<PlegActor>) {
        let (config, me) = (self.config, &self.me);
        let api = config.mode.api().cloned();
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
                    .with_images(me.clone().recipient())
                    .start()
                }))
            }
        };
        let oom = config.oom.clone().map(|oom| {
            let (events, pleg) = (events.link::<RecordEvent>(), pleg.link::<ContainerOomKilled>());
            Child::start(AfterRestart::Nothing, move || {
                OomWatcherActor::new(oom.clone(), events.clone())
                    .with_container_ooms_to(pleg.clone())
                    .start()
            })
        });
        let system_cgroups = config.system_cgroups.clone().map(|config| {
            Child::start(AfterRestart::Nothing, move || {
                SystemCgroupsActor::new(config.clone()).start()
            })
        });
        let sync_node_status = node_status.as_ref().map(|n| n.link::<SyncNodeStatus>());
        let node_shutdown = config.node_shutdown.clone().map(|shutdown| {
            let (api, me, metrics) = (api.clone(), me.clone(), config.worker.metrics.clone());
            Child::start(AfterRestart::Nothing, move || {
                let links = NodeShutdownLinks {
                    targets: me.clone().recipient(),
                    shutting_down: me.clone().recipient(),
                    api: api.clone(),
                    sync_node_status: sync_node_status.clone(),
                    metrics: Some(metrics.clone()),
                };
                NodeShutdownActor::new(shutdown.clone(), links).start()
            })
        });
        let certificates = config.client_certificates.clone().map(|rotation| {
            let metrics = config.worker.metrics.clone();
            Child::start(AfterRestart::Nothing, move || {
                CertificateManagerActor::new(rotation.clone(), Some(metrics.clone())).start()
            })
        });
        registry.add_some(&node_status);
        registry.add_some(&certificates);
        registry.add_some(&oom);
        registry.add_some(&system_cgroups);
        registry.add_some(&node_shutdown);
    }
}

impl Children {
    /// Where a PodWorker sends what it learns: statuses, probe targets and events straight to
    /// the current StatusActor, ProbeActor and EventRecorder, the rest to the Supervisor `me`.
    pub(super) fn worker_links(&self, me: Addr<Supervisor>) -> WorkerLinks {
        let (status, probe) = (&self.status, &self.probe);
        WorkerLinks {
            status: status.link(),
            finished: me.clone().recipient(),
            removed: status.link(),
            events: self.events.link(),
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

    fn terminate(&self, reason: &str) {
        self.do_send(TerminatePod {
            grace_period: None,
            reason: reason.to_string(),
        });
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
        Some(t) => worker.terminating(t.grace, t.reason).start(),
        None => worker.start(),
    }
}
