//! The kubelet API with an API server: bearer tokens through TokenReview, Webhook authorization
//! through SubjectAccessReview (both the defaults with `--kubeconfig`), their caches, and
//! kubectl reaching the node through the API server's kubelet proxy (`kubectl logs`,
//! `kubectl get --raw /api/v1/nodes/<node>/proxy/…`) with the API server's own client
//! certificate accepted through `--client-ca-file`.

use std::process::{Command, Output};

use dockerlet_fake_apiserver::{AccessRule, ApiServer, ApiServerConfig};
use dockerlet_integration_tests::{wait_for, Agent, ManifestDir, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::Value;

mod common;

fn api_server() -> ApiServer {
    ApiServer::start_with(ApiServerConfig {
        tls: true,
        ..ApiServerConfig::default()
    })
    .expect("start the API server")
}

/// The agent in API mode, its kubelet API trusting the API server's kubelet client CA, its
/// node reachable at 127.0.0.1.
fn start(name: &str, api: &ApiServer, manifests: &ManifestDir, extra: &[&str]) -> Agent {
    common::proxied_agent(name, api, manifests, extra)
}

/// `GET https://127.0.0.1:<port><path>` with curl, optionally with a bearer token.
fn curl(port: u16, path: &str, token: Option<&str>) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sk", "--max-time", "60", "-w", "\n%{http_code}"]);
    if let Some(token) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {token}")]);
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
    command: ["sh", "-c", "echo hello-from-talker; exec sleep 3600"]
"#,
    );
}

