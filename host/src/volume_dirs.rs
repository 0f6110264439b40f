//! Volume directories on the node: what a container's mounts need before it is created
//! (kubelet's `pkg/volume/emptydir` and `pkg/volume/hostpath` SetUp, the directories of the
//! atomic-writer volumes, subPath binds) and the removal of a pod's directory with every mount
//! under it. Blocking file I/O: actors call these on `spawn_blocking`.
//!
//! Mounts (tmpfs, subPath binds) are made in the agent's mount namespace; Docker sees them when it
//! shares that namespace (or mount propagation from it), as kubelet needs of its runtime.

use std::ffi::CString;
use std::io::ErrorKind;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use dockerlet_pod::volume::{AtomicKind, Medium, Mount, Ownership, SubPath, VolumeError, VolumeSource};
use rustix::fs::{Mode, OFlags};
use rustix::mount::{MountFlags, UnmountFlags};

use crate::ownership::set_volume_ownership;

fn config_error(field: String, reason: impl ToString) -> VolumeError {
    VolumeError {
        field,
        reason: reason.to_string(),
    }
}

/// Create what `mounts` need on the node: emptyDir directories (mode 0777; a tmpfs for
/// `medium: Memory`; the pod's fsGroup applied), `…OrCreate` hostPaths, a check that configMap,
/// secret, downwardAPI and projected volumes were written ([`write_atomic_volume`]), and subPaths: created inside their volume when
/// missing, resolved through symlinks, refused when they resolve outside the volume, and bound at
/// [`SubPath::bind_at`] so the container gets the path that was checked. hostPath `type` checks
/// happen here, as kubelet does them at mount.
pub fn prepare(mounts: &[Mount], ownership: Option<Ownership>) -> Result<(), VolumeError> {
    for m in mounts {
        let volume_field = || format!("volume {:?}", m.volume);
        match &m.source {
            VolumeSource::EmptyDir { dir, medium, mode } => {
                set_up_empty_dir(dir, *medium, *mode, ownership).map_err(|e| config_error(volume_field(), e))?;
            }
            VolumeSource::Atomic { dir, .. } => {
                // Written before any container starts (write_atomic_volume); never bind an empty
                // directory in its place.
                if std::fs::symlink_metadata(dir.join(crate::atomic_writer::DATA_DIR)).is_err() {
                    return Err(config_error(
                        volume_field(),
                        "volume is not set up yet: its files were not written",
                    ));
                }
            }
            VolumeSource::HostPath { path, kind } => {
                prepare_host_path(path, kind).map_err(|e| config_error(volume_field(), e))?;
            }
        }
        if let Some(sub) = &m.sub_path {
            // kubelet's wording: "failed to prepare subPath for volumeMount …" (its tests look
            // for "subPath" in the message).
            bind_sub_path(m.source.path(), sub).map_err(|e| match e {
                VolumeDirError::SubPathOutsideVolume { .. } => config_error(m.field.clone(), e),
                other => config_error(
                    m.field.clone(),
                    format!("failed to prepare subPath {:?}: {other}", sub.path),
                ),
            })?;
        }
    }
    Ok(())
}

