//! `/metrics/resource` and `/metrics/cadvisor` on the read-only port: parsed as a Prometheus
//! client parses them, they agree with `/stats/summary` taken from the same housekeeping
//! (values and sample timestamps), carry kubelet's and cAdvisor's names and labels, and pass
//! `promtool check metrics`.

use std::collections::HashMap;
use std::time::Duration;

use dockerlet_integration_tests::docker::node_containers;
use dockerlet_integration_tests::{promtool_check, wait_until, Agent, ManifestDir, CHANGE_TIMEOUT};
use prometheus_parse::{Sample, Scrape, Value};
use serde_json::Value as Json;

const POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: busy
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: worker
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; trap 'exit 0' TERM; while true; do sleep 1; done"]
    resources:
      limits:
        memory: 64Mi
        cpu: 500m
  - name: idle
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
"#;

fn scrape(agent: &Agent, path: &str) -> String {
    let url = format!("http://127.0.0.1:{}{path}", agent.ports().read_only);
    let (status, body) = agent.get(&url).unwrap();
    assert_eq!(status, 200, "GET {url}: {body}");
    body
}

fn parse(body: &str) -> Vec<Sample> {
    Scrape::parse(body.lines().map(|l| Ok(l.to_string())))
        .unwrap_or_else(|e| panic!("not the Prometheus text format: {e}\n{body}"))
        .samples
}

fn number(v: &Value) -> f64 {
    match v {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        other => panic!("not a plain value: {other:?}"),
    }
}

/// The one sample of `metric` whose labels include `labels`.
fn find<'a>(samples: &'a [Sample], metric: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    let mut found = samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)));
    let first = found.next();
    assert!(found.next().is_none(), "{metric} {labels:?}: more than one series");
    first
}

fn millis(time: &Json) -> i64 {
    let t: jiff::Timestamp = time.as_str().expect("an RFC 3339 time").parse().expect("RFC 3339");
    t.as_millisecond()
}

/// A sample's millisecond timestamp is the summary's time, which the JSON gives to the second
/// (`metav1.Time`, as kubelet's).
fn same_time(sample: &Sample, time: &Json) -> bool {
    sample.timestamp.timestamp_millis().div_euclid(1000) == millis(time) / 1000
}

fn nanos_as_seconds(v: &Json) -> f64 {
    v.as_u64().expect("a count") as f64 / 1e9
}

