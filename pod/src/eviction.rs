//! Kubelet's eviction decisions, pure (`pkg/kubelet/eviction/helpers.go`,
//! `eviction_manager.go`): which pods may never be evicted, the order pods are evicted in, the
//! message an evicted pod carries, and admission while the node is under pressure. The
//! EvictionActor feeds these with the summary's usage and the pod manager's pods.

use std::cmp::Ordering;

use dockerlet_messages::node::Pressure;
use dockerlet_messages::stats::{PodStats, Summary};
use k8s_openapi::api::core::v1::{Pod, Taint};

use crate::admission::Rejection;

/// The reason of an evicted pod's status, its event, and of a pod refused under pressure.
pub const EVICTED: &str = "Evicted";
/// The Node event of a threshold acted on: "Attempting to reclaim <resource>".
pub const THRESHOLD_MET: &str = "EvictionThresholdMet";
/// kubelet's `scheduling.SystemCriticalPriority`: a pod at or above it is critical.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// The taint a BestEffort pod must tolerate to be admitted under memory pressure.
pub const MEMORY_PRESSURE_TAINT: &str = "node.kubernetes.io/memory-pressure";

/// The resource a threshold starves (kubelet's `v1.ResourceName` of the signal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Starved {
    /// `memory.available`, `allocatableMemory.available`.
    Memory,
    /// `nodefs.available`, `imagefs.available`, `containerfs.available`.
    EphemeralStorage,
    /// The `inodesFree` signals.
    Inodes,
    /// `pid.available`.
    Pids,
}

impl Starved {
    /// kubelet's name, as in the messages and the `starved_resource` annotation.
    pub fn name(self) -> &'static str {
        match self {
            Starved::Memory => "memory",
            Starved::EphemeralStorage => "ephemeral-storage",
            Starved::Inodes => "inodes",
            Starved::Pids => "pids",
        }
    }

    /// Byte quantities print in binary SI (`58472Ki`), counts in decimal SI.
    fn binary(self) -> bool {
        matches!(self, Starved::Memory | Starved::EphemeralStorage)
    }
}

/// kubelet's `IsCriticalPod`: a static pod (its source is not the API), a mirror pod, or one at
/// or above the system-critical priority. Never evicted, always admitted.
pub fn is_critical(pod: &Pod) -> bool {
    let annotations = pod.metadata.annotations.as_ref();
    let is_static = crate::annotations::source(pod).is_some_and(|s| s != dockerlet_messages::source::PodSource::Api);
    let is_mirror = annotations.is_some_and(|a| a.contains_key(crate::annotations::CONFIG_MIRROR));
    is_static || is_mirror || crate::shutdown::pod_priority(pod) >= SYSTEM_CRITICAL_PRIORITY
}

/// One container's use of the starved resource against its request.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerUse {
    /// Its name in the pod spec.
    pub name: String,
    /// Memory working set, or rootfs plus logs bytes.
    pub usage: i64,
    /// Its request of the resource (0 without one).
    pub request: i64,
}

/// What the ranking knows of one pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The pod's UID.
    pub uid: String,
    /// `spec.priority` (or its priority class's).
    pub priority: i32,
    /// The pod's effective request of the resource.
    pub request: i64,
    /// Its use of it (working set, disk bytes, inodes or processes); none without stats.
    pub usage: Option<i64>,
    /// Its containers' use, for the message and the event's annotations.
    pub containers: Vec<ContainerUse>,
}

impl Candidate {
    fn exceeds(&self) -> bool {
        self.usage.is_some_and(|u| u > self.request)
    }
}

/// kubelet's ranking: a pod without stats first; then, for memory and disk, pods using more
/// than they requested, lower priority, more use above the request; for PIDs, lower priority,
/// more processes. Stable: pods equal on every key keep their order.
pub fn rank(candidates: &mut [Candidate], starved: Starved) {
    candidates.sort_by(|a, b| compare(a, b, starved));
}