/// Why a volume directory could not be set up or removed. Retried at the container's next start
/// attempt (set-up) or the pod's next teardown attempt (removal).
#[derive(Debug, thiserror::Error)]
pub enum VolumeDirError {
    /// A file operation failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// `create directory`, `mount tmpfs on`, `unmount`, …
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// fsGroup ownership could not be applied.
    #[error(transparent)]
    Ownership(#[from] crate::ownership::OwnershipError),
    /// A volume's files could not be written.
    #[error(transparent)]
    Write(#[from] crate::atomic_writer::AtomicWriteError),
    /// A subPath that resolves outside its volume (kubelet's CVE-2017-1002101 check).
    #[error("subPath {sub:?} resolves to {}, outside of the volume {}", resolved.display(), volume.display())]
    SubPathOutsideVolume {
        /// The subPath.
        sub: String,
        /// Where it resolves.
        resolved: PathBuf,
        /// The volume's directory.
        volume: PathBuf,
    },
    /// Mounts under the pod's directory are still there after unmounting: nothing is removed,
    /// so no file behind a bind mount is deleted.
    #[error("still mounted under the pod's directory: {0:?}")]
    StillMounted(Vec<PathBuf>),
}

fn io_error(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> VolumeDirError {
    let path = path.to_path_buf();
    move |source| VolumeDirError::Io { op, path, source }
}

/// kubelet's emptyDir SetUp: the directory with `mode` (0777 unless the spec says; set
/// explicitly, whatever the agent's umask), a tmpfs on it for `Memory` (once: an existing tmpfs
/// mount is kept; its root keeps tmpfs's 1777), then the fsGroup (kubelet passes no
/// fsGroupChangePolicy).
pub fn set_up_empty_dir(
    dir: &Path,
    medium: Medium,
    mode: u32,
    ownership: Option<Ownership>,
) -> Result<(), VolumeDirError> {
    let mut fresh = std::fs::symlink_metadata(dir).is_err();
    std::fs::create_dir_all(dir).map_err(io_error("create directory", dir))?;
    let meta = std::fs::symlink_metadata(dir).map_err(io_error("inspect", dir))?;
    // Only the permission bits are compared (kubelet's `Perm()`): the sticky bit of a tmpfs root
    // and the set-group-ID bit of an fsGroup volume stay.
    if meta.mode() & 0o777 != mode & 0o777 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).map_err(io_error("chmod", dir))?;
    }
    if let Medium::Memory { size_limit } = medium {
        fresh |= mount_tmpfs(dir, size_limit)?;
    }
    // kubelet sets a volume up once per pod; a container's restart does not re-own its files.
    if let Some(o) = ownership.as_ref().filter(|_| fresh) {
        set_volume_ownership(dir, o, false)?;
    }
    Ok(())
}

/// Set up a configMap, secret, downwardAPI or projected volume and write its files: the
/// directory (a tmpfs for secret and projected volumes, mounted before anything is written so
/// it never hides what was written) and then `payload` through the atomic writer with the pod's
/// fsGroup. Returns whether the files changed. Call it before the pod's containers start and
/// again to refresh.
pub fn write_atomic_volume(
    dir: &Path,
    kind: AtomicKind,
    payload: &dockerlet_pod::volume::Payload,
    ownership: Option<Ownership>,
) -> Result<bool, VolumeDirError> {
    set_up_atomic_dir(dir, kind)?;
    Ok(crate::atomic_writer::write(dir, payload, ownership)?)
}

/// The directory of a configMap, secret, downwardAPI or projected volume (kubelet wraps them in an
/// emptyDir: on disk for configMap and downwardAPI, tmpfs for secret and projected); its files
/// come from `atomic_writer::write`.
pub fn set_up_atomic_dir(dir: &Path, kind: AtomicKind) -> Result<(), VolumeDirError> {
    std::fs::create_dir_all(dir).map_err(io_error("create directory", dir))?;
    if matches!(kind, AtomicKind::Secret | AtomicKind::Projected) {
        mount_tmpfs(dir, None)?;
    } else {
        // The on-disk emptyDir kubelet wraps them in has mode 0777 (its setgid bit, once an
        // fsGroup set it, stays).
        let mode = std::fs::symlink_metadata(dir).map_err(io_error("inspect", dir))?.mode();
        if mode & 0o777 != 0o777 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode((mode & 0o7000) | 0o777))
                .map_err(io_error("chmod", dir))?;
        }
    }
    Ok(())
}

/// Mount a tmpfs (`size=` when given) on `dir`, unless one is already mounted there; whether it
/// mounted one.
fn mount_tmpfs(dir: &Path, size: Option<u64>) -> Result<bool, VolumeDirError> {
    let real = std::fs::canonicalize(dir).map_err(io_error("resolve", dir))?;
    if mount_points()
        .map_err(io_error("read mounts of", dir))?
        .iter()
        .any(|m| m.path == real && m.fs_type == "tmpfs")
    {
        return Ok(false);
    }
    let data = size.map(|s| CString::new(format!("size={s}")).unwrap_or_default());
    rustix::mount::mount("tmpfs", &real, "tmpfs", MountFlags::empty(), data.as_deref())
        .map(|()| true)
        .map_err(|e| io_error("mount tmpfs on", dir)(e.into()))
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MountPoint {
    path: PathBuf,
    fs_type: String,
}

/// The mounts of this process's mount namespace.
fn mount_points() -> std::io::Result<Vec<MountPoint>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(text.lines().filter_map(parse_mountinfo_line).collect())
}

