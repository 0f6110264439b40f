//! The images slice: the sandbox image (`--pod-infra-container-image`) and how many pulls run
//! at once (`--serialize-image-pulls`, `--max-parallel-image-pulls`). Image garbage collection's
//! settings are the `image_gc` slice's.

use std::num::NonZeroUsize;

use dockerlet_actors::ImagePullLimit;

use super::file::FileSettings;
use super::{invalid, ConfigError};
use crate::cli::Cli;

/// The images' settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Images {
    /// `--pod-infra-container-image`; none for the built-in one.
    pub sandbox_image: Option<String>,
    /// `--serialize-image-pulls` and `--max-parallel-image-pulls`.
    pub pulls: ImagePullLimit,
}

/// The images' settings, flags over the file.
pub(super) fn resolve(cli: &Cli, file: &FileSettings) -> Result<Images, ConfigError> {
    Ok(Images {
        pulls: pull_limit(
            cli.serialize_image_pulls.or(file.serialize_image_pulls),
            cli.max_parallel_image_pulls.or(file.max_parallel_image_pulls),
        )?,
        sandbox_image: cli
            .pod_infra_container_image
            .clone()
            .or_else(|| file.pod_infra_container_image.clone())
            .filter(|s| !s.is_empty()),
    })
}

/// `serializeImagePulls` and `maxParallelImagePulls` as kubelet defaults and validates them:
/// serialized unless a limit of 2 or more is given; a limit must be positive, and more than 1
/// only without serialization.
fn pull_limit(serialize: Option<bool>, max_parallel: Option<i64>) -> Result<ImagePullLimit, ConfigError> {
    if let Some(n) = max_parallel.filter(|n| *n < 1) {
        return Err(invalid(
            "--max-parallel-image-pulls",
            format!("{n} must be a positive number"),
        ));
    }
    let serialize = serialize.unwrap_or(max_parallel.is_none_or(|n| n <= 1));
    match (serialize, max_parallel) {
        (true, Some(n)) if n > 1 => Err(invalid(
            "--max-parallel-image-pulls",
            format!("{n}: cannot be larger than 1 unless --serialize-image-pulls (serializeImagePulls) is false"),
        )),
        (true, _) => Ok(ImagePullLimit::default()),
        (false, None) => Ok(ImagePullLimit::Unlimited),
        (false, Some(n)) => Ok(ImagePullLimit::AtOnce(
            usize::try_from(n)
                .ok()
                .and_then(NonZeroUsize::new)
                .expect("checked positive above"),
        )),
    }
}
