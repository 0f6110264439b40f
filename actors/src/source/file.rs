//! FileSource: the static pod source (`--pod-manifest-path`, kubelet's `pkg/kubelet/config/file.go`).
//!
//! | Trigger                     | Effect                                             |
//! |-----------------------------|----------------------------------------------------|
//! | start                       | read the path, send the full set                   |
//! | inotify change (debounced)  | re-read, send the full set if it changed           |
//! | inotify removal of a file   | at once, the set without that file's pods          |
//! | every `fileCheckFrequency`  | re-read (safety net), and retry the watch if it failed |
//! | GetActorState               | debug snapshot                                     |
//! | Panic                       | test-only fault hook                               |
//!
//! Sends `SourcePodsChanged` (SET semantics) to the Supervisor. Reading lives in [`dockerlet_host::manifest_dir`], parsing in [`dockerlet_pod::manifest`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use actix::prelude::*;
use dockerlet_messages::source::{DesiredPod, ManifestError, PodSource, SourcePodsChanged};
use dockerlet_messages::PodUid;
use k8s_openapi::jiff::Timestamp;
use notify::{RecursiveMode, Watcher};
use serde_json::json;

use crate::inspect::Inspect;

/// Changes often come in bursts (an editor writes, renames, chmods): gather them briefly. Kept
/// short because it adds straight to pod start latency (a half-written file is simply read
/// again at its next event).
const DEBOUNCE: Duration = Duration::from_millis(10);

/// The static pod source actor.
pub struct FileSource {
    /// The manifest directory (or single file).
    path: PathBuf,
    /// This node's name (pod names and UIDs depend on it).
    node_name: String,
    /// Re-list period.
    frequency: Duration,
    /// Where the pod set goes.
    sink: Recipient<SourcePodsChanged>,
    /// When each pod was first seen (`kubernetes.io/config.seen`), kept stable across re-reads.
    seen: HashMap<PodUid, String>,
    /// The last set sent; an identical re-read is not sent again.
    last_sent: Option<(Vec<DesiredPod>, Vec<ManifestError>)>,
    /// Parsed manifests by file, reused while a file's modification time and size are unchanged.
    cache: dockerlet_host::manifest_dir::ManifestCache,
    /// The inotify watch; none until it could be set up (the path may not exist yet).
    watcher: Option<notify::RecommendedWatcher>,
    /// A debounced re-read is scheduled.
    reread_scheduled: bool,
    /// A re-read runs on the blocking pool (it owns the cache meanwhile).
    reading: bool,
    /// A re-read was asked for while one ran: run one more.
    read_again: bool,
    /// A file's pods were dropped on its removal: the next re-read reads everything, even if
    /// the files look as they did (the same manifest written again at once).
    force_read: bool,
    /// Re-reads done.
    reads: u64,
    /// Last watch error.
    last_error: Option<String>,
    /// Messages handled.
    handled: u64,
}

impl FileSource {
    /// A source for `path`.
    pub fn new(path: PathBuf, node_name: String, frequency: Duration, sink: Recipient<SourcePodsChanged>) -> Self {
        FileSource {
            path,
            node_name,
            frequency,
            sink,
            seen: HashMap::new(),
            last_sent: None,
            cache: dockerlet_host::manifest_dir::ManifestCache::default(),
            watcher: None,
            reread_scheduled: false,
            reading: false,
            read_again: false,
            force_read: false,
            reads: 0,
            last_error: None,
            handled: 0,
        }
    }

    /// Re-read the path on the blocking pool (file I/O never runs on the actor thread), then
    /// send the set if it changed.
    fn reread(&mut self, ctx: &mut Context<Self>) {
        self.reads += 1;
        if self.reading {
            self.read_again = true;
            return;
        }
        self.reading = true;
        let (path, node) = (self.path.clone(), self.node_name.clone());
        let mut cache = std::mem::take(&mut self.cache);
        let unchanged_is_enough = self.last_sent.is_some() && !std::mem::take(&mut self.force_read);
        let read = async move {
            tokio::task::spawn_blocking(move || {
                // Same files, same modification times and sizes: the same set as last sent.
                let result = if unchanged_is_enough && cache.is_current(&path) {
                    None
                } else {
                    Some(dockerlet_host::manifest_dir::read_manifests_cached(
                        &path, &node, &mut cache,
                    ))
                };
                (cache, result)
            })
            .await
        };
        ctx.spawn(read.into_actor(self).map(|joined, act, ctx| {
            act.reading = false;
            match joined {
                Ok((cache, result)) => {
                    act.cache = cache;
                    if let Some((pods, errors)) = result {
                        act.publish(pods, errors);
                    }
                }
                Err(e) => act.last_error = Some(format!("reading {}: {e}", act.path.display())),
            }
            if std::mem::take(&mut act.read_again) {
                act.reread(ctx);
            }
        }));
    }

