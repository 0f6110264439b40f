//! The CNI pod network across agent restarts, against real Docker and Debian's plugins: what
//! broke or was left half-done while the agent was down (SIGKILL) is mended at its next start —
//! a sandbox removed behind its back is detached, one whose network broke fails the plugins'
//! `CHECK` and is replaced, one whose ADD the agent never finished is undone and replaced.

use std::process::Command;

mod common;

use common::cni::{fetch, host_veth, require_plugins, running, wait_nothing_left, wait_pod_gone, web_pod, NodeNet};
use dockerlet_integration_tests::docker::docker;
use dockerlet_integration_tests::{wait_until, Agent, ManifestDir, CHANGE_TIMEOUT, POD_START_TIMEOUT};
use serde_json::json;

/// While the agent is down (SIGKILL): one pod's sandbox is removed behind its back, another's
/// network is broken (the host end of its veth deleted). At the next start the gone sandbox is
/// detached (its lease released), the broken one fails the plugins' `CHECK` and is replaced (a
/// new sandbox, reachable again), and the untouched pod keeps its sandbox and address.
#[test]
fn sandboxes_gone_or_broken_while_the_agent_was_down_are_mended_at_start() {
    require_plugins();
    let net = NodeNet::new(&[]);
    let manifests = ManifestDir::new();
    let args = net.args();
    let mut agent = Agent::start(
        "cni-restart",
        manifests.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    manifests.write("kept.yaml", &web_pod("kept", "kept", None));
    manifests.write("lost.yaml", &web_pod("lost", "lost", None));
    manifests.write("broken.yaml", &web_pod("broken", "broken", None));
    let (kept_ip, kept_sandbox, kept_web) = running(&agent, "kept", &net);
    let (lost_ip, lost_sandbox, _) = running(&agent, "lost", &net);
    let (broken_ip, broken_sandbox, _) = running(&agent, "broken", &net);
    agent.kill9();
    manifests.remove("lost.yaml");
    let lost_pod_containers: Vec<String> = dockerlet_integration_tests::docker::node_containers(agent.node())
        .into_iter()
        .filter(|c| c.pod_name() == agent.pod_name("lost"))
        .map(|c| c.id)
        .collect();
    for id in &lost_pod_containers {
        docker(&["rm", "-f", id]);
    }
    assert!(
        net.leases().contains(&lost_ip),
        "the lease outlives a container removed behind the agent's back"
    );
    let veth = host_veth(&broken_sandbox);
    let deleted = Command::new("ip")
        .args(["link", "del", &veth])
        .status()
        .expect("ip link del");
    assert!(deleted.success(), "delete {veth}");
    agent.restart();
    wait_until("the lost sandbox detached", CHANGE_TIMEOUT, || {
        let (leases, cached) = (net.leases(), net.cached());
        if !leases.contains(&lost_ip) && !cached.iter().any(|c| c.contains(&lost_sandbox)) {
            Ok(())
        } else {
            Err(format!("leases {leases:?}, cache {cached:?}"))
        }
    });
    let (ip, sandbox, _) = running(&agent, "kept", &net);
    assert_eq!(
        (ip.as_str(), sandbox.as_str()),
        (kept_ip.as_str(), kept_sandbox.as_str())
    );
    assert!(net.leases().contains(&kept_ip));
    let (new_ip, new_sandbox) = wait_until("a new sandbox for broken", POD_START_TIMEOUT, || {
        let (ip, sandbox, _) = running(&agent, "broken", &net);
        (sandbox != broken_sandbox)
            .then_some((ip, sandbox))
            .ok_or_else(|| "the old sandbox still".to_string())
    });
    assert!(
        agent
            .log()
            .contains("its pod network failed the plugins' CHECK (found at start)"),
        "the replacement is logged with its reason"
    );
    assert_eq!(fetch(&kept_web, &new_ip, 8080), "broken");
    assert!(
        !net.cached().iter().any(|c| c.contains(&broken_sandbox)),
        "the broken sandbox is detached"
    );

    manifests.remove("kept.yaml");
    manifests.remove("broken.yaml");
    wait_pod_gone(&agent, "kept");
    wait_pod_gone(&agent, "broken");
    wait_nothing_left(
        &net,
        &[
            kept_sandbox,
            kept_ip,
            lost_sandbox,
            broken_sandbox,
            broken_ip,
            new_sandbox,
            new_ip,
        ],
    );
}

/// An agent SIGKILLed in the middle of a sandbox's CNI ADD (after `bridge` and `host-local` ran,
/// while a plugin after them is still at work): at the next start that sandbox, attached without
/// an address, is detached (its lease released, its veth gone) and replaced, and the pod comes up
/// on a new sandbox; once the pod is deleted nothing of either is left.
#[test]
fn an_agent_killed_during_add_cleans_up_at_its_next_start() {
    require_plugins();
    let net = NodeNet::new(&[json!({"type": "slow"})]);
    std::fs::create_dir_all(net.bin_dir()).expect("bin dir");
    let (entered, hold) = (net.dir.path().join("slow.entered"), net.dir.path().join("slow.hold"));
    // Passes its prevResult on (as portmap does), but first waits while the hold file exists.
    let script = format!(
        r#"#!/bin/sh
conf=$(cat)
[ "$CNI_COMMAND" = ADD ] || exit 0
touch {entered}
while [ -e {hold} ]; do sleep 0.1; done
printf '%s' "$conf" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["prevResult"]))'
"#,
        entered = entered.display(),
        hold = hold.display()
    );
    let plugin = net.bin_dir().join("slow");
    std::fs::write(&plugin, script).expect("write the plugin");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(&hold, "").expect("hold the ADD");

    let manifests = ManifestDir::new();
    let args = net.args();
    let mut agent = Agent::start(
        "cni-killed",
        manifests.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    manifests.write("slow.yaml", &web_pod("slow", "slow", None));
    wait_until("the ADD in the slow plugin", POD_START_TIMEOUT, || {
        entered.exists().then_some(()).ok_or_else(|| "not yet".to_string())
    });
    let leases = net.leases();
    assert_eq!(leases.len(), 1, "host-local ran before the slow plugin: {leases:?}");
    let first_sandbox = dockerlet_integration_tests::docker::node_containers(agent.node())
        .into_iter()
        .find(|c| c.is_sandbox())
        .expect("the sandbox being attached")
        .id;
    agent.kill9();
    std::fs::remove_file(&hold).expect("let ADDs through");
    agent.restart();

    let (ip, sandbox, _) = running(&agent, "slow", &net);
    assert_ne!(sandbox, first_sandbox, "the half-attached sandbox is replaced");
    wait_until("the first sandbox detached", CHANGE_TIMEOUT, || {
        let (leases, cached) = (net.leases(), net.cached());
        if leases == [ip.clone()] && !cached.iter().any(|c| c.contains(&first_sandbox)) && net.veths().len() == 1 {
            Ok(())
        } else {
            Err(format!("leases {leases:?}, cache {cached:?}, veths {:?}", net.veths()))
        }
    });
    assert!(
        agent
            .log()
            .contains("its CNI ADD never finished (the agent stopped during it)"),
        "the replacement is logged with its reason"
    );
    manifests.remove("slow.yaml");
    wait_pod_gone(&agent, "slow");
    wait_nothing_left(&net, &[first_sandbox, sandbox, ip, leases[0].clone()]);
}
