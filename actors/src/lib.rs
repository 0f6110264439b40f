//! dockerlet's actors: each subsystem of the node agent is one actix actor.
//!
//! # Layout
//! - [`supervisor`]: owns the desired pods, starts one [`pod_worker`] per pod, routes messages,
//!   and re-creates any actor that dies (a panicking handler included).
//! - [`pod_worker`]: makes Docker match one pod (kubelet's computePodActions in
//!   [`pod_worker::plan`], container creation in [`pod_worker::container_spec`]).
//! - [`pleg`]: relists Docker every second and follows its event stream; emits pod lifecycle
//!   events.
//! - [`status`]: holds every pod's status ([`status::generate`] computes it as kubelet does).
//! - [`source`]: the static pod source (a manifest directory).
//! - [`node_status`]: registers the Node, keeps its status and Lease fresh (API-server mode);
//!   [`pressure`] computes its pressure conditions from eviction signals.
//! - [`runtime`]: the [`runtime::ContainerRuntime`] trait, its Docker implementation and a fake.
//!
//! Start with [`supervisor::Supervisor`]: everything else hangs off it.

pub mod backoff;
pub mod events;
pub mod kube_api;
pub mod node_status;
pub mod pleg;
pub mod pod_worker;
pub mod pressure;
pub mod probe;
pub mod runtime;
pub mod source;
pub mod status;
pub mod supervisor;
