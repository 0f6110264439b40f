//! DELETE, as kube-apiserver's generic registry store deletes: preconditions and graceful
//! deletion first (`rest.BeforeDelete`, `staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go`;
//! a pod's grace from `CheckGracefulDelete`, `pkg/registry/core/pod/strategy.go`), then an update
//! for graceful deletion or pending finalizers, then the removal
//! (`Store.Delete`, `updateForGracefulDeletionAndFinalizers`, `markAsDeleting` and
//! `finalizeDelete` in `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`).

use super::{conflict_because, meta_str, not_found, rfc3339, EventType, Key, Store};
use crate::cluster;
use crate::error::ApiError;
use crate::resources::{self, ResourceInfo};
use crate::selectors::{FieldSelector, LabelSelector};
use serde_json::{json, Value};

/// Options of a delete (query parameters or a `DeleteOptions` body).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `preconditions.uid` (an empty one is compared too, as upstream compares it).
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The node making the request, when NodeRestriction applies to it.
    pub node: Option<String>,
}

/// What `rest.BeforeDelete` decided for an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grace {
    /// No graceful deletion: delete now (or mark for finalizers).
    None,
    /// `deletionTimestamp` and `deletionGracePeriodSeconds` were set (or shortened).
    Graceful,
    /// Already being deleted with no shorter grace asked: nothing to do.
    Pending,
}

fn grace_of(obj: &Value) -> Option<i64> {
    obj["metadata"]["deletionGracePeriodSeconds"].as_i64()
}

fn bump_generation(obj: &mut Value) {
    if let Some(generation) = obj["metadata"]["generation"].as_i64().filter(|g| *g > 0) {
        obj["metadata"]["generation"] = json!(generation + 1);
    }
}

