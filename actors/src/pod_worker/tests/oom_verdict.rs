//! A container SIGKILLed (exit code 137) is reported once Docker's OOM verdict is in: the
//! status waits for the PLEG's `oom`, or for [`OOM_VERDICT_WAIT`] when none comes.

use super::*;

/// A `restartPolicy: Never` pod whose app container was just SIGKILLed, as the PLEG's `die`
/// puts it (Docker not having said OOM yet); the worker synced it.
async fn killed_pod(runtime: &FakeRuntime) -> (SyncContext, Addr<Sink>, Addr<PodWorker>, ObservedContainer) {
    let sink = Sink::default().start();
    let sync = relisted(runtime);
    let mut pod = (*named("oom", "u-oom")).clone();
    if let Some(spec) = pod.spec.as_mut() {
        spec.restart_policy = Some("Never".into());
    }
    let worker = PodWorker::new(Arc::new(pod), sync.clone(), links(&sink)).start();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let app = app_container(runtime);
    runtime.exit(&app, 137);
    let exited = runtime.state.lock().unwrap().containers[&app].observed.clone();
    sync.cache.put(exited.clone(), Instant::now());
    worker.do_send(SyncPod);
    tokio::time::sleep(Duration::from_millis(100)).await;
    (sync, sink, worker, exited)
}

/// The reason of the app container's termination in the last status, if it terminated.
async fn last_reason(sink: &Addr<Sink>) -> Option<String> {
    let statuses = sink.send(Statuses).await.unwrap();
    let status = statuses.last()?.status.clone()?;
    let app = status.container_statuses?.into_iter().find(|c| c.name == "app")?;
    app.state?.terminated?.reason
}

#[actix::test]
async fn a_late_oom_verdict_is_the_first_reason_reported() {
    tokio::time::pause();
    let runtime = FakeRuntime::with_images(&["img:1"]);
    let (sync, sink, worker, exited) = killed_pod(&runtime).await;
    assert_eq!(last_reason(&sink).await, None, "no status before the verdict");
    // The PLEG's `oom` after the `die`.
    sync.cache.put(
        ObservedContainer {
            oom_killed: true,
            ..exited
        },
        Instant::now(),
    );
    worker.do_send(SyncPod);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(last_reason(&sink).await.as_deref(), Some("OOMKilled"));
    let statuses = sink.send(Statuses).await.unwrap();
    let errors = statuses
        .iter()
        .filter_map(|p| p.status.as_ref()?.container_statuses.as_ref())
        .flatten()
        .filter(|c| {
            c.state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .is_some_and(|t| t.reason.as_deref() == Some("Error"))
        })
        .count();
    assert_eq!(errors, 0, "never reported as Error first");
}

#[actix::test]
async fn without_a_verdict_the_kill_is_reported_after_the_wait() {
    tokio::time::pause();
    let runtime = FakeRuntime::with_images(&["img:1"]);
    let (_sync, sink, _worker, _) = killed_pod(&runtime).await;
    assert_eq!(last_reason(&sink).await, None, "held for the verdict");
    tokio::time::sleep(OOM_VERDICT_WAIT).await;
    assert_eq!(last_reason(&sink).await.as_deref(), Some("Error"));
    let statuses = sink.send(Statuses).await.unwrap();
    let phase = statuses.last().and_then(|p| p.status.as_ref()?.phase.clone());
    assert_eq!(phase.as_deref(), Some("Failed"));
}

#[test]
fn only_recent_sigkills_wait() {
    let now = Timestamp::now();
    let died = |code: i64, ago: u64, oom: bool, role: ContainerRole| {
        let mut c = dockerlet_pod::labels::parse(
            &[
                (dockerlet_pod::labels::POD_UID, "p"),
                (dockerlet_pod::labels::CONTAINER_NAME, "app"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        )
        .expect("labels")
        .observed(
            ContainerId(format!("c{code}{ago}{oom}")),
            RuntimeState::Exited,
            String::new(),
        );
        c.exit_code = code;
        c.oom_killed = oom;
        c.role = role;
        c.finished_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            now.checked_sub(Duration::from_millis(ago)).unwrap(),
        ));
        c
    };
    let none = std::collections::HashSet::new();
    let wait = |c: ObservedContainer| oom_verdict_pending(&[c], &none, now);
    assert_eq!(
        wait(died(137, 500, false, ContainerRole::App)),
        Some(OOM_VERDICT_WAIT - Duration::from_millis(500))
    );
    assert_eq!(wait(died(137, 500, true, ContainerRole::App)), None, "OOM known");
    assert_eq!(wait(died(1, 500, false, ContainerRole::App)), None, "not a SIGKILL");
    assert_eq!(
        wait(died(137, 5000, false, ContainerRole::App)),
        None,
        "waited long enough"
    );
    assert_eq!(wait(died(137, 500, false, ContainerRole::Sandbox)), None, "the sandbox");
    let c = died(137, 500, false, ContainerRole::Init);
    let waited = std::collections::HashSet::from([c.id.clone()]);
    assert_eq!(oom_verdict_pending(&[c], &waited, now), None, "already waited for");
}
