//! TLS bootstrap against the test API server, as a kubelet does it on a kubeadm cluster:
//! a bootstrap token creates a kubelet client CSR, csrapproving approves it, csrsigning signs
//! it with the CA the server trusts, and the certificate then authenticates as the node.
//!
//! Upstream (kubernetes/kubernetes): `plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go`;
//! `staging/src/k8s.io/apiserver/pkg/authentication/request/x509/x509.go`;
//! `pkg/registry/certificates/certificates/strategy.go`;
//! `pkg/apis/certificates/validation/validation.go`; `pkg/apis/certificates/helpers.go`;
//! `pkg/controller/certificates/approver/sarapprove.go`;
//! `pkg/controller/certificates/signer/signer.go`; `pkg/controller/certificates/authority/policies.go`;
//! `pkg/printers/internalversion/printers.go` (`printCertificateSigningRequest`).

use base64::Engine as _;
use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig, KUBECTL};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

fn server(edit: impl FnOnce(&mut ApiServerConfig)) -> ApiServer {
    let mut config = ApiServerConfig {
        tls: true,
        node_authorization: true,
        ..ApiServerConfig::default()
    };
    edit(&mut config);
    ApiServer::start_with(config).expect("start the test API server")
}

fn kubectl(server: &ApiServer, kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(server.dir().join("kube-cache"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run kubectl")
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A kubelet's key and CSR (as client-go's `certificate/csr` makes it: CN `system:node:<n>`,
/// O `system:nodes`, no extensions).
fn kubelet_request(cn: &str, org: &str) -> (rcgen::KeyPair, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    params.distinguished_name.push(rcgen::DnType::OrganizationName, org);
    let csr = params.serialize_request(&key).expect("csr").pem().expect("pem");
    (key, csr)
}

fn csr_object(name: &str, pem: &str, signer: &str, usages: &[&str]) -> Value {
    json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": B64.encode(pem), "signerName": signer, "usages": usages},
    })
}

fn create_csr(server: &ApiServer, kubeconfig: &Path, csr: &Value) -> Output {
    let file = server
        .dir()
        .join(format!("{}.json", csr["metadata"]["name"].as_str().unwrap()));
    std::fs::write(&file, csr.to_string()).expect("write the CSR");
    kubectl(
        server,
        kubeconfig,
        &["create", "-f", file.to_str().unwrap(), "-o", "json"],
    )
}

const CLIENT_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];

fn wait_for(server: &ApiServer, name: &str, what: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let csr = server.get("csr", "", name).expect("the CSR exists");
        if what(&csr) {
            return csr;
        }
        assert!(Instant::now() < deadline, "CSR {name} never got there: {csr:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn issued(csr: &Value) -> String {
    String::from_utf8(
        B64.decode(csr["status"]["certificate"].as_str().expect("issued"))
            .unwrap(),
    )
    .unwrap()
}

/// A kubeconfig holding the issued certificate and its key (what the kubelet writes to its
/// `--cert-dir` and uses from then on).
fn certificate_kubeconfig(server: &ApiServer, name: &str, cert: &str, key: &rcgen::KeyPair) -> PathBuf {
    let ca = B64.encode(server.ca_pem().expect("TLS"));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    certificate-authority-data: {ca}\n    \
         server: {url}\nusers:\n- name: u\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n\
         contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
        url = server.url(),
        cert = B64.encode(cert),
        key = B64.encode(key.serialize_pem()),
    );
    let path = server.dir().join(format!("kubeconfig-{name}"));
    std::fs::write(&path, text).expect("write the kubeconfig");
    path
}

