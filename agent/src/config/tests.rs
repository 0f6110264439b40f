//! The settings' tests: defaults, the file under the flags, refusals.

use super::*;
use clap::Parser;

fn cli(args: &[&str]) -> Cli {
    Cli::try_parse_from(std::iter::once("dockerlet").chain(args.iter().copied())).unwrap()
}

fn host() -> String {
    "My-Host".to_string()
}

/// `--housekeeping-interval` defaults to kubelet's 10 s, takes a duration, refuses 0.
#[test]
fn housekeeping_interval_is_kubelets_flag() {
    assert_eq!(
        build(&cli(&[]), host).unwrap().pod_sync.housekeeping_interval,
        Duration::from_secs(10)
    );
    let c = build(&cli(&["--housekeeping-interval", "2s"]), host).unwrap();
    assert_eq!(c.pod_sync.housekeeping_interval, Duration::from_secs(2));
    let err = build(&cli(&["--housekeeping-interval", "0s"]), host)
        .unwrap_err()
        .to_string();
    assert!(err.contains("--housekeeping-interval"), "{err}");
}

/// With no flags the agent uses kubelet's flag defaults and the lowercased hostname.
#[test]
fn defaults_match_kubelet_flag_defaults() {
    let c = build(&cli(&[]), host).unwrap();
    assert_eq!(c.node_name, "my-host");
    assert_eq!(c.servers.read_only, Some("0.0.0.0:10255".parse().unwrap()));
    assert_eq!(c.servers.healthz, Some("127.0.0.1:10248".parse().unwrap()));
    assert_eq!(c.servers.debug, "127.0.0.1:10265".parse().unwrap());
    assert_eq!(c.file_source.check_frequency, Duration::from_secs(20));
    assert_eq!(c.pod_sync.backoff, BackoffConfig::default());
    assert_eq!(c.pod_sync.runtime_endpoint, "unix:///var/run/docker.sock");
}

/// The config file sets values, flags override it, and unknown kubelet keys are ignored.
#[test]
fn flags_override_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/pods\nreadOnlyPort: 10266\nhealthzPort: 0\nfileCheckFrequency: 1m30s\ncrashLoopBackOff:\n  maxContainerRestartPeriod: 60s\nevictionHard:\n  memory.available: 100Mi\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let c = build(&cli(&["--config", p]), host).unwrap();
    assert_eq!(c.file_source.path, Some(PathBuf::from("/etc/pods")));
    assert_eq!(c.servers.read_only.unwrap().port(), 10266);
    assert_eq!(c.servers.healthz, None);
    assert_eq!(c.file_source.check_frequency, Duration::from_secs(90));
    assert_eq!(c.pod_sync.backoff.max, Duration::from_secs(60));
    let c = build(
        &cli(&["--config", p, "--read-only-port", "1234", "--pod-manifest-path", "/x"]),
        host,
    )
    .unwrap();
    assert_eq!(c.servers.read_only.unwrap().port(), 1234);
    assert_eq!(c.file_source.path, Some(PathBuf::from("/x")));
}

