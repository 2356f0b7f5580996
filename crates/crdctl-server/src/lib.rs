//! A Kubernetes-compatible API server for CustomResourceDefinitions and their objects, that the
//! real `kubectl` and client libraries drive: discovery, OpenAPI, tables, watches, and the CRD
//! versioning behaviour of the Kubernetes documentation — every served version at
//! `/apis/<group>/<version>`, objects stored in the storage version and converted on the way
//! in and out (None or a webhook), `status.storedVersions`, deprecation warnings.
//!
//! The request path: [`handler`] routes a path to discovery or to a verb on an
//! [`rest::Endpoint`] → [`negotiate`] decodes the body → the addressed
//! [`registry::resource::Resource`] (a built-in row or a served CRD, one trait) prunes,
//! defaults and validates at the request version, then converts to the storage version → [`crdctl_storage::Store`] compares and swaps →
//! the stored object is read back, converted to the request version and rendered (object,
//! `Table` or metadata) with deprecation [`warnings`]. Errors are [`error::ApiError`] values that
//! become `Status` responses.
//!
//! Routing follows the store, not memory: [`registry::Registry`] watches the CRD keys, so
//! several servers on one store agree.
//!
//! [`Server`] is the running server (`crdctl serve`); [`app`] is its one `Router`, for `main` and
//! tests alike; [`testing::TestServer`] runs one in-process for a test, with the CRDs it needs.
//!
//! ```
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! let store = Arc::new(crdctl_storage::memory::open());
//! let server = crdctl_server::Server::start(crdctl_server::Config::default(), store).await?;
//! let version: serde_json::Value = reqwest::get(format!("{}/version", server.url())).await?.json().await?;
//! assert_eq!(version["major"], "1");
//! server.shutdown().await;
//! # Ok(()) }
//! ```

pub mod admission;
pub mod auth;
pub mod bootstrap;
pub mod controller;
pub mod discovery;
pub mod error;
pub mod fieldmanager;
pub mod handler;
pub mod informer;
pub mod jsonpath;
pub mod metrics;
pub mod negotiate;
pub mod object;
pub mod openapi;
pub mod panic;
pub mod protobuf;
pub mod registry;
pub mod render;
pub mod request;
pub mod rest;
pub mod selector;
pub mod state;
pub mod stats;
pub mod table;
pub mod testing;
pub mod warnings;
pub mod watch;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use crdctl_storage::Store;
use serde_json::{Value, json};

pub use crate::discovery::{VERSION, Version};
use crate::error::ApiError;
pub use crate::registry::upgrade::UpgradeSafety;
pub use crate::state::{AppState, Config, Shared, StartError};

async fn version() -> Response {
    let body = json!({
        "major": VERSION.major, "minor": VERSION.minor, "gitVersion": VERSION.git_version,
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-12-01T00:00:00Z", "goVersion": "go1.24.0", "compiler": "gc", "platform": "linux/amd64",
    });
    axum::Json(body).into_response()
}

async fn health(State(state): State<AppState>) -> Response {
    match state.store.revision().await {
        Ok(_) => (StatusCode::OK, "ok").into_response(),
        Err(err) => (StatusCode::SERVICE_UNAVAILABLE, format!("store: {err}")).into_response(),
    }
}

/// `/.well-known/openid-configuration`: where ServiceAccount tokens' keys are, as upstream's
/// service account issuer discovery.
async fn openid_configuration() -> Response {
    issuer_document("application/json", auth::token::openid_configuration())
}

/// `/openid/v1/jwks`: the key ServiceAccount tokens are signed with.
async fn openid_keys(State(state): State<AppState>) -> Response {
    issuer_document("application/jwk-set+json", state.authenticator.signer.jwks())
}

fn issuer_document(content_type: &'static str, document: Value) -> Response {
    let headers =
        [(axum::http::header::CONTENT_TYPE, content_type), (axum::http::header::CACHE_CONTROL, "public, max-age=3600")];
    (headers, document.to_string()).into_response()
}

/// `/metrics`: request counts in the Prometheus text format.
async fn metrics_text(State(state): State<AppState>) -> Response {
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    ([(axum::http::header::CONTENT_TYPE, content_type)], state.metrics.render()).into_response()
}

