//! StatusActor: holds the status of every pod this node runs and serves it.
//!
//! | Message          | From        | Effect                                  |
//! |------------------|-------------|-----------------------------------------|
//! | SetPodStatus     | PodWorker   | store the pod with its new status       |
//! | RemovePodStatus  | PodWorker   | forget a terminated pod                 |
//! | GetPods          | HTTP `/pods`| every pod, name order                   |
//! | GetActorState    | Supervisor  | debug snapshot                          |
//! | Panic            | Supervisor  | test-only fault hook                    |
//!
//! Status is computed by [`dockerlet_pod::status::generate`] in the PodWorker (which has Docker's view at hand) and
//! stored here. In API-server mode it is written to the API: to `pods/<name>/status` for pods
//! from the API, and to the mirror pod for static pods (created, or re-created when deleted,
//! on the next write; deleted when the static pod goes). Writes are one at a time per pod with
//! the newest status following, and everything not yet written is retried every 10 s.

use std::collections::{HashMap, HashSet};

use actix::prelude::*;
use dockerlet_messages::status::{GetPods, RemovePodStatus, SetPodStatus};
use dockerlet_messages::{PodRef, PodUid};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::json;

use crate::inspect::Inspect;
use tracing::Instrument;

use std::sync::Arc;

use dockerlet_kube::KubeClient;

/// How often statuses that could not be written to the API are retried (kubelet's 10 s resync).
const RESYNC_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Holds every pod's latest status, and writes the API's pods' statuses to the API server.
#[derive(Default)]
pub struct StatusActor {
    /// Pod (shared with its worker) and its status, by UID.
    pods: HashMap<PodUid, SetPodStatus>,
    /// The API, in API-server mode.
    api: Option<Arc<dyn KubeClient>>,
    /// The status last written to the API per pod; a differing one is written again.
    pushed: HashMap<PodUid, PodStatus>,
    /// Pods with a write in flight (one at a time per pod; the newest status follows).
    pushing: HashSet<PodUid>,
    /// Writes that failed.
    push_errors: u64,
    /// Messages handled, for the debug endpoint.
    handled: u64,
}

impl StatusActor {
    /// A status actor; with `api`, statuses of pods from the API are written back to it.
    pub fn new(api: Option<Arc<dyn KubeClient>>) -> Self {
        StatusActor {
            api,
            ..Default::default()
        }
    }

    /// Write the pod's newest status unless it is already written or a write is in flight.
    fn push(&mut self, uid: PodUid, ctx: &mut Context<Self>) {
        let Some(api) = self.api.clone() else { return };
        let Some(held) = self.pods.get(&uid) else { return };
        let status = held.status.clone();
        let pod = held.to_pod();
        if self.pushing.contains(&uid) || self.pushed.get(&uid) == Some(&status) {
            return;
        }
        self.pushing.insert(uid.clone());
        let id = held.id.clone();
        let sent = status.clone();
        let span = id.span();
        let future = async move {
            if dockerlet_pod::annotations::from_api(&pod) {
                api.reconcile_pod_status(&id.namespace, &id.name, &status).await
            } else {
                // Static pods show in the API through their mirror pod.
                api.sync_mirror_pod(&pod).await
            }
        }
        .instrument(span);
        ctx.spawn(future.into_actor(self).map(move |result, act, ctx| {
            act.pushing.remove(&uid);
            match result {
                Ok(()) => {
                    act.pushed.insert(uid.clone(), sent);
                    // A newer status may have arrived meanwhile.
                    act.push(uid, ctx);
                }
                Err(e) => {
                    act.push_errors += 1;
                    let span = act.pods.get(&uid).map(|held| held.id.span());
                    let _entered = span
                        .unwrap_or_else(|| tracing::info_span!("pod", pod.uid = %uid))
                        .entered();
                    tracing::warn!(error = %e, "pod status write failed; retrying at the next resync");
                }
            }
        }));
    }
}

impl Actor for StatusActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        if self.api.is_some() {
            ctx.run_interval(RESYNC_EVERY, |act, ctx| {
                let uids: Vec<PodUid> = act.pods.keys().cloned().collect();
                for uid in uids {
                    // Another writer may have changed the API's copy (or deleted a mirror pod):
                    // compare with the API every time, as kubelet's status manager does.
                    act.pushed.remove(&uid);
                    act.push(uid, ctx);
                }
            });
        }
    }
}

impl Handler<SetPodStatus> for StatusActor {
    type Result = ();