/// Bootstrap token → CSR (requester recorded) → `nodeclient` auto-approval → signed with the
/// CA → the certificate authenticates as `system:node:n1` in `system:nodes`, whose own renewal
/// CSR is approved as `selfnodeclient`.
#[test]
fn a_bootstrap_token_gets_a_node_certificate_that_renews_itself() {
    let server = server(|_| {});
    let bootstrap = server.bootstrap_kubeconfig().expect("bootstrap kubeconfig");
    let (key, pem) = kubelet_request("system:node:n1", "system:nodes");
    let created: Value = serde_json::from_str(&ok(create_csr(
        &server,
        &bootstrap,
        &csr_object(
            "node-csr-1",
            &pem,
            "kubernetes.io/kube-apiserver-client-kubelet",
            &CLIENT_USAGES,
        ),
    )))
    .unwrap();
    let user = created["spec"]["username"].as_str().unwrap();
    assert!(user.starts_with("system:bootstrap:"), "{created:#}");
    assert_eq!(
        created["spec"]["groups"],
        json!([
            "system:bootstrappers",
            "system:bootstrappers:kubeadm:default-node-token",
            "system:authenticated"
        ])
    );
    let csr = wait_for(&server, "node-csr-1", |c| c["status"]["certificate"].is_string());
    let approved = &csr["status"]["conditions"][0];
    assert_eq!(
        (&approved["type"], &approved["reason"], &approved["message"]),
        (
            &json!("Approved"),
            &json!("AutoApproved"),
            &json!("Auto approving kubelet client certificate after SubjectAccessReview.")
        )
    );
    let cert_pem = issued(&csr);
    let der = B64
        .decode(cert_pem.lines().filter(|l| !l.starts_with("-----")).collect::<String>())
        .unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("a certificate");
    let life = cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
    // policies.go: a year from a notBefore backdated 5 minutes.
    assert_eq!(life, 8760 * 3600, "{:?}", cert.validity());
    assert!(cert.validity().not_before.timestamp() <= time_now() - 299);
    let table = server.kubectl_ok(&["get", "csr"]);
    assert!(
        table.contains("SIGNERNAME") && table.contains("REQUESTOR") && table.contains("REQUESTEDDURATION"),
        "{table}"
    );
    assert!(table.contains("Approved,Issued"), "{table}");

    let node = certificate_kubeconfig(&server, "n1", &cert_pem, &key);
    let (_, renewal) = kubelet_request("system:node:n1", "system:nodes");
    let renewed: Value = serde_json::from_str(&ok(create_csr(
        &server,
        &node,
        &csr_object(
            "node-csr-2",
            &renewal,
            "kubernetes.io/kube-apiserver-client-kubelet",
            &CLIENT_USAGES,
        ),
    )))
    .unwrap();
    assert_eq!(renewed["spec"]["username"], "system:node:n1");
    assert_eq!(
        renewed["spec"]["groups"],
        json!(["system:nodes", "system:authenticated"])
    );
    let csr = wait_for(&server, "node-csr-2", |c| c["status"]["certificate"].is_string());
    assert_eq!(
        csr["status"]["conditions"][0]["message"],
        "Auto approving self kubelet client certificate after SubjectAccessReview."
    );
    // The node certificate gets the Node authorizer's answers.
    let out = kubectl(&server, &node, &["get", "pods", "-A"]);
    assert!(!out.status.success());
    assert!(
        server.node_refusals().iter().any(|r| r.contains("system:node:n1")),
        "{:?}",
        server.node_refusals()
    );
}

fn time_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// validation.go's texts for a request that is no CSR and a too short expirationSeconds; and
/// signer.go's Failed condition for a kubelet client CSR whose subject is wrong.
#[test]
fn bad_requests_get_upstreams_answers() {
    let server = server(|c| c.csr_auto_approve = false);
    let mut bad = csr_object(
        "bad",
        "not a csr",
        "kubernetes.io/kube-apiserver-client-kubelet",
        &CLIENT_USAGES,
    );
    bad["spec"]["expirationSeconds"] = json!(60);
    let err = server.create(bad).unwrap_err();
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .starts_with("CertificateSigningRequest.certificates.k8s.io \"bad\" is invalid: ["),
        "{}",
        err.message
    );
    assert!(
        err.message.contains(": PEM block type must be CERTIFICATE REQUEST"),
        "{}",
        err.message
    );
    assert!(
        err.message
            .contains("spec.request: Invalid value: []byte{0x6e, 0x6f, 0x74"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains(
            "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)"
        ),
        "{}",
        err.message
    );
    let (_, pem) = kubelet_request("system:node:n1", "acme");
    ok(create_csr(
        &server,
        server.kubeconfig_path(),
        &csr_object(
            "wrong-org",
            &pem,
            "kubernetes.io/kube-apiserver-client-kubelet",
            &CLIENT_USAGES,
        ),
    ));
    ok(kubectl(
        &server,
        server.kubeconfig_path(),
        &["certificate", "approve", "wrong-org"],
    ));
    let csr = wait_for(&server, "wrong-org", |c| {
        c["status"]["conditions"].as_array().is_some_and(|l| l.len() == 2)
    });
    let failed = &csr["status"]["conditions"][1];
    assert_eq!(
        (&failed["type"], &failed["reason"], &failed["message"]),
        (
            &json!("Failed"),
            &json!("SignerValidationFailure"),
            &json!("subject organization is not system:nodes")
        )
    );
    assert!(csr["status"]["certificate"].is_null());
}

