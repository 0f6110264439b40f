//! From a pod spec to Docker [`CreateSpec`]s: the sandbox and each container (dockershim's
//! `docker_sandbox.go` and `docker_container.go`, kept by cri-dockerd). Pure functions; errors
//! here become a container's `CreateContainerConfigError`.

use std::collections::{BTreeMap, HashMap};

use dockerlet_messages::runtime::ContainerRole;
use dockerlet_messages::ContainerId;
use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};

pub use crate::expansion::{expand, expand_with};
use crate::hosts::{mounts_own, PodHostname, ETC_HOSTS, ETC_RESOLV_CONF};
use crate::labels;
use crate::quantity::parse_quantity;
use crate::resource::{container_resource_value, resource_value, Allocatable};
use crate::spec::{container_hash, host_network, pod_identity, qos_class};
use crate::volume::Mount;

/// CFS period in microseconds (kubelet's `cpuCFSQuotaPeriod` default, 100 ms).
const CPU_PERIOD_US: i64 = 100_000;
/// Smallest CFS quota the kernel accepts.
const MIN_CPU_QUOTA_US: i64 = 1_000;
/// CPU shares bounds (cgroup v1).
const MIN_SHARES: i64 = 2;
const MAX_SHARES: i64 = 262_144;
/// OOM score adjustments (`pkg/kubelet/qos/policy.go`).
const SANDBOX_OOM_SCORE_ADJ: i64 = -998;
const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
const BESTEFFORT_OOM_SCORE_ADJ: i64 = 1000;

/// Which network namespace a container gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkMode {
    /// Docker's default bridge network (sandboxes of ordinary pods).
    Bridge,
    /// The host's network namespace (`hostNetwork: true`).
    Host,
    /// Join another container's namespace (app containers join their sandbox).
    Container(ContainerId),
}

/// A published port: `host_ip:host_port` on the node → `container_port/protocol`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortBinding {
    /// Port inside the pod.
    pub container_port: u16,
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
    /// Port on the node.
    pub host_port: u16,
    /// Address on the node; empty for all.
    pub host_ip: String,
}

/// Everything needed to create one container, runtime-neutral.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateSpec {
    /// Docker container name (`k8s_…`).
    pub name: String,
    /// Image reference.
    pub image: String,
    /// Replaces the image ENTRYPOINT when set (`command`).
    pub entrypoint: Option<Vec<String>>,
    /// Replaces the image CMD when set (`args`).
    pub cmd: Option<Vec<String>>,
    /// `NAME=value` pairs.
    pub env: Vec<String>,
    /// Working directory, when set.
    pub working_dir: Option<String>,
    /// Labels (identity of the container, see [`labels`]).
    pub labels: BTreeMap<String, String>,
    /// Network namespace.
    pub network: Option<NetworkMode>,
    /// IPC namespace: `shareable` for sandboxes, `container:<id>` for app containers.
    pub ipc_mode: Option<String>,
    /// Hostname (sandboxes only; joined containers inherit it).
    pub hostname: Option<String>,
    /// Ports published on the node (sandboxes only).
    pub ports: Vec<PortBinding>,
    /// Bind mounts, `host:container[:ro]`.
    pub binds: Vec<String>,
    /// Memory limit in bytes.
    pub memory: Option<i64>,
    /// Memory + swap limit in bytes (Docker's `MemorySwap`): the memory limit, so a limited
    /// container gets no swap, as kubelet's default `NoSwap` behaviour (cgroup v1
    /// `memory.memsw.limit_in_bytes`; v2 `memory.swap.max` 0). Docker drops it with a warning
    /// where the kernel has no swap accounting.
    pub memory_swap: Option<i64>,
    /// Relative CPU weight (cgroup v1 shares).
    pub cpu_shares: Option<i64>,
    /// CFS quota in microseconds per period.
    pub cpu_quota: Option<i64>,
    /// CFS period in microseconds.
    pub cpu_period: Option<i64>,
    /// OOM score adjustment.
    pub oom_score_adj: Option<i64>,
    /// Allocate a TTY (`tty: true`).
    pub tty: bool,
    /// Keep stdin open (`stdin: true`).
    pub stdin: bool,
    /// Close stdin when the first attached client closes it (`stdinOnce: true`, Docker's
    /// `StdinOnce`).
    pub stdin_once: bool,
    /// `User`: `uid`, `uid:gid`, or the image's user with a group (`runAsUser`, `runAsGroup`);
    /// none keeps the image's.
    pub user: Option<String>,
    /// Supplementary groups (`fsGroup`, then `supplementalGroups`).
    pub group_add: Vec<String>,
    /// Capabilities added (`CAP_…` or `ALL`).
    pub cap_add: Vec<String>,
    /// Capabilities dropped (`CAP_…` or `ALL`).
    pub cap_drop: Vec<String>,
    /// `privileged: true`.
    pub privileged: bool,
    /// `readOnlyRootFilesystem: true`.
    pub read_only_rootfs: bool,
    /// Docker security options: `seccomp=…`, `apparmor=…`, `label=…`, `no-new-privileges`.
    pub security_opt: Vec<String>,
    /// Namespaced sysctls (sandboxes only: the containers join its namespaces).
    pub sysctls: BTreeMap<String, String>,
    /// PID namespace: `host` (`hostPID`) or `container:<sandbox>` (`shareProcessNamespace`).
    pub pid_mode: Option<String>,
    /// Paths masked in the container; `Some(empty)` unmasks all (`procMount: Unmasked`), none
    /// keeps Docker's defaults.
    pub masked_paths: Option<Vec<String>>,
    /// Paths mounted read-only; as [`CreateSpec::masked_paths`].
    pub readonly_paths: Option<Vec<String>>,
    /// Docker's `CgroupParent`: the pod cgroup (`crate::cgroup::CgroupNaming::parent_of`), the
    /// same for the sandbox and every container; none for Docker's default.
    pub cgroup_parent: Option<String>,
    /// The signal that stops it (`lifecycle.stopSignal`, Docker's `StopSignal`); none for the
    /// image's.
    pub stop_signal: Option<String>,
    /// Docker's `Runtime` (an OCI runtime configured in the engine): the handler of the pod's
    /// RuntimeClass, the same for the sandbox and every container; none for the engine's
    /// default.
    pub runtime: Option<String>,
}

