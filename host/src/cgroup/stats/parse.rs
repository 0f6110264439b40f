//! The cgroup files' text, parsed: pure functions of a file's text (its path only names it in
//! errors), so the stats readers above share them with the fuzz targets (`fuzz/`, `cgroup_files`)
//! and their tests, which need no cgroup tree on disk.

use std::collections::BTreeMap;
use std::path::Path;

use dockerlet_messages::stats::{PsiData, PsiStats};

use super::{DeviceIo, StatsError};

/// A count (`memory.current`, `pids.current`, a `key value` line's value): a decimal `u64`.
pub fn parse_u64(path: &Path, text: &str) -> Result<u64, StatsError> {
    text.parse().map_err(|e| StatsError::Parse {
        path: path.to_path_buf(),
        reason: format!("{text:?} is not a count: {e}"),
    })
}

/// A v2 limit file's text (`memory.max`, `memory.swap.max`): `max` is none, else a count.
pub fn parse_max(path: &Path, text: &str) -> Result<Option<u64>, StatsError> {
    match text.trim() {
        "max" => Ok(None),
        t => parse_u64(path, t).map(Some),
    }
}

/// The values of `keys` in a `key value` per line file (`memory.stat`, `cpu.stat`); a key not
/// in the file is 0. Only the wanted lines are parsed, nothing is collected: the stats pass reads
/// this file for every cgroup of the node.
pub fn parse_keys<const N: usize>(path: &Path, text: &str, keys: [&str; N]) -> Result<[u64; N], StatsError> {
    let mut out = [0u64; N];
    for line in text.lines() {
        let Some((k, v)) = line.split_once(' ') else {
            continue;
        };
        if let Some(i) = keys.iter().position(|key| *key == k) {
            out[i] = parse_u64(path, v.trim())?;
        }
    }
    Ok(out)
}

/// A pressure file, parsed by procfs (the same format as `/proc/pressure/*`).
pub fn parse_psi(path: &Path, text: &str) -> Result<PsiStats, StatsError> {
    let parse_err = |e: procfs::ProcError| StatsError::Parse {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let data = |r: procfs::PressureRecord| PsiData {
        total: r.total,
        avg10: f64::from(r.avg10),
        avg60: f64::from(r.avg60),
        avg300: f64::from(r.avg300),
    };
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        // procfs slices the line after its 5-byte `some `/`full ` and panics on a shorter line,
        // or on one whose fifth byte is inside a character (found by the `cgroup_files` fuzz
        // target): those lines are refused before it sees them.
        if !matches!(line.get(..5), Some("some " | "full ")) {
            return Err(StatsError::Parse {
                path: path.to_path_buf(),
                reason: format!("{line:?} is not a pressure record"),
            });
        }
        let record = procfs::parse_pressure_record(line).map_err(parse_err)?;
        if line.starts_with("some") {
            some = Some(data(record));
        } else if line.starts_with("full") {
            full = Some(data(record));
        }
    }
    Ok(PsiStats {
        some: some.unwrap_or_default(),
        full: full.unwrap_or_default(),
    })
}

/// The v1 blkio files of one cgroup, `(path, text)` each: the bytes file
/// (`blkio.throttle.io_service_bytes[_recursive]`) and, if there, the operations file
/// (`blkio.throttle.io_serviced[_recursive]`); per device, in number order, those with no IO
/// left out.
pub fn parse_blkio_v1(bytes: (&Path, &str), ops: Option<(&Path, &str)>) -> Result<Vec<DeviceIo>, StatsError> {
    let mut devices = BTreeMap::new();
    add_blkio_v1(&mut devices, bytes.0, bytes.1, |d, write| {
        if write {
            &mut d.write_bytes
        } else {
            &mut d.read_bytes
        }
    })?;
    if let Some((ops_path, ops)) = ops {
        add_blkio_v1(&mut devices, ops_path, ops, |d, write| {
            if write {
                &mut d.writes
            } else {
                &mut d.reads
            }
        })?;
    }
    Ok(finish(devices))
}

