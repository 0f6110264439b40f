//! Starting one container (kubelet's `startContainer`, `pkg/kubelet/kuberuntime/kuberuntime_container.go`)
//! as a pipeline of named steps: the image ([`ImageManager`](super::image_manager::ImageManager)),
//! the create options ([`Starter::prepare`]: host name, env objects, managed files, env, mounts,
//! spec, security, termination message, runtime handler, target namespace), create, start and
//! the postStart hook. Each step's failure is a [`StartError`] variant naming kubelet's waiting
//! reason (`pkg/kubelet/container/sync_result.go`, `pkg/kubelet/images/types.go`).

use dockerlet_messages::debug::EventType;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use dockerlet_host::pod_files::{self, PodFileError};
use dockerlet_messages::runtime::{ContainerRole, ObservedContainer, RuntimeState};
use dockerlet_messages::ContainerId;
use dockerlet_metrics::ContainerType;
use dockerlet_pod::container::{
    container_env, container_spec, env_references, ConfigError, CreateSpec, EnvObjects, PodContext,
};
use dockerlet_pod::hosts::{HostnameError, PodHostname};
use dockerlet_pod::plan::StartAction;
use dockerlet_pod::spec::{host_network, pod_grace, pod_identity};
use dockerlet_pod::status::WaitingReason;
use dockerlet_pod::volume::{Mount, VolumeError};
use dockerlet_runtime::RuntimeError;
use k8s_openapi::api::core::v1::{Container, Pod};

use super::context::SyncContext;
use super::image_manager::ImageError;
use super::outcome::{RuntimeClassError, SyncError, SyncOutcome, WorkerEvent};
use super::pod_cgroup::group_oom_kills;
use super::sandbox::PodSandbox;
use super::teardown::{hook_event, stop_container, Settle, StopTarget};
use dockerlet_probe::{Caller, Outcome, Target};

#[cfg(test)]
mod tests;

/// How long a postStart hook may take: as long as it likes, as kubelet's (its exec has no
/// timeout, its HTTP client none either); a pod deleted meanwhile cancels the sync.
const POST_START_TIMEOUT: Duration = dockerlet_probe::MAX_TIMEOUT;