/// `/openapi/v2`: JSON, or for clients that accept only protobuf (kubectl 1.27–1.29 `apply`
/// loads it that way and fails without it) the protobuf header of the document.
async fn openapi_v2(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    let ranges = negotiate::accept_ranges(&headers);
    let json = ranges.is_empty()
        || ranges.iter().any(|r| matches!(r.essence.as_str(), "application/json" | "*/*" | "application/*"));
    if !json {
        let mut response = openapi::v2_protobuf_header().into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/com.github.proto-openapi.spec.v2.v1.0+protobuf"),
        );
        return response;
    }
    axum::Json(openapi::v2_document(&state.registry)).into_response()
}

async fn openapi_v3_index(State(state): State<AppState>) -> Response {
    axum::Json(openapi::v3_index(&state.registry)).into_response()
}

async fn openapi_v3(State(state): State<AppState>, Path(path): Path<String>) -> Response {
    let segments: Vec<&str> = path.split('/').collect();
    let (group, version) = match segments.as_slice() {
        ["api", version] => ("", *version),
        ["apis", group, version] => (*group, *version),
        _ => return ApiError::no_route().into_response(),
    };
    match openapi::v3_document(&state.registry, group, version) {
        Some(document) => {
            let mut response = axum::Json(document).into_response();
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, immutable"));
            response
        }
        None => ApiError::no_route().into_response(),
    }
}

/// kube-apiserver's authentication, impersonation and authorization filters: the request goes
/// on as its user (a request extension), or is answered 401 or 403 here.
async fn guard(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let headers = request.headers();
    let tls = request.extensions().get::<Arc<axum_server::tls::TlsInfo>>();
    let certificate = tls.and_then(|tls| tls.peer_certificates.first()).map(Vec::as_slice);
    let user = state
        .authenticator
        .authenticate(certificate, headers)
        .and_then(|user| auth::impersonate(&state.authorizer, user, headers));
    let user = match user {
        Ok(user) => user,
        Err(err) => return err.into_response(),
    };
    let attributes = auth::Attributes::of(user, request.method(), request.uri().path(), request.uri().query());
    let decision = state.authorizer.decide_now(&*state.store, &attributes).await;
    if !decision.allowed {
        return attributes.forbidden(&decision.reason).into_response();
    }
    request.extensions_mut().insert(attributes.user);
    next.run(request).await
}

async fn not_found() -> Response {
    ApiError::no_route().into_response()
}

/// The whole API as one router, for `crdctl serve` and tests alike.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/version", get(version))
        .route("/healthz", get(health))
        .route("/readyz", get(health))
        .route("/livez", get(health))
        .route("/metrics", get(metrics_text))
        .route("/.well-known/openid-configuration", get(openid_configuration))
        .route("/openid/v1/jwks", get(openid_keys))
        .route("/openapi/v2", get(openapi_v2))
        .route("/openapi/v3", get(openapi_v3_index))
        .route("/openapi/v3/{*path}", get(openapi_v3))
        .route("/api", axum::routing::any(handler::api))
        .route("/api/{*path}", axum::routing::any(handler::api))
        .route("/apis", axum::routing::any(handler::api))
        .route("/apis/{*path}", axum::routing::any(handler::api))
        .fallback(not_found)
        // One byte over the limit is enough to answer 413 from the handler.
        .layer(DefaultBodyLimit::max(error::MAX_REQUEST_BYTES + 1))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(panic::layer())
        .with_state(state)
}

/// Who the kubeconfig's certificate names, as kubeadm's administrator.
const ADMINISTRATOR_CERTIFICATE: &str = "kubernetes-admin";

/// The client certificates a server with TLS accepts: those its CA (or `--client-ca-file`'s)
/// signed; its administrator's is issued once, for the kubeconfig.
struct ClientCertificates {
    ca: auth::x509::ClientCa,
    administrator: auth::x509::Issued,
}

