//! Pod volumes on this node, resolved without touching disk: `emptyDir` (a directory under
//! `--root-dir`, on tmpfs for `medium: Memory`), `hostPath` (a path of the node), and the volumes
//! kubelet writes with its AtomicWriter — `configMap`, `secret`, `downwardAPI` and `projected` —
//! whose content [`payload`] computes. Containers get them as Docker bind mounts.
//!
//! Static pods may not reference API objects (kubelet's node authorizer gives it no secrets,
//! configMaps, service account tokens or claims for them), so those volumes are refused with the
//! field named; their downwardAPI volumes, and projected volumes of only downwardAPI sources, are
//! allowed.
//!
//! # Layout
//! - this file: where each volume lives ([`VolumeSource`]), validation, [`Mount`]s with
//!   `subPath` / `subPathExpr`, fsGroup [`Ownership`].
//! - [`payload`]: what a configMap, secret, downwardAPI or projected volume contains
//!   ([`payload::payload`]), the API objects it needs ([`payload::api_references`]).
//! - `downward`: the downward API's field paths (`metadata.labels`, …).

mod downward;
pub mod payload;

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, HostPathVolumeSource, Pod, ProjectedVolumeSource, Volume, VolumeMount,
};

use crate::field::FieldError;
use crate::quantity::parse_quantity;
pub use crate::resource::Allocatable;
use crate::spec::{containers_with_fields, pod_identity};
pub use payload::{
    api_references, payload, validate_path, ConfigMapData, FileProjection, ObjectReference, Payload, TokenNeed,
    VolumeObjects, VolumeReferences,
};

/// The mode of emptyDir directories (kubelet's `defaultPerm`).
pub const DEFAULT_EMPTY_DIR_MODE: u32 = 0o777;

/// kubelet's plugin directory of emptyDir volumes.
pub const EMPTY_DIR_PLUGIN: &str = "kubernetes.io~empty-dir";

/// Where an emptyDir's data lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Medium {
    /// A directory on the node's disk (`medium: ""`).
    Disk,
    /// A tmpfs mounted on the volume's directory (`medium: Memory`).
    Memory {
        /// The tmpfs `size=` in bytes: the smallest of `sizeLimit`, the pod's memory limit and
        /// the node's allocatable memory (kubelet's `calculateEmptyDirMemorySize`); `None` when
        /// none is known (the kernel's default, half of RAM).
        size_limit: Option<u64>,
    },
}

/// The AtomicWriter volume types: kubelet writes their files itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicKind {
    /// `configMap`.
    ConfigMap,
    /// `secret`.
    Secret,
    /// `downwardAPI`.
    DownwardApi,
    /// `projected`.
    Projected,
}

impl AtomicKind {
    /// kubelet's plugin directory name (`kubernetes.io~configmap`, …).
    pub fn plugin_dir(self) -> &'static str {
        match self {
            AtomicKind::ConfigMap => "kubernetes.io~configmap",
            AtomicKind::Secret => "kubernetes.io~secret",
            AtomicKind::DownwardApi => "kubernetes.io~downward-api",
            AtomicKind::Projected => "kubernetes.io~projected",
        }
    }
}

/// Where a volume's data lives on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeSource {
    /// A per-pod directory, created empty and removed with the pod.
    EmptyDir {
        /// `<root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>`.
        dir: PathBuf,
        /// Disk or tmpfs.
        medium: Medium,
        /// The directory's mode: `emptyDir.mode` (alpha), else 0777 as kubelet creates it.
        mode: u32,
    },
    /// A path of the node, with the hostPath `type` check.
    HostPath {
        /// Absolute path on the node.
        path: PathBuf,
        /// `""`, `DirectoryOrCreate`, `Directory`, `FileOrCreate`, `File`, `Socket`, …
        kind: String,
    },
    /// A directory the agent fills with [`payload`] through the atomic writer
    /// (`dockerlet_host::atomic_writer::write`) before containers start, and refreshes.
    Atomic {
        /// `<root>/pods/<uid>/volumes/kubernetes.io~<plugin>/<volume>`.
        dir: PathBuf,
        /// Which volume type.
        kind: AtomicKind,
    },
}

impl VolumeSource {
    /// The volume's path on the node.
    pub fn path(&self) -> &Path {
        match self {
            VolumeSource::EmptyDir { dir, .. } | VolumeSource::Atomic { dir, .. } => dir,
            VolumeSource::HostPath { path, .. } => path,
        }
    }
}