/// Why the Secrets and ConfigMaps a container's env refers to could not be read; the container
/// waits with CreateContainerConfigError and the next sync tries again.
#[derive(Debug, thiserror::Error)]
pub enum EnvObjectsError {
    /// A standalone node has no API server to read them from.
    #[error("secrets and configmaps in env need the API server (--kubeconfig)")]
    NeedsApiServer,
    /// The API server could not be asked (or its Services have not been listed yet).
    #[error(transparent)]
    Api(#[from] dockerlet_kube::ApiError),
}

/// Why a container's security context could not be set up; the container waits with
/// CreateContainerConfigError and the next sync tries again.
#[derive(Debug, thiserror::Error)]
pub enum SecuritySetupError {
    /// The security context cannot be honoured (runAsNonRoot, a bad profile, …).
    #[error(transparent)]
    Security(#[from] dockerlet_pod::security::SecurityError),
    /// The image's user could not be inspected.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The Localhost seccomp profile could not be read.
    #[error(transparent)]
    Profile(#[from] dockerlet_host::security::SeccompProfileError),
    /// Reading the profile on the blocking pool did not finish.
    #[error("reading the seccomp profile did not finish: {0}")]
    Unfinished(#[source] tokio::task::JoinError),
}

/// Why a container did not start. Each variant is one step of the start and names kubelet's
/// waiting reason ([`StartError::reason`]); its text is the waiting message.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The image is not there and could not be pulled (ErrImagePull, ImagePullBackOff,
    /// InvalidImageName, ErrImageNeverPull, ImageInspectError).
    #[error(transparent)]
    Image(#[from] ImageError),
    /// The pod's kernel host name cannot be formed (CreateContainerConfigError).
    #[error(transparent)]
    Hostname(HostnameError),
    /// The Secrets, ConfigMaps or Services of the env could not be read
    /// (CreateContainerConfigError).
    #[error(transparent)]
    EnvObjects(#[from] EnvObjectsError),
    /// The pod's `/etc/hosts` or `resolv.conf` could not be written (CreateContainerConfigError).
    #[error(transparent)]
    ManagedFiles(SyncError),
    /// The env cannot be formed (a missing key, a bad reference: CreateContainerConfigError).
    #[error(transparent)]
    Env(ConfigError),
    /// The volume mounts cannot be prepared (CreateContainerConfigError).
    #[error(transparent)]
    Mounts(VolumeError),
    /// The create options cannot be formed (CreateContainerConfigError).
    #[error(transparent)]
    Spec(ConfigError),
    /// The security context cannot be honoured (CreateContainerConfigError), or its Localhost
    /// seccomp profile not read (CreateContainerError: kubelet's runtime reads it).
    #[error(transparent)]
    Security(#[from] SecuritySetupError),
    /// The termination message file could not be made (CreateContainerConfigError).
    #[error(transparent)]
    TerminationMessage(PodFileError),
    /// The pod's RuntimeClass is not known (CreateContainerConfigError).
    #[error(transparent)]
    RuntimeClass(RuntimeClassError),
    /// An ephemeral container's `targetContainerName` is not running
    /// (CreateContainerConfigError).
    #[error("target container {target:?} is not running")]
    TargetNotRunning {
        /// `targetContainerName`.
        target: String,
    },
    /// The sandbox stopped after the sync looked (CreateContainerError): nothing is started
    /// into it; the next sync makes a new one.
    #[error("the pod sandbox {sandbox} is not running; the container waits for a new one")]
    SandboxNotRunning {
        /// The sandbox's container ID.
        sandbox: String,
    },
    /// Docker refused the create (CreateContainerError).
    #[error(transparent)]
    Create(RuntimeError),
    /// Docker refused the start (RunContainerError); the sync fails too.
    #[error(transparent)]
    Run(RuntimeError),
    /// The postStart hook failed and the container was killed (PostStartHookError).
    #[error("PostStartHook failed: {message}")]
    PostStartHook {
        /// The hook's failure, as the action reported it.
        message: String,
    },
}

impl StartError {
    /// kubelet's waiting reason for the container.
    pub fn reason(&self) -> &'static str {
        match self {
            StartError::Image(e) => e.reason(),
            StartError::Security(SecuritySetupError::Profile(_))
            | StartError::Create(_)
            | StartError::SandboxNotRunning { .. } => "CreateContainerError",
            StartError::Run(_) => "RunContainerError",
            StartError::PostStartHook { .. } => "PostStartHookError",
            StartError::Hostname(_)
            | StartError::EnvObjects(_)
            | StartError::ManagedFiles(_)
            | StartError::Env(_)
            | StartError::Mounts(_)
            | StartError::Spec(_)
            | StartError::Security(_)
            | StartError::TerminationMessage(_)
            | StartError::RuntimeClass(_)
            | StartError::TargetNotRunning { .. } => "CreateContainerConfigError",
        }
    }
}

/// Starts the containers of one sync; what happens goes to its outcome.
pub(super) struct Starter<'a> {
    pub(super) sync: &'a SyncContext,
    pub(super) pod: &'a Arc<Pod>,
    pub(super) outcome: &'a mut SyncOutcome,
}

/// The container a [`StartAction`] names, and an ephemeral container's target.
fn container_of<'p>(pod: &'p Pod, start: &StartAction) -> Option<(Cow<'p, Container>, Option<String>)> {
    let spec = pod.spec.as_ref();
    let named = |c: &&Container| c.name == start.name;
    match start.role {
        ContainerRole::Init => spec
            .and_then(|s| s.init_containers.iter().flatten().find(named))
            .map(|c| (Cow::Borrowed(c), None)),
        ContainerRole::Ephemeral => {
            dockerlet_pod::spec::ephemeral_target(pod, &start.name).map(|(c, target)| (Cow::Owned(c), target))
        }
        _ => spec
            .and_then(|s| s.containers.iter().find(named))
            .map(|c| (Cow::Borrowed(c), None)),
    }
}

impl Starter<'_> {
    /// Start the container of `start` in `sandbox`; a failure is the container's waiting reason
    /// (and, for a start Docker refused, an error of the sync).
    pub(super) async fn start(
        &mut self,
        start: &StartAction,
        sandbox: &ObservedContainer,
        observed: &[ObservedContainer],
    ) {
        let pod = self.pod;
        let Some((container, target)) = container_of(pod, start) else {
            return;
        };
        let container = container.as_ref();
        if let Err(error) = self.run(start, container, target, sandbox, observed).await {
            self.failed(container, error);
        }
    }

    /// The steps of a start, in kubelet's order.
    async fn run(
        &mut self,
        start: &StartAction,
        container: &Container,
        target: Option<String>,
        sandbox: &ObservedContainer,
        observed: &[ObservedContainer],
    ) -> Result<(), StartError> {
        self.sync.images.ensure_image(self.pod, container, self.outcome).await?;
        let config = &self.sync.config;
        // The pod's addresses: the node's for host network, else the sandbox's (two on a
        // dual-stack pod network, the node IP's family first).
        let pod_ips: Vec<String> = if host_network(self.pod) {
            vec![config.host_ip.clone()]
        } else {
            sandbox.ip.iter().chain(&sandbox.secondary_ip).cloned().collect()
        };
        let pod_ip = pod_ips.first().cloned().unwrap_or_default();
        let mut create = self.prepare(start, container, &pod_ips, sandbox).await?;
        if let Some(target) = target.filter(|_| create.pid_mode.is_none()) {
            create.pid_mode = Some(target_pid_mode(&target, observed)?);
        }
        // kubelet starts nothing in a sandbox that is not ready (`computePodActions`); the
        // plan was made from a view that may be a moment old (and an image pull long), so the
        // pod cache — which the PLEG's `die` events keep current — is asked once more.
        if self.sync.cache.state_of(&sandbox.id) == Some(RuntimeState::Exited) {
            tracing::info!(container = %container.name, sandbox = %sandbox.id, "not starting the container: its sandbox stopped; the next sync makes a new one");
            return Err(StartError::SandboxNotRunning {
                sandbox: sandbox.id.to_string(),
            });
        }
        let id = self.sync.create(create).await.map_err(StartError::Create)?;
        self.outcome.events.push(WorkerEvent::container(
            EventType::Normal,
            &container.name,
            "Created",
            format!("Created container {}", container.name),
        ));
        self.link_logs(&container.name, start.attempt, &id).await;
        let started = self.sync.runtime.start_container(&id).await;
        let kind = match start.role {
            ContainerRole::Init => ContainerType::init_container,
            ContainerRole::Ephemeral => ContainerType::ephemeral_container,
            _ => ContainerType::container,
        };
        self.sync.config.metrics.container_started(kind, started.is_ok());
        // One inspect, started or not: the cache (and so the status) holds the result.
        self.sync.observe(&id, &mut self.outcome.unobserved).await;
        if let Err(e) = started {
            // As kubelet's: the container waits with RunContainerError (its instance stays
            // Created with exit code 128, the last state) and the sync fails, so its error
            // back-off brings the next sync, where the dead container restarts under its
            // own back-off, not the periodic resync.
            tracing::warn!(container = %container.name, id = %id, error = %e, "container failed to start");
            return Err(StartError::Run(e));
        }
        self.outcome.events.push(WorkerEvent::container(
            EventType::Normal,
            &container.name,
            "Started",
            format!("Started container {}", container.name),
        ));
        self.outcome.flush_events();
        let cgroup_parent = self.sync.config.cgroup_naming.parent_of(self.pod);
        group_oom_kills(self.sync, cgroup_parent.as_deref(), &id).await;
        self.post_start(container, &id, &pod_ip).await
    }

    /// The create options of the container (kubelet's generateContainerConfig and
    /// GenerateRunContainerOptions).
    async fn prepare(
        &self,
        start: &StartAction,
        container: &Container,
        pod_ips: &[String],
        sandbox: &ObservedContainer,
    ) -> Result<CreateSpec, StartError> {
        let config = &self.sync.config;
        // kubelet's GenerateRunContainerOptions works out the pod's kernel hostname for every
        // container first: a hostNetwork pod whose FQDN is too long fails here.
        let names = PodHostname::of(self.pod, &config.dns.domain)
            .and_then(|n| n.kernel_hostname(self.pod).map(|_| n))
            .map_err(StartError::Hostname)?;
        let env_objects = self.env_objects(container).await?;
        let managed_files = self
            .sandbox()
            .managed_files(container, pod_ips, names)
            .await
            .map_err(StartError::ManagedFiles)?;
        let cgroup_parent = config.cgroup_naming.parent_of(self.pod);
        let ctx = PodContext {
            pod: self.pod,
            node_name: &config.node_name,
            host_ip: &config.host_ip,
            pod_ip: pod_ips.first().map_or("", String::as_str),
            pod_ips,
            sandbox_id: &sandbox.id,
            node_memory_bytes: config.node_memory_bytes,
            env_objects: &env_objects,
            allocatable: &config.allocatable,
            managed_files: &managed_files,
            cgroup_parent: cgroup_parent.as_deref(),
        };
        // The env first: subPathExpr expands with it.
        let env = container_env(&ctx, container).map_err(StartError::Env)?;
        let mounts = self.prepare_mounts(container, &env).await.map_err(StartError::Mounts)?;
        let mut create = container_spec(&ctx, container, start.role, start.attempt, start.backoff_step, &mounts)
            .map_err(StartError::Spec)?;
        create.oom_score_adj = create.oom_score_adj.map(|v| v.max(config.min_oom_score_adj));
        // kubelet's `--cpu-cfs-quota=false`: no quota, only the shares
        // (`pkg/kubelet/kuberuntime/kuberuntime_container_linux.go`, `if m.cpuCFSQuota`).
        if !config.cpu_cfs_quota {
            (create.cpu_quota, create.cpu_period) = (None, None);
        }
        // kubelet hands a Localhost seccomp profile's path to the runtime, whose failure to
        // read it is a CreateContainerError; the rest are kubelet's own checks.
        self.apply_security(&mut create, container, &sandbox.id).await?;
        let bind = self
            .termination_message_bind(container, start.attempt)
            .await
            .map_err(StartError::TerminationMessage)?;
        create.binds.extend(bind);
        create.runtime = self
            .sandbox()
            .runtime_handler()
            .await
            .map_err(StartError::RuntimeClass)?;
        Ok(create)
    }

    fn sandbox(&self) -> PodSandbox<'_> {
        PodSandbox {
            sync: self.sync,
            pod: self.pod,
        }
    }

