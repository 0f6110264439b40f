//! What a configMap, secret, downwardAPI or projected volume contains: kubelet's `MakePayload`
//! (`pkg/volume/configmap`, `pkg/volume/secret`), `CollectData` (`pkg/volume/downwardapi`) and
//! `collectData` (`pkg/volume/projected`), with the AtomicWriter's path checks. Pure: the API
//! objects and tokens come in as [`VolumeObjects`], fetched beforehand by the agent from what
//! [`api_references`] lists.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{
    DownwardAPIVolumeFile, KeyToPath, Pod, ProjectedVolumeSource, ServiceAccountTokenProjection, Volume,
    VolumeProjection,
};

use super::{downward, VolumeError};
use crate::field::FieldError;
use crate::resource::{resource_value, Allocatable};

/// The mode of files when `defaultMode` is not set (the API server's default, 0644).
pub const DEFAULT_MODE: u32 = 0o644;
/// Token lifetime when `expirationSeconds` is not set.
pub const DEFAULT_TOKEN_EXPIRATION_SECONDS: i64 = 3600;
/// The AtomicWriter's limit on a whole relative path.
const MAX_PATH_LENGTH: usize = 4096;
/// The AtomicWriter's limit on one path element.
const MAX_FILE_NAME_LENGTH: usize = 255;

/// One file of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    /// The file's bytes.
    pub data: Vec<u8>,
    /// Its permission bits (`0o644`).
    pub mode: u32,
    /// Its owner, when one is set: the item's `user` or the volume's `defaultUser`, or for a
    /// serviceAccountToken file of a pod whose containers all run as one user, that user
    /// (kubelet's `FsUser`); otherwise the agent's user.
    pub owner: Option<u32>,
}

/// A volume's files by relative path (`path/to/data-2`), cleaned and checked.
pub type Payload = BTreeMap<String, FileProjection>;

/// A ConfigMap's content.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigMapData {
    /// `data`.
    pub data: BTreeMap<String, String>,
    /// `binaryData`.
    pub binary_data: BTreeMap<String, Vec<u8>>,
}

/// The API objects a pod's volumes need, fetched by the agent. For a name: `Some` = its content,
/// `None` = the object does not exist; a name absent from the map was not fetched (an error, not
/// "missing").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeObjects {
    /// ConfigMaps of the pod's namespace by name.
    pub config_maps: HashMap<String, Option<ConfigMapData>>,
    /// Secrets' data of the pod's namespace by name.
    pub secrets: HashMap<String, Option<BTreeMap<String, Vec<u8>>>>,
    /// Service account tokens by (volume name, index of the projected source).
    pub tokens: HashMap<(String, usize), String>,
}

/// A ConfigMap or Secret a volume refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectReference {
    /// Its name, in the pod's namespace.
    pub name: String,
    /// Every reference to it is `optional: true` (a missing object is then no error).
    pub optional: bool,
}

/// A token a projected `serviceAccountToken` source needs (TokenRequest, bound to the pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenNeed {
    /// The volume's name.
    pub volume: String,
    /// The index of the source in `projected.sources`.
    pub source_index: usize,
    /// The pod's service account (`default` when unset).
    pub service_account: String,
    /// `audience`; `None` = the API server's.
    pub audience: Option<String>,
    /// `expirationSeconds` (default 3600).
    pub expiration_seconds: i64,
    /// The file's path in the volume.
    pub path: String,
}

/// Everything a pod's volumes need from the API server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeReferences {
    /// ConfigMaps, sorted by name.
    pub config_maps: Vec<ObjectReference>,
    /// Secrets, sorted by name.
    pub secrets: Vec<ObjectReference>,
    /// Tokens, in volume and source order.
    pub tokens: Vec<TokenNeed>,
}

