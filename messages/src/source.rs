//! Pods as read from a configuration source.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use crate::ids::PodRef;

/// A pod the node should run, defaulted as kubelet defaults static pods.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DesiredPod {
    /// Who [`DesiredPod::pod`] is (UID, namespace, name), read once by its source.
    pub id: PodRef,
    /// Which source it came from (also in its `kubernetes.io/config.source` annotation).
    pub source: PodSource,
    /// The full pod object, with name, namespace, UID and annotations set; shared, so a
    /// source's whole set is sent and merged without copying the pods that did not change.
    pub pod: Arc<Pod>,
    /// Where it came from (the manifest file path for file pods).
    pub origin: String,
}

impl DesiredPod {
    /// `pod` from `source`, its identity read once.
    pub fn new(pod: Arc<Pod>, source: PodSource, origin: String) -> DesiredPod {
        DesiredPod {
            id: PodRef::of(&pod),
            source,
            pod,
            origin,
        }
    }

    /// A static pod (from a manifest file or URL), which the API server only mirrors.
    pub fn is_static(&self) -> bool {
        self.source != PodSource::Api
    }
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

    /// The source a `kubernetes.io/config.source` value names; `None` for any other text.
    pub fn parse(text: &str) -> Option<PodSource> {
        [PodSource::File, PodSource::Http, PodSource::Api]
            .into_iter()
            .find(|s| s.as_str() == text)
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