/// Equal up to float formatting.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn resource_and_cadvisor_metrics_agree_with_the_summary() {
    let manifests = ManifestDir::new();
    manifests.write("busy.yaml", POD);
    let agent = Agent::start("stats-metrics", manifests.path(), &["--housekeeping-interval", "1s"]);
    agent.wait_for_running("busy");
    let pod_name = agent.pod_name("busy");

    // A summary showing both containers with CPU figures.
    wait_until("the summary to show the pod's containers", CHANGE_TIMEOUT, || {
        let summary: Json = serde_json::from_str(&scrape(&agent, "/stats/summary")).unwrap();
        let pod = summary["pods"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["podRef"]["name"] == pod_name.as_str()))
            .cloned()
            .ok_or("no pod yet")?;
        let with_cpu = pod["containers"].as_array().map_or(0, |c| {
            c.iter().filter(|c| c["cpu"]["usageCoreNanoSeconds"].is_u64()).count()
        });
        if with_cpu == 2 {
            Ok(())
        } else {
            Err(format!("{with_cpu} containers with CPU: {pod}"))
        }
    });

    // The metrics and a summary from the same housekeeping: the summary before and after the
    // scrape is the same.
    let (summary, resource, cadvisor) = wait_until("one housekeeping behind all three", CHANGE_TIMEOUT, || {
        let before = scrape(&agent, "/stats/summary");
        let resource = scrape(&agent, "/metrics/resource");
        let cadvisor = scrape(&agent, "/metrics/cadvisor");
        let after = scrape(&agent, "/stats/summary");
        if before == after {
            Ok((serde_json::from_str::<Json>(&before).unwrap(), resource, cadvisor))
        } else {
            Err("a housekeeping ran in between".to_string())
        }
    });
    promtool_check("/metrics/resource", &resource);
    promtool_check("/metrics/cadvisor", &cadvisor);

    let res = parse(&resource);
    let node = &summary["node"];
    let node_cpu = find(&res, "node_cpu_usage_seconds_total", &[]).expect("node CPU");
    assert!(close(
        number(&node_cpu.value),
        nanos_as_seconds(&node["cpu"]["usageCoreNanoSeconds"])
    ));
    assert!(
        same_time(node_cpu, &node["cpu"]["time"]),
        "{} at {}",
        node_cpu.timestamp,
        &node["cpu"]["time"]
    );
    let node_mem = find(&res, "node_memory_working_set_bytes", &[]).expect("node memory");
    assert_eq!(
        number(&node_mem.value),
        node["memory"]["workingSetBytes"].as_f64().unwrap()
    );
    assert_eq!(
        number(
            &find(&res, "resource_scrape_error", &[])
                .expect("scrape error gauge")
                .value
        ),
        0.0
    );

    let pod = summary["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["podRef"]["name"] == pod_name.as_str())
        .unwrap();
    let ns = pod["podRef"]["namespace"].as_str().unwrap();
    let pod_labels = [("pod", pod_name.as_str()), ("namespace", ns)];
    let pod_cpu = find(&res, "pod_cpu_usage_seconds_total", &pod_labels).expect("pod CPU");
    assert!(close(
        number(&pod_cpu.value),
        nanos_as_seconds(&pod["cpu"]["usageCoreNanoSeconds"])
    ));
    assert!(
        same_time(pod_cpu, &pod["cpu"]["time"]),
        "{} at {}",
        pod_cpu.timestamp,
        &pod["cpu"]["time"]
    );
    let pod_mem = find(&res, "pod_memory_working_set_bytes", &pod_labels).expect("pod memory");
    assert_eq!(
        number(&pod_mem.value),
        pod["memory"]["workingSetBytes"].as_f64().unwrap()
    );

    let docker: HashMap<String, _> = node_containers(agent.node())
        .into_iter()
        .filter(|c| !c.is_sandbox())
        .map(|c| (c.kube_name().to_string(), c))
        .collect();
    let cad = parse(&cadvisor);
    for c in pod["containers"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let labels = [("container", name), ("pod", pod_name.as_str()), ("namespace", ns)];
        let cpu = find(&res, "container_cpu_usage_seconds_total", &labels).expect("container CPU");
        assert!(close(
            number(&cpu.value),
            nanos_as_seconds(&c["cpu"]["usageCoreNanoSeconds"])
        ));
        assert!(
            same_time(cpu, &c["cpu"]["time"]),
            "{} at {}",
            cpu.timestamp,
            &c["cpu"]["time"]
        );
        let mem = find(&res, "container_memory_working_set_bytes", &labels).expect("container memory");
        assert_eq!(number(&mem.value), c["memory"]["workingSetBytes"].as_f64().unwrap());
        assert!(
            same_time(mem, &c["memory"]["time"]),
            "{} at {}",
            mem.timestamp,
            &c["memory"]["time"]
        );
        let start = find(&res, "container_start_time_seconds", &labels).expect("start time");
        assert!(close(number(&start.value), millis(&c["startTime"]) as f64 / 1000.0));

        // cAdvisor's labels: the Docker name, the image, the cgroup ending in the container's ID.
        let container = docker.get(name).unwrap_or_else(|| panic!("no Docker container {name}"));
        let cpu = find(
            &cad,
            "container_cpu_usage_seconds_total",
            &[("container", name), ("pod", pod_name.as_str()), ("cpu", "total")],
        )
        .unwrap_or_else(|| panic!("cAdvisor CPU of {name}:\n{cadvisor}"));
        assert_eq!(cpu.labels.get("name"), Some(container.short_name()));
        assert_eq!(cpu.labels.get("image"), Some("dockerlet.local/busybox:1"));
        let id = cpu.labels.get("id").unwrap_or_default();
        assert!(id.ends_with(&format!("/{}", container.id)), "id {id}");
        assert!(close(
            number(&cpu.value),
            nanos_as_seconds(&c["cpu"]["usageCoreNanoSeconds"])
        ));
        // The user/system split (cpuacct.stat on v1: sampled at each clock tick, where the total
        // is exact): together about the total, for the same reading.
        let part = |metric: &str| {
            let labels = [("container", name), ("pod", pod_name.as_str())];
            find(&cad, metric, &labels).unwrap_or_else(|| panic!("{metric} of {name}:\n{cadvisor}"))
        };
        let (user, system) = (
            part("container_cpu_user_seconds_total"),
            part("container_cpu_system_seconds_total"),
        );
        assert_eq!((user.timestamp, system.timestamp), (cpu.timestamp, cpu.timestamp));
        let split = number(&user.value) + number(&system.value);
        assert!(
            (split - number(&cpu.value)).abs() <= 0.1 + 0.2 * number(&cpu.value),
            "user + system {split} against {} for {name}",
            number(&cpu.value)
        );
    }
    let limit = find(
        &cad,
        "container_spec_memory_limit_bytes",
        &[("container", "worker"), ("pod", pod_name.as_str())],
    )
    .expect("the worker's memory limit");
    assert_eq!(number(&limit.value), (64 << 20) as f64);
    assert!(
        find(
            &cad,
            "container_spec_memory_limit_bytes",
            &[("container", "idle"), ("pod", pod_name.as_str())]
        )
        .is_none(),
        "no limit, no series"
    );
    // Its memory + swap limit is the memory limit (no swap, as kubelet's NoSwap), where the
    // kernel accounts swap (cgroup v1 `memory.memsw.*`, as on this project's CI machine).
    if std::path::Path::new("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists() {
        let swap_limit = find(
            &cad,
            "container_spec_memory_swap_limit_bytes",
            &[("container", "worker"), ("pod", pod_name.as_str())],
        )
        .expect("the worker's swap limit");
        assert_eq!(number(&swap_limit.value), (64 << 20) as f64);
    } else {
        eprintln!("no cgroup v1 swap accounting here: the swap limit series is not checked");
    }
    // The worker's CPU quota: CFS periods elapse (and the idle container, with none, has no
    // such series); page cache from the same reading as the memory figures.
    let worker = [("container", "worker"), ("pod", pod_name.as_str())];
    let periods = find(&cad, "container_cpu_cfs_periods_total", &worker).expect("the worker's CFS periods");
    assert!(number(&periods.value) >= 1.0, "{cadvisor}");
    let throttled = find(&cad, "container_cpu_cfs_throttled_periods_total", &worker).expect("throttled periods");
    assert!(number(&throttled.value) <= number(&periods.value));
    let idle = [("container", "idle"), ("pod", pod_name.as_str())];
    assert!(find(&cad, "container_cpu_cfs_periods_total", &idle).is_none());
    let cache = find(&cad, "container_memory_cache", &worker).expect("the worker's page cache");
    let usage = find(&cad, "container_memory_usage_bytes", &worker).expect("the worker's memory");
    assert_eq!(cache.timestamp, usage.timestamp);
    assert!(number(&cache.value) <= number(&usage.value));
    // The `pods` system container on its cgroup, `<cgroup-root>/kubepods`, with the summary's
    // figures; the root only once.
    let kubepods = format!("{}/kubepods", agent.cgroup_root().trim_end_matches('/'));
    let pods = node["systemContainers"]
        .as_array()
        .and_then(|s| s.iter().find(|c| c["name"] == "pods"))
        .expect("the pods system container");
    let ws = find(&cad, "container_memory_working_set_bytes", &[("id", kubepods.as_str())])
        .unwrap_or_else(|| panic!("no series of {kubepods}:\n{cadvisor}"));
    assert_eq!(number(&ws.value), pods["memory"]["workingSetBytes"].as_f64().unwrap());
    assert!(find(&cad, "container_memory_working_set_bytes", &[("id", "/")]).is_some());
    // The pod's sandbox, as cAdvisor shows every container (cri-dockerd's `POD`), on its own
    // cgroup under the pod's.
    let pause = find(
        &cad,
        "container_memory_usage_bytes",
        &[("container", "POD"), ("pod", pod_name.as_str())],
    )
    .unwrap_or_else(|| panic!("no sandbox series:\n{cadvisor}"));
    assert!(number(&pause.value) > 0.0, "{cadvisor}");
    // The QoS cgroups, as cAdvisor shows every cgroup it watches.
    for qos in ["burstable", "besteffort"] {
        let id = format!("{kubepods}/{qos}");
        assert!(
            find(&cad, "container_memory_usage_bytes", &[("id", id.as_str())]).is_some(),
            "no series of {id}:\n{cadvisor}"
        );
    }
    let cores = find(&cad, "machine_cpu_cores", &[]).expect("machine_cpu_cores");
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    assert_eq!(number(&cores.value), nproc as f64);
    let rx = find(
        &cad,
        "container_network_receive_bytes_total",
        &[("container", ""), ("pod", pod_name.as_str()), ("interface", "eth0")],
    );
    assert!(rx.is_some(), "the pod's network:\n{cadvisor}");
}

