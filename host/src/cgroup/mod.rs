//! The node's cgroup filesystems: where each cgroup v1 controller is mounted, or the cgroup v2
//! unified root, so the pod tree and the stats readers find a cgroup's directory for a
//! controller. Read once from `/proc/self/mountinfo`; tests build a layout over a recorded tree.

pub mod reserved;
pub mod stats;
pub mod system;
pub mod systemd;
pub mod tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why the cgroup layout could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// `/proc/self/mountinfo` could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Neither a cgroup v1 memory hierarchy nor a cgroup v2 mount is present.
    #[error("no cgroup filesystem is mounted (looked for cgroup v1 controllers and cgroup2 in /proc/self/mountinfo)")]
    NotMounted,
    /// Only sub-trees of the hierarchies are mounted (the agent runs in a container that sees
    /// its own cgroup), so the cgroups Docker makes from the host's root are out of reach.
    #[error(
        "only a sub-tree of the cgroup hierarchies is mounted here (cgroup {root:?} at {mount_point}): the agent cannot reach the host's cgroups that Docker makes; in a container, mount the host's with -v /sys/fs/cgroup:/sys/fs/cgroup"
    )]
    SubTreeOnly {
        /// The cgroup the mount shows as its root.
        root: String,
        /// Where it is mounted.
        mount_point: PathBuf,
    },
}

/// cgroup v1 (one hierarchy per controller or controller group) or v2 (one unified tree).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// Separate hierarchies (`/sys/fs/cgroup/memory`, …).
    V1,
    /// One tree (`/sys/fs/cgroup`).
    V2,
}

/// Where the node's cgroups live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLayout {
    version: CgroupVersion,
    /// v1: controller name (`cpu`, `cpuacct`, `memory`, `pids`, …) → mount point.
    controllers: BTreeMap<String, PathBuf>,
    /// v2: the unified mount point; v1: a hybrid machine's (empty) cgroup2 mount, if any.
    unified: Option<PathBuf>,
    /// v1: the named hierarchies without a controller (`name=systemd`).
    named: Vec<PathBuf>,
}

