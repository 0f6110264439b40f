//! The audit of admission, tokens, reviews and node authorization (the README's audit section): each
//! test holds the fixture to one behaviour of kube-apiserver, cited by its upstream file. Raw
//! HTTP with the server's or a node's bearer token; no Docker, no kubectl.

use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig, PatchType, Subresource};
use serde_json::{json, Value};

mod common;
use common::send;

/// The message of a refusal with `code`, or a panic naming what came instead.
fn refused(answer: (u16, Value), code: u16) -> String {
    assert_eq!(answer.0, code, "{}", answer.1);
    answer.1["message"].as_str().expect("a Status message").to_string()
}

fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn container() -> Value {
    json!({"name": "c", "image": "dockerlet.local/busybox:1"})
}

fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
}

fn uid(obj: &Value) -> String {
    obj["metadata"]["uid"].as_str().expect("uid").to_string()
}

// ---------------------------------------------------------------------------------------------
// The admission chain on pods.
// ---------------------------------------------------------------------------------------------

/// plugin/pkg/admission/defaulttolerationseconds/admission.go: every pod tolerates the
/// not-ready and unreachable NoExecute taints for 300 s unless it tolerates them already (an
/// empty key or effect covers them); an update gets them back.
#[test]
fn default_toleration_seconds_are_added_to_every_pod() {
    let server = ApiServer::start();
    let defaulted =
        |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300});
    let plain = server
        .create(pod("plain", json!({"containers": [container()]})))
        .expect("created");
    assert_eq!(
        plain["spec"]["tolerations"],
        json!([
            defaulted("node.kubernetes.io/not-ready"),
            defaulted("node.kubernetes.io/unreachable")
        ])
    );
    let own = json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5});
    let partial = server
        .create(pod(
            "partial",
            json!({"containers": [container()], "tolerations": [own]}),
        ))
        .expect("created");
    assert_eq!(
        partial["spec"]["tolerations"],
        json!([own, defaulted("node.kubernetes.io/unreachable")])
    );
    let everything = json!({"operator": "Exists"});
    let all = server
        .create(pod(
            "all",
            json!({"containers": [container()], "tolerations": [everything]}),
        ))
        .expect("created");
    assert_eq!(all["spec"]["tolerations"], json!([everything]));
    // A PUT without them gets them back.
    let mut put = server.get("pods", "default", "plain").expect("plain");
    put["spec"]["tolerations"] = json!([]);
    let (code, back) = send(
        &server,
        server.token(),
        "PUT",
        "/api/v1/namespaces/default/pods/plain",
        Some(&put),
    );
    assert_eq!(code, 200, "{back}");
    assert_eq!(back["spec"]["tolerations"], plain["spec"]["tolerations"]);
}

/// plugin/pkg/admission/priority/admission.go: priority and preemptionPolicy come from the
/// PriorityClass (the built-in system classes; 0 without one); an unknown class or another
/// value in the pod is 403; an update keeps them.
#[test]
fn priority_comes_from_the_priority_class() {
    let server = ApiServer::start();
    let plain = server
        .create(pod("plain", json!({"containers": [container()]})))
        .expect("created");
    assert_eq!(
        (&plain["spec"]["priority"], &plain["spec"]["preemptionPolicy"]),
        (&json!(0), &json!("PreemptLowerPriority"))
    );
    assert!(plain["spec"].get("priorityClassName").is_none());
    let critical = server
        .create(pod(
            "critical",
            json!({"containers": [container()], "priorityClassName": "system-node-critical"}),
        ))
        .expect("created");
    assert_eq!(critical["spec"]["priority"], 2_000_001_000);
    let cluster = server
        .create(pod(
            "cluster",
            json!({"containers": [container()], "priorityClassName": "system-cluster-critical"}),
        ))
        .expect("created");
    assert_eq!(cluster["spec"]["priority"], 2_000_000_000);
    let unknown = server
        .create(pod(
            "x",
            json!({"containers": [container()], "priorityClassName": "gold"}),
        ))
        .expect_err("refused");
    assert_eq!(
        (unknown.code, unknown.message.as_str()),
        (
            403,
            "pods \"x\" is forbidden: no PriorityClass with name gold was found"
        )
    );
    let given = server
        .create(pod("y", json!({"containers": [container()], "priority": 7})))
        .expect_err("refused");
    assert_eq!(
        given.message,
        "pods \"y\" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority \
         admission controller computed 0 from the given PriorityClass name"
    );
    let policy = server
        .create(pod(
            "z",
            json!({"containers": [container()], "preemptionPolicy": "Never"}),
        ))
        .expect_err("refused");
    assert_eq!(
        policy.message,
        "pods \"z\" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; \
         priority admission controller computed PreemptLowerPriority from the given PriorityClass name"
    );
    let mut put = server.get("pods", "default", "critical").expect("critical");
    let spec = put["spec"].as_object_mut().expect("spec");
    spec.remove("priority");
    spec.remove("preemptionPolicy");
    let (code, back) = send(
        &server,
        server.token(),
        "PUT",
        "/api/v1/namespaces/default/pods/critical",
        Some(&put),
    );
    assert_eq!(
        (code, &back["spec"]["priority"]),
        (200, &json!(2_000_001_000)),
        "{back}"
    );
}

