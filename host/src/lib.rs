//! The node itself, as the agent reads it: memory, filesystems and PIDs behind the eviction
//! signals, and the files the agent keeps on disk. No actors here; everything is blocking I/O
//! that actors call on `spawn_blocking`.
//!
//! # Layout
//! - [`signals`]: eviction signals (`memory.available`, `nodefs.available`, …), thresholds and
//!   the pressure conditions they raise (kubelet's `pkg/kubelet/eviction`).
//! - [`meminfo`]: the node's memory, read from `/proc/meminfo`.
//! - [`manifest_dir`]: a static pod manifest directory (kubelet's `pkg/kubelet/config/file.go`).
//! - [`volume_dirs`]: emptyDir and hostPath directories a container's mounts need.
//! - [`security`]: whether AppArmor is enabled; Localhost seccomp profiles.

pub mod manifest_dir;
pub mod meminfo;
pub mod security;
pub mod signals;
pub mod volume_dirs;
