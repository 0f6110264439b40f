//! The kubelet API on `--port` (HTTPS): authentication (client certificates, anonymous only
//! when allowed), authorization (AlwaysAllow, or 403 with kubelet's message), and the routes
//! kubectl uses, `/containerLogs` above all, checked with curl against the real agent and Docker.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use dockerlet_integration_tests::docker::docker_ok;
use dockerlet_integration_tests::{wait_until, Agent, ContainerStatusExt, ManifestDir, PodExt, CHANGE_TIMEOUT};

/// A CA and a client certificate it signed (CN `alice`, O `devs`), as PEM files.
struct ClientPki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl ClientPki {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test-client-ca");
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "devs");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        let write = |name: &str, text: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        ClientPki {
            ca: write("ca.crt", ca_cert.pem()),
            cert: write("client.crt", cert.pem()),
            key: write("client.key", key.serialize_pem()),
            _dir: dir,
        }
    }
}

/// How curl authenticates.
enum Cred<'a> {
    None,
    Cert(&'a ClientPki),
    Bearer(&'a str),
}

/// `GET https://127.0.0.1:<port><path>` with curl (server certificate not checked: it is the
/// agent's self-signed one); returns the status and body.
fn curl(port: u16, path: &str, cred: Cred<'_>) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sk", "--max-time", "60", "-w", "\n%{http_code}"]);
    match cred {
        Cred::None => {}
        Cred::Cert(pki) => {
            cmd.arg("--cert").arg(&pki.cert).arg("--key").arg(&pki.key);
        }
        Cred::Bearer(token) => {
            cmd.args(["-H", &format!("Authorization: Bearer {token}")]);
        }
    }
    let out = cmd
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn talker(manifests: &ManifestDir) {
    manifests.write(
        "talker.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: talker
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "echo line-1; echo line-2; echo line-3; sleep 1; echo oops >&2; exec sleep 3600"]
"#,
    );
}

fn logs_path(agent: &Agent, container: &str, query: &str) -> String {
    format!("/containerLogs/default/{}/{container}{query}", agent.pod_name("talker"))
}

/// Without credentials every route is 401 `Unauthorized` (and a bearer token too: no token
/// authenticator runs); a client certificate signed by `--client-ca-file` is let in under
/// AlwaysAllow; `/containerLogs` serves Docker's log with kubelet's options and errors; the
/// read-only port never serves logs (405, as kubelet's read-only server).
#[test]
fn client_certificates_authenticate_and_container_logs_follow_kubelet() {
    let pki = ClientPki::new();
    let manifests = ManifestDir::new();
    talker(&manifests);
    let ca = pki.ca.display().to_string();
    let agent = Agent::start(
        "kapi-logs",
        manifests.path(),
        &["--client-ca-file", &ca, "--authorization-mode", "AlwaysAllow"],
    );
    agent.wait_for_running("talker");
    let port = agent.ports().kubelet;
    let logs = logs_path(&agent, "app", "");

    for path in [
        "/pods",
        "/healthz",
        "/configz",
        "/metrics",
        "/metrics/probes",
        logs.as_str(),
    ] {
        assert_eq!(curl(port, path, Cred::None), (401, "Unauthorized".into()), "{path}");
        assert_eq!(curl(port, path, Cred::Bearer("abc")).0, 401, "{path} with a token");
    }

    let (status, body) = curl(port, "/metrics", Cred::Cert(&pki));
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("kubelet_running_pods"),
        "/metrics on the kubelet port: {body}"
    );
    let (status, body) = curl(port, "/pods", Cred::Cert(&pki));
    assert_eq!(status, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["kind"], "PodList");
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["metadata"]["name"] == agent.pod_name("talker").as_str()),
        "{body}"
    );
    assert_eq!(curl(port, "/healthz", Cred::Cert(&pki)), (200, "ok".into()));
    assert_eq!(curl(port, "/healthz/ping", Cred::Cert(&pki)), (200, "ok".into()));
    let (status, body) = curl(port, "/configz", Cred::Cert(&pki));
    assert_eq!(status, 200, "{body}");
    let configz: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(configz["kubeletconfig"]["port"], port);
    assert_eq!(
        configz["kubeletconfig"]["authentication"]["x509"]["clientCAFile"],
        ca.as_str()
    );
    assert_eq!(configz["kubeletconfig"]["authorization"]["mode"], "AlwaysAllow");

    let all = wait_until("all four lines in the log", CHANGE_TIMEOUT, || {
        let (status, body) = curl(port, &logs, Cred::Cert(&pki));
        (status == 200 && body.lines().count() == 4)
            .then_some(body.clone())
            .ok_or(format!("{status} {body:?}"))
    });
    for line in ["line-1", "line-2", "oops", "line-3"] {
        assert!(all.lines().any(|l| l == line), "{line} in {all:?}");
    }
    // stdout and stderr are written a second apart: Docker keeps their order.
    assert_eq!(
        curl(port, &logs_path(&agent, "app", "?tailLines=2"), Cred::Cert(&pki)).1,
        "line-3\noops\n"
    );
    assert_eq!(
        curl(port, &logs_path(&agent, "app", "?stream=Stderr"), Cred::Cert(&pki)).1,
        "oops\n"
    );
    assert_eq!(
        curl(port, &logs_path(&agent, "app", "?limitBytes=4"), Cred::Cert(&pki)).1,
        "line"
    );
    let (_, stamped) = curl(port, &logs_path(&agent, "app", "?timestamps=true"), Cred::Cert(&pki));
    let first = stamped.lines().next().unwrap_or_default();
    let (stamp, rest) = first.split_once(' ').expect("a timestamp before the line");
    assert!(stamp.parse::<k8s_openapi::jiff::Timestamp>().is_ok(), "{first:?}");
    assert_eq!(rest, "line-1");

    // kubelet's answers (`getContainerLogs`): what ValidatePodLogOptions refuses is 422, what
    // does not decode 400, each with a fixed body; the legacy `tail` still works.
    for query in ["?tailLines=-1", "?sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z"] {
        let (status, body) = curl(port, &logs_path(&agent, "app", query), Cred::Cert(&pki));
        assert_eq!(
            (status, body.as_str()),
            (422, r#"{"message": "Invalid request."}"#),
            "{query}"
        );
    }
    let (status, body) = curl(port, &logs_path(&agent, "app", "?tailLines=two"), Cred::Cert(&pki));
    assert_eq!(
        (status, body.as_str()),
        (400, r#"{"message": "Unable to decode query."}"#)
    );
    assert_eq!(
        curl(port, &logs_path(&agent, "app", "?tail=1&tailLines=3"), Cred::Cert(&pki)).1,
        "oops\n"
    );
    let (status, body) = curl(port, &logs_path(&agent, "nope", ""), Cred::Cert(&pki));
    assert_eq!(
        (status, body),
        (
            404,
            format!("container \"nope\" not found in pod \"{}\"", agent.pod_name("talker"))
        )
    );
    let (status, body) = curl(port, "/containerLogs/default/ghost/app", Cred::Cert(&pki));
    assert_eq!((status, body), (404, "pod \"ghost\" does not exist".into()));
    let (status, body) = curl(port, &logs_path(&agent, "app", "?previous=true"), Cred::Cert(&pki));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("previous terminated container \"app\""), "{body}");

    let read_only = format!("http://127.0.0.1:{}", agent.ports().read_only);
    let (status, body) = agent.get(&format!("{read_only}{logs}")).unwrap();
    assert_eq!(
        (status, body.as_str()),
        (405, "Debug endpoints are disabled.\n"),
        "the read-only port serves no logs: kubelet's read-only server has the debugging handlers off"
    );
    let (status, _) = agent.get(&format!("{read_only}/configz")).unwrap();
    assert_eq!(status, 404, "the read-only port serves no configz");
}

