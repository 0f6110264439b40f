//! Registry credentials for image pulls, as kubelet finds them (`pkg/credentialprovider`:
//! `keyring.go`, `config.go`, `secrets/secrets.go`).
//!
//! Two sources, in this order: the pod's `imagePullSecrets` (Secrets of type
//! `kubernetes.io/dockerconfigjson` with a `.dockerconfigjson` key, or `kubernetes.io/dockercfg`
//! with `.dockercfg`), then the node's Docker config file (read by the host layer). A
//! [`DockerKeyring`] holds the entries of one source; [`lookup`] answers every credential whose
//! registry matches the image, the pod's first, and the puller tries each in turn, an anonymous
//! pull only when none matches.
//!
//! Matching is kubelet's: a key is a registry host (glob parts allowed: `*.example.com`), with an
//! optional port that must be equal and an optional path that must prefix the image's repository;
//! the most specific key (reverse-sorted) comes first; Docker Hub's `index.docker.io` key serves
//! images without a registry.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One credential to pull with (Docker's `X-Registry-Auth`).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct RegistryAuth {
    /// User name.
    pub username: String,
    /// Password.
    pub password: String,
    /// The registry the entry was written for, as its key in the config.
    pub server: String,
}

impl std::fmt::Debug for RegistryAuth {
    /// Never the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryAuth")
            .field("username", &self.username)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// A Docker config that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// Not the JSON of a Docker config.
    #[error("{what} is not a Docker config: {source}")]
    Json {
        /// The Secret or file.
        what: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// An entry's `auth` is not base64 of `user:password`.
    #[error("{what}: the auth of registry {registry:?} is not base64 of user:password")]
    Auth {
        /// The Secret or file.
        what: String,
        /// The entry's key.
        registry: String,
    },
}

/// One entry of a Docker config (`auths.<registry>` in config.json, `<registry>` in .dockercfg).
#[derive(Debug, Default, Deserialize)]
struct ConfigEntry {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    /// base64 of `user:password`; wins over the separate fields, as in kubelet.
    #[serde(default)]
    auth: Option<String>,
}

/// config.json's shape.
#[derive(Debug, Default, Deserialize)]
struct ConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, ConfigEntry>,
}

/// The format of a Docker config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigFormat {
    /// `{"auths": {"<registry>": {...}}}` (config.json, `.dockerconfigjson`).
    Json,
    /// `{"<registry>": {...}}` (the legacy .dockercfg).
    Legacy,
}

/// The credentials of one source, by registry key, most specific key first.
#[derive(Debug, Default, Clone)]
pub struct DockerKeyring {
    /// (key, credential), sorted by key in reverse, entries of one key in file order.
    entries: Vec<(String, RegistryAuth)>,
}

/// Docker Hub's host as kubelet keys it.
const DEFAULT_REGISTRY_HOST: &str = "index.docker.io";

impl DockerKeyring {
    /// Parse a Docker config; `what` names it in errors ("Secret default/regcred").
    pub fn parse(bytes: &[u8], format: ConfigFormat, what: &str) -> Result<Self, CredentialError> {
        let json = |source| CredentialError::Json {
            what: what.to_string(),
            source,
        };
        let auths = match format {
            ConfigFormat::Json => serde_json::from_slice::<ConfigJson>(bytes).map_err(json)?.auths,
            ConfigFormat::Legacy => serde_json::from_slice::<BTreeMap<String, ConfigEntry>>(bytes).map_err(json)?,
        };
        let mut keyring = DockerKeyring::default();
        for (registry, entry) in auths {
            let (username, password) = match &entry.auth {
                Some(auth) if !auth.is_empty() => decode_auth(auth).ok_or_else(|| CredentialError::Auth {
                    what: what.to_string(),
                    registry: registry.clone(),
                })?,
                _ => (
                    entry.username.clone().unwrap_or_default(),
                    entry.password.clone().unwrap_or_default(),
                ),
            };
            let auth = RegistryAuth {
                username,
                password,
                server: registry.clone(),
            };
            keyring.entries.push((registry_key(&registry), auth));
        }
        // Stable: entries of one key keep their order.
        keyring.entries.sort_by(|a, b| b.0.cmp(&a.0));
        Ok(keyring)
    }

