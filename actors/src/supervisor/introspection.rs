//! The Supervisor's answers about the actors themselves: the debug snapshot (every actor's own
//! account, `/debug/actors`) and fault injection (an actor made to panic, for the tests and
//! `make chaos`).

use actix::prelude::*;
use dockerlet_messages::debug::{
    ActorState, DebugSnapshot, FaultError, FaultTarget, GetDebugSnapshot, GetRecentEvents, InjectFault, Panic,
};
use serde_json::json;

use super::Supervisor;
use crate::registry::{ask, QUERY_TIMEOUT};

impl Handler<GetDebugSnapshot> for Supervisor {
    type Result = ResponseFuture<DebugSnapshot>;

    /// Every actor's own account of itself, gathered concurrently.
    fn handle(&mut self, _: GetDebugSnapshot, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let own = ActorState {
            kind: "Supervisor".to_string(),
            name: "supervisor".to_string(),
            messages_handled: self.handled,
            restarts: 0,
            last_error: None,
            detail: json!({
                "desired_pods": self.pods.desired().len(),
                "workers": self.pods.workers().count(),
                "sources_ready": self.pods.desired().sources_ready(),
                // Desired pods that have no worker yet, and why.
                "waiting_pods": self.pods.waiting_pods(),
            }),
            view: None,
        };
        let mut queries = self.children.registry.states();
        let mut workers: Vec<_> = self.pods.workers().map(|(_, e)| (e.id.to_string(), e)).collect();
        workers.sort_by(|a, b| a.0.cmp(&b.0));
        queries.extend(
            workers
                .into_iter()
                .map(|(_, e)| -> futures::future::BoxFuture<'static, _> {
                    Box::pin(ask(e.worker.clone(), e.restarts))
                }),
        );
        let mut snapshot = DebugSnapshot {
            node_name: self.config.worker.node_name.clone(),
            actors: vec![own],
            manifest_errors: self.pods.desired().errors(),
            events: Vec::new(),
        };
        let events = self.children.events.query(GetRecentEvents, Some(QUERY_TIMEOUT));
        Box::pin(async move {
            let (states, events) = futures::future::join(futures::future::join_all(queries), events).await;
            snapshot.actors.extend(states.into_iter().flatten());
            snapshot.events = events;
            snapshot
        })
    }
}

impl Handler<InjectFault> for Supervisor {
    type Result = Result<(), FaultError>;

    /// Make the target panic in a handler (only when fault injection is enabled).
    fn handle(&mut self, msg: InjectFault, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        if !self.config.fault_injection {
            return Err(FaultError::Disabled);
        }
        tracing::warn!(target = ?msg.target, "fault injection: making an actor panic");
        let found = match &msg.target {
            FaultTarget::Actor(name) => self.children.registry.panic(name),
            FaultTarget::PodWorker(uid) => self.pods.worker(uid).inspect(|w| w.do_send(Panic)).is_some(),
        };
        found.then_some(()).ok_or(FaultError::NoSuchActor(msg.target))
    }
}
