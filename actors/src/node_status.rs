//! NodeStatusActor: registers the Node, keeps its status and its Lease fresh (kubelet's `pkg/kubelet/kubelet_node_status.go`, `pkg/kubelet/nodestatus/setters.go`).
//!
//! | Trigger                          | Effect                                                  |
//! |----------------------------------|---------------------------------------------------------|
//! | start                            | event `Starting`                                        |
//! | start, then every `nodeStatusUpdateFrequency` | register if needed; observe the eviction signals; patch status if it changed or `nodeStatusReportFrequency` passed; renew the lease; an event per condition change |
//! | SyncNodeStatus (NodeShutdownActor) | a heartbeat now (after the one in flight)             |
//! | GetActorState                    | debug snapshot                                          |
//!
//! Ready follows the agent's health (PLEG and Docker) and the pressure conditions follow the
//! EvictionActor's last reading ([`crate::eviction`]), both asked of the Supervisor each time.
//! Failed heartbeats are logged and retried at the next tick; they never stop the actor.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use dockerlet_messages::debug::{EventType, GetHealth, Health};
use dockerlet_messages::node::{GetNodeImages, GetNodePressure, NodePressure, Pressure, SyncNodeStatus};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use crate::inspect::Inspect;

use std::sync::Arc;

use dockerlet_kube::KubeClient;

/// Settings of the node's registration and heartbeats.
#[derive(Debug, Clone)]
pub struct NodeStatusConfig {
    /// The Node to register: labels, taints, addresses, capacity, nodeInfo (conditions are
    /// added here).
    pub node: Node,
    /// Create the Node if absent (`--register-node`).
    pub register: bool,
    /// Status and lease period (`nodeStatusUpdateFrequency`, 10 s).
    pub update_frequency: Duration,
    /// Longest time between two status writes when nothing changed (`nodeStatusReportFrequency`).
    pub report_frequency: Duration,
    /// `nodeLeaseDurationSeconds` (40).
    pub lease_duration_seconds: i32,
    /// `nodeStatusMaxImages` (50; -1: all): how many images `status.images` names.
    pub max_images: i64,
    /// The CNI pod network, whose readiness is part of Ready; none on Docker's bridge.
    pub network: Option<Arc<dockerlet_cni::Cni>>,
    /// `--cni-conf-template`: rendered for the Node's `spec.podCIDR` whenever it appears or
    /// changes (kubelet's `updatePodCIDR` in its node status loop hands it to the runtime).
    pub conf_template: Option<dockerlet_cni::template::ConfTemplate>,
}

/// First delay before retrying a failed registration.
const REGISTER_BACKOFF_INITIAL: Duration = Duration::from_millis(100);
/// Longest delay between registration attempts.
const REGISTER_BACKOFF_MAX: Duration = Duration::from_secs(7);
/// Attempts per status write or lease renewal.
const UPDATE_ATTEMPTS: usize = 5;

/// Run `attempt` up to [`UPDATE_ATTEMPTS`] times, until it succeeds.
async fn retry<F, Fut>(mut attempt: F) -> Result<(), dockerlet_kube::ApiError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), dockerlet_kube::ApiError>>,
{
    let mut result = attempt().await;
    for _ in 1..UPDATE_ATTEMPTS {
        if result.is_ok() {
            break;
        }
        result = attempt().await;
    }
    result
}

