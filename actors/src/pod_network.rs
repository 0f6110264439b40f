//! [`Networked`]: the container runtime as the pod network sees it, with `--network-plugin=cni`
//! (cri-dockerd's `StopPodSandbox` and `PodSandboxStatus` around its network plugin). A sandbox
//! attached by CNI is detached (`DEL`) before it is stopped, and again before it is removed if
//! that failed, whoever stops or removes it — its pod's worker, container GC, orphan clean-up;
//! its pod IP, which Docker does not know for a `none` network, comes from the attachment.
//! [`sweep`] detaches at start what an earlier run left attached (a sandbox gone, or no longer
//! running).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dockerlet_cni::Cni;
use dockerlet_messages::runtime::{ContainerListing, ContainerRole, ObservedContainer, RuntimeImage, RuntimeState};
use dockerlet_messages::{ContainerId, PodUid};
use dockerlet_metrics::{Metrics, NetworkOperation};
use dockerlet_pod::pod_ips::sort_pod_ips;
use dockerlet_runtime::{
    ContainerRuntime, Containers, CreateSpec, Exec, ExecOutput, Images, RegistryAuth, RuntimeError, RuntimeEvent,
};
use futures::stream::BoxStream;

/// `inner`, with CNI attachments kept in step with the sandboxes.
pub struct Networked {
    inner: Arc<dyn ContainerRuntime>,
    cni: Arc<Cni>,
    metrics: Arc<Metrics>,
    /// Whether the node's IP is IPv6: that family's address is a dual-stack pod's first.
    node_ipv6: bool,
}

impl Networked {
    /// `inner` on the pod network `cni`; each DEL timed in `metrics`; a dual-stack pod's
    /// addresses ordered for a node whose IP is IPv6 when `node_ipv6`.
    pub fn new(inner: Arc<dyn ContainerRuntime>, cni: Arc<Cni>, metrics: Arc<Metrics>, node_ipv6: bool) -> Self {
        Networked {
            inner,
            cni,
            metrics,
            node_ipv6,
        }
    }

    /// Detaches `id` if it is attached: with its namespace while it runs, without once it is
    /// gone (plugins release what they hold by container ID). A failure is logged and kept in
    /// the cache, so the next stop, the removal or the next start's sweep tries again.
    async fn detach(&self, id: &ContainerId, why: &str) {
        if !self.cni.is_attached(&id.0) {
            return;
        }
        let netns = match self.inner.inspect_container(id).await {
            Ok(Some(c)) => c.pid.map(netns_path).unwrap_or_default(),
            _ => String::new(),
        };
        let began = std::time::Instant::now();
        let ok = detach_logged(&self.cni, id, &netns, why).await;
        self.metrics
            .network_operation(NetworkOperation::tear_down_pod, began.elapsed().as_secs_f64(), !ok);
    }
}

/// A running process's network namespace, as cri-dockerd names it for CNI.
pub fn netns_path(pid: u32) -> String {
    format!("/proc/{pid}/ns/net")
}

/// DEL, logged; whether it succeeded (or there was nothing to detach).
async fn detach_logged(cni: &Cni, id: &ContainerId, netns: &str, why: &str) -> bool {
    match cni.del(&id.0, netns).await {
        Ok(true) => {
            tracing::info!(sandbox = %id, reason = why, "pod network detached (CNI DEL)");
            true
        }
        Ok(false) => true,
        Err(e) => {
            tracing::warn!(sandbox = %id, reason = why, error = %e, "CNI DEL failed; tried again later");
            false
        }
    }
}

/// At start: detaches every sandbox this node attached whose container is gone or no longer
/// runs (the agent was stopped between a sandbox's end and its DEL, or between ADD and the
/// container start), and asks the plugins to `CHECK` each one that runs (libcni's
/// `CheckNetworkList`, where the list's version has it): one whose network was broken while the
/// agent was away, or whose ADD the agent never finished (it has no address), is detached and
/// stopped, so its pod gets a new sandbox, as kubelet replaces a sandbox that is not ready.
pub async fn sweep(runtime: &dyn ContainerRuntime, cni: &Cni) {
    for id in cni.attached() {
        let id = ContainerId(id);
        let pid = match runtime.inspect_container(&id).await {
            Ok(Some(c)) if c.state == RuntimeState::Running => c.pid,
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(sandbox = %id, error = %e, "cannot inspect an attached sandbox; left attached");
                continue;
            }
        };
        let Some(pid) = pid else {
            detach_logged(cni, &id, "", "the sandbox no longer runs (found at start)").await;
            continue;
        };
        let netns = netns_path(pid);
        let broken = if cni.pod_ips(&id.0).is_none() {
            // kubelet replaces a sandbox without an IP (`podSandboxChanged`).
            Some("its CNI ADD never finished (the agent stopped during it)".to_string())
        } else {
            cni.check(&id.0, &netns)
                .await
                .err()
                .map(|e| format!("its pod network failed the plugins' CHECK (found at start): {e}"))
        };
        if let Some(why) = broken {
            tracing::warn!(sandbox = %id, reason = %why, "the sandbox is replaced");
            detach_logged(cni, &id, &netns, &why).await;
            tracing::info!(sandbox = %id, reason = %why, "stopping sandbox");
            if let Err(e) = runtime.stop_container(&id, SANDBOX_STOP_GRACE).await {
                tracing::warn!(sandbox = %id, error = %e, "cannot stop a sandbox whose pod network is broken");
            }
        }
    }
}

