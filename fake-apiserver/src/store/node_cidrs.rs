//! kube-controller-manager's node IPAM over the store ([`crate::node_ipam`]): a Node written
//! without `spec.podCIDRs` gets the next node CIDR, one with them occupies them, a deleted one
//! releases them (`range_allocator.go`: `AllocateOrOccupyCIDR` on add and on an update with no
//! CIDRs, `ReleaseCIDR` on delete); none left: `CIDRNotAvailable` from `cidrAllocator`.

use serde_json::{json, Value};

use super::{meta_str, EventType, Store};
use crate::resources;

impl Store {
    /// Node IPAM's turn after `node` changed by `event`.
    pub(super) fn allocate_node_cidrs(&mut self, node: &Value, event: EventType) {
        let Some(set) = self.node_cidrs.as_mut() else {
            return;
        };
        let cidrs: Vec<String> = node["spec"]["podCIDRs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str().map(String::from))
            .collect();
        if event == EventType::Deleted {
            cidrs.iter().for_each(|c| set.release(c));
            return;
        }
        if !cidrs.is_empty() {
            for c in &cidrs {
                set.occupy(c);
            }
            return;
        }
        match set.allocate_next() {
            Ok(cidr) => {
                // PatchNodeCIDRs: spec.podCIDR and spec.podCIDRs, as a strategic merge patch would.
                let nodes = resources::by_name("nodes").expect("nodes are served");
                let mut new = node.clone();
                new["spec"]["podCIDR"] = json!(cidr);
                new["spec"]["podCIDRs"] = json!([cidr]);
                let key = Self::key(nodes, "", meta_str(node, "name"));
                self.allocating_cidrs = true;
                self.commit(nodes, key, EventType::Modified, Some(new), Some(node.clone()));
                self.allocating_cidrs = false;
            }
            Err(_) => {
                // nodeutil.RecordNodeStatusChange: "Node <name> status is now: <status>".
                let message = format!("Node {} status is now: CIDRNotAvailable", meta_str(node, "name"));
                self.controller_event(node, "Node", "cidrAllocator", ("Normal", "CIDRNotAvailable", &message));
            }
        }
    }
}
