//! Pods as read from a configuration source.

use actix::Message;
use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use crate::ids::PodUid;

/// A pod the node should run, defaulted as kubelet defaults static pods.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DesiredPod {
    /// `metadata.uid` of [`DesiredPod::pod`], copied for quick lookups.
    pub uid: PodUid,
    /// The full pod object, with name, namespace, UID and annotations set.
    pub pod: Pod,
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

/// The full set of pods one source wants ("SET" semantics: pods missing from it are removed).
///
/// Static pod source → Supervisor, on start, on every change seen and every re-list.
#[derive(Debug, Clone, Serialize, Message)]
#[rtype(result = "()")]
pub struct SourcePodsChanged {
    /// Source name, as the `kubernetes.io/config.source` annotation: `file`, `http` or `api`.
    pub source: String,
    /// Every valid pod of the source.
    pub pods: Vec<DesiredPod>,
    /// Every manifest that was skipped, with the reason.
    pub errors: Vec<ManifestError>,
}