/// Every ConfigMap, Secret and token the pod's volumes need.
pub fn api_references(pod: &Pod) -> VolumeReferences {
    let mut maps: BTreeMap<String, bool> = BTreeMap::new();
    let mut secrets: BTreeMap<String, bool> = BTreeMap::new();
    let mut tokens = Vec::new();
    let add = |set: &mut BTreeMap<String, bool>, name: &str, optional: Option<bool>| {
        let optional = optional == Some(true);
        set.entry(name.to_string())
            .and_modify(|o| *o = *o && optional)
            .or_insert(optional);
    };
    let spec = pod.spec.as_ref();
    let service_account = spec
        .and_then(|s| s.service_account_name.clone().or_else(|| s.service_account.clone()))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_string());
    for v in spec.and_then(|s| s.volumes.as_deref()).unwrap_or_default() {
        if let Some(c) = &v.config_map {
            add(&mut maps, &c.name, c.optional);
        }
        if let Some(s) = &v.secret {
            add(&mut secrets, s.secret_name.as_deref().unwrap_or_default(), s.optional);
        }
        for (k, source) in v.projected.iter().flat_map(|p| p.sources.iter().flatten()).enumerate() {
            if let Some(c) = &source.config_map {
                add(&mut maps, &c.name, c.optional);
            }
            if let Some(s) = &source.secret {
                add(&mut secrets, &s.name, s.optional);
            }
            if let Some(t) = &source.service_account_token {
                tokens.push(TokenNeed {
                    volume: v.name.clone(),
                    source_index: k,
                    service_account: service_account.clone(),
                    audience: t.audience.clone().filter(|a| !a.is_empty()),
                    expiration_seconds: t.expiration_seconds.unwrap_or(DEFAULT_TOKEN_EXPIRATION_SECONDS),
                    path: t.path.clone(),
                });
            }
        }
    }
    let refs = |set: BTreeMap<String, bool>| {
        set.into_iter()
            .map(|(name, optional)| ObjectReference { name, optional })
            .collect()
    };
    VolumeReferences {
        config_maps: refs(maps),
        secrets: refs(secrets),
        tokens,
    }
}

/// The files of `volume` (a configMap, secret, downwardAPI or projected volume of `pod`), exactly
/// as kubelet makes them: `items` map keys to paths (with per-item `mode`), `defaultMode` (0644)
/// for the rest; a missing optional object gives no files, a missing non-optional object or key
/// is an error with kubelet's wording (`configmap "x" not found`,
/// `configmap references non-existent config key: k`); every path is checked as the AtomicWriter
/// checks it, and a bad one is an error naming its field.
pub fn payload(
    pod: &Pod,
    volume: &Volume,
    objects: &VolumeObjects,
    allocatable: &Allocatable,
) -> Result<Payload, VolumeError> {
    let index = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .and_then(|vs| vs.iter().position(|v| v.name == volume.name))
        .unwrap_or(0);
    let at = format!("spec.volumes[{index}]");
    let files = if let Some(c) = &volume.config_map {
        let mode = default_mode(c.default_mode, &format!("{at}.configMap.defaultMode"))?;
        let optional = c.optional == Some(true);
        let defaults = Defaults::new(mode, c.default_user, &format!("{at}.configMap.defaultUser"))?;
        config_map_files(
            &format!("{at}.configMap"),
            &c.name,
            c.items.as_deref(),
            defaults,
            optional,
            objects,
        )
        .map_err(|e| object_error(volume, e.to_string()))??
    } else if let Some(s) = &volume.secret {
        let mode = default_mode(s.default_mode, &format!("{at}.secret.defaultMode"))?;
        let optional = s.optional == Some(true);
        let name = s.secret_name.as_deref().unwrap_or_default();
        let defaults = Defaults::new(mode, s.default_user, &format!("{at}.secret.defaultUser"))?;
        secret_files(
            &format!("{at}.secret"),
            name,
            s.items.as_deref(),
            defaults,
            optional,
            objects,
        )
        .map_err(|e| object_error(volume, e.to_string()))??
    } else if let Some(d) = &volume.downward_api {
        let mode = default_mode(d.default_mode, &format!("{at}.downwardAPI.defaultMode"))?;
        let defaults = Defaults::new(mode, d.default_user, &format!("{at}.downwardAPI.defaultUser"))?;
        downward_files(
            &format!("{at}.downwardAPI"),
            pod,
            d.items.as_deref(),
            defaults,
            allocatable,
        )?
    } else if let Some(p) = &volume.projected {
        let source = Source {
            pod,
            volume,
            objects,
            allocatable,
        };
        projected_files(&source, p, &at)?
    } else {
        return Err(VolumeError {
            field: at,
            reason: "not a configMap, secret, downwardAPI or projected volume".into(),
        });
    };
    merge_files(files)
}

/// An error about the objects `volume` refers to, reported as the volume's.
fn object_error(volume: &Volume, reason: String) -> VolumeError {
    VolumeError {
        field: format!("volume {:?}", volume.name),
        reason,
    }
}

