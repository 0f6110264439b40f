//! kubelet's AtomicWriter (`pkg/volume/util/atomic_writer.go`): the files of a configMap, secret,
//! downwardAPI or projected volume are written into a new timestamped directory
//! (`..2026_12_01_15_04_05.123456789`), a `..data_tmp` symlink to it is renamed over `..data` —
//! one rename is the swap — and the user-visible names are symlinks `<name> -> ..data/<name>`.
//! A reader that resolves `..data` once sees one complete set of files, old or new, never a mix.
//! Blocking file I/O: actors call [`write`] on `spawn_blocking`.
//!
//! Nothing is written outside the volume's directory: a `..data` that does not name a
//! timestamped directory inside it is ignored (never read, never removed), new files go only
//! into a directory this writer just created, and user-visible entries are removed without
//! following them.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use dockerlet_pod::volume::payload::{validate_path, InvalidPath};
use dockerlet_pod::volume::{Ownership, Payload};

use crate::ownership::{set_volume_ownership, OwnershipError};

/// The symlink to the current timestamped directory.
pub const DATA_DIR: &str = "..data";
/// The symlink renamed over [`DATA_DIR`].
const DATA_DIR_TMP: &str = "..data_tmp";

/// Why a volume's files could not be written. Retried with the volume's next set-up; the
/// previous content stays in place.
#[derive(Debug, thiserror::Error)]
pub enum AtomicWriteError {
    /// A payload path the AtomicWriter refuses.
    #[error("{path:?}: {reason}")]
    InvalidPath {
        /// The path.
        path: String,
        /// Why (`invalid path: must not contain '..'`).
        reason: InvalidPath,
    },
    /// The volume's directory is a symlink or not a directory.
    #[error("{}: not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// A file operation failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// `write`, `rename`, `create directory`, …
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// fsGroup ownership could not be applied.
    #[error(transparent)]
    Ownership(#[from] OwnershipError),
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> AtomicWriteError {
    let path = path.to_path_buf();
    move |source| AtomicWriteError::Io { op, path, source }
}

/// Make `dir` hold exactly `payload`, atomically (see the module doc); `ownership` applies the
/// pod's fsGroup as kubelet does for these read-only volumes. Returns whether anything changed:
/// when the current `..data` already holds the same files with the same modes, nothing is
/// written (only missing user-visible symlinks are restored).
pub fn write(dir: &Path, payload: &Payload, ownership: Option<Ownership>) -> Result<bool, AtomicWriteError> {
    for path in payload.keys() {
        validate_path(path).map_err(|reason| AtomicWriteError::InvalidPath {
            path: path.clone(),
            reason,
        })?;
    }
    std::fs::create_dir_all(dir).map_err(io("create directory", dir))?;
    let meta = std::fs::symlink_metadata(dir).map_err(io("inspect", dir))?;
    if !meta.is_dir() {
        return Err(AtomicWriteError::NotADirectory(dir.to_path_buf()));
    }
    let old = current_dir(dir);
    let (up_to_date, old_paths) = match &old {
        Some(name) => compare(&dir.join(name), payload)?,
        None => (false, BTreeSet::new()),
    };
    let to_remove: BTreeSet<String> = old_paths
        .into_iter()
        .filter(|p| !payload.contains_key(p) && !payload.keys().any(|k| k.starts_with(&format!("{p}/"))))
        .collect();
    if up_to_date && to_remove.is_empty() {
        create_user_visible(dir, payload)?;
        return Ok(false);
    }
    let new = new_timestamp_dir(dir)?;
    let new_path = dir.join(&new);
    if let Err(e) = write_files(&new_path, payload) {
        let _ = std::fs::remove_dir_all(&new_path);
        return Err(e);
    }
    if let Some(o) = &ownership {
        set_volume_ownership(dir, o, true)?;
    }
    let tmp = dir.join(DATA_DIR_TMP);
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != ErrorKind::NotFound => return Err(io("remove", &tmp)(e)),
        _ => {}
    }
    std::os::unix::fs::symlink(&new, &tmp).map_err(io("create symlink", &tmp))?;
    let data = dir.join(DATA_DIR);
    std::fs::rename(&tmp, &data).map_err(io("rename", &tmp))?;
    create_user_visible(dir, payload)?;
    for path in to_remove.iter().filter(|p| !p.contains('/')) {
        remove_entry(&dir.join(path))?;
    }
    if let Some(old) = old.filter(|o| *o != new) {
        let old_path = dir.join(old);
        std::fs::remove_dir_all(&old_path).map_err(io("remove", &old_path))?;
    }
    Ok(true)
}

/// The timestamped directory `..data` names, if it is one inside `dir`.
fn current_dir(dir: &Path) -> Option<String> {
    let target = std::fs::read_link(dir.join(DATA_DIR)).ok()?;
    let name = target.to_str()?.to_string();
    let is_timestamp_dir =
        name.starts_with("..") && name != ".." && !name.contains('/') && name != DATA_DIR && name != DATA_DIR_TMP;
    let real_dir = std::fs::symlink_metadata(dir.join(&name)).is_ok_and(|m| m.is_dir());
    (is_timestamp_dir && real_dir).then_some(name)
}

/// Whether `old` holds exactly the payload's files with their contents and modes, and every path
/// (files and directories) it holds.
fn compare(old: &Path, payload: &Payload) -> Result<(bool, BTreeSet<String>), AtomicWriteError> {
    let mut paths = BTreeSet::new();
    list(old, "", &mut paths)?;
    let mut same = true;
    for (path, file) in payload {
        let full = old.join(path);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o777 == file.mode => {
                let content = std::fs::read(&full).map_err(io("read", &full))?;
                same &= content == file.data;
            }
            Ok(_) => same = false,
            Err(e) if e.kind() == ErrorKind::NotFound => same = false,
            Err(e) => return Err(io("inspect", &full)(e)),
        }
    }
    Ok((same, paths))
}