const WRITER: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: writer
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: writer
    image: dockerlet.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do dd if=/dev/zero of=/tmp/io bs=4k count=16 oflag=direct 2>/dev/null; sleep 1; done"]
"#;

/// The whole disk `major:minor` under the filesystem holding `path` (a partition's parent).
fn disk_of(path: &str) -> String {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).unwrap_or_else(|e| panic!("{path}: {e}")).dev();
    let number = format!("{}:{}", rustix::fs::major(dev), rustix::fs::minor(dev));
    let sys = std::path::Path::new("/sys/dev/block").join(&number);
    if sys.join("partition").exists() {
        let parent = sys.canonicalize().unwrap().parent().unwrap().join("dev");
        std::fs::read_to_string(parent).unwrap().trim().to_string()
    } else {
        number
    }
}

/// cAdvisor's block IO series: a container writing with O_DIRECT shows its bytes and writes on
/// the disk under Docker's root, with the device's node as `device`, on the container and on
/// its pod cgroup.
#[test]
fn block_io_of_a_writing_container_is_on_metrics_cadvisor() {
    let manifests = ManifestDir::new();
    manifests.write("writer.yaml", WRITER);
    let agent = Agent::start("stats-blkio", manifests.path(), &["--housekeeping-interval", "1s"]);
    agent.wait_for_running("writer");
    let pod_name = agent.pod_name("writer");
    let id = wait_until("the writer's cAdvisor series", CHANGE_TIMEOUT, || {
        let cad = parse(&scrape(&agent, "/metrics/cadvisor"));
        let labels = [("container", "writer"), ("pod", pod_name.as_str()), ("cpu", "total")];
        find(&cad, "container_cpu_usage_seconds_total", &labels)
            .and_then(|s| s.labels.get("id").map(str::to_string))
            .ok_or_else(|| "no series yet".to_string())
    });
    let cgroups_v1 = std::path::Path::new("/sys/fs/cgroup/blkio").is_dir();
    if cgroups_v1 {
        // Linux 6.10+ counts v1 blkio only on a queue with throttling set up (a limit set
        // anywhere on the disk, once): a limit no IO can reach, on the writer's own cgroup.
        let root = std::process::Command::new("docker")
            .args(["info", "--format", "{{.DockerRootDir}}"])
            .output()
            .expect("docker info");
        let root = String::from_utf8_lossy(&root.stdout).trim().to_string();
        let limit = format!("{} {}\n", disk_of(&root), 1u64 << 40);
        let file = format!("/sys/fs/cgroup/blkio{id}/blkio.throttle.write_bps_device");
        if let Err(e) = std::fs::write(&file, &limit) {
            panic!("cannot turn on v1 block IO accounting ({limit:?} into {file}: {e}); this test needs it");
        }
    }
    let text = wait_until("the writer's block IO", Duration::from_secs(90), || {
        let text = scrape(&agent, "/metrics/cadvisor");
        let cad = parse(&text);
        let written = |container: &str| {
            let labels = [("container", container), ("pod", pod_name.as_str())];
            find(&cad, "container_fs_writes_bytes_total", &labels).map(|s| number(&s.value))
        };
        // The container's and its pod cgroup's (which counts its containers' IO).
        match (written("writer"), written("")) {
            (Some(c), Some(p)) if c >= 65536.0 && p >= 65536.0 => Ok(text),
            other => Err(format!("bytes written by the writer and its pod: {other:?}")),
        }
    });
    promtool_check("/metrics/cadvisor", &text);
    let cad = parse(&text);
    let labels = [("container", "writer"), ("pod", pod_name.as_str())];
    let bytes = find(&cad, "container_fs_writes_bytes_total", &labels).unwrap();
    let device = bytes.labels.get("device").unwrap_or_default();
    assert!(device.starts_with("/dev/"), "device {device:?}");
    let writes = find(&cad, "container_fs_writes_total", &labels).expect("writes");
    assert!(number(&writes.value) >= 16.0, "16 direct writes of 4 KiB at least");
    assert_eq!(writes.timestamp, bytes.timestamp, "one reading");
    assert!(find(&cad, "container_fs_reads_bytes_total", &labels).is_some());
    let pod = find(
        &cad,
        "container_fs_writes_bytes_total",
        &[("container", ""), ("pod", pod_name.as_str())],
    )
    .unwrap();
    assert_eq!(pod.labels.get("device"), Some(device), "the same disk");
    assert!(pod
        .labels
        .get("id")
        .is_some_and(|pod_id| id.starts_with(pod_id) && id != pod_id));
}
