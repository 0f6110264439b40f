//! Service environment variables (kubelet's `getServiceEnvVarMap` and
//! `pkg/kubelet/envvars`): `<SVC>_SERVICE_HOST`, `<SVC>_SERVICE_PORT[_<NAME>]` and the
//! Docker-link style `<SVC>_PORT…` for every Service with a cluster IP in the pod's namespace
//! (with `enableServiceLinks`), and always the `kubernetes` Service of `default`. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service};

/// Services whose variables every pod gets, from the `default` namespace.
const MASTER_SERVICES: [&str; 1] = ["kubernetes"];

/// Whether the pod wants its namespace's Services as env (`enableServiceLinks`, default true).
pub fn enable_service_links(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.enable_service_links).unwrap_or(true)
}

fn cluster_ip(service: &Service) -> Option<&str> {
    service
        .spec
        .as_ref()?
        .cluster_ip
        .as_deref()
        .filter(|ip| !ip.is_empty() && *ip != "None")
}

/// The variables a pod in `namespace` sees, in a stable order (Services by name; each one's
/// variables in kubelet's order).
pub fn service_env<'a>(
    services: impl IntoIterator<Item = &'a Service>,
    namespace: &str,
    enable_links: bool,
) -> Vec<(String, String)> {
    let mut chosen: BTreeMap<&str, &Service> = BTreeMap::new();
    let mut own: Vec<&Service> = Vec::new();
    for service in services {
        if cluster_ip(service).is_none() {
            continue;
        }
        let name = service.metadata.name.as_deref().unwrap_or_default();
        let ns = service.metadata.namespace.as_deref().unwrap_or_default();
        if ns == "default" && MASTER_SERVICES.contains(&name) {
            chosen.entry(name).or_insert(service);
        } else if ns == namespace && enable_links {
            own.push(service);
        }
    }
    // A Service of the pod's namespace wins over a master service of the same name.
    for service in own {
        chosen.insert(service.metadata.name.as_deref().unwrap_or_default(), service);
    }
    chosen.into_values().flat_map(variables_of).collect()
}

/// `my-svc` → `MY_SVC`.
fn env_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