    /// Store the pod and its status.
    fn handle(&mut self, msg: SetPodStatus, ctx: &mut Self::Context) {
        self.handled += 1;
        let uid = msg.uid().clone();
        self.pods.insert(uid.clone(), msg);
        self.push(uid, ctx);
    }
}

impl Handler<RemovePodStatus> for StatusActor {
    type Result = ResponseActFuture<Self, ()>;

    /// Forget a pod that is gone (and delete a static pod's mirror pod). A deleted API pod's
    /// final status is written first: the answer comes once that write ended.
    fn handle(&mut self, msg: RemovePodStatus, ctx: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let gone = self.pods.remove(&msg.uid);
        self.pushed.remove(&msg.uid);
        if let (Some(api), Some(pod)) = (self.api.clone(), msg.final_status) {
            let id = PodRef::of(&pod);
            let span = id.span();
            let future = async move {
                let status = pod.status.unwrap_or_default();
                if let Err(e) = api.reconcile_pod_status(&id.namespace, &id.name, &status).await {
                    tracing::warn!(error = %e, "cannot write the final status of a deleted pod");
                }
            }
            .instrument(span);
            return Box::pin(future.into_actor(self));
        }
        let mirrored = gone.filter(|held| !dockerlet_pod::annotations::from_api(&held.pod));
        if let (Some(api), Some(held)) = (self.api.clone(), mirrored) {
            let span = held.id.span();
            let hash = dockerlet_pod::annotations::config_hash(&held.pod).to_string();
            let id = held.id;
            let future = async move {
                if let Err(e) = api.delete_mirror_pod(&id.namespace, &id.name, &hash).await {
                    tracing::warn!(error = %e, "cannot delete the mirror pod");
                }
            }
            .instrument(span);
            ctx.spawn(future.into_actor(self));
        }
        Box::pin(actix::fut::ready(()))
    }
}

impl Handler<GetPods> for StatusActor {
    type Result = MessageResult<GetPods>;

    /// Every pod, ordered by namespace and name.
    fn handle(&mut self, _: GetPods, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let mut pods: Vec<Pod> = self.pods.values().map(SetPodStatus::to_pod).collect();
        pods.sort_by(|a, b| (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name)));
        MessageResult(pods)
    }
}

impl Inspect for StatusActor {
    const KIND: &'static str = "StatusActor";
    const NAME: &'static str = "status";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn detail(&self) -> serde_json::Value {
        json!({
            "pods": self.pods.len(),
            "api_writes_in_flight": self.pushing.len(),
            "api_write_errors": self.push_errors,
        })
    }
}

crate::supervised!(StatusActor);

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_kube::fake::{FakeKube, KubeCall};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn set(pod: Pod) -> SetPodStatus {
        SetPodStatus {
            id: PodRef::of(&pod),
            status: pod.status.clone().unwrap_or_default(),
            pod: Arc::new(pod),
        }
    }

    fn pod(name: &str, uid: &str, source: &str, phase: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                annotations: Some(
                    [(
                        dockerlet_pod::annotations::CONFIG_SOURCE.to_string(),
                        source.to_string(),
                    )]
                    .into(),
                ),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    /// An API pod's status goes to its status subresource, a static pod's to its mirror pod; a
    /// static pod that goes takes its mirror pod with it; /pods lists what is held.
    #[actix::test]
    async fn statuses_go_to_the_pod_or_its_mirror() {
        let api = FakeKube::new("n1");
        let status = StatusActor::new(Some(Arc::new(api.clone()))).start();
        status.do_send(set(pod("web", "u1", "api", "Running")));
        status.do_send(set(pod("static-n1", "u2", "file", "Pending")));
        assert_eq!(status.send(GetPods).await.unwrap().len(), 2);
        status.do_send(RemovePodStatus {
            final_status: None,
            uid: PodUid("u2".into()),
        });
        let listed = status.send(GetPods).await.unwrap();
        assert_eq!(listed.len(), 1);
        for _ in 0..50 {
            if api.calls().len() >= 3 {
                break;
            }
            tokio::task::yield_now().await;
        }
        let calls = api.calls();
        assert!(calls.iter().any(|c| matches!(c, KubeCall::PodStatus { pod, status } if pod == "default/web" && status.phase.as_deref() == Some("Running"))), "{calls:?}");
        assert!(
            calls
                .iter()
                .any(|c| matches!(c, KubeCall::MirrorPod(p) if p.metadata.name.as_deref() == Some("static-n1"))),
            "{calls:?}"
        );
        assert!(
            calls.contains(&KubeCall::MirrorPodDeleted("default/static-n1".into())),
            "{calls:?}"
        );
    }
}
