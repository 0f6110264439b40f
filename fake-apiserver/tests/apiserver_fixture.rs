//! The in-memory API server fixture (`dockerlet_fake_apiserver`) against raw HTTP,
//! kubectl and kube-rs: what the agent's API-server mode relies on must behave as on
//! kube-apiserver. No Docker needed.

use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig, PatchType, Subresource};
use serde_json::{json, Value};
use std::time::Duration;

mod common;
use common::Client;

fn pod(name: &str, node: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "dockerlet.local/busybox:1", "command": ["sleep", "3600"]}],
        },
    })
}

const PODS: &str = "/api/v1/namespaces/default/pods";

fn rv_of(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

/// A watch from a list's resourceVersion replays what changed after it, then streams live changes.
#[test]
fn a_watch_from_a_resource_version_replays_later_changes_then_streams_live_ones() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    assert_eq!(client.post(PODS, &pod("a", "n1", json!({}))).0, 201);
    let (code, list) = client.get(PODS);
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "PodList");
    let list_rv = rv_of(&list);
    let (_, b) = client.post(PODS, &pod("b", "n1", json!({})));
    assert!(rv_of(&b) > list_rv, "resourceVersions increase");
    let watch = client.watch(&format!(
        "{PODS}?watch=true&resourceVersion={list_rv}&timeoutSeconds=30"
    ));
    assert_eq!(watch.next_summary(), Some(("ADDED".into(), "b".into())));
    assert!(
        watch.quiet_for(Duration::from_millis(300)),
        "a is older than the resourceVersion"
    );
    client.post(PODS, &pod("c", "n1", json!({})));
    let (_, a) = client.get(&format!("{PODS}/a"));
    let mut a2 = a.clone();
    a2["metadata"]["labels"] = json!({"x": "y"});
    let (code, updated) = client.put(&format!("{PODS}/a"), &a2);
    assert_eq!(code, 200, "{updated}");
    assert!(rv_of(&updated) > rv_of(&a));
    client.delete(&format!("{PODS}/c"), Some(&json!({"gracePeriodSeconds": 0})));
    assert_eq!(watch.next_summary(), Some(("ADDED".into(), "c".into())));
    let modified = watch.next().expect("MODIFIED");
    assert_eq!(modified["type"], "MODIFIED");
    assert_eq!(modified["object"]["metadata"]["labels"]["x"], "y");
    // A delete with grace 0 first writes the deletion mark, then removes the pod (store.go
    // updateForGracefulDeletionAndFinalizers, then Storage.Delete).
    assert_eq!(watch.next_summary(), Some(("MODIFIED".into(), "c".into())));
    assert_eq!(watch.next_summary(), Some(("DELETED".into(), "c".into())));
}

/// A watch without a resourceVersion (or with 0) starts with ADDED for every current object.
#[test]
fn a_watch_without_resource_version_starts_with_added_for_every_object() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    client.post(PODS, &pod("a", "n1", json!({})));
    client.post(PODS, &pod("b", "n1", json!({})));
    for query in ["watch=1", "watch=true&resourceVersion=0"] {
        let watch = client.watch(&format!("{PODS}?{query}&timeoutSeconds=30"));
        assert_eq!(watch.next_summary(), Some(("ADDED".into(), "a".into())));
        assert_eq!(watch.next_summary(), Some(("ADDED".into(), "b".into())));
        assert!(watch.quiet_for(Duration::from_millis(200)));
    }
}

/// Field and label selectors filter lists and watches; objects entering or leaving the selection
/// show as ADDED and DELETED; unknown field labels are a 400.
#[test]
fn field_and_label_selectors_filter_lists_and_watches() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    client.post(PODS, &pod("a", "n1", json!({"app": "web"})));
    client.post(PODS, &pod("b", "n2", json!({"app": "web"})));
    client.post(PODS, &pod("c", "n1", json!({"app": "db"})));
    let names = |query: &str| -> Vec<String> {
        let (code, list) = client.get(&format!("/api/v1/pods?{query}"));
        assert_eq!(code, 200, "{query}: {list}");
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("fieldSelector=spec.nodeName%3Dn1"), ["a", "c"]);
    assert_eq!(names("fieldSelector=spec.nodeName%21%3Dn1"), ["b"]);
    assert_eq!(
        names("fieldSelector=metadata.name%3Da,metadata.namespace%3Ddefault"),
        ["a"]
    );
    assert_eq!(names("labelSelector=app%3Dweb"), ["a", "b"]);
    assert_eq!(
        names("labelSelector=app%3D%3Dweb,app%21%3Ddb&fieldSelector=spec.nodeName%3Dn1"),
        ["a"]
    );
    let (code, status) = client.get("/api/v1/pods?fieldSelector=spec.bogus%3Dx");
    assert_eq!(code, 400);
    assert_eq!(status["message"], "field label not supported: spec.bogus");

    let watch = client
        .watch("/api/v1/pods?watch=true&labelSelector=app%3Dweb&fieldSelector=spec.nodeName%3Dn1&timeoutSeconds=30");
    assert_eq!(watch.next_summary(), Some(("ADDED".into(), "a".into())));
    // c starts matching (ADDED), a stops (DELETED), b on another node is never seen.
    client.patch(
        &format!("{PODS}/c"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"app": "web"}}}),
    );
    client.patch(
        &format!("{PODS}/a"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"app": "db"}}}),
    );
    client.patch(
        &format!("{PODS}/b"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"x": "1"}}}),
    );
    assert_eq!(watch.next_summary(), Some(("ADDED".into(), "c".into())));
    assert_eq!(watch.next_summary(), Some(("DELETED".into(), "a".into())));
    assert!(watch.quiet_for(Duration::from_millis(300)));
}

