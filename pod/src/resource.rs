//! A container's resource values as the downward API exposes them (kubelet's
//! `pkg/api/v1/resource/helpers.go`: `ExtractResourceValueByContainerName`), shared by env
//! `valueFrom.resourceFieldRef` and downwardAPI volume items.

use k8s_openapi::api::core::v1::{Container, Pod, ResourceFieldSelector};

use crate::quantity::parse_quantity;

/// The node's allocatable resources: what a container's unset limits default to in the downward
/// API (kubelet's `MergeContainerResourceLimits`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allocatable {
    /// CPU in millicores.
    pub cpu_milli: i64,
    /// Memory in bytes.
    pub memory_bytes: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage_bytes: i64,
}

/// Why a resource value cannot be given. Never retried: the spec must change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// `containerName` names no container of the pod.
    #[error("container {0} not found")]
    ContainerNotFound(String),
    /// A resource the downward API does not expose.
    #[error("unsupported container resource : {0}")]
    Unsupported(String),
    /// A quantity (limit, request or divisor) that does not parse.
    #[error("invalid quantity {value:?} in {field}")]
    BadQuantity {
        /// `divisor`, `limits.memory`, …
        field: String,
        /// The text.
        value: String,
    },
}

/// The value of `selector` for the container named `container_name` of `pod` (kubelet's
/// `ExtractResourceValueByContainerNameAndNodeAllocatable`): limits of cpu, memory and
/// ephemeral-storage that are unset or zero are the node's allocatable; requests that are unset
/// are the limits given (API defaulting); the value is divided by the divisor (default 1) and
/// rounded up.
pub fn resource_value(
    pod: &Pod,
    container_name: &str,
    selector: &ResourceFieldSelector,
    allocatable: &Allocatable,
) -> Result<String, ResourceError> {
    let container = find_container(pod, container_name)?;
    container_resource_value(container, selector, allocatable)
}

/// [`resource_value`] for a container already found.
pub fn container_resource_value(
    container: &Container,
    selector: &ResourceFieldSelector,
    allocatable: &Allocatable,
) -> Result<String, ResourceError> {
    let (which, name) = selector
        .resource
        .split_once('.')
        .ok_or_else(|| ResourceError::Unsupported(selector.resource.clone()))?;
    let kind = match name {
        "cpu" => Kind::Cpu,
        "memory" => Kind::Bytes(allocatable.memory_bytes),
        "ephemeral-storage" => Kind::Bytes(allocatable.ephemeral_storage_bytes),
        n if n.starts_with("hugepages-") => Kind::HugePages,
        _ => return Err(ResourceError::Unsupported(selector.resource.clone())),
    };
    if which != "limits" && which != "requests" {
        return Err(ResourceError::Unsupported(selector.resource.clone()));
    }
    let milli = matches!(kind, Kind::Cpu);
    let resources = container.resources.as_ref();
    let quantity =
        |map: Option<&std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
         which: &str| {
            map.and_then(|m| m.get(name))
                .map(|q| {
                    parse_quantity(&q.0, milli).ok_or_else(|| ResourceError::BadQuantity {
                        field: format!("{which}.{name}"),
                        value: q.0.clone(),
                    })
                })
                .transpose()
        };
    let limit = quantity(resources.and_then(|r| r.limits.as_ref()), "limits")?;
    let value = if which == "limits" {
        match (limit.filter(|l| *l != 0), kind) {
            (Some(l), _) => l,
            (None, Kind::Cpu) => allocatable.cpu_milli,
            (None, Kind::Bytes(node)) => node,
            (None, Kind::HugePages) => 0,
        }
    } else {
        quantity(resources.and_then(|r| r.requests.as_ref()), "requests")?
            .or(limit)
            .unwrap_or(0)
    };
    let divisor = match selector.divisor.as_ref() {
        None => None,
        Some(d) => Some(parse_quantity(&d.0, milli).ok_or_else(|| ResourceError::BadQuantity {
            field: "divisor".to_string(),
            value: d.0.clone(),
        })?),
    }
    .filter(|d| *d != 0)
    .unwrap_or(if milli { 1000 } else { 1 });
    // Ceiling division of non-negative values, as kubelet's math.Ceil of the quotient.
    Ok(((value + divisor - 1) / divisor).to_string())
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Cpu,
    /// Bytes, defaulting to the node's value.
    Bytes(i64),
    /// Hugepages never default (they are never overcommitted).
    HugePages,
}

