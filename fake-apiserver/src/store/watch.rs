//! Watches: where a new watch starts, which event each change is for each open watch, and
//! bookmarks, as kube-apiserver's watch cache serves them
//! (`staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go` `Watch`,
//! `cache_watcher.go` `convertToWatchEvent`, `watch_cache.go` `getAllEventsSinceLocked`).

use super::{Change, EventType, Store};
use crate::error::ApiError;
use crate::resources::ResourceInfo;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::table::{self, OutputFormat};
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

/// What an open watch wants.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    /// The resource watched.
    pub resource: &'static ResourceInfo,
    /// Only this namespace, if set.
    pub namespace: Option<String>,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// Objects, Tables or metadata only.
    pub format: OutputFormat,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
}

impl WatchSpec {
    fn matches(&self, resource: &str, obj: &Value) -> bool {
        resource == self.resource.plural
            && self
                .namespace
                .as_deref()
                .is_none_or(|ns| obj["metadata"]["namespace"].as_str() == Some(ns))
            && self.fields.matches(obj)
            && self.labels.matches(obj)
    }

    fn event_line(&self, event: &str, obj: &Value) -> Bytes {
        let object = table::render_one(self.resource, obj, &self.format);
        line(&json!({"type": event, "object": object}))
    }

    /// A `BOOKMARK` event at `rv`: an object of the watched kind that carries only its
    /// resourceVersion (and, closing the initial events, the `k8s.io/initial-events-end`
    /// annotation). Upstream serializes the kind's zero value, so a Pod bookmark also has
    /// `spec.containers: null` and `status: {}`; clients read only the metadata.
    pub fn bookmark_line(&self, rv: u64, initial_events_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(&json!({
            "type": "BOOKMARK",
            "object": {"kind": self.resource.kind, "apiVersion": self.resource.api_version(), "metadata": metadata},
        }))
    }
}

fn line(v: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(v).expect("JSON values serialize");
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// Where a new watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// `sendInitialEvents=true` (which a watch from `""` or `"0"` defaults to): an `ADDED` for
    /// every current object, at least as new as `min`, then (with bookmarks) the
    /// initial-events-end bookmark, then live changes.
    InitialEvents {
        /// The resourceVersion the initial state must be at least as new as.
        min: u64,
    },
    /// `resourceVersion=N`: every change after N from the history, then live changes.
    From(u64),
    /// `sendInitialEvents=false` from `""` or `"0"`: only changes from now on.
    Latest,
}

pub(super) struct Watcher {
    spec: WatchSpec,
    tx: UnboundedSender<Bytes>,
    /// Changes up to this resourceVersion are not for this watch.
    after: u64,
}

impl Store {
    /// Opens a watch. Returns the receiving end of its event lines (the initial events already
    /// queued), or the error kube-apiserver answers with one `ERROR` event: 410 Expired
    /// (`too old resource version: <rv> (<oldest kept - 1>)`) when `From(rv)` is older than the
    /// history, 504 when the initial state asked for is newer than the server's.
    pub fn watch(&mut self, spec: WatchSpec, start: WatchStart) -> Result<UnboundedReceiver<Bytes>, ApiError> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let after = match start {
            WatchStart::InitialEvents { min } => {
                if min > self.rv {
                    return Err(ApiError::too_large_resource_version(min, self.rv));
                }
                let ns = spec.namespace.as_deref();
                for obj in self.select(spec.resource, ns, &spec.fields, &spec.labels) {
                    let _ = tx.send(spec.event_line("ADDED", &obj));
                }
                if spec.bookmarks {
                    let _ = tx.send(spec.bookmark_line(self.rv, true));
                }
                self.rv
            }
            WatchStart::Latest => self.rv,
            WatchStart::From(rv) => {
                if rv < self.compacted {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {rv} ({})",
                        self.compacted
                    )));
                }
                for change in self.history.iter().filter(|c| c.rv > rv) {
                    if let Some((ty, o)) = route(&spec, change) {
                        let _ = tx.send(spec.event_line(ty, &o));
                    }
                }
                rv
            }
        };
        self.watchers.push(Watcher { spec, tx, after });
        Ok(rx)
    }

    /// Sends a change to every open watch it concerns; forgets closed watches.
    pub(super) fn deliver(&mut self, change: &Change) {
        self.watchers.retain(|w| {
            if change.rv <= w.after {
                return !w.tx.is_closed();
            }
            match route(&w.spec, change) {
                Some((ty, o)) => w.tx.send(w.spec.event_line(ty, &o)).is_ok(),
                None => !w.tx.is_closed(),
            }
        });
    }

    /// Ends every open watch (their streams close cleanly, as on an API server restart).
    pub fn drop_watches(&mut self) {
        self.watchers.clear();
    }

    /// How many watches are open.
    pub fn watch_count(&mut self) -> usize {
        self.watchers.retain(|w| !w.tx.is_closed());
        self.watchers.len()
    }

    /// Forgets the history: watches from any resourceVersion before now get 410 Expired.
    pub fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.rv;
    }
}

/// Which event (if any) a change is for one watch (`convertToWatchEvent`): an object entering
/// the selection is `ADDED`; one leaving it is `DELETED` with its previous content (what the
/// watch last matched) at the change's resourceVersion.
fn route(spec: &WatchSpec, change: &Change) -> Option<(&'static str, Value)> {
    let is = spec.matches(change.resource, &change.object);
    match change.event {
        EventType::Added => is.then(|| ("ADDED", change.object.clone())),
        EventType::Deleted => is.then(|| ("DELETED", change.object.clone())),
        EventType::Modified => {
            let was = change.old.as_ref().filter(|o| spec.matches(change.resource, o));
            match (was, is) {
                (Some(_), true) => Some(("MODIFIED", change.object.clone())),
                (None, true) => Some(("ADDED", change.object.clone())),
                (Some(old), false) => {
                    let mut old = old.clone();
                    old["metadata"]["resourceVersion"] = json!(change.rv.to_string());
                    Some(("DELETED", old))
                }
                (None, false) => None,
            }
        }
    }
}