/// Checks every file's path and keys the files by their cleaned paths; later files win, as
/// kubelet merges projected payloads.
fn merge_files(files: Files) -> Result<Payload, VolumeError> {
    let mut out = Payload::new();
    for (field, path, file) in files {
        validate_path(&path).map_err(|reason| VolumeError {
            field: field.clone(),
            reason: format!("{path:?}: {reason}"),
        })?;
        // Later sources win, as kubelet merges projected payloads.
        out.insert(clean_path(&path), file);
    }
    Ok(out)
}

/// What a projected volume's sources are made from.
struct Source<'a> {
    pod: &'a Pod,
    volume: &'a Volume,
    objects: &'a VolumeObjects,
    allocatable: &'a Allocatable,
}

/// kubelet's projected `collectData`: the files of every source in order, paths written in the
/// spec checked for collisions.
fn projected_files(source: &Source<'_>, p: &ProjectedVolumeSource, at: &str) -> Result<Files, VolumeError> {
    let mode = default_mode(p.default_mode, &format!("{at}.projected.defaultMode"))?;
    let defaults = Defaults::new(mode, p.default_user, &format!("{at}.projected.defaultUser"))?;
    let fs_group = source
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|s| s.fs_group);
    let token_defaults = TokenDefaults {
        mode,
        user: defaults.user.or(fs_user(source.pod)),
        fs_group: fs_group.is_some(),
    };
    let mut files = Files::new();
    let mut explicit: HashMap<String, String> = HashMap::new();
    for (k, projection) in p.sources.iter().flatten().enumerate() {
        let src_at = format!("{at}.projected.sources[{k}]");
        let part = projection_files(source, projection, k, &src_at, defaults, token_defaults)?;
        for (field, path, file) in part {
            // Paths written in the spec (items, token paths) may not collide; keys of whole
            // objects may, the later source winning.
            if !field.ends_with(']') {
                let clean = clean_path(&path);
                if let Some(previous) = explicit.insert(clean.clone(), field.clone()) {
                    return Err(VolumeError {
                        field,
                        reason: format!("{path:?}: conflicting duplicate paths (also {previous})"),
                    });
                }
            }
            files.push((field, path, file));
        }
    }
    Ok(files)
}

/// The files of source `k` of a projected volume.
fn projection_files(
    source: &Source<'_>,
    projection: &VolumeProjection,
    k: usize,
    src_at: &str,
    defaults: Defaults,
    token_defaults: TokenDefaults,
) -> Result<Files, VolumeError> {
    let Source {
        pod,
        volume,
        objects,
        allocatable,
    } = *source;
    if let Some(c) = &projection.config_map {
        let optional = c.optional == Some(true);
        config_map_files(
            &format!("{src_at}.configMap"),
            &c.name,
            c.items.as_deref(),
            defaults,
            optional,
            objects,
        )
        .map_err(|e| object_error(volume, e.to_string()))?
    } else if let Some(s) = &projection.secret {
        let optional = s.optional == Some(true);
        secret_files(
            &format!("{src_at}.secret"),
            &s.name,
            s.items.as_deref(),
            defaults,
            optional,
            objects,
        )
        .map_err(|e| object_error(volume, e.to_string()))?
    } else if let Some(d) = &projection.downward_api {
        downward_files(
            &format!("{src_at}.downwardAPI"),
            pod,
            d.items.as_deref(),
            defaults,
            allocatable,
        )
    } else if let Some(t) = &projection.service_account_token {
        let token = objects.tokens.get(&(volume.name.clone(), k)).ok_or_else(|| {
            object_error(
                volume,
                format!("service account token for projected source {k} was not requested"),
            )
        })?;
        token_file(t, token, src_at, token_defaults)
    } else {
        Err(VolumeError {
            field: src_at.to_string(),
            reason: "no supported projection (configMap, secret, downwardAPI, serviceAccountToken)".into(),
        })
    }
}

/// What a projected volume's token file gets unless its source says otherwise.
#[derive(Debug, Clone, Copy)]
struct TokenDefaults {
    /// The volume's `defaultMode`.
    mode: u32,
    /// The volume's `defaultUser`, else the pod's [`fs_user`].
    user: Option<u32>,
    /// The pod sets an `fsGroup`.
    fs_group: bool,
}

