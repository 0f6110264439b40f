//! A watch-backed cache of the Secrets and ConfigMaps this node's pods refer to (kubelet's
//! watch-based manager, `pkg/kubelet/util/manager/watch_based_manager.go`): the first lookup of
//! an object starts a watch on exactly that object (`fieldSelector=metadata.name=<name>`, what
//! the node authorizer lets a node watch), and every later lookup reads the cache, so a container
//! start asks the API server nothing.
//!
//! An object whose watch has not listed within [`SYNC_TIMEOUT`] of its first lookup (the API
//! refuses the watch, or is slow) is read with a plain GET instead, then and on every lookup
//! until the watch has listed. A watch no lookup has used for [`IDLE_WATCH_TTL`] is stopped.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Resource;
use serde::de::DeserializeOwned;

/// How long a first lookup waits for the object's watch to list before reading it with a GET.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(5);

/// A watch nobody has looked up for this long is stopped (kubelet's watch-based manager stops
/// a watch once no pod refers to the object). Pods refer to their volumes' objects at every sync
/// (at least every `--sync-frequency`), so only objects no pod needs any more go; a later lookup
/// starts the watch again.
pub const IDLE_WATCH_TTL: Duration = Duration::from_secs(10 * 60);

/// One watched object: its store, the task of its watch, and when it was last looked up.
type Watched<K> = (Store<K>, tokio::task::AbortHandle, Instant);

/// One kind of object (Secret or ConfigMap), each object behind its own watch.
pub struct ObjectCache<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    client: kube::Client,
    /// The store of each watched object, by (namespace, name), and the watch task feeding it.
    watched: Mutex<HashMap<(String, String), Watched<K>>>,
}

impl<K> Debug for ObjectCache<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let watched = self.watched.lock().map(|w| w.len()).unwrap_or_default();
        f.debug_struct("ObjectCache").field("watched", &watched).finish()
    }
}

impl<K> ObjectCache<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    /// An empty cache over `client`.
    pub fn new(client: kube::Client) -> Self {
        ObjectCache {
            client,
            watched: Mutex::new(HashMap::new()),
        }
    }

    /// The object's store, starting its watch on first use (then `true`).
    fn store(&self, namespace: &str, name: &str) -> (Store<K>, bool) {
        let mut watched = self.watched.lock().expect("object cache lock");
        let now = Instant::now();
        watched.retain(|_, (_, task, used)| {
            let keep = now.duration_since(*used) < IDLE_WATCH_TTL;
            if !keep {
                task.abort();
            }
            keep
        });
        let key = (namespace.to_string(), name.to_string());
        if let Some((store, _, used)) = watched.get_mut(&key) {
            *used = now;
            return (store.clone(), false);
        }
        let (reader, writer) = reflector::store::<K>();
        let api: Api<K> = Api::namespaced(self.client.clone(), namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let stream = watcher(api, config).default_backoff().reflect(writer);
        let task = tokio::spawn(stream.for_each(|_| std::future::ready(())));
        watched.insert(key, (reader.clone(), task.abort_handle(), now));
        (reader, true)
    }

    /// The object from its watch: `Some(None)` when it does not exist, `None` when the watch has
    /// not listed (the caller then reads it directly). Only the lookup that starts a watch waits
    /// for its list, at most [`SYNC_TIMEOUT`]; a watch the API keeps refusing costs later lookups
    /// nothing but the GET.
    pub async fn get(&self, namespace: &str, name: &str) -> Option<Option<Arc<K>>> {
        let (store, started) = self.store(namespace, name);
        let ready = if started {
            tokio::time::timeout(SYNC_TIMEOUT, store.wait_until_ready()).await.ok()
        } else {
            store.wait_until_ready().now_or_never()
        };
        ready?.ok()?;
        Some(store.get(&ObjectRef::new(name).within(namespace)))
    }
}

impl<K> Drop for ObjectCache<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    fn drop(&mut self) {
        if let Ok(watched) = self.watched.lock() {
            for (_, task, _) in watched.values() {
                task.abort();
            }
        }
    }
}
