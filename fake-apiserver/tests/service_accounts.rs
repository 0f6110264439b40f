//! The fixture behaves as a real cluster for service accounts (issue 11): every namespace has a
//! `default` ServiceAccount and `kube-root-ca.crt`; pods get the ServiceAccount admission
//! plugin's kube-api-access volume; TokenRequest answers signed JWTs with upstream's claims and
//! checks; Services get cluster IPs, and `kubernetes` exists in `default`. Through kubectl where
//! that is what a user sees, raw HTTP for TokenRequest. No Docker needed.

use base64::Engine as _;
use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use serde_json::{json, Value};

mod common;
use common::send;

const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn post(server: &ApiServer, path: &str, body: &Value) -> (u16, Value) {
    send(server, server.token(), "POST", path, Some(body))
}

/// Writes `yaml` to a file and `kubectl create -f`s it; returns the command's output.
fn kubectl_create(server: &ApiServer, file: &str, yaml: &str) -> std::process::Output {
    let path = server.dir().join(file);
    std::fs::write(&path, yaml).expect("write the manifest");
    server.kubectl(&["create", "-f", path.to_str().expect("UTF-8 path")])
}

fn kubectl_json(server: &ApiServer, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&server.kubectl_ok(&args)).expect("kubectl prints JSON")
}

fn jwt_part(token: &str, i: usize) -> Value {
    let part = token.split('.').nth(i).expect("a JWT has three parts");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .expect("base64url");
    serde_json::from_slice(&bytes).expect("JSON")
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn uid(obj: &Value) -> String {
    obj["metadata"]["uid"].as_str().expect("uid").to_string()
}

/// `default` and the root CA in the four built-in namespaces and in a new one (the CA is real
/// PEM, the one that signs the server's certificate with TLS); the controllers put them back
/// when deleted; `kubectl get sa` prints upstream's columns.
#[test]
fn every_namespace_has_a_default_service_account_and_the_root_ca() {
    let server = ApiServer::start_with(ApiServerConfig {
        tls: true,
        ..ApiServerConfig::default()
    })
    .expect("start");
    let pem = server.root_ca_pem();
    assert!(
        pem.starts_with("-----BEGIN CERTIFICATE-----") && pem.trim_end().ends_with("-----END CERTIFICATE-----"),
        "{pem}"
    );
    assert_eq!(
        Some(pem.as_str()),
        server.ca_pem(),
        "the CA that signed the serving certificate"
    );
    server.kubectl_ok(&["create", "namespace", "team"]);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease", "team"] {
        let sa = kubectl_json(&server, &["get", "serviceaccount", "default", "-n", ns]);
        assert_eq!(sa["metadata"]["namespace"], ns);
        assert!(sa["metadata"]["uid"].is_string(), "{sa}");
        let cm = kubectl_json(&server, &["get", "configmap", "kube-root-ca.crt", "-n", ns]);
        assert_eq!(cm["data"], json!({"ca.crt": pem}), "{ns}");
        assert_eq!(
            cm["metadata"]["annotations"]["kubernetes.io/description"],
            "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such \
             as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across \
             distributions of Kubernetes clusters."
        );
    }
    let table = server.kubectl_ok(&["get", "sa", "-n", "team"]);
    let lines: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["NAME", "SECRETS", "AGE"], "{table}");
    assert_eq!(lines[1][..2], ["default", "0"], "{table}");
    let before = uid(&server.get("configmaps", "team", "kube-root-ca.crt").expect("root CA"));
    server.kubectl_ok(&["delete", "configmap", "kube-root-ca.crt", "-n", "team"]);
    let after = server.get("configmaps", "team", "kube-root-ca.crt").expect("put back");
    assert_ne!(uid(&after), before);
    assert_eq!(after["data"]["ca.crt"], pem);
    server.kubectl_ok(&["delete", "serviceaccount", "default", "-n", "team"]);
    assert!(server.get("serviceaccounts", "team", "default").is_some(), "put back");
    server.kubectl_ok(&["delete", "namespace", "team"]);
    assert!(server.get("serviceaccounts", "team", "default").is_none());
    assert!(server.get("configmaps", "team", "kube-root-ca.crt").is_none());
    // In plain HTTP mode the CA is made up all the same.
    let plain = ApiServer::start();
    assert!(plain.root_ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
    assert_eq!(
        plain
            .get("configmaps", "kube-system", "kube-root-ca.crt")
            .expect("root CA")["data"]["ca.crt"],
        plain.root_ca_pem()
    );
}

