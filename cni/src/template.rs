//! A CNI configuration written from a template once the node's pod CIDR is known, as
//! containerd's CRI does with its `conf_template` (`{{.PodCIDR}}` replaced; the written file is
//! the first one libcni reads when the directory holds no other): how a kubenet-style bridge
//! network gets each node's own range, from `--pod-cidr` or the Node's `spec.podCIDR`.

use std::path::{Path, PathBuf};

/// The file written into `--cni-conf-dir`.
pub const WRITTEN: &str = "10-dockerlet.conflist";
/// What is replaced.
pub const PLACEHOLDER: &str = "{{.PodCIDR}}";

/// The template cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// It cannot be read.
    #[error("--cni-conf-template {}: {source}", path.display())]
    Read {
        /// The template.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It does not name the pod CIDR.
    #[error("--cni-conf-template {}: no {PLACEHOLDER} in it", path.display())]
    NoPlaceholder {
        /// The template.
        path: PathBuf,
    },
    /// The rendered configuration is not a configuration list.
    #[error("--cni-conf-template {}: {source}", path.display())]
    Invalid {
        /// The template.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::ConfigError,
    },
    /// The configuration cannot be written.
    #[error("write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A template and the directory its configuration goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfTemplate {
    /// `--cni-conf-template`.
    pub template: PathBuf,
    /// `--cni-conf-dir`.
    pub conf_dir: PathBuf,
}

impl ConfTemplate {
    /// [`render`]s it for `pod_cidr`.
    pub fn render(&self, pod_cidr: &str) -> Result<Option<PathBuf>, TemplateError> {
        render(&self.template, &self.conf_dir, pod_cidr)
    }
}

/// Renders `template` for `pod_cidr` into `conf_dir`/[`WRITTEN`], unless it holds that already
/// (written whole: a temporary name libcni does not read, renamed). The path when it wrote.
pub fn render(template: &Path, conf_dir: &Path, pod_cidr: &str) -> Result<Option<PathBuf>, TemplateError> {
    let text = std::fs::read_to_string(template).map_err(|source| TemplateError::Read {
        path: template.to_path_buf(),
        source,
    })?;
    if !text.contains(PLACEHOLDER) {
        return Err(TemplateError::NoPlaceholder {
            path: template.to_path_buf(),
        });
    }
    let rendered = text.replace(PLACEHOLDER, pod_cidr);
    let target = conf_dir.join(WRITTEN);
    crate::NetworkConfigList::from_list_bytes(&target, rendered.as_bytes()).map_err(|source| {
        TemplateError::Invalid {
            path: template.to_path_buf(),
            source,
        }
    })?;
    if std::fs::read_to_string(&target).is_ok_and(|old| old == rendered) {
        return Ok(None);
    }
    let write_error = |source| TemplateError::Write {
        path: target.clone(),
        source,
    };
    std::fs::create_dir_all(conf_dir).map_err(write_error)?;
    let tmp = conf_dir.join(format!(".{WRITTEN}.tmp"));
    std::fs::write(&tmp, &rendered).map_err(write_error)?;
    std::fs::rename(&tmp, &target).map_err(write_error)?;
    Ok(Some(target))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CIDR replaces the placeholder; the same CIDR again writes nothing; a new one
    /// rewrites; a template without the placeholder or not a list is refused.
    #[test]
    fn the_template_is_rendered_for_the_pod_cidr() {
        let dir = tempfile::tempdir().expect("tempdir");
        let template = dir.path().join("template.json");
        let conf = dir.path().join("net.d");
        std::fs::write(
            &template,
            r#"{"cniVersion":"1.0.0","name":"pods","plugins":[{"type":"bridge","ipam":{"type":"host-local","ranges":[[{"subnet":"{{.PodCIDR}}"}]]}}]}"#,
        )
        .unwrap();
        let written = render(&template, &conf, "10.244.3.0/24")
            .expect("rendered")
            .expect("written");
        assert_eq!(written, conf.join("10-dockerlet.conflist"));
        let list = crate::config::load_file(&written).expect("a list");
        assert_eq!(list.plugins[0]["ipam"]["ranges"][0][0]["subnet"], "10.244.3.0/24");
        assert!(render(&template, &conf, "10.244.3.0/24").expect("same").is_none());
        assert!(render(&template, &conf, "10.244.4.0/24").expect("new").is_some());
        std::fs::write(&template, r#"{"name":"pods","plugins":[{"type":"bridge"}]}"#).unwrap();
        assert!(matches!(
            render(&template, &conf, "10.0.0.0/24"),
            Err(TemplateError::NoPlaceholder { .. })
        ));
        std::fs::write(&template, r#"{"name":"{{.PodCIDR}}"}"#).unwrap();
        assert!(matches!(
            render(&template, &conf, "10.0.0.0/24"),
            Err(TemplateError::Invalid { .. })
        ));
    }
}
