//! cri-dockerd's loopback network (`network/cni/cni_others.go`, `getLoNetwork`): before the pod
//! network, the `loopback` plugin brings `lo` up in the sandbox (the list `cni-loopback`, spec
//! 0.2.0, interface `lo`); on teardown it is asked to DEL, a failure only logged. Docker's `none`
//! network brings `lo` up already, so where the plugin is not installed it is passed over.

use std::path::Path;

use crate::NetworkConfigList;

/// The list cri-dockerd builds in.
const LIST: &str = r#"{"cniVersion":"0.2.0","name":"cni-loopback","plugins":[{"type":"loopback"}]}"#;

/// The interface the loopback plugin is given.
pub const INTERFACE: &str = "lo";

/// The plugin's type.
pub const PLUGIN: &str = "loopback";

/// The built-in list.
pub fn network() -> NetworkConfigList {
    NetworkConfigList::from_list_bytes(Path::new("cni-loopback"), LIST.as_bytes())
        .expect("the built-in loopback list parses")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_list_is_cri_dockerds() {
        let network = super::network();
        assert_eq!(
            (network.name.as_str(), network.cni_version.as_str()),
            ("cni-loopback", "0.2.0")
        );
        assert_eq!(network.plugins.len(), 1);
        assert_eq!(crate::NetworkConfigList::plugin_type(&network.plugins[0]), "loopback");
    }
}