/// An update or patch carrying a stale resourceVersion gets 409 Conflict; without one it is an
/// unconditional update.
#[test]
fn an_update_with_a_stale_resource_version_gets_409_conflict() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let (_, created) = client.post(PODS, &pod("a", "n1", json!({})));
    let mut first = created.clone();
    first["metadata"]["labels"] = json!({"v": "1"});
    assert_eq!(client.put(&format!("{PODS}/a"), &first).0, 200);
    let mut stale = created.clone();
    stale["metadata"]["labels"] = json!({"v": "2"});
    let (code, status) = client.put(&format!("{PODS}/a"), &stale);
    assert_eq!(code, 409);
    assert_eq!(status["reason"], "Conflict");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("the object has been modified"),
        "{status}"
    );
    let (code, _) = client.patch(
        &format!("{PODS}/a/status"),
        "application/merge-patch+json",
        &json!({"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "status": {"phase": "Running"}}),
    );
    assert_eq!(code, 409, "a resourceVersion in a patch is a precondition");
    let mut unconditional = stale.clone();
    unconditional["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    assert_eq!(client.put(&format!("{PODS}/a"), &unconditional).0, 200);
    assert_eq!(
        server.get("pods", "default", "a").unwrap()["metadata"]["labels"]["v"],
        "2"
    );
}

/// A watch from a resourceVersion older than the kept history gets kube-apiserver's answer: 200
/// and one ERROR event with a 410 Expired Status; then the stream ends.
#[test]
fn a_watch_from_an_expired_resource_version_gets_a_410_error_event() {
    let server = ApiServer::start_with(ApiServerConfig {
        history: 3,
        ..ApiServerConfig::default()
    })
    .unwrap();
    let client = Client::new(&server);
    let (_, first) = client.post(PODS, &pod("p0", "n1", json!({})));
    for i in 1..6 {
        client.post(PODS, &pod(&format!("p{i}"), "n1", json!({})));
    }
    let watch = client.watch(&format!("{PODS}?watch=true&resourceVersion={}", rv_of(&first)));
    let event = watch.next().expect("an ERROR event");
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["kind"], "Status");
    assert_eq!(event["object"]["code"], 410);
    assert_eq!(event["object"]["reason"], "Expired");
    assert!(watch.ended());
    // compact_history() expires everything before now.
    let rv = server.resource_version();
    client.post(PODS, &pod("late", "n1", json!({})));
    server.compact_history();
    let watch = client.watch(&format!("{PODS}?watch=true&resourceVersion={rv}"));
    assert_eq!(watch.next().unwrap()["object"]["code"], 410);
}

/// Merge patches of pods/status change the status and nothing else; a status change through the
/// main resource is ignored, as kube-apiserver ignores it.
#[test]
fn status_merge_patch_changes_only_the_status() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    client.post(PODS, &pod("a", "n1", json!({})));
    let (code, patched) = client.patch(
        &format!("{PODS}/a/status"),
        "application/merge-patch+json",
        &json!({"spec": {"nodeName": "elsewhere"}, "status": {"phase": "Running", "podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}]}}),
    );
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["status"]["phase"], "Running");
    assert_eq!(
        patched["spec"]["nodeName"], "n1",
        "spec changes through /status are ignored"
    );
    let (code, patched) = client.patch(
        &format!("{PODS}/a"),
        "application/merge-patch+json",
        &json!({"status": {"phase": "Failed"}, "metadata": {"annotations": {"k": "v"}}}),
    );
    assert_eq!(code, 200, "{patched}");
    assert_eq!(
        patched["status"]["phase"], "Running",
        "status changes through the main resource are ignored"
    );
    assert_eq!(patched["metadata"]["annotations"]["k"], "v");
    let (code, status) = client.patch(
        &format!("{PODS}/a/status"),
        "application/merge-patch+json",
        &json!({"status": {"podIP": "not-an-ip"}}),
    );
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
}

/// Strategic merge patches of status merge conditions by type and replace containerStatuses
/// whole (an atomic list); JSON patch and apply patch work too.
#[test]
fn strategic_merge_patch_merges_conditions_by_type() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    client.post(PODS, &pod("a", "n1", json!({})));
    let conditions = json!([
        {"type": "Initialized", "status": "True"},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
    ]);
    let (code, _) = client.patch(
        &format!("{PODS}/a/status"),
        "application/strategic-merge-patch+json",
        &json!({"status": {"conditions": conditions}}),
    );
    assert_eq!(code, 200);
    let (code, patched) = client.patch(
        &format!("{PODS}/a/status"),
        "application/strategic-merge-patch+json",
        &json!({"status": {
            "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}],
            "conditions": [{"type": "Ready", "status": "True", "reason": null}],
            "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "i", "imageID": "", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
        }}),
    );
    assert_eq!(code, 200, "{patched}");
    assert_eq!(
        patched["status"]["conditions"],
        json!([{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}])
    );
    assert_eq!(patched["status"]["containerStatuses"][0]["ready"], true);
    let (code, patched) = client.patch(
        &format!("{PODS}/a"),
        "application/json-patch+json",
        &json!([{"op": "add", "path": "/metadata/labels", "value": {"j": "p"}}]),
    );
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["metadata"]["labels"]["j"], "p");
    let (code, applied) = client.patch(
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1?fieldManager=test",
        "application/apply-patch+yaml",
        &json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1"}}),
    );
    assert_eq!(code, 201, "apply creates: {applied}");
    // A patch without the declared merge key is rejected: a plain Go error in kube-apiserver,
    // so a 500 without a reason (handlers/patch.go `interpretStrategicMergePatchError`).
    let (code, status) = client.patch(
        &format!("{PODS}/a/status"),
        "application/strategic-merge-patch+json",
        &json!({"status": {"conditions": [{"status": "True"}]}}),
    );
    assert_eq!(code, 500, "{status}");
    assert_eq!(
        status["message"],
        "map: map[status:True] does not contain declared merge key: type"
    );
}