/// A projected `serviceAccountToken` source's file.
fn token_file(
    t: &ServiceAccountTokenProjection,
    token: &str,
    src_at: &str,
    defaults: TokenDefaults,
) -> Result<Files, VolumeError> {
    // kubelet writes the token 0600 when it sets ownership (SetVolumeOwnership then
    // adds group read for the fsGroup).
    let owner = match t.user {
        Some(u) => Some(check_user(u, &format!("{src_at}.serviceAccountToken.user"))?),
        None => defaults.user,
    };
    let token_mode = if defaults.fs_group || owner.is_some() {
        0o600
    } else {
        defaults.mode
    };
    Ok(vec![(
        format!("{src_at}.serviceAccountToken.path"),
        t.path.clone(),
        FileProjection {
            data: token.as_bytes().to_vec(),
            mode: token_mode,
            owner,
        },
    )])
}

type Files = Vec<(String, String, FileProjection)>;

/// A volume's `defaultMode` and `defaultUser`.
#[derive(Debug, Clone, Copy)]
struct Defaults {
    mode: u32,
    user: Option<u32>,
}

impl Defaults {
    fn new(mode: u32, user: Option<i64>, field: &str) -> Result<Self, VolumeError> {
        Ok(Defaults {
            mode,
            user: user.map(|u| check_user(u, field)).transpose()?,
        })
    }

    /// An item's mode and owner: its own, else the volume's.
    fn item(self, mode: Option<i32>, user: Option<i64>, at: &str) -> Result<(u32, Option<u32>), VolumeError> {
        let mode = match mode {
            Some(m) => check_mode(m, &format!("{at}.mode"))?,
            None => self.mode,
        };
        let user = match user {
            Some(u) => Some(check_user(u, &format!("{at}.user"))?),
            None => self.user,
        };
        Ok((mode, user))
    }
}

fn check_user(user: i64, field: &str) -> Result<u32, VolumeError> {
    u32::try_from(user).map_err(|_| VolumeError {
        field: field.to_string(),
        reason: format!("{user}: must be a valid user ID"),
    })
}

fn default_mode(mode: Option<i32>, field: &str) -> Result<u32, VolumeError> {
    mode.map_or(Ok(DEFAULT_MODE), |m| check_mode(m, field))
}

fn check_mode(mode: i32, field: &str) -> Result<u32, VolumeError> {
    u32::try_from(mode)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| VolumeError {
            field: field.to_string(),
            reason: format!("{mode}: must be a number between 0 and 0777 (octal), both inclusive"),
        })
}

/// Why a configMap or secret volume has no payload, in kubelet's words: its object or key is
/// missing. Reported as the volume's error (a field's error is a [`VolumeError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ObjectError {
    /// The caller did not fetch the object before asking (a bug of the caller).
    #[error("{kind} {name:?} was not fetched")]
    NotFetched {
        /// `configmap` or `secret`.
        kind: &'static str,
        /// The object's name.
        name: String,
    },
    /// The object does not exist and the volume is not optional.
    #[error("{kind} {name:?} not found")]
    NotFound {
        /// `configmap` or `secret`.
        kind: &'static str,
        /// The object's name.
        name: String,
    },
    /// An item names a key the configMap does not have.
    #[error("configmap references non-existent config key: {0}")]
    MissingConfigMapKey(String),
    /// An item names a key the secret does not have.
    #[error("references non-existent secret key: {0}")]
    MissingSecretKey(String),
}

/// kubelet's configMap `MakePayload`. The outer error is about the object (reported as the
/// volume's), the inner about a field.
fn config_map_files(
    at: &str,
    name: &str,
    items: Option<&[KeyToPath]>,
    defaults: Defaults,
    optional: bool,
    objects: &VolumeObjects,
) -> Result<Result<Files, VolumeError>, ObjectError> {
    let data = match objects.config_maps.get(name) {
        None => {
            return Err(ObjectError::NotFetched {
                kind: "configmap",
                name: name.to_string(),
            })
        }
        Some(None) if optional => ConfigMapData::default(),
        Some(None) => {
            return Err(ObjectError::NotFound {
                kind: "configmap",
                name: name.to_string(),
            })
        }
        Some(Some(data)) => data.clone(),
    };
    let lookup = |key: &str| {
        data.data
            .get(key)
            .map(|s| s.as_bytes().to_vec())
            .or_else(|| data.binary_data.get(key).cloned())
    };
    let keys: Vec<(String, Vec<u8>)> = data
        .data
        .iter()
        .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
        .chain(data.binary_data.iter().map(|(k, v)| (k.clone(), v.clone())))
        .collect();
    map_keys(at, items, defaults, optional, lookup, keys, |k| {
        ObjectError::MissingConfigMapKey(k.to_string())
    })
}

