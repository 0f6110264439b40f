//! The store and watch behaviours the agent and its tests lean on, each pinned to what
//! kube-apiserver does (the upstream file is named on every test). See the README's audit section.
//! Raw HTTP against the fixture; no Docker.

use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use serde_json::{json, Value};
use std::time::Duration;

mod common;
use common::Client;

const PODS: &str = "/api/v1/namespaces/default/pods";
const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

fn pod(name: &str, node: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "dockerlet.local/busybox:1"}],
        },
    })
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

fn rv_of(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A watch from a resourceVersion gets every later change in resourceVersion order, with the
/// object of each at that change's resourceVersion (`cacher/watch_cache.go`
/// `getAllEventsSinceLocked`, `cacher/cache_watcher.go` `processInterval`).
#[test]
fn a_watch_replays_changes_in_resource_version_order() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let from = server.resource_version();
    client.post(CONFIG_MAPS, &config_map("a"));
    client.merge_patch(&format!("{CONFIG_MAPS}/a"), &json!({"data": {"k": "w"}}));
    client.delete(&format!("{CONFIG_MAPS}/a"), None);
    let watch = client.watch(&format!("{CONFIG_MAPS}?watch=1&resourceVersion={from}"));
    let mut last = from;
    for want in ["ADDED", "MODIFIED", "DELETED"] {
        let event = watch.next().expect(want);
        assert_eq!(event["type"], want);
        let rv = rv_of(&event["object"]);
        assert!(rv > last, "{want} at {rv} after {last}");
        last = rv;
    }
    assert_eq!(
        last,
        server.resource_version(),
        "DELETED carries the deletion's resourceVersion"
    );
}

/// An object that starts matching a watch's selector arrives as ADDED; one that stops matching
/// arrives as DELETED carrying its previous content (what the watch last matched) at the
/// change's resourceVersion (`cacher/cache_watcher.go` `convertToWatchEvent`).
#[test]
fn leaving_a_selection_is_deleted_with_the_previous_content() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let from = server.resource_version();
    let watch = client.watch(&format!(
        "{PODS}?watch=1&resourceVersion={from}&labelSelector=app%3Dweb"
    ));
    client.post(PODS, &pod("p", "n1", json!({"app": "db"})));
    client.merge_patch(&format!("{PODS}/p"), &json!({"metadata": {"labels": {"app": "web"}}}));
    assert_eq!(watch.next_summary(), Some(("ADDED".into(), "p".into())));
    let (_, moved) = client.merge_patch(&format!("{PODS}/p"), &json!({"metadata": {"labels": {"app": "api"}}}));
    let left = watch.next().expect("DELETED");
    assert_eq!(left["type"], "DELETED");
    assert_eq!(left["object"]["metadata"]["labels"]["app"], "web", "{left}");
    assert_eq!(
        left["object"]["metadata"]["resourceVersion"],
        moved["metadata"]["resourceVersion"]
    );
}

/// A watch from a resourceVersion newer than the server's sends nothing until the server
/// passes it (the watch cache only sends events newer than the watch's resourceVersion,
/// `cacher/cache_watcher.go` `process`).
#[test]
fn a_watch_from_a_future_resource_version_skips_changes_up_to_it() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let future = server.resource_version() + 2;
    let watch = client.watch(&format!("{CONFIG_MAPS}?watch=1&resourceVersion={future}"));
    client.post(CONFIG_MAPS, &config_map("one"));
    client.post(CONFIG_MAPS, &config_map("two"));
    client.post(CONFIG_MAPS, &config_map("three"));
    assert_eq!(watch.next_summary(), Some(("ADDED".into(), "three".into())));
    assert!(watch.quiet_for(Duration::from_millis(200)));
}

