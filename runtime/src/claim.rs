//! A claim on the engine itself: a container that is created and never started, whose name says
//! what it claims. Docker's container names are unique per engine, so of two agents creating the
//! same name at once exactly one succeeds; the other reads the holder's labels. The agent uses it
//! for its node name (`agent/src/node_claim.rs`), so that two agents on two root directories
//! cannot manage one node on one engine.

use std::collections::HashMap;

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{CreateContainerOptions, RemoveContainerOptions};

use crate::docker::{failed, DockerRuntime};
use crate::RuntimeError;

/// A claim container that exists: who holds a name, or one of the claims listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimContainer {
    /// Its ID (a name already taken) or its name (a listed claim).
    pub container: String,
    /// Its labels, which say who holds it.
    pub labels: HashMap<String, String>,
}

impl DockerRuntime {
    /// Creates (never starts) container `name` from `image` with `labels`. `Ok(None)`: the claim
    /// is this caller's; `Ok(Some(holder))`: the name is taken by container `holder.container`
    /// (its ID), whose labels say who holds it.
    pub async fn create_claim(
        &self,
        name: &str,
        image: &str,
        labels: HashMap<String, String>,
    ) -> Result<Option<ClaimContainer>, RuntimeError> {
        let options = CreateContainerOptions {
            name: Some(name.to_string()),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            labels: Some(labels),
            network_disabled: Some(true),
            ..Default::default()
        };
        match self.docker.create_container(Some(options), body).await {
            Ok(_) => Ok(None),
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 409, .. }) => {
                let holder = self
                    .docker
                    .inspect_container(name, None)
                    .await
                    .map_err(|e| failed(&format!("inspect container {name}"), e))?;
                let labels = holder.config.and_then(|c| c.labels).unwrap_or_default();
                Ok(Some(ClaimContainer {
                    container: holder.id.unwrap_or_default(),
                    labels,
                }))
            }
            Err(e) => Err(failed(&format!("create container {name}"), e)),
        }
    }

    /// Every claim container labelled `label` (any value): its name and labels.
    pub async fn list_claims(&self, label: &str) -> Result<Vec<ClaimContainer>, RuntimeError> {
        let found = self.list(vec![label.to_string()]).await?;
        Ok(found
            .into_iter()
            .map(|c| {
                let name = c.names.and_then(|n| n.first().cloned()).unwrap_or_default();
                ClaimContainer {
                    container: name.trim_start_matches('/').to_string(),
                    labels: c.labels.unwrap_or_default(),
                }
            })
            .collect())
    }

    /// Removes the claim container `id_or_name` (gone already is fine). A stale claim is removed
    /// by its ID, so a claim made again meanwhile by another agent is not.
    pub async fn remove_claim(&self, id_or_name: &str) -> Result<(), RuntimeError> {
        let name = id_or_name;
        let options = RemoveContainerOptions {
            force: true,
            ..Default::default()
        };
        match self.docker.remove_container(name, Some(options)).await {
            Ok(()) | Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(()),
            Err(e) => Err(failed(&format!("remove container {name}"), e)),
        }
    }
}
