//! Data types and actix messages exchanged by dockerlet's actors. No logic lives here.
//!
//! The types are plain data; their `actix::Message` impls (and the few types that hold an actix
//! address, such as [`worker`]'s `ShutdownTarget`) exist only with the `actix` feature, which the
//! actor layer (`actors`, `http`, `agent`) turns on. The crates below it (`pod`, `host`,
//! `runtime`, `kube`) use the data without compiling actix.
//!
//! # Layout
//! - [`ids`]: newtype identifiers (`PodUid`, `ContainerId`) and a pod's identity (`PodRef`).
//! - [`runtime`]: what the container runtime reports about a pod's containers.
//! - [`source`]: pods read from a configuration source (static manifests).
//! - [`worker`]: commands to a PodWorker and its reports back to the Supervisor.
//! - [`pleg`]: pod lifecycle events produced by the PlegActor.
//! - [`probe`]: what the ProbeActor watches and the results it publishes.
//! - [`status`]: pod status written to and read from the StatusActor.
//! - [`node`]: the node's pressure conditions.
//! - [`stats`]: the Summary API (`/stats/summary`) and the StatsActor's query.
//! - [`gc`]: what the garbage collectors ask (the pods container GC keeps).
//! - [`debug`]: queries behind the healthz and debug endpoints, and test-only fault hooks.
//!
//! Naming: commands are imperative (`UpdatePod`), events past tense (`SourcePodsChanged`),
//! queries start with `Get` (`GetActorState`).

pub mod debug;
pub mod gc;
pub mod ids;
pub mod node;
pub mod pleg;
pub mod probe;
pub mod runtime;
pub mod source;
pub mod stats;
pub mod status;
pub mod worker;

pub use ids::{ContainerId, PodRef, PodUid};