/// `--event-qps` and `--event-burst` (file: `eventRecordQPS`, `eventBurst`): kubelet's 50 and
/// 100 by default, client-go's 5 and 10 for 0, a negative number refused naming the flag.
#[test]
fn event_limits_as_kubelets_event_client() {
    let limits = |args: &[&str]| build(&cli(args), host).map(|c| c.cluster.event_limits);
    let pair = |qps: f64, burst: f64| EventLimits { qps, burst };
    assert_eq!(limits(&[]).unwrap(), pair(50.0, 100.0));
    assert_eq!(
        limits(&["--event-qps", "7", "--event-burst", "3"]).unwrap(),
        pair(7.0, 3.0)
    );
    assert_eq!(
        limits(&["--event-qps", "0", "--event-burst", "0"]).unwrap(),
        pair(5.0, 10.0)
    );
    let err = limits(&["--event-qps", "-1"]).unwrap_err().to_string();
    assert!(
        err.contains("--event-qps") && err.contains("-1 must not be a negative number"),
        "{err}"
    );
    let err = limits(&["--event-burst", "-2"]).unwrap_err().to_string();
    assert!(err.contains("--event-burst"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "kind: KubeletConfiguration\neventRecordQPS: 20\neventBurst: 40\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    assert_eq!(limits(&["--config", p]).unwrap(), pair(20.0, 40.0));
    assert_eq!(limits(&["--config", p, "--event-qps", "1"]).unwrap(), pair(1.0, 40.0));
}

/// Image pulls: serialized by default; `maxParallelImagePulls` of 2 or more alone turns
/// serialization off (kubelet's defaulting); a limit above 1 with serialization asked for,
/// or below 1, is refused naming the flag.
#[test]
fn image_pull_limits_as_kubelet_defaults_and_validates_them() {
    let at_once = |n: usize| ImagePullLimit::AtOnce(std::num::NonZeroUsize::new(n).unwrap());
    let limit = |args: &[&str]| build(&cli(args), host).map(|c| c.images.pulls);
    assert_eq!(limit(&[]).unwrap(), at_once(1));
    assert_eq!(
        limit(&["--serialize-image-pulls=false"]).unwrap(),
        ImagePullLimit::Unlimited
    );
    assert_eq!(limit(&["--max-parallel-image-pulls", "3"]).unwrap(), at_once(3));
    assert_eq!(limit(&["--max-parallel-image-pulls", "1"]).unwrap(), at_once(1));
    assert_eq!(
        limit(&["--serialize-image-pulls=false", "--max-parallel-image-pulls", "2"]).unwrap(),
        at_once(2)
    );
    let refused = limit(&["--serialize-image-pulls", "--max-parallel-image-pulls", "2"])
        .unwrap_err()
        .to_string();
    assert!(
        refused.starts_with("invalid value for --max-parallel-image-pulls: 2: cannot be larger than 1"),
        "{refused}"
    );
    let refused = limit(&["--max-parallel-image-pulls", "0"]).unwrap_err().to_string();
    assert_eq!(
        refused,
        "invalid value for --max-parallel-image-pulls: 0 must be a positive number"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, "kind: KubeletConfiguration\nmaxParallelImagePulls: 5\n").unwrap();
    assert_eq!(limit(&["--config", path.to_str().unwrap()]).unwrap(), at_once(5));
    std::fs::write(&path, "kind: KubeletConfiguration\nserializeImagePulls: false\n").unwrap();
    assert_eq!(
        limit(&["--config", path.to_str().unwrap()]).unwrap(),
        ImagePullLimit::Unlimited
    );
}

/// The kubelet API: on 0.0.0.0:10250 by default, secure (no anonymous, every request
/// forbidden without an authorization mode, self-signed pair under `<root-dir>/pki`); its
/// settings come from the file's kubelet names or the flags; what it cannot honour (token
/// webhook and Webhook authorizer without an API server, CBC suites, TLS 1.1) is refused
/// naming the flag.
#[test]
fn kubelet_api_settings() {
    let c = build(&cli(&["--root-dir", "/r"]), host).unwrap();
    let api = c.kubelet_api.unwrap();
    assert_eq!(api.address, "0.0.0.0:10250".parse().unwrap());
    assert!(!api.anonymous);
    assert_eq!(api.authorization, AuthorizationMode::AlwaysDeny);
    assert_eq!(api.tls.cert_dir, PathBuf::from("/r/pki"));
    assert_eq!(api.stream_idle_timeout, Some(Duration::from_secs(4 * 3600)));
    assert_eq!(build(&cli(&["--port", "0"]), host).unwrap().kubelet_api, None);
    let idle = |args: &[&str]| {
        build(&cli(args), host)
            .unwrap()
            .kubelet_api
            .unwrap()
            .stream_idle_timeout
    };
    assert_eq!(
        idle(&["--streaming-connection-idle-timeout", "5m"]),
        Some(Duration::from_secs(300))
    );
    assert_eq!(
        idle(&["--streaming-connection-idle-timeout", "0s"]),
        None,
        "0 is no limit"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "kind: KubeletConfiguration\nport: 10260\ntlsCertFile: /c.crt\ntlsPrivateKeyFile: /c.key\ntlsMinVersion: VersionTLS13\ntlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\nauthentication:\n  anonymous:\n    enabled: true\n  x509:\n    clientCAFile: /ca.crt\nauthorization:\n  mode: AlwaysAllow\nstreamingConnectionIdleTimeout: 30m\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let api = build(&cli(&["--config", p]), host).unwrap().kubelet_api.unwrap();
    assert_eq!(api.address.port(), 10260);
    assert_eq!(api.stream_idle_timeout, Some(Duration::from_secs(1800)));
    assert!(api.anonymous);
    assert_eq!(api.authorization, AuthorizationMode::AlwaysAllow);
    assert_eq!(api.tls.cert_and_key, Some(("/c.crt".into(), "/c.key".into())));
    assert_eq!(api.tls.client_ca_file, Some("/ca.crt".into()));
    assert_eq!(api.tls.min_version.as_deref(), Some("VersionTLS13"));
    assert_eq!(api.tls.cipher_suites, ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);
    let api = build(&cli(&["--config", p, "--anonymous-auth=false"]), host)
        .unwrap()
        .kubelet_api
        .unwrap();
    assert!(!api.anonymous);

    assert_eq!(api.token_webhook, None);
    let api = build(&cli(&["--config", p, "--kubeconfig", "/k"]), host)
        .unwrap()
        .kubelet_api
        .unwrap();
    assert_eq!(
        api.authorization,
        AuthorizationMode::AlwaysAllow,
        "asked for explicitly"
    );
    assert_eq!(api.token_webhook, Some(Duration::from_secs(120)));

    for (args, setting) in [
        (&["--authorization-mode", "Webhook"][..], "--authorization-mode"),
        (&["--authorization-mode", "Node"][..], "--authorization-mode"),
        (
            &["--authentication-token-webhook"][..],
            "--authentication-token-webhook",
        ),
        (
            &["--tls-cipher-suites", "TLS_RSA_WITH_AES_128_CBC_SHA"][..],
            "--tls-cipher-suites",
        ),
        (&["--tls-cipher-suites", "BOGUS"][..], "--tls-cipher-suites"),
        (&["--tls-min-version", "VersionTLS11"][..], "--tls-min-version"),
    ] {
        match build(&cli(args), host) {
            Err(ConfigError::Invalid { setting: s, reason }) => assert_eq!(s, setting, "{args:?}: {reason}"),
            other => panic!("{args:?}: {other:?}"),
        }
    }
}

/// With an API server the TokenReview and SubjectAccessReview webhooks are on by default
/// with kubelet's TTLs (2 m; 5 m and 30 s); the file's `cacheTTL`s and the flags set them;
/// they can be turned off.
#[test]
fn webhooks_default_on_with_an_api_server() {
    let api = build(&cli(&["--kubeconfig", "/k"]), host).unwrap().kubelet_api.unwrap();
    assert_eq!(api.token_webhook, Some(Duration::from_secs(120)));
    assert_eq!(
        api.authorization,
        AuthorizationMode::Webhook {
            authorized_ttl: Duration::from_secs(300),
            unauthorized_ttl: Duration::from_secs(30)
        }
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "authentication:\n  webhook:\n    enabled: true\n    cacheTTL: 10s\nauthorization:\n  mode: Webhook\n  webhook:\n    cacheAuthorizedTTL: 1m0s\n    cacheUnauthorizedTTL: 5s\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let api = build(&cli(&["--config", p, "--kubeconfig", "/k"]), host)
        .unwrap()
        .kubelet_api
        .unwrap();
    assert_eq!(api.token_webhook, Some(Duration::from_secs(10)));
    assert_eq!(
        api.authorization,
        AuthorizationMode::Webhook {
            authorized_ttl: Duration::from_secs(60),
            unauthorized_ttl: Duration::from_secs(5)
        }
    );
    let api = build(
        &cli(&[
            "--config",
            p,
            "--kubeconfig",
            "/k",
            "--authentication-token-webhook=false",
            "--authorization-webhook-cache-unauthorized-ttl",
            "1s",
        ]),
        host,
    )
    .unwrap()
    .kubelet_api
    .unwrap();
    assert_eq!(api.token_webhook, None);
    assert!(matches!(
        api.authorization,
        AuthorizationMode::Webhook { unauthorized_ttl, .. } if unauthorized_ttl == Duration::from_secs(1)
    ));
    // Without an API server, asking for either webhook is refused.
    assert!(build(&cli(&["--config", p]), host).is_err());
}

/// The cgroup settings take kubelet's defaults, the file's `cgroupRoot`, `cgroupsPerQOS`,
/// `cgroupDriver` and `podPidsLimit`, and the flags over them; bad values name the flag.
#[test]
fn cgroup_settings_parse() {
    let c = build(&cli(&[]), host).unwrap().cgroups;
    assert_eq!(
        c,
        CgroupConfig {
            root: "/".into(),
            per_qos: true,
            driver: None,
            pod_pids_limit: -1,
            single_process_oom_kill: false,
            kubelet_cgroups: None,
            runtime_cgroups: None,
            system_cgroups: None,
        }
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "cgroupRoot: /k\ncgroupsPerQOS: false\nenforceNodeAllocatable: []\ncgroupDriver: systemd\npodPidsLimit: 100\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let c = build(&cli(&["--config", p]), host).unwrap().cgroups;
    assert_eq!(
        (c.root.as_str(), c.per_qos, c.driver, c.pod_pids_limit),
        ("/k", false, Some(CgroupDriver::Systemd), 100)
    );
    let c = build(
        &cli(&[
            "--config",
            p,
            "--cgroup-root",
            "/it/n1",
            "--cgroups-per-qos",
            "--pod-max-pids",
            "-1",
        ]),
        host,
    )
    .unwrap()
    .cgroups;
    assert_eq!((c.root.as_str(), c.per_qos, c.pod_pids_limit), ("/it/n1", true, -1));
    // The system cgroups: from the file, flags over it; "" is none; systemCgroups with
    // the file's cgroupRoot.
    std::fs::write(
        &path,
        "cgroupRoot: /\nkubeletCgroups: /kubelet\nruntimeCgroups: /docker-daemon\nsystemCgroups: /system\n",
    )
    .unwrap();
    let c = build(
        &cli(&["--config", p, "--kubelet-cgroups", "/k2", "--runtime-cgroups", ""]),
        host,
    )
    .unwrap()
    .cgroups;
    assert_eq!(
        (
            c.kubelet_cgroups.as_deref(),
            c.runtime_cgroups.as_deref(),
            c.system_cgroups.as_deref()
        ),
        (Some("/k2"), None, Some("/system"))
    );
    for (args, setting) in [
        (&["--cgroup-root", "rel"][..], "--cgroup-root"),
        (&["--cgroup-root", "/a/../b"][..], "--cgroup-root"),
        (&["--cgroup-driver", "docker"][..], "--cgroup-driver"),
        (&["--pod-max-pids", "-2"][..], "--pod-max-pids"),
        (&["--kubelet-cgroups", "kubelet"][..], "--kubelet-cgroups"),
        (&["--runtime-cgroups", "/a/./b"][..], "--runtime-cgroups"),
        (&["--system-cgroups", "/system"][..], "--system-cgroups"),
        (&["--cgroup-root", "/", "--system-cgroups", "/"][..], "--system-cgroups"),
    ] {
        match build(&cli(args), host) {
            Err(ConfigError::Invalid { setting: s, .. }) => assert_eq!(s, setting, "{args:?}"),
            other => panic!("{args:?}: {other:?}"),
        }
    }
}

/// `seccompDefault` and `allowedUnsafeSysctls` come from the file or the flags (off and
/// empty by default); a pattern that is not namespaced is refused naming the flag.
#[test]
fn security_settings_parse() {
    let c = build(&cli(&[]), host).unwrap();
    assert!(!c.security.seccomp_default && c.security.allowed_unsafe_sysctls.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, "seccompDefault: true\nallowedUnsafeSysctls: [\"kernel.msg*\"]\n").unwrap();
    let p = path.to_str().unwrap();
    let c = build(&cli(&["--config", p]), host).unwrap();
    assert!(c.security.seccomp_default);
    assert_eq!(c.security.allowed_unsafe_sysctls, vec!["kernel.msg*"]);
    let c = build(
        &cli(&[
            "--config",
            p,
            "--seccomp-default=false",
            "--allowed-unsafe-sysctls",
            "net.*,kernel.sem",
        ]),
        host,
    )
    .unwrap();
    assert!(!c.security.seccomp_default);
    assert_eq!(c.security.allowed_unsafe_sysctls, vec!["net.*", "kernel.sem"]);
    assert!(
        build(&cli(&["--seccomp-default"]), host)
            .unwrap()
            .security
            .seccomp_default
    );
    let err = build(&cli(&["--allowed-unsafe-sysctls", "vm.swappiness"]), host)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        r#"invalid value for --allowed-unsafe-sysctls: the sysctls "vm.swappiness" are not known to be namespaced"#
    );
}

/// Bad values name the setting and the reason.
#[test]
fn bad_settings_name_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, "readOnlyPort: abc\n").unwrap();
    let err = build(&cli(&["--config", path.to_str().unwrap()]), host)
        .unwrap_err()
        .to_string();
    assert!(err.contains("config.yaml") && err.contains("readOnlyPort"), "{err}");
    std::fs::write(&path, "fileCheckFrequency: soon\n").unwrap();
    let err = build(&cli(&["--config", path.to_str().unwrap()]), host)
        .unwrap_err()
        .to_string();
    assert!(err.contains("fileCheckFrequency: invalid duration"), "{err}");
    let err = build(&cli(&["--crash-loop-backoff-max", "10m"]), host)
        .unwrap_err()
        .to_string();
    assert!(err.contains("--crash-loop-backoff-max"), "{err}");
    let err = build(&cli(&["--hostname-override", "bad_name"]), host)
        .unwrap_err()
        .to_string();
    assert!(err.contains("--hostname-override"), "{err}");
    assert!(Cli::try_parse_from(["dockerlet", "--file-check-frequency", "xyz"]).is_err());
    let err = build(&cli(&["--register-with-taints", "a=b:Sometimes"]), host)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--register-with-taints") && err.contains("Sometimes"),
        "{err}"
    );
    let err = build(&cli(&["--kube-reserved", "gpu=1"]), host)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--kube-reserved") && err.contains("unknown resource"),
        "{err}"
    );
    let err = build(&cli(&["--eviction-hard", "memory.available<lots"]), host)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--eviction-hard") && err.contains("memory.available"),
        "{err}"
    );
}

