//! Every container the agent stops or removes is logged with the pod and why: a liveness
//! failure (kubelet's "Container … failed liveness probe, will be restarted"), a sandbox that
//! stopped under the pod (kubelet's "Pod sandbox changed, it will be killed and re-created."), a
//! manifest removed ("the pod was removed from its source"), an orphan found at start.

use dockerlet_integration_tests::docker::docker;
use dockerlet_integration_tests::{wait_until, Agent, ManifestDir, PodExt, CHANGE_TIMEOUT};

fn pod(name: &str, liveness: bool) -> String {
    let probe = if liveness {
        "    livenessProbe:\n      exec:\n        command: [\"false\"]\n      initialDelaySeconds: 1\n      periodSeconds: 1\n      failureThreshold: 1\n"
    } else {
        ""
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: dockerlet.local/busybox:1\n    command: [\"sleep\", \"3600\"]\n{probe}"
    )
}

/// Waits for a log line of `agent` with every one of `parts`; the line.
fn logged(agent: &Agent, parts: &[&str]) -> String {
    wait_until(&format!("a log line with {parts:?}"), CHANGE_TIMEOUT, || {
        let log = agent.log();
        log.lines()
            .find(|l| parts.iter().all(|p| l.contains(p)))
            .map(str::to_string)
            .ok_or_else(|| "not yet".to_string())
    })
}

#[test]
fn each_stop_is_logged_with_its_pod_and_reason() {
    let manifests = ManifestDir::new();
    let mut agent = Agent::start("stop-reasons", manifests.path(), &[]);
    manifests.write("prober.yaml", &pod("prober", true));
    manifests.write("kept.yaml", &pod("kept", false));
    manifests.write("removed.yaml", &pod("removed", false));
    let prober = agent.pod_name("prober");
    let line = logged(
        &agent,
        &[
            "stopping container",
            "Container main failed liveness probe, will be restarted",
            &prober,
        ],
    );
    assert!(line.contains("pod.namespace=default"), "{line}");

    // The sandbox killed behind the agent's back.
    let kept = agent.wait_for_running("kept");
    let sandbox = agent
        .pod_containers(kept.uid())
        .into_iter()
        .find(|c| c.is_sandbox())
        .expect("a sandbox")
        .id;
    docker(&["kill", &sandbox]);
    logged(
        &agent,
        &[
            "stopping container",
            "Pod sandbox changed, it will be killed and re-created.",
            &agent.pod_name("kept"),
        ],
    );
    // And kubelet's SandboxChanged event about the pod, with the same words.
    let object = agent.pod_object("kept");
    wait_until("a SandboxChanged event", CHANGE_TIMEOUT, || {
        let events = agent.events();
        events
            .iter()
            .any(|e| {
                e["reason"] == "SandboxChanged"
                    && e["object"] == object.as_str()
                    && e["message"] == "Pod sandbox changed, it will be killed and re-created."
            })
            .then_some(())
            .ok_or_else(|| format!("{events:?}"))
    });

    agent.wait_for_running("removed");
    manifests.remove("removed.yaml");
    logged(
        &agent,
        &[
            "stopping container",
            "the pod was removed from its source",
            &agent.pod_name("removed"),
        ],
    );

    // An orphan: its manifest went while the agent was down.
    agent.kill9();
    manifests.remove("kept.yaml");
    agent.restart();
    logged(
        &agent,
        &["stopping container", "orphan: a pod of this node no source wants"],
    );
    logged(
        &agent,
        &["removing container", "orphan: a pod of this node no source wants"],
    );
}
