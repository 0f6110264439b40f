//! The object store: every object as JSON keyed by (resource, namespace, name), one global
//! resourceVersion counter, a bounded history of changes for watches, and the open watches.
//!
//! Every write takes the store's lock, so a change, its history entry and its delivery to every
//! open watch happen in resourceVersion order.

mod csr;
mod delete;
mod list;
mod node_cidrs;
mod watch;

pub use delete::DeleteOptions;
pub use list::{Continue, ReadAt};
pub use watch::{WatchSpec, WatchStart};

pub use super::lookup::Subresource;
pub use super::options::WriteOptions;

use super::admission;
use super::cluster::{self, ClusterConfig};
use super::error::{ApiError, Cause};
use super::lookup::Lookup;
use super::patch::{self, PatchType};
use super::resources::{self, ResourceInfo};
use super::scheduler;
use super::validate::{self, FieldValidation};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::hash::{BuildHasher, Hasher};

/// How many changes the history keeps for watches that resume from a resourceVersion.
pub const DEFAULT_HISTORY: usize = 1000;

type Key = (&'static str, String, String);

/// A watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

#[derive(Debug, Clone)]
struct Change {
    rv: u64,
    resource: &'static str,
    event: EventType,
    object: Value,
    old: Option<Value>,
}

/// The objects, the history and the open watches.
pub struct Store {
    rv: u64,
    objects: BTreeMap<Key, Value>,
    history: VecDeque<Change>,
    history_limit: usize,
    /// Changes up to this resourceVersion are no longer in the history.
    compacted: u64,
    watchers: Vec<watch::Watcher>,
    uid_seed: std::collections::hash_map::RandomState,
    uid_counter: u64,
    cluster: ClusterConfig,
    /// The scheduler is binding pods (its own changes do not run it again).
    scheduling: bool,
    /// The CSR controllers are writing (their own changes do not run them again).
    controlling_csrs: bool,
    /// Node IPAM's pod CIDRs (`ClusterConfig::cluster_cidr`); none: Nodes get none.
    node_cidrs: Option<crate::node_ipam::CidrSet>,
    /// Node IPAM is writing a Node (its own change does not run it again).
    allocating_cidrs: bool,
}

/// `2024-01-02T03:04:05Z`, as `metav1.Time` serializes.
pub fn now_rfc3339() -> String {
    rfc3339(jiff::Timestamp::now())
}

fn rfc3339(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or_default()
}

/// A resource as kube-apiserver names it in messages (`schema.GroupResource.String()`):
/// `pods`, `leases.coordination.k8s.io`.
fn qualified(resource: &ResourceInfo) -> String {
    if resource.group.is_empty() {
        resource.plural.to_string()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    }
}

/// 404 `<resource> "<name>" not found` (`errors.NewNotFound`: details kind is the plural, with
/// the group).
fn not_found(resource: &ResourceInfo, name: &str) -> ApiError {
    let mut err = ApiError::not_found(resource.plural, name).in_group(resource.group);
    err.message = format!("{} \"{name}\" not found", qualified(resource));
    err
}

/// 409 `Operation cannot be fulfilled on <resource> "<name>": <why>` (`errors.NewConflict`).
fn conflict_because(resource: &ResourceInfo, name: &str, why: &str) -> ApiError {
    let mut err = ApiError::conflict_because(resource.plural, name, why).in_group(resource.group);
    err.message = format!(
        "Operation cannot be fulfilled on {} \"{name}\": {why}",
        qualified(resource)
    );
    err
}

/// `genericregistry.OptimisticLockErrorMsg`, for an update from a stale resourceVersion.
const OPTIMISTIC_LOCK: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// Kinds whose strategy refuses unconditional updates (`AllowUnconditionalUpdate` false): a PUT
/// must carry `metadata.resourceVersion` (`pkg/registry/coordination/lease/strategy.go`).
const CONDITIONAL_UPDATE_ONLY: &[&str] = &["Lease"];

impl Default for Store {
    fn default() -> Self {
        Self::new(DEFAULT_HISTORY, ClusterConfig::default())
    }
}

impl Store {
    /// A store with what every cluster has: the four namespaces (each with its `default`
    /// ServiceAccount and `kube-root-ca.crt`) and the `kubernetes` Service.
    pub fn new(history_limit: usize, cluster: ClusterConfig) -> Self {
        let node_cidrs = cluster.node_cidrs.clone();
        let mut store = Self {
            rv: 0,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            compacted: 0,
            watchers: Vec::new(),
            uid_seed: Default::default(),
            uid_counter: 0,
            cluster,
            scheduling: false,
            controlling_csrs: false,
            node_cidrs,
            allocating_cidrs: false,
        };
        let namespaces = resources::by_name("namespaces").expect("namespaces are served");
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            store
                .create(
                    namespaces,
                    "",
                    json!({"metadata": {"name": ns}}),
                    &WriteOptions::default(),
                )
                .expect("the built-in namespaces are valid");
        }
        let services = resources::by_name("services").expect("services are served");
        let kubernetes = cluster::kubernetes_service(store.cluster.port);
        store
            .create(services, "default", kubernetes, &WriteOptions::default())
            .expect("the kubernetes Service is valid");
        store
    }

    /// The CA certificate (PEM) the `kube-root-ca.crt` ConfigMaps publish.
    pub fn root_ca_pem(&self) -> &str {
        &self.cluster.root_ca_pem
    }

    /// The `default` ServiceAccount and `kube-root-ca.crt` of a new namespace, as the
    /// controllers create them (at once here).
    fn populate_namespace(&mut self, ns: &str) {
        let accounts = resources::by_name("serviceaccounts").expect("served");
        let config_maps = resources::by_name("configmaps").expect("served");
        let objects = [
            (accounts, cluster::default_service_account(ns)),
            (config_maps, cluster::root_ca_config_map(ns, &self.cluster.root_ca_pem)),
        ];
        for (resource, obj) in objects {
            let name = meta_str(&obj, "name").to_string();
            if !self.objects.contains_key(&Self::key(resource, ns, &name)) {
                self.create(resource, ns, obj, &WriteOptions::default())
                    .expect("a namespace's own objects are valid");
            }
        }
    }

    fn random_u64(&mut self) -> u64 {
        self.uid_counter += 1;
        let mut h = self.uid_seed.build_hasher();
        h.write_u64(self.uid_counter);
        h.write_u64(3);
        h.finish()
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    pub(crate) fn new_uid(&mut self) -> String {
        self.uid_counter += 1;
        let counter = self.uid_counter;
        let half = |salt: u64| {
            let mut h = self.uid_seed.build_hasher();
            h.write_u64(counter);
            h.write_u64(salt);
            h.finish()
        };
        let (a, b) = (half(1), half(2));
        let hex = format!("{a:016x}{b:016x}");
        format!(
            "{}-{}-4{}-{}{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[13..16],
            ["8", "9", "a", "b"][(b & 3) as usize],
            &hex[17..20],
            &hex[20..32]
        )
    }

    fn random_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let uid = self.new_uid().replace('-', "");
        let n = u128::from_str_radix(&uid, 16).unwrap_or_default();
        (0..5)
            .map(|i| ALPHABET[((n >> (i * 8)) % ALPHABET.len() as u128) as usize] as char)
            .collect()
    }

    fn key(resource: &'static ResourceInfo, ns: &str, name: &str) -> Key {
        let ns = if resource.namespaced { ns } else { "" };
        (resource.plural, ns.to_string(), name.to_string())
    }

    /// One object, or 404.
    pub fn get(&self, resource: &'static ResourceInfo, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.objects
            .get(&Self::key(resource, ns, name))
            .cloned()
            .ok_or_else(|| not_found(resource, name))
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        self.objects
            .contains_key(&("namespaces", String::new(), ns.to_string()))
    }

    fn check_namespace(&self, resource: &ResourceInfo, ns: &str) -> Result<(), ApiError> {
        if resource.namespaced && !self.namespace_exists(ns) {
            return Err(ApiError::not_found("namespaces", ns));
        }
        Ok(())
    }

    /// Decodes a body and deals with unknown fields per `fieldValidation`; returns the object and
    /// the warnings to send.
    fn decode(resource: &ResourceInfo, body: &Value, opts: &WriteOptions) -> Result<(Value, Vec<String>), ApiError> {
        let decoded = validate::decode(resource, body)?;
        let mut warnings = Vec::new();
        if !decoded.unknown.is_empty() {
            match opts.field_validation {
                FieldValidation::Strict => return Err(validate::unknown_fields_error(resource, &decoded.unknown)),
                FieldValidation::Warn => {
                    warnings.extend(decoded.unknown.iter().map(|f| format!("unknown field \"{f}\"")));
                }
                FieldValidation::Ignore => {}
            }
        }
        Ok((decoded.object, warnings))
    }

    /// POST: creates an object in `ns` (ignored for cluster-scoped resources).
    pub fn create(
        &mut self,
        resource: &'static ResourceInfo,
        ns: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let (mut obj, warnings) = Self::decode(resource, &body, opts)?;
        if !meta_str(&obj, "resourceVersion").is_empty() {
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let body_ns = meta_str(&obj, "namespace");
        if resource.namespaced {
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            obj["metadata"]["namespace"] = json!(ns);
        } else if let Value::Object(meta) = &mut obj["metadata"] {
            meta.remove("namespace");
        }
        // Admission sees the name before generation (its errors name the generateName).
        let requested_name = meta_str(&obj, "name").to_string();
        let admission_name = match meta_str(&obj, "name") {
            "" => meta_str(&obj, "generateName").to_string(),
            name => name.to_string(),
        };
        if meta_str(&obj, "name").is_empty() {
            let generate = meta_str(&obj, "generateName").to_string();
            if !generate.is_empty() {
                let name = format!("{generate}{}", self.random_suffix());
                obj["metadata"]["name"] = json!(name);
            }
        }
        // Like kube-apiserver's PrepareForCreate: a new pod's, namespace's or service's status is
        // the server's (Pending and its QoS class, Active, empty); a node keeps the one it sends.
        if matches!(resource.kind, "Pod" | "Namespace" | "Service") {
            if let Value::Object(map) = &mut obj {
                map.remove("status");
            }
        }
        validate::apply_defaults(resource.kind, &mut obj);
        if resource.kind == "CertificateSigningRequest" {
            super::csr::prepare_for_create(&mut obj, opts.user.as_ref());
        }
        // As on kube-apiserver: the namespace lifecycle and the mutating admission plugins run
        // before validation.
        self.check_namespace(resource, ns)?;
        let request = admission::CreateRequest {
            ns,
            name: &requested_name,
            admission_name: &admission_name,
            node: opts.node.as_deref(),
            service_accounts: self.cluster.service_account_admission,
        };
        let suffix = if resource.kind == "Pod" {
            self.random_suffix()
        } else {
            String::new()
        };
        admission::admit_create(self, resource, &request, &mut obj, &suffix)?;
        if resource.kind == "Service" {
            let seed = self.random_u64();
            cluster::allocate_service(self, &mut obj, None, seed)?;
        }
        validate::validate(resource, &obj, None)?;
        let name = meta_str(&obj, "name").to_string();
        let key = Self::key(resource, ns, &name);
        if self.objects.contains_key(&key) {
            let mut err = ApiError::already_exists(resource.plural, &name).in_group(resource.group);
            err.message = format!("{} \"{name}\" already exists", qualified(resource));
            return Err(err);
        }
        let uid = self.new_uid();
        let meta = obj["metadata"].as_object_mut().expect("decoded objects have metadata");
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        meta.remove("selfLink");
        meta.remove("managedFields");
        if resource.kind == "Pod" {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
        if opts.dry_run {
            return Ok((obj, warnings));
        }
        let obj = self.commit(resource, key, EventType::Added, Some(obj), None);
        if resource.kind == "Namespace" {
            self.populate_namespace(&name);
        }
        Ok((obj, warnings))
    }

    /// PUT: replaces an object (its main resource or its status). A missing object is 404,
    /// except for kinds whose strategy allows create on update (events, leases), which it
    /// creates (the last value says so: 201). Kinds that refuse unconditional updates (leases)
    /// need `metadata.resourceVersion` (`Store.Update` in
    /// `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`).
    pub fn update(
        &mut self,
        resource: &'static ResourceInfo,
        ns: &str,
        name: &str,
        body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<(Value, Vec<String>, bool), ApiError> {
        let (mut new, warnings) = Self::decode(resource, &body, opts)?;
        let body_name = meta_str(&new, "name");
        if body_name.is_empty() {
            new["metadata"]["name"] = json!(name);
        } else if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let body_ns = meta_str(&new, "namespace");
        if resource.namespaced && !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let key = Self::key(resource, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            if resource.create_on_update && sub == Subresource::Main {
                if let Value::Object(meta) = &mut new["metadata"] {
                    meta.remove("resourceVersion");
                }
                return self.create(resource, ns, new, opts).map(|(obj, w)| (obj, w, true));
            }
            return Err(not_found(resource, name));
        };
        Self::check_uid_precondition(resource, &old, &new)?;
        if meta_str(&new, "resourceVersion").is_empty() && CONDITIONAL_UPDATE_ONLY.contains(&resource.kind) {
            let cause = Cause::invalid("metadata.resourceVersion", &json!(0), "must be specified for an update");
            let mut err = ApiError::invalid(&qualified(resource), name, vec![cause]).in_group(resource.group);
            if let Some(details) = err.details.as_mut().and_then(Value::as_object_mut) {
                details.insert("kind".into(), json!(resource.plural));
            }
            return Err(err);
        }
        self.replace(resource, key, old, new, sub, opts)
            .map(|obj| (obj, warnings, false))
    }

    /// A `metadata.uid` in the new object is a precondition (`defaultUpdatedObjectInfo`'s
    /// `Preconditions`, checked by etcd3's `GuaranteedUpdate` before the resourceVersion).
    fn check_uid_precondition(resource: &ResourceInfo, old: &Value, new: &Value) -> Result<(), ApiError> {
        let uid = meta_str(new, "uid");
        if uid.is_empty() || uid == meta_str(old, "uid") {
            return Ok(());
        }
        Err(conflict_because(
            resource,
            meta_str(old, "name"),
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta_str(old, "uid")
            ),
        ))
    }

    /// The common tail of update and patch: preconditions, what the subresource may change,
    /// server-owned metadata, validation, defaults, then the write (skipped if nothing changed).
    fn replace(
        &mut self,
        resource: &'static ResourceInfo,
        key: Key,
        old: Value,
        mut new: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let name = key.2.clone();
        Self::check_uid_precondition(resource, &old, &new)?;
        let rv = meta_str(&new, "resourceVersion");
        if !rv.is_empty() {
            let parsed: u64 = rv
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: \"{rv}\"")))?;
            if parsed.to_string() != meta_str(&old, "resourceVersion") {
                return Err(conflict_because(resource, &name, OPTIMISTIC_LOCK));
            }
        }
        if resource.namespaced {
            new["metadata"]["namespace"] = json!(key.1);
        }
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old["metadata"].get(field) {
                Some(v) => new["metadata"][field] = v.clone(),
                None => {
                    if let Value::Object(meta) = &mut new["metadata"] {
                        meta.remove(field);
                    }
                }
            }
        }
        if let Value::Object(meta) = &mut new["metadata"] {
            meta.remove("selfLink");
            meta.remove("managedFields");
        }
        if resource.kind == "Pod" {
            // kube-apiserver's ephemeralContainersStrategy: the subresource changes only
            // `spec.ephemeralContainers`; every other write keeps them as they were.
            let (keep, from) = match sub {
                Subresource::EphemeralContainers => (&old, &new),
                _ => (&new, &old),
            };
            // Everything else, metadata included, as stored (dropNonEphemeralContainerUpdates).
            let mut merged = keep.clone();
            match from["spec"].get("ephemeralContainers") {
                Some(list) => merged["spec"]["ephemeralContainers"] = list.clone(),
                None => {
                    if let Value::Object(spec) = &mut merged["spec"] {
                        spec.remove("ephemeralContainers");
                    }
                }
            }
            new = merged;
        }
        if resource.kind == "CertificateSigningRequest" {
            super::csr::prepare_for_update(sub, &old, &mut new);
        } else if resource.has_status {
            let obj = new.as_object_mut().expect("decoded objects are objects");
            match sub {
                Subresource::Main | Subresource::EphemeralContainers | Subresource::Approval => match old.get("status")
                {
                    Some(status) => {
                        obj.insert("status".into(), status.clone());
                    }
                    None => {
                        obj.remove("status");
                    }
                },
                Subresource::Status => {
                    for (k, v) in old.as_object().expect("stored objects are objects") {
                        if !matches!(k.as_str(), "status" | "metadata" | "apiVersion" | "kind") {
                            obj.insert(k.clone(), v.clone());
                        }
                    }
                    obj.retain(|k, _| {
                        matches!(k.as_str(), "status" | "metadata" | "apiVersion" | "kind") || old.get(k).is_some()
                    });
                    if resource.kind == "Pod" {
                        match old["metadata"].get("ownerReferences") {
                            Some(refs) => new["metadata"]["ownerReferences"] = refs.clone(),
                            None => {
                                if let Value::Object(meta) = &mut new["metadata"] {
                                    meta.remove("ownerReferences");
                                }
                            }
                        }
                    }
                }
            }
        }
        if resource.kind == "Pod" && sub == Subresource::Status {
            super::status_rules::prepare_pod_status_update(&mut new, &old);
        }
        validate::apply_defaults(resource.kind, &mut new);
        admission::admit_update(resource, sub, &old, &mut new, opts.node.as_deref())?;
        if resource.kind == "Service" {
            let seed = self.random_u64();
            cluster::allocate_service(self, &mut new, Some(&old), seed)?;
        }
        if sub == Subresource::EphemeralContainers {
            validate::validate_ephemeral_update(&new, &old)?;
        }
        validate::validate(resource, &new, Some(&old))?;
        if resource.kind == "Pod" && new["spec"] != old["spec"] {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            new["metadata"]["generation"] = json!(generation);
        }
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
        if new == old || opts.dry_run {
            return Ok(new);
        }
        let finalized = new["metadata"].get("deletionTimestamp").is_some()
            && new["metadata"]["finalizers"].as_array().is_none_or(Vec::is_empty)
            && new["metadata"]["deletionGracePeriodSeconds"].as_i64().unwrap_or(0) == 0;
        if finalized {
            // `deleteWithoutFinalizers`: the update is not written; the stored object is
            // deleted (watchers get it as it was stored), and the caller gets its object back.
            self.commit(resource, key, EventType::Deleted, Some(old.clone()), Some(old));
            return Ok(new);
        }
        Ok(self.commit(resource, key, EventType::Modified, Some(new), Some(old)))
    }

    /// PATCH: applies a patch to the stored object and writes the result as an update. Apply
    /// patches create a missing object.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        resource: &'static ResourceInfo,
        ns: &str,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<(Value, Vec<String>, bool), ApiError> {
        if patch_type == PatchType::Apply {
            if let Some(manager) = opts.field_manager.as_deref().filter(|m| !m.is_empty()) {
                let causes = super::options::field_manager_errors(manager);
                if !causes.is_empty() {
                    return Err(ApiError::invalid_options("PatchOptions", causes));
                }
            } else {
                return Err(ApiError::invalid_options(
                    "PatchOptions",
                    vec![super::error::Cause::required(
                        "fieldManager",
                        "is required for apply patch",
                    )],
                ));
            }
        }
        let key = Self::key(resource, ns, name);
        let old = self.objects.get(&key).cloned();
        if patch_type == PatchType::Apply {
            // Apply creates a missing object (not through a subresource).
            if old.is_none() && sub != Subresource::Main {
                return Err(not_found(resource, name));
            }
            let (body, mut warnings) =
                patch::applied_object(resource, (ns, name), old.as_ref(), patch, opts.field_validation)?;
            let Some(old) = old else {
                let (obj, more) = self.create(resource, ns, body, opts)?;
                warnings.extend(more);
                return Ok((obj, warnings, true));
            };
            let obj = self.replace(resource, key, old, body, sub, opts)?;
            return Ok((obj, warnings, false));
        }
        let Some(old) = old else {
            return Err(not_found(resource, name));
        };
        let (new, warnings) =
            patch::patched_object(resource, (ns, name), &old, patch_type, patch, opts.field_validation)?;
        let obj = self.replace(resource, key, old, new, sub, opts)?;
        Ok((obj, warnings, false))
    }

    /// POST pods/<name>/binding: sets `spec.nodeName` of an unbound pod.
    pub fn bind(&mut self, ns: &str, name: &str, binding: &Value) -> Result<Value, ApiError> {
        let pods = resources::by_name("pods").expect("pods are served");
        let node = binding["target"]["name"].as_str().unwrap_or_default();
        if node.is_empty() {
            return Err(ApiError::invalid(
                "Binding",
                name,
                vec![super::error::Cause::required("target.name", "")],
            ));
        }
        let key = Self::key(pods, ns, name);
        let old = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found("pods", name))?;
        let bound = old["spec"]["nodeName"].as_str().unwrap_or_default();
        if !bound.is_empty() {
            return Err(ApiError::conflict_because(
                "pods",
                name,
                &format!("pod {name} is already assigned to node \"{bound}\""),
            ));
        }
        if !old["metadata"]["deletionTimestamp"].is_null() {
            return Err(ApiError::conflict_because(
                "pods",
                name,
                &format!("pod {name} is being deleted, cannot be assigned to a host"),
            ));
        }
        // As kube-apiserver's binding storage: the node, and PodScheduled=True.
        let mut new = old.clone();
        new["spec"]["nodeName"] = json!(node);
        let mut conditions: Vec<Value> = old["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] != "PodScheduled")
            .cloned()
            .collect();
        conditions.push(json!({
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": null,
            "lastTransitionTime": now_rfc3339(),
        }));
        new["status"]["conditions"] = json!(conditions);
        self.commit(pods, key, EventType::Modified, Some(new), Some(old));
        Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}))
    }

    /// Writes a change: bumps the resourceVersion, stores (or removes) the object, records the
    /// change and sends it to every watch it concerns. Returns the object as stored.
    fn commit(
        &mut self,
        resource: &'static ResourceInfo,
        key: Key,
        event: EventType,
        obj: Option<Value>,
        old: Option<Value>,
    ) -> Value {
        self.rv += 1;
        let mut obj = obj.or_else(|| old.clone()).expect("a change has an object");
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        match event {
            EventType::Deleted => {
                self.objects.remove(&key);
            }
            _ => {
                self.objects.insert(key, obj.clone());
            }
        }
        let change = Change {
            rv: self.rv,
            resource: resource.plural,
            event,
            object: obj.clone(),
            old,
        };
        self.deliver(&change);
        self.history.push_back(change);
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.compacted = dropped.rv;
            }
        }
        if self.cluster.scheduler && !self.scheduling && matches!(resource.plural, "pods" | "nodes") {
            self.schedule();
        }
        if !self.controlling_csrs && resource.plural == "certificatesigningrequests" && event != EventType::Deleted {
            self.control_csrs();
        }
        if !self.allocating_cidrs && resource.plural == "nodes" && self.node_cidrs.is_some() {
            self.allocate_node_cidrs(&obj, event);
        }
        obj
    }

    /// The scheduler's turn after a change of a pod or a node: every pod it should place, oldest
    /// first, is bound to a node that fits it, or marked unschedulable with why.
    fn schedule(&mut self) {
        let pods = resources::by_name("pods").expect("pods are served");
        let mut all = self.all(pods);
        let mut pending: Vec<Value> = all.iter().filter(|p| scheduler::wants(p)).cloned().collect();
        if pending.is_empty() {
            return;
        }
        self.scheduling = true;
        pending.sort_by(|a, b| {
            let at = |p: &Value| {
                (
                    meta_str(p, "creationTimestamp").to_string(),
                    meta_str(p, "name").to_string(),
                )
            };
            at(a).cmp(&at(b))
        });
        let nodes = self.all(resources::by_name("nodes").expect("nodes are served"));
        for pod in pending {
            let (ns, name) = (
                meta_str(&pod, "namespace").to_string(),
                meta_str(&pod, "name").to_string(),
            );
            if scheduler::gated(&pod) {
                let message = "Scheduling is blocked due to non-empty scheduling gates";
                self.set_scheduled_condition(&pod, "SchedulingGated", message);
                continue;
            }
            match scheduler::place(&pod, &nodes, &all) {
                Ok(node) => {
                    let binding = json!({"target": {"kind": "Node", "name": node}});
                    if self.bind(&ns, &name, &binding).is_ok() {
                        let message = format!("Successfully assigned {ns}/{name} to {node}");
                        self.scheduler_event(&pod, "Normal", "Scheduled", &message);
                        if let Ok(bound) = self.get(pods, &ns, &name) {
                            all.push(bound);
                        }
                    }
                }
                Err(scheduler::Unschedulable(message)) => {
                    if self.set_scheduled_condition(&pod, "Unschedulable", &message) {
                        self.scheduler_event(&pod, "Warning", "FailedScheduling", &message);
                    }
                }
            }
        }
        self.scheduling = false;
    }

    /// `PodScheduled=False` with `reason` and `message` on an unbound pod, unless it has just
    /// that already; whether it was written.
    fn set_scheduled_condition(&mut self, pod: &Value, reason: &str, message: &str) -> bool {
        let pods = resources::by_name("pods").expect("pods are served");
        let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let same = conditions.iter().any(|c| {
            c["type"] == "PodScheduled" && c["status"] == "False" && c["reason"] == reason && c["message"] == message
        });
        if same {
            return false;
        }
        let mut new = pod.clone();
        let mut rest: Vec<Value> = conditions.into_iter().filter(|c| c["type"] != "PodScheduled").collect();
        rest.push(json!({
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastProbeTime": null,
            "lastTransitionTime": now_rfc3339(),
        }));
        new["status"]["conditions"] = json!(rest);
        let key = Self::key(pods, meta_str(pod, "namespace"), meta_str(pod, "name"));
        self.commit(pods, key, EventType::Modified, Some(new), Some(pod.clone()));
        true
    }

    /// An Event from `default-scheduler` about `pod`.
    fn scheduler_event(&mut self, pod: &Value, type_: &str, reason: &str, message: &str) {
        self.controller_event(pod, "Pod", scheduler::DEFAULT_SCHEDULER, (type_, reason, message));
    }

    /// An Event from the controller `component` about `object` (of `kind`), as client-go's
    /// recorder writes a new one: in the object's namespace (`default` for a cluster-scoped
    /// object), named `<object>.<16 hex>`, count 1.
    fn controller_event(
        &mut self,
        object: &Value,
        kind: &str,
        component: &str,
        (type_, reason, message): (&str, &str, &str),
    ) {
        let events = resources::by_name("events").expect("events are served");
        let ns = match meta_str(object, "namespace") {
            "" => "default".to_string(),
            ns => ns.to_string(),
        };
        let now = now_rfc3339();
        let suffix = self.random_u64();
        let mut involved = json!({
            "kind": kind,
            "apiVersion": "v1",
            "name": meta_str(object, "name"),
            "uid": meta_str(object, "uid"),
            "resourceVersion": meta_str(object, "resourceVersion"),
        });
        if !meta_str(object, "namespace").is_empty() {
            involved["namespace"] = json!(ns);
        }
        let event = json!({
            "metadata": {"name": format!("{}.{suffix:016x}", meta_str(object, "name")), "namespace": ns},
            "involvedObject": involved,
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        let _ = self.create(events, &ns, event, &WriteOptions::default());
    }
}

/// What the admission plugins read of the store.
impl Lookup for Store {
    fn get(&self, resource: &'static ResourceInfo, ns: &str, name: &str) -> Result<Value, ApiError> {
        Store::get(self, resource, ns, name)
    }

    fn all(&self, resource: &'static ResourceInfo) -> Vec<Value> {
        Store::all(self, resource)
    }
}
