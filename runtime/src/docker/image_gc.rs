//! The image calls of image garbage collection on the Docker Engine API: list, remove as
//! cri-dockerd removes (`Mirantis/cri-dockerd core/image.go` `RemoveImage`, after dockershim's
//! `pkg/kubelet/dockershim/docker_image.go`), and the images every container on the engine uses.

use std::collections::{BTreeSet, HashMap};

use bollard::query_parameters::{ListContainersOptions, ListImagesOptions, RemoveImageOptions};
use bollard::Docker;
use dockerlet_messages::runtime::RuntimeImage;

use super::failed;
use crate::RuntimeError;

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
