//! `/metrics` and `/metrics/probes` on the read-only port: kubelet's families with this node's
//! numbers, valid for `promtool check metrics`.

use dockerlet_integration_tests::{promtool_check, wait_until, Agent, ManifestDir, PodExt, CHANGE_TIMEOUT};

/// The value of the series `series` (name and labels, exactly as exposed), if present.
fn value(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

fn scrape(agent: &Agent, path: &str) -> String {
    let url = format!("http://127.0.0.1:{}{path}", agent.ports().read_only);
    let (status, body) = agent.get(&url).unwrap();
    assert_eq!(status, 200, "GET {url}: {body}");
    body
}

/// A pod with a readiness probe: `/metrics` shows it running (pods, containers, start
/// histogram, started containers, runtime calls), PLEG relists advancing, the scrape's own
/// request counted and the process metrics; `/metrics/probes` counts its probe runs; promtool
/// accepts both.
#[test]
fn metrics_and_probe_metrics_describe_the_running_pod() {
    let manifests = ManifestDir::new();
    manifests.write(
        "web.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    readinessProbe:
      exec:
        command: ["true"]
      periodSeconds: 1
"#,
    );
    let agent = Agent::start("metrics", manifests.path(), &[]);
    let pod = agent.wait_for_running("web");
    let name = agent.pod_name("web");
    let probe_series = format!(
        "prober_probe_total{{probe_type=\"Readiness\",result=\"successful\",container=\"c\",pod=\"{name}\",namespace=\"default\",pod_uid=\"{}\"}}",
        pod.uid()
    );

    // The gauges follow the PLEG's relists: wait for one after the pod ran.
    let first = wait_until("/metrics to show the running pod", CHANGE_TIMEOUT, || {
        let body = scrape(&agent, "/metrics");
        let running = (
            value(&body, "kubelet_running_pods"),
            value(&body, "kubelet_running_containers{container_state=\"running\"}"),
        );
        if running == (Some(1.0), Some(1.0)) {
            Ok(body)
        } else {
            Err(format!("running pods, containers: {running:?}"))
        }
    });
    let node = format!("kubelet_node_name{{node=\"{}\"}}", agent.node());
    assert_eq!(value(&first, &node), Some(1.0), "{first}");
    assert_eq!(
        value(&first, "kubelet_pod_start_duration_seconds_count"),
        Some(1.0),
        "{first}"
    );
    assert_eq!(
        value(&first, "kubelet_started_containers_total{container_type=\"container\"}"),
        Some(1.0),
        "{first}"
    );
    assert_eq!(
        value(
            &first,
            "kubelet_started_containers_total{container_type=\"podsandbox\"}"
        ),
        Some(1.0),
        "{first}"
    );
    assert_eq!(value(&first, "kubelet_started_pods_total"), Some(1.0), "{first}");
    // Sandbox and app container.
    let creates = value(
        &first,
        "kubelet_runtime_operations_total{operation_type=\"create_container\"}",
    );
    assert!(creates.is_some_and(|n| n >= 2.0), "creates {creates:?}\n{first}");
    assert!(
        value(
            &first,
            "kubelet_runtime_operations_duration_seconds_count{operation_type=\"list_containers\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "{first}"
    );
    assert!(
        value(
            &first,
            "kubelet_pod_worker_duration_seconds_count{operation=\"create\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "{first}"
    );
    assert!(
        value(&first, "process_resident_memory_bytes").is_some_and(|b| b > 1e6),
        "{first}"
    );
    assert!(
        value(&first, "process_start_time_seconds").is_some_and(|t| t > 1e9),
        "{first}"
    );
    assert!(first.contains("kubernetes_build_info{"), "{first}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let seen = value(&first, "kubelet_pleg_last_seen_seconds").unwrap_or_default();
    assert!((now - seen).abs() < 10.0, "PLEG last seen {seen}, now {now}");

    // Relists (every 10 s while Docker's events flow) and probe runs go on; the earlier scrapes
    // were counted.
    let relists = |b: &str| value(b, "kubelet_pleg_relist_duration_seconds_count").unwrap_or_default();
    let probes_before = value(&scrape(&agent, "/metrics/probes"), &probe_series).unwrap_or_default();
    let second = wait_until("the PLEG to relist again", CHANGE_TIMEOUT, || {
        let body = scrape(&agent, "/metrics");
        if relists(&body) > relists(&first) {
            Ok(body)
        } else {
            Err(format!("relists did not advance:\n{body}"))
        }
    });
    assert!(
        value(&second, "kubelet_pleg_relist_interval_seconds_count").is_some_and(|n| n >= 1.0),
        "{second}"
    );
    let scrapes =
        "kubelet_http_requests_total{method=\"GET\",path=\"metrics\",server_type=\"readonly\",long_running=\"false\"}";
    assert!(value(&second, scrapes).is_some_and(|n| n >= 2.0), "{second}");
    let probes = scrape(&agent, "/metrics/probes");
    let probes_after = value(&probes, &probe_series).unwrap_or_default();
    assert!(
        probes_after >= 1.0 && probes_after > probes_before,
        "probe runs {probes_before} then {probes_after}:\n{probes}"
    );
    let duration = format!(
        "prober_probe_duration_seconds_count{{probe_type=\"Readiness\",container=\"c\",pod=\"{name}\",namespace=\"default\"}}"
    );
    assert!(value(&probes, &duration).is_some_and(|n| n >= probes_after), "{probes}");

    promtool_check("/metrics", &second);
    promtool_check("/metrics/probes", &probes);
}
