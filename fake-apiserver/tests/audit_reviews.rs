//! The audit of admission, tokens, reviews and node authorization (the README's audit section), its
//! TokenReview and SubjectAccessReview part: each test holds the fixture to one behaviour of
//! kube-apiserver, cited by its upstream file. Raw HTTP with the server's token; no Docker.

use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use serde_json::{json, Value};

mod common;
use common::send;

const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn container() -> Value {
    json!({"name": "c", "image": "dockerlet.local/busybox:1"})
}

fn uid(obj: &Value) -> String {
    obj["metadata"]["uid"].as_str().expect("uid").to_string()
}

/// pkg/serviceaccount/jwt.go and the bearer-token union: a service account token for another
/// audience is `[invalid bearer token, token audiences [...] is invalid for the target
/// audiences [...]]`; a static token asked for another audience is `invalid bearer token`;
/// the answer carries the token sent (tokenreview/storage.go returns the review as posted).
#[test]
fn token_reviews_refuse_other_audiences_in_the_authenticators_words() {
    let server = ApiServer::start();
    let (code, issued) = send(
        &server,
        server.token(),
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        Some(&json!({"spec": {"audiences": ["vault"]}})),
    );
    assert_eq!(code, 201, "{issued}");
    let token = issued["status"]["token"].as_str().expect("token").to_string();
    let review = |token: &str, audiences: Option<Value>| {
        let mut spec = json!({"token": token});
        if let Some(a) = audiences {
            spec["audiences"] = a;
        }
        let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec});
        let (code, answer) = send(
            &server,
            server.token(),
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            Some(&body),
        );
        assert_eq!(code, 201, "{answer}");
        answer
    };
    let refused = review(&token, None);
    assert_eq!(
        refused["status"],
        json!({"authenticated": false, "user": {}, "error": format!(
            "[invalid bearer token, token audiences [\"vault\"] is invalid for the target audiences [\"{ISSUER}\"]]"
        )})
    );
    let good = review(&token, Some(json!(["vault", "other"])));
    assert_eq!(good["status"]["authenticated"], true);
    assert_eq!(good["status"]["audiences"], json!(["vault"]));
    assert_eq!(good["spec"]["token"], token, "the review comes back as posted");
    let admin = review(server.token(), Some(json!(["vault"])));
    assert_eq!(admin["status"]["error"], "invalid bearer token");
    assert_eq!(admin["status"]["authenticated"], false);
}

/// staging/src/k8s.io/apiserver/pkg/authentication/serviceaccount/util.go UserInfo: the node
/// of a pod-bound token is in `extra`, its UID only when the node existed at issue.
#[test]
fn token_reviews_name_a_node_uid_only_when_known() {
    let server = ApiServer::start_with(ApiServerConfig {
        scheduler: false,
        ..ApiServerConfig::default()
    })
    .expect("start");
    let created = server
        .create(pod("p", json!({"nodeName": "gone", "containers": [container()]})))
        .expect("pod");
    let request =
        json!({"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": uid(&created)}}});
    let (code, issued) = send(
        &server,
        server.token(),
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        Some(&request),
    );
    assert_eq!(code, 201, "{issued}");
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                      "spec": {"token": issued["status"]["token"]}});
    let (_, answer) = send(
        &server,
        server.token(),
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        Some(&body),
    );
    let extra = &answer["status"]["user"]["extra"];
    assert_eq!(
        extra["authentication.kubernetes.io/node-name"],
        json!(["gone"]),
        "{answer}"
    );
    assert!(extra.get("authentication.kubernetes.io/node-uid").is_none(), "{extra}");
    assert_eq!(extra["authentication.kubernetes.io/pod-name"], json!(["p"]));
}

/// pkg/apis/authorization/validation/validation.go ValidateSubjectAccessReviewSpec: both
/// problems, the union one at `spec`, with the group-qualified kind.
#[test]
fn access_review_validation_reads_as_upstream() {
    let server = ApiServer::start();
    let (code, answer) = send(
        &server,
        server.token(),
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        Some(&json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {}})),
    );
    assert_eq!(code, 422, "{answer}");
    assert_eq!(
        answer["message"],
        "SubjectAccessReview.authorization.k8s.io \"\" is invalid: [spec: Invalid value: null: exactly one of \
         nonResourceAttributes or resourceAttributes must be specified, spec.user: Invalid value: \"\": at least one \
         of user or group must be specified]"
    );
}
