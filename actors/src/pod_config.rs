//! The desired pods as the union of every source's (kubelet's `pkg/kubelet/config/config.go`:
//! each source sends its full set, "SET" semantics, and the merge tells what was added, changed
//! and removed). Pure: the pod manager ([`crate::pod_manager`]) acts on the [`Changes`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use dockerlet_messages::source::{DesiredPod, ManifestError, PodSource, SourcePodsChanged};
use dockerlet_messages::PodUid;
use k8s_openapi::api::core::v1::Pod;

/// What one source update changed in the desired set.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    /// Pods no source wants any more.
    pub removed: Vec<DesiredPod>,
    /// New pods, and pods whose spec changed (other than `kubernetes.io/config.seen`).
    pub upserted: Vec<DesiredPod>,
}

/// Every source's latest set and their union.
#[derive(Debug)]
pub struct PodConfig {
    /// The sources this agent was started with: only when each has delivered once may
    /// containers of unknown pods be removed (a restarted agent would otherwise kill every pod
    /// before reading its manifests).
    expected: BTreeSet<PodSource>,
    /// Each source's latest pod set.
    sources: BTreeMap<PodSource, Vec<DesiredPod>>,
    /// Each source's rejected manifests.
    errors: BTreeMap<PodSource, Vec<ManifestError>>,
    /// The union, by UID (the first source to name a UID wins).
    desired: BTreeMap<PodUid, DesiredPod>,
}

impl PodConfig {
    /// An empty configuration waiting for `expected`.
    pub fn new(expected: impl IntoIterator<Item = PodSource>) -> Self {
        PodConfig {
            expected: expected.into_iter().collect(),
            sources: BTreeMap::new(),
            errors: BTreeMap::new(),
            desired: BTreeMap::new(),
        }
    }

    /// Has every expected source delivered at least once?
    pub fn sources_ready(&self) -> bool {
        self.expected.iter().all(|s| self.sources.contains_key(s))
    }

    /// The desired pod with this UID.
    pub fn get(&self, uid: &PodUid) -> Option<&DesiredPod> {
        self.desired.get(uid)
    }

    /// The UIDs some source wants.
    pub fn uids(&self) -> impl Iterator<Item = PodUid> + '_ {
        self.desired.keys().cloned()
    }

    /// Is this UID wanted by some source?
    pub fn contains(&self, uid: &PodUid) -> bool {
        self.desired.contains_key(uid)
    }

    /// How many pods are desired.
    pub fn len(&self) -> usize {
        self.desired.len()
    }

    /// Is nothing desired?
    pub fn is_empty(&self) -> bool {
        self.desired.is_empty()
    }

    /// Every source's rejected manifests.
    pub fn errors(&self) -> Vec<ManifestError> {
        self.errors.values().flatten().cloned().collect()
    }

    /// Apply one source's full set; returns what changed in the union.
    pub fn apply(&mut self, update: SourcePodsChanged) -> Changes {
        self.errors.insert(update.source, update.errors);
        self.sources.insert(update.source, update.pods);
        let mut wanted: BTreeMap<PodUid, DesiredPod> = BTreeMap::new();
        for pods in self.sources.values() {
            for p in pods {
                wanted.entry(p.id.uid.clone()).or_insert_with(|| p.clone());
            }
        }
        let mut changes = Changes::default();
        let gone: Vec<PodUid> = self
            .desired
            .keys()
            .filter(|u| !wanted.contains_key(*u))
            .cloned()
            .collect();
        for uid in gone {
            let pod = self.desired.remove(&uid).expect("listed above");
            changes.removed.push(pod);
        }
        for (uid, pod) in wanted {
            if let Some(old) = self.desired.get_mut(&uid) {
                if same_pod(&old.pod, &pod.pod) && !readiness_gates_changed(&old.pod, &pod.pod) {
                    // Kubelet's reconcile: keep the newer object (its status, resourceVersion),
                    // which is no change for the pod's worker.
                    old.pod = pod.pod;
                    continue;
                }
            }
            self.desired.insert(uid, pod.clone());
            changes.upserted.push(pod);
        }
        changes
    }
}

/// No change for the pod's worker, as kubelet's `podsDifferSemantically` judges it: the same
/// spec, labels, annotations (but `kubernetes.io/config.seen`, which a re-created source stamps
/// anew), deletion timestamp, grace period and generation. A status, resourceVersion or
/// managedFields change (the API echoing this node's own status writes) is not one; the same
/// shared object is compared without being walked.
pub fn same_pod(a: &Arc<Pod>, b: &Arc<Pod>) -> bool {
    if Arc::ptr_eq(a, b) {
        return true;
    }
    fn annotations(p: &Pod) -> impl Iterator<Item = (&String, &String)> {
        p.metadata
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != dockerlet_pod::annotations::CONFIG_SEEN)
    }
    let (ma, mb) = (&a.metadata, &b.metadata);
    a.spec == b.spec
        && ma.labels.as_ref().filter(|l| !l.is_empty()) == mb.labels.as_ref().filter(|l| !l.is_empty())
        && annotations(a).eq(annotations(b))
        && ma.deletion_timestamp == mb.deletion_timestamp
        && ma.deletion_grace_period_seconds == mb.deletion_grace_period_seconds
        && ma.generation == mb.generation
        && ma.name == mb.name
        && ma.namespace == mb.namespace
}

