//! Why a pod is where it is, in words: a pure function of what its worker, the prober and the
//! recorder report ([`PodDebug`], [`ProbeDebug`], [`DebugEvent`]), so every wording is tested
//! over constructed states.

use dockerlet_messages::debug::{ContainerDebug, ContainerStateDebug, DebugEvent, PodDebug, ProbeDebug};
use dockerlet_messages::probe::{ProbeKind, ProbeResult};
use k8s_openapi::jiff::Timestamp;

/// How the pod is doing, for the page's colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Running as asked, or finished as asked.
    Fine,
    /// On its way (starting, terminating, waiting for a first probe).
    Progressing,
    /// Something keeps it from running: the summary says what.
    Stuck,
}

impl Verdict {
    /// The CSS class the page gives it.
    pub fn class(self) -> &'static str {
        match self {
            Verdict::Fine => "fine",
            Verdict::Progressing => "progressing",
            Verdict::Stuck => "stuck",
        }
    }
}

/// What the page says about one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// Fine, progressing or stuck.
    pub verdict: Verdict,
    /// The one sentence that matters most.
    pub summary: String,
    /// Everything else worth saying, most important first.
    pub details: Vec<String>,
}

/// One thing said about the pod.
struct Finding {
    verdict: Verdict,
    text: String,
}

impl Finding {
    fn stuck(text: String) -> Self {
        Finding {
            verdict: Verdict::Stuck,
            text,
        }
    }
    fn progressing(text: String) -> Self {
        Finding {
            verdict: Verdict::Progressing,
            text,
        }
    }
    fn fine(text: String) -> Self {
        Finding {
            verdict: Verdict::Fine,
            text,
        }
    }
}

/// Explain `pod` at `now`, from its worker's view, its probes and its recent events (newest
/// last). `probes` and `events` may hold other pods' too: only this pod's are read.
pub fn explain(pod: &PodDebug, probes: &[ProbeDebug], events: &[DebugEvent], now: Timestamp) -> Explanation {
    let probes: Vec<&ProbeDebug> = probes.iter().filter(|p| p.pod_uid == pod.pod_uid).collect();
    let mut findings = Vec::new();
    if let Some(rejected) = &pod.rejected {
        findings.push(Finding::stuck(format!("rejected at admission, never runs: {rejected}")));
    }
    if let Some(failed) = &pod.failed {
        findings.push(Finding::stuck(format!(
            "failed by the node, its containers are stopped: {failed}"
        )));
    }
    match pod.phase.as_str() {
        "Terminating" => findings.push(terminating(pod, now)),
        "Terminated" => findings.push(Finding::fine("terminated: its containers are removed".to_string())),
        _ => {}
    }
    for failure in &pod.mount_failures {
        findings.push(Finding::stuck(waiting_for_object(&pod.namespace, failure).map_or_else(
            || failure.clone(),
            |object| format!("waiting for {object}: {failure}"),
        )));
    }
    if let (Some(error), Some(retry)) = (&pod.last_error, &pod.retry_at) {
        if pod.phase != "Terminating" {
            findings.push(Finding::stuck(format!(
                "sync failed, retrying {}: {error}",
                in_seconds(retry, now)
            )));
        }
    }
    if pod.rejected.is_none() && pod.failed.is_none() && !matches!(pod.phase.as_str(), "Terminating" | "Terminated") {
        for c in &pod.containers {
            findings.extend(container(pod, c, &probes, now));
        }
    }
    if !findings.iter().any(|f| f.verdict == Verdict::Stuck) {
        if let Some(event) = warning(pod, events) {
            if pod.pod_phase.as_deref() != Some("Running") && pod.pod_phase.as_deref() != Some("Succeeded") {
                findings.push(Finding::stuck(format!("{}: {}", event.reason, event.message)));
            }
        }
    }
    findings.push(overall(pod));
    // The most telling first: stuck before progressing before fine, otherwise in order.
    findings.sort_by_key(|f| match f.verdict {
        Verdict::Stuck => 0,
        Verdict::Progressing => 1,
        Verdict::Fine => 2,
    });
    let verdict = findings[0].verdict;
    let mut texts = findings.into_iter().map(|f| f.text);
    let summary = texts.next().unwrap_or_default();
    Explanation {
        verdict,
        summary,
        details: texts.collect(),
    }
}