/// Deleting a bound pod sets deletionTimestamp and deletionGracePeriodSeconds and keeps it; a
/// grace-0 delete removes it; a UID precondition mismatch is a 409; an unbound pod goes at once.
#[test]
fn deleting_a_bound_pod_sets_deletion_timestamp_and_grace_zero_removes_it() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let (_, created) = client.post(PODS, &pod("a", "n1", json!({})));
    let watch = client.watch(&format!("{PODS}?watch=true&resourceVersion={}", rv_of(&created)));
    let (code, deleting) = client.delete(&format!("{PODS}/a"), None);
    assert_eq!(code, 200);
    assert!(deleting["metadata"]["deletionTimestamp"].is_string(), "{deleting}");
    assert_eq!(deleting["metadata"]["deletionGracePeriodSeconds"], 30);
    let modified = watch.next().unwrap();
    assert_eq!(modified["type"], "MODIFIED");
    assert!(modified["object"]["metadata"]["deletionTimestamp"].is_string());
    assert!(
        server.get("pods", "default", "a").is_some(),
        "still there while terminating"
    );
    let (code, status) = client.delete(
        &format!("{PODS}/a"),
        Some(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": "wrong"}})),
    );
    assert_eq!(code, 409, "{status}");
    assert!(status["message"]
        .as_str()
        .unwrap()
        .contains("the UID in the precondition (wrong) does not match the UID in record"));
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let (code, _) = client.delete(
        &format!("{PODS}/a"),
        Some(&json!({"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})),
    );
    assert_eq!(code, 200);
    let shortened = watch.next().unwrap();
    assert_eq!(shortened["type"], "MODIFIED");
    assert_eq!(shortened["object"]["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(watch.next_summary(), Some(("DELETED".into(), "a".into())));
    assert!(server.get("pods", "default", "a").is_none());
    let (code, status) = client.delete(&format!("{PODS}/a"), None);
    assert_eq!((code, status["reason"].as_str()), (404, Some("NotFound")));
    client.post(PODS, &pod("unbound", "", json!({})));
    client.delete(&format!("{PODS}/unbound"), None);
    assert!(
        server.get("pods", "default", "unbound").is_none(),
        "unscheduled pods are deleted at once"
    );
}

/// DELETE on a collection (client-go's DeleteCollection, upstream "should delete a collection
/// of pods"): the selected pods are deleted as one by one, the list of them answered.
#[test]
fn deleting_a_collection_deletes_what_the_selector_selects() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    client.post(PODS, &pod("a", "n1", json!({"set": "x"})));
    client.post(PODS, &pod("b", "", json!({"set": "x"})));
    client.post(PODS, &pod("c", "n1", json!({"set": "y"})));
    let (code, list) = client.delete(&format!("{PODS}?labelSelector=set%3Dx"), None);
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["kind"], "PodList");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    let a = server
        .get("pods", "default", "a")
        .expect("a bound pod terminates first");
    assert!(a["metadata"]["deletionTimestamp"].is_string());
    assert!(
        server.get("pods", "default", "b").is_none(),
        "an unbound one goes at once"
    );
    assert!(server.get("pods", "default", "c").is_some(), "not selected");
    let (code, _) = client.delete("/api/v1/pods", None);
    assert_eq!(code, 405, "not across namespaces");
}

/// PodTemplates (upstream `podtemplates.go`, Conformance): create, get, patch, replace, list by
/// label, delete a collection; a template without containers is invalid.
#[test]
fn pod_templates_run_through_their_lifecycle() {
    const TEMPLATES: &str = "/api/v1/namespaces/default/podtemplates";
    let server = ApiServer::start();
    let client = Client::new(&server);
    let template = |name: &str| {
        json!({"apiVersion": "v1", "kind": "PodTemplate",
               "metadata": {"name": name, "labels": {"podtemplate-static": "true"}},
               "template": {"metadata": {"labels": {"app": name}},
                            "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}})
    };
    let (code, created) = client.post(TEMPLATES, &template("one"));
    assert_eq!(code, 201, "{created}");
    client.post(TEMPLATES, &template("two"));
    let (code, patched) = client.patch(
        &format!("{TEMPLATES}/one"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"podtemplate": "patched"}}}),
    );
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["metadata"]["labels"]["podtemplate"], "patched");
    let mut replaced = patched.clone();
    replaced["template"]["metadata"]["labels"]["replaced"] = json!("1");
    let (code, replaced) = client.put(&format!("{TEMPLATES}/one"), &replaced);
    assert_eq!(code, 200, "{replaced}");
    assert_eq!(replaced["template"]["metadata"]["labels"]["replaced"], "1");
    let (code, list) = client.get(&format!("{TEMPLATES}?labelSelector=podtemplate%3Dpatched"));
    assert_eq!((code, list["kind"].as_str()), (200, Some("PodTemplateList")), "{list}");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    let (code, _) = client.delete(&format!("{TEMPLATES}?labelSelector=podtemplate-static%3Dtrue"), None);
    assert_eq!(code, 200);
    let (_, list) = client.get(TEMPLATES);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0), "{list}");
    let mut empty = template("empty");
    empty["template"]["spec"]["containers"] = json!([]);
    let (code, status) = client.post(TEMPLATES, &empty);
    assert_eq!(code, 422, "{status}");
}

/// Unknown fields (in status or anywhere) and wrong types are rejected with a message naming the
/// field; `fieldValidation=Ignore` drops unknown fields instead.
#[test]
fn unknown_status_fields_and_wrong_types_are_rejected() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    client.post(PODS, &pod("a", "n1", json!({})));
    let (code, status) = client.patch(
        &format!("{PODS}/a/status"),
        "application/strategic-merge-patch+json",
        &json!({"status": {"phase": "Running", "podIp": "10.0.0.1"}}),
    );
    // handlers/patch.go: what a patch makes that does not decode is 422 against `patch`.
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"status.podIp\""),
        "{status}"
    );
    let (code, status) = client.patch(
        &format!("{PODS}/a/status"),
        "application/merge-patch+json",
        &json!({"status": {"containerStatuses": [{"name": "c", "ready": "yes", "restartCount": 0, "image": "i", "imageID": ""}]}}),
    );
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("status.containerStatuses[0].ready"),
        "{status}"
    );
    let mut bad = pod("b", "n1", json!({}));
    bad["spec"]["containers"][0]["ports"] = json!([{"containerPort": "80"}]);
    let (code, status) = client.post(PODS, &bad);
    assert_eq!(code, 400);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("spec.containers[0].ports[0].containerPort"),
        "{status}"
    );
    let mut unknown = pod("c", "n1", json!({}));
    unknown["spec"]["bogus"] = json!(true);
    assert_eq!(client.post(PODS, &unknown).0, 400);
    let (code, created) = client.post(&format!("{PODS}?fieldValidation=Ignore"), &unknown);
    assert_eq!(code, 201);
    assert!(created["spec"].get("bogus").is_none(), "unknown fields never land");
    let node =
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "two"}}});
    let (code, status) = client.post("/api/v1/nodes", &node);
    assert_eq!(code, 400, "invalid quantity: {status}");
}