/// plugin/pkg/admission/runtimeclass/admission.go: the class's scheduling joins the pod's node
/// selector (a conflict names the key) and tolerations (merged as MergeTolerations merges);
/// overheads compare by quantity; an overhead without the class's is refused.
#[test]
fn runtime_class_scheduling_and_overhead_follow_upstream() {
    let server = ApiServer::start();
    server
        .create(json!({
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "sandboxed"},
            "handler": "runsc",
            "overhead": {"podFixed": {"cpu": "100m"}},
            "scheduling": {
                "nodeSelector": {"sandbox": "yes"},
                "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}],
            },
        }))
        .expect("runtime class");
    let admitted = server
        .create(pod(
            "a",
            json!({"containers": [container()], "runtimeClassName": "sandboxed", "overhead": {"cpu": "0.1"}}),
        ))
        .expect("an equal overhead is admitted");
    assert_eq!(admitted["spec"]["overhead"], json!({"cpu": "100m"}));
    assert_eq!(admitted["spec"]["nodeSelector"], json!({"sandbox": "yes"}));
    let tolerations = admitted["spec"]["tolerations"].as_array().expect("tolerations");
    assert_eq!(tolerations.len(), 3, "{tolerations:?}");
    assert_eq!(tolerations[2]["key"], "sandbox");
    let conflict = server
        .create(pod(
            "b",
            json!({"containers": [container()], "runtimeClassName": "sandboxed", "nodeSelector": {"sandbox": "no"}}),
        ))
        .expect_err("refused");
    assert_eq!(
        conflict.message,
        "pods \"b\" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[sandbox] = yes; \
         pod.spec.nodeSelector[sandbox] = no"
    );
    let stray = server
        .create(pod("c", json!({"containers": [container()], "overhead": {"cpu": "1"}})))
        .expect_err("refused");
    assert_eq!(
        stray.message,
        "pods \"c\" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
    );
}

/// pkg/kubeapiserver/options/plugins.go: ServiceAccount runs before RuntimeClass, so a pod
/// missing both is refused for its service account.
#[test]
fn admission_plugins_run_in_upstreams_order() {
    let server = ApiServer::start();
    let err = server
        .create(pod(
            "p",
            json!({"containers": [container()], "serviceAccountName": "ghost", "runtimeClassName": "nope"}),
        ))
        .expect_err("refused");
    assert_eq!(
        err.message,
        "pods \"p\" is forbidden: error looking up service account default/ghost: serviceaccount \"ghost\" not found"
    );
}