/// Why a container's config could not be built (reason `CreateContainerConfigError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// An env var source dockerlet cannot resolve for this pod.
    #[error("env {name}: {reason}")]
    UnsupportedEnv {
        /// Variable name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A ConfigMap or Secret an env var needs, or its key, that is not there (non-optional), in
    /// kubelet's words: `configmap "c" not found`, `couldn't find key k in ConfigMap ns/c`.
    #[error("{0}")]
    MissingEnvSource(String),
    /// An invalid probe or lifecycle hook.
    #[error(transparent)]
    Probe(#[from] crate::field::FieldError),
    /// A volume or volumeMount that cannot be set up.
    #[error(transparent)]
    Volume(#[from] crate::volume::VolumeError),
    /// A resource quantity that does not parse.
    #[error("resources.{field}: invalid quantity {value:?}")]
    BadQuantity {
        /// `limits.memory`, …
        field: String,
        /// The text.
        value: String,
    },
}

/// Facts about the pod's runtime surroundings that container configs depend on.
#[derive(Debug, Clone)]
pub struct PodContext<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// This node's name.
    pub node_name: &'a str,
    /// The node's IP (`status.hostIP`).
    pub host_ip: &'a str,
    /// The pod's IP (`status.podIP`); the host IP for host-network pods.
    pub pod_ip: &'a str,
    /// The sandbox the containers join.
    pub sandbox_id: &'a ContainerId,
    /// Node memory capacity in bytes (for Burstable OOM score adjustment).
    pub node_memory_bytes: i64,
    /// Secrets and ConfigMaps the container's env refers to, read from the API beforehand.
    pub env_objects: &'a EnvObjects,
    /// The node's allocatable resources: env `resourceFieldRef` limits default to them.
    pub allocatable: &'a Allocatable,
    /// The files the agent writes for the pod and mounts into every container.
    pub managed_files: &'a ManagedFiles,
    /// The pod cgroup every container goes in (`CgroupParent`); none for Docker's default.
    pub cgroup_parent: Option<&'a str>,
}

/// The node files the agent keeps for a pod (kubelet's `etc-hosts`, and the pod's
/// resolv.conf), bind-mounted into every container but the sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedFiles {
    /// `<pod dir>/etc-hosts`, mounted at `/etc/hosts` unless the container mounts its own
    /// there; none before the pod has an IP.
    pub etc_hosts: Option<std::path::PathBuf>,
    /// `<pod dir>/resolv.conf`, mounted at `/etc/resolv.conf` unless the container mounts its
    /// own there.
    pub resolv_conf: Option<std::path::PathBuf>,
}

impl ManagedFiles {
    /// The bind mounts of these files into `container`.
    fn binds(&self, container: &Container) -> Vec<String> {
        [(&self.etc_hosts, ETC_HOSTS), (&self.resolv_conf, ETC_RESOLV_CONF)]
            .into_iter()
            .filter_map(|(host, target)| {
                let host = host.as_ref()?;
                (!mounts_own(container, target)).then(|| format!("{}:{target}", host.display()))
            })
            .collect()
    }
}

/// A container instance's termination message file on the node (kubelet's
/// `<pod dir>/containers/<container>/<instance>`): made empty and writable by anyone before the
/// instance is created, bind-mounted at its `terminationMessagePath`.
pub fn termination_message_file(
    root: &std::path::Path,
    uid: &str,
    container: &str,
    instance: &str,
) -> std::path::PathBuf {
    crate::volume::pod_dir(root, uid)
        .join("containers")
        .join(container)
        .join(instance)
}

/// The bind mount of an instance's termination message file `host` at the container's
/// `terminationMessagePath`; none when it has no path, or mounts a volume there itself.
pub fn termination_message_bind(container: &Container, host: &std::path::Path) -> Option<String> {
    let path = container
        .termination_message_path
        .as_deref()
        .filter(|p| !p.is_empty())?;
    (!mounts_own(container, path.trim_end_matches('/'))).then(|| format!("{}:{path}", host.display()))
}