/// Creates need a name (or generateName) and an existing namespace, and must not carry a
/// resourceVersion; duplicates are 409 AlreadyExists.
#[test]
fn create_requires_a_name_and_an_existing_namespace() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let mut nameless = pod("x", "n1", json!({}));
    nameless["metadata"] = json!({});
    let (code, status) = client.post(PODS, &nameless);
    assert_eq!(code, 422);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("metadata.name: Required value"),
        "{status}"
    );
    nameless["metadata"] = json!({"generateName": "gen-"});
    let (code, created) = client.post(PODS, &nameless);
    assert_eq!(code, 201);
    assert!(created["metadata"]["name"].as_str().unwrap().starts_with("gen-"));
    let (code, status) = client.post("/api/v1/namespaces/nope/pods", &pod("a", "n1", json!({})));
    assert_eq!(
        (code, status["message"].as_str()),
        (404, Some("namespaces \"nope\" not found"))
    );
    assert_eq!(client.post(PODS, &pod("a", "n1", json!({}))).0, 201);
    let (code, status) = client.post(PODS, &pod("a", "n1", json!({})));
    assert_eq!((code, status["reason"].as_str()), (409, Some("AlreadyExists")));
    let mut with_status = pod("s", "n1", json!({}));
    with_status["status"] = json!({"phase": "Running", "podIP": "10.1.1.1"});
    let (_, created) = client.post(PODS, &with_status);
    assert_eq!(
        created["status"],
        json!({"phase": "Pending", "qosClass": "BestEffort"}),
        "a pod's status on create is the server's"
    );
    let mut with_rv = pod("b", "n1", json!({}));
    with_rv["metadata"]["resourceVersion"] = json!("5");
    assert_eq!(client.post(PODS, &with_rv).0, 500);
    let created = server.get("pods", "default", "a").unwrap();
    assert!(created["metadata"]["uid"].is_string());
    assert!(created["metadata"]["creationTimestamp"].is_string());
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(created["status"]["phase"], "Pending");
    assert_eq!(created["spec"]["restartPolicy"], "Always");
}

/// A kubelet's node registration, node status patches, lease renewals (PUT with and without a
/// resourceVersion) and events.
#[test]
fn nodes_register_and_update_status_like_a_kubelet() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", "node-role.kubernetes.io/worker": ""}},
        "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
    });
    let (code, created) = client.post("/api/v1/nodes", &node);
    assert_eq!(code, 201, "{created}");
    assert!(created["metadata"].get("namespace").is_none());
    let ready = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}],
        "nodeInfo": {"kubeletVersion": "v1.37.0", "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "6", "osImage": "Debian", "containerRuntimeVersion": "docker://27", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
    }});
    let (code, patched) = client.patch(
        "/api/v1/nodes/n1/status",
        "application/strategic-merge-patch+json",
        &ready,
    );
    assert_eq!(code, 200, "{patched}");
    let (code, patched) = client.patch(
        "/api/v1/nodes/n1/status",
        "application/strategic-merge-patch+json",
        &json!({"status": {"conditions": [{"type": "MemoryPressure", "status": "False"}]}}),
    );
    assert_eq!(code, 200);
    assert_eq!(
        patched["status"]["conditions"].as_array().unwrap().len(),
        2,
        "merged by type"
    );
    let (code, same) = client.patch(
        "/api/v1/nodes/n1/status",
        "application/strategic-merge-patch+json",
        &json!({"status": {"conditions": [{"type": "MemoryPressure", "status": "False"}]}}),
    );
    assert_eq!(code, 200);
    assert_eq!(
        same["metadata"]["resourceVersion"], patched["metadata"]["resourceVersion"],
        "no-op writes keep the resourceVersion"
    );

    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "n1", "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": created["metadata"]["uid"]}]},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z"},
    });
    let (code, created_lease) = client.post(leases, &lease);
    assert_eq!(code, 201, "{created_lease}");
    let mut renewed = created_lease.clone();
    renewed["spec"]["renewTime"] = json!("2026-01-01T00:00:10.000000Z");
    let (code, renewed) = client.put(&format!("{leases}/n1"), &renewed);
    assert_eq!(code, 200);
    let mut stale = created_lease.clone();
    stale["spec"]["renewTime"] = json!("2026-01-01T00:00:20.000000Z");
    assert_eq!(client.put(&format!("{leases}/n1"), &stale).0, 409);
    stale["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    assert_eq!(
        client.put(&format!("{leases}/n1"), &stale).0,
        422,
        "a Lease PUT needs a resourceVersion (leaseStrategy.AllowUnconditionalUpdate is false)"
    );
    stale["metadata"]["resourceVersion"] = renewed["metadata"]["resourceVersion"].clone();
    assert!(rv_of(&renewed) > rv_of(&created_lease));
    let mut bad = stale.clone();
    bad["spec"]["leaseDurationSeconds"] = json!(0);
    let (code, refused) = client.put(&format!("{leases}/n1"), &bad);
    assert_eq!(code, 422);
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("spec.leaseDurationSeconds"),
        "{refused}"
    );

    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "n1.starting", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": "n1", "uid": "n1"},
        "reason": "Starting", "message": "Starting kubelet.", "type": "Normal",
        "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1,
    });
    assert_eq!(client.post("/api/v1/namespaces/default/events", &event).0, 201);
    let (code, _) = client.patch(
        "/api/v1/namespaces/default/events/n1.starting",
        "application/strategic-merge-patch+json",
        &json!({"count": 2, "lastTimestamp": "2026-01-01T00:01:00Z"}),
    );
    assert_eq!(code, 200);
    let (_, list) =
        client.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dn1,source%3Dkubelet");
    assert_eq!(list["items"][0]["count"], 2);
    let mut misplaced = event.clone();
    misplaced["metadata"]["name"] = json!("x");
    misplaced["involvedObject"]["namespace"] = json!("kube-system");
    assert_eq!(client.post("/api/v1/namespaces/default/events", &misplaced).0, 422);
    let mut new_style = event.clone();
    new_style["metadata"]["name"] = json!("y");
    new_style["eventTime"] = json!("2026-01-01T00:00:00.000000Z");
    let (code, status) = client.post("/api/v1/namespaces/default/events", &new_style);
    assert_eq!(
        code, 422,
        "events with eventTime need an action and a reporting instance: {status}"
    );
    assert!(
        status["message"].as_str().unwrap().contains("action: Required value"),
        "{status}"
    );
}