/// DNS settings: kubelet's defaults, the file's keys, flags over them, "" for no
/// resolv.conf, and a bad IP named.
#[test]
fn dns_settings_parse() {
    let c = build(&cli(&[]), host).unwrap();
    assert_eq!(c.dns, ClusterDns::default());
    assert_eq!(c.dns.resolv_conf, Some(PathBuf::from("/etc/resolv.conf")));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "clusterDNS: [10.96.0.10]\nclusterDomain: cluster.local\nresolvConf: /run/resolv.conf\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let c = build(&cli(&["--config", p]), host).unwrap();
    assert_eq!(c.dns.servers, vec!["10.96.0.10".parse::<IpAddr>().unwrap()]);
    assert_eq!(c.dns.domain, "cluster.local");
    assert_eq!(c.dns.resolv_conf, Some(PathBuf::from("/run/resolv.conf")));
    let c = build(
        &cli(&["--config", p, "--cluster-dns", "10.0.0.10,fd00::a", "--resolv-conf", ""]),
        host,
    )
    .unwrap();
    assert_eq!(c.dns.servers.len(), 2);
    assert_eq!(c.dns.resolv_conf, None);
    let err = build(&cli(&["--cluster-dns", "ten"]), host).unwrap_err().to_string();
    assert!(err.contains("--cluster-dns") && err.contains("\"ten\""), "{err}");
}