/// `<root>/pods/<uid>`: everything the node keeps for one pod.
pub fn pod_dir(root: &Path, uid: &str) -> PathBuf {
    root.join("pods").join(uid)
}

/// Resolve one volume of `pod`; the error says why it cannot be used. Static pods (see
/// [`crate::annotations::from_api`]) may not reference API objects.
pub fn volume_source(root: &Path, pod: &Pod, volume: &Volume) -> Result<VolumeSource, FieldError> {
    resolve(root, pod, volume, crate::annotations::from_api(pod), None)
}

fn resolve(
    root: &Path,
    pod: &Pod,
    volume: &Volume,
    api: bool,
    allocatable: Option<&Allocatable>,
) -> Result<VolumeSource, FieldError> {
    let crate::spec::PodIdentity { uid, .. } = pod_identity(pod);
    let plugin_dir = |plugin: &str| pod_dir(root, uid).join("volumes").join(plugin).join(&volume.name);
    if let Some(empty) = &volume.empty_dir {
        return empty_dir(pod, empty, plugin_dir(EMPTY_DIR_PLUGIN), allocatable);
    }
    if let Some(host) = &volume.host_path {
        return host_path(host);
    }
    let atomic = |kind: AtomicKind| {
        Ok(VolumeSource::Atomic {
            dir: plugin_dir(kind.plugin_dir()),
            kind,
        })
    };
    if volume.downward_api.is_some() {
        return atomic(AtomicKind::DownwardApi);
    }
    if let Some(projected) = &volume.projected {
        check_projected(projected, api)?;
        return atomic(AtomicKind::Projected);
    }
    if volume.config_map.is_some() {
        return if api {
            atomic(AtomicKind::ConfigMap)
        } else {
            Err(static_refusal("configmaps"))
        };
    }
    if volume.secret.is_some() {
        return if api {
            atomic(AtomicKind::Secret)
        } else {
            Err(static_refusal("secrets"))
        };
    }
    Err(unsupported_volume(volume, api))
}

/// A static pod's volume referring to `what` on the API server.
fn static_refusal(what: &str) -> FieldError {
    FieldError::refused("", format!("static pods may not reference {what}"))
}

/// An `emptyDir` volume at `dir`: its medium (a `Memory` one sized by [`memory_size`]) and mode.
fn empty_dir(
    pod: &Pod,
    empty: &EmptyDirVolumeSource,
    dir: PathBuf,
    allocatable: Option<&Allocatable>,
) -> Result<VolumeSource, FieldError> {
    let medium = match empty.medium.as_deref().unwrap_or_default() {
        "" => Medium::Disk,
        "Memory" => Medium::Memory {
            size_limit: memory_size(pod, empty.size_limit.as_ref().map(|q| q.0.as_str()), allocatable)?,
        },
        m if m.starts_with("HugePages") => {
            return Err(FieldError::refused(
                "emptyDir.medium",
                format!("{m:?}: hugepages-backed emptyDir volumes are not supported on this node"),
            ))
        }
        m => return Err(FieldError::unsupported("emptyDir.medium", format!("{m:?}"))),
    };
    let mode = match empty.mode {
        None => DEFAULT_EMPTY_DIR_MODE,
        Some(m) => u32::try_from(m).ok().filter(|m| *m <= 0o1777).ok_or_else(|| {
            FieldError::invalid(
                "emptyDir.mode",
                format!("{m}: must be a number between 0 and 01777 (octal)"),
            )
        })?,
    };
    Ok(VolumeSource::EmptyDir { dir, medium, mode })
}

/// A `hostPath` volume; its path must be absolute.
fn host_path(host: &HostPathVolumeSource) -> Result<VolumeSource, FieldError> {
    let path = PathBuf::from(&host.path);
    if !path.is_absolute() {
        return Err(FieldError::invalid(
            "hostPath.path",
            format!("{:?}: must be an absolute path", host.path),
        ));
    }
    Ok(VolumeSource::HostPath {
        path,
        kind: host.type_.clone().unwrap_or_default(),
    })
}

