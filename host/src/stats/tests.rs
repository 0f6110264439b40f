//! The collector over recorded cgroup trees on disk, and its cgroup paths and figures.

use super::figures::swap_stats;
use super::pod::{container_cgroup, kubepods_of, pod_cgroup_of};
use super::*;
use crate::cgroup::stats::MemoryUsage;

/// What is left of a swap limit is the limit less the swap used; no limit, no figure.
#[test]
fn swap_available_is_the_limit_less_the_use() {
    let time = Time(Timestamp::UNIX_EPOCH);
    let cgroup = |swap_limit| CgroupStats {
        memory: Some(MemoryUsage {
            swap: Some(4096),
            swap_limit,
            ..Default::default()
        }),
        ..CgroupStats::default()
    };
    let limited = swap_stats(&time, &cgroup(Some(10_000))).unwrap();
    assert_eq!(
        (limited.swap_usage_bytes, limited.swap_available_bytes),
        (Some(4096), Some(5904))
    );
    let unlimited = swap_stats(&time, &cgroup(None)).unwrap();
    assert_eq!(
        (unlimited.swap_usage_bytes, unlimited.swap_available_bytes),
        (Some(4096), None)
    );
    // A limit below the use (lowered under a swapped-out cgroup) leaves nothing, never wraps.
    let over = swap_stats(&time, &cgroup(Some(1024))).unwrap();
    assert_eq!(over.swap_available_bytes, Some(0));
}

/// usageNanoCores is the CPU delta over the window; a first reading has none.
#[test]
fn rates_come_from_the_previous_reading() {
    let mut c = Collector::new(Paths {
        node_name: "n".into(),
        root_dir: PathBuf::from("/nonexistent"),
        docker_root: None,
        layout: None,
        system: SystemCgroupNames::default(),
        engine_cgroup_driver: CgroupDriver::Cgroupfs,
    });
    let mut seen = HashSet::new();
    let t0 = Instant::now();
    assert_eq!(c.rate("a", 1_000, t0, None, &mut seen), None);
    let t1 = t0 + Duration::from_secs(10);
    // 5 s of CPU in 10 s: half a core.
    assert_eq!(c.rate("a", 5_000_001_000, t1, None, &mut seen), Some(500_000_000));
    // Backwards (a restart under the same key): skipped, then counted from the new value.
    assert_eq!(c.rate("a", 10, t1 + Duration::from_secs(10), None, &mut seen), None);
    assert_eq!(
        c.rate("a", 1_000_000_010, t1 + Duration::from_secs(20), None, &mut seen),
        Some(100_000_000)
    );
    // A container started 2 s ago with 1 s of CPU: half a core over its life.
    assert_eq!(
        c.rate("b", 1_000_000_000, t1, Some(Duration::from_secs(2)), &mut seen),
        Some(500_000_000)
    );
    assert_eq!(nano_cores(1, Duration::ZERO), None);
    // Never more than the machine: 2.02 cores measured on 2 CPUs is 2 cores.
    c.max_nano_cores = Some(2_000_000_000);
    assert_eq!(c.rate("c", 0, t0, None, &mut seen), None);
    assert_eq!(
        c.rate("c", 20_200_000_000, t0 + Duration::from_secs(10), None, &mut seen),
        Some(2_000_000_000)
    );
}

fn write(dir: &Path, files: &[(&str, String)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, content) in files {
        std::fs::write(dir.join(name), content).unwrap();
    }
}

/// A recorded v1 container cgroup: CPU ns, memory usage and limit, PIDs.
fn v1_container(root: &Path, id: &str, cpu_ns: u64, usage: u64, limit: u64, pids: u64) {
    write(
        &root.join("cpuacct/docker").join(id),
        &[("cpuacct.usage", cpu_ns.to_string())],
    );
    write(
        &root.join("memory/docker").join(id),
        &[
            ("memory.usage_in_bytes", usage.to_string()),
            ("memory.limit_in_bytes", limit.to_string()),
            (
                "memory.stat",
                "total_rss 4096\ntotal_inactive_file 1000\ntotal_pgfault 500\ntotal_pgmajfault 0\n".into(),
            ),
        ],
    );
    write(
        &root.join("pids/docker").join(id),
        &[("pids.current", pids.to_string())],
    );
}

