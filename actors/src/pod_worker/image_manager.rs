//! The node's image manager (kubelet's `EnsureImageExists`, `pkg/kubelet/images/image_manager.go`,
//! with the puller of `pkg/kubelet/images/puller.go`): the pull policy, the pull back-off of every
//! pod and image, the node's pull permits (`serializeImagePulls`, `maxParallelImagePulls`) and the
//! pull credentials (the pod's `imagePullSecrets`, then the node's Docker config). One
//! [`ImageManager`] is shared by every worker of the node; image GC will extend it.

use dockerlet_messages::debug::EventType;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dockerlet_kube::KubeClient;
use dockerlet_pod::backoff::PullBackoff;
use dockerlet_pod::credentials::{CredentialError, DockerKeyring};
use dockerlet_pod::spec::pod_identity;
use dockerlet_pod::status::WaitingReason;
use dockerlet_runtime::{ContainerRuntime, RuntimeError};
use k8s_openapi::api::core::v1::{Container, Pod, Secret};

use super::outcome::{SyncOutcome, WorkerEvent};

/// How soon after a failed pull the status turns from ErrImagePull to ImagePullBackOff.
const PULL_BACKOFF_SHOWN: Duration = Duration::from_secs(1);

/// How many image pulls run at once on the node (kubelet's image puller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImagePullLimit {
    /// `serializeImagePulls: false` without `maxParallelImagePulls`: every pull at once.
    Unlimited,
    /// At most this many: 1 with `serializeImagePulls: true` (kubelet's default), otherwise
    /// `maxParallelImagePulls`.
    AtOnce(std::num::NonZeroUsize),
}

impl Default for ImagePullLimit {
    /// kubelet's default: one pull at a time.
    fn default() -> Self {
        ImagePullLimit::AtOnce(std::num::NonZeroUsize::MIN)
    }
}

/// Why a container's image is not there to start it from; each is one of kubelet's waiting
/// reasons ([`ImageError::reason`], `pkg/kubelet/images/types.go`), the text its message.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The container names no image (InvalidImageName).
    #[error("image is empty")]
    Empty,
    /// The reference does not parse (InvalidImageName); the text is kubelet's.
    #[error("{0}")]
    InvalidName(String),
    /// Docker could not say whether the image is there (ImageInspectError).
    #[error(transparent)]
    Inspect(RuntimeError),
    /// `imagePullPolicy: Never` and no local copy (ErrImageNeverPull).
    #[error("Container image \"{image}\" is not present with pull policy of Never")]
    NeverPull {
        /// The container's image.
        image: String,
    },
    /// An earlier pull failed and its back-off has not ended (ImagePullBackOff).
    #[error("Back-off pulling image \"{image}\": {last_error}")]
    BackOff {
        /// The container's image.
        image: String,
        /// The last pull's error, as the back-off keeps it.
        last_error: String,
    },
    /// An image pull Secret is not a Docker config (ErrImagePull).
    #[error(transparent)]
    Credentials(#[from] CredentialError),
    /// The pull failed with every credential tried (ErrImagePull).
    #[error("failed to pull image \"{image}\": {}", aggregate(.errors))]
    Pull {
        /// The container's image.
        image: String,
        /// One error per credential tried (one for an anonymous pull).
        errors: Vec<RuntimeError>,
    },
}

impl ImageError {
    /// kubelet's waiting reason.
    pub fn reason(&self) -> &'static str {
        match self {
            ImageError::Empty | ImageError::InvalidName(_) => "InvalidImageName",
            ImageError::Inspect(_) => "ImageInspectError",
            ImageError::NeverPull { .. } => "ErrImageNeverPull",
            ImageError::BackOff { .. } => "ImagePullBackOff",
            ImageError::Credentials(_) | ImageError::Pull { .. } => "ErrImagePull",
        }
    }

    /// The container's waiting state.
    pub fn waiting(&self) -> WaitingReason {
        WaitingReason {
            reason: self.reason().to_string(),
            message: self.to_string(),
        }
    }
}

