//! A pod's sandbox and the files every container of the pod shares (kubelet's
//! `createPodSandbox` and `generatePodSandboxConfig`, `pkg/kubelet/kuberuntime/kuberuntime_sandbox.go`,
//! and the managed `/etc/hosts` and `resolv.conf` of `makeMounts`,
//! `pkg/kubelet/kubelet_pods.go`).

use dockerlet_messages::debug::EventType;
use std::sync::Arc;

use dockerlet_host::pod_files::{self, PodFileError};
use dockerlet_messages::runtime::{ContainerRole, ObservedContainer};
use dockerlet_metrics::ContainerType;
use dockerlet_pod::container::{sandbox_spec, ManagedFiles, NetworkMode};
use dockerlet_pod::dns::{pod_dns, ResolvConf};
use dockerlet_pod::hosts::{self, PodHostname};
use dockerlet_pod::spec::{host_network, pod_identity};
use dockerlet_runtime::RuntimeError;
use k8s_openapi::api::core::v1::{Container, Pod};

use super::context::SyncContext;
use super::outcome::{RuntimeClassError, SyncError, SyncOutcome, WorkerEvent};

/// The pod IP: its sandbox's.
pub(super) fn sandbox_ip(observed: &[ObservedContainer]) -> Option<String> {
    observed
        .iter()
        .filter(|c| c.role == ContainerRole::Sandbox)
        .find_map(|c| c.ip.clone())
}

/// Makes a pod's sandbox and its shared files.
pub(super) struct PodSandbox<'a> {
    pub(super) sync: &'a SyncContext,
    pub(super) pod: &'a Arc<Pod>,
}

