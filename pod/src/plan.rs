//! kubelet's computePodActions (`pkg/kubelet/kuberuntime/kuberuntime_manager.go`) as one pure function: given the desired pod and
//! what Docker runs, decide what to kill, remove, create and start.

use std::collections::HashMap;
use std::time::Duration;

use dockerlet_messages::probe::ProbeKind;
use dockerlet_messages::runtime::{ContainerRole, ObservedContainer, RuntimeState};
use dockerlet_messages::ContainerId;
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::backoff::{restart_decision, BackoffConfig, RestartDecision};
use crate::spec::{container_hash, host_network};

/// How many instances of one container are kept: the newest, and the one before it (for
/// `lastState`). Older dead ones are removed.
const KEEP_INSTANCES: usize = 2;

/// The pod's `restartPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RestartPolicy {
    /// Always restart (default).
    Always,
    /// Restart when the exit code is not 0.
    OnFailure,
    /// Never restart.
    Never,
}

impl RestartPolicy {
    /// The policy of `pod`, defaulting to Always.
    pub fn of(pod: &Pod) -> Self {
        match pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) {
            Some("OnFailure") => RestartPolicy::OnFailure,
            Some("Never") => RestartPolicy::Never,
            _ => RestartPolicy::Always,
        }
    }

    /// kubelet's ShouldContainerBeRestarted for an exited container.
    pub fn restarts(self, exit_code: i64) -> bool {
        match self {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => exit_code != 0,
            RestartPolicy::Never => false,
        }
    }
}

/// Stop one container.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KillAction {
    /// The container.
    pub id: ContainerId,
    /// Its name in the pod.
    pub name: String,
    /// Why (kubelet's message).
    pub reason: String,
    /// Grace period override (a probe's `terminationGracePeriodSeconds`).
    pub grace: Option<Duration>,
}

/// Create and start one container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StartAction {
    /// Name in the pod spec.
    pub name: String,
    /// Init or app.
    pub role: ContainerRole,
    /// The attempt (restart count) of the new container.
    pub attempt: u32,
    /// Its back-off step.
    pub backoff_step: u32,
}

/// A container that should run again but is in CrashLoopBackOff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackingOff {
    /// Name in the pod spec.
    pub name: String,
    /// When it may start.
    pub until: Timestamp,
    /// The delay being served.
    pub delay: Duration,
}

/// Everything one sync should do, in execution order.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PodActions {
    /// Stop every container and sandbox of the pod first.
    pub kill_pod: bool,
    /// Containers to stop (when not killing the whole pod).
    pub kill: Vec<KillAction>,
    /// Dead containers no status needs any more.
    pub remove: Vec<ContainerId>,
    /// Create a new sandbox with this attempt number.
    pub create_sandbox: Option<u32>,
    /// Containers to create and start, in order.
    pub start: Vec<StartAction>,
    /// Containers waiting out their back-off.
    pub backing_off: Vec<BackingOff>,
}

impl PodActions {
    /// Nothing to do but wait.
    pub fn is_idle(&self) -> bool {
        !self.kill_pod
            && self.kill.is_empty()
            && self.remove.is_empty()
            && self.create_sandbox.is_none()
            && self.start.is_empty()
    }

    /// One line for the debug endpoint.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.kill_pod {
            parts.push("kill pod".to_string());
        }
        parts.extend(self.kill.iter().map(|k| format!("kill {}", k.name)));
        if let Some(a) = self.create_sandbox {
            parts.push(format!("create sandbox (attempt {a})"));
        }
        parts.extend(
            self.start
                .iter()
                .map(|s| format!("start {} (attempt {})", s.name, s.attempt)),
        );
        parts.extend(
            self.backing_off
                .iter()
                .map(|b| format!("wait back-off {}s for {}", b.delay.as_secs(), b.name)),
        );
        if !self.remove.is_empty() {
            parts.push(format!("remove {} dead container(s)", self.remove.len()));
        }
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// A pod's containers as Docker reports them, grouped for decisions.
#[derive(Debug, Default)]
pub struct PodView<'a> {
    /// Sandboxes, newest attempt first.
    pub sandboxes: Vec<&'a ObservedContainer>,
    /// Instances per container name, newest attempt first.
    pub containers: HashMap<&'a str, Vec<&'a ObservedContainer>>,
}

