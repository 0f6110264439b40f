//! The pod's resolv.conf, formed as kubelet's DNS configurer forms it
//! (`pkg/kubelet/network/dns/dns.go`, `GetPodDNS`): the base is the node's resolv.conf
//! (`--resolv-conf`), replaced by the cluster DNS for `ClusterFirst` pods, emptied for `None`;
//! the pod's `dnsConfig` is merged in; the limits are applied, with the events kubelet records
//! when it cuts. Pure: the node's file arrives as text, the events come back as values.

use std::net::IpAddr;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Pod, PodDNSConfigOption, PodSpec};

use crate::field::FieldError;
use crate::names::{is_dns_label, is_dns_subdomain};
use crate::spec::{host_network, pod_identity};

/// Most nameservers a resolver reads (`validation.MaxDNSNameservers`).
pub const MAX_NAMESERVERS: usize = 3;
/// Most search domains (`MaxDNSSearchPathsExpanded`, GA since v1.28).
pub const MAX_SEARCH_PATHS: usize = 32;
/// Longest search line, in characters (`MaxDNSSearchListCharsExpanded`).
pub const MAX_SEARCH_CHARS: usize = 2048;
/// Longest single search domain (a DNS-1123 subdomain); longer ones crash some resolvers.
const MAX_SEARCH_PATH_LEN: usize = 253;
/// The options of a `ClusterFirst` pod (kubelet's `defaultDNSOptions`).
const CLUSTER_OPTIONS: [&str; 1] = ["ndots:5"];

/// Event reason when a limit cut the pod's DNS config (Warning).
pub const DNS_CONFIG_FORMING: &str = "DNSConfigForming";
/// Event reason when a `ClusterFirst` pod falls back to `Default` (Warning).
pub const MISSING_CLUSTER_DNS: &str = "MissingClusterDNS";

/// The node's DNS settings: `--cluster-dns`, `--cluster-domain`, `--resolv-conf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDns {
    /// `clusterDNS`: the cluster's DNS servers; none means ClusterFirst pods fall back to Default.
    pub servers: Vec<IpAddr>,
    /// `clusterDomain` (`cluster.local`, …); empty for none.
    pub domain: String,
    /// `resolvConf`: the node file the pods' DNS starts from; `None` (the flag set to "") for
    /// none, which makes `Default` pods resolve through localhost only.
    pub resolv_conf: Option<PathBuf>,
}

impl Default for ClusterDns {
    /// kubelet's defaults: no cluster DNS, no domain, `/etc/resolv.conf`.
    fn default() -> Self {
        ClusterDns {
            servers: Vec::new(),
            domain: String::new(),
            resolv_conf: Some(PathBuf::from("/etc/resolv.conf")),
        }
    }
}

/// The three things a resolv.conf says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvConf {
    /// `nameserver` lines, in order.
    pub nameservers: Vec<String>,
    /// The `search` line's domains (trailing dots removed).
    pub searches: Vec<String>,
    /// The `options` line's options (`ndots:5`, `edns0`, …).
    pub options: Vec<String>,
}

/// A resolv.conf that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolvConfError {
    /// A `nameserver` line without an address (kubelet: "nameserver list is empty").
    #[error("line {line}: nameserver list is empty")]
    EmptyNameserver {
        /// 1-based line number.
        line: usize,
    },
}

impl ResolvConf {
    /// Parse resolv.conf text as kubelet does: comments (`#`) skipped, `nameserver` lines
    /// accumulate, the last `search` and the last `options` line win.
    pub fn parse(text: &str) -> Result<ResolvConf, ResolvConfError> {
        let mut conf = ResolvConf::default();
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.starts_with('#') {
                continue;
            }
            let mut fields = trimmed.split_whitespace();
            match fields.next() {
                Some("nameserver") => match fields.next() {
                    Some(server) => conf.nameservers.push(server.to_string()),
                    None => return Err(ResolvConfError::EmptyNameserver { line: i + 1 }),
                },
                Some("search") => {
                    conf.searches = fields.map(|s| s.trim_end_matches('.').to_string()).collect();
                }
                Some("options") => conf.options = fields.map(str::to_string).collect(),
                _ => {}
            }
        }
        Ok(conf)
    }

    /// The file as dockershim wrote it into the sandbox: `nameserver` lines, then `search` and
    /// `options` when there are any; empty when there is nothing to say.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for server in &self.nameservers {
            out.push_str("nameserver ");
            out.push_str(server);
            out.push('\n');
        }
        if !self.searches.is_empty() {
            out.push_str("search ");
            out.push_str(&self.searches.join(" "));
            out.push('\n');
        }
        if !self.options.is_empty() {
            out.push_str("options ");
            out.push_str(&self.options.join(" "));
            out.push('\n');
        }
        out
    }
}