/// A watch from a resourceVersion older than the history gets 200 and one ERROR event: a 410
/// Expired Status `too old resource version: <rv> (<oldest kept - 1>)`, then the stream ends
/// (`cacher/watch_cache.go` `getAllEventsSinceLocked`, `cacher/cacher.go` `newErrWatcher`).
#[test]
fn a_too_old_watch_gets_one_error_event_with_upstreams_message() {
    let server = ApiServer::start_with(ApiServerConfig {
        history: 2,
        ..ApiServerConfig::default()
    })
    .unwrap();
    let client = Client::new(&server);
    let from = server.resource_version();
    for name in ["a", "b", "c", "d"] {
        client.post(CONFIG_MAPS, &config_map(name));
    }
    let now = server.resource_version();
    let watch = client.watch(&format!("{CONFIG_MAPS}?watch=1&resourceVersion={from}"));
    let event = watch.next().expect("ERROR");
    assert_eq!(event["type"], "ERROR");
    assert_eq!(
        event["object"],
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("too old resource version: {from} ({})", now - 2),
            "reason": "Expired", "code": 410,
        })
    );
    assert!(watch.ended());
    let oldest_resumable = client.watch(&format!("{CONFIG_MAPS}?watch=1&resourceVersion={}", now - 2));
    assert_eq!(oldest_resumable.next_summary(), Some(("ADDED".into(), "c".into())));
}

/// A watch from "" or "0" is defaulted to `sendInitialEvents=true` (WatchList,
/// `apimachinery/pkg/apis/meta/internalversion/defaults.go` `SetListOptionsDefaults`): ADDED
/// for every object, then, with bookmarks, the initial-events-end bookmark; without bookmarks
/// none (`cacher/cacher.go` `getBookmarkAfterResourceVersionLockedFunc`).
#[test]
fn a_watch_from_zero_streams_the_state_then_the_initial_events_end_bookmark() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    client.post(CONFIG_MAPS, &config_map("a"));
    let rv = server.resource_version();
    for from in ["", "&resourceVersion=0"] {
        let watch = client.watch(&format!("{CONFIG_MAPS}?watch=1&allowWatchBookmarks=true{from}"));
        let mut names = Vec::new();
        let end = loop {
            let event = watch.next().expect("an event");
            if event["type"] != "ADDED" {
                break event;
            }
            names.push(event["object"]["metadata"]["name"].as_str().unwrap().to_string());
        };
        assert!(names.contains(&"a".to_string()) && names.contains(&"kube-root-ca.crt".to_string()));
        assert_eq!(
            end,
            json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {
                "resourceVersion": rv.to_string(),
                "annotations": {"k8s.io/initial-events-end": "true"},
            }}})
        );
    }
    let watch = client.watch(&format!("{CONFIG_MAPS}?watch=1&resourceVersion=0"));
    assert_eq!(watch.next().unwrap()["type"], "ADDED");
    assert_eq!(watch.next().unwrap()["type"], "ADDED");
    assert!(
        watch.quiet_for(Duration::from_millis(300)),
        "no bookmark without allowWatchBookmarks"
    );
}

