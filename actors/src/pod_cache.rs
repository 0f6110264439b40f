//! The pod cache: the last observed state of every container of this node (kubelet's
//! `pkg/kubelet/container/cache.go`), shared by the PlegActor and the PodWorkers.
//!
//! Who writes what:
//! - the **PLEG** puts what its relists find changed (one inspect per changed container), what a
//!   Docker `die` event names (one inspect), and removes what a `destroy` event names or a relist
//!   no longer lists; after every complete relist it marks the whole cache fresh as of the
//!   relist's start ([`PodCache::relisted`]);
//! - a **PodWorker** puts what it observed after its own actions (the inspect after a start or a
//!   stop) and removes what it removed, so its next sync sees its own work without asking Docker.
//!
//! Every entry carries the instant its inspect was *issued*; a write older than the entry it
//! would replace (or than the removal of that container) is dropped, so concurrent inspects land
//! in any order without stale state winning.
//!
//! Readers: [`PodCache::get_newer_than`] (kubelet's `GetNewerThan`) waits until a relist that
//! began after the given instant has completed — a worker passes the time of its last action
//! whose result it could not observe itself (a failed inspect, a cancelled sync), and none
//! otherwise. Before the first relist nothing is served: only a complete relist knows what an
//! earlier agent left behind.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dockerlet_messages::runtime::{ContainerListing, ObservedContainer, RuntimeState};
use dockerlet_messages::{ContainerId, PodUid};
use tokio::sync::Notify;

/// A container's state change, as a write to the cache made it (the PLEG turns these into
/// lifecycle events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The pod.
    pub pod_uid: PodUid,
    /// The container.
    pub id: ContainerId,
    /// Its name in the pod (`POD` for the sandbox).
    pub name: String,
    /// State before; none if the cache did not know the container.
    pub before: Option<RuntimeState>,
    /// State after; none if it is gone.
    pub after: Option<RuntimeState>,
}

impl Change {
    /// A container whose state stayed what it was, but whose details changed.
    pub fn unchanged(c: &ObservedContainer) -> Self {
        Change {
            pod_uid: c.pod_uid.clone(),
            id: c.id.clone(),
            name: c.name.clone(),
            before: Some(c.state),
            after: Some(c.state),
        }
    }
}

/// What a relist's listing differs in from the cache.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RelistPlan {
    /// Listed containers the cache does not know, or knows in another state: inspect them.
    pub inspect: Vec<ContainerId>,
    /// Cached containers the listing no longer has (and no write newer than the listing knows).
    pub gone: Vec<ContainerId>,
}

#[derive(Debug)]
struct Entry {
    observed: ObservedContainer,
    /// When the inspect that gave `observed` was issued.
    stamp: Instant,
    /// A worker is acting on the container and will put what it observes: until then a relist
    /// leaves it alone (no inspect of its own). Lapses by itself if the worker never does.
    claimed_until: Option<Instant>,
}

/// One pod's entries, sorted by container ID. A Vec, not a BTreeMap: a pod has a few
/// containers, and a B-tree leaf has room for eleven entries of about 480 bytes (5.4 KB a pod,
/// 0.6 MB at 110 pods in a heap profile).
#[derive(Debug, Default)]
struct PodEntries(Vec<Entry>);