/// The pod as a whole, once nothing more specific is said.
fn overall(pod: &PodDebug) -> Finding {
    let apps: Vec<&ContainerDebug> = pod.containers.iter().filter(|c| !c.init).collect();
    let ready = apps.iter().filter(|c| c.ready).count();
    match pod.pod_phase.as_deref() {
        Some("Running") if ready == apps.len() => {
            Finding::fine(format!("running: {ready}/{} containers ready", apps.len()))
        }
        Some("Running") => Finding::progressing(format!("running: {ready}/{} containers ready", apps.len())),
        Some("Succeeded") => Finding::fine("succeeded: every container exited 0".to_string()),
        Some("Failed") => Finding::fine(format!(
            "failed: its containers ended and restartPolicy {} keeps them down",
            pod.restart_policy
        )),
        Some(phase) => Finding::progressing(format!("{phase}: {}", pod.next_action)),
        None => Finding::progressing("starting: no status yet".to_string()),
    }
}

fn terminating(pod: &PodDebug, now: Timestamp) -> Finding {
    match (&pod.last_error, &pod.retry_at) {
        (Some(error), Some(retry)) => Finding::stuck(format!(
            "terminating: teardown failed, retrying {}: {error}",
            in_seconds(retry, now)
        )),
        _ => Finding::progressing("terminating: stopping and removing its containers".to_string()),
    }
}

/// What one container's state says.
fn container(pod: &PodDebug, c: &ContainerDebug, probes: &[&ProbeDebug], now: Timestamp) -> Vec<Finding> {
    let name = &c.name;
    match &c.state {
        ContainerStateDebug::Waiting { reason, message } => vec![waiting(pod, c, reason, message, now)],
        ContainerStateDebug::Running { .. } => probes
            .iter()
            .filter(|p| &p.container == name)
            .filter_map(|p| probe(name, p))
            .collect(),
        ContainerStateDebug::Terminated(exit) => {
            let finished = matches!(pod.pod_phase.as_deref(), Some("Succeeded" | "Failed"));
            let restarts = match pod.restart_policy.as_str() {
                _ if c.sidecar => !finished,
                "Never" => false,
                "OnFailure" => exit.exit_code != 0,
                _ => !c.init || exit.exit_code != 0,
            };
            let ended = format!(
                "{name} exited with code {}{}",
                exit.exit_code,
                reason_suffix(&exit.reason)
            );
            if c.init && !c.sidecar && exit.exit_code == 0 {
                Vec::new()
            } else if c.sidecar && finished {
                vec![Finding::fine(format!("{ended}; a sidecar, stopped with its pod"))]
            } else if restarts {
                vec![Finding::progressing(format!("{ended}; restarting it"))]
            } else if exit.exit_code == 0 {
                vec![Finding::fine(format!(
                    "{ended}; not restarted (restartPolicy {})",
                    pod.restart_policy
                ))]
            } else {
                vec![Finding::stuck(format!(
                    "{ended}; not restarted (restartPolicy {})",
                    pod.restart_policy
                ))]
            }
        }
        ContainerStateDebug::Unknown => Vec::new(),
    }
}

fn waiting(pod: &PodDebug, c: &ContainerDebug, reason: &str, message: &str, now: Timestamp) -> Finding {
    let name = &c.name;
    match reason {
        "CrashLoopBackOff" => {
            let when = c
                .restart_at
                .as_deref()
                .map_or_else(|| "soon".to_string(), |t| in_seconds(t, now));
            let last = c.last_exit.as_ref().map_or_else(String::new, |e| {
                format!(", last exit {}{}", e.exit_code, reason_suffix(&e.reason))
            });
            Finding::stuck(format!(
                "restarting {name} {when}: CrashLoopBackOff after {} restart{}{last}",
                c.restart_count,
                if c.restart_count == 1 { "" } else { "s" }
            ))
        }
        "ErrImagePull" | "ImagePullBackOff" => {
            Finding::stuck(format!("image pull back-off for {name}: {reason}: {message}"))
        }
        "ContainerCreating" | "PodInitializing" | "" => Finding::progressing(if pod.mount_failures.is_empty() {
            format!("starting {name}")
        } else {
            format!("{name} waits for its volumes")
        }),
        _ => {
            let text = format!("{reason}: {message}");
            Finding::stuck(match waiting_for_object(&pod.namespace, message) {
                Some(object) => format!("waiting for {object}: {name}: {text}"),
                None => format!("cannot start {name}: {text}"),
            })
        }
    }
}