impl<'a> PodView<'a> {
    /// Group observed containers.
    pub fn new(observed: &'a [ObservedContainer]) -> Self {
        let mut view = PodView::default();
        for c in observed {
            match c.role {
                ContainerRole::Sandbox => view.sandboxes.push(c),
                _ => view.containers.entry(c.name.as_str()).or_default().push(c),
            }
        }
        let newest_first = |a: &&ObservedContainer, b: &&ObservedContainer| {
            b.attempt.cmp(&a.attempt).then_with(|| {
                b.created_at
                    .as_ref()
                    .map(|t| t.0)
                    .cmp(&a.created_at.as_ref().map(|t| t.0))
            })
        };
        view.sandboxes.sort_by(newest_first);
        for instances in view.containers.values_mut() {
            instances.sort_by(newest_first);
        }
        view
    }

    /// The newest instance of a container.
    pub fn latest(&self, name: &str) -> Option<&'a ObservedContainer> {
        self.containers.get(name).and_then(|v| v.first().copied())
    }

    /// The instance before the newest.
    pub fn previous(&self, name: &str) -> Option<&'a ObservedContainer> {
        self.containers.get(name).and_then(|v| v.get(1).copied())
    }

    /// The newest sandbox.
    pub fn sandbox(&self) -> Option<&'a ObservedContainer> {
        self.sandboxes.first().copied()
    }
}

/// Is this instance finished (exited, or a start that failed)?
pub fn has_exited(c: &ObservedContainer) -> bool {
    c.state == RuntimeState::Exited || (c.state == RuntimeState::Created && c.exit_code != 0)
}

/// Decide what to do for `pod` given `observed` at `now`.
pub fn compute_pod_actions(
    pod: &Pod,
    observed: &[ObservedContainer],
    now: Timestamp,
    backoff: &BackoffConfig,
) -> PodActions {
    compute_pod_actions_with_probes(pod, observed, now, backoff, &HashMap::new())
}