/// plugin/pkg/admission/serviceaccount/admission.go mountServiceAccountToken: init and app
/// containers get the kube-api-access mount, ephemeral containers (added later through their
/// subresource) do not.
#[test]
fn ephemeral_containers_get_no_service_account_mount() {
    let server = ApiServer::start();
    server
        .create(pod("p", json!({"containers": [container()]})))
        .expect("created");
    let mut debug = server.get("pods", "default", "p").expect("p");
    debug["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "dockerlet.local/busybox:1"}]);
    let (code, answer) = send(
        &server,
        server.token(),
        "PUT",
        "/api/v1/namespaces/default/pods/p/ephemeralcontainers",
        Some(&debug),
    );
    assert_eq!(code, 200, "{answer}");
    let ephemeral = &answer["spec"]["ephemeralContainers"][0];
    assert_eq!(ephemeral["name"], "debug");
    assert!(ephemeral.get("volumeMounts").is_none(), "{ephemeral}");
    assert!(answer["spec"]["containers"][0]["volumeMounts"].is_array());
}

/// pkg/apis/core/validation/validation.go ValidatePodSpecificAnnotationUpdates and
/// ValidatePodEphemeralContainersUpdate: the mirror annotation is never added, changed or
/// removed by an update, and static pods take no ephemeral containers.
#[test]
fn mirror_pods_keep_their_annotation_and_take_no_ephemeral_containers() {
    let server = ApiServer::start();
    server.create(node("n1")).expect("node");
    server
        .create(pod("plain", json!({"containers": [container()], "nodeName": "n1"})))
        .expect("pod");
    let mut mirror = pod("static-n1", json!({"containers": [container()], "nodeName": "n1"}));
    mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "hash"});
    server.create(mirror).expect("mirror pod");
    let add = server
        .patch(
            "pods",
            "default",
            "plain",
            PatchType::Merge,
            &json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
            Subresource::Main,
        )
        .expect_err("refused");
    assert_eq!(
        add.message,
        "Pod \"plain\" is invalid: metadata.annotations[kubernetes.io/config.mirror]: Forbidden: may not add mirror \
         pod annotation"
    );
    let remove = server
        .patch(
            "pods",
            "default",
            "static-n1",
            PatchType::Merge,
            &json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": null}}}),
            Subresource::Status,
        )
        .expect_err("refused");
    assert_eq!(
        remove.message,
        "Pod \"static-n1\" is invalid: metadata.annotations[kubernetes.io/config.mirror]: Forbidden: may not remove \
         or update mirror pod annotation"
    );
    let debug = server
        .patch(
            "pods",
            "default",
            "static-n1",
            PatchType::Strategic,
            &json!({"spec": {"ephemeralContainers": [{"name": "d", "image": "dockerlet.local/busybox:1"}]}}),
            Subresource::EphemeralContainers,
        )
        .expect_err("refused");
    assert_eq!(
        debug.message,
        "Pod \"static-n1\" is invalid: []: Forbidden: static pods do not support ephemeral containers"
    );
}

// ---------------------------------------------------------------------------------------------
// The Node authorizer and NodeRestriction.
// ---------------------------------------------------------------------------------------------

/// A server with node authorization, nodes n1 and n2, and in `default`: `on-n1` (secret `s1`,
/// configmap `c1` by env, the `default` account) bound to n1, `on-n2` (secret `s2`) bound to
/// n2, and the mirror pod `static-n1` on n1.
fn cluster() -> ApiServer {
    cluster_with(ApiServerConfig::default())
}

fn cluster_with(config: ApiServerConfig) -> ApiServer {
    let server = ApiServer::start_with(ApiServerConfig {
        node_authorization: true,
        scheduler: false,
        ..config
    })
    .expect("start");
    for n in ["n1", "n2"] {
        server.create(node(n)).expect("node");
    }
    for (kind, name) in [
        ("Secret", "s1"),
        ("Secret", "s2"),
        ("ConfigMap", "c1"),
        ("ConfigMap", "c2"),
    ] {
        server
            .create(json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}))
            .expect("object");
    }
    let env = json!([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c1", "key": "k"}}}]);
    let c1 = json!({"name": "c", "image": "dockerlet.local/busybox:1", "env": env});
    server
        .create(pod(
            "on-n1",
            json!({"nodeName": "n1", "containers": [c1], "volumes": [{"name": "s", "secret": {"secretName": "s1"}}]}),
        ))
        .expect("pod on n1");
    server
        .create(pod(
            "on-n2",
            json!({"nodeName": "n2", "containers": [container()], "volumes": [{"name": "s", "secret": {"secretName": "s2"}}]}),
        ))
        .expect("pod on n2");
    let n1 = server.get("nodes", "", "n1").expect("n1");
    let mut mirror = pod("static-n1", json!({"nodeName": "n1", "containers": [container()]}));
    mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "h"});
    mirror["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": uid(&n1), "controller": true}]);
    server.create(mirror).expect("mirror pod");
    server
}

