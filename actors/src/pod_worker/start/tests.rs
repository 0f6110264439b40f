//! The start pipeline against the recording fake runtime: each step's failure is kubelet's
//! waiting reason (`pkg/kubelet/kuberuntime/kuberuntime_container.go` startContainer,
//! `pkg/kubelet/images/image_manager.go` EnsureImageExists), and a failure stops the pipeline
//! before Docker is asked to create anything.

use super::*;
use crate::pod_worker::tests::relisted;
use dockerlet_runtime::fake::{Call, FakeRuntime};
use k8s_openapi::api::core::v1::{
    EnvVar, EnvVarSource, ExecAction, Lifecycle, LifecycleHandler, PodSpec, SecretKeySelector,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A pod `uid` with one app container `app` of `image`, changed by `edit`.
fn pod(uid: &str, image: &str, edit: impl FnOnce(&mut Container)) -> Arc<Pod> {
    let mut app = Container {
        name: "app".into(),
        image: Some(image.into()),
        ..Default::default()
    };
    edit(&mut app);
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some(uid.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![app],
            ..Default::default()
        }),
        status: None,
    })
}

fn app_start() -> StartAction {
    StartAction {
        name: "app".into(),
        role: ContainerRole::App,
        attempt: 0,
        backoff_step: 0,
    }
}

/// Make the pod's sandbox, then run the start of its app container as a sync does; returns
/// the outcome and the calls the start made (the sandbox's left out).
async fn start_app(runtime: &FakeRuntime, pod: &Arc<Pod>) -> (SyncOutcome, Vec<Call>) {
    let sync = relisted(runtime);
    start_app_with(&sync, runtime, pod).await
}

async fn start_app_with(sync: &SyncContext, runtime: &FakeRuntime, pod: &Arc<Pod>) -> (SyncOutcome, Vec<Call>) {
    let mut outcome = SyncOutcome::default();
    let sandbox = PodSandbox { sync, pod }
        .create(0, &mut outcome)
        .await
        .expect("the sandbox");
    outcome.events.clear();
    runtime.clear_calls();
    let mut starter = Starter {
        sync,
        pod,
        outcome: &mut outcome,
    };
    starter
        .start(&app_start(), &sandbox, std::slice::from_ref(&sandbox))
        .await;
    (outcome, runtime.calls())
}

fn events(outcome: &SyncOutcome) -> Vec<String> {
    outcome
        .events
        .iter()
        .map(|e| format!("{}: {}", e.reason, e.message))
        .collect()
}

fn waiting(outcome: &SyncOutcome) -> Option<(String, String)> {
    outcome
        .waiting
        .get("app")
        .map(|w| (w.reason.clone(), w.message.clone()))
}

fn created(calls: &[Call]) -> bool {
    calls.iter().any(|c| matches!(c, Call::Create(_)))
}

#[actix::test]
async fn a_present_image_is_created_started_and_not_pulled() {
    let runtime = FakeRuntime::with_images(&["pause", "img:1"]);
    let pod = pod("start-ok", "img:1", |_| {});
    let (outcome, calls) = start_app(&runtime, &pod).await;
    assert_eq!(waiting(&outcome), None);
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert!(
        calls.contains(&Call::Create("k8s_app_web_default_start-ok_0".into())),
        "{calls:?}"
    );
    assert!(calls.iter().any(|c| matches!(c, Call::Start(_))), "{calls:?}");
    assert!(!calls.iter().any(|c| matches!(c, Call::Pull(_))), "{calls:?}");
    assert_eq!(
        events(&outcome),
        [
            r#"Pulled: Container image "img:1" already present on machine"#,
            "Created: Created container app",
            "Started: Started container app",
        ]
    );
}

#[actix::test]
async fn an_absent_image_with_pull_policy_never_is_err_image_never_pull() {
    let runtime = FakeRuntime::with_images(&["pause"]);
    let pod = pod("start-never", "img:1", |c| c.image_pull_policy = Some("Never".into()));
    let (outcome, calls) = start_app(&runtime, &pod).await;
    let message = r#"Container image "img:1" is not present with pull policy of Never"#;
    assert_eq!(waiting(&outcome), Some(("ErrImageNeverPull".into(), message.into())));
    assert_eq!(
        events(&outcome),
        [
            format!("ErrImageNeverPull: {message}"),
            "Failed: Error: ErrImageNeverPull".to_string()
        ]
    );
    assert!(!created(&calls), "{calls:?}");
}