/// [`compute_pod_actions`] with the running containers whose liveness or startup probe failed:
/// kubelet kills them, and the restart policy and back-off apply once they are seen dead.
pub fn compute_pod_actions_with_probes(
    pod: &Pod,
    observed: &[ObservedContainer],
    now: Timestamp,
    backoff: &BackoffConfig,
    failed_probes: &HashMap<ContainerId, ProbeKind>,
) -> PodActions {
    let view = PodView::new(observed);
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = RestartPolicy::of(pod);
    let mut planner = Planner {
        view: &view,
        now,
        backoff,
        actions: PodActions::default(),
    };
    planner.remove_stale();

    let want_host_network = host_network(pod);
    let sandbox = view.sandbox().filter(|s| {
        s.state == RuntimeState::Running && s.host_network == want_host_network && (want_host_network || s.ip.is_some())
    });
    let Some(sandbox) = sandbox else {
        planner.recreate_sandbox(&spec.init_containers.unwrap_or_default(), &spec.containers, policy);
        return planner.actions;
    };

    for init in spec.init_containers.iter().flatten() {
        let latest = view
            .latest(&init.name)
            .filter(|c| c.sandbox_id.as_ref() == Some(&sandbox.id));
        match latest {
            Some(c) if c.state == RuntimeState::Running => return planner.actions,
            Some(c) if has_exited(c) && c.exit_code == 0 => continue,
            Some(c) if has_exited(c) && policy == RestartPolicy::Never => {
                // Init failed and the pod will not restart: the pod is Failed; stop the sandbox.
                let _ = c;
                planner.actions.kill_pod = true;
                return planner.actions;
            }
            _ => {
                planner.schedule_start(init, ContainerRole::Init, latest);
                return planner.actions;
            }
        }
    }

    let mut keep = 0;
    for container in &spec.containers {
        let latest = view.latest(&container.name);
        match latest {
            Some(c) if c.state == RuntimeState::Running => {
                if c.sandbox_id.as_ref() != Some(&sandbox.id) {
                    planner.kill(
                        c,
                        format!("Container {} is in an old sandbox, will be restarted", container.name),
                    );
                    planner.schedule_start(container, ContainerRole::App, latest);
                } else if c.spec_hash != container_hash(container) {
                    planner.kill(
                        c,
                        format!("Container {} definition changed, will be restarted", container.name),
                    );
                    planner.schedule_start(container, ContainerRole::App, latest);
                } else if let Some(kind) = failed_probes.get(&c.id) {
                    let (which, probe) = match kind {
                        ProbeKind::Startup => ("startup", container.startup_probe.as_ref()),
                        _ => ("liveness", container.liveness_probe.as_ref()),
                    };
                    let grace = probe
                        .and_then(|p| p.termination_grace_period_seconds)
                        .map(|s| Duration::from_secs(s.max(0) as u64));
                    let reason = format!("Container {} failed {which} probe, will be restarted", container.name);
                    planner.actions.kill.push(KillAction {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        reason,
                        grace,
                    });
                    // A probe kill counts as a failure: it runs again unless the policy is Never.
                    if policy.restarts(1) {
                        keep += 1;
                    }
                } else {
                    keep += 1;
                }
            }
            Some(c) if has_exited(c) => {
                if policy.restarts(c.exit_code) {
                    planner.schedule_start(container, ContainerRole::App, latest);
                }
            }
            _ => planner.schedule_start(container, ContainerRole::App, latest),
        }
    }
    if keep == 0 && planner.actions.start.is_empty() && planner.actions.backing_off.is_empty() {
        // Rule 5: nothing runs and nothing will: stop the sandbox.
        planner.actions.kill_pod = true;
    }
    planner.actions
}

struct Planner<'v, 'a> {
    view: &'v PodView<'a>,
    now: Timestamp,
    backoff: &'v BackoffConfig,
    actions: PodActions,
}

impl Planner<'_, '_> {
    fn remove_stale(&mut self) {
        for instances in self.view.containers.values() {
            let stale = instances
                .iter()
                .skip(KEEP_INSTANCES)
                .filter(|c| c.state != RuntimeState::Running);
            self.actions.remove.extend(stale.map(|c| c.id.clone()));
        }
        let stale_sandboxes = self
            .view
            .sandboxes
            .iter()
            .skip(1)
            .filter(|c| c.state != RuntimeState::Running);
        self.actions.remove.extend(stale_sandboxes.map(|c| c.id.clone()));
    }

    fn kill(&mut self, c: &ObservedContainer, reason: String) {
        self.actions.kill.push(KillAction {
            id: c.id.clone(),
            name: c.name.clone(),
            reason,
            grace: None,
        });
    }

    /// Rule 1: no usable sandbox. Kill what runs, then start over in a new sandbox unless the
    /// policy says the pod is done.
    fn recreate_sandbox(&mut self, init: &[Container], containers: &[Container], policy: RestartPolicy) {
        let view = self.view;
        let anything_running = view
            .sandboxes
            .iter()
            .chain(view.containers.values().flatten())
            .any(|c| c.state == RuntimeState::Running);
        self.actions.kill_pod = anything_running;
        let attempt = view.sandbox().map_or(0, |s| s.attempt + 1);
        let any_ran = view.containers.values().flatten().any(|c| c.started_at.is_some());
        if policy == RestartPolicy::Never && attempt != 0 && any_ran {
            return;
        }
        if let Some(first) = init.first() {
            self.schedule_start(first, ContainerRole::Init, view.latest(&first.name));
        } else {
            for c in containers {
                let latest = view.latest(&c.name);
                let done = latest.is_some_and(|l| has_exited(l) && !policy.restarts(l.exit_code));
                if !done {
                    self.schedule_start(c, ContainerRole::App, latest);
                }
            }
        }
        if !self.actions.start.is_empty() || !self.actions.backing_off.is_empty() {
            self.actions.create_sandbox = Some(attempt);
        }
    }