/// node_authorizer.go authorizeReadNamespacedObject: a node reads (get, list, watch of one
/// named object) only the secrets and configmaps pods bound to it refer to.
#[test]
fn a_node_reads_only_the_secrets_and_configmaps_of_its_pods() {
    let server = cluster();
    let n1 = server.node_token("n1");
    assert_eq!(
        send(&server, &n1, "GET", "/api/v1/namespaces/default/secrets/s1", None).0,
        200
    );
    assert_eq!(
        send(&server, &n1, "GET", "/api/v1/namespaces/default/configmaps/c1", None).0,
        200
    );
    assert_eq!(
        send(
            &server,
            &n1,
            "GET",
            "/api/v1/namespaces/default/configmaps/kube-root-ca.crt",
            None
        )
        .0,
        200,
        "the kube-api-access volume refers to it"
    );
    let one = "/api/v1/namespaces/default/secrets?fieldSelector=metadata.name%3Ds1";
    assert_eq!(send(&server, &n1, "GET", one, None).0, 200);
    assert_eq!(
        refused(
            send(&server, &n1, "GET", "/api/v1/namespaces/default/secrets/s2", None),
            403
        ),
        "secrets \"s2\" is forbidden: User \"system:node:n1\" cannot get resource \"secrets\" in API group \"\" in \
         the namespace \"default\": no relationship found between node 'n1' and this object"
    );
    assert_eq!(
        refused(
            send(&server, &n1, "GET", "/api/v1/namespaces/default/secrets", None),
            403
        ),
        "secrets is forbidden: User \"system:node:n1\" cannot list resource \"secrets\" in API group \"\" in the \
         namespace \"default\": No Object name found"
    );
    assert_eq!(
        refused(
            send(&server, &n1, "DELETE", "/api/v1/namespaces/default/secrets/s1", None),
            403
        ),
        "secrets \"s1\" is forbidden: User \"system:node:n1\" cannot delete resource \"secrets\" in API group \"\" in \
         the namespace \"default\": can only read resources of this type"
    );
    assert_eq!(
        send(&server, &n1, "GET", "/api/v1/namespaces/default/configmaps/c2", None).0,
        403
    );
    // Deleting the pod ends the relationship.
    server.delete("pods", "default", "on-n1", Some(0)).expect("deleted");
    assert_eq!(
        send(&server, &n1, "GET", "/api/v1/namespaces/default/secrets/s1", None).0,
        403
    );
}

/// graph_populator.go AddPod: a mirror pod's references give its node nothing (without the
/// ServiceAccount plugin, which would refuse them, such a pod can be stored).
#[test]
fn a_mirror_pods_references_give_its_node_no_access() {
    let server = cluster_with(ApiServerConfig {
        service_account_admission: false,
        ..ApiServerConfig::default()
    });
    server
        .create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mirrored"}}))
        .expect("secret");
    let mut mirror = pod(
        "static-secret-n1",
        json!({"nodeName": "n1", "containers": [container()], "volumes": [{"name": "s", "secret": {"secretName": "mirrored"}}]}),
    );
    mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "h"});
    server.create(mirror).expect("stored without the ServiceAccount plugin");
    let n1 = server.node_token("n1");
    assert_eq!(
        send(
            &server,
            &n1,
            "GET",
            "/api/v1/namespaces/default/pods/static-secret-n1",
            None
        )
        .0,
        200
    );
    assert_eq!(
        send(&server, &n1, "GET", "/api/v1/namespaces/default/secrets/mirrored", None).0,
        403
    );
}