/// kubelet's secret `MakePayload`.
fn secret_files(
    at: &str,
    name: &str,
    items: Option<&[KeyToPath]>,
    defaults: Defaults,
    optional: bool,
    objects: &VolumeObjects,
) -> Result<Result<Files, VolumeError>, ObjectError> {
    let data = match objects.secrets.get(name) {
        None => {
            return Err(ObjectError::NotFetched {
                kind: "secret",
                name: name.to_string(),
            })
        }
        Some(None) if optional => BTreeMap::new(),
        Some(None) => {
            return Err(ObjectError::NotFound {
                kind: "secret",
                name: name.to_string(),
            })
        }
        Some(Some(data)) => data.clone(),
    };
    let keys = data.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    map_keys(
        at,
        items,
        defaults,
        optional,
        |k| data.get(k).cloned(),
        keys,
        |k| ObjectError::MissingSecretKey(k.to_string()),
    )
}

/// Without `items` every key is a file; with them only the listed keys, at their paths.
fn map_keys(
    at: &str,
    items: Option<&[KeyToPath]>,
    defaults: Defaults,
    optional: bool,
    lookup: impl Fn(&str) -> Option<Vec<u8>>,
    keys: Vec<(String, Vec<u8>)>,
    missing_key: impl Fn(&str) -> ObjectError,
) -> Result<Result<Files, VolumeError>, ObjectError> {
    let items = items.unwrap_or_default();
    if items.is_empty() {
        return Ok(Ok(keys
            .into_iter()
            .map(|(key, data)| {
                (
                    format!("{at}[{key:?}]"),
                    key,
                    FileProjection {
                        data,
                        mode: defaults.mode,
                        owner: defaults.user,
                    },
                )
            })
            .collect()));
    }
    let mut files = Vec::new();
    for (j, item) in items.iter().enumerate() {
        let Some(data) = lookup(&item.key) else {
            if optional {
                continue;
            }
            return Err(missing_key(&item.key));
        };
        let (mode, owner) = match defaults.item(item.mode, item.user, &format!("{at}.items[{j}]")) {
            Ok(v) => v,
            Err(e) => return Ok(Err(e)),
        };
        files.push((
            format!("{at}.items[{j}].path"),
            item.path.clone(),
            FileProjection { data, mode, owner },
        ));
    }
    Ok(Ok(files))
}

/// kubelet's downwardAPI `CollectData`.
fn downward_files(
    at: &str,
    pod: &Pod,
    items: Option<&[DownwardAPIVolumeFile]>,
    defaults: Defaults,
    allocatable: &Allocatable,
) -> Result<Files, VolumeError> {
    let mut files = Vec::new();
    for (j, item) in items.unwrap_or_default().iter().enumerate() {
        let item_at = format!("{at}.items[{j}]");
        let (mode, owner) = defaults.item(item.mode, item.user, &item_at)?;
        let data = match (&item.field_ref, &item.resource_field_ref) {
            (Some(f), None) => downward::extract(pod, &f.field_path).map_err(|e| VolumeError {
                field: format!("{item_at}.fieldRef.fieldPath"),
                reason: e.to_string(),
            })?,
            (None, Some(r)) => {
                let container = r
                    .container_name
                    .as_deref()
                    .filter(|c| !c.is_empty())
                    .ok_or_else(|| VolumeError {
                        field: format!("{item_at}.resourceFieldRef.containerName"),
                        reason: "Required value".into(),
                    })?;
                resource_value(pod, container, r, allocatable).map_err(|e| VolumeError {
                    field: format!("{item_at}.resourceFieldRef"),
                    reason: e.to_string(),
                })?
            }
            _ => {
                return Err(VolumeError {
                    field: item_at,
                    reason: "exactly one of fieldRef and resourceFieldRef must be set".into(),
                })
            }
        };
        files.push((
            format!("{item_at}.path"),
            item.path.clone(),
            FileProjection {
                data: data.into_bytes(),
                mode,
                owner,
            },
        ));
    }
    Ok(files)
}

/// kubelet's `FsUserFrom`: the user every init and app container runs as, if they all set the same
/// one (container `runAsUser`, else the pod's).
fn fs_user(pod: &Pod) -> Option<u32> {
    let spec = pod.spec.as_ref()?;
    let pod_user = spec.security_context.as_ref().and_then(|s| s.run_as_user);
    let mut user = None;
    for c in spec.init_containers.iter().flatten().chain(&spec.containers) {
        let u = c.security_context.as_ref().and_then(|s| s.run_as_user).or(pod_user)?;
        if user.is_some_and(|prev| prev != u) {
            return None;
        }
        user = Some(u);
    }
    user.and_then(|u| u32::try_from(u).ok())
}

