//! Static pod manifests: reading a directory, parsing, validating and defaulting
//! (reference §1.1, §1.4). Pure apart from reading the files.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use dockerlet_messages::source::{DesiredPod, ManifestError};
use dockerlet_messages::PodUid;
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus, Toleration};
use sha2::{Digest, Sha256};

use crate::probe::handlers::NON_NUMERIC_GRPC_PORT;

/// Largest manifest read (kubelet `maxConfigLength`).
pub const MAX_MANIFEST_BYTES: u64 = 10 * 1024 * 1024;

/// `kubernetes.io/config.source`
pub const CONFIG_SOURCE: &str = "kubernetes.io/config.source";
/// `kubernetes.io/config.hash`
pub const CONFIG_HASH: &str = "kubernetes.io/config.hash";
/// `kubernetes.io/config.mirror`: on a mirror pod, the static pod's config hash
pub const CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";
/// `kubernetes.io/config.seen`
pub const CONFIG_SEEN: &str = "kubernetes.io/config.seen";

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
}

/// A file's modification time and size when it was read, and what it gave.
type CachedManifest = (Option<std::time::SystemTime>, u64, Result<Pod, String>);

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
                let result = read_one(&file, node_name);
                cache.files.insert(file.clone(), (mtime, len, result.clone()));
                result
            }
            (None, _) => read_one(&file, node_name),
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
                pods.push(DesiredPod {
                    uid: PodUid(pod.metadata.uid.clone().unwrap_or_default()),
                    pod,
                    origin: display,
                });
            }
            Err(reason) => errors.push(ManifestError { file: display, reason }),
        }
    }
    (pods, errors)
}

/// Read, parse, validate and default one manifest file; the error is the reason.
pub fn read_one(file: &Path, node_name: &str) -> Result<Pod, String> {
    let size = fs::metadata(file).map_err(|e| format!("cannot read: {e}"))?.len();
    if size > MAX_MANIFEST_BYTES {
        return Err(format!(
            "file is {size} bytes, larger than the {MAX_MANIFEST_BYTES} byte limit"
        ));
    }
    let content = fs::read(file).map_err(|e| format!("cannot read: {e}"))?;
    let pod = parse(file, &content)?;
    validate(&pod)?;
    Ok(default_static_pod(pod, node_name, &file.display().to_string()))
}

/// Parse one Pod from YAML or JSON (by extension); errors carry line and column.
pub fn parse(file: &Path, content: &[u8]) -> Result<Pod, String> {
    let text = std::str::from_utf8(content).map_err(|e| format!("not UTF-8: {e}"))?;
    let json = file.extension().is_some_and(|e| e == "json");
    let typed = if json {
        serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))
    } else {
        serde_saphyr::from_str(text).map_err(|e| {
            // serde-saphyr adds a source snippet after the first line; the first line has it all.
            let message = e.to_string();
            let first = message.lines().next().unwrap_or_default();
            format!("invalid YAML: {}", first.trim_start_matches("error: "))
        })
    };
    typed.or_else(|error| {
        // A named port on a gRPC probe is a type error for the whole Pod; refuse only its
        // container instead (the probe's validation names the field).
        let mut value: serde_json::Value = if json {
            serde_json::from_str(text).map_err(|_| error.clone())?
        } else {
            serde_saphyr::from_str(text).map_err(|_| error.clone())?
        };
        if !mark_named_grpc_ports(&mut value) {
            return Err(error);
        }
        serde_json::from_value(value).map_err(|_| error)
    })
}

