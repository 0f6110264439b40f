//! The pod cgroup tree as kubelet lays it out (`pkg/kubelet/cm`): `kubepods`, then `burstable`
//! and `besteffort`, then `pod<uid>` — as directories with the cgroupfs driver, as slices with
//! the systemd driver ([`naming`]); and the pod-level limits kubelet's `ResourceConfigForPod`
//! (`helpers_linux.go`) puts on a pod cgroup. Pure: the node side is
//! `dockerlet_host::cgroup::tree`.

pub mod naming;

pub use naming::{CgroupDriver, CgroupNameError, CgroupNaming};

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

use crate::field::FieldError;
use crate::quantity::parse_quantity;
use crate::spec::qos_class;

/// The cgroup of every pod, under `--cgroup-root` (kubelet's `defaultNodeAllocatableCgroupName`).
pub const KUBEPODS: &str = "kubepods";
/// CFS period in microseconds (kubelet's `cpuCFSQuotaPeriod` default, 100 ms).
pub const CPU_PERIOD_US: u64 = 100_000;
/// Smallest CFS quota kubelet sets (`MinQuotaPeriod`, 1 ms).
pub const MIN_QUOTA_US: i64 = 1_000;
/// cgroup v1 cpu.shares bounds (`MinShares`, `MaxShares`).
pub const MIN_SHARES: u64 = 2;
/// See [`MIN_SHARES`].
pub const MAX_SHARES: u64 = 262_144;

/// A pod's QoS class, which picks its place in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QosClass {
    /// Directly under `kubepods`.
    Guaranteed,
    /// Under `kubepods/burstable`.
    Burstable,
    /// Under `kubepods/besteffort`.
    BestEffort,
}

impl QosClass {
    /// The pod's class ([`qos_class`]).
    pub fn of(pod: &Pod) -> Self {
        match qos_class(pod) {
            "Guaranteed" => Self::Guaranteed,
            "Burstable" => Self::Burstable,
            _ => Self::BestEffort,
        }
    }
}

/// The pod-level settings kubelet writes on a pod cgroup (its `ResourceConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PodResourceConfig {
    /// cpu.shares (v1); v2 writes [`shares_to_weight`] of it.
    pub cpu_shares: u64,
    /// CFS quota in microseconds per [`PodResourceConfig::cpu_period`]; none: unlimited.
    pub cpu_quota: Option<i64>,
    /// CFS period in microseconds, with a quota.
    pub cpu_period: Option<u64>,
    /// Memory limit in bytes; none: unlimited.
    pub memory_limit: Option<i64>,
    /// pids limit (`--pod-max-pids` when positive).
    pub pids_limit: Option<i64>,
}

/// A pod's summed requests and limits (kubelet's `PodRequests` / `PodLimits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PodResources {
    /// CPU requests in millicores.
    pub cpu_request_milli: i64,
    /// CPU limits in millicores (0: none summed).
    pub cpu_limit_milli: i64,
    /// Memory limits in bytes (0: none summed).
    pub memory_limit: i64,
    /// Every container (init containers included) has a CPU limit.
    pub cpu_limits_declared: bool,
    /// Every container (init containers included) has a memory limit.
    pub memory_limits_declared: bool,
}

/// One container's value of `key` in its requests (`requests`) or limits; requests default to
/// limits as the API server defaults them. Bad quantities name the field.
fn value(c: &Container, field: &str, requests: bool, key: &str) -> Result<i64, FieldError> {
    let r = c.resources.as_ref();
    let limits = r.and_then(|r| r.limits.as_ref());
    let map = if requests {
        r.and_then(|r| r.requests.as_ref())
            .filter(|m| m.contains_key(key))
            .or(limits)
    } else {
        limits
    };
    let which = if requests { "requests" } else { "limits" };
    quantity(map, key, &format!("{field}.resources.{which}.{key}"))
}

fn quantity(map: Option<&BTreeMap<String, Quantity>>, key: &str, field: &str) -> Result<i64, FieldError> {
    match map.and_then(|m| m.get(key)) {
        None => Ok(0),
        Some(q) => parse_quantity(&q.0, key == "cpu")
            .ok_or_else(|| FieldError::invalid(field, format!("{:?}: invalid quantity", q.0))),
    }
}

/// Sum over the pod as kubelet's `PodRequests`/`PodLimits` do: app containers and restartable
/// init containers (sidecars) add up; each ordinary init container needs its own value plus the
/// sidecars started before it; the pod takes the larger of the two; the overhead is added
/// (to limits only where some container has one, as kubelet's `PodLimits`).
fn pod_sum(pod: &Pod, requests: bool, key: &str) -> Result<i64, FieldError> {
    let Some(spec) = pod.spec.as_ref() else { return Ok(0) };
    let mut sum = 0i64;
    for (i, c) in spec.containers.iter().enumerate() {
        sum = sum.saturating_add(value(c, &format!("spec.containers[{i}]"), requests, key)?);
    }
    let mut sidecars = 0i64;
    let mut init = 0i64;
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let v = value(c, &format!("spec.initContainers[{i}]"), requests, key)?;
        let needs = if c.restart_policy.as_deref() == Some("Always") {
            sum = sum.saturating_add(v);
            sidecars = sidecars.saturating_add(v);
            sidecars
        } else {
            v.saturating_add(sidecars)
        };
        init = init.max(needs);
    }
    let total = sum.max(init);
    let overhead = quantity(spec.overhead.as_ref(), key, &format!("spec.overhead.{key}"))?;
    Ok(if requests || total > 0 {
        total.saturating_add(overhead)
    } else {
        total
    })
}