    /// The container waits with the error's reason; kubelet's `Failed` event says
    /// `Error: <message>` (`Error: <reason>` for an image error, as kubelet's startContainer).
    /// A postStart failure has had its own events; a start Docker refused also fails the sync.
    fn failed(&mut self, container: &Container, error: StartError) {
        let waiting = match &error {
            StartError::Image(e) => e.waiting(),
            other => WaitingReason {
                reason: other.reason().to_string(),
                message: other.to_string(),
            },
        };
        let event = match &error {
            StartError::PostStartHook { .. } => None,
            StartError::Image(_) => Some(format!("Error: {}", waiting.reason)),
            _ => Some(format!("Error: {}", waiting.message)),
        };
        if let Some(message) = event {
            self.outcome.events.push(WorkerEvent::container(
                EventType::Warning,
                &container.name,
                "Failed",
                message,
            ));
        }
        self.outcome.waiting.insert(container.name.clone(), waiting);
        match error {
            StartError::Run(e) => self.outcome.errors.push(e.into()),
            StartError::Image(_) | StartError::PostStartHook { .. } => {}
            _ => self.outcome.start_failed = true,
        }
    }

    /// A new file for this instance's termination message, and its bind mount at the
    /// container's `terminationMessagePath` (none without a path). One file per instance, as
    /// kubelet's, so a restart starts from an empty message.
    async fn termination_message_bind(
        &self,
        container: &Container,
        attempt: u32,
    ) -> Result<Option<String>, PodFileError> {
        let dockerlet_pod::spec::PodIdentity { uid, .. } = pod_identity(self.pod);
        let salt = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let file = dockerlet_pod::container::termination_message_file(
            &self.sync.config.root_dir,
            uid,
            &container.name,
            &format!("{attempt}-{salt:08x}"),
        );
        let Some(bind) = dockerlet_pod::container::termination_message_bind(container, &file) else {
            return Ok(None);
        };
        let target = file.clone();
        match tokio::task::spawn_blocking(move || pod_files::create_termination_message_file(&target)).await {
            Ok(created) => created.map(|()| Some(bind)),
            Err(e) => Err(PodFileError {
                what: "create",
                path: file,
                source: std::io::Error::other(e),
            }),
        }
    }