/// Replace each gRPC probe port given as a string with [`NON_NUMERIC_GRPC_PORT`]; true if any.
fn mark_named_grpc_ports(pod: &mut serde_json::Value) -> bool {
    let mut marked = false;
    for list in ["containers", "initContainers"] {
        let Some(containers) = pod["spec"][list].as_array_mut() else {
            continue;
        };
        for container in containers {
            for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
                let port = container
                    .get_mut(probe)
                    .and_then(|p| p.get_mut("grpc"))
                    .and_then(|g| g.get_mut("port"));
                if let Some(port) = port.filter(|p| p.is_string()) {
                    *port = serde_json::Value::from(NON_NUMERIC_GRPC_PORT);
                    marked = true;
                }
            }
        }
    }
    marked
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// The checks the API server would make that matter to this node; the error names the field.
pub fn validate(pod: &Pod) -> Result<(), String> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        return Err("metadata.name: Required value: name is required".to_string());
    }
    if !is_dns_subdomain(name) {
        return Err(format!(
            "metadata.name: Invalid value: {name:?}: must be a lowercase RFC 1123 subdomain"
        ));
    }
    if let Some(ns) = pod.metadata.namespace.as_deref().filter(|n| !n.is_empty()) {
        if !is_dns_label(ns) {
            return Err(format!(
                "metadata.namespace: Invalid value: {ns:?}: must be a lowercase RFC 1123 label"
            ));
        }
    }
    let Some(spec) = &pod.spec else {
        return Err("spec: Required value".to_string());
    };
    if spec.containers.is_empty() {
        return Err("spec.containers: Required value: at least one container is required".to_string());
    }
    if let Some(policy) = spec.restart_policy.as_deref() {
        if !["Always", "OnFailure", "Never"].contains(&policy) {
            return Err(format!("spec.restartPolicy: Unsupported value: {policy:?}: supported values: \"Always\", \"OnFailure\", \"Never\""));
        }
    }
    if spec.termination_grace_period_seconds.is_some_and(|g| g < 0) {
        return Err("spec.terminationGracePeriodSeconds: Invalid value: must be >= 0".to_string());
    }
    let mut seen = HashSet::new();
    for (field, c) in crate::pod_worker::container_spec::containers_with_fields(spec) {
        validate_container(&field, c)?;
        if !seen.insert(c.name.as_str()) {
            return Err(format!("{field}.name: Duplicate value: {:?}", c.name));
        }
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        if c.restart_policy.is_some() {
            return Err(format!(
                "spec.initContainers[{i}].restartPolicy: Unsupported value: sidecar (restartable init) containers are not supported yet"
            ));
        }
    }
    if spec.ephemeral_containers.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err("spec.ephemeralContainers: Forbidden: static pods may not have ephemeral containers".to_string());
    }
    crate::pod_worker::volumes::validate(pod)
}

fn validate_container(field: &str, c: &Container) -> Result<(), String> {
    if !is_dns_label(&c.name) {
        return Err(format!(
            "{field}.name: Invalid value: {:?}: must be a lowercase RFC 1123 label",
            c.name
        ));
    }
    if c.image.as_deref().unwrap_or_default().trim().is_empty() {
        return Err(format!("{field}.image: Required value"));
    }
    if let Some(policy) = c.image_pull_policy.as_deref() {
        if !["Always", "IfNotPresent", "Never"].contains(&policy) {
            return Err(format!("{field}.imagePullPolicy: Unsupported value: {policy:?}"));
        }
    }
    for (i, p) in c.ports.iter().flatten().enumerate() {
        if !(1..=65535).contains(&p.container_port) {
            return Err(format!(
                "{field}.ports[{i}].containerPort: Invalid value: {}: must be between 1 and 65535",
                p.container_port
            ));
        }
        if let Some(h) = p.host_port.filter(|h| !(0..=65535).contains(h)) {
            return Err(format!(
                "{field}.ports[{i}].hostPort: Invalid value: {h}: must be between 0 and 65535"
            ));
        }
    }
    Ok(())
}

/// A static pod's UID: 32 hex characters from the pod's content, node name and file path
/// (kubelet hashes the same inputs; editing the manifest gives a new UID).
pub fn static_pod_uid(pod: &Pod, node_name: &str, source: StaticSource<'_>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(pod).unwrap_or_default());
    hasher.update(format!("host:{node_name}"));
    hasher.update(match source {
        StaticSource::File(file) => format!("file:{file}"),
        StaticSource::Url(url) => format!("url:{url}"),
    });
    hex::encode(&hasher.finalize()[..16])
}

