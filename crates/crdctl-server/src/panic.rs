//! A panic is a bug, but never a dropped connection: a handler that panics answers 500 with a
//! `Status` (kube-apiserver's `WithPanicRecovery` text) and a log line, and a watch stream that
//! panics ends with an `ERROR` event carrying the same `Status`.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use tower_http::catch_panic::CatchPanicLayer;

use crate::error::ApiError;

/// What a request that panicked is told; the details are in the server's log.
const MESSAGE: &str = "This request caused apiserver to panic. Look in the logs for details.";

/// The panic's message, when it has one.
fn describe(payload: &(dyn Any + Send)) -> &str {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(text), _) => text,
        (_, Some(text)) => text,
        _ => "a panic without a message",
    }
}

/// The error a panic becomes, after logging it.
pub fn error(payload: &(dyn Any + Send)) -> ApiError {
    tracing::error!(panic = describe(payload), "a request panicked");
    ApiError::internal_error(MESSAGE)
}

fn respond(payload: Box<dyn Any + Send>) -> Response {
    error(payload.as_ref()).into_response()
}

/// The layer that turns a handler's panic into a 500 `Status`.
pub fn layer() -> CatchPanicLayer<fn(Box<dyn Any + Send>) -> Response> {
    CatchPanicLayer::custom(respond as fn(Box<dyn Any + Send>) -> Response)
}

/// Runs a future that is not a handler (a watch stream's task), turning its panic into the
/// error it becomes.
pub async fn guard<T>(work: impl Future<Output = T>) -> Result<T, ApiError> {
    AssertUnwindSafe(work).catch_unwind().await.map_err(|payload| error(payload.as_ref()))
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::http::Request;
    use axum::routing::get;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    async fn panicking() -> &'static str {
        panic!("boom")
    }

    #[tokio::test]
    async fn a_handler_that_panics_answers_500_with_a_status() {
        let router: Router =
            Router::new().route("/ok", get(|| async { "fine" })).route("/panics", get(panicking)).layer(layer());
        let response = router.clone().oneshot(Request::get("/panics").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status().as_u16(), 500);
        assert_eq!(response.headers()["content-type"], "application/json");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!((status["kind"].as_str(), status["reason"].as_str()), (Some("Status"), Some("InternalError")));
        assert_eq!(status["message"], format!("Internal error occurred: {MESSAGE}"));
        // The router goes on serving.
        let response = router.oneshot(Request::get("/ok").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
    }

    #[tokio::test]
    async fn a_guarded_task_that_panics_yields_the_error() {
        assert_eq!(guard(async { 7 }).await, Ok(7));
        let err = guard(async { panic!("{}", String::from("in a stream")) }).await.unwrap_err();
        assert_eq!(err.code.as_u16(), 500);
        assert_eq!(err.message, format!("Internal error occurred: {MESSAGE}"));
    }
}