/// Taints, reserved resources and eviction thresholds come from flags or the file, with
/// kubelet's defaults.
#[test]
fn node_allocatable_settings_parse() {
    let c = build(&cli(&[]), host).unwrap();
    assert!(c.registration.taints.is_empty() && c.reserved.is_empty());
    // kubelet's defaults, and (pods enforced on allocatable) memory.available's value for
    // allocatableMemory.available (`addAllocatableThresholds`).
    let with_allocatable = |mut t: Thresholds| {
        let memory = t.0[&dockerlet_host::signals::Signal::MemoryAvailable];
        t.0.insert(dockerlet_host::signals::Signal::AllocatableMemoryAvailable, memory);
        t
    };
    assert_eq!(c.eviction.settings.hard, with_allocatable(Thresholds::default()));
    let none = build(&cli(&["--enforce-node-allocatable", ""]), host).unwrap();
    assert_eq!(
        none.eviction.settings.hard,
        Thresholds::default(),
        "pods not enforced: none added"
    );
    assert_eq!(c.registration.status_report_frequency, Duration::from_secs(300));
    let c = build(
        &cli(&[
            "--register-with-taints",
            "dedicated=edge:NoSchedule,gpu:NoExecute",
            "--kube-reserved",
            "cpu=100m,memory=1Gi",
            "--system-reserved",
            "cpu=0.4",
            "--eviction-hard",
            "memory.available<1Gi",
            "--node-status-update-frequency",
            "2s",
        ]),
        host,
    )
    .unwrap();
    assert_eq!(c.registration.taints.len(), 2);
    assert_eq!(
        (
            c.registration.taints[0].key.as_str(),
            c.registration.taints[0].value.as_deref(),
            c.registration.taints[0].effect.as_str()
        ),
        ("dedicated", Some("edge"), "NoSchedule")
    );
    assert_eq!(c.registration.taints[1].value, None);
    assert_eq!(c.reserved["cpu"], 500);
    assert_eq!(c.reserved["memory"], 1 << 30);
    // memory.available<1Gi, and its copy for allocatableMemory.available.
    assert_eq!(c.eviction.settings.hard.0.len(), 2);
    assert_eq!(c.registration.status_report_frequency, Duration::from_secs(2));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "registerWithTaints:\n- key: a\n  effect: NoExecute\nkubeReserved:\n  memory: 512Mi\nevictionHard:\n  nodefs.available: 5%\nevictionPressureTransitionPeriod: 30s\n",
    )
    .unwrap();
    let c = build(&cli(&["--config", path.to_str().unwrap()]), host).unwrap();
    assert_eq!(c.registration.taints[0].effect, "NoExecute");
    assert_eq!(c.reserved["memory"], 512 << 20);
    assert_eq!(c.eviction.settings.hard.0.len(), 1);
    assert_eq!(c.eviction.pressure_transition_period, Duration::from_secs(30));
}

