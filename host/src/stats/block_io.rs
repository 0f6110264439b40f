//! Block IO of the root cgroup, the pod cgroups and the containers, for `/metrics/cadvisor` only
//! (no Summary type has it): each cgroup read again at most every [`BLOCK_IO_REFRESH`].

use std::time::Instant;

use dockerlet_messages::stats::{CgroupBlockIo, ContainerRef, DeviceBlockIo};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{Collector, BLOCK_IO_REFRESH};
use crate::cgroup::stats::{self as cgstats, StatsError};
use crate::cgroup::CgroupLayout;
use crate::node_stats;

impl Collector {
    /// The block IO of the root cgroup, each pod cgroup and each container in `refs`, each read
    /// again when its last reading is older than [`BLOCK_IO_REFRESH`]; readings of cgroups no
    /// longer listed are dropped.
    pub(super) fn block_io(&mut self, refs: &[ContainerRef], now: Instant) -> Vec<CgroupBlockIo> {
        let Some(layout) = self.paths.layout.clone() else {
            return Vec::new();
        };
        let mut cgroups: Vec<&str> = vec!["/"];
        cgroups.extend(refs.iter().map(|r| r.pod_cgroup.as_str()).filter(|c| !c.is_empty()));
        cgroups.extend(refs.iter().map(|r| r.cgroup.as_str()));
        cgroups.sort_unstable();
        cgroups.dedup();
        let mut out = Vec::new();
        for cgroup in &cgroups {
            let fresh = self
                .block_io
                .get(*cgroup)
                .is_some_and(|(_, at)| now.duration_since(*at) < BLOCK_IO_REFRESH);
            if !fresh {
                let reading = self.read_block_io(&layout, cgroup);
                self.block_io.insert(cgroup.to_string(), (reading, now));
            }
            if let Some((Some(io), _)) = self.block_io.get(*cgroup) {
                out.push(io.clone());
            }
        }
        self.block_io.retain(|k, _| cgroups.binary_search(&k.as_str()).is_ok());
        out
    }

    fn read_block_io(&mut self, layout: &CgroupLayout, cgroup: &str) -> Option<CgroupBlockIo> {
        let time = Time(Timestamp::now());
        let devices = match cgstats::read_block_io(layout, cgroup) {
            Ok(devices) => devices?,
            Err(e @ StatsError::Gone { .. }) => {
                tracing::debug!(cgroup, error = %e, "cgroup gone; block IO sample skipped");
                return None;
            }
            Err(e) => {
                self.warn_once(
                    &format!("blkio:{cgroup}"),
                    &format!("block IO of cgroup {cgroup} unreadable ({e}); sample skipped"),
                );
                return None;
            }
        };
        let devices = devices
            .into_iter()
            .map(|d| DeviceBlockIo {
                device: self
                    .devices
                    .entry((d.major, d.minor))
                    .or_insert_with(|| node_stats::block_device_name(d.major, d.minor).unwrap_or_default())
                    .clone(),
                read_bytes: d.read_bytes,
                write_bytes: d.write_bytes,
                reads: d.reads,
                writes: d.writes,
            })
            .collect();
        Some(CgroupBlockIo {
            cgroup: cgroup.to_string(),
            time,
            devices,
        })
    }
}