    /// Whether it holds no credential.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every credential whose key matches `image`, most specific first; Docker Hub's entry for
    /// an image of Docker Hub when no key matched.
    pub fn lookup(&self, image: &str) -> Vec<RegistryAuth> {
        let repo = repository(image);
        let matched: Vec<RegistryAuth> = self
            .entries
            .iter()
            .filter(|(key, _)| url_matches(key, &repo))
            .map(|(_, auth)| auth.clone())
            .collect();
        if !matched.is_empty() || !is_default_registry(&repo) {
            return matched;
        }
        self.entries
            .iter()
            .filter(|(key, _)| key == DEFAULT_REGISTRY_HOST)
            .map(|(_, auth)| auth.clone())
            .collect()
    }
}

/// The credentials to try for `image`: each keyring's matches in turn (the pod's secrets before
/// the node's file), as kubelet's UnionDockerKeyring.
pub fn lookup(keyrings: &[DockerKeyring], image: &str) -> Vec<RegistryAuth> {
    keyrings.iter().flat_map(|k| k.lookup(image)).collect()
}

/// base64 `user:password` → the pair.
fn decode_auth(auth: &str) -> Option<(String, String)> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(auth.trim()).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.trim_matches('\0').to_string()))
}

/// A config key as kubelet indexes it: scheme dropped, `/v1/` or `/v2/` taken as the host alone,
/// otherwise host and path.
fn registry_key(location: &str) -> String {
    let (host, path) = split_schemeless(location);
    let path = if path.starts_with("/v2/") || path.starts_with("/v1/") {
        &path[3..]
    } else {
        path
    };
    if path.is_empty() || path == "/" {
        host.to_string()
    } else {
        format!("{host}{path}")
    }
}

/// (host with port, path from its `/`) of a URL with or without a scheme.
fn split_schemeless(location: &str) -> (&str, &str) {
    let rest = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))
        .unwrap_or(location);
    match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    }
}

/// The image's repository, the way kubelet looks it up: tag and digest dropped, the domain
/// split off as distribution's (`docker.io/library/` before an official name).
pub fn repository(image: &str) -> String {
    let name = image.split_once('@').map_or(image, |(name, _)| name);
    // A tag is after the last ':' that follows the last '/'.
    let name = match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => &name[..i],
        _ => name,
    };
    let (domain, path) = crate::image_ref::split_domain(name);
    format!("{domain}/{path}")
}

/// kubelet's isDefaultRegistryMatch.
fn is_default_registry(repository: &str) -> bool {
    let (first, rest) = repository.split_once('/').unwrap_or((repository, ""));
    if first.is_empty() {
        return false;
    }
    if rest.is_empty() || first == "docker.io" || first == "index.docker.io" {
        return true;
    }
    !first.contains(['.', ':'])
}

/// kubelet's URLsMatchStr: same port, same number of host parts each matching its glob, and the
/// key's path a prefix of the image's.
fn url_matches(key: &str, target: &str) -> bool {
    let (key_host, key_path) = split_schemeless(key);
    let (target_host, target_path) = split_schemeless(target);
    let (key_name, key_port) = split_port(key_host);
    let (target_name, target_port) = split_port(target_host);
    if key_port != target_port || !target_path.starts_with(key_path) {
        return false;
    }
    let key_parts: Vec<&str> = key_name.split('.').collect();
    let target_parts: Vec<&str> = target_name.split('.').collect();
    key_parts.len() == target_parts.len()
        && key_parts
            .iter()
            .zip(&target_parts)
            .all(|(glob, part)| glob::Pattern::new(glob).is_ok_and(|p| p.matches_with(part, glob::MatchOptions::new())))
}

