//! The node itself, as the agent reads it: memory, filesystems and PIDs behind the eviction
//! signals, and the files the agent keeps on disk. No actors here; everything is blocking I/O
//! that actors call on `spawn_blocking`.
//!
//! # Layout
//! - [`signals`]: eviction signals (`memory.available`, `nodefs.available`, …), thresholds and
//!   the pressure conditions they raise (kubelet's `pkg/kubelet/eviction`).
//! - [`meminfo`]: the node's memory, read from `/proc/meminfo`.
//! - [`manifest_dir`]: a static pod manifest directory (kubelet's `pkg/kubelet/config/file.go`).
//! - [`volume_dirs`]: the directories a container's mounts need (emptyDir on disk or tmpfs,
//!   hostPath checks, subPath binds) and the removal of a pod's directory with its mounts.
//! - [`atomic_writer`]: kubelet's AtomicWriter, the files of configMap, secret, downwardAPI and
//!   projected volumes swapped in with one rename.
//! - [`ownership`]: fsGroup ownership of a volume's files (kubelet's `SetVolumeOwnership`).
//! - [`pod_files`]: the pod's `etc-hosts` and `resolv.conf`, and the node files they come from.
//! - [`pod_logs`]: the container log files under `/var/log/pods` and `/var/log/containers`.
//! - [`security`]: whether AppArmor is enabled; Localhost seccomp profiles.
//! - [`cgroup`]: where the node's cgroups are mounted (v1 controllers or the v2 root), and
//!   one cgroup's CPU, memory, PIDs and pressure (`cgroup::stats`).
//! - [`node_stats`]: the rest of the Summary API's figures: the machine's CPU and memory,
//!   network counters of a namespace, filesystems, directory and writable-layer disk use, rlimit.
//! - [`stats`]: one statistics housekeeping pass over those readers, the node's and each pod's
//!   figures as a Summary (the StatsActor runs it on the blocking pool).
//! - [`netns`]: TCP connections to `localhost` inside a pod's network namespace (port-forward).
//! - [`logind`]: systemd-logind's shutdown inhibitor and `PrepareForShutdown` (graceful node
//!   shutdown).
//! - [`kernel`]: swap (`failSwapOn`) and the kernel tunables kubelet checks or sets
//!   (`protectKernelDefaults`).
//! - [`image_gc`]: image garbage collection's policy, records and passes (kubelet's image
//!   manager), the engine behind a trait.
//! - [`oom`]: kernel OOM kills from `/dev/kmsg` (cAdvisor's oomparser) and the OOM watcher's
//!   checkpoint.

pub mod atomic_writer;
pub mod cgroup;
pub mod docker_config;
pub mod image_gc;
pub mod kernel;
pub mod logind;
pub mod manifest_dir;
pub mod manifest_url;
pub mod memcg;
pub mod meminfo;
pub mod netns;
pub mod node_stats;
pub mod oom;
pub mod ownership;
pub mod pod_files;
pub mod pod_logs;
pub mod process;
pub mod security;
pub mod shutdown_state;
pub mod signals;
pub mod stats;
pub mod thresholds;
pub mod volume_dirs;
