//! Watches: a stream of `{"type": ..., "object": ...}` lines, from a `resourceVersion` (or a
//! synthetic `ADDED` per current object when none is given), in the request version, with
//! bookmarks, `timeoutSeconds`, selectors and `410 Expired` past the history window.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use crdctl_conversion::Shape;
use crdctl_storage::{EventKind, Revision, StoreError};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::negotiate::Representation;
use crate::rest::{Endpoint, Params, decode_entry, read_list};
use crate::selector::{FieldSelector, LabelSelector};

const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Starts a watch; the response streams until the timeout, the client leaves or the server stops.
pub async fn watch(
    state: AppState,
    endpoint: Endpoint,
    params: Params,
    representation: Representation,
    warnings: Vec<String>,
) -> ApiResult<Response> {
    let labels = LabelSelector::parse(params.label_selector.as_deref().unwrap_or_default())?;
    let fields = FieldSelector::parse(params.field_selector.as_deref().unwrap_or_default(), endpoint.namespaced)?;
    let explicit = params.resource_version.as_deref().filter(|rv| !rv.is_empty() && *rv != "0");
    let send_initial = params.send_initial_events.unwrap_or(explicit.is_none());
    let (initial, from) = match explicit {
        Some(rv) if !send_initial => (Vec::new(), crate::object::parse_resource_version(rv)?),
        _ => {
            let list_params = Params { limit: None, continue_: None, resource_version: None, ..params.clone() };
            let read = read_list(&state, &endpoint, &list_params).await?;
            (read.objects()?, read.revision)
        }
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let timeout = params.timeout_seconds.map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let bookmarks = params.allow_watch_bookmarks.unwrap_or(false);
    let initial_end_bookmark = params.send_initial_events == Some(true) && bookmarks;
    let stream = Stream { state, endpoint, labels, fields, representation, tx: tx.clone() };
    tokio::spawn(async move {
        let run = tokio::time::timeout(timeout, stream.run(initial, from, bookmarks, initial_end_bookmark));
        if let Err(err) = crate::panic::guard(run).await {
            let _ = tx.send(event_line("ERROR", &err.status())).await;
        }
    });
    let lines = tokio_stream::wrappers::ReceiverStream::new(rx);
    let body = Body::from_stream(futures_util::StreamExt::map(lines, Ok::<Bytes, std::convert::Infallible>));
    let mut response = Response::new(body);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    crate::handler::add_warnings(&mut response, &warnings);
    Ok(response)
}

struct Stream {
    state: AppState,
    endpoint: Endpoint,
    labels: LabelSelector,
    fields: FieldSelector,
    representation: Representation,
    tx: mpsc::Sender<Bytes>,
}

impl Stream {
    fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(object)
    }

    async fn send(&self, type_: &str, object: Value) -> bool {
        let object = match self.representation {
            Representation::Table if type_ != "BOOKMARK" && type_ != "ERROR" => {
                let columns = self.endpoint.columns();
                crate::table::table(&columns, &[object], json!({}), "Metadata", crate::object::now_seconds())
            }
            Representation::Metadata if type_ != "ERROR" => crate::handler::partial_metadata(&object),
            _ => object,
        };
        let stall_timeout = self.state.config.watch_stall_timeout;
        match self.tx.send_timeout(event_line(type_, &object), stall_timeout).await {
            Ok(()) => true,
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                tracing::info!(resource = %self.endpoint.resource, "closing a watch whose client stopped reading");
                false
            }
            Err(mpsc::error::SendTimeoutError::Closed(_)) => false,
        }
    }

    async fn send_error(&self, err: ApiError) {
        self.send("ERROR", err.status()).await;
    }

    fn bookmark(&self, revision: Revision, initial_end: bool) -> Value {
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if initial_end {
            crate::object::set(&mut metadata, "annotations", json!({"k8s.io/initial-events-end": "true"}));
        }
        json!({"apiVersion": self.endpoint.api_version(), "kind": self.endpoint.type_kind, "metadata": metadata})
    }

    async fn present(&self, object: Value) -> Result<Value, ApiError> {
        let mut objects = self.endpoint.present(vec![object], Shape::List).await?;
        objects.pop().ok_or_else(|| ApiError::internal("conversion lost the object"))
    }

    async fn run(self, initial: Vec<Value>, mut from: Revision, bookmarks: bool, initial_end_bookmark: bool) {
        match self.endpoint.present(initial, Shape::List).await {
            Ok(objects) => {
                for object in objects {
                    if !self.send("ADDED", object).await {
                        return;
                    }
                }
            }
            Err(err) => return self.send_error(err).await,
        }
        if initial_end_bookmark && !self.send("BOOKMARK", self.bookmark(from, true)).await {
            return;
        }
        let mut watch = match self.state.store.watch(&self.endpoint.prefix(), from).await {
            Ok(watch) => watch,
            Err(err) => return self.send_error(store_error(err)).await,
        };
        let mut shutdown = self.state.shutdown.subscribe();
        let mut ticker = tokio::time::interval(BOOKMARK_EVERY);
        ticker.tick().await;
        loop {
            let event = tokio::select! {
                event = watch.next() => event,
                _ = ticker.tick(), if bookmarks => {
                    if !self.send("BOOKMARK", self.bookmark(from, false)).await { return; }
                    continue;
                }
                _ = shutdown.changed() => return,
                () = self.tx.closed() => return,
            };
            let event = match event {
                Some(Ok(event)) => event,
                Some(Err(err)) => return self.send_error(store_error(err)).await,
                None => return,
            };
            from = event.revision;
            let (old, new) = (event.prev.as_ref().map(decode_entry), event.entry.as_ref().map(decode_entry));
            let old = old.and_then(Result::ok).filter(|o| self.matches(o));
            let new = new.and_then(Result::ok).filter(|o| self.matches(o));
            let (type_, mut object) = match (event.kind, old, new) {
                (EventKind::Put, None, Some(new)) => ("ADDED", new),
                (EventKind::Put, Some(_), Some(new)) => ("MODIFIED", new),
                (EventKind::Put, Some(old), None) | (EventKind::Delete, Some(old), _) => ("DELETED", old),
                _ => continue,
            };
            crate::object::set_resource_version(&mut object, event.revision);
            match self.present(object).await {
                Ok(object) => {
                    if !self.send(type_, object).await {
                        return;
                    }
                }
                Err(err) => return self.send_error(err).await,
            }
        }
    }
}

/// One line of the stream.
fn event_line(type_: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": type_, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

fn store_error(err: StoreError) -> ApiError {
    match err {
        StoreError::Compacted { requested, compacted } => {
            ApiError::expired(format!("too old resource version: {requested} ({compacted})"))
        }
        other => ApiError::from_store(other, crate::error::Subject { group: "", resource: "", name: "" }),
    }
}