/// One of the four conditions the kubelet owns, as it words them (`pkg/kubelet/nodestatus/setters.go`).
struct ConditionKind {
    /// `type`.
    kind: &'static str,
    /// reason, message and event reason when the condition is True.
    when_true: (&'static str, &'static str, &'static str),
    /// … and when False.
    when_false: (&'static str, &'static str, &'static str),
}

/// In kubelet's order: Ready last.
const CONDITIONS: [ConditionKind; 4] = [
    ConditionKind {
        kind: "MemoryPressure",
        when_true: (
            "KubeletHasInsufficientMemory",
            "kubelet has insufficient memory available",
            "NodeHasInsufficientMemory",
        ),
        when_false: (
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
            "NodeHasSufficientMemory",
        ),
    },
    ConditionKind {
        kind: "DiskPressure",
        when_true: (
            "KubeletHasDiskPressure",
            "kubelet has disk pressure",
            "NodeHasDiskPressure",
        ),
        when_false: (
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
            "NodeHasNoDiskPressure",
        ),
    },
    ConditionKind {
        kind: "PIDPressure",
        when_true: (
            "KubeletHasInsufficientPID",
            "kubelet has insufficient PID available",
            "NodeHasInsufficientPID",
        ),
        when_false: (
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
            "NodeHasSufficientPID",
        ),
    },
    ConditionKind {
        kind: "Ready",
        when_true: ("KubeletReady", "kubelet is posting ready status", "NodeReady"),
        when_false: ("KubeletNotReady", "", "NodeNotReady"),
    },
];

/// What the conditions are now: each condition's value (in [`CONDITIONS`] order) and the
/// reason the node is not ready.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// MemoryPressure, DiskPressure, PIDPressure, Ready.
    pub values: [bool; 4],
    /// Ready's message when False.
    pub not_ready_reason: String,
}

impl Observed {
    /// From the agent's health and the pressure conditions in force.
    pub fn new(health: &Health, pressures: &[Pressure]) -> Self {
        Observed {
            values: [
                pressures.contains(&Pressure::Memory),
                pressures.contains(&Pressure::Disk),
                pressures.contains(&Pressure::Pid),
                health.healthy,
            ],
            not_ready_reason: health.reason.clone().unwrap_or_default(),
        }
    }
}

/// `health` with the pod network's readiness: kubelet's Ready is False with each runtime error,
/// joined by ", " (`runtimeState.runtimeErrors` and `networkErrors`), the network's as kubelet
/// prints cri-dockerd's `NetworkReady` condition.
fn with_network(health: Health, network: Result<(), dockerlet_cni::NetworkError>) -> Health {
    let Err(e) = network else {
        return health;
    };
    let reason = format!(
        "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:docker: network plugin is not ready: {e}"
    );
    Health {
        healthy: false,
        reason: Some(match health.reason.filter(|_| !health.healthy) {
            Some(first) => format!("{first}, {reason}"),
            None => reason,
        }),
    }
}

/// The actor.
pub struct NodeStatusActor {
    /// The API.
    api: Arc<dyn KubeClient>,
    /// Settings.
    config: NodeStatusConfig,
    /// Where health comes from.
    health: Recipient<GetHealth>,
    /// The Node exists (we created it or found it).
    registered: bool,
    /// The Node's UID once known (the Lease's owner).
    node_uid: Option<String>,
    /// Delay before retrying a failed registration (kubelet: 100 ms doubling to 7 s).
    register_backoff: Duration,
    /// Each condition's value and when it last changed (its transition time).
    conditions: BTreeMap<&'static str, (bool, Timestamp)>,
    /// Where the pressure conditions come from.
    pressure: Recipient<GetNodePressure>,
    /// Where the image list comes from (`status.images`); none: the status names no images.
    images: Option<Recipient<GetNodeImages>>,
    /// The last status written, heartbeat times cleared, and when.
    written: Option<(NodeStatus, Instant)>,
    /// A heartbeat is in flight.
    beating: bool,
    /// A [`SyncNodeStatus`] came during a heartbeat: beat again when it ends.
    beat_again: bool,
    /// Heartbeats that succeeded, and status writes among them.
    heartbeats: u64,
    status_writes: u64,
    /// The last error.
    last_error: Option<String>,
    /// Messages handled.
    handled: u64,
    /// The pod CIDR the CNI template was last rendered for.
    pod_cidr: Option<String>,
}

impl NodeStatusActor {
    /// A node status actor.
    pub fn new(
        api: Arc<dyn KubeClient>,
        config: NodeStatusConfig,
        health: Recipient<GetHealth>,
        pressure: Recipient<GetNodePressure>,
    ) -> Self {
        NodeStatusActor {
            api,
            config,
            health,
            registered: false,
            node_uid: None,
            register_backoff: REGISTER_BACKOFF_INITIAL,
            conditions: BTreeMap::new(),
            pressure,
            images: None,
            written: None,
            beating: false,
            beat_again: false,
            heartbeats: 0,
            status_writes: 0,
            last_error: None,
            handled: 0,
            pod_cidr: None,
        }
    }

    /// Report the engine's images in `status.images` (kubelet's `nodestatus.Images` setter).
    pub fn with_images(mut self, images: Recipient<GetNodeImages>) -> Self {
        self.images = Some(images);
        self
    }

