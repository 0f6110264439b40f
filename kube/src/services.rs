//! Every Service of the cluster, from one watch (kubelet's service informer,
//! `NewListWatchFromClient(…, "services", NamespaceAll, …)`): the source of the service link
//! environment variables, so a container start asks the API server nothing.

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};

use crate::types::ApiError;

/// How long a lookup that must see the Services waits for the first list.
pub const SERVICES_SYNC_TIMEOUT: Duration = Duration::from_secs(5);

/// The reflector over all Services and the task feeding it.
pub struct ServiceCache {
    store: Store<Service>,
    task: tokio::task::AbortHandle,
}

impl std::fmt::Debug for ServiceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCache")
            .field("services", &self.store.state().len())
            .finish()
    }
}

impl ServiceCache {
    /// Start watching every Service (list, then watch; re-list with back-off on errors).
    pub fn start(client: kube::Client) -> Self {
        let (store, writer) = reflector::store::<Service>();
        let api: Api<Service> = Api::all(client);
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer);
        let task = tokio::spawn(stream.for_each(|_| std::future::ready(())));
        ServiceCache {
            store,
            task: task.abort_handle(),
        }
    }

    /// The Services as last seen. With `wait`, a cache that has not listed yet is waited for (at
    /// most [`SERVICES_SYNC_TIMEOUT`]) and then an error; without, it answers what it has.
    pub async fn services(&self, wait: bool) -> Result<Vec<Arc<Service>>, ApiError> {
        let ready = self.store.wait_until_ready();
        let listed = if wait {
            tokio::time::timeout(SERVICES_SYNC_TIMEOUT, ready)
                .await
                .is_ok_and(|r| r.is_ok())
        } else {
            ready.now_or_never().is_some_and(|r| r.is_ok())
        };
        if wait && !listed {
            return Err(ApiError::NotSynced { what: "services" });
        }
        Ok(self.store.state())
    }
}

impl Drop for ServiceCache {
    fn drop(&mut self) {
        self.task.abort();
    }
}