/// Image GC: kubelet's defaults (85/80, 2m, no maximum age, 5m), the file under the flags, and
/// thresholds refused in the image manager's words naming the flag or key
/// (`image_gc_manager.go` `NewImageGCManager`); `imageMaximumGCAge` ignored with its gate off.
#[test]
fn image_gc_thresholds() {
    let c = build(&cli(&[]), host).unwrap();
    assert_eq!(c.image_gc.policy, dockerlet_host::image_gc::ImageGcPolicy::default());
    assert_eq!(c.image_gc.period, Duration::from_secs(300));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "kind: KubeletConfiguration\nimageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 60\nimageMinimumGCAge: 1m\nimageMaximumGCAge: 1h\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let c = build(&cli(&["--config", p]), host).unwrap();
    let policy = c.image_gc.policy;
    assert_eq!((policy.high_threshold_percent, policy.low_threshold_percent), (70, 60));
    assert_eq!(
        (policy.min_age, policy.max_age),
        (Duration::from_secs(60), Duration::from_secs(3600))
    );
    let c = build(
        &cli(&[
            "--config",
            p,
            "--image-gc-high-threshold",
            "1",
            "--image-gc-low-threshold",
            "0",
            "--minimum-image-ttl-duration",
            "3s",
            "--image-gc-period",
            "2s",
        ]),
        host,
    )
    .unwrap();
    let policy = c.image_gc.policy;
    assert_eq!((policy.high_threshold_percent, policy.low_threshold_percent), (1, 0));
    assert_eq!(
        (policy.min_age, c.image_gc.period),
        (Duration::from_secs(3), Duration::from_secs(2))
    );
    let c = build(
        &cli(&["--config", p, "--feature-gates", "ImageMaximumGCAge=false"]),
        host,
    )
    .unwrap();
    assert_eq!(c.image_gc.policy.max_age, Duration::ZERO);
    for (args, expected) in [
        (
            vec!["--image-gc-high-threshold", "101"],
            "invalid value for --image-gc-high-threshold: invalid HighThresholdPercent 101, must be in range [0-100]",
        ),
        (
            vec!["--image-gc-low-threshold", "-1"],
            "invalid value for --image-gc-low-threshold: invalid LowThresholdPercent -1, must be in range [0-100]",
        ),
        (
            vec!["--image-gc-low-threshold", "90"],
            "invalid value for --image-gc-low-threshold: LowThresholdPercent 90 can not be higher than HighThresholdPercent 85",
        ),
        (
            vec!["--config", p, "--image-gc-low-threshold", "75"],
            "invalid value for --image-gc-low-threshold: LowThresholdPercent 75 can not be higher than HighThresholdPercent 70",
        ),
    ] {
        let err = build(&cli(&args), host).unwrap_err().to_string();
        assert_eq!(err, expected);
    }
    std::fs::write(&path, "kind: KubeletConfiguration\nimageGCHighThresholdPercent: 101\n").unwrap();
    let err = build(&cli(&["--config", p]), host).unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid value for imageGCHighThresholdPercent: invalid HighThresholdPercent 101, must be in range [0-100]"
    );
}

