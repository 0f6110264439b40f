//! What every sync and termination of the node's PodWorkers shares: Docker, the pod cache the
//! PLEG fills, the workers' settings and the node's image pulls ([`SyncContext`]), with the
//! cache-keeping wrappers around create, remove and inspect.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dockerlet_messages::runtime::{ObservedContainer, RuntimeState};
use dockerlet_messages::ContainerId;
use dockerlet_runtime::{ContainerRuntime, RuntimeError};

use super::image_manager::ImageManager;
use super::PodWorkerConfig;
use crate::pod_cache::PodCache;

/// How long a sync waits for the pod cache to be refreshed before it gives up (and retries
/// after its error back-off): far more than a relist takes, unless Docker does not answer.
pub(super) const CACHE_WAIT: Duration = Duration::from_secs(10);

/// The shared things a sync or a termination works with.
#[derive(Clone)]
pub struct SyncContext {
    /// Docker.
    pub runtime: Arc<dyn ContainerRuntime>,
    /// The pod cache the PLEG fills; a sync reads it and writes what it observes itself.
    pub cache: Arc<PodCache>,
    /// The worker's settings.
    pub config: Arc<PodWorkerConfig>,
    /// The node's images: pull policy, back-off, permits and credentials.
    pub images: Arc<ImageManager>,
}

impl SyncContext {
    /// The context every worker of one node shares: one image manager, with no pull back-off
    /// yet and the pull permits `config.image_pulls` allows.
    pub fn new(runtime: Arc<dyn ContainerRuntime>, cache: Arc<PodCache>, config: Arc<PodWorkerConfig>) -> Self {
        let images = ImageManager::new(
            runtime.clone(),
            config.api.clone(),
            config.root_dir.clone(),
            config.image_pulls,
        );
        SyncContext {
            runtime,
            cache,
            config,
            images: Arc::new(images),
        }
    }

    /// Inspect `id` into the cache after an action on it. Returns what was seen; none if it is
    /// gone or could not be inspected (then `unobserved` says since when).
    pub(super) async fn observe(
        &self,
        id: &ContainerId,
        unobserved: &mut Option<Instant>,
    ) -> Option<ObservedContainer> {
        match crate::pod_cache::refresh(&*self.runtime, &self.cache, id).await {
            Ok(refreshed) => refreshed.observed,
            Err(e) => {
                tracing::warn!(container = %id, error = %e, "cannot observe a container after acting on it");
                self.cache.unclaim(id);
                *unobserved = Some(Instant::now());
                None
            }
        }
    }

    /// Create a container and claim it in the cache (what its labels say; the relists leave it
    /// to this worker, which observes it after the start).
    pub(super) async fn create(&self, spec: dockerlet_pod::container::CreateSpec) -> Result<ContainerId, RuntimeError> {
        let known = dockerlet_pod::labels::parse(&spec.labels);
        let image = spec.image.clone();
        tracing::debug!(name = %spec.name, "creating container");
        let id = self.runtime.create_container(spec).await?;
        if let Some(parsed) = known {
            self.cache.claim(
                parsed.observed(id.clone(), RuntimeState::Created, image),
                Instant::now(),
            );
        }
        Ok(id)
    }

    /// Remove a container and forget it; `reason` goes to the log.
    pub(super) async fn remove(&self, id: &ContainerId, reason: &str) -> Result<(), RuntimeError> {
        tracing::info!(id = %id, reason, "removing container");
        self.runtime.remove_container(id).await?;
        self.cache.remove(id, Instant::now());
        Ok(())
    }
}
