//! kube-apiserver's rules for what a node agent writes: pod status updates
//! (pkg/apis/core/validation/validation.go `ValidatePodStatusUpdate`, `validatePodIPs`,
//! `validateHostIPs`; pkg/registry/core/pod/strategy.go `podStatusStrategy.PrepareForUpdate`;
//! the v1 → internal conversion of `podIP`), Nodes (`ValidateNode`, `ValidateNodeUpdate`) and
//! Events (pkg/apis/core/validation/events.go `legacyValidateEvent`, the core/v1 API's only
//! event validation).
//!
//! Only upstream's rules are here: kube-apiserver does not check a pod status's phase, its
//! container statuses' names, states or restart counts (its comment: "Kubelet will never report
//! statuses like this"), so neither does the fixture.

use super::error::{go_quote, Cause};
use super::names::{is_dns_subdomain, is_label_value, qualified_name_errors, DNS_SUBDOMAIN_MSG};
use serde_json::{json, Value};

/// The v1 → internal → v1 round trip of `status.podIP`/`podIPs` (pkg/apis/core/v1 conversion):
/// a `podIP` that differs from `podIPs[0]` wins and becomes the whole list, a `podIP` alone
/// fills the list, and the stored `podIP` is `podIPs[0]`.
pub(crate) fn convert_pod_ips(pod: &mut Value) {
    let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let pod_ip = status
        .get("podIP")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let first = status
        .get("podIPs")
        .and_then(|ips| ips[0]["ip"].as_str())
        .map(str::to_string);
    if !pod_ip.is_empty() && first.as_deref() != Some(pod_ip.as_str()) {
        status.insert("podIPs".into(), json!([{"ip": pod_ip}]));
    }
    match status.get("podIPs").and_then(|ips| ips[0]["ip"].as_str()) {
        Some(ip) => {
            let ip = ip.to_string();
            status.insert("podIP".into(), json!(ip));
        }
        None => {
            status.remove("podIP");
        }
    }
}

/// `podStatusStrategy.PrepareForUpdate`: a status write without `qosClass` keeps the stored one
/// (it is immutable), and `observedGeneration`s left unset (the pod's and each condition's) keep
/// the stored ones.
pub(crate) fn prepare_pod_status_update(new: &mut Value, old: &Value) {
    let old_status = &old["status"];
    let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    for field in ["qosClass", "observedGeneration"] {
        let unset = status.get(field).is_none_or(|v| v.is_null() || v == "" || v == 0);
        if unset && !old_status[field].is_null() {
            status.insert(field.into(), old_status[field].clone());
        }
    }
    // Per type, the stored generations in order (validation allows a type more than once).
    let mut stored: Vec<(Value, Value)> = old_status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| (c["type"].clone(), c["observedGeneration"].clone()))
        .collect();
    for condition in status
        .get_mut("conditions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let generation = stored
            .iter()
            .position(|(t, _)| *t == condition["type"])
            .map(|i| stored.remove(i).1)
            .unwrap_or(Value::Null);
        let unset = condition
            .get("observedGeneration")
            .is_none_or(|v| v.is_null() || v == 0);
        if unset && !generation.is_null() && generation != 0 {
            condition["observedGeneration"] = generation;
        }
    }
}