/// `--node-status-max-images` (`nodeStatusMaxImages`): kubelet's 50, -1 for all, below -1 refused.
#[test]
fn node_status_max_images() {
    assert_eq!(build(&cli(&[]), host).unwrap().registration.status_max_images, 50);
    let c = build(&cli(&["--node-status-max-images", "-1"]), host).unwrap();
    assert_eq!(c.registration.status_max_images, -1);
    let err = build(&cli(&["--node-status-max-images", "-2"]), host)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "invalid value for --node-status-max-images: invalid configuration: nodeStatusMaxImages \
         (--node-status-max-images) -2 must be -1 or greater"
    );
}

/// Soft thresholds, their grace periods, the longest pod grace and the minimum reclaim: flags
/// over keys, each soft threshold with its grace period or the start refused in kubelet's words
/// naming the flag (`ParseThresholdConfig`).
#[test]
fn soft_thresholds_grace_periods_and_minimum_reclaim() {
    let c = build(
        &cli(&[
            "--eviction-soft",
            "memory.available<1Gi",
            "--eviction-soft-grace-period",
            "memory.available=1m30s",
            "--eviction-max-pod-grace-period",
            "20",
            "--eviction-minimum-reclaim",
            "memory.available=0Mi,nodefs.available=500Mi",
        ]),
        host,
    )
    .unwrap();
    assert_eq!(c.eviction.settings.soft.0.len(), 1);
    assert_eq!(
        c.eviction
            .settings
            .soft_grace
            .get(&dockerlet_host::signals::Signal::MemoryAvailable),
        Some(&Duration::from_secs(90))
    );
    assert_eq!(c.eviction.settings.max_pod_grace, Duration::from_secs(20));
    // memory.available's minimum reclaim holds for allocatableMemory.available too.
    assert_eq!(c.eviction.settings.min_reclaim.len(), 3);
    assert_eq!(
        c.eviction.settings.hard.0.len(),
        Thresholds::default().0.len() + 1,
        "the hard defaults stay"
    );

    let e = build(&cli(&["--eviction-soft", "memory.available<1Gi"]), host)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--eviction-soft")
            && e.contains("grace period must be specified for the soft eviction threshold memory.available"),
        "{e}"
    );
    let e = build(&cli(&["--eviction-minimum-reclaim", "memory.available=0%"]), host)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--eviction-minimum-reclaim") && e.contains("must be positive"),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "evictionSoft:\n  nodefs.available: 15%\nevictionSoftGracePeriod:\n  nodefs.available: 2m\nevictionMaxPodGracePeriod: 30\nevictionMinimumReclaim:\n  nodefs.available: 1Gi\n",
    )
    .unwrap();
    let c = build(&cli(&["--config", path.to_str().unwrap()]), host).unwrap();
    assert_eq!(c.eviction.settings.soft.0.len(), 1);
    assert_eq!(c.eviction.settings.max_pod_grace, Duration::from_secs(30));
    assert_eq!(c.eviction.settings.min_reclaim.len(), 1);
}

