//! CNI for pod sandboxes, as cri-dockerd's network plugin (`network/cni/cni.go`) and libcni
//! (`libcni/api.go`) do it: the pod network is the first usable configuration of
//! `--cni-conf-dir` ([`config`]), reloaded on demand; a sandbox is attached with `ADD` through
//! every plugin of the list in order, each given the previous result, and detached with `DEL`
//! in reverse order given the cached result ([`Cni::add`], [`Cni::del`]); each attachment is
//! kept in libcni's cache ([`cache`]) so a DEL can be made after a restart.
//!
//! There is no maintained CNI client crate for Rust (the `cni-plugin` crate is for writing
//! plugins, not calling them): the protocol is written here on `serde_json` and
//! `tokio::process` ([`exec`]).

pub mod cache;
pub mod config;
mod error;
pub mod exec;
mod loopback;
pub mod result;
pub mod template;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

pub use cache::{Cache, CachedAttachment};
pub use config::NetworkConfigList;
pub use error::{ConfigError, NetworkError, PluginError};

/// The interface every pod gets (kubelet's `network.DefaultInterfaceName`).
pub const POD_INTERFACE: &str = "eth0";

/// Where the plugins and configurations are, and how long a plugin may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniSettings {
    /// `--cni-conf-dir`.
    pub conf_dir: PathBuf,
    /// `--cni-bin-dir`, every directory in order.
    pub bin_dirs: Vec<PathBuf>,
    /// `--cni-cache-dir`.
    pub cache_dir: PathBuf,
    /// The longest one plugin may run.
    pub timeout: Duration,
    /// The node name, kept with each attachment.
    pub node: String,
}

/// One `portMappings` entry (the runtime capability `portmap` reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortMapping {
    /// The node's port.
    #[serde(rename = "hostPort")]
    pub host_port: i32,
    /// The pod's port.
    #[serde(rename = "containerPort")]
    pub container_port: i32,
    /// `tcp`, `udp`, `sctp`.
    pub protocol: String,
    /// The node address to bind, empty for all.
    #[serde(rename = "hostIP", skip_serializing_if = "String::is_empty")]
    pub host_ip: String,
}