    /// kubelet's `updatePodCIDR` from its node status loop: the Node's `spec.podCIDR`, once it
    /// appears or changes, renders `--cni-conf-template` (off the actor's thread); a failure is
    /// tried again at the next beat.
    fn follow_pod_cidr(&mut self, ctx: &mut Context<Self>) {
        let Some(template) = self.config.conf_template.clone() else {
            return;
        };
        let Some(cidr) = self
            .api
            .node_object()
            .and_then(|n| n.spec.as_ref()?.pod_cidr.clone())
            .filter(|c| !c.is_empty())
        else {
            return;
        };
        if self.pod_cidr.as_deref() == Some(cidr.as_str()) {
            return;
        }
        self.pod_cidr = Some(cidr.clone());
        let render = tokio::task::spawn_blocking(move || template.render(&cidr).map(|w| (cidr, w)));
        ctx.spawn(render.into_actor(self).map(|result, act, _| match result {
            Ok(Ok((cidr, Some(path)))) => {
                tracing::info!(pod_cidr = %cidr, file = %path.display(), "CNI configuration written for the node's pod CIDR");
            }
            Ok(Ok((_, None))) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot write the CNI configuration for the node's pod CIDR");
                act.last_error = Some(e.to_string());
                act.pod_cidr = None;
            }
            Err(e) => {
                tracing::warn!(error = %e, "the CNI template task did not finish");
                act.pod_cidr = None;
            }
        }));
    }

    /// What a beat reports: the agent's health with the pod network's readiness, the pressure
    /// conditions, the engine's images.
    fn readings(
        &self,
    ) -> impl std::future::Future<
        Output = (
            Health,
            NodePressure,
            Option<Vec<dockerlet_messages::runtime::RuntimeImage>>,
        ),
    > + 'static {
        let (health, pressure, images) = (self.health.clone(), self.pressure.clone(), self.images.clone());
        let network = self.config.network.clone();
        async move {
            let health = health.send(GetHealth).await.unwrap_or(Health {
                healthy: false,
                reason: Some("agent is restarting".into()),
            });
            let health = match network {
                Some(cni) => with_network(health, cni.status().await),
                None => health,
            };
            let pressure: NodePressure = pressure.send(GetNodePressure).await.unwrap_or_default();
            let images = match images {
                Some(images) => images.send(GetNodeImages).await.ok().flatten(),
                None => None,
            };
            (health, pressure, images)
        }
    }

    fn beat(&mut self, ctx: &mut Context<Self>) {
        self.follow_pod_cidr(ctx);
        if self.beating {
            return;
        }
        self.beating = true;
        let future = self.readings();
        ctx.spawn(future.into_actor(self).then(|(health, pressure, images), act, _| {
            let observed = Observed::new(&health, &pressure.conditions);
            let now = Timestamp::now();
            let events = act.transitions(&observed, now);
            let mut status = node_status(&act.config.node, &act.conditions, &observed, now);
            if let Some(images) = images {
                let listed = dockerlet_host::image_gc::node_images(&images, act.config.max_images);
                status.images = (!listed.is_empty()).then_some(listed);
            }
            let unchanged = act.written.as_ref().is_some_and(|(last, at)| {
                *last == without_heartbeats(&status) && at.elapsed() < act.config.report_frequency
            });
            let (api, register, registered, base, known_uid) = (
                act.api.clone(),
                act.config.register,
                act.registered,
                act.config.node.clone(),
                act.node_uid.clone(),
            );
            let lease = act.config.lease_duration_seconds;
            let node = api.node().to_string();
            let node_name = node.clone();
            let to_write = (!unchanged).then(|| status.clone());
            async move {
                let node_uid = match (register && !registered, known_uid) {
                    (true, _) => {
                        let mut node = base;
                        node.status = Some(status.clone());
                        let (uid, boot_id) = api.register_node(&node).await?;
                        let ours = status
                            .node_info
                            .as_ref()
                            .map(|i| i.boot_id.as_str())
                            .unwrap_or_default();
                        if boot_id.is_some_and(|b| b != ours) {
                            let message = format!("Node {node_name} has been rebooted, boot id: {ours}");
                            if let Err(e) = api.record_node_event(EventType::Warning, "Rebooted", &message).await {
                                tracing::debug!(error = %e, "cannot record node event");
                            }
                        }
                        Some(uid)
                    }
                    (false, uid) => uid,
                };
                for (kind, reason) in events {
                    let message = format!("Node {node} status is now: {reason}");
                    if let Err(e) = api.record_node_event(kind, reason, &message).await {
                        tracing::debug!(error = %e, "cannot record node event");
                    }
                }
                // kubelet: up to five immediate attempts each (nodeStatusUpdateRetry,
                // maxUpdateRetries), then the next period.
                if let Some(status) = &to_write {
                    retry(|| api.patch_node_status(status)).await?;
                }
                retry(|| api.renew_lease(lease, node_uid.as_deref())).await?;
                Ok::<_, dockerlet_kube::ApiError>((to_write, node_uid))
            }
            .into_actor(act)
            .map(|result, act, ctx| {
                act.beating = false;
                if std::mem::take(&mut act.beat_again) {
                    ctx.run_later(Duration::ZERO, |act, ctx| act.beat(ctx));
                }
                match result {
                    Ok((written, node_uid)) => {
                        act.registered = true;
                        act.node_uid = node_uid;
                        act.register_backoff = REGISTER_BACKOFF_INITIAL;
                        act.heartbeats += 1;
                        act.last_error = None;
                        if let Some(status) = written {
                            act.status_writes += 1;
                            act.written = Some((without_heartbeats(&status), Instant::now()));
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "node heartbeat failed; retrying");
                        act.last_error = Some(e.to_string());
                        if !act.registered && act.config.register {
                            let delay = act.register_backoff;
                            act.register_backoff = (delay * 2).min(REGISTER_BACKOFF_MAX);
                            if delay < act.config.update_frequency {
                                ctx.run_later(delay, |act, ctx| act.beat(ctx));
                            }
                        }
                    }
                }
            })
        }));
    }

    /// Record each condition that changed (or is seen for the first time); returns the events
    /// to send, kubelet's `NodeReady`, `NodeHasSufficientMemory`, … (Warning for bad news).
    fn transitions(&mut self, observed: &Observed, now: Timestamp) -> Vec<(EventType, &'static str)> {
        let mut events = Vec::new();
        for (condition, &value) in CONDITIONS.iter().zip(&observed.values) {
            if self.conditions.get(condition.kind).is_some_and(|(v, _)| *v == value) {
                continue;
            }
            self.conditions.insert(condition.kind, (value, now));
            let (_, _, event) = if value {
                condition.when_true
            } else {
                condition.when_false
            };
            let bad = (condition.kind == "Ready") != value;
            events.push((if bad { EventType::Warning } else { EventType::Normal }, event));
        }
        events
    }
}