/// A Warning event about the pod that forming its DNS config calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsEvent {
    /// [`DNS_CONFIG_FORMING`] or [`MISSING_CLUSTER_DNS`].
    pub reason: &'static str,
    /// kubelet's message.
    pub message: String,
}

/// The pod's resolv.conf and the events forming it produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDns {
    /// What the pod's containers see at `/etc/resolv.conf`.
    pub resolv_conf: ResolvConf,
    /// Warnings to record about the pod.
    pub events: Vec<DnsEvent>,
}

/// Which base a pod's DNS starts from (kubelet's `podDNSType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DnsType {
    Cluster,
    Host,
    None,
}

fn dns_type(pod: &Pod) -> DnsType {
    let policy = pod.spec.as_ref().and_then(|s| s.dns_policy.as_deref());
    match policy.unwrap_or("ClusterFirst") {
        "None" => DnsType::None,
        "ClusterFirstWithHostNet" => DnsType::Cluster,
        "ClusterFirst" if !host_network(pod) => DnsType::Cluster,
        "ClusterFirst" | "Default" => DnsType::Host,
        // The API server rejects other values; kubelet falls back to ClusterFirst.
        _ => DnsType::Cluster,
    }
}

/// The pod's DNS config (kubelet's `GetPodDNS`). `host` is the node's resolv.conf
/// (`cluster.resolv_conf`, parsed; empty when there is none); `node_ips` pick the loopback
/// family when there is no resolv.conf.
pub fn pod_dns(pod: &Pod, cluster: &ClusterDns, host: &ResolvConf, node_ips: &[IpAddr]) -> PodDns {
    let mut events = Vec::new();
    let mut conf = host.clone();
    let mut kind = dns_type(pod);
    if kind == DnsType::Cluster && cluster.servers.is_empty() {
        let crate::spec::PodIdentity { name, namespace, uid } = pod_identity(pod);
        events.push(DnsEvent {
            reason: MISSING_CLUSTER_DNS,
            message: format!(
                "pod: \"{name}_{namespace}({uid})\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy."
            ),
        });
        kind = DnsType::Host;
    }
    match kind {
        DnsType::None => conf = ResolvConf::default(),
        DnsType::Cluster => {
            conf.nameservers = cluster.servers.iter().map(IpAddr::to_string).collect();
            conf.searches = cluster_searches(pod, &cluster.domain, &conf.searches);
            conf.options = CLUSTER_OPTIONS.iter().map(|o| o.to_string()).collect();
        }
        DnsType::Host if cluster.resolv_conf.is_none() => {
            // No resolv.conf: resolve through the local machine only, as a resolver does with
            // no nameserver (one loopback per node IP family).
            let mut servers: Vec<String> = Vec::new();
            for ip in node_ips {
                servers.push(if ip.is_ipv6() { "::1" } else { "127.0.0.1" }.to_string());
            }
            if servers.is_empty() {
                servers.push("127.0.0.1".to_string());
            }
            conf.nameservers.extend(servers);
            conf.searches = vec![".".to_string()];
        }
        DnsType::Host => {}
    }
    if let Some(extra) = pod.spec.as_ref().and_then(|s| s.dns_config.as_ref()) {
        conf.nameservers = without_duplicates(
            conf.nameservers
                .into_iter()
                .chain(extra.nameservers.iter().flatten().cloned()),
        );
        conf.searches = without_duplicates(
            conf.searches
                .into_iter()
                .chain(extra.searches.iter().flatten().cloned()),
        );
        conf.options = merge_options(&conf.options, extra.options.as_deref().unwrap_or_default());
    }
    if conf.nameservers.len() > MAX_NAMESERVERS {
        conf.nameservers.truncate(MAX_NAMESERVERS);
        events.push(DnsEvent {
            reason: DNS_CONFIG_FORMING,
            message: format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {}",
                conf.nameservers.join(" ")
            ),
        });
    }
    let (searches, cut) = searches_within_limits(conf.searches);
    conf.searches = searches;
    if cut {
        events.push(DnsEvent {
            reason: DNS_CONFIG_FORMING,
            message: format!(
                "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                conf.searches.join(" ")
            ),
        });
    }
    PodDns {
        resolv_conf: conf,
        events,
    }
}

