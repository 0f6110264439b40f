//! The node's registry credentials: the Docker config file kubelet reads for every pull
//! (`pkg/credentialprovider/config.go` ReadDockerConfigFile). The first file found wins:
//! `config.json` in the root dir (`--root-dir`, kubelet's preferred path), the working
//! directory, `$HOME/.docker` and `/.docker`; then the legacy `.dockercfg` in the root dir, the
//! working directory, `$HOME` and `/`.

use std::path::{Path, PathBuf};

use dockerlet_pod::credentials::{ConfigFormat, CredentialError, DockerKeyring};

/// The node's Docker config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum NodeConfigError {
    /// The file is there but could not be read.
    #[error("cannot read the node's Docker config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a Docker config.
    #[error(transparent)]
    Parse(#[from] CredentialError),
}

/// The candidate files, in kubelet's order.
pub fn candidates(root_dir: &Path) -> Vec<(PathBuf, ConfigFormat)> {
    let cwd = std::env::current_dir().ok();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut json = vec![root_dir.to_path_buf()];
    json.extend(cwd.clone());
    json.extend(home.as_ref().map(|h| h.join(".docker")));
    json.push(PathBuf::from("/.docker"));
    let mut legacy = vec![root_dir.to_path_buf()];
    legacy.extend(cwd);
    legacy.extend(home);
    legacy.push(PathBuf::from("/"));
    json.into_iter()
        .map(|d| (d.join("config.json"), ConfigFormat::Json))
        .chain(legacy.into_iter().map(|d| (d.join(".dockercfg"), ConfigFormat::Legacy)))
        .collect()
}

/// The node's credentials from the first of `files` that exists; none when none does. Blocking
/// file I/O: call it on the blocking pool.
pub fn node_keyring(files: &[(PathBuf, ConfigFormat)]) -> Result<Option<(PathBuf, DockerKeyring)>, NodeConfigError> {
    for (path, format) in files {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => continue,
            Err(source) => {
                return Err(NodeConfigError::Read {
                    path: path.clone(),
                    source,
                })
            }
        };
        let keyring = DockerKeyring::parse(&bytes, *format, &path.display().to_string())?;
        return Ok(Some((path.clone(), keyring)));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The root dir's config.json comes first, the legacy file after every config.json; a
    /// missing file is skipped, a malformed one names its path.
    #[test]
    fn the_first_file_found_is_read() {
        let root = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let files = vec![
            (root.path().join("config.json"), ConfigFormat::Json),
            (home.path().join("config.json"), ConfigFormat::Json),
            (root.path().join(".dockercfg"), ConfigFormat::Legacy),
        ];
        assert!(node_keyring(&files).unwrap().is_none());
        std::fs::write(
            root.path().join(".dockercfg"),
            r#"{"r.example":{"username":"legacy","password":"p"}}"#,
        )
        .unwrap();
        std::fs::write(
            home.path().join("config.json"),
            r#"{"auths":{"r.example":{"username":"home","password":"p"}}}"#,
        )
        .unwrap();
        let (path, ring) = node_keyring(&files).unwrap().unwrap();
        assert_eq!(path, home.path().join("config.json"));
        assert_eq!(ring.lookup("r.example/app")[0].username, "home");
        std::fs::write(root.path().join("config.json"), "not json").unwrap();
        let e = node_keyring(&files).unwrap_err().to_string();
        assert!(
            e.contains(&root.path().join("config.json").display().to_string()),
            "{e}"
        );
        let order = candidates(Path::new("/var/lib/kubelet"));
        assert_eq!(order[0].0, Path::new("/var/lib/kubelet/config.json"));
        assert_eq!(order.last().unwrap().0, Path::new("/.dockercfg"));
    }
}
