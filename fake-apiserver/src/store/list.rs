//! Lists: the objects at a resourceVersion (the current ones, or the state the history can
//! rebuild), selected and paged as etcd3's `GetList` pages them
//! (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go`, `errors.go`;
//! `staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go` `GetList`).

use super::{EventType, Store};
use crate::error::ApiError;
use crate::resources::ResourceInfo;
use crate::selectors::{FieldSelector, LabelSelector};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// etcd3's answer for an exact list at a compacted resourceVersion.
const EXPIRED: &str = "The resourceVersion for the provided list is too old.";

/// etcd3's answer for a continue token whose resourceVersion was compacted (the Status carries
/// a new token that goes on at the latest resourceVersion).
const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. \
You can start a new list without the continue parameter, or use the continue token in this response to retrieve \
the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that \
were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// A `continue` token: the first page's resourceVersion (`-1`: the latest) and the last
/// namespace/name served.
#[derive(Debug, Clone, PartialEq)]
pub struct Continue {
    /// The resourceVersion the list reads at; `-1` goes on at the latest one.
    pub rv: i64,
    /// The last (namespace, name) served.
    pub after: (String, String),
}

impl Continue {
    /// The opaque token (unpadded URL-safe base64 of JSON, as `storage.EncodeContinue`).
    pub fn encode(&self) -> String {
        use base64::Engine as _;
        let start = format!("{}/{}", self.after.0, self.after.1);
        let token = json!({"v": "meta.k8s.io/v1", "rv": self.rv, "start": start});
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
    }

    /// Reads a token back; 400 `invalid continue token: continue key is not valid: …` when it
    /// cannot (`storage.DecodeContinue`, wrapped by `ValidateListOptions`).
    pub fn decode(token: &str) -> Result<Self, ApiError> {
        use base64::Engine as _;
        let invalid =
            |why: &str| ApiError::bad_request(format!("invalid continue token: continue key is not valid: {why}"));
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|e| invalid(&e.to_string()))?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| invalid(&e.to_string()))?;
        if value["v"] != "meta.k8s.io/v1" {
            return Err(invalid(&format!(
                "server does not recognize this encoded version {}",
                value["v"]
            )));
        }
        let rv = value["rv"]
            .as_i64()
            .filter(|rv| *rv != 0)
            .ok_or_else(|| invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
        let (ns, name) = value["start"]
            .as_str()
            .and_then(|s| s.split_once('/'))
            .ok_or_else(|| invalid("encoded start key empty (version meta.k8s.io/v1)"))?;
        Ok(Continue {
            rv,
            after: (ns.to_string(), name.to_string()),
        })
    }
}

/// Where a list reads.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadAt {
    /// The latest objects (`resourceVersion` unset: a consistent read).
    Latest,
    /// At least as new as this resourceVersion (0: any); read at the latest here.
    NotOlderThan(u64),
    /// Exactly at this resourceVersion.
    Exact(u64),
    /// The next page of an earlier list.
    Continue(Continue),
}

fn ns_name(v: &Value) -> (String, String) {
    (
        v["metadata"]["namespace"].as_str().unwrap_or_default().to_string(),
        v["metadata"]["name"].as_str().unwrap_or_default().to_string(),
    )
}