fn compare(a: &Candidate, b: &Candidate, starved: Starved) -> Ordering {
    let no_stats = b.usage.is_none().cmp(&a.usage.is_none());
    if no_stats != Ordering::Equal || a.usage.is_none() {
        return no_stats;
    }
    let priority = a.priority.cmp(&b.priority);
    let usage = |c: &Candidate| c.usage.unwrap_or_default();
    match starved {
        Starved::Pids => priority.then_with(|| usage(b).cmp(&usage(a))),
        _ => b
            .exceeds()
            .cmp(&a.exceeds())
            .then(priority)
            .then_with(|| (usage(b) - b.request).cmp(&(usage(a) - a.request))),
    }
}

/// The ranking's view of `pods` (UID and pod) for `starved`, from the summary's usage (a pod
/// the summary lacks has none: kubelet evicts it first). Usage: memory working set; disk bytes
/// (the pod's ephemeral storage; each container's rootfs plus logs); inodes used; processes.
/// Requests are the pod's effective ones (kubelet's `PodRequests`), a container's its own.
pub fn candidates<'a>(
    pods: impl IntoIterator<Item = (&'a str, &'a Pod)>,
    summary: Option<&Summary>,
    starved: Starved,
) -> Vec<Candidate> {
    let resource = match starved {
        Starved::Memory => Some("memory"),
        Starved::EphemeralStorage => Some("ephemeral-storage"),
        Starved::Inodes | Starved::Pids => None,
    };
    pods.into_iter()
        .map(|(uid, pod)| {
            let stats = summary.and_then(|s| s.pods.iter().find(|p| p.pod_ref.uid == uid));
            let request = resource.map_or(0, |r| crate::cgroup::pod_request(pod, r).unwrap_or(0));
            Candidate {
                uid: uid.to_string(),
                priority: crate::shutdown::pod_priority(pod),
                request,
                usage: stats.and_then(|s| pod_usage(s, starved)),
                containers: stats.map_or_else(Vec::new, |s| container_uses(s, pod, resource, starved)),
            }
        })
        .collect()
}

fn pod_usage(stats: &PodStats, starved: Starved) -> Option<i64> {
    let value = match starved {
        Starved::Memory => stats.memory.as_ref()?.working_set_bytes?,
        Starved::EphemeralStorage => stats.ephemeral_storage.as_ref()?.used_bytes?,
        Starved::Inodes => stats.ephemeral_storage.as_ref()?.inodes_used?,
        Starved::Pids => stats.process_stats.as_ref()?.process_count?,
    };
    i64::try_from(value).ok()
}

fn container_uses(stats: &PodStats, pod: &Pod, resource: Option<&str>, starved: Starved) -> Vec<ContainerUse> {
    let Some(resource) = resource else {
        return Vec::new();
    };
    let spec = pod.spec.as_ref();
    let declared = spec
        .into_iter()
        .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()));
    let request_of = |name: &str| {
        declared
            .clone()
            .find(|c| c.name == name)
            .and_then(|c| c.resources.as_ref()?.requests.as_ref()?.get(resource).cloned())
            .and_then(|q| crate::quantity::parse_quantity(&q.0, false))
            .unwrap_or(0)
    };
    stats
        .containers
        .iter()
        .filter_map(|c| {
            let usage = match starved {
                Starved::Memory => c.memory.as_ref()?.working_set_bytes?,
                _ => c.rootfs.as_ref()?.used_bytes? + c.logs.as_ref()?.used_bytes?,
            };
            Some(ContainerUse {
                name: c.name.clone(),
                usage: i64::try_from(usage).ok()?,
                request: request_of(&c.name),
            })
        })
        .collect()
}

