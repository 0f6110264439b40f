//! A plugin's result, as far as the agent reads it: the pod's addresses. Spec 0.3.0 and later
//! (`ips` with an `interface` index into `interfaces`, whose entries in the sandbox have a
//! `sandbox` path) and 0.1/0.2 (`ip4`/`ip6`); the whole result is kept as JSON for the next
//! plugin's `prevResult` and the cache.

use std::net::IpAddr;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
struct Interface {
    #[serde(default)]
    sandbox: String,
}

#[derive(Debug, Deserialize)]
struct IpConfig {
    address: String,
    #[serde(default)]
    interface: Option<usize>,
}

#[derive(Debug, Deserialize)]
struct LegacyIp {
    ip: String,
}

#[derive(Debug, Deserialize)]
struct Shape {
    #[serde(default)]
    interfaces: Vec<Interface>,
    #[serde(default)]
    ips: Vec<IpConfig>,
    #[serde(default)]
    ip4: Option<LegacyIp>,
    #[serde(default)]
    ip6: Option<LegacyIp>,
}

/// The addresses a result gives the sandbox: those on an interface inside it (or naming no
/// interface), in the result's order, without their prefix length.
pub fn pod_ips(result: &Value) -> Result<Vec<IpAddr>, serde_json::Error> {
    let shape = Shape::deserialize(result)?;
    let in_sandbox = |i: Option<usize>| match i {
        None => true,
        Some(i) => shape.interfaces.get(i).is_none_or(|iface| !iface.sandbox.is_empty()),
    };
    let mut ips: Vec<IpAddr> = shape
        .ips
        .iter()
        .filter(|c| in_sandbox(c.interface))
        .filter_map(|c| address(&c.address))
        .collect();
    for legacy in [&shape.ip4, &shape.ip6].into_iter().flatten() {
        ips.extend(address(&legacy.ip));
    }
    Ok(ips)
}

/// `10.1.0.5/24` → `10.1.0.5`.
fn address(cidr: &str) -> Option<IpAddr> {
    cidr.split('/').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The bridge plugin's 1.0.0 result: the host's bridge and veth end are not the pod's; the
    /// container's address is.
    #[test]
    fn addresses_inside_the_sandbox_are_the_pods() {
        let result = json!({
            "cniVersion": "1.0.0",
            "interfaces": [
                {"name": "cni0", "mac": "aa:bb:cc:dd:ee:ff"},
                {"name": "veth1", "mac": "aa:bb:cc:dd:ee:00"},
                {"name": "eth0", "mac": "aa:bb:cc:dd:ee:01", "sandbox": "/proc/42/ns/net"}
            ],
            "ips": [
                {"address": "10.22.0.5/24", "gateway": "10.22.0.1", "interface": 2},
                {"address": "fd00::5/64", "interface": 2},
                {"address": "10.99.0.1/24", "interface": 0}
            ],
        });
        assert_eq!(
            pod_ips(&result).expect("parses"),
            vec!["10.22.0.5".parse::<IpAddr>().unwrap(), "fd00::5".parse().unwrap()]
        );
    }

    /// 0.4.0's `version` field is ignored; an address without an interface counts; 0.2.0's ip4.
    #[test]
    fn older_results_give_their_addresses() {
        let v040 = json!({"cniVersion": "0.4.0", "ips": [{"version": "4", "address": "10.1.0.2/16"}]});
        assert_eq!(pod_ips(&v040).unwrap(), vec!["10.1.0.2".parse::<IpAddr>().unwrap()]);
        let v020 = json!({"cniVersion": "0.2.0", "ip4": {"ip": "10.2.0.3/24"}});
        assert_eq!(pod_ips(&v020).unwrap(), vec!["10.2.0.3".parse::<IpAddr>().unwrap()]);
        assert!(pod_ips(&json!({"ips": "no"})).is_err());
        assert!(pod_ips(&json!({})).unwrap().is_empty());
    }
}
