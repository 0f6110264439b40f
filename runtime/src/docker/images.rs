//! The [`Images`] trait on the Docker Engine API: presence and users of images (remembered),
//! pulls, the sandbox image, and image garbage collection's calls — list, remove as cri-dockerd
//! removes (`Mirantis/cri-dockerd core/image.go` `RemoveImage`, after dockershim's
//! `pkg/kubelet/dockershim/docker_image.go`), and the images every container on the engine uses.

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;
use bollard::query_parameters::{CreateImageOptions, ListContainersOptions, ListImagesOptions, RemoveImageOptions};
use bollard::Docker;
use dockerlet_messages::runtime::RuntimeImage;
use dockerlet_pod::labels;
use futures::stream::TryStreamExt;

use super::{failed, DockerRuntime};
use crate::{pause, Images, RegistryAuth, RuntimeError};

#[async_trait]
impl Images for DockerRuntime {
    async fn image_present(&self, image: &str) -> Result<bool, RuntimeError> {
        if self.known_images().contains(image) {
            return Ok(true);
        }
        match self.docker.inspect_image(image).await {
            Ok(inspected) => {
                self.known_images().insert(image.to_string());
                self.image_users().remember(image, &inspected);
                Ok(true)
            }
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(false),
            Err(e) => Err(failed(&format!("inspect image {image}"), e)),
        }
    }

    async fn image_user(&self, image: &str) -> Result<String, RuntimeError> {
        if let Some(user) = self.image_users().user(image) {
            return Ok(user.clone());
        }
        let inspected = self
            .docker
            .inspect_image(image)
            .await
            .map_err(|e| failed(&format!("inspect image {image}"), e))?;
        let mut users = self.image_users();
        users.remember(image, &inspected);
        Ok(users.user(image).cloned().unwrap_or_default())
    }

    async fn pull_image(&self, image: &str, auth: Option<&RegistryAuth>) -> Result<u64, RuntimeError> {
        let options = CreateImageOptions {
            from_image: Some(image.to_string()),
            ..Default::default()
        };
        let credentials = auth.map(|a| bollard::auth::DockerCredentials {
            username: Some(a.username.clone()),
            password: Some(a.password.clone()),
            serveraddress: Some(a.server.clone()),
            ..Default::default()
        });
        self.docker
            .create_image(Some(options), None, credentials)
            .try_collect::<Vec<_>>()
            .await
            .map_err(|e| pull_failed(image, e))?;
        self.known_images().insert(image.to_string());
        // The reference may name another image now: its user is inspected again when needed.
        self.image_users().ids.remove(image);
        let inspected = self
            .docker
            .inspect_image(image)
            .await
            .map_err(|e| failed(&format!("inspect image {image}"), e))?;
        Ok(inspected.size.map_or(0, |s| s.max(0) as u64))
    }

    async fn ensure_sandbox_image(
        &self,
        configured: Option<&str>,
        auths: &[RegistryAuth],
    ) -> Result<String, RuntimeError> {
        match configured {
            Some(image) => {
                if !self.image_present(image).await? {
                    // Each matching credential in turn, as a pod's pull; anonymous without.
                    let mut result = Ok(0);
                    for auth in auths.iter().map(Some).chain(auths.is_empty().then_some(None)) {
                        result = self.pull_image(image, auth).await;
                        if result.is_ok() {
                            break;
                        }
                    }
                    result?;
                }
                Ok(image.to_string())
            }
            None => {
                if !self.image_present(pause::IMAGE).await? {
                    self.import_pause_image().await?;
                }
                Ok(pause::IMAGE.to_string())
            }
        }
    }
    async fn list_images(&self) -> Result<Vec<RuntimeImage>, RuntimeError> {
        list(&self.docker).await
    }

    async fn remove_image(&self, image: &RuntimeImage) -> Result<(), RuntimeError> {
        let result = remove(&self.docker, image).await;
        // Whatever was untagged before a refusal is gone: forget what the caches say of it.
        self.forget_image(image);
        result
    }

    async fn image_ids_in_use(&self) -> Result<std::collections::BTreeSet<String>, RuntimeError> {
        ids_in_use(&self.docker).await
    }
}

impl DockerRuntime {
    /// Forget what the caches know of `image`: its tags, its ID and every reference that
    /// resolved to it are inspected again at their next use.
    fn forget_image(&self, image: &RuntimeImage) {
        let references: Vec<String> = {
            let mut users = self.image_users();
            let gone: Vec<String> = users
                .ids
                .iter()
                .filter(|(_, id)| **id == image.id)
                .map(|(r, _)| r.clone())
                .collect();
            for r in &gone {
                users.ids.remove(r);
            }
            users.users.remove(&image.id);
            gone
        };
        let mut known = self.known_images();
        for r in references
            .iter()
            .chain(&image.repo_tags)
            .chain(std::iter::once(&image.id))
        {
            known.remove(r);
        }
    }