fn find_container<'a>(pod: &'a Pod, name: &str) -> Result<&'a Container, ResourceError> {
    let spec = pod.spec.as_ref();
    spec.into_iter()
        .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()))
        .find(|c| c.name == name)
        .ok_or_else(|| ResourceError::ContainerNotFound(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use std::collections::BTreeMap;

    fn pod_with(resources: Option<ResourceRequirements>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "client-container".into(),
                    resources,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn q(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect(),
        )
    }

    fn sel(resource: &str, divisor: Option<&str>) -> ResourceFieldSelector {
        ResourceFieldSelector {
            container_name: None,
            divisor: divisor.map(|d| Quantity(d.into())),
            resource: resource.into(),
        }
    }

    /// The conformance pod (requests 250m/32Mi, limits 1250m/64Mi) gives CPU_LIMIT=2,
    /// MEMORY_LIMIT=67108864, CPU_REQUEST=1, MEMORY_REQUEST=33554432; divisors divide and round up.
    #[test]
    fn conformance_values_round_up() {
        let p = pod_with(Some(ResourceRequirements {
            limits: q(&[("cpu", "1250m"), ("memory", "64Mi")]),
            requests: q(&[("cpu", "250m"), ("memory", "32Mi")]),
            ..Default::default()
        }));
        let a = Allocatable::default();
        let v = |r: &str, d: Option<&str>| resource_value(&p, "client-container", &sel(r, d), &a).unwrap();
        assert_eq!(v("limits.cpu", None), "2");
        assert_eq!(v("limits.memory", None), "67108864");
        assert_eq!(v("requests.cpu", None), "1");
        assert_eq!(v("requests.memory", None), "33554432");
        assert_eq!(v("limits.cpu", Some("1m")), "1250");
        assert_eq!(v("limits.memory", Some("1Mi")), "64");
        assert_eq!(v("requests.memory", Some("1M")), "34");
    }

    /// Unset limits are the node's allocatable; unset requests are the limits, else 0.
    #[test]
    fn limits_default_to_node_allocatable() {
        let a = Allocatable {
            cpu_milli: 2000,
            memory_bytes: 8 << 30,
            ephemeral_storage_bytes: 100 << 30,
        };
        let p = pod_with(None);
        let v = |p: &Pod, r: &str| resource_value(p, "client-container", &sel(r, None), &a).unwrap();
        assert_eq!(v(&p, "limits.cpu"), "2");
        assert_eq!(v(&p, "limits.memory"), (8i64 << 30).to_string());
        assert_eq!(v(&p, "limits.ephemeral-storage"), (100i64 << 30).to_string());
        assert_eq!(v(&p, "requests.cpu"), "0");
        let p = pod_with(Some(ResourceRequirements {
            limits: q(&[("memory", "1Gi"), ("hugepages-2Mi", "4Mi")]),
            ..Default::default()
        }));
        assert_eq!(v(&p, "requests.memory"), (1i64 << 30).to_string());
        assert_eq!(v(&p, "limits.hugepages-2Mi"), "4194304");
        assert_eq!(v(&p, "requests.hugepages-1Gi"), "0");
    }

    /// Unknown containers and resources are errors with kubelet's wording.
    #[test]
    fn unknown_container_or_resource() {
        let p = pod_with(None);
        let a = Allocatable::default();
        let err = resource_value(&p, "other", &sel("limits.cpu", None), &a).unwrap_err();
        assert_eq!(err.to_string(), "container other not found");
        let err = resource_value(&p, "client-container", &sel("limits.gpu", None), &a).unwrap_err();
        assert_eq!(err.to_string(), "unsupported container resource : limits.gpu");
    }
}
