//! kube-controller-manager's node IPAM (range allocator) in the test API server: Nodes get
//! `/24`s of `--cluster-cidr` in order as `spec.podCIDR(s)`, a deleted Node's range goes back,
//! an exhausted range gives `CIDRNotAvailable`.
//!
//! Upstream (kubernetes/kubernetes): `pkg/controller/nodeipam/ipam/range_allocator.go`
//! (`AllocateOrOccupyCIDR`, `ReleaseCIDR`, `updateCIDRsAllocation`);
//! `pkg/controller/nodeipam/ipam/cidrset/cidr_set.go` (`AllocateNext`);
//! `pkg/controller/util/node/controller_utils.go` (`RecordNodeStatusChange`).

use dockerlet_fake_apiserver::{ApiServer, ApiServerConfig};
use serde_json::json;

fn node(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
}

/// A /22 range with /24 node masks: a Node created with its own CIDR keeps it and occupies it;
/// the next three get the other three ranges in order, a fourth none and a `CIDRNotAvailable`
/// event; once the first is deleted, a new Node gets its range back.
#[test]
fn nodes_get_pod_cidrs_in_order_and_give_them_back() {
    let api = ApiServer::start_with(ApiServerConfig {
        cluster_cidr: Some("10.30.0.0/22".into()),
        ..ApiServerConfig::default()
    })
    .expect("start");
    let cidr = |name: &str| {
        let n = api.get("nodes", "", name).expect("the node");
        (n["spec"]["podCIDR"].clone(), n["spec"]["podCIDRs"].clone())
    };
    let mut own = node("own");
    own["spec"] = json!({"podCIDR": "10.30.1.0/24", "podCIDRs": ["10.30.1.0/24"]});
    api.create(own).expect("create own");
    for name in ["a", "b", "c"] {
        api.create(node(name)).expect("create");
    }
    assert_eq!(cidr("own"), (json!("10.30.1.0/24"), json!(["10.30.1.0/24"])));
    assert_eq!(cidr("a"), (json!("10.30.0.0/24"), json!(["10.30.0.0/24"])));
    assert_eq!(cidr("b"), (json!("10.30.2.0/24"), json!(["10.30.2.0/24"])));
    assert_eq!(cidr("c"), (json!("10.30.3.0/24"), json!(["10.30.3.0/24"])));
    api.create(node("d")).expect("create");
    assert!(cidr("d").0.is_null(), "the range is exhausted");
    let events = api.list("events");
    let refused = events
        .iter()
        .find(|e| e["reason"] == "CIDRNotAvailable" && e["involvedObject"]["name"] == "d")
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(refused["message"], "Node d status is now: CIDRNotAvailable");
    assert_eq!(refused["source"]["component"], "cidrAllocator");
    api.delete("nodes", "", "a", Some(0)).expect("delete a");
    api.create(node("e")).expect("create");
    assert_eq!(cidr("e").0, json!("10.30.0.0/24"), "a's range, given back");
}
