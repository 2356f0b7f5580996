//! Errors as values that become Kubernetes `Status` responses, with upstream codes, reasons
//! and message texts (apimachinery `pkg/api/errors`), so kubectl prints its familiar lines.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use crdctl_model::field;
use crdctl_storage::StoreError;
use serde_json::{Value, json};

/// A `Status.reason` a webhook chose, as one of apimachinery's `StatusReason`s (others read as
/// `StatusReasonUnknown`).
fn status_reason(reason: &str) -> &'static str {
    const REASONS: [&str; 18] = [
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "StoreReadError",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "ServiceUnavailable",
    ];
    REASONS.into_iter().find(|known| *known == reason).unwrap_or("")
}

/// The largest request body accepted, as kube-apiserver's 3 MiB limit.
pub const MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;

/// A failed request: HTTP code, `reason`, message and `details`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status code, also `Status.code`.
    pub code: StatusCode,
    /// `Status.reason` (`NotFound`, `Invalid`, ...); empty for `StatusReasonUnknown`.
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, if any (boxed: errors are returned often and rarely carry details).
    pub details: Option<Box<Value>>,
    /// Warnings the request earned before it was refused (a `Warn` policy, a webhook's), sent
    /// as `Warning` headers with the refusal, as upstream does.
    pub warnings: Vec<String>,
}

/// What an error is about: the resource (`crontabs.example.com`) and the object's name.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The API group, empty for the core group.
    pub group: &'a str,
    /// The resource plural (`crontabs`).
    pub resource: &'a str,
    /// The object's name; may be empty.
    pub name: &'a str,
}

impl Subject<'_> {
    /// `crontabs.example.com`, or `namespaces` in the core group.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.resource.to_string() } else { format!("{}.{}", self.resource, self.group) }
    }

    fn details(&self) -> Value {
        let mut details = json!({"name": self.name, "group": self.group, "kind": self.resource});
        if self.group.is_empty() {
            details.as_object_mut().map(|d| d.remove("group"));
        }
        details
    }
}

