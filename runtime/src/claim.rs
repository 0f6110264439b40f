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

impl DockerRuntime {
    /// Creates (never starts) container `name` from `image` with `labels`. `Ok(None)`: the claim
    /// is this caller's; `Ok(Some((id, labels)))`: the name is taken by container `id`, whose
    /// labels say who holds it.
    pub async fn create_claim(
        &self,
        name: &str,
        image: &str,
        labels: HashMap<String, String>,
    ) -> Result<Option<(String, HashMap<String, String>)>, RuntimeError> {
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
                Ok(Some((holder.id.unwrap_or_default(), labels)))
            }
            Err(e) => Err(failed(&format!("create container {name}"), e)),
        }
    }

    /// Every claim container labelled `label` (any value): its name and labels.
    pub async fn list_claims(&self, label: &str) -> Result<Vec<(String, HashMap<String, String>)>, RuntimeError> {
        let found = self.list(vec![label.to_string()]).await?;
        Ok(found
            .into_iter()
            .map(|c| {
                let name = c.names.and_then(|n| n.first().cloned()).unwrap_or_default();
                (name.trim_start_matches('/').to_string(), c.labels.unwrap_or_default())
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
