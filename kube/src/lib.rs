//! The Kubernetes API as dockerlet uses it, through kube-rs: actors never import `kube`.
//!
//! # Layout
//! - [`client`]: [`KubeClient`], what the actors ask of the API server, as a trait.
//! - [`api`]: [`KubeApi`], its implementation on kube-rs: pods bound to this node (list + watch),
//!   pod status, mirror pods, the Node and its Lease, events, Secrets and ConfigMaps; a
//!   client-side rate limit.
//! - `fake` (feature `fake`, and this crate's tests): `FakeKube`, [`KubeClient`] in memory,
//!   recording every write as a typed `KubeCall`.
//! - [`objects`]: a watch-backed cache of the Secrets and ConfigMaps the pods refer to, one
//!   watch per object (kubelet's watch-based manager).
//! - [`cluster_cache`]: every object of a cluster-wide kind from one watch (Services for the
//!   service link env vars, RuntimeClasses for the runtime handler).
//! - [`certificates`]: the node's client certificate — TLS bootstrap (`--bootstrap-kubeconfig`)
//!   and rotation (`rotateCertificates`) through `certificates.k8s.io` CSRs.
//! - [`types`]: what the trait speaks in — event references, watch events, [`ApiError`].
//! - [`tokens`]: service-account tokens for projected volumes, requested through TokenRequest
//!   and kept until 80 % of their lifetime has passed (kubelet's token manager).
//! - [`recorder`]: kubelet's event correlator (client-go `tools/record/events_cache.go`): rate
//!   limit, counts, combining similar events. Pure.

pub mod api;
pub mod certificates;
pub mod client;
pub mod cluster_cache;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
pub mod objects;
pub mod recorder;
pub mod tokens;
pub mod types;

pub use api::{KubeApi, LEASE_NAMESPACE};
pub use client::{secret_strings, KubeClient};
pub use tokens::{ServiceAccountToken, TokenRequestFor};
pub use types::{ApiError, ConfigProblem, PodEvent, PodEventRef};
