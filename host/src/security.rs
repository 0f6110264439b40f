//! The node's side of security contexts: whether AppArmor is enabled, and reading a Localhost
//! seccomp profile. Blocking; called at start or on the blocking pool.

use std::path::{Path, PathBuf};

/// Where the kernel says whether AppArmor is enabled (`Y` or `N`), as kubelet reads it.
pub const APPARMOR_ENABLED: &str = "/sys/module/apparmor/parameters/enabled";

/// Is AppArmor enabled on this host? No when the module is absent.
pub fn apparmor_enabled() -> bool {
    apparmor_enabled_at(Path::new(APPARMOR_ENABLED))
}

fn apparmor_enabled_at(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|s| s.trim_start().starts_with('Y'))
}

/// A Localhost seccomp profile that cannot be read. The container waits with
/// CreateContainerConfigError; the next sync reads it again.
#[derive(Debug, thiserror::Error)]
#[error("cannot load seccomp profile {:?}: {source}", path.display().to_string())]
pub struct SeccompProfileError {
    /// `<root-dir>/seccomp/<localhostProfile>`.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// Read a Localhost seccomp profile (at most 1 MiB, as no real profile is larger).
pub fn read_seccomp_profile(path: &Path) -> Result<String, SeccompProfileError> {
    use std::io::Read;
    let err = |source| SeccompProfileError {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(err)?
        .take(1 << 20)
        .read_to_string(&mut text)
        .map_err(err)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AppArmor counts as enabled only when the parameter says `Y`.
    #[test]
    fn apparmor_is_enabled_only_when_the_kernel_says_so() {
        let dir = std::env::temp_dir().join(format!("dockerlet-apparmor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("enabled");
        std::fs::write(&file, "Y\n").unwrap();
        assert!(apparmor_enabled_at(&file));
        std::fs::write(&file, "N\n").unwrap();
        assert!(!apparmor_enabled_at(&file));
        assert!(!apparmor_enabled_at(&dir.join("missing")));
        let profile = dir.join("profile.json");
        std::fs::write(&profile, "{}").unwrap();
        assert_eq!(read_seccomp_profile(&profile).unwrap(), "{}");
        let missing = read_seccomp_profile(&dir.join("nope.json")).unwrap_err().to_string();
        assert!(missing.starts_with("cannot load seccomp profile \""), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