/// Why the AtomicWriter refuses a payload path, in its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidPath {
    /// An empty path.
    #[error("invalid path: must not be empty")]
    Empty,
    /// An absolute path.
    #[error("invalid path: must be relative path")]
    Absolute,
    /// Over 4096 characters.
    #[error("invalid path: must be less than or equal to {MAX_PATH_LENGTH} characters")]
    TooLong,
    /// A `..` element.
    #[error("invalid path: must not contain '..'")]
    DotDot,
    /// An element over 255 characters.
    #[error("invalid path: filenames must be less than or equal to {MAX_FILE_NAME_LENGTH} characters")]
    NameTooLong,
    /// The first element starts with `..` (it would collide with `..data`).
    #[error("invalid path: must not start with '..'")]
    StartsWithDotDot,
}

/// The AtomicWriter's `validatePath`: not empty, relative, at most 4096 characters, no `..`
/// element, elements of at most 255 characters, the first not starting with `..`.
pub fn validate_path(path: &str) -> Result<(), InvalidPath> {
    if path.is_empty() {
        return Err(InvalidPath::Empty);
    }
    if path.starts_with('/') {
        return Err(InvalidPath::Absolute);
    }
    if path.len() > MAX_PATH_LENGTH {
        return Err(InvalidPath::TooLong);
    }
    let items: Vec<&str> = path.split('/').collect();
    for item in &items {
        if *item == ".." {
            return Err(InvalidPath::DotDot);
        }
        if item.len() > MAX_FILE_NAME_LENGTH {
            return Err(InvalidPath::NameTooLong);
        }
    }
    if items[0].starts_with("..") {
        return Err(InvalidPath::StartsWithDotDot);
    }
    Ok(())
}

/// Go's `filepath.Clean` for a valid relative path: no empty or `.` elements.
fn clean_path(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

/// What the API server checks of a volume's items before a pod is accepted (paths, modes,
/// downwardAPI fields); the error's field is relative to the volume.
pub(crate) fn validate_volume(volume: &Volume) -> Result<(), FieldError> {
    let check_items = |at: &str, items: Option<&[KeyToPath]>| {
        for (j, item) in items.unwrap_or_default().iter().enumerate() {
            check_item(&format!("{at}.items[{j}]"), &item.path, item.mode)?;
        }
        Ok::<(), FieldError>(())
    };
    let check_downward = |at: &str, items: Option<&[DownwardAPIVolumeFile]>| {
        for (j, item) in items.unwrap_or_default().iter().enumerate() {
            let item_at = format!("{at}.items[{j}]");
            check_item(&item_at, &item.path, item.mode)?;
            if let Some(f) = &item.field_ref {
                if !downward::volume_field_supported(&f.field_path) {
                    return Err(FieldError::unsupported(
                        format!("{item_at}.fieldRef.fieldPath"),
                        format!("{:?}", f.field_path),
                    ));
                }
            }
        }
        Ok(())
    };
    if let Some(c) = &volume.config_map {
        check_items("configMap", c.items.as_deref())?;
    }
    if let Some(s) = &volume.secret {
        check_items("secret", s.items.as_deref())?;
    }
    if let Some(d) = &volume.downward_api {
        check_downward("downwardAPI", d.items.as_deref())?;
    }
    for (k, s) in volume
        .projected
        .iter()
        .flat_map(|p| p.sources.iter().flatten())
        .enumerate()
    {
        let at = format!("projected.sources[{k}]");
        if let Some(c) = &s.config_map {
            check_items(&format!("{at}.configMap"), c.items.as_deref())?;
        }
        if let Some(x) = &s.secret {
            check_items(&format!("{at}.secret"), x.items.as_deref())?;
        }
        if let Some(d) = &s.downward_api {
            check_downward(&format!("{at}.downwardAPI"), d.items.as_deref())?;
        }
        if let Some(t) = &s.service_account_token {
            check_item(&format!("{at}.serviceAccountToken"), &t.path, None)?;
        }
    }
    Ok(())
}

fn check_item(at: &str, path: &str, mode: Option<i32>) -> Result<(), FieldError> {
    validate_path(path).map_err(|e| FieldError::invalid(format!("{at}.path"), format!("{path:?}: {e}")))?;
    if let Some(m) = mode {
        check_mode(m, "").map_err(|e| FieldError::invalid(format!("{at}.mode"), e.reason))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