/// node_authorizer.go authorizePod (AuthorizeNodeWithSelectors): a node reads only pods bound
/// to it (a pod that does not exist is 403 too, never 404), and lists or watches pods only with
/// `spec.nodeName=<itself>`.
#[test]
fn a_node_sees_only_its_own_pods() {
    let server = cluster();
    let n1 = server.node_token("n1");
    assert_eq!(
        send(&server, &n1, "GET", "/api/v1/namespaces/default/pods/on-n1", None).0,
        200
    );
    assert_eq!(
        send(&server, &n1, "GET", "/api/v1/namespaces/default/pods/static-n1", None).0,
        200
    );
    assert_eq!(
        refused(
            send(&server, &n1, "GET", "/api/v1/namespaces/default/pods/on-n2", None),
            403
        ),
        "pods \"on-n2\" is forbidden: User \"system:node:n1\" cannot get resource \"pods\" in API group \"\" in the \
         namespace \"default\": no relationship found between node 'n1' and this object"
    );
    assert_eq!(
        send(&server, &n1, "GET", "/api/v1/namespaces/default/pods/ghost", None).0,
        403
    );
    let (code, list) = send(
        &server,
        &n1,
        "GET",
        "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1",
        None,
    );
    assert_eq!((code, list["items"].as_array().map(Vec::len)), (200, Some(2)), "{list}");
    assert_eq!(
        refused(send(&server, &n1, "GET", "/api/v1/pods", None), 403),
        "pods is forbidden: User \"system:node:n1\" cannot list resource \"pods\" in API group \"\" at the cluster \
         scope: can only list/watch pods with spec.nodeName field selector"
    );
    assert_eq!(
        send(
            &server,
            &n1,
            "GET",
            "/api/v1/pods?fieldSelector=spec.nodeName%3Dn2",
            None
        )
        .0,
        403
    );
    let pods = "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dghost%2Cspec.nodeName%3Dn1";
    let (code, none) = send(&server, &n1, "GET", pods, None);
    assert_eq!(
        (code, none["items"].as_array().map(Vec::len)),
        (200, Some(0)),
        "what a node asks instead"
    );
    assert!(
        server
            .node_refusals()
            .iter()
            .any(|r| r.starts_with("GET /api/v1/namespaces/default/pods/ghost: pods \"ghost\" is forbidden")),
        "{:?}",
        server.node_refusals()
    );
    assert_eq!(
        refused(
            send(
                &server,
                &n1,
                "POST",
                "/api/v1/namespaces/default/pods/on-n1/binding",
                Some(&json!({}))
            ),
            403
        ),
        "pods \"on-n1\" is forbidden: User \"system:node:n1\" cannot create resource \"pods/binding\" in API group \
         \"\" in the namespace \"default\""
    );
}