/// The `bandwidth` runtime capability, in bits per second (cri-dockerd sets each burst to
/// `math.MaxInt32`: no burst limit of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bandwidth {
    /// From `kubernetes.io/ingress-bandwidth`; 0: none.
    #[serde(skip_serializing_if = "is_zero")]
    pub ingress_rate: u64,
    /// With the rate.
    #[serde(skip_serializing_if = "is_zero")]
    pub ingress_burst: u64,
    /// From `kubernetes.io/egress-bandwidth`; 0: none.
    #[serde(skip_serializing_if = "is_zero")]
    pub egress_rate: u64,
    /// With the rate.
    #[serde(skip_serializing_if = "is_zero")]
    pub egress_burst: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The `dns` runtime capability (containerd's and cri-dockerd's fields, each left out empty).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Dns {
    /// Name servers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    /// Search domains.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub searches: Vec<String>,
    /// Resolver options.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// The sandbox to attach.
#[derive(Debug, Clone)]
pub struct PodAttachment {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's UID.
    pub uid: String,
    /// The sandbox's container ID.
    pub container_id: String,
    /// Its network namespace (`/proc/<pid>/ns/net`).
    pub netns: String,
    /// hostPorts.
    pub port_mappings: Vec<PortMapping>,
    /// Traffic shaping, if the pod asks for it.
    pub bandwidth: Option<Bandwidth>,
    /// The pod's DNS.
    pub dns: Option<Dns>,
}

impl PodAttachment {
    /// `CNI_ARGS` as cri-dockerd sets them.
    fn args(&self) -> Vec<(String, String)> {
        [
            ("IgnoreUnknown", "1"),
            ("K8S_POD_NAMESPACE", self.namespace.as_str()),
            ("K8S_POD_NAME", self.name.as_str()),
            ("K8S_POD_INFRA_CONTAINER_ID", self.container_id.as_str()),
            ("K8S_POD_UID", self.uid.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// The runtime capabilities on offer; a plugin gets those it declares.
    fn capabilities(&self) -> Map<String, Value> {
        let mut caps = Map::new();
        if !self.port_mappings.is_empty() {
            caps.insert(
                "portMappings".into(),
                serde_json::to_value(&self.port_mappings).unwrap_or_default(),
            );
        }
        if let Some(b) = &self.bandwidth {
            caps.insert("bandwidth".into(), serde_json::to_value(b).unwrap_or_default());
        }
        if let Some(dns) = &self.dns {
            caps.insert("dns".into(), serde_json::to_value(dns).unwrap_or_default());
        }
        caps
    }
}

/// A sandbox attached: its addresses and the whole result.
#[derive(Debug, Clone, PartialEq)]
pub struct Attached {
    /// The pod's addresses, in the result's order.
    pub ips: Vec<IpAddr>,
    /// The last plugin's result.
    pub result: Value,
}

/// The pod network of one agent.
#[derive(Debug)]
pub struct Cni {
    settings: CniSettings,
    cache: Cache,
    network: Mutex<Option<NetworkConfigList>>,
    /// This node's attachments and their addresses: what the cache held at start, then kept in
    /// step with it, so asking whether a container is attached (every stop and removal) reads
    /// no directory.
    attached: Mutex<HashMap<String, Vec<IpAddr>>>,
}

/// The spec version of `v` as numbers (`0.4.0` → `[0, 4, 0]`).
fn version(v: &str) -> Vec<u32> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

impl Cni {
    /// The network of `settings`, its configuration not loaded yet ([`Cni::reload`]).
    pub fn new(settings: CniSettings) -> Self {
        let cache = Cache::new(settings.cache_dir.clone());
        let attached = cache
            .entries()
            .into_iter()
            .filter(|(_, e)| e.dockerlet_node == settings.node)
            .map(|(_, e)| {
                let ips = match e.dockerlet_incomplete {
                    true => Vec::new(),
                    false => result::pod_ips(&e.result).unwrap_or_default(),
                };
                (e.container_id, ips)
            })
            .collect();
        Cni {
            settings,
            cache,
            network: Mutex::new(None),
            attached: Mutex::new(attached),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &CniSettings {
        &self.settings
    }

    /// Reads `--cni-conf-dir` again (cri-dockerd does every 5 s and before each sandbox);
    /// the network now in use, if any. Files passed over are logged at each change.
    pub fn reload(&self) -> Result<Option<NetworkConfigList>, ConfigError> {
        let loaded = config::load_default(&self.settings.conf_dir, &self.settings.bin_dirs)?;
        let mut current = self.network.lock().unwrap_or_else(|e| e.into_inner());
        if *current != loaded.network {
            for (path, why) in &loaded.skipped {
                tracing::warn!(file = %path.display(), reason = %why, "CNI configuration passed over");
            }
            match &loaded.network {
                Some(n) => tracing::info!(network = %n.name, file = %n.path.display(), "CNI network in use"),
                None => tracing::warn!(dir = %self.settings.conf_dir.display(), "no valid CNI network configuration"),
            }
        }
        current.clone_from(&loaded.network);
        Ok(loaded.network)
    }

    /// The network last loaded.
    pub fn network(&self) -> Option<NetworkConfigList> {
        self.network.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Attaches a sandbox (libcni's `AddNetworkList`) and keeps the attachment; a failed ADD
    /// is undone with a DEL before the error is returned, as cri-dockerd does.
    pub async fn add(&self, pod: &PodAttachment) -> Result<Attached, NetworkError> {
        let network = self.reload().ok().flatten().ok_or(NetworkError::Uninitialized)?;
        let args = pod.args();
        let caps = pod.capabilities();
        // Kept before any plugin runs: an agent stopped in the middle of the ADD leaves the
        // sandbox attached without addresses, for the next start to undo (the pod network's
        // `sweep`). libcni caches only after the last plugin; cri-dockerd DELs every sandbox it
        // stops with the current configuration instead.
        self.record_incomplete(&network, pod, &args, &caps, None)
            .map_err(|source| NetworkError::Cache {
                path: self.cache.path(&network.name, &pod.container_id, POD_INTERFACE),
                source,
            })?;
        self.remember(&pod.container_id, Vec::new());
        self.loopback("ADD", &pod.container_id, &pod.netns, &args)
            .await
            .inspect_err(|_| self.discard(&network, &pod.container_id))?;
        let mut prev: Option<Value> = None;
        for (i, plugin) in network.plugins.iter().enumerate() {
            let out = self
                .run_plugin(
                    &network,
                    plugin,
                    "ADD",
                    &pod.container_id,
                    &pod.netns,
                    &args,
                    &caps,
                    prev.as_ref(),
                )
                .await;
            let result = out.and_then(|bytes| {
                serde_json::from_slice::<Value>(&bytes).map_err(|source| PluginError::BadResult {
                    plugin: NetworkConfigList::plugin_type(plugin).to_string(),
                    source,
                })
            });
            match result {
                Ok(result) => {
                    prev = Some(result);
                    let more = i + 1 < network.plugins.len();
                    if let Err(e) = more
                        .then(|| self.record_incomplete(&network, pod, &args, &caps, prev.as_ref()))
                        .transpose()
                    {
                        tracing::warn!(container = %pod.container_id, error = %e, "cannot keep how far a CNI ADD went");
                    }
                }
                Err(source) => {
                    let error = failed(&network, plugin, "add")(source);
                    self.undo_failed_add(&network, pod, &args, &caps, prev.as_ref()).await;
                    return Err(error);
                }
            }
        }
        let result = prev.unwrap_or(Value::Null);
        let last = network.plugins.last().expect("a list has plugins");
        let ips = result::pod_ips(&result).map_err(|source| {
            failed(&network, last, "add")(PluginError::BadResult {
                plugin: NetworkConfigList::plugin_type(last).to_string(),
                source,
            })
        })?;
        let entry = self.record(&network, pod, args, caps, result.clone());
        if let Err(source) = self.cache.write(&entry) {
            let path = self.cache.path(&network.name, &pod.container_id, POD_INTERFACE);
            self.undo_failed_add(
                &network,
                pod,
                &entry.cni_args,
                &entry.capability_args,
                Some(&entry.result),
            )
            .await;
            return Err(NetworkError::Cache { path, source });
        }
        self.remember(&pod.container_id, ips.clone());
        Ok(Attached { ips, result })
    }

    /// What the cache keeps of `pod`'s attachment to `network`.
    fn record(
        &self,
        network: &NetworkConfigList,
        pod: &PodAttachment,
        cni_args: Vec<(String, String)>,
        capability_args: Map<String, Value>,
        result: Value,
    ) -> CachedAttachment {
        CachedAttachment {
            kind: cache::KIND.into(),
            container_id: pod.container_id.clone(),
            config: network.bytes.clone(),
            if_name: POD_INTERFACE.into(),
            network_name: network.name.clone(),
            netns: pod.netns.clone(),
            cni_args,
            capability_args,
            result,
            dockerlet_node: self.settings.node.clone(),
            dockerlet_incomplete: false,
        }
    }

    /// Keeps how far an unfinished ADD of `pod` went: the result of the plugins that ran.
    fn record_incomplete(
        &self,
        network: &NetworkConfigList,
        pod: &PodAttachment,
        args: &[(String, String)],
        caps: &Map<String, Value>,
        partial: Option<&Value>,
    ) -> std::io::Result<PathBuf> {
        let mut entry = self.record(
            network,
            pod,
            args.to_vec(),
            caps.clone(),
            partial.cloned().unwrap_or(Value::Null),
        );
        entry.dockerlet_incomplete = true;
        self.cache.write(&entry)
    }

    fn remember(&self, container_id: &str, ips: Vec<IpAddr>) {
        self.attached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(container_id.to_string(), ips);
    }

    /// Forgets an attachment that no plugin holds any more: its cache file and its entry.
    fn discard(&self, network: &NetworkConfigList, container_id: &str) {
        let path = self.cache.path(&network.name, container_id, POD_INTERFACE);
        if let Err(e) = Cache::remove(&path) {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove a CNI cache file");
        }
        self.forget(container_id);
    }

    /// The DEL after a failed ADD, given the result of the plugins that succeeded (libcni has
    /// none to give, having cached nothing; without it a plugin that keys its state on the
    /// addresses, as `firewall` does, would leave its rules behind). When that DEL fails too,
    /// the attachment is kept in the cache as far as it went, so the sandbox's removal (or the
    /// next start's sweep) tries the DEL again instead of leaking what the plugins hold.
    async fn undo_failed_add(
        &self,
        network: &NetworkConfigList,
        pod: &PodAttachment,
        args: &[(String, String)],
        caps: &Map<String, Value>,
        partial: Option<&Value>,
    ) {
        let Err(e) = self
            .del_list(network, &pod.container_id, &pod.netns, args, caps, partial)
            .await
        else {
            self.discard(network, &pod.container_id);
            return;
        };
        tracing::warn!(container = %pod.container_id, error = %e, "CNI DEL after a failed ADD failed; kept for another DEL");
        match self.record_incomplete(network, pod, args, caps, partial) {
            Ok(_) => self.remember(&pod.container_id, Vec::new()),
            Err(e) => {
                tracing::warn!(container = %pod.container_id, error = %e, "cannot keep a half-undone CNI attachment")
            }
        }
    }

    /// Detaches sandbox `container_id` if it was attached (libcni's `DelNetworkList`, with the
    /// configuration, args and result kept at ADD); `netns` is empty when the sandbox no longer
    /// runs. Returns whether there was an attachment. The cache entry goes only when every
    /// plugin succeeded, so a failed DEL is tried again.
    pub async fn del(&self, container_id: &str, netns: &str) -> Result<bool, NetworkError> {
        let Some((path, entry)) = self.cache.find(container_id) else {
            self.forget(container_id);
            return Ok(false);
        };
        let network = match NetworkConfigList::from_list_bytes(&path, &entry.config) {
            Ok(network) => network,
            // The kept configuration cannot be read: the current one is the best there is.
            Err(_) => self.network().ok_or(NetworkError::Uninitialized)?,
        };
        // cri-dockerd's TearDownPod: the loopback network first, its failure not fatal.
        if let Err(e) = self.loopback("DEL", container_id, netns, &entry.cni_args).await {
            tracing::info!(container = container_id, error = %e, "failed to delete the loopback network");
        }
        let prev = (!entry.result.is_null()).then_some(&entry.result);
        self.del_list(
            &network,
            container_id,
            netns,
            &entry.cni_args,
            &entry.capability_args,
            prev,
        )
        .await?;
        if let Err(e) = Cache::remove(&path) {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove a CNI cache file");
        }
        self.forget(container_id);
        Ok(true)
    }

    fn forget(&self, container_id: &str) {
        self.attached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(container_id);
    }

    #[allow(clippy::too_many_arguments)]
    /// DEL through the list in reverse. Every plugin is asked even when one before it failed
    /// (DEL is idempotent by the spec; libcni stops at the first failure, which would leave the
    /// rest — an address lease, a veth — held for good); the first failure is returned. A
    /// plugin whose binary is gone is passed over with a warning, not a failure.
    async fn del_list(
        &self,
        network: &NetworkConfigList,
        container_id: &str,
        netns: &str,
        args: &[(String, String)],
        caps: &Map<String, Value>,
        prev: Option<&Value>,
    ) -> Result<(), NetworkError> {
        // libcni gives DEL the cached result from 0.4.0 on.
        let prev = prev.filter(|_| version(&network.cni_version) >= vec![0, 4, 0]);
        let mut first_error = None;
        for plugin in network.plugins.iter().rev() {
            let ran = self
                .run_plugin(network, plugin, "DEL", container_id, netns, args, caps, prev)
                .await;
            if let Err(PluginError::NotFound { plugin, dirs }) = &ran {
                // A plugin that is gone holds nothing it could release: keeping the attachment
                // for it would only retry for ever.
                tracing::warn!(plugin = %plugin, dirs = ?dirs, container = container_id, "CNI DEL skips a plugin not found");
                continue;
            }
            if let Err(source) = ran {
                first_error.get_or_insert(failed(network, plugin, "del")(source));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Asks every plugin whether sandbox `container_id` is still as attached (libcni's
    /// `CheckNetworkList`; from spec 0.4.0, unless the list has `disableCheck`). `Ok(false)`:
    /// nothing to check.
    pub async fn check(&self, container_id: &str, netns: &str) -> Result<bool, NetworkError> {
        let Some((path, entry)) = self.cache.find(container_id) else {
            return Ok(false);
        };
        let Ok(network) = NetworkConfigList::from_list_bytes(&path, &entry.config) else {
            return Ok(false);
        };
        if network.disable_check || version(&network.cni_version) < vec![0, 4, 0] {
            return Ok(false);
        }
        for plugin in &network.plugins {
            self.run_plugin(
                &network,
                plugin,
                "CHECK",
                container_id,
                netns,
                &entry.cni_args,
                &entry.capability_args,
                Some(&entry.result),
            )
            .await
            .map_err(failed(&network, plugin, "check"))?;
        }
        Ok(true)
    }

    /// Whether the network is ready: a configuration is loaded and, from spec 1.1.0, every
    /// plugin answers `STATUS` (libcni's `GetStatusNetworkList`).
    pub async fn status(&self) -> Result<(), NetworkError> {
        let network = self.reload().ok().flatten().ok_or(NetworkError::Uninitialized)?;
        if version(&network.cni_version) < vec![1, 1, 0] {
            return Ok(());
        }
        for plugin in &network.plugins {
            self.run_plugin(&network, plugin, "STATUS", "", "", &[], &Map::new(), None)
                .await
                .map_err(failed(&network, plugin, "status"))?;
        }
        Ok(())
    }

    /// The addresses of attached sandbox `container_id`.
    pub fn pod_ips(&self, container_id: &str) -> Option<Vec<IpAddr>> {
        let attached = self.attached.lock().unwrap_or_else(|e| e.into_inner());
        attached.get(container_id).filter(|ips| !ips.is_empty()).cloned()
    }

    /// Whether sandbox `container_id` is attached (by this run, or by an earlier one's cache).
    pub fn is_attached(&self, container_id: &str) -> bool {
        self.attached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(container_id)
    }

    /// The sandboxes this node attached, by container ID (for the clean-up at start).
    pub fn attached(&self) -> Vec<String> {
        let attached = self.attached.lock().unwrap_or_else(|e| e.into_inner());
        attached.keys().cloned().collect()
    }

    /// `command` (ADD or DEL) of cri-dockerd's loopback network for a sandbox, if the
    /// `loopback` plugin is installed ([`loopback`]); its result is not the pod's.
    async fn loopback(
        &self,
        command: &'static str,
        container_id: &str,
        netns: &str,
        args: &[(String, String)],
    ) -> Result<(), NetworkError> {
        if exec::find_plugin(loopback::PLUGIN, &self.settings.bin_dirs).is_err() {
            return Ok(());
        }
        let network = loopback::network();
        let plugin = &network.plugins[0];
        let config = plugin_config(&network, plugin, &Map::new(), None);
        let call = exec::Invocation {
            command,
            container_id,
            netns,
            ifname: loopback::INTERFACE,
            args,
            bin_dirs: &self.settings.bin_dirs,
            timeout: self.settings.timeout,
        };
        let label = if command == "ADD" { "add" } else { "del" };
        exec::invoke(
            loopback::PLUGIN,
            &serde_json::to_vec(&config).unwrap_or_default(),
            &call,
        )
        .await
        .map(drop)
        .map_err(failed(&network, plugin, label))
    }

    /// One plugin's call: its configuration with `name`, `cniVersion`, the runtime capabilities
    /// it declares and `prevResult` (libcni's `buildOneConfig` and `injectRuntimeConfig`).
    #[allow(clippy::too_many_arguments)]
    async fn run_plugin(
        &self,
        network: &NetworkConfigList,
        plugin: &Map<String, Value>,
        command: &str,
        container_id: &str,
        netns: &str,
        args: &[(String, String)],
        caps: &Map<String, Value>,
        prev: Option<&Value>,
    ) -> Result<Vec<u8>, PluginError> {
        let config = plugin_config(network, plugin, caps, prev);
        let call = exec::Invocation {
            command,
            container_id,
            netns,
            ifname: POD_INTERFACE,
            args,
            bin_dirs: &self.settings.bin_dirs,
            timeout: self.settings.timeout,
        };
        let kind = NetworkConfigList::plugin_type(plugin);
        let began = std::time::Instant::now();
        let out = exec::invoke(kind, &serde_json::to_vec(&config).unwrap_or_default(), &call).await;
        tracing::debug!(plugin = kind, command, container = container_id, elapsed = ?began.elapsed(), ok = out.is_ok(), "CNI plugin ran");
        out
    }
}

/// The error of `plugin` of `network` failing at `command` (libcni's `plugin type="…" name="…"
/// failed (add): …`).
fn failed<'a>(
    network: &'a NetworkConfigList,
    plugin: &'a Map<String, Value>,
    command: &'static str,
) -> impl FnOnce(PluginError) -> NetworkError + 'a {
    move |source| NetworkError::Plugin {
        plugin: NetworkConfigList::plugin_type(plugin).to_string(),
        network: network.name.clone(),
        command,
        source,
    }
}

/// The JSON plugin `plugin` of `network` reads on stdin.
fn plugin_config(
    network: &NetworkConfigList,
    plugin: &Map<String, Value>,
    caps: &Map<String, Value>,
    prev: Option<&Value>,
) -> Value {
    let mut config = plugin.clone();
    config.insert("name".into(), Value::String(network.name.clone()));
    config.insert("cniVersion".into(), Value::String(network.cni_version.clone()));
    let declared = plugin.get("capabilities").and_then(Value::as_object);
    let runtime: Map<String, Value> = caps
        .iter()
        .filter(|(k, _)| declared.and_then(|d| d.get(*k)).and_then(Value::as_bool) == Some(true))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !runtime.is_empty() {
        config.insert("runtimeConfig".into(), Value::Object(runtime));
    }
    if let Some(prev) = prev {
        config.insert("prevResult".into(), prev.clone());
    }
    Value::Object(config)
}

#[cfg(test)]
mod tests;
