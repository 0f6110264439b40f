//! Which of a sandbox's addresses a pod reports (`status.podIP`, `status.podIPs`), as kubelet's
//! `sortPodIPs` (`pkg/kubelet/kubelet_pods.go`) picks them: the runtime may give any number of
//! addresses in any order; the pod gets the first of the node IP's family (IPv4 when the node
//! has no IP), then the first of the other family, and no more.

use std::net::IpAddr;

/// At most two addresses of `ips`: the first of the primary family (IPv6 when `node_ipv6`),
/// then the first of the other.
pub fn sort_pod_ips(ips: &[IpAddr], node_ipv6: bool) -> Vec<IpAddr> {
    let primary = ips.iter().find(|ip| ip.is_ipv6() == node_ipv6);
    let secondary = ips.iter().find(|ip| ip.is_ipv6() != node_ipv6);
    primary.into_iter().chain(secondary).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::sort_pod_ips;
    use std::net::IpAddr;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    /// Cases after kubelet's `TestSortPodIPs` (`pkg/kubelet/kubelet_pods_test.go`).
    #[test]
    fn the_node_family_first_then_one_of_the_other() {
        let cases: &[(&str, &[&str], bool, &[&str])] = &[
            ("no IPs", &[], false, &[]),
            ("one IPv4, IPv4 node", &["10.0.0.1"], false, &["10.0.0.1"]),
            ("one IPv6, IPv4 node", &["fd01::1"], false, &["fd01::1"]),
            (
                "IPv4 and IPv6, IPv4 node",
                &["10.0.0.1", "fd01::1"],
                false,
                &["10.0.0.1", "fd01::1"],
            ),
            (
                "IPv6 and IPv4, IPv4 node",
                &["fd01::1", "10.0.0.1"],
                false,
                &["10.0.0.1", "fd01::1"],
            ),
            (
                "IPv4 and IPv6, IPv6 node",
                &["10.0.0.1", "fd01::1"],
                true,
                &["fd01::1", "10.0.0.1"],
            ),
            (
                "several of each: the first of each",
                &["10.0.0.1", "10.0.0.2", "fd01::1", "fd01::2"],
                false,
                &["10.0.0.1", "fd01::1"],
            ),
            ("only IPv4s: one", &["10.0.0.1", "10.0.0.2"], true, &["10.0.0.1"]),
        ];
        for (name, given, node_ipv6, want) in cases {
            assert_eq!(sort_pod_ips(&ips(given), *node_ipv6), ips(want), "{name}");
        }
    }
}
