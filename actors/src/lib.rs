//! dockerlet's actors: each subsystem of the node agent is one actix actor. What they decide is
//! computed by the pure [`dockerlet_pod`]; what they touch is reached through adapters
//! ([`dockerlet_runtime`] for Docker, [`dockerlet_kube`] for the API server, [`dockerlet_host`] for
//! the node's files and signals).
//!
//! # Layout
//! - [`supervisor`]: the actor registry and watchdog; routes messages by pod UID, answers the
//!   HTTP side's queries and re-creates any actor that dies (a panicking handler included).
//! - [`pod_manager`]: which desired pod gets a PodWorker: admission, static pods one version at a
//!   time, restart counts, final deletion of API pods, orphans (no actix).
//! - [`pod_config`]: merges the pod sources into the desired set (kubelet's `pkg/kubelet/config`).
//! - [`recorder`]: the EventRecorder actor (the debug ring and API events).
//! - [`registry`]: the Supervisor's children, re-created when they die, and the restart-stable
//!   [`registry::Link`]s other actors send to them through.
//! - [`inspect`]: what every actor tells the debug page (`Inspect`), and the `supervised!` macro
//!   that writes its `GetActorState` and `Panic` handlers.
//! - [`pod_cache`]: the runtime's containers per pod as the PLEG last saw them.
//! - [`pod_worker`]: makes Docker match one pod; its state machine is [`pod_worker::state`].
//! - [`pleg`]: follows Docker's event stream and relists (every 10 s while events flow, every
//!   second otherwise); emits pod lifecycle events.
//! - [`prober`]: liveness, readiness and startup probes; `dockerlet_probe` runs probe and hook
//!   handlers (for the prober and the pod workers' hooks).
//! - [`status`]: holds every pod's status and writes it to the API server.
//! - [`source`]: the pod sources: a manifest directory, a manifest URL, the API server.
//! - [`node_status`]: registers the Node and keeps its status and Lease fresh (cluster mode).
//! - [`eviction`]: the eviction manager: the signals, the pressure conditions, evicting pods;
//!   [`eviction_memcg`]: its memory threshold notifiers (`kernelMemcgNotification`).
//! - [`image_gc`]: image garbage collection every 5 minutes and on eviction's request
//!   (kubelet's image manager; the passes are `dockerlet_host::image_gc`).
//! - [`oom_watcher`]: system OOMs from the kernel log become `SystemOOM` Node events.
//! - [`system_cgroups`]: keeps the agent in `--kubelet-cgroups` and the root's other processes
//!   in `--system-cgroups`, every minute.
//! - [`container_gc`]: kubelet's container GC every minute (dead containers, sandboxes, pod logs).
//! - [`node_shutdown`]: graceful node shutdown (logind inhibitor, pods stopped by priority).
//! - [`certificates`]: the node's client certificate renewed at 70–90 % of its lifetime
//!   (`rotateCertificates`; the CSR and the files are `dockerlet_kube::certificates`).
//! - [`stats`]: statistics housekeeping for `/stats/summary` (cgroups, /proc, statvfs), cached.
//!
//! Start with [`supervisor::Supervisor`]: everything else hangs off it.

pub mod certificates;
pub mod container_gc;
pub mod eviction;
pub mod eviction_memcg;
pub mod image_gc;
pub mod inspect;
pub mod node_shutdown;
pub mod node_status;
pub mod oom_watcher;
pub mod pleg;
pub mod pod_cache;
pub mod pod_config;
pub mod pod_manager;
pub mod pod_network;
pub mod pod_worker;
pub mod prober;
pub mod recorder;
pub mod registry;
pub mod source;
pub mod stats;
pub mod status;
pub mod supervisor;
pub mod system_cgroups;
#[cfg(test)]
mod test_support;

pub(crate) use dockerlet_pod::go::error_chain;

// The settings types the agent's config slices build, at the crate root so the agent names no
// module paths.
pub use pod_worker::ImagePullLimit;
pub use source::http::HttpSourceConfig;
