//! get and list: one object, or a page of a collection at a consistent revision, with
//! label and field selectors and `continue` tokens (watches are `crate::watch`'s).

use axum::http::StatusCode;
use base64::Engine;
use crdctl_conversion::Shape;
use crdctl_storage::{Entry, ListOptions, Revision, Store, StoreError};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::negotiate::Representation;
use crate::selector::{FieldSelector, LabelSelector};

use super::{Context, Endpoint, Params, Reply, decode_entry, store_error};

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: Revision,
    start: String,
}

/// GET one object.
pub async fn get(cx: Context<'_>, endpoint: &Endpoint, name: &str) -> ApiResult<Reply> {
    let entry = cx.store.get(&endpoint.key(name)).await.map_err(store_error(endpoint, name))?;
    let entry = entry.ok_or_else(|| ApiError::not_found(endpoint.subject(name)))?;
    Ok(Reply::of(StatusCode::OK, endpoint.reply_entry(&entry).await?, Vec::new()))
}

/// One read of a list.
pub struct ListRead {
    /// The entries whose objects match the selectors, as stored.
    pub entries: Vec<Entry>,
    /// The revision they were read at.
    pub revision: Revision,
    /// Where the next page starts, when there is one.
    pub continue_token: Option<String>,
    /// About how many objects follow, when known (a page without selectors).
    pub remaining: Option<u64>,
}

impl ListRead {
    /// The objects, with their `resourceVersion`.
    pub fn objects(&self) -> ApiResult<Vec<Value>> {
        self.entries.iter().map(decode_entry).collect()
    }
}

/// Whether a stored object matches the selectors. Only its name, namespace and labels are read
/// unless a field selector names other fields: a list without selectors takes every entry unread.
fn selected(entry: &Entry, labels: &LabelSelector, fields: &FieldSelector) -> ApiResult<bool> {
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Option<Metadata>,
    }
    #[derive(serde::Deserialize, serde::Serialize)]
    struct Metadata {
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        labels: Option<Value>,
    }
    if labels.is_empty() && fields.is_empty() {
        return Ok(true);
    }
    // A field selector on other fields reads the whole object; otherwise metadata is enough, and
    // what that view cannot read (a key written twice, say), the whole object can.
    let metadata_view = fields.reads_only_metadata().then(|| serde_json::from_slice::<Object>(&entry.value).ok());
    let view = match metadata_view.flatten() {
        Some(Object { metadata }) => json!({"metadata": metadata}),
        None => decode_entry(entry)?,
    };
    Ok(labels.matches(&view) && fields.matches(&view))
}

/// Reads a list, or one page of it.
pub async fn read_list(store: &dyn Store, endpoint: &Endpoint, params: &Params) -> ApiResult<ListRead> {
    let labels = LabelSelector::parse(params.label_selector.as_deref().unwrap_or_default())?;
    let fields = endpoint.field_selector(params)?;
    let prefix = endpoint.prefix();
    let (mut revision, mut min_revision, mut start_after) = match params.continue_.as_deref().filter(|c| !c.is_empty())
    {
        Some(token) => {
            let token = decode_continue(token)?;
            (Some(token.rv), None, Some(format!("{prefix}{}", token.start)))
        }
        None => match list_revision(store, params).await? {
            ReadAt::Current => (None, None, None),
            ReadAt::Exact(revision) => (Some(revision), None, None),
            ReadAt::NotOlderThan(revision) => (None, Some(revision), None),
        },
    };
    let limit = params.limit.unwrap_or(0);
    let mut entries = Vec::new();
    loop {
        let page = store
            .list(ListOptions { prefix: &prefix, start_after: start_after.as_deref(), limit, revision, min_revision })
            .await
            .map_err(|err| match err {
                StoreError::Compacted { .. } if params.continue_.is_some() => ApiError::expired(EXPIRED_CONTINUE),
                other => ApiError::from_store(other, endpoint.subject("")),
            })?;
        revision = Some(page.revision);
        min_revision = None;
        start_after = page.entries.last().map(|e| e.key.clone());
        for entry in page.entries {
            if selected(&entry, &labels, &fields)? {
                entries.push(entry);
            }
        }
        let full = limit > 0 && entries.len() >= limit;
        if !page.more || limit == 0 || full {
            let revision = page.revision;
            let continue_token = match (&start_after, page.more) {
                (Some(last), true) => Some(encode_continue(revision, last.trim_start_matches(&prefix))),
                _ => None,
            };
            // As upstream: counted only when no selector filters what follows.
            let remaining = (page.more && labels.is_empty() && fields.is_empty()).then_some(page.remaining);
            return Ok(ListRead { entries, revision, continue_token, remaining });
        }
    }
}

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Which state a list reads, from `resourceVersion` and `resourceVersionMatch`.
enum ReadAt {
    /// `""`: the current state, from the store itself.
    Current,
    /// `Exact`: the state at that revision.
    Exact(Revision),
    /// `"0"` and `NotOlderThan`: any state at least that new (after checking it was reached),
    /// which the watch cache may serve.
    NotOlderThan(Revision),
}

async fn list_revision(store: &dyn Store, params: &Params) -> ApiResult<ReadAt> {
    let text = match params.resource_version.as_deref() {
        None | Some("") => return Ok(ReadAt::Current),
        Some("0") => return Ok(ReadAt::NotOlderThan(0)),
        Some(text) => text,
    };
    let requested = crate::object::parse_resource_version(text)?;
    match params.resource_version_match.as_deref() {
        Some("Exact") => Ok(ReadAt::Exact(requested)),
        _ => {
            let current = store.revision().await.map_err(|err| ApiError::unavailable(err.to_string()))?;
            if requested > current {
                return Err(ApiError::too_large_resource_version(requested, current));
            }
            Ok(ReadAt::NotOlderThan(requested))
        }
    }
}

fn encode_continue(revision: Revision, start: &str) -> String {
    let token = ContinueToken { v: "meta.k8s.io/v1".into(), rv: revision, start: start.to_string() };
    base64::engine::general_purpose::URL_SAFE.encode(serde_json::to_vec(&token).unwrap_or_default())
}

fn decode_continue(token: &str) -> ApiResult<ContinueToken> {
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE.decode(token).map_err(|_| bad())?;
    serde_json::from_slice(&bytes).map_err(|_| bad())
}

/// GET a list, to be rendered as `representation`. A list rendered as itself stays text from
/// the store; a `Table` or metadata view reads values, so it is read as values.
pub async fn list(
    cx: Context<'_>,
    endpoint: &Endpoint,
    params: &Params,
    representation: Representation,
) -> ApiResult<Reply> {
    let read = read_list(&**cx.store, endpoint, params).await?;
    let items = match representation {
        Representation::Object | Representation::Protobuf => {
            endpoint.present_stored(&read.entries, Shape::List).await?
        }
        Representation::Table | Representation::Metadata => {
            endpoint.present_items(read.objects()?, Shape::List).await?
        }
    };
    let mut metadata = json!({"resourceVersion": read.revision.to_string()});
    if let Some(token) = read.continue_token {
        crate::object::set(&mut metadata, "continue", Value::String(token));
    }
    if let Some(remaining) = read.remaining {
        crate::object::set(&mut metadata, "remainingItemCount", remaining.into());
    }
    let body = json!({"apiVersion": endpoint.api_version(), "kind": endpoint.list_kind, "metadata": metadata});
    Ok(Reply { items: Some(items), ..Reply::ok(body) })
}
