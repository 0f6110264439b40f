//! TLS bootstrap and client-certificate rotation against the test API server acting as
//! kube-apiserver and kube-controller-manager of a kubeadm cluster: bootstrap tokens
//! (`plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go`), x509 client certificates
//! (`apiserver/pkg/authentication/request/x509/x509.go`), CertificateSigningRequests, the
//! csrapproving controller with kubeadm's bindings (`pkg/controller/certificates/approver/
//! sarapprove.go`) and the csrsigning controller (`pkg/controller/certificates/signer/`); see
//! `fake-apiserver/README.md`. The agent follows kubelet's `pkg/kubelet/certificate/bootstrap/
//! bootstrap.go` and client-go's `util/certificate/certificate_manager.go`.

use std::path::Path;
use std::time::Duration;

mod common;

use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use dockerlet_integration_tests::{unique_name, wait_for, Agent, AgentOptions, ManifestDir, CHANGE_TIMEOUT};
use serde_json::Value;

const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// A TLS API server that authorizes nodes as a kubeadm cluster does, approving kubelet client
/// CSRs itself (`auto_approve`) or not, signing for `signing` (else its default), and a
/// bootstrap kubeconfig for it.
fn cluster(auto_approve: bool, signing: Option<Duration>) -> (ApiServer, std::path::PathBuf) {
    let defaults = ApiServerConfig::default();
    let api = ApiServer::start_with(ApiServerConfig {
        tls: true,
        node_authorization: true,
        csr_auto_approve: auto_approve,
        csr_signing_duration: signing.unwrap_or(defaults.csr_signing_duration),
        ..defaults
    })
    .expect("start the API server");
    let bootstrap = api.bootstrap_kubeconfig().expect("a bootstrap kubeconfig");
    (api, bootstrap)
}

fn csrs(api: &ApiServer) -> Vec<Value> {
    api.list("certificatesigningrequests")
}

fn approved(csr: &Value) -> bool {
    csr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Approved" && c["status"] == "True")
}

/// The subject CN of the certificate `--cert-dir`'s `kubelet-client-current.pem` holds, and
/// the file the link points to.
fn current_certificate(cert_dir: &Path) -> Option<(String, String)> {
    let link = cert_dir.join("kubelet-client-current.pem");
    let target = std::fs::read_link(&link).ok()?;
    let pem = std::fs::read(&link).ok()?;
    let block = x509_parser::pem::Pem::iter_from_buffer(&pem)
        .filter_map(Result::ok)
        .find(|p| p.label == "CERTIFICATE")?;
    let cert = block.parse_x509().ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    Some((cn, target.display().to_string()))
}

struct Node {
    name: String,
    dir: tempfile::TempDir,
}