/// The data of the Secrets and ConfigMaps a container's env refers to; `None` for one that does
/// not exist.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnvObjects {
    /// Secret data by secret name.
    pub secrets: HashMap<String, Option<BTreeMap<String, String>>>,
    /// ConfigMap data by name.
    pub config_maps: HashMap<String, Option<BTreeMap<String, String>>>,
    /// The service link variables (`crate::envvars::service_env`): before the container's
    /// own env, which overrides them.
    pub services: Vec<(String, String)>,
}

/// The Secrets and ConfigMaps a container's env and envFrom refer to, as (secrets, configMaps).
pub fn env_references(container: &Container) -> (Vec<String>, Vec<String>) {
    let mut secrets = Vec::new();
    let mut maps = Vec::new();
    for var in container.env.iter().flatten() {
        if let Some(s) = var.value_from.as_ref().and_then(|v| v.secret_key_ref.as_ref()) {
            secrets.push(s.name.clone());
        }
        if let Some(c) = var.value_from.as_ref().and_then(|v| v.config_map_key_ref.as_ref()) {
            maps.push(c.name.clone());
        }
    }
    for from in container.env_from.iter().flatten() {
        if let Some(s) = &from.secret_ref {
            secrets.push(s.name.clone());
        }
        if let Some(c) = &from.config_map_ref {
            maps.push(c.name.clone());
        }
    }
    secrets.sort();
    secrets.dedup();
    maps.sort();
    maps.dedup();
    (secrets, maps)
}

fn identity_labels(pod: &Pod, node_name: &str, container: &str, attempt: u32) -> BTreeMap<String, String> {
    let crate::spec::PodIdentity { name, namespace, uid } = pod_identity(pod);
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    BTreeMap::from([
        (labels::POD_NAME.to_string(), name.to_string()),
        (labels::POD_NAMESPACE.to_string(), namespace.to_string()),
        (labels::POD_UID.to_string(), uid.to_string()),
        (labels::CONTAINER_NAME.to_string(), container.to_string()),
        (labels::RESTART_COUNT.to_string(), attempt.to_string()),
        (labels::TERMINATION_GRACE.to_string(), grace.to_string()),
        (labels::NODE.to_string(), node_name.to_string()),
    ])
}

/// The sandbox (pause) container of `attempt`, in the pod cgroup `cgroup_parent`.
pub fn sandbox_spec(pod: &Pod, node_name: &str, image: &str, attempt: u32, cgroup_parent: Option<&str>) -> CreateSpec {
    let crate::spec::PodIdentity { name, namespace, uid } = pod_identity(pod);
    let host_net = host_network(pod);
    let mut l = pod.metadata.labels.clone().unwrap_or_default();
    l.extend(identity_labels(pod, node_name, labels::SANDBOX_CONTAINER_NAME, attempt));
    l.insert(labels::DOCKER_TYPE.to_string(), "podsandbox".to_string());
    l.insert(labels::HOST_NETWORK.to_string(), host_net.to_string());
    let spec = pod.spec.clone().unwrap_or_default();
    let ports = if host_net {
        Vec::new()
    } else {
        spec.containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| {
                let host_port = u16::try_from(p.host_port?).ok().filter(|p| *p > 0)?;
                Some(PortBinding {
                    container_port: u16::try_from(p.container_port).ok()?,
                    protocol: p.protocol.as_deref().unwrap_or("TCP").to_lowercase(),
                    host_port,
                    host_ip: p.host_ip.clone().unwrap_or_default(),
                })
            })
            .collect()
    };
    CreateSpec {
        name: labels::container_name(labels::SANDBOX_CONTAINER_NAME, name, namespace, uid, attempt),
        image: image.to_string(),
        labels: l,
        network: Some(if host_net {
            NetworkMode::Host
        } else {
            NetworkMode::Bridge
        }),
        ipc_mode: Some(
            if spec.host_ipc == Some(true) {
                "host"
            } else {
                "shareable"
            }
            .to_string(),
        ),
        // The agent sets the pod's full hostname (with the cluster domain) before creating it.
        hostname: (!host_net).then(|| {
            PodHostname::of(pod, "").map_or_else(
                |_| {
                    name.chars()
                        .take(63)
                        .collect::<String>()
                        .trim_end_matches(['-', '.'])
                        .to_string()
                },
                |n| n.hostname,
            )
        }),
        ports,
        cpu_shares: Some(MIN_SHARES),
        oom_score_adj: Some(SANDBOX_OOM_SCORE_ADJ),
        cgroup_parent: cgroup_parent.map(str::to_string),
        ..Default::default()
    }
}

