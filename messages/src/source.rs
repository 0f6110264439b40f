//! Pods as read from a configuration source.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use crate::ids::PodUid;

/// A pod the node should run, defaulted as kubelet defaults static pods.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DesiredPod {
    /// `metadata.uid` of [`DesiredPod::pod`], copied for quick lookups.
    pub uid: PodUid,
    /// The full pod object, with name, namespace, UID and annotations set; shared, so a
    /// source's whole set is sent and merged without copying the pods that did not change.
    pub pod: Arc<Pod>,
    /// Where it came from (the manifest file path for file pods).
    pub origin: String,
}

/// A manifest that could not be turned into a pod, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManifestError {
    /// The file (or URL) the manifest came from.
    pub file: String,
    /// Why it was rejected; names the field, and line and column for YAML errors.
    pub reason: String,
}

/// Where a pod came from: kubelet's config sources (`pkg/kubelet/types`: file, http, api).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PodSource {
    /// A manifest directory (`--pod-manifest-path`).
    File,
    /// A manifest URL (`--manifest-url`).
    Http,
    /// The API server.
    Api,
}

impl PodSource {
    /// The `kubernetes.io/config.source` value.
    pub fn as_str(self) -> &'static str {
        match self {
            PodSource::File => "file",
            PodSource::Http => "http",
            PodSource::Api => "api",
        }
    }
}

impl std::fmt::Display for PodSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The full set of pods one source wants ("SET" semantics: pods missing from it are removed).
///
/// FileSource, HttpSource, ApiSource → Supervisor, on start, on every change seen and every re-list.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "()"))]
pub struct SourcePodsChanged {
    /// Which source.
    pub source: PodSource,
    /// Every valid pod of the source.
    pub pods: Vec<DesiredPod>,
    /// Every manifest that was skipped, with the reason.
    pub errors: Vec<ManifestError>,
}
