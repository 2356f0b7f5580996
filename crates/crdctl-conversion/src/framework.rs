//! A conversion webhook server: write one function, get an HTTPS webhook.
//!
//! ```no_run
//! use crdctl_conversion::framework::{Options, serve};
//!
//! # async fn run() -> std::io::Result<()> {
//! let options = Options::new("127.0.0.1:9443".parse().unwrap(), "tls.crt", "tls.key");
//! serve(options, |mut object: serde_json::Value, _desired: &str| {
//!     // Move fields between versions here; the framework sets apiVersion afterwards.
//!     object["spec"]["renamed"] = object["spec"]["old"].take();
//!     Ok(object)
//! }, async { let _ = tokio::signal::ctrl_c().await; })
//! .await
//! # }
//! ```
//!
//! The server answers `apiextensions.k8s.io/v1` and `v1beta1` reviews in the version they were
//! asked in, copies the uid, and turns the function's error into a `Failed` result carrying its
//! message. Request bodies are limited, `/healthz` answers `ok`, certificate files are reloaded
//! when they change (cert-manager rotates them in place), and shutdown lets requests in flight
//! finish.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum_server::Handle;
use axum_server::tls_rustls::RustlsConfig;
use serde_json::Value;

use crate::review::{ConversionReview, KIND, ReviewVersion};

/// The user's conversion: an object and the desired `apiVersion` in, the converted object or a
/// message out.
pub trait Convert: Fn(Value, &str) -> Result<Value, String> + Send + Sync + 'static {}
impl<F> Convert for F where F: Fn(Value, &str) -> Result<Value, String> + Send + Sync + 'static {}

/// How the server runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// PEM certificate chain.
    pub tls_cert: PathBuf,
    /// PEM private key.
    pub tls_key: PathBuf,
    /// The path that receives reviews; the CRD's `service.path` or URL path.
    pub path: String,
    /// Largest request body accepted (the API server sends at most 3 MiB objects).
    pub max_request_bytes: usize,
    /// How often the certificate files are checked for changes.
    pub reload_interval: Duration,
    /// How long requests in flight may take after shutdown is asked for.
    pub shutdown_grace: Duration,
}

impl Options {
    /// Options with the defaults: path `/crdconvert`, 8 MiB requests, reload check every 10 s,
    /// 25 s shutdown grace.
    pub fn new(listen: SocketAddr, tls_cert: impl Into<PathBuf>, tls_key: impl Into<PathBuf>) -> Options {
        Options {
            listen,
            tls_cert: tls_cert.into(),
            tls_key: tls_key.into(),
            path: "/crdconvert".into(),
            max_request_bytes: 8 << 20,
            reload_interval: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(25),
        }
    }
}

#[cfg(feature = "certs")]
impl Options {
    /// Options serving `bundle`'s certificate, written into `dir` as `tls.crt` and `tls.key`
    /// (tests, benchmarks, a webhook that makes its own certificate).
    pub fn for_bundle(listen: SocketAddr, bundle: &crate::certs::Bundle, dir: &Path) -> std::io::Result<Options> {
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert, &bundle.cert_pem)?;
        std::fs::write(&key, &bundle.key_pem)?;
        Ok(Options::new(listen, cert, key))
    }
}

/// The HTTP routes, without TLS: `POST <path>` and `GET /healthz`.
pub fn router(path: &str, max_request_bytes: usize, convert: impl Convert) -> Router {
    let convert: Arc<dyn Convert> = Arc::new(convert);
    Router::new()
        .route(path, post(review))
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(max_request_bytes))
        .with_state(convert)
}

/// A running webhook.
#[derive(Debug)]
pub struct Server {
    /// The bound address (useful with port 0).
    pub address: SocketAddr,
    handle: Handle<SocketAddr>,
    grace: Duration,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    reload: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Stops accepting connections, lets requests in flight finish, and waits.
    pub async fn shutdown(self) -> std::io::Result<()> {
        self.handle.graceful_shutdown(Some(self.grace));
        self.reload.abort();
        self.task.await.map_err(std::io::Error::other)?
    }
}