/// utilerrors.NewAggregate's text: one error alone, several in brackets.
fn aggregate(errors: &[RuntimeError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The node's images as the pod workers need them: present per pull policy, pulled with back-off
/// and within the node's pull permits.
pub struct ImageManager {
    /// Docker.
    runtime: Arc<dyn ContainerRuntime>,
    /// The API server, for image pull Secrets (none on a standalone node).
    api: Option<Arc<dyn KubeClient>>,
    /// `--root-dir`: where the node's Docker config is looked for first.
    root_dir: PathBuf,
    /// kubelet's image pull back-off, of every pod (by pod UID and image).
    backoff: Mutex<PullBackoff>,
    /// The node's image pulls at once: a pull holds a permit; none means no limit.
    slots: Option<Arc<tokio::sync::Semaphore>>,
}

impl std::fmt::Debug for ImageManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageManager")
            .field("root_dir", &self.root_dir)
            .field("slots", &self.slots.as_ref().map(|s| s.available_permits()))
            .finish_non_exhaustive()
    }
}

/// One container's image to make sure of.
struct Want<'a> {
    pod: &'a Pod,
    container: &'a Container,
    image: &'a str,
}

impl ImageManager {
    /// The manager of a node: no pull back-off yet, and the pull permits `limit` allows.
    pub fn new(
        runtime: Arc<dyn ContainerRuntime>,
        api: Option<Arc<dyn KubeClient>>,
        root_dir: PathBuf,
        limit: ImagePullLimit,
    ) -> Self {
        let slots = match limit {
            ImagePullLimit::Unlimited => None,
            ImagePullLimit::AtOnce(n) => Some(Arc::new(tokio::sync::Semaphore::new(n.get()))),
        };
        ImageManager {
            runtime,
            api,
            root_dir,
            backoff: Mutex::default(),
            slots,
        }
    }

    /// Forget the pull back-off of a pod that is gone.
    pub fn forget_pod(&self, uid: &str) {
        self.backoff().forget_pod(uid);
    }