fn observed(id: &str, name: &str, role: ContainerRole) -> ObservedContainer {
    let labels = [
        (dockerlet_pod::labels::POD_UID, "u1"),
        (dockerlet_pod::labels::CONTAINER_NAME, name),
        (dockerlet_pod::labels::POD_NAME, "web"),
        (dockerlet_pod::labels::POD_NAMESPACE, "ns"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let parsed = dockerlet_pod::labels::parse(&labels).expect("pod labels");
    let mut c = parsed.observed(
        dockerlet_messages::ContainerId(id.into()),
        dockerlet_messages::runtime::RuntimeState::Running,
        String::new(),
    );
    c.role = role;
    c
}

/// Sidecars and ephemeral containers have their entries beside the app containers (the
/// summary and the cAdvisor series); the sandbox has none.
#[test]
fn every_running_container_but_the_sandbox_has_an_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let cg = tmp.path().join("cgroup");
    for id in ["sb", "app", "side", "dbg"] {
        v1_container(&cg, id, 1_000, 100_000, 80_000_000, 1);
    }
    let mut c = Collector::new(Paths {
        node_name: "n1".into(),
        root_dir: tmp.path().join("root"),
        docker_root: None,
        layout: Some(CgroupLayout::v1_at(&cg, &["cpuacct", "memory", "pids"])),
        system: SystemCgroupNames::default(),
        engine_cgroup_driver: CgroupDriver::Cgroupfs,
    });
    let running = vec![
        observed("sb", "POD", ContainerRole::Sandbox),
        observed("app", "app", ContainerRole::App),
        observed("side", "side", ContainerRole::Init),
        observed("dbg", "dbg", ContainerRole::Ephemeral),
    ];
    let collected = c.collect(&running);
    let mut names: Vec<&str> = collected.summary.pods[0]
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["app", "dbg", "side"]);
    let mut refs: Vec<&str> = collected.containers.iter().map(|c| c.container.as_str()).collect();
    refs.sort();
    assert_eq!(refs, ["app", "dbg", "side"]);
    // The sandbox has cAdvisor's series only, its reading kept for SANDBOX_REFRESH.
    let sandbox = |c: &Collected| {
        let (r, stats) = &c.sandboxes[0];
        (
            r.container.clone(),
            r.id.clone(),
            stats.memory.as_ref().and_then(|m| m.usage_bytes),
        )
    };
    assert_eq!(collected.sandboxes.len(), 1);
    assert_eq!(
        sandbox(&collected),
        ("POD".to_string(), "sb".to_string(), Some(100_000))
    );
    v1_container(&cg, "sb", 2_000, 200_000, 80_000_000, 1);
    assert_eq!(
        sandbox(&c.collect(&running)).2,
        Some(100_000),
        "read again only after 30 s"
    );
    // Gone with its pod.
    assert!(c.collect(&[]).sandboxes.is_empty());
    assert!(c.sandboxes.is_empty());
}

/// `--kubelet-cgroups`, `--runtime-cgroups` and `--system-cgroups` name the `kubelet`,
/// `runtime` and `misc` system containers' cgroups (`misc` only when given), each then a
/// cAdvisor series of its own.
#[test]
fn configured_system_cgroups_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let cg = tmp.path().join("cgroup");
    let system = |name: &str, usage: u64| {
        write(&cg.join("cpuacct").join(name), &[("cpuacct.usage", "5000".into())]);
        write(
            &cg.join("memory").join(name),
            &[
                ("memory.usage_in_bytes", usage.to_string()),
                ("memory.limit_in_bytes", u64::MAX.to_string()),
                ("memory.stat", "total_rss 10\ntotal_inactive_file 0\n".into()),
            ],
        );
    };
    system("kubelet", 1000);
    system("docker-daemon", 2000);
    system("system", 3000);
    let mut c = Collector::new(Paths {
        node_name: "n1".into(),
        root_dir: tmp.path().join("root"),
        docker_root: None,
        layout: Some(CgroupLayout::v1_at(&cg, &["cpuacct", "memory"])),
        system: SystemCgroupNames {
            kubelet: Some("/kubelet".into()),
            runtime: Some("/docker-daemon".into()),
            misc: Some("/system".into()),
        },
        engine_cgroup_driver: CgroupDriver::Cgroupfs,
    });
    let collected = c.collect(&[]);
    let usage = |name: &str| {
        let sc = collected.summary.node.system_containers.iter().find(|s| s.name == name);
        sc.and_then(|s| s.memory.as_ref()).and_then(|m| m.usage_bytes)
    };
    assert_eq!(usage("kubelet"), Some(1000));
    assert_eq!(usage("runtime"), Some(2000));
    assert_eq!(usage("misc"), Some(3000));
    let other: Vec<(&str, &str)> = collected
        .other_cgroups
        .iter()
        .map(|c| (c.stats.name.as_str(), c.id.as_str()))
        .collect();
    assert_eq!(
        other,
        [
            ("kubelet", "/kubelet"),
            ("runtime", "/docker-daemon"),
            ("misc", "/system")
        ]
    );
    // Without --system-cgroups there is no misc.
    let mut c = Collector::new(Paths {
        system: SystemCgroupNames::default(),
        ..c.paths.clone()
    });
    let collected = c.collect(&[]);
    assert!(!collected
        .summary
        .node
        .system_containers
        .iter()
        .any(|s| s.name == "misc"));
}