fn is_volume_suffix(s: &str) -> bool {
    s.len() == 5 && s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
}

/// A pod from `kubectl create -f` comes back as the ServiceAccount plugin makes it: account
/// `default` (both fields), the kube-api-access volume exactly as upstream's, mounted read-only
/// in every init and app container except the one that mounts its own volume at the path.
#[test]
fn a_pod_gets_the_default_service_account_and_the_kube_api_access_volume() {
    let server = ApiServer::start();
    let out = kubectl_create(
        &server,
        "web.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  initContainers:\n  - name: init\n    image: \
         dockerlet.local/busybox:1\n  containers:\n  - name: app\n    image: dockerlet.local/busybox:1\n    \
         volumeMounts: [{name: scratch, mountPath: /scratch}]\n  - name: own\n    image: dockerlet.local/busybox:1\n    \
         volumeMounts: [{name: scratch, mountPath: /var/run/secrets/kubernetes.io/serviceaccount}]\n  volumes:\n  - \
         name: scratch\n    emptyDir: {}\n",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pod = kubectl_json(&server, &["get", "pod", "web"]);
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["serviceAccount"], "default");
    let volumes = spec["volumes"].as_array().expect("volumes");
    assert_eq!(volumes.len(), 2, "{volumes:?}");
    assert_eq!(volumes[0], json!({"name": "scratch", "emptyDir": {}}));
    let name = volumes[1]["name"].as_str().expect("name").to_string();
    let suffix = name.strip_prefix("kube-api-access-").expect("kube-api-access-<suffix>");
    assert!(is_volume_suffix(suffix), "{name}");
    assert_eq!(
        volumes[1],
        json!({
            "name": name,
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [
                        {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                    ]}},
                ],
            },
        })
    );
    let mount = json!({"name": name, "readOnly": true, "mountPath": MOUNT_PATH});
    assert_eq!(spec["initContainers"][0]["volumeMounts"], json!([mount]));
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        json!([{"name": "scratch", "mountPath": "/scratch"}, mount])
    );
    assert_eq!(
        spec["containers"][1]["volumeMounts"],
        json!([{"name": "scratch", "mountPath": MOUNT_PATH}]),
        "a container that mounts something at the path keeps it"
    );
    // Every pod gets a volume name of its own; an update leaves the spec as admitted.
    let out = kubectl_create(
        &server,
        "second.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: second\nspec:\n  containers:\n  - name: c\n    image: \
         dockerlet.local/busybox:1\n",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let second = server.get("pods", "default", "second").expect("second");
    let second_name = second["spec"]["volumes"][0]["name"]
        .as_str()
        .expect("volume")
        .to_string();
    assert!(second_name.starts_with("kube-api-access-") && second_name != name);
    server.kubectl_ok(&["label", "pod", "web", "tier=front"]);
    assert_eq!(server.get("pods", "default", "web").expect("web")["spec"], pod["spec"]);
    // Ephemeral containers cannot come with the pod (so none needs the mount).
    let ephemeral = json!({
        "metadata": {"name": "debug"},
        "spec": {
            "containers": [{"name": "c", "image": "i"}],
            "ephemeralContainers": [{"name": "e", "image": "i"}],
        },
    });
    let (code, status) = post(&server, "/api/v1/namespaces/default/pods", &ephemeral);
    assert_eq!(
        (code, status["message"].as_str()),
        (
            422,
            Some("Pod \"debug\" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create")
        ),
        "{status}"
    );
}