impl PodSandbox<'_> {
    /// The Docker runtime of the pod's `runtimeClassName` (its RuntimeClass's handler, from the
    /// watch-backed cache): none without one. Docker refuses a handler it has no runtime for
    /// ("unknown or invalid runtime name"), which fails the sandbox as kubelet's CRI does.
    pub(super) async fn runtime_handler(&self) -> Result<Option<String>, RuntimeClassError> {
        let Some(name) = self.pod.spec.as_ref().and_then(|s| s.runtime_class_name.clone()) else {
            return Ok(None);
        };
        let Some(api) = &self.sync.config.api else {
            return Err(RuntimeClassError::NeedsApiServer { name });
        };
        match api.runtime_class(&name).await {
            Ok(Some(class)) => Ok(Some(class.handler.clone())),
            Ok(None) => Err(RuntimeClassError::NotFound { name }),
            Err(source) => Err(RuntimeClassError::Api { name, source }),
        }
    }

    /// Create and start the sandbox; its one inspect gives the pod IP. Its hostname and the
    /// pod's resolv.conf are formed first, as kubelet's generatePodSandboxConfig does. The
    /// events forming them produced go to `outcome`.
    pub(super) async fn create(&self, attempt: u32, outcome: &mut SyncOutcome) -> Result<ObservedContainer, SyncError> {
        let config = self.sync.config.clone();
        // kubelet's generatePodSandboxConfig names only a pod on the pod network; a hostNetwork
        // pod's bad FQDN fails its containers instead (see `start_container`).
        let hostname = if host_network(self.pod) {
            None
        } else {
            Some(PodHostname::of(self.pod, &config.dns.domain)?.kernel_hostname(self.pod)?)
        };
        let network = config.network.as_deref().filter(|_| !host_network(self.pod));
        if let Some(cni) = network {
            super::network::ready(cni)?;
        }
        let (events, resolv_conf) = self.write_resolv_conf().await?;
        outcome.events.extend(events);
        // The pod cgroup first, with the pod's limits, as kubelet's EnsureExists before the sandbox.
        let cgroup_parent = super::pod_cgroup::ensure_pod_cgroup(self.sync, self.pod).await?;
        let mut spec = sandbox_spec(
            self.pod,
            &config.node_name,
            &config.sandbox_image,
            attempt,
            cgroup_parent.as_deref(),
        );
        spec.hostname = hostname;
        dockerlet_pod::security::apply_sandbox(&mut spec, self.pod);
        spec.oom_score_adj = spec.oom_score_adj.map(|v| v.max(config.min_oom_score_adj));
        spec.runtime = self.runtime_handler().await?;
        // On the CNI network the sandbox gets a namespace of its own and the plugins wire it;
        // its hostPorts go to `portmap`, not to Docker.
        let ports = match network {
            Some(_) => {
                spec.network = Some(NetworkMode::None);
                std::mem::take(&mut spec.ports)
            }
            None => Vec::new(),
        };
        let id = self.sync.create(spec).await?;
        let started = self.sync.runtime.start_container(&id).await;
        let metrics = &self.sync.config.metrics;
        metrics.container_started(ContainerType::podsandbox, started.is_ok());
        metrics.started_pods.inc();
        if let Err(e) = started {
            metrics.started_pods_errors.inc();
            // A sandbox that cannot start is of no use; the next sync makes a new attempt.
            let _ = self.sync.remove(&id, "the new sandbox did not start").await;
            return Err(e.into());
        }
        let mut sandbox = self.sync.observe(&id, &mut outcome.unobserved).await.ok_or_else(|| {
            SyncError::from(RuntimeError::NotFound {
                what: format!("sandbox {id}"),
            })
        })?;
        if let Some(cni) = network {
            match super::network::attach(cni, &config.metrics, self.pod, &sandbox, &ports, &resolv_conf).await {
                // Observed again, so the pod cache holds the address the attachment gave.
                Ok(ip) => match self.sync.observe(&id, &mut outcome.unobserved).await {
                    Some(again) => sandbox = again,
                    None => sandbox.ip = Some(ip),
                },
                Err(e) => {
                    // cri-dockerd stops the sandbox after a failed set-up; nothing of it is kept.
                    if let Err(removed) = self.sync.remove(&id, "its pod network could not be set up").await {
                        tracing::warn!(sandbox = %id, error = %removed, "cannot remove a sandbox without network");
                    }
                    return Err(e.into());
                }
            }
        }
        Ok(sandbox)
    }

    /// Form the pod's resolv.conf (kubelet's GetPodDNS, from `--resolv-conf`) and write it to
    /// `<pod dir>/resolv.conf`, off the actor thread. Returns the events forming it produced
    /// (limits cut, no cluster DNS) and what it holds.
    async fn write_resolv_conf(&self) -> Result<(Vec<WorkerEvent>, ResolvConf), SyncError> {
        let config = self.sync.config.clone();
        let pod = self.pod.clone();
        let dockerlet_pod::spec::PodIdentity { uid, .. } = pod_identity(self.pod);
        let path = hosts::resolv_conf_path(&config.root_dir, uid);
        let target = path.clone();
        let task = tokio::task::spawn_blocking(move || {
            let host = match &config.dns.resolv_conf {
                Some(path) => {
                    ResolvConf::parse(&pod_files::read_node_file(path)?).map_err(|source| SyncError::ResolvConf {
                        path: path.clone(),
                        source,
                    })?
                }
                None => ResolvConf::default(),
            };
            let node_ips: Vec<std::net::IpAddr> = config.host_ip.parse().into_iter().collect();
            let dns = pod_dns(&pod, &config.dns, &host, &node_ips);
            pod_files::write_pod_file(&target, &dns.resolv_conf.render())?;
            Ok::<_, SyncError>((dns.events, dns.resolv_conf))
        });
        let events = task.await.map_err(|e| {
            SyncError::from(PodFileError {
                what: "write",
                path,
                source: std::io::Error::other(e),
            })
        })??;
        let (events, resolv_conf) = events;
        let events = events
            .into_iter()
            .map(|e| WorkerEvent::pod(EventType::Warning, e.reason, e.message))
            .collect();
        Ok((events, resolv_conf))
    }

    /// The files every container of the pod mounts: `<pod dir>/resolv.conf` (formed again if
    /// it is missing, as for a sandbox an earlier agent made) and, once the pod has an IP,
    /// `<pod dir>/etc-hosts` — kubelet's managed hosts file, or the node's for host-network
    /// pods — rewritten before each container as kubelet's makeMounts does. A container that
    /// mounts its own `/etc/hosts` keeps it.
    pub(super) async fn managed_files(
        &self,
        container: &Container,
        pod_ips: &[String],
        names: PodHostname,
    ) -> Result<ManagedFiles, SyncError> {
        let config = self.sync.config.clone();
        let dockerlet_pod::spec::PodIdentity { uid, .. } = pod_identity(self.pod);
        let resolv_conf = hosts::resolv_conf_path(&config.root_dir, uid);
        if !tokio::fs::try_exists(&resolv_conf).await.unwrap_or(false) {
            self.write_resolv_conf().await?;
        }
        let mut files = ManagedFiles {
            etc_hosts: None,
            resolv_conf: Some(resolv_conf),
        };
        if pod_ips.is_empty() || hosts::mounts_own(container, hosts::ETC_HOSTS) {
            return Ok(files);
        }
        let aliases = hosts::host_aliases(self.pod).to_vec();
        let host_net = host_network(self.pod);
        let ips = pod_ips.to_vec();
        let path = hosts::etc_hosts_path(&config.root_dir, uid);
        let target = path.clone();
        let written = tokio::task::spawn_blocking(move || {
            let content = if host_net {
                let node = pod_files::read_node_file(std::path::Path::new(pod_files::NODE_HOSTS))?;
                hosts::host_network_hosts(&node, &aliases)
            } else {
                hosts::managed_hosts(&ips, &names, &aliases)
            };
            pod_files::write_pod_file(&target, &content)
        })
        .await;
        match written {
            Ok(result) => result?,
            Err(e) => {
                return Err(PodFileError {
                    what: "write",
                    path,
                    source: std::io::Error::other(e),
                }
                .into())
            }
        }
        files.etc_hosts = Some(path);
        Ok(files)
    }
}