/// `sendInitialEvents` needs `resourceVersionMatch=NotOlderThan` but not `allowWatchBookmarks`
/// (`apimachinery/pkg/apis/meta/internalversion/validation/validation.go` `validateWatchOptions`);
/// `sendInitialEvents=false` sends no initial events; an initial state asked newer than the
/// server's is one ERROR event with a 504 (`storage/errors.go` `NewTooLargeResourceVersionError`).
#[test]
fn send_initial_events_is_validated_and_served_as_upstream() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    client.post(CONFIG_MAPS, &config_map("a"));
    let (code, refused) = client.get(&format!("{CONFIG_MAPS}?watch=1&sendInitialEvents=true"));
    assert_eq!(code, 422);
    assert_eq!(
        refused["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
    assert_eq!(refused["details"]["group"], "meta.k8s.io");
    let (code, refused) = client.get(&format!(
        "{CONFIG_MAPS}?watch=1&resourceVersion=5&resourceVersionMatch=NotOlderThan"
    ));
    assert_eq!(code, 422);
    assert_eq!(
        refused["details"]["causes"][0]["message"],
        "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
    );
    let streaming = client.watch(&format!(
        "{CONFIG_MAPS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
    ));
    assert_eq!(streaming.next().unwrap()["type"], "ADDED");
    assert_eq!(streaming.next().unwrap()["type"], "ADDED");
    assert!(
        streaming.quiet_for(Duration::from_millis(300)),
        "no bookmark was asked for"
    );
    let quiet = client.watch(&format!(
        "{CONFIG_MAPS}?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=false"
    ));
    client.post(CONFIG_MAPS, &config_map("b"));
    assert_eq!(
        quiet.next_summary(),
        Some(("ADDED".into(), "b".into())),
        "only changes from now on"
    );
    let future = server.resource_version() + 100;
    let too_new = client.watch(&format!(
        "{CONFIG_MAPS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={future}"
    ));
    let event = too_new.next().unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["code"], 504);
    assert_eq!(event["object"]["reason"], "Timeout");
    assert_eq!(
        event["object"]["message"],
        format!(
            "Timeout: Too large resource version: {future}, current: {}",
            server.resource_version()
        )
    );
    assert_eq!(
        event["object"]["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
}

/// `timeoutSeconds` ends the stream (`endpoints/handlers/get.go` `ListResource` sets the
/// watch's deadline); a watch with bookmarks gets one before it ends.
#[test]
fn timeout_seconds_ends_the_watch() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let rv = server.resource_version();
    let watch = client.watch(&format!("{CONFIG_MAPS}?watch=1&resourceVersion={rv}&timeoutSeconds=1"));
    assert!(watch.ended());
    let watch = client.watch(&format!(
        "{CONFIG_MAPS}?watch=1&resourceVersion={rv}&timeoutSeconds=1&allowWatchBookmarks=true"
    ));
    let bookmark = watch.next().expect("a bookmark before the end");
    assert_eq!(bookmark["type"], "BOOKMARK");
    assert_eq!(
        bookmark["object"]["metadata"],
        json!({"resourceVersion": rv.to_string()})
    );
    assert!(watch.ended());
}

/// Field selectors per kind (`pkg/apis/core/v1/conversion.go`): Node accepts only
/// `metadata.name` and `spec.unschedulable`; kinds without a conversion answer
/// `DefaultMetaV1FieldSelectorConversion`'s message; the selector filters lists and watches.
#[test]
fn field_selectors_are_checked_per_kind() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let (code, refused) = client.get("/api/v1/nodes?fieldSelector=metadata.namespace%3Dx");
    assert_eq!(
        (code, refused["message"].as_str()),
        (400, Some("field label not supported: metadata.namespace"))
    );
    let (code, refused) = client.get(&format!("{CONFIG_MAPS}?fieldSelector=data.k%3Dv"));
    assert_eq!(code, 400);
    assert_eq!(
        refused["message"],
        "\"data.k\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
    client.post(PODS, &pod("on-n1", "n1", json!({})));
    client.post(PODS, &pod("on-n2", "n2", json!({})));
    let (code, list) = client.get(&format!("{PODS}?fieldSelector=spec.nodeName%3Dn1"));
    assert_eq!((code, names(&list)), (200, vec!["on-n1".to_string()]));
    let (_, list) = client.get(&format!("{PODS}?fieldSelector=spec.host%3Dn2"));
    assert_eq!(names(&list), vec!["on-n2".to_string()], "spec.host is spec.nodeName");
}

/// Pages read at the first page's resourceVersion (etcd3 `GetList` with the continue token's
/// revision, `storage/etcd3/store.go`); `remainingItemCount` only when no selector filters the
/// list; a continue token with a resourceVersion is 400.
#[test]
fn later_pages_are_a_snapshot_of_the_first_pages_resource_version() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    for name in ["a", "b", "c"] {
        client.post(CONFIG_MAPS, &config_map(name));
    }
    let (_, first) = client.get(&format!("{CONFIG_MAPS}?limit=2"));
    assert_eq!(names(&first), vec!["a", "b"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 2, "c and kube-root-ca.crt");
    client.delete(&format!("{CONFIG_MAPS}/c"), None);
    client.post(CONFIG_MAPS, &config_map("bb"));
    let token = first["metadata"]["continue"].as_str().unwrap();
    let (code, second) = client.get(&format!("{CONFIG_MAPS}?limit=5&continue={token}"));
    assert_eq!(code, 200, "{second}");
    assert_eq!(names(&second), vec!["c", "kube-root-ca.crt"], "as at the first page");
    assert_eq!(
        second["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
    let (code, refused) = client.get(&format!("{CONFIG_MAPS}?continue={token}&resourceVersion=3"));
    assert_eq!(
        (code, refused["message"].as_str()),
        (
            400,
            Some("specifying resource version is not allowed when using continue")
        )
    );
    let (_, filtered) = client.get(&format!(
        "{CONFIG_MAPS}?limit=1&fieldSelector=metadata.namespace%3Ddefault"
    ));
    assert!(filtered["metadata"]["continue"].is_string());
    assert!(filtered["metadata"].get("remainingItemCount").is_none(), "{filtered}");
    let (code, refused) = client.get(&format!("{CONFIG_MAPS}?continue=not-a-token"));
    assert_eq!(code, 400);
    assert!(refused["message"]
        .as_str()
        .unwrap()
        .starts_with("invalid continue token: continue key is not valid"));
}

/// A continue token whose resourceVersion left the history is 410 with etcd3's
/// inconsistent-continue message and a new token in the Status's metadata that goes on at the
/// latest resourceVersion (`storage/etcd3/errors.go` `handleCompactedErrorForPaging`).
#[test]
fn an_expired_continue_token_gets_410_and_a_token_to_go_on() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    for name in ["a", "b"] {
        client.post(CONFIG_MAPS, &config_map(name));
    }
    let (_, first) = client.get(&format!("{CONFIG_MAPS}?limit=1"));
    client.post(CONFIG_MAPS, &config_map("c"));
    server.compact_history();
    let token = first["metadata"]["continue"].as_str().unwrap();
    let (code, expired) = client.get(&format!("{CONFIG_MAPS}?limit=5&continue={token}"));
    assert_eq!((code, expired["reason"].as_str()), (410, Some("Expired")));
    assert!(expired["message"]
        .as_str()
        .unwrap()
        .starts_with("The provided continue parameter is too old to display a consistent list result."));
    let next = expired["metadata"]["continue"].as_str().expect("a token to go on with");
    let (code, rest) = client.get(&format!("{CONFIG_MAPS}?limit=5&continue={next}"));
    assert_eq!(code, 200);
    assert_eq!(
        names(&rest),
        vec!["b", "c", "kube-root-ca.crt"],
        "the latest objects after a"
    );
    assert_eq!(
        rest["metadata"]["resourceVersion"],
        server.resource_version().to_string()
    );
}

/// A list's resourceVersion (`storage/etcd3/store.go` `GetList`, `cacher/cacher.go`
/// `GetList`): `Exact` (or a resourceVersion with a limit) reads the state at that version,
/// 410 `The resourceVersion for the provided list is too old.` once it left the history;
/// `NotOlderThan` a version the server has not reached is 504; invalid combinations are 422.
#[test]
fn list_resource_versions_read_as_upstream() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    client.post(CONFIG_MAPS, &config_map("a"));
    let then = server.resource_version();
    client.delete(&format!("{CONFIG_MAPS}/a"), None);
    client.post(CONFIG_MAPS, &config_map("b"));
    let (code, exact) = client.get(&format!(
        "{CONFIG_MAPS}?resourceVersion={then}&resourceVersionMatch=Exact"
    ));
    assert_eq!(code, 200, "{exact}");
    assert_eq!(names(&exact), vec!["a", "kube-root-ca.crt"]);
    assert_eq!(exact["metadata"]["resourceVersion"], then.to_string());
    let (_, legacy) = client.get(&format!("{CONFIG_MAPS}?resourceVersion={then}&limit=10"));
    assert_eq!(
        names(&legacy),
        vec!["a", "kube-root-ca.crt"],
        "a resourceVersion with a limit is exact"
    );
    let (_, not_older) = client.get(&format!("{CONFIG_MAPS}?resourceVersion={then}"));
    assert_eq!(names(&not_older), vec!["b", "kube-root-ca.crt"]);
    let future = server.resource_version() + 10;
    let (code, too_new) = client.get(&format!(
        "{CONFIG_MAPS}?resourceVersion={future}&resourceVersionMatch=NotOlderThan"
    ));
    assert_eq!((code, too_new["reason"].as_str()), (504, Some("Timeout")));
    server.compact_history();
    let (code, expired) = client.get(&format!(
        "{CONFIG_MAPS}?resourceVersion={then}&resourceVersionMatch=Exact"
    ));
    assert_eq!(
        (code, expired["reason"].as_str(), expired["message"].as_str()),
        (
            410,
            Some("Expired"),
            Some("The resourceVersion for the provided list is too old.")
        )
    );
    let (code, invalid) = client.get(&format!("{CONFIG_MAPS}?resourceVersionMatch=Exact"));
    assert_eq!(code, 422);
    assert_eq!(
        invalid["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
    );
}

/// A write from a stale resourceVersion is 409 with `OptimisticLockErrorMsg`, the resource
/// group-qualified (`registry/generic/registry/store.go` `Update`, `errors.NewConflict`); a
/// `metadata.uid` that is not the object's is a failed precondition (`storage.Preconditions`).
#[test]
fn stale_writes_and_wrong_uids_conflict_with_upstreams_messages() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let (_, created) = client.post(PODS, &pod("x", "n1", json!({})));
    client.merge_patch(&format!("{PODS}/x"), &json!({"metadata": {"labels": {"a": "b"}}}));
    let (code, conflict) = client.put(&format!("{PODS}/x"), &created);
    assert_eq!(code, 409);
    assert_eq!(
        conflict["message"],
        "Operation cannot be fulfilled on pods \"x\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(conflict["details"], json!({"name": "x", "kind": "pods"}));
    let mut wrong = created.clone();
    wrong["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    let (code, conflict) = client.put(&format!("{PODS}/x"), &wrong);
    assert_eq!(code, 409);
    assert_eq!(
        conflict["message"],
        format!(
            "Operation cannot be fulfilled on pods \"x\": Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: {}",
            created["metadata"]["uid"].as_str().unwrap()
        )
    );
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1"}});
    let (_, lease) = client.post(LEASES, &lease);
    client.merge_patch(&format!("{LEASES}/n1"), &json!({"spec": {"leaseDurationSeconds": 40}}));
    let (code, conflict) = client.put(&format!("{LEASES}/n1"), &lease);
    assert_eq!(code, 409);
    assert_eq!(
        conflict["message"],
        "Operation cannot be fulfilled on leases.coordination.k8s.io \"n1\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(
        conflict["details"],
        json!({"name": "n1", "group": "coordination.k8s.io", "kind": "leases"})
    );
}

/// A PUT to a missing object is 404 unless the kind's strategy allows create on update: pods
/// and nodes do not, events and leases do (201 Created, `endpoints/handlers/update.go`). A
/// Lease PUT must carry a resourceVersion (`registry/coordination/lease/strategy.go`
/// `AllowUnconditionalUpdate` false); a PATCH never creates (`endpoints/handlers/patch.go`).
#[test]
fn create_on_update_is_per_kind() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let (code, missing) = client.put(&format!("{PODS}/nope"), &pod("nope", "n1", json!({})));
    assert_eq!(
        (code, missing["message"].as_str()),
        (404, Some("pods \"nope\" not found"))
    );
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "nope"}});
    assert_eq!(client.put("/api/v1/nodes/nope", &node).0, 404);
    let (code, missing) = client.merge_patch(&format!("{LEASES}/n1"), &json!({"spec": {"holderIdentity": "n1"}}));
    assert_eq!(code, 404, "the agent's lease renewal patches, then creates on 404");
    assert_eq!(missing["message"], "leases.coordination.k8s.io \"n1\" not found");
    assert_eq!(missing["details"]["group"], "coordination.k8s.io");
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1"}});
    let (code, created) = client.put(&format!("{LEASES}/n1"), &lease);
    assert_eq!(code, 201, "{created}");
    let (code, refused) = client.put(&format!("{LEASES}/n1"), &lease);
    assert_eq!(code, 422);
    assert_eq!(
        refused["message"],
        "leases.coordination.k8s.io \"n1\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"
    );
    let event = json!({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}, "reason": "R", "message": "m",
    });
    assert_eq!(client.put("/api/v1/namespaces/default/events/e1", &event).0, 201);
}

