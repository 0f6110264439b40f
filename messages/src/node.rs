//! The node's own state: pressure from the eviction signals.

use serde::Serialize;

/// A node pressure condition (kubelet's `pkg/kubelet/eviction/api` signal → condition map).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Pressure {
    /// MemoryPressure.
    Memory,
    /// DiskPressure.
    Disk,
    /// PIDPressure.
    Pid,
}

impl Pressure {
    /// The Node condition type.
    pub fn condition_type(self) -> &'static str {
        match self {
            Pressure::Memory => "MemoryPressure",
            Pressure::Disk => "DiskPressure",
            Pressure::Pid => "PIDPressure",
        }
    }
}

/// An eviction threshold met at the last observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThresholdMet {
    /// kubelet's signal name (`memory.available`).
    pub signal: &'static str,
    /// The observed value (bytes, inodes or PIDs).
    pub observed: i64,
    /// The threshold it fell below.
    pub threshold: i64,
}

/// The node's pressure as last observed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodePressure {
    /// The conditions in force (held for `evictionPressureTransitionPeriod`).
    pub conditions: Vec<Pressure>,
    /// The thresholds met at the last observation.
    pub met: Vec<ThresholdMet>,
}

/// The node's current pressure.
///
/// NodeStatusActor (each heartbeat) → Supervisor → PressureActor.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "actix", derive(actix::Message), rtype(result = "NodePressure"))]
pub struct GetNodePressure;
