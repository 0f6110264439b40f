//! The systemd cgroup driver's side of the pod tree: transient slice units made, sized and
//! stopped through systemd's D-Bus API (`org.freedesktop.systemd1.Manager`), as runc's systemd
//! cgroup manager does for kubelet (`libcontainer/cgroups/systemd`: `StartTransientUnit` with
//! the accounting properties and `DefaultDependencies=no`, the resources as unit properties,
//! `StopUnit` to remove). systemd makes a slice's cgroup directory when it starts the unit, and
//! a slice's parent slices from its name. Blocking: call on `spawn_blocking`.

use std::time::Duration;

use dockerlet_pod::cgroup::{shares_to_weight, PodResourceConfig};
use zbus::zvariant::{OwnedValue, Value};

use super::CgroupVersion;

const DESTINATION: &str = "org.freedesktop.systemd1";
const PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";
/// systemd's answer to `StartTransientUnit` for a unit that is loaded already.
const UNIT_EXISTS: &str = "org.freedesktop.systemd1.UnitExists";
/// systemd's answer for a unit that is not loaded.
const NO_SUCH_UNIT: &str = "org.freedesktop.systemd1.NoSuchUnit";
/// systemd's "no limit" for the byte and count properties.
const INFINITY: u64 = u64::MAX;

/// Why systemd did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum SystemdError {
    /// The system bus or systemd on it could not be reached.
    #[error("cannot reach systemd on the system D-Bus (needed by the systemd cgroup driver): {0}")]
    Connect(#[source] Box<zbus::Error>),
    /// A call about one unit failed.
    #[error("systemd {method} {unit}: {source}")]
    Call {
        /// `StartTransientUnit`, `SetUnitProperties`, `StopUnit`.
        method: &'static str,
        /// The unit.
        unit: String,
        /// What systemd (or the bus) answered.
        #[source]
        source: Box<zbus::Error>,
    },
}