/// What a running container's probe says, if it holds anything up.
fn probe(container: &str, p: &ProbeDebug) -> Option<Finding> {
    let kind = match p.probe {
        ProbeKind::Liveness => "liveness",
        ProbeKind::Readiness => "readiness",
        ProbeKind::Startup => "startup",
    };
    let output = if p.last_output.is_empty() {
        String::new()
    } else {
        format!(": {}", p.last_output.trim())
    };
    let times = |n: u32| format!("{n} time{}", if n == 1 { "" } else { "s" });
    match (p.probe, p.result) {
        (ProbeKind::Readiness, ProbeResult::Failure) => Some(Finding::stuck(format!(
            "{container} is running but not ready: readiness probe ({}) failed {} in a row{output}",
            p.handler,
            times(p.failures)
        ))),
        (_, ProbeResult::Failure) => Some(Finding::stuck(format!(
            "restarting {container}: {kind} probe ({}) failed {} in a row{output}",
            p.handler,
            times(p.failures)
        ))),
        (ProbeKind::Startup, ProbeResult::Unknown) if p.failures > 0 => Some(Finding::progressing(format!(
            "{container} has not started yet: startup probe ({}) failed {}{output}",
            p.handler,
            times(p.failures)
        ))),
        (ProbeKind::Readiness | ProbeKind::Startup, ProbeResult::Unknown) => Some(Finding::progressing(format!(
            "{container} waits for its first {kind} probe result"
        ))),
        _ => None,
    }
}

/// The newest event about this pod that reports trouble.
fn warning<'a>(pod: &PodDebug, events: &'a [DebugEvent]) -> Option<&'a DebugEvent> {
    let object = format!("{}/{}", pod.namespace, pod.name);
    events.iter().rev().filter(|e| e.object == object).find(|e| {
        e.reason.starts_with("Failed")
            || matches!(
                e.reason.as_str(),
                "BackOff" | "Unhealthy" | "DNSConfigForming" | "MissingClusterDNS"
            )
    })
}

/// The ConfigMap or Secret an error says is missing (`configmap "x" not found`, as kubelet and
/// the API word it), as `ConfigMap ns/x`.
fn waiting_for_object(namespace: &str, message: &str) -> Option<String> {
    const KINDS: [(&str, &str); 4] = [
        ("configmaps \"", "ConfigMap"),
        ("configmap \"", "ConfigMap"),
        ("secrets \"", "Secret"),
        ("secret \"", "Secret"),
    ];
    let lower = message.to_ascii_lowercase();
    KINDS.iter().find_map(|(prefix, kind)| {
        let start = lower.find(prefix)? + prefix.len();
        let len = message[start..].find('"')?;
        message[start + len..]
            .starts_with("\" not found")
            .then(|| format!("{kind} {namespace}/{}", &message[start..start + len]))
    })
}

fn reason_suffix(reason: &str) -> String {
    match reason {
        "" | "Error" | "Completed" => String::new(),
        other => format!(" ({other})"),
    }
}