/// Block IO is read for the root cgroup and each container, kept for [`BLOCK_IO_REFRESH`]
/// (a second pass serves the first reading), and dropped with the container.
#[test]
fn block_io_of_the_root_and_the_containers_is_read_slowly() {
    let tmp = tempfile::tempdir().unwrap();
    let cg = tmp.path().join("cgroup");
    for id in ["sb", "app"] {
        v1_container(&cg, id, 1_000, 100_000, 80_000_000, 1);
    }
    let blkio = |dir: &Path, read: u64| {
        write(
            dir,
            &[
                (
                    "blkio.throttle.io_service_bytes_recursive",
                    format!("254:0 Read {read}\n254:0 Write 0\n254:0 Total {read}\nTotal {read}\n"),
                ),
                (
                    "blkio.throttle.io_serviced_recursive",
                    "254:0 Read 1\n254:0 Write 0\nTotal 1\n".into(),
                ),
            ],
        )
    };
    blkio(&cg.join("blkio"), 1 << 20);
    blkio(&cg.join("blkio/docker/app"), 4096);
    let mut c = Collector::new(Paths {
        node_name: "n1".into(),
        root_dir: tmp.path().join("root"),
        docker_root: None,
        layout: Some(CgroupLayout::v1_at(&cg, &["blkio", "cpuacct", "memory", "pids"])),
        system: SystemCgroupNames::default(),
        engine_cgroup_driver: CgroupDriver::Cgroupfs,
    });
    let running = vec![
        observed("sb", "POD", ContainerRole::Sandbox),
        observed("app", "app", ContainerRole::App),
    ];
    let reads = |io: &[CgroupBlockIo]| -> Vec<(String, u64, u64)> {
        io.iter()
            .flat_map(|c| c.devices.iter().map(|d| (c.cgroup.clone(), d.read_bytes, d.reads)))
            .collect()
    };
    let first = c.collect(&running).block_io;
    assert_eq!(
        reads(&first),
        [("/".to_string(), 1 << 20, 1), ("/docker/app".to_string(), 4096, 1)]
    );
    blkio(&cg.join("blkio/docker/app"), 8192);
    let second = c.collect(&running).block_io;
    assert_eq!(second, first, "read again only after {BLOCK_IO_REFRESH:?}");
    let third = c.collect(&running[..1]).block_io;
    assert_eq!(reads(&third), [("/".to_string(), 1 << 20, 1)]);
    assert_eq!(c.block_io.len(), 1, "the container's reading is dropped");
}