/// `automountServiceAccountToken: false` on the pod, or on its account with the pod silent,
/// leaves the volume out; the pod's `true` wins over the account's `false`. A pod without pull
/// secrets gets its account's.
#[test]
fn automount_false_on_the_pod_or_the_account_mounts_nothing() {
    let server = ApiServer::start();
    let out = kubectl_create(
        &server,
        "robot.yaml",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: robot\nautomountServiceAccountToken: \
         false\nimagePullSecrets: [{name: registry}]\n",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pod = |name: &str, account: Option<&str>, automount: Option<bool>| {
        let mut spec = json!({"containers": [{"name": "c", "image": "dockerlet.local/busybox:1"}]});
        if let Some(a) = account {
            spec["serviceAccountName"] = json!(a);
        }
        if let Some(a) = automount {
            spec["automountServiceAccountToken"] = json!(a);
        }
        let yaml = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec});
        let out = kubectl_create(&server, &format!("{name}.json"), &yaml.to_string());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        server.get("pods", "default", name).expect("created")
    };
    let off = pod("off", None, Some(false));
    assert_eq!(off["spec"]["serviceAccountName"], "default");
    assert!(off["spec"].get("volumes").is_none(), "{off}");
    assert!(off["spec"]["containers"][0].get("volumeMounts").is_none(), "{off}");
    let robot = pod("robot", Some("robot"), None);
    assert_eq!(robot["spec"]["serviceAccountName"], "robot");
    assert!(robot["spec"].get("volumes").is_none(), "{robot}");
    assert_eq!(robot["spec"]["imagePullSecrets"], json!([{"name": "registry"}]));
    let forced = pod("forced", Some("robot"), Some(true));
    let volumes = forced["spec"]["volumes"].as_array().expect("the pod's true wins");
    assert!(volumes[0]["name"].as_str().unwrap().starts_with("kube-api-access-"));
    assert_eq!(
        forced["spec"]["containers"][0]["volumeMounts"][0]["mountPath"],
        MOUNT_PATH
    );
}

