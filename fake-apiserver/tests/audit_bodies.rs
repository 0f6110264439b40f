//! Request bodies, patches and validation against kube-apiserver's answers: each test names the
//! upstream source it follows (kubernetes/kubernetes paths). What the agent sends is covered
//! the way it sends it: pod status as a JSON merge patch of the whole status, node status as a
//! strategic merge patch, events created then merge-patched (kube/src/api.rs); kubectl's
//! patches, applies and protobuf bodies as the integration tests send them.
//! See the README's audit, "Bodies, patches and validation".

use dockerlet_fake_apiserver::ApiServer;
use serde_json::{json, Value};

mod common;
use common::Answer;

fn send_json(server: &ApiServer, method: &str, path: &str, content_type: &str, body: &Value) -> Answer {
    let body = body.to_string();
    common::request(
        server,
        server.token(),
        method,
        path,
        content_type,
        Some(body.as_bytes()),
    )
}

const PODS: &str = "/api/v1/namespaces/default/pods";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"nodeName": "n1", "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}})
}

/// A pod in the store, as the scheduler left it.
fn create_pod(server: &ApiServer, name: &str) -> Value {
    let created = send_json(server, "POST", PODS, "application/json", &pod(name));
    assert_eq!(created.code, 201, "{}", created.body);
    created.body
}