/// kubelet's eviction message: "The node was low on resource: <r>. ", the threshold and what
/// was available when one is known, and each container using more than it requested (memory
/// and ephemeral storage only). Every sentence ends with ". ", as kubelet's.
pub fn message(starved: Starved, threshold: Option<(i64, i64)>, containers: &[ContainerUse]) -> String {
    let binary = starved.binary();
    let mut text = format!("The node was low on resource: {}. ", starved.name());
    if let Some((quantity, available)) = threshold {
        text.push_str(&format!(
            "Threshold quantity: {}, available: {}. ",
            format_quantity(quantity, binary),
            format_quantity(available, binary)
        ));
    }
    if matches!(starved, Starved::Memory | Starved::EphemeralStorage) {
        for c in containers.iter().filter(|c| c.usage > c.request) {
            text.push_str(&format!(
                "Container {} was using {}, request is {}, has larger consumption of {}. ",
                c.name,
                format_quantity(c.usage, binary),
                format_quantity(c.request, binary),
                starved.name()
            ));
        }
    }
    text
}

/// The containers named in the `Evicted` event's annotations (`offending_containers`,
/// `offending_containers_usage`): those using more than they requested.
pub fn offending(containers: &[ContainerUse], starved: Starved) -> (String, String) {
    let over: Vec<&ContainerUse> = containers.iter().filter(|c| c.usage > c.request).collect();
    let names: Vec<&str> = over.iter().map(|c| c.name.as_str()).collect();
    let usages: Vec<String> = over
        .iter()
        .map(|c| format_quantity(c.usage, starved.binary()))
        .collect();
    (names.join(","), usages.join(","))
}

/// A quantity in Kubernetes' canonical form: the largest binary (`Ki`…`Ei`) or decimal
/// (`k`…`E`) unit that divides it exactly, or the plain number.
pub fn format_quantity(value: i64, binary: bool) -> String {
    let units: &[(&str, i64)] = if binary {
        &[
            ("Ei", 1 << 60),
            ("Pi", 1 << 50),
            ("Ti", 1 << 40),
            ("Gi", 1 << 30),
            ("Mi", 1 << 20),
            ("Ki", 1 << 10),
        ]
    } else {
        &[
            ("E", 1_000_000_000_000_000_000),
            ("P", 1_000_000_000_000_000),
            ("T", 1_000_000_000_000),
            ("G", 1_000_000_000),
            ("M", 1_000_000),
            ("k", 1_000),
        ]
    };
    if value != 0 {
        for (suffix, unit) in units {
            if value % unit == 0 {
                return format!("{}{suffix}", value / unit);
            }
        }
    }
    value.to_string()
}

/// A local-storage limit a pod went over (kubelet's `localStorageEviction`): evicted with a
/// grace period of 1 s and no `DisruptionTarget` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageViolation {
    /// The `kubelet_evictions` signal label: `emptydirfs.limit`, `ephemeralpodfs.limit` or
    /// `ephemeralcontainerfs.limit`.
    pub signal: &'static str,
    /// kubelet's message (each ends with ". ").
    pub message: String,
}