/// `ValidatePodStatusUpdate`'s status rules.
pub(crate) fn validate_pod_status_update(new: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let status = &new["status"];
    // validatePodConditions: types other than the system ones are qualified names (upstream
    // builds the path under `metadata`).
    for (i, condition) in status["conditions"].as_array().into_iter().flatten().enumerate() {
        let kind = condition["type"].as_str().unwrap_or_default();
        if matches!(kind, "PodScheduled" | "Ready" | "Initialized") {
            continue;
        }
        for message in qualified_name_errors(kind) {
            causes.push(Cause::invalid_rendered(
                format!("metadata.conditions[{i}].Type"),
                &go_quote(kind),
                &message,
            ));
        }
    }
    let nominated = status["nominatedNodeName"].as_str().unwrap_or_default();
    if nominated != old["status"]["nominatedNodeName"].as_str().unwrap_or_default()
        && !nominated.is_empty()
        && !is_dns_subdomain(nominated)
    {
        causes.push(Cause::invalid_rendered(
            "status.nominatedNodeName",
            &go_quote(nominated),
            DNS_SUBDOMAIN_MSG,
        ));
    }
    let qos = status["qosClass"].as_str().unwrap_or_default();
    if qos != old["status"]["qosClass"].as_str().unwrap_or_default() {
        causes.push(Cause::invalid_rendered(
            "status.qosClass",
            &go_quote(qos),
            "field is immutable",
        ));
    }
    let policy = old["spec"]["restartPolicy"].as_str().unwrap_or_default();
    let restartable: Vec<&str> = old["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["restartPolicy"] == "Always")
        .filter_map(|c| c["name"].as_str())
        .collect();
    for (list, policy, skip) in [
        ("containerStatuses", policy, &[][..]),
        ("initContainerStatuses", policy, &restartable[..]),
        ("ephemeralContainerStatuses", "Never", &[][..]),
    ] {
        state_transitions(new, old, list, policy, skip, causes);
    }
    validate_ips(status, "podIPs", "core.PodIP", causes);
    let host_ips = status["hostIPs"].as_array().map(Vec::as_slice).unwrap_or_default();
    if let Some(first) = host_ips.first() {
        if first["ip"].as_str().unwrap_or_default() != status["hostIP"].as_str().unwrap_or_default() {
            causes.push(Cause::invalid_rendered(
                "status.hostIPs[0].ip",
                &go_quote(first["ip"].as_str().unwrap_or_default()),
                "must be equal to `hostIP`",
            ));
        }
        validate_ips(status, "hostIPs", "core.HostIP", causes);
    }
}

/// `ValidateContainerStateTransition`: under a restart policy other than Always, a container
/// that terminated (successfully, under OnFailure) may not leave the terminated state. The
/// path carries the index in the *stored* list, as upstream's does.
fn state_transitions(
    new: &Value,
    old: &Value,
    list: &str,
    policy: &str,
    restartable: &[&str],
    causes: &mut Vec<Cause>,
) {
    if policy == "Always" {
        return;
    }
    let now = new["status"][list].as_array().map(Vec::as_slice).unwrap_or_default();
    for (i, before) in old["status"][list].as_array().into_iter().flatten().enumerate() {
        let terminated = &before["state"]["terminated"];
        if !terminated.is_object()
            || (terminated["exitCode"].as_i64().unwrap_or(0) != 0 && policy == "OnFailure")
            || before["name"].as_str().is_some_and(|n| restartable.contains(&n))
        {
            continue;
        }
        for after in now {
            if after["name"] == before["name"] && !after["state"]["terminated"].is_object() {
                causes.push(Cause::forbidden(
                    format!("status.{list}[{i}].state"),
                    "may not be transitioned to non-terminated state",
                ));
            }
        }
    }
}

/// `validatePodIPs`/`validateHostIPs`: valid addresses, at most one per family, no duplicates.
fn validate_ips(status: &Value, list: &str, go_type: &str, causes: &mut Vec<Cause>) {
    let ips: Vec<&str> = status[list]
        .as_array()
        .into_iter()
        .flatten()
        .map(|ip| ip["ip"].as_str().unwrap_or_default())
        .collect();
    let parsed: Vec<Option<std::net::IpAddr>> = ips.iter().map(|ip| ip.parse().ok()).collect();
    for (i, ip) in ips.iter().enumerate() {
        if parsed[i].is_none() {
            causes.push(Cause::invalid_rendered(
                format!("status.{list}[{i}]"),
                &go_quote(ip),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    if ips.len() < 2 {
        return;
    }
    let rendered: Vec<String> = ips
        .iter()
        .map(|ip| format!("{go_type}{{IP:{}}}", go_quote(ip)))
        .collect();
    let mut duplicates = Vec::new();
    for (i, ip) in ips.iter().enumerate() {
        if ips[..i].contains(ip) {
            duplicates.push(Cause::duplicate(format!("status.{list}[{i}]"), &rendered[i]));
        }
    }
    let mut family = Vec::new();
    let dual_stack = match parsed.iter().copied().collect::<Option<Vec<_>>>() {
        Some(addrs) => addrs.iter().any(|a| a.is_ipv4()) && addrs.iter().any(|a| a.is_ipv6()),
        None => {
            family.push(Cause {
                reason: "InternalError",
                field: format!("status.{list}"),
                detail: "Internal error: failed to check for dual stack with error:ip <nil> is invalid".into(),
            });
            false
        }
    };
    if !dual_stack || ips.len() > 2 {
        family.push(Cause::invalid_rendered(
            format!("status.{list}"),
            &format!("[]{go_type}{{{}}}", rendered.join(", ")),
            "may specify no more than one IP for each IP family",
        ));
    }
    // validatePodIPs checks the families first, validateHostIPs the duplicates.
    if list == "podIPs" {
        causes.extend(family.into_iter().chain(duplicates));
    } else {
        causes.extend(duplicates.into_iter().chain(family));
    }
}

/// `ValidateNode`'s rules a node agent can meet: its taints (under `metadata.taints`, as
/// upstream builds the path) and its capacity and allocatable quantities.
pub(crate) fn validate_node(node: &Value, causes: &mut Vec<Cause>) {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, taint) in node["spec"]["taints"].as_array().into_iter().flatten().enumerate() {
        let path = format!("metadata.taints[{i}]");
        let key = taint["key"].as_str().unwrap_or_default();
        let value = taint["value"].as_str().unwrap_or_default();
        let effect = taint["effect"].as_str().unwrap_or_default();
        for message in qualified_name_errors(key) {
            causes.push(Cause::invalid_rendered(format!("{path}.key"), &go_quote(key), &message));
        }
        if !is_label_value(value) {
            causes.push(Cause::invalid_rendered(
                format!("{path}.value"),
                &go_quote(value),
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and \
                 must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', \
                 regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ));
        }
        match effect {
            "" => causes.push(Cause::required(format!("{path}.effect"), "")),
            "NoSchedule" | "PreferNoSchedule" | "NoExecute" => {}
            other => causes.push(Cause::unsupported(
                format!("{path}.effect"),
                &json!(other),
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            )),
        }
        if seen.contains(&(key, effect)) {
            let mut duplicate = Cause::duplicate(
                path,
                &format!(
                    "core.Taint{{Key:{}, Value:{}, Effect:{}, TimeAdded:<nil>}}",
                    go_quote(key),
                    go_quote(value),
                    go_quote(effect)
                ),
            );
            duplicate
                .detail
                .push_str(": taints must be unique by key and effect pair");
            causes.push(duplicate);
            continue;
        }
        seen.push((key, effect));
    }
    for list in ["capacity", "allocatable"] {
        for (name, quantity) in node["status"][list].as_object().into_iter().flatten() {
            let text = quantity.as_str().unwrap_or_default();
            let path = format!("status.{list}.{name}");
            let value = dockerlet_pod::quantity::quantity_value(text).unwrap_or_default();
            if value < 0.0 {
                causes.push(Cause::invalid_rendered(
                    &path,
                    &go_quote(text),
                    "must be greater than or equal to 0",
                ));
            }
            if is_integer_resource(name) && value.fract() != 0.0 {
                causes.push(Cause::invalid_rendered(&path, &go_quote(text), "must be an integer"));
            }
        }
    }
}

/// `helper.IsIntegerResourceName` for what a Node reports: `pods` and extended resources.
fn is_integer_resource(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    name == "pods"
        || (!native && !name.starts_with("requests.") && qualified_name_errors(&format!("requests.{name}")).is_empty())
}

/// `ValidateNodeUpdate`'s rules beyond [`validate_node`]: no address twice, and `podCIDRs` and
/// `providerID` fixed once set.
pub(crate) fn validate_node_update(node: &Value, old: &Value, causes: &mut Vec<Cause>) {
    let addresses = node["status"]["addresses"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, address) in addresses.iter().enumerate() {
        if addresses[..i].contains(address) {
            causes.push(Cause::duplicate(
                format!("status.addresses[{i}]"),
                &format!(
                    "core.NodeAddress{{Type:{}, Address:{}}}",
                    go_quote(address["type"].as_str().unwrap_or_default()),
                    go_quote(address["address"].as_str().unwrap_or_default())
                ),
            ));
        }
    }
    let old_cidrs = old["spec"]["podCIDRs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let cidrs = node["spec"]["podCIDRs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if !old_cidrs.is_empty() {
        let changed = if old_cidrs.len() != cidrs.len() {
            1
        } else {
            old_cidrs.iter().zip(cidrs).filter(|(a, b)| a != b).count()
        };
        for _ in 0..changed {
            causes.push(Cause::forbidden(
                "spec.podCIDRs",
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
    }
    let old_provider = old["spec"]["providerID"].as_str().unwrap_or_default();
    if !old_provider.is_empty() && node["spec"]["providerID"].as_str().unwrap_or_default() != old_provider {
        causes.push(Cause::forbidden(
            "spec.providerID",
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
}

/// `legacyValidateEvent`, all the core/v1 API checks of an Event (create and update alike):
/// the namespaces agree; an event with `eventTime` (a "new" event) also needs
/// `reportingController` (v1's `reportingComponent`, a qualified name), `reportingInstance`,
/// `action` and `reason`, within their lengths.
pub(crate) fn validate_event(event: &Value, causes: &mut Vec<Cause>) {
    let ns = event["metadata"]["namespace"].as_str().unwrap_or_default();
    let involved_ns = event["involvedObject"]["namespace"].as_str().unwrap_or_default();
    let mismatch = || {
        Cause::invalid_rendered(
            "involvedObject.namespace",
            &go_quote(involved_ns),
            "does not match event.namespace",
        )
    };
    let text = |field: &str| event[field].as_str().unwrap_or_default();
    let too_long =
        |field: &str, max: usize| Cause::invalid_rendered(field, "\"\"", &format!("can have at most {max} characters"));
    if !event["eventTime"].is_string() {
        let bad = if involved_ns.is_empty() {
            !ns.is_empty() && ns != "default"
        } else {
            involved_ns != ns
        };
        if bad {
            causes.push(mismatch());
        }
        return;
    }
    if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
        causes.push(mismatch());
    }
    let controller = text("reportingComponent");
    if controller.is_empty() {
        causes.push(Cause::required("reportingController", ""));
    }
    for message in qualified_name_errors(controller) {
        causes.push(Cause::invalid_rendered(
            "reportingController",
            &go_quote(controller),
            &message,
        ));
    }
    for (field, json_field, max) in [
        ("reportingInstance", "reportingInstance", 128),
        ("action", "action", 128),
        ("reason", "reason", 128),
    ] {
        if text(json_field).is_empty() {
            causes.push(Cause::required(field, ""));
        }
        if text(json_field).len() > max {
            causes.push(too_long(field, max));
        }
    }
    if text("message").len() > 1024 {
        causes.push(too_long("message", 1024));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(causes: &[Cause]) -> Vec<String> {
        causes.iter().map(Cause::to_string).collect()
    }

    /// validation.go `validatePodIPs`/`validateHostIPs` with upstream's paths and messages.
    #[test]
    fn pod_and_host_ips_are_checked_as_upstream_checks_them() {
        let old = json!({"spec": {"restartPolicy": "Always"}, "status": {}});
        let new = json!({"status": {
            "podIPs": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
            "hostIP": "10.1.0.1", "hostIPs": [{"ip": "10.1.0.2"}, {"ip": "nope"}],
        }});
        let mut causes = Vec::new();
        validate_pod_status_update(&new, &old, &mut causes);
        assert_eq!(
            messages(&causes),
            [
                "status.podIPs: Invalid value: []core.PodIP{core.PodIP{IP:\"10.0.0.1\"}, core.PodIP{IP:\"10.0.0.2\"}}: may specify no more than one IP for each IP family",
                "status.hostIPs[0].ip: Invalid value: \"10.1.0.2\": must be equal to `hostIP`",
                "status.hostIPs[1]: Invalid value: \"nope\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "status.hostIPs: Internal error: failed to check for dual stack with error:ip <nil> is invalid",
                "status.hostIPs: Invalid value: []core.HostIP{core.HostIP{IP:\"10.1.0.2\"}, core.HostIP{IP:\"nope\"}}: may specify no more than one IP for each IP family",
            ]
        );
    }

    /// The v1 conversion: `podIP` wins over a different `podIPs[0]`, and fills a missing list.
    #[test]
    fn pod_ip_is_authoritative_over_pod_ips() {
        let mut pod = json!({"status": {"podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}});
        convert_pod_ips(&mut pod);
        assert_eq!(
            pod["status"],
            json!({"podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.9"}]})
        );
        let mut pod = json!({"status": {"podIPs": [{"ip": "10.0.0.1"}]}});
        convert_pod_ips(&mut pod);
        assert_eq!(pod["status"]["podIP"], "10.0.0.1");
    }

    /// `ValidateContainerStateTransition` and its init-container twin: indexes of the stored
    /// list, restartable init containers exempt, ephemeral containers never restart.
    #[test]
    fn terminated_containers_stay_terminated_as_upstream_rules() {
        let done = json!({"terminated": {"exitCode": 0}});
        let old = json!({
            "spec": {"restartPolicy": "OnFailure", "initContainers": [{"name": "side", "restartPolicy": "Always"}]},
            "status": {
                "containerStatuses": [{"name": "x", "state": {"running": {}}}, {"name": "a", "state": done}],
                "initContainerStatuses": [{"name": "side", "state": done}, {"name": "init", "state": done}],
                "ephemeralContainerStatuses": [{"name": "dbg", "state": {"terminated": {"exitCode": 1}}}],
            },
        });
        let new = json!({"status": {
            "containerStatuses": [{"name": "a", "state": {"running": {}}}],
            "initContainerStatuses": [{"name": "side", "state": {"running": {}}}, {"name": "init", "state": {"waiting": {}}}],
            "ephemeralContainerStatuses": [{"name": "dbg", "state": {"running": {}}}],
        }});
        let mut causes = Vec::new();
        validate_pod_status_update(&new, &old, &mut causes);
        assert_eq!(
            messages(&causes),
            [
                "status.containerStatuses[1].state: Forbidden: may not be transitioned to non-terminated state",
                "status.initContainerStatuses[1].state: Forbidden: may not be transitioned to non-terminated state",
                "status.ephemeralContainerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state",
            ]
        );
    }

    /// Custom condition types are qualified names (under `metadata`, as upstream's path goes);
    /// the QoS class may not change; phases and unknown container names are not checked.
    #[test]
    fn conditions_and_qos_class() {
        let old = json!({"spec": {}, "status": {"qosClass": "BestEffort"}});
        let new = json!({"status": {
            "phase": "Whatever", "qosClass": "Guaranteed",
            "conditions": [{"type": "Ready"}, {"type": "bad type!"}],
            "containerStatuses": [{"name": "not-in-spec", "restartCount": -1}],
        }});
        let mut causes = Vec::new();
        validate_pod_status_update(&new, &old, &mut causes);
        assert_eq!(
            messages(&causes),
            [
                "metadata.conditions[1].Type: Invalid value: \"bad type!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "status.qosClass: Invalid value: \"Guaranteed\": field is immutable",
            ]
        );
    }

    /// PrepareForUpdate backfills the QoS class and observed generations left unset.
    #[test]
    fn a_status_write_keeps_qos_class_and_observed_generations() {
        let old = json!({"status": {"qosClass": "Burstable", "observedGeneration": 3,
                                    "conditions": [{"type": "Ready", "observedGeneration": 2}]}});
        let mut new = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X"}]}});
        prepare_pod_status_update(&mut new, &old);
        assert_eq!(
            new["status"],
            json!({"qosClass": "Burstable", "observedGeneration": 3,
                   "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2}, {"type": "X"}]})
        );
    }

    /// Nodes: taints, quantities, duplicate addresses.
    #[test]
    fn node_rules() {
        let node = json!({
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule"}, {"key": "j", "effect": "Sometimes"}]},
            "status": {"capacity": {"pods": "1.5", "cpu": "-1"}, "addresses": [{"type": "Hostname", "address": "n"}, {"type": "Hostname", "address": "n"}]},
        });
        let mut causes = Vec::new();
        validate_node(&node, &mut causes);
        validate_node_update(&node, &json!({}), &mut causes);
        assert_eq!(
            messages(&causes),
            [
                "metadata.taints[1]: Duplicate value: core.Taint{Key:\"k\", Value:\"\", Effect:\"NoSchedule\", TimeAdded:<nil>}: taints must be unique by key and effect pair",
                "metadata.taints[2].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                "status.capacity.cpu: Invalid value: \"-1\": must be greater than or equal to 0",
                "status.capacity.pods: Invalid value: \"1.5\": must be an integer",
                "status.addresses[1]: Duplicate value: core.NodeAddress{Type:\"Hostname\", Address:\"n\"}",
            ]
        );
    }

    /// events.go `legacyValidateEvent`: old-style events only need agreeing namespaces.
    #[test]
    fn event_rules() {
        let mut causes = Vec::new();
        validate_event(
            &json!({"metadata": {"namespace": "default"}, "involvedObject": {"namespace": "other"}, "reason": "x"}),
            &mut causes,
        );
        validate_event(
            &json!({"metadata": {"namespace": "default"}, "involvedObject": {}, "eventTime": "2026-01-01T00:00:00.000000Z",
                    "reportingComponent": "kubelet", "reportingInstance": "n", "reason": "R", "action": "a".repeat(129)}),
            &mut causes,
        );
        assert_eq!(
            messages(&causes),
            [
                "involvedObject.namespace: Invalid value: \"other\": does not match event.namespace",
                "action: Invalid value: \"\": can have at most 128 characters",
            ]
        );
    }
}