impl PodEntries {
    fn find(&self, id: &ContainerId) -> Result<usize, usize> {
        self.0.binary_search_by(|e| e.observed.id.cmp(id))
    }
    fn get(&self, id: &ContainerId) -> Option<&Entry> {
        self.find(id).ok().map(|i| &self.0[i])
    }
    fn get_mut(&mut self, id: &ContainerId) -> Option<&mut Entry> {
        self.find(id).ok().map(|i| &mut self.0[i])
    }
    /// Put `entry`, replacing the one of the same container.
    fn insert(&mut self, entry: Entry) {
        match self.find(&entry.observed.id) {
            Ok(i) => self.0[i] = entry,
            Err(i) => self.0.insert(i, entry),
        }
    }
    fn remove(&mut self, id: &ContainerId) -> Option<Entry> {
        self.find(id).ok().map(|i| self.0.remove(i))
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    fn iter(&self) -> impl Iterator<Item = (&ContainerId, &Entry)> {
        self.0.iter().map(|e| (&e.observed.id, e))
    }
    fn values(&self) -> impl Iterator<Item = &Entry> {
        self.0.iter()
    }
}

/// How long a worker's claim on a container it acts on holds at most.
const CLAIM: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
struct Inner {
    /// Every known container, by pod.
    pods: HashMap<PodUid, PodEntries>,
    /// The pod of each known container.
    pod_of: HashMap<ContainerId, PodUid>,
    /// Removed containers and when, so an inspect issued before the removal cannot bring one
    /// back. Pruned by the next complete relist.
    removed: HashMap<ContainerId, Instant>,
    /// Start of the last complete relist: everything is at least this fresh.
    relisted: Option<Instant>,
    /// Writes taken, for the debug endpoint.
    writes: u64,
    /// Containers the kernel or Docker reported OOM-killed before the cache knew them exited:
    /// the write that makes them exited marks them (whoever makes it: a `die`, a relist, a
    /// worker's inspect). Bounded.
    pending_oom: HashSet<ContainerId>,
}

/// How many OOM kills of containers not yet seen exited are remembered.
const PENDING_OOM_MAX: usize = 1024;

/// The cache; share it as `Arc<PodCache>`.
#[derive(Debug, Default)]
pub struct PodCache {
    inner: Mutex<Inner>,
    /// Woken by every completed relist.
    relist_done: Notify,
    /// A reader waits for a relist: the PLEG relists now instead of at its next period.
    relist_wanted: Notify,
}

/// [`PodCache::get_newer_than`] waited this long without a complete relist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the pod cache has not been refreshed by a relist for {waited:?} (is Docker answering?)")]
pub struct NotRefreshed {
    /// How long it waited.
    pub waited: Duration,
}

impl PodCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Take an observation whose inspect was issued at `stamp`. Returns the state change it
    /// makes, if any; an observation older than what the cache holds is dropped.
    pub fn put(&self, observed: ObservedContainer, stamp: Instant) -> Option<Change> {
        self.write(observed, stamp, None)
    }

    /// Put what a worker knows of a container it just created (from its labels) and is now
    /// starting; the worker puts the inspect after the start. Meanwhile relists do not inspect it.
    pub fn claim(&self, observed: ObservedContainer, stamp: Instant) {
        self.write(observed, stamp, Some(stamp + CLAIM));
    }

    /// The worker cannot observe the container it claimed: the next relist inspects it.
    pub fn unclaim(&self, id: &ContainerId) {
        let mut inner = self.lock();
        let Some(uid) = inner.pod_of.get(id).cloned() else {
            return;
        };
        if let Some(entry) = inner.pods.get_mut(&uid).and_then(|pod| pod.get_mut(id)) {
            entry.claimed_until = None;
        }
    }

    fn write(&self, mut observed: ObservedContainer, stamp: Instant, claimed_until: Option<Instant>) -> Option<Change> {
        let mut inner = self.lock();
        if inner.removed.get(&observed.id).is_some_and(|at| *at >= stamp) {
            return None;
        }
        inner.writes += 1;
        if observed.state == RuntimeState::Exited && inner.pending_oom.remove(&observed.id) {
            observed.oom_killed = true;
        }
        inner.pod_of.insert(observed.id.clone(), observed.pod_uid.clone());
        let pod = inner.pods.entry(observed.pod_uid.clone()).or_default();
        let before = match pod.get(&observed.id) {
            Some(entry) if entry.stamp > stamp => return None,
            Some(entry) => {
                // An OOM kill once known stays known: Docker's inspect can say `OOMKilled: false`
                // of a container the kernel log or its own `oom` event reported.
                if entry.observed.oom_killed && observed.state == RuntimeState::Exited {
                    observed.oom_killed = true;
                }
                Some(entry.observed.state)
            }
            None => None,
        };
        let change = Change {
            pod_uid: observed.pod_uid.clone(),
            id: observed.id.clone(),
            name: observed.name.clone(),
            before,
            after: Some(observed.state),
        };
        pod.insert(Entry {
            observed,
            stamp,
            claimed_until,
        });
        (change.before != change.after).then_some(change)
    }

    /// The kernel or Docker reported `id` OOM-killed before the cache knew it exited: the write
    /// that makes it exited will mark it.
    pub fn oom_pending(&self, id: ContainerId) {
        let mut inner = self.lock();
        if inner.pending_oom.len() >= PENDING_OOM_MAX {
            inner.pending_oom.clear();
        }
        inner.pending_oom.insert(id);
    }

    /// The container is gone (removed by the agent, or Docker said so) as of `stamp`. Returns
    /// the change if the cache knew it.
    pub fn remove(&self, id: &ContainerId, stamp: Instant) -> Option<Change> {
        let mut inner = self.lock();
        inner.writes += 1;
        let at = inner.removed.entry(id.clone()).or_insert(stamp);
        *at = (*at).max(stamp);
        let uid = inner.pod_of.remove(id)?;
        let pod = inner.pods.get_mut(&uid)?;
        let entry = pod.remove(id)?;
        if pod.is_empty() {
            inner.pods.remove(&uid);
        }
        Some(Change {
            pod_uid: uid,
            id: id.clone(),
            name: entry.observed.name,
            before: Some(entry.observed.state),
            after: None,
        })
    }

