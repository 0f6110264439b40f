//! `/configz`: the effective configuration as kubelet shows it, `{"kubeletconfig": {...}}` with
//! KubeletConfiguration's field names and Go's duration text (`1m0s`).

use dockerlet_actors::ImagePullLimit;
use dockerlet_pod::go::go_duration;
use serde_json::{json, Value};

use crate::config::{AgentConfig, CgroupConfig, KubeletApiConfig};

/// The `/configz` document of `config`: the top-level settings, then each slice's part.
pub fn configz(config: &AgentConfig) -> Value {
    let mut doc = json!({
        "kubeletconfig": {
            "kind": "KubeletConfiguration",
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "staticPodPath": config.file_source.path,
            "podLogsDir": config.pod_logs_dir,
            "containerLogMaxSize": config.container_logs.max_size,
            "containerLogMaxFiles": config.container_logs.max_files,
            "syncFrequency": go_duration(config.pod_sync.sync_frequency),
            "fileCheckFrequency": go_duration(config.file_source.check_frequency),
            "port": config.servers.port,
            "readOnlyPort": config.servers.read_only.map_or(0, |a| a.port()),
            "healthzPort": config.servers.healthz.map_or(0, |a| a.port()),
            "healthzBindAddress": config.servers.healthz.map(|a| a.ip().to_string()),
            "podInfraContainerImage": config.images.sandbox_image,
            "containerRuntimeEndpoint": config.pod_sync.runtime_endpoint,
            "crashLoopBackOff": {
                "maxContainerRestartPeriod": go_duration(config.pod_sync.backoff.max),
            },
            "registerNode": config.registration.register_node,
            "kubeAPIQPS": config.cluster.kube_api_limits.0,
            "kubeAPIBurst": config.cluster.kube_api_limits.1,
            "nodeStatusUpdateFrequency": go_duration(config.registration.status_update_frequency),
            "nodeStatusReportFrequency": go_duration(config.registration.status_report_frequency),
            "nodeLeaseDurationSeconds": config.registration.lease_duration_seconds,
            "nodeStatusMaxImages": config.registration.status_max_images,
            "evictionPressureTransitionPeriod": go_duration(config.eviction.pressure_transition_period),
            "imageGCHighThresholdPercent": config.image_gc.policy.high_threshold_percent,
            "imageGCLowThresholdPercent": config.image_gc.policy.low_threshold_percent,
            "imageMinimumGCAge": go_duration(config.image_gc.policy.min_age),
            "imageMaximumGCAge": go_duration(config.image_gc.policy.max_age),
            "clusterDNS": config.dns.servers.iter().map(|ip| ip.to_string()).collect::<Vec<_>>(),
            "clusterDomain": config.dns.domain,
            "resolvConf": config.dns.resolv_conf.as_ref().map_or_else(String::new, |p| p.display().to_string()),
            "seccompDefault": config.security.seccomp_default,
            "allowedUnsafeSysctls": config.security.allowed_unsafe_sysctls,
            "serializeImagePulls": config.images.pulls == ImagePullLimit::default(),
            "maxParallelImagePulls": match config.images.pulls {
                ImagePullLimit::Unlimited => None,
                ImagePullLimit::AtOnce(n) => Some(n.get()),
            },
        }
    });
    let top = &mut doc["kubeletconfig"];
    kubelet_api(top, config.kubelet_api.as_ref());
    cgroups(top, &config.cgroups);
    if !config.feature_gates.is_empty() {
        top["featureGates"] = json!(config.feature_gates);
    }
    // Whole numbers, as kubelet's int32 fields (the limits in effect).
    top["eventRecordQPS"] = json!(config.cluster.event_limits.qps as i64);
    top["eventBurst"] = json!(config.cluster.event_limits.burst as i64);
    node_settings(top, &config.node);
    doc
}

/// The kubelet API's part: address, TLS, authentication, authorization, the streaming idle
/// timeout and the server's switches (`enableServer` false and the defaults' zero values when
/// it does not serve).
fn kubelet_api(doc: &mut Value, api: Option<&KubeletApiConfig>) {
    use dockerlet_http::kubelet_api::auth::AuthorizationMode;
    let mode = api.map(|a| match a.authorization {
        AuthorizationMode::AlwaysAllow => "AlwaysAllow",
        AuthorizationMode::AlwaysDeny => "AlwaysDeny",
        AuthorizationMode::Webhook { .. } => "Webhook",
    });
    let authz_webhook = api.and_then(|a| match a.authorization {
        AuthorizationMode::Webhook {
            authorized_ttl,
            unauthorized_ttl,
        } => Some(json!({
            "cacheAuthorizedTTL": go_duration(authorized_ttl),
            "cacheUnauthorizedTTL": go_duration(unauthorized_ttl),
        })),
        _ => None,
    });
    let token_webhook = api.and_then(|a| a.token_webhook);
    let part = json!({
        "address": api.map(|a| a.address.ip().to_string()),
        "tlsCertFile": api.and_then(|a| a.tls.cert_and_key.as_ref()).map(|c| &c.0),
        "tlsPrivateKeyFile": api.and_then(|a| a.tls.cert_and_key.as_ref()).map(|c| &c.1),
        "tlsMinVersion": api.and_then(|a| a.tls.min_version.clone()),
        "tlsCipherSuites": api.map(|a| a.tls.cipher_suites.clone()).unwrap_or_default(),
        "streamingConnectionIdleTimeout": go_duration(api.and_then(|a| a.stream_idle_timeout).unwrap_or_default()),
        "authentication": {
            "x509": {"clientCAFile": api.and_then(|a| a.tls.client_ca_file.clone())},
            "webhook": {
                "enabled": token_webhook.is_some(),
                "cacheTTL": token_webhook.map(go_duration),
            },
            "anonymous": {"enabled": api.is_some_and(|a| a.anonymous)},
        },
        "authorization": {"mode": mode, "webhook": authz_webhook},
    });
    for (key, value) in part.as_object().into_iter().flatten() {
        doc[key] = value.clone();
    }
    let routes = api.map(|a| a.debug_routes).unwrap_or_default();
    for (key, on) in [
        ("enableServer", api.is_some()),
        ("enableDebuggingHandlers", routes.debugging),
        ("enableSystemLogHandler", routes.system_log),
        ("enableProfilingHandler", routes.profiling),
        ("enableDebugFlagsHandler", routes.debug_flags),
    ] {
        doc[key] = json!(on);
    }
}