/// A write to pods/status keeps the spec, the owner references and the deletion timestamp as
/// stored and may change labels (`pkg/registry/core/pod/strategy.go` podStatusStrategy
/// `PrepareForUpdate`); a write to the pod keeps the status; only a spec change bumps
/// `generation` (podStrategy `PrepareForUpdate`).
#[test]
fn pod_status_writes_keep_the_spec_and_main_writes_keep_the_status() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let (_, created) = client.post(PODS, &pod("s", "n1", json!({})));
    let mut status_put = created.clone();
    status_put["spec"]["activeDeadlineSeconds"] = json!(60);
    status_put["metadata"]["labels"] = json!({"via": "status"});
    status_put["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u"}]);
    status_put["metadata"]["deletionTimestamp"] = json!("2030-01-01T00:00:00Z");
    status_put["status"]["phase"] = json!("Running");
    let (code, written) = client.put(&format!("{PODS}/s/status"), &status_put);
    assert_eq!(code, 200, "{written}");
    assert_eq!(written["status"]["phase"], "Running");
    assert!(written["spec"].get("activeDeadlineSeconds").is_none());
    assert_eq!(written["metadata"]["labels"]["via"], "status");
    assert!(written["metadata"].get("ownerReferences").is_none());
    assert!(written["metadata"].get("deletionTimestamp").is_none());
    assert_eq!(written["metadata"]["generation"], 1);
    let mut main_put = written.clone();
    main_put["status"]["phase"] = json!("Failed");
    main_put["spec"]["activeDeadlineSeconds"] = json!(60);
    let (code, written) = client.put(&format!("{PODS}/s"), &main_put);
    assert_eq!(code, 200, "{written}");
    assert_eq!(written["status"]["phase"], "Running");
    assert_eq!(written["spec"]["activeDeadlineSeconds"], 60);
    assert_eq!(written["metadata"]["generation"], 2);
}

