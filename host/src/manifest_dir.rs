//! A static pod manifest directory (kubelet's `pkg/kubelet/config/file.go`): listing it, reading
//! each file under the size limit and handing its bytes to [`dockerlet_pod::manifest`] to parse,
//! validate and default. Blocking file I/O: actors call it on `spawn_blocking`.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dockerlet_messages::source::{DesiredPod, ManifestError, PodSource};
use dockerlet_pod::field::FieldError;
use dockerlet_pod::manifest::{default_static_pod, parse, validate, InvalidManifest};
use k8s_openapi::api::core::v1::Pod;

/// Largest manifest read (kubelet `maxConfigLength`).
pub const MAX_MANIFEST_BYTES: u64 = 10 * 1024 * 1024;

/// Files of a manifest path: the file itself, or the directory's regular files ending in
/// `.yaml`, `.yml` or `.json` whose names do not start with a dot, in lexical order.
pub fn manifest_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        // A missing path is an empty source, as in kubelet.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    if meta.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = fs::read_dir(path)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| is_manifest_name(p))
        .collect();
    files.sort();
    Ok(files)
}

/// Does this file name look like a manifest (and not a dot-file)?
pub fn is_manifest_name(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    !name.starts_with('.') && [".yaml", ".yml", ".json"].iter().any(|ext| name.ends_with(ext))
}

/// Read every manifest under `path` for node `node_name`. Bad files are reported, not fatal;
/// a pod name already taken by an earlier file (lexical order) is an error for the later one.
pub fn read_manifests(path: &Path, node_name: &str) -> (Vec<DesiredPod>, Vec<ManifestError>) {
    read_manifests_cached(path, node_name, &mut ManifestCache::default())
}

/// What each file gave at its last read, by path, with the modification time and size it had:
/// a file unchanged since is not read and parsed again (re-lists run every
/// `fileCheckFrequency`; parsing 110 manifests each time costs real CPU).
#[derive(Debug, Default)]
pub struct ManifestCache {
    files: HashMap<PathBuf, CachedManifest>,
}

impl ManifestCache {
    /// Are the manifest files under `path` exactly the cached ones, each with the modification
    /// time and size it had when read? Then a re-read would give the same pods: the periodic
    /// re-list only stats the files.
    pub fn is_current(&self, path: &Path) -> bool {
        let Ok(files) = manifest_files(path) else {
            return false;
        };
        files.len() == self.files.len()
            && files
                .iter()
                .all(|file| match (fs::metadata(file), self.files.get(file)) {
                    (Ok(meta), Some((mtime, len, _))) => {
                        mtime.is_some() && meta.modified().ok() == *mtime && meta.len() == *len
                    }
                    _ => false,
                })
    }

    /// Put `pod` (the sent version of a cached pod, with its `config.seen` stamp) in place of
    /// the cached pod of the same UID, so both are one object.
    pub fn share(&mut self, pod: &Arc<Pod>) {
        let uid = pod.metadata.uid.as_ref();
        for (_, _, cached) in self.files.values_mut() {
            if let Ok(cached) = cached {
                if cached.metadata.uid.as_ref() == uid && !Arc::ptr_eq(cached, pod) {
                    *cached = pod.clone();
                }
            }
        }
    }
}

/// A file's modification time and size when it was read, and what it gave.
/// The pod is shared with the set sent (one copy of each pod, not two).
type CachedManifest = (Option<std::time::SystemTime>, u64, Result<Arc<Pod>, ManifestFileError>);

