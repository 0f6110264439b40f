//! End-to-end tests for dockerlet: the real agent binary against the real Docker engine.
//!
//! Every test starts its own agent with a unique node name, so tests are independent and run in
//! parallel on one engine. The agent's drop guard kills the agent and removes every container
//! labelled with its node, also when the test panics.
//!
//! # Layout
//! - [`harness`]: [`Agent`] starts `target/debug/dockerlet` (or `$DOCKERLET_BIN`) with short
//!   intervals and free ports, talks to its HTTP endpoints, signals it, and cleans up;
//!   [`AgentOptions`] start it with another binary, log directory or node prefix, or the
//!   agent's own intervals (the bench's release agent).
//! - [`manifest`]: [`ManifestDir`] (a temporary `--pod-manifest-path`) and the YAML fixtures in
//!   `manifests/testdata/`.
//! - [`pod`]: [`PodExt`] and [`ContainerStatusExt`], reading a `/pods` status at a glance.
//! - [`docker`]: the Docker CLI: containers of a node, `docker inspect`, `kill`, `exec`, and
//!   [`DieEvents`], a `docker events` watcher for exit codes.
//! - [`engine`]: [`SecondEngine`], a `dockerd` of a test's own (image GC must not run on the
//!   shared engine).
//! - [`wait`]: polling with generous timeouts and a useful message on timeout.
//! - [`events`]: [`EventLog`], every event `/debug/actors` showed during a test (the agent
//!   keeps only the latest).
//! - [`http_stub`]: [`HttpStub`], an HTTP server in the test process for probes and hooks
//!   with `host: 127.0.0.1`: chosen status codes, redirects, delays; records the requests.
//! - [`browser`]: headless Chromium's rendered DOM of a page (`--dump-dom`), and the text of
//!   marked elements in it.
//! - [`kubelet_stream`]: [`kubelet_stream::KubeletClient`], the kubelet API over TLS with a
//!   client certificate: plain requests, SPDY/3.1 and WebSocket upgrades, and
//!   [`kubelet_stream::Remote`], an exec or attach session over either.
//! - [`grpc_health`]: [`GrpcHealthServer`], a `grpc.health.v1` server whose status a test flips.
//!
//! The API-server mode tests use the in-memory Kubernetes API server of the crate
//! `dockerlet-fake-apiserver` (`fake-apiserver/`), a dev-dependency.
//!
//! # Requirements
//! A running Docker engine, the image `dockerlet.local/busybox:1` (`make image`) and a built
//! agent (`cargo build --workspace --bins`). `make test` provides all three.

pub mod browser;
pub mod docker;
pub mod engine;
pub mod events;
pub mod grpc_health;
pub mod harness;
pub mod http_stub;
pub mod kubelet_stream;
pub mod manifest;
pub mod pod;
pub mod promtool;
pub mod registry;
pub mod wait;

pub use docker::{Container, DieEvents};
pub use engine::SecondEngine;
pub use events::{Event, EventLog};
pub use grpc_health::GrpcHealthServer;
pub use harness::{
    cgroup_hierarchies, cgroup_root, remove_cgroup_tree, unique_name, Agent, AgentExit, AgentOptions, Ports,
    CGROUP_TEST_ROOT,
};
pub use http_stub::{HttpStub, Reply, SeenRequest};
pub use manifest::{fixture, write_manifest, ManifestDir};
pub use pod::{ContainerStatusExt, PodExt};
pub use promtool::promtool_check;
pub use wait::{holds_for, wait_for, wait_until};

use std::time::Duration;

/// The image every test pod uses; built locally by `scripts/build-busybox-image.sh`.
pub const BUSYBOX_IMAGE: &str = "dockerlet.local/busybox:1";

/// How long a pod may take to reach Running (2 cores, tests in parallel, first sandbox image
/// build).
pub const POD_START_TIMEOUT: Duration = Duration::from_secs(90);

/// How long any other expected change may take to show.
pub const CHANGE_TIMEOUT: Duration = Duration::from_secs(60);