/// One app or init container joined to the sandbox.
pub fn container_spec(
    ctx: &PodContext<'_>,
    container: &Container,
    role: ContainerRole,
    attempt: u32,
    backoff_step: u32,
    mounts: &[Mount],
) -> Result<CreateSpec, ConfigError> {
    let crate::spec::PodIdentity { name, namespace, uid } = pod_identity(ctx.pod);
    let mut l = identity_labels(ctx.pod, ctx.node_name, &container.name, attempt);
    l.insert(labels::DOCKER_TYPE.to_string(), "container".to_string());
    let role_label = match role {
        ContainerRole::Init => "init",
        ContainerRole::Ephemeral => "ephemeral",
        _ => "app",
    };
    l.insert(labels::ROLE.to_string(), role_label.to_string());
    l.insert(labels::CONTAINER_HASH.to_string(), container_hash(container));
    l.insert(labels::BACKOFF_STEP.to_string(), backoff_step.to_string());
    l.insert(labels::SANDBOX_ID.to_string(), ctx.sandbox_id.0.clone());
    if let Some(path) = container.termination_message_path.as_deref().filter(|p| !p.is_empty()) {
        l.insert(labels::TERMINATION_MESSAGE_PATH.to_string(), path.to_string());
        l.insert(
            labels::TERMINATION_MESSAGE_POLICY.to_string(),
            container
                .termination_message_policy
                .clone()
                .unwrap_or_else(|| "File".to_string()),
        );
    }

    let env = container_env(ctx, container)?;
    let env_map: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let expand_all = |items: &Option<Vec<String>>| {
        items
            .as_ref()
            .map(|v| v.iter().map(|s| expand(s, &env_map)).collect::<Vec<_>>())
    };
    crate::action::validate(container)?;
    let resources = Resources::of(container.resources.as_ref())?;
    let mut binds: Vec<String> = mounts.iter().map(Mount::bind).collect();
    binds.extend(ctx.managed_files.binds(container));
    let joined = NetworkMode::Container(ctx.sandbox_id.clone());
    let spec = ctx.pod.spec.as_ref();
    Ok(CreateSpec {
        name: labels::container_name(&container.name, name, namespace, uid, attempt),
        image: container.image.clone().unwrap_or_default(),
        entrypoint: expand_all(&container.command),
        cmd: expand_all(&container.args),
        env: env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        working_dir: container.working_dir.clone().filter(|w| !w.is_empty()),
        stop_signal: container.lifecycle.as_ref().and_then(|l| l.stop_signal.clone()),
        labels: l,
        network: Some(joined),
        ipc_mode: Some(if spec.and_then(|s| s.host_ipc) == Some(true) {
            "host".to_string()
        } else {
            format!("container:{}", ctx.sandbox_id)
        }),
        hostname: None,
        ports: Vec::new(),
        binds,
        memory: resources.memory_limit,
        memory_swap: resources.memory_limit,
        cpu_shares: Some(resources.cpu_shares()),
        cpu_quota: resources.cpu_quota(),
        cpu_period: resources.cpu_limit_milli.map(|_| CPU_PERIOD_US),
        oom_score_adj: Some(oom_score_adj(ctx.pod, &resources, ctx.node_memory_bytes)),
        tty: container.tty.unwrap_or(false),
        stdin: container.stdin.unwrap_or(false),
        stdin_once: container.stdin_once.unwrap_or(false),
        cgroup_parent: ctx.cgroup_parent.map(str::to_string),
        // The security fields are filled by `crate::security::apply_container`.
        ..Default::default()
    })
}

/// The container's env vars in order, with `$(VAR)` references to earlier ones expanded (kubelet's
/// `makeEnvironmentVariables`); also what `subPathExpr` expands with.
pub fn container_env(ctx: &PodContext<'_>, container: &Container) -> Result<Vec<(String, String)>, ConfigError> {
    // Service variables first: everything the container declares overrides them.
    let mut out: Vec<(String, String)> = ctx.env_objects.services.clone();
    // The API's not-found text for the object kind kubelet's managers name (`configmap`,
    // `secret`).
    let missing = |what: &str, object: &str| ConfigError::MissingEnvSource(format!("{what} {object:?} not found"));
    let namespace = ctx.pod.metadata.namespace.as_deref().unwrap_or("default");
    // envFrom first; explicit env entries override it (kubelet's order).
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let (data, optional, what, object) = match (&from.config_map_ref, &from.secret_ref) {
            (Some(c), _) => (
                ctx.env_objects.config_maps.get(&c.name).cloned().flatten(),
                c.optional,
                "configmap",
                &c.name,
            ),
            (_, Some(s)) => (
                ctx.env_objects.secrets.get(&s.name).cloned().flatten(),
                s.optional,
                "secret",
                &s.name,
            ),
            _ => continue,
        };
        match data {
            Some(data) => {
                for (k, v) in data {
                    let k = format!("{prefix}{k}");
                    out.retain(|(name, _)| *name != k);
                    out.push((k, v));
                }
            }
            None if optional == Some(true) => {}
            None => return Err(missing(what, object)),
        }
    }
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (_, Some(source)) => {
                // `what` as the API's not-found text has it, `kind` as kubelet's missing key.
                let key_ref = |objects: &HashMap<String, Option<BTreeMap<String, String>>>,
                               (what, kind): (&str, &str),
                               object: &str,
                               key: &str,
                               optional: Option<bool>| {
                    match objects.get(object).cloned().flatten() {
                        Some(data) => match data.get(key) {
                            Some(v) => Ok(Some(v.clone())),
                            None if optional == Some(true) => Ok(None),
                            None => Err(ConfigError::MissingEnvSource(format!(
                                "couldn't find key {key} in {kind} {namespace}/{object}"
                            ))),
                        },
                        None if optional == Some(true) => Ok(None),
                        None => Err(missing(what, object)),
                    }
                };
                if let Some(s) = &source.secret_key_ref {
                    match key_ref(
                        &ctx.env_objects.secrets,
                        ("secret", "Secret"),
                        &s.name,
                        &s.key,
                        s.optional,
                    )? {
                        Some(v) => v,
                        None => continue,
                    }
                } else if let Some(c) = &source.config_map_key_ref {
                    let kinds = ("configmap", "ConfigMap");
                    match key_ref(&ctx.env_objects.config_maps, kinds, &c.name, &c.key, c.optional)? {
                        Some(v) => v,
                        None => continue,
                    }
                } else if let Some(r) = &source.resource_field_ref {
                    // containerName defaults to the container itself.
                    let value = match r.container_name.as_deref().filter(|n| !n.is_empty()) {
                        Some(name) => resource_value(ctx.pod, name, r, ctx.allocatable),
                        None => container_resource_value(container, r, ctx.allocatable),
                    };
                    value.map_err(|e| ConfigError::UnsupportedEnv {
                        name: var.name.clone(),
                        reason: e.to_string(),
                    })?
                } else {
                    let field = source.field_ref.as_ref().ok_or_else(|| ConfigError::UnsupportedEnv {
                        name: var.name.clone(),
                        reason: "only fieldRef, resourceFieldRef, secretKeyRef and configMapKeyRef are supported"
                            .to_string(),
                    })?;
                    field_value(ctx, &field.field_path).ok_or_else(|| ConfigError::UnsupportedEnv {
                        name: var.name.clone(),
                        reason: format!("unsupported fieldRef.fieldPath {:?}", field.field_path),
                    })?
                }
            }
            (Some(v), None) => {
                let known: HashMap<&str, &str> = out.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                expand(v, &known)
            }
            (None, None) => String::new(),
        };
        out.retain(|(k, _)| k != &var.name);
        out.push((var.name.clone(), value));
    }
    Ok(out)
}