/// [`read_manifests`] reusing `cache` for files whose modification time and size are unchanged.
pub fn read_manifests_cached(
    path: &Path,
    node_name: &str,
    cache: &mut ManifestCache,
) -> (Vec<DesiredPod>, Vec<ManifestError>) {
    let mut pods = Vec::new();
    let mut errors = Vec::new();
    let files = match manifest_files(path) {
        Ok(f) => f,
        Err(e) => {
            errors.push(ManifestError {
                file: path.display().to_string(),
                reason: format!("cannot list manifests: {e}"),
            });
            return (pods, errors);
        }
    };
    let mut names: HashMap<(String, String), String> = HashMap::new();
    let listed: HashSet<&PathBuf> = files.iter().collect();
    cache.files.retain(|f, _| listed.contains(f));
    for file in files {
        let display = file.display().to_string();
        let stamp = fs::metadata(&file).map(|m| (m.modified().ok(), m.len())).ok();
        let result = match (stamp, cache.files.get(&file)) {
            (Some((mtime, len)), Some((m, l, cached))) if *m == mtime && *l == len && mtime.is_some() => cached.clone(),
            (Some((mtime, len)), _) => {
                let result = read_one(&file, node_name).map(Arc::new);
                cache.files.insert(file.clone(), (mtime, len, result.clone()));
                result
            }
            (None, _) => read_one(&file, node_name).map(Arc::new),
        };
        match result {
            Ok(pod) => {
                let key = (
                    pod.metadata.namespace.clone().unwrap_or_default(),
                    pod.metadata.name.clone().unwrap_or_default(),
                );
                if let Some(first) = names.get(&key) {
                    errors.push(ManifestError {
                        file: display,
                        reason: format!(
                            "metadata.name: Duplicate value: pod {}/{} is already defined in {first}",
                            key.0, key.1
                        ),
                    });
                    continue;
                }
                names.insert(key, display.clone());
                pods.push(DesiredPod::new(pod, PodSource::File, display));
            }
            Err(e) => errors.push(ManifestError {
                file: display,
                reason: e.to_string(),
            }),
        }
    }
    (pods, errors)
}