/// Can this node serve a projected volume? Not one of a static pod referring to API objects, nor
/// one with a clusterTrustBundle or podCertificate source.
fn check_projected(projected: &ProjectedVolumeSource, api: bool) -> Result<(), FieldError> {
    let references_api = projected.sources.iter().flatten().any(|s| {
        s.config_map.is_some()
            || s.secret.is_some()
            || s.service_account_token.is_some()
            || s.cluster_trust_bundle.is_some()
            || s.pod_certificate.is_some()
    });
    if references_api && !api {
        return Err(static_refusal("API objects in projected volumes"));
    }
    for (k, s) in projected.sources.iter().flatten().enumerate() {
        if s.cluster_trust_bundle.is_some() || s.pod_certificate.is_some() {
            let what = if s.cluster_trust_bundle.is_some() {
                "clusterTrustBundle"
            } else {
                "podCertificate"
            };
            return Err(FieldError::refused(
                format!("projected.sources[{k}].{what}"),
                format!("{what} projections are not supported on this node"),
            ));
        }
    }
    Ok(())
}

/// Why a volume of none of the supported types cannot be used: a claim (refused outright for a
/// static pod), or any other type.
fn unsupported_volume(volume: &Volume, api: bool) -> FieldError {
    let claims = [
        (
            volume.persistent_volume_claim.is_some(),
            "persistentvolumeclaims",
            "persistentVolumeClaim",
        ),
        (volume.ephemeral.is_some(), "ephemeral volume claims", "ephemeral"),
    ];
    if let Some((_, what, field)) = claims.iter().find(|(set, _, _)| *set) {
        if !api {
            return static_refusal(what);
        }
        return FieldError::refused(*field, format!("{field} volumes are not supported on this node"));
    }
    FieldError::refused(
        "",
        "only emptyDir, hostPath, configMap, secret, downwardAPI and projected volumes are supported on this node",
    )
}

/// The tmpfs size of a `medium: Memory` emptyDir: kubelet's `calculateEmptyDirMemorySize`, the
/// smallest positive of the node's allocatable memory, the pod's memory limit (when every
/// container has one) and `sizeLimit`.
fn memory_size(
    pod: &Pod,
    size_limit: Option<&str>,
    allocatable: Option<&Allocatable>,
) -> Result<Option<u64>, FieldError> {
    let limit = size_limit
        .map(|q| {
            parse_quantity(q, false)
                .ok_or_else(|| FieldError::invalid("emptyDir.sizeLimit", format!("{q:?}: invalid quantity")))
        })
        .transpose()?;
    let sizes = [allocatable.map(|a| a.memory_bytes), pod_memory_limit(pod), limit];
    Ok(sizes.into_iter().flatten().filter(|s| *s > 0).min().map(|s| s as u64))
}

/// The pod's memory limit as kubelet sets its cgroup: the sum of its app containers' limits, or
/// the largest init container's if larger; none if a container has no limit.
fn pod_memory_limit(pod: &Pod) -> Option<i64> {
    let spec = pod.spec.as_ref()?;
    let limit = |c: &Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get("memory"))
            .and_then(|q| parse_quantity(&q.0, false))
    };
    let mut sum = 0i64;
    for c in &spec.containers {
        sum = sum.saturating_add(limit(c)?);
    }
    let mut largest_init = 0i64;
    for c in spec.init_containers.iter().flatten() {
        largest_init = largest_init.max(limit(c)?);
    }
    Some(sum.max(largest_init))
}

/// The pod's configMap, secret, downwardAPI and projected volumes with their directories: what
/// the agent writes (`dockerlet_host::volume_dirs::write_atomic_volume` with [`payload`]) before
/// the pod's containers start, and refreshes. Volumes the pod may not have are left out
/// ([`validate`] and [`mounts`] report them).
pub fn atomic_volumes<'a>(root: &Path, pod: &'a Pod) -> Vec<(&'a Volume, PathBuf, AtomicKind)> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    volumes
        .iter()
        .filter_map(|v| match volume_source(root, pod, v) {
            Ok(VolumeSource::Atomic { dir, kind }) => Some((v, dir, kind)),
            _ => None,
        })
        .collect()
}

/// Check a pod's volumes and every volumeMount as the pod's source allows (static pods may not
/// reference API objects); the error names the field.
pub fn validate(pod: &Pod) -> Result<(), FieldError> {
    validate_as(pod, crate::annotations::from_api(pod))
}

/// [`validate`] for a pod read from a manifest file or URL: always a static pod, whatever its
/// annotations say.
pub fn validate_static(pod: &Pod) -> Result<(), FieldError> {
    validate_as(pod, false)
}

