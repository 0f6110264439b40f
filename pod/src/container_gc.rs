//! Kubelet's container garbage collection policy, as a pure planner: which dead containers and
//! sandboxes of this node one GC pass removes, and why (`pkg/kubelet/kuberuntime/kuberuntime_gc.go`,
//! `pkg/kubelet/container/container_gc.go`).
//!
//! One pass, as kubelet's `GarbageCollect`:
//! 1. *evictable* containers: not running, created more than `min_age` ago, grouped in units of
//!    (pod UID, container name), each unit newest first (creation time);
//! 2. once every pod source has delivered, every evictable container of a pod no source wants
//!    and no worker handles (kubelet: the pod's "content should be removed");
//! 3. each unit capped at `max_per_pod_container` (−1: no cap);
//! 4. the node capped at `max_containers` (−1: no cap): every unit capped at
//!    max(1, max_containers / units);
//! 5. sandboxes: one is *active* while it runs or any remaining container refers to it; a pod
//!    that is gone loses every inactive sandbox, any other pod keeps its newest sandbox.
//!
//! One deviation: the newest dead instance of each container of a pod still on the node is
//! never removed (steps 3 and 4 keep at least one, where kubelet's would take it with a cap of
//! 0 or, in step 4, remove the oldest across units). kubelet keeps a pod's container states
//! and a finished pod's end in its status cache; dockerlet reads them from Docker, so that
//! instance is the pod's restart count, `lastState` and, for a finished pod, what keeps it from
//! running again. kubelet's own sync keeps one too (its pod container deletor keeps
//! max(MaxPerPodContainer, 1), `pkg/kubelet/kubelet.go`).
//!
//! A running container is never removed, nor one created and not yet started in the last
//! [`STARTING_GRACE`]. The planner sees only the containers handed to it —
//! the agent's pod cache, which holds this node's containers alone — so no container of another
//! node name sharing the engine is ever considered.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use dockerlet_messages::runtime::{ContainerRole, ObservedContainer, RuntimeState};
use dockerlet_messages::PodUid;
use k8s_openapi::jiff::Timestamp;

/// kubelet's `GCPolicy`: `--minimum-container-ttl-duration`,
/// `--maximum-dead-containers-per-container`, `--maximum-dead-containers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcPolicy {
    /// A dead container younger than this (since its creation) is kept.
    pub min_age: Duration,
    /// Dead containers kept per (pod, container name); negative: no cap.
    pub max_per_pod_container: i32,
    /// Dead containers kept on the node; negative: no cap.
    pub max_containers: i32,
}

impl Default for GcPolicy {
    /// kubelet's defaults: 0, 1, −1 (`cmd/kubelet/app/options/options.go`).
    fn default() -> Self {
        GcPolicy {
            min_age: Duration::ZERO,
            max_per_pod_container: 1,
            max_containers: -1,
        }
    }
}

impl GcPolicy {
    /// How many instances of one container a pod's own sync keeps (kubelet's pod container
    /// deletor keeps max(MaxPerPodContainer, 1) dead ones, `kubelet.go`; the running one besides).
    pub fn instances_kept_by_sync(&self) -> usize {
        match usize::try_from(self.max_per_pod_container) {
            Ok(n) => n.max(1) + 1,
            Err(_) => usize::MAX,
        }
    }
}

/// Why a container is removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GcReason {
    /// No source wants its pod and no worker handles it.
    PodGone,
    /// More dead instances of this container than `--maximum-dead-containers-per-container`.
    PerContainerLimit(i32),
    /// More dead containers on the node than `--maximum-dead-containers`.
    NodeLimit(i32),
    /// A sandbox no container refers to and that is not the pod's newest.
    InactiveSandbox,
}

impl std::fmt::Display for GcReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GcReason::PodGone => f.write_str("container GC: its pod is gone"),
            GcReason::PerContainerLimit(n) => {
                write!(f, "container GC: over {n} dead instance(s) per container")
            }
            GcReason::NodeLimit(n) => write!(f, "container GC: over {n} dead container(s) on the node"),
            GcReason::InactiveSandbox => f.write_str("container GC: an inactive sandbox"),
        }
    }
}

/// One removal a pass decides.
#[derive(Debug, Clone)]
pub struct Removal {
    /// The container or sandbox.
    pub container: ObservedContainer,
    /// Why.
    pub reason: GcReason,
}