impl CgroupLayout {
    /// The running machine's layout, from `/proc/self/mountinfo`.
    pub fn detect() -> Result<Self, CgroupError> {
        let path = Path::new("/proc/self/mountinfo");
        let text = std::fs::read_to_string(path).map_err(|source| CgroupError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_mountinfo(&text)
    }

    /// The layout a mountinfo text describes. v1 when some v1 hierarchy has the memory
    /// controller (a hybrid machine with an empty `unified` mount is v1, as runc sees it), v2
    /// when only a cgroup2 mount is there.
    pub fn from_mountinfo(text: &str) -> Result<Self, CgroupError> {
        let mut controllers = BTreeMap::new();
        let mut unified = None;
        let mut named = Vec::new();
        let mut sub_tree = None;
        for line in text.lines() {
            // `id parent major:minor root mountpoint options [optional…] - fstype source super`
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let mut left = left.split(' ');
            let (Some(root), Some(mount_point)) = (left.nth(3), left.next()) else {
                continue;
            };
            let mut right = right.split(' ');
            let (Some(fstype), Some(_source), Some(super_options)) = (right.next(), right.next(), right.next()) else {
                continue;
            };
            // A bind mount of a sub-tree (inside a container) does not show the whole hierarchy.
            if root != "/" {
                if matches!(fstype, "cgroup" | "cgroup2") && sub_tree.is_none() {
                    sub_tree = Some((unescape(root), PathBuf::from(unescape(mount_point))));
                }
                continue;
            }
            let mount_point = PathBuf::from(unescape(mount_point));
            match fstype {
                "cgroup" => {
                    if super_options.split(',').any(|o| o.starts_with("name=")) && !named.contains(&mount_point) {
                        named.push(mount_point.clone());
                    }
                    for option in super_options.split(',') {
                        if !matches!(option, "rw" | "ro") && !option.contains('=') {
                            controllers
                                .entry(option.to_string())
                                .or_insert_with(|| mount_point.clone());
                        }
                    }
                }
                "cgroup2" => {
                    unified.get_or_insert(mount_point);
                }
                _ => {}
            }
        }
        let version = if controllers.contains_key("memory") {
            CgroupVersion::V1
        } else if unified.is_some() {
            CgroupVersion::V2
        } else if let Some((root, mount_point)) = sub_tree {
            return Err(CgroupError::SubTreeOnly { root, mount_point });
        } else {
            return Err(CgroupError::NotMounted);
        };
        Ok(Self {
            version,
            controllers,
            unified,
            named,
        })
    }

    /// A v1 layout with each named controller at `root/<controller>` (a recorded tree).
    pub fn v1_at(root: &Path, controllers: &[&str]) -> Self {
        Self {
            version: CgroupVersion::V1,
            controllers: controllers.iter().map(|c| (c.to_string(), root.join(c))).collect(),
            unified: None,
            named: Vec::new(),
        }
    }

    /// A v2 layout rooted at `root` (a recorded tree).
    pub fn v2_at(root: &Path) -> Self {
        Self {
            version: CgroupVersion::V2,
            controllers: BTreeMap::new(),
            unified: Some(root.to_path_buf()),
            named: Vec::new(),
        }
    }

    /// v1 or v2.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// The directory of `cgroup` (an absolute cgroup path such as
    /// `/kubepods/burstable/pod<uid>`) for `controller` (`cpu`, `cpuacct`, `memory`, `pids`,
    /// `cpuset`, `hugetlb`, …). v2 has one directory for every controller; v1 gives `None`
    /// for a controller that is not mounted.
    pub fn dir(&self, controller: &str, cgroup: &str) -> Option<PathBuf> {
        let relative = cgroup.trim_start_matches('/');
        match self.version {
            CgroupVersion::V1 => self.controllers.get(controller).map(|m| m.join(relative)),
            CgroupVersion::V2 => self.unified.as_ref().map(|m| m.join(relative)),
        }
    }

    /// The root of every mounted hierarchy: each v1 controller's, the named ones
    /// (`name=systemd`) and a hybrid machine's unified mount, or the v2 root. runc makes a
    /// container's cgroup in all of them, so a pod cgroup is removed from all of them.
    pub fn hierarchies(&self) -> Vec<PathBuf> {
        let mut all: Vec<PathBuf> = self.controllers.values().cloned().collect();
        all.extend(self.named.iter().cloned());
        all.extend(self.unified.iter().cloned());
        all.sort();
        all.dedup();
        all
    }

    /// The v1 controllers mounted (empty on v2).
    pub fn controllers(&self) -> impl Iterator<Item = &str> {
        self.controllers.keys().map(String::as_str)
    }
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let code = (bytes[i] == b'\\')
            .then(|| field.get(i + 1..i + 4))
            .flatten()
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's kind: v1 hierarchies per controller and an empty unified mount.
    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    const UNIFIED: &str = "\
25 21 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    #[test]
    fn v1_controllers_map_to_their_hierarchies() {
        let layout = CgroupLayout::from_mountinfo(HYBRID).unwrap();
        assert_eq!(layout.version(), CgroupVersion::V1);
        assert_eq!(
            layout.dir("cpuacct", "/kubepods/pod1"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1"))
        );
        assert_eq!(
            layout.dir("memory", "kubepods"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/kubepods"))
        );
        assert_eq!(layout.dir("hugetlb", "/kubepods"), None);
        assert!(!layout.controllers().any(|c| c.starts_with("name=")));
        let hierarchies = layout.hierarchies();
        assert_eq!(hierarchies.len(), 5, "{hierarchies:?}");
        assert!(hierarchies.contains(&PathBuf::from("/sys/fs/cgroup/systemd")));
        assert!(hierarchies.contains(&PathBuf::from("/sys/fs/cgroup/unified")));
    }

    #[test]
    fn a_unified_mount_alone_is_v2() {
        let layout = CgroupLayout::from_mountinfo(UNIFIED).unwrap();
        assert_eq!(layout.version(), CgroupVersion::V2);
        assert_eq!(
            layout.dir("memory", "/kubepods/besteffort"),
            Some(PathBuf::from("/sys/fs/cgroup/kubepods/besteffort"))
        );
    }

    #[test]
    fn no_cgroup_mount_is_an_error_and_escapes_are_read() {
        assert!(matches!(
            CgroupLayout::from_mountinfo("1 0 0:1 / / rw - ext4 /dev/vda rw\n"),
            Err(CgroupError::NotMounted)
        ));
        assert_eq!(unescape(r"/a\040b/é"), "/a b/é");
        let inside = "85 83 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n";
        let err = CgroupLayout::from_mountinfo(inside).unwrap_err();
        assert!(matches!(err, CgroupError::SubTreeOnly { .. }), "{err}");
        assert!(err.to_string().contains("-v /sys/fs/cgroup:/sys/fs/cgroup"), "{err}");
        assert!(CgroupLayout::detect().is_ok(), "this machine has cgroups");
    }
}
