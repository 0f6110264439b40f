//! Cgroup names as kubelet's cgroup managers write them (`pkg/kubelet/cm/cgroup_manager_linux.go`):
//! a name is a list of components (`--cgroup-root`'s, then `kubepods`, the QoS class,
//! `pod<uid>`), written as a directory path by the cgroupfs driver (`/kubepods/burstable/pod<uid>`)
//! and as a nested slice by the systemd driver (`CgroupName.ToSystemd`: `-` in a component becomes
//! `_`, components join with `-`, and runc's `ExpandSlice` turns
//! `kubepods-burstable-pod<uid>.slice` into `/kubepods.slice/kubepods-burstable.slice/
//! kubepods-burstable-pod<uid>.slice`). Docker takes a directory path as `CgroupParent` with its
//! cgroupfs driver, and the slice's unit name with its systemd driver, under which it makes
//! `docker-<id>.scope`.

use k8s_openapi::api::core::v1::Pod;

use super::{QosClass, KUBEPODS};

/// `--cgroup-driver` (`cgroupDriver`): how cgroups are made and named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CgroupDriver {
    /// Directories the agent makes in the cgroup filesystems.
    Cgroupfs,
    /// Transient slice units systemd makes over D-Bus.
    Systemd,
}

impl CgroupDriver {
    /// From its name (`cgroupfs`, `systemd`), as the flag and Docker's `CgroupDriver` spell it.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "cgroupfs" => Some(Self::Cgroupfs),
            "systemd" => Some(Self::Systemd),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cgroupfs => "cgroupfs",
            Self::Systemd => "systemd",
        }
    }
}

/// Why a cgroup root cannot be named with the driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CgroupNameError {
    /// kubelet forbids `_` in a component: the systemd mapping turns `-` into `_` and must be
    /// reversible.
    #[error("--cgroup-root {root:?}: component {component:?} contains \"_\", which the systemd cgroup driver cannot name (it writes \"-\" as \"_\")")]
    Underscore {
        /// The root given.
        root: String,
        /// The component.
        component: String,
    },
    /// A systemd root must itself name slices.
    #[error("--cgroup-root {root:?}: with the systemd cgroup driver the root must be \"/\" or a path of slices (\"/a.slice/a-b.slice\") or of plain names (\"/a/b\")")]
    NotSlices {
        /// The root given.
        root: String,
    },
}

/// Where pod cgroups go: `--cgroup-root`, `--cgroups-per-qos` and `--cgroup-driver`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupNaming {
    /// `--cgroup-root` as given, absolute, without a trailing `/` (`""` for `/`).
    root: String,
    /// The root's components (kubelet's `ParseCgroupfsToCgroupName`, or the slices'
    /// components with the systemd driver).
    components: Vec<String>,
    /// `--cgroups-per-qos`: kubepods tree (true) or the runtime's default parent.
    per_qos: bool,
    driver: CgroupDriver,
}

impl CgroupNaming {
    /// From the flags: `root` as given (`/`, `""`, `/dockerlet-it/n1` or, with systemd,
    /// `/system.slice/foo.slice`).
    pub fn new(root: &str, per_qos: bool, driver: CgroupDriver) -> Result<Self, CgroupNameError> {
        let trimmed = root.trim_end_matches('/');
        let root_path = if trimmed.is_empty() || trimmed.starts_with('/') {
            trimmed.to_string()
        } else {
            format!("/{trimmed}")
        };
        let parts: Vec<&str> = root_path.split('/').filter(|p| !p.is_empty()).collect();
        let components = match driver {
            CgroupDriver::Cgroupfs => parts.iter().map(|p| p.to_string()).collect(),
            CgroupDriver::Systemd => systemd_root_components(root, &parts)?,
        };
        if driver == CgroupDriver::Systemd {
            if let Some(c) = components.iter().find(|c| c.contains('_')) {
                return Err(CgroupNameError::Underscore {
                    root: root.to_string(),
                    component: c.clone(),
                });
            }
        }
        Ok(Self {
            root: root_path,
            components,
            per_qos,
            driver,
        })
    }

    /// The driver.
    pub fn driver(&self) -> CgroupDriver {
        self.driver
    }