/// The API server's checks of `dnsPolicy`, `dnsConfig`, `hostAliases`, `hostname` and
/// `subdomain` (`ValidatePodSpec`), for static pods; the error names the field.
pub fn validate(spec: &PodSpec) -> Result<(), FieldError> {
    const POLICIES: [&str; 4] = ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
    let policy = spec.dns_policy.as_deref().unwrap_or("ClusterFirst");
    if !POLICIES.contains(&policy) {
        return Err(FieldError::unsupported(
            "spec.dnsPolicy",
            format!(
                "{policy:?}: supported values: \"ClusterFirst\", \"ClusterFirstWithHostNet\", \"Default\", \"None\""
            ),
        ));
    }
    let config = spec.dns_config.as_ref();
    if policy == "None" {
        let Some(config) = config else {
            return Err(FieldError::required(
                "spec.dnsConfig",
                "must provide `dnsConfig` when `dnsPolicy` is None",
            ));
        };
        if config.nameservers.as_ref().is_none_or(Vec::is_empty) {
            return Err(FieldError::required(
                "spec.dnsConfig.nameservers",
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            ));
        }
    }
    if let Some(config) = config {
        let servers = config.nameservers.as_deref().unwrap_or_default();
        if servers.len() > MAX_NAMESERVERS {
            return Err(FieldError::invalid(
                "spec.dnsConfig.nameservers",
                format!("{servers:?}: must not have more than {MAX_NAMESERVERS} nameservers"),
            ));
        }
        for (i, server) in servers.iter().enumerate() {
            if server.parse::<IpAddr>().is_err() {
                return Err(FieldError::invalid(
                    format!("spec.dnsConfig.nameservers[{i}]"),
                    format!("{server:?}: must be a valid IP address"),
                ));
            }
        }
        let searches = config.searches.as_deref().unwrap_or_default();
        if searches.len() > MAX_SEARCH_PATHS {
            return Err(FieldError::invalid(
                "spec.dnsConfig.searches",
                format!("must not have more than {MAX_SEARCH_PATHS} search paths"),
            ));
        }
        if searches.join(" ").len() > MAX_SEARCH_CHARS {
            return Err(FieldError::invalid(
                "spec.dnsConfig.searches",
                format!("must not have more than {MAX_SEARCH_CHARS} characters (including spaces) in the search list"),
            ));
        }
        for (i, search) in searches.iter().enumerate() {
            let domain = search.strip_suffix('.').unwrap_or(search);
            if search != "." && !is_dns_subdomain(domain) {
                return Err(FieldError::invalid(
                    format!("spec.dnsConfig.searches[{i}]"),
                    format!("{search:?}: must be a lowercase RFC 1123 subdomain"),
                ));
            }
        }
        for (i, option) in config.options.iter().flatten().enumerate() {
            if option.name.as_deref().is_none_or(str::is_empty) {
                return Err(FieldError::required(format!("spec.dnsConfig.options[{i}].name"), ""));
            }
        }
    }
    for (i, alias) in spec.host_aliases.iter().flatten().enumerate() {
        if alias.ip.parse::<IpAddr>().is_err() {
            return Err(FieldError::invalid(
                format!("spec.hostAliases[{i}].ip"),
                format!("{:?}: must be a valid IP address", alias.ip),
            ));
        }
        for (j, name) in alias.hostnames.iter().flatten().enumerate() {
            if !is_dns_subdomain(name) {
                return Err(FieldError::invalid(
                    format!("spec.hostAliases[{i}].hostnames[{j}]"),
                    format!("{name:?}: must be a lowercase RFC 1123 subdomain"),
                ));
            }
        }
    }
    for (field, value) in [("spec.hostname", &spec.hostname), ("spec.subdomain", &spec.subdomain)] {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty() && !is_dns_label(v)) {
            return Err(FieldError::invalid(
                field,
                format!("{v:?}: must be a lowercase RFC 1123 label"),
            ));
        }
    }
    Ok(())
}