    /// What a listing taken at `listed` differs in from the cache.
    pub fn plan(&self, listing: &[ContainerListing], listed: Instant) -> RelistPlan {
        let inner = self.lock();
        let known = |id: &ContainerId| {
            let uid = inner.pod_of.get(id)?;
            inner.pods.get(uid)?.get(id)
        };
        let inspect = listing
            .iter()
            .filter(|l| match known(&l.id) {
                None => inner.removed.get(&l.id).is_none_or(|at| *at < listed),
                // A death known from its event alone is inspected too (its details).
                Some(entry) => {
                    (entry.observed.state != l.state || entry.observed.details_pending)
                        && entry.stamp < listed
                        && entry.claimed_until.is_none_or(|until| until <= listed)
                }
            })
            .map(|l| l.id.clone())
            .collect();
        let listed_ids: BTreeSet<&ContainerId> = listing.iter().map(|l| &l.id).collect();
        let gone = inner
            .pods
            .values()
            .flat_map(|pod| pod.iter())
            .filter(|(id, entry)| !listed_ids.contains(id) && entry.stamp < listed)
            .map(|(id, _)| id.clone())
            .collect();
        RelistPlan { inspect, gone }
    }

    /// A relist that began at `started` completed: every entry is at least that fresh.
    pub fn relisted(&self, started: Instant) {
        {
            let mut inner = self.lock();
            inner.relisted = Some(inner.relisted.map_or(started, |r| r.max(started)));
            inner.removed.retain(|_, at| *at >= started);
        }
        self.relist_done.notify_waiters();
    }

    /// Resolves when a reader waits for a relist ([`Self::get_newer_than`]); for the PLEG.
    pub async fn relist_wanted(&self) {
        self.relist_wanted.notified().await;
    }

    /// The pod's containers as the cache knows them now (none before the first relist).
    pub fn pod(&self, uid: &PodUid) -> Option<Vec<ObservedContainer>> {
        let inner = self.lock();
        inner.relisted?;
        Some(snapshot(&inner, uid))
    }

    /// The pod's containers, once a relist that began at or after `min` has completed (any
    /// complete relist when `min` is none); gives up after `limit`.
    pub async fn get_newer_than(
        &self,
        uid: &PodUid,
        min: Option<Instant>,
        limit: Duration,
    ) -> Result<Vec<ObservedContainer>, NotRefreshed> {
        let began = tokio::time::Instant::now();
        loop {
            let notified = self.relist_done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let inner = self.lock();
                if inner.relisted.is_some_and(|r| min.is_none_or(|min| r >= min)) {
                    return Ok(snapshot(&inner, uid));
                }
            }
            self.relist_wanted.notify_one();
            let left = limit.saturating_sub(began.elapsed());
            if left.is_zero() || tokio::time::timeout(left, notified).await.is_err() {
                return Err(NotRefreshed { waited: limit });
            }
        }
    }

    /// One container as the cache knows it.
    pub fn container(&self, id: &ContainerId) -> Option<ObservedContainer> {
        let inner = self.lock();
        let uid = inner.pod_of.get(id)?;
        Some(inner.pods.get(uid)?.get(id)?.observed.clone())
    }

    /// The state of one container, if known.
    pub fn state_of(&self, id: &ContainerId) -> Option<RuntimeState> {
        let inner = self.lock();
        let uid = inner.pod_of.get(id)?;
        Some(inner.pods.get(uid)?.get(id)?.observed.state)
    }

    /// Every container of the node, running or not (sandboxes included); none before the first
    /// relist.
    pub fn all(&self) -> Option<Vec<ObservedContainer>> {
        let inner = self.lock();
        inner.relisted?;
        Some(
            inner
                .pods
                .values()
                .flat_map(|pod| pod.values())
                .map(|entry| entry.observed.clone())
                .collect(),
        )
    }

    /// Every running container of the node (sandboxes included); none before the first relist.
    pub fn running(&self) -> Option<Vec<ObservedContainer>> {
        let inner = self.lock();
        inner.relisted?;
        Some(
            inner
                .pods
                .values()
                .flat_map(|pod| pod.values())
                .map(|entry| &entry.observed)
                .filter(|c| c.state == RuntimeState::Running)
                .cloned()
                .collect(),
        )
    }

    /// The runtime's running pods (`/runningpods/`); none before the first relist.
    pub fn running_pods(&self) -> Option<Vec<k8s_openapi::api::core::v1::Pod>> {
        Some(dockerlet_pod::running::running_pods(&self.running()?))
    }

    /// The pod's newest sandbox, a running one first (`/portForward/`); none before the first
    /// relist or without one.
    pub fn newest_sandbox(&self, uid: &PodUid) -> Option<ContainerId> {
        self.pod(uid)?
            .into_iter()
            .filter(|c| c.role == dockerlet_messages::runtime::ContainerRole::Sandbox)
            .max_by_key(|c| (c.state == RuntimeState::Running, c.attempt))
            .map(|c| c.id)
    }

    /// Look at every known container in place (no copies; the cache is locked meanwhile, so
    /// `f` must not call back into it).
    pub fn for_each_container(&self, mut f: impl FnMut(&ObservedContainer)) {
        let inner = self.lock();
        inner
            .pods
            .values()
            .flat_map(PodEntries::values)
            .for_each(|e| f(&e.observed));
    }

    /// Every pod with a container on this node.
    pub fn pods(&self) -> BTreeSet<PodUid> {
        self.lock().pods.keys().cloned().collect()
    }

    /// Counts for the debug endpoint: containers, pods, writes, and the age of the last relist.
    pub fn summary(&self) -> serde_json::Value {
        let inner = self.lock();
        serde_json::json!({
            "containers": inner.pod_of.len(),
            "pods": inner.pods.len(),
            "writes": inner.writes,
            "fresh_as_of_ms_ago": inner.relisted.map(|r| r.elapsed().as_millis() as u64),
        })
    }
}