/// The status with every heartbeat time cleared, to tell whether anything else changed.
fn without_heartbeats(status: &NodeStatus) -> NodeStatus {
    let mut status = status.clone();
    for c in status.conditions.iter_mut().flatten() {
        c.last_heartbeat_time = None;
    }
    status
}

/// The node's status: the base (capacity, addresses, nodeInfo) plus kubelet's four conditions,
/// with the transition times in `since` (now for a condition not seen before).
pub fn node_status(
    base: &Node,
    since: &BTreeMap<&'static str, (bool, Timestamp)>,
    observed: &Observed,
    now: Timestamp,
) -> NodeStatus {
    let mut status = base.status.clone().unwrap_or_default();
    let conditions = CONDITIONS
        .iter()
        .zip(&observed.values)
        .map(|(condition, &value)| {
            let (reason, message, _) = if value {
                condition.when_true
            } else {
                condition.when_false
            };
            let message = match message {
                "" => observed.not_ready_reason.clone(),
                m => m.to_string(),
            };
            let changed = since
                .get(condition.kind)
                .filter(|(v, _)| *v == value)
                .map_or(now, |(_, at)| *at)
                .min(now);
            NodeCondition {
                type_: condition.kind.to_string(),
                status: if value { "True" } else { "False" }.to_string(),
                reason: Some(reason.to_string()),
                message: Some(message),
                last_heartbeat_time: Some(Time(now)),
                last_transition_time: Some(Time(changed)),
            }
        })
        .collect();
    status.conditions = Some(conditions);
    status
}

impl Actor for NodeStatusActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let api = self.api.clone();
        ctx.spawn(
            async move {
                if let Err(e) = api
                    .record_node_event(EventType::Normal, "Starting", "Starting kubelet.")
                    .await
                {
                    tracing::debug!(error = %e, "cannot record node event");
                }
            }
            .into_actor(self),
        );
        self.beat(ctx);
        ctx.run_interval(self.config.update_frequency, |act, ctx| act.beat(ctx));
    }
}

impl Handler<SyncNodeStatus> for NodeStatusActor {
    type Result = ();

    /// A heartbeat now (or right after the one in flight, which may have read the old state).
    fn handle(&mut self, _: SyncNodeStatus, ctx: &mut Self::Context) {
        self.handled += 1;
        if self.beating {
            self.beat_again = true;
        } else {
            self.beat(ctx);
        }
    }
}

