//! Admission webhooks on the framework: a function from a typed [`AdmissionRequest`] to a
//! [`Verdict`], served as the conversion function is (TLS, certificate reload, `/healthz`).
//!
//! ```no_run
//! use crdctl_conversion::admission::{self, Verdict};
//! use crdctl_conversion::framework::{Options, start_app};
//!
//! # async fn run() -> std::io::Result<()> {
//! let app = admission::router()
//!     .validating("/validate", |request| match request.object_field("/spec/replicas") {
//!         Some(replicas) if replicas.as_i64() > Some(10) => Verdict::deny("at most 10 replicas"),
//!         _ => Verdict::allow(),
//!     })
//!     .mutating("/mutate", |request| match request.object_field("/spec/replicas") {
//!         None => Verdict::allow().add("/spec/replicas", 1.into()),
//!         Some(_) => Verdict::allow(),
//!     })
//!     .build();
//! let options = Options::new("127.0.0.1:9443".parse().unwrap(), "tls.crt", "tls.key");
//! let server = start_app(options, app).await?;
//! # Ok(()) }
//! ```
//!
//! The server answers `admission.k8s.io/v1` and `v1beta1` reviews in the version they were
//! asked in and copies the uid; a verdict's patch goes out as a base64 `JSONPatch`. A
//! validating route never sends a patch (the API server would refuse the answer).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

/// A group, version and kind (or resource) as the request names them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct GroupVersionKind {
    /// The group, empty for core.
    #[serde(default)]
    pub group: String,
    /// The version.
    #[serde(default)]
    pub version: String,
    /// The kind.
    #[serde(default)]
    pub kind: String,
}

/// What the API server asks a webhook (`AdmissionReview.request`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// The request's uid, copied into the answer.
    pub uid: String,
    /// The object's kind, at the webhook's version.
    #[serde(default)]
    pub kind: GroupVersionKind,
    /// The subresource (`status`), or empty.
    #[serde(default)]
    pub sub_resource: String,
    /// The object's name.
    #[serde(default)]
    pub name: String,
    /// The namespace, empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    /// Who asked.
    #[serde(default)]
    pub user_info: Value,
    /// The object as it would be stored (none on delete).
    #[serde(default)]
    pub object: Option<Value>,
    /// The object before the write (updates and deletes).
    #[serde(default)]
    pub old_object: Option<Value>,
    /// Whether nothing will be stored.
    #[serde(default)]
    pub dry_run: bool,
    /// The operation's options (`CreateOptions`, …).
    #[serde(default)]
    pub options: Option<Value>,
}

impl AdmissionRequest {
    /// The field of the object at a JSON pointer (`/spec/replicas`), if set and not null.
    pub fn object_field(&self, pointer: &str) -> Option<&Value> {
        self.object.as_ref()?.pointer(pointer).filter(|v| !v.is_null())
    }

    /// The object's label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.object.as_ref()?.pointer("/metadata/labels")?.get(key)?.as_str()
    }
}

/// A webhook's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    allowed: bool,
    message: String,
    code: u16,
    patch: Vec<Value>,
    warnings: Vec<String>,
}

impl Verdict {
    /// Allows the request.
    pub fn allow() -> Verdict {
        Verdict { allowed: true, message: String::new(), code: 200, patch: Vec::new(), warnings: Vec::new() }
    }

    /// Denies it with `message` (403, as the API server reports it: `admission webhook "x"
    /// denied the request: <message>`).
    pub fn deny(message: impl Into<String>) -> Verdict {
        Verdict { allowed: false, message: message.into(), code: 403, ..Verdict::allow() }
    }

    /// Another HTTP code for the denial (the API server answers the client with it).
    pub fn with_code(mut self, code: u16) -> Verdict {
        self.code = code;
        self
    }

    /// Adds a warning, which the API server sends the client as a `Warning` header.
    pub fn warn(mut self, warning: impl Into<String>) -> Verdict {
        self.warnings.push(warning.into());
        self
    }

    /// Adds a JSON patch `add` of `value` at `path` (mutating webhooks).
    pub fn add(self, path: &str, value: Value) -> Verdict {
        self.operation(json!({"op": "add", "path": path, "value": value}))
    }

    /// Adds a JSON patch `replace` of the value at `path`.
    pub fn replace(self, path: &str, value: Value) -> Verdict {
        self.operation(json!({"op": "replace", "path": path, "value": value}))
    }

    /// Adds a JSON patch `remove` of the value at `path`.
    pub fn remove(self, path: &str) -> Verdict {
        self.operation(json!({"op": "remove", "path": path}))
    }

    /// Adds any RFC 6902 operation.
    pub fn operation(mut self, operation: Value) -> Verdict {
        self.patch.push(operation);
        self
    }

