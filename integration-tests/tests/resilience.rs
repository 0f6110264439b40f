//! The agent survives its own death and its actors' panics, and shares the engine with others;
//! an engine that stops answering shows on `/healthz` until it is back.

use std::collections::BTreeMap;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use dockerlet_integration_tests::docker::{self, Container};
use dockerlet_integration_tests::{
    holds_for, wait_until, Agent, ContainerStatusExt, ManifestDir, PodExt, CHANGE_TIMEOUT,
};

/// Container ID → (running, StartedAt) of every container of a node.
fn snapshot(agent: &Agent) -> BTreeMap<String, (bool, String)> {
    agent
        .containers()
        .into_iter()
        .map(|c| (c.id.clone(), (c.state.running, c.state.started_at.clone())))
        .collect()
}

/// Checks that the node's containers are exactly `before`, all still running, none restarted.
fn unchanged(agent: &Agent, before: &BTreeMap<String, (bool, String)>) -> Result<(), String> {
    let now = snapshot(agent);
    if &now == before && now.values().all(|(running, _)| *running) {
        Ok(())
    } else {
        Err(format!("before {before:?}\nnow {now:?}"))
    }
}

/// After SIGKILL and a restart the agent adopts its running containers: same IDs and start times, restartCount 0.
#[test]
fn an_agent_restarted_after_sigkill_adopts_its_running_containers() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("two-containers.yaml");
    let mut agent = Agent::start("restart-sigkill", manifests.path(), &[]);
    let pod = agent.wait_for_running("web");
    let before = snapshot(&agent);
    assert_eq!(before.len(), 3, "sandbox, server and client: {before:?}");

    agent.kill9();
    holds_for("containers to outlive the agent", Duration::from_secs(2), || {
        unchanged(&agent, &before)
    });
    agent.restart();

    let after = agent.wait_for_running("web");
    assert_eq!(after.uid(), pod.uid(), "the same pod UID");
    for name in ["server", "client"] {
        let (was, is) = (pod.container(name).unwrap(), after.container(name).unwrap());
        assert_eq!(is.docker_id(), was.docker_id(), "{name} adopted, not re-created");
        assert_eq!(is.restart_count, 0, "{}", is.summary());
    }
    // Two sync periods: the adopted containers are left alone.
    holds_for(
        "the adopted containers to stay untouched",
        Duration::from_secs(12),
        || unchanged(&agent, &before),
    );
    let pod = agent.pod("web").expect("pod listed");
    assert_eq!(pod.phase(), "Running");
    assert!(
        ["server", "client"]
            .iter()
            .all(|n| pod.container(n).is_some_and(|c| c.restart_count == 0)),
        "{}",
        pod.summary()
    );
}

/// SIGTERM makes the agent exit promptly and cleanly, and leaves the pod's containers running.
#[test]
fn sigterm_stops_the_agent_promptly_and_leaves_containers_running() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("sleeper.yaml");
    let mut agent = Agent::start("sigterm", manifests.path(), &[]);
    agent.wait_for_running("sleeper");
    let before = snapshot(&agent);

    let exit = agent.sigterm(Duration::from_secs(60));
    assert!(exit.status.success(), "clean exit after SIGTERM: {:?}", exit.status);
    assert!(
        exit.after < Duration::from_secs(20),
        "prompt exit after SIGTERM: {:?}",
        exit.after
    );
    holds_for("the containers to keep running", Duration::from_secs(3), || {
        unchanged(&agent, &before)
    });
}