/// NodeRestriction admitPodCreate: a node creates only mirror pods, bound to itself, owned by
/// its Node as controller with the Node's UID, naming no account, secret or configmap.
#[test]
fn a_node_creates_only_mirror_pods_of_its_own() {
    let server = cluster();
    let n1 = server.node_token("n1");
    let n1_uid = uid(&server.get("nodes", "", "n1").expect("n1"));
    let path = "/api/v1/namespaces/default/pods";
    let mirror = |name: &str, spec: Value, owners: Value| {
        let mut p = pod(name, spec);
        p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "h"});
        p["metadata"]["ownerReferences"] = owners;
        p
    };
    let owner = |uid: &str| json!([{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": uid, "controller": true}]);
    let spec = json!({"nodeName": "n1", "containers": [container()]});
    let plain = pod("plain", spec.clone());
    assert_eq!(
        refused(send(&server, &n1, "POST", path, Some(&plain)), 403),
        "pods \"plain\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" annotation, node \"n1\" can \
         only create mirror pods"
    );
    let elsewhere = mirror(
        "m",
        json!({"nodeName": "n2", "containers": [container()]}),
        owner(&n1_uid),
    );
    assert_eq!(
        refused(send(&server, &n1, "POST", path, Some(&elsewhere)), 403),
        "pods \"m\" is forbidden: node \"n1\" can only create pods with spec.nodeName set to itself"
    );
    let orphan = mirror("m", spec.clone(), json!([]));
    assert_eq!(
        refused(send(&server, &n1, "POST", path, Some(&orphan)), 403),
        "pods \"m\" is forbidden: node \"n1\" can only create pods with an owner reference set to itself"
    );
    let stale = mirror("m", spec.clone(), owner("not-the-uid"));
    assert_eq!(
        refused(send(&server, &n1, "POST", path, Some(&stale)), 403),
        format!("pods \"m\" is forbidden: node n1 UID mismatch: expected not-the-uid got {n1_uid}")
    );
    let env = json!([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c1", "key": "k"}}}]);
    let with_map = mirror(
        "m",
        json!({"nodeName": "n1", "containers": [{"name": "c", "image": "dockerlet.local/busybox:1", "env": env}]}),
        owner(&n1_uid),
    );
    assert_eq!(
        refused(send(&server, &n1, "POST", path, Some(&with_map)), 403),
        "pods \"m\" is forbidden: node \"n1\" can not create pods that reference configmaps"
    );
    let good = mirror("m", spec, owner(&n1_uid));
    let (code, created) = send(&server, &n1, "POST", path, Some(&good));
    assert_eq!(code, 201, "{created}");
    assert!(created["spec"].get("serviceAccountName").is_none(), "{created}");
}

/// NodeRestriction admitPodStatus and admitPod (delete, update): a node writes the status of
/// and deletes only pods bound to itself, changes no labels through status, updates no pod.
#[test]
fn a_node_writes_status_and_deletes_only_its_own_pods() {
    let server = cluster();
    let n1 = server.node_token("n1");
    let status = json!({"status": {"phase": "Running"}});
    let own = "/api/v1/namespaces/default/pods/on-n1";
    assert_eq!(
        send(&server, &n1, "PATCH", &format!("{own}/status"), Some(&status)).0,
        200
    );
    assert_eq!(
        refused(
            send(
                &server,
                &n1,
                "PATCH",
                "/api/v1/namespaces/default/pods/on-n2/status",
                Some(&status)
            ),
            403
        ),
        "pods \"on-n2\" is forbidden: node \"n1\" can only update pod status for pods with spec.nodeName set to itself"
    );
    let relabel = json!({"metadata": {"labels": {"app": "x"}}});
    assert_eq!(
        refused(
            send(&server, &n1, "PATCH", &format!("{own}/status"), Some(&relabel)),
            403
        ),
        "pods \"on-n1\" is forbidden: node \"n1\" cannot update labels through pod status"
    );
    assert_eq!(
        refused(send(&server, &n1, "PATCH", own, Some(&relabel)), 403),
        "pods \"on-n1\" is forbidden: User \"system:node:n1\" cannot patch resource \"pods\" in API group \"\" in \
         the namespace \"default\""
    );
    assert_eq!(
        refused(
            send(&server, &n1, "DELETE", "/api/v1/namespaces/default/pods/on-n2", None),
            403
        ),
        "pods \"on-n2\" is forbidden: node \"n1\" can only delete pods with spec.nodeName set to itself"
    );
    assert_eq!(
        refused(
            send(&server, &n1, "DELETE", "/api/v1/namespaces/default/pods/ghost", None),
            404
        ),
        "pods \"ghost\" not found"
    );
    assert_eq!(
        send(&server, &n1, "DELETE", &format!("{own}?gracePeriodSeconds=0"), None).0,
        200
    );
}

/// node_authorizer.go authorizeNode and NodeRestriction admitNode: a node reads and changes
/// only its own Node, never its taints, nor labels outside kubelet's.
#[test]
fn a_node_modifies_only_its_own_node() {
    let server = cluster();
    let n1 = server.node_token("n1");
    let n3 = server.node_token("n3");
    assert_eq!(send(&server, &n1, "GET", "/api/v1/nodes/n1", None).0, 200);
    assert_eq!(
        refused(send(&server, &n1, "GET", "/api/v1/nodes/n2", None), 403),
        "nodes \"n2\" is forbidden: User \"system:node:n1\" cannot get resource \"nodes\" in API group \"\" at the \
         cluster scope: node 'n1' cannot read 'n2', only its own Node object"
    );
    assert_eq!(
        refused(send(&server, &n1, "GET", "/api/v1/nodes", None), 403),
        "nodes is forbidden: User \"system:node:n1\" cannot list resource \"nodes\" in API group \"\" at the cluster \
         scope: node 'n1' cannot read all nodes, only its own Node object"
    );
    assert_eq!(
        send(
            &server,
            &n1,
            "GET",
            "/api/v1/nodes?fieldSelector=metadata.name%3Dn1&watch=1&timeoutSeconds=1",
            None
        )
        .0,
        200
    );
    let label = json!({"metadata": {"labels": {"tier": "edge"}}});
    assert_eq!(
        refused(send(&server, &n1, "PATCH", "/api/v1/nodes/n2", Some(&label)), 403),
        "nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\""
    );
    assert_eq!(send(&server, &n1, "PATCH", "/api/v1/nodes/n1", Some(&label)).0, 200);
    let role = json!({"metadata": {"labels": {"node-role.kubernetes.io/worker": ""}}});
    assert_eq!(
        refused(send(&server, &n1, "PATCH", "/api/v1/nodes/n1", Some(&role)), 403),
        "nodes \"n1\" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/worker"
    );
    let taint = json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
    assert_eq!(
        refused(send(&server, &n1, "PATCH", "/api/v1/nodes/n1", Some(&taint)), 403),
        "nodes \"n1\" is forbidden: node \"n1\" is not allowed to modify taints"
    );
    let status = json!({"status": {"capacity": {"pods": "110"}}});
    assert_eq!(
        send(&server, &n1, "PATCH", "/api/v1/nodes/n1/status", Some(&status)).0,
        200
    );
    let mut new = node("n3");
    new["metadata"]["labels"] = json!({"kubernetes.io/hostname": "n3", "node-restriction.kubernetes.io/x": "y"});
    assert_eq!(
        refused(send(&server, &n3, "POST", "/api/v1/nodes", Some(&new)), 403),
        "nodes \"n3\" is forbidden: node \"n3\" is not allowed to set the following labels: \
         node-restriction.kubernetes.io/x"
    );
    new["metadata"]["labels"] = json!({"kubernetes.io/hostname": "n3"});
    new["spec"] = json!({"taints": [{"key": "k", "effect": "NoSchedule"}]});
    assert_eq!(
        send(&server, &n3, "POST", "/api/v1/nodes", Some(&new)).0,
        201,
        "taints at registration"
    );
    assert_eq!(send(&server, &n1, "POST", "/api/v1/nodes", Some(&new)).0, 403);
}

/// node_authorizer.go authorizeLease and NodeRestriction admitLease: only its own Lease, only
/// in kube-node-lease.
#[test]
fn a_node_touches_only_its_own_lease() {
    let server = cluster();
    let n1 = server.node_token("n1");
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let lease = |name: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
               "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}})
    };
    assert_eq!(send(&server, &n1, "POST", leases, Some(&lease("n1"))).0, 201);
    assert_eq!(
        refused(send(&server, &n1, "POST", leases, Some(&lease("n2"))), 403),
        "leases.coordination.k8s.io \"n2\" is forbidden: can only access node lease with the same name as the \
         requesting node"
    );
    let renew = json!({"spec": {"renewTime": "2030-01-01T00:00:00.000000Z"}});
    assert_eq!(
        send(&server, &n1, "PATCH", &format!("{leases}/n1"), Some(&renew)).0,
        200
    );
    assert_eq!(
        refused(send(&server, &n1, "GET", &format!("{leases}/n2"), None), 403),
        "leases.coordination.k8s.io \"n2\" is forbidden: User \"system:node:n1\" cannot get resource \"leases\" in \
         API group \"coordination.k8s.io\" in the namespace \"kube-node-lease\": can only access node lease with the \
         same name as the requesting node"
    );
    assert_eq!(
        refused(
            send(
                &server,
                &n1,
                "GET",
                "/apis/coordination.k8s.io/v1/namespaces/default/leases/n1",
                None
            ),
            403
        ),
        "leases.coordination.k8s.io \"n1\" is forbidden: User \"system:node:n1\" cannot get resource \"leases\" in \
         API group \"coordination.k8s.io\" in the namespace \"default\": can only access leases in the \
         \"kube-node-lease\" system namespace"
    );
}

/// node_authorizer.go authorizeCreateToken and NodeRestriction admitServiceAccount: tokens
/// only for accounts of pods bound to the node, bound to such a pod with its UID.
#[test]
fn a_node_requests_tokens_only_for_its_pods() {
    let server = cluster();
    let n1 = server.node_token("n1");
    let path = "/api/v1/namespaces/default/serviceaccounts/default/token";
    let on_n1 = uid(&server.get("pods", "default", "on-n1").expect("pod"));
    let on_n2 = uid(&server.get("pods", "default", "on-n2").expect("pod"));
    let request = |reference: Value| json!({"spec": {"boundObjectRef": reference}});
    let bound = |name: &str, uid: &str| json!({"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid});
    let (code, answer) = send(&server, &n1, "POST", path, Some(&request(bound("on-n1", &on_n1))));
    assert_eq!(code, 201, "{answer}");
    assert_eq!(
        refused(send(&server, &n1, "POST", path, Some(&json!({"spec": {}}))), 403),
        "serviceaccounts \"default\" is forbidden: node requested token not bound to a pod"
    );
    assert_eq!(
        refused(
            send(&server, &n1, "POST", path, Some(&request(bound("on-n1", "")))),
            403
        ),
        "serviceaccounts \"default\" is forbidden: node requested token with a pod binding without a uid"
    );
    assert_eq!(
        refused(
            send(&server, &n1, "POST", path, Some(&request(bound("on-n2", &on_n2)))),
            403
        ),
        "serviceaccounts \"default\" is forbidden: node requested token bound to a pod scheduled on a different node"
    );
    assert_eq!(
        refused(
            send(&server, &n1, "POST", path, Some(&request(bound("on-n1", "stale")))),
            403
        ),
        "serviceaccounts \"default\" is forbidden: the UID in the bound object reference (stale) does not match the \
         UID in record. The object might have been deleted and then recreated"
    );
    server
        .create(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}))
        .expect("account");
    assert_eq!(
        refused(
            send(
                &server,
                &n1,
                "POST",
                "/api/v1/namespaces/default/serviceaccounts/robot/token",
                Some(&request(bound("on-n1", &on_n1)))
            ),
            403
        ),
        "serviceaccounts \"robot\" is forbidden: User \"system:node:n1\" cannot create resource \
         \"serviceaccounts/token\" in API group \"\" in the namespace \"default\": no relationship found between \
         node 'n1' and this object"
    );
}

/// policy.go NodeRules and RBAC's system:discovery: reviews, services, runtimeclasses and
/// events are the node's; namespaces and the issuer's keys are not; discovery is everyone's.
#[test]
fn a_node_has_the_system_node_roles_static_rules() {
    let server = cluster();
    let n1 = server.node_token("n1");
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "x"}});
    assert_eq!(
        send(
            &server,
            &n1,
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            Some(&review)
        )
        .0,
        201
    );
    assert_eq!(send(&server, &n1, "GET", "/api/v1/services", None).0, 200);
    assert_eq!(
        send(&server, &n1, "GET", "/apis/node.k8s.io/v1/runtimeclasses", None).0,
        200
    );
    assert_eq!(send(&server, &n1, "GET", "/api", None).0, 200);
    assert_eq!(send(&server, &n1, "GET", "/apis/coordination.k8s.io/v1", None).0, 200);
    let event = json!({"metadata": {"name": "e1"}, "involvedObject": {"kind": "Node", "name": "n1"}, "reason": "R"});
    assert_eq!(
        send(&server, &n1, "POST", "/api/v1/namespaces/default/events", Some(&event)).0,
        201
    );
    assert_eq!(
        refused(
            send(&server, &n1, "GET", "/api/v1/namespaces/default/events", None),
            403
        ),
        "events is forbidden: User \"system:node:n1\" cannot list resource \"events\" in API group \"\" in the \
         namespace \"default\""
    );
    assert_eq!(
        refused(send(&server, &n1, "GET", "/api/v1/namespaces", None), 403),
        "namespaces is forbidden: User \"system:node:n1\" cannot list resource \"namespaces\" in API group \"\" at \
         the cluster scope"
    );
    assert_eq!(
        refused(send(&server, &n1, "GET", "/openid/v1/jwks", None), 403),
        "forbidden: User \"system:node:n1\" cannot get path \"/openid/v1/jwks\""
    );
    // Other users keep every power (RBAC is not modelled).
    assert_eq!(send(&server, server.token(), "GET", "/api/v1/namespaces", None).0, 200);
}