/// Why one manifest file gave no pod. Not retried until the file changes (the re-list notices).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ManifestFileError {
    /// The file cannot be read.
    #[error("cannot read: {0}")]
    Read(#[source] Arc<std::io::Error>),
    /// Larger than kubelet's `maxConfigLength`.
    #[error("file is {size} bytes, larger than the {MAX_MANIFEST_BYTES} byte limit")]
    TooLarge {
        /// Its size in bytes.
        size: u64,
    },
    /// It does not parse or validate.
    #[error(transparent)]
    Invalid(#[from] InvalidManifest),
}

impl From<FieldError> for ManifestFileError {
    fn from(e: FieldError) -> Self {
        ManifestFileError::Invalid(e.into())
    }
}

/// Read, parse, validate and default one manifest file.
pub fn read_one(file: &Path, node_name: &str) -> Result<Pod, ManifestFileError> {
    let read = |e: std::io::Error| ManifestFileError::Read(Arc::new(e));
    let size = fs::metadata(file).map_err(read)?.len();
    if size > MAX_MANIFEST_BYTES {
        return Err(ManifestFileError::TooLarge { size });
    }
    let content = fs::read(file).map_err(read)?;
    let pod = parse(file, &content)?;
    validate(&pod)?;
    Ok(default_static_pod(pod, node_name, &file.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_pod::action::NON_NUMERIC_GRPC_PORT;
    use dockerlet_pod::annotations::{CONFIG_HASH, CONFIG_SOURCE};
    use dockerlet_pod::manifest::{default_static_pod_from, parse_url_body, StaticSource};

    const GOOD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: dockerlet.local/busybox:1\n";

    fn write(dir: &Path, name: &str, content: &str) {
        fs::write(dir.join(name), content).unwrap();
    }

    /// An unchanged file gives the cached pod itself, and after `share` the stamped version of
    /// it: the cache and the set sent hold one copy of each pod.
    #[test]
    fn the_cache_and_the_sent_set_share_each_pod() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "web.yaml", GOOD);
        let mut cache = ManifestCache::default();
        let (first, _) = read_manifests_cached(dir.path(), "n1", &mut cache);
        let (again, _) = read_manifests_cached(dir.path(), "n1", &mut cache);
        assert!(Arc::ptr_eq(&first[0].pod, &again[0].pod));
        let mut stamped = (*first[0].pod).clone();
        stamped
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("seen".into(), "t".into());
        let stamped = Arc::new(stamped);
        cache.share(&stamped);
        let (third, _) = read_manifests_cached(dir.path(), "n1", &mut cache);
        assert!(Arc::ptr_eq(&third[0].pod, &stamped));
    }

    /// A static pod is named `<name>-<node>`, lands in `default`, and gets kubelet's UID and
    /// annotations; the same content gives the same UID and an edit a new one.
    #[test]
    fn static_pods_are_defaulted_like_kubelet() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "web.yaml", GOOD);
        let (pods, errors) = read_manifests(dir.path(), "Node1");
        assert!(errors.is_empty(), "{errors:?}");
        let pod = &pods[0].pod;
        assert_eq!(pod.metadata.name.as_deref(), Some("web-node1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        let uid = pod.metadata.uid.clone().unwrap();
        assert_eq!(uid.len(), 32);
        let annotations = pod.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations[CONFIG_SOURCE], "file");
        assert_eq!(annotations[CONFIG_HASH], uid);
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("Node1"));
        assert_eq!(spec.containers[0].image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(read_manifests(dir.path(), "Node1").0[0].id.uid.0, uid);
        write(dir.path(), "web.yaml", &GOOD.replace("busybox:1", "busybox:2"));
        assert_ne!(read_manifests(dir.path(), "Node1").0[0].id.uid.0, uid);
        assert_ne!(read_manifests(dir.path(), "node2").0[0].id.uid.0, uid);
    }

    /// Dot-files, sub-directories and other extensions are skipped; files load in name order.
    #[test]
    fn only_top_level_manifest_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "b.yml", &GOOD.replace("web", "b"));
        write(
            dir.path(),
            "a.json",
            r#"{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i:1"}]}}"#,
        );
        write(dir.path(), ".hidden.yaml", &GOOD.replace("web", "hidden"));
        write(dir.path(), "notes.txt", "hello");
        fs::create_dir(dir.path().join("sub")).unwrap();
        write(&dir.path().join("sub"), "c.yaml", &GOOD.replace("web", "c"));
        let (pods, errors) = read_manifests(dir.path(), "n");
        assert!(errors.is_empty());
        let names: Vec<_> = pods.iter().map(|p| p.pod.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, vec!["a-n", "b-n"]);
    }

    /// Bad manifests are reported with the file and reason (line and column for YAML) and do
    /// not stop the good ones.
    #[test]
    fn bad_manifests_are_reported_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "good.yaml", GOOD);
        write(
            dir.path(),
            "syntax.yaml",
            "metadata:\n  name: x\nspec:\n  containers:\n  - name: a\n    image: [oops\n",
        );
        write(
            dir.path(),
            "noname.yaml",
            "spec:\n  containers:\n  - name: a\n    image: i:1\n",
        );
        write(
            dir.path(),
            "types.yaml",
            "metadata:\n  name: t\nspec:\n  containers:\n  - name: a\n    image: i:1\n    ports: abc\n",
        );
        write(dir.path(), "zdup.yaml", GOOD);
        write(dir.path(), "badname.yaml", &GOOD.replace("name: app", "name: App_1"));
        write(
            dir.path(),
            "cm.yaml",
            &format!(
                "{}  volumes:\n  - name: c\n    configMap: {{name: x}}\n",
                GOOD.replace("web", "cm")
            ),
        );
        // A sidecar is fine; an init container restart policy but Always is not.
        write(
            dir.path(),
            "sidecar.yaml",
            &GOOD.replace("web", "sc").replace(
                "  containers:",
                "  initContainers:\n  - name: s\n    image: i:1\n    restartPolicy: Always\n  containers:",
            ),
        );
        write(
            dir.path(),
            "initpolicy.yaml",
            &GOOD.replace("web", "ip").replace(
                "  containers:",
                "  initContainers:\n  - name: s\n    image: i:1\n    restartPolicy: OnFailure\n  containers:",
            ),
        );
        let (pods, errors) = read_manifests(dir.path(), "n");
        assert_eq!(pods.len(), 2);
        let reason = |file: &str| {
            errors
                .iter()
                .find(|e| e.file.ends_with(file))
                .map(|e| e.reason.clone())
                .unwrap()
        };
        assert!(reason("syntax.yaml").contains("line 6"), "{}", reason("syntax.yaml"));
        assert!(reason("noname.yaml").starts_with("metadata.name: Required value"));
        assert!(reason("types.yaml").contains("line 7"), "{}", reason("types.yaml"));
        assert!(
            reason("zdup.yaml").contains("already defined in"),
            "{}",
            reason("zdup.yaml")
        );
        assert!(reason("badname.yaml").starts_with("spec.containers[0].name: Invalid value"));
        assert_eq!(
            reason("cm.yaml"),
            "spec.volumes[0]: static pods may not reference configmaps"
        );
        assert_eq!(
            reason("initpolicy.yaml"),
            r#"spec.initContainers[0].restartPolicy: Unsupported value: "OnFailure": supported values: "Always""#
        );
    }

    /// A URL body may hold one Pod or a PodList, in JSON or YAML; URL pods get their own UID
    /// input and `config.source: http`, without the file pods' NoExecute toleration.
    #[test]
    fn url_bodies_hold_a_pod_or_a_pod_list() {
        let one = parse_url_body(GOOD.as_bytes()).unwrap();
        assert_eq!(one.len(), 1);
        let list = r#"{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i:1"}]}},{"metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"i:1"}]}}]}"#;
        assert_eq!(parse_url_body(list.as_bytes()).unwrap().len(), 2);
        assert!(parse_url_body(b"").unwrap().is_empty());
        assert!(parse_url_body(b"{not json")
            .unwrap_err()
            .to_string()
            .starts_with("invalid JSON"));
        let pod = default_static_pod_from(one[0].clone(), "n", StaticSource::Url("http://x/pods"));
        assert_eq!(pod.metadata.annotations.as_ref().unwrap()[CONFIG_SOURCE], "http");
        assert!(pod.spec.as_ref().unwrap().tolerations.is_none());
        let file = default_static_pod(one[0].clone(), "n", "http://x/pods");
        assert_ne!(
            file.metadata.uid, pod.metadata.uid,
            "file and URL pods hash different inputs"
        );
    }

    /// A file whose modification time and size are unchanged is not parsed again; a changed
    /// one is.
    #[test]
    fn unchanged_files_are_not_parsed_again() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("web.yaml");
        write(dir.path(), "web.yaml", GOOD);
        let mtime = fs::metadata(&file).unwrap().modified().unwrap();
        let mut cache = ManifestCache::default();
        assert_eq!(read_manifests_cached(dir.path(), "n", &mut cache).0.len(), 1);
        // Same size and modification time, different bytes: the cached result stands.
        write(dir.path(), "web.yaml", &"#".repeat(GOOD.len()));
        fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(read_manifests_cached(dir.path(), "n", &mut cache).0.len(), 1);
        assert!(cache.is_current(dir.path()));
        // A new modification time: read again (and now it is not a pod).
        let later = mtime + std::time::Duration::from_secs(5);
        fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert!(!cache.is_current(dir.path()));
        let (pods, errors) = read_manifests_cached(dir.path(), "n", &mut cache);
        assert!(pods.is_empty() && errors.len() == 1, "{errors:?}");
        assert!(cache.is_current(dir.path()));
        // A new file, and a file gone: not current.
        write(dir.path(), "db.yaml", GOOD);
        assert!(!cache.is_current(dir.path()));
        read_manifests_cached(dir.path(), "n", &mut cache);
        assert!(cache.is_current(dir.path()));
        fs::remove_file(&file).unwrap();
        assert!(!cache.is_current(dir.path()));
    }

    /// A gRPC probe whose port is a name loads (only that probe is marked, to refuse its
    /// container); other type errors still fail the file with their position.
    #[test]
    fn a_named_grpc_probe_port_loads_and_marks_the_probe() {
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: g}\nspec:\n  containers:\n  - name: a\n    image: x\n    livenessProbe: {grpc: {port: grpc}}\n  - name: b\n    image: x\n";
        let pod = parse(Path::new("g.yaml"), yaml.as_bytes()).unwrap();
        let containers = pod.spec.unwrap().containers;
        let probe = containers[0].liveness_probe.as_ref().unwrap();
        assert_eq!(probe.grpc.as_ref().unwrap().port, NON_NUMERIC_GRPC_PORT);
        assert!(containers[1].liveness_probe.is_none(), "other containers are untouched");
        let bad = yaml.replace("image: x\n    liveness", "image: [x]\n    liveness");
        let err = parse(Path::new("g.yaml"), bad.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("line"), "other type errors keep their position: {err}");
    }

    /// Files over 10 MiB are refused without being parsed.
    #[test]
    fn oversized_manifests_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let big = format!("{GOOD}# {}\n", "x".repeat(MAX_MANIFEST_BYTES as usize));
        write(dir.path(), "big.yaml", &big);
        let (pods, errors) = read_manifests(dir.path(), "n");
        assert!(pods.is_empty());
        assert!(errors[0].reason.contains("larger than"), "{:?}", errors);
    }
}