    fn backoff(&self) -> std::sync::MutexGuard<'_, PullBackoff> {
        self.backoff.lock().expect("pull back-off")
    }

    /// Make sure the container's image is there, per `imagePullPolicy` (kubelet's
    /// EnsureImageExists). Its events and, after a failed pull, when to sync again go to `out`.
    pub(super) async fn ensure_image(
        &self,
        pod: &Pod,
        container: &Container,
        out: &mut SyncOutcome,
    ) -> Result<(), ImageError> {
        let image = container.image.clone().unwrap_or_default();
        if image.is_empty() {
            return Err(ImageError::Empty);
        }
        // kubelet parses the reference before anything else: one that does not parse is
        // InvalidImageName (with its InspectFailed event), and Docker is not asked.
        if let Err(message) = dockerlet_pod::image_ref::check(&image) {
            out.events.push(WorkerEvent::container(
                EventType::Warning,
                &container.name,
                "InspectFailed",
                message.clone(),
            ));
            return Err(ImageError::InvalidName(message));
        }
        let policy = container
            .image_pull_policy
            .clone()
            .unwrap_or_else(|| dockerlet_pod::spec::default_pull_policy(&image).to_string());
        let present = self.runtime.image_present(&image).await.map_err(ImageError::Inspect)?;
        match (policy.as_str(), present) {
            ("Never", false) => {
                // kubelet's image manager records it as a Warning of its own, besides the
                // container's Failed event.
                let error = ImageError::NeverPull { image };
                out.events.push(WorkerEvent::container(
                    EventType::Warning,
                    &container.name,
                    "ErrImageNeverPull",
                    error.to_string(),
                ));
                Err(error)
            }
            (_, true) if policy != "Always" => {
                out.events.push(WorkerEvent::container(
                    EventType::Normal,
                    &container.name,
                    "Pulled",
                    format!("Container image \"{image}\" already present on machine"),
                ));
                Ok(())
            }
            _ => {
                let want = Want {
                    pod,
                    container,
                    image: &image,
                };
                self.pull(&want, present, out).await
            }
        }
    }

    /// Pull the image unless its pull is in back-off (kubelet's EnsureImageExists and
    /// PullImage): with each credential that matches it in turn (the pod's `imagePullSecrets`,
    /// then the node's Docker config), anonymously when none does.
    async fn pull(&self, want: &Want<'_>, present: bool, out: &mut SyncOutcome) -> Result<(), ImageError> {
        let Want { pod, container, image } = *want;
        let dockerlet_pod::spec::PodIdentity { uid, .. } = pod_identity(pod);
        let backing_off = self.backoff().backing_off(uid, image, Instant::now());
        if let Some(off) = backing_off {
            let error = ImageError::BackOff {
                image: image.to_string(),
                last_error: off.last_error,
            };
            let message = format!("Back-off pulling image \"{image}\"");
            out.events.push(WorkerEvent::container(
                EventType::Normal,
                &container.name,
                "BackOff",
                message,
            ));
            out.retry_at(off.until);
            return Err(error);
        }
        let keyrings = self.pull_keyrings(pod, out).await?;
        let auths = dockerlet_pod::credentials::lookup(&keyrings, image);
        out.events.push(WorkerEvent::container(
            EventType::Normal,
            &container.name,
            "Pulling",
            format!("Pulling image \"{image}\""),
        ));
        out.flush_events();
        let asked = Instant::now();
        // kubelet's serial (or bounded parallel) puller: wait for a turn. The permit is
        // released when this pull ends, or when the sync is dropped while waiting.
        let _permit = match &self.slots {
            Some(slots) => {
                if slots.available_permits() == 0 {
                    tracing::debug!(image = %image, "waiting for another pull to end (serializeImagePulls / maxParallelImagePulls)");
                }
                Some(
                    slots
                        .clone()
                        .acquire_owned()
                        .await
                        .expect("the pull semaphore is never closed"),
                )
            }
            None => None,
        };
        let began = Instant::now();
        let mut errors = Vec::new();
        let mut size = 0;
        for auth in auths.iter().map(Some).chain(auths.is_empty().then_some(None)) {
            match self.runtime.pull_image(image, auth).await {
                Ok(bytes) => {
                    errors.clear();
                    size = bytes;
                    break;
                }
                Err(e) => {
                    if let Some(auth) = auth {
                        tracing::debug!(image = %image, registry = %auth.server, error = %e, "pull with a credential failed");
                    }
                    errors.push(e);
                }
            }
        }
        let took = PullTimes {
            pulling: began.elapsed(),
            with_waiting: asked.elapsed(),
            size,
        };
        self.pulled(want, took, errors, present, out)
    }

    /// The credentials a pull may use: the pod's `imagePullSecrets` (a missing one is a
    /// `FailedToRetrieveImagePullSecret` Warning and the pull goes on, as in kubelet; one that
    /// is not a Docker config fails the pull), then the node's Docker config file.
    async fn pull_keyrings(&self, pod: &Pod, out: &mut SyncOutcome) -> Result<Vec<DockerKeyring>, CredentialError> {
        let mut keyrings = Vec::new();
        let names: Vec<String> = pod
            .spec
            .as_ref()
            .and_then(|s| s.image_pull_secrets.as_ref())
            .into_iter()
            .flatten()
            .map(|r| r.name.clone())
            .filter(|n| !n.is_empty())
            .collect();
        let dockerlet_pod::spec::PodIdentity { namespace, .. } = pod_identity(pod);
        let mut missing = Vec::new();
        for name in names {
            let secret = match &self.api {
                Some(api) => match api.secret(namespace, &name).await {
                    Ok(found) => found,
                    Err(e) => {
                        tracing::info!(secret = %name, error = %e, "unable to retrieve a pull secret; the image pull may not succeed");
                        None
                    }
                },
                None => None,
            };
            let Some(secret) = secret else {
                missing.push(name);
                continue;
            };
            if let Some(keyring) = pull_secret_keyring(&secret, namespace, &name)? {
                keyrings.push(keyring);
            }
        }
        if !missing.is_empty() {
            out.events.push(WorkerEvent::pod(
                EventType::Warning,
                "FailedToRetrieveImagePullSecret",
                format!(
                    "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
                    missing.join(", ")
                ),
            ));
        }
        let files = dockerlet_host::docker_config::candidates(&self.root_dir);
        match tokio::task::spawn_blocking(move || dockerlet_host::docker_config::node_keyring(&files)).await {
            Ok(Ok(Some((path, keyring)))) => {
                tracing::debug!(path = %path.display(), "the node's Docker config");
                keyrings.push(keyring);
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the node's Docker config is not used"),
            Err(e) => tracing::warn!(error = %e, "reading the node's Docker config did not finish"),
        }
        Ok(keyrings)
    }

    /// The events and outcome of a pull: `errors` empty means it succeeded.
    fn pulled(
        &self,
        want: &Want<'_>,
        took: PullTimes,
        errors: Vec<RuntimeError>,
        present: bool,
        out: &mut SyncOutcome,
    ) -> Result<(), ImageError> {
        let Want { pod, container, image } = *want;
        let dockerlet_pod::spec::PodIdentity { uid, .. } = pod_identity(pod);
        if errors.is_empty() {
            self.backoff().succeeded(uid, image);
            out.events.push(WorkerEvent::container(
                EventType::Normal,
                &container.name,
                "Pulled",
                took.message(image),
            ));
            return Ok(());
        }
        // Offline first: a local copy serves when the registry cannot be reached, never when it
        // refused (no or wrong credentials must not run an image another pod pulled).
        if present && errors.iter().all(RuntimeError::registry_unreachable) {
            tracing::warn!(image = %image, error = %errors[0], "registry unreachable; using the local image");
            return Ok(());
        }
        out.events.push(WorkerEvent::container(
            EventType::Warning,
            &container.name,
            "Failed",
            format!("Failed to pull image \"{image}\": {}", aggregate(&errors)),
        ));
        let error = ImageError::Pull {
            image: image.to_string(),
            errors,
        };
        let until = self
            .backoff()
            .failed(uid, image, format!("ErrImagePull: {error}"), Instant::now());
        // The next sync shows ImagePullBackOff; the one at its end pulls again.
        out.retry_at((Instant::now() + PULL_BACKOFF_SHOWN).min(until));
        Err(error)
    }
}

