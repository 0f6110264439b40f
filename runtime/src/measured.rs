//! [`Measured`]: a [`ContainerRuntime`] that counts and times every engine call it passes on
//! (`kubelet_runtime_operations_total`, `_errors_total`, `_duration_seconds`, by kubelet's CRI
//! operation names). The agent wraps its Docker adapter in it; the event stream is not a call.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dockerlet_messages::runtime::{ContainerListing, ObservedContainer, RuntimeImage};
use dockerlet_messages::{ContainerId, PodUid};
use dockerlet_metrics::{Metrics, RuntimeOperation};
use futures::stream::BoxStream;

use crate::{
    ContainerRuntime, Containers, CreateSpec, Exec, ExecOutput, Images, RegistryAuth, RuntimeError, RuntimeEvent,
};

/// `inner`, with every call counted in `metrics`.
pub struct Measured<R> {
    inner: R,
    metrics: Arc<Metrics>,
}

impl<R> Measured<R> {
    /// Count `inner`'s calls in `metrics`.
    pub fn new(inner: R, metrics: Arc<Metrics>) -> Self {
        Measured { inner, metrics }
    }

    async fn call<T>(
        &self,
        operation: RuntimeOperation,
        call: impl Future<Output = Result<T, RuntimeError>>,
    ) -> Result<T, RuntimeError> {
        let began = Instant::now();
        let result = call.await;
        self.metrics
            .runtime_call(operation, began.elapsed().as_secs_f64(), result.is_err());
        result
    }
}

#[async_trait]
impl<R: ContainerRuntime> ContainerRuntime for Measured<R> {
    async fn ping(&self) -> Result<(), RuntimeError> {
        self.call(RuntimeOperation::version, self.inner.ping()).await
    }

    async fn version(&self) -> Result<String, RuntimeError> {
        self.call(RuntimeOperation::version, self.inner.version()).await
    }
}

#[async_trait]
impl<R: ContainerRuntime> Containers for Measured<R> {
    async fn list_node_containers(&self, node: &str) -> Result<Vec<ContainerListing>, RuntimeError> {
        self.call(RuntimeOperation::list_containers, self.inner.list_node_containers(node))
            .await
    }

    async fn list_pod_containers(&self, node: &str, pod_uid: &PodUid) -> Result<Vec<ContainerListing>, RuntimeError> {
        self.call(
            RuntimeOperation::list_containers,
            self.inner.list_pod_containers(node, pod_uid),
        )
        .await
    }

    async fn inspect_container(&self, id: &ContainerId) -> Result<Option<ObservedContainer>, RuntimeError> {
        self.call(RuntimeOperation::container_status, self.inner.inspect_container(id))
            .await
    }

    async fn create_container(&self, spec: CreateSpec) -> Result<ContainerId, RuntimeError> {
        self.call(RuntimeOperation::create_container, self.inner.create_container(spec))
            .await
    }

    async fn start_container(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        self.call(RuntimeOperation::start_container, self.inner.start_container(id))
            .await
    }

    async fn stop_container(&self, id: &ContainerId, grace: Duration) -> Result<(), RuntimeError> {
        self.call(RuntimeOperation::stop_container, self.inner.stop_container(id, grace))
            .await
    }

    async fn remove_container(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        self.call(RuntimeOperation::remove_container, self.inner.remove_container(id))
            .await
    }

    fn events(&self, node: &str) -> BoxStream<'static, Result<RuntimeEvent, RuntimeError>> {
        self.inner.events(node)
    }
}

#[async_trait]
impl<R: ContainerRuntime> Images for Measured<R> {
    async fn image_present(&self, image: &str) -> Result<bool, RuntimeError> {
        self.call(RuntimeOperation::image_status, self.inner.image_present(image))
            .await
    }

    async fn image_user(&self, image: &str) -> Result<String, RuntimeError> {
        self.call(RuntimeOperation::image_status, self.inner.image_user(image))
            .await
    }

    async fn pull_image(&self, image: &str, auth: Option<&RegistryAuth>) -> Result<u64, RuntimeError> {
        self.call(RuntimeOperation::pull_image, self.inner.pull_image(image, auth))
            .await
    }

    async fn ensure_sandbox_image(
        &self,
        configured: Option<&str>,
        auths: &[RegistryAuth],
    ) -> Result<String, RuntimeError> {
        self.call(
            RuntimeOperation::image_status,
            self.inner.ensure_sandbox_image(configured, auths),
        )
        .await
    }

    async fn list_images(&self) -> Result<Vec<RuntimeImage>, RuntimeError> {
        self.call(RuntimeOperation::list_images, self.inner.list_images()).await
    }

    async fn remove_image(&self, image: &RuntimeImage) -> Result<(), RuntimeError> {
        self.call(RuntimeOperation::remove_image, self.inner.remove_image(image))
            .await
    }

    async fn image_ids_in_use(&self) -> Result<std::collections::BTreeSet<String>, RuntimeError> {
        self.call(RuntimeOperation::list_containers, self.inner.image_ids_in_use())
            .await
    }
}

#[async_trait]
impl<R: ContainerRuntime> Exec for Measured<R> {
    async fn exec(&self, id: &ContainerId, cmd: Vec<String>, timeout: Duration) -> Result<ExecOutput, RuntimeError> {
        self.call(RuntimeOperation::exec_sync, self.inner.exec(id, cmd, timeout))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeRuntime;
    use prometheus_client::encoding::prometheus_text::encode;

    /// Calls are counted by kind, failures as errors too.
    #[tokio::test]
    async fn calls_are_counted_by_operation_and_errors() {
        let metrics = Arc::new(Metrics::default());
        let runtime = Measured::new(FakeRuntime::default(), metrics.clone());
        runtime.list_node_containers("n1").await.unwrap();
        runtime.list_node_containers("n1").await.unwrap();
        let missing = ContainerId("nope".into());
        let failed = runtime.start_container(&missing).await.is_err();
        let mut out = String::new();
        encode(&mut out, metrics.registry()).unwrap();
        assert!(
            out.contains("kubelet_runtime_operations_total{operation_type=\"list_containers\"} 2"),
            "{out}"
        );
        assert!(out.contains("kubelet_runtime_operations_duration_seconds_count{operation_type=\"list_containers\"} 2"));
        assert!(out.contains("kubelet_runtime_operations_total{operation_type=\"start_container\"} 1"));
        let errors = "kubelet_runtime_operations_errors_total{operation_type=\"start_container\"} 1";
        assert!(failed, "the fake has no container \"nope\"");
        assert!(out.contains(errors), "{out}");
    }
}