/// Mirror pods are stored as sent (no account, no volume) and may not reference a service
/// account, a secret or a token projection, with upstream's 403 messages.
#[test]
fn mirror_pods_are_left_alone_and_may_not_reference_accounts_or_secrets() {
    let server = ApiServer::start();
    let mirror = |name: &str, extra: Value| {
        let mut spec = json!({"nodeName": "n1", "containers": [{"name": "c", "image": "dockerlet.local/busybox:1"}]});
        if let (Value::Object(spec), Value::Object(extra)) = (&mut spec, extra) {
            spec.extend(extra);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "annotations": {"kubernetes.io/config.mirror": "abc"}},
            "spec": spec,
        })
    };
    let (code, created) = post(&server, "/api/v1/namespaces/default/pods", &mirror("m", json!({})));
    assert_eq!(code, 201, "{created}");
    assert!(created["spec"].get("serviceAccountName").is_none(), "{created}");
    assert!(created["spec"].get("volumes").is_none(), "{created}");
    let cases = [
        (
            json!({"serviceAccountName": "default"}),
            "a mirror pod may not reference service accounts",
        ),
        (
            json!({"serviceAccount": "default"}),
            "a mirror pod may not reference service accounts",
        ),
        (
            json!({"volumes": [{"name": "s", "secret": {"secretName": "x"}}]}),
            "a mirror pod may not reference secrets",
        ),
        (
            json!({"containers": [{"name": "c", "image": "i", "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "x", "key": "k"}}}]}]}),
            "a mirror pod may not reference secrets",
        ),
        (
            json!({"volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]}),
            "a mirror pod may not use ServiceAccountToken volume projections",
        ),
    ];
    for (extra, why) in cases {
        let (code, status) = post(&server, "/api/v1/namespaces/default/pods", &mirror("bad", extra));
        assert_eq!((code, status["reason"].as_str()), (403, Some("Forbidden")), "{status}");
        assert_eq!(status["message"], format!("pods \"bad\" is forbidden: {why}"));
    }
}

/// A pod naming an account that does not exist is refused with upstream's message, through
/// kubectl and raw HTTP (where a generateName is what the message names).
#[test]
fn a_pod_naming_a_missing_service_account_is_refused() {
    let server = ApiServer::start();
    let out = kubectl_create(
        &server,
        "ghost.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: haunted\nspec:\n  serviceAccountName: ghost\n  containers:\n  \
         - name: c\n    image: dockerlet.local/busybox:1\n",
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "pods \"haunted\" is forbidden: error looking up service account default/ghost: serviceaccount \"ghost\" \
             not found"
        ),
        "{stderr}"
    );
    assert!(server.get("pods", "default", "haunted").is_none());
    let pod = json!({
        "metadata": {"generateName": "gen-"},
        "spec": {"serviceAccountName": "ghost", "containers": [{"name": "c", "image": "i"}]},
    });
    let (code, status) = post(&server, "/api/v1/namespaces/default/pods", &pod);
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "pods \"gen-\" is forbidden: error looking up service account default/ghost: serviceaccount \"ghost\" not found"
    );
    // Once the account exists, the same pod is admitted.
    server.kubectl_ok(&["create", "serviceaccount", "ghost"]);
    assert_eq!(post(&server, "/api/v1/namespaces/default/pods", &pod).0, 201);
}

/// A pod on a node asks for its kube-api-access token as the kubelet does: the answer is a
/// TokenRequest with an ES256 JWT that verifies, with upstream's claims (the 3607 s request
/// extended to a year with `warnafter`), bound to the pod and its node; the token
/// authenticates to the server itself, and deleting the pod invalidates it.
#[test]
fn token_request_returns_a_signed_jwt_with_upstreams_claims() {
    let server = ApiServer::start();
    let node = server
        .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}))
        .expect("node");
    let pod = server
        .create(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "dockerlet.local/busybox:1"}]},
        }))
        .expect("pod");
    let sa = server.get("serviceaccounts", "default", "default").expect("default");
    let request = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": 3607,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": uid(&pod)},
        },
    });
    let before = now();
    let (code, answer) = post(
        &server,
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        &request,
    );
    assert_eq!(code, 201, "{answer}");
    assert_eq!(answer["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(answer["kind"], "TokenRequest");
    assert_eq!(answer["metadata"]["name"], "default");
    assert_eq!(answer["metadata"]["namespace"], "default");
    assert_eq!(answer["spec"]["audiences"], json!([ISSUER]));
    assert_eq!(answer["spec"]["expirationSeconds"], 3607);
    let token = answer["status"]["token"].as_str().expect("status.token").to_string();
    let expires: jiff::Timestamp = answer["status"]["expirationTimestamp"]
        .as_str()
        .expect("expirationTimestamp")
        .parse()
        .expect("RFC 3339");
    assert!((expires.as_second() - (before + 3607)).abs() <= 2, "{expires}");
    let header = jwt_part(&token, 0);
    assert_eq!(header["alg"], "ES256");
    assert!(header["kid"].as_str().is_some_and(|k| k.len() == 43), "{header}");
    assert!(header.get("typ").is_none(), "{header}");
    let claims = server.verify_service_account_token(&token).expect("the token verifies");
    assert_eq!(claims.iss, ISSUER);
    assert_eq!(claims.sub, "system:serviceaccount:default:default");
    assert_eq!(claims.aud, vec![ISSUER.to_string()]);
    assert!((claims.iat - before).abs() <= 2);
    assert_eq!(claims.nbf, claims.iat);
    assert_eq!(
        claims.exp,
        claims.iat + 365 * 24 * 3600,
        "extended as kube-apiserver does"
    );
    assert_eq!(claims.kubernetes.warnafter, Some(claims.iat + 3607));
    assert_eq!(claims.jti.len(), 36, "a UUID: {}", claims.jti);
    let k = &claims.kubernetes;
    assert_eq!(k.namespace, "default");
    assert_eq!(
        (k.serviceaccount.name.as_str(), k.serviceaccount.uid.clone()),
        ("default", uid(&sa))
    );
    let bound_pod = k.pod.as_ref().expect("pod claim");
    assert_eq!((bound_pod.name.as_str(), bound_pod.uid.clone()), ("p", uid(&pod)));
    let bound_node = k.node.as_ref().expect("node claim");
    assert_eq!((bound_node.name.as_str(), bound_node.uid.clone()), ("n1", uid(&node)));
    assert!(k.secret.is_none());
    // The issuer's discovery document and key set name this key (P-256 coordinates, 32 bytes).
    let (code, discovery) = send(
        &server,
        server.token(),
        "GET",
        "/.well-known/openid-configuration",
        None,
    );
    assert_eq!(code, 200);
    assert_eq!(discovery["issuer"], ISSUER);
    assert_eq!(discovery["jwks_uri"], format!("{}/openid/v1/jwks", server.url()));
    assert_eq!(discovery["id_token_signing_alg_values_supported"], json!(["ES256"]));
    let (code, jwks) = send(&server, server.token(), "GET", "/openid/v1/jwks", None);
    assert_eq!(code, 200, "{jwks}");
    let key = &jwks["keys"][0];
    assert_eq!(
        (key["kty"].as_str(), key["crv"].as_str(), key["alg"].as_str()),
        (Some("EC"), Some("P-256"), Some("ES256"))
    );
    assert_eq!(key["kid"], header["kid"]);
    for coordinate in ["x", "y"] {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(key[coordinate].as_str().expect("coordinate"))
            .expect("base64url");
        assert_eq!(bytes.len(), 32, "{key}");
    }
    // A relying party that knows only the key set verifies the token.
    let decoding =
        jsonwebtoken::DecodingKey::from_ec_components(key["x"].as_str().unwrap(), key["y"].as_str().unwrap())
            .expect("the JWKS key");
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_audience(&[ISSUER]);
    validation.set_issuer(&[ISSUER]);
    let relied: Value = jsonwebtoken::decode(&token, &decoding, &validation)
        .expect("verifies with the published key")
        .claims;
    assert_eq!(relied["sub"], "system:serviceaccount:default:default");
    let payload = jwt_part(&token, 1);
    assert_eq!(payload["kubernetes.io"]["pod"], json!({"name": "p", "uid": uid(&pod)}));
    let issued = server.issued_tokens();
    assert_eq!(issued.len(), 1);
    assert_eq!(
        (issued[0].namespace.as_str(), issued[0].service_account.as_str()),
        ("default", "default")
    );
    assert_eq!(issued[0].claims, claims);
    // The token authenticates to the server itself; a forged one does not.
    assert_eq!(
        send(&server, &token, "GET", "/api/v1/namespaces/default/pods", None).0,
        200
    );
    let mut forged = token.clone();
    forged.truncate(forged.len() - 4);
    forged.push_str("AAAA");
    assert!(server.verify_service_account_token(&forged).is_err());
    assert_eq!(
        send(&server, &forged, "GET", "/api/v1/namespaces/default/pods", None).0,
        401
    );
    // Another audience and lifetime, not bound: exactly what was asked.
    let (code, vault) = post(
        &server,
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        &json!({"spec": {"audiences": ["vault"], "expirationSeconds": 600}}),
    );
    assert_eq!(code, 201, "{vault}");
    let vault_claims = server
        .verify_service_account_token(vault["status"]["token"].as_str().unwrap())
        .expect("verifies");
    assert_eq!(vault_claims.aud, vec!["vault".to_string()]);
    assert_eq!(vault_claims.exp - vault_claims.iat, 600);
    assert!(vault_claims.kubernetes.pod.is_none() && vault_claims.kubernetes.warnafter.is_none());
    assert_eq!(
        send(
            &server,
            vault["status"]["token"].as_str().unwrap(),
            "GET",
            "/api/v1/namespaces/default/pods",
            None
        )
        .0,
        401,
        "not for the API server's audience"
    );
    // Deleting the bound pod invalidates its token.
    server.delete("pods", "default", "p", Some(0)).expect("delete");
    let err = server.verify_service_account_token(&token).expect_err("invalidated");
    assert_eq!(err.to_string(), "service account token has been invalidated");
    // The account deleted (and put back by its controller with a new UID) invalidates the rest.
    server
        .delete("serviceaccounts", "default", "default", None)
        .expect("delete");
    let renewed = server.get("serviceaccounts", "default", "default").expect("put back");
    let err = server
        .verify_service_account_token(vault["status"]["token"].as_str().unwrap())
        .expect_err("the account was replaced");
    assert_eq!(
        err.to_string(),
        format!(
            "service account UID ({}) does not match claim ({})",
            uid(&renewed),
            uid(&sa)
        )
    );
    // kubectl create token (which sends protobuf) gets one too.
    let printed = server.kubectl_ok(&["create", "token", "default", "--duration=10m"]);
    let claims = server
        .verify_service_account_token(printed.trim())
        .expect("kubectl's token verifies");
    assert_eq!(claims.exp - claims.iat, 600);
}

/// TokenRequest refuses what kube-apiserver refuses, with its codes and messages.
#[test]
fn token_requests_are_validated_as_upstream() {
    let server = ApiServer::start();
    server
        .create(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "dockerlet.local/busybox:1"}]},
        }))
        .expect("pod");
    server
        .create(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "other"}}))
        .expect("account");
    let token = |account: &str, spec: Value| {
        post(
            &server,
            &format!("/api/v1/namespaces/default/serviceaccounts/{account}/token"),
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}),
        )
    };
    let pod_ref = |uid: &str| json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": uid});
    let cases = [
        (
            token("default", json!({"expirationSeconds": 100})),
            422,
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 100: may not \
             specify a duration less than 10 minutes",
        ),
        (
            token("default", json!({"expirationSeconds": 1_i64 << 33})),
            422,
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 8589934592: \
             may not specify a duration larger than 2^32 seconds",
        ),
        (token("ghost", json!({})), 404, "serviceaccounts \"ghost\" not found"),
        (
            token("default", json!({"boundObjectRef": pod_ref("0000")})),
            409,
            "Operation cannot be fulfilled on Pod \"p\": the UID in the bound object reference (0000) does not match \
             the UID in record. The object might have been deleted and then recreated",
        ),
        (
            token("other", json!({"boundObjectRef": pod_ref("")})),
            400,
            "cannot bind token for serviceaccount \"other\" to pod running with different serviceaccount name.",
        ),
        (
            token(
                "default",
                json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "nope"}}),
            ),
            404,
            "pods \"nope\" not found",
        ),
        (
            token(
                "default",
                json!({"boundObjectRef": {"apiVersion": "v1", "kind": "ConfigMap", "name": "kube-root-ca.crt"}}),
            ),
            400,
            "cannot bind token to object of type /v1, Kind=ConfigMap",
        ),
        (
            token("default", json!({"expirationSeconds": 600, "bogus": 1})),
            400,
            "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: strict decoding error: unknown field \
             \"spec.bogus\"",
        ),
    ];
    for ((code, status), want_code, want) in cases {
        assert_eq!((code, status["message"].as_str()), (want_code, Some(want)), "{status}");
    }
    assert!(server.issued_tokens().is_empty(), "nothing issued");
    // A secret-bound token of the default 3600 s, not extended.
    let secret = server
        .create(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}))
        .expect("secret");
    let (code, answer) = token(
        "default",
        json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": uid(&secret)}}),
    );
    assert_eq!(code, 201, "{answer}");
    let claims = server
        .verify_service_account_token(answer["status"]["token"].as_str().unwrap())
        .expect("verifies");
    assert_eq!(claims.exp - claims.iat, 3600);
    assert_eq!(claims.kubernetes.secret.as_ref().map(|s| s.name.as_str()), Some("s"));
    assert!(claims.kubernetes.pod.is_none() && claims.kubernetes.node.is_none());
}

