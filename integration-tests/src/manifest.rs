//! Manifest directories for `--pod-manifest-path`, and the YAML fixtures in `manifests/testdata/`.

use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// `manifests/testdata/` in the workspace.
pub fn testdata_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/testdata")
}

/// The text of the fixture `manifests/testdata/<name>`.
pub fn fixture(name: &str) -> String {
    let path = testdata_dir().join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", path.display()))
}

/// Writes `yaml` to `dir/file` atomically.
///
/// The text goes to a dot-file first (the agent ignores names starting with `.`) and is renamed
/// into place, so the agent never reads a half-written manifest.
pub fn write_manifest(dir: &Path, file: &str, yaml: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    fs::write(&tmp, yaml).unwrap_or_else(|e| panic!("cannot write {}: {e}", tmp.display()));
    let dest = dir.join(file);
    fs::rename(&tmp, &dest).unwrap_or_else(|e| panic!("cannot rename to {}: {e}", dest.display()));
}

/// A temporary manifest directory, removed when dropped.
pub struct ManifestDir {
    dir: TempDir,
}

impl ManifestDir {
    /// An empty manifest directory.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("dockerlet-manifests-")
            .tempdir()
            .expect("cannot create a temporary manifest directory");
        Self { dir }
    }

    /// The directory, for `--pod-manifest-path`.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `yaml` as `file` (atomically, see [`write_manifest`]).
    pub fn write(&self, file: &str, yaml: &str) {
        write_manifest(self.path(), file, yaml);
    }

    /// Copies the fixture `manifests/testdata/<name>` in under the same file name.
    pub fn add_fixture(&self, name: &str) {
        self.write(name, &fixture(name));
    }

    /// Deletes `file`.
    pub fn remove(&self, file: &str) {
        let path = self.path().join(file);
        fs::remove_file(&path).unwrap_or_else(|e| panic!("cannot remove {}: {e}", path.display()));
    }
}

impl Default for ManifestDir {
    fn default() -> Self {
        Self::new()
    }
}