fn field_value(ctx: &PodContext<'_>, path: &str) -> Option<String> {
    let meta = &ctx.pod.metadata;
    let crate::spec::PodIdentity { name, namespace, uid } = pod_identity(ctx.pod);
    let keyed = |prefix: &str, map: &Option<BTreeMap<String, String>>| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(map.as_ref().and_then(|m| m.get(key)).cloned().unwrap_or_default())
    };
    match path {
        "metadata.name" => Some(name.to_string()),
        "metadata.namespace" => Some(namespace.to_string()),
        "metadata.uid" => Some(uid.to_string()),
        "spec.nodeName" => Some(ctx.node_name.to_string()),
        "spec.serviceAccountName" => Some(
            ctx.pod
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .unwrap_or_default(),
        ),
        "status.podIP" | "status.podIPs" => Some(ctx.pod_ip.to_string()),
        "status.hostIP" | "status.hostIPs" => Some(ctx.host_ip.to_string()),
        _ => keyed("metadata.labels['", &meta.labels).or_else(|| keyed("metadata.annotations['", &meta.annotations)),
    }
}

/// A container's resources in the units Docker wants.
#[derive(Debug, Clone, Default, PartialEq)]
struct Resources {
    memory_limit: Option<i64>,
    memory_request: Option<i64>,
    cpu_limit_milli: Option<i64>,
    cpu_request_milli: Option<i64>,
}

impl Resources {
    fn of(r: Option<&ResourceRequirements>) -> Result<Self, ConfigError> {
        let get = |which: &str,
                   map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
                   key: &str,
                   milli: bool| {
            map.and_then(|m| m.get(key))
                .map(|q| {
                    parse_quantity(&q.0, milli).ok_or_else(|| ConfigError::BadQuantity {
                        field: format!("{which}.{key}"),
                        value: q.0.clone(),
                    })
                })
                .transpose()
        };
        let limits = r.and_then(|r| r.limits.as_ref());
        let requests = r.and_then(|r| r.requests.as_ref());
        let memory_limit = get("limits", limits, "memory", false)?;
        let cpu_limit_milli = get("limits", limits, "cpu", true)?;
        // Requests default to limits when only limits are given (API defaulting).
        let memory_request = get("requests", requests, "memory", false)?.or(memory_limit);
        let cpu_request_milli = get("requests", requests, "cpu", true)?.or(cpu_limit_milli);
        Ok(Resources {
            memory_limit,
            memory_request,
            cpu_limit_milli,
            cpu_request_milli,
        })
    }

    fn cpu_shares(&self) -> i64 {
        match self.cpu_request_milli {
            Some(m) if m > 0 => (m * 1024 / 1000).clamp(MIN_SHARES, MAX_SHARES),
            _ => MIN_SHARES,
        }
    }

    fn cpu_quota(&self) -> Option<i64> {
        self.cpu_limit_milli
            .map(|m| (m * CPU_PERIOD_US / 1000).max(MIN_CPU_QUOTA_US))
    }
}

