//! One agent per node name on a Docker engine, beyond kubelet (whose `--lock-file` guards what
//! one host directory names): at start the agent claims its node name on the engine itself with
//! a container named `dockerlet_node_<node>`, made from the sandbox image and never started,
//! labelled with who holds it (PID, process start time, boot ID, root dir, since when). Docker's
//! container names are unique per engine, so a second agent for the node, whatever its root dir,
//! finds the claim: while its holder runs (this boot, that PID with that start time) the second
//! agent stops with an error naming it; a claim whose holder is gone (SIGKILLed, or from before
//! a reboot) is taken over. The agent removes its claim when it stops.
//!
//! The check of the holder reads this host's `/proc`: agents sharing an engine share its host.

use std::collections::HashMap;
use std::path::Path;

use dockerlet_runtime::claim::ClaimContainer;
use dockerlet_runtime::docker::DockerRuntime;
use dockerlet_runtime::RuntimeError;

/// The claim's label: the node name (also how `make clean-containers` finds claims).
pub const LABEL: &str = "io.dockerlet.claim";
const PID: &str = "io.dockerlet.claim.pid";
const STARTED: &str = "io.dockerlet.claim.started";
const BOOT: &str = "io.dockerlet.claim.boot-id";
const ROOT_DIR: &str = "io.dockerlet.claim.root-dir";
const SINCE: &str = "io.dockerlet.claim.since";
/// The `--cgroup-root` its pods' QoS cgroups are under (absent with `--cgroups-per-qos=false`).
const CGROUP_ROOT: &str = "io.dockerlet.claim.cgroup-root";

/// Why the node cannot be claimed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another agent runs for the node on this engine.
    #[error("node {node:?} is already managed on this Docker engine by the dockerlet with PID {pid} (root dir {root_dir}, since {since}; its claim: container {container}): one agent per node name per engine")]
    Held {
        /// The node name.
        node: String,
        /// The holder's PID.
        pid: u32,
        /// The holder's `--root-dir`.
        root_dir: String,
        /// When it claimed the node.
        since: String,
        /// The claim container.
        container: String,
    },
    /// Another running agent keeps its pods' QoS cgroups under the same root.
    #[error("--cgroup-root {root}: the dockerlet of node {node:?} (PID {pid}, root dir {root_dir}) already keeps its pods' cgroups there; two agents in one kubepods tree overwrite each other's QoS settings and prune each other's pod cgroups: give each agent its own --cgroup-root")]
    SharedCgroupRoot {
        /// The root.
        root: String,
        /// The other agent's node.
        node: String,
        /// Its PID.
        pid: u32,
        /// Its root dir.
        root_dir: String,
    },
    /// The engine failed.
    #[error("cannot claim node {node:?} on the Docker engine: {source}")]
    Engine {
        /// The node name.
        node: String,
        /// Why.
        #[source]
        source: RuntimeError,
    },
}

/// Who holds a claim, as its labels say.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Holder {
    pid: u32,
    started: u64,
    boot: String,
    root_dir: String,
    since: String,
}

impl Holder {
    fn me(root_dir: &Path) -> Holder {
        let pid = std::process::id();
        Holder {
            pid,
            started: dockerlet_host::process::start_time(pid).unwrap_or_default(),
            boot: dockerlet_host::process::boot_id(),
            root_dir: root_dir.display().to_string(),
            since: k8s_openapi::jiff::Timestamp::now().to_string(),
        }
    }

