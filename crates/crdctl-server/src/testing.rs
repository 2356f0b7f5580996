//! A real, CRD-aware Kubernetes API server inside the test process: the envtest that Rust
//! operator authors lack.
//!
//! [`TestServer`] runs the same server as `crdctl serve` — discovery, every served version,
//! conversion (None or a webhook), `storedVersions`, defaulting, pruning and validation,
//! finalizers, `/status`, lists with `limit`/`continue`, watches with bookmarks, `410 Gone`,
//! streaming lists (`sendInitialEvents`), label and field selectors, Events — on an in-memory
//! store by default. It starts in milliseconds, needs nothing downloaded, and gives a
//! `kube::Client` that talks to it in-process (feature `kube`), plus a loopback URL and a
//! kubeconfig for kubectl or a controller binary.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use crdctl_server::testing::TestServer;
//! let crd = serde_json::json!({
//!     "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
//!     "metadata": {"name": "crontabs.example.com"},
//!     "spec": {"group": "example.com", "scope": "Namespaced",
//!         "names": {"plural": "crontabs", "kind": "CronTab"},
//!         "versions": [{"name": "v1", "served": true, "storage": true,
//!             "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
//! // Installs the CRD and waits until it is Established.
//! let server = TestServer::builder().crd(crd).start().await?;
//! # #[cfg(feature = "kube")] {
//! use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
//! let gvk = GroupVersionKind::gvk("example.com", "v1", "CronTab");
//! let crontabs: Api<DynamicObject> =
//!     Api::default_namespaced_with(server.client(), &ApiResource::from_gvk_with_plural(&gvk, "crontabs"));
//! let object = serde_json::from_value(serde_json::json!({
//!     "apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": "nightly"}}))?;
//! crontabs.create(&PostParams::default(), &object).await?;
//! assert_eq!(server.stored_api_version("example.com", "crontabs", Some("default"), "nightly").await?.as_deref(),
//!            Some("example.com/v1"));
//! # }
//! # Ok(()) }
//! ```
//!
//! What is emulated: the API server's handling of CRDs and custom resources (the
//! apiextensions-apiserver) and the built-in API of the group versions kube-apiserver 1.33
//! enables by default (Namespaces, Events, ConfigMaps, Secrets, ServiceAccounts and their tokens,
//! Services with ClusterIPs, Deployments, Jobs, Leases, RBAC, …; see `registry::builtin`), in
//! JSON and protobuf, with upstream's schemas, defaults and the strategies controllers rely on.
//! Unlike envtest, the controllers that act on API objects alone run, each switchable off
//! ([`Builder::controllers`]): the garbage collector (owned objects go with their owner), the
//! namespace controller (a deleted namespace empties itself and goes), every namespace's
//! `default` ServiceAccount and `kube-root-ca.crt`, and the storage version migrator; a
//! started server has `default/default`. What is not: nothing runs Pods (no kubelet, scheduler
//! or workload controllers: a Deployment makes no ReplicaSet), no authentication beyond an optional bearer
//! token (and ServiceAccount tokens), and RBAC objects are stored but not enforced. Admission
//! runs as on `crdctl serve`: the stored webhook configurations and ValidatingAdmissionPolicies
//! apply to every write.
//!
//! Compared with the alternatives: `tower_test::mock` (kube-rs's recommendation) answers what
//! the test scripts, so it tests the test; kind or k3d run a whole cluster in containers and
//! take tens of seconds; Go's envtest downloads and starts kube-apiserver and etcd binaries
//! (seconds, and Go only). A `TestServer` is the real CRD behaviour, per test, in milliseconds.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::Server;
use crate::state::{Config, StartError};

/// How long [`TestServer::wait_established`] waits.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(10);

/// A server for one test; it stops when dropped with the runtime.
pub struct TestServer {
    server: Server,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
}

/// A request the in-process client sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// `GET`, `POST`, …
    pub method: String,
    /// The API group (`""` for core).
    pub group: String,
    /// The version.
    pub version: String,
    /// The resource (plural), if the request was for one.
    pub resource: Option<String>,
    /// The namespace.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: Option<String>,
    /// The subresource (`status`).
    pub subresource: Option<String>,
    /// Whether it was a watch.
    pub watch: bool,
}

/// Configures a [`TestServer`].
#[must_use]
pub struct Builder {
    config: Config,
    store: Option<Arc<dyn crdctl_storage::Store>>,
    crd_files: Vec<PathBuf>,
    crds: Vec<Result<Value, String>>,
}