/// Two agents on one engine run only their own pods and never touch each other's containers.
/// Three agents on one engine, each of its own node name: each lists and manages only its own
/// pods. One collects dead containers every second with none allowed (`--maximum-dead-containers
/// 0`): another agent's dead instance stays; a container dying, and a pod deleted, on one node
/// leave the other nodes' containers untouched.
#[test]
fn three_agents_on_one_engine_manage_only_their_own_pods() {
    let (manifests_a, manifests_b, manifests_c) = (ManifestDir::new(), ManifestDir::new(), ManifestDir::new());
    for m in [&manifests_a, &manifests_b, &manifests_c] {
        m.add_fixture("sleeper.yaml");
    }
    let gc = ["--container-gc-period", "1s", "--maximum-dead-containers", "0"];
    let a = Agent::start("three-agents-a", manifests_a.path(), &gc);
    let b = Agent::start("three-agents-b", manifests_b.path(), &[]);
    let c = Agent::start("three-agents-c", manifests_c.path(), &[]);
    let pod_a = a.wait_for_running("sleeper");
    let pod_b = b.wait_for_running("sleeper");
    let pod_c = c.wait_for_running("sleeper");
    assert_ne!(pod_a.uid(), pod_b.uid(), "the node name is part of the UID");
    assert_ne!(pod_b.uid(), pod_c.uid(), "the node name is part of the UID");

    let only_own = |agent: &Agent| -> Result<(), String> {
        let names: Vec<String> = agent
            .try_pods()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|p| p.name().to_string())
            .collect();
        if names != vec![agent.pod_name("sleeper")] {
            return Err(format!("{} lists {names:?}", agent.node()));
        }
        Ok(())
    };
    for agent in [&a, &b, &c] {
        only_own(agent).unwrap();
    }
    let b_before = snapshot(&b);
    assert_eq!(b_before.len(), 2, "b: sandbox and main: {b_before:?}");
    assert!(b.containers().iter().all(|c| c.pod_name() == b.pod_name("sleeper")));

    // c's container dies: c restarts it and keeps the dead instance, which a's GC leaves alone.
    let c_main = pod_c.container("main").and_then(|c| c.docker_id()).unwrap().to_string();
    docker::kill(&c_main);
    c.wait_for_pod("sleeper", "main restarted", CHANGE_TIMEOUT, |p| {
        p.container("main")
            .is_some_and(|c| c.restart_count == 1 && c.is_running())
    });
    holds_for("c's dead instance to stay", Duration::from_secs(5), || {
        if c.containers().iter().any(|x| x.id == c_main) {
            Ok(())
        } else {
            Err(format!("{c_main} was removed"))
        }
    });
    only_own(&c).unwrap();
    unchanged(&b, &b_before).unwrap();

    // a's container dies: a restarts it, b notices nothing.
    let a_main = pod_a.container("main").and_then(|c| c.docker_id()).unwrap().to_string();
    docker::kill(&a_main);
    a.wait_for_pod("sleeper", "main restarted", CHANGE_TIMEOUT, |p| {
        p.container("main")
            .is_some_and(|c| c.restart_count == 1 && c.is_running())
    });
    unchanged(&b, &b_before).unwrap();
    only_own(&b).unwrap();

    // a's pod is deleted: a removes its containers, b's stay.
    manifests_a.remove("sleeper.yaml");
    wait_until("a's containers to be removed", CHANGE_TIMEOUT, || {
        let left: Vec<String> = a.containers().iter().map(Container::summary).collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(left.join("; "))
        }
    });
    holds_for(
        "b's containers to stay untouched and b to list only its pod",
        Duration::from_secs(8),
        || {
            unchanged(&b, &b_before)?;
            only_own(&b)?;
            if !a.try_pods().map_err(|e| e.to_string())?.is_empty() {
                return Err("a adopted a pod".into());
            }
            Ok(())
        },
    );
    let pod_b = b.pod("sleeper").expect("b's pod");
    assert_eq!(
        pod_b.container("main").map(|c| c.restart_count),
        Some(0),
        "{}",
        pod_b.summary()
    );
}

