//! The Kubernetes API as dockerlet uses it, through kube-rs: actors never import `kube`.
//!
//! # Layout
//! - [`api`]: [`KubeApi`], the client: pods bound to this node (list + watch), pod status, mirror
//!   pods, the Node and its Lease, events, Secrets and ConfigMaps; a client-side rate limit.
//! - [`recorder`]: kubelet's event correlator (client-go `tools/record/events_cache.go`): rate
//!   limit, counts, combining similar events. Pure.

pub mod api;
pub mod recorder;

pub use api::{ApiError, ConfigProblem, KubeApi, PodEvent, PodEventRef, LEASE_NAMESPACE};
