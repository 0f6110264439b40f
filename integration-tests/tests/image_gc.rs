//! Image garbage collection on a Docker engine of the test's own ([`SecondEngine`]): on the
//! engine every test shares, a collection would remove the other tests' images.
//!
//! The agent runs with thresholds that make any disk "full" (`--image-gc-high-threshold 1
//! --image-gc-low-threshold 0`), a short minimum age and period, as issue 31's "Done when"
//! asks: unused images older than the minimum age go; an image a running pod uses, one a
//! stopped container of another node name uses, one a plain `docker run` container (exited)
//! uses, the sandbox image and an image younger than the minimum age stay; the metric counts
//! the removals. kubelet's behaviour: `k/k pkg/kubelet/images/image_gc_manager.go`.
//!
//! Also: the Node's `status.images` (kubelet's `nodestatus.Images` setter), in API mode on the
//! shared engine with image GC off (the harness's default there), so nothing is removed.

use std::time::Duration;

use dockerlet_fake_apiserver::ApiServer;
use dockerlet_integration_tests::{wait_until, Agent, ManifestDir, SecondEngine, CHANGE_TIMEOUT};

const BUSYBOX: &str = "dockerlet.local/busybox:1";
/// `--minimum-image-ttl-duration`: long enough for two 1-second runs and the pod's start under
/// load, short enough for the test.
const MIN_AGE: Duration = Duration::from_secs(8);

/// A new image of its own ID on `engine`: busybox with a label, committed from a container.
fn make_image(engine: &SecondEngine, tag: &str) -> String {
    let container = engine.docker_ok(&["create", BUSYBOX, "true"]);
    engine.docker_ok(&["commit", "-c", &format!("LABEL gc.test={tag}"), &container, tag]);
    engine.docker_ok(&["rm", &container]);
    engine.docker_ok(&["image", "inspect", "-f", "{{.Id}}", tag])
}

/// The image GC actor's detail on the debug page.
fn gc_detail(agent: &Agent) -> serde_json::Value {
    agent
        .actor("ImageGcActor", "image-gc")
        .map(|a| a["detail"].clone())
        .unwrap_or_default()
}

fn runs(agent: &Agent) -> u64 {
    gc_detail(agent)["runs"].as_u64().unwrap_or(0)
}