    /// The `response` for request `uid`; `mutating` routes may carry the patch.
    fn response(&self, uid: &str, mutating: bool) -> Value {
        let mut response = serde_json::Map::new();
        response.insert("uid".into(), json!(uid));
        response.insert("allowed".into(), json!(self.allowed));
        if !self.allowed {
            response.insert("status".into(), json!({"code": self.code, "message": self.message}));
        }
        if !self.warnings.is_empty() {
            response.insert("warnings".into(), json!(self.warnings));
        }
        if mutating && self.allowed && !self.patch.is_empty() {
            let patch = serde_json::to_vec(&self.patch).unwrap_or_default();
            response.insert("patchType".into(), json!("JSONPatch"));
            response.insert("patch".into(), json!(base64::engine::general_purpose::STANDARD.encode(patch)));
        }
        Value::Object(response)
    }
}

/// A webhook's function: the request in, the verdict out.
pub trait Admit: Fn(&AdmissionRequest) -> Verdict + Send + Sync + 'static {}
impl<F> Admit for F where F: Fn(&AdmissionRequest) -> Verdict + Send + Sync + 'static {}

/// Builds the routes of an admission webhook server.
#[derive(Default)]
pub struct Routes {
    router: Router,
    max_request_bytes: Option<usize>,
}

/// An empty set of routes.
pub fn router() -> Routes {
    Routes::default()
}

impl Routes {
    /// A validating webhook at `path`.
    pub fn validating(self, path: &str, admit: impl Admit) -> Routes {
        self.route(path, admit, false)
    }

    /// A mutating webhook at `path`: its verdicts' patches are sent.
    pub fn mutating(self, path: &str, admit: impl Admit) -> Routes {
        self.route(path, admit, true)
    }

    /// Largest request body accepted (default 8 MiB).
    pub fn max_request_bytes(mut self, bytes: usize) -> Routes {
        self.max_request_bytes = Some(bytes);
        self
    }

    fn route(mut self, path: &str, admit: impl Admit, mutating: bool) -> Routes {
        let admit: Arc<dyn Admit> = Arc::new(admit);
        let handler = post(move |body: Bytes| async move { review(&*admit, mutating, &body) });
        self.router = self.router.route(path, handler);
        self
    }

    /// The router, with `GET /healthz`.
    pub fn build(self) -> Router {
        self.router
            .route("/healthz", get(|| async { "ok" }))
            .layer(DefaultBodyLimit::max(self.max_request_bytes.unwrap_or(8 << 20)))
            .with_state(())
    }
}

/// Answers one AdmissionReview in the version it came in.
fn review(admit: &dyn Admit, mutating: bool, body: &[u8]) -> Response {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Review {
        api_version: String,
        request: Option<AdmissionRequest>,
    }
    let review: Review = match serde_json::from_slice(body) {
        Ok(review) => review,
        Err(err) => {
            return (StatusCode::BAD_REQUEST, format!("cannot decode the AdmissionReview: {err}")).into_response();
        }
    };
    let Some(request) = review.request else {
        return (StatusCode::BAD_REQUEST, "the AdmissionReview has no request").into_response();
    };
    let verdict = admit(&request);
    let answer = json!({"apiVersion": review.api_version, "kind": "AdmissionReview",
        "response": verdict.response(&request.uid, mutating)});
    (StatusCode::OK, axum::Json(answer)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(object: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "operation": "CREATE", "object": object}}))
        .unwrap()
    }

    async fn answer(admit: impl Admit, mutating: bool, body: &[u8]) -> Value {
        let response = review(&admit, mutating, body);
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn verdicts_become_responses_in_the_review_version() {
        let deny = |_: &AdmissionRequest| Verdict::deny("no").warn("careful");
        let answered = answer(deny, false, &request(json!({}))).await;
        assert_eq!(
            answered,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
                "uid": "u-1", "allowed": false, "status": {"code": 403, "message": "no"}, "warnings": ["careful"]}})
        );
        let default = |request: &AdmissionRequest| match request.object_field("/spec/replicas") {
            None => Verdict::allow().add("/spec/replicas", json!(1)),
            Some(_) => Verdict::allow(),
        };
        let answered = answer(default, true, &request(json!({"spec": {}}))).await;
        let patch =
            base64::engine::general_purpose::STANDARD.decode(answered["response"]["patch"].as_str().unwrap()).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&patch).unwrap(),
            json!([{"op": "add", "path": "/spec/replicas", "value": 1}])
        );
        assert_eq!(answered["response"]["patchType"], "JSONPatch");
        // A validating route sends no patch even when the verdict has one.
        let answered = answer(default, false, &request(json!({"spec": {}}))).await;
        assert!(answered["response"].get("patch").is_none());
    }
}