/// Whether a condition a readiness gate of the pod waits for changed in its status (kubelet's
/// `NeedToReconcilePodReadiness`): others set these, and the pod's Ready condition follows
/// them, so the worker needs the new status.
pub fn readiness_gates_changed(a: &Pod, b: &Pod) -> bool {
    let gates = b.spec.iter().flat_map(|s| s.readiness_gates.iter().flatten());
    let status_of = |p: &Pod, kind: &str| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == kind))
            .map(|c| c.status.clone())
    };
    gates
        .map(|g| g.condition_type.as_str())
        .any(|kind| status_of(a, kind) != status_of(b, kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, uid: &str, seen: &str) -> DesiredPod {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                annotations: Some([(dockerlet_pod::annotations::CONFIG_SEEN.to_string(), seen.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        DesiredPod::new(Arc::new(pod), PodSource::File, "test".into())
    }

    fn update(source: PodSource, pods: Vec<DesiredPod>) -> SourcePodsChanged {
        SourcePodsChanged {
            source,
            pods,
            errors: vec![],
        }
    }

    fn uids(pods: &[DesiredPod]) -> Vec<&str> {
        pods.iter().map(|p| p.id.uid.0.as_str()).collect()
    }

    /// The sources are ready only once every expected source has delivered, even an empty set.
    #[test]
    fn sources_are_ready_when_every_expected_source_delivered() {
        let mut config = PodConfig::new([PodSource::File, PodSource::Api]);
        assert!(!config.sources_ready());
        config.apply(update(PodSource::File, vec![]));
        assert!(!config.sources_ready(), "the API source has not delivered");
        config.apply(update(PodSource::Api, vec![]));
        assert!(config.sources_ready());
        assert!(PodConfig::new([]).sources_ready(), "no source: ready at once");
    }

    /// A source's set replaces its previous one: pods it drops are removed, others' stay; a
    /// re-stamped `config.seen` is no change; a UID two sources name is one pod.
    #[test]
    fn each_source_replaces_its_own_set() {
        let mut config = PodConfig::new([PodSource::File, PodSource::Http]);
        let c = config.apply(update(
            PodSource::File,
            vec![pod("a", "u1", "t0"), pod("b", "u2", "t0")],
        ));
        assert_eq!(uids(&c.upserted), ["u1", "u2"]);
        let c = config.apply(update(
            PodSource::Http,
            vec![pod("a", "u1", "t0"), pod("c", "u3", "t0")],
        ));
        assert_eq!(uids(&c.upserted), ["u3"]);
        let c = config.apply(update(PodSource::File, vec![pod("a", "u1", "t1")]));
        assert_eq!(uids(&c.removed), ["u2"]);
        assert!(c.upserted.is_empty(), "only config.seen changed");
        assert_eq!(config.len(), 2);
        assert_eq!(
            config.get(&"u3".into()).map(|p| p.id.to_string()),
            Some("default/c".into())
        );
        assert!(config.get(&"u2".into()).is_none());
        let c = config.apply(update(PodSource::Http, vec![]));
        assert_eq!(uids(&c.removed), ["u3"], "u1 is still wanted by the file source");
    }

    /// The API echoing the node's own status write (status and resourceVersion changed) is no
    /// change for the worker, but the newer object is kept; a label change is one.
    #[test]
    fn only_semantic_changes_reach_the_worker() {
        let mut config = PodConfig::new([PodSource::Api]);
        config.apply(update(PodSource::Api, vec![pod("a", "u1", "t0")]));
        let mut echoed = pod("a", "u1", "t0");
        let p = Arc::make_mut(&mut echoed.pod);
        p.metadata.resource_version = Some("7".into());
        p.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        });
        let c = config.apply(update(PodSource::Api, vec![echoed]));
        assert!(c.upserted.is_empty() && c.removed.is_empty());
        let kept = config.get(&PodUid("u1".into())).expect("still desired");
        assert_eq!(kept.pod.metadata.resource_version.as_deref(), Some("7"));
        let mut relabelled = pod("a", "u1", "t0");
        Arc::make_mut(&mut relabelled.pod).metadata.labels = Some([("tier".to_string(), "web".to_string())].into());
        let c = config.apply(update(PodSource::Api, vec![relabelled]));
        assert_eq!(uids(&c.upserted), ["u1"]);
    }

    /// Only the conditions a readiness gate waits for make a status change an update.
    #[test]
    fn a_readiness_gate_condition_change_is_an_update() {
        use k8s_openapi::api::core::v1::{PodCondition, PodReadinessGate, PodSpec, PodStatus};
        let with = |gate: bool, kind: &str, status: &str| Pod {
            spec: Some(PodSpec {
                readiness_gates: gate.then(|| {
                    vec![PodReadinessGate {
                        condition_type: "example.com/ready".into(),
                    }]
                }),
                ..Default::default()
            }),
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: kind.into(),
                    status: status.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let gated = |status| with(true, "example.com/ready", status);
        assert!(readiness_gates_changed(&gated("False"), &gated("True")));
        assert!(!readiness_gates_changed(&gated("True"), &gated("True")));
        assert!(!readiness_gates_changed(
            &with(true, "Ready", "False"),
            &with(true, "Ready", "True")
        ));
        assert!(!readiness_gates_changed(
            &with(false, "example.com/ready", "False"),
            &with(false, "example.com/ready", "True")
        ));
    }
}