/// Secrets and configmaps round-trip; secret data must be base64.
#[test]
fn secrets_and_configmaps_round_trip() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dmFsdWU="}});
    let (code, created) = client.post("/api/v1/namespaces/default/secrets", &secret);
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["type"], "Opaque");
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"}, "data": {"k": "not base64!"}});
    assert_eq!(client.post("/api/v1/namespaces/default/secrets", &bad).0, 400);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a.txt": "x"}});
    assert_eq!(client.post("/api/v1/namespaces/default/configmaps", &cm).0, 201);
    let (code, got) = client.get("/api/v1/namespaces/default/configmaps/c");
    assert_eq!((code, &got["data"]["a.txt"]), (200, &json!("x")));
}

/// kubectl creates, lists (server-side Tables, `-o wide`), describes, patches and deletes a pod.
#[test]
fn kubectl_creates_gets_describes_and_deletes_a_pod() {
    let server = ApiServer::start();
    let manifest = server.dir().join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  nodeName: node-a\n  \
         containers:\n  - name: c\n    image: dockerlet.local/busybox:1\n    ports: [{containerPort: 80}]\n",
    )
    .unwrap();
    let manifest = manifest.to_str().unwrap();
    assert!(server
        .kubectl_ok(&["create", "-f", manifest])
        .contains("pod/web created"));
    let create = server.requests().into_iter().find(|r| r.method == "POST").unwrap();
    assert!(
        create.query.contains("fieldValidation=Strict"),
        "kubectl asks for server-side validation: {create:?}"
    );
    let wide = server.kubectl_ok(&["get", "pods", "-o", "wide"]);
    assert!(
        wide.contains("NAME") && wide.contains("READY") && wide.contains("NODE"),
        "{wide}"
    );
    assert!(
        wide.lines()
            .any(|l| l.starts_with("web") && l.contains("0/1") && l.contains("Pending") && l.contains("node-a")),
        "{wide}"
    );
    let described = server.kubectl_ok(&["describe", "pod", "web"]);
    assert!(
        described.contains("Name:") && described.contains("node-a") && described.contains("dockerlet.local/busybox:1"),
        "{described}"
    );
    let json_out: Value = serde_json::from_str(&server.kubectl_ok(&["get", "pod", "web", "-o", "json"])).unwrap();
    assert_eq!(json_out["spec"]["nodeName"], "node-a");
    server.kubectl_ok(&["label", "pod", "web", "tier=front"]);
    assert!(server
        .kubectl_ok(&["get", "pods", "-l", "tier=front", "-o", "name"])
        .contains("pod/web"));
    server.kubectl_ok(&["apply", "-f", manifest]);
    let bad = server.dir().join("bad.yaml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(manifest)
            .unwrap()
            .replace("web", "bad")
            .replace("nodeName", "nodename"),
    )
    .unwrap();
    let out = server.kubectl(&["create", "-f", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field \"spec.nodename\""));
    assert!(server
        .kubectl_ok(&["delete", "pod", "web", "--wait=false"])
        .contains("deleted"));
    assert!(server.kubectl_ok(&["get", "pods"]).contains("Terminating"));
    server.kubectl_ok(&["delete", "pod", "web", "--grace-period=0", "--force"]);
    assert!(server.get("pods", "default", "web").is_none());
}

/// kubectl lists nodes and leases with their usual columns.
#[test]
fn kubectl_get_nodes_and_leases_print_server_side_tables() {
    let server = ApiServer::start();
    server
        .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}))
        .unwrap();
    server
        .patch(
            "nodes",
            "",
            "node-a",
            PatchType::Strategic,
            &json!({"status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.37.0-dockerlet", "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}}}),
            Subresource::Status,
        )
        .unwrap();
    server
        .create(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "node-a", "namespace": "kube-node-lease"}, "spec": {"holderIdentity": "node-a"}}))
        .unwrap();
    let nodes = server.kubectl_ok(&["get", "nodes"]);
    assert!(
        nodes.contains("STATUS") && nodes.contains("ROLES") && nodes.contains("VERSION"),
        "{nodes}"
    );
    assert!(
        nodes
            .lines()
            .any(|l| l.starts_with("node-a") && l.contains("Ready") && l.contains("v1.37.0-dockerlet")),
        "{nodes}"
    );
    let leases = server.kubectl_ok(&["get", "lease", "-n", "kube-node-lease"]);
    assert!(
        leases.contains("HOLDER") && leases.lines().any(|l| l.starts_with("node-a")),
        "{leases}"
    );
    let described = server.kubectl_ok(&["describe", "node", "node-a"]);
    assert!(described.contains("node-a"), "{described}");
    assert!(server.kubectl_ok(&["get", "ns"]).contains("kube-node-lease"));
}

/// kube-rs against the fixture: its watcher yields Init, InitApply, InitDone, then Apply events,
/// with both the list-then-watch and the streaming-list initial strategies; status patches and
/// deletes round-trip.
#[test]
fn kube_rs_watcher_sees_init_then_apply_events() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
    use kube::runtime::watcher::{self, Event};

    let server = ApiServer::start();
    let runtime = common::multi_thread_runtime();
    runtime.block_on(async {
        let client = common::kube_client(&server).await;
        let pods: Api<Pod> = Api::namespaced(client, "default");
        let first: Pod = serde_json::from_value(pod("first", "node-a", json!({}))).unwrap();
        pods.create(&PostParams::default(), &first).await.unwrap();
        for config in [watcher::Config::default(), watcher::Config::default().streaming_lists()] {
            let config = config.fields("spec.nodeName=node-a");
            let mut stream = watcher::watcher(pods.clone(), config).boxed();
            let mut next = async || {
                tokio::time::timeout(Duration::from_secs(10), stream.next())
                    .await
                    .expect("an event within 10 s")
                    .expect("the stream goes on")
                    .expect("no watcher error")
            };
            assert!(matches!(next().await, Event::Init));
            match next().await {
                Event::InitApply(p) => assert_eq!(p.metadata.name.as_deref(), Some("first")),
                other => panic!("expected InitApply, got {other:?}"),
            }
            assert!(matches!(next().await, Event::InitDone));
            let name = format!("second-{}", server.resource_version());
            let second: Pod = serde_json::from_value(pod(&name, "node-a", json!({}))).unwrap();
            pods.create(&PostParams::default(), &second).await.unwrap();
            match next().await {
                Event::Apply(p) => assert_eq!(p.metadata.name.as_deref(), Some(name.as_str())),
                other => panic!("expected Apply, got {other:?}"),
            }
            let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
            let patched = pods
                .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&status))
                .await
                .unwrap();
            assert_eq!(patched.status.unwrap().phase.as_deref(), Some("Running"));
            match next().await {
                Event::Apply(p) => assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running")),
                other => panic!("expected Apply, got {other:?}"),
            }
            pods.delete(&name, &DeleteParams::default().grace_period(0))
                .await
                .unwrap();
            match next().await {
                Event::Apply(p) => assert!(p.metadata.deletion_timestamp.is_some(), "the deletion mark first"),
                other => panic!("expected Apply, got {other:?}"),
            }
            match next().await {
                Event::Delete(p) => assert_eq!(p.metadata.name.as_deref(), Some(name.as_str())),
                other => panic!("expected Delete, got {other:?}"),
            }
        }
    });
}

