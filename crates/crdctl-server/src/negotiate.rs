//! Content negotiation: what the client asked for in `Accept` and what the body is in
//! `Content-Type`: JSON, or Kubernetes protobuf for kinds that have a message (custom resources
//! get JSON whatever the client prefers, as upstream), `Table` and `PartialObjectMetadata` when
//! asked.

use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use serde_json::Value;

use crate::error::{ApiError, MAX_REQUEST_BYTES};

/// The representation a response is rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Representation {
    /// The object (or list) itself.
    Object,
    /// A `meta.k8s.io/v1` Table.
    Table,
    /// `PartialObjectMetadata` / `PartialObjectMetadataList`.
    Metadata,
    /// The object (or list) in Kubernetes protobuf, for kinds that have a message (others get
    /// JSON, as upstream serves custom resources).
    Protobuf,
}

/// One media range of an `Accept` header, with its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaRange {
    /// `application/json`.
    pub essence: String,
    /// `as=Table`, `g=meta.k8s.io`, ... lower-cased keys.
    pub params: Vec<(String, String)>,
}

impl MediaRange {
    /// A parameter's value.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Parses an `Accept` header into its ranges, in the client's order.
pub fn accept_ranges(headers: &HeaderMap) -> Vec<MediaRange> {
    let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    accept
        .split(',')
        .filter_map(|range| {
            let mut parts = range.split(';').map(str::trim);
            let essence = parts.next()?.to_ascii_lowercase();
            if essence.is_empty() {
                return None;
            }
            let params = parts
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().trim_matches('"').to_string()))
                .collect();
            Some(MediaRange { essence, params })
        })
        .collect()
}

fn is_json(essence: &str) -> bool {
    matches!(essence, "application/json" | "*/*" | "application/*")
}

/// The representation for a resource request; 406 when nothing offered can be served.
pub fn representation(headers: &HeaderMap) -> Result<Representation, ApiError> {
    let ranges = accept_ranges(headers);
    if ranges.is_empty() {
        return Ok(Representation::Object);
    }
    for range in &ranges {
        if range.essence == crate::protobuf::MEDIA_TYPE && range.param("as").is_none() {
            return Ok(Representation::Protobuf);
        }
        if !is_json(&range.essence) && range.essence != "application/yaml" {
            continue;
        }
        match (range.param("as"), range.param("g")) {
            (None, _) => return Ok(Representation::Object),
            (Some("Table"), Some("meta.k8s.io")) => return Ok(Representation::Table),
            (Some("PartialObjectMetadata" | "PartialObjectMetadataList"), Some("meta.k8s.io")) => {
                return Ok(Representation::Metadata);
            }
            _ => {}
        }
    }
    let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    Err(ApiError::not_acceptable(accept))
}

