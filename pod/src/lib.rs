//! Kubelet semantics over the pod spec, as pure functions: no actors, no I/O, no clock but the
//! times handed in. Everything here is unit-tested without Docker or an API server.
//!
//! # Layout
//! - [`manifest`]: parse, validate and default a static pod (kubelet's `pkg/kubelet/config`);
//!   [`decode`]: manifest text to a Pod through one JSON decoder, errors naming the field.
//! - [`spec`]: identity, grace period, network mode, QoS class, a container's spec hash.
//! - [`plan`]: kubelet's `computePodActions` — what to start, kill and remove next.
//! - [`container_gc`]: kubelet's container GC policy — which dead containers and sandboxes go.
//! - [`container`]: from a pod spec to [`container::CreateSpec`]s (the sandbox and each container).
//! - [`volume`]: volume resolution and validation; [`volume::Mount`]s the agent prepares; what
//!   configMap, secret, downwardAPI and projected volumes contain ([`volume::payload`]).
//! - [`cgroup`]: the kubepods cgroup tree's names and the pod-level limits (`ResourceConfigForPod`).
//! - [`resource`]: container resource values for the downward API (env and volumes).
//! - [`dns`]: the pod's resolv.conf (dnsPolicy, dnsConfig, the cluster DNS, kubelet's limits).
//! - [`hosts`]: the pod's hostname, FQDN and managed `/etc/hosts`.
//! - [`envvars`]: service link environment variables.
//! - [`running`]: the runtime's running pods as `/runningpods/` lists them.
//! - [`status`]: the pod status, as kubelet's `generateAPIPodStatus` computes it.
//! - [`security`]: `securityContext` → the security fields of a `CreateSpec`; refusals.
//! - [`admission`]: kubelet's pod admission (sysctls, AppArmor, what Docker cannot do).
//! - [`eviction`]: kubelet's eviction ranking, message, critical pods and admission under pressure.
//! - [`shutdown`]: graceful node shutdown's priority groups and grace periods.
//! - [`node_fit`]: kubelet's predicate admission (resources, node affinity, host ports, taints).
//! - [`action`]: probe and lifecycle-hook handlers, validated.
//! - [`probe_state`]: the prober's thresholds, hold-after-failure and startup gating.
//! - [`backoff`]: CrashLoopBackOff, the restart delay of exited containers.
//! - [`labels`]: the Docker name and label scheme that lets an agent rebuild a pod from Docker.
//! - [`field`]: field errors, printed as the API server prints them.
//! - [`expansion`]: kubelet's `$(VAR)` expansion.
//! - [`annotations`], [`quantity`], [`version`], [`go`]: small shared facts and formats.

pub mod action;
pub mod admission;
pub mod annotations;
pub mod backoff;
pub mod cgroup;
pub mod container;
pub mod container_gc;
pub mod credentials;
pub mod deadline;
pub mod decode;
pub mod dns;
pub mod envvars;
pub mod eviction;
pub mod expansion;
pub mod field;
pub mod go;
pub mod hosts;
pub mod image_ref;
pub mod labels;
pub mod manifest;
pub mod names;
pub mod node_fit;
pub mod plan;
pub mod pod_ips;
pub mod probe_state;
pub mod quantity;
pub mod resource;
pub mod running;
pub mod security;
pub mod shutdown;
pub mod spec;
pub mod status;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod version;
pub mod volume;