fn condition_types(obj: &Value) -> Vec<String> {
    obj["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The agent's pod status write (kube/src/api.rs `patch_pod_status`): a JSON merge patch of the
/// whole status. pkg/registry/core/pod/strategy.go `podStatusStrategy.PrepareForUpdate`: a
/// status without `qosClass` keeps the stored one, and a different one is 422 (validation.go
/// `ValidatePodStatusUpdate`: immutable). pkg/apis/core/v1 conversion: `podIP` alone fills
/// `podIPs`.
#[test]
fn the_agents_pod_status_merge_patch_keeps_the_qos_class_and_fills_pod_ips() {
    let server = ApiServer::start();
    create_pod(&server, "p");
    let status = json!({"status": {"phase": "Running", "podIP": "10.0.0.5", "hostIP": "10.1.0.1",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "busybox:1", "imageID": "",
                               "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}});
    let written = send_json(&server, "PATCH", &format!("{PODS}/p/status"), MERGE, &status);
    assert_eq!(written.code, 200, "{}", written.body);
    assert_eq!(
        written.body["status"]["qosClass"], "BestEffort",
        "kept: {}",
        written.body
    );
    assert_eq!(written.body["status"]["podIPs"], json!([{"ip": "10.0.0.5"}]));
    let changed = send_json(
        &server,
        "PATCH",
        &format!("{PODS}/p/status"),
        MERGE,
        &json!({"status": {"qosClass": "Guaranteed"}}),
    );
    assert_eq!(changed.code, 422, "{}", changed.body);
    assert_eq!(
        changed.message(),
        "Pod \"p\" is invalid: status.qosClass: Invalid value: \"Guaranteed\": field is immutable"
    );
}

/// validation.go `ValidatePodStatusUpdate` has no check of phases, container names, restart
/// counts or state counts ("Kubelet will never report statuses like this"); it does keep a
/// terminated container terminated under `Never` (`ValidateContainerStateTransition`, path by
/// the stored index) and custom condition types qualified names (path under `metadata`).
#[test]
fn pod_status_validation_is_upstreams() {
    let server = ApiServer::start();
    create_pod(&server, "p");
    let status = |s: Value| {
        send_json(
            &server,
            "PATCH",
            &format!("{PODS}/p/status"),
            MERGE,
            &json!({"status": s}),
        )
    };
    let lenient = status(json!({"phase": "Sideways", "containerStatuses": [
        {"name": "ghost", "restartCount": -1, "ready": false, "image": "i", "imageID": "",
         "state": {"running": {}, "waiting": {}}},
        {"name": "c", "restartCount": 0, "ready": false, "image": "i", "imageID": "",
         "state": {"terminated": {"exitCode": 0}}}]}));
    assert_eq!(lenient.code, 200, "{}", lenient.body);
    let back = status(
        json!({"containerStatuses": [{"name": "c", "restartCount": 0, "ready": false,
        "image": "i", "imageID": "", "state": {"running": {}}}]}),
    );
    assert_eq!(back.code, 422, "{}", back.body);
    assert_eq!(
        back.message(),
        "Pod \"p\" is invalid: status.containerStatuses[1].state: Forbidden: may not be transitioned to non-terminated state"
    );
    let bad_type = status(json!({"conditions": [{"type": "no spaces allowed", "status": "True"}]}));
    assert_eq!(bad_type.code, 422, "{}", bad_type.body);
    assert!(
        bad_type
            .message()
            .starts_with("Pod \"p\" is invalid: metadata.conditions[0].Type: Invalid value: \"no spaces allowed\": name part must consist of"),
        "{}",
        bad_type.message()
    );
}

/// kubectl's readiness-gate patch (pod_conditions integration test): a strategic merge patch
/// of one condition. strategicpatch/patch.go `mergeSlice`: a condition new to the pod goes
/// before the others, an existing one is merged where it is.
#[test]
fn a_strategic_status_patch_puts_a_new_condition_first_and_merges_an_old_one_in_place() {
    let server = ApiServer::start();
    create_pod(&server, "p");
    let patch = |condition: Value| {
        let answer = send_json(
            &server,
            "PATCH",
            &format!("{PODS}/p/status"),
            STRATEGIC,
            &json!({"status": {"conditions": [condition]}}),
        );
        assert_eq!(answer.code, 200, "{}", answer.body);
        answer.body
    };
    patch(json!({"type": "Ready", "status": "False"}));
    patch(json!({"type": "Initialized", "status": "True"}));
    let gate = patch(json!({"type": "example.com/gate", "status": "True"}));
    assert_eq!(condition_types(&gate), ["example.com/gate", "Initialized", "Ready"]);
    let ready = patch(json!({"type": "Ready", "status": "True"}));
    assert_eq!(condition_types(&ready), ["example.com/gate", "Initialized", "Ready"]);
    assert_eq!(ready["status"]["conditions"][2]["status"], "True");
}

/// The agent's node status write (kube/src/api.rs `patch_node_status`): the whole status as a
/// strategic merge patch. types.go: `conditions` and `addresses` merge by `type`, so a
/// condition another writer set stays; lists without a strategy (`images`) are replaced.
/// validation.go `ValidateNodeUpdate`: the same address twice is 422.
#[test]
fn the_agents_node_status_patch_merges_conditions_and_addresses_by_type() {
    let server = ApiServer::start();
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"images": [{"names": ["a"]}], "capacity": {"pods": "110"}}});
    assert_eq!(
        send_json(&server, "POST", "/api/v1/nodes", "application/json", &node).code,
        201
    );
    let status = |s: Value| {
        send_json(
            &server,
            "PATCH",
            "/api/v1/nodes/n1/status",
            STRATEGIC,
            &json!({"status": s}),
        )
    };
    let other = status(json!({"conditions": [{"type": "NetworkUnavailable", "status": "False"}]}));
    assert_eq!(other.code, 200, "{}", other.body);
    let agent = status(json!({
        "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}],
        "images": [{"names": ["b"]}],
    }));
    assert_eq!(agent.code, 200, "{}", agent.body);
    assert_eq!(
        condition_types(&agent.body),
        ["MemoryPressure", "Ready", "NetworkUnavailable"]
    );
    assert_eq!(agent.body["status"]["images"], json!([{"names": ["b"]}]));
    let moved = status(json!({"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}));
    assert_eq!(
        moved.body["status"]["addresses"],
        json!([{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "Hostname", "address": "n1"}])
    );
    let mut twice = moved.body.clone();
    twice["status"]["addresses"] =
        json!([{"type": "Hostname", "address": "n1"}, {"type": "Hostname", "address": "n1"}]);
    let refused = send_json(&server, "PUT", "/api/v1/nodes/n1/status", "application/json", &twice);
    assert_eq!(refused.code, 422, "{}", refused.body);
    assert_eq!(
        refused.message(),
        "Node \"n1\" is invalid: status.addresses[1]: Duplicate value: core.NodeAddress{Type:\"Hostname\", Address:\"n1\"}"
    );
}

/// handlers/patch.go: JSON, merge and strategic patches of a missing object are 404
/// (`createNewObject`); the agent's event and lease writes lean on it to create instead.
#[test]
fn a_patch_of_a_missing_object_is_404() {
    let server = ApiServer::start();
    for (content_type, body) in [
        (MERGE, json!({"count": 2})),
        (STRATEGIC, json!({"count": 2})),
        (JSON_PATCH, json!([{"op": "replace", "path": "/count", "value": 2}])),
    ] {
        let answer = send_json(
            &server,
            "PATCH",
            "/api/v1/namespaces/default/events/gone",
            content_type,
            &body,
        );
        assert_eq!(answer.code, 404, "{content_type}: {}", answer.body);
        assert_eq!(answer.message(), "events \"gone\" not found");
    }
}

/// handlers/patch.go `PatchResource`: an unsupported patch type is 415 naming kube-apiserver's
/// four, in its order; negotiation.go: a body of an unknown type is 415 naming the three
/// serializers (nothing about what was sent).
#[test]
fn unsupported_content_types_are_415_with_upstreams_text() {
    let server = ApiServer::start();
    create_pod(&server, "p");
    let patch = send_json(&server, "PATCH", &format!("{PODS}/p"), "application/json", &json!({}));
    assert_eq!(
        (patch.code, patch.body["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    assert_eq!(
        patch.message(),
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, \
         application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
    );
    let post = common::request(
        &server,
        server.token(),
        "POST",
        PODS,
        "text/plain",
        Some(b"hello".as_slice()),
    );
    assert_eq!(post.code, 415);
    assert_eq!(
        post.message(),
        "the body of the request was in an unknown format - accepted media types include: application/json, \
         application/yaml, application/vnd.kubernetes.protobuf"
    );
}

/// create.go/patch.go with `fieldValidation`: Strict refuses an unknown field (400 strict
/// decoding error on create, 422 against `patch` on patch), Warn drops it with a `Warning`
/// header (`299 - "unknown field ..."`), Ignore drops it silently.
#[test]
fn field_validation_strict_warn_and_ignore() {
    let server = ApiServer::start();
    let mut body = pod("a");
    body["spec"]["bogus"] = json!(1);
    let strict = send_json(&server, "POST", PODS, "application/json", &body);
    assert_eq!(strict.code, 400);
    assert_eq!(
        strict.message(),
        "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.bogus\""
    );
    let warned = send_json(
        &server,
        "POST",
        &format!("{PODS}?fieldValidation=Warn"),
        "application/json",
        &body,
    );
    assert_eq!(warned.code, 201, "{}", warned.body);
    assert_eq!(warned.warnings, ["299 - \"unknown field \\\"spec.bogus\\\"\""]);
    let patch = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"bogus": 2}});
    let strict = send_json(&server, "PATCH", &format!("{PODS}/a"), MERGE, &patch);
    assert_eq!((strict.code, strict.body["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(strict.body["details"]["causes"][0]["field"], "patch");
    assert!(
        strict
            .message()
            .starts_with(" \"\" is invalid: patch: Invalid value: \"{\\\"apiVersion\\\":\\\"v1\\\","),
        "{}",
        strict.message()
    );
    assert!(
        strict
            .message()
            .ends_with(": strict decoding error: unknown field \"spec.bogus\""),
        "{}",
        strict.message()
    );
    let ignored = send_json(
        &server,
        "PATCH",
        &format!("{PODS}/a?fieldValidation=Ignore"),
        MERGE,
        &patch,
    );
    assert_eq!(ignored.code, 200, "{}", ignored.body);
    assert!(ignored.warnings.is_empty(), "{:?}", ignored.warnings);
    assert_eq!(ignored.body["metadata"]["labels"]["a"], "b");
}

/// create.go `transformDecodeError`: a wrong type names the kind and version (400); a body
/// whose kind cannot be read is "the object provided is unrecognized". patch.go: a wrong type
/// in a patched object is 422; a merge patch that is no JSON object 400 "error decoding patch".
#[test]
fn bodies_that_do_not_decode() {
    let server = ApiServer::start();
    let mut body = pod("a");
    body["spec"]["containers"][0]["ports"] = json!([{"containerPort": "80"}]);
    let typed = send_json(&server, "POST", PODS, "application/json", &body);
    assert_eq!(typed.code, 400);
    assert!(
        typed
            .message()
            .starts_with("Pod in version \"v1\" cannot be handled as a Pod: spec.containers[0].ports[0].containerPort"),
        "{}",
        typed.message()
    );
    let garbage = common::request(
        &server,
        server.token(),
        "POST",
        PODS,
        "application/json",
        Some(b"{not json".as_slice()),
    );
    assert_eq!(garbage.code, 400);
    assert!(
        garbage.message().starts_with(
            "the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: "
        ),
        "{}",
        garbage.message()
    );
    assert!(garbage.message().ends_with(" ({not json)"), "{}", garbage.message());
    create_pod(&server, "p");
    let wrong = send_json(
        &server,
        "PATCH",
        &format!("{PODS}/p"),
        MERGE,
        &json!({"spec": {"activeDeadlineSeconds": "x"}}),
    );
    assert_eq!(wrong.code, 422, "{}", wrong.body);
    let list = send_json(&server, "PATCH", &format!("{PODS}/p"), MERGE, &json!([1]));
    assert_eq!(list.code, 400);
    assert_eq!(
        list.message(),
        "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}"
    );
}

/// patch.go `applyJSPatch`: a JSON patch that is no list is 400, one whose operation fails is
/// 422 with the generic message (`NewGenericServerResponse`), and kubectl's finalizer removal
/// (pod_endings integration test) works.
#[test]
fn json_patch_answers() {
    let server = ApiServer::start();
    create_pod(&server, "p");
    let path = format!("{PODS}/p");
    let not_list = send_json(&server, "PATCH", &path, JSON_PATCH, &json!({"op": "add"}));
    assert_eq!(not_list.code, 400);
    let failing = send_json(
        &server,
        "PATCH",
        &path,
        JSON_PATCH,
        &json!([{"op": "test", "path": "/metadata/name", "value": "q"}]),
    );
    assert_eq!(failing.code, 422);
    assert_eq!(
        failing.message(),
        "the server rejected our request due to an error in our request"
    );
    assert_eq!(failing.body["details"], json!({}));
    let added = send_json(
        &server,
        "PATCH",
        &path,
        JSON_PATCH,
        &json!([{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/x"]}]),
    );
    assert_eq!(added.code, 200, "{}", added.body);
    let removed = send_json(
        &server,
        "PATCH",
        &path,
        JSON_PATCH,
        &json!([{"op": "remove", "path": "/metadata/finalizers"}]),
    );
    assert_eq!(removed.code, 200, "{}", removed.body);
    assert!(removed.body["metadata"].get("finalizers").is_none());
}

/// meta/v1/validation/validation.go `ValidatePatchOptions` and `ValidateCreateOptions`: 422
/// against `<Kind>Options.meta.k8s.io`.
#[test]
fn bad_options_are_422_against_the_options_kind() {
    let server = ApiServer::start();
    let apply = common::request(
        &server,
        server.token(),
        "PATCH",
        &format!("{PODS}/p"),
        APPLY,
        Some(b"apiVersion: v1\nkind: Pod\n".as_slice()),
    );
    assert_eq!(apply.code, 422, "{}", apply.body);
    assert_eq!(
        apply.message(),
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    assert_eq!(apply.body["details"]["kind"], "PatchOptions");
    assert_eq!(apply.body["details"]["group"], "meta.k8s.io");
    let create = send_json(
        &server,
        "POST",
        &format!("{PODS}?fieldValidation=Loose"),
        "application/json",
        &pod("a"),
    );
    assert_eq!(create.code, 422);
    assert!(create
        .message()
        .starts_with("CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loose\""));
    let force = send_json(&server, "PATCH", &format!("{PODS}/a?force=true"), MERGE, &json!({}));
    assert_eq!(force.code, 422);
    assert!(force
        .message()
        .ends_with("force: Forbidden: may not be specified for non-apply patch"));
}

/// Server-side apply (managedfields/internal/versioncheck.go, structuredmerge.go): the applied
/// object's kind, no managedFields, declared fields only (a plain 500); create answers 201, a
/// later apply 200; an applied object without the URL's name is 400 (patch.go `checkName`).
#[test]
fn server_side_apply_checks_and_creates() {
    let server = ApiServer::start();
    let path = "/api/v1/namespaces/default/configmaps/cm?fieldManager=me";
    let apply = |yaml: &str| common::request(&server, server.token(), "PATCH", path, APPLY, Some(yaml.as_bytes()));
    let wrong = apply("apiVersion: v1\nkind: Secret\nmetadata:\n  name: cm\n");
    assert_eq!(
        (wrong.code, wrong.message()),
        (400, "invalid object type: /v1, Kind=Secret")
    );
    let managed = apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  managedFields: []\n");
    assert_eq!(
        (managed.code, managed.message()),
        (400, "metadata.managedFields must be nil")
    );
    let unknown = apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: default\nbogus: 1\n");
    assert_eq!((unknown.code, unknown.body.get("reason")), (500, None));
    assert_eq!(
        unknown.message(),
        "failed to create typed patch object (default/cm; /v1, Kind=ConfigMap): .bogus: field not declared in schema"
    );
    let nameless = apply("apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n");
    assert_eq!(nameless.code, 400, "{}", nameless.body);
    let created = apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: b\n");
    assert_eq!(created.code, 201, "{}", created.body);
    let again = apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  c: d\n");
    assert_eq!(again.code, 200, "{}", again.body);
    assert_eq!(
        again.body["data"],
        json!({"a": "b", "c": "d"}),
        "no field manager: the old field stays"
    );
}

/// The agent's event recorder (kube/src/api.rs): an old-style Event (no eventTime) created, its
/// count merge-patched, its annotations kept. events.go `legacyValidateEvent` is all core/v1 checks; an Event name
/// only follows the path-segment rule; a new-style Event needs `reportingController`.
#[test]
fn events_as_the_agent_records_them() {
    let server = ApiServer::start();
    let events = "/api/v1/namespaces/default/events";
    let event = json!({"metadata": {"name": "Pod.ABC_1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default", "uid": "u"},
        "reason": "Started", "message": "Started container c", "type": "Normal", "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
        "source": {"component": "kubelet", "host": "n1"}, "reportingComponent": "kubelet", "reportingInstance": "n1"});
    let created = send_json(&server, "POST", events, "application/json", &event);
    assert_eq!(created.code, 201, "{}", created.body);
    let bumped = send_json(
        &server,
        "PATCH",
        &format!("{events}/Pod.ABC_1"),
        MERGE,
        &json!({"count": 2, "lastTimestamp": "2026-01-01T00:01:00Z"}),
    );
    assert_eq!((bumped.code, bumped.body["count"].as_i64()), (200, Some(2)));
    let mut slashed = event.clone();
    slashed["metadata"]["name"] = json!("a/b");
    let refused = send_json(&server, "POST", events, "application/json", &slashed);
    assert_eq!(refused.code, 422);
    assert_eq!(
        refused.message(),
        "Event \"a/b\" is invalid: metadata.name: Invalid value: \"a/b\": may not contain '/'"
    );
    // kubelet's AnnotatedEventf (client-go tools/record/event.go `makeEvent`) puts its
    // annotations in the Event's metadata; they are validated as any object's
    // (apimachinery pkg/api/validation/objectmeta.go `ValidateAnnotations`) and kept.
    let mut annotated = event.clone();
    annotated["metadata"]["name"] = json!("evicted");
    annotated["metadata"]["annotations"] =
        json!({"offending_containers": "app", "offending_containers_usage": "1464Mi", "starved_resource": "memory"});
    let created = send_json(&server, "POST", events, "application/json", &annotated);
    assert_eq!(created.code, 201, "{}", created.body);
    let kept = send_json(
        &server,
        "GET",
        &format!("{events}/evicted"),
        "application/json",
        &json!(null),
    );
    assert_eq!(
        kept.body["metadata"]["annotations"]["starved_resource"], "memory",
        "{}",
        kept.body
    );
    annotated["metadata"]["name"] = json!("bad-annotation");
    annotated["metadata"]["annotations"] = json!({"bad key": "x"});
    let refused = send_json(&server, "POST", events, "application/json", &annotated);
    assert_eq!(refused.code, 422, "{}", refused.body);
    assert!(
        refused
            .message()
            .starts_with("Event \"bad-annotation\" is invalid: metadata.annotations: Invalid value: \"bad key\""),
        "{}",
        refused.message()
    );
    let mut new_style = event;
    new_style["metadata"]["name"] = json!("new");
    new_style["eventTime"] = json!("2026-01-01T00:00:00.000000Z");
    new_style["action"] = json!("Start");
    new_style.as_object_mut().unwrap().remove("reportingComponent");
    let refused = send_json(&server, "POST", events, "application/json", &new_style);
    assert_eq!(refused.code, 422, "{}", refused.body);
    // Upstream checks the empty name both as missing and as no qualified name.
    assert!(
        refused.message().starts_with(
            "Event \"new\" is invalid: [reportingController: Required value, reportingController: Invalid value: \"\": \
             name part must be non-empty, "
        ),
        "{}",
        refused.message()
    );
}

/// kubectl as the integration tests drive it: `create secret generic` and `create configmap`
/// send protobuf (decoded, stored as JSON); client-side `apply` twice (the second a three-way
/// strategic merge patch whose `$setElementOrder` orders the Service's ports); `apply
/// --server-side` prints
/// `serverside-applied`; `label` is a merge patch.
#[test]
fn kubectl_bodies_patches_and_applies() {
    let server = ApiServer::start();
    server.kubectl_ok(&["create", "secret", "generic", "s", "--from-literal=k=v"]);
    server.kubectl_ok(&["create", "configmap", "c", "--from-literal=k=v"]);
    let secret = server.get("secrets", "default", "s").expect("secret");
    assert_eq!(secret["data"]["k"], "dg==");
    let sent = server.requests();
    let protobuf = sent
        .iter()
        .filter(|r| r.method == "POST" && r.content_type.as_deref() == Some("application/vnd.kubernetes.protobuf"))
        .count();
    assert_eq!(protobuf, 2, "both creates are protobuf");
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("svc.yaml");
    let write = |ports: &[u16]| {
        let ports: String = ports
            .iter()
            .map(|p| format!("  - name: p{p}\n    port: {p}\n"))
            .collect();
        std::fs::write(
            &manifest,
            format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\nspec:\n  selector:\n    app: x\n  ports:\n{ports}"),
        )
        .unwrap();
    };
    write(&[80]);
    server.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    write(&[443, 80]);
    server.kubectl_ok(&["apply", "-f", manifest.to_str().unwrap()]);
    let svc = server.get("services", "default", "svc").unwrap();
    let ports: Vec<i64> = svc["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["port"].as_i64().unwrap())
        .collect();
    assert_eq!(ports, [443, 80], "$setElementOrder/ports orders the merged list: {svc}");
    let patch = sent_patch(&server, "/api/v1/namespaces/default/services/svc");
    assert!(patch.contains("$setElementOrder/ports"), "{patch}");
    let cm = dir.path().join("cm.yaml");
    std::fs::write(
        &cm,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: b\n",
    )
    .unwrap();
    let printed = server.kubectl_ok(&["apply", "--server-side", "-f", cm.to_str().unwrap()]);
    assert_eq!(printed.trim(), "configmap/ssa serverside-applied");
    let printed = server.kubectl_ok(&["apply", "--server-side", "-f", cm.to_str().unwrap()]);
    assert_eq!(printed.trim(), "configmap/ssa serverside-applied");
    server.kubectl_ok(&["label", "configmap", "ssa", "x=y"]);
    assert_eq!(
        server.get("configmaps", "default", "ssa").unwrap()["metadata"]["labels"]["x"],
        "y"
    );
}

/// The body of the last PATCH to `path`.
fn sent_patch(server: &ApiServer, path: &str) -> String {
    server
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.method == "PATCH" && r.path == path)
        .map(|r| r.body)
        .unwrap_or_default()
}

/// The agent's client (kube-rs) sends these patch types as the agent does: `Patch::Merge` to
/// pods/status, `Patch::Strategic` to nodes/status, `Patch::Apply` with a field manager.
#[test]
fn kube_rs_patches_as_the_agent_sends_them() {
    use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
    use kube::api::{Api, Patch, PatchParams};

    let server = ApiServer::start();
    create_pod(&server, "p");
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    assert_eq!(
        send_json(&server, "POST", "/api/v1/nodes", "application/json", &node).code,
        201
    );
    let runtime = common::multi_thread_runtime();
    runtime.block_on(async {
        let client = common::kube_client(&server).await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let patch = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        let pod = pods
            .patch_status("p", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Running"));
        let nodes: Api<Node> = Api::all(client.clone());
        let patch = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        nodes
            .patch_status("n1", &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .unwrap();
        let maps: Api<ConfigMap> = Api::namespaced(client, "default");
        let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}, "data": {"a": "b"}});
        let map = maps
            .patch("m", &PatchParams::apply("dockerlet"), &Patch::Apply(&applied))
            .await
            .unwrap();
        assert_eq!(map.data.unwrap()["a"], "b");
        let err = maps
            .patch("m", &PatchParams::default(), &Patch::Apply(&applied))
            .await
            .unwrap_err();
        match err {
            kube::Error::Api(status) => assert_eq!(status.code, 422),
            other => panic!("{other}"),
        }
    });
    let content_types: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .filter_map(|r| r.content_type)
        .collect();
    assert_eq!(
        content_types,
        [MERGE, STRATEGIC, APPLY, APPLY],
        "the content types kube-rs sends"
    );
}
