//! Watches: a stream of `{"type": ..., "object": ...}` lines, from a `resourceVersion` (or a
//! synthetic `ADDED` per current object when none is given), in the request version, with
//! bookmarks, `timeoutSeconds`, selectors and `410 Expired` past the history window.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use crdctl_conversion::Shape;
use crdctl_storage::{Event, EventKind, Revision, Store, StoreError};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::error::{ApiError, ApiResult};
use crate::negotiate::Representation;
use crate::rest::{Endpoint, Params, decode_entry, read_list};
use crate::selector::{FieldSelector, LabelSelector};

const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// What a watch uses of the server, owned: it outlives the request that started it.
#[derive(Clone)]
pub struct Watching {
    /// The store.
    pub store: Arc<dyn Store>,
    /// Set on shutdown: watches end.
    pub shutdown: Arc<tokio::sync::watch::Sender<bool>>,
    /// Watch events rendered once and shared by every watcher that sends them.
    pub lines: Arc<RenderedLines>,
    /// How long a watch may find its client not reading before it is closed.
    pub stall_timeout: Duration,
}

/// Starts a watch; the response streams until the timeout, the client leaves or the server stops.
pub async fn watch(
    state: Watching,
    endpoint: Endpoint,
    params: Params,
    representation: Representation,
    warnings: Vec<String>,
) -> ApiResult<Response> {
    let labels = LabelSelector::parse(params.label_selector.as_deref().unwrap_or_default())?;
    let fields = endpoint.field_selector(&params)?;
    let explicit = params.resource_version.as_deref().filter(|rv| !rv.is_empty() && *rv != "0");
    let send_initial = params.send_initial_events.unwrap_or(explicit.is_none());
    let (initial, from) = match explicit {
        Some(rv) if !send_initial => (Vec::new(), crate::object::parse_resource_version(rv)?),
        _ => {
            let list_params = Params { limit: None, continue_: None, resource_version: None, ..params.clone() };
            let read = read_list(&*state.store, &endpoint, &list_params).await?;
            (read.objects()?, read.revision)
        }
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let timeout = params.timeout_seconds.map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let bookmarks = params.allow_watch_bookmarks.unwrap_or(false);
    let initial_end_bookmark = params.send_initial_events == Some(true) && bookmarks;
    let api = format!("{}/{}/{}", endpoint.group, endpoint.version, endpoint.resource).into();
    let failed = endpoint.clone();
    let stream = Stream { state, endpoint, api, labels, fields, representation, tx: tx.clone() };
    tokio::spawn(async move {
        let run = tokio::time::timeout(timeout, stream.run(initial, from, bookmarks, initial_end_bookmark));
        if let Err(err) = crate::panic::guard(run).await {
            let _ = tx.send(crate::render::event(&failed, representation, "ERROR", err.status())).await;
        }
    });
    let lines = tokio_stream::wrappers::ReceiverStream::new(rx);
    let body = Body::from_stream(futures_util::StreamExt::map(lines, Ok::<Bytes, std::convert::Infallible>));
    let mut response = Response::new(body);
    let media_type = HeaderValue::from_static(crate::render::watch_media_type(representation));
    response.headers_mut().insert(header::CONTENT_TYPE, media_type);
    crate::warnings::add(&mut response, &warnings);
    Ok(response)
}

struct Stream {
    state: Watching,
    endpoint: Endpoint,
    /// `<group>/<version>/<resource>`: which rendered lines this watch can share.
    api: Arc<str>,
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
        self.send_line(crate::render::event(&self.endpoint, self.representation, type_, object)).await
    }

    /// Queues a line for the client; false once the watch is over (the client left, or stopped
    /// reading for longer than the stall timeout).
    async fn send_line(&self, line: Bytes) -> bool {
        let stall_timeout = self.state.stall_timeout;
        match self.tx.send_timeout(line, stall_timeout).await {
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
            match self.event_line(&event).await {
                Ok(Some(line)) => {
                    if !self.send_line(line).await {
                        return;
                    }
                }
                Ok(None) => {}
                Err(err) => return self.send_error(err).await,
            }
        }
    }

    /// The line a store event becomes for this watcher, if it sees the event. The line is
    /// rendered once for all watchers of the same version and representation; a watcher
    /// without selectors finds it without reading the objects.
    async fn event_line(&self, event: &Event) -> ApiResult<Option<Bytes>> {
        let key = |type_| LineKey {
            revision: event.revision,
            type_,
            representation: self.representation,
            api: self.api.clone(),
        };
        if self.labels.is_empty() && self.fields.is_empty() {
            let type_ = match (event.kind, event.prev.is_some(), event.entry.is_some()) {
                (EventKind::Put, false, true) => "ADDED",
                (EventKind::Put, true, true) => "MODIFIED",
                (EventKind::Delete, true, _) => "DELETED",
                _ => return Ok(None),
            };
            if let Some(line) = self.state.lines.get(&key(type_)) {
                return Ok(Some(line));
            }
        }
        let (old, new) = (event.prev.as_ref().map(decode_entry), event.entry.as_ref().map(decode_entry));
        let old = old.and_then(Result::ok).filter(|o| self.matches(o));
        let new = new.and_then(Result::ok).filter(|o| self.matches(o));
        let (type_, mut object) = match (event.kind, old, new) {
            (EventKind::Put, None, Some(new)) => ("ADDED", new),
            (EventKind::Put, Some(_), Some(new)) => ("MODIFIED", new),
            (EventKind::Put, Some(old), None) | (EventKind::Delete, Some(old), _) => ("DELETED", old),
            _ => return Ok(None),
        };
        if let Some(line) = self.state.lines.get(&key(type_)) {
            return Ok(Some(line));
        }
        crate::object::set_resource_version(&mut object, event.revision);
        let line = crate::render::event(&self.endpoint, self.representation, type_, self.present(object).await?);
        self.state.lines.insert(key(type_), line.clone());
        Ok(Some(line))
    }
}

/// Which line an event becomes: the same for every watcher of one version of a resource in one
/// representation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LineKey {
    revision: Revision,
    type_: &'static str,
    representation: Representation,
    /// `<group>/<version>/<resource>`.
    api: Arc<str>,
}

/// Watch lines rendered once per event and shared by every watcher that sends them, as
/// kube-apiserver's watch cache serializes an event once per encoding: with many watchers of a
/// resource, the server's work per write stays one conversion and one serialization.
#[derive(Debug, Default)]
pub struct RenderedLines(Mutex<(HashMap<LineKey, Bytes>, VecDeque<LineKey>)>);

/// Lines kept: enough for every watcher that keeps up; one further behind renders its own.
const RENDERED_LINES_KEPT: usize = 4096;

impl RenderedLines {
    fn get(&self, key: &LineKey) -> Option<Bytes> {
        self.0.lock().ok()?.0.get(key).cloned()
    }

    fn insert(&self, key: LineKey, line: Bytes) {
        let Ok(mut guard) = self.0.lock() else { return };
        let (lines, order) = &mut *guard;
        if lines.insert(key.clone(), line).is_none() {
            order.push_back(key);
        }
        while order.len() > RENDERED_LINES_KEPT {
            if let Some(oldest) = order.pop_front() {
                lines.remove(&oldest);
            }
        }
    }
}

fn store_error(err: StoreError) -> ApiError {
    match err {
        StoreError::Compacted { requested, compacted } => {
            ApiError::expired(format!("too old resource version: {requested} ({compacted})"))
        }
        other => ApiError::from_store(other, crate::error::Subject { group: "", resource: "", name: "" }),
    }
}
