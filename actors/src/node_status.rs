//! NodeStatusActor: registers the Node, keeps its status and its Lease fresh (reference §2).
//!
//! | Trigger                          | Effect                                                  |
//! |----------------------------------|---------------------------------------------------------|
//! | start, then every `nodeStatusUpdateFrequency` | register if needed, patch status, renew the lease |
//! | GetActorState                    | debug snapshot                                          |
//!
//! Ready follows the agent's health (PLEG and Docker), asked of the Supervisor each time.
//! Failed heartbeats are logged and retried at the next tick; they never stop the actor.

use std::time::Duration;

use actix::prelude::*;
use dockerlet_messages::debug::{ActorState, GetActorState, GetHealth, Health, Panic};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use crate::kube_api::KubeApi;

/// Settings of the node's registration and heartbeats.
#[derive(Debug, Clone)]
pub struct NodeStatusConfig {
    /// The Node to register: labels, addresses, capacity, nodeInfo (conditions are added here).
    pub node: Node,
    /// Create the Node if absent (`--register-node`).
    pub register: bool,
    /// Status and lease period (`nodeStatusUpdateFrequency`, 10 s).
    pub update_frequency: Duration,
    /// `nodeLeaseDurationSeconds` (40).
    pub lease_duration_seconds: i32,
}

/// The actor.
pub struct NodeStatusActor {
    /// The API.
    api: KubeApi,
    /// Settings.
    config: NodeStatusConfig,
    /// Where health comes from.
    health: Recipient<GetHealth>,
    /// The Node exists (we created it or found it).
    registered: bool,
    /// Last Ready value and when it last changed (condition transition time).
    ready: Option<(bool, Timestamp)>,
    /// A heartbeat is in flight.
    beating: bool,
    /// Heartbeats that succeeded.
    heartbeats: u64,
    /// The last error.
    last_error: Option<String>,
    /// Messages handled.
    handled: u64,
}

impl NodeStatusActor {
    /// A node status actor.
    pub fn new(api: KubeApi, config: NodeStatusConfig, health: Recipient<GetHealth>) -> Self {
        NodeStatusActor {
            api,
            config,
            health,
            registered: false,
            ready: None,
            beating: false,
            heartbeats: 0,
            last_error: None,
            handled: 0,
        }
    }

    fn beat(&mut self, ctx: &mut Context<Self>) {
        if self.beating {
            return;
        }
        self.beating = true;
        let health = self.health.clone();
        let future = async move {
            health.send(GetHealth).await.unwrap_or(Health {
                healthy: false,
                reason: Some("agent is restarting".into()),
            })
        };
        ctx.spawn(future.into_actor(self).then(|health, act, _| {
            let now = Timestamp::now();
            let since = match act.ready {
                Some((was, at)) if was == health.healthy => at,
                _ => now,
            };
            act.ready = Some((health.healthy, since));
            let status = node_status(&act.config.node, &health, since, now);
            let (api, register, registered, base) = (
                act.api.clone(),
                act.config.register,
                act.registered,
                act.config.node.clone(),
            );
            let lease = act.config.lease_duration_seconds;
            async move {
                if register && !registered {
                    let mut node = base;
                    node.status = Some(status.clone());
                    api.register_node(&node).await?;
                }
                api.patch_node_status(&status).await?;
                api.renew_lease(lease).await
            }
            .into_actor(act)
            .map(|result, act, _| {
                act.beating = false;
                match result {
                    Ok(()) => {
                        act.registered = true;
                        act.heartbeats += 1;
                        act.last_error = None;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "node heartbeat failed; retrying");
                        act.last_error = Some(e.to_string());
                    }
                }
            })
        }));
    }
}

/// The node's status: the base (capacity, addresses, nodeInfo) plus kubelet's conditions.
pub fn node_status(base: &Node, health: &Health, ready_since: Timestamp, now: Timestamp) -> NodeStatus {
    let mut status = base.status.clone().unwrap_or_default();
    let condition = |kind: &str, ok: bool, reason: &str, message: String, since: Timestamp| NodeCondition {
        type_: kind.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(since)),
    };
    let start = ready_since.min(now);
    let ready = if health.healthy {
        condition(
            "Ready",
            true,
            "KubeletReady",
            "kubelet is posting ready status".to_string(),
            start,
        )
    } else {
        let reason = health.reason.clone().unwrap_or_default();
        condition("Ready", false, "KubeletNotReady", reason, start)
    };
    status.conditions = Some(vec![
        condition(
            "MemoryPressure",
            false,
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available".into(),
            start,
        ),
        condition(
            "DiskPressure",
            false,
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure".into(),
            start,
        ),
        condition(
            "PIDPressure",
            false,
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available".into(),
            start,
        ),
        ready,
    ]);
    status
}

impl Actor for NodeStatusActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.beat(ctx);
        ctx.run_interval(self.config.update_frequency, |act, ctx| act.beat(ctx));
    }
}

impl Handler<GetActorState> for NodeStatusActor {
    type Result = MessageResult<GetActorState>;

    fn handle(&mut self, _: GetActorState, _: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        MessageResult(ActorState {
            kind: "NodeStatusActor".to_string(),
            name: self.api.node().to_string(),
            messages_handled: self.handled,
            restarts: 0,
            last_error: self.last_error.clone(),
            detail: json!({
                "registered": self.registered,
                "ready": self.ready.map(|r| r.0),
                "heartbeats": self.heartbeats,
            }),
        })
    }
}

impl Handler<Panic> for NodeStatusActor {
    type Result = ();

    fn handle(&mut self, _: Panic, _: &mut Self::Context) {
        panic!("fault injection: NodeStatusActor asked to panic");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ready follows health, with the reason; pressure conditions are False.
    #[test]
    fn ready_follows_health() {
        let now = Timestamp::from_second(1000).unwrap();
        let healthy = Health {
            healthy: true,
            reason: None,
        };
        let s = node_status(&Node::default(), &healthy, now, now);
        let ready = s
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .clone();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("True", Some("KubeletReady"))
        );
        let sick = Health {
            healthy: false,
            reason: Some("PLEG is not healthy".into()),
        };
        let s = node_status(&Node::default(), &sick, now, now);
        let ready = s.conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.status, "False");
        assert_eq!(ready.message.as_deref(), Some("PLEG is not healthy"));
    }
}
