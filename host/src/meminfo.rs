//! `/proc/meminfo`, read once per observation: the one parser behind the node's memory capacity
//! and the `memory.available` eviction signal.

/// The fields of one read of `/proc/meminfo`, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemInfo {
    text: String,
}

impl MemInfo {
    /// Read `/proc/meminfo`; an unreadable file reads as empty (every field 0).
    pub fn read() -> Self {
        Self::parse(std::fs::read_to_string("/proc/meminfo").unwrap_or_default())
    }

    /// Wrap the text of a meminfo file.
    pub fn parse(text: String) -> Self {
        MemInfo { text }
    }

    /// The field `key` (`MemTotal`, `Inactive(file)`, …) in bytes; 0 when absent or not a
    /// number of KiB that fits in bytes (the multiplication overflowed on such a field: found by
    /// the `cgroup_files` fuzz target).
    pub fn bytes(&self, key: &str) -> i64 {
        self.text
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<i64>().ok()?.checked_mul(1024))
            .unwrap_or(0)
    }

    /// `MemTotal`, in bytes.
    pub fn total(&self) -> i64 {
        self.bytes("MemTotal")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fields are read by exact name and converted from KiB.
    #[test]
    fn fields_are_read_by_name_in_bytes() {
        let m = MemInfo::parse("MemTotal:  2048 kB\nMemFree: 1024 kB\nInactive(file):  10 kB\n".into());
        assert_eq!(m.total(), 2048 * 1024);
        assert_eq!(m.bytes("Inactive(file)"), 10 * 1024);
        assert_eq!(m.bytes("Active(file)"), 0);
    }

    /// A field too large to be counted in bytes reads as one that does not parse, 0, not an
    /// overflow (the `cgroup_files` fuzz target's crash input,
    /// fuzz/corpus/cgroup_files/crash-meminfo-overflow).
    #[test]
    fn a_field_too_large_for_bytes_is_zero() {
        let m = MemInfo::parse("::/s  B\nMemAvailable:55555500000000000\nMemTotal: 9007199254740992 kB\n".into());
        assert_eq!(m.bytes("MemAvailable"), 0);
        assert_eq!(m.total(), 0);
        let max = MemInfo::parse(format!("MemTotal: {} kB\n", i64::MAX / 1024));
        assert_eq!(max.total(), i64::MAX / 1024 * 1024);
    }
}
