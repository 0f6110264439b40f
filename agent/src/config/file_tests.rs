//! Tests of the file's fields: unknown keys and values refused naming the file, zero values
//! meaning kubelet's defaults, `--config-dir` drop-ins, feature gates, a kubeadm file.

use super::*;
use clap::Parser;

fn cli(args: &[&str]) -> Cli {
    Cli::try_parse_from(std::iter::once("dockerlet").chain(args.iter().copied())).unwrap()
}

fn host() -> String {
    "n1".to_string()
}

/// Writes `text` as `config.yaml` in a new directory; the directory (kept alive) and the path.
fn config_file(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, text).unwrap();
    (dir, path.to_str().unwrap().to_string())
}

/// The error of building with `text` as the config file (and `args`).
fn refusal(text: &str, args: &[&str]) -> String {
    let (_dir, path) = config_file(text);
    let mut all = vec!["--config", path.as_str()];
    all.extend_from_slice(args);
    match build(&cli(&all), host) {
        Ok(_) => panic!("{text:?} was accepted"),
        Err(e) => e.to_string(),
    }
}

fn accepted(text: &str, args: &[&str]) -> AgentConfig {
    let (_dir, path) = config_file(text);
    let mut all = vec!["--config", path.as_str()];
    all.extend_from_slice(args);
    build(&cli(&all), host).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// A key that is no KubeletConfiguration field is refused naming the key, the file and the
/// nearest field; so are unknown keys under `authentication`, `authorization`,
/// `crashLoopBackOff` and `logging`.
#[test]
fn unknown_keys_are_refused_naming_key_and_file() {
    let err = refusal("staticPodPth: /etc/kubernetes/manifests\n", &[]);
    assert!(err.contains("config.yaml"), "{err}");
    assert!(
        err.contains(
            r#"staticPodPth: unknown field, not a KubeletConfiguration v1beta1 setting; did you mean "staticPodPath"?"#
        ),
        "{err}"
    );
    let err = refusal("fooBar: 1\n", &[]);
    assert!(
        err.contains("fooBar: unknown field") && !err.contains("did you mean"),
        "{err}"
    );
    for (text, key) in [
        ("authentication:\n  anonymus:\n    enabled: true\n", "anonymus"),
        ("authentication:\n  webhook:\n    enabeld: true\n", "enabeld"),
        ("authentication:\n  x509:\n    clientCaFile: /ca\n", "clientCaFile"),
        ("authorization:\n  mod: AlwaysAllow\n", "mod"),
        ("authorization:\n  webhook:\n    cacheTTL: 1s\n", "cacheTTL"),
    ] {
        let err = refusal(text, &[]);
        assert!(err.contains("config.yaml") && err.contains(key), "{text}: {err}");
        assert!(err.contains("unknown field"), "{text}: {err}");
    }
    let err = refusal("crashLoopBackOff:\n  maxContainerRestartPerod: 10s\n", &[]);
    assert!(
        err.contains(r#"crashLoopBackOff.maxContainerRestartPerod: unknown field"#)
            && err.contains(r#"did you mean "maxContainerRestartPeriod"?"#),
        "{err}"
    );
    let err = refusal("logging:\n  formatt: json\n", &[]);
    assert!(err.contains("logging.formatt: unknown field"), "{err}");
}

/// A field dockerlet does not implement is accepted at kubelet's default (or its zero value)
/// and refused otherwise as "<field>: <value> is not supported by dockerlet (<why>)".
#[test]
fn unsupported_values_are_refused_defaults_accepted() {
    accepted(
        "containerLogMaxSize: 10Mi\nimageMinimumGCAge: 2m0s\nhairpinMode: promiscuous-bridge\nrotateCertificates: false\nmemorySwap: {}\nrunOnce: false\n",
        &[],
    );
    let err = refusal("containerLogMaxWorkers: 4\n", &[]);
    assert_eq!(
        err,
        format!(
            "config file {}: containerLogMaxWorkers: 4 is not supported by dockerlet (Docker rotates each container's log as it writes it (containerLogMaxSize, containerLogMaxFiles); there is no rotation worker to tune)",
            err.split(": ").next().unwrap().trim_start_matches("config file ")
        )
    );
    for (text, field) in [
        ("serverTLSBootstrap: true\n", "serverTLSBootstrap: true"),
        ("enableContentionProfiling: true\n", "enableContentionProfiling: true"),
        (
            "memorySwap:\n  swapBehavior: LimitedSwap\n",
            "memorySwap.swapBehavior: \"LimitedSwap\"",
        ),
        ("logging:\n  verbosity: 4\n", "logging.verbosity: 4"),
        ("volumeStatsAggPeriod: 2m\n", "volumeStatsAggPeriod: \"2m\""),
        ("cpuManagerPolicy: static\n", "cpuManagerPolicy: \"static\""),
        (
            "tracing:\n  endpoint: localhost:4317\n",
            "tracing: {\"endpoint\":\"localhost:4317\"}",
        ),
    ] {
        let err = refusal(text, &[]);
        assert!(
            err.contains("config.yaml") && err.contains(&format!("{field} is not supported by dockerlet (")),
            "{text}: {err}"
        );
    }
    // The fields other parts of the work honour are accepted as they are for now.
    accepted("maxPods: 20\nfailSwapOn: false\nshutdownGracePeriod: 30s\n", &[]);
}

/// Zero durations and counts mean kubelet's defaults, as its defaulting replaces them
/// (`defaults.go`): not 0, and not refused.
#[test]
fn zero_values_mean_kubelets_defaults() {
    let c = accepted(
        "fileCheckFrequency: 0s\nsyncFrequency: 0s\nhttpCheckFrequency: 0s\nnodeStatusUpdateFrequency: 0s\nnodeStatusReportFrequency: 0s\nevictionPressureTransitionPeriod: 0s\nstreamingConnectionIdleTimeout: 0s\nnodeLeaseDurationSeconds: 0\nport: 0\naddress: \"\"\nhealthzBindAddress: \"\"\ncontainerRuntimeEndpoint: \"\"\neventBurst: 0\nkubeAPIBurst: 0\ncgroupDriver: \"\"\npodLogsDir: \"\"\npodPidsLimit: -5\nauthorization:\n  mode: AlwaysAllow\n",
        &[],
    );
    assert_eq!(c.file_source.check_frequency, Duration::from_secs(20));
    assert_eq!(c.pod_sync.sync_frequency, Duration::from_secs(60));
    assert_eq!(c.registration.status_update_frequency, Duration::from_secs(10));
    assert_eq!(c.registration.status_report_frequency, Duration::from_secs(300));
    assert_eq!(c.eviction.pressure_transition_period, Duration::from_secs(300));
    assert_eq!(c.registration.lease_duration_seconds, 40);
    assert_eq!(c.servers.port, 10250);
    assert_eq!(c.pod_sync.runtime_endpoint, "unix:///var/run/docker.sock");
    assert_eq!(c.cluster.event_limits.burst, EventLimits::default().burst);
    assert_eq!(c.cluster.kube_api_limits.1, 100);
    // kubeAPIQPS is a pointer: 0 stays 0, which client-go takes as its 5 per second.
    assert_eq!(accepted("kubeAPIQPS: 0\n", &[]).cluster.kube_api_limits.0, 5.0);
    assert!(refusal("kubeAPIQPS: -1\n", &[]).contains("--kube-api-qps: -1 must not be a negative number"));
    assert_eq!(c.cgroups.driver, None);
    assert_eq!(c.cgroups.pod_pids_limit, -1);
    assert_eq!(c.pod_logs_dir, PathBuf::from("/var/log/pods"));
    let api = c.kubelet_api.expect("port 0 in the file is kubelet's 10250");
    assert_eq!(api.address.port(), 10250);
    assert_eq!(api.stream_idle_timeout, Some(STREAMING_CONNECTION_IDLE_TIMEOUT));
    assert_eq!(c.servers.healthz.unwrap().ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    // An explicit update frequency still sets the report frequency, as kubelet.
    let c = accepted("nodeStatusUpdateFrequency: 4s\nnodeStatusReportFrequency: 0s\n", &[]);
    assert_eq!(c.registration.status_report_frequency, Duration::from_secs(4));
    // With an API server, zero webhook TTLs are kubelet's 2 m, 5 m and 30 s.
    let api = accepted(
        "authentication:\n  webhook:\n    enabled: true\n    cacheTTL: 0s\nauthorization:\n  mode: Webhook\n  webhook:\n    cacheAuthorizedTTL: 0s\n    cacheUnauthorizedTTL: 0s\n",
        &["--kubeconfig", "/k"],
    )
    .kubelet_api
    .unwrap();
    assert_eq!(api.token_webhook, Some(Duration::from_secs(120)));
    assert_eq!(
        api.authorization,
        AuthorizationMode::Webhook {
            authorized_ttl: Duration::from_secs(300),
            unauthorized_ttl: Duration::from_secs(30)
        }
    );
}

/// `enableServer`, `enableDebuggingHandlers` and the finer switches reach the kubelet API.
#[test]
fn debugging_handlers_reach_the_kubelet_api() {
    let routes = |text: &str| accepted(text, &[]).kubelet_api.unwrap().debug_routes;
    assert_eq!(routes(""), DebugRoutes::default());
    assert!(!routes("enableDebuggingHandlers: false\n").debugging);
    let r = routes("enableSystemLogHandler: false\nenableProfilingHandler: false\nenableDebugFlagsHandler: false\n");
    assert!(r.debugging && !r.system_log && !r.profiling && !r.debug_flags);
    assert!(accepted("enableServer: false\n", &[]).kubelet_api.is_none());
    // The flags win.
    assert!(accepted("enableServer: false\n", &["--enable-server"])
        .kubelet_api
        .is_some());
    let c = accepted(
        "enableDebuggingHandlers: true\n",
        &["--enable-debugging-handlers=false"],
    );
    assert!(!c.kubelet_api.unwrap().debug_routes.debugging);
}

/// `--config-dir`: the `*.conf` drop-ins, in lexical order (subdirectories too), merged over
/// `--config` key by key (mappings merged, lists replaced, null undoing an earlier drop-in);
/// flags win; a bad drop-in is named in the error.
#[test]
fn config_dir_drop_ins_merge_in_lexical_order() {
    let (dir, main) = config_file(
        "syncFrequency: 30s\nclusterDNS: [10.0.0.1, 10.0.0.2]\nauthentication:\n  anonymous:\n    enabled: true\n  x509:\n    clientCAFile: /ca\nauthorization:\n  mode: AlwaysAllow\nfileCheckFrequency: 7s\n",
    );
    let drop_ins = dir.path().join("conf.d");
    std::fs::create_dir_all(drop_ins.join("20-sub")).unwrap();
    let head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
    let write = |name: &str, body: &str| std::fs::write(drop_ins.join(name), format!("{head}{body}")).unwrap();
    write(
        "10-a.conf",
        "syncFrequency: 40s\nclusterDNS: [10.0.0.9]\nfileCheckFrequency: 9s\nhttpCheckFrequency: 9s\n",
    );
    write("20-sub/x.conf", "syncFrequency: 50s\n");
    write(
        "30-b.conf",
        "authentication:\n  anonymous:\n    enabled: false\nfileCheckFrequency: null\nhttpCheckFrequency: null\n",
    );
    write("99-ignored.yaml", "syncFrequency: 99s\n");
    let d = drop_ins.to_str().unwrap();
    let c = build(&cli(&["--config", &main, "--config-dir", d]), host).unwrap();
    assert_eq!(
        c.pod_sync.sync_frequency,
        Duration::from_secs(50),
        "20-sub/x.conf is after 10-a.conf"
    );
    assert_eq!(
        c.dns.servers,
        vec!["10.0.0.9".parse::<IpAddr>().unwrap()],
        "lists replace"
    );
    let api = c.kubelet_api.unwrap();
    assert!(!api.anonymous, "30-b.conf turned anonymous off");
    assert_eq!(api.tls.client_ca_file, Some("/ca".into()), "mappings merge");
    // A drop-in's null undoes an earlier drop-in's value: the file's, else the default.
    assert_eq!(c.file_source.check_frequency, Duration::from_secs(7));
    assert_eq!(c.manifest_url, None);
    let c2 = build(
        &cli(&["--config", &main, "--config-dir", d, "--manifest-url", "http://x/"]),
        host,
    )
    .unwrap();
    assert_eq!(c2.manifest_url.unwrap().frequency, Duration::from_secs(20));
    let c = build(
        &cli(&["--config", &main, "--config-dir", d, "--sync-frequency", "5s"]),
        host,
    )
    .unwrap();
    assert_eq!(c.pod_sync.sync_frequency, Duration::from_secs(5), "flags win");
    // Without --config the drop-ins alone.
    let c = build(&cli(&["--config-dir", d]), host).unwrap();
    assert_eq!(c.pod_sync.sync_frequency, Duration::from_secs(50));
    // A drop-in's error names it.
    write("40-bad.conf", "syncFrequncy: 1s\n");
    let err = build(&cli(&["--config", &main, "--config-dir", d]), host)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("40-bad.conf") && err.contains("syncFrequncy: unknown field"),
        "{err}"
    );
    std::fs::write(drop_ins.join("40-bad.conf"), "syncFrequency: 1s\n").unwrap();
    let err = build(&cli(&["--config-dir", d]), host).unwrap_err().to_string();
    assert!(err.contains("40-bad.conf") && err.contains("kind: missing"), "{err}");
    let err = build(&cli(&["--config-dir", "/nonexistent/dockerlet"]), host)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--config-dir") && err.contains("/nonexistent/dockerlet"),
        "{err}"
    );
}

/// Known gates are accepted from the file and `--feature-gates` (the flag wins per gate);
/// unknown gates, and values whose behaviour dockerlet lacks, are refused naming the gate.
#[test]
fn feature_gates_known_accepted_unknown_refused() {
    let c = accepted(
        "featureGates:\n  GracefulNodeShutdown: true\n  NodeSwap: false\n",
        &["--feature-gates", "NodeSwap=true,KubeletTracing=false"],
    );
    assert_eq!(
        c.feature_gates.into_iter().collect::<Vec<_>>(),
        [
            ("GracefulNodeShutdown".to_string(), true),
            ("KubeletTracing".to_string(), false),
            ("NodeSwap".to_string(), true)
        ]
    );
    let err = refusal("featureGates:\n  NoSuchGate: true\n", &[]);
    assert!(
        err.contains("config.yaml") && err.contains("featureGates: unrecognized feature gate: NoSuchGate"),
        "{err}"
    );
    let err = refusal("featureGates:\n  UserNamespacesSupport: true\n", &[]);
    assert!(
        err.contains("featureGates: UserNamespacesSupport=true is not supported by dockerlet ("),
        "{err}"
    );
    for (flag, needle) in [
        ("Bogus=true", "unrecognized feature gate: Bogus"),
        ("SidecarContainers=false", "SidecarContainers=false is not supported"),
        (
            "CustomCPUCFSQuotaPeriod=true",
            "CustomCPUCFSQuotaPeriod=true is not supported by dockerlet (the CFS quota period is always 100ms",
        ),
        ("NodeSwap", "missing bool value for NodeSwap"),
        ("NodeSwap=maybe", "invalid value of NodeSwap=maybe"),
    ] {
        let err = build(&cli(&["--feature-gates", flag]), host).unwrap_err().to_string();
        assert!(err.contains("--feature-gates") && err.contains(needle), "{flag}: {err}");
    }
}

/// What kubeadm 1.32 writes to /var/lib/kubelet/config.yaml (`kubeadm init`).
const KUBEADM: &str = r#"apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
"#;

/// kubeadm's file, as kubeadm writes it: it parses and means what it means under kubelet
/// (zero durations are kubelet's defaults; `rotateCertificates: true` renews the client
/// certificate, kept in `<root-dir>/pki`, as kubelet keeps it in its root directory).
#[test]
fn kubeadm_config_parses_and_means_what_it_says() {
    let c = accepted(KUBEADM, &["--kubeconfig", "/etc/kubernetes/kubelet.conf"]);
    assert!(c.cluster.client_certificate.rotate);
    assert_eq!(
        c.cluster.client_certificate.cert_dir,
        PathBuf::from("/var/lib/dockerlet/pki")
    );
    let c = accepted(
        &KUBEADM.replace("rotateCertificates: true", "rotateCertificates: false"),
        &["--kubeconfig", "/etc/kubernetes/kubelet.conf"],
    );
    assert!(!c.cluster.client_certificate.rotate);
    assert_eq!(c.file_source.path, Some(PathBuf::from("/etc/kubernetes/manifests")));
    assert_eq!(c.cgroups.driver, Some(dockerlet_pod::cgroup::CgroupDriver::Systemd));
    assert_eq!(c.dns.servers, vec!["10.96.0.10".parse::<IpAddr>().unwrap()]);
    assert_eq!(c.dns.domain, "cluster.local");
    assert_eq!(c.pod_sync.runtime_endpoint, "unix:///var/run/docker.sock");
    assert_eq!(c.servers.healthz, Some("127.0.0.1:10248".parse().unwrap()));
    assert_eq!(c.servers.read_only, None, "a config file's read-only port is 0");
    assert_eq!(
        (
            c.file_source.check_frequency,
            c.pod_sync.sync_frequency,
            c.registration.status_update_frequency
        ),
        (
            Duration::from_secs(20),
            Duration::from_secs(60),
            Duration::from_secs(10)
        )
    );
    assert_eq!(c.registration.status_report_frequency, Duration::from_secs(300));
    assert_eq!(c.eviction.pressure_transition_period, Duration::from_secs(300));
    let api = c.kubelet_api.unwrap();
    assert_eq!(api.address, "0.0.0.0:10250".parse().unwrap());
    assert!(!api.anonymous);
    assert_eq!(api.token_webhook, Some(Duration::from_secs(120)));
    assert_eq!(
        api.authorization,
        AuthorizationMode::Webhook {
            authorized_ttl: Duration::from_secs(300),
            unauthorized_ttl: Duration::from_secs(30)
        }
    );
    assert_eq!(api.tls.client_ca_file, Some("/etc/kubernetes/pki/ca.crt".into()));
    assert_eq!(api.stream_idle_timeout, Some(STREAMING_CONNECTION_IDLE_TIMEOUT));
    assert_eq!(api.debug_routes, DebugRoutes::default());
}

/// Every field the table calls honoured has its parser line in `file.rs` (null is unset).
#[test]
fn every_honoured_field_is_parsed() {
    for key in kubelet_fields::honoured() {
        let map = [(key.to_string(), serde_json::Value::Null)].into_iter().collect();
        if let Err(e) = file::settings(std::path::Path::new("config.yaml"), map) {
            panic!("{key}: {e}");
        }
    }
}

/// The README's table of fields is this module's table (regenerate it from the failure).
#[test]
fn readme_lists_every_field() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let table = kubelet_fields::markdown_table();
    assert!(
        readme.contains(&table),
        "README.md's KubeletConfiguration table is out of date; put this there:\n{table}"
    );
}

/// `containerLogMaxSize` and `containerLogMaxFiles` are honoured (once refused as unsupported):
/// kubelet's defaults 10Mi and 5; the file's values; the flags over them; bad values refused
/// naming the key or flag in kubelet's words (`validation.go`, `container_log_manager.go`).
#[test]
fn container_log_rotation_settings() {
    use dockerlet_runtime::LogRotation;
    let default = accepted("containerLogMaxSize: \"\"\n", &[]).container_logs;
    assert_eq!(
        (default.max_size.as_str(), default.max_files, default.rotation),
        ("10Mi", 5, Some(LogRotation::default()))
    );
    let c = accepted("containerLogMaxSize: 50Mi\ncontainerLogMaxFiles: 3\n", &[]).container_logs;
    assert_eq!(
        (c.max_size.as_str(), c.rotation),
        (
            "50Mi",
            Some(LogRotation {
                max_size: 50 * 1024 * 1024,
                max_files: 3
            })
        )
    );
    let c = accepted(
        "containerLogMaxSize: 50Mi\ncontainerLogMaxFiles: 3\n",
        &["--container-log-max-size", "20Ki", "--container-log-max-files", "4"],
    )
    .container_logs;
    assert_eq!(
        c.rotation,
        Some(LogRotation {
            max_size: 20 * 1024,
            max_files: 4
        })
    );
    // A negative size disables rotation, as kubelet's stub log manager.
    let c = accepted("containerLogMaxSize: \"-1\"\n", &[]).container_logs;
    assert_eq!((c.max_size.as_str(), c.rotation), ("-1", None));

    for (text, args, want) in [
        (
            "containerLogMaxFiles: 1\n",
            &[][..],
            "invalid value for containerLogMaxFiles: 1: containerLogMaxFiles must be greater than 1",
        ),
        (
            "containerLogMaxFiles: 0\n",
            &[],
            "invalid value for containerLogMaxFiles: 0: containerLogMaxFiles must be greater than 1",
        ),
        (
            "",
            &["--container-log-max-files", "1"],
            "invalid value for --container-log-max-files: 1: containerLogMaxFiles must be greater than 1",
        ),
        (
            "containerLogMaxSize: 10MB\n",
            &[],
            "invalid value for containerLogMaxSize: failed to parse container log max size \"10MB\": not a quantity (e.g. 10Mi)",
        ),
        (
            "",
            &["--container-log-max-size", "0"],
            "invalid value for --container-log-max-size: \"0\": the container log max size must be greater than 0 (Docker's max-size must be a positive number; a negative size disables rotation)",
        ),
    ] {
        assert_eq!(refusal(text, args), want, "{text:?} {args:?}");
    }
    let err = refusal("containerLogMaxFiles: five\n", &[]);
    assert!(
        err.contains("config.yaml") && err.contains("containerLogMaxFiles"),
        "{err}"
    );
}