/// A write to nodes/status keeps the spec; a write to the node keeps the status
/// (`pkg/registry/core/node/strategy.go` nodeStatusStrategy and nodeStrategy
/// `PrepareForUpdate`). The agent patches its node's status with a strategic merge patch.
#[test]
fn node_status_writes_keep_the_spec_and_main_writes_keep_the_status() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let node =
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n9"}, "spec": {"podCIDR": "10.1.0.0/24"}});
    client.post("/api/v1/nodes", &node);
    let patch = json!({"spec": {"unschedulable": true}, "status": {"phase": "Running"}});
    let (code, written) = client.send(
        "PATCH",
        "/api/v1/nodes/n9/status",
        "application/strategic-merge-patch+json",
        Some(&patch),
    );
    assert_eq!(code, 200, "{written}");
    assert_eq!(written["status"]["phase"], "Running");
    assert!(written["spec"].get("unschedulable").is_none());
    let (code, written) = client.merge_patch(
        "/api/v1/nodes/n9",
        &json!({"spec": {"unschedulable": true}, "status": {"phase": "Terminated"}}),
    );
    assert_eq!(code, 200, "{written}");
    assert_eq!(written["spec"]["unschedulable"], true);
    assert_eq!(written["status"]["phase"], "Running");
}

/// Graceful deletion of a bound pod (`registry/rest/delete.go` `BeforeDelete`,
/// `pkg/registry/core/pod/strategy.go` `CheckGracefulDelete`): the first DELETE marks it
/// (`deletionTimestamp`, grace from the pod, `generation` bumped); a DELETE with the same or a
/// longer grace changes nothing; a shorter one moves the deadline earlier; grace 0 writes the
/// mark and then removes the pod (`registry/generic/registry/store.go` `Delete`), the answer
/// being the pod as last stored.
#[test]
fn graceful_deletion_marks_shortens_and_finally_removes_a_pod() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let (_, created) = client.post(PODS, &pod("g", "n1", json!({})));
    let watch = client.watch(&format!("{PODS}?watch=1&resourceVersion={}", rv_of(&created)));
    let (code, marked) = client.delete(&format!("{PODS}/g"), None);
    assert_eq!(code, 200);
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 30);
    assert_eq!(marked["metadata"]["generation"], 2);
    let deadline: String = marked["metadata"]["deletionTimestamp"].as_str().unwrap().to_string();
    assert_eq!(watch.next_summary(), Some(("MODIFIED".into(), "g".into())));
    let (code, same) = client.delete(&format!("{PODS}/g"), Some(&json!({"gracePeriodSeconds": 45})));
    assert_eq!(
        (code, &same["metadata"]["resourceVersion"]),
        (200, &marked["metadata"]["resourceVersion"])
    );
    assert!(
        watch.quiet_for(Duration::from_millis(200)),
        "a longer grace changes nothing"
    );
    let (_, shorter) = client.delete(&format!("{PODS}/g"), Some(&json!({"gracePeriodSeconds": 10})));
    assert_eq!(shorter["metadata"]["deletionGracePeriodSeconds"], 10);
    let at = |t: &str| t.parse::<jiff::Timestamp>().unwrap();
    let moved = at(&deadline).duration_since(at(shorter["metadata"]["deletionTimestamp"].as_str().unwrap()));
    assert_eq!(moved.as_secs(), 20, "the deadline moved 20 s earlier");
    assert_eq!(
        shorter["metadata"]["generation"], 2,
        "only the first mark bumps generation"
    );
    assert_eq!(watch.next_summary(), Some(("MODIFIED".into(), "g".into())));
    let (code, gone) = client.delete(&format!("{PODS}/g"), Some(&json!({"gracePeriodSeconds": 0})));
    assert_eq!(code, 200);
    assert_eq!(gone["metadata"]["deletionGracePeriodSeconds"], 0);
    let last = watch.next().unwrap();
    assert_eq!(
        (last["type"].as_str(), &last["object"]["metadata"]["resourceVersion"]),
        (Some("MODIFIED"), &gone["metadata"]["resourceVersion"])
    );
    let deleted = watch.next().unwrap();
    assert_eq!(deleted["type"], "DELETED");
    assert!(
        rv_of(&deleted["object"]) > rv_of(&gone),
        "DELETED is at the deletion's resourceVersion"
    );
    assert!(server.get("pods", "default", "g").is_none());
}

