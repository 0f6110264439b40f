//! `Cni` against script plugins that log each call (command, container, and the configuration
//! they were given) and answer as `bridge` and `portmap` would.

use super::*;
use crate::exec::tests::script_plugin;
use serde_json::json;

struct World {
    _dir: tempfile::TempDir,
    log: PathBuf,
    conf: PathBuf,
    cni: Cni,
}

/// Logs `$CNI_COMMAND $CNI_CONTAINERID <stdin>` to the log, then runs `answer`.
fn logging_plugin(bin: &std::path::Path, name: &str, log: &std::path::Path, answer: &str) {
    script_plugin(
        bin,
        name,
        &format!(
            r#"conf=$(cat); echo "{name} $CNI_COMMAND $CNI_CONTAINERID $conf" >> {log}; {answer}"#,
            log = log.display()
        ),
    );
}

const RESULT: &str = r#"{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/ns"}],"ips":[{"address":"10.9.0.7/24","interface":0}]}"#;

fn world(main_answer: &str, list: Value) -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let (bin, conf, log) = (
        dir.path().join("bin"),
        dir.path().join("net.d"),
        dir.path().join("calls.log"),
    );
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&conf).unwrap();
    logging_plugin(&bin, "main", &log, main_answer);
    // A chained plugin passes its prevResult on, as portmap does.
    logging_plugin(
        &bin,
        "chained",
        &log,
        r#"if [ "$CNI_COMMAND" = ADD ]; then printf '%s' "$conf" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["prevResult"]))'; fi"#,
    );
    std::fs::write(conf.join("10-net.conflist"), list.to_string()).unwrap();
    let cni = Cni::new(CniSettings {
        conf_dir: conf.clone(),
        bin_dirs: vec![bin],
        cache_dir: dir.path().join("cache"),
        timeout: Duration::from_secs(10),
        node: "node-a".into(),
    });
    World {
        _dir: dir,
        log,
        conf,
        cni,
    }
}

fn list() -> Value {
    json!({"cniVersion": "1.0.0", "name": "podnet", "plugins": [
        {"type": "main", "bridge": "cni0"},
        {"type": "chained", "capabilities": {"portMappings": true, "dns": true}},
    ]})
}

fn pod(id: &str) -> PodAttachment {
    PodAttachment {
        namespace: "default".into(),
        name: "web".into(),
        uid: "u-1".into(),
        container_id: id.into(),
        netns: "/proc/7/ns/net".into(),
        port_mappings: vec![PortMapping {
            host_port: 8080,
            container_port: 80,
            protocol: "tcp".into(),
            host_ip: String::new(),
        }],
        bandwidth: Some(Bandwidth {
            ingress_rate: 1_000_000,
            ingress_burst: 2_147_483_647,
            egress_rate: 0,
            egress_burst: 0,
        }),
        dns: Some(Dns {
            servers: vec!["10.96.0.10".into()],
            searches: vec!["default.svc.cluster.local".into()],
            options: Vec::new(),
        }),
    }
}

/// Each logged call: (plugin, command, container, configuration).
fn calls(log: &std::path::Path) -> Vec<(String, String, String, Value)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let mut parts = l.splitn(4, ' ');
            let mut next = || parts.next().unwrap_or_default().to_string();
            let (p, c, id, conf) = (next(), next(), next(), next());
            (p, c, id, serde_json::from_str(&conf).unwrap_or(Value::Null))
        })
        .collect()
}

/// ADD runs the list in order, the second plugin given the first's result and only the
/// capabilities it declares; the pod IP comes from the last result, which the cache keeps;
/// DEL runs the list in reverse with the cached result, and forgets the attachment.
#[tokio::test]
async fn add_and_del_run_the_list_as_libcni() {
    let w = world(&format!("echo '{RESULT}'"), list());
    let attached = w.cni.add(&pod("c1")).await.expect("added");
    assert_eq!(attached.ips, vec!["10.9.0.7".parse::<IpAddr>().unwrap()]);
    let c = calls(&w.log);
    assert_eq!(c.len(), 2);
    assert_eq!(
        (c[0].0.as_str(), c[0].1.as_str(), c[0].2.as_str()),
        ("main", "ADD", "c1")
    );
    assert_eq!(c[0].3["name"], "podnet");
    assert_eq!(c[0].3["cniVersion"], "1.0.0");
    assert!(c[0].3.get("prevResult").is_none() && c[0].3.get("runtimeConfig").is_none());
    assert_eq!(c[1].0, "chained");
    assert_eq!(c[1].3["prevResult"]["ips"][0]["address"], "10.9.0.7/24");
    assert_eq!(
        c[1].3["runtimeConfig"],
        json!({
            "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
            // Empty lists left out, as containerd's and cri-dockerd's `omitempty`.
            "dns": {"servers": ["10.96.0.10"], "searches": ["default.svc.cluster.local"]},
        })
    );
    assert_eq!(w.cni.pod_ips("c1"), Some(attached.ips.clone()));
    assert_eq!(w.cni.attached(), vec!["c1".to_string()]);

    // A new Cni (an agent restarted) finds the address and the attachment in the cache.
    let again = Cni::new(w.cni.settings().clone());
    assert_eq!(again.pod_ips("c1"), Some(attached.ips));
    assert!(again.del("c1", "").await.expect("deleted"));
    let c = calls(&w.log);
    assert_eq!(c.len(), 4);
    assert_eq!((c[2].0.as_str(), c[2].1.as_str()), ("chained", "DEL"));
    assert_eq!((c[3].0.as_str(), c[3].1.as_str()), ("main", "DEL"));
    assert_eq!(c[3].3["prevResult"]["ips"][0]["address"], "10.9.0.7/24");
    assert!(again.pod_ips("c1").is_none());
    assert!(again.attached().is_empty());
    assert!(
        !again.del("c1", "").await.expect("nothing to do"),
        "a second DEL has nothing to do"
    );
}

