//! The engine comes back under a pod whose app container stopped with it: the status that
//! calls it running is corrected at once (`RuntimeBack`), not when the sync that recreates the
//! pod ends — even when the death was taken from a `die` event whose details never came
//! (Docker went away before the inspect).

use super::*;

/// The app container's state in the last status `sink` got: running or not.
async fn app_running(sink: &Addr<Sink>) -> Option<bool> {
    let statuses = sink.send(Statuses).await.unwrap();
    let status = statuses.last()?.status.clone()?;
    let app = status.container_statuses?.into_iter().find(|c| c.name == "app")?;
    Some(app.state?.running.is_some())
}

#[actix::test]
async fn the_engine_back_corrects_a_status_held_for_details() {
    tokio::time::pause();
    let runtime = FakeRuntime::with_images(&["img:1"]);
    let sink = Sink::default().start();
    let sync = relisted(&runtime);
    let worker = PodWorker::new(named("back", "u-back"), sync.clone(), links(&sink)).start();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(app_running(&sink).await, Some(true), "the pod runs");
    let app = app_container(&runtime);
    // Recreating anything takes long now (an engine busy with 110 pods coming back).
    runtime.state.lock().unwrap().create_delay = Duration::from_secs(60);
    runtime.exit(&app, 0);
    let exited = runtime.state.lock().unwrap().containers[&app].observed.clone();
    // The PLEG's `die`: exited, its details pending (the inspect that follows failed).
    sync.cache.put(
        ObservedContainer {
            details_pending: true,
            ..exited.clone()
        },
        Instant::now(),
    );
    worker.do_send(SyncPod);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        app_running(&sink).await,
        Some(true),
        "held while the details are pending"
    );
    // The relist that found the engine back inspected it; the Supervisor tells every worker.
    sync.cache.put(exited, Instant::now());
    worker.do_send(RuntimeBack);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        app_running(&sink).await,
        Some(false),
        "published before the slow sync ends"
    );
}

#[test]
fn a_status_that_calls_a_stopped_or_missing_container_running_is_stale() {
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateRunning, ContainerStatus, PodStatus};
    let status = PodStatus {
        container_statuses: Some(vec![ContainerStatus {
            name: "app".into(),
            container_id: Some("docker://a1".into()),
            state: Some(ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let app = |state| crate::test_support::observed("u1", "app", "a1", state);
    assert!(!super::super::claims_stopped(
        Some(&status),
        &[app(RuntimeState::Running)]
    ));
    assert!(super::super::claims_stopped(
        Some(&status),
        &[app(RuntimeState::Exited)]
    ));
    assert!(super::super::claims_stopped(Some(&status), &[]), "gone");
    assert!(!super::super::claims_stopped(None, &[]), "nothing published");
}
