//! From a pod spec to Docker [`CreateSpec`]s: the sandbox and each container (dockershim's
//! `docker_sandbox.go` and `docker_container.go`, kept by cri-dockerd). Pure functions; errors
//! here become a container's `CreateContainerConfigError`.

use std::collections::{BTreeMap, HashMap};

use dockerlet_messages::runtime::ContainerRole;
use dockerlet_messages::ContainerId;
use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource, Pod, ResourceRequirements};

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
    /// A namespace of its own with only loopback: a CNI plugin wires it (sandboxes with
    /// `--network-plugin=cni`, as cri-dockerd creates them).
    None,
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
    /// All of the pod's IPs (`status.podIPs`, two on a dual-stack pod network), `pod_ip` first.
    pub pod_ips: &'a [String],
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
    // envFrom first; explicit env entries override it (kubelet's order).
    env_from(ctx, container, &mut out)?;
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (_, Some(source)) => match value_from(ctx, container, var, source)? {
                Some(v) => v,
                None => continue,
            },
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

/// The API's not-found text for the object kind kubelet's managers name (`configmap`,
/// `secret`).
fn missing_env_source(what: &str, object: &str) -> ConfigError {
    ConfigError::MissingEnvSource(format!("{what} {object:?} not found"))
}

/// The container's `envFrom` entries, each key (with its prefix) replacing an earlier one of
/// that name in `out`.
fn env_from(ctx: &PodContext<'_>, container: &Container, out: &mut Vec<(String, String)>) -> Result<(), ConfigError> {
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
            None => return Err(missing_env_source(what, object)),
        }
    }
    Ok(())
}

/// An env var's `valueFrom`; `None` when an optional key or object is missing (the variable is
/// then not set).
fn value_from(
    ctx: &PodContext<'_>,
    container: &Container,
    var: &EnvVar,
    source: &EnvVarSource,
) -> Result<Option<String>, ConfigError> {
    let namespace = ctx.pod.metadata.namespace.as_deref().unwrap_or("default");
    if let Some(s) = &source.secret_key_ref {
        let kinds = ("secret", "Secret");
        key_ref(&ctx.env_objects.secrets, kinds, namespace, &s.name, &s.key, s.optional)
    } else if let Some(c) = &source.config_map_key_ref {
        let kinds = ("configmap", "ConfigMap");
        key_ref(
            &ctx.env_objects.config_maps,
            kinds,
            namespace,
            &c.name,
            &c.key,
            c.optional,
        )
    } else if let Some(r) = &source.resource_field_ref {
        // containerName defaults to the container itself.
        let value = match r.container_name.as_deref().filter(|n| !n.is_empty()) {
            Some(name) => resource_value(ctx.pod, name, r, ctx.allocatable),
            None => container_resource_value(container, r, ctx.allocatable),
        };
        value.map(Some).map_err(|e| ConfigError::UnsupportedEnv {
            name: var.name.clone(),
            reason: e.to_string(),
        })
    } else {
        let field = source.field_ref.as_ref().ok_or_else(|| ConfigError::UnsupportedEnv {
            name: var.name.clone(),
            reason: "only fieldRef, resourceFieldRef, secretKeyRef and configMapKeyRef are supported".to_string(),
        })?;
        field_value(ctx, &field.field_path)
            .ok_or_else(|| ConfigError::UnsupportedEnv {
                name: var.name.clone(),
                reason: format!("unsupported fieldRef.fieldPath {:?}", field.field_path),
            })
            .map(Some)
    }
}

/// A `secretKeyRef` or `configMapKeyRef`: `what` as the API's not-found text has the kind, `kind`
/// as kubelet's missing key does.
fn key_ref(
    objects: &HashMap<String, Option<BTreeMap<String, String>>>,
    (what, kind): (&str, &str),
    namespace: &str,
    object: &str,
    key: &str,
    optional: Option<bool>,
) -> Result<Option<String>, ConfigError> {
    match objects.get(object).cloned().flatten() {
        Some(data) => match data.get(key) {
            Some(v) => Ok(Some(v.clone())),
            None if optional == Some(true) => Ok(None),
            None => Err(ConfigError::MissingEnvSource(format!(
                "couldn't find key {key} in {kind} {namespace}/{object}"
            ))),
        },
        None if optional == Some(true) => Ok(None),
        None => Err(missing_env_source(what, object)),
    }
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
        "status.podIP" => Some(ctx.pod_ip.to_string()),
        // kubelet's podFieldSelectorRuntimeValue: the addresses joined with commas.
        "status.podIPs" if ctx.pod_ips.is_empty() => Some(ctx.pod_ip.to_string()),
        "status.podIPs" => Some(ctx.pod_ips.join(",")),
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
mod tests;