/// restart() keeps objects and port, stop() refuses connections, drop_watches() ends every
/// watch stream, and injected failures answer with the chosen status.
#[test]
fn restart_keeps_objects_and_drop_watches_ends_streams() {
    let mut server = ApiServer::start();
    let client = Client::new(&server);
    client.post(PODS, &pod("a", "n1", json!({})));
    let watch = client.watch(&format!("{PODS}?watch=true"));
    assert_eq!(watch.next_summary(), Some(("ADDED".into(), "a".into())));
    assert_eq!(server.watch_count(), 1);
    server.drop_watches();
    assert!(watch.ended());
    let watch = client.watch(&format!("{PODS}?watch=true"));
    assert!(watch.next().is_some());
    let url = server.url();
    server.stop();
    assert!(watch.ended(), "stopping ends watches");
    assert!(
        std::net::TcpStream::connect(server.addr()).is_err(),
        "stopped means refused"
    );
    server.restart();
    assert_eq!(server.url(), url);
    let (code, got) = client.get(&format!("{PODS}/a"));
    assert_eq!((code, &got["metadata"]["name"]), (200, &json!("a")));

    server.fail_requests(Some("PATCH"), "/status", 500, 1);
    let status = json!({"status": {"phase": "Running"}});
    assert_eq!(
        client
            .patch(&format!("{PODS}/a/status"), "application/merge-patch+json", &status)
            .0,
        500
    );
    assert_eq!(
        client
            .patch(&format!("{PODS}/a/status"), "application/merge-patch+json", &status)
            .0,
        200
    );
    let (code, _) = client.send("GET", "/api/v1/pods", "application/json", None);
    assert_eq!(code, 200);
    let wrong = ureq::get(&format!("{url}/api/v1/pods"))
        .header("Authorization", "Bearer wrong")
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401, "a wrong token is refused");
}

/// Watches with allowWatchBookmarks get bookmarks and a last one at their timeout;
/// sendInitialEvents ends its initial ADDED events with the initial-events-end bookmark.
#[test]
fn bookmarks_and_watch_timeouts() {
    let server = ApiServer::start_with(ApiServerConfig {
        bookmark_interval: Duration::from_millis(300),
        ..ApiServerConfig::default()
    })
    .unwrap();
    let client = Client::new(&server);
    client.post(PODS, &pod("a", "n1", json!({})));
    let rv = server.resource_version();
    let watch = client.watch(&format!(
        "{PODS}?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=2"
    ));
    let bookmark = watch.next().unwrap();
    assert_eq!(bookmark["type"], "BOOKMARK");
    assert_eq!(bookmark["object"]["kind"], "Pod");
    assert_eq!(bookmark["object"]["metadata"]["resourceVersion"], rv.to_string());
    let mut last = bookmark;
    while let Some(e) = watch.next() {
        last = e;
    }
    assert_eq!(
        last["type"], "BOOKMARK",
        "the stream ended after timeoutSeconds with a bookmark"
    );
    let watch = client.watch(&format!(
        "{PODS}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=5"
    ));
    assert_eq!(watch.next_summary(), Some(("ADDED".into(), "a".into())));
    let end = watch.next().unwrap();
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let (code, _) = client.get(&format!("{PODS}?watch=true&sendInitialEvents=true"));
    assert_eq!(code, 422, "sendInitialEvents needs resourceVersionMatch=NotOlderThan");
}

/// Discovery documents list what is served, as kube-apiserver shapes them.
#[test]
fn discovery_lists_the_served_resources() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let (_, version) = client.get("/version");
    assert_eq!(version["gitVersion"], "v1.37.0");
    let (_, api) = client.get("/api");
    assert_eq!(api["versions"], json!(["v1"]));
    let (_, v1) = client.get("/api/v1");
    let names: Vec<&str> = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for want in [
        "pods",
        "pods/status",
        "pods/binding",
        "nodes",
        "nodes/status",
        "events",
        "secrets",
        "configmaps",
        "namespaces",
    ] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    let (_, groups) = client.get("/apis");
    assert_eq!(
        groups["groups"][0]["preferredVersion"]["groupVersion"],
        "coordination.k8s.io/v1"
    );
    let (_, coordination) = client.get("/apis/coordination.k8s.io/v1");
    assert_eq!(coordination["resources"][0]["name"], "leases");
    assert_eq!(client.get("/api/v1/widgets").0, 404);
}

/// A pod bound through pods/binding gets its node; binding twice is a 409.
#[test]
fn binding_assigns_an_unscheduled_pod_to_a_node() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    client.post(PODS, &pod("a", "", json!({})));
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a"}, "target": {"kind": "Node", "name": "n1"}});
    assert_eq!(client.post(&format!("{PODS}/a/binding"), &binding).0, 201);
    assert_eq!(server.get("pods", "default", "a").unwrap()["spec"]["nodeName"], "n1");
    assert_eq!(client.post(&format!("{PODS}/a/binding"), &binding).0, 409);
    let (code, status) = client.patch(
        &format!("{PODS}/a"),
        "application/merge-patch+json",
        &json!({"spec": {"nodeName": "n2"}}),
    );
    assert_eq!(code, 422, "pod spec is immutable: {status}");
}