#[actix::test]
async fn a_failed_pull_is_err_image_pull_then_image_pull_back_off_without_a_pull() {
    let runtime = FakeRuntime::with_images(&["pause"]);
    let pod = pod("start-pull", "nowhere/img:1", |_| {});
    let sync = relisted(&runtime);
    let (first, calls) = start_app_with(&sync, &runtime, &pod).await;
    let (reason, message) = waiting(&first).expect("waiting");
    assert_eq!(reason, "ErrImagePull");
    assert!(
        message.starts_with(r#"failed to pull image "nowhere/img:1": "#),
        "{message}"
    );
    assert!(first.backoff_until.is_some(), "a sync soon, to show the back-off");
    assert_eq!(calls.iter().filter(|c| matches!(c, Call::Pull(_))).count(), 1);
    assert!(!created(&calls), "{calls:?}");
    let (second, calls) = start_app_with(&sync, &runtime, &pod).await;
    let (reason, message) = waiting(&second).expect("waiting");
    assert_eq!(reason, "ImagePullBackOff");
    assert!(
        message.starts_with(r#"Back-off pulling image "nowhere/img:1": ErrImagePull: failed to pull image"#),
        "{message}"
    );
    assert!(!calls.iter().any(|c| matches!(c, Call::Pull(_))), "{calls:?}");
    assert!(
        events(&second).contains(&"Failed: Error: ImagePullBackOff".to_string()),
        "{:?}",
        events(&second)
    );
}

#[actix::test]
async fn env_from_a_secret_without_an_api_server_is_create_container_config_error() {
    let runtime = FakeRuntime::with_images(&["pause", "img:1"]);
    let pod = pod("start-env", "img:1", |c| {
        c.env = Some(vec![EnvVar {
            name: "TOKEN".into(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: "creds".into(),
                    key: "token".into(),
                    optional: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]);
    });
    let (outcome, calls) = start_app(&runtime, &pod).await;
    let message = "secrets and configmaps in env need the API server (--kubeconfig)";
    assert_eq!(
        waiting(&outcome),
        Some(("CreateContainerConfigError".into(), message.into()))
    );
    assert!(
        events(&outcome).contains(&format!("Failed: Error: {message}")),
        "{:?}",
        events(&outcome)
    );
    assert!(!created(&calls), "{calls:?}");
    assert!(
        outcome.errors.is_empty(),
        "a config error is the container's, not the sync's"
    );
}

#[actix::test]
async fn a_failing_post_start_hook_kills_the_container_with_post_start_hook_error() {
    let runtime = FakeRuntime::with_images(&["pause", "img:1"]);
    runtime.state.lock().unwrap().exec_exit_code = 1;
    let pod = pod("start-hook", "img:1", |c| {
        c.lifecycle = Some(Lifecycle {
            post_start: Some(LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some(vec!["false".into()]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
    });
    let (outcome, calls) = start_app(&runtime, &pod).await;
    let (reason, message) = waiting(&outcome).expect("waiting");
    assert_eq!(reason, "PostStartHookError");
    assert!(message.starts_with("PostStartHook failed: "), "{message}");
    let events = events(&outcome);
    assert!(
        events.contains(&"FailedPostStartHook: PostStartHook failed".to_string())
            && events.contains(&"Killing: FailedPostStartHook".to_string()),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|e| e.starts_with("Failed:")),
        "the hook's own events say why: {events:?}"
    );
    assert!(calls.iter().any(|c| matches!(c, Call::Stop(_))), "{calls:?}");
}

#[test]
fn every_step_names_kubelets_reason() {
    let runtime_error = || RuntimeError::NotFound { what: "x".into() };
    let cases = [
        (StartError::Create(runtime_error()), "CreateContainerError"),
        (StartError::Run(runtime_error()), "RunContainerError"),
        (
            StartError::TargetNotRunning { target: "app".into() },
            "CreateContainerConfigError",
        ),
        (
            StartError::EnvObjects(EnvObjectsError::NeedsApiServer),
            "CreateContainerConfigError",
        ),
        (
            StartError::Security(SecuritySetupError::Runtime(runtime_error())),
            "CreateContainerConfigError",
        ),
        (StartError::PostStartHook { message: "x".into() }, "PostStartHookError"),
        (StartError::Image(ImageError::Empty), "InvalidImageName"),
        (
            StartError::Image(ImageError::BackOff {
                image: "i".into(),
                last_error: "e".into(),
            }),
            "ImagePullBackOff",
        ),
        (
            StartError::Image(ImageError::Pull {
                image: "i".into(),
                errors: vec![runtime_error()],
            }),
            "ErrImagePull",
        ),
        (
            StartError::Image(ImageError::NeverPull { image: "i".into() }),
            "ErrImageNeverPull",
        ),
        (
            StartError::Image(ImageError::Inspect(runtime_error())),
            "ImageInspectError",
        ),
    ];
    for (error, reason) in cases {
        assert_eq!(error.reason(), reason, "{error:?}");
    }
}

#[test]
fn a_target_must_be_running_to_share_its_process_namespace() {
    let error = target_pid_mode("app", &[]).unwrap_err();
    assert_eq!(error.to_string(), r#"target container "app" is not running"#);
    assert_eq!(error.reason(), "CreateContainerConfigError");
}
