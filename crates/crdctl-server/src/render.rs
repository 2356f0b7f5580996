//! Rendering: a reply, or one watch event, in the representation the client negotiated — the
//! object as JSON, Kubernetes protobuf, a `meta.k8s.io/v1` `Table` with the resource's columns,
//! or `PartialObjectMetadata` — one module for responses and watch streams, so both render a
//! kind alike. `Status` bodies are always JSON; kinds without a protobuf message fall back to
//! JSON, as upstream's negotiation does.

use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::error::ApiResult;
use crate::negotiate::Representation;
use crate::rest::{Body, Endpoint, Params, Reply};

/// The media type of every JSON body.
const JSON: &str = "application/json";

/// A reply as the response the client asked for, with its warnings.
pub fn reply(
    endpoint: &Endpoint,
    mut reply: Reply,
    representation: Representation,
    params: &Params,
    mut warnings: Vec<String>,
) -> ApiResult<Response> {
    warnings.extend(std::mem::take(&mut reply.warnings));
    let code = reply.code;
    let (body, media_type): (Bytes, _) = match representation {
        Representation::Object => (reply.into_json().into(), JSON),
        _ if reply.body.is_status() => (reply.into_json().into(), JSON),
        Representation::Protobuf => {
            let (encoded, object) = match (list_items(&mut reply)?, reply.body) {
                (Some(items), body) => {
                    let mut list = body.into_value()?;
                    crate::object::set(&mut list, "items", Value::Array(items));
                    (crate::protobuf::encode(&list).map(Bytes::from), Body::Value(list))
                }
                // A stored object is transcoded from its text, which is of the endpoint's kind.
                (None, Body::Json(text)) => (
                    crate::protobuf::encode_stored(&text, &endpoint.api_version(), &endpoint.type_kind),
                    Body::Json(text),
                ),
                (None, Body::Value(object)) => (crate::protobuf::encode(&object).map(Bytes::from), Body::Value(object)),
            };
            match encoded {
                Some(bytes) => (bytes, crate::protobuf::MEDIA_TYPE),
                None => (to_json(&object.into_value()?).into(), JSON),
            }
        }
        Representation::Table => {
            let (objects, metadata) = match list_items(&mut reply)? {
                Some(items) => {
                    (items, reply.body.into_value()?.get_mut("metadata").map(Value::take).unwrap_or_default())
                }
                None => (vec![reply.body.into_value()?], json!({})),
            };
            let include = params.include_object.as_deref().unwrap_or("Metadata");
            (to_json(&table(endpoint, &objects, metadata, include)).into(), JSON)
        }
        Representation::Metadata => {
            let items = list_items(&mut reply)?;
            let body = reply.body.into_value()?;
            let rendered = match items {
                Some(items) => json!({
                    "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                    "metadata": body.get("metadata"), "items": items.iter().map(partial_metadata).collect::<Vec<_>>(),
                }),
                None => partial_metadata(&body),
            };
            (to_json(&rendered).into(), JSON)
        }
    };
    let mut response = (code, body).into_response();
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(media_type));
    crate::warnings::add(&mut response, &warnings);
    Ok(response)
}

/// One watch event of `type_` as the stream carries it: a JSON line, or a protobuf frame.
/// Bookmarks and errors stay objects in a `Table` watch, errors in a metadata one.
pub fn event(endpoint: &Endpoint, representation: Representation, type_: &str, object: Value) -> Bytes {
    let object = match representation {
        Representation::Table if type_ != "BOOKMARK" && type_ != "ERROR" => {
            table(endpoint, &[object], json!({}), "Metadata")
        }
        Representation::Metadata if type_ != "ERROR" => partial_metadata(&object),
        Representation::Protobuf => {
            return crate::protobuf::watch_frame(type_, &object)
                .map_or_else(|| event_line(type_, &object), Bytes::from);
        }
        _ => object,
    };
    event_line(type_, &object)
}

/// The media type of a watch stream in `representation`.
pub fn watch_media_type(representation: Representation) -> &'static str {
    match representation {
        Representation::Protobuf => crate::protobuf::WATCH_MEDIA_TYPE,
        _ => JSON,
    }
}

/// One JSON line of a watch stream.
pub fn event_line(type_: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": type_, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// A `Table` of `objects` with the resource's columns, ages as of now.
fn table(endpoint: &Endpoint, objects: &[Value], list_meta: Value, include_object: &str) -> Value {
    crate::table::table(&endpoint.columns(), objects, list_meta, include_object, crate::object::now_seconds())
}

/// `PartialObjectMetadata` of an object.
pub fn partial_metadata(object: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({}))})
}

/// A list reply's items as values; `None` for a single object.
fn list_items(reply: &mut Reply) -> ApiResult<Option<Vec<Value>>> {
    if let Some(items) = reply.items.take() {
        return items.into_values().map(Some);
    }
    Ok(match &reply.body {
        Body::Value(body) => body.get("items").and_then(Value::as_array).cloned(),
        Body::Json(_) => None,
    })
}

fn to_json(body: &Value) -> Vec<u8> {
    // Writing a value into memory cannot fail.
    serde_json::to_vec(body).unwrap_or_default()
}

/// A JSON document as a response (discovery, errors).
pub fn json(code: StatusCode, body: &Value) -> Response {
    let mut response = (code, to_json(body)).into_response();
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    response
}
