//! The runtime's view of the node's pods, as kubelet's `/runningpods/` shows it
//! (`pkg/kubelet/container.Pod.ToAPIPod` over the runtime's running pods): a pod per ready
//! sandbox or running container, with only its name, namespace and UID, and each running
//! container's name and image.

use std::collections::BTreeMap;

use dockerlet_messages::runtime::{ContainerRole, ObservedContainer, RuntimeState};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The pods of `containers` that have a running sandbox or container, in namespace and name
/// order; a pod's containers are its running non-sandbox containers, in name order.
pub fn running_pods(containers: &[ObservedContainer]) -> Vec<Pod> {
    let mut pods: BTreeMap<(&str, &str, &str), Vec<&ObservedContainer>> = BTreeMap::new();
    for c in containers.iter().filter(|c| c.state == RuntimeState::Running) {
        let key = (c.pod_namespace.as_str(), c.pod_name.as_str(), c.pod_uid.0.as_str());
        let entry = pods.entry(key).or_default();
        if c.role != ContainerRole::Sandbox {
            entry.push(c);
        }
    }
    pods.into_iter()
        .map(|((namespace, name, uid), mut running)| {
            running.sort_by(|a, b| a.name.cmp(&b.name));
            Pod {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    namespace: Some(namespace.to_string()),
                    uid: Some(uid.to_string()),
                    ..ObjectMeta::default()
                },
                spec: Some(PodSpec {
                    containers: running
                        .into_iter()
                        .map(|c| Container {
                            name: c.name.clone(),
                            image: Some(c.image.clone()),
                            ..Container::default()
                        })
                        .collect(),
                    ..PodSpec::default()
                }),
                status: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::ParsedLabels;
    use dockerlet_messages::ContainerId;

    fn observed(pod: &str, name: &str, role: ContainerRole, state: RuntimeState) -> ObservedContainer {
        ParsedLabels {
            pod_uid: format!("uid-{pod}"),
            pod_name: pod.into(),
            pod_namespace: "ns".into(),
            name: name.into(),
            role,
            attempt: 0,
            spec_hash: String::new(),
            backoff_step: 0,
            sandbox_id: None,
            host_network: false,
            pod_grace_seconds: None,
        }
        .observed(ContainerId(format!("{pod}-{name}")), state, format!("img/{name}:1"))
    }

    /// Only running containers count; a pod with a running sandbox and nothing else running is
    /// listed without containers; a pod with nothing running is not listed.
    #[test]
    fn running_pods_list_what_runs() {
        let pods = running_pods(&[
            observed("b", "POD", ContainerRole::Sandbox, RuntimeState::Running),
            observed("b", "web", ContainerRole::App, RuntimeState::Running),
            observed("b", "init", ContainerRole::Init, RuntimeState::Exited),
            observed("b", "side", ContainerRole::App, RuntimeState::Running),
            observed("a", "POD", ContainerRole::Sandbox, RuntimeState::Running),
            observed("a", "crashed", ContainerRole::App, RuntimeState::Exited),
            observed("c", "POD", ContainerRole::Sandbox, RuntimeState::Exited),
            observed("c", "done", ContainerRole::App, RuntimeState::Exited),
        ]);
        let json = serde_json::to_value(&pods).unwrap();
        assert_eq!(
            json,
            serde_json::json!([
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "ns", "uid": "uid-a"}, "spec": {"containers": []}},
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b", "namespace": "ns", "uid": "uid-b"}, "spec": {"containers": [
                    {"name": "side", "image": "img/side:1"},
                    {"name": "web", "image": "img/web:1"},
                ]}},
            ])
        );
    }
}
