//! The agent's HTTP endpoints and command line, as tools and humans see them.

use std::process::{Command, Stdio};
use std::time::Duration;

use dockerlet_integration_tests::harness::binary;
use dockerlet_integration_tests::{wait_until, Agent, ManifestDir, PodExt, CHANGE_TIMEOUT};

/// healthz says `ok`, `/pods` is a v1 PodList, `/debug/actors` lists the node, every actor kind and the pod's worker.
#[test]
fn the_http_endpoints_answer_with_kubelet_shapes() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("sleeper.yaml");
    let agent = Agent::start("http-endpoints", manifests.path(), &[]);
    let pod = agent.wait_for_running("sleeper");

    wait_until("healthz to answer 200 ok", CHANGE_TIMEOUT, || match agent.healthz() {
        Ok((200, body)) if body.trim() == "ok" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let read_only = format!("http://127.0.0.1:{}", agent.ports().read_only);
    let (status, body) = agent.get(&format!("{read_only}/healthz")).unwrap();
    assert_eq!((status, body.trim()), (200, "ok"), "read-only /healthz");

    let (status, body) = agent.get(&format!("{read_only}/pods")).unwrap();
    assert_eq!(status, 200);
    let raw: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (raw["kind"].as_str(), raw["apiVersion"].as_str()),
        (Some("PodList"), Some("v1"))
    );

    let debug = agent.debug();
    assert_eq!(debug["node_name"], agent.node());
    let actors = debug["actors"].as_array().expect("actors");
    for kind in ["Supervisor", "PodWorker", "PlegActor", "StatusActor", "FileSource"] {
        assert!(
            actors.iter().any(|a| a["kind"] == kind),
            "an actor of kind {kind}: {actors:#?}"
        );
    }
    for actor in actors {
        assert!(
            actor["name"].is_string() && actor["messages_handled"].is_u64(),
            "{actor}"
        );
        assert!(
            actor["restarts"].is_u64() && actor.get("last_error").is_some(),
            "{actor}"
        );
    }
    let name = format!("default/{}", agent.pod_name("sleeper"));
    let worker = actors
        .iter()
        .find(|a| a["kind"] == "PodWorker" && a["name"] == name.as_str())
        .expect("worker");
    assert_eq!(worker["detail"]["pod_uid"], pod.uid(), "{worker}");
    for key in ["phase", "next_action", "backoff_until", "last_error"] {
        assert!(worker["detail"].get(key).is_some(), "worker detail has {key}: {worker}");
    }
    assert!(
        debug["manifest_errors"].as_array().is_some_and(|e| e.is_empty()),
        "{debug}"
    );
    assert!(debug["events"].is_array(), "{debug}");
}

/// A bad command line (unknown flag, unparsable duration) makes the agent exit with code 2.
#[test]
fn a_bad_command_line_exits_with_code_2() {
    for args in [&["--no-such-flag"][..], &["--sync-frequency", "soon"][..]] {
        let mut child = Command::new(binary())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot run the agent");
        let status = wait_until("the agent to exit", Duration::from_secs(30), || {
            child.try_wait().unwrap().ok_or("still running".to_string())
        });
        assert_eq!(status.code(), Some(2), "{args:?}");
    }
}