/// Whether every container, init containers included, has a limit for `key` (kubelet's
/// `cpuLimitsDeclared` / `memoryLimitsDeclared`).
fn all_limited(pod: &Pod, key: &str) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return false };
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .all(|c| {
            c.resources
                .as_ref()
                .and_then(|r| r.limits.as_ref())
                .and_then(|l| l.get(key))
                .and_then(|q| parse_quantity(&q.0, key == "cpu"))
                .is_some_and(|v| v > 0)
        })
}

/// The pod's request of resource `key` as kubelet's `PodRequests` counts it (cpu in
/// millicores), requests defaulting to limits.
pub fn pod_request(pod: &Pod, key: &str) -> Result<i64, FieldError> {
    pod_sum(pod, true, key)
}

/// The pod's summed requests and limits.
pub fn pod_resources(pod: &Pod) -> Result<PodResources, FieldError> {
    Ok(PodResources {
        cpu_request_milli: pod_sum(pod, true, "cpu")?,
        cpu_limit_milli: pod_sum(pod, false, "cpu")?,
        memory_limit: pod_sum(pod, false, "memory")?,
        cpu_limits_declared: all_limited(pod, "cpu"),
        memory_limits_declared: all_limited(pod, "memory"),
    })
}

/// kubelet's `MilliCPUToShares`.
pub fn milli_cpu_to_shares(milli: i64) -> u64 {
    if milli <= 0 {
        return MIN_SHARES;
    }
    ((milli as u64).saturating_mul(1024) / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// kubelet's `MilliCPUToQuota` with the default period; none for no limit.
pub fn milli_cpu_to_quota(milli: i64) -> Option<i64> {
    (milli > 0).then(|| (milli.saturating_mul(CPU_PERIOD_US as i64) / 1000).max(MIN_QUOTA_US))
}

/// cgroup v2 `cpu.weight` for v1 shares, as runc converts them
/// (`ConvertCPUSharesToCgroupV2Value`: [2, 262144] → [1, 10000]).
pub fn shares_to_weight(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    1 + (shares.clamp(MIN_SHARES, MAX_SHARES) - 2) * 9999 / 262_142
}

/// kubelet's `ResourceConfigForPod`: Guaranteed pods get shares, quota and memory limit from
/// their sums; Burstable pods shares, and quota / memory limit only when every container has
/// that limit; BestEffort pods the minimum shares. `pids_limit` is `--pod-max-pids` (applied
/// when positive).
pub fn resource_config_for_pod(pod: &Pod, pids_limit: i64) -> Result<PodResourceConfig, FieldError> {
    let sums = pod_resources(pod)?;
    let shares = milli_cpu_to_shares(sums.cpu_request_milli);
    let quota = milli_cpu_to_quota(sums.cpu_limit_milli);
    let mut config = PodResourceConfig {
        pids_limit: (pids_limit > 0).then_some(pids_limit),
        ..Default::default()
    };
    match QosClass::of(pod) {
        QosClass::Guaranteed => {
            config.cpu_shares = shares;
            config.cpu_quota = quota;
            config.cpu_period = quota.map(|_| CPU_PERIOD_US);
            config.memory_limit = (sums.memory_limit > 0).then_some(sums.memory_limit);
        }
        QosClass::Burstable => {
            config.cpu_shares = shares;
            if sums.cpu_limits_declared {
                config.cpu_quota = quota;
                config.cpu_period = quota.map(|_| CPU_PERIOD_US);
            }
            if sums.memory_limits_declared && sums.memory_limit > 0 {
                config.memory_limit = Some(sums.memory_limit);
            }
        }
        QosClass::BestEffort => config.cpu_shares = MIN_SHARES,
    }
    Ok(config)
}

/// The `kubepods` cgroup's settings from the node's allocatable resources (kubelet's
/// `--enforce-node-allocatable=pods`; its capacity without): shares for the CPU, the memory as
/// its limit, and the PIDs (`pid_max` less `--kube-reserved`/`--system-reserved` `pid`) as its
/// pids.max (`pkg/kubelet/cm/node_container_manager_linux.go`, getCgroupConfig).
pub fn kubepods_config(cpu_milli: i64, memory: i64, pids: Option<i64>) -> PodResourceConfig {
    PodResourceConfig {
        cpu_shares: milli_cpu_to_shares(cpu_milli),
        memory_limit: (memory > 0).then_some(memory),
        pids_limit: pids.filter(|p| *p > 0),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn list(items: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        (!items.is_empty()).then(|| {
            items
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect()
        })
    }

    fn container_with_resources(name: &str, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        Container {
            name: name.into(),
            resources: Some(ResourceRequirements {
                requests: list(requests),
                limits: list(limits),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pod_with(containers: Vec<Container>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers,
                ..Default::default()
            }),
            status: None,
        }
    }

    /// The upstream test's pods: Guaranteed 100m/100Mi, Burstable 100m/100Mi requests with
    /// 200m/200Mi limits, BestEffort.
    #[test]
    fn pod_limits_are_summed_as_resource_config_for_pod() {
        let g = pod_with(vec![container_with_resources(
            "a",
            &[("cpu", "100m"), ("memory", "100Mi")],
            &[("cpu", "100m"), ("memory", "100Mi")],
        )]);
        let c = resource_config_for_pod(&g, -1).unwrap();
        assert_eq!(
            c,
            PodResourceConfig {
                cpu_shares: 102,
                cpu_quota: Some(10_000),
                cpu_period: Some(100_000),
                memory_limit: Some(100 << 20),
                pids_limit: None,
            }
        );
        let b = pod_with(vec![
            container_with_resources(
                "a",
                &[("cpu", "100m"), ("memory", "100Mi")],
                &[("cpu", "200m"), ("memory", "200Mi")],
            ),
            container_with_resources("b", &[("cpu", "50m")], &[("cpu", "100m"), ("memory", "1Gi")]),
        ]);
        let c = resource_config_for_pod(&b, 1024).unwrap();
        assert_eq!(c.cpu_shares, 153);
        assert_eq!(c.cpu_quota, Some(30_000));
        assert_eq!(c.memory_limit, Some((200 << 20) + (1 << 30)));
        assert_eq!(c.pids_limit, Some(1024));
        // One container without a memory limit: no pod memory limit, the quota stays.
        let partial = pod_with(vec![
            container_with_resources("a", &[("cpu", "100m")], &[("cpu", "200m"), ("memory", "200Mi")]),
            container_with_resources("b", &[], &[("cpu", "100m")]),
        ]);
        let c = resource_config_for_pod(&partial, 0).unwrap();
        assert_eq!((c.cpu_quota, c.memory_limit, c.pids_limit), (Some(30_000), None, None));
        let be = pod_with(vec![container_with_resources("a", &[], &[])]);
        assert_eq!(
            resource_config_for_pod(&be, -1).unwrap(),
            PodResourceConfig {
                cpu_shares: 2,
                ..Default::default()
            }
        );
    }

    /// Init containers count by the max rule, sidecars add up, the overhead is added.
    #[test]
    fn init_containers_take_the_max_and_overhead_is_added() {
        let mut pod = pod_with(vec![container_with_resources(
            "a",
            &[("cpu", "100m"), ("memory", "100Mi")],
            &[("cpu", "100m"), ("memory", "100Mi")],
        )]);
        let spec = pod.spec.as_mut().unwrap();
        let mut sidecar = container_with_resources("s", &[], &[("cpu", "50m"), ("memory", "10Mi")]);
        sidecar.restart_policy = Some("Always".into());
        spec.init_containers = Some(vec![
            container_with_resources("big", &[], &[("cpu", "500m"), ("memory", "300Mi")]),
            sidecar,
            container_with_resources("late", &[], &[("cpu", "100m"), ("memory", "100Mi")]),
        ]);
        spec.overhead = Some(BTreeMap::from([
            ("cpu".to_string(), Quantity("10m".into())),
            ("memory".to_string(), Quantity("1Mi".into())),
        ]));
        let r = pod_resources(&pod).unwrap();
        // max(100 + 50 sidecar, 500, 50 + 100) + 10.
        assert_eq!(r.cpu_request_milli, 510);
        assert_eq!(r.cpu_limit_milli, 510);
        assert_eq!(r.memory_limit, (300 << 20) + (1 << 20));
        assert!(r.cpu_limits_declared && r.memory_limits_declared);
        let bad = pod_with(vec![container_with_resources("a", &[("cpu", "lots")], &[])]);
        let e = pod_resources(&bad).unwrap_err();
        assert_eq!(e.field, "spec.containers[0].resources.requests.cpu");
    }

    /// Shares and weights convert as kubelet and runc convert them.
    #[test]
    fn shares_quota_and_weight_conversions() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_shares(1_000_000), 262_144);
        assert_eq!(milli_cpu_to_quota(0), None);
        assert_eq!(milli_cpu_to_quota(5), Some(1_000));
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(1024), 39);
        assert_eq!(shares_to_weight(262_144), 10_000);
        assert_eq!(
            kubepods_config(2000, 4 << 30, None),
            PodResourceConfig {
                cpu_shares: 2048,
                memory_limit: Some(4 << 30),
                ..Default::default()
            }
        );
    }
}