/// A DELETE's preconditions are checked by `BeforeDelete` (`registry/rest/delete.go`) with its
/// own messages, a Conflict named by the Kind.
#[test]
fn delete_preconditions_fail_with_before_deletes_messages() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let (_, created) = client.post(CONFIG_MAPS, &config_map("pre"));
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let (code, conflict) = client.delete(
        &format!("{CONFIG_MAPS}/pre"),
        Some(&json!({"preconditions": {"uid": "other"}})),
    );
    assert_eq!(code, 409);
    assert_eq!(
        conflict["message"],
        format!("Operation cannot be fulfilled on ConfigMap \"pre\": the UID in the precondition (other) does not match the UID in record ({uid}). The object might have been deleted and then recreated")
    );
    let (code, conflict) = client.delete(
        &format!("{CONFIG_MAPS}/pre"),
        Some(&json!({"preconditions": {"resourceVersion": "1"}})),
    );
    assert_eq!(code, 409);
    assert_eq!(
        conflict["message"],
        format!("Operation cannot be fulfilled on ConfigMap \"pre\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({}). The object might have been modified", rv_of(&created))
    );
    let (code, status) = client.delete(
        &format!("{CONFIG_MAPS}/pre"),
        Some(&json!({"preconditions": {"uid": uid}})),
    );
    assert_eq!(code, 200);
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": {"name": "pre", "kind": "configmaps", "uid": uid}})
    );
    let lease =
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "gone"}, "spec": {}});
    client.post(LEASES, &lease);
    let (_, status) = client.delete(&format!("{LEASES}/gone"), None);
    assert_eq!(
        status["details"]["group"], "coordination.k8s.io",
        "finalizeDelete names the group"
    );
}

