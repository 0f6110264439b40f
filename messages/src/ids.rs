//! Newtype identifiers, so a pod UID is never passed where a container ID is expected.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

/// The UID of a pod (`metadata.uid`); for static pods a hash of the manifest and node name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PodUid(pub String);

/// A Docker container ID (the full 64-hex form).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ContainerId(pub String);

impl PodUid {
    /// `metadata.uid` of `pod` (empty when unset).
    pub fn of(pod: &Pod) -> PodUid {
        PodUid(pod.metadata.uid.clone().unwrap_or_default())
    }
}

impl fmt::Display for PodUid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for PodUid {
    fn from(s: &str) -> Self {
        PodUid(s.to_string())
    }
}

impl From<&str> for ContainerId {
    fn from(s: &str) -> Self {
        ContainerId(s.to_string())
    }
}

/// Who a pod is: UID, namespace and name, read once from the object (by its source) and carried
/// with it, so no one rebuilds them by hand. Shown as `namespace/name`, as logs, the debug page
/// and the events' `object` name a pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PodRef {
    /// `metadata.uid`.
    pub uid: PodUid,
    /// `metadata.namespace` (`default` when unset, as the API server defaults it).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl PodRef {
    /// The identity of `pod`.
    pub fn of(pod: &Pod) -> PodRef {
        let m = &pod.metadata;
        PodRef {
            uid: PodUid::of(pod),
            namespace: m.namespace.clone().unwrap_or_else(|| "default".to_string()),
            name: m.name.clone().unwrap_or_default(),
        }
    }

    /// The tracing span every log line about the pod is written in: namespace, name and UID as
    /// fields.
    pub fn span(&self) -> tracing::Span {
        tracing::info_span!("pod", pod.namespace = %self.namespace, pod.name = %self.name, pod.uid = %self.uid)
    }
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn a_pod_ref_reads_the_object_once_and_names_it_namespace_slash_name() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("shop".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let id = PodRef::of(&pod);
        assert_eq!(id.uid, PodUid::from("u1"));
        assert_eq!(id.to_string(), "shop/web");
        let bare = PodRef::of(&Pod::default());
        assert_eq!(bare.to_string(), "default/", "the API server's default namespace");
    }
}
