//! Every object of one cluster-wide kind from one watch (kubelet's informers over
//! `NamespaceAll`): the Services behind the service link environment variables, the
//! RuntimeClasses that name a pod's runtime handler, and the node's own Node (admission reads
//! its labels and taints). A container start asks the API server
//! nothing.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Resource;
use serde::de::DeserializeOwned;

use crate::types::ApiError;

/// How long a lookup that must see the objects waits for the first list.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(5);

/// The reflector over every object of kind `K` and the task feeding it.
pub struct ClusterCache<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    store: Store<K>,
    task: tokio::task::AbortHandle,
    /// What the objects are, for [`ApiError::NotSynced`] (`services`, `runtimeclasses`).
    what: &'static str,
}

impl<K> Debug for ClusterCache<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCache")
            .field("what", &self.what)
            .field("objects", &self.store.state().len())
            .finish()
    }
}

impl<K> ClusterCache<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    /// Start watching every object of the kind (list, then watch; re-list with back-off on
    /// errors).
    pub fn start(client: kube::Client, what: &'static str) -> Self {
        Self::start_selected(client, what, watcher::Config::default())
    }

    /// [`ClusterCache::start`] for the objects `config` selects (a field selector: the node's
    /// own Node).
    pub fn start_selected(client: kube::Client, what: &'static str, config: watcher::Config) -> Self {
        let (store, writer) = reflector::store::<K>();
        let api: Api<K> = Api::all(client);
        let stream = watcher(api, config).default_backoff().reflect(writer);
        let task = tokio::spawn(stream.for_each(|_| std::future::ready(())));
        ClusterCache {
            store,
            task: task.abort_handle(),
            what,
        }
    }

    /// With `wait`, a cache that has not listed yet is waited for (at most [`SYNC_TIMEOUT`])
    /// and then an error; without, whatever it has is the answer.
    async fn listed(&self, wait: bool) -> Result<(), ApiError> {
        let ready = self.store.wait_until_ready();
        let listed = if wait {
            tokio::time::timeout(SYNC_TIMEOUT, ready).await.is_ok_and(|r| r.is_ok())
        } else {
            ready.now_or_never().is_some_and(|r| r.is_ok())
        };
        if wait && !listed {
            return Err(ApiError::NotSynced { what: self.what });
        }
        Ok(())
    }

    /// Every object as last seen (see [`ClusterCache::listed`] for `wait`).
    pub async fn all(&self, wait: bool) -> Result<Vec<Arc<K>>, ApiError> {
        self.listed(wait).await?;
        Ok(self.store.state())
    }

    /// The first object as last seen, without waiting: `None` before the first list.
    pub fn first_now(&self) -> Option<Arc<K>> {
        self.store.state().into_iter().next()
    }

    /// The cluster-scoped object `name` as last seen; `None` when it does not exist.
    pub async fn get(&self, name: &str, wait: bool) -> Result<Option<Arc<K>>, ApiError> {
        self.listed(wait).await?;
        Ok(self.store.get(&ObjectRef::new(name)))
    }
}

impl<K> Drop for ClusterCache<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    fn drop(&mut self) {
        self.task.abort();
    }
}