/// An object with finalizers is only marked by a DELETE (`markAsDeleting`: now, grace 0); the
/// update that removes the last finalizer deletes it instead of writing it, watchers getting
/// the object as it was stored (`registry/generic/registry/store.go` `ShouldDeleteDuringUpdate`,
/// `deleteWithoutFinalizers`).
#[test]
fn removing_the_last_finalizer_deletes_the_stored_object() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let mut held = config_map("held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let (_, created) = client.post(CONFIG_MAPS, &held);
    let (code, marked) = client.delete(&format!("{CONFIG_MAPS}/held"), None);
    assert_eq!(code, 200);
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 0);
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    assert!(server.get("configmaps", "default", "held").is_some());
    let watch = client.watch(&format!("{CONFIG_MAPS}?watch=1&resourceVersion={}", rv_of(&marked)));
    let (code, answer) = client.merge_patch(
        &format!("{CONFIG_MAPS}/held"),
        &json!({"metadata": {"finalizers": null}}),
    );
    assert_eq!(code, 200, "{answer}");
    assert!(
        answer["metadata"].get("finalizers").is_none(),
        "the caller gets its object"
    );
    let deleted = watch.next().unwrap();
    assert_eq!(deleted["type"], "DELETED");
    assert_eq!(deleted["object"]["metadata"]["finalizers"], json!(["example.com/hold"]));
    assert!(rv_of(&deleted["object"]) > rv_of(&created));
    assert!(server.get("configmaps", "default", "held").is_none());
}

/// A watch on one object by its URL takes no field selector but one on that name
/// (`endpoints/handlers/get.go` `ListResource`); the watch sees only that object.
#[test]
fn a_watch_by_name_refuses_other_field_selectors() {
    let server = ApiServer::start();
    let client = Client::new(&server);
    let (code, refused) = client.get(&format!("{PODS}/w?watch=1&fieldSelector=spec.nodeName%3Dn1"));
    assert_eq!(
        (code, refused["message"].as_str()),
        (400, Some("fieldSelector metadata.name doesn't match requested name"))
    );
    let rv = server.resource_version();
    let watch = client.watch(&format!(
        "{PODS}/w?watch=1&resourceVersion={rv}&fieldSelector=metadata.name%3Dw"
    ));
    client.post(PODS, &pod("other", "n1", json!({})));
    client.post(PODS, &pod("w", "n1", json!({})));
    assert_eq!(watch.next_summary(), Some(("ADDED".into(), "w".into())));
}