impl Node {
    fn new(test: &str) -> Self {
        Node {
            name: unique_name("it", test),
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn kubeconfig(&self) -> std::path::PathBuf {
        self.dir.path().join("kubelet.conf")
    }

    fn cert_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("pki")
    }

    fn args(&self, bootstrap: &Path, rotate: bool) -> Vec<String> {
        let mut args = vec![
            "--bootstrap-kubeconfig".to_string(),
            bootstrap.display().to_string(),
            "--kubeconfig".to_string(),
            self.kubeconfig().display().to_string(),
            "--cert-dir".to_string(),
            self.cert_dir().display().to_string(),
            "--node-status-update-frequency".to_string(),
            "1s".to_string(),
        ];
        if rotate {
            args.push("--rotate-certificates".to_string());
        }
        args
    }

    fn start(&self, manifests: &ManifestDir, args: &[String]) -> Agent {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let options = AgentOptions {
            node_name: Some(self.name.clone()),
            ..AgentOptions::default()
        };
        Agent::start_with("tls-bootstrap", manifests.path(), &args, options)
    }
}

/// A node with only a bootstrap token: it asks for its client certificate (`node-csr-…`, as
/// the bootstrap user), which the controllers approve and sign; it writes `--kubeconfig`
/// naming `<cert-dir>/kubelet-client-current.pem` and from then on is `system:node:<name>`
/// (the Node authorizer refuses it nothing). With `--rotate-certificates` it renews at 70–90 %
/// of the lifetime with a CSR made as the node itself, and keeps renewing its Lease with the
/// new pair. The signer backdates `notBefore` by 5 minutes and ends a short certificate at
/// issue + duration (`authority.go`), so a 150 s certificate lives 450 s from `notBefore` and
/// is renewed 15–105 s after it was issued.
#[test]
fn a_node_bootstraps_its_client_certificate_and_renews_it() {
    let (api, bootstrap) = cluster(true, Some(Duration::from_secs(150)));
    let node = Node::new("tls-bootstrap");
    let manifests = ManifestDir::new();
    let agent = node.start(&manifests, &node.args(&bootstrap, true));

    wait_for("the Node Ready", CHANGE_TIMEOUT, || {
        api.get("nodes", "", &node.name).filter(common::node_ready)
    });
    let first = csrs(&api);
    assert_eq!(first.len(), 1, "{first:#?}");
    let csr = &first[0];
    let name = csr["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("node-csr-"), "{name}");
    assert_eq!(csr["spec"]["signerName"], CLIENT_SIGNER);
    assert!(
        csr["spec"]["username"]
            .as_str()
            .unwrap()
            .starts_with("system:bootstrap:"),
        "{csr:#}"
    );
    assert!(approved(csr), "{csr:#}");
    let kubeconfig = std::fs::read_to_string(node.kubeconfig()).expect("the kubeconfig written");
    let current = node.cert_dir().join("kubelet-client-current.pem");
    assert!(
        kubeconfig.contains(&format!("client-certificate: \"{}\"", current.display())),
        "{kubeconfig}"
    );
    let (cn, first_file) = current_certificate(&node.cert_dir()).expect("the current pair");
    assert_eq!(cn, format!("system:node:{}", node.name));
    assert!(!node.cert_dir().join("kubelet-client.key.tmp").exists());

    // The renewal, as the node itself.
    let renewal = wait_for("a renewal CSR", Duration::from_secs(150), || {
        csrs(&api)
            .into_iter()
            .find(|c| c["metadata"]["name"] != name && approved(c))
    });
    assert!(
        renewal["metadata"]["name"].as_str().unwrap().starts_with("csr-"),
        "{renewal:#}"
    );
    assert_eq!(renewal["spec"]["username"], format!("system:node:{}", node.name));
    let renewed_file = wait_for("the new pair current", CHANGE_TIMEOUT, || {
        current_certificate(&node.cert_dir()).filter(|(_, f)| *f != first_file)
    });
    assert_eq!(renewed_file.0, format!("system:node:{}", node.name));
    let state = wait_for("the manager's rotation", CHANGE_TIMEOUT, || {
        agent
            .actor("CertificateManagerActor", "certificate-manager")
            .filter(|a| a["detail"]["rotations"].as_u64() >= Some(1))
    });
    assert!(state["last_error"].is_null(), "{state:#}");

    // Its Lease is renewed after the rotation (with the new pair), and nothing was refused.
    let lease_time = || {
        api.get("leases", "kube-node-lease", &node.name)
            .and_then(|l| l["spec"]["renewTime"].as_str().map(str::to_string))
    };
    let after = lease_time().unwrap_or_default();
    wait_for("the Lease renewed after the rotation", CHANGE_TIMEOUT, || {
        lease_time().filter(|t| *t > after)
    });
    assert_eq!(api.node_refusals(), Vec::<String>::new());
    let url = format!("http://127.0.0.1:{}/metrics", agent.ports().read_only);
    let (status, metrics) = agent.get(&url).expect("/metrics");
    assert_eq!(status, 200);
    let ttl = metrics
        .lines()
        .find_map(|l| l.strip_prefix("kubelet_certificate_manager_client_ttl_seconds "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("kubelet_certificate_manager_client_ttl_seconds");
    assert!(ttl > 0.0 && ttl <= 150.0, "{ttl}");
}

/// Without auto-approval the node waits, its CSR pending, until `kubectl certificate approve`
/// (a real client); a restart with the kubeconfig it wrote asks for nothing more.
#[test]
fn a_bootstrap_request_waits_for_kubectl_certificate_approve() {
    let (api, bootstrap) = cluster(false, None);
    let node = Node::new("tls-approve");
    let manifests = ManifestDir::new();
    let approved_name = std::thread::scope(|s| {
        let approver = s.spawn(|| {
            let pending = wait_for("the pending CSR", CHANGE_TIMEOUT, || {
                let out = api.kubectl_ok(&["get", "csr", "-o", "json"]);
                let list: Value = serde_json::from_str(&out).ok()?;
                list["items"].as_array()?.first().cloned()
            });
            assert!(!approved(&pending));
            assert!(
                api.get("nodes", "", &node.name).is_none(),
                "no Node before the certificate"
            );
            let name = pending["metadata"]["name"].as_str().unwrap().to_string();
            let out = api.kubectl_ok(&["certificate", "approve", &name]);
            assert!(out.contains("approved"), "{out}");
            name
        });
        let mut agent = node.start(&manifests, &node.args(&bootstrap, false));
        let name = approver.join().expect("the approver");
        wait_for("the Node Ready", CHANGE_TIMEOUT, || {
            api.get("nodes", "", &node.name).filter(common::node_ready)
        });
        agent.restart();
        name
    });
    let all = csrs(&api);
    assert_eq!(all.len(), 1, "the restart asked again: {all:#?}");
    assert_eq!(all[0]["metadata"]["name"], approved_name.as_str());
    let (cn, _) = current_certificate(&node.cert_dir()).expect("the current pair");
    assert_eq!(cn, format!("system:node:{}", node.name));
}

/// A denied request ends the agent's start with client-go's message, naming the CSR.
#[test]
fn a_denied_bootstrap_request_stops_the_agent_with_the_reason() {
    let (api, bootstrap) = cluster(false, None);
    let node = Node::new("tls-deny");
    let manifests = ManifestDir::new();
    let args = node.args(&bootstrap, false);
    let result = std::thread::scope(|s| {
        s.spawn(|| {
            let name = wait_for("the pending CSR", CHANGE_TIMEOUT, || {
                csrs(&api)
                    .first()
                    .and_then(|c| c["metadata"]["name"].as_str().map(str::to_string))
            });
            api.kubectl_ok(&["certificate", "deny", &name]);
        });
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let options = AgentOptions {
            node_name: Some(node.name.clone()),
            ..AgentOptions::default()
        };
        Agent::try_start_with("tls-deny", manifests.path(), &args, options)
    });
    let err = format!("{:#}", result.err().expect("the agent stopped"));
    assert!(err.contains("TLS bootstrap (--bootstrap-kubeconfig)"), "{err}");
    assert!(err.contains("is denied, reason: KubectlDeny"), "{err}");
    assert!(!node.kubeconfig().exists());
}