/// kube-rs's watcher (as the agent uses it) rides out what resilience tests do to the server:
/// dropped watches resume from their resourceVersion, an expired one re-lists (Init again), and
/// a stop/restart is survived with back-off.
#[test]
fn kube_rs_watcher_survives_dropped_watches_expiry_and_restart() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::Api;
    use kube::runtime::watcher::{self, Event};
    use kube::runtime::WatchStreamExt;

    let mut server = ApiServer::start();
    let runtime = common::multi_thread_runtime();
    runtime.block_on(async {
        let pods: Api<Pod> = Api::all(common::kube_client(&server).await);
        let mut stream = watcher::watcher(pods, watcher::Config::default().fields("spec.nodeName=n1"))
            .default_backoff()
            .boxed();
        // Polled in the background (a watch starts only when its stream is polled); events that
        // are not (transient) watcher errors arrive summarized.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(item) = stream.next().await {
                let summary = match item {
                    Ok(Event::Init) => "Init".to_string(),
                    Ok(Event::InitDone) => "InitDone".to_string(),
                    Ok(Event::InitApply(p)) => format!("InitApply {}", p.metadata.name.unwrap()),
                    Ok(Event::Apply(p)) => format!("Apply {}", p.metadata.name.unwrap()),
                    Ok(Event::Delete(p)) => format!("Delete {}", p.metadata.name.unwrap()),
                    Err(_) => continue,
                };
                if tx.send(summary).is_err() {
                    return;
                }
            }
        });
        let mut next = async || {
            tokio::time::timeout(Duration::from_secs(20), rx.recv())
                .await
                .expect("an event within 20 s")
                .expect("the stream goes on")
        };
        assert_eq!(next().await, "Init");
        assert_eq!(next().await, "InitDone");
        let watching = async |server: &ApiServer| {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while server.watch_count() == 0 {
                assert!(std::time::Instant::now() < deadline, "the watcher never watched");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        watching(&server).await;
        server.drop_watches();
        server.create(pod("a", "n1", json!({}))).unwrap();
        assert_eq!(next().await, "Apply a", "resumed from its resourceVersion");
        watching(&server).await;
        // A change it does not see moves the store past the watcher's resourceVersion; compacting
        // then expires it.
        server.create(pod("elsewhere", "n2", json!({}))).unwrap();
        server.compact_history();
        server.drop_watches();
        assert_eq!(next().await, "Init", "an expired resourceVersion makes it re-list");
        assert_eq!(next().await, "InitApply a");
        assert_eq!(next().await, "InitDone");
        server.stop();
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.restart();
        server.create(pod("b", "n1", json!({}))).unwrap();
        assert_eq!(next().await, "Apply b", "back after a restart");
    });
}

/// Lists page with `limit` and `continue` as kube-apiserver's do (remainingItemCount included);
/// a bad token is a 400; `kubectl get --chunk-size` walks the pages.
#[test]
fn lists_page_with_limit_and_continue() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    for i in 0..5 {
        client.post(PODS, &pod(&format!("p{i}"), "n1", json!({})));
    }
    let (status, first) = client.get(&format!("{PODS}?limit=2"));
    assert_eq!(status, 200);
    assert_eq!(first["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let mut names: Vec<String> = Vec::new();
    let mut page = first;
    loop {
        names.extend(
            page["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| p["metadata"]["name"].as_str().unwrap_or_default().to_string()),
        );
        let Some(token) = page["metadata"]["continue"].as_str().map(str::to_string) else {
            break;
        };
        let (status, next) = client.get(&format!("{PODS}?limit=2&continue={token}"));
        assert_eq!(status, 200, "{next}");
        page = next;
    }
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4"]);
    let (status, _) = client.get(&format!("{PODS}?limit=2&continue=garbage"));
    assert_eq!(status, 400);
    let table = server.kubectl_ok(&["get", "pods", "--chunk-size=2", "-o", "name"]);
    assert_eq!(table.lines().count(), 5, "kubectl get --chunk-size=2: {table}");
    let table = server.kubectl_ok(&["get", "pods", "--chunk-size=2"]);
    assert_eq!(table.lines().count(), 6, "a header and five rows: {table}");
}

/// Over TLS a request needs the bearer token or a client certificate the fixture's CA signed;
/// kubectl works with either, and without credentials it is refused.
#[test]
fn tls_requires_a_token_or_a_client_certificate() {
    let server = ApiServer::start_with(ApiServerConfig {
        tls: true,
        ..ApiServerConfig::default()
    })
    .unwrap();
    assert!(server.url().starts_with("https://"));
    server.kubectl_ok(&["get", "nodes"]);
    let kubectl = |kubeconfig: &std::path::Path| {
        std::process::Command::new(dockerlet_fake_apiserver::KUBECTL)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["get", "nodes"])
            .env_remove("KUBECONFIG")
            .output()
            .expect("run kubectl")
    };
    let with_cert = kubectl(&server.client_certificate_kubeconfig().unwrap());
    assert!(
        with_cert.status.success(),
        "{}",
        String::from_utf8_lossy(&with_cert.stderr)
    );
    // Without credentials (kubectl would prompt for them, so a bare TLS client asks).
    let status_line = |auth: Option<&str>| -> String {
        use std::io::{Read as _, Write as _};
        let mut roots = rustls::RootCertStore::empty();
        let pem = server.ca_pem().unwrap().as_bytes().to_vec();
        for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
        let tcp = std::net::TcpStream::connect(server.addr()).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let auth = auth.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
        write!(
            tls,
            "GET /api/v1/nodes HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        let _ = tls.read_to_string(&mut response);
        response.lines().next().unwrap_or_default().to_string()
    };
    assert!(status_line(None).contains(" 401"), "anonymous: {}", status_line(None));
    assert!(status_line(Some("Bearer wrong")).contains(" 401"));
    let token = format!("Bearer {}", server.token());
    assert!(status_line(Some(&token)).contains(" 200"));
}

/// A pod's `ephemeralcontainers` subresource (what `kubectl debug` patches) adds ephemeral
/// containers and changes nothing else; existing ones may not change or go, forbidden fields
/// and unknown targets are refused; a plain update leaves them as they are.
#[test]
fn the_ephemeralcontainers_subresource_only_adds_ephemeral_containers() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    client.post(PODS, &pod("a", "n1", json!({})));
    let sub = format!("{PODS}/a/ephemeralcontainers");
    let debugger = json!({"name": "debugger", "image": "dockerlet.local/busybox:1", "targetContainerName": "c", "stdin": true, "tty": true});
    let (code, patched) = client.patch(
        &sub,
        "application/strategic-merge-patch+json",
        &json!({"metadata": {"labels": {"x": "y"}}, "spec": {"nodeName": "elsewhere", "ephemeralContainers": [debugger]}}),
    );
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["spec"]["ephemeralContainers"][0]["name"], "debugger");
    assert_eq!(
        patched["spec"]["ephemeralContainers"][0]["terminationMessagePolicy"], "File",
        "defaulted"
    );
    assert_eq!(patched["spec"]["nodeName"], "n1", "only ephemeral containers change");
    assert!(patched["metadata"]["labels"]["x"].is_null(), "{patched}");
    assert_eq!(patched["metadata"]["generation"], 2);
    let (code, got) = client.get(&sub);
    assert_eq!(
        (code, &got["spec"]["ephemeralContainers"][0]["name"]),
        (200, &json!("debugger"))
    );
    let (code, status) = client.patch(
        &format!("{PODS}/a/status"),
        "application/merge-patch+json",
        &json!({"status": {"phase": "Running", "ephemeralContainerStatuses": [{"name": "debugger", "image": "dockerlet.local/busybox:1", "imageID": "", "ready": false, "restartCount": 0, "state": {"running": {}}}]}}),
    );
    assert_eq!(code, 200, "{status}");
    assert_eq!(
        status["metadata"]["generation"], 2,
        "a status write is no spec change: {status}"
    );

    // A second one through PUT of the subresource.
    let (_, mut pod_now) = client.get(&sub);
    pod_now["spec"]["ephemeralContainers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "debugger2", "image": "dockerlet.local/busybox:1"}));
    let (code, put) = client.put(&sub, &pod_now);
    assert_eq!(code, 200, "{put}");
    assert_eq!(put["spec"]["ephemeralContainers"].as_array().unwrap().len(), 2);

    let mut removed = put.clone();
    removed["spec"]["ephemeralContainers"].as_array_mut().unwrap().remove(0);
    let (code, refused) = client.put(&sub, &removed);
    assert_eq!(code, 422, "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains(
            "spec.ephemeralContainers[0]: Forbidden: existing ephemeral containers \"debugger\" may not be removed"
        ),
        "{refused}"
    );
    let (code, refused) = client.patch(
        &sub,
        "application/strategic-merge-patch+json",
        &json!({"spec": {"ephemeralContainers": [{"name": "p", "image": "i", "ports": [{"containerPort": 80}], "targetContainerName": "nope"}]}}),
    );
    assert_eq!(code, 422, "{refused}");
    let message = refused["message"].as_str().unwrap();
    // Without `$setElementOrder` a strategic merge puts the new item first (patch.go
    // `mergeSortedSlice`).
    assert!(
        message.contains("spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container"),
        "{message}"
    );
    assert!(
        message.contains("spec.ephemeralContainers[0].targetContainerName: Not found: \"nope\""),
        "{message}"
    );
    let (code, refused) = client.patch(
        &sub,
        "application/strategic-merge-patch+json",
        &json!({"spec": {"ephemeralContainers": [{"name": "c", "image": "i"}]}}),
    );
    assert_eq!(code, 422, "a name taken by a container: {refused}");

    // A plain update keeps them.
    let (_, current) = client.get(&format!("{PODS}/a"));
    let mut plain = current.clone();
    plain["spec"]["ephemeralContainers"] = json!([]);
    let (code, updated) = client.put(&format!("{PODS}/a"), &plain);
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["spec"]["ephemeralContainers"].as_array().unwrap().len(), 2);
}