fn list(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) -> Result<(), AtomicWriteError> {
    for entry in std::fs::read_dir(dir).map_err(io("list", dir))? {
        let entry = entry.map_err(io("list", dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        if entry.file_type().map_err(io("inspect", &entry.path()))?.is_dir() {
            list(&entry.path(), &rel, out)?;
        }
        out.insert(rel);
    }
    Ok(())
}

/// A new `..YYYY_MM_DD_HH_MM_SS.<nanoseconds>` directory in `dir`, mode 0755.
fn new_timestamp_dir(dir: &Path) -> Result<String, AtomicWriteError> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    for attempt in 0..1000u32 {
        let name = timestamp_name(now.as_secs() as i64, now.subsec_nanos().wrapping_add(attempt));
        let path = dir.join(&name);
        match std::fs::create_dir(&path) {
            Ok(()) => {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(io("chmod", &path))?;
                return Ok(name);
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io("create directory", &path)(e)),
        }
    }
    Err(io("create directory", dir)(std::io::Error::from(
        ErrorKind::AlreadyExists,
    )))
}

/// kubelet's `..2006_01_02_15_04_05.` prefix (UTC) and a nanosecond suffix.
fn timestamp_name(secs: i64, nanos: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "..{y:04}_{m:02}_{d:02}_{:02}_{:02}_{:02}.{nanos:09}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The payload's files under the fresh directory `root`, with their modes and owners.
fn write_files(root: &Path, payload: &Payload) -> Result<(), AtomicWriteError> {
    for (path, file) in payload {
        let full = root.join(path);
        if let Some(parent) = full.parent() {
            create_dirs(root, parent)?;
        }
        std::fs::write(&full, &file.data).map_err(io("write", &full))?;
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(file.mode)).map_err(io("chmod", &full))?;
        if let Some(uid) = file.owner {
            std::os::unix::fs::lchown(&full, Some(uid), None).map_err(io("chown", &full))?;
        }
    }
    Ok(())
}

/// `mkdir -p` of `dir` below `root`, each new directory 0755.
fn create_dirs(root: &Path, dir: &Path) -> Result<(), AtomicWriteError> {
    if dir == root || dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs(root, parent)?;
    }
    std::fs::create_dir(dir).map_err(io("create directory", dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io("chmod", dir))
}

/// `<name> -> ..data/<name>` for each top-level name of the payload that is missing.
fn create_user_visible(dir: &Path, payload: &Payload) -> Result<(), AtomicWriteError> {
    let tops: BTreeSet<&str> = payload.keys().filter_map(|p| p.split('/').next()).collect();
    for top in tops {
        let link = dir.join(top);
        match std::fs::symlink_metadata(&link) {
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io("inspect", &link)(e)),
        }
        std::os::unix::fs::symlink(Path::new(DATA_DIR).join(top), &link).map_err(io("create symlink", &link))?;
    }
    Ok(())
}

/// Remove a user-visible entry without following it: a symlink or file, or an empty directory.
fn remove_entry(path: &Path) -> Result<(), AtomicWriteError> {
    let result = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match result {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(io("remove", path)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