/// How a write body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyType {
    /// `application/json` (or no type).
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/merge-patch+json`.
    MergePatch,
    /// `application/json-patch+json`.
    JsonPatch,
    /// `application/apply-patch+yaml`.
    ApplyPatch,
    /// `application/strategic-merge-patch+json`, refused for custom resources.
    StrategicMergePatch,
    /// `application/vnd.kubernetes.protobuf`, for kinds that have a message.
    Protobuf,
}

/// The patch types custom resources and CRDs accept, for 415 messages.
pub const PATCH_TYPES: [&str; 3] =
    ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];

/// The body type from `Content-Type`.
pub fn body_type(headers: &HeaderMap) -> Result<BodyType, ApiError> {
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json");
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    Ok(match essence.as_str() {
        "application/json" | "" => BodyType::Json,
        "application/yaml" => BodyType::Yaml,
        "application/merge-patch+json" => BodyType::MergePatch,
        "application/json-patch+json" => BodyType::JsonPatch,
        "application/apply-patch+yaml" => BodyType::ApplyPatch,
        "application/strategic-merge-patch+json" => BodyType::StrategicMergePatch,
        crate::protobuf::MEDIA_TYPE => BodyType::Protobuf,
        _ => return Err(ApiError::unsupported_media_type(&["application/json", "application/yaml"])),
    })
}

/// Decodes a body as JSON or YAML into a value, with kube-apiserver's limits: 3 MiB, UTF-8, the
/// YAML budget of the model's loader (depth, aliases, duplicate keys).
pub fn decode_body(bytes: &[u8], body_type: BodyType) -> Result<Value, ApiError> {
    if bytes.len() > MAX_REQUEST_BYTES {
        return Err(ApiError::too_large());
    }
    if body_type == BodyType::Protobuf {
        return crate::protobuf::decode(bytes).map_err(|err| ApiError::bad_request(err.to_string()));
    }
    let text = std::str::from_utf8(bytes).map_err(|err| {
        ApiError::bad_request(format!("the request body is not valid UTF-8 (byte offset {})", err.valid_up_to()))
    })?;
    if text.trim().is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    let yaml = matches!(body_type, BodyType::Yaml | BodyType::ApplyPatch);
    if !yaml {
        return decode_json(text);
    }
    let documents = crdctl_model::yaml::parse_documents(text)
        .map_err(|err| ApiError::bad_request(format!("error converting YAML to JSON: {err}")))?;
    let [document] = <[_; 1]>::try_from(documents)
        .map_err(|_| ApiError::bad_request("error converting YAML to JSON: the body must hold exactly one document"))?;
    Ok(document.value)
}

/// A built-in object's body (`kind` objects), as upstream's typed decoder reads it: what does
/// not decode to an object is 400 `the object provided is unrecognized (must be of type
/// Namespace): <why> (<the body's start>)` (`transformDecodeError`).
pub fn decode_object(bytes: &[u8], body_type: BodyType, kind: &str) -> Result<Value, ApiError> {
    let unrecognized = |why: &str| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): {why} ({})",
            summarize(bytes)
        ))
    };
    if bytes.iter().all(u8::is_ascii_whitespace) && body_type != BodyType::Protobuf {
        return Err(unrecognized("couldn't get version/kind; json parse error: unexpected end of JSON input"));
    }
    let value = decode_body(bytes, body_type).map_err(|err| match err.code {
        StatusCode::BAD_REQUEST => unrecognized(&err.message),
        _ => err,
    })?;
    let what = match &value {
        Value::Object(_) | Value::Null => return Ok(value),
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
    };
    // Upstream first reads only `apiVersion` and `kind`, into an anonymous struct.
    Err(unrecognized(&format!(
        r#"json: cannot unmarshal {what} into Go value of type struct {{ APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }}"#
    )))
}

/// The start of a body as upstream's `summarizeData` shows it: up to 30 bytes, as text when it
/// starts with `{`, else in hex, with ` ...` when there is more.
fn summarize(bytes: &[u8]) -> String {
    const SHOWN: usize = 30;
    let (shown, more) = match bytes.get(..SHOWN) {
        Some(shown) if bytes.len() > SHOWN => (shown, " ..."),
        _ => (bytes, ""),
    };
    match bytes.first() {
        None => "<empty>".into(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(shown)),
        Some(_) => format!("{}{more}", shown.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

/// Parses JSON, refusing nesting deeper than the API server's limit.
pub fn decode_json(text: &str) -> Result<Value, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    // serde_json's own recursion limit (128) refuses deeper bodies without overflowing the stack.
    let value = serde::Deserialize::deserialize(&mut deserializer)
        .and_then(|value: Value| deserializer.end().map(|()| value))
        .map_err(|err| {
            let message = if err.to_string().contains("recursion limit") {
                format!("json: exceeded max depth: {err}")
            } else {
                format!(
                    "couldn't get version/kind; json parse error: {}",
                    crdctl_model::go::json_syntax_error(text, &err)
                )
            };
            ApiError::bad_request(message)
        })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn with_accept(accept: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_str(accept).unwrap());
        headers
    }

    #[test]
    fn kubectl_accept_headers_negotiate() {
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(representation(&with_accept(table)).unwrap(), Representation::Table);
        let protobuf_first = "application/vnd.kubernetes.protobuf,application/json";
        assert_eq!(representation(&with_accept(protobuf_first)).unwrap(), Representation::Protobuf);
        let json_first = "application/json,application/vnd.kubernetes.protobuf";
        assert_eq!(representation(&with_accept(json_first)).unwrap(), Representation::Object);
        assert_eq!(representation(&HeaderMap::new()).unwrap(), Representation::Object);
        assert_eq!(representation(&with_accept("application/vnd.kubernetes.unknown")).unwrap_err().code, 406);
    }

    #[test]
    fn bodies_are_bounded() {
        assert_eq!(decode_body(&vec![b' '; MAX_REQUEST_BYTES + 1], BodyType::Json).unwrap_err().code, 413);
        assert_eq!(decode_body(b"\xff", BodyType::Json).unwrap_err().code, 400);
        let deep = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
        assert!(decode_body(deep.as_bytes(), BodyType::Json).unwrap_err().message.contains("max depth"));
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
        for level in 1..9 {
            let refs = vec![format!("*a{}", level - 1); 9].join(", ");
            bomb.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
        }
        assert_eq!(decode_body(bomb.as_bytes(), BodyType::Yaml).unwrap_err().code, 400);
    }
}