fn variables_of(service: &Service) -> Vec<(String, String)> {
    let Some(ip) = cluster_ip(service) else {
        return Vec::new();
    };
    let prefix = env_name(service.metadata.name.as_deref().unwrap_or_default());
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default();
    let mut out = vec![(format!("{prefix}_SERVICE_HOST"), ip.to_string())];
    let Some(first) = ports.first() else {
        return out;
    };
    out.push((format!("{prefix}_SERVICE_PORT"), first.port.to_string()));
    for port in ports {
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            out.push((
                format!("{prefix}_SERVICE_PORT_{}", env_name(name)),
                port.port.to_string(),
            ));
        }
    }
    // Docker-link variables.
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    };
    for (i, port) in ports.iter().enumerate() {
        let protocol = port.protocol.as_deref().filter(|p| !p.is_empty()).unwrap_or("TCP");
        let lower = protocol.to_lowercase();
        let url = format!("{lower}://{host}:{}", port.port);
        if i == 0 {
            out.push((format!("{prefix}_PORT"), url.clone()));
        }
        let port_prefix = format!("{prefix}_PORT_{}_{}", port.port, protocol.to_uppercase());
        out.push((port_prefix.clone(), url));
        out.push((format!("{port_prefix}_PROTO"), lower));
        out.push((format!("{port_prefix}_PORT"), port.port.to_string()));
        out.push((format!("{port_prefix}_ADDR"), ip.to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn service(ns: &str, name: &str, ip: &str, ports: &[(&str, i32, &str)]) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some(ip.into()),
                ports: Some(
                    ports
                        .iter()
                        .map(|(n, p, proto)| ServicePort {
                            name: (!n.is_empty()).then(|| n.to_string()),
                            port: *p,
                            protocol: (!proto.is_empty()).then(|| proto.to_string()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn get<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
        env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// kubelet's envvars test table: host, ports (named ones too) and the Docker-link
    /// variables, for TCP by default and for UDP.
    #[test]
    fn variables_follow_kubelets_envvars() {
        let services = [
            service("ns", "foo-bar", "1.2.3.4", &[("", 8080, "TCP")]),
            service(
                "ns",
                "abc-123",
                "5.6.7.8",
                &[("u-d-p", 8081, "UDP"), ("t-c-p", 8081, "TCP")],
            ),
            service("ns", "q-u-u-x", "9.8.7.6", &[("", 8082, ""), ("", 8083, "")]),
            service("ns", "svrc-clusterip-none", "None", &[("", 8082, "")]),
            service("ns", "svrc-clusterip-empty", "", &[("", 8082, "")]),
        ];
        let env = service_env(&services, "ns", true);
        let expected: Vec<(String, String)> = [
            ("ABC_123_SERVICE_HOST", "5.6.7.8"),
            ("ABC_123_SERVICE_PORT", "8081"),
            ("ABC_123_SERVICE_PORT_U_D_P", "8081"),
            ("ABC_123_SERVICE_PORT_T_C_P", "8081"),
            ("ABC_123_PORT", "udp://5.6.7.8:8081"),
            ("ABC_123_PORT_8081_UDP", "udp://5.6.7.8:8081"),
            ("ABC_123_PORT_8081_UDP_PROTO", "udp"),
            ("ABC_123_PORT_8081_UDP_PORT", "8081"),
            ("ABC_123_PORT_8081_UDP_ADDR", "5.6.7.8"),
            ("ABC_123_PORT_8081_TCP", "tcp://5.6.7.8:8081"),
            ("ABC_123_PORT_8081_TCP_PROTO", "tcp"),
            ("ABC_123_PORT_8081_TCP_PORT", "8081"),
            ("ABC_123_PORT_8081_TCP_ADDR", "5.6.7.8"),
            ("FOO_BAR_SERVICE_HOST", "1.2.3.4"),
            ("FOO_BAR_SERVICE_PORT", "8080"),
            ("FOO_BAR_PORT", "tcp://1.2.3.4:8080"),
            ("FOO_BAR_PORT_8080_TCP", "tcp://1.2.3.4:8080"),
            ("FOO_BAR_PORT_8080_TCP_PROTO", "tcp"),
            ("FOO_BAR_PORT_8080_TCP_PORT", "8080"),
            ("FOO_BAR_PORT_8080_TCP_ADDR", "1.2.3.4"),
            ("Q_U_U_X_SERVICE_HOST", "9.8.7.6"),
            ("Q_U_U_X_SERVICE_PORT", "8082"),
            ("Q_U_U_X_PORT", "tcp://9.8.7.6:8082"),
            ("Q_U_U_X_PORT_8082_TCP", "tcp://9.8.7.6:8082"),
            ("Q_U_U_X_PORT_8082_TCP_PROTO", "tcp"),
            ("Q_U_U_X_PORT_8082_TCP_PORT", "8082"),
            ("Q_U_U_X_PORT_8082_TCP_ADDR", "9.8.7.6"),
            ("Q_U_U_X_PORT_8083_TCP", "tcp://9.8.7.6:8083"),
            ("Q_U_U_X_PORT_8083_TCP_PROTO", "tcp"),
            ("Q_U_U_X_PORT_8083_TCP_PORT", "8083"),
            ("Q_U_U_X_PORT_8083_TCP_ADDR", "9.8.7.6"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(env, expected);
        let v6 = service_env(&[service("ns", "v6", "fd00::1", &[("", 80, "")])], "ns", true);
        assert_eq!(get(&v6, "V6_PORT"), Some("tcp://[fd00::1]:80"));
        assert_eq!(get(&v6, "V6_PORT_80_TCP_ADDR"), Some("fd00::1"));
    }

    /// Only the pod's namespace, plus `kubernetes` from `default` always — also without
    /// service links; a same-named Service of the pod's namespace wins.
    #[test]
    fn namespace_and_master_services() {
        let services = [
            service("default", "kubernetes", "10.96.0.1", &[("https", 443, "TCP")]),
            service("default", "other", "10.96.0.2", &[("", 80, "")]),
            service("ns", "mine", "10.96.0.3", &[("", 80, "")]),
        ];
        let env = service_env(&services, "ns", true);
        assert_eq!(get(&env, "KUBERNETES_SERVICE_HOST"), Some("10.96.0.1"));
        assert_eq!(get(&env, "KUBERNETES_SERVICE_PORT_HTTPS"), Some("443"));
        assert_eq!(get(&env, "MINE_SERVICE_HOST"), Some("10.96.0.3"));
        assert_eq!(get(&env, "OTHER_SERVICE_HOST"), None);
        let env = service_env(&services, "ns", false);
        assert!(env.iter().all(|(k, _)| k.starts_with("KUBERNETES_")), "{env:?}");
        assert_eq!(get(&env, "KUBERNETES_PORT"), Some("tcp://10.96.0.1:443"));
        let env = service_env(&services, "default", true);
        assert_eq!(get(&env, "OTHER_SERVICE_HOST"), Some("10.96.0.2"));
        let shadow = [
            services[0].clone(),
            service("ns", "kubernetes", "10.96.9.9", &[("", 80, "")]),
        ];
        let env = service_env(&shadow, "ns", true);
        assert_eq!(get(&env, "KUBERNETES_SERVICE_HOST"), Some("10.96.9.9"));
        assert_eq!(env.iter().filter(|(k, _)| k == "KUBERNETES_SERVICE_HOST").count(), 1);
    }
}