impl Inspect for NodeStatusActor {
    const KIND: &'static str = "NodeStatusActor";
    const NAME: &'static str = "node";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn instance(&self) -> String {
        self.api.node().to_string()
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.clone()
    }

    fn detail(&self) -> serde_json::Value {
        json!({
            "registered": self.registered,
            "conditions": self.conditions.iter().map(|(k, (v, at))| (k.to_string(), json!({
                "status": if *v { "True" } else { "False" },
                "since": at.to_string(),
            }))).collect::<BTreeMap<_, _>>(),
            "heartbeats": self.heartbeats,
            "status_writes": self.status_writes,
        })
    }
}

crate::supervised!(NodeStatusActor);

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(status: &NodeStatus, kind: &str) -> NodeCondition {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == kind)
            .unwrap()
            .clone()
    }

    /// Ready follows health, with the reason; pressure conditions follow the thresholds; Ready
    /// is listed last.
    #[test]
    fn conditions_follow_health_and_pressure() {
        let now = Timestamp::from_second(1000).unwrap();
        let healthy = Health {
            healthy: true,
            reason: None,
        };
        let s = node_status(&Node::default(), &BTreeMap::new(), &Observed::new(&healthy, &[]), now);
        let ready = condition(&s, "Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("True", Some("KubeletReady"))
        );
        assert_eq!(s.conditions.as_ref().unwrap().last().unwrap().type_, "Ready");
        assert_eq!(condition(&s, "MemoryPressure").status, "False");
        let sick = Health {
            healthy: false,
            reason: Some("PLEG is not healthy".into()),
        };
        let observed = Observed::new(&sick, &[Pressure::Memory]);
        let s = node_status(&Node::default(), &BTreeMap::new(), &observed, now);
        let ready = condition(&s, "Ready");
        assert_eq!(ready.status, "False");
        assert_eq!(ready.message.as_deref(), Some("PLEG is not healthy"));
        let unready = Err(dockerlet_cni::NetworkError::Uninitialized);
        let network = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:docker: network plugin is not ready: cni config uninitialized";
        let alone = with_network(healthy.clone(), Err(dockerlet_cni::NetworkError::Uninitialized));
        assert_eq!((alone.healthy, alone.reason.as_deref()), (false, Some(network)));
        let both = with_network(sick.clone(), unready);
        assert_eq!(both.reason, Some(format!("PLEG is not healthy, {network}")));
        assert!(with_network(healthy.clone(), Ok(())).healthy);
        let memory = condition(&s, "MemoryPressure");
        assert_eq!(
            (memory.status.as_str(), memory.reason.as_deref()),
            ("True", Some("KubeletHasInsufficientMemory"))
        );
        assert_eq!(condition(&s, "DiskPressure").status, "False");
    }

    /// A transition time moves only when the condition's value changes; heartbeats do not count
    /// as a change.
    #[test]
    fn transition_times_move_only_on_change() {
        let t0 = Timestamp::from_second(1000).unwrap();
        let t1 = Timestamp::from_second(1010).unwrap();
        let healthy = Observed::new(
            &Health {
                healthy: true,
                reason: None,
            },
            &[],
        );
        let since = BTreeMap::from([("Ready", (true, t0)), ("MemoryPressure", (true, t0))]);
        let s = node_status(&Node::default(), &since, &healthy, t1);
        assert_eq!(condition(&s, "Ready").last_transition_time, Some(Time(t0)));
        assert_eq!(condition(&s, "MemoryPressure").last_transition_time, Some(Time(t1)));
        let earlier = node_status(&Node::default(), &since, &healthy, t0);
        assert_eq!(without_heartbeats(&s).conditions.as_ref().unwrap()[3], {
            let mut c = condition(&earlier, "Ready");
            c.last_heartbeat_time = None;
            c
        });
    }

    /// Health and pressure for a NodeStatusActor under test.
    struct Node0 {
        pressure: Vec<Pressure>,
    }

    impl Actor for Node0 {
        type Context = Context<Self>;
    }

    impl Handler<GetHealth> for Node0 {
        type Result = MessageResult<GetHealth>;
        fn handle(&mut self, _: GetHealth, _: &mut Context<Self>) -> Self::Result {
            MessageResult(Health {
                healthy: true,
                reason: None,
            })
        }
    }

    impl Handler<GetNodePressure> for Node0 {
        type Result = MessageResult<GetNodePressure>;
        fn handle(&mut self, _: GetNodePressure, _: &mut Context<Self>) -> Self::Result {
            MessageResult(NodePressure {
                conditions: self.pressure.clone(),
                met: vec![],
            })
        }
    }

    impl Handler<GetNodeImages> for Node0 {
        type Result = MessageResult<GetNodeImages>;
        fn handle(&mut self, _: GetNodeImages, _: &mut Context<Self>) -> Self::Result {
            let image = |id: &str, tag: &str, size| dockerlet_messages::runtime::RuntimeImage {
                id: id.into(),
                repo_tags: vec![tag.into()],
                repo_digests: vec![],
                size,
                created: 0,
                parent: None,
            };
            MessageResult(Some(vec![
                image("a", "small:1", 10),
                image("b", "big:1", 99),
                image("c", "mid:1", 50),
            ]))
        }
    }

    /// With the image list, the written status names the images, largest first, at most
    /// `nodeStatusMaxImages` (kubelet's `nodestatus.Images`).
    #[actix::test]
    async fn the_status_names_the_largest_images() {
        use dockerlet_kube::fake::{FakeKube, KubeCall};
        tokio::time::pause();
        let api = FakeKube::new("n1");
        let sources = Node0 { pressure: vec![] }.start();
        let config = NodeStatusConfig {
            max_images: 2,
            network: None,
            conf_template: None,
            node: Node::default(),
            register: true,
            update_frequency: Duration::from_secs(10),
            report_frequency: Duration::from_secs(300),
            lease_duration_seconds: 40,
        };
        let actor = NodeStatusActor::new(
            Arc::new(api.clone()),
            config,
            sources.clone().recipient(),
            sources.clone().recipient(),
        )
        .with_images(sources.recipient());
        let _addr = actor.start();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let images = api.calls().into_iter().find_map(|c| match c {
            KubeCall::NodeStatus(s) => s.images.clone(),
            _ => None,
        });
        let names: Vec<_> = images
            .unwrap_or_default()
            .into_iter()
            .map(|i| (i.names.unwrap_or_default(), i.size_bytes))
            .collect();
        assert_eq!(
            names,
            vec![
                (vec!["big:1".to_string()], Some(99)),
                (vec!["mid:1".to_string()], Some(50))
            ]
        );
    }

    /// A heartbeat registers the Node, writes its status with the pressure the EvictionActor
    /// reports, renews the Lease owned by the Node, and records Starting and the condition
    /// events; an unchanged status is not written again before the report frequency.
    #[actix::test]
    async fn heartbeats_register_write_status_and_renew_the_lease() {
        use dockerlet_kube::fake::{FakeKube, KubeCall};
        tokio::time::pause();
        let api = FakeKube::new("n1");
        let sources = Node0 {
            pressure: vec![Pressure::Memory],
        }
        .start();
        let config = NodeStatusConfig {
            max_images: 50,
            network: None,
            conf_template: None,
            node: Node::default(),
            register: true,
            update_frequency: Duration::from_secs(10),
            report_frequency: Duration::from_secs(300),
            lease_duration_seconds: 40,
        };
        let actor = NodeStatusActor::new(
            Arc::new(api.clone()),
            config,
            sources.clone().recipient(),
            sources.recipient(),
        );
        let _addr = actor.start();
        tokio::time::sleep(Duration::from_secs(25)).await;
        let calls = api.calls();
        assert!(
            calls.iter().any(|c| matches!(c, KubeCall::NodeRegistered(_))),
            "{calls:?}"
        );
        let statuses: Vec<&NodeStatus> = calls
            .iter()
            .filter_map(|c| match c {
                KubeCall::NodeStatus(s) => Some(s.as_ref()),
                _ => None,
            })
            .collect();
        assert_eq!(statuses.len(), 1, "three beats, one status write: {calls:?}");
        assert_eq!(condition(statuses[0], "MemoryPressure").status, "True");
        let leases = calls
            .iter()
            .filter(|c| **c == KubeCall::LeaseRenewed(Some("uid-of-n1".into())))
            .count();
        assert_eq!(leases, 3, "a lease renewal per beat, owned by the Node: {calls:?}");
        let reasons: Vec<&str> = calls
            .iter()
            .filter_map(|c| match c {
                KubeCall::NodeEvent { reason, .. } => Some(reason.as_str()),
                _ => None,
            })
            .collect();
        assert!(
            reasons.contains(&"Starting") && reasons.contains(&"NodeHasInsufficientMemory"),
            "{reasons:?}"
        );
    }
}
