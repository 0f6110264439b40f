//! kube-controller-manager's node IPAM with the `RangeAllocator` (`--allocate-node-cidrs`,
//! `--cluster-cidr`, `--node-cidr-mask-size`): each Node gets a pod CIDR cut from the cluster
//! CIDR, the next free one after the last handed out (`pkg/controller/nodeipam/ipam/cidrset/
//! cidr_set.go` `AllocateNext`), written as `spec.podCIDR` and `spec.podCIDRs`
//! (`pkg/controller/nodeipam/ipam/range_allocator.go` `AllocateOrOccupyCIDR`,
//! `updateCIDRsAllocation`, `PatchNodeCIDRs`); a Node that has CIDRs occupies them, a deleted
//! Node releases them; none left: the event `CIDRNotAvailable` (`RecordNodeStatusChange`).
//! IPv4 only: one cluster CIDR (no dual stack).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// kube-controller-manager's default `--node-cidr-mask-size` for IPv4.
pub const DEFAULT_NODE_MASK: u8 = 24;

/// A cluster CIDR that is not one kube-controller-manager accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// Not `a.b.c.d/n`.
    #[error("invalid CIDR address: {0}")]
    Invalid(String),
    /// The node mask is shorter than the cluster's, or too long (cidr_set.go's checks).
    #[error("CIDRSet: node mask /{node} does not fit cluster CIDR /{cluster}")]
    Mask {
        /// The cluster CIDR's prefix length.
        cluster: u8,
        /// The node mask.
        node: u8,
    },
    /// Every node CIDR is taken (cidr_set.go's `ErrCIDRRangeNoCIDRsRemaining`).
    #[error("CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range")]
    Exhausted,
}

/// `a.b.c.d/n` → (address as u32 with the host bits cleared, n).
fn parse(cidr: &str) -> Result<(u32, u8), CidrError> {
    let invalid = || CidrError::Invalid(cidr.to_string());
    let (ip, bits) = cidr.split_once('/').ok_or_else(invalid)?;
    let ip: Ipv4Addr = ip.parse().map_err(|_| invalid())?;
    let bits: u8 = bits.parse().map_err(|_| invalid())?;
    if bits > 32 {
        return Err(invalid());
    }
    let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
    Ok((u32::from(ip) & mask, bits))
}

/// The node CIDRs of one cluster CIDR and which are taken.
#[derive(Debug, Clone)]
pub struct CidrSet {
    base: u32,
    cluster_bits: u8,
    node_bits: u8,
    used: BTreeSet<u32>,
    next: u32,
}

impl CidrSet {
    /// The set of `/node_bits` subnets of `cluster`.
    pub fn new(cluster: &str, node_bits: u8) -> Result<Self, CidrError> {
        let (base, cluster_bits) = parse(cluster)?;
        if node_bits < cluster_bits || node_bits > 32 || node_bits - cluster_bits > 16 {
            return Err(CidrError::Mask {
                cluster: cluster_bits,
                node: node_bits,
            });
        }
        Ok(CidrSet {
            base,
            cluster_bits,
            node_bits,
            used: BTreeSet::new(),
            next: 0,
        })
    }

    fn count(&self) -> u32 {
        1 << (self.node_bits - self.cluster_bits)
    }

    fn cidr(&self, index: u32) -> String {
        let ip = self.base + (index << (32 - self.node_bits));
        format!("{}/{}", Ipv4Addr::from(ip), self.node_bits)
    }

    fn index(&self, cidr: &str) -> Option<u32> {
        let (ip, bits) = parse(cidr).ok()?;
        if bits != self.node_bits {
            return None;
        }
        let offset = ip.checked_sub(self.base)? >> (32 - self.node_bits);
        (offset < self.count()).then_some(offset)
    }

    /// The next free node CIDR after the last one handed out, round the range.
    pub fn allocate_next(&mut self) -> Result<String, CidrError> {
        let count = self.count();
        for step in 0..count {
            let i = (self.next + step) % count;
            if self.used.insert(i) {
                self.next = (i + 1) % count;
                return Ok(self.cidr(i));
            }
        }
        Err(CidrError::Exhausted)
    }

    /// Marks `cidr` taken (a Node that has it); false if it is not one of this set's.
    pub fn occupy(&mut self, cidr: &str) -> bool {
        match self.index(cidr) {
            Some(i) => {
                self.used.insert(i);
                true
            }
            None => false,
        }
    }

    /// Frees `cidr` (its Node is gone).
    pub fn release(&mut self, cidr: &str) {
        if let Some(i) = self.index(cidr) {
            self.used.remove(&i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /24s of a /16 in order from the start; occupied ones skipped; a released one handed out
    /// again only after the rest (round robin); exhausted in cidr_set.go's words.
    #[test]
    fn node_cidrs_are_cut_in_order_and_reused_round_robin() {
        let mut set = CidrSet::new("10.244.0.0/16", 24).expect("valid");
        assert_eq!(set.allocate_next().unwrap(), "10.244.0.0/24");
        assert!(set.occupy("10.244.1.0/24"));
        assert_eq!(set.allocate_next().unwrap(), "10.244.2.0/24");
        set.release("10.244.0.0/24");
        assert_eq!(set.allocate_next().unwrap(), "10.244.3.0/24");
        assert!(!set.occupy("10.245.0.0/24"), "outside the cluster CIDR");
        let mut tiny = CidrSet::new("10.0.0.0/23", 24).expect("valid");
        assert_eq!(tiny.allocate_next().unwrap(), "10.0.0.0/24");
        assert_eq!(tiny.allocate_next().unwrap(), "10.0.1.0/24");
        assert_eq!(
            tiny.allocate_next().unwrap_err().to_string(),
            "CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range"
        );
        assert!(CidrSet::new("10.0.0.0/24", 16).is_err());
        assert!(CidrSet::new("10.0.0/16", 24).is_err());
    }
}
