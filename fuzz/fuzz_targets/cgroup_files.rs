//! The node's cgroup and memory files, parsed from their text: `dockerlet_host::cgroup::stats::parse`
//! (`memory.stat` and `cpu.stat` keys, counts, `memory.max`, pressure files, v2 `io.stat`, v1
//! blkio), `CgroupLayout::from_mountinfo`, `CgroupPath::from_proc_cgroup` and `MemInfo`.
//! Every parser reads the whole input; v1 blkio reads it as its two files, split at a NUL byte.
#![no_main]

use std::path::Path;

use dockerlet_host::cgroup::stats::parse::{
    parse_blkio_v1, parse_io_stat, parse_keys, parse_max, parse_psi, parse_u64,
};
use dockerlet_host::cgroup::stats::{CgroupPath, DeviceIo};
use dockerlet_host::cgroup::CgroupLayout;
use dockerlet_host::meminfo::MemInfo;
use libfuzzer_sys::fuzz_target;

/// Devices come out in number order, once each, each with some IO.
fn check_devices(devices: &[DeviceIo]) {
    assert!(devices
        .windows(2)
        .all(|w| (w[0].major, w[0].minor) < (w[1].major, w[1].minor)));
    assert!(devices
        .iter()
        .all(|d| d.read_bytes > 0 || d.write_bytes > 0 || d.reads > 0 || d.writes > 0));
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("/sys/fs/cgroup/fuzz/file");
    let _ = parse_u64(path, text.trim());
    if let Ok(Some(max)) = parse_max(path, text) {
        assert_eq!(parse_u64(path, text.trim()).ok(), Some(max));
    }
    let _ = parse_keys(
        path,
        text,
        ["inactive_file", "anon", "pgfault", "pgmajfault", "file", "file_mapped"],
    );
    let _ = parse_keys(
        path,
        text,
        [
            "usage_usec",
            "user_usec",
            "system_usec",
            "nr_periods",
            "nr_throttled",
            "throttled_usec",
        ],
    );
    let _ = parse_psi(path, text);
    match parse_io_stat(path, text) {
        Ok(devices) => check_devices(&devices),
        Err(e) => drop(e.to_string()),
    }
    let (bytes, ops) = match text.split_once('\0') {
        Some((bytes, ops)) => (bytes, Some((path, ops))),
        None => (text, None),
    };
    match parse_blkio_v1((path, bytes), ops) {
        Ok(devices) => check_devices(&devices),
        Err(e) => drop(e.to_string()),
    }
    if let Ok(layout) = CgroupLayout::from_mountinfo(text) {
        let _ = layout.dir("memory", "/kubepods");
        let _ = layout.hierarchies();
    }
    let cgroup = CgroupPath::from_proc_cgroup(text);
    let _ = (cgroup.id(), cgroup.key());
    let meminfo = MemInfo::parse(text.to_string());
    let _ = (
        meminfo.total(),
        meminfo.bytes("MemAvailable"),
        meminfo.bytes("Inactive(file)"),
    );
});
