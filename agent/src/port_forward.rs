//! The runtime's half of port-forward: Docker says which process holds the sandbox's network
//! namespace, `dockerlet_host::netns` connects inside it (on the blocking pool; a fresh thread
//! enters the namespace), and the socket comes back as a tokio stream.

use dockerlet_messages::ContainerId;
use dockerlet_runtime::docker::DockerRuntime;
use dockerlet_runtime::{PortForward, PortForwardError};

/// Port-forward into Docker sandboxes' network namespaces.
pub struct NetnsPortForward {
    /// The engine, asked for the sandbox's PID at each connection (it changes when the
    /// sandbox is re-created).
    pub docker: DockerRuntime,
}

#[async_trait::async_trait]
impl PortForward for NetnsPortForward {
    async fn connect(&self, sandbox: &ContainerId, port: u16) -> Result<tokio::net::TcpStream, PortForwardError> {
        let pid = self
            .docker
            .running_pid(sandbox)
            .await?
            .ok_or_else(|| PortForwardError::NotRunning(sandbox.clone()))?;
        let name = sandbox.0.clone();
        let socket = tokio::task::spawn_blocking(move || dockerlet_host::netns::connect_localhost(pid, port, &name))
            .await
            .map_err(|e| PortForwardError::Connect(Box::new(e)))?
            .map_err(|e| PortForwardError::Connect(Box::new(e)))?;
        socket
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpStream::from_std(socket))
            .map_err(|e| PortForwardError::Connect(Box::new(e)))
    }
}