impl Store {
    /// The current objects of a resource (in one namespace, or all), selected, in
    /// namespace/name order.
    pub fn select(
        &self,
        resource: &'static ResourceInfo,
        ns: Option<&str>,
        fields: &FieldSelector,
        labels: &LabelSelector,
    ) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((r, n, _), _)| *r == resource.plural && ns.is_none_or(|ns| n == ns))
            .map(|(_, v)| v)
            .filter(|v| fields.matches(v) && labels.matches(v))
            .cloned()
            .collect()
    }

    /// Every stored object of a resource.
    pub fn all(&self, resource: &'static ResourceInfo) -> Vec<Value> {
        self.select(resource, None, &FieldSelector::default(), &LabelSelector::default())
    }

    /// Every object of a resource as it was at `rv`, rebuilt by undoing the changes after it;
    /// 410 when the history no longer reaches back to `rv`, 504 when `rv` is in the future.
    fn objects_at(
        &self,
        resource: &'static ResourceInfo,
        rv: u64,
    ) -> Result<BTreeMap<(String, String), Value>, ApiError> {
        if rv > self.rv {
            return Err(ApiError::too_large_resource_version(rv, self.rv));
        }
        if rv < self.compacted {
            return Err(ApiError::expired(EXPIRED));
        }
        let mut objects: BTreeMap<(String, String), Value> = self
            .objects
            .iter()
            .filter(|((r, _, _), _)| *r == resource.plural)
            .map(|(_, v)| (ns_name(v), v.clone()))
            .collect();
        for change in self.history.iter().rev().take_while(|c| c.rv > rv) {
            if change.resource != resource.plural {
                continue;
            }
            let key = ns_name(&change.object);
            match (change.event, &change.old) {
                (EventType::Added, _) => {
                    objects.remove(&key);
                }
                (_, Some(old)) => {
                    objects.insert(key, old.clone());
                }
                (_, None) => {}
            }
        }
        Ok(objects)
    }

    /// A `<Kind>List` of the selected objects where `at` says, one page of it with `limit`:
    /// then `metadata.continue` tells the rest, and `remainingItemCount` how many are left when
    /// no selector filters the list (etcd3 counts keys, not matches). Later pages read at the
    /// first page's resourceVersion, as etcd3 does, while the history reaches back to it.
    pub fn list(
        &self,
        resource: &'static ResourceInfo,
        ns: Option<&str>,
        fields: &FieldSelector,
        labels: &LabelSelector,
        at: &ReadAt,
        limit: Option<usize>,
    ) -> Result<Value, ApiError> {
        let (rv, after) = match at {
            ReadAt::Latest | ReadAt::NotOlderThan(0) => (self.rv, None),
            ReadAt::NotOlderThan(min) if *min > self.rv => {
                return Err(ApiError::too_large_resource_version(*min, self.rv));
            }
            ReadAt::NotOlderThan(_) => (self.rv, None),
            ReadAt::Exact(rv) => (*rv, None),
            ReadAt::Continue(c) if c.rv < 0 => (self.rv, Some(&c.after)),
            ReadAt::Continue(c) => {
                if (c.rv as u64) < self.compacted {
                    let mut err = ApiError::expired(INCONSISTENT_CONTINUE);
                    err.list_continue = Some(
                        Continue {
                            rv: -1,
                            after: c.after.clone(),
                        }
                        .encode(),
                    );
                    return Err(err);
                }
                (c.rv as u64, Some(&c.after))
            }
        };
        let mut items: Vec<Value> = if rv == self.rv {
            self.select(resource, ns, fields, labels)
        } else {
            self.objects_at(resource, rv)?
                .into_values()
                .filter(|v| ns.is_none_or(|ns| v["metadata"]["namespace"].as_str().unwrap_or_default() == ns))
                .filter(|v| fields.matches(v) && labels.matches(v))
                .collect()
        };
        if let Some(after) = after {
            items.retain(|v| ns_name(v) > *after);
        }
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if let Some(limit) = limit.filter(|l| items.len() > *l) {
            let rest = items.split_off(limit);
            let last = ns_name(items.last().expect("limit is at least 1"));
            metadata["continue"] = json!(Continue {
                rv: rv as i64,
                after: last
            }
            .encode());
            if fields.is_empty() && labels.is_empty() {
                metadata["remainingItemCount"] = json!(rest.len());
            }
        }
        Ok(json!({
            "kind": format!("{}List", resource.kind),
            "apiVersion": resource.api_version(),
            "metadata": metadata,
            "items": items,
        }))
    }
}
