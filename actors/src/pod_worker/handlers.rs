//! The PodWorker's mailbox: each message it takes, fed to its state machine or answered from its
//! state, and what it tells the debug page ([`Inspect`]).

use super::*;

impl Actor for PodWorker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let _span = self.span.clone().entered();
        match self.state.phase() {
            Phase::Terminating { grace } => self.start_termination(grace, ctx),
            _ if self.pod.metadata.deletion_timestamp.is_some() => self.terminate_deleted(ctx),
            _ => self.step(Input::Sync(Trigger::Event), ctx),
        }
    }
}

impl Handler<UpdatePod> for PodWorker {
    type Result = ();

    /// Take the new desired spec and sync.
    fn handle(&mut self, msg: UpdatePod, ctx: &mut Self::Context) {
        self.handled += 1;
        let _span = self.span.clone().entered();
        self.pod = msg.pod;
        if self.pod.metadata.deletion_timestamp.is_some() {
            return self.terminate_deleted(ctx);
        }
        if self.timing.next_operation == WorkerOperation::sync {
            self.timing.next_operation = WorkerOperation::update;
        }
        self.step(Input::Sync(Trigger::SpecChanged), ctx);
    }
}

impl Handler<SyncPod> for PodWorker {
    type Result = ();

    /// Something changed in Docker, or it is time to resync.
    fn handle(&mut self, _: SyncPod, ctx: &mut Self::Context) {
        self.handled += 1;
        let _span = self.span.clone().entered();
        self.step(Input::Sync(Trigger::Event), ctx);
    }
}

impl Handler<RuntimeBack> for PodWorker {
    type Result = ();

    /// The engine is back: publish what the relist that found it back put in the pod cache
    /// (containers that stopped with the engine are no longer reported running, whatever sync
    /// is in flight), and sync now, past the error back-off of the syncs it failed.
    fn handle(&mut self, _: RuntimeBack, ctx: &mut Self::Context) {
        self.handled += 1;
        let _span = self.span.clone().entered();
        if let Some(observed) = self.sync.cache.pod(&self.id.uid) {
            self.publish_observed(observed, ctx);
        }
        self.step(Input::Sync(Trigger::RuntimeBack), ctx);
    }
}

impl Handler<TerminatePod> for PodWorker {
    type Result = ();

    /// Stop everything; cuts into a sync in flight.
    fn handle(&mut self, msg: TerminatePod, ctx: &mut Self::Context) {
        self.handled += 1;
        let _span = self.span.clone().entered();
        self.termination_reason = msg.reason;
        self.step(
            Input::Terminate {
                grace: msg.grace_period,
            },
            ctx,
        );
    }
}

impl Handler<ShutdownPod> for PodWorker {
    type Result = actix::ResponseFuture<()>;

    /// The node shuts down (kubelet's shutdown manager, `TerminatePodAbnormallyAndWait`): fail
    /// the pod and stop what runs within the grace period; answer once nothing runs.
    fn handle(&mut self, msg: ShutdownPod, ctx: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        // Its containers' Killing events come from their stops; kubelet records no pod event.
        self.stop_for_node(msg.grace, PodFailure::node_shutdown(), "node shutdown", ctx)
    }
}

impl Handler<EvictPod> for PodWorker {
    type Result = actix::ResponseFuture<()>;

    /// The eviction manager evicts the pod (kubelet's `killPodNow` with the eviction's status):
    /// fail it `Evicted` and stop what runs within the grace period; answer once nothing runs.
    fn handle(&mut self, msg: EvictPod, ctx: &mut Self::Context) -> Self::Result {
        self.handled += 1;
        let failure = PodFailure::evicted(msg.message, msg.disruption_target);
        self.stop_for_node(msg.grace, failure, "evicted", ctx)
    }
}

impl PodWorker {
    /// Fail the pod with `failure` (unless it failed already) and stop what runs within
    /// `grace`; the future ends once nothing of the pod runs (at once for a pod that finished,
    /// was rejected or is being terminated).
    fn stop_for_node(
        &mut self,
        grace: Duration,
        failure: PodFailure,
        why: &'static str,
        ctx: &mut Context<Self>,
    ) -> actix::ResponseFuture<()> {
        let _span = self.span.clone().entered();
        let (done, stopped) = tokio::sync::oneshot::channel();
        let succeeded = self.published.last_status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
        let stopping = matches!(self.state.phase(), Phase::Terminating { .. } | Phase::Terminated);
        if self.rejection.is_some() || succeeded || stopping {
            return Box::pin(async {});
        }
        tracing::info!(grace = ?grace, reason = why, "stopping the pod");
        self.failure.get_or_insert(failure);
        self.shutdown
            .get_or_insert(ShutdownStop {
                grace,
                waiters: Vec::new(),
            })
            .waiters
            .push(done);
        self.publish_status(ctx);
        self.step(Input::Sync(Trigger::SpecChanged), ctx);
        Box::pin(async move {
            let _ = stopped.await;
        })
    }
}