/// `--rotate-certificates` / `rotateCertificates` and `--bootstrap-kubeconfig`: the client
/// certificate needs an API server through `--kubeconfig`; the files go to `--cert-dir`
/// (default `<root-dir>/pki`).
#[test]
fn client_certificate_settings_need_a_kubeconfig() {
    let c = build(&cli(&["--kubeconfig", "/k", "--rotate-certificates"]), host).unwrap();
    assert!(c.cluster.client_certificate.rotate);
    assert_eq!(
        c.cluster.client_certificate.cert_dir,
        PathBuf::from("/var/lib/dockerlet/pki")
    );
    assert_eq!(c.cluster.client_certificate.bootstrap_kubeconfig, None);
    let c = build(
        &cli(&["--kubeconfig", "/k", "--bootstrap-kubeconfig", "/b", "--cert-dir", "/c"]),
        host,
    )
    .unwrap();
    assert!(!c.cluster.client_certificate.rotate);
    assert_eq!(
        c.cluster.client_certificate.bootstrap_kubeconfig,
        Some(PathBuf::from("/b"))
    );
    assert_eq!(c.cluster.client_certificate.cert_dir, PathBuf::from("/c"));
    let err = build(&cli(&["--rotate-certificates"]), host).unwrap_err().to_string();
    assert!(
        err.contains("--rotate-certificates (rotateCertificates)")
            && err.contains("needs an API server (--kubeconfig)"),
        "{err}"
    );
    let err = build(&cli(&["--in-cluster", "--rotate-certificates=true"]), host)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--in-cluster authenticates with the pod's service account"),
        "{err}"
    );
    assert!(
        crate::cli::Cli::try_parse_from(["dockerlet", "--bootstrap-kubeconfig", "/b"]).is_err(),
        "--bootstrap-kubeconfig without --kubeconfig"
    );
}

/// `--lock-file` and `--exit-on-lock-contention` as kubelet's: the second without the first is
/// refused in kubelet's words.
#[test]
fn lock_file_flags_are_kubelets() {
    let lock = |args: &[&str]| build(&cli(args), host).map(|c| c.process.lock);
    assert_eq!(lock(&[]).unwrap(), None);
    assert_eq!(
        lock(&["--lock-file", "/run/dockerlet.lock", "--exit-on-lock-contention"]).unwrap(),
        Some(process::LockFile {
            path: "/run/dockerlet.lock".into(),
            exit_on_contention: true,
        })
    );
    assert_eq!(
        lock(&["--exit-on-lock-contention"]).unwrap_err().to_string(),
        "invalid value for --exit-on-lock-contention: cannot exit on lock file contention: no lock file specified"
    );
}