/// Over a recorded v1 tree with the pod under /docker: the container's own figures, the
/// pod's as the sum with the sandbox, its memory limit the app's, usageNanoCores from the
/// second pass; a container whose cgroup vanished is left out of the next pass, not zeroed.
#[test]
fn a_pod_under_docker_is_the_sum_of_its_containers() {
    let tmp = tempfile::tempdir().unwrap();
    let cg = tmp.path().join("cgroup");
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("pods/u1/volumes/kubernetes.io~empty-dir/scratch")).unwrap();
    std::fs::write(root.join("pods/u1/volumes/kubernetes.io~empty-dir/scratch/f"), "hello").unwrap();
    v1_container(&cg, "sb", 1_000, 100_000, 9223372036854771712, 1);
    v1_container(&cg, "app", 2_000, 200_000, 80_000_000, 2);
    let mut c = Collector::new(Paths {
        node_name: "n1".into(),
        root_dir: root.clone(),
        docker_root: None,
        layout: Some(CgroupLayout::v1_at(&cg, &["cpuacct", "memory", "pids"])),
        system: SystemCgroupNames::default(),
        engine_cgroup_driver: CgroupDriver::Cgroupfs,
    });
    let running = vec![
        observed("sb", "POD", ContainerRole::Sandbox),
        observed("app", "app", ContainerRole::App),
    ];
    let first = c.collect(&running).summary;
    let pod = &first.pods[0];
    assert_eq!(
        (pod.pod_ref.name.as_str(), pod.pod_ref.namespace.as_str()),
        ("web", "ns")
    );
    let app = &pod.containers[0];
    assert_eq!(app.name, "app");
    assert_eq!(app.cpu.as_ref().unwrap().usage_core_nano_seconds, Some(2_000));
    assert_eq!(app.cpu.as_ref().unwrap().usage_nano_cores, None, "no previous reading");
    let m = app.memory.as_ref().unwrap();
    assert_eq!(
        (m.usage_bytes, m.working_set_bytes, m.available_bytes),
        (Some(200_000), Some(199_000), Some(79_801_000))
    );
    assert_eq!(pod.cpu.as_ref().unwrap().usage_core_nano_seconds, Some(3_000));
    let pm = pod.memory.as_ref().unwrap();
    assert_eq!(
        (pm.usage_bytes, pm.available_bytes),
        (Some(300_000), Some(80_000_000 - 298_000))
    );
    assert_eq!(pod.process_stats.as_ref().unwrap().process_count, Some(3));
    assert_eq!(pod.volume_stats.len(), 1);
    assert_eq!(pod.volume_stats[0].name, "scratch");
    assert!(pod.volume_stats[0].fs.used_bytes.unwrap() > 0);
    let pods = first.node.system_containers.iter().find(|s| s.name == "pods").unwrap();
    assert_eq!(pods.cpu.as_ref().unwrap().usage_core_nano_seconds, Some(3_000));
    assert!(
        pods.memory.as_ref().unwrap().available_bytes.is_some(),
        "bounded by the node"
    );

    std::thread::sleep(Duration::from_millis(20));
    v1_container(&cg, "app", 2_000 + 10_000_000, 200_000, 80_000_000, 2);
    let second = c.collect(&running).summary;
    let rate = second.pods[0].containers[0]
        .cpu
        .as_ref()
        .unwrap()
        .usage_nano_cores
        .unwrap();
    assert!(rate > 0 && rate <= 10_000_000 * 1_000_000_000 / 20_000_000, "{rate}");

    std::fs::remove_dir_all(cg.join("memory/docker/app")).unwrap();
    let third = c.collect(&running).summary;
    let app = &third.pods[0].containers[0];
    assert!(
        app.cpu.is_none() && app.memory.is_none(),
        "a gone cgroup is left out: {app:?}"
    );
    assert_eq!(
        third.pods[0].cpu.as_ref().unwrap().usage_core_nano_seconds,
        Some(1_000),
        "the sandbox alone"
    );
}

/// Cgroup paths: Docker's default parent, the pod cgroup only when all share it, kubepods.
#[test]
fn cgroups_of_containers_and_pods() {
    let labels = [
        (dockerlet_pod::labels::POD_UID, "u1"),
        (dockerlet_pod::labels::CONTAINER_NAME, "app"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let parsed = dockerlet_pod::labels::parse(&labels).expect("pod labels");
    let mut c = parsed.observed(
        dockerlet_messages::ContainerId("c1".into()),
        dockerlet_messages::runtime::RuntimeState::Running,
        String::new(),
    );
    assert_eq!(container_cgroup(&c, CgroupDriver::Cgroupfs), "/docker/c1");
    assert_eq!(
        container_cgroup(&c, CgroupDriver::Systemd),
        "/system.slice/docker-c1.scope"
    );
    c.cgroup_parent = "/kubepods/burstable/podu1".into();
    assert_eq!(
        container_cgroup(&c, CgroupDriver::Cgroupfs),
        "/kubepods/burstable/podu1/c1"
    );
    let mut d = c.clone();
    assert_eq!(pod_cgroup_of("u1", &[&c, &d]), Some("/kubepods/burstable/podu1".into()));
    assert_eq!(kubepods_of(&c.cgroup_parent).as_deref(), Some("/kubepods"));
    d.cgroup_parent = String::new();
    assert_eq!(pod_cgroup_of("u1", &[&c, &d]), None);
    // A systemd slice parent: its path, the container's scope, the kubepods slice.
    c.cgroup_parent = "n1-kubepods-burstable-podu_1.slice".into();
    let d = c.clone();
    assert_eq!(
        container_cgroup(&c, CgroupDriver::Systemd),
        "/n1.slice/n1-kubepods.slice/n1-kubepods-burstable.slice/n1-kubepods-burstable-podu_1.slice/docker-c1.scope"
    );
    assert_eq!(
        pod_cgroup_of("u-1", &[&c, &d]).as_deref(),
        Some("/n1.slice/n1-kubepods.slice/n1-kubepods-burstable.slice/n1-kubepods-burstable-podu_1.slice")
    );
    assert_eq!(
        kubepods_of(&c.cgroup_parent).as_deref(),
        Some("/n1.slice/n1-kubepods.slice")
    );
    assert_eq!(pod_cgroup_of("u2", &[&c]), None);
    assert_eq!(kubepods_of("/kubepods/burstable/podu1"), Some("/kubepods".into()));
    assert_eq!(kubepods_of("/root/kubepods/podu1"), Some("/root/kubepods".into()));
    assert_eq!(kubepods_of("/docker"), None);
    assert_eq!(kubepods_of("/kubepodsx/p"), None);
}