    /// The new instance's log files (`--pod-logs-dir`, `/var/log/containers`), off the actor
    /// thread. Without them the container still runs and `kubectl logs` works: a failure is
    /// logged, not the container's.
    async fn link_logs(&self, container: &str, attempt: u32, id: &ContainerId) {
        let Some(links) = self.sync.config.log_links.clone() else {
            return;
        };
        let dockerlet_pod::spec::PodIdentity { name, namespace, uid } = dockerlet_pod::spec::pod_identity(self.pod);
        let (name, namespace, uid) = (name.to_string(), namespace.to_string(), uid.to_string());
        let (container, id) = (container.to_string(), id.0.clone());
        let linked = tokio::task::spawn_blocking(move || {
            links.link(&dockerlet_host::pod_logs::Instance {
                namespace: &namespace,
                pod: &name,
                uid: &uid,
                container: &container,
                attempt,
                id: &id,
            })
        })
        .await;
        match linked {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "no container log file"),
            Err(e) => tracing::warn!(error = %e, "no container log file"),
        }
    }

    /// Fill the container's security fields: the image's user (one inspect per image) when
    /// runAsNonRoot or runAsGroup needs it, a Localhost seccomp profile read off the blocking
    /// pool. An error is the container's CreateContainerConfigError.
    async fn apply_security(
        &self,
        create: &mut dockerlet_pod::container::CreateSpec,
        container: &Container,
        sandbox_id: &ContainerId,
    ) -> Result<(), SecuritySetupError> {
        use dockerlet_pod::security;
        let config = &self.sync.config;
        let image_user = if security::needs_image_user(self.pod, container) {
            let image = container.image.clone().unwrap_or_default();
            Some(self.sync.runtime.image_user(&image).await?)
        } else {
            None
        };
        let profile = match security::localhost_seccomp_profile(self.pod, container)? {
            Some(name) => {
                let path = security::seccomp_profile_path(&config.root_dir, &name)?;
                let read = tokio::task::spawn_blocking(move || dockerlet_host::security::read_seccomp_profile(&path));
                Some(read.await.map_err(SecuritySetupError::Unfinished)??)
            }
            None => None,
        };
        let input = security::SecurityInput {
            pod: self.pod,
            container,
            sandbox_id,
            image_user: image_user.as_deref(),
            seccomp_profile: profile.as_deref(),
            config: &config.security,
        };
        Ok(security::apply_container(create, &input)?)
    }