/// The SubjectAccessReviews the agent sent for `user`, as `(verb, subresource)`.
fn reviews_of(api: &ApiServer, user: &str) -> Vec<(String, String)> {
    api.access_reviews()
        .iter()
        .filter(|s| s["user"] == user)
        .map(|s| {
            let ra = &s["resourceAttributes"];
            (
                ra["verb"].as_str().unwrap_or_default().to_string(),
                ra["subresource"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Webhook mode (the default with an API server), per route: no credentials and an unknown
/// token are 401 `Unauthorized`; a known token the API server does not allow is 403 with
/// kubelet's message naming the last check; an allowed one gets the route (404 for routes
/// not served). The reviews carry kubelet's attributes and the TokenReview's user, and
/// verdicts are cached: one TokenReview per token, one SubjectAccessReview per check.
#[test]
fn webhook_mode_authenticates_tokens_and_authorizes_by_subject_access_review() {
    let api = api_server();
    api.add_user_token("alice-token", "alice", "uid-alice", &["devs"]);
    api.add_user_token("bob-token", "bob", "uid-bob", &["guests"]);
    api.add_access_rule(AccessRule::allow().user("alice").verb("get").resource("nodes"));
    let manifests = ManifestDir::new();
    talker(&manifests);
    let agent = start("kauth-webhook", &api, &manifests, &[]);
    agent.wait_for_running("talker");
    let port = agent.ports().kubelet;
    let logs = format!("/containerLogs/default/{}/app", agent.pod_name("talker"));
    let exec = format!("/exec/default/{}/app?command=true", agent.pod_name("talker"));
    // What an allowed caller gets: the route, or (for routes other work serves: stats, exec
    // without an upgrade) anything but an authentication or authorization refusal.
    let routes: [(&str, &str, Option<u16>); 7] = [
        ("/pods", "proxy", Some(200)),
        ("/healthz", "proxy", Some(200)),
        ("/configz", "proxy", Some(200)),
        ("/metrics", "metrics", Some(200)),
        (&logs, "proxy", Some(200)),
        ("/stats/summary", "stats", None),
        (&exec, "proxy", None),
    ];
    for (path, subresource, served) in routes {
        assert_eq!(
            curl(port, path, None),
            (401, "Unauthorized".into()),
            "{path} without credentials"
        );
        assert_eq!(
            curl(port, path, Some("nope")),
            (401, "Unauthorized".into()),
            "{path}, unknown token"
        );
        assert_eq!(
            curl(port, path, Some("bob-token")),
            (
                403,
                format!("Forbidden (user=bob, verb=get, resource=nodes, subresource={subresource})")
            ),
            "{path}, bob is not allowed"
        );
        let (status, body) = curl(port, path, Some("alice-token"));
        match served {
            Some(code) => assert_eq!(status, code, "{path} as alice: {body}"),
            None => assert!(!matches!(status, 0 | 401 | 403), "{path} as alice: {status} {body}"),
        }
    }
    let (_, body) = curl(port, &logs, Some("alice-token"));
    assert_eq!(body, "hello-from-talker\n");
    let (_, body) = curl(port, "/pods", Some("alice-token"));
    assert!(body.contains(&agent.pod_name("talker")), "{body}");

    // One TokenReview per token: verdicts are kept for 2 minutes.
    let reviewed = |token: &str| api.token_reviews().iter().filter(|s| s["token"] == token).count();
    assert_eq!(
        (reviewed("alice-token"), reviewed("bob-token"), reviewed("nope")),
        (1, 1, 1)
    );
    // Fine-grained checks first, then proxy; each (verb, subresource) reviewed once.
    let alice = reviews_of(&api, "alice");
    let mut distinct = alice.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(alice.len(), distinct.len(), "alice's reviews: {alice:?}");
    for check in [
        ("get", "pods"),
        ("get", "healthz"),
        ("get", "configz"),
        ("get", "metrics"),
        ("get", "stats"),
    ] {
        assert!(
            alice.contains(&(check.0.into(), check.1.into())),
            "{check:?} in {alice:?}"
        );
    }
    let review = api
        .access_reviews()
        .into_iter()
        .find(|s| s["user"] == "alice")
        .expect("a review for alice");
    assert_eq!(review["uid"], "uid-alice");
    assert_eq!(review["groups"], serde_json::json!(["devs", "system:authenticated"]));
    let ra = &review["resourceAttributes"];
    assert_eq!(
        (ra["resource"].clone(), ra["version"].clone()),
        ("nodes".into(), "v1".into())
    );
    assert_eq!(ra["name"], agent.node());

    // Denied verdicts are kept too: two requests, one review per check.
    api.add_user_token("carol-token", "carol", "", &[]);
    for _ in 0..2 {
        assert_eq!(curl(port, "/configz", Some("carol-token")).0, 403);
    }
    assert_eq!(
        reviews_of(&api, "carol"),
        [
            ("get".to_string(), "configz".to_string()),
            ("get".to_string(), "proxy".to_string())
        ]
    );
    assert_eq!(reviewed("carol-token"), 1);
    // A review the API server refuses for good (403 to the agent) is not kept: a failed
    // TokenReview is 401, a failed SubjectAccessReview kubelet's 500; the next request asks
    // again.
    api.add_user_token("dave-token", "dave", "uid-dave", &["system:masters"]);
    api.fail_requests(Some("POST"), "tokenreviews", 403, 1);
    assert_eq!(curl(port, "/configz", Some("dave-token")), (401, "Unauthorized".into()));
    api.fail_requests(Some("POST"), "subjectaccessreviews", 403, 1);
    assert_eq!(
        curl(port, "/configz", Some("dave-token")),
        (
            500,
            "Authorization error (user=dave, verb=get, resource=nodes, subresource=configz)".into()
        )
    );
    assert_eq!(curl(port, "/configz", Some("dave-token")).0, 200);
    // A transient failure (500 here) is tried again at once with k8s.io/apiserver's webhook
    // backoff, so the request itself succeeds.
    api.add_user_token("erin-token", "erin", "uid-erin", &["system:masters"]);
    api.fail_requests(Some("POST"), "tokenreviews", 500, 2);
    api.fail_requests(Some("POST"), "subjectaccessreviews", 500, 2);
    assert_eq!(curl(port, "/configz", Some("erin-token")).0, 200);
    assert_eq!(
        reviewed("erin-token"),
        1,
        "answered once, after the two injected failures"
    );
    // A service account token the API server issued authenticates as its service account.
    let sa_token = issue_service_account_token(&api);
    assert_eq!(
        curl(port, "/healthz", Some(&sa_token)),
        (
            403,
            "Forbidden (user=system:serviceaccount:default:default, verb=get, resource=nodes, subresource=proxy)"
                .into()
        )
    );
}

/// A token for `default/default` through TokenRequest.
fn issue_service_account_token(api: &ApiServer) -> String {
    let out = api.kubectl_ok(&["create", "token", "default", "--namespace", "default"]);
    out.trim().to_string()
}

/// AlwaysAllow asked for explicitly: a known token is let in without any SubjectAccessReview;
/// an unknown one and no credentials are still 401.
#[test]
fn always_allow_still_authenticates() {
    let api = api_server();
    api.add_user_token("bob-token", "bob", "uid-bob", &[]);
    let manifests = ManifestDir::new();
    let agent = start(
        "kauth-allow",
        &api,
        &manifests,
        &["--authorization-mode", "AlwaysAllow"],
    );
    let port = agent.ports().kubelet;
    for path in ["/pods", "/healthz", "/configz", "/metrics"] {
        assert_eq!(curl(port, path, None), (401, "Unauthorized".into()), "{path}");
        assert_eq!(curl(port, path, Some("wrong")), (401, "Unauthorized".into()), "{path}");
        assert_eq!(curl(port, path, Some("bob-token")).0, 200, "{path}");
    }
    assert!(api.access_reviews().is_empty());
    let (_, configz) = curl(port, "/configz", Some("bob-token"));
    let configz: Value = serde_json::from_str(&configz).expect("configz JSON");
    let c = &configz["kubeletconfig"];
    assert_eq!(c["authorization"]["mode"], "AlwaysAllow");
    assert_eq!(c["authentication"]["webhook"]["enabled"], true);
    assert_eq!(c["authentication"]["webhook"]["cacheTTL"], "2m0s");
}

/// `kubectl --kubeconfig <api> <args>` under a time limit (for `logs -f`).
fn kubectl(api: &ApiServer, args: &[&str]) -> Output {
    common::kubectl_with_stdin(api, &[], args, None)
}

fn stdout_ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn create(api: &ApiServer, name: &str, yaml: &str) {
    let path = api.dir().join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).expect("write the pod");
    api.kubectl_ok(&["create", "-f", path.to_str().expect("utf-8 path")]);
}

fn wait_phase(api: &ApiServer, name: &str, phase: &str) -> Value {
    wait_for(&format!("{name} {phase}"), POD_START_TIMEOUT, || {
        api.get("pods", "default", name)
            .filter(|p| p["status"]["phase"] == phase)
    })
}

/// `kubectl logs` through the API server's `pods/log` proxy to the kubelet, authenticated
/// with the API server's client certificate and authorized by SubjectAccessReview: plain,
/// `-c`, the container-name errors as kube-apiserver words them, `--tail`, `--since`,
/// `--since-time` (the conformance "should print the output to logs" check), `--timestamps`,
/// `--previous`, and `-f` ending when the container exits. `nodes/proxy` reaches `/pods`,
/// `/configz` and `/healthz`.
#[test]
fn kubectl_logs_and_node_proxy_through_the_api_server() {
    let api = api_server();
    let manifests = ManifestDir::new();
    let agent = start("kauth-kubectl", &api, &manifests, &[]);
    let node = agent.node().to_string();
    create(
        &api,
        "logger",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: logger
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 1
  containers:
  - name: a
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo 'Hello World'; echo a-2; echo a-3; exec sleep 3600"]
  - name: b
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo from-b; exec sleep 3600"]
"#
        ),
    );
    create(
        &api,
        "ender",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: ender
spec:
  nodeName: {node}
  restartPolicy: Never
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo start; sleep 4; echo end"]
"#
        ),
    );
    create(
        &api,
        "again",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: again
spec:
  nodeName: {node}
  restartPolicy: OnFailure
  volumes:
  - name: data
    emptyDir: {{}}
  containers:
  - name: app
    image: dockerlet.local/busybox:1
    volumeMounts:
    - name: data
      mountPath: /data
    command: ["sh", "-c", "n=$(cat /data/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/n; echo attempt-$n; [ $n -ge 2 ] && exec sleep 3600; exit 1"]
"#
        ),
    );
    wait_phase(&api, "ender", "Running");
    let follow = kubectl(&api, &["logs", "-f", "ender"]);
    assert_eq!(stdout_ok(&follow, "kubectl logs -f"), "start\nend\n");

    wait_phase(&api, "logger", "Running");
    wait_for("logger's output", CHANGE_TIMEOUT, || {
        let out = kubectl(&api, &["logs", "logger", "-c", "a"]);
        (out.status.success() && String::from_utf8_lossy(&out.stdout) == "Hello World\na-2\na-3\n").then_some(())
    });
    assert_eq!(
        stdout_ok(&kubectl(&api, &["logs", "logger", "-c", "b"]), "-c b"),
        "from-b\n"
    );
    // kubectl picks the first container itself, and says so.
    let defaulted = kubectl(&api, &["logs", "logger"]);
    assert_eq!(stdout_ok(&defaulted, "logs logger"), "Hello World\na-2\na-3\n");
    assert!(
        stderr_of(&defaulted).contains("Defaulted container \"a\" out of: a, b"),
        "{}",
        stderr_of(&defaulted)
    );
    // The API server itself asks for a container name.
    let raw = kubectl(&api, &["get", "--raw", "/api/v1/namespaces/default/pods/logger/log"]);
    assert!(!raw.status.success());
    assert!(
        stderr_of(&raw).contains("a container name must be specified for pod logger, choose one of: [a b]"),
        "{}",
        stderr_of(&raw)
    );
    let wrong = kubectl(&api, &["logs", "logger", "-c", "nope"]);
    assert!(
        stderr_of(&wrong).contains("container nope is not valid for pod logger"),
        "{}",
        stderr_of(&wrong)
    );
    assert_eq!(
        stdout_ok(&kubectl(&api, &["logs", "logger", "-c", "a", "--tail=1"]), "--tail"),
        "a-3\n"
    );
    assert_eq!(
        stdout_ok(&kubectl(&api, &["logs", "logger", "-c", "a", "--since=1h"]), "--since"),
        "Hello World\na-2\na-3\n"
    );
    let hour_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1);
    let since_time = format!("--since-time={}", hour_ago.strftime("%Y-%m-%dT%H:%M:%SZ"));
    let hello = kubectl(&api, &["logs", "logger", "-c", "a", &since_time, "--limit-bytes=12"]);
    assert_eq!(stdout_ok(&hello, "--since-time"), "Hello World\n");
    let stamped = stdout_ok(
        &kubectl(&api, &["logs", "logger", "-c", "a", "--timestamps"]),
        "--timestamps",
    );
    for (line, text) in stamped.lines().zip(["Hello World", "a-2", "a-3"]) {
        let (stamp, rest) = line.split_once(' ').expect("timestamp then text");
        assert!(stamp.parse::<jiff::Timestamp>().is_ok(), "{line}");
        assert_eq!(rest, text);
    }

    wait_for("again restarted", POD_START_TIMEOUT, || {
        api.get("pods", "default", "again").filter(|p| {
            p["status"]["containerStatuses"][0]["restartCount"].as_i64() >= Some(1)
                && p["status"]["containerStatuses"][0]["state"]["running"].is_object()
        })
    });
    assert_eq!(
        stdout_ok(&kubectl(&api, &["logs", "again", "--previous"]), "--previous"),
        "attempt-1\n"
    );
    assert_eq!(stdout_ok(&kubectl(&api, &["logs", "again"]), "current"), "attempt-2\n");

    let pods = stdout_ok(
        &kubectl(&api, &["get", "--raw", &format!("/api/v1/nodes/{node}/proxy/pods")]),
        "proxy/pods",
    );
    let pods: Value = serde_json::from_str(&pods).expect("a PodList");
    assert_eq!(pods["kind"], "PodList");
    let names: Vec<&str> = pods["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    assert!(names.contains(&"logger") && names.contains(&"again"), "{names:?}");
    let configz = stdout_ok(
        &kubectl(&api, &["get", "--raw", &format!("/api/v1/nodes/{node}/proxy/configz")]),
        "proxy/configz",
    );
    let configz: Value = serde_json::from_str(&configz).expect("configz JSON");
    assert_eq!(configz["kubeletconfig"]["authorization"]["mode"], "Webhook");
    let healthz = kubectl(&api, &["get", "--raw", &format!("/api/v1/nodes/{node}/proxy/healthz")]);
    assert_eq!(stdout_ok(&healthz, "proxy/healthz"), "ok");
    // The API server authenticated with its certificate: no TokenReview, and the reviews are
    // for its user.
    assert!(api.token_reviews().is_empty());
    assert!(!reviews_of(&api, dockerlet_fake_apiserver::KUBELET_CLIENT_USER).is_empty());
}

/// Without an API server, asking for either webhook is refused at start, naming the flag.
#[test]
fn webhooks_without_an_api_server_are_refused() {
    let manifests = ManifestDir::new();
    for (flag, value) in [
        ("--authentication-token-webhook", "true"),
        ("--authorization-mode", "Webhook"),
    ] {
        let out = Command::new(dockerlet_integration_tests::harness::binary())
            .args([flag, value, "--pod-manifest-path"])
            .arg(manifests.path())
            .args(["--root-dir", "/nonexistent-dockerlet-root"])
            .output()
            .expect("run dockerlet");
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(flag) && stderr.contains("needs an API server"),
            "{flag}: {stderr}"
        );
    }
}
