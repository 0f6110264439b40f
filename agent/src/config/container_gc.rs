//! The container GC slice: `--minimum-container-ttl-duration`,
//! `--maximum-dead-containers-per-container` and `--maximum-dead-containers` (kubelet has no
//! config-file fields for them; `cmd/kubelet/app/options/options.go`), and the period (a fixed
//! minute in kubelet, `ContainerGCPeriod` in `pkg/kubelet/kubelet.go`; a hidden flag here for
//! tests).
//!
//! The three flags are deprecated in kubelet and still effective; using one logs kubelet's
//! deprecation notice.

use std::time::Duration;

use dockerlet_pod::container_gc::GcPolicy;

use crate::cli::Cli;

/// Container GC's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContainerGc {
    /// What one pass keeps.
    pub policy: GcPolicy,
    /// How often a pass runs.
    pub period: Duration,
}

/// kubelet's deprecation notice of the three flags (`options.go`, `MarkDeprecated`).
const DEPRECATED: &str = "Use --eviction-hard or --eviction-soft instead. Will be removed in a future version.";

/// The policy, flags over kubelet's defaults (0, 1, −1).
pub(super) fn resolve(cli: &Cli) -> ContainerGc {
    let defaults = GcPolicy::default();
    let given = [
        (
            "--minimum-container-ttl-duration",
            cli.minimum_container_ttl_duration.is_some(),
        ),
        (
            "--maximum-dead-containers-per-container",
            cli.maximum_dead_containers_per_container.is_some(),
        ),
        ("--maximum-dead-containers", cli.maximum_dead_containers.is_some()),
    ];
    for (flag, _) in given.iter().filter(|(_, set)| *set) {
        tracing::warn!("Flag {flag} has been deprecated, {DEPRECATED}");
    }
    ContainerGc {
        policy: GcPolicy {
            min_age: cli.minimum_container_ttl_duration.unwrap_or(defaults.min_age),
            max_per_pod_container: cli
                .maximum_dead_containers_per_container
                .unwrap_or(defaults.max_per_pod_container),
            max_containers: cli.maximum_dead_containers.unwrap_or(defaults.max_containers),
        },
        period: cli.container_gc_period,
    }
}
