//! Network configuration lists, loaded as libcni and cri-dockerd load them: the files of
//! `--cni-conf-dir` ending in `.conf`, `.conflist` or `.json`, in lexical order; a `.conflist`
//! read as a list, any other as one plugin's configuration made a list of one (libcni's
//! `ConfFiles`, `ConfListFromFile`, `ConfFromFile`, `ConfListFromConf`); the first file that
//! parses and whose plugins are all found in the binary directories is the pod network
//! (cri-dockerd's `getDefaultCNINetwork`, `network/cni/cni.go`).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::ConfigError;
use crate::exec::find_plugin;

/// The extensions libcni reads.
const EXTENSIONS: [&str; 3] = ["conf", "conflist", "json"];

/// One network: a list of plugins run in order.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkConfigList {
    /// `name`.
    pub name: String,
    /// `cniVersion` (libcni passes it to every plugin).
    pub cni_version: String,
    /// `disableCheck`.
    pub disable_check: bool,
    /// Each plugin's configuration object, `type` among its keys.
    pub plugins: Vec<Map<String, Value>>,
    /// The file it came from.
    pub path: PathBuf,
    /// The list as JSON (a `.conf` turned into a list): what libcni's cache keeps.
    pub bytes: Vec<u8>,
}

impl NetworkConfigList {
    /// The `type` of plugin `i`.
    pub fn plugin_type(plugin: &Map<String, Value>) -> &str {
        plugin.get("type").and_then(Value::as_str).unwrap_or_default()
    }

    /// Parses a list from `bytes` (libcni's `ConfListFromBytes`).
    pub fn from_list_bytes(path: &Path, bytes: &[u8]) -> Result<Self, ConfigError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |what: &str| ConfigError::Invalid {
            path: path.to_path_buf(),
            what: format!("error parsing configuration list: {what}"),
        };
        let object = value.as_object().ok_or_else(|| invalid("not a JSON object"))?;
        let name = match object.get("name") {
            Some(Value::String(name)) if !name.is_empty() => name.clone(),
            _ => return Err(invalid("no name")),
        };
        let cni_version = object
            .get("cniVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let disable_check = object.get("disableCheck").and_then(Value::as_bool).unwrap_or(false);
        let plugins = match object.get("plugins") {
            None => return Err(invalid("no 'plugins' key")),
            Some(Value::Array(plugins)) => plugins,
            Some(other) => return Err(invalid(&format!("invalid 'plugins' type {}", json_type(other)))),
        };
        let mut parsed = Vec::with_capacity(plugins.len());
        for (i, plugin) in plugins.iter().enumerate() {
            let Some(plugin) = plugin.as_object() else {
                return Err(invalid(&format!(
                    "failed to parse plugin config {i}: not a JSON object"
                )));
            };
            if plugin.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(invalid(&format!("failed to parse plugin config {i}: missing 'type'")));
            }
            parsed.push(plugin.clone());
        }
        if parsed.is_empty() {
            return Err(invalid("no plugins in list"));
        }
        Ok(NetworkConfigList {
            name,
            cni_version,
            disable_check,
            plugins: parsed,
            path: path.to_path_buf(),
            bytes: bytes.to_vec(),
        })
    }

    /// Parses one plugin's configuration and makes it a list of one (libcni's `ConfFromBytes`
    /// and `ConfListFromConf`).
    pub fn from_conf_bytes(path: &Path, bytes: &[u8]) -> Result<Self, ConfigError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        let object = value.as_object().ok_or_else(|| ConfigError::Invalid {
            path: path.to_path_buf(),
            what: "error parsing configuration: not a JSON object".into(),
        })?;
        if object.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                what: "error parsing configuration: missing 'type'; perhaps this is a .conflist?".into(),
            });
        }
        let list = serde_json::json!({
            "cniVersion": object.get("cniVersion").cloned().unwrap_or(Value::String(String::new())),
            "name": object.get("name").cloned().unwrap_or(Value::Null),
            "plugins": [value.clone()],
        });
        let bytes = serde_json::to_vec(&list).unwrap_or_default();
        Self::from_list_bytes(path, &bytes)
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The configuration files of `dir`, in the order libcni reads them.
pub fn conf_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        // A directory not there yet is an empty one: the network is not ready.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ConfigError::ReadDir {
                dir: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.contains(&e))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Reads one file as libcni does by its extension.
pub fn load_file(path: &Path) -> Result<NetworkConfigList, ConfigError> {
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if path.extension().and_then(|e| e.to_str()) == Some("conflist") {
        NetworkConfigList::from_list_bytes(path, &bytes)
    } else {
        NetworkConfigList::from_conf_bytes(path, &bytes)
    }
}

/// What loading the directory found: the network, or why there is none.
#[derive(Debug)]
pub struct Loaded {
    /// The first usable network.
    pub network: Option<NetworkConfigList>,
    /// Each file passed over, and why (logged by the caller, as cri-dockerd warns).
    pub skipped: Vec<(PathBuf, String)>,
}