/// The first local-storage limit `pod` is over, by its `stats`, in kubelet's order: an
/// emptyDir over its `sizeLimit` (not a memory-backed one: tmpfs is sized and cannot exceed),
/// the pod over the sum of its containers' `ephemeral-storage` limits (when every container has
/// one), a container's logs and writable layer over its own limit.
pub fn storage_violation(pod: &Pod, stats: &PodStats) -> Option<StorageViolation> {
    let spec = pod.spec.as_ref()?;
    for volume in spec.volumes.iter().flatten() {
        let Some(empty_dir) = volume.empty_dir.as_ref() else {
            continue;
        };
        if empty_dir.medium.as_deref() == Some("Memory") {
            continue;
        }
        let Some(limit) = empty_dir.size_limit.as_ref() else {
            continue;
        };
        let Some(bytes) = crate::quantity::parse_quantity(&limit.0, false).filter(|b| *b > 0) else {
            continue;
        };
        let used = stats
            .volume_stats
            .iter()
            .find(|v| v.name == volume.name)
            .and_then(|v| v.fs.used_bytes);
        if used.is_some_and(|u| u as i64 > bytes) {
            return Some(StorageViolation {
                signal: "emptydirfs.limit",
                message: format!(
                    "Usage of EmptyDir volume {:?} exceeds the limit {:?}. ",
                    volume.name, limit.0
                ),
            });
        }
    }
    let limit_of = |c: &k8s_openapi::api::core::v1::Container| {
        let text = c
            .resources
            .as_ref()?
            .limits
            .as_ref()?
            .get("ephemeral-storage")?
            .0
            .clone();
        let bytes = crate::quantity::parse_quantity(&text, false)?;
        Some((text, bytes))
    };
    let limits: Vec<Option<(String, i64)>> = spec.containers.iter().map(limit_of).collect();
    if !limits.is_empty() && limits.iter().all(Option::is_some) {
        let total: i64 = limits.iter().flatten().map(|(_, b)| b).sum();
        let used = stats.ephemeral_storage.as_ref().and_then(|e| e.used_bytes);
        if used.is_some_and(|u| u as i64 > total) {
            return Some(StorageViolation {
                signal: "ephemeralpodfs.limit",
                message: format!(
                    "Pod ephemeral local storage usage exceeds the total limit of containers {}. ",
                    format_quantity(total, true)
                ),
            });
        }
    }
    for (container, limit) in spec.containers.iter().zip(&limits) {
        let Some((text, bytes)) = limit.as_ref().filter(|(_, b)| *b > 0) else {
            continue;
        };
        let Some(c) = stats.containers.iter().find(|c| c.name == container.name) else {
            continue;
        };
        let used = |fs: Option<&dockerlet_messages::stats::FsStats>| fs.and_then(|f| f.used_bytes).unwrap_or(0);
        if (used(c.logs.as_ref()) + used(c.rootfs.as_ref())) as i64 > *bytes {
            return Some(StorageViolation {
                signal: "ephemeralcontainerfs.limit",
                message: format!(
                    "Container {} exceeded its local ephemeral storage limit {:?}. ",
                    container.name, text
                ),
            });
        }
    }
    None
}

/// Whether any container or emptyDir of `pod` has a local-storage limit to watch.
pub fn has_storage_limits(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return false };
    let empty_dir_limit = spec
        .volumes
        .iter()
        .flatten()
        .any(|v| v.empty_dir.as_ref().is_some_and(|e| e.size_limit.is_some()));
    let container_limit = spec.containers.iter().any(|c| {
        c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .is_some_and(|l| l.contains_key("ephemeral-storage"))
    });
    empty_dir_limit || container_limit
}

/// kubelet's eviction admit handler: under no pressure, and for a critical pod, admit; under
/// memory pressure alone, refuse a BestEffort pod unless it tolerates the memory-pressure taint;
/// under any other pressure refuse every pod. The refusal's reason is `Evicted`, its message
/// "The node had condition: [<conditions>]. ".
pub fn admit(pod: &Pod, conditions: &[Pressure]) -> Result<(), Rejection> {
    if conditions.is_empty() || is_critical(pod) {
        return Ok(());
    }
    let only_memory = conditions.iter().all(|c| *c == Pressure::Memory);
    if only_memory && (crate::spec::qos_class(pod) != "BestEffort" || tolerates_memory_pressure(pod)) {
        return Ok(());
    }
    let mut names: Vec<&str> = conditions.iter().map(|c| c.condition_type()).collect();
    names.sort_unstable();
    names.dedup();
    Err(Rejection {
        reason: EVICTED.to_string(),
        message: format!("The node had condition: [{}]. ", names.join(" ")),
    })
}

fn tolerates_memory_pressure(pod: &Pod) -> bool {
    let taint = Taint {
        key: MEMORY_PRESSURE_TAINT.to_string(),
        effect: "NoSchedule".to_string(),
        ..Taint::default()
    };
    pod.spec
        .iter()
        .flat_map(|s| s.tolerations.iter().flatten())
        .any(|t| crate::node_fit::tolerates(t, &taint))
}

#[cfg(test)]
#[path = "eviction_tests.rs"]
mod tests;