/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw` → (`/mnt2`, `ext3`); the
/// mount point's `\040`-style escapes decoded.
fn parse_mountinfo_line(line: &str) -> Option<MountPoint> {
    let mut fields = line.split(' ');
    let path = fields.nth(4)?;
    let fs_type = fields.skip_while(|f| *f != "-").nth(1)?;
    Some(MountPoint {
        path: PathBuf::from(unescape_octal(path)),
        fs_type: fs_type.to_string(),
    })
}

fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b)) {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Remove a pod's directory: first unmount everything mounted under it (tmpfs emptyDirs and
/// secret volumes, subPath binds), deepest first, then remove it. If a mount stays, nothing is
/// removed. A missing directory is no error.
pub fn remove_pod_dir(dir: &Path) -> Result<(), VolumeDirError> {
    let dir = match std::fs::canonicalize(dir) {
        Ok(d) => d,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error("resolve", dir)(e)),
    };
    let under = |d: &Path| -> Result<Vec<PathBuf>, VolumeDirError> {
        let mut paths: Vec<PathBuf> = mount_points()
            .map_err(io_error("read mounts of", d))?
            .into_iter()
            .map(|m| m.path)
            .filter(|p| p.starts_with(d))
            .collect();
        paths.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        paths.dedup();
        Ok(paths)
    };
    for path in under(&dir)? {
        // A mount stacked twice on one point needs two unmounts; the loop below checks.
        while rustix::mount::unmount(&path, UnmountFlags::empty()).is_ok() {}
    }
    let left = under(&dir)?;
    if !left.is_empty() {
        for path in &left {
            let _ = rustix::mount::unmount(path, UnmountFlags::DETACH);
        }
        let left = under(&dir)?;
        if !left.is_empty() {
            return Err(VolumeDirError::StillMounted(left));
        }
    }
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(io_error("remove", &dir)(e)),
        _ => Ok(()),
    }
}

/// kubelet's subPath preparation (`pkg/volume/util/subpath/subpath_linux.go`): create a missing
/// subPath inside the volume (directories with the volume's mode), resolve it through symlinks,
/// refuse it when it leaves the volume, open the result component by component without following
/// symlinks, and bind that open file at `sub.bind_at`.
pub fn bind_sub_path(volume: &Path, sub: &SubPath) -> Result<(), VolumeDirError> {
    let base = std::fs::canonicalize(volume).map_err(io_error("resolve", volume))?;
    let wanted = base.join(&sub.path);
    if std::fs::symlink_metadata(&wanted).is_err() {
        safe_make_dir(&base, &sub.path)?;
    }
    let resolved = std::fs::canonicalize(&wanted).map_err(io_error("resolve", &wanted))?;
    let relative = resolved
        .strip_prefix(&base)
        .map_err(|_| VolumeDirError::SubPathOutsideVolume {
            sub: sub.path.clone(),
            resolved: resolved.clone(),
            volume: base.clone(),
        })?
        .to_path_buf();
    let fd = open_no_follow(&base, &relative)?;
    let is_dir = rustix::fs::fstat(&fd)
        .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory)
        .map_err(|e| io_error("inspect", &resolved)(e.into()))?;
    let target = &sub.bind_at;
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(io_error("create directory", parent))?;
    }
    // A bind left by an earlier start of the container goes; this start binds what it checked.
    let real_target = std::fs::canonicalize(target.parent().unwrap_or(target))
        .map(|p| p.join(target.file_name().unwrap_or_default()))
        .map_err(io_error("resolve", target))?;
    while mount_points()
        .map_err(io_error("read mounts of", target))?
        .iter()
        .any(|m| m.path == real_target)
    {
        rustix::mount::unmount(target, UnmountFlags::DETACH).map_err(|e| io_error("unmount", target)(e.into()))?;
    }
    match std::fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() == is_dir && !m.file_type().is_symlink() => {}
        Ok(m) => {
            if m.is_dir() {
                std::fs::remove_dir(target)
            } else {
                std::fs::remove_file(target)
            }
            .map_err(io_error("remove", target))?;
            create_target(target, is_dir)?;
        }
        Err(_) => create_target(target, is_dir)?,
    }
    let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::mount::mount_bind(proc_path.as_str(), target).map_err(|e| io_error("bind subPath at", target)(e.into()))
}

fn create_target(target: &Path, dir: bool) -> Result<(), VolumeDirError> {
    if dir {
        std::fs::create_dir(target).map_err(io_error("create directory", target))
    } else {
        std::fs::File::create(target)
            .map(drop)
            .map_err(io_error("create file", target))
    }
}

/// Open `base/relative` one component at a time, never following a symlink (`O_PATH|O_NOFOLLOW`):
/// a symlink swapped in after the path was resolved fails the open instead of leading out.
fn open_no_follow(base: &Path, relative: &Path) -> Result<OwnedFd, VolumeDirError> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = rustix::fs::open(base, flags | OFlags::DIRECTORY, Mode::empty())
        .map_err(|e| io_error("open", base)(e.into()))?;
    let mut at = base.to_path_buf();
    for c in relative.components() {
        let Component::Normal(name) = c else { continue };
        at.push(name);
        let next = rustix::fs::openat(&fd, name, flags, Mode::empty()).map_err(|e| io_error("open", &at)(e.into()))?;
        let st = rustix::fs::fstat(&next).map_err(|e| io_error("inspect", &at)(e.into()))?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink {
            return Err(io_error("open", &at)(std::io::Error::other(
                "is a symlink (changed while resolving)",
            )));
        }
        fd = next;
    }
    Ok(fd)
}

/// kubelet's `SafeMakeDir`: create `sub` inside `base`, the existing part resolved and checked
/// to stay inside, each new directory created with `mkdirat` under an open parent (no symlink
/// followed) and given the volume's mode.
fn safe_make_dir(base: &Path, sub: &str) -> Result<(), VolumeDirError> {
    let mode = std::fs::metadata(base).map_err(io_error("inspect", base))?.mode() & 0o7777;
    let components: Vec<&str> = sub.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    // The longest existing prefix, resolved.
    let mut existing = 0;
    while existing < components.len() && std::fs::symlink_metadata(base.join(components[..=existing].join("/"))).is_ok()
    {
        existing += 1;
    }
    let prefix = base.join(components[..existing].join("/"));
    let resolved = std::fs::canonicalize(&prefix).map_err(io_error("resolve", &prefix))?;
    let relative = resolved
        .strip_prefix(base)
        .map_err(|_| VolumeDirError::SubPathOutsideVolume {
            sub: sub.to_string(),
            resolved: resolved.clone(),
            volume: base.to_path_buf(),
        })?;
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = rustix::fs::open(base, dir_flags, Mode::empty()).map_err(|e| io_error("open", base)(e.into()))?;
    let mut at = base.to_path_buf();
    for c in relative.components() {
        let Component::Normal(name) = c else { continue };
        at.push(name);
        fd = rustix::fs::openat(&fd, name, dir_flags, Mode::empty()).map_err(|e| io_error("open", &at)(e.into()))?;
    }
    for name in &components[existing..] {
        at.push(name);
        match rustix::fs::mkdirat(&fd, *name, Mode::from_raw_mode(mode & 0o777)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(io_error("create directory", &at)(e.into())),
        }
        fd = rustix::fs::openat(&fd, *name, dir_flags, Mode::empty()).map_err(|e| io_error("open", &at)(e.into()))?;
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(|e| io_error("chmod", &at)(e.into()))?;
    }
    Ok(())
}

/// Why a hostPath cannot be mounted. Retried at the container's next start attempt.
#[derive(Debug, thiserror::Error)]
pub enum HostPathError {
    /// The path exists but is not of the `type` asked for (or does not exist).
    #[error("hostPath type check failed: {} is not {what}", path.display())]
    WrongType {
        /// The path.
        path: std::path::PathBuf,
        /// `a directory`, `a file`, …
        what: &'static str,
    },
    /// A `…OrCreate` path could not be created.
    #[error("cannot create {}: {source}", path.display())]
    CreateFailed {
        /// The path.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A `type` kubelet does not know.
    #[error("unsupported hostPath type {0:?}")]
    UnsupportedType(String),
}

/// kubelet's hostPath type checks; `…OrCreate` types create the path.
pub fn prepare_host_path(path: &Path, kind: &str) -> Result<(), HostPathError> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(path);
    let wrong = |what: &'static str| {
        Err(HostPathError::WrongType {
            path: path.to_path_buf(),
            what,
        })
    };
    let create_failed = |at: &Path| {
        let at = at.to_path_buf();
        move |source| HostPathError::CreateFailed { path: at, source }
    };
    match kind {
        "" => Ok(()),
        "DirectoryOrCreate" => std::fs::create_dir_all(path).map_err(create_failed(path)),
        "FileOrCreate" => {
            if meta.is_err() {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(create_failed(parent))?;
                }
                std::fs::File::create(path).map_err(create_failed(path))?;
            }
            Ok(())
        }
        "Directory" if meta.as_ref().is_ok_and(|m| m.is_dir()) => Ok(()),
        "Directory" => wrong("a directory"),
        "File" if meta.as_ref().is_ok_and(|m| m.is_file()) => Ok(()),
        "File" => wrong("a file"),
        "Socket" if meta.as_ref().is_ok_and(|m| m.file_type().is_socket()) => Ok(()),
        "Socket" => wrong("a socket"),
        "CharDevice" if meta.as_ref().is_ok_and(|m| m.file_type().is_char_device()) => Ok(()),
        "CharDevice" => wrong("a character device"),
        "BlockDevice" if meta.as_ref().is_ok_and(|m| m.file_type().is_block_device()) => Ok(()),
        "BlockDevice" => wrong("a block device"),
        other => Err(HostPathError::UnsupportedType(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_pod::testing::{mount, pod};
    use dockerlet_pod::volume::mounts;
    use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, HostPathVolumeSource, Volume};

    /// emptyDir directories and subPaths are created on demand.
    #[test]
    fn empty_dirs_and_sub_paths_are_created() {
        let root = tempfile::tempdir().unwrap();
        let v = Volume {
            name: "cache".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        };
        let p = pod(vec![v], vec![mount("cache", "/cache", false, Some("sub"))]);
        let m = mounts(
            root.path(),
            &p,
            &p.spec.as_ref().unwrap().containers[0],
            &[],
            &Default::default(),
        )
        .unwrap();
        if let Err(e) = prepare(&m, None) {
            assert!(!rustix::process::geteuid().is_root(), "{e}");
            eprintln!("skipped: subPath binds need root: {e}");
            return;
        }
        let dir = root.path().join("pods/u1/volumes/kubernetes.io~empty-dir/cache");
        assert!(dir.join("sub").is_dir());
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o7777, 0o777);
        remove_pod_dir(&root.path().join("pods/u1")).unwrap();
        assert!(!root.path().join("pods/u1").exists());
    }

    /// hostPath `type: Directory` fails at mount time when the path is missing.
    #[test]
    fn host_path_types_are_checked() {
        let root = tempfile::tempdir().unwrap();
        let v = Volume {
            name: "d".into(),
            host_path: Some(HostPathVolumeSource {
                path: "/nonexistent/dockerlet".into(),
                type_: Some("Directory".into()),
            }),
            ..Default::default()
        };
        let p = pod(vec![v], vec![mount("d", "/d", false, None)]);
        let m = mounts(
            root.path(),
            &p,
            &p.spec.as_ref().unwrap().containers[0],
            &[],
            &Default::default(),
        )
        .unwrap();
        let err = prepare(&m, None).unwrap_err();
        assert!(err.to_string().contains("is not a directory"), "{err}");
    }

    fn mounted(path: &Path) -> Option<MountPoint> {
        mount_points().unwrap().into_iter().rev().find(|m| m.path == path)
    }

    /// `medium: Memory` mounts a tmpfs of `sizeLimit` on a 0777 directory (idempotently);
    /// remove_pod_dir unmounts it before removing the pod's directory.
    #[test]
    fn memory_empty_dir_is_a_sized_tmpfs_removed_with_the_pod() {
        let root = tempfile::tempdir().unwrap();
        let pod = root.path().join("pods/u1");
        let dir = pod.join("volumes/kubernetes.io~empty-dir/shm");
        let medium = Medium::Memory {
            size_limit: Some(10 << 20),
        };
        if let Err(e) = set_up_empty_dir(&dir, medium, 0o777, None) {
            eprintln!("skipped: mounting tmpfs is refused here: {e}");
            return;
        }
        set_up_empty_dir(&dir, medium, 0o777, None).unwrap();
        let dir = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(
            std::fs::metadata(&dir).unwrap().mode() & 0o7777,
            0o1777,
            "tmpfs's root, sticky kept"
        );
        assert_eq!(
            mount_points().unwrap().iter().filter(|m| m.path == dir).count(),
            1,
            "mounted once"
        );
        assert_eq!(mounted(&dir).unwrap().fs_type, "tmpfs");
        let st = rustix::fs::statvfs(&dir).unwrap();
        assert_eq!(st.f_blocks * st.f_frsize, 10 << 20);
        std::fs::write(dir.join("f"), "x").unwrap();
        remove_pod_dir(&pod).unwrap();
        assert!(mounted(&dir).is_none());
        assert!(!pod.exists());
        remove_pod_dir(&pod).unwrap();
    }

    /// A subPath that a container turned into a symlink out of the volume is refused; one that
    /// resolves inside is bound (the bind shows the resolved file).
    #[test]
    fn sub_paths_escaping_the_volume_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let volume = root.path().join("vol");
        std::fs::create_dir_all(volume.join("real")).unwrap();
        std::fs::write(volume.join("real/f"), "inside").unwrap();
        std::os::unix::fs::symlink("/etc", volume.join("evil")).unwrap();
        std::os::unix::fs::symlink("real", volume.join("good")).unwrap();
        let sub = |path: &str, at: &str| SubPath {
            path: path.into(),
            bind_at: root.path().join("binds").join(at),
        };
        let err = bind_sub_path(&volume, &sub("evil", "0")).unwrap_err();
        assert!(matches!(err, VolumeDirError::SubPathOutsideVolume { .. }), "{err}");
        let err = bind_sub_path(&volume, &sub("evil/newdir", "1")).unwrap_err();
        assert!(matches!(err, VolumeDirError::SubPathOutsideVolume { .. }), "{err}");
        assert!(!Path::new("/etc/newdir").exists(), "nothing created outside the volume");
        match bind_sub_path(&volume, &sub("good", "2")) {
            Ok(()) => {
                let at = root.path().join("binds/2");
                assert_eq!(std::fs::read_to_string(at.join("f")).unwrap(), "inside");
                bind_sub_path(&volume, &sub("good", "2")).unwrap();
                assert_eq!(
                    mount_points()
                        .unwrap()
                        .iter()
                        .filter(|m| m.path == std::fs::canonicalize(&at).unwrap())
                        .count(),
                    1
                );
                remove_pod_dir(root.path()).unwrap();
                assert!(!root.path().exists());
            }
            Err(e) => eprintln!("skipped the bind: refused here: {e}"),
        }
    }

    /// A missing subPath is created inside the volume with the volume's mode (the setgid bit of
    /// an fsGroup volume included); fsGroup applies to emptyDir directories.
    #[test]
    fn missing_sub_paths_get_the_volume_mode() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: fsGroup needs root");
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("vol");
        let o = Ownership {
            fs_group: 123,
            on_root_mismatch: false,
        };
        set_up_empty_dir(&dir, Medium::Disk, 0o777, Some(o)).unwrap();
        let m = std::fs::metadata(&dir).unwrap();
        assert_eq!((m.mode() & 0o7777, m.gid()), (0o2777, 123));
        std::fs::write(dir.join("by-a-container"), "x").unwrap();
        std::os::unix::fs::chown(dir.join("by-a-container"), None, Some(7)).unwrap();
        set_up_empty_dir(&dir, Medium::Disk, 0o777, Some(o)).unwrap();
        assert_eq!(
            std::fs::metadata(dir.join("by-a-container")).unwrap().gid(),
            7,
            "set up once per pod"
        );
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o7777, 0o2777, "setgid kept");
        safe_make_dir(&std::fs::canonicalize(&dir).unwrap(), "test-sub/deeper").unwrap();
        let m = std::fs::metadata(dir.join("test-sub/deeper")).unwrap();
        assert_eq!((m.mode() & 0o7777, m.uid(), m.gid()), (0o2777, 0, 123));
    }

    /// mountinfo lines decode their escapes.
    #[test]
    fn mountinfo_lines_parse() {
        let m = parse_mountinfo_line("36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 - tmpfs tmpfs rw,size=10240k")
            .unwrap();
        assert_eq!(m.path, Path::new("/mnt two"));
        assert_eq!(m.fs_type, "tmpfs");
    }

    /// An atomic-writer volume is written on a tmpfs (secret) before it can be mounted; a mount of
    /// one not yet written is refused rather than bound empty.
    #[test]
    fn atomic_volumes_must_be_written_before_they_mount() {
        use dockerlet_pod::volume::{FileProjection, Payload};
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("pods/u1/volumes/kubernetes.io~secret/s");
        let m = Mount {
            field: "volumeMounts[s]".into(),
            volume: "s".into(),
            source: VolumeSource::Atomic {
                dir: dir.clone(),
                kind: AtomicKind::Secret,
            },
            sub_path: None,
            container_path: "/etc/secret-volume".into(),
            read_only: true,
            propagation: Default::default(),
        };
        let err = prepare(std::slice::from_ref(&m), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "volume \"s\": volume is not set up yet: its files were not written"
        );
        let payload = Payload::from([(
            "data-1".to_string(),
            FileProjection {
                data: b"value-1".to_vec(),
                mode: 0o644,
                owner: None,
            },
        )]);
        match write_atomic_volume(&dir, AtomicKind::Secret, &payload, None) {
            Ok(changed) => assert!(changed),
            Err(e) => {
                eprintln!("skipped: mounting tmpfs is refused here: {e}");
                return;
            }
        }
        assert!(!write_atomic_volume(&dir, AtomicKind::Secret, &payload, None).unwrap());
        assert_eq!(mounted(&std::fs::canonicalize(&dir).unwrap()).unwrap().fs_type, "tmpfs");
        assert_eq!(std::fs::read_to_string(dir.join("data-1")).unwrap(), "value-1");
        prepare(&[m], None).unwrap();
        remove_pod_dir(&root.path().join("pods/u1")).unwrap();
        assert!(!root.path().join("pods/u1").exists());
    }

    /// The downwardAPI "update labels on modification" conformance flow at the node: the labels
    /// file reads `key1="value1"` lines, a label change is swapped in by the next write (and an
    /// unchanged pod writes nothing), the podname item keeps mode 0400 (`-r--------`).
    #[test]
    fn downward_api_labels_update_in_place() {
        use dockerlet_pod::volume::{payload, Allocatable, VolumeObjects};
        use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, DownwardAPIVolumeSource, ObjectFieldSelector};
        use std::collections::BTreeMap;
        let item = |path: &str, field: &str, mode: Option<i32>| DownwardAPIVolumeFile {
            path: path.into(),
            field_ref: Some(ObjectFieldSelector {
                field_path: field.into(),
                ..Default::default()
            }),
            mode,
            ..Default::default()
        };
        let v = Volume {
            name: "podinfo".into(),
            downward_api: Some(DownwardAPIVolumeSource {
                items: Some(vec![
                    item("labels", "metadata.labels", None),
                    item("podname", "metadata.name", Some(0o400)),
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut p = pod(vec![v.clone()], vec![mount("podinfo", "/etc/podinfo", false, None)]);
        p.metadata.labels = Some(BTreeMap::from([("key1".to_string(), "value1".to_string())]));
        let root = tempfile::tempdir().unwrap();
        let (_, dir, kind) = dockerlet_pod::volume::atomic_volumes(root.path(), &p).pop().unwrap();
        let none = VolumeObjects::default();
        let alloc = Allocatable::default();
        let write = |p: &k8s_openapi::api::core::v1::Pod| {
            write_atomic_volume(&dir, kind, &payload(p, &v, &none, &alloc).unwrap(), None).unwrap()
        };
        assert!(write(&p));
        assert_eq!(std::fs::read_to_string(dir.join("labels")).unwrap(), "key1=\"value1\"");
        assert_eq!(std::fs::metadata(dir.join("podname")).unwrap().mode() & 0o777, 0o400);
        // kubelet's on-disk emptyDir wrapper: the volume's root is 0777.
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o7777, 0o777);
        assert!(!write(&p), "an unchanged pod writes nothing");
        p.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("key3".into(), "value3".into());
        assert!(write(&p));
        assert_eq!(
            std::fs::read_to_string(dir.join("labels")).unwrap(),
            "key1=\"value1\"\nkey3=\"value3\""
        );
        let c = &p.spec.as_ref().unwrap().containers[0];
        prepare(&mounts(root.path(), &p, c, &[], &alloc).unwrap(), None).unwrap();
    }
}