/// (host, port) of `host[:port]`; an IPv6 literal keeps its brackets off.
fn split_port(host: &str) -> (&str, &str) {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((name, port)) => (name, port.strip_prefix(':').unwrap_or("")),
            None => (host, ""),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => (name, port),
        _ => (host, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn json_keyring(entries: &[(&str, &str)]) -> DockerKeyring {
        let auths: serde_json::Map<String, serde_json::Value> = entries
            .iter()
            .map(|(k, up)| (k.to_string(), serde_json::json!({ "auth": b64(up) })))
            .collect();
        let doc = serde_json::json!({ "auths": auths });
        DockerKeyring::parse(doc.to_string().as_bytes(), ConfigFormat::Json, "test").unwrap()
    }

    fn users(auths: &[RegistryAuth]) -> Vec<&str> {
        auths.iter().map(|a| a.username.as_str()).collect()
    }

    /// Repositories as kubelet's ParseImageName normalizes them.
    #[test]
    fn repositories_are_normalized() {
        assert_eq!(repository("busybox"), "docker.io/library/busybox");
        assert_eq!(repository("busybox:1.36"), "docker.io/library/busybox");
        assert_eq!(repository("team/app:v1"), "docker.io/team/app");
        assert_eq!(
            repository("127.0.0.1:5000/private/busybox:t1"),
            "127.0.0.1:5000/private/busybox"
        );
        assert_eq!(repository("localhost/app"), "localhost/app");
        assert_eq!(repository("gcr.io/p/img@sha256:abc"), "gcr.io/p/img");
        assert_eq!(repository("registry:5000/img"), "registry:5000/img");
    }

    /// A host key matches its images on the same port only; a path key only below its path;
    /// the more specific key comes first.
    #[test]
    fn keys_match_as_kubelet_matches_them() {
        let ring = json_keyring(&[
            ("127.0.0.1:5000", "host:h"),
            ("https://127.0.0.1:5000/private", "path:p"),
            ("127.0.0.1:6000", "other:o"),
        ]);
        assert_eq!(
            users(&ring.lookup("127.0.0.1:5000/private/busybox:t1")),
            ["path", "host"]
        );
        assert_eq!(users(&ring.lookup("127.0.0.1:5000/public/busybox")), ["host"]);
        assert!(ring.lookup("127.0.0.1/private/busybox").is_empty());
        assert!(ring.lookup("busybox").is_empty());
    }

    /// Glob host parts match one part each; the part count must be equal.
    #[test]
    fn glob_keys_match_one_host_part() {
        let ring = json_keyring(&[("*.example.com", "glob:g")]);
        assert_eq!(users(&ring.lookup("registry.example.com/app")), ["glob"]);
        assert!(ring.lookup("a.b.example.com/app").is_empty());
        assert!(ring.lookup("example.com/app").is_empty());
    }

    /// Docker Hub's key (as `docker login` writes it) serves images without a registry.
    #[test]
    fn docker_hub_credentials_serve_short_names() {
        let ring = json_keyring(&[("https://index.docker.io/v1/", "hub:h")]);
        assert_eq!(users(&ring.lookup("busybox")), ["hub"]);
        assert_eq!(users(&ring.lookup("team/app:1")), ["hub"]);
        assert!(ring.lookup("quay.io/team/app").is_empty());
    }

    /// username/password fields serve when there is no `auth`; the legacy format has no `auths`;
    /// the password is never printed.
    #[test]
    fn both_formats_and_both_spellings_parse() {
        let doc = r#"{"auths":{"r.example":{"username":"u","password":"s3cret-pw"}}}"#;
        let ring = DockerKeyring::parse(doc.as_bytes(), ConfigFormat::Json, "x").unwrap();
        let found = ring.lookup("r.example/app");
        assert_eq!(
            (found[0].username.as_str(), found[0].password.as_str()),
            ("u", "s3cret-pw")
        );
        assert_eq!(found[0].server, "r.example");
        assert!(!format!("{:?}", found[0]).contains("s3cret"));
        let legacy = format!(r#"{{"r.example":{{"auth":"{}","email":"e@x"}}}}"#, b64("l:pw"));
        let ring = DockerKeyring::parse(legacy.as_bytes(), ConfigFormat::Legacy, "x").unwrap();
        assert_eq!(users(&ring.lookup("r.example/app")), ["l"]);
    }

    /// Malformed JSON and an `auth` that is not user:password name their source.
    #[test]
    fn malformed_configs_name_their_source() {
        let e = DockerKeyring::parse(b"{", ConfigFormat::Json, "Secret default/regcred").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Secret default/regcred is not a Docker config"),
            "{e}"
        );
        let doc = format!(r#"{{"auths":{{"r":{{"auth":"{}"}}}}}}"#, b64("no-colon"));
        let e = DockerKeyring::parse(doc.as_bytes(), ConfigFormat::Json, "Secret default/regcred").unwrap_err();
        assert_eq!(
            e.to_string(),
            "Secret default/regcred: the auth of registry \"r\" is not base64 of user:password"
        );
    }

    /// The pod's keyring's matches come before the node's.
    #[test]
    fn the_pods_secrets_come_first() {
        let pod = json_keyring(&[("127.0.0.1:5000", "pod:1")]);
        let node = json_keyring(&[("127.0.0.1:5000", "node:2")]);
        assert_eq!(users(&lookup(&[pod, node], "127.0.0.1:5000/a")), ["pod", "node"]);
    }
}