/// A failing ADD is undone with a DEL of the whole list and says what the plugin said, in
/// libcni's words; nothing is cached.
#[tokio::test]
async fn a_failed_add_is_undone() {
    let w = world(
        r#"if [ "$CNI_COMMAND" = ADD ]; then echo '{"code":11,"msg":"failed to allocate for range 0","details":"no IP addresses available"}'; exit 1; fi"#,
        list(),
    );
    let e = w.cni.add(&pod("c2")).await.expect_err("fails");
    assert_eq!(
        e.to_string(),
        r#"plugin type="main" name="podnet" failed (add): failed to allocate for range 0; no IP addresses available"#
    );
    let commands: Vec<(String, String)> = calls(&w.log).into_iter().map(|(p, c, _, _)| (p, c)).collect();
    assert_eq!(
        commands,
        [("main", "ADD"), ("chained", "DEL"), ("main", "DEL")].map(|(p, c)| (p.to_string(), c.to_string()))
    );
    assert!(w.cni.attached().is_empty());
    assert!(w.cni.pod_ips("c2").is_none());
}

/// No configuration: not ready, in kubelet's words; one appearing later is picked up.
#[tokio::test]
async fn the_network_is_ready_once_a_configuration_exists() {
    let w = world(&format!("echo '{RESULT}'"), list());
    std::fs::remove_file(w.conf.join("10-net.conflist")).unwrap();
    assert_eq!(
        w.cni.status().await.expect_err("not ready").to_string(),
        "cni config uninitialized"
    );
    assert!(matches!(w.cni.add(&pod("c3")).await, Err(NetworkError::Uninitialized)));
    std::fs::write(w.conf.join("10-net.conflist"), list().to_string()).unwrap();
    w.cni.status().await.expect("ready");
    assert_eq!(w.cni.network().expect("loaded").name, "podnet");
}

/// From spec 1.1.0 readiness asks each plugin STATUS; a plugin saying no makes it not ready.
#[tokio::test]
async fn status_asks_plugins_from_1_1_0() {
    let mut l = list();
    l["cniVersion"] = json!("1.1.0");
    let w = world(
        r#"if [ "$CNI_COMMAND" = STATUS ]; then echo '{"code":50,"msg":"plugin not available"}'; exit 1; fi"#,
        l,
    );
    let e = w.cni.status().await.expect_err("not ready");
    assert!(e.to_string().contains("failed (status): plugin not available"), "{e}");
}

/// When a later plugin fails, the DEL that undoes the ADD carries what the earlier ones gave
/// (so `firewall`-like plugins can find their rules), and the failure names the later plugin.
#[tokio::test]
async fn the_undo_of_a_partial_add_carries_its_result() {
    let mut l = list();
    l["plugins"][1] = json!({"type": "breaker"});
    let w = world(&format!("echo '{RESULT}'"), l);
    logging_plugin(
        &w.cni.settings().bin_dirs[0],
        "breaker",
        &w.log,
        r#"if [ "$CNI_COMMAND" = ADD ]; then echo 'not json'; exit 1; fi"#,
    );
    let e = w.cni.add(&pod("c4")).await.expect_err("fails");
    assert_eq!(
        e.to_string(),
        r#"plugin type="breaker" name="podnet" failed (add): netplugin failed: "not json""#
    );
    let c = calls(&w.log);
    let dels: Vec<&(String, String, String, Value)> = c.iter().filter(|c| c.1 == "DEL").collect();
    assert_eq!(dels.len(), 2);
    for del in dels {
        assert_eq!(del.3["prevResult"]["ips"][0]["address"], "10.9.0.7/24", "{}", del.0);
    }
}