    /// Start a new instance of `container` now, or note the back-off it still owes.
    fn schedule_start(&mut self, container: &Container, role: ContainerRole, latest: Option<&ObservedContainer>) {
        let attempt = latest.map_or(0, |l| l.attempt + 1);
        let step = match latest {
            None => 0,
            Some(l) if !has_exited(l) => {
                if l.state == RuntimeState::Running {
                    0
                } else {
                    // Created but never started (or unknown): replace it.
                    self.actions.remove.push(l.id.clone());
                    l.backoff_step
                }
            }
            Some(l) => match restart_decision(self.backoff, l, &container_hash(container), self.now) {
                RestartDecision::StartNow { step } => step,
                RestartDecision::Wait { until, delay } => {
                    self.actions.backing_off.push(BackingOff {
                        name: container.name.clone(),
                        until,
                        delay,
                    });
                    return;
                }
            },
        };
        self.actions.start.push(StartAction {
            name: container.name.clone(),
            role,
            attempt,
            backoff_step: step,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_messages::PodUid;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn container(name: &str) -> Container {
        Container {
            name: name.into(),
            image: Some("img:1".into()),
            ..Default::default()
        }
    }

    fn pod(policy: &str, init: &[&str], apps: &[&str]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                restart_policy: Some(policy.into()),
                init_containers: (!init.is_empty()).then(|| init.iter().map(|n| container(n)).collect()),
                containers: apps.iter().map(|n| container(n)).collect(),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn sandbox(attempt: u32, state: RuntimeState) -> ObservedContainer {
        ObservedContainer {
            id: ContainerId(format!("sb{attempt}")),
            pod_uid: PodUid("u".into()),
            pod_name: String::new(),
            pod_namespace: String::new(),
            name: "POD".into(),
            role: ContainerRole::Sandbox,
            attempt,
            spec_hash: String::new(),
            backoff_step: 0,
            sandbox_id: None,
            state,
            exit_code: 0,
            oom_killed: false,
            error: String::new(),
            created_at: Some(Time(at(10))),
            started_at: Some(Time(at(10))),
            finished_at: None,
            image: "pause".into(),
            image_id: String::new(),
            ip: Some("172.17.0.2".into()),
            host_network: false,
            pod_grace_seconds: None,
            pid: None,
            cgroup_parent: String::new(),
        }
    }

    fn instance(
        name: &str,
        role: ContainerRole,
        attempt: u32,
        state: RuntimeState,
        exit_code: i64,
    ) -> ObservedContainer {
        ObservedContainer {
            id: ContainerId(format!("{name}{attempt}")),
            name: name.into(),
            role,
            attempt,
            spec_hash: container_hash(&container(name)),
            backoff_step: attempt,
            sandbox_id: Some(ContainerId("sb0".into())),
            state,
            exit_code,
            finished_at: (state == RuntimeState::Exited).then(|| Time(at(20))),
            ip: None,
            ..sandbox(0, state)
        }
    }

    fn names(actions: &PodActions) -> Vec<&str> {
        actions.start.iter().map(|s| s.name.as_str()).collect()
    }

    /// A new pod gets a sandbox (attempt 0) and all its app containers in one sync.
    #[test]
    fn new_pod_creates_sandbox_and_starts_all_containers() {
        let a = compute_pod_actions(&pod("Always", &[], &["a", "b"]), &[], at(0), &BackoffConfig::default());
        assert_eq!(a.create_sandbox, Some(0));
        assert_eq!(names(&a), vec!["a", "b"]);
        assert!(!a.kill_pod);
    }

    /// With init containers only the first init container starts with the new sandbox.
    #[test]
    fn new_pod_with_init_containers_starts_only_the_first_init() {
        let a = compute_pod_actions(
            &pod("Always", &["i1", "i2"], &["a"]),
            &[],
            at(0),
            &BackoffConfig::default(),
        );
        assert_eq!(names(&a), vec!["i1"]);
        assert_eq!(a.start[0].role, ContainerRole::Init);
    }

    /// Init containers run one by one: the second starts after the first exits 0, then apps.
    #[test]
    fn init_containers_run_in_order_then_apps() {
        let p = pod("Always", &["i1", "i2"], &["a"]);
        let sb = sandbox(0, RuntimeState::Running);
        let i1 = instance("i1", ContainerRole::Init, 0, RuntimeState::Exited, 0);
        let running_i1 = instance("i1", ContainerRole::Init, 0, RuntimeState::Running, 0);
        let a = compute_pod_actions(&p, &[sb.clone(), running_i1], at(30), &BackoffConfig::default());
        assert!(a.start.is_empty() && a.is_idle());
        let a = compute_pod_actions(&p, &[sb.clone(), i1.clone()], at(30), &BackoffConfig::default());
        assert_eq!(names(&a), vec!["i2"]);
        let i2 = instance("i2", ContainerRole::Init, 0, RuntimeState::Exited, 0);
        let a = compute_pod_actions(&p, &[sb, i1, i2], at(30), &BackoffConfig::default());
        assert_eq!(names(&a), vec!["a"]);
    }

    /// A failed init container fails a Never pod (sandbox stopped) and is retried otherwise.
    #[test]
    fn failed_init_container_follows_restart_policy() {
        let sb = sandbox(0, RuntimeState::Running);
        let failed = instance("i1", ContainerRole::Init, 0, RuntimeState::Exited, 1);
        let a = compute_pod_actions(
            &pod("Never", &["i1"], &["a"]),
            &[sb.clone(), failed.clone()],
            at(30),
            &BackoffConfig::default(),
        );
        assert!(a.kill_pod && a.start.is_empty());
        let a = compute_pod_actions(
            &pod("Always", &["i1"], &["a"]),
            &[sb, failed],
            at(30),
            &BackoffConfig::default(),
        );
        assert_eq!(names(&a), vec!["i1"]);
        assert_eq!(a.start[0].attempt, 1);
    }

    /// The restart policy matrix for an exited app container.
    #[test]
    fn exited_containers_restart_per_policy() {
        let sb = sandbox(0, RuntimeState::Running);
        for (policy, code, restarts) in [
            ("Always", 0, true),
            ("Always", 1, true),
            ("OnFailure", 0, false),
            ("OnFailure", 1, true),
            ("Never", 0, false),
            ("Never", 1, false),
        ] {
            let dead = instance("a", ContainerRole::App, 0, RuntimeState::Exited, code);
            let a = compute_pod_actions(
                &pod(policy, &[], &["a"]),
                &[sb.clone(), dead],
                at(30),
                &BackoffConfig::default(),
            );
            assert_eq!(!a.start.is_empty(), restarts, "{policy} exit {code}");
            // A finished pod's sandbox is stopped (rule 5).
            assert_eq!(a.kill_pod, !restarts, "{policy} exit {code}");
        }
    }

    /// A crashing container waits out its back-off before the next attempt.
    #[test]
    fn crash_looping_container_backs_off() {
        let sb = sandbox(0, RuntimeState::Running);
        let dead = instance("a", ContainerRole::App, 3, RuntimeState::Exited, 1);
        let a = compute_pod_actions(
            &pod("Always", &[], &["a"]),
            &[sb.clone(), dead.clone()],
            at(25),
            &BackoffConfig::default(),
        );
        assert!(a.start.is_empty());
        assert_eq!(a.backing_off[0].delay, Duration::from_secs(40));
        assert!(!a.kill_pod, "a backing-off pod keeps its sandbox");
        let a = compute_pod_actions(
            &pod("Always", &[], &["a"]),
            &[sb, dead],
            at(60),
            &BackoffConfig::default(),
        );
        assert_eq!(
            a.start,
            vec![StartAction {
                name: "a".into(),
                role: ContainerRole::App,
                attempt: 4,
                backoff_step: 4
            }]
        );
    }

    /// A running container whose spec changed is killed and restarted at once.
    #[test]
    fn changed_container_is_killed_and_restarted() {
        let sb = sandbox(0, RuntimeState::Running);
        let mut running = instance("a", ContainerRole::App, 0, RuntimeState::Running, 0);
        running.spec_hash = "old".into();
        let a = compute_pod_actions(
            &pod("Always", &[], &["a"]),
            &[sb, running],
            at(30),
            &BackoffConfig::default(),
        );
        assert_eq!(a.kill.len(), 1);
        assert!(a.kill[0].reason.contains("definition changed"));
        assert_eq!(a.start[0].attempt, 1);
    }

    /// A failed liveness probe kills the container (restart follows when it is seen dead) and
    /// keeps the sandbox; with restartPolicy Never the pod is done.
    #[test]
    fn failed_liveness_kills_the_container() {
        let sb = sandbox(0, RuntimeState::Running);
        let running = instance("a", ContainerRole::App, 0, RuntimeState::Running, 0);
        let failed = HashMap::from([(running.id.clone(), ProbeKind::Liveness)]);
        let cfg = BackoffConfig::default();
        let observed = [sb.clone(), running.clone()];
        let a = compute_pod_actions_with_probes(&pod("Always", &[], &["a"]), &observed, at(30), &cfg, &failed);
        assert_eq!(a.kill.len(), 1);
        assert_eq!(a.kill[0].reason, "Container a failed liveness probe, will be restarted");
        assert!(a.start.is_empty() && !a.kill_pod);
        let a = compute_pod_actions_with_probes(&pod("Never", &[], &["a"]), &observed, at(30), &cfg, &failed);
        assert!(a.kill_pod, "nothing will run again: the sandbox goes too");
    }

    /// A running pod that matches its spec needs nothing.
    #[test]
    fn matching_pod_is_left_alone() {
        let sb = sandbox(0, RuntimeState::Running);
        let running = instance("a", ContainerRole::App, 0, RuntimeState::Running, 0);
        let a = compute_pod_actions(
            &pod("Always", &[], &["a"]),
            &[sb, running],
            at(30),
            &BackoffConfig::default(),
        );
        assert!(a.is_idle(), "{a:?}");
        assert_eq!(a.summary(), "none");
    }

    /// A dead sandbox kills the pod and re-creates it with the next attempt; not for a Never pod
    /// whose containers already ran.
    #[test]
    fn dead_sandbox_recreates_the_pod() {
        let sb = sandbox(0, RuntimeState::Exited);
        let running = instance("a", ContainerRole::App, 0, RuntimeState::Running, 0);
        let a = compute_pod_actions(
            &pod("Always", &[], &["a"]),
            &[sb.clone(), running.clone()],
            at(30),
            &BackoffConfig::default(),
        );
        assert!(a.kill_pod);
        assert_eq!(a.create_sandbox, Some(1));
        assert_eq!(a.start[0].attempt, 1);
        let a = compute_pod_actions(
            &pod("Never", &[], &["a"]),
            &[sb, running],
            at(30),
            &BackoffConfig::default(),
        );
        assert!(a.kill_pod);
        assert_eq!(a.create_sandbox, None);
    }

    /// Only the two newest instances of a container are kept.
    #[test]
    fn old_dead_instances_are_removed() {
        let sb = sandbox(0, RuntimeState::Running);
        let old: Vec<_> = (0..4)
            .map(|i| instance("a", ContainerRole::App, i, RuntimeState::Exited, 1))
            .collect();
        let mut observed = vec![sb];
        observed.extend(old);
        let a = compute_pod_actions(
            &pod("Always", &[], &["a"]),
            &observed,
            at(1000),
            &BackoffConfig::default(),
        );
        let mut removed: Vec<_> = a.remove.iter().map(|c| c.0.as_str()).collect();
        removed.sort();
        assert_eq!(removed, vec!["a0", "a1"]);
    }
}