/// The pod network: the first file of `dir` that parses and whose plugins are all in
/// `bin_dirs`.
pub fn load_default(dir: &Path, bin_dirs: &[PathBuf]) -> Result<Loaded, ConfigError> {
    let mut skipped = Vec::new();
    for path in conf_files(dir)? {
        let list = match load_file(&path) {
            Ok(list) => list,
            Err(e) => {
                skipped.push((path, e.to_string()));
                continue;
            }
        };
        let missing = list
            .plugins
            .iter()
            .map(NetworkConfigList::plugin_type)
            .find_map(|t| find_plugin(t, bin_dirs).err());
        if let Some(e) = missing {
            skipped.push((path, format!("error validating CNI config list: {e}")));
            continue;
        }
        return Ok(Loaded {
            network: Some(list),
            skipped,
        });
    }
    Ok(Loaded { network: None, skipped })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).expect("write");
    }

    fn bin_dir_with(plugins: &[&str]) -> tempfile::TempDir {
        let bin = tempfile::tempdir().expect("tempdir");
        for p in plugins {
            let path = bin.path().join(p);
            std::fs::write(&path, "#!/bin/sh\n").expect("write");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        bin
    }

    /// Lexical order over `.conf`, `.conflist` and `.json`; other files and directories are not
    /// configuration.
    #[test]
    fn files_are_read_in_lexical_order_by_extension() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in [
            "20-b.conflist",
            "10-a.conf",
            "05-x.txt",
            "30-c.json",
            "00-backup.conf.bak",
        ] {
            write(dir.path(), name, "{}");
        }
        std::fs::create_dir(dir.path().join("01-dir.conf")).expect("mkdir");
        let names: Vec<String> = conf_files(dir.path())
            .expect("files")
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["10-a.conf", "20-b.conflist", "30-c.json"]);
        assert!(conf_files(&dir.path().join("missing")).expect("no dir").is_empty());
    }

    /// A `.conf` becomes a list of one with its name and version; the first usable file wins;
    /// a broken one and one naming a missing plugin are passed over, saying why.
    #[test]
    fn the_first_usable_file_is_the_network() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "00-broken.conflist", "{not json");
        write(
            dir.path(),
            "05-missing.conflist",
            r#"{"cniVersion":"1.0.0","name":"m","plugins":[{"type":"flannel"}]}"#,
        );
        write(
            dir.path(),
            "10-net.conf",
            r#"{"cniVersion":"0.4.0","name":"net","type":"bridge","bridge":"cni0"}"#,
        );
        write(
            dir.path(),
            "20-later.conflist",
            r#"{"cniVersion":"1.0.0","name":"later","plugins":[{"type":"bridge"}]}"#,
        );
        let bin = bin_dir_with(&["bridge"]);
        let loaded = load_default(dir.path(), &[bin.path().to_path_buf()]).expect("load");
        let net = loaded.network.expect("a network");
        assert_eq!(net.name, "net");
        assert_eq!(net.cni_version, "0.4.0");
        assert_eq!(net.plugins.len(), 1);
        assert_eq!(net.plugins[0]["bridge"], "cni0");
        assert_eq!(loaded.skipped.len(), 2);
        assert!(
            loaded.skipped[0].1.contains("error parsing configuration"),
            "{:?}",
            loaded.skipped
        );
        assert!(
            loaded.skipped[1].1.contains("failed to find plugin \"flannel\""),
            "{:?}",
            loaded.skipped
        );
    }

    /// libcni's texts for lists without a name, without plugins, with an empty list, and for a
    /// `.conf` that is a list.
    #[test]
    fn bad_lists_are_refused_in_libcni_words() {
        let p = Path::new("/etc/cni/net.d/x.conflist");
        let err = |text: &str| {
            NetworkConfigList::from_list_bytes(p, text.as_bytes())
                .expect_err("refused")
                .to_string()
        };
        assert!(err(r#"{"plugins":[]}"#).ends_with("error parsing configuration list: no name"));
        assert!(err(r#"{"name":"n"}"#).ends_with("no 'plugins' key"));
        assert!(err(r#"{"name":"n","plugins":{}}"#).ends_with("invalid 'plugins' type object"));
        assert!(err(r#"{"name":"n","plugins":[]}"#).ends_with("no plugins in list"));
        assert!(err(r#"{"name":"n","plugins":[{"a":1}]}"#).ends_with("failed to parse plugin config 0: missing 'type'"));
        let conf = NetworkConfigList::from_conf_bytes(Path::new("/x.conf"), br#"{"name":"n","plugins":[]}"#)
            .expect_err("a list in a .conf");
        assert!(conf.to_string().contains("perhaps this is a .conflist?"), "{conf}");
    }
}