/// Without `node_authorization` a node's token may do everything, as every credential may.
#[test]
fn without_node_authorization_a_node_token_may_do_everything() {
    let server = ApiServer::start();
    server
        .create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}))
        .expect("secret");
    let n1 = server.node_token("n1");
    assert_eq!(
        send(&server, &n1, "GET", "/api/v1/namespaces/default/secrets/s", None).0,
        200
    );
}

/// pkg/registry/authorization/subjectaccessreview/rest.go through the union of authorizers:
/// a review of a node's request gets the Node authorizer's answer and reason.
#[test]
fn access_reviews_of_nodes_get_the_node_authorizers_answer() {
    let server = cluster();
    let review = |verb: &str, resource: &str, name: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": "system:node:n1", "groups": ["system:nodes", "system:authenticated"],
            "resourceAttributes": {"verb": verb, "resource": resource, "name": name, "namespace": "default", "version": "v1"},
        }})
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let (code, mine) = send(
        &server,
        server.token(),
        "POST",
        path,
        Some(&review("get", "secrets", "s1")),
    );
    assert_eq!((code, &mine["status"]), (201, &json!({"allowed": true})), "{mine}");
    let (_, other) = send(
        &server,
        server.token(),
        "POST",
        path,
        Some(&review("get", "secrets", "s2")),
    );
    assert_eq!(
        other["status"],
        json!({"allowed": false, "reason": "no relationship found between node 'n1' and this object"})
    );
}