/// Where a static pod came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaticSource<'a> {
    /// A manifest file (`--pod-manifest-path`).
    File(&'a str),
    /// A manifest URL (`--manifest-url`).
    Url(&'a str),
}

/// Parse the body of a manifest URL: one Pod or a PodList, JSON or YAML (kubelet's HTTP source).
pub fn parse_url_body(content: &[u8]) -> Result<Vec<Pod>, String> {
    let text = std::str::from_utf8(content).map_err(|e| format!("not UTF-8: {e}"))?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let value: serde_json::Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?
    } else {
        serde_saphyr::from_str(text).map_err(|e| {
            let message = e.to_string();
            format!(
                "invalid YAML: {}",
                message.lines().next().unwrap_or_default().trim_start_matches("error: ")
            )
        })?
    };
    let decode = |mut v: serde_json::Value| {
        serde_json::from_value::<Pod>(v.clone()).or_else(|e| {
            if mark_named_grpc_ports(&mut v) {
                serde_json::from_value::<Pod>(v).map_err(|_| format!("invalid pod: {e}"))
            } else {
                Err(format!("invalid pod: {e}"))
            }
        })
    };
    match value.get("kind").and_then(|k| k.as_str()) {
        Some("PodList") => value
            .get("items")
            .and_then(|i| i.as_array())
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(decode)
            .collect(),
        _ => Ok(vec![decode(value)?]),
    }
}

/// Kubelet's defaulting of file pods: `<name>-<node>`, namespace `default`, UID, annotations,
/// `spec.nodeName`, the NoExecute toleration, API defaults, phase Pending.
pub fn default_static_pod(pod: Pod, node_name: &str, file: &str) -> Pod {
    default_static_pod_from(pod, node_name, StaticSource::File(file))
}

/// [`default_static_pod`] for any static source: URL pods get `config.source: http` and no
/// NoExecute toleration (kubelet adds it to file pods only).
pub fn default_static_pod_from(mut pod: Pod, node_name: &str, source: StaticSource<'_>) -> Pod {
    let uid = pod
        .metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| static_pod_uid(&pod, node_name, source));
    let m = &mut pod.metadata;
    m.name = Some(format!(
        "{}-{}",
        m.name.as_deref().unwrap_or_default(),
        node_name.to_lowercase()
    ));
    if m.namespace.as_deref().is_none_or(str::is_empty) {
        m.namespace = Some("default".to_string());
    }
    m.uid = Some(uid.clone());
    let annotations = m.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(CONFIG_HASH.to_string(), uid);
    let source_name = match source {
        StaticSource::File(_) => "file",
        StaticSource::Url(_) => "http",
    };
    annotations.insert(CONFIG_SOURCE.to_string(), source_name.to_string());
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(node_name.to_string());
    spec.restart_policy.get_or_insert_with(|| "Always".to_string());
    spec.termination_grace_period_seconds.get_or_insert(30);
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".to_string());
    spec.scheduler_name
        .get_or_insert_with(|| "default-scheduler".to_string());
    if source_name == "file" {
        spec.tolerations.get_or_insert_with(Vec::new).push(Toleration {
            operator: Some("Exists".to_string()),
            effect: Some("NoExecute".to_string()),
            ..Default::default()
        });
    }
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        default_container(c);
    }
    pod.status = Some(PodStatus {
        phase: Some("Pending".to_string()),
        ..Default::default()
    });
    pod
}

fn default_container(c: &mut Container) {
    let image = c.image.clone().unwrap_or_default();
    c.image_pull_policy
        .get_or_insert_with(|| crate::pod_worker::sync::default_pull_policy(&image).to_string());
    c.termination_message_path
        .get_or_insert_with(|| "/dev/termination-log".to_string());
    c.termination_message_policy.get_or_insert_with(|| "File".to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: dockerlet.local/busybox:1\n";

    fn write(dir: &Path, name: &str, content: &str) {
        fs::write(dir.join(name), content).unwrap();
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
        assert_eq!(read_manifests(dir.path(), "Node1").0[0].uid.0, uid);
        write(dir.path(), "web.yaml", &GOOD.replace("busybox:1", "busybox:2"));
        assert_ne!(read_manifests(dir.path(), "Node1").0[0].uid.0, uid);
        assert_ne!(read_manifests(dir.path(), "node2").0[0].uid.0, uid);
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
        write(
            dir.path(),
            "sidecar.yaml",
            &GOOD.replace("web", "sc").replace(
                "  containers:",
                "  initContainers:\n  - name: s\n    image: i:1\n    restartPolicy: Always\n  containers:",
            ),
        );
        let (pods, errors) = read_manifests(dir.path(), "n");
        assert_eq!(pods.len(), 1);
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
        assert!(
            reason("sidecar.yaml").starts_with("spec.initContainers[0].restartPolicy"),
            "{}",
            reason("sidecar.yaml")
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
        assert!(parse_url_body(b"{not json").unwrap_err().starts_with("invalid JSON"));
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
        let err = parse(Path::new("g.yaml"), bad.as_bytes()).unwrap_err();
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