    fn labels(&self, node: &str, cgroup_root: Option<&str>) -> HashMap<String, String> {
        let mut labels: HashMap<String, String> = [
            (LABEL, node.to_string()),
            (PID, self.pid.to_string()),
            (STARTED, self.started.to_string()),
            (BOOT, self.boot.clone()),
            (ROOT_DIR, self.root_dir.clone()),
            (SINCE, self.since.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if let Some(root) = cgroup_root {
            labels.insert(CGROUP_ROOT.into(), root.to_string());
        }
        labels
    }

    fn from_labels(labels: &HashMap<String, String>) -> Option<Holder> {
        let get = |key: &str| labels.get(key).cloned().unwrap_or_default();
        Some(Holder {
            pid: get(PID).parse().ok()?,
            started: get(STARTED).parse().ok()?,
            boot: get(BOOT),
            root_dir: get(ROOT_DIR),
            since: get(SINCE),
        })
    }

    fn runs(&self) -> bool {
        dockerlet_host::process::still_runs(self.pid, self.started, &self.boot)
    }
}

/// Fails when another running agent, of another node, keeps its pods' QoS cgroups under
/// `cgroup_root` (none: this agent has no QoS tree).
async fn cgroup_root_free(runtime: &DockerRuntime, node: &str, cgroup_root: Option<&str>) -> Result<(), ClaimError> {
    let Some(root) = cgroup_root else {
        return Ok(());
    };
    let claims = runtime.list_claims(LABEL).await.map_err(|source| ClaimError::Engine {
        node: node.to_string(),
        source,
    })?;
    let shared = claims.iter().find_map(|claim| {
        let labels = &claim.labels;
        let other = labels.get(LABEL)?;
        let holder = Holder::from_labels(labels)?;
        (other != node && labels.get(CGROUP_ROOT).map(String::as_str) == Some(root) && holder.runs())
            .then(|| (other.clone(), holder))
    });
    match shared {
        None => Ok(()),
        Some((other, holder)) => Err(ClaimError::SharedCgroupRoot {
            root: root.to_string(),
            node: other,
            pid: holder.pid,
            root_dir: holder.root_dir,
        }),
    }
}

/// The claim container's name for `node`.
pub fn claim_name(node: &str) -> String {
    format!("dockerlet_node_{node}")
}

/// The node's claim, held until [`NodeClaim::release`].
pub struct NodeClaim {
    runtime: DockerRuntime,
    name: String,
}

impl NodeClaim {
    /// Claims `node` on the engine with a container of `image` (present), for the agent of
    /// `root_dir` whose pods' QoS cgroups are under `cgroup_root` (none: no QoS tree); fails
    /// while another agent holds the node, or another running agent uses the same cgroup root.
    pub async fn take(
        runtime: &DockerRuntime,
        node: &str,
        image: &str,
        root_dir: &Path,
        cgroup_root: Option<&str>,
    ) -> Result<NodeClaim, ClaimError> {
        let claim = Self::take_name(runtime, node, image, root_dir, cgroup_root).await?;
        match cgroup_root_free(runtime, node, cgroup_root).await {
            Ok(()) => Ok(claim),
            Err(e) => {
                claim.release().await;
                Err(e)
            }
        }
    }

    /// The node name's claim alone.
    async fn take_name(
        runtime: &DockerRuntime,
        node: &str,
        image: &str,
        root_dir: &Path,
        cgroup_root: Option<&str>,
    ) -> Result<NodeClaim, ClaimError> {
        let engine = |source| ClaimError::Engine {
            node: node.to_string(),
            source,
        };
        let name = claim_name(node);
        let me = Holder::me(root_dir);
        // A stale claim is removed and the name tried again, twice at most (a third agent may
        // have claimed it meanwhile).
        for attempt in 0..3 {
            let Some(ClaimContainer { container, labels }) = runtime
                .create_claim(&name, image, me.labels(node, cgroup_root))
                .await
                .map_err(engine)?
            else {
                tracing::info!(claim = %name, "node name claimed on the Docker engine");
                return Ok(NodeClaim {
                    runtime: runtime.clone(),
                    name,
                });
            };
            let holder = Holder::from_labels(&labels);
            let stale = holder.as_ref().is_none_or(|h| !h.runs());
            if stale && attempt < 2 {
                tracing::info!(claim = %name, container = %container, holder = ?holder, "taking over the node's claim on the Docker engine: its holder no longer runs");
                runtime.remove_claim(&container).await.map_err(engine)?;
                continue;
            }
            let holder = holder.unwrap_or_else(|| Holder {
                pid: 0,
                started: 0,
                boot: String::new(),
                root_dir: "unknown".into(),
                since: "unknown".into(),
            });
            return Err(ClaimError::Held {
                node: node.to_string(),
                pid: holder.pid,
                root_dir: holder.root_dir,
                since: holder.since,
                container,
            });
        }
        unreachable!("the last attempt returns")
    }

    /// Gives the claim up (the agent stops).
    pub async fn release(self) {
        match self.runtime.remove_claim(&self.name).await {
            Ok(()) => tracing::info!(claim = %self.name, "node name's claim on the Docker engine released"),
            Err(e) => {
                tracing::warn!(claim = %self.name, error = %e, "cannot remove the node's claim; the next agent takes it over")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_reads_back_from_its_labels_and_this_process_runs() {
        let me = Holder::me(Path::new("/var/lib/dockerlet"));
        let labels = me.labels("node-a", Some("/"));
        assert_eq!(labels[CGROUP_ROOT], "/");
        assert_eq!(labels[LABEL], "node-a");
        let back = Holder::from_labels(&labels).expect("a holder");
        assert_eq!(back, me);
        assert!(back.runs());
        let gone = Holder {
            started: me.started + 1,
            ..me.clone()
        };
        assert!(!gone.runs(), "the same PID started at another time is another process");
        assert_eq!(Holder::from_labels(&HashMap::new()), None);
    }
}