/// `rest.BeforeDelete` for a pod (the only kind here with a graceful delete strategy): an
/// object being deleted may only get a shorter grace (its deletion moved earlier by the
/// difference); otherwise `CheckGracefulDelete` picks the grace (the request's, else the pod's
/// `terminationGracePeriodSeconds`; 0 when unbound or terminal; 1 when negative) and the first
/// graceful deletion bumps `generation`.
fn before_delete_pod(obj: &mut Value, requested: Option<i64>) -> Grace {
    let meta = &obj["metadata"];
    if let Some(timestamp) = meta["deletionTimestamp"].as_str() {
        let existing = match grace_of(obj) {
            None | Some(0) => return Grace::None,
            Some(g) if g < 0 => 1,
            Some(g) => g,
        };
        let Some(period) = requested.filter(|g| *g < existing) else {
            return Grace::Pending;
        };
        let at = timestamp
            .parse::<jiff::Timestamp>()
            .map(|t| t - jiff::SignedDuration::from_secs(existing) + jiff::SignedDuration::from_secs(period))
            .unwrap_or_else(|_| jiff::Timestamp::now());
        obj["metadata"]["deletionTimestamp"] = json!(rfc3339(at));
        obj["metadata"]["deletionGracePeriodSeconds"] = json!(period);
        return Grace::Graceful;
    }
    let mut period = requested
        .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(0);
    if obj["spec"]["nodeName"].as_str().unwrap_or_default().is_empty()
        || matches!(obj["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
    {
        period = 0;
    }
    if period < 0 {
        period = 1;
    }
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(period);
    obj["metadata"]["deletionTimestamp"] = json!(rfc3339(at));
    obj["metadata"]["deletionGracePeriodSeconds"] = json!(period);
    bump_generation(obj);
    Grace::Graceful
}

/// `markAsDeleting`: an object without graceful deletion but with finalizers is marked deleted
/// now (`deletionTimestamp` now unless already earlier, grace 0; `generation` bumped the first
/// time).
fn mark_as_deleting(obj: &mut Value) {
    let now = jiff::Timestamp::now();
    let existing = obj["metadata"]["deletionTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    if obj["metadata"]["deletionTimestamp"].is_null() {
        bump_generation(obj);
    }
    if existing.is_none_or(|t| t > now) {
        obj["metadata"]["deletionTimestamp"] = json!(rfc3339(now));
    }
    obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
}

/// The preconditions, checked by `rest.BeforeDelete` with its own messages (a Conflict on the
/// Kind, as upstream builds it from the object's GroupVersionKind).
fn check_preconditions(resource: &ResourceInfo, obj: &Value, opts: &DeleteOptions) -> Result<(), ApiError> {
    let kind = if resource.group.is_empty() {
        resource.kind.to_string()
    } else {
        format!("{}.{}", resource.kind, resource.group)
    };
    let conflict = |why: String| {
        let mut err = conflict_because(resource, meta_str(obj, "name"), &why).in_group(resource.group);
        err.message = format!(
            "Operation cannot be fulfilled on {kind} \"{}\": {why}",
            meta_str(obj, "name")
        );
        if let Some(details) = err.details.as_mut().and_then(Value::as_object_mut) {
            details.insert("kind".into(), json!(resource.kind));
        }
        err
    };
    if let Some(uid) = opts.uid.as_deref().filter(|u| *u != meta_str(obj, "uid")) {
        return Err(conflict(format!(
            "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
            meta_str(obj, "uid")
        )));
    }
    if let Some(rv) = opts
        .resource_version
        .as_deref()
        .filter(|rv| *rv != meta_str(obj, "resourceVersion"))
    {
        return Err(conflict(format!(
            "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
            meta_str(obj, "resourceVersion")
        )));
    }
    Ok(())
}

impl Store {
    /// What a DELETE answers for `obj` (`finalizeDelete`): pods return the object (their
    /// registry sets `ReturnDeletedObject`), other kinds a `Success` Status naming it.
    fn finalize_delete(resource: &ResourceInfo, obj: &Value) -> Value {
        if resource.kind == "Pod" {
            return obj.clone();
        }
        let mut details = json!({"name": meta_str(obj, "name"), "kind": resource.plural, "uid": meta_str(obj, "uid")});
        if !resource.group.is_empty() {
            details["group"] = json!(resource.group);
        }
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
    }

    /// DELETE. A pod with a grace period is only marked (`deletionTimestamp`,
    /// `deletionGracePeriodSeconds`) and stays until deleted with grace 0, which writes that mark
    /// (a MODIFIED event) and then removes it (DELETED). An object with finalizers stays until
    /// the last one is removed.
    pub fn delete(
        &mut self,
        resource: &'static ResourceInfo,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let key = Self::key(resource, ns, name);
        let old = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found(resource, name))?;
        if let Some(node) = &opts.node {
            crate::node_restriction::admit_delete(node, resource, &old)?;
        }
        check_preconditions(resource, &old, opts)?;
        let requested = opts.grace_period_seconds.map(|g| if g < 0 { 1 } else { g });
        let mut new = old.clone();
        let grace = if resource.kind == "Pod" {
            before_delete_pod(&mut new, requested)
        } else {
            Grace::None
        };
        if grace == Grace::Pending {
            return Ok(Self::finalize_delete(resource, &old));
        }
        let finalizers = old["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
        let mut last = old.clone();
        if grace == Grace::Graceful || finalizers {
            if grace == Grace::None {
                mark_as_deleting(&mut new);
            }
            last = if new == old || opts.dry_run {
                new
            } else {
                self.commit(resource, key.clone(), EventType::Modified, Some(new), Some(old))
            };
            if finalizers || grace_of(&last).unwrap_or(0) > 0 || opts.dry_run {
                return Ok(last);
            }
        }
        if opts.dry_run {
            return Ok(Self::finalize_delete(resource, &last));
        }
        self.remove(resource, key, &last);
        Ok(Self::finalize_delete(resource, &last))
    }

    /// Removes a stored object (a DELETED event with the deletion's resourceVersion), and with a
    /// namespace everything in it; the service account and root CA controllers put back what
    /// they keep in a namespace.
    fn remove(&mut self, resource: &'static ResourceInfo, key: Key, last: &Value) {
        let name = key.2.clone();
        let ns = key.1.clone();
        if resource.kind == "Namespace" {
            let inside: Vec<Key> = self.objects.keys().filter(|k| k.1 == name).cloned().collect();
            for k in inside {
                let obj = self.objects.get(&k).cloned();
                let r = resources::by_name(k.0).expect("stored resources are served");
                self.commit(r, k, EventType::Deleted, obj.clone(), obj);
            }
        }
        self.commit(
            resource,
            key,
            EventType::Deleted,
            Some(last.clone()),
            Some(last.clone()),
        );
        let kept = (resource.kind == "ServiceAccount" && name == cluster::DEFAULT_SERVICE_ACCOUNT)
            || (resource.kind == "ConfigMap" && name == cluster::ROOT_CA_CONFIG_MAP);
        if kept && self.namespace_exists(&ns) {
            self.populate_namespace(&ns);
        }
    }

    /// DELETE of a collection (`Store.DeleteCollection`): each selected object deleted as
    /// [`Store::delete`] deletes it (those gone meanwhile skipped); the answer is the list as
    /// it was read before the deletes.
    pub fn delete_collection(
        &mut self,
        resource: &'static ResourceInfo,
        ns: Option<&str>,
        fields: &FieldSelector,
        labels: &LabelSelector,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let listed_at = self.rv;
        let items = self.select(resource, ns, fields, labels);
        for obj in &items {
            let (ns, name) = (
                meta_str(obj, "namespace").to_string(),
                meta_str(obj, "name").to_string(),
            );
            match self.delete(resource, &ns, &name, opts) {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(json!({
            "kind": format!("{}List", resource.kind),
            "apiVersion": resource.api_version(),
            "metadata": {"resourceVersion": listed_at.to_string()},
            "items": items,
        }))
    }
}