/// Starts the webhook and returns once it listens.
pub async fn start(options: Options, convert: impl Convert) -> std::io::Result<Server> {
    let app = router(&options.path, options.max_request_bytes, convert);
    start_app(options, app).await
}

/// Serves any `app` as [`start`] serves the conversion routes: over TLS from the options'
/// files, reloaded when they change (an admission webhook's routes, say).
pub async fn start_app(options: Options, app: Router) -> std::io::Result<Server> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let tls = RustlsConfig::from_pem_file(&options.tls_cert, &options.tls_key).await?;
    let handle = Handle::new();
    let server = axum_server::bind_rustls(options.listen, tls.clone()).handle(handle.clone());
    let task = tokio::spawn(server.serve(app.into_make_service()));
    let address = handle
        .listening()
        .await
        .ok_or_else(|| std::io::Error::other(format!("cannot listen on {}", options.listen)))?;
    tracing::info!(%address, path = options.path, "webhook listening");
    let reload =
        tokio::spawn(reload_on_change(tls, options.tls_cert.clone(), options.tls_key.clone(), options.reload_interval));
    Ok(Server { address, handle, grace: options.shutdown_grace, task, reload })
}

/// Runs the webhook until `shutdown` completes, then shuts down gracefully.
pub async fn serve(options: Options, convert: impl Convert, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
    let server = start(options, convert).await?;
    shutdown.await;
    tracing::info!("shutting down");
    server.shutdown().await
}

/// Completes on Ctrl-C or SIGTERM (what a Pod is stopped with): the `shutdown` of a webhook
/// process.
pub async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let terminated = async {
        match terminate.as_mut() {
            Some(terminate) => {
                terminate.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminated => {}
    }
}

/// Answers one ConversionReview.
async fn review(State(convert): State<Arc<dyn Convert>>, body: Bytes) -> Response {
    let review: ConversionReview = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(err) => return bad_request(format!("failed to deserialize body: {err}")),
    };
    let version = match ReviewVersion::from_api_version(&review.api_version) {
        Some(version) if review.kind == KIND => version,
        _ => {
            return bad_request(format!(
                "Unsupported group version kind: {}, Kind={}",
                review.api_version, review.kind
            ));
        }
    };
    let Some(request) = review.request else { return bad_request("the review has no request".into()) };
    let mut converted = Vec::with_capacity(request.objects.len());
    for object in request.objects {
        match convert(object, &request.desired_api_version) {
            Ok(mut object) => {
                if let Some(map) = object.as_object_mut() {
                    map.insert("apiVersion".into(), Value::String(request.desired_api_version.clone()));
                }
                converted.push(object);
            }
            Err(message) => {
                tracing::warn!(uid = request.uid, message, "conversion failed");
                return axum::Json(ConversionReview::failure(version, &request.uid, &message)).into_response();
            }
        }
    }
    tracing::debug!(uid = request.uid, n_objects = converted.len(), desired = request.desired_api_version, "converted");
    axum::Json(ConversionReview::success(version, &request.uid, converted)).into_response()
}

fn bad_request(message: String) -> Response {
    tracing::debug!(message, "bad request");
    (StatusCode::BAD_REQUEST, message).into_response()
}

/// Reloads the certificate when either file changes; a broken pair keeps the old certificate.
async fn reload_on_change(tls: RustlsConfig, cert: PathBuf, key: PathBuf, interval: Duration) {
    let stamp = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let mut last: (Option<SystemTime>, Option<SystemTime>) = (stamp(&cert), stamp(&key));
    loop {
        tokio::time::sleep(interval).await;
        let now = (stamp(&cert), stamp(&key));
        if now == last {
            continue;
        }
        match tls.reload_from_pem_file(&cert, &key).await {
            Ok(()) => {
                tracing::info!(cert = %cert.display(), "serving certificate reloaded");
                last = now;
            }
            Err(err) => {
                tracing::warn!(cert = %cert.display(), %err, "cannot reload the serving certificate; keeping the old one")
            }
        }
    }
}
