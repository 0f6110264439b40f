//! ApiSource: the API server source (`--kubeconfig`, kubelet's `pkg/kubelet/config/apiserver.go`): list + watch of the pods
//! bound to this node, re-listed with back-off on errors and expired resourceVersions.
//!
//! | Message / trigger    | From       | Effect                                              |
//! |----------------------|------------|-----------------------------------------------------|
//! | watch event          | API server | update the pod set; send it (SET semantics)         |
//! | FinalizePodDeletion  | Supervisor | delete a terminated pod from the API (grace 0, UID) |
//! | GetActorState        | Supervisor | debug snapshot                                      |
//!
//! A watch error never removes pods: the last known set stays until a new list replaces it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use dockerlet_messages::source::{DesiredPod, PodSource, SourcePodsChanged};
use dockerlet_messages::worker::FinalizePodDeletion;
use dockerlet_messages::{PodRef, PodUid};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use crate::inspect::Inspect;

use dockerlet_kube::{ApiError, KubeClient, PodEvent};
use dockerlet_pod::annotations::{CONFIG_MIRROR, CONFIG_SEEN, CONFIG_SOURCE};

/// Wait before watching again after the stream ended.
const REWATCH_AFTER: Duration = Duration::from_secs(1);

/// The API server source actor.
pub struct ApiSource {
    /// The API.
    api: std::sync::Arc<dyn KubeClient>,
    /// Where the pod set goes.
    sink: Recipient<SourcePodsChanged>,
    /// The pods the API says are bound here, by UID, as sent: annotated with their source and
    /// first-seen time when they arrive, so each watch event builds one pod and the set it
    /// sends shares the others.
    pods: BTreeMap<PodUid, DesiredPod>,
    /// Pods listed during a re-list, swapped in at its end.
    relisting: Option<BTreeMap<PodUid, DesiredPod>>,
    /// When each pod was first seen (`kubernetes.io/config.seen`).
    seen: BTreeMap<PodUid, String>,
    /// A first full list arrived.
    synced: bool,
    /// Watch events received.
    events: u64,
    /// The last watch or delete error.
    last_error: Option<String>,
    /// Messages handled.
    handled: u64,
}

impl ApiSource {
    /// A source of the pods bound to `api.node()`.
    pub fn new(api: std::sync::Arc<dyn KubeClient>, sink: Recipient<SourcePodsChanged>) -> Self {
        ApiSource {
            api,
            sink,
            pods: BTreeMap::new(),
            relisting: None,
            seen: BTreeMap::new(),
            synced: false,
            events: 0,
            last_error: None,
            handled: 0,
        }
    }

    /// Mirror pods are the API's copies of static pods: never run them.
    fn is_mirror(pod: &Pod) -> bool {
        pod.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(CONFIG_MIRROR))
    }

    fn uid(pod: &Pod) -> PodUid {
        PodUid::of(pod)
    }

    /// The pod as the Supervisor gets it: `config.source` and `config.seen` (first seen by
    /// this agent) added.
    fn desired(&mut self, mut pod: Pod) -> DesiredPod {
        let uid = Self::uid(&pod);
        let seen = self
            .seen
            .entry(uid.clone())
            .or_insert_with(|| Timestamp::now().to_string())
            .clone();
        let annotations = pod.metadata.annotations.get_or_insert_with(Default::default);
        annotations.insert(CONFIG_SOURCE.to_string(), PodSource::Api.as_str().to_string());
        annotations.insert(CONFIG_SEEN.to_string(), seen);
        let pod = Arc::new(pod);
        let origin = format!("api:{}", PodRef::of(&pod));
        DesiredPod::new(pod, PodSource::Api, origin)
    }

    /// Send the whole set (SET semantics); the pods are shared, not copied.
    fn send(&mut self) {
        self.seen.retain(|uid, _| self.pods.contains_key(uid));
        let pods = self
            .pods
            .values()
            .filter(|p| !Self::is_mirror(&p.pod))
            .cloned()
            .collect();
        self.sink.do_send(SourcePodsChanged {
            source: PodSource::Api,
            pods,
            errors: Vec::new(),
        });
    }

    fn watch(&mut self, ctx: &mut Context<Self>) {
        ctx.add_stream(self.api.watch_pods());
    }
}

impl Actor for ApiSource {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.watch(ctx);
    }
}

impl StreamHandler<Result<PodEvent, ApiError>> for ApiSource {
    /// Apply one watch event; a completed list replaces the whole set.
    fn handle(&mut self, event: Result<PodEvent, ApiError>, _: &mut Self::Context) {
        self.events += 1;
        match event {
            Ok(PodEvent::Init) => self.relisting = Some(BTreeMap::new()),
            Ok(PodEvent::InitApply(pod)) => {
                if self.relisting.is_some() {
                    let desired = self.desired(pod);
                    if let Some(list) = self.relisting.as_mut() {
                        list.insert(desired.id.uid.clone(), desired);
                    }
                }
            }
            Ok(PodEvent::InitDone) => {
                if let Some(list) = self.relisting.take() {
                    self.pods = list;
                }
                self.synced = true;
                self.last_error = None;
                self.send();
            }
            Ok(PodEvent::Apply(pod)) => {
                let desired = self.desired(pod);
                self.pods.insert(desired.id.uid.clone(), desired);
                self.send();
            }
            Ok(PodEvent::Delete(pod)) => {
                self.pods.remove(&Self::uid(&pod));
                self.send();
            }
            Err(e) => {
                tracing::warn!(error = %e, "pod watch failed; re-listing with back-off");
                self.last_error = Some(e.to_string());
            }
        }
    }

    /// The watcher ends only if its stream does: watch again (the default would stop the actor).
    fn finished(&mut self, ctx: &mut Self::Context) {
        ctx.run_later(REWATCH_AFTER, |act, ctx| act.watch(ctx));
    }
}

impl Handler<FinalizePodDeletion> for ApiSource {
    type Result = ();

    /// The pod's containers are gone: delete it from the API with grace 0 and its UID.
    fn handle(&mut self, msg: FinalizePodDeletion, ctx: &mut Self::Context) {
        self.handled += 1;
        let api = self.api.clone();
        let future = async move { api.delete_pod(&msg.namespace, &msg.name, &msg.uid.0).await };
        ctx.spawn(future.into_actor(self).map(|result, act, _| {
            if let Err(e) = result {
                tracing::warn!(error = %e, "final pod deletion failed; the next watch event retries");
                act.last_error = Some(e.to_string());
            }
        }));
    }
}

impl Inspect for ApiSource {
    const KIND: &'static str = "ApiSource";
    const NAME: &'static str = "api";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.clone()
    }

    fn detail(&self) -> serde_json::Value {
        json!({ "pods": self.pods.len(), "synced": self.synced, "watch_events": self.events })
    }
}

crate::supervised!(ApiSource);
