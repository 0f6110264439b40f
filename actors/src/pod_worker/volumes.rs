//! The pod's atomic-writer volumes — configMap, secret, downwardAPI, projected — set up before
//! any of its containers and refreshed at every sync (kubelet's volume manager with its
//! reconciler's periodic remount of these volumes): the ConfigMaps and Secrets come from the
//! watch-backed cache, tokens from the token cache (a TokenRequest only when one needs a
//! refresh), the files from the pure `dockerlet_pod::volume::payload`, written by the host's
//! atomic writer, which leaves an unchanged volume alone. A ConfigMap, Secret, label or
//! annotation change therefore reaches a mounted volume at the pod's next sync — at the latest
//! one `--sync-frequency` later.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use dockerlet_kube::{KubeClient, TokenRequestFor};
use dockerlet_pod::spec::pod_identity;
use dockerlet_pod::volume::{api_references, atomic_volumes, ownership, payload, ConfigMapData, VolumeObjects};

use super::context::SyncContext;

/// Why one volume could not be set up; the pod's containers wait (kubelet's FailedMount), and
/// the next sync tries again.
#[derive(Debug, thiserror::Error)]
#[error("MountVolume.SetUp failed for volume {volume:?} : {reason}")]
pub struct MountFailed {
    /// The volume's name.
    pub volume: String,
    /// Why, as kubelet words it (`configmap "x" not found`).
    pub reason: String,
}

/// Write every atomic-writer volume of `pod` (no-op for an unchanged one). Returns one error per
/// volume that could not be set up; the others are written regardless.
pub async fn set_up(sync: &SyncContext, pod: &Arc<Pod>) -> Vec<MountFailed> {
    let atomic = atomic_volumes(&sync.config.root_dir, pod);
    if atomic.is_empty() {
        return Vec::new();
    }
    let mut failures = Vec::new();
    let objects = match fetch(sync.config.api.as_deref(), pod).await {
        Ok(objects) => objects,
        Err(e) => {
            // Without the objects no volume can be judged; report each once.
            return atomic
                .iter()
                .map(|(v, _, _)| MountFailed {
                    volume: v.name.clone(),
                    reason: e.to_string(),
                })
                .collect();
        }
    };
    let owner = ownership(pod);
    let mut writes = Vec::new();
    for (volume, dir, kind) in atomic {
        match payload(pod, volume, &objects, &sync.config.allocatable) {
            Ok(files) => writes.push((volume.name.clone(), dir, kind, files)),
            Err(e) => failures.push(MountFailed {
                volume: volume.name.clone(),
                reason: e.reason,
            }),
        }
    }
    let written = tokio::task::spawn_blocking(move || {
        writes
            .into_iter()
            .filter_map(|(name, dir, kind, files)| {
                // The directory first (secret and projected ones on tmpfs), then its files.
                dockerlet_host::volume_dirs::write_atomic_volume(&dir, kind, &files, owner)
                    .err()
                    .map(|e| MountFailed {
                        volume: name,
                        reason: e.to_string(),
                    })
            })
            .collect::<Vec<_>>()
    })
    .await;
    match written {
        Ok(errors) => failures.extend(errors),
        Err(e) => failures.push(MountFailed {
            volume: "*".to_string(),
            reason: format!("volume set-up did not finish: {e}"),
        }),
    }
    failures
}

/// kubelet's hostPath `type` checks at mount (`…OrCreate` types create the path), before the
/// pod's first container: a path that is not what its volume says keeps the pod
/// ContainerCreating with a FailedMount event, as kubelet's volume manager does.
pub async fn check_host_paths(pod: &Pod) -> Vec<MountFailed> {
    let typed: Vec<(String, String, String)> = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| {
            let host = v.host_path.as_ref()?;
            let kind = host.type_.clone().filter(|t| !t.is_empty())?;
            Some((v.name.clone(), host.path.clone(), kind))
        })
        .collect();
    if typed.is_empty() {
        return Vec::new();
    }
    let checked = tokio::task::spawn_blocking(move || {
        typed
            .into_iter()
            .filter_map(|(volume, path, kind)| {
                dockerlet_host::volume_dirs::prepare_host_path(std::path::Path::new(&path), &kind)
                    .err()
                    .map(|e| MountFailed {
                        volume,
                        reason: e.to_string(),
                    })
            })
            .collect()
    })
    .await;
    checked.unwrap_or_else(|e| {
        vec![MountFailed {
            volume: "*".to_string(),
            reason: format!("hostPath checks did not finish: {e}"),
        }]
    })
}

/// Why the API objects of a pod's volumes could not be read.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    /// A static pod referring to API objects is refused earlier; this is the safety net.
    #[error("configMap, secret and serviceAccountToken volumes need the API server (--kubeconfig)")]
    NeedsApiServer,
    /// The API server could not be asked.
    #[error(transparent)]
    Api(#[from] dockerlet_kube::ApiError),
}

/// Every ConfigMap, Secret and token the pod's volumes refer to.
async fn fetch(api: Option<&dyn KubeClient>, pod: &Pod) -> Result<VolumeObjects, FetchError> {
    let refs = api_references(pod);
    let mut objects = VolumeObjects::default();
    if refs.config_maps.is_empty() && refs.secrets.is_empty() && refs.tokens.is_empty() {
        return Ok(objects);
    }
    let api = api.ok_or(FetchError::NeedsApiServer)?;
    let dockerlet_pod::spec::PodIdentity { name, namespace, uid } = pod_identity(pod);
    for r in &refs.config_maps {
        let map = api.config_map(namespace, &r.name).await?.map(|m| ConfigMapData {
            data: m.data.clone().unwrap_or_default(),
            binary_data: m
                .binary_data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect(),
        });
        objects.config_maps.insert(r.name.clone(), map);
    }
    for r in &refs.secrets {
        let secret = api.secret(namespace, &r.name).await?.map(|s| {
            let mut data: std::collections::BTreeMap<String, Vec<u8>> = s
                .string_data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                .collect();
            data.extend(s.data.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone())));
            data
        });
        objects.secrets.insert(r.name.clone(), secret);
    }
    let mut tokens: HashMap<(String, usize), String> = HashMap::new();
    for need in &refs.tokens {
        let request = TokenRequestFor {
            namespace: namespace.to_string(),
            service_account: need.service_account.clone(),
            audiences: need.audience.iter().cloned().collect(),
            expiration_seconds: need.expiration_seconds,
            pod_name: name.to_string(),
            pod_uid: uid.to_string(),
        };
        let token = api.service_account_token(&request).await?;
        tokens.insert((need.volume.clone(), need.source_index), token.token);
    }
    objects.tokens = tokens;
    Ok(objects)
}