/// The grace a sandbox (the pause process) gets when the sweep stops it.
const SANDBOX_STOP_GRACE: Duration = Duration::from_secs(2);

#[async_trait]
impl ContainerRuntime for Networked {
    async fn ping(&self) -> Result<(), RuntimeError> {
        self.inner.ping().await
    }

    async fn version(&self) -> Result<String, RuntimeError> {
        self.inner.version().await
    }
}

#[async_trait]
impl Containers for Networked {
    async fn list_node_containers(&self, node: &str) -> Result<Vec<ContainerListing>, RuntimeError> {
        self.inner.list_node_containers(node).await
    }

    async fn list_pod_containers(&self, node: &str, pod_uid: &PodUid) -> Result<Vec<ContainerListing>, RuntimeError> {
        self.inner.list_pod_containers(node, pod_uid).await
    }

    /// A running CNI sandbox's addresses are its attachment's: one of each family, the node
    /// IP's first (kubelet's `sortPodIPs`).
    async fn inspect_container(&self, id: &ContainerId) -> Result<Option<ObservedContainer>, RuntimeError> {
        let mut observed = self.inner.inspect_container(id).await?;
        if let Some(c) = observed.as_mut() {
            if c.role == ContainerRole::Sandbox && !c.host_network && c.ip.is_none() && c.state == RuntimeState::Running
            {
                let ips = self.cni.pod_ips(&id.0).unwrap_or_default();
                let mut sorted = sort_pod_ips(&ips, self.node_ipv6).into_iter().map(|ip| ip.to_string());
                c.ip = sorted.next();
                c.secondary_ip = sorted.next();
            }
        }
        Ok(observed)
    }

    async fn create_container(&self, spec: CreateSpec) -> Result<ContainerId, RuntimeError> {
        self.inner.create_container(spec).await
    }

    async fn start_container(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        self.inner.start_container(id).await
    }

    /// The network first, as cri-dockerd's StopPodSandbox tears the pod down before stopping.
    async fn stop_container(&self, id: &ContainerId, grace: Duration) -> Result<(), RuntimeError> {
        self.detach(id, "sandbox stopped").await;
        self.inner.stop_container(id, grace).await
    }

    async fn remove_container(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        self.detach(id, "sandbox removed").await;
        self.inner.remove_container(id).await
    }

    fn events(&self, node: &str) -> BoxStream<'static, Result<RuntimeEvent, RuntimeError>> {
        self.inner.events(node)
    }
}

#[async_trait]
impl Images for Networked {
    async fn image_present(&self, image: &str) -> Result<bool, RuntimeError> {
        self.inner.image_present(image).await
    }

    async fn image_user(&self, image: &str) -> Result<String, RuntimeError> {
        self.inner.image_user(image).await
    }

    async fn pull_image(&self, image: &str, auth: Option<&RegistryAuth>) -> Result<u64, RuntimeError> {
        self.inner.pull_image(image, auth).await
    }

    async fn ensure_sandbox_image(
        &self,
        configured: Option<&str>,
        auths: &[RegistryAuth],
    ) -> Result<String, RuntimeError> {
        self.inner.ensure_sandbox_image(configured, auths).await
    }

    async fn list_images(&self) -> Result<Vec<RuntimeImage>, RuntimeError> {
        self.inner.list_images().await
    }

    async fn remove_image(&self, image: &RuntimeImage) -> Result<(), RuntimeError> {
        self.inner.remove_image(image).await
    }

    async fn image_ids_in_use(&self) -> Result<std::collections::BTreeSet<String>, RuntimeError> {
        self.inner.image_ids_in_use().await
    }
}

#[async_trait]
impl Exec for Networked {
    async fn exec(&self, id: &ContainerId, cmd: Vec<String>, timeout: Duration) -> Result<ExecOutput, RuntimeError> {
        self.inner.exec(id, cmd, timeout).await
    }
}