/// `<ns>.svc.<domain> svc.<domain> <domain>` and then the node's, without duplicates.
fn cluster_searches(pod: &Pod, domain: &str, host: &[String]) -> Vec<String> {
    if domain.is_empty() {
        return host.to_vec();
    }
    let crate::spec::PodIdentity { namespace, .. } = pod_identity(pod);
    let cluster = [
        format!("{namespace}.svc.{domain}"),
        format!("svc.{domain}"),
        domain.to_string(),
    ];
    without_duplicates(cluster.into_iter().chain(host.iter().cloned()))
}

fn without_duplicates(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// The options with the pod's merged in: a pod option replaces one of the same name. kubelet
/// merges through a Go map (random order); here the order of first appearance is kept.
fn merge_options(existing: &[String], extra: &[PodDNSConfigOption]) -> Vec<String> {
    let mut merged: Vec<(String, String)> = Vec::new();
    let mut set = |name: &str, value: &str| match merged.iter_mut().find(|(n, _)| n == name) {
        Some(slot) => slot.1 = value.to_string(),
        None => merged.push((name.to_string(), value.to_string())),
    };
    for option in existing {
        match option.split_once(':') {
            Some((name, value)) => set(name, value),
            None => set(option, ""),
        }
    }
    for option in extra {
        let name = option.name.as_deref().unwrap_or_default();
        set(name, option.value.as_deref().unwrap_or_default());
    }
    merged
        .into_iter()
        .map(|(name, value)| {
            if value.is_empty() {
                name
            } else {
                format!("{name}:{value}")
            }
        })
        .collect()
}

/// The search line cut to kubelet's limits: at most [`MAX_SEARCH_PATHS`] domains, none longer
/// than 253 characters, the line at most [`MAX_SEARCH_CHARS`] (domains dropped from the end).
/// Returns the line and whether anything was cut.
fn searches_within_limits(mut searches: Vec<String>) -> (Vec<String>, bool) {
    let mut cut = false;
    if searches.len() > MAX_SEARCH_PATHS {
        searches.truncate(MAX_SEARCH_PATHS);
        cut = true;
    }
    let before = searches.len();
    searches.retain(|s| s.len() <= MAX_SEARCH_PATH_LEN);
    cut |= searches.len() != before;
    let line_len = |s: &[String]| s.iter().map(String::len).sum::<usize>() + s.len().saturating_sub(1);
    if line_len(&searches) > MAX_SEARCH_CHARS {
        while line_len(&searches) > MAX_SEARCH_CHARS {
            searches.pop();
        }
        cut = true;
    }
    (searches, cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodDNSConfig, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(policy: Option<&str>, host_net: bool, dns_config: Option<PodDNSConfig>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns1".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                dns_policy: policy.map(str::to_string),
                host_network: Some(host_net),
                dns_config,
                ..Default::default()
            }),
            status: None,
        }
    }

    fn cluster() -> ClusterDns {
        ClusterDns {
            servers: vec!["10.96.0.10".parse().unwrap()],
            domain: "cluster.local".into(),
            resolv_conf: Some("/etc/resolv.conf".into()),
        }
    }

    fn host() -> ResolvConf {
        ResolvConf::parse("# host\nnameserver 192.168.1.1\nnameserver 8.8.8.8\nsearch corp.example. lab.example\noptions timeout:2 rotate\n").unwrap()
    }

    /// kubelet's parser: nameservers accumulate, the last search and options lines win,
    /// trailing dots go, comments are skipped; a bare `nameserver` is an error.
    #[test]
    fn resolv_conf_parses_as_kubelet_parses_it() {
        let conf = ResolvConf::parse("nameserver 1.1.1.1\n#nameserver 2.2.2.2\nsearch a.\nsearch b c.\nnameserver 3.3.3.3\noptions ndots:2\noptions edns0\n").unwrap();
        assert_eq!(conf.nameservers, ["1.1.1.1", "3.3.3.3"]);
        assert_eq!(conf.searches, ["b", "c"]);
        assert_eq!(conf.options, ["edns0"]);
        assert_eq!(
            ResolvConf::parse("nameserver\n"),
            Err(ResolvConfError::EmptyNameserver { line: 1 })
        );
        assert_eq!(
            conf.render(),
            "nameserver 1.1.1.1\nnameserver 3.3.3.3\nsearch b c\noptions edns0\n"
        );
        assert_eq!(ResolvConf::default().render(), "");
    }

    /// ClusterFirst (also when unset): the cluster DNS only, the cluster search path before the
    /// node's, ndots:5.
    #[test]
    fn cluster_first_uses_the_cluster_dns_and_search_path() {
        for policy in [None, Some("ClusterFirst")] {
            let dns = pod_dns(&pod(policy, false, None), &cluster(), &host(), &[]);
            assert_eq!(
                dns.resolv_conf.render(),
                "nameserver 10.96.0.10\nsearch ns1.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\noptions ndots:5\n"
            );
            assert!(dns.events.is_empty());
        }
    }

    /// hostNetwork + ClusterFirst is Default (the node's file); ClusterFirstWithHostNet is the
    /// cluster's; Default is the node's file as it is.
    #[test]
    fn host_network_and_default_use_the_node_file() {
        let node = host();
        let dns = pod_dns(&pod(Some("ClusterFirst"), true, None), &cluster(), &node, &[]);
        assert_eq!(dns.resolv_conf, node);
        let dns = pod_dns(&pod(Some("Default"), false, None), &cluster(), &node, &[]);
        assert_eq!(dns.resolv_conf, node);
        let dns = pod_dns(
            &pod(Some("ClusterFirstWithHostNet"), true, None),
            &cluster(),
            &node,
            &[],
        );
        assert_eq!(dns.resolv_conf.nameservers, ["10.96.0.10"]);
        assert_eq!(dns.resolv_conf.options, ["ndots:5"]);
    }

    /// Without --cluster-dns a ClusterFirst pod gets Default and kubelet's MissingClusterDNS event.
    #[test]
    fn cluster_first_without_cluster_dns_falls_back_with_an_event() {
        let none = ClusterDns {
            servers: vec![],
            ..cluster()
        };
        let dns = pod_dns(&pod(None, false, None), &none, &host(), &[]);
        assert_eq!(dns.resolv_conf, host());
        assert_eq!(
            dns.events,
            [DnsEvent {
                reason: MISSING_CLUSTER_DNS,
                message: "pod: \"web_ns1(u1)\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.".into()
            }]
        );
    }

    /// None starts empty and takes dnsConfig as it is; dnsConfig merges into the others
    /// (duplicates dropped, a pod option replacing the node's of the same name).
    #[test]
    fn dns_config_is_merged_as_kubelet_merges_it() {
        let config = PodDNSConfig {
            nameservers: Some(vec!["1.2.3.4".into(), "10.96.0.10".into()]),
            searches: Some(vec!["my.dns.search.suffix".into(), "svc.cluster.local".into()]),
            options: Some(vec![
                PodDNSConfigOption {
                    name: Some("ndots".into()),
                    value: Some("2".into()),
                },
                PodDNSConfigOption {
                    name: Some("edns0".into()),
                    value: None,
                },
            ]),
        };
        let dns = pod_dns(
            &pod(Some("None"), false, Some(config.clone())),
            &cluster(),
            &host(),
            &[],
        );
        assert_eq!(
            dns.resolv_conf.render(),
            "nameserver 1.2.3.4\nnameserver 10.96.0.10\nsearch my.dns.search.suffix svc.cluster.local\noptions ndots:2 edns0\n"
        );
        let dns = pod_dns(&pod(None, false, Some(config)), &cluster(), &host(), &[]);
        assert_eq!(dns.resolv_conf.nameservers, ["10.96.0.10", "1.2.3.4"]);
        assert_eq!(
            dns.resolv_conf.searches,
            [
                "ns1.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "corp.example",
                "lab.example",
                "my.dns.search.suffix"
            ]
        );
        assert_eq!(dns.resolv_conf.options, ["ndots:2", "edns0"]);
        assert!(dns.events.is_empty());
    }

    /// More than three nameservers: the first three, and kubelet's DNSConfigForming event.
    #[test]
    fn nameservers_are_cut_to_three_with_an_event() {
        let config = PodDNSConfig {
            nameservers: Some(vec!["1.1.1.1".into(), "2.2.2.2".into(), "3.3.3.3".into()]),
            ..Default::default()
        };
        let dns = pod_dns(&pod(None, false, Some(config)), &cluster(), &host(), &[]);
        assert_eq!(dns.resolv_conf.nameservers, ["10.96.0.10", "1.1.1.1", "2.2.2.2"]);
        assert_eq!(
            dns.events,
            [DnsEvent {
                reason: DNS_CONFIG_FORMING,
                message: "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 10.96.0.10 1.1.1.1 2.2.2.2".into()
            }]
        );
    }

    /// Search domains: at most 32, none over 253 characters, the line at most 2048.
    #[test]
    fn search_paths_are_cut_to_the_limits_with_an_event() {
        let many: Vec<String> = (0..40).map(|i| format!("d{i}.example")).collect();
        let (cut, was_cut) = searches_within_limits(many.clone());
        assert!(was_cut);
        assert_eq!(cut, many[..32]);
        let long = "a".repeat(254);
        let (cut, was_cut) = searches_within_limits(vec!["ok".into(), long]);
        assert!(was_cut);
        assert_eq!(cut, ["ok"]);
        // 30 domains of 99 characters: 30 × 100 − 1 = 2999 characters; 20 fit (1999).
        let wide: Vec<String> = (0..30).map(|i| format!("{i:02}{}", "x".repeat(97))).collect();
        let (cut, was_cut) = searches_within_limits(wide.clone());
        assert!(was_cut);
        assert_eq!(cut, wide[..20]);
        let (kept, was_cut) = searches_within_limits(many[..3].to_vec());
        assert!(!was_cut);
        assert_eq!(kept, many[..3]);

        let config = PodDNSConfig {
            searches: Some(many),
            ..Default::default()
        };
        let dns = pod_dns(&pod(Some("None"), false, Some(config)), &cluster(), &host(), &[]);
        assert_eq!(dns.resolv_conf.searches.len(), 32);
        assert_eq!(dns.events.len(), 1);
        assert!(dns.events[0]
            .message
            .starts_with("Search Line limits were exceeded, some search paths have been omitted, the applied search line is: d0.example d1.example"));
    }

    /// Static pods get the API server's checks: the policy, None without nameservers, too many
    /// nameservers, a bad IP, a bad host alias, a hostname that is not a label.
    #[test]
    fn validation_names_the_field() {
        let spec = |policy: &str, config: Option<PodDNSConfig>| PodSpec {
            dns_policy: Some(policy.into()),
            dns_config: config,
            ..Default::default()
        };
        assert!(validate(&spec("ClusterFirst", None)).is_ok());
        let err = |s: PodSpec| validate(&s).unwrap_err().to_string();
        assert!(err(spec("Cluster", None)).starts_with("spec.dnsPolicy: Unsupported value: \"Cluster\""));
        assert!(err(spec("None", None)).starts_with("spec.dnsConfig: Required value"));
        assert!(
            err(spec("None", Some(PodDNSConfig::default()))).starts_with("spec.dnsConfig.nameservers: Required value")
        );
        let servers = |list: &[&str]| {
            Some(PodDNSConfig {
                nameservers: Some(list.iter().map(|s| s.to_string()).collect()),
                ..Default::default()
            })
        };
        assert!(validate(&spec("None", servers(&["1.1.1.1"]))).is_ok());
        assert!(
            err(spec("None", servers(&["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"])))
                .contains("must not have more than 3 nameservers")
        );
        assert!(err(spec("Default", servers(&["one"]))).starts_with("spec.dnsConfig.nameservers[0]: Invalid value"));
        let aliased = PodSpec {
            host_aliases: Some(vec![k8s_openapi::api::core::v1::HostAlias {
                ip: "not-an-ip".into(),
                hostnames: Some(vec!["foo".into()]),
            }]),
            ..Default::default()
        };
        assert!(err(aliased).starts_with("spec.hostAliases[0].ip: Invalid value"));
        let named = PodSpec {
            hostname: Some("Bad_Name".into()),
            ..Default::default()
        };
        assert!(err(named).starts_with("spec.hostname: Invalid value"));
    }

    /// With --resolv-conf "" a Default pod resolves through loopback only, with search ".".
    #[test]
    fn no_resolv_conf_means_loopback() {
        let none = ClusterDns {
            resolv_conf: None,
            ..cluster()
        };
        let ips: Vec<IpAddr> = vec!["10.0.0.1".parse().unwrap(), "fd00::1".parse().unwrap()];
        let dns = pod_dns(&pod(Some("Default"), false, None), &none, &ResolvConf::default(), &ips);
        assert_eq!(
            dns.resolv_conf.render(),
            "nameserver 127.0.0.1\nnameserver ::1\nsearch .\n"
        );
    }
}
