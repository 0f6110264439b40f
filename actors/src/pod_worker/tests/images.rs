//! The worker's image pulls: pull secrets, back-off and the node's pull permits.

use super::*;

/// A private image is pulled with the credential of the pod's `imagePullSecrets`; without
/// one the pull is refused (ErrImagePull, then ImagePullBackOff with the last error) even
/// though the image is on the node (a refusal is never papered over by the local copy); a
/// missing pull Secret is a Warning and the pull goes on.
#[actix::test]
async fn private_images_are_pulled_with_the_pods_pull_secret() {
    use base64::Engine as _;
    use dockerlet_kube::fake::FakeKube;
    use k8s_openapi::api::core::v1::LocalObjectReference;
    let api = FakeKube::new("n1");
    let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
    {
        let mut state = api.state.lock().unwrap();
        let config = format!(r#"{{"auths":{{"reg.example:5000":{{"auth":"{auth}"}}}}}}"#);
        state.secrets.insert(
            "default/regcred".into(),
            [(".dockerconfigjson".to_string(), config)].into(),
        );
        state
            .secret_types
            .insert("default/regcred".into(), "kubernetes.io/dockerconfigjson".into());
    }
    let image = "reg.example:5000/private/app:1";
    let runtime = FakeRuntime::with_images(&[image]);
    runtime
        .state
        .lock()
        .unwrap()
        .registry
        .insert(image.into(), Some(("alice".into(), "s3cret".into())));
    let sync = relisted(&runtime);
    let mut config = (*config()).clone();
    config.api = Some(Arc::new(api));
    // The image manager reads pull secrets through the config's API: built with it.
    let sync = SyncContext::new(sync.runtime, sync.cache, Arc::new(config));
    let with_secrets = |name: &str, uid: &str, secrets: &[&str]| {
        let mut pod = (*named(name, uid)).clone();
        let spec = pod.spec.as_mut().unwrap();
        spec.containers[0].image = Some(image.into());
        spec.containers[0].image_pull_policy = Some("Always".into());
        spec.image_pull_secrets = Some(
            secrets
                .iter()
                .map(|s| LocalObjectReference { name: s.to_string() })
                .collect(),
        );
        Arc::new(pod)
    };
    let sink = Sink::default().start();
    let _with = PodWorker::new(
        with_secrets("with", "uw", &["gone", "regcred"]),
        sync.clone(),
        links(&sink),
    )
    .start();
    let _without = PodWorker::new(with_secrets("without", "uo", &[]), sync, links(&sink)).start();
    /// The last waiting state of pod "without"'s container.
    fn waiting(statuses: &[Pod]) -> Option<k8s_openapi::api::core::v1::ContainerStateWaiting> {
        let pod = statuses
            .iter()
            .rev()
            .find(|p| p.metadata.name.as_deref() == Some("without"))?;
        let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
        status.state.clone()?.waiting
    }
    // Until the first pod's app container is created and the second's pull has failed (a
    // fixed wait can be too short on a loaded machine).
    eventually_async("pod with's app container and pod without's failed pull", || {
        let (runtime, sink) = (runtime.clone(), sink.clone());
        async move {
            let statuses = sink.send(Statuses).await.unwrap();
            let pull_failed = waiting(&statuses).is_some_and(|w| w.reason.as_deref() == Some("ErrImagePull"));
            let state = runtime.state.lock().unwrap();
            pull_failed
                && state
                    .containers
                    .values()
                    .any(|c| c.spec.name == "k8s_app_with_default_uw_0")
        }
    })
    .await;
    let created: Vec<String> = runtime
        .state
        .lock()
        .unwrap()
        .containers
        .values()
        .map(|c| c.spec.name.clone())
        .collect();
    assert!(
        created.contains(&"k8s_app_with_default_uw_0".to_string()),
        "{created:?}"
    );
    assert!(!created.iter().any(|n| n.starts_with("k8s_app_without")), "{created:?}");
    let users = runtime.state.lock().unwrap().pull_users.clone();
    assert!(
        users.contains(&Some("alice".into())) && users.contains(&None),
        "{users:?}"
    );
    let events = sink.send(Events).await.unwrap();
    assert!(
        events.iter().any(|e| e
            == "FailedToRetrieveImagePullSecret: Unable to retrieve some image pull secrets (gone); attempting to pull the image may not succeed."),
        "{events:?}"
    );
    let first = waiting(&sink.send(Statuses).await.unwrap()).expect("waiting");
    assert_eq!(first.reason.as_deref(), Some("ErrImagePull"));
    assert_eq!(
        first.message.as_deref(),
        Some(
            r#"failed to pull image "reg.example:5000/private/app:1": Error response from daemon: no basic auth credentials"#
        )
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let later = waiting(&sink.send(Statuses).await.unwrap()).expect("waiting");
    assert_eq!(later.reason.as_deref(), Some("ImagePullBackOff"));
    assert_eq!(
        later.message.as_deref(),
        Some(
            r#"Back-off pulling image "reg.example:5000/private/app:1": ErrImagePull: failed to pull image "reg.example:5000/private/app:1": Error response from daemon: no basic auth credentials"#
        )
    );
    let anonymous = runtime
        .state
        .lock()
        .unwrap()
        .pull_users
        .iter()
        .filter(|u| u.is_none())
        .count();
    assert_eq!(anonymous, 1, "no pull during the back-off");
    let events = sink.send(Events).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e == r#"BackOff: Back-off pulling image "reg.example:5000/private/app:1""#),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| e == "Failed: Error: ImagePullBackOff"),
        "{events:?}"
    );
    // The type is the sender's, as kubelet's: the image manager's back-off is Normal, the
    // failures Warnings (`pkg/kubelet/images/image_manager.go`, `pkg/kubelet/events/event.go`).
    let types = sink.send(EventTypes).await.unwrap();
    let type_of = |reason: &str| {
        let of: std::collections::BTreeSet<EventType> =
            types.iter().filter(|(r, _)| r == reason).map(|(_, t)| *t).collect();
        assert_eq!(of.len(), 1, "{reason}: {types:?}");
        of.into_iter().next().unwrap()
    };
    assert_eq!(type_of("BackOff"), EventType::Normal);
    assert_eq!(type_of("Pulling"), EventType::Normal);
    assert_eq!(type_of("Failed"), EventType::Warning);
    assert_eq!(type_of("FailedToRetrieveImagePullSecret"), EventType::Warning);
}
/// kubelet's serialized image pulls (`serializeImagePulls`, the default): two pods that
/// each pull an image pull one after the other, and the second's `Pulled` event counts its
/// wait; without the limit both pulls run at once.
#[actix::test]
async fn image_pulls_are_serialized_unless_configured_otherwise() {
    async fn max_pulls_at_once(limit: ImagePullLimit) -> (usize, Vec<String>) {
        let runtime = FakeRuntime::with_images(&[]);
        {
            let mut state = runtime.state.lock().unwrap();
            state.pull_delay = Duration::from_millis(300);
            state.registry.insert("reg.example/a:1".into(), None);
            state.registry.insert("reg.example/b:1".into(), None);
        }
        let mut sync = relisted(&runtime);
        let mut config = (*config()).clone();
        config.image_pulls = limit;
        sync = SyncContext::new(sync.runtime, sync.cache, Arc::new(config));
        let sink = Sink::default().start();
        let pulling = |name: &str, uid: &str, image: &str| {
            let mut pod = (*named(name, uid)).clone();
            pod.spec.as_mut().unwrap().containers[0].image = Some(image.into());
            Arc::new(pod)
        };
        let _a = PodWorker::new(pulling("a", "ua", "reg.example/a:1"), sync.clone(), links(&sink)).start();
        let _b = PodWorker::new(pulling("b", "ub", "reg.example/b:1"), sync, links(&sink)).start();
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let pulled: Vec<String> = sink
            .send(Events)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.starts_with("Pulled: "))
            .collect();
        let (running, most) = runtime.state.lock().unwrap().pulls_running;
        assert_eq!(running, 0, "both pulls ended");
        (most, pulled)
    }
    let (serial, pulled) = max_pulls_at_once(ImagePullLimit::default()).await;
    assert_eq!(serial, 1, "serialized: one pull at a time");
    assert_eq!(pulled.len(), 2, "{pulled:?}");
    let size = dockerlet_runtime::fake::FAKE_IMAGE_SIZE;
    let waited = pulled
        .iter()
        .find(|e| {
            // "in 300ms (6xxms including waiting)": the second pull waited for the first.
            let Some(rest) = e.split(" including waiting").next() else {
                return false;
            };
            let total = rest.rsplit('(').next().unwrap_or_default();
            total.ends_with("ms") && total.trim_end_matches("ms").parse::<u64>().is_ok_and(|ms| ms >= 550)
        })
        .unwrap_or_else(|| panic!("one pull waited for the other: {pulled:?}"));
    assert!(
        waited.starts_with("Pulled: Successfully pulled image \"reg.example/")
            && waited.contains("\" in 3")
            && waited.ends_with(&format!("including waiting). Image size: {size} bytes.")),
        "{waited}"
    );
    let (parallel, _) = max_pulls_at_once(ImagePullLimit::Unlimited).await;
    assert_eq!(parallel, 2, "not serialized: both pulls at once");
    let (two, _) = max_pulls_at_once(ImagePullLimit::AtOnce(std::num::NonZeroUsize::new(2).unwrap())).await;
    assert_eq!(two, 2, "maxParallelImagePulls 2");
}
