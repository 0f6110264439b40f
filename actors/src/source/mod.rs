//! The pod sources (kubelet's `pkg/kubelet/config`): each is an actor that sends the full set of
//! its pods to the Supervisor as `SourcePodsChanged` whenever it changes.
//!
//! - [`file`]: [`FileSource`], a manifest directory (`--pod-manifest-path`).
//! - [`http`]: `HttpSource`, a manifest URL (`--manifest-url`).
//! - [`api`]: `ApiSource`, the pods the API server binds to this node.

pub mod api;
pub mod file;
pub mod http;

pub use file::FileSource;