/// The `kubernetes` Service is in `default` at 10.96.0.1 with the server's port as target;
/// created Services get unique ClusterIPs from 10.96.0.0/12 and upstream's defaults; headless
/// stays headless; a taken or foreign IP is refused; an update keeps the allocation;
/// `kubectl get svc` prints the usual columns.
#[test]
fn services_get_cluster_ips_and_the_kubernetes_service_exists() {
    let server = ApiServer::start();
    let kubernetes = kubectl_json(&server, &["get", "service", "kubernetes"]);
    assert_eq!(
        kubernetes["metadata"]["labels"],
        json!({"component": "apiserver", "provider": "kubernetes"})
    );
    let spec = &kubernetes["spec"];
    assert_eq!(spec["clusterIP"], "10.96.0.1");
    assert_eq!(spec["clusterIPs"], json!(["10.96.0.1"]));
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    assert_eq!(
        spec["ports"],
        json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": server.addr().port()}])
    );
    let service = |name: &str, spec: Value| {
        let obj = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec});
        let out = kubectl_create(&server, &format!("{name}.json"), &obj.to_string());
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert!(
        service(
            "web",
            json!({"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]})
        )
        .0
    );
    assert!(
        service(
            "dns",
            json!({"ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]})
        )
        .0
    );
    let web = server.get("services", "default", "web").expect("web");
    let dns = server.get("services", "default", "dns").expect("dns");
    let in_range = |ip: &str| {
        let ip: std::net::Ipv4Addr = ip.parse().expect("IPv4");
        let n = u32::from(ip);
        (u32::from_be_bytes([10, 96, 0, 1])..u32::from_be_bytes([10, 111, 255, 255])).contains(&n)
    };
    for svc in [&web, &dns] {
        let spec = &svc["spec"];
        let ip = spec["clusterIP"].as_str().expect("clusterIP");
        assert!(in_range(ip) && ip != "10.96.0.1", "{ip}");
        assert_eq!(spec["clusterIPs"], json!([ip]));
        assert_eq!(spec["type"], "ClusterIP");
        assert_eq!(spec["sessionAffinity"], "None");
        assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
        assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    }
    assert_ne!(web["spec"]["clusterIP"], dns["spec"]["clusterIP"]);
    assert_eq!(
        web["spec"]["ports"],
        json!([{"port": 80, "protocol": "TCP", "targetPort": 8080}])
    );
    assert_eq!(
        dns["spec"]["ports"],
        json!([{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53}])
    );
    assert!(
        service(
            "headless",
            json!({"clusterIP": "None", "selector": {"app": "db"}, "ports": [{"port": 5432}]})
        )
        .0
    );
    let headless = server.get("services", "default", "headless").expect("headless");
    assert_eq!(headless["spec"]["clusterIP"], "None");
    assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
    let taken = web["spec"]["clusterIP"].as_str().unwrap().to_string();
    let (ok, stderr) = service("taken", json!({"clusterIP": taken, "ports": [{"port": 80}]}));
    assert!(!ok);
    assert!(
        stderr.contains(&format!(
            "spec.clusterIPs: Invalid value: []string{{\"{taken}\"}}: failed to allocate IP {taken}: provided IP is \
             already allocated"
        )),
        "{stderr}"
    );
    let (ok, stderr) = service("foreign", json!({"clusterIP": "192.168.0.1", "ports": [{"port": 80}]}));
    assert!(!ok);
    assert!(
        stderr.contains(
            "the provided IP (192.168.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
        ),
        "{stderr}"
    );
    assert!(
        service(
            "chosen",
            json!({"clusterIP": "10.96.0.10", "ports": [{"port": 53, "protocol": "UDP"}]})
        )
        .0
    );
    assert_eq!(
        server.get("services", "default", "chosen").unwrap()["spec"]["clusterIP"],
        "10.96.0.10"
    );
    assert!(service("exposed", json!({"type": "NodePort", "ports": [{"port": 80}]})).0);
    let exposed = server.get("services", "default", "exposed").unwrap();
    let node_port = exposed["spec"]["ports"][0]["nodePort"].as_i64().expect("nodePort");
    assert!((30000..=32767).contains(&node_port), "{node_port}");
    assert_eq!(exposed["spec"]["externalTrafficPolicy"], "Cluster");
    // A PUT without the allocated fields (kubectl replace of the manifest) keeps them.
    let manifest = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": {"v": "2"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}});
    let path = server.dir().join("web-v2.json");
    std::fs::write(&path, manifest.to_string()).unwrap();
    server.kubectl_ok(&["replace", "-f", path.to_str().unwrap()]);
    let replaced = server.get("services", "default", "web").unwrap();
    assert_eq!(replaced["metadata"]["labels"], json!({"v": "2"}));
    assert_eq!(replaced["spec"]["clusterIP"], web["spec"]["clusterIP"]);
    let table = server.kubectl_ok(&["get", "services", "-o", "wide"]);
    let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        rows[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE",
            "SELECTOR"
        ],
        "{table}"
    );
    let row = |name: &str| {
        rows.iter()
            .find(|r| r[0] == name)
            .unwrap_or_else(|| panic!("{name}: {table}"))
    };
    assert_eq!(row("kubernetes")[1..5], ["ClusterIP", "10.96.0.1", "<none>", "443/TCP"]);
    assert_eq!(row("kubernetes")[6], "<none>");
    assert_eq!(row("web")[4], "80/TCP");
    assert_eq!(row("web")[6], "app=web");
    assert_eq!(row("exposed")[4], format!("80:{node_port}/TCP"));
}

/// With the plugin off (`service_account_admission: false`) pods are stored as sent: no
/// account, no volume. The namespaces' objects still exist.
#[test]
fn without_admission_pods_are_stored_as_sent() {
    let server = ApiServer::start_with(ApiServerConfig {
        service_account_admission: false,
        ..ApiServerConfig::default()
    })
    .expect("start");
    let pod = server
        .create(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"serviceAccountName": "ghost", "containers": [{"name": "c", "image": "dockerlet.local/busybox:1"}]},
        }))
        .expect("admitted without the plugin");
    assert_eq!(pod["spec"]["serviceAccountName"], "ghost");
    assert!(pod["spec"].get("volumes").is_none(), "{pod}");
    assert!(server.get("serviceaccounts", "default", "default").is_some());
    assert!(server.get("configmaps", "default", "kube-root-ca.crt").is_some());
}
