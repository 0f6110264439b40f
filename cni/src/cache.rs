//! What was attached, kept on disk so a DEL can be made after the agent restarts: libcni's
//! cache (`<cache dir>/results/<network>-<container>-<ifname>`, `kind: cniCacheV1`, the
//! network configuration as base64, the CNI args, the capability args and the result), so
//! `cnitool` and other libcni users read it too. One field is the agent's own:
//! `dockerletNode`, the node name that made the attachment, so agents sharing a cache
//! directory clean up only their own.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One attachment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedAttachment {
    /// `cniCacheV1`.
    pub kind: String,
    /// The sandbox's container ID.
    pub container_id: String,
    /// The network configuration list, as libcni stores Go's `[]byte`: base64.
    #[serde(with = "base64_bytes")]
    pub config: Vec<u8>,
    /// The interface in the sandbox.
    pub if_name: String,
    /// The network's name.
    pub network_name: String,
    /// The namespace path at ADD.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub netns: String,
    /// `CNI_ARGS` as pairs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cni_args: Vec<(String, String)>,
    /// The runtime capabilities offered.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub capability_args: Map<String, Value>,
    /// The result of the last plugin.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub result: Value,
    /// The agent's node name (not libcni's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dockerlet_node: String,
    /// The ADD has not finished (the agent's, not libcni's): `result` is what the plugins that
    /// ran gave, for the DEL that undoes them; the sandbox has no address yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dockerlet_incomplete: bool,
}

mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

/// The kind libcni writes.
pub const KIND: &str = "cniCacheV1";

/// The cache directory.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The cache under `dir` (`--cni-cache-dir`).
    pub fn new(dir: PathBuf) -> Self {
        Cache { dir }
    }

    fn results(&self) -> PathBuf {
        self.dir.join("results")
    }

    /// The file of one attachment (libcni's `getCacheFilePath`).
    pub fn path(&self, network: &str, container_id: &str, ifname: &str) -> PathBuf {
        self.results().join(format!("{network}-{container_id}-{ifname}"))
    }

    /// Keeps `entry`, written whole (a temporary file renamed into place).
    pub fn write(&self, entry: &CachedAttachment) -> std::io::Result<PathBuf> {
        let path = self.path(&entry.network_name, &entry.container_id, &entry.if_name);
        std::fs::create_dir_all(self.results())?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec(entry).map_err(std::io::Error::other)?)?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }

    /// The attachment of `container_id`, whatever its network (one interface per sandbox):
    /// only the files whose names carry the ID are read.
    pub fn find(&self, container_id: &str) -> Option<(PathBuf, CachedAttachment)> {
        if container_id.is_empty() {
            return None;
        }
        let marker = format!("-{container_id}-");
        let dir = std::fs::read_dir(self.results()).ok()?;
        dir.filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.contains(&marker) && !n.ends_with(".tmp"))
            })
            .filter_map(|e| read(&e.path()).map(|entry| (e.path(), entry)))
            .find(|(_, e)| e.kind == KIND && e.container_id == container_id)
    }

    /// Every readable attachment.
    pub fn entries(&self) -> Vec<(PathBuf, CachedAttachment)> {
        let Ok(dir) = std::fs::read_dir(self.results()) else {
            return Vec::new();
        };
        dir.filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_none_or(|e| e != "tmp"))
            .filter_map(|p| read(&p).map(|e| (p, e)))
            .filter(|(_, e)| e.kind == KIND)
            .collect()
    }

    /// Forgets the attachment in `path`.
    pub fn remove(path: &Path) -> std::io::Result<()> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

fn read(path: &Path) -> Option<CachedAttachment> {
    let bytes = std::fs::read(path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(entry) => Some(entry),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "unreadable CNI cache file");
            None
        }
    }
}

/// Decodes what libcni's cache holds as base64 (for tests and tools).
pub fn decode_config(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    base64::engine::general_purpose::STANDARD.decode(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Written as libcni names and shapes it; read back; found by container; removed.
    #[test]
    fn an_attachment_round_trips_in_libcni_shape() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = Cache::new(dir.path().to_path_buf());
        let entry = CachedAttachment {
            kind: KIND.into(),
            container_id: "c0ffee".into(),
            config: br#"{"name":"net"}"#.to_vec(),
            if_name: "eth0".into(),
            network_name: "net".into(),
            netns: "/proc/7/ns/net".into(),
            cni_args: vec![("K8S_POD_NAME".into(), "p".into())],
            capability_args: Map::new(),
            result: json!({"cniVersion": "1.0.0"}),
            dockerlet_node: "node-a".into(),
            dockerlet_incomplete: false,
        };
        let path = cache.write(&entry).expect("write");
        assert_eq!(path, dir.path().join("results/net-c0ffee-eth0"));
        let raw: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(raw["kind"], "cniCacheV1");
        assert_eq!(raw["containerId"], "c0ffee");
        assert_eq!(
            decode_config(raw["config"].as_str().unwrap()).unwrap(),
            br#"{"name":"net"}"#
        );
        assert_eq!(raw["cniArgs"], json!([["K8S_POD_NAME", "p"]]));
        assert_eq!(raw["ifName"], "eth0");
        let (found_path, found) = cache.find("c0ffee").expect("found");
        assert_eq!((found_path.clone(), found), (path.clone(), entry));
        assert!(cache.find("other").is_none());
        Cache::remove(&found_path).expect("remove");
        Cache::remove(&found_path).expect("gone already is fine");
        assert!(cache.entries().is_empty());
    }
}