impl ApiError {
    fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { code, reason, message: message.into(), details: None, warnings: Vec::new() }
    }

    /// The same refusal, sent after `earlier` warnings.
    pub fn after_warnings(mut self, earlier: &[String]) -> ApiError {
        self.warnings.splice(0..0, earlier.iter().cloned());
        self
    }

    fn with_details(mut self, details: Value) -> ApiError {
        self.details = Some(Box::new(details));
        self
    }

    /// 404 `<resource> "<name>" not found`.
    pub fn not_found(subject: Subject<'_>) -> ApiError {
        let message = format!("{} {:?} not found", subject.qualified(), subject.name);
        ApiError::new(StatusCode::NOT_FOUND, "NotFound", message).with_details(subject.details())
    }

    /// 404 for a path that names no resource: what kubectl reads as
    /// `the server could not find the requested resource`.
    pub fn no_route() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "NotFound", "the server could not find the requested resource")
            .with_details(json!({}))
    }

    /// 409 `<resource> "<name>" already exists`.
    pub fn already_exists(subject: Subject<'_>) -> ApiError {
        let message = format!("{} {:?} already exists", subject.qualified(), subject.name);
        ApiError::new(StatusCode::CONFLICT, "AlreadyExists", message).with_details(subject.details())
    }

    /// 409 for a create whose every generated name existed (apimachinery's
    /// `NewGenerateNameConflict`): the client may try again after a second.
    pub fn generate_name_conflict(subject: Subject<'_>) -> ApiError {
        let message = format!(
            "{} {:?} already exists, the server was not able to generate a unique name for the object",
            subject.qualified(),
            subject.name
        );
        let mut details = subject.details();
        if let Some(details) = details.as_object_mut() {
            details.insert("retryAfterSeconds".into(), json!(1));
        }
        ApiError::new(StatusCode::CONFLICT, "AlreadyExists", message).with_details(details)
    }

    /// 409: an update based on a stale `resourceVersion`.
    pub fn conflict(subject: Subject<'_>) -> ApiError {
        let message = format!(
            "Operation cannot be fulfilled on {} {:?}: the object has been modified; please apply your changes to the latest version and try again",
            subject.qualified(),
            subject.name
        );
        ApiError::new(StatusCode::CONFLICT, "Conflict", message).with_details(subject.details())
    }

    /// 409 with a custom message (e.g. a precondition on `uid`).
    pub fn conflict_with(subject: Subject<'_>, detail: &str) -> ApiError {
        let message = format!("Operation cannot be fulfilled on {} {:?}: {detail}", subject.qualified(), subject.name);
        ApiError::new(StatusCode::CONFLICT, "Conflict", message).with_details(subject.details())
    }

    /// 422 `<Kind>.<group> "<name>" is invalid: <field errors>` with one cause per field error.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: &[field::Error]) -> ApiError {
        let mut lines: Vec<String> = Vec::new();
        for line in errors.iter().map(ToString::to_string) {
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
        let aggregate = if let [line] = lines.as_slice() { line.clone() } else { format!("[{}]", lines.join(", ")) };
        let qualified_kind = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let message = format!("{qualified_kind} {name:?} is invalid: {aggregate}");
        let causes: Vec<Value> = errors
            .iter()
            .map(|v| json!({"reason": v.error_type.reason(), "message": v.body(), "field": v.field}))
            .collect();
        let mut details = json!({"name": name, "group": group, "kind": kind, "causes": causes});
        if group.is_empty() {
            details.as_object_mut().map(|d| d.remove("group"));
        }
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message).with_details(details)
    }

    /// 409 for a server-side apply that would take fields from other managers, one
    /// `FieldManagerConflict` cause per field (upstream's `NewApplyConflict`).
    pub fn apply_conflict(message: String, causes: Vec<Value>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "Conflict", message).with_details(json!({"causes": causes}))
    }

    /// 403 for a non-resource request (a path), as `NewForbidden` words it without a resource.
    pub fn forbidden_path(detail: &str) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "Forbidden", format!("forbidden: {detail}")).with_details(json!({}))
    }

    /// 400 with a message.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    /// 403 with a message, as apimachinery's `NewForbidden` words it (a collection has no name).
    pub fn forbidden(subject: Subject<'_>, detail: &str) -> ApiError {
        let message = match subject.name {
            "" => format!("{} is forbidden: {detail}", subject.qualified()),
            name => format!("{} {name:?} is forbidden: {detail}", subject.qualified()),
        };
        ApiError::new(StatusCode::FORBIDDEN, "Forbidden", message).with_details(subject.details())
    }

    /// 422 for a JSON patch that does not apply.
    pub fn unprocessable_patch(detail: &str) -> ApiError {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            format!("the server rejected our request due to an error in our request: {detail}"),
        )
    }

    /// 422 `Invalid` with no detail, as apimachinery's `NewGenericServerResponse` words it.
    pub fn rejected() -> ApiError {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            "the server rejected our request due to an error in our request",
        )
    }

    /// 401 `Unauthorized`.
    pub fn unauthorized() -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
    }

    /// 405 for a method the path has no route for, as kube-apiserver answers a verb a resource
    /// lacks (`deletecollection` of namespaces).
    pub fn method_not_allowed() -> ApiError {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    /// 406 for an `Accept` header no serializer matches.
    pub fn not_acceptable(accept: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "NotAcceptable",
            format!("the server was unable to respond with a content type that the client supports ({accept})"),
        )
    }

    /// 413: the body is larger than [`MAX_REQUEST_BYTES`].
    pub fn too_large() -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {MAX_REQUEST_BYTES}"),
        )
    }

    /// 415: a patch or body type the resource does not accept.
    pub fn unsupported_media_type(accepted: &[&str]) -> ApiError {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 410 `Expired`: a watch or list at a compacted revision.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::GONE, "Expired", message)
    }

    /// 500 with the message as is (`StatusReasonUnknown`), as conversion failures are reported.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "", message)
    }

    /// An admission webhook's denial, from its `status` (upstream's `webhookerrors.ToStatusErr`):
    /// `<resource> "<name>" is forbidden: admission webhook "<webhook>" denied the request:
    /// <message>`, 403 `Forbidden` unless the webhook chose a code and reason; a 500 reads
    /// `Internal error occurred: …`.
    pub fn webhook_denied(subject: Subject<'_>, webhook: &str, status: Option<&Value>) -> ApiError {
        let field = |name: &str| status.and_then(|s| s.get(name)).and_then(Value::as_str).unwrap_or_default();
        let code = status.and_then(|s| s.get("code")).and_then(Value::as_u64).unwrap_or(0);
        let code = StatusCode::from_u16(u16::try_from(code).unwrap_or(0)).unwrap_or(StatusCode::FORBIDDEN);
        let denied = format!("admission webhook {webhook:?} denied the request");
        let message = match (field("message"), field("reason")) {
            ("", "") => format!("{denied} without explanation"),
            ("", reason) => format!("{denied}: {reason}"),
            (message, _) => format!("{denied}: {message}"),
        };
        let name = if subject.name.is_empty() { "Unknown" } else { subject.name };
        let internal = code == StatusCode::INTERNAL_SERVER_ERROR;
        let details = match status.and_then(|s| s.get("details")) {
            Some(details) => details.clone(),
            None if internal => json!({"causes": [{"message": message}]}),
            None => Subject { name, ..subject }.details(),
        };
        let prefix = if internal {
            "Internal error occurred".to_string()
        } else {
            format!("{} {name:?} is forbidden", subject.qualified())
        };
        let reason = match field("reason") {
            "" if internal => "InternalError",
            "" => "Forbidden",
            reason => status_reason(reason),
        };
        ApiError::new(code, reason, format!("{prefix}: {message}")).with_details(details)
    }

    /// A `ValidatingAdmissionPolicy`'s denial (upstream's validating policy dispatcher):
    /// `<resource> "<name>" is forbidden: <message>`, with the validation's reason, `Invalid`
    /// (422) unless it names another, and the message as the one cause.
    pub fn policy_denied(subject: Subject<'_>, message: &str, reason: Option<&str>) -> ApiError {
        let reason = match reason.map(status_reason) {
            None | Some("") => "Invalid",
            Some(reason) => reason,
        };
        let code = match reason {
            "Forbidden" => StatusCode::FORBIDDEN,
            "Unauthorized" => StatusCode::UNAUTHORIZED,
            "RequestEntityTooLarge" => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        let mut details = subject.details();
        if let Some(details) = details.as_object_mut() {
            details.insert("causes".into(), json!([{"message": message}]));
        }
        let text = format!("{} {:?} is forbidden: {message}", subject.qualified(), subject.name);
        ApiError::new(code, reason, text).with_details(details)
    }

    /// 500 `InternalError`, as apimachinery's `NewInternalError`.
    pub fn internal_error(err: impl std::fmt::Display) -> ApiError {
        let err = err.to_string();
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", format!("Internal error occurred: {err}"))
            .with_details(json!({"causes": [{"message": err}]}))
    }

    /// 503: the store cannot be reached.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", message)
    }

    /// 504: a write's answer did not arrive in time; it may or may not have been applied.
    pub fn timeout(message: impl Into<String>) -> ApiError {
        let message = message.into();
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "Timeout",
            format!("Timeout: request did not complete within requested timeout - {message}"),
        )
        .with_details(json!({"retryAfterSeconds": 1}))
    }

    /// 504 `Too large resource version`.
    pub fn too_large_resource_version(requested: u64, current: u64) -> ApiError {
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}))
    }

    /// A store failure about `subject`.
    pub fn from_store(err: StoreError, subject: Subject<'_>) -> ApiError {
        match err {
            StoreError::NotFound { .. } => ApiError::not_found(subject),
            StoreError::AlreadyExists { .. } => ApiError::already_exists(subject),
            StoreError::Conflict { .. } => ApiError::conflict(subject),
            StoreError::Compacted { requested, compacted } => {
                ApiError::expired(format!("too old resource version: {requested} ({compacted})"))
            }
            StoreError::FutureRevision { requested, current } => {
                ApiError::too_large_resource_version(requested, current)
            }
            StoreError::Unavailable(message) => ApiError::unavailable(message),
            StoreError::Timeout(message) => ApiError::timeout(message),
            StoreError::TooLarge(message) => ApiError::internal_error(message),
            other => ApiError::internal(other.to_string()),
        }
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code.as_u16(),
        });
        if self.reason.is_empty() {
            status.as_object_mut().map(|s| s.remove("reason"));
        }
        if let (Some(details), Some(status)) = (&self.details, status.as_object_mut()) {
            status.insert("details".into(), (**details).clone());
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.code.is_server_error() {
            tracing::warn!(code = self.code.as_u16(), message = %self.message, "request failed");
        } else {
            tracing::debug!(code = self.code.as_u16(), message = %self.message, "request refused");
        }
        let body = serde_json::to_vec(&self.status()).unwrap_or_default();
        let mut response = (self.code, body).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        crate::warnings::add(&mut response, &self.warnings);
        response
    }
}

/// The result type of handlers.
pub type ApiResult<T> = Result<T, ApiError>;