/// A pod's generation counts spec changes only: a status write (what every kubelet does) leaves
/// it alone, and defaulting adds no empty lists a later write would see as a change.
#[test]
fn a_status_write_leaves_the_pod_generation_alone() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let (_, created) = client.post(PODS, &pod("a", "n1", json!({})));
    assert_eq!(created["metadata"]["generation"], 1, "{created}");
    let (_, patched) = client.patch(
        &format!("{PODS}/a/status"),
        "application/merge-patch+json",
        &json!({"status": {"phase": "Running"}}),
    );
    assert_eq!(patched["metadata"]["generation"], 1, "{patched}");
    assert!(patched["spec"].get("initContainers").is_none(), "{patched}");
    assert!(patched["spec"].get("ephemeralContainers").is_none(), "{patched}");
}

/// `node.k8s.io/v1` RuntimeClasses are served (a handler is required and immutable) and the
/// RuntimeClass admission plugin checks pods: an unknown class is 403, a class's overhead
/// becomes the pod's, a different overhead is refused.
#[test]
fn runtime_classes_are_served_and_admit_pods() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    const CLASSES: &str = "/apis/node.k8s.io/v1/runtimeclasses";
    let (code, refused) = client.post(
        CLASSES,
        &json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "bad"}}),
    );
    assert_eq!(code, 422, "{refused}");
    let class = json!({
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "with-overhead"},
        "handler": "test-handler",
        "overhead": {"podFixed": {"cpu": "10m", "memory": "1Mi"}},
    });
    let (code, created) = client.post(CLASSES, &class);
    assert_eq!(code, 201, "{created}");
    let (code, listed) = client.get(CLASSES);
    assert_eq!((code, listed["items"].as_array().map(Vec::len)), (200, Some(1)));
    let (code, refused) = client.patch(
        &format!("{CLASSES}/with-overhead"),
        "application/merge-patch+json",
        &json!({"handler": "other"}),
    );
    assert_eq!(code, 422, "the handler is immutable: {refused}");

    let mut unknown = pod("unknown", "n1", json!({}));
    unknown["spec"]["runtimeClassName"] = json!("nope");
    let (code, refused) = client.post(PODS, &unknown);
    assert_eq!(code, 403, "{refused}");
    assert_eq!(
        refused["message"],
        "pods \"unknown\" is forbidden: pod rejected: RuntimeClass \"nope\" not found"
    );
    let mut with = pod("with", "n1", json!({}));
    with["spec"]["runtimeClassName"] = json!("with-overhead");
    let (code, admitted) = client.post(PODS, &with);
    assert_eq!(code, 201, "{admitted}");
    assert_eq!(admitted["spec"]["overhead"], json!({"cpu": "10m", "memory": "1Mi"}));
    let mut mismatched = pod("mismatched", "n1", json!({}));
    mismatched["spec"]["runtimeClassName"] = json!("with-overhead");
    mismatched["spec"]["overhead"] = json!({"cpu": "1"});
    let (code, refused) = client.post(PODS, &mismatched);
    assert_eq!(code, 403, "{refused}");
}