/// Without `--authorization-mode` every request, even a verified one, is 403 with kubelet's
/// message; anonymous callers exist only with `--anonymous-auth`, and are then authorized too.
#[test]
fn without_an_authorizer_everything_is_forbidden_and_anonymous_needs_the_flag() {
    let pki = ClientPki::new();
    let manifests = ManifestDir::new();
    let ca = pki.ca.display().to_string();
    let agent = Agent::start(
        "kapi-deny",
        manifests.path(),
        &["--client-ca-file", &ca, "--anonymous-auth"],
    );
    let port = agent.ports().kubelet;
    assert_eq!(
        curl(port, "/containerLogs/default/p/c", Cred::Cert(&pki)),
        (
            403,
            "Forbidden (user=alice, verb=get, resource=nodes, subresource=proxy)".into()
        )
    );
    assert_eq!(
        curl(port, "/pods", Cred::None),
        (
            403,
            "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource=proxy)".into()
        )
    );
    assert_eq!(
        curl(port, "/runningpods/", Cred::Cert(&pki)),
        (
            403,
            "Forbidden (user=alice, verb=get, resource=nodes, subresource=proxy)".into()
        )
    );
    drop(agent);

    let manifests = ManifestDir::new();
    let agent = Agent::start(
        "kapi-anon",
        manifests.path(),
        &["--anonymous-auth", "--authorization-mode", "AlwaysAllow"],
    );
    assert_eq!(curl(agent.ports().kubelet, "/healthz", Cred::None), (200, "ok".into()));
}