fn validate_as(pod: &Pod, api: bool) -> Result<(), FieldError> {
    let Some(spec) = &pod.spec else { return Ok(()) };
    let volumes = spec.volumes.as_deref().unwrap_or_default();
    for (i, v) in volumes.iter().enumerate() {
        let at = format!("spec.volumes[{i}]");
        resolve(Path::new("/"), pod, v, api, None).map_err(|e| e.under(&at))?;
        payload::validate_volume(v).map_err(|e| e.under(&at))?;
        if volumes[..i].iter().any(|o| o.name == v.name) {
            return Err(FieldError::duplicate(format!("{at}.name"), format!("{:?}", v.name)));
        }
    }
    for (field, c) in containers_with_fields(spec) {
        for (j, m) in c.volume_mounts.iter().flatten().enumerate() {
            let at = format!("{field}.volumeMounts[{j}]");
            if !volumes.iter().any(|v| v.name == m.name) {
                return Err(FieldError::not_found(format!("{at}.name"), format!("{:?}", m.name)));
            }
            if !m.mount_path.starts_with('/') {
                return Err(FieldError::invalid(
                    format!("{at}.mountPath"),
                    format!("{:?}: must be an absolute path", m.mount_path),
                ));
            }
            let sub = m.sub_path.as_deref().filter(|s| !s.is_empty());
            let expr = m.sub_path_expr.as_deref().filter(|s| !s.is_empty());
            if sub.is_some() && expr.is_some() {
                return Err(FieldError::invalid(
                    format!("{at}.subPathExpr"),
                    format!(
                        "{:?}: subPathExpr and subPath are mutually exclusive",
                        expr.unwrap_or_default()
                    ),
                ));
            }
            for (name, value) in [("subPath", sub), ("subPathExpr", expr)] {
                if let Some(value) = value {
                    check_sub_path(value).map_err(|e| {
                        FieldError::invalid(format!("{at}.{name}"), format!("{value:?}: {}", e.api_words()))
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// Why a subPath is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SubPathProblem {
    /// It starts at `/`.
    Absolute,
    /// It climbs out with `..`.
    ParentDir,
}

impl SubPathProblem {
    /// In the API server's validation words.
    fn api_words(self) -> &'static str {
        match self {
            SubPathProblem::Absolute => "must be a relative path",
            SubPathProblem::ParentDir => "must not contain '..'",
        }
    }

    /// In kubelet's words when a container's mounts are made (`makeMounts`).
    fn kubelet_words(self, sub: &str) -> String {
        match self {
            SubPathProblem::Absolute => format!("error SubPath `{sub}` must not be an absolute path"),
            SubPathProblem::ParentDir => format!("unable to provision SubPath `{sub}`: {}", self.api_words()),
        }
    }
}

fn check_sub_path(sub: &str) -> Result<(), SubPathProblem> {
    let path = Path::new(sub);
    if path.is_absolute() {
        return Err(SubPathProblem::Absolute);
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(SubPathProblem::ParentDir);
    }
    Ok(())
}

/// A volume or volumeMount that cannot be set up for a container (reason
/// `CreateContainerConfigError`), or a volume whose content cannot be made (a missing
/// ConfigMap, Secret or key; a bad path). Retried at the container's next start attempt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct VolumeError {
    /// The mount or volume (`volumeMounts[data]`, `volume "data"`,
    /// `spec.volumes[0].configMap.items[1].path`).
    pub field: String,
    /// Why.
    pub reason: String,
}

/// Why a volume mount cannot be made as the container asks, in kubelet's words (the container's
/// `CreateContainerConfigError`, as a [`VolumeError`]'s reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum MountError {
    /// A `mountPropagation` kubelet does not know.
    #[error("invalid MountPropagation mode: {0:?}")]
    Propagation(String),
    /// A `recursiveReadOnly` that cannot be had, and why.
    #[error("failed to resolve recursive read-only mode: {0}")]
    RecursiveReadOnly(String),
    /// A `subPathExpr` naming variables that are unset or empty.
    #[error("subPathExpr {expr:?}: missing value for {}", missing.join(", "))]
    SubPathExpr {
        /// The expression as written.
        expr: String,
        /// The variables without a value, sorted.
        missing: Vec<String>,
    },
}

fn config_error(field: String, reason: impl ToString) -> VolumeError {
    VolumeError {
        field,
        reason: reason.to_string(),
    }
}

/// fsGroup ownership of a volume's files, as kubelet's `SetVolumeOwnership` applies it: group
/// `fs_group`, group read (and write, for writable volumes) added to every file, directories also
/// get the setgid bit and group search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    /// The pod's `securityContext.fsGroup`.
    pub fs_group: u32,
    /// `fsGroupChangePolicy: OnRootMismatch`: skip the walk when the volume's root already has the
    /// group and the permissions. kubelet passes no policy for emptyDir and the atomic-writer
    /// volumes, so [`ownership`] leaves it `false`.
    pub on_root_mismatch: bool,
}

/// The fsGroup ownership kubelet gives this pod's emptyDir, configMap, secret, downwardAPI and
/// projected volumes; `None` without `securityContext.fsGroup`.
pub fn ownership(pod: &Pod) -> Option<Ownership> {
    let group = pod.spec.as_ref()?.security_context.as_ref()?.fs_group?;
    Some(Ownership {
        fs_group: u32::try_from(group).ok()?,
        on_root_mismatch: false,
    })
}

/// A volumeMount's `subPath` (or expanded `subPathExpr`): the part of the volume that is mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubPath {
    /// Relative to the volume, free of `..`.
    pub path: String,
    /// Where the agent binds the resolved path before the container is created, so the container
    /// gets what was checked (kubelet's `<pod>/volume-subpaths/<volume>/<container>/<index>`).
    pub bind_at: PathBuf,
}

/// One volumeMount of a container, resolved: what the node must have ready before the container
/// is created, and the Docker bind that mounts it. Building it does no I/O; the agent prepares it
/// on the node (`dockerlet_host::volume_dirs::prepare`: directories, tmpfs, hostPath type checks,
/// the subPath resolved inside its volume) and then binds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The mount, for errors (`volumeMounts[data]`).
    pub field: String,
    /// The volume's name.
    pub volume: String,
    /// Where the volume lives on the node.
    pub source: VolumeSource,
    /// The mount's `subPath` or expanded `subPathExpr`, checked to be relative and free of `..`.
    pub sub_path: Option<SubPath>,
    /// Where it appears in the container.
    pub container_path: String,
    /// `readOnly: true`.
    pub read_only: bool,
    /// `mountPropagation`.
    pub propagation: Propagation,
}