/// A unit property: its name and value (`a(sv)` on the bus).
pub type Property = (&'static str, OwnedValue);

/// What the pod tree asks of systemd; [`SystemdSlices`] over D-Bus, a recorder in tests.
pub trait SliceManager: Send + Sync + std::fmt::Debug {
    /// Start the transient slice `unit` with `properties`, or, when it is loaded already, set
    /// them on it.
    fn ensure(&self, unit: &str, properties: Vec<Property>) -> Result<(), SystemdError>;
    /// Set `properties` on the running `unit` (runtime only).
    fn set(&self, unit: &str, properties: Vec<Property>) -> Result<(), SystemdError>;
    /// Stop `unit` (a transient unit then goes away); a unit that is not loaded is gone.
    fn stop(&self, unit: &str) -> Result<(), SystemdError>;
}

/// systemd over the system bus.
#[derive(Debug)]
pub struct SystemdSlices {
    connection: zbus::blocking::Connection,
}

impl SystemdSlices {
    /// Connect to the system bus (`/run/dbus/system_bus_socket`).
    pub fn connect() -> Result<Self, SystemdError> {
        let connection = zbus::blocking::Connection::system().map_err(|e| SystemdError::Connect(Box::new(e)))?;
        Ok(Self { connection })
    }

    /// A Manager method call about `unit`; its errors name the method and the unit.
    fn call(
        &self,
        method: &'static str,
        unit: &str,
        result: zbus::Result<zbus::message::Message>,
    ) -> Result<(), SystemdError> {
        result.map(|_| ()).map_err(|source| SystemdError::Call {
            method,
            unit: unit.to_string(),
            source: Box::new(source),
        })
    }

    fn manager<B>(&self, method: &'static str, body: &B) -> zbus::Result<zbus::message::Message>
    where
        B: serde::ser::Serialize + zbus::zvariant::DynamicType,
    {
        self.connection
            .call_method(Some(DESTINATION), PATH, Some(MANAGER), method, body)
    }
}

fn is_dbus_error(e: &SystemdError, name: &str) -> bool {
    matches!(e, SystemdError::Call { source, .. } if matches!(source.as_ref(), zbus::Error::MethodError(n, _, _) if n.as_str() == name))
}

impl SliceManager for SystemdSlices {
    fn ensure(&self, unit: &str, properties: Vec<Property>) -> Result<(), SystemdError> {
        let mut all = slice_properties(unit);
        all.extend(
            properties
                .iter()
                .map(|(k, v)| (*k, v.try_clone().expect("plain values clone"))),
        );
        let aux: Vec<(&str, Vec<Property>)> = Vec::new();
        let started = self.manager("StartTransientUnit", &(unit, "replace", all, aux));
        match self.call("StartTransientUnit", unit, started) {
            Ok(()) => Ok(()),
            // Made by an earlier run of the agent (or still stopping): size it as it is.
            Err(e) if is_dbus_error(&e, UNIT_EXISTS) => self.set(unit, properties),
            Err(e) => Err(e),
        }
    }

    fn set(&self, unit: &str, properties: Vec<Property>) -> Result<(), SystemdError> {
        if properties.is_empty() {
            return Ok(());
        }
        let set = self.manager("SetUnitProperties", &(unit, true, properties));
        self.call("SetUnitProperties", unit, set)
    }

    fn stop(&self, unit: &str) -> Result<(), SystemdError> {
        let stopped = self.manager("StopUnit", &(unit, "replace"));
        match self.call("StopUnit", unit, stopped) {
            Err(e) if is_dbus_error(&e, NO_SUCH_UNIT) => Ok(()),
            other => other,
        }
    }
}

fn value(v: impl Into<Value<'static>>) -> OwnedValue {
    OwnedValue::try_from(v.into()).expect("plain values convert")
}

/// One numeric unit property (`MemoryMax`, `TasksMax`, …).
pub fn property(name: &'static str, v: u64) -> Property {
    (name, value(v))
}

/// What runc sets on every slice it starts: a description, no default dependencies (a slice the
/// agent makes must not be ordered against shutdown targets), and every accounting on so the
/// controllers are enabled down the tree.
fn slice_properties(unit: &str) -> Vec<Property> {
    vec![
        ("Description", value(format!("libcontainer container {unit}"))),
        ("DefaultDependencies", value(false)),
        ("MemoryAccounting", value(true)),
        ("CPUAccounting", value(true)),
        ("IOAccounting", value(true)),
        ("TasksAccounting", value(true)),
    ]
}

/// systemd's CPU quota: per second of wall time, rounded up to 10 ms as systemd rounds it
/// (runc's `addCpuQuota`).
pub fn cpu_quota_per_sec_usec(quota: i64, period: u64) -> u64 {
    if quota <= 0 || period == 0 {
        return INFINITY;
    }
    let per_sec = (quota as u64).saturating_mul(1_000_000) / period;
    per_sec.div_ceil(10_000) * 10_000
}

/// The unit properties of a pod cgroup's limits, for cgroup v1 (`CPUShares`, `MemoryLimit`) or
/// v2 (`CPUWeight`, `MemoryMax`); an absent limit is systemd's infinity.
pub fn resource_properties(version: CgroupVersion, config: &PodResourceConfig) -> Vec<Property> {
    let quota = match (config.cpu_quota, config.cpu_period) {
        (Some(quota), Some(period)) => cpu_quota_per_sec_usec(quota, period),
        _ => INFINITY,
    };
    let memory = config
        .memory_limit
        .and_then(|m| u64::try_from(m).ok())
        .unwrap_or(INFINITY);
    let tasks = config
        .pids_limit
        .and_then(|p| u64::try_from(p).ok())
        .unwrap_or(INFINITY);
    let mut properties = shares_properties(version, config.cpu_shares);
    properties.push(("CPUQuotaPerSecUSec", value(quota)));
    properties.push(match version {
        CgroupVersion::V1 => ("MemoryLimit", value(memory)),
        CgroupVersion::V2 => ("MemoryMax", value(memory)),
    });
    properties.push(("TasksMax", value(tasks)));
    properties
}

/// The CPU weight property alone (the burstable slice's share of its pods' requests).
pub fn shares_properties(version: CgroupVersion, shares: u64) -> Vec<Property> {
    match version {
        CgroupVersion::V1 => vec![("CPUShares", value(shares))],
        CgroupVersion::V2 => vec![("CPUWeight", value(shares_to_weight(shares)))],
    }
}

/// How long a started slice's cgroup directory may take to appear.
pub const REALIZE_WAIT: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    fn get(props: &[Property], name: &str) -> u64 {
        let (_, v) = props.iter().find(|(n, _)| *n == name).expect(name);
        u64::try_from(v).expect("a u64")
    }

    /// runc's conversions: quota per second rounded up to 10 ms, shares to weight on v2,
    /// infinity for what is not limited.
    #[test]
    fn limits_become_unit_properties_as_runc_sets_them() {
        assert_eq!(cpu_quota_per_sec_usec(50_000, 100_000), 500_000);
        assert_eq!(cpu_quota_per_sec_usec(1_000, 100_000), 10_000);
        assert_eq!(cpu_quota_per_sec_usec(1_500, 100_000), 20_000);
        assert_eq!(cpu_quota_per_sec_usec(-1, 100_000), u64::MAX);
        let config = PodResourceConfig {
            cpu_shares: 1024,
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            memory_limit: Some(100 << 20),
            pids_limit: None,
        };
        let v2 = resource_properties(CgroupVersion::V2, &config);
        assert_eq!(get(&v2, "CPUWeight"), 39);
        assert_eq!(get(&v2, "CPUQuotaPerSecUSec"), 500_000);
        assert_eq!(get(&v2, "MemoryMax"), 100 << 20);
        assert_eq!(get(&v2, "TasksMax"), u64::MAX);
        let v1 = resource_properties(CgroupVersion::V1, &PodResourceConfig::default());
        assert_eq!(get(&v1, "CPUShares"), 0);
        assert_eq!(get(&v1, "MemoryLimit"), u64::MAX);
        assert_eq!(get(&v1, "CPUQuotaPerSecUSec"), u64::MAX);
    }
}