impl Handler<ProbeResultChanged> for PodWorker {
    type Result = ();

    /// A probe result changed: readiness and startup change the status at once; a failed
    /// liveness or startup probe makes the next sync kill the container.
    fn handle(&mut self, msg: ProbeResultChanged, ctx: &mut Self::Context) {
        self.handled += 1;
        let current = self
            .observed
            .last_observed
            .iter()
            .any(|c| c.id == msg.container_id && c.state == RuntimeState::Running);
        // While the pod terminates only readiness still counts (Ready can turn False); once it
        // is terminated, nothing.
        let terminating = self.state.is_terminating();
        let done = self.state.phase() == Phase::Terminated;
        if !current || done || (terminating && msg.kind != ProbeKind::Readiness) {
            return;
        }
        let _span = self.span.clone().entered();
        self.observed
            .probes
            .insert((msg.container_name.clone(), msg.kind), (msg.container_id, msg.result));
        self.publish_status(ctx);
        if msg.result == ProbeResult::Failure && msg.kind != ProbeKind::Readiness {
            self.step(Input::Sync(Trigger::ProbeFailed), ctx);
        } else if msg.result == ProbeResult::Success
            && msg.kind == ProbeKind::Startup
            && self.is_sidecar(&msg.container_name)
        {
            // A sidecar started: the next init container (or the app containers) may start.
            self.step(Input::Sync(Trigger::SidecarStarted), ctx);
        }
    }
}

impl Handler<ResendProbeTargets> for PodWorker {
    type Result = ();

    /// The ProbeActor was re-created: give it the running containers again.
    fn handle(&mut self, _: ResendProbeTargets, _: &mut Self::Context) {
        self.handled += 1;
        self.watch_probes(true);
    }
}

impl Handler<outcome::SyncNote> for PodWorker {
    type Result = ();

    fn handle(&mut self, note: outcome::SyncNote, ctx: &mut Self::Context) {
        self.handled += 1;
        match note {
            // kubelet's SyncPod sets the pod's status before it creates anything, so a pod whose
            // first sync takes long (an image pull, a slow postStart) shows Pending with its
            // conditions and its containers ContainerCreating meanwhile, not nothing. Only while
            // no status is out (after an agent restart, a pod with containers gets the sync's
            // own status first).
            outcome::SyncNote::NothingCreatedYet => {
                if self.published.last_status.is_none() && !self.state.is_terminating() {
                    self.publish_status(ctx);
                }
            }
            outcome::SyncNote::Observed(observed) => self.publish_observed(observed, ctx),
            outcome::SyncNote::Events(events) => self.record_events(&events),
        }
    }
}

impl Handler<PublishStatus> for PodWorker {
    type Result = ();

    /// Send the last status again, unchanged.
    fn handle(&mut self, _: PublishStatus, _: &mut Self::Context) {
        self.handled += 1;
        if let (Some(status), false) = (&self.published.last_status, self.state.is_terminating()) {
            self.links.status.do_send(SetPodStatus {
                id: self.id.clone(),
                pod: self.pod.clone(),
                status: status.clone(),
            });
        }
    }
}

impl Handler<StopActor> for PodWorker {
    type Result = ();

    fn handle(&mut self, _: StopActor, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl Inspect for PodWorker {
    const KIND: &'static str = "PodWorker";
    const NAME: &'static str = "pod";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn instance(&self) -> String {
        self.id.to_string()
    }

    fn last_error(&self) -> Option<String> {
        self.diagnostics.last_error.clone()
    }

    fn detail(&self) -> serde_json::Value {
        let view = self.debug_view();
        json!({
            "pod_uid": self.id.uid,
            "phase": view.phase,
            "pod_phase": view.pod_phase,
            "next_action": view.next_action,
            "backoff_until": view.backoff_until,
            "waiting": self.observed.waiting,
            "last_error": view.last_error,
            "retry_at": view.retry_at,
            "mount_failures": view.mount_failures,
            "containers": view.containers,
        })
    }

    fn view(&self) -> Option<DebugView> {
        let view = self.debug_view();
        Some(DebugView::Pod(Box::new(view)))
    }
}

crate::supervised!(PodWorker);