    /// Whether there is a kubepods tree at all.
    pub fn per_qos(&self) -> bool {
        self.per_qos
    }

    /// `--cgroup-root` (`/` for the root).
    pub fn root(&self) -> &str {
        if self.root.is_empty() {
            "/"
        } else {
            &self.root
        }
    }

    /// The cgroup of `tail` under the root, as a path in the cgroup filesystem.
    fn path(&self, tail: &[&str]) -> String {
        let all: Vec<&str> = self
            .components
            .iter()
            .map(String::as_str)
            .chain(tail.iter().copied())
            .collect();
        match self.driver {
            CgroupDriver::Cgroupfs => format!("/{}", all.join("/")),
            CgroupDriver::Systemd => expand_slice(&slice_name(&all)).unwrap_or_else(|| "/".to_string()),
        }
    }

    /// The `kubepods` cgroup.
    pub fn kubepods(&self) -> String {
        self.path(&[KUBEPODS])
    }

    /// The cgroup of a QoS class: `kubepods` itself for Guaranteed.
    pub fn qos(&self, qos: QosClass) -> String {
        match qos {
            QosClass::Guaranteed => self.kubepods(),
            QosClass::Burstable => self.path(&[KUBEPODS, "burstable"]),
            QosClass::BestEffort => self.path(&[KUBEPODS, "besteffort"]),
        }
    }

    /// The pod cgroup of `uid` in `qos` (kubelet's `GetPodContainerName`), as a path.
    pub fn pod(&self, qos: QosClass, uid: &str) -> String {
        let pod = format!("pod{uid}");
        match qos {
            QosClass::Guaranteed => self.path(&[KUBEPODS, &pod]),
            QosClass::Burstable => self.path(&[KUBEPODS, "burstable", &pod]),
            QosClass::BestEffort => self.path(&[KUBEPODS, "besteffort", &pod]),
        }
    }

    /// What Docker takes as `CgroupParent` for the cgroup at `path`: the path itself with the
    /// cgroupfs driver, the slice's unit name with the systemd driver.
    pub fn docker_parent(&self, path: &str) -> String {
        match self.driver {
            CgroupDriver::Cgroupfs => path.to_string(),
            CgroupDriver::Systemd => path.rsplit('/').next().unwrap_or(path).to_string(),
        }
    }

    /// The `CgroupParent` of the pod's containers: its pod cgroup, or with
    /// `--cgroups-per-qos=false` the cgroup root, none for `/` (Docker's default parent), as
    /// kubelet's no-op pod container manager answers.
    pub fn parent_of(&self, pod: &Pod) -> Option<String> {
        if self.per_qos {
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            Some(self.docker_parent(&self.pod(QosClass::of(pod), uid)))
        } else if self.components.is_empty() {
            None
        } else {
            Some(self.docker_parent(&self.path(&[])))
        }
    }

    /// The pod UID a cgroup directory name under a QoS cgroup stands for: `pod<uid>`, or with
    /// systemd `<…>-pod<uid with _ for ->.slice` (`ParseSystemdToCgroupName`).
    pub fn uid_of_dir(name: &str) -> Option<String> {
        let last = match name.strip_suffix(".slice") {
            Some(slice) => slice.rsplit('-').next()?.replace('_', "-"),
            None => name.to_string(),
        };
        last.strip_prefix("pod").filter(|u| !u.is_empty()).map(str::to_string)
    }

    /// The cgroup (a path) of a container Docker made with `parent` as its `CgroupParent`:
    /// `<parent>/<id>` with cgroupfs (`/docker/<id>` without a parent), `<the slice's path>/
    /// docker-<id>.scope` with systemd (`/system.slice/docker-<id>.scope` without).
    pub fn container_cgroup(parent: &str, id: &str, engine_driver: CgroupDriver) -> String {
        let parent = parent.trim_end_matches('/');
        if let Some(path) = parent.ends_with(".slice").then(|| expand_slice(parent)).flatten() {
            return format!("{}/docker-{id}.scope", path.trim_end_matches('/'));
        }
        match (parent, engine_driver) {
            ("", CgroupDriver::Systemd) => format!("/system.slice/docker-{id}.scope"),
            ("", CgroupDriver::Cgroupfs) => format!("/docker/{id}"),
            (parent, _) => format!("{parent}/{id}"),
        }
    }