    /// Resolve the container's volumeMounts and create what they need on the node (emptyDir
    /// directories and tmpfs, volume directories, hostPath type checks, subPath binds) off the
    /// actor thread.
    async fn prepare_mounts(&self, container: &Container, env: &[(String, String)]) -> Result<Vec<Mount>, VolumeError> {
        let config = &self.sync.config;
        let mounts = dockerlet_pod::volume::mounts(&config.root_dir, self.pod, container, env, &config.allocatable)?;
        let ownership = dockerlet_pod::volume::ownership(self.pod);
        tokio::task::spawn_blocking(move || dockerlet_host::volume_dirs::prepare(&mounts, ownership).map(|()| mounts))
            .await
            .unwrap_or_else(|e| {
                Err(VolumeError {
                    field: "volumeMounts".to_string(),
                    reason: format!("volume set-up did not finish: {e}"),
                })
            })
    }

    /// Read the Secrets and ConfigMaps the container's env refers to (API-server mode only;
    /// static pods may not reference them).
    async fn env_objects(&self, container: &Container) -> Result<EnvObjects, EnvObjectsError> {
        let (secrets, maps) = env_references(container);
        let mut objects = EnvObjects {
            services: self.service_env().await?,
            ..EnvObjects::default()
        };
        if secrets.is_empty() && maps.is_empty() {
            return Ok(objects);
        }
        let Some(api) = &self.sync.config.api else {
            return Err(EnvObjectsError::NeedsApiServer);
        };
        let dockerlet_pod::spec::PodIdentity { namespace, .. } = pod_identity(self.pod);
        for name in secrets {
            let data = api.secret_data(namespace, &name).await?;
            objects.secrets.insert(name, data);
        }
        for name in maps {
            let data = api.config_map_data(namespace, &name).await?;
            objects.config_maps.insert(name, data);
        }
        Ok(objects)
    }

