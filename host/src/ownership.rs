//! fsGroup ownership of a volume's files (kubelet's `SetVolumeOwnership`,
//! `pkg/volume/volume_linux.go`). Blocking.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use dockerlet_pod::volume::Ownership;

/// Group read and write, added to files of writable volumes.
const RW_MASK: u32 = 0o660;
/// Group (and owner) read, added to files of read-only volumes.
const RO_MASK: u32 = 0o440;
/// Search, added to directories.
const EXEC_MASK: u32 = 0o110;
/// Set-group-ID, added to directories so new files inherit the group.
const SETGID: u32 = 0o2000;

/// Why ownership could not be applied. Retried with the volume's next set-up.
#[derive(Debug, thiserror::Error)]
#[error("cannot set fsGroup ownership under {}: {source}", path.display())]
pub struct OwnershipError {
    /// The file or directory.
    pub path: std::path::PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// Give every file under `dir` the group `ownership.fs_group` and add group read (and write, unless
/// `read_only`) to its mode; directories also get group search and the set-group-ID bit. Symlinks
/// are re-grouped but never followed or chmod-ed. With `on_root_mismatch`, nothing is done when
/// `dir` already has the group, the permissions and the set-group-ID bit.
pub fn set_volume_ownership(dir: &Path, ownership: &Ownership, read_only: bool) -> Result<(), OwnershipError> {
    if ownership.on_root_mismatch && !requires_change(dir, ownership.fs_group, read_only) {
        return Ok(());
    }
    walk(dir, ownership.fs_group, read_only)
}

fn walk(path: &Path, group: u32, read_only: bool) -> Result<(), OwnershipError> {
    let fail = |source| OwnershipError {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::symlink_metadata(path).map_err(fail)?;
    rustix::fs::chownat(
        rustix::fs::CWD,
        path,
        None,
        Some(rustix::fs::Gid::from_raw(group)),
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .map_err(|e| fail(e.into()))?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mut mask = if read_only { RO_MASK } else { RW_MASK };
    if meta.is_dir() {
        mask |= SETGID | EXEC_MASK;
    }
    let mode = meta.mode() & 0o7777;
    if mode | mask != mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | mask)).map_err(fail)?;
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(fail)? {
            walk(&entry.map_err(fail)?.path(), group, read_only)?;
        }
    }
    Ok(())
}

/// kubelet's `requiresPermissionChange`: the root's group, permissions or set-group-ID bit are not
/// what the walk would make them.
fn requires_change(dir: &Path, group: u32, read_only: bool) -> bool {
    let Ok(meta) = std::fs::metadata(dir) else { return true };
    if meta.gid() != group || !meta.is_dir() {
        return true;
    }
    let wanted = if read_only { RO_MASK } else { RW_MASK } | EXEC_MASK;
    meta.mode() & wanted != wanted || meta.mode() & SETGID == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files get the group and group read; directories setgid; symlinks are not followed (their
    /// target outside the volume keeps its mode).
    #[test]
    fn files_get_the_group_and_group_bits() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: chown to another group needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
        let file = sub.join("f");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o400)).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let o = Ownership {
            fs_group: 1001,
            on_root_mismatch: false,
        };
        set_volume_ownership(dir.path(), &o, true).unwrap();
        let m = std::fs::metadata(&file).unwrap();
        assert_eq!((m.gid(), m.mode() & 0o7777), (1001, 0o440));
        let m = std::fs::metadata(&sub).unwrap();
        assert_eq!((m.gid(), m.mode() & 0o7777), (1001, 0o2750));
        assert_eq!(std::fs::metadata(outside.path()).unwrap().mode() & 0o7777, 0o600);
        set_volume_ownership(dir.path(), &o, false).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o7777, 0o660);
    }

    /// OnRootMismatch skips the walk when the root is already right.
    #[test]
    fn on_root_mismatch_skips_a_correct_root() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: chown to another group needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let o = Ownership {
            fs_group: 2000,
            on_root_mismatch: true,
        };
        set_volume_ownership(dir.path(), &o, false).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().gid(), 2000);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&file, None, Some(0)).unwrap();
        set_volume_ownership(dir.path(), &o, false).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().gid(), 0, "root was right: no walk");
    }
}