/// Adds the `Read` and `Write` lines of a v1 blkio file (`MAJ:MIN Op value`; the other
/// operations and the closing `Total n` are skipped) to `devices`, into the field `slot` picks
/// for a read (`false`) or a write (`true`).
fn add_blkio_v1(
    devices: &mut BTreeMap<(u32, u32), DeviceIo>,
    path: &Path,
    text: &str,
    slot: fn(&mut DeviceIo, bool) -> &mut u64,
) -> Result<(), StatsError> {
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let (Some(device), Some(op), Some(value), None) = (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let write = match op {
            "Read" => false,
            "Write" => true,
            _ => continue,
        };
        let d = devices.entry(parse_device(path, device)?).or_default();
        *slot(d, write) = parse_u64(path, value)?;
    }
    Ok(())
}

/// v2 `io.stat`: `MAJ:MIN rbytes=… wbytes=… rios=… wios=… dbytes=… dios=…` per device.
pub fn parse_io_stat(path: &Path, text: &str) -> Result<Vec<DeviceIo>, StatsError> {
    let mut devices = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(device) = fields.next() else { continue };
        let (major, minor) = parse_device(path, device)?;
        let mut d = DeviceIo {
            major,
            minor,
            ..DeviceIo::default()
        };
        for field in fields {
            let Some((key, value)) = field.split_once('=') else {
                continue;
            };
            let slot = match key {
                "rbytes" => &mut d.read_bytes,
                "wbytes" => &mut d.write_bytes,
                "rios" => &mut d.reads,
                "wios" => &mut d.writes,
                _ => continue,
            };
            *slot = parse_u64(path, value)?;
        }
        devices.insert((major, minor), d);
    }
    Ok(finish(devices))
}

fn parse_device(path: &Path, device: &str) -> Result<(u32, u32), StatsError> {
    let parsed = device
        .split_once(':')
        .and_then(|(major, minor)| Some((major.parse().ok()?, minor.parse().ok()?)));
    parsed.ok_or_else(|| StatsError::Parse {
        path: path.to_path_buf(),
        reason: format!("{device:?} is not a MAJOR:MINOR device number"),
    })
}

/// The devices in number order, each with its numbers set, those with no IO left out. (Not by
/// the sum of the counts, which overflowed: found by the `cgroup_files` fuzz target.)
fn finish(devices: BTreeMap<(u32, u32), DeviceIo>) -> Vec<DeviceIo> {
    devices
        .into_iter()
        .map(|((major, minor), d)| DeviceIo { major, minor, ..d })
        .filter(|d| [d.read_bytes, d.write_bytes, d.reads, d.writes].iter().any(|n| *n > 0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pressure line too short for procfs' `some `/`full ` prefix, or with a character where
    /// the prefix's space should be, is a parse error, not a panic (the `cgroup_files` fuzz
    /// target's crash input, fuzz/corpus/cgroup_files/crash-pressure-some-alone).
    #[test]
    fn a_pressure_line_without_its_prefix_is_an_error() {
        let path = Path::new("cpu.pressure");
        for text in [
            "some",
            "full\n",
            "some\u{221a}avg10=0",
            "somewhere avg10=1",
            "\nsome avg10=0",
        ] {
            let e = parse_psi(path, text).unwrap_err();
            assert!(e.to_string().contains("is not a pressure record"), "{text:?}: {e}");
        }
        let psi = parse_psi(
            path,
            "some avg10=1.50 avg60=0.25 avg300=0.00 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=678\n",
        )
        .unwrap();
        assert_eq!((psi.some.total, psi.some.avg10, psi.full.total), (12345, 1.5, 678));
    }

    /// Counts whose sum does not fit in a u64 are kept as they are, not an overflow (the
    /// `cgroup_files` fuzz target's crash input, fuzz/corpus/cgroup_files/crash-blkio-sum-overflow).
    #[test]
    fn device_counts_near_the_top_of_u64_are_kept() {
        let max = u64::MAX;
        let io = parse_io_stat(Path::new("io.stat"), &format!("8:0 rbytes={max} wbytes=1 rios={max}\n")).unwrap();
        assert_eq!((io[0].read_bytes, io[0].write_bytes, io[0].reads), (max, 1, max));
        let bytes = format!("8:0 Read {max}\n8:0 Write {max}\n");
        let blkio = parse_blkio_v1((Path::new("bytes"), &bytes), Some((Path::new("ops"), "8:0 Read 1\n"))).unwrap();
        assert_eq!(
            (blkio[0].read_bytes, blkio[0].write_bytes, blkio[0].reads),
            (max, max, 1)
        );
    }
}