/// What one pass removes from `containers` (this node's, running or not) at `now`. `keep_pod`
/// answers whether a pod is still wanted or handled; `None` while not every source has
/// delivered (then no pod counts as gone, as kubelet's `allSourcesReady`).
pub fn plan(
    containers: &[ObservedContainer],
    policy: &GcPolicy,
    now: Timestamp,
    keep_pod: Option<&dyn Fn(&PodUid) -> bool>,
) -> Vec<Removal> {
    let gone = |uid: &PodUid| keep_pod.is_some_and(|keep| !keep(uid));
    let mut removals = Vec::new();
    let mut units = evictable_units(containers, policy.min_age, now);
    units.retain(|(uid, _), unit| {
        if !gone(uid) {
            return true;
        }
        removals.extend(unit.drain(..).map(|c| removal(c, GcReason::PodGone)));
        false
    });
    if let Ok(max) = usize::try_from(policy.max_per_pod_container) {
        let reason = GcReason::PerContainerLimit(policy.max_per_pod_container);
        cap_units(&mut units, max.max(1), reason, &mut removals);
    }
    if let Ok(max) = usize::try_from(policy.max_containers) {
        cap_node(
            &mut units,
            max,
            GcReason::NodeLimit(policy.max_containers),
            &mut removals,
        );
    }
    let removed: HashSet<&str> = removals.iter().map(|r| r.container.id.0.as_str()).collect();
    let remaining: Vec<&ObservedContainer> = containers
        .iter()
        .filter(|c| !removed.contains(c.id.0.as_str()))
        .collect();
    let sandboxes = inactive_sandboxes(&remaining, &gone, now);
    removals.extend(sandboxes.into_iter().map(|c| removal(c, GcReason::InactiveSandbox)));
    removals
}

/// A container created but not started is left alone this long: its worker may be starting it
/// (kubelet's GC would take it with a minimum age of 0; here a start never races a removal).
pub const STARTING_GRACE: Duration = Duration::from_secs(60);

type Units<'a> = BTreeMap<(PodUid, String), Vec<&'a ObservedContainer>>;

fn removal(c: &ObservedContainer, reason: GcReason) -> Removal {
    Removal {
        container: c.clone(),
        reason,
    }
}

fn created(c: &ObservedContainer) -> Timestamp {
    c.created_at.as_ref().map_or(Timestamp::UNIX_EPOCH, |t| t.0)
}

/// kubelet's `evictableContainers`: dead (not running) app, init and ephemeral containers
/// created more than `min_age` ago, by (pod, name), newest first.
fn evictable_units(containers: &[ObservedContainer], min_age: Duration, now: Timestamp) -> Units<'_> {
    let newest_allowed = now.checked_sub(min_age).unwrap_or(Timestamp::UNIX_EPOCH);
    let mut units: Units = BTreeMap::new();
    for c in containers {
        if c.role == ContainerRole::Sandbox || c.state == RuntimeState::Running || created(c) > newest_allowed {
            continue;
        }
        if starting(c, now) {
            continue;
        }
        units.entry((c.pod_uid.clone(), c.name.clone())).or_default().push(c);
    }
    for unit in units.values_mut() {
        unit.sort_by_key(|c| std::cmp::Reverse(created(c)));
    }
    units
}

/// Created, never started, and younger than [`STARTING_GRACE`].
fn starting(c: &ObservedContainer, now: Timestamp) -> bool {
    let young = now.checked_sub(STARTING_GRACE).is_ok_and(|limit| created(c) > limit);
    c.state == RuntimeState::Created && c.started_at.is_none() && young
}

/// Keep the newest `max` of every unit.
fn cap_units(units: &mut Units, max: usize, reason: GcReason, removals: &mut Vec<Removal>) {
    for unit in units.values_mut() {
        if unit.len() > max {
            removals.extend(unit.drain(max..).map(|c| removal(c, reason.clone())));
        }
    }
}

/// kubelet's global cap: every unit at max(1, max / units); the last instance of a unit stays
/// (see the module's deviation), so the cap may stay exceeded.
fn cap_node(units: &mut Units, max: usize, reason: GcReason, removals: &mut Vec<Removal>) {
    let total = units.values().map(Vec::len).sum::<usize>();
    if total <= max || units.is_empty() {
        return;
    }
    cap_units(units, (max / units.len()).max(1), reason, removals);
}

/// kubelet's `evictSandboxes`: a sandbox is active while it runs or a container refers to it;
/// a gone pod loses every inactive one, another pod all but its newest.
fn inactive_sandboxes<'a>(
    remaining: &[&'a ObservedContainer],
    gone: &dyn Fn(&PodUid) -> bool,
    now: Timestamp,
) -> Vec<&'a ObservedContainer> {
    let referred: HashSet<&str> = remaining
        .iter()
        .filter_map(|c| c.sandbox_id.as_ref())
        .map(|id| id.0.as_str())
        .collect();
    let mut by_pod: BTreeMap<&PodUid, Vec<&ObservedContainer>> = BTreeMap::new();
    for s in remaining.iter().filter(|c| c.role == ContainerRole::Sandbox) {
        by_pod.entry(&s.pod_uid).or_default().push(s);
    }
    let mut inactive = Vec::new();
    for (uid, mut sandboxes) in by_pod {
        sandboxes.sort_by_key(|c| std::cmp::Reverse(created(c)));
        let skip = if gone(uid) { 0 } else { 1 };
        inactive.extend(
            sandboxes
                .into_iter()
                .skip(skip)
                .filter(|s| s.state != RuntimeState::Running && !referred.contains(s.id.0.as_str()))
                .filter(|s| !starting(s, now)),
        );
    }
    inactive
}

#[cfg(test)]
#[path = "container_gc_tests.rs"]
mod tests;
