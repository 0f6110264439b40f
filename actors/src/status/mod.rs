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
//! Status is computed by [`generate`] in the PodWorker (which has Docker's view at hand) and
//! stored here; API-server mode will push it from here.

pub mod generate;

use std::collections::HashMap;

use actix::{Actor, Context, Handler, MessageResult};
use dockerlet_messages::debug::{ActorState, GetActorState, Panic};
use dockerlet_messages::status::{GetPods, RemovePodStatus, SetPodStatus};
use dockerlet_messages::PodUid;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

/// Holds every pod's latest status.
#[derive(Default)]
pub struct StatusActor {
    /// Pod (with status) by UID.
    pods: HashMap<PodUid, Pod>,
    /// Messages handled, for the debug endpoint.
    handled: u64,
}

impl Actor for StatusActor {
    type Context = Context<Self>;
}

impl Handler<SetPodStatus> for StatusActor {
    type Result = ();

    /// Store the pod and its status.
    fn handle(&mut self, msg: SetPodStatus, _: &mut Self::Context) {
        self.handled += 1;
        let uid = PodUid(msg.pod.metadata.uid.clone().unwrap_or_default());
        self.pods.insert(uid, msg.pod);
    }
}

impl Handler<RemovePodStatus> for StatusActor {
    type Result = ();

    /// Forget a pod that is gone.
    fn handle(&mut self, msg: RemovePodStatus, _: &mut Self::Context) {
        self.handled += 1;
        self.pods.remove(&msg.uid);
    }
}

impl Handler<GetPods> for StatusActor {
    type Result = MessageResult<GetPods>;

    /// Every pod, ordered by namespace and name.
    fn handle(&mut self, _: GetPods, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let mut pods: Vec<Pod> = self.pods.values().cloned().collect();
        pods.sort_by(|a, b| (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name)));
        MessageResult(pods)
    }
}

impl Handler<GetActorState> for StatusActor {
    type Result = MessageResult<GetActorState>;

    fn handle(&mut self, _: GetActorState, _: &mut Self::Context) -> Self::Result {
        MessageResult(ActorState {
            kind: "StatusActor".to_string(),
            name: "status".to_string(),
            messages_handled: self.handled,
            restarts: 0,
            last_error: None,
            detail: json!({ "pods": self.pods.len() }),
        })
    }
}

impl Handler<Panic> for StatusActor {
    type Result = ();

    fn handle(&mut self, _: Panic, _: &mut Self::Context) {
        panic!("fault injection: StatusActor asked to panic");
    }
}