/// A running server.
pub struct Server {
    address: SocketAddr,
    /// With TLS: the client certificates the server accepts and issues.
    client_certificates: Option<ClientCertificates>,
    state: AppState,
    handle: axum_server::Handle<SocketAddr>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    controllers: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Binds and starts serving; refuses a non-loopback address without TLS and token
    /// authentication.
    pub async fn start(config: Config, store: Arc<dyn Store>) -> Result<Server, StartError> {
        let authenticates = config.token.is_some() || config.token_auth_file.is_some();
        if !config.listen.ip().is_loopback() && (config.tls.is_none() || !authenticates) {
            return Err(StartError::Insecure(config.listen));
        }
        let listener = std::net::TcpListener::bind(config.listen)
            .map_err(|source| StartError::Bind { address: config.listen, source })?;
        listener.set_nonblocking(true).map_err(|source| StartError::Bind { address: config.listen, source })?;
        let address = listener.local_addr().map_err(|source| StartError::Bind { address: config.listen, source })?;
        let tls = config.tls.clone();
        let state = AppState::new(config, store).await?;
        // Responses go out as soon as they are written (TCP_NODELAY), as Go's net/http does.
        let router = app(state.clone()).into_make_service();
        let handle = axum_server::Handle::new();
        let (task, client_certificates) = match tls {
            Some((cert, key)) => {
                let client_ca = auth::x509::ClientCa::load_or_create(&*state.store).await.map_err(StartError::Tls)?;
                let administrator =
                    client_ca.issue(ADMINISTRATOR_CERTIFICATE, Some(auth::MASTERS)).map_err(StartError::Tls)?;
                let mut client_cas = vec![client_ca.cert_pem.clone()];
                if let Some(path) = &state.config.client_ca_file {
                    let pem = std::fs::read_to_string(path)
                        .map_err(|err| StartError::Tls(format!("{}: {err}", path.display())))?;
                    client_cas.push(pem);
                }
                let rustls = auth::x509::server_config(&cert, &key, &client_cas).map_err(StartError::Tls)?;
                let rustls = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(rustls));
                let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(rustls)
                    .acceptor(axum_server::accept::NoDelayAcceptor::new());
                let server = axum_server::from_tcp(listener)
                    .map_err(|source| StartError::Bind { address, source })?
                    .acceptor(acceptor)
                    .handle(handle.clone());
                (tokio::spawn(server.serve(router)), Some(ClientCertificates { ca: client_ca, administrator }))
            }
            None => {
                let server = axum_server::from_tcp(listener)
                    .map_err(|source| StartError::Bind { address, source })?
                    .acceptor(axum_server::accept::NoDelayAcceptor::new())
                    .handle(handle.clone());
                (tokio::spawn(server.serve(router)), None)
            }
        };
        let controllers = tokio::spawn(controller::run(state.controllers()));
        Ok(Server { address, client_certificates, state, handle, task, controllers })
    }

    /// The bound address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://127.0.0.1:<port>` (or https).
    pub fn url(&self) -> String {
        format!("{}://{}", if self.client_certificates.is_some() { "https" } else { "http" }, self.address)
    }

    /// The shared state (store and registry), for tests.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// A kubeconfig that points kubectl at this server, as its administrator: a client
    /// certificate in `system:masters` with TLS, else the server's token.
    pub fn kubeconfig(&self, ca_file: Option<&std::path::Path>) -> String {
        use base64::Engine;
        let mut cluster = format!("    server: {}\n", self.url());
        if let Some(ca) = ca_file {
            cluster.push_str(&format!("    certificate-authority: {}\n", ca.display()));
        }
        let user = match (&self.client_certificates, &self.state.config.token) {
            (Some(ClientCertificates { administrator: admin, .. }), _) => {
                let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
                format!(
                    "    client-certificate-data: {}\n    client-key-data: {}\n",
                    encode(&admin.cert_pem),
                    encode(&admin.key_pem)
                )
            }
            (None, Some(token)) => format!("    token: {token}\n"),
            (None, None) => "    username: crdctl\n".to_string(),
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: crdctl\n  cluster:\n{cluster}users:\n- name: crdctl\n  user:\n{user}contexts:\n- name: crdctl\n  context:\n    cluster: crdctl\n    user: crdctl\n    namespace: default\ncurrent-context: crdctl\n"
        )
    }

    /// A client certificate for `user` in `group`, signed by the server's client CA (with TLS).
    pub fn client_certificate(&self, user: &str, group: Option<&str>) -> Option<Result<auth::x509::Issued, String>> {
        self.client_certificates.as_ref().map(|certificates| certificates.ca.issue(user, group))
    }

    /// Stops accepting, ends watches, lets in-flight requests finish, and waits.
    pub async fn shutdown(self) {
        self.state.shutdown.send_replace(true);
        self.handle.graceful_shutdown(Some(std::time::Duration::from_secs(10)));
        let _ = self.task.await;
        // The controllers give their Lease up, so the next leader need not wait it out.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.controllers).await;
    }
}