/// What one [`refresh`] saw and did.
#[derive(Debug)]
pub struct Refreshed {
    /// Docker's answer; none if the container is gone (or no pod container).
    pub observed: Option<ObservedContainer>,
    /// The state change it made to the cache, if any.
    pub change: Option<Change>,
}

/// Inspect `id` into `cache` — put what Docker says, stamped with the instant the inspect was
/// issued, or drop the container if Docker no longer has it. The PLEG and the workers both
/// observe this way.
pub async fn refresh(
    runtime: &dyn dockerlet_runtime::ContainerRuntime,
    cache: &PodCache,
    id: &ContainerId,
) -> Result<Refreshed, dockerlet_runtime::RuntimeError> {
    let stamp = Instant::now();
    let observed = runtime.inspect_container(id).await?;
    let change = match &observed {
        Some(o) => cache.put(o.clone(), stamp),
        None => cache.remove(id, stamp),
    };
    Ok(Refreshed { observed, change })
}

fn snapshot(inner: &Inner, uid: &PodUid) -> Vec<ObservedContainer> {
    inner
        .pods
        .get(uid)
        .map(|pod| pod.values().map(|e| e.observed.clone()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(id: &str, state: RuntimeState) -> ObservedContainer {
        crate::test_support::observed("p", "app", id, state)
    }

    fn listed(id: &str, state: RuntimeState) -> ContainerListing {
        ContainerListing {
            id: ContainerId(id.into()),
            pod_uid: PodUid("p".into()),
            name: "app".into(),
            state,
        }
    }

    fn uid() -> PodUid {
        PodUid("p".into())
    }

    /// Nothing is served before the first relist; afterwards the pod's containers are.
    #[tokio::test]
    async fn serves_nothing_before_the_first_relist() {
        tokio::time::pause();
        let cache = PodCache::default();
        cache.put(container("a", RuntimeState::Running), Instant::now());
        assert_eq!(cache.pod(&uid()), None);
        let waited = cache.get_newer_than(&uid(), None, Duration::from_secs(1)).await;
        assert_eq!(
            waited,
            Err(NotRefreshed {
                waited: Duration::from_secs(1)
            })
        );
        cache.relisted(Instant::now());
        let pod = cache
            .get_newer_than(&uid(), None, Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(pod.len(), 1);
    }

    /// A reader that needs state newer than an action waits for the relist after it.
    #[tokio::test]
    async fn get_newer_than_waits_for_a_later_relist() {
        let cache = std::sync::Arc::new(PodCache::default());
        let before = Instant::now();
        cache.relisted(before);
        let action = before + Duration::from_millis(2);
        let reader = {
            let cache = cache.clone();
            tokio::spawn(async move { cache.get_newer_than(&uid(), Some(action), Duration::from_secs(5)).await })
        };
        tokio::task::yield_now().await;
        assert!(!reader.is_finished(), "served state older than the action");
        cache.put(container("a", RuntimeState::Running), action);
        cache.relisted(action - Duration::from_millis(1));
        tokio::task::yield_now().await;
        assert!(
            !reader.is_finished(),
            "a relist that began before the action does not do"
        );
        cache.relisted(action);
        let pod = reader.await.unwrap().unwrap();
        assert_eq!(pod[0].id.0, "a");
    }

    /// An inspect issued before the entry's (or before the container's removal) never wins.
    /// An OOM kill reported before the container is known exited marks it when it is, by
    /// whichever write (a relist, a worker's inspect); and once known it stays, whatever a later
    /// inspect says.
    #[test]
    fn an_oom_kill_reported_early_marks_the_exit_and_stays() {
        let cache = PodCache::default();
        let t0 = Instant::now();
        cache.put(container("c1", RuntimeState::Running), t0);
        cache.oom_pending(ContainerId("c1".into()));
        assert!(
            !cache.container(&ContainerId("c1".into())).unwrap().oom_killed,
            "still running"
        );
        cache.put(container("c1", RuntimeState::Exited), t0 + Duration::from_millis(1));
        assert!(
            cache.container(&ContainerId("c1".into())).unwrap().oom_killed,
            "the exit is marked"
        );
        cache.put(container("c1", RuntimeState::Exited), t0 + Duration::from_millis(2));
        assert!(
            cache.container(&ContainerId("c1".into())).unwrap().oom_killed,
            "an inspect saying no OOM does not clear it"
        );
        cache.put(container("c2", RuntimeState::Exited), t0);
        assert!(
            !cache.container(&ContainerId("c2".into())).unwrap().oom_killed,
            "no report, no mark"
        );
    }

    #[test]
    fn older_observations_are_dropped() {
        let cache = PodCache::default();
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(1);
        let t2 = t0 + Duration::from_millis(2);
        assert!(cache.put(container("a", RuntimeState::Exited), t1).is_some());
        assert_eq!(cache.put(container("a", RuntimeState::Running), t0), None);
        assert_eq!(cache.state_of(&ContainerId("a".into())), Some(RuntimeState::Exited));
        let gone = cache.remove(&ContainerId("a".into()), t2).unwrap();
        assert_eq!((gone.before, gone.after), (Some(RuntimeState::Exited), None));
        assert_eq!(cache.put(container("a", RuntimeState::Exited), t1), None);
        assert_eq!(cache.state_of(&ContainerId("a".into())), None);
        assert!(cache.pods().is_empty());
    }

    /// A put reports a change only when the state changed.
    #[test]
    fn put_reports_state_changes() {
        let cache = PodCache::default();
        let t = Instant::now();
        let c = cache.put(container("a", RuntimeState::Running), t).unwrap();
        assert_eq!((c.before, c.after), (None, Some(RuntimeState::Running)));
        assert_eq!(cache.put(container("a", RuntimeState::Running), t), None);
        let c = cache.put(container("a", RuntimeState::Exited), t).unwrap();
        assert_eq!(
            (c.before, c.after),
            (Some(RuntimeState::Running), Some(RuntimeState::Exited))
        );
    }

    /// A relist inspects what is new or changed, and drops what is gone — but not what a worker
    /// wrote after the listing was taken.
    #[test]
    fn plan_compares_the_listing_with_the_cache() {
        let cache = PodCache::default();
        let t0 = Instant::now();
        cache.put(container("same", RuntimeState::Running), t0);
        cache.put(container("died", RuntimeState::Running), t0);
        cache.put(container("gone", RuntimeState::Running), t0);
        let listed_at = t0 + Duration::from_millis(5);
        // Written by a worker after the listing: neither gone nor to inspect.
        cache.put(
            container("fresh", RuntimeState::Running),
            listed_at + Duration::from_millis(1),
        );
        cache.put(
            container("newer", RuntimeState::Exited),
            listed_at + Duration::from_millis(1),
        );
        // Claimed by a worker that is starting them: left to it, unless it gives up.
        cache.claim(container("starting", RuntimeState::Created), t0);
        cache.claim(container("given-up", RuntimeState::Created), t0);
        cache.unclaim(&ContainerId("given-up".into()));
        let listing = [
            listed("same", RuntimeState::Running),
            listed("died", RuntimeState::Exited),
            listed("new", RuntimeState::Created),
            listed("newer", RuntimeState::Running),
            listed("starting", RuntimeState::Running),
            listed("given-up", RuntimeState::Running),
        ];
        let plan = cache.plan(&listing, listed_at);
        assert_eq!(
            plan.inspect,
            vec![
                ContainerId("died".into()),
                ContainerId("new".into()),
                ContainerId("given-up".into())
            ]
        );
        assert_eq!(plan.gone, vec![ContainerId("gone".into())]);
    }
}