fn oom_score_adj(pod: &Pod, resources: &Resources, node_memory: i64) -> i64 {
    match qos_class(pod) {
        "Guaranteed" => GUARANTEED_OOM_SCORE_ADJ,
        "BestEffort" => BESTEFFORT_OOM_SCORE_ADJ,
        _ => {
            let request = resources.memory_request.unwrap_or(0);
            let adj = if node_memory > 0 {
                1000 - (1000 * request) / node_memory
            } else {
                999
            };
            adj.clamp(3, 999)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// Each instance's termination message file is bind-mounted at the container's path,
    /// unless it has none or a volume is mounted there.
    #[test]
    fn termination_message_files_are_bound_at_the_containers_path() {
        use k8s_openapi::api::core::v1::VolumeMount;
        let file = termination_message_file(std::path::Path::new("/r"), "u1", "app", "0-1");
        assert_eq!(file, std::path::PathBuf::from("/r/pods/u1/containers/app/0-1"));
        let mut c = Container {
            name: "app".into(),
            termination_message_path: Some("/dev/termination-custom-log".into()),
            ..Default::default()
        };
        assert_eq!(
            termination_message_bind(&c, &file).as_deref(),
            Some("/r/pods/u1/containers/app/0-1:/dev/termination-custom-log")
        );
        c.volume_mounts = Some(vec![VolumeMount {
            name: "v".into(),
            mount_path: "/dev/termination-custom-log".into(),
            ..Default::default()
        }]);
        assert_eq!(termination_message_bind(&c, &file), None, "a volume is mounted there");
        c.volume_mounts = None;
        c.termination_message_path = Some(String::new());
        assert_eq!(termination_message_bind(&c, &file), None, "no path");
    }

    fn pod(containers: Vec<Container>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web-n1".into()),
                namespace: Some("default".into()),
                uid: Some("uid1".into()),
                labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers,
                ..Default::default()
            }),
            status: None,
        }
    }

    /// Quantities parse in both binary and decimal units, CPU in millicores.
    #[test]
    fn quantities_parse_like_the_api() {
        assert_eq!(parse_quantity("128Mi", false), Some(128 * 1024 * 1024));
        assert_eq!(parse_quantity("1G", false), Some(1_000_000_000));
        assert_eq!(parse_quantity("500m", true), Some(500));
        assert_eq!(parse_quantity("0.5", true), Some(500));
        assert_eq!(parse_quantity("2", true), Some(2000));
        assert_eq!(parse_quantity("1e3", false), Some(1000));
        assert_eq!(parse_quantity("250000000n", true), Some(250));
        assert_eq!(parse_quantity("12x", false), None);
    }

    /// `$(VAR)` expands known names, keeps unknown ones, and `$$` escapes.
    #[test]
    fn expansion_follows_kubelet_rules() {
        let env = HashMap::from([("A", "1")]);
        assert_eq!(expand("x$(A)y$(B)$$(A)$", &env), "x1y$(B)$(A)$");
    }

    /// Command replaces ENTRYPOINT, args replace CMD, env resolves fieldRefs, limits map to
    /// Docker's memory, quota and shares, and the container joins the sandbox.
    #[test]
    fn container_spec_maps_the_pod_spec() {
        let c = Container {
            name: "app".into(),
            image: Some("img:1".into()),
            command: Some(vec!["sh".into()]),
            args: Some(vec!["-c".into(), "echo $(POD)".into()]),
            env: Some(vec![EnvVar {
                name: "POD".into(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "metadata.name".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            resources: Some(ResourceRequirements {
                limits: Some(BTreeMap::from([
                    ("memory".into(), Quantity("64Mi".into())),
                    ("cpu".into(), Quantity("250m".into())),
                ])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let p = pod(vec![c.clone()]);
        let sandbox = ContainerId("sb".into());
        let ctx = PodContext {
            pod: &p,
            node_name: "n1",
            host_ip: "10.0.0.1",
            pod_ip: "172.17.0.2",
            sandbox_id: &sandbox,
            node_memory_bytes: 1 << 30,
            env_objects: &EnvObjects::default(),
            allocatable: &Allocatable::default(),
            managed_files: &ManagedFiles::default(),
            cgroup_parent: Some("/kubepods/poduid1"),
        };
        let spec = container_spec(&ctx, &c, ContainerRole::App, 2, 1, &[]).unwrap();
        assert_eq!(spec.name, "k8s_app_web-n1_default_uid1_2");
        assert_eq!(spec.entrypoint, Some(vec!["sh".to_string()]));
        assert_eq!(spec.cmd, Some(vec!["-c".to_string(), "echo web-n1".to_string()]));
        assert_eq!(spec.env, vec!["POD=web-n1".to_string()]);
        assert_eq!(spec.memory, Some(64 * 1024 * 1024));
        assert_eq!(spec.memory_swap, Some(64 * 1024 * 1024), "no swap, as kubelet's NoSwap");
        assert_eq!(spec.cpu_quota, Some(25_000));
        assert_eq!(spec.cpu_period, Some(100_000));
        assert_eq!(spec.cpu_shares, Some(256));
        assert_eq!(spec.oom_score_adj, Some(-997));
        assert_eq!(spec.network, Some(NetworkMode::Container(sandbox.clone())));
        assert_eq!(spec.labels[labels::RESTART_COUNT], "2");
        assert_eq!(spec.labels[labels::NODE], "n1");
        assert_eq!(spec.labels[labels::SANDBOX_ID], "sb");
        assert_eq!(spec.cgroup_parent.as_deref(), Some("/kubepods/poduid1"));
    }

    /// The sandbox publishes hostPorts and carries the pod's labels.
    #[test]
    fn sandbox_publishes_host_ports() {
        let c = Container {
            name: "app".into(),
            ports: Some(vec![k8s_openapi::api::core::v1::ContainerPort {
                container_port: 80,
                host_port: Some(8080),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let spec = sandbox_spec(&pod(vec![c]), "n1", "pause", 0, Some("/kubepods/poduid1"));
        assert_eq!(spec.name, "k8s_POD_web-n1_default_uid1_0");
        assert_eq!(spec.cgroup_parent.as_deref(), Some("/kubepods/poduid1"));
        assert_eq!(
            spec.ports,
            vec![PortBinding {
                container_port: 80,
                protocol: "tcp".into(),
                host_port: 8080,
                host_ip: String::new()
            }]
        );
        assert_eq!(spec.labels["app"], "web");
        assert_eq!(spec.labels[labels::DOCKER_TYPE], "podsandbox");
        assert_eq!(spec.network, Some(NetworkMode::Bridge));
    }

    /// Secret and ConfigMap references resolve from the objects read beforehand (envFrom with
    /// its prefix first, explicit env over it); a missing one is an error naming the variable.
    #[test]
    fn env_from_secrets_and_config_maps() {
        use k8s_openapi::api::core::v1::{ConfigMapEnvSource, EnvFromSource, SecretKeySelector};
        let c = Container {
            name: "app".into(),
            env_from: Some(vec![EnvFromSource {
                prefix: Some("CM_".into()),
                config_map_ref: Some(ConfigMapEnvSource {
                    name: "cm".into(),
                    optional: None,
                }),
                ..Default::default()
            }]),
            env: Some(vec![EnvVar {
                name: "PASSWORD".into(),
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: "s".into(),
                        key: "pw".into(),
                        optional: None,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let p = pod(vec![c.clone()]);
        let sandbox = ContainerId("sb".into());
        let objects = EnvObjects {
            secrets: HashMap::from([(
                "s".to_string(),
                Some(BTreeMap::from([("pw".to_string(), "hunter2".to_string())])),
            )]),
            config_maps: HashMap::from([(
                "cm".to_string(),
                Some(BTreeMap::from([("mode".to_string(), "fast".to_string())])),
            )]),
            ..Default::default()
        };
        let ctx = PodContext {
            pod: &p,
            node_name: "n1",
            host_ip: "",
            pod_ip: "",
            sandbox_id: &sandbox,
            node_memory_bytes: 0,
            env_objects: &objects,
            allocatable: &Allocatable::default(),
            managed_files: &ManagedFiles::default(),
            cgroup_parent: Some("/kubepods/poduid1"),
        };
        let spec = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap();
        assert_eq!(
            spec.env,
            vec!["CM_mode=fast".to_string(), "PASSWORD=hunter2".to_string()]
        );
        let empty = EnvObjects::default();
        let ctx = PodContext {
            env_objects: &empty,
            ..ctx
        };
        let err = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "configmap \"cm\" not found",
            "kubelet's words, nothing before"
        );
        // The ConfigMap there but not the Secret's key: kubelet's missing-key text.
        let no_key = EnvObjects {
            secrets: HashMap::from([("s".to_string(), Some(BTreeMap::new()))]),
            ..objects.clone()
        };
        let ctx = PodContext {
            env_objects: &no_key,
            ..ctx
        };
        let err = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap_err();
        assert_eq!(err.to_string(), "couldn't find key pw in Secret default/s");
    }

    /// An env source that needs the API server is a config error naming the variable.
    #[test]
    fn unsupported_env_sources_are_config_errors() {
        let c = Container {
            name: "app".into(),
            env: Some(vec![EnvVar {
                name: "S".into(),
                value_from: Some(EnvVarSource::default()),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let p = pod(vec![c.clone()]);
        let sandbox = ContainerId("sb".into());
        let ctx = PodContext {
            pod: &p,
            node_name: "n1",
            host_ip: "",
            pod_ip: "",
            sandbox_id: &sandbox,
            node_memory_bytes: 0,
            env_objects: &EnvObjects::default(),
            allocatable: &Allocatable::default(),
            managed_files: &ManagedFiles::default(),
            cgroup_parent: Some("/kubepods/poduid1"),
        };
        let err = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap_err();
        assert!(err.to_string().starts_with("env S:"), "{err}");
    }

    /// Service variables come first, explicit env (and envFrom) override them, and `$(VAR)` in
    /// values, command and args can use them, as kubelet's makeEnvironmentVariables does.
    #[test]
    fn service_variables_precede_and_yield_to_the_containers_env() {
        let c = Container {
            name: "app".into(),
            command: Some(vec!["echo $(FOO_SERVICE_HOST)".into()]),
            env: Some(vec![
                EnvVar {
                    name: "FOO_SERVICE_PORT".into(),
                    value: Some("mine".into()),
                    ..Default::default()
                },
                EnvVar {
                    name: "URL".into(),
                    value: Some("http://$(FOO_SERVICE_HOST):$(FOO_SERVICE_PORT)".into()),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        let p = pod(vec![c.clone()]);
        let sandbox = ContainerId("sb".into());
        let objects = EnvObjects {
            services: vec![
                ("FOO_SERVICE_HOST".into(), "10.0.0.9".into()),
                ("FOO_SERVICE_PORT".into(), "80".into()),
            ],
            ..Default::default()
        };
        let ctx = PodContext {
            pod: &p,
            node_name: "n1",
            host_ip: "",
            pod_ip: "",
            sandbox_id: &sandbox,
            node_memory_bytes: 0,
            env_objects: &objects,
            allocatable: &Allocatable::default(),
            managed_files: &ManagedFiles::default(),
            cgroup_parent: Some("/kubepods/poduid1"),
        };
        let spec = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap();
        assert_eq!(
            spec.env,
            [
                "FOO_SERVICE_HOST=10.0.0.9",
                "FOO_SERVICE_PORT=mine",
                "URL=http://10.0.0.9:mine"
            ]
        );
        assert_eq!(spec.entrypoint, Some(vec!["echo 10.0.0.9".to_string()]));
    }

    /// Env resourceFieldRef, as the downward API conformance test asserts: CPU_LIMIT=2 for 1250m,
    /// MEMORY_LIMIT=67108864, CPU_REQUEST=1, MEMORY_REQUEST=33554432; containerName defaults to
    /// the container itself; without limits, the node's allocatable.
    #[test]
    fn env_resource_field_refs() {
        use k8s_openapi::api::core::v1::ResourceFieldSelector;
        let var = |name: &str, resource: &str| EnvVar {
            name: name.into(),
            value_from: Some(EnvVarSource {
                resource_field_ref: Some(ResourceFieldSelector {
                    resource: resource.into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut c = Container {
            name: "dapi-container".into(),
            env: Some(vec![
                var("CPU_LIMIT", "limits.cpu"),
                var("MEMORY_LIMIT", "limits.memory"),
                var("CPU_REQUEST", "requests.cpu"),
                var("MEMORY_REQUEST", "requests.memory"),
            ]),
            resources: Some(ResourceRequirements {
                limits: Some(BTreeMap::from([
                    ("cpu".into(), Quantity("1250m".into())),
                    ("memory".into(), Quantity("64Mi".into())),
                ])),
                requests: Some(BTreeMap::from([
                    ("cpu".into(), Quantity("250m".into())),
                    ("memory".into(), Quantity("32Mi".into())),
                ])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let p = pod(vec![c.clone()]);
        let sandbox = ContainerId("sb".into());
        let alloc = Allocatable {
            cpu_milli: 4000,
            memory_bytes: 8 << 30,
            ephemeral_storage_bytes: 0,
        };
        let ctx = PodContext {
            pod: &p,
            node_name: "n1",
            host_ip: "",
            pod_ip: "",
            sandbox_id: &sandbox,
            node_memory_bytes: 0,
            env_objects: &EnvObjects::default(),
            allocatable: &alloc,
            managed_files: &ManagedFiles::default(),
            cgroup_parent: Some("/kubepods/poduid1"),
        };
        let env = container_spec(&ctx, &c, ContainerRole::App, 0, 0, &[]).unwrap().env;
        assert_eq!(
            env,
            vec![
                "CPU_LIMIT=2".to_string(),
                "MEMORY_LIMIT=67108864".to_string(),
                "CPU_REQUEST=1".to_string(),
                "MEMORY_REQUEST=33554432".to_string()
            ]
        );
        c.resources = None;
        let p = pod(vec![c.clone()]);
        let ctx = PodContext { pod: &p, ..ctx };
        let env = container_env(&ctx, &c).unwrap();
        assert_eq!(env[0], ("CPU_LIMIT".to_string(), "4".to_string()));
        assert_eq!(env[1], ("MEMORY_LIMIT".to_string(), (8i64 << 30).to_string()));
        assert_eq!(env[2], ("CPU_REQUEST".to_string(), "0".to_string()));
    }

    /// The managed hosts file and resolv.conf are bind-mounted into the container, except
    /// where the container mounts its own file.
    #[test]
    fn managed_files_are_mounted_unless_the_container_has_its_own() {
        use k8s_openapi::api::core::v1::VolumeMount;
        let files = ManagedFiles {
            etc_hosts: Some("/r/pods/u/etc-hosts".into()),
            resolv_conf: Some("/r/pods/u/resolv.conf".into()),
        };
        let mut c = Container {
            name: "app".into(),
            ..Default::default()
        };
        assert_eq!(
            files.binds(&c),
            [
                "/r/pods/u/etc-hosts:/etc/hosts",
                "/r/pods/u/resolv.conf:/etc/resolv.conf"
            ]
        );
        c.volume_mounts = Some(vec![VolumeMount {
            name: "hosts".into(),
            mount_path: "/etc/hosts".into(),
            ..Default::default()
        }]);
        assert_eq!(files.binds(&c), ["/r/pods/u/resolv.conf:/etc/resolv.conf"]);
        assert!(ManagedFiles::default().binds(&c).is_empty());
    }
}