/// A volumeMount's `mountPropagation`, as kubelet translates it for the runtime and cri-dockerd
/// for Docker's bind options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// `None` or unset: Docker's default, `rprivate`.
    #[default]
    Private,
    /// `HostToContainer`: `rslave`, mounts made on the node later show in the container.
    HostToContainer,
    /// `Bidirectional`: `rshared`, also the container's mounts show on the node (privileged
    /// containers only).
    Bidirectional,
}

impl Propagation {
    /// kubelet's `translateMountPropagation`.
    fn of(mode: Option<&str>) -> Result<Self, MountError> {
        match mode {
            None | Some("None") => Ok(Propagation::Private),
            Some("HostToContainer") => Ok(Propagation::HostToContainer),
            Some("Bidirectional") => Ok(Propagation::Bidirectional),
            Some(other) => Err(MountError::Propagation(other.to_string())),
        }
    }

    /// Docker's bind option; none for Docker's default.
    fn bind_option(self) -> Option<&'static str> {
        match self {
            Propagation::Private => None,
            Propagation::HostToContainer => Some("rslave"),
            Propagation::Bidirectional => Some("rshared"),
        }
    }
}

/// kubelet's `resolveRecursiveReadOnly` on a runtime without recursively read-only mounts (Docker
/// through the CRI, as cri-dockerd reports it): `IfPossible` is a plain read-only mount,
/// `Enabled` cannot be had. The error is the container's `CreateContainerConfigError`.
fn check_recursive_read_only(m: &VolumeMount) -> Result<(), MountError> {
    let mode = match m.recursive_read_only.as_deref() {
        None | Some("Disabled") => return Ok(()),
        Some(mode) => mode,
    };
    let name = &m.name;
    let why = if m.read_only != Some(true) {
        format!("volume {name:?} requested recursive read-only mode, but it is not read-only")
    } else if let Some(p) = m.mount_propagation.as_deref().filter(|p| *p != "None") {
        format!("volume {name:?} requested recursive read-only mode, but it is not compatible with propagation {p:?}")
    } else {
        match mode {
            "IfPossible" => return Ok(()),
            "Enabled" => {
                format!("volume {name:?} requested recursive read-only mode, but it is not supported by the runtime")
            }
            other => format!("unknown recursive read-only mode {other:?}"),
        }
    };
    Err(MountError::RecursiveReadOnly(why))
}