    /// The cgroup path a `CgroupParent` stands for (a slice expanded, a path as it is).
    pub fn parent_path(parent: &str) -> String {
        let parent = parent.trim_end_matches('/');
        if parent.ends_with(".slice") {
            if let Some(path) = expand_slice(parent) {
                return path;
            }
        }
        parent.to_string()
    }
}

/// A systemd `--cgroup-root`'s components: `/` none; a path of slices
/// (`/a.slice/a-b.slice`) the last slice's components; a path of plain names (`/a/b`) those
/// names, as kubelet's `ParseCgroupfsToCgroupName`.
fn systemd_root_components(root: &str, parts: &[&str]) -> Result<Vec<String>, CgroupNameError> {
    let Some(last) = parts.last() else {
        return Ok(Vec::new());
    };
    if !last.ends_with(".slice") {
        if parts.iter().any(|p| p.ends_with(".slice")) {
            return Err(CgroupNameError::NotSlices { root: root.to_string() });
        }
        return Ok(parts.iter().map(|p| p.to_string()).collect());
    }
    let expanded = expand_slice(last).ok_or_else(|| CgroupNameError::NotSlices { root: root.to_string() })?;
    let given = format!("/{}", parts.join("/"));
    if expanded != given && parts.len() > 1 {
        return Err(CgroupNameError::NotSlices { root: root.to_string() });
    }
    Ok(last
        .trim_end_matches(".slice")
        .split('-')
        .map(|c| c.replace('_', "-"))
        .collect())
}

/// `CgroupName.ToSystemd`'s unit name: each component's `-` as `_`, joined with `-`, `.slice`;
/// `-.slice` (the root slice) for none.
pub fn slice_name(components: &[&str]) -> String {
    if components.is_empty() {
        return "-.slice".to_string();
    }
    let escaped: Vec<String> = components.iter().map(|c| c.replace('-', "_")).collect();
    format!("{}.slice", escaped.join("-"))
}