/// `in 42 s` until the RFC 3339 time `at`, or `now` when it has passed.
fn in_seconds(at: &str, now: Timestamp) -> String {
    match at.parse::<Timestamp>() {
        Ok(at) => {
            let millis = at.as_millisecond() - now.as_millisecond();
            if millis <= 0 {
                "now".to_string()
            } else {
                format!("in {} s", (millis + 999) / 1000)
            }
        }
        Err(_) => format!("at {at}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_messages::debug::ExitDebug;
    use dockerlet_messages::{ContainerId, PodUid};

    const NOW: &str = "2026-01-01T00:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    fn pod(containers: Vec<ContainerDebug>) -> PodDebug {
        PodDebug {
            pod_uid: PodUid("u1".into()),
            namespace: "app".into(),
            name: "web".into(),
            phase: "Idle".into(),
            pod_phase: Some("Pending".into()),
            restart_policy: "Always".into(),
            next_action: "none".into(),
            containers,
            ..PodDebug::default()
        }
    }

    fn waiting(name: &str, reason: &str, message: &str) -> ContainerDebug {
        ContainerDebug {
            name: name.into(),
            state: ContainerStateDebug::Waiting {
                reason: reason.into(),
                message: message.into(),
            },
            ..ContainerDebug::default()
        }
    }

    fn running(name: &str, ready: bool) -> ContainerDebug {
        ContainerDebug {
            name: name.into(),
            ready,
            state: ContainerStateDebug::Running { started_at: None },
            ..ContainerDebug::default()
        }
    }

    fn probe(kind: ProbeKind, result: ProbeResult, failures: u32, output: &str) -> ProbeDebug {
        ProbeDebug {
            pod_uid: PodUid("u1".into()),
            pod: "app/web".into(),
            container: "c".into(),
            probe: kind,
            handler: "httpGet".into(),
            container_id: ContainerId("id".into()),
            result,
            last_outcome: Some("failure".into()),
            last_output: output.into(),
            last_run: None,
            successes: 0,
            failures,
            runs: 3,
            on_hold: false,
        }
    }

    fn event(object: &str, reason: &str, message: &str) -> DebugEvent {
        DebugEvent {
            time: NOW.parse().unwrap(),
            type_: dockerlet_messages::debug::EventType::Normal,
            reason: reason.into(),
            object: object.into(),
            container: None,
            message: message.into(),
        }
    }

    /// A crash-looping container says when it restarts, how often it did, and how it last ended.
    #[test]
    fn crash_loop_names_the_delay_the_restarts_and_the_last_exit() {
        let mut c = waiting("c", "CrashLoopBackOff", "back-off 40s restarting failed container=c");
        c.restart_count = 5;
        c.restart_at = Some("2026-01-01T00:00:41.2Z".into());
        c.last_exit = Some(ExitDebug {
            exit_code: 1,
            reason: "Error".into(),
            finished_at: None,
        });
        let e = explain(&pod(vec![c]), &[], &[], now());
        assert_eq!(e.verdict, Verdict::Stuck);
        assert_eq!(
            e.summary,
            "restarting c in 42 s: CrashLoopBackOff after 5 restarts, last exit 1"
        );
    }

    /// An OOM kill shows as the last exit's reason; a passed back-off says "now".
    #[test]
    fn crash_loop_shows_oom_kills_and_a_passed_back_off() {
        let mut c = waiting("c", "CrashLoopBackOff", "");
        c.restart_count = 1;
        c.restart_at = Some("2025-12-31T23:59:00Z".into());
        c.last_exit = Some(ExitDebug {
            exit_code: 137,
            reason: "OOMKilled".into(),
            finished_at: None,
        });
        let e = explain(&pod(vec![c]), &[], &[], now());
        assert_eq!(
            e.summary,
            "restarting c now: CrashLoopBackOff after 1 restart, last exit 137 (OOMKilled)"
        );
    }

    /// A missing ConfigMap is named with its namespace, whether env or a volume needs it.
    #[test]
    fn a_missing_config_map_is_what_the_pod_waits_for() {
        let c = waiting("c", "CreateContainerConfigError", "configmap \"settings\" not found");
        let e = explain(&pod(vec![c]), &[], &[], now());
        assert_eq!(
            e.summary,
            "waiting for ConfigMap app/settings: c: CreateContainerConfigError: configmap \"settings\" not found"
        );
        let mut p = pod(vec![waiting("c", "ContainerCreating", "")]);
        p.mount_failures = vec!["MountVolume.SetUp failed for volume \"cfg\" : secret \"tls\" not found".into()];
        let e = explain(&p, &[], &[], now());
        assert_eq!(
            e.summary,
            "waiting for Secret app/tls: MountVolume.SetUp failed for volume \"cfg\" : secret \"tls\" not found"
        );
        assert!(e.details.contains(&"c waits for its volumes".to_string()), "{e:?}");
    }

    /// Image problems say which container and quote the runtime's message.
    #[test]
    fn image_problems_are_explained() {
        let never = waiting(
            "c",
            "ErrImageNeverPull",
            "Container image \"dockerlet.local/nope:1\" is not present with pull policy of Never",
        );
        let e = explain(&pod(vec![never]), &[], &[], now());
        assert_eq!(
            e.summary,
            "cannot start c: ErrImageNeverPull: Container image \"dockerlet.local/nope:1\" is not present with pull policy of Never"
        );
        let pull = waiting("c", "ErrImagePull", "failed to pull image \"x\": not found");
        let e = explain(&pod(vec![pull]), &[], &[], now());
        assert_eq!(
            e.summary,
            "image pull back-off for c: ErrImagePull: failed to pull image \"x\": not found"
        );
    }

    /// A healthy pod is fine and says how many containers are ready.
    #[test]
    fn a_running_ready_pod_is_fine() {
        let mut p = pod(vec![running("a", true), running("b", true)]);
        p.pod_phase = Some("Running".into());
        let e = explain(&p, &[], &[], now());
        assert_eq!(e.verdict, Verdict::Fine);
        assert_eq!(e.summary, "running: 2/2 containers ready");
        assert!(e.details.is_empty());
    }

    /// Failing probes say which probe, how often, and what it answered; another pod's are ignored.
    #[test]
    fn failing_probes_are_explained() {
        let mut p = pod(vec![running("c", false)]);
        p.pod_phase = Some("Running".into());
        let mut other = probe(ProbeKind::Liveness, ProbeResult::Failure, 9, "");
        other.pod_uid = PodUid("u2".into());
        let probes = [
            probe(
                ProbeKind::Readiness,
                ProbeResult::Failure,
                3,
                "HTTP probe failed with statuscode: 500\n",
            ),
            other,
        ];
        let e = explain(&p, &probes, &[], now());
        assert_eq!(
            e.summary,
            "c is running but not ready: readiness probe (httpGet) failed 3 times in a row: HTTP probe failed with statuscode: 500"
        );
        assert_eq!(e.details, vec!["running: 0/1 containers ready".to_string()]);
        let probes = [probe(ProbeKind::Liveness, ProbeResult::Failure, 1, "")];
        let e = explain(&p, &probes, &[], now());
        assert_eq!(
            e.summary,
            "restarting c: liveness probe (httpGet) failed 1 time in a row"
        );
        let probes = [probe(ProbeKind::Readiness, ProbeResult::Unknown, 0, "")];
        let e = explain(&p, &probes, &[], now());
        assert_eq!(e.verdict, Verdict::Progressing);
        assert_eq!(e.summary, "c waits for its first readiness probe result");
    }

    /// A failed sync says when it is retried and why; termination and rejection win over containers.
    #[test]
    fn sync_errors_termination_and_rejection() {
        let mut p = pod(vec![waiting("c", "ContainerCreating", "")]);
        p.last_error = Some("create sandbox: docker: no such network".into());
        p.retry_at = Some("2026-01-01T00:00:02Z".into());
        let e = explain(&p, &[], &[], now());
        assert_eq!(
            e.summary,
            "sync failed, retrying in 2 s: create sandbox: docker: no such network"
        );
        p.phase = "Terminating".into();
        p.retry_at = None;
        let e = explain(&p, &[], &[], now());
        assert_eq!(e.verdict, Verdict::Progressing);
        assert_eq!(e.summary, "terminating: stopping and removing its containers");
        let mut p = pod(vec![waiting("c", "ContainerCreating", "")]);
        p.rejected = Some("SysctlForbidden: forbidden sysctl: \"kernel.msgmax\" not allowlisted".into());
        let e = explain(&p, &[], &[], now());
        assert_eq!(
            e.summary,
            "rejected at admission, never runs: SysctlForbidden: forbidden sysctl: \"kernel.msgmax\" not allowlisted"
        );
    }

    /// Finished containers: a completed pod is fine, a failed one under Never is stuck.
    #[test]
    fn finished_containers_follow_the_restart_policy() {
        let exited = |code| ContainerDebug {
            name: "c".into(),
            state: ContainerStateDebug::Terminated(ExitDebug {
                exit_code: code,
                reason: if code == 0 { "Completed" } else { "Error" }.into(),
                finished_at: None,
            }),
            ..ContainerDebug::default()
        };
        let mut p = pod(vec![exited(0)]);
        p.restart_policy = "Never".into();
        p.pod_phase = Some("Succeeded".into());
        let e = explain(&p, &[], &[], now());
        assert_eq!(e.verdict, Verdict::Fine);
        assert_eq!(e.summary, "c exited with code 0; not restarted (restartPolicy Never)");
        let mut p = pod(vec![exited(3)]);
        p.restart_policy = "Never".into();
        p.pod_phase = Some("Failed".into());
        let e = explain(&p, &[], &[], now());
        assert_eq!(e.verdict, Verdict::Stuck);
        assert_eq!(e.summary, "c exited with code 3; not restarted (restartPolicy Never)");
    }

    /// Without anything more specific, a pending pod shows its newest warning event.
    #[test]
    fn a_pending_pod_shows_its_newest_warning_event() {
        let p = pod(vec![waiting("c", "ContainerCreating", "")]);
        let events = [
            event("app/web", "FailedCreatePodSandBox", "hostname too long"),
            event("app/other", "FailedMount", "not this pod"),
            event("app/web", "Pulled", "fine"),
        ];
        let e = explain(&p, &[], &events, now());
        assert_eq!(e.summary, "FailedCreatePodSandBox: hostname too long");
    }
}