impl Mount {
    /// The path on the node that is bound: the volume, or (once prepared) its subPath's bind.
    pub fn host_path(&self) -> PathBuf {
        match &self.sub_path {
            Some(sub) => sub.bind_at.clone(),
            None => self.source.path().to_path_buf(),
        }
    }

    /// The Docker bind, `host:container[:ro][,rslave|,rshared]`.
    pub fn bind(&self) -> String {
        let options: Vec<&str> = [self.read_only.then_some("ro"), self.propagation.bind_option()]
            .into_iter()
            .flatten()
            .collect();
        let bind = format!("{}:{}", self.host_path().display(), self.container_path);
        if options.is_empty() {
            bind
        } else {
            format!("{bind}:{}", options.join(","))
        }
    }
}

/// Resolve every volumeMount of `container` against the pod's volumes; `env` is the container's
/// environment (for `subPathExpr`, see `container::container_env`), `allocatable` the
/// node's (for tmpfs sizes).
pub fn mounts(
    root: &Path,
    pod: &Pod,
    container: &Container,
    env: &[(String, String)],
    allocatable: &Allocatable,
) -> Result<Vec<Mount>, VolumeError> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    let crate::spec::PodIdentity { uid, .. } = pod_identity(pod);
    let env: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let privileged = container
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false);
    let mut mounts = Vec::new();
    for (index, m) in container.volume_mounts.iter().flatten().enumerate() {
        let field = format!("volumeMounts[{}]", m.name);
        let volume = volumes
            .iter()
            .find(|v| v.name == m.name)
            .ok_or_else(|| config_error(field.clone(), format!("no volume named {:?}", m.name)))?;
        let source = resolve(root, pod, volume, crate::annotations::from_api(pod), Some(allocatable))
            .map_err(|e| config_error(field.clone(), e))?;
        let propagation =
            Propagation::of(m.mount_propagation.as_deref()).map_err(|e| config_error(field.clone(), e))?;
        if propagation == Propagation::Bidirectional && !privileged {
            // The API server's validation; a static pod or an older object that has it anyway
            // must not get a shared mount.
            return Err(config_error(
                field,
                "Bidirectional mount propagation is available only to privileged containers",
            ));
        }
        check_recursive_read_only(m).map_err(|e| config_error(field.clone(), e))?;
        let sub = m.sub_path.clone().filter(|s| !s.is_empty());
        let expr = m.sub_path_expr.as_deref().filter(|s| !s.is_empty());
        let path = match (sub, expr) {
            (Some(_), Some(_)) => {
                return Err(config_error(field, "subPathExpr and subPath are mutually exclusive"));
            }
            (Some(sub), None) => Some(sub),
            (None, Some(expr)) => Some(expand_sub_path(expr, &env).map_err(|e| config_error(field.clone(), e))?),
            (None, None) => None,
        };
        let sub_path = match path {
            Some(path) => {
                check_sub_path(&path).map_err(|why| config_error(field.clone(), why.kubelet_words(&path)))?;
                Some(SubPath {
                    path,
                    bind_at: pod_dir(root, uid)
                        .join("volume-subpaths")
                        .join(&volume.name)
                        .join(&container.name)
                        .join(index.to_string()),
                })
            }
            None => None,
        };
        mounts.push(Mount {
            field,
            volume: volume.name.clone(),
            sub_path,
            container_path: m.mount_path.clone(),
            // kubelet mounts the atomic-writer volumes read-only whatever the mount says.
            read_only: m.read_only == Some(true) || matches!(source, VolumeSource::Atomic { .. }),
            propagation,
            source,
        });
    }
    Ok(mounts)
}

/// kubelet's `ExpandContainerVolumeMounts`: `$(VAR)` from the container's env; a variable that is
/// unset or empty is an error.
fn expand_sub_path(expr: &str, env: &HashMap<&str, &str>) -> Result<String, MountError> {
    let mut missing: Vec<String> = Vec::new();
    let expanded = crate::expansion::expand_with(expr, |name| {
        let value = env.get(name).copied().unwrap_or_default();
        if value.is_empty() && !missing.iter().any(|m| m == name) {
            missing.push(name.to_string());
        }
        Some(value.to_string())
    });
    if !missing.is_empty() {
        missing.sort_unstable();
        return Err(MountError::SubPathExpr {
            expr: expr.to_string(),
            missing,
        });
    }
    Ok(expanded)
}

#[cfg(test)]
mod tests;