/// A DEL goes on past a plugin that fails and reports it; one whose binary is gone is passed
/// over; the
/// undo of a failed ADD whose DEL failed is kept, so the next DEL (the sandbox's removal) tries
/// again, and once it succeeds the attachment is gone.
#[tokio::test]
async fn a_del_asks_every_plugin_and_a_failed_undo_is_kept() {
    let mut l = list();
    l["plugins"][1] = json!({"type": "flaky"});
    let w = world(&format!("echo '{RESULT}'"), l);
    let bin = w.cni.settings().bin_dirs[0].clone();
    // ADD fails; the first DEL of it fails too; later ones succeed.
    logging_plugin(
        &bin,
        "flaky",
        &w.log,
        &format!(
            r#"m={}/flaky.del; if [ "$CNI_COMMAND" = ADD ]; then echo nope; exit 1; fi; if [ ! -e $m ]; then touch $m; echo still-nope; exit 1; fi"#,
            bin.display()
        ),
    );
    let e = w.cni.add(&pod("c5")).await.expect_err("fails");
    assert!(e.to_string().contains("failed (add)"), "{e}");
    let commands: Vec<(String, String)> = calls(&w.log).into_iter().map(|(p, c, _, _)| (p, c)).collect();
    assert_eq!(
        commands,
        [("main", "ADD"), ("flaky", "ADD"), ("flaky", "DEL"), ("main", "DEL")]
            .map(|(p, c)| (p.to_string(), c.to_string())),
        "main's DEL ran though flaky's failed"
    );
    assert!(w.cni.is_attached("c5"), "the half-undone attachment is kept");
    assert!(w.cni.del("c5", "").await.expect("the second DEL succeeds"));
    assert!(!w.cni.is_attached("c5"));
    let dels = calls(&w.log).into_iter().filter(|c| c.1 == "DEL").count();
    assert_eq!(dels, 4);
}

/// A plugin removed after the ADD does not keep the attachment for ever: its DEL is passed over
/// and the others release what they hold.
#[tokio::test]
async fn a_plugin_gone_since_the_add_does_not_block_the_del() {
    let w = world(&format!("echo '{RESULT}'"), list());
    w.cni.add(&pod("c6")).await.expect("added");
    std::fs::remove_file(w.cni.settings().bin_dirs[0].join("chained")).expect("remove chained");
    assert!(w.cni.del("c6", "").await.expect("deleted"));
    let c = calls(&w.log);
    assert_eq!(
        (c.last().unwrap().0.as_str(), c.last().unwrap().1.as_str()),
        ("main", "DEL")
    );
    assert!(!w.cni.is_attached("c6"));
}

/// cri-dockerd's loopback network where the `loopback` plugin is installed: ADD brings `lo` up
/// first (the list `cni-loopback` 0.2.0, interface `lo`), its 127.0.0.1 is not the pod's; DEL
/// asks it too, and a loopback DEL that fails does not keep the attachment.
#[tokio::test]
async fn the_loopback_network_comes_first_as_cri_dockerds() {
    let w = world(&format!("echo '{RESULT}'"), list());
    let bin = w.cni.settings().bin_dirs[0].clone();
    script_plugin(
        &bin,
        "loopback",
        &format!(
            r#"conf=$(cat); echo "loopback $CNI_COMMAND $CNI_IFNAME $conf" >> {log}; if [ "$CNI_COMMAND" = ADD ]; then echo '{{"cniVersion":"0.2.0","ip4":{{"ip":"127.0.0.1/8"}}}}'; else exit 1; fi"#,
            log = w.log.display()
        ),
    );
    let attached = w.cni.add(&pod("c1")).await.expect("added");
    assert_eq!(attached.ips, vec!["10.9.0.7".parse::<IpAddr>().unwrap()]);
    let c = calls(&w.log);
    let order: Vec<(&str, &str)> = c.iter().map(|c| (c.0.as_str(), c.1.as_str())).collect();
    assert_eq!(order, [("loopback", "ADD"), ("main", "ADD"), ("chained", "ADD")]);
    assert_eq!(c[0].2, "lo");
    assert_eq!(
        c[0].3,
        json!({"cniVersion": "0.2.0", "name": "cni-loopback", "type": "loopback"})
    );

    assert!(w
        .cni
        .del("c1", "/proc/7/ns/net")
        .await
        .expect("deleted despite the loopback"));
    let c = calls(&w.log);
    let order: Vec<(&str, &str)> = c[3..].iter().map(|c| (c.0.as_str(), c.1.as_str())).collect();
    assert_eq!(order, [("loopback", "DEL"), ("chained", "DEL"), ("main", "DEL")]);
    assert!(w.cni.attached().is_empty());
}