impl TestServer {
    /// A server to configure.
    pub fn builder() -> Builder {
        Builder { config: Config::default(), store: None, crd_files: Vec::new(), crds: Vec::new() }
    }

    /// Starts a server on an in-memory store.
    pub async fn start() -> Result<TestServer, StartError> {
        TestServer::builder().start().await
    }

    /// Starts a server with a configuration and a store.
    pub async fn start_with(config: Config, store: Arc<dyn crdctl_storage::Store>) -> Result<TestServer, StartError> {
        TestServer::builder().config(config).store(store).start().await
    }

    /// The loopback URL, for kubectl or a process under test.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// A kubeconfig pointing at [`url`](TestServer::url).
    pub fn kubeconfig(&self) -> String {
        self.server.kubeconfig(None)
    }

    /// The running server.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Waits until the CRD `name` is Established (served), up to ten seconds.
    pub async fn wait_established(&self, name: &str) -> Result<(), StartError> {
        let registry = &self.server.state().registry;
        let deadline = tokio::time::Instant::now() + ESTABLISH_TIMEOUT;
        loop {
            if registry.all().values().any(|crd| crd.crd.definition.metadata.name == name && crd.established()) {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(StartError::Setup(format!("CustomResourceDefinition {name} was not Established in time")));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The `apiVersion` an object is stored in — what no API read shows, since every read
    /// converts. `None` if there is no such object.
    pub async fn stored_api_version(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, StartError> {
        let state = self.server.state();
        let Some(crd) = state.registry.by_resource(group, plural) else { return Ok(None) };
        let key = format!("{}{name}", crd.prefix(namespace));
        let entry = state.store.get(&key).await.map_err(|err| StartError::Store(err.to_string()))?;
        Ok(entry.and_then(|entry| {
            let object: Value = serde_json::from_slice(&entry.value).ok()?;
            object.get("apiVersion")?.as_str().map(str::to_string)
        }))
    }

    /// Every request [`client`](TestServer::client)s sent so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.requests.lock().map(|log| log.clone()).unwrap_or_default()
    }

    /// Stops the server gracefully.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}

#[cfg(feature = "kube")]
impl TestServer {
    /// A `kube::Client` served in-process (no socket), its default namespace `default`. Its
    /// requests are recorded for [`requests`](TestServer::requests).
    pub fn client(&self) -> kube::Client {
        self.client_impersonating(Vec::new())
    }

    /// A client whose requests the server authenticates as `user` in `groups` (as `kubectl
    /// --as` asks: by impersonation, which the administrator may), so a test sees the 403s a
    /// cluster's RBAC gives that user. A ServiceAccount is
    /// `system:serviceaccount:<namespace>:<name>`, with its groups when `groups` is empty.
    pub fn client_as(&self, user: &str, groups: &[&str]) -> kube::Client {
        let mut headers = vec![("impersonate-user", user.to_string())];
        headers.extend(groups.iter().map(|group| ("impersonate-group", group.to_string())));
        self.client_impersonating(headers)
    }

    fn client_impersonating(&self, headers: Vec<(&'static str, String)>) -> kube::Client {
        use tower::ServiceExt as _;
        let log = Arc::clone(&self.requests);
        let service = crate::app(self.server.state().clone()).map_request(
            move |mut request: http::Request<kube::client::Body>| {
                record(&log, &request);
                for (name, value) in &headers {
                    if let Ok(value) = http::HeaderValue::from_str(value) {
                        request.headers_mut().append(*name, value);
                    }
                }
                request
            },
        );
        kube::Client::new(service, "default")
    }
}

#[cfg(feature = "kube")]
fn record<B>(log: &Mutex<Vec<RecordedRequest>>, request: &http::Request<B>) {
    let Some(path) = crate::request::parse_path(request.uri().path()) else { return };
    let watch = request
        .uri()
        .query()
        .is_some_and(|query| query.split('&').any(|pair| pair == "watch=true" || pair == "watch=1"));
    if let Ok(mut log) = log.lock() {
        log.push(RecordedRequest {
            method: request.method().to_string(),
            group: path.group,
            version: path.version,
            resource: path.resource,
            namespace: path.namespace,
            name: path.name,
            subresource: path.subresource,
            watch,
        });
    }
}

impl Builder {
    /// CRD manifests to install: files or directories of YAML or JSON (v1 or legacy v1beta1),
    /// as `crdctl validate` reads them.
    pub fn crd_files<P: AsRef<Path>>(mut self, paths: impl IntoIterator<Item = P>) -> Builder {
        self.crd_files.extend(paths.into_iter().map(|path| path.as_ref().to_path_buf()));
        self
    }

    /// A CRD to install: anything that serializes to one, e.g. k8s-openapi's
    /// `CustomResourceDefinition` or `kube::CustomResourceExt::crd()`.
    pub fn crd(mut self, crd: impl serde::Serialize) -> Builder {
        self.crds.push(serde_json::to_value(crd).map_err(|err| err.to_string()));
        self
    }

    /// Sends conversion reviews for the webhook Service `namespace/name` (a CRD's
    /// `conversion.webhook.clientConfig.service`) to a local address; TLS is still verified
    /// for `<name>.<namespace>.svc` against the CRD's `caBundle`.
    pub fn conversion_webhook(mut self, service: &str, address: SocketAddr) -> Builder {
        self.config.webhook_services.insert(service.to_string(), address);
        self
    }

    /// Which controllers run (all by default: the garbage collector, the namespace controller,
    /// the service account controller, the root CA publisher, the storage version migrator).
    pub fn controllers(mut self, controllers: crate::controller::Controllers) -> Builder {
        self.config.controllers = controllers;
        self
    }

    /// How requests are authorized (default `AlwaysAllow`; `RBAC` to test as a cluster
    /// decides, with [`TestServer::client_as`]).
    pub fn authorization(mut self, mode: crate::auth::Mode) -> Builder {
        self.config.authorization = mode;
        self
    }

    /// The server's configuration (listen address, TLS, token, upgrade-safety gate,
    /// controllers).
    pub fn config(mut self, config: Config) -> Builder {
        let webhooks = std::mem::take(&mut self.config.webhook_services);
        self.config = config;
        self.config.webhook_services.extend(webhooks);
        self
    }

    /// The store (default: a fresh in-memory one).
    pub fn store(mut self, store: Arc<dyn crdctl_storage::Store>) -> Builder {
        self.store = Some(store);
        self
    }

    /// Starts the server, installs the CRDs and waits until each is Established.
    pub async fn start(self) -> Result<TestServer, StartError> {
        let mut crds = Vec::new();
        if !self.crd_files.is_empty() {
            let loaded =
                crdctl_model::load::load_paths(&self.crd_files).map_err(|err| StartError::Setup(err.to_string()))?;
            crds.extend(loaded.into_iter().map(|crd| crd.value));
        }
        for crd in self.crds {
            crds.push(crd.map_err(StartError::Setup)?);
        }
        let store = self.store.unwrap_or_else(|| Arc::new(crdctl_storage::memory::open()));
        let service_account = self.config.controllers.service_account;
        let server = Server::start(self.config, store).await?;
        let test_server = TestServer { server, requests: Arc::default() };
        if service_account {
            test_server.wait_for_the_default_service_account().await?;
        }
        for crd in &crds {
            test_server.install(crd).await?;
        }
        for crd in &crds {
            let name = crate::object::meta_field(crd, "name").and_then(Value::as_str).unwrap_or_default();
            test_server.wait_established(name).await?;
        }
        Ok(test_server)
    }
}

impl TestServer {
    /// Waits until the service account controller has made `default/default`, as a test that
    /// asks for its token expects of a cluster that is up.
    async fn wait_for_the_default_service_account(&self) -> Result<(), StartError> {
        let store = &self.server.state().store;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            match store.get("/registry/serviceaccounts/default/default").await {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => tokio::time::sleep(Duration::from_millis(5)).await,
                Err(err) => return Err(StartError::Store(err.to_string())),
            }
        }
        Err(StartError::Setup("the default ServiceAccount was not made within 10 s".into()))
    }

    /// Creates a CRD through the API, as a client would.
    async fn install(&self, crd: &Value) -> Result<(), StartError> {
        let state = self.server.state();
        let endpoint = crate::rest::Endpoint::crds();
        crate::rest::create(
            state.verbs(),
            &endpoint,
            crd.clone(),
            &crate::rest::Params::default(),
            crate::rest::Managed::Record,
        )
        .await
        .map(|_| ())
        .map_err(|err| StartError::Setup(format!("cannot create the CRD: {}", err.message)))
    }
}
