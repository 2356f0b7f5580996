//! `TestServer`: the server in-process on a random loopback port, on an in-memory store (or a
//! directory), for tests of crdctl and of code that talks to a Kubernetes API.

use std::sync::Arc;

use crate::{Config, Server, StartError};

/// A server for one test; stopped when dropped with the runtime.
pub struct TestServer {
    server: Server,
}

impl TestServer {
    /// Starts a server on an in-memory store.
    pub async fn start() -> Result<TestServer, StartError> {
        TestServer::start_with(Config::default(), Arc::new(crdctl_storage::memory::open())).await
    }

    /// Starts a server with a configuration and a store.
    pub async fn start_with(config: Config, store: Arc<dyn crdctl_storage::Store>) -> Result<TestServer, StartError> {
        Ok(TestServer { server: Server::start(config, store).await? })
    }

    /// The base URL.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// A kubeconfig for kubectl.
    pub fn kubeconfig(&self) -> String {
        self.server.kubeconfig(None)
    }

    /// The running server.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Stops the server gracefully.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}