    /// Stamp `config.seen` and send the set to the Supervisor if it differs from the last one.
    fn publish(&mut self, mut pods: Vec<DesiredPod>, errors: Vec<ManifestError>) {
        self.seen.retain(|uid, _| pods.iter().any(|p| &p.id.uid == uid));
        for p in &mut pods {
            let seen = self
                .seen
                .entry(p.id.uid.clone())
                .or_insert_with(|| Timestamp::now().to_string())
                .clone();
            let stamped = p
                .pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(dockerlet_pod::annotations::CONFIG_SEEN))
                == Some(&seen);
            if !stamped {
                std::sync::Arc::make_mut(&mut p.pod)
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(dockerlet_pod::annotations::CONFIG_SEEN.to_string(), seen);
                // The cache keeps the stamped pod, so the next read shares it.
                self.cache.share(&p.pod);
            }
        }
        let current = (pods, errors);
        if self.last_sent.as_ref() == Some(&current) {
            return;
        }
        for error in &current.1 {
            tracing::error!(file = %error.file, reason = %error.reason, "skipping invalid manifest");
        }
        self.sink.do_send(SourcePodsChanged {
            source: PodSource::File,
            pods: current.0.clone(),
            errors: current.1.clone(),
        });
        self.last_sent = Some(current);
    }

    /// Files were removed: their pods leave the set at once, as kubelet's file source deletes
    /// them on the event, so a manifest removed and written again restarts its pod (a debounced
    /// re-read alone would find the same set and change nothing).
    fn removed(&mut self, files: &[PathBuf]) {
        let Some((pods, errors)) = &self.last_sent else {
            return;
        };
        let gone = |origin: &str| {
            let origin = std::path::Path::new(origin);
            files
                .iter()
                .any(|f| f == origin || (f.file_name().is_some() && f.file_name() == origin.file_name()))
        };
        if !pods.iter().any(|p| gone(&p.origin)) {
            return;
        }
        let kept: Vec<DesiredPod> = pods.iter().filter(|p| !gone(&p.origin)).cloned().collect();
        let errors = errors.clone();
        self.force_read = true;
        self.publish(kept, errors);
    }

    fn watch(&mut self, ctx: &mut Context<Self>) {
        if self.watcher.is_some() {
            return;
        }
        let (tx, rx) = futures::channel::mpsc::unbounded::<Vec<PathBuf>>();
        let result = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if let Some(e) = event.ok().filter(is_relevant) {
                // The files removed (none for other changes).
                let removed = match e.kind {
                    notify::EventKind::Remove(notify::event::RemoveKind::File | notify::event::RemoveKind::Any) => {
                        e.paths
                    }
                    _ => Vec::new(),
                };
                let _ = tx.unbounded_send(removed);
            }
        })
        .and_then(|mut w| w.watch(&self.path, RecursiveMode::NonRecursive).map(|()| w));
        match result {
            Ok(w) => {
                self.watcher = Some(w);
                self.last_error = None;
                ctx.add_stream(rx);
            }
            Err(e) => {
                tracing::debug!(path = %self.path.display(), error = %e, "cannot watch manifest path; re-listing only");
                self.last_error = Some(format!("watch {}: {e}", self.path.display()));
            }
        }
    }
}

/// Creates, writes, chmods, removes and renames matter; reads (our own re-reads included) and
/// dot-files do not (kubelet ignores events for names starting with a dot).
fn is_relevant(event: &notify::Event) -> bool {
    use notify::EventKind;
    let kind = matches!(
        event.kind,
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any
    );
    let dotfiles_only = !event.paths.is_empty()
        && event.paths.iter().all(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        });
    kind && !dotfiles_only
}

impl Actor for FileSource {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.watch(ctx);
        self.reread(ctx);
        ctx.run_interval(self.frequency, |act, ctx| {
            act.watch(ctx);
            act.reread(ctx);
        });
    }
}

impl StreamHandler<Vec<PathBuf>> for FileSource {
    /// Something changed in the directory: re-read once things are quiet; the pods of removed
    /// files go at once.
    fn handle(&mut self, removed: Vec<PathBuf>, ctx: &mut Self::Context) {
        self.handled += 1;
        if !removed.is_empty() {
            self.removed(&removed);
        }
        if std::mem::replace(&mut self.reread_scheduled, true) {
            return;
        }
        ctx.run_later(DEBOUNCE, |act, ctx| {
            act.reread_scheduled = false;
            act.reread(ctx);
        });
    }

    /// The watch ended (directory removed): fall back to re-listing until it can be set again.
    fn finished(&mut self, _: &mut Self::Context) {
        self.watcher = None;
    }
}

impl Inspect for FileSource {
    const KIND: &'static str = "FileSource";
    const NAME: &'static str = "file";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn instance(&self) -> String {
        self.path.display().to_string()
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.clone()
    }

    fn detail(&self) -> serde_json::Value {
        let (pods, errors) = self.last_sent.as_ref().map_or((0, 0), |(p, e)| (p.len(), e.len()));
        json!({ "pods": pods, "errors": errors, "reads": self.reads, "watching": self.watcher.is_some() })
    }
}

crate::supervised!(FileSource);