    async fn import_pause_image(&self) -> Result<(), RuntimeError> {
        let (repo, tag) = pause::IMAGE.rsplit_once(':').expect("pause image has a tag");
        let options = CreateImageOptions {
            from_src: Some("-".to_string()),
            repo: Some(repo.to_string()),
            tag: Some(tag.to_string()),
            changes: vec![
                r#"CMD ["/pause"]"#.to_string(),
                format!("LABEL {}=true", labels::MANAGED_IMAGE),
            ],
            ..Default::default()
        };
        let body = bollard::body_full(pause::rootfs_tar()?.into());
        self.docker
            .create_image(Some(options), Some(body), None)
            .try_collect::<Vec<_>>()
            .await
            .map_err(|e| failed("import pause image", e))?;
        tracing::info!(image = pause::IMAGE, "provisioned the built-in pause image");
        Ok(())
    }
}

/// A failed pull: the engine's refusal or the registry's unreachability, with Docker's words.
/// Errors that are not the engine's answer (the socket) stay [`RuntimeError::EngineFailed`].
fn pull_failed(image: &str, error: bollard::errors::Error) -> RuntimeError {
    let message = match &error {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        bollard::errors::Error::DockerStreamError { error } => error.clone(),
        _ => return failed(&format!("pull image {image}"), error),
    };
    RuntimeError::PullFailed {
        image: image.to_string(),
        unreachable: crate::unreachable_registry_message(&message),
        message: format!("Error response from daemon: {message}"),
    }
}

/// Docker's placeholders for an untagged or undigested image (Docker 20.10 lists them).
const NONE_TAG: &str = "<none>:<none>";
const NONE_DIGEST: &str = "<none>@<none>";

/// `docker images`: every top-level image.
pub(super) async fn list(docker: &Docker) -> Result<Vec<RuntimeImage>, RuntimeError> {
    let options = ListImagesOptions {
        all: false,
        ..Default::default()
    };
    let images = docker
        .list_images(Some(options))
        .await
        .map_err(|e| failed("list images", e))?;
    Ok(images.into_iter().map(runtime_image).collect())
}

/// One `docker images` line, placeholders dropped.
fn runtime_image(summary: bollard::models::ImageSummary) -> RuntimeImage {
    RuntimeImage {
        id: summary.id,
        repo_tags: summary.repo_tags.into_iter().filter(|t| t != NONE_TAG).collect(),
        repo_digests: summary.repo_digests.into_iter().filter(|d| d != NONE_DIGEST).collect(),
        size: summary.size.max(0) as u64,
        created: summary.created,
        parent: Some(summary.parent_id).filter(|p| !p.is_empty()),
    }
}

/// Remove each repo tag, then the ID (cri-dockerd: an image with several tags is only gone once
/// every tag is), never forced, parents pruned. A 404 is no error (someone removed it first); a
/// 409 (a container uses it) is [`RuntimeError::ImageInUse`].
pub(super) async fn remove(docker: &Docker, image: &RuntimeImage) -> Result<(), RuntimeError> {
    for reference in image.repo_tags.iter().chain(std::iter::once(&image.id)) {
        let options = RemoveImageOptions {
            force: false,
            noprune: false,
            platforms: None,
        };
        match docker.remove_image(reference, Some(options), None).await {
            Ok(_) => {}
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => {}
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409,
                message,
            }) => {
                return Err(RuntimeError::ImageInUse {
                    image: reference.clone(),
                    message,
                })
            }
            Err(e) => return Err(failed(&format!("remove image {reference}"), e)),
        }
    }
    Ok(())
}

/// The `ImageID` of every container on the engine (`docker ps -a`, no filter: other node names
/// and containers no agent made count too).
pub(super) async fn ids_in_use(docker: &Docker) -> Result<BTreeSet<String>, RuntimeError> {
    let options = ListContainersOptions {
        all: true,
        filters: Some(HashMap::new()),
        ..Default::default()
    };
    let containers = docker
        .list_containers(Some(options))
        .await
        .map_err(|e| failed("list containers", e))?;
    Ok(containers.into_iter().filter_map(|c| c.image_id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Docker 20.10's placeholders of an untagged image are not tags to remove.
    #[test]
    fn placeholders_are_not_tags() {
        let summary = bollard::models::ImageSummary {
            id: "sha256:abc".into(),
            repo_tags: vec![NONE_TAG.into()],
            repo_digests: vec![NONE_DIGEST.into(), "r/x@sha256:def".into()],
            size: 42,
            created: 7,
            ..Default::default()
        };
        let image = runtime_image(summary);
        assert!(image.repo_tags.is_empty());
        assert_eq!(image.repo_digests, vec!["r/x@sha256:def".to_string()]);
        assert_eq!((image.size, image.created), (42, 7));
    }
}