/// Panicking PodWorker and PlegActor are re-created without restarting containers, and keep doing their job.
#[test]
fn panicking_pod_worker_and_pleg_actor_are_recreated_without_restarting_containers() {
    let manifests = ManifestDir::new();
    manifests.add_fixture("sleeper.yaml");
    let agent = Agent::start("fault-injection", manifests.path(), &["--enable-fault-injection"]);
    let pod = agent.wait_for_running("sleeper");
    let uid = pod.uid().to_string();
    let before = snapshot(&agent);
    let worker_name = format!("default/{}", agent.pod_name("sleeper"));
    let restarts = |actor: Option<serde_json::Value>| actor.and_then(|a| a["restarts"].as_u64());
    let worker_restarts = restarts(agent.actor("PodWorker", &worker_name)).expect("the pod's worker");
    let pleg_restarts = |agent: &Agent| restarts(agent.actors_of_kind("PlegActor").pop());
    let pleg_before = pleg_restarts(&agent).expect("a PlegActor");

    let answer = agent.inject_fault(&format!("target=pod&uid={uid}"));
    wait_until("the PodWorker to be re-created", CHANGE_TIMEOUT, || {
        match restarts(agent.actor("PodWorker", &worker_name)) {
            Some(n) if n > worker_restarts => Ok(()),
            seen => Err(format!("restarts {seen:?}; fault answer {answer:?}")),
        }
    });
    let answer = agent.inject_fault("target=pleg");
    wait_until(
        "the PlegActor to be re-created",
        CHANGE_TIMEOUT,
        || match pleg_restarts(&agent) {
            Some(n) if n > pleg_before => Ok(()),
            seen => Err(format!("restarts {seen:?}; fault answer {answer:?}")),
        },
    );

    holds_for("the pod's containers to stay untouched", Duration::from_secs(8), || {
        unchanged(&agent, &before)
    });
    wait_until("healthz to answer ok", CHANGE_TIMEOUT, || match agent.healthz() {
        Ok((200, body)) if body.trim() == "ok" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let pod = agent.pod("sleeper").expect("pod listed");
    assert_eq!(pod.uid(), uid);
    assert_eq!(
        pod.container("main").map(|c| c.restart_count),
        Some(0),
        "{}",
        pod.summary()
    );

    // The re-created actors still do their job.
    let old_id = pod.container("main").and_then(|c| c.docker_id()).unwrap().to_string();
    docker::kill(&old_id);
    let pod = agent.wait_for_pod("sleeper", "main restarted after docker kill", CHANGE_TIMEOUT, |p| {
        p.container("main")
            .is_some_and(|c| c.restart_count == 1 && c.is_running())
    });
    assert_ne!(pod.container("main").and_then(|c| c.docker_id()), Some(old_id.as_str()));
}

/// A Unix socket in front of Docker's, which the test can take away (listener and every
/// connection) and bring back.
struct DockerProxy {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<UnixStream>>>,
    acceptor: Option<JoinHandle<()>>,
}

impl DockerProxy {
    fn start(path: &Path) -> DockerProxy {
        let listener = UnixListener::bind(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<UnixStream>>> = Arc::default();
        let (stopped, open) = (stop.clone(), connections.clone());
        let acceptor = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                let client = match listener.accept() {
                    Ok((client, _)) => client,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                };
                client.set_nonblocking(false).unwrap();
                let Ok(engine) = UnixStream::connect("/var/run/docker.sock") else {
                    continue;
                };
                let mut list = open.lock().unwrap();
                list.push(client.try_clone().unwrap());
                list.push(engine.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), engine.try_clone().unwrap()),
                    (engine, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        DockerProxy {
            path: path.to_path_buf(),
            stop,
            connections,
            acceptor: Some(acceptor),
        }
    }

    /// The socket is gone and every connection through it cut.
    fn take_away(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(acceptor) = self.acceptor.take() {
            acceptor.join().unwrap();
        }
        let _ = std::fs::remove_file(&self.path);
        for c in self.connections.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for DockerProxy {
    fn drop(&mut self) {
        self.take_away();
    }
}

/// kubelet's healthz with its runtime gone: 500 naming the runtime (the PLEG's failed relist)
/// while the engine cannot be reached, 200 `ok` again once it can; the agent carries on.
#[test]
fn an_unreachable_engine_fails_healthz_until_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("docker.sock");
    let mut proxy = DockerProxy::start(&socket);
    let manifests = ManifestDir::new();
    let endpoint = format!("unix://{}", socket.display());
    let agent = Agent::start(
        "healthz-engine",
        manifests.path(),
        &["--container-runtime-endpoint", &endpoint],
    );
    let agent = &agent;
    let healthz = |want: u16| {
        move || match agent.healthz() {
            Ok((status, body)) if status == want => Ok(body),
            other => Err(format!("{other:?}")),
        }
    };
    assert_eq!(wait_until("healthz ok", CHANGE_TIMEOUT, healthz(200)), "ok");
    proxy.take_away();
    let body = wait_until("healthz to fail with the engine gone", CHANGE_TIMEOUT, healthz(500));
    assert!(
        body.starts_with("healthz check failed: container runtime is down: "),
        "{body}"
    );
    let _proxy = DockerProxy::start(&socket);
    assert_eq!(wait_until("healthz ok again", CHANGE_TIMEOUT, healthz(200)), "ok");
}