/// runc's `ExpandSlice`: the cgroup path of a slice unit, each `-`-prefix a parent slice
/// (`a-b.slice` → `/a.slice/a-b.slice`; `-.slice` → `/`). `None` for a name that is no slice.
pub fn expand_slice(name: &str) -> Option<String> {
    let stem = name.strip_suffix(".slice")?;
    if name.contains('/') || stem.is_empty() {
        return None;
    }
    if stem == "-" {
        return Some("/".to_string());
    }
    let mut path = String::new();
    let mut prefix = String::new();
    for component in stem.split('-') {
        if component.is_empty() {
            return None;
        }
        prefix.push_str(component);
        path.push('/');
        path.push_str(&prefix);
        path.push_str(".slice");
        prefix.push('-');
    }
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(uid: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The cgroupfs tree follows kubelet's names under any root; without per-QoS cgroups the
    /// root (or Docker's default for `/`) is the parent.
    #[test]
    fn cgroupfs_names_are_directories() {
        let n = CgroupNaming::new("/", true, CgroupDriver::Cgroupfs).unwrap();
        assert_eq!(n.kubepods(), "/kubepods");
        assert_eq!(n.pod(QosClass::Guaranteed, "u1"), "/kubepods/podu1");
        assert_eq!(n.pod(QosClass::Burstable, "u1"), "/kubepods/burstable/podu1");
        assert_eq!(n.parent_of(&pod("u1")).as_deref(), Some("/kubepods/besteffort/podu1"));
        let n = CgroupNaming::new("/dockerlet-it/n1/", true, CgroupDriver::Cgroupfs).unwrap();
        assert_eq!(
            n.pod(QosClass::BestEffort, "u1"),
            "/dockerlet-it/n1/kubepods/besteffort/podu1"
        );
        assert_eq!(n.root(), "/dockerlet-it/n1");
        let flat = |root| CgroupNaming::new(root, false, CgroupDriver::Cgroupfs).unwrap();
        assert_eq!(flat("").parent_of(&pod("u1")), None);
        assert_eq!(flat("/x").parent_of(&pod("u1")).as_deref(), Some("/x"));
        assert_eq!(CgroupNaming::uid_of_dir("podabc").as_deref(), Some("abc"));
        assert_eq!(CgroupNaming::uid_of_dir("burstable"), None);
    }

    /// The systemd tree: upstream's own example (`ToSystemd` of
    /// {"kubepods", "burstable", "pod1234-abcd-5678-efgh"}), the unit name as Docker's parent,
    /// roots of plain names or of slices, and the reverse mapping of a slice to its pod.
    #[test]
    fn systemd_names_are_nested_slices() {
        let n = CgroupNaming::new("/", true, CgroupDriver::Systemd).unwrap();
        assert_eq!(n.kubepods(), "/kubepods.slice");
        assert_eq!(
            n.pod(QosClass::Burstable, "1234-abcd-5678-efgh"),
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678_efgh.slice"
        );
        assert_eq!(
            n.pod(QosClass::Guaranteed, "u1"),
            "/kubepods.slice/kubepods-podu1.slice"
        );
        assert_eq!(
            n.parent_of(&pod("1234-abcd")).as_deref(),
            Some("kubepods-besteffort-pod1234_abcd.slice")
        );
        let n = CgroupNaming::new("/dockerlet-it/n-1", true, CgroupDriver::Systemd).unwrap();
        assert_eq!(
            n.qos(QosClass::Burstable),
            "/dockerlet_it.slice/dockerlet_it-n_1.slice/dockerlet_it-n_1-kubepods.slice/dockerlet_it-n_1-kubepods-burstable.slice"
        );
        let n = CgroupNaming::new("/a.slice/a-b.slice", true, CgroupDriver::Systemd).unwrap();
        assert_eq!(n.kubepods(), "/a.slice/a-b.slice/a-b-kubepods.slice");
        assert_eq!(
            CgroupNaming::new("/a_b", true, CgroupDriver::Systemd),
            Err(CgroupNameError::Underscore {
                root: "/a_b".into(),
                component: "a_b".into()
            })
        );
        assert!(CgroupNaming::new("/a.slice/b.slice", true, CgroupDriver::Systemd).is_err());
        let flat = CgroupNaming::new("/x", false, CgroupDriver::Systemd).unwrap();
        assert_eq!(flat.parent_of(&pod("u1")).as_deref(), Some("x.slice"));
        assert_eq!(
            CgroupNaming::uid_of_dir("kubepods-burstable-pod1234_abcd.slice").as_deref(),
            Some("1234-abcd")
        );
        assert_eq!(CgroupNaming::uid_of_dir("kubepods-burstable.slice"), None);
    }

    /// runc's `ExpandSlice` and where Docker puts a container under each kind of parent.
    #[test]
    fn slices_expand_and_containers_are_placed_as_docker_places_them() {
        assert_eq!(
            expand_slice("a-b-c.slice").as_deref(),
            Some("/a.slice/a-b.slice/a-b-c.slice")
        );
        assert_eq!(expand_slice("-.slice").as_deref(), Some("/"));
        for bad in ["a--b.slice", "-a.slice", "a.scope", "a/b.slice", ".slice"] {
            assert_eq!(expand_slice(bad), None, "{bad}");
        }
        assert_eq!(slice_name(&["kubepods", "pod1-2"]), "kubepods-pod1_2.slice");
        let c = |parent, driver| CgroupNaming::container_cgroup(parent, "abc", driver);
        assert_eq!(
            c("kubepods-podu1.slice", CgroupDriver::Systemd),
            "/kubepods.slice/kubepods-podu1.slice/docker-abc.scope"
        );
        assert_eq!(c("/kubepods/podu1", CgroupDriver::Cgroupfs), "/kubepods/podu1/abc");
        assert_eq!(c("", CgroupDriver::Cgroupfs), "/docker/abc");
        assert_eq!(c("", CgroupDriver::Systemd), "/system.slice/docker-abc.scope");
        assert_eq!(
            CgroupNaming::parent_path("kubepods-podu1.slice"),
            "/kubepods.slice/kubepods-podu1.slice"
        );
        assert_eq!(CgroupNaming::parent_path("/kubepods/podu1"), "/kubepods/podu1");
    }
}