/// The value of `series` on the read-only port's `/metrics`.
fn metric(agent: &Agent, series: &str) -> Option<f64> {
    let url = format!("http://127.0.0.1:{}/metrics", agent.ports().read_only);
    let (_, body) = agent.get(&url).ok()?;
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

#[test]
fn unused_old_images_go_and_used_pinned_and_young_ones_stay() {
    let engine = SecondEngine::start().unwrap_or_else(|e| panic!("{e:#}"));
    engine.load_from_shared(BUSYBOX);
    for tag in ["gc-old:1", "gc-old:2", "gc-pod:1", "gc-other-node:1", "gc-plain:1"] {
        make_image(&engine, tag);
    }
    // A stopped container of another agent sharing the engine, and one no agent made (exited).
    engine.docker_ok(&[
        "create",
        "--label",
        "io.dockerlet.node=another-node",
        "gc-other-node:1",
        "true",
    ]);
    engine.docker_ok(&["run", "--name", "plain", "gc-plain:1", "true"]);

    let manifests = ManifestDir::new();
    manifests.write(
        "user.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: user
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: gc-pod:1
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"#,
    );
    let endpoint = engine.endpoint();
    let min_age = format!("{}s", MIN_AGE.as_secs());
    let mut agent = Agent::start(
        "image-gc",
        manifests.path(),
        &[
            "--container-runtime-endpoint",
            &endpoint,
            "--image-gc-high-threshold",
            "1",
            "--image-gc-low-threshold",
            "0",
            "--minimum-image-ttl-duration",
            &min_age,
            "--image-gc-period",
            "1s",
        ],
    );
    agent.wait_for_running("user");
    let sandbox = engine.docker_ok(&["images", "--filter", "reference=dockerlet.local/pause", "-q"]);
    assert!(!sandbox.is_empty(), "the agent provisioned its sandbox image");

    wait_until(
        "the unused images older than the minimum age to go",
        CHANGE_TIMEOUT,
        || match (engine.image_exists("gc-old:1"), engine.image_exists("gc-old:2")) {
            (false, false) => Ok(()),
            left => Err(format!(
                "gc-old:1, gc-old:2 present: {left:?}; GC: {}",
                gc_detail(&agent)
            )),
        },
    );
    for kept in ["gc-pod:1", "gc-other-node:1", "gc-plain:1", BUSYBOX] {
        assert!(engine.image_exists(kept), "{kept} was removed: {}", gc_detail(&agent));
    }
    assert!(
        !engine
            .docker_ok(&["images", "--filter", "reference=dockerlet.local/pause", "-q"])
            .is_empty(),
        "the sandbox image was removed"
    );
    // busybox, which no container uses, stays too: the committed images are built on it, and
    // Docker refuses to delete a parent (its tags would be gone and the image left).
    wait_until("the removals counted", CHANGE_TIMEOUT, || {
        match metric(&agent, "kubelet_image_garbage_collected_total{reason=\"space\"}") {
            Some(n) if n >= 2.0 => Ok(()),
            other => Err(format!(
                "kubelet_image_garbage_collected_total{{reason=\"space\"}}: {other:?}"
            )),
        }
    });

    // An image pulled now is younger than the minimum age: two runs that saw it keep it, a
    // run after the minimum age removes it.
    let young_id = make_image(&engine, "gc-young:1");
    let created = std::time::Instant::now();
    let seen_by = runs(&agent) + 2;
    wait_until("two more runs", CHANGE_TIMEOUT, || {
        if runs(&agent) >= seen_by {
            Ok(())
        } else {
            Err(format!("runs: {}", runs(&agent)))
        }
    });
    assert!(
        created.elapsed() < MIN_AGE,
        "the runs took longer than the minimum age; cannot tell"
    );
    assert!(
        engine.image_exists(&young_id),
        "the young image was removed before its minimum age"
    );
    wait_until("the young image to go once old enough", CHANGE_TIMEOUT, || {
        if engine.image_exists(&young_id) {
            Err(format!("present {:?} after its creation", created.elapsed()))
        } else {
            Ok(())
        }
    });
    assert!(created.elapsed() >= MIN_AGE, "removed after {:?}", created.elapsed());
    for kept in ["gc-pod:1", "gc-other-node:1", "gc-plain:1"] {
        assert!(engine.image_exists(kept), "{kept} was removed");
    }
    // The records survive an agent restart (kubelet keeps them in memory): an image first seen
    // more than the minimum age before the restart goes in the first run after it, where a
    // fresh record would call it just pulled and keep it for the minimum age.
    let records_path = agent.root_dir().join("image-gc.json");
    let pod_image = engine.docker_ok(&["image", "inspect", "-f", "{{.Id}}", "gc-pod:1"]);
    let recorded = |id: &str| std::fs::read_to_string(&records_path).is_ok_and(|r| r.contains(id));
    assert!(recorded(&pod_image), "the records file names the pod's image");
    let restart_id = make_image(&engine, "gc-restart:1");
    wait_until("the new image recorded", CHANGE_TIMEOUT, || {
        if recorded(&restart_id) {
            Ok(())
        } else {
            Err("not in image-gc.json yet".to_string())
        }
    });
    agent.kill9();
    std::thread::sleep(MIN_AGE);
    assert!(engine.image_exists(&restart_id), "removed before the restart");
    agent.restart();
    wait_until("the first run after the restart", CHANGE_TIMEOUT, || {
        if runs(&agent) >= 1 {
            Ok(())
        } else {
            Err(format!("GC: {}", gc_detail(&agent)))
        }
    });
    assert!(
        !engine.image_exists(&restart_id),
        "the first run after the restart kept an image first seen before it: {}",
        gc_detail(&agent)
    );
    assert!(engine.image_exists("gc-pod:1"), "the running pod's image was removed");
    drop(agent);
}

/// The Node's status names the engine's images, largest first, at most
/// `--node-status-max-images`, digests then tags (`pkg/kubelet/nodestatus/setters.go`).
#[test]
fn the_node_status_names_the_engines_images() {
    let api = ApiServer::start();
    let manifests = ManifestDir::new();
    let kubeconfig = api.kubeconfig_path().display().to_string();
    let agent = Agent::start(
        "node-images",
        manifests.path(),
        &[
            "--kubeconfig",
            &kubeconfig,
            "--node-status-update-frequency",
            "1s",
            "--node-status-max-images",
            "-1",
        ],
    );
    let images = wait_until("status.images to name busybox", CHANGE_TIMEOUT, || {
        let node = api.get("nodes", "", agent.node()).ok_or("no Node yet")?;
        let images = node["status"]["images"].as_array().cloned().unwrap_or_default();
        let names = |i: &serde_json::Value| i["names"].as_array().cloned().unwrap_or_default();
        if images.iter().any(|i| names(i).iter().any(|n| n == BUSYBOX)) {
            Ok(images)
        } else {
            Err(format!("status.images: {images:?}"))
        }
    });
    let sizes: Vec<i64> = images.iter().map(|i| i["sizeBytes"].as_i64().unwrap()).collect();
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "largest first: {sizes:?}");
    assert!(images.iter().all(|i| i["names"].as_array().unwrap().len() <= 5));
    // Other tests add images to the shared engine meanwhile: only the two every node has.
    let named = |n: &str| {
        images.iter().any(|i| {
            i["names"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x.as_str().is_some_and(|x| x.starts_with(n)))
        })
    };
    assert!(named(BUSYBOX) && named("dockerlet.local/pause:"), "{images:?}");
}