/// With csrapproving off a CSR waits; `kubectl certificate approve` signs it (for the short
/// duration set), `kubectl certificate deny` leaves it unsigned.
#[test]
fn approve_and_deny_by_hand() {
    let server = server(|c| {
        c.csr_auto_approve = false;
        c.csr_signing_duration = Duration::from_secs(30);
    });
    let bootstrap = server.bootstrap_kubeconfig().expect("bootstrap kubeconfig");
    for name in ["approved", "denied"] {
        let (_, pem) = kubelet_request("system:node:n2", "system:nodes");
        ok(create_csr(
            &server,
            &bootstrap,
            &csr_object(
                name,
                &pem,
                "kubernetes.io/kube-apiserver-client-kubelet",
                &CLIENT_USAGES,
            ),
        ));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(server.get("csr", "", "approved").unwrap()["status"]["conditions"].is_null());
    assert!(server.kubectl_ok(&["get", "csr", "approved"]).contains("Pending"));
    ok(kubectl(
        &server,
        server.kubeconfig_path(),
        &["certificate", "approve", "approved"],
    ));
    ok(kubectl(
        &server,
        server.kubeconfig_path(),
        &["certificate", "deny", "denied"],
    ));
    let csr = wait_for(&server, "approved", |c| c["status"]["certificate"].is_string());
    assert_eq!(csr["status"]["conditions"][0]["reason"], "KubectlApprove");
    let der = B64
        .decode(
            issued(&csr)
                .lines()
                .filter(|l| !l.starts_with("-----"))
                .collect::<String>(),
        )
        .unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    // policies.go: a short certificate ends TTL after now, its start still backdated.
    let (before, after) = (
        cert.validity().not_before.timestamp(),
        cert.validity().not_after.timestamp(),
    );
    assert!((after - time_now() - 30).abs() <= 2, "{:?}", cert.validity());
    assert!((time_now() - before - 300).abs() <= 2, "{:?}", cert.validity());
    std::thread::sleep(Duration::from_millis(200));
    let denied = server.get("csr", "", "denied").unwrap();
    assert_eq!(denied["status"]["conditions"][0]["type"], "Denied");
    assert!(denied["status"]["certificate"].is_null());
    assert!(server.kubectl_ok(&["get", "csr", "denied"]).contains("Denied"));
}

/// bootstrap.go: an expired token authenticates no one (401); RBAC lets a bootstrapper only
/// create and read CSRs (and discovery): pods are refused with kube-apiserver's 403.
#[test]
fn bootstrap_tokens_expire_and_may_only_ask_for_certificates() {
    let server = server(|_| {});
    let past = std::time::SystemTime::now() - Duration::from_secs(60);
    let expired = server.add_bootstrap_token(Some(past)).expect("token");
    let live = server.bootstrap_kubeconfig().expect("bootstrap kubeconfig");
    let text = std::fs::read_to_string(&live).unwrap();
    let current = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap()
        .to_string();
    let dead = server.dir().join("kubeconfig-expired");
    std::fs::write(&dead, text.replace(&current, &expired)).unwrap();
    let out = kubectl(&server, &dead, &["get", "csr"]);
    assert!(!out.status.success());
    assert_unauthorized(&out);

    ok(kubectl(&server, &live, &["get", "csr"]));
    let out = kubectl(&server, &live, &["get", "pods"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let id = &current[..6];
    assert!(
        stderr.contains(&format!(
            "pods is forbidden: User \"system:bootstrap:{id}\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        )),
        "{stderr}"
    );
}

/// x509.go: an expired client certificate the CA signed is a 401, not a failed handshake.
#[test]
fn an_expired_client_certificate_is_unauthorized() {
    let server = server(|c| {
        c.csr_signing_duration = Duration::from_secs(1);
    });
    let bootstrap = server.bootstrap_kubeconfig().expect("bootstrap kubeconfig");
    let (key, pem) = kubelet_request("system:node:n3", "system:nodes");
    let mut object = csr_object(
        "short",
        &pem,
        "kubernetes.io/kube-apiserver-client-kubelet",
        &CLIENT_USAGES,
    );
    object["metadata"]["name"] = json!("short");
    ok(create_csr(&server, &bootstrap, &object));
    let csr = wait_for(&server, "short", |c| c["status"]["certificate"].is_string());
    let node = certificate_kubeconfig(&server, "n3", &issued(&csr), &key);
    std::thread::sleep(Duration::from_millis(2500));
    let out = kubectl(&server, &node, &["get", "csr"]);
    assert!(!out.status.success());
    assert_unauthorized(&out);
}

/// kubectl's words for a 401.
fn assert_unauthorized(out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "You must be logged in to the server (the server has asked for the client to provide credentials)"
        ) || stderr.contains("You must be logged in to the server (Unauthorized)"),
        "{stderr}"
    );
}