/// How long a successful pull took, and what it brought.
#[derive(Debug, Clone, Copy)]
struct PullTimes {
    /// From the start of the pull to its end.
    pulling: Duration,
    /// From asking for the pull, the wait for a turn included.
    with_waiting: Duration,
    /// The image's size in bytes.
    size: u64,
}

impl PullTimes {
    /// kubelet's `Pulled` event text, its times truncated to the millisecond as Go prints them.
    fn message(&self, image: &str) -> String {
        use dockerlet_pod::go::go_duration;
        format!(
            "Successfully pulled image \"{image}\" in {} ({} including waiting). Image size: {} bytes.",
            go_duration(self.pulling),
            go_duration(self.with_waiting),
            self.size
        )
    }
}

/// The keyring of an image pull Secret (kubelet's MakeDockerKeyring): `.dockerconfigjson` of a
/// `kubernetes.io/dockerconfigjson` Secret, `.dockercfg` of a `kubernetes.io/dockercfg` one;
/// other types and empty keys give none.
fn pull_secret_keyring(secret: &Secret, namespace: &str, name: &str) -> Result<Option<DockerKeyring>, CredentialError> {
    use dockerlet_pod::credentials::ConfigFormat;
    let (key, format) = match secret.type_.as_deref() {
        Some("kubernetes.io/dockerconfigjson") => (".dockerconfigjson", ConfigFormat::Json),
        Some("kubernetes.io/dockercfg") => (".dockercfg", ConfigFormat::Legacy),
        _ => return Ok(None),
    };
    let Some(bytes) = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .filter(|b| !b.0.is_empty())
    else {
        return Ok(None);
    };
    DockerKeyring::parse(&bytes.0, format, &format!("Secret {namespace}/{name}")).map(Some)
}