/// The cgroups' part; the system cgroups only when set (Go's `omitempty`).
fn cgroups(doc: &mut Value, cgroups: &CgroupConfig) {
    doc["cgroupRoot"] = json!(cgroups.root);
    doc["cgroupsPerQOS"] = json!(cgroups.per_qos);
    doc["cgroupDriver"] = json!(cgroups.driver.map(|d| d.name()));
    doc["podPidsLimit"] = json!(cgroups.pod_pids_limit);
    doc["singleProcessOOMKill"] = json!(cgroups.single_process_oom_kill);
    for (key, value) in [
        ("kubeletCgroups", &cgroups.kubelet_cgroups),
        ("runtimeCgroups", &cgroups.runtime_cgroups),
        ("systemCgroups", &cgroups.system_cgroups),
    ] {
        if let Some(v) = value {
            doc[key] = json!(v);
        }
    }
}

/// `maxPods`, `podsPerCore`, `failSwapOn`, `protectKernelDefaults`, `cpuCFSQuota*` and
/// `enforceNodeAllocatable` with the reserved cgroups (Go's `omitempty` for the cgroups).
fn node_settings(doc: &mut Value, node: &crate::config::NodeSettings) {
    let enforce = &node.enforce;
    let mut levels: Vec<String> = Vec::new();
    if enforce.pods {
        levels.push("pods".into());
    }
    for (name, reserved, key) in [
        ("kube-reserved", &enforce.kube_reserved, "kubeReservedCgroup"),
        ("system-reserved", &enforce.system_reserved, "systemReservedCgroup"),
    ] {
        if let Some(r) = reserved {
            levels.push(format!(
                "{name}{}",
                if r.compressible_only { "-compressible" } else { "" }
            ));
            doc[key] = json!(r.cgroup);
        }
    }
    doc["maxPods"] = json!(node.max_pods);
    doc["podsPerCore"] = json!(node.pods_per_core);
    doc["failSwapOn"] = json!(node.fail_swap_on);
    doc["protectKernelDefaults"] = json!(node.protect_kernel_defaults);
    doc["cpuCFSQuota"] = json!(node.cpu_cfs_quota);
    doc["cpuCFSQuotaPeriod"] = json!(go_duration(node.cpu_cfs_quota_period));
    doc["enforceNodeAllocatable"] = json!(if levels.is_empty() {
        vec!["none".to_string()]
    } else {
        levels
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The document carries kubelet's names and the effective values, flags included.
    #[test]
    fn configz_names_fields_as_kubelet() {
        let cli = crate::cli::Cli::try_parse_from([
            "dockerlet",
            "--hostname-override",
            "n1",
            "--port",
            "10260",
            "--authorization-mode",
            "AlwaysAllow",
            "--sync-frequency",
            "1m",
        ])
        .unwrap();
        let config = crate::config::build(&cli, || "x".into()).unwrap();
        let c = &configz(&config)["kubeletconfig"];
        assert_eq!(c["port"], 10260);
        assert_eq!(c["syncFrequency"], "1m0s");
        assert_eq!(c["readOnlyPort"], 10255);
        assert_eq!(c["authorization"]["mode"], "AlwaysAllow");
        assert_eq!(c["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(c["kind"], "KubeletConfiguration");
        assert_eq!((&c["eventRecordQPS"], &c["eventBurst"]), (&json!(50), &json!(100)));
        assert_eq!(
            (&c["maxPods"], &c["failSwapOn"], &c["cpuCFSQuota"]),
            (&json!(110), &json!(true), &json!(true))
        );
        assert_eq!(c["cpuCFSQuotaPeriod"], "100ms");
        assert_eq!(c["enforceNodeAllocatable"], json!(["pods"]));
    }

    /// Without the kubelet API (`--port 0`) its part still has every key: the server off, the
    /// zero values of its settings; the system cgroups appear only when set.
    #[test]
    fn configz_without_the_kubelet_api() {
        let cli = crate::cli::Cli::try_parse_from([
            "dockerlet",
            "--port",
            "0",
            "--cgroup-root",
            "/r",
            "--system-cgroups",
            "/sys",
        ])
        .unwrap();
        let config = crate::config::build(&cli, || "x".into()).unwrap();
        let c = &configz(&config)["kubeletconfig"];
        assert_eq!(c["enableServer"], false);
        assert_eq!(c["address"], Value::Null);
        assert_eq!(c["authorization"], json!({"mode": null, "webhook": null}));
        assert_eq!(
            c["authentication"]["webhook"],
            json!({"enabled": false, "cacheTTL": null})
        );
        assert_eq!(c["streamingConnectionIdleTimeout"], "0s");
        assert_eq!(c["tlsCipherSuites"], json!([]));
        assert_eq!((&c["cgroupRoot"], &c["systemCgroups"]), (&json!("/r"), &json!("/sys")));
        assert!(c.get("kubeletCgroups").is_none(), "{c}");
    }
}