/// `follow=true` streams new lines as they are written and ends when the container exits.
#[test]
fn follow_streams_until_the_container_exits() {
    let pki = ClientPki::new();
    let manifests = ManifestDir::new();
    manifests.write(
        "ticker.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: ticker
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "sleep 2; for i in 1 2 3; do echo tick-$i; sleep 1; done"]
"#,
    );
    let ca = pki.ca.display().to_string();
    let agent = Agent::start(
        "kapi-follow",
        manifests.path(),
        &["--client-ca-file", &ca, "--authorization-mode", "AlwaysAllow"],
    );
    let pod = agent.wait_for_running("ticker");
    assert!(pod.container("app").is_some_and(|c| c.container_id.is_some()));
    let started = Instant::now();
    let path = format!("/containerLogs/default/{}/app?follow=true", agent.pod_name("ticker"));
    let (status, body) = curl(agent.ports().kubelet, &path, Cred::Cert(&pki));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, "tick-1\ntick-2\ntick-3\n");
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "the follow ended with the container"
    );
}

/// `previous=true` reads the instance before the current one: the log of the container the
/// status names in `lastState.terminated`.
#[test]
fn previous_reads_the_last_terminated_instance() {
    let pki = ClientPki::new();
    let manifests = ManifestDir::new();
    manifests.write(
        "crasher.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: crasher
spec:
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "echo boot-$(cat /proc/sys/kernel/random/uuid); sleep 3; exit 1"]
"#,
    );
    let ca = pki.ca.display().to_string();
    let agent = Agent::start(
        "kapi-previous",
        manifests.path(),
        &["--client-ca-file", &ca, "--authorization-mode", "AlwaysAllow"],
    );
    let path = format!("/containerLogs/default/{}/app?previous=true", agent.pod_name("crasher"));
    wait_until(
        "previous to be the last terminated instance's log",
        Duration::from_secs(90),
        || {
            let last = |agent: &Agent| {
                agent
                    .pod("crasher")
                    .and_then(|p| p.container("app").cloned())
                    .and_then(|c| c.last_state.and_then(|s| s.terminated).and_then(|t| t.container_id))
            };
            let Some(id) = last(&agent) else {
                return Err("no lastState yet".into());
            };
            let (status, body) = curl(agent.ports().kubelet, &path, Cred::Cert(&pki));
            let expected = docker_ok(&["logs", id.trim_start_matches("docker://")]);
            if last(&agent).as_ref() != Some(&id) {
                return Err("restarted meanwhile".into());
            }
            (status == 200 && body.starts_with("boot-") && body == expected)
                .then_some(())
                .ok_or(format!("{status} {body:?} vs docker's {expected:?}"))
        },
    );
}

/// `/runningpods/` is a PodList of what runs according to the runtime: each pod's name,
/// namespace and UID, and only its running containers, with name and image.
#[test]
fn running_pods_list_the_runtimes_running_containers() {
    let pki = ClientPki::new();
    let manifests = ManifestDir::new();
    talker(&manifests);
    manifests.write(
        "half.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: half
spec:
  restartPolicy: OnFailure
  terminationGracePeriodSeconds: 1
  containers:
  - name: quick
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["true"]
  - name: stays
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sleep", "3600"]
"#,
    );
    let ca = pki.ca.display().to_string();
    let agent = Agent::start(
        "kapi-running",
        manifests.path(),
        &["--client-ca-file", &ca, "--authorization-mode", "AlwaysAllow"],
    );
    let talker = agent.wait_for_running("talker");
    let half = agent.wait_for_pod("half", "quick exited, stays running", CHANGE_TIMEOUT * 2, |p| {
        p.container("quick").is_some_and(|c| c.terminated().is_some())
            && p.container("stays").is_some_and(|c| c.is_running())
    });
    let port = agent.ports().kubelet;
    assert_eq!(curl(port, "/runningpods/", Cred::None), (401, "Unauthorized".into()));
    let (status, body) = curl(port, "/runningpods/", Cred::Cert(&pki));
    assert_eq!(status, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (list["kind"].as_str(), list["apiVersion"].as_str()),
        (Some("PodList"), Some("v1")),
        "{list}"
    );
    let items = list["items"].as_array().expect("items");
    let entry = |pod: &k8s_openapi::api::core::v1::Pod| {
        items
            .iter()
            .find(|i| i["metadata"]["uid"] == pod.uid())
            .unwrap_or_else(|| panic!("{} in {list}", pod.name()))
            .clone()
    };
    let t = entry(&talker);
    assert_eq!(t["metadata"]["name"], talker.name());
    assert_eq!(t["metadata"]["namespace"], "default");
    assert_eq!(
        t["spec"]["containers"],
        serde_json::json!([{"name": "app", "image": "dockerlet.local/busybox:1"}]),
        "{t}"
    );
    let h = entry(&half);
    assert_eq!(
        h["spec"]["containers"],
        serde_json::json!([{"name": "stays", "image": "dockerlet.local/busybox:1"}]),
        "only the running container: {h}"
    );
    assert_eq!(items.len(), 2, "{list}");
}