    /// The service link variables (kubelet's getServiceEnvVarMap) from the API's Service cache;
    /// none on a standalone node. An API pod waits for the cache's first list, as in kubelet; a
    /// static pod takes what the cache has.
    async fn service_env(&self) -> Result<Vec<(String, String)>, EnvObjectsError> {
        let Some(api) = &self.sync.config.api else {
            return Ok(Vec::new());
        };
        let from_api = dockerlet_pod::annotations::from_api(self.pod);
        let services = api.services(from_api).await?;
        let dockerlet_pod::spec::PodIdentity { namespace, .. } = pod_identity(self.pod);
        Ok(dockerlet_pod::envvars::service_env(
            services.iter().map(|s| &**s),
            namespace,
            dockerlet_pod::envvars::enable_service_links(self.pod),
        ))
    }

    /// Run the postStart hook; if it fails, kill the container (kubelet's FailedPostStartHook):
    /// the restart policy and back-off then apply.
    async fn post_start(&mut self, container: &Container, id: &ContainerId, pod_ip: &str) -> Result<(), StartError> {
        let Some(hook) = container.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) else {
            return Ok(());
        };
        let Ok(action) = dockerlet_pod::action::hook_action("lifecycle.postStart", hook, container) else {
            return Ok(());
        };
        let target = Target {
            runtime: self.sync.runtime.clone(),
            container_id: id.clone(),
            pod_ip: Some(pod_ip.to_string()),
            timeout: POST_START_TIMEOUT,
        };
        let outcome = dockerlet_probe::run(&action, &target, Caller::Lifecycle).await;
        let event = hook_event(self.sync, &container.name, "PostStartHook", &outcome);
        self.outcome.events.extend(event);
        let Outcome::Failure(message) = outcome else {
            return Ok(());
        };
        // kubelet kills it (a Killing event saying why) and it waits with PostStartHookError
        // until the next sync restarts it under its restart policy and back-off.
        self.outcome.events.push(WorkerEvent::container(
            EventType::Normal,
            &container.name,
            "Killing",
            "FailedPostStartHook".to_string(),
        ));
        self.outcome.flush_events();
        let grace = pod_grace(self.pod);
        let stop = StopTarget {
            id,
            name: &container.name,
            pod_ip: target.pod_ip,
            turn: None,
            reason: "its postStart hook failed (FailedPostStartHook)",
        };
        let unobserved = &mut self.outcome.unobserved;
        let (result, event) = stop_container(self.sync, Some(self.pod), stop, grace, Settle::Observe, unobserved).await;
        self.outcome.events.extend(event);
        if let Err(e) = result {
            self.outcome.errors.push(e.into());
        }
        Err(StartError::PostStartHook { message })
    }
}

/// An ephemeral container's `targetContainerName`: it joins that container's process
/// namespace (CRI's NamespaceMode TARGET), which must be running.
fn target_pid_mode(target: &str, observed: &[ObservedContainer]) -> Result<String, StartError> {
    observed
        .iter()
        .find(|c| c.name == target && c.role != ContainerRole::Sandbox && c.state == RuntimeState::Running)
        .map(|t| format!("container:{}", t.id))
        .ok_or_else(|| StartError::TargetNotRunning {
            target: target.to_string(),
        })
}
