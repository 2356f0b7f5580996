//! Checking a webhook's answer exactly as the API server does, with its messages.
//!
//! A response must be a ConversionReview in the request's version (v1beta1 answers are not
//! checked for kind or uid, for backward compatibility), report `Success`, and hold one object per
//! object sent, each in the desired version, with the same kind, name, namespace and uid. The
//! webhook may change labels and annotations; every other metadata change is discarded by
//! restoring the original metadata.
//!
//! The checked objects come out as JSON text, [`ObjectJson`]: the webhook's fields as it wrote
//! them around the restored metadata, so a list read through a webhook is never parsed into
//! values on the way to its reader (see [`crate::converted`]).

use crdctl_model::json::{Fields, write_key};
use serde_json::Value;

use crate::converted::{Converted, ConvertedMetadata, ConvertedObject, JsonType, ObjectOr, field};
use crate::metadata;
use crate::review::{ConversionReview, ReviewVersion};

/// A conversion that did not produce objects; the message is the API server's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConversionError {
    /// The complete message, e.g. `conversion webhook for stable.example.com/v1, Kind=CronTab failed: ...`.
    pub message: String,
    /// The webhook answered, and the answer was a failure or wrong; otherwise it was not reached
    /// (bad configuration, network, TLS, timeout).
    pub answered: bool,
}

impl ConversionError {
    /// `conversion webhook for <gvk> failed: <detail>`, about an answer.
    pub fn failed(gvk: &str, detail: impl std::fmt::Display) -> ConversionError {
        ConversionError { message: format!("conversion webhook for {gvk} failed: {detail}"), answered: true }
    }

    /// `conversion webhook for <gvk> failed: <detail>`, when no answer came.
    pub fn unanswered(gvk: &str, detail: impl std::fmt::Display) -> ConversionError {
        ConversionError { message: format!("conversion webhook for {gvk} failed: {detail}"), answered: false }
    }

    /// A problem found before any request, e.g. an unusable client configuration.
    pub fn setup(message: impl Into<String>) -> ConversionError {
        ConversionError { message: message.into(), answered: false }
    }

    /// `conversion webhook for <gvk> <rest>`.
    fn webhook(gvk: &str, rest: impl std::fmt::Display) -> ConversionError {
        ConversionError { message: format!("conversion webhook for {gvk} {rest}"), answered: true }
    }
}

/// A converted object as JSON text.
#[derive(Clone, PartialEq, Eq)]
pub struct ObjectJson(Vec<u8>);

impl ObjectJson {
    /// The JSON text of `object`.
    pub fn of(object: &Value) -> ObjectJson {
        // Writing a `Value` into memory cannot fail: its keys are strings.
        ObjectJson(serde_json::to_vec(object).unwrap_or_default())
    }

    /// The text, as bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The object as a value.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_slice(&self.0)
    }
}

impl std::fmt::Debug for ObjectJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

/// Whether one object or a list was converted; the API server words errors differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A single object (get, create, update).
    Object,
    /// A list (list, watch); errors name the index.
    List,
}

/// What was sent, to check the answer against.
#[derive(Debug, Clone, Copy)]
pub struct Sent<'a> {
    /// The review version of the request.
    pub version: ReviewVersion,
    /// The request uid.
    pub uid: &'a str,
    /// `<group>/<version>` requested.
    pub desired_api_version: &'a str,
    /// Object or list wording.
    pub shape: Shape,
    /// The input's kind as the API server prints it: `stable.example.com/v1, Kind=CronTab`.
    pub gvk: &'a str,
}

/// An object sent to the webhook.
#[derive(Debug)]
pub struct Original<'a> {
    /// The object.
    pub object: Value,
    /// Its `metadata` as the request wrote it, which the answer reuses when the metadata comes
    /// back unchanged; `None` writes it anew.
    pub metadata_text: Option<&'a [u8]>,
}

impl From<Value> for Original<'_> {
    fn from(object: Value) -> Self {
        Original { object, metadata_text: None }
    }
}

/// Decodes a response body; any content type is accepted, as the API server does.
pub fn decode<'a>(body: &'a [u8], gvk: &str) -> Result<ConversionReview<Converted<'a>>, ConversionError> {
    serde_json::from_slice(body)
        .map_err(|err| ConversionError::failed(gvk, format!("couldn't get version/kind; json parse error: {err}")))
}

/// Checks a webhook's review against what was sent (`originals`, in order) and returns the
/// converted objects, each with its original's metadata apart from labels and annotations. The
/// originals are consumed: their metadata moves into the converted objects.
pub fn converted_objects(
    sent: &Sent<'_>,
    originals: Vec<Original<'_>>,
    review: ConversionReview<Converted<'_>>,
) -> Result<Vec<ObjectJson>, ConversionError> {
    let gvk = sent.gvk;
    if sent.version == ReviewVersion::V1
        && (review.api_version != sent.version.api_version() || review.kind != crate::review::KIND)
    {
        let (group, version) = review.api_version.rsplit_once('/').unwrap_or(("", review.api_version.as_str()));
        let got = format!("{group}/{version}, Kind={}", review.kind);
        return Err(ConversionError::failed(
            gvk,
            format!("expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {got}"),
        ));
    }
    let Some(response) = review.response else { return Err(ConversionError::failed(gvk, "no response provided")) };
    if sent.version == ReviewVersion::V1 && response.uid != sent.uid {
        return Err(ConversionError::failed(
            gvk,
            format!("expected response.uid={:?}, got {:?}", sent.uid, response.uid),
        ));
    }
    if response.result.status != "Success" {
        let detail = if response.result.message.is_empty() {
            format!("response.result.status was '{}', not 'Success'", response.result.status)
        } else {
            response.result.message
        };
        return Err(ConversionError::failed(gvk, detail));
    }
    let converted = response.converted_objects.unwrap_or_default();
    if converted.len() != originals.len() {
        return Err(ConversionError::webhook(
            gvk,
            format!("returned {} objects, expected {}", converted.len(), originals.len()),
        ));
    }
    converted
        .into_iter()
        .zip(originals)
        .enumerate()
        .map(|(idx, (converted, original))| check_object(sent, idx, original, converted))
        .collect()
}

fn check_object(
    sent: &Sent<'_>,
    idx: usize,
    original: Original<'_>,
    converted: Converted<'_>,
) -> Result<ObjectJson, ConversionError> {
    let Original { object: mut original, metadata_text } = original;
    let gvk = sent.gvk;
    let invalid = |detail: String| match sent.shape {
        Shape::Object => ConversionError::webhook(gvk, format!("returned invalid object at index {idx}: {detail}")),
        Shape::List => {
            ConversionError::webhook(gvk, format!("returned invalid converted object at index {idx}: {detail}"))
        }
    };
    let converted = match converted {
        ObjectOr::Object(object) => object,
        ObjectOr::Other(other) => {
            let detail =
                format!("json: cannot unmarshal {} into Go value of type map[string]interface {{}}", other.json_name());
            return Err(match sent.shape {
                Shape::Object => ConversionError { message: detail, answered: true },
                Shape::List => {
                    ConversionError::webhook(gvk, format!("returned invalid converted object at index {idx}: {detail}"))
                }
            });
        }
    };
    let received_api_version = converted.text("apiVersion");
    if received_api_version != sent.desired_api_version {
        return Err(invalid(format!(
            "invalid groupVersion (expected {}, received {received_api_version})",
            sent.desired_api_version
        )));
    }
    let original_kind = original.as_object().and_then(|o| field(o, "kind")).and_then(Value::as_str).unwrap_or_default();
    let received_kind = converted.text("kind");
    if received_kind != original_kind {
        return Err(invalid(format!("invalid kind (expected {original_kind}, received {received_kind})")));
    }
    let original_meta = original.as_object_mut().and_then(|o| o.iter_mut().find(|(name, _)| *name == "metadata"));
    let original_meta = original_meta.map(|(_, metadata)| metadata.take());
    let ConvertedObject { fields, metadata_at, metadata: converted_text } = converted;
    // Metadata sent back byte for byte passes every check and restores to itself.
    if let (Some(sent_text), Some(text), Some(original_meta)) = (metadata_text, converted_text, &original_meta)
        && text.get().as_bytes() == sent_text
        && metadata::restores_to_itself(original_meta)
    {
        return Ok(write_object(&fields, metadata_at, Metadata::Text(sent_text)));
    }
    let converted_meta = converted_text
        .map(ConvertedMetadata::read)
        .transpose()
        .map_err(|err| ConversionError::failed(gvk, format!("couldn't get version/kind; json parse error: {err}")))?;
    for (key, label) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
        let expected = original_meta.as_ref().and_then(Value::as_object).and_then(|m| field(m, key));
        let expected = expected.and_then(Value::as_str).unwrap_or_default();
        let actual = match &converted_meta {
            Some(ObjectOr::Object(metadata)) => metadata.identity(key),
            _ => "",
        };
        if expected != actual {
            let detail = format!("must have the same {label}: {expected} != {actual}");
            return Err(match sent.shape {
                Shape::Object => ConversionError::webhook(gvk, format!("returned invalid object: {detail}")),
                Shape::List => {
                    ConversionError::webhook(gvk, format!("returned invalid converted object at index {idx}: {detail}"))
                }
            });
        }
    }
    let restored = metadata::restore(original_meta, converted_meta).map_err(|detail| match sent.shape {
        Shape::Object => ConversionError::webhook(gvk, format!("returned invalid metadata: {detail}")),
        Shape::List => {
            ConversionError::webhook(gvk, format!("returned invalid metadata in object at index {idx}: {detail}"))
        }
    })?;
    let metadata = match metadata_text {
        Some(text) if restored.as_sent => Metadata::Text(text),
        _ => Metadata::Value(&restored.metadata),
    };
    Ok(write_object(&fields, metadata_at, metadata))
}

/// The metadata to write into a converted object.
enum Metadata<'a> {
    /// As the request wrote it.
    Text(&'a [u8]),
    /// Restored, to be written anew.
    Value(&'a Value),
}

/// The converted object's text: its fields as the webhook wrote them, in its order, with the
/// restored metadata where the webhook put its own (restore fails without one).
fn write_object(fields: &Fields<'_>, metadata_at: usize, metadata: Metadata<'_>) -> ObjectJson {
    let size: usize = fields.iter().map(|(key, value)| key.len() + value.get().len() + 4).sum();
    let mut out = Vec::with_capacity(size + 512);
    out.push(b'{');
    for (at, (name, value)) in fields.iter().enumerate() {
        if at == metadata_at {
            write_metadata(&mut out, &metadata);
        }
        if out.len() > 1 {
            out.push(b',');
        }
        write_key(&mut out, name);
        out.extend_from_slice(value.get().as_bytes());
    }
    if metadata_at >= fields.len() {
        write_metadata(&mut out, &metadata);
    }
    out.push(b'}');
    ObjectJson(out)
}

fn write_metadata(out: &mut Vec<u8>, metadata: &Metadata<'_>) {
    if out.len() > 1 {
        out.push(b',');
    }
    write_key(out, "metadata");
    match metadata {
        Metadata::Text(text) => out.extend_from_slice(text),
        // Writing a value into memory cannot fail.
        Metadata::Value(value) => {
            let _ = serde_json::to_writer(&mut *out, value);
        }
    }
}

/// Go's `%T` of a decoded JSON value ([`JsonType::go_type`]).
pub fn go_type(value: &Value) -> &'static str {
    JsonType::of(value).go_type()
}

/// The JSON kind of a value as `encoding/json` names it ([`JsonType::json_name`]).
pub fn json_type(value: &Value) -> &'static str {
    JsonType::of(value).json_name()
}

/// The API server's rendering of an object's kind: `stable.example.com/v1, Kind=CronTab`.
pub fn gvk_of(object: &Value) -> String {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::review::{ConversionResponse, Status};

    const GVK: &str = "stable.example.com/v1, Kind=CronTab";

    fn original() -> Value {
        json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "labels": {"x": "1"}, "generation": 3}, "hostPort": "h:1"})
    }

    fn converted() -> Value {
        json!({"apiVersion": "stable.example.com/v2", "kind": "CronTab", "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "labels": {"x": "1"}, "generation": 3}, "host": "h", "port": "1"})
    }

    /// A review of `original()` in `version` asking for `stable.example.com/v2`.
    fn sent(version: ReviewVersion, shape: Shape) -> Sent<'static> {
        Sent { version, uid: "uid", desired_api_version: "stable.example.com/v2", shape, gvk: GVK }
    }

    #[track_caller]
    fn check_with(version: ReviewVersion, shape: Shape, review: ConversionReview) -> Result<Vec<Value>, String> {
        let sent = sent(version, shape);
        let bytes = serde_json::to_vec(&review).unwrap();
        let answer = decode(&bytes, GVK).map_err(|e| e.message)?;
        let converted = converted_objects(&sent, vec![original().into()], answer).map_err(|e| e.message)?;
        Ok(converted.iter().map(|object| object.to_value().unwrap()).collect())
    }

    fn response(objects: Vec<Value>) -> ConversionReview {
        ConversionReview::success(ReviewVersion::V1, "uid", objects)
    }

    #[test]
    fn a_valid_response_is_accepted() {
        assert_eq!(check_with(ReviewVersion::V1, Shape::Object, response(vec![converted()])).unwrap(), [converted()]);
    }

    /// Upstream `TestGetConvertedObjectsFromResponse`.
    #[test]
    fn review_level_checks() {
        let mut wrong_kind = response(vec![converted()]);
        wrong_kind.kind = "Other".into();
        assert_eq!(
            check_with(ReviewVersion::V1, Shape::Object, wrong_kind).unwrap_err(),
            "conversion webhook for stable.example.com/v1, Kind=CronTab failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got apiextensions.k8s.io/v1, Kind=Other"
        );
        let mut v1beta1 = response(vec![converted()]);
        v1beta1.api_version = "apiextensions.k8s.io/v1beta1".into();
        assert!(
            check_with(ReviewVersion::V1, Shape::Object, v1beta1)
                .unwrap_err()
                .ends_with("got apiextensions.k8s.io/v1beta1, Kind=ConversionReview")
        );
        let mut no_response = response(vec![]);
        no_response.response = None;
        assert_eq!(
            check_with(ReviewVersion::V1, Shape::Object, no_response).unwrap_err(),
            format!("conversion webhook for {GVK} failed: no response provided")
        );
        let mut wrong_uid = response(vec![converted()]);
        wrong_uid.response.as_mut().unwrap().uid = "other".into();
        assert_eq!(
            check_with(ReviewVersion::V1, Shape::Object, wrong_uid).unwrap_err(),
            format!("conversion webhook for {GVK} failed: expected response.uid=\"uid\", got \"other\"")
        );
        // v1beta1: neither kind nor uid is checked; only the status is needed.
        let minimal = ConversionReview {
            response: Some(ConversionResponse {
                uid: String::new(),
                converted_objects: Some(vec![converted()]),
                result: Status { status: "Success".into(), message: String::new() },
            }),
            ..Default::default()
        };
        assert!(check_with(ReviewVersion::V1beta1, Shape::Object, minimal).is_ok());
        for (status, message, expected) in [
            ("", "", "response.result.status was '', not 'Success'"),
            ("Failure", "", "response.result.status was 'Failure', not 'Success'"),
            (
                "Failed",
                "hostPort could not be parsed into a separate host and port",
                "hostPort could not be parsed into a separate host and port",
            ),
        ] {
            let review = ConversionReview {
                response: Some(ConversionResponse {
                    uid: "uid".into(),
                    converted_objects: None,
                    result: Status { status: status.into(), message: message.into() },
                }),
                ..Default::default()
            };
            assert_eq!(
                check_with(ReviewVersion::V1beta1, Shape::Object, review).unwrap_err(),
                format!("conversion webhook for {GVK} failed: {expected}")
            );
        }
    }

    #[test]
    fn object_count_must_match() {
        assert_eq!(
            check_with(ReviewVersion::V1, Shape::List, response(vec![])).unwrap_err(),
            format!("conversion webhook for {GVK} returned 0 objects, expected 1")
        );
    }

    #[test]
    fn version_kind_and_identity_must_match() {
        let with = |pointer: &str, value: Value| {
            let mut object = converted();
            *object.pointer_mut(pointer).unwrap() = value;
            object
        };
        let cases = [
            (
                with("/apiVersion", json!("stable.example.com/v1")),
                Shape::Object,
                "returned invalid object at index 0: invalid groupVersion (expected stable.example.com/v2, received stable.example.com/v1)",
            ),
            (
                with("/apiVersion", json!("stable.example.com/v3")),
                Shape::List,
                "returned invalid converted object at index 0: invalid groupVersion (expected stable.example.com/v2, received stable.example.com/v3)",
            ),
            (
                with("/kind", json!("CronJob")),
                Shape::Object,
                "returned invalid object at index 0: invalid kind (expected CronTab, received CronJob)",
            ),
            (
                with("/metadata/name", json!("b")),
                Shape::Object,
                "returned invalid object: must have the same name: a != b",
            ),
            (
                with("/metadata/namespace", json!("other")),
                Shape::List,
                "returned invalid converted object at index 0: must have the same namespace: ns != other",
            ),
            (
                with("/metadata/uid", json!("u2")),
                Shape::Object,
                "returned invalid object: must have the same UID: u1 != u2",
            ),
        ];
        for (object, shape, expected) in cases {
            assert_eq!(
                check_with(ReviewVersion::V1, shape, response(vec![object])).unwrap_err(),
                format!("conversion webhook for {GVK} {expected}")
            );
        }
    }

    #[test]
    fn metadata_other_than_labels_and_annotations_is_restored() {
        let mut changed = converted();
        changed["metadata"]["generation"] = json!(99);
        changed["metadata"]["garbage"] = json!("x");
        changed["metadata"]["labels"] = json!({"y": "2"});
        changed["metadata"]["annotations"] = json!({"note": "kept"});
        let result = check_with(ReviewVersion::V1, Shape::Object, response(vec![changed])).unwrap();
        assert_eq!(
            result[0]["metadata"],
            json!({"name": "a", "namespace": "ns", "uid": "u1", "labels": {"y": "2"}, "generation": 3, "annotations": {"note": "kept"}})
        );
    }

    #[test]
    fn invalid_metadata_is_an_error() {
        let mut bad = converted();
        bad["metadata"]["labels"] = json!({"some/non-qualified/label": "x"});
        let err = check_with(ReviewVersion::V1, Shape::List, response(vec![bad])).unwrap_err();
        assert!(err.starts_with(&format!("conversion webhook for {GVK} returned invalid metadata in object at index 0: metadata.labels: Invalid value: \"some/non-qualified/label\": ")), "{err}");
        let mut missing = converted();
        missing.as_object_mut().unwrap().remove("metadata");
        assert_eq!(
            check_with(ReviewVersion::V1, Shape::Object, response(vec![missing])).unwrap_err(),
            format!("conversion webhook for {GVK} returned invalid object: must have the same name: a != ")
        );
    }

    #[test]
    fn converted_objects_keep_the_webhooks_text_and_order_around_the_restored_metadata() {
        let sent = sent(ReviewVersion::V1, Shape::List);
        let answer =
            br#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": {"uid": "uid",
            "result": {"status": "Success"}, "convertedObjects": [{"kind": "CronTab", "host": "first", "metadata":
            {"name": "a", "namespace": "ns", "uid": "u1", "labels": {"x": "1"}, "generation": 99}, "name": 1e3,
            "apiVersion": "stable.example.com/v2", "host": "last"}]}}"#;
        let converted = converted_objects(&sent, vec![original().into()], decode(answer, GVK).unwrap()).unwrap();
        let text = String::from_utf8(converted[0].as_bytes().to_vec()).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"CronTab","host":"last","metadata":{"name":"a","namespace":"ns","uid":"u1","labels":{"x":"1"},"generation":3},"name":1e3,"apiVersion":"stable.example.com/v2"}"#
        );
    }

    #[test]
    fn unchanged_metadata_is_the_text_the_request_wrote() {
        let sent = sent(ReviewVersion::V1, Shape::Object);
        let original = original();
        let text = serde_json::to_vec_pretty(&original["metadata"]).unwrap();
        let metadata_of = |converted: Value| {
            let bytes = serde_json::to_vec(&response(vec![converted])).unwrap();
            let sent_as = Original { object: original.clone(), metadata_text: Some(&text) };
            let written = converted_objects(&sent, vec![sent_as], decode(&bytes, GVK).unwrap()).unwrap();
            let object: serde_json::Map<String, Value> = serde_json::from_slice(written[0].as_bytes()).unwrap();
            let raw = String::from_utf8(written[0].as_bytes().to_vec()).unwrap();
            (object["metadata"].clone(), raw.contains(std::str::from_utf8(&text).unwrap()))
        };
        assert_eq!(metadata_of(converted()), (original["metadata"].clone(), true));
        let mut relabelled = converted();
        relabelled["metadata"]["labels"] = json!({"x": "2"});
        let (metadata, copied) = metadata_of(relabelled);
        assert_eq!(
            (metadata["labels"].clone(), metadata["generation"].clone(), copied),
            (json!({"x": "2"}), json!(3), false)
        );
    }

    #[test]
    fn metadata_sent_back_as_it_was_sent_ends_as_if_it_had_been_read() {
        let sent = sent(ReviewVersion::V1, Shape::List);
        let identity = json!({"name": "a", "namespace": "ns", "uid": "u1"});
        let with = |extra: Value| {
            let mut metadata = identity.clone();
            metadata.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            metadata
        };
        for metadata in [
            with(
                json!({"labels": {"x": "1"}, "annotations": {"Bad Key": "kept, as it is unchanged"}, "generation": 3}),
            ),
            with(json!({"labels": null})),
            with(json!({"labels": {"x": 1}})),
            with(json!({"annotations": []})),
            json!("not an object"),
        ] {
            let (mut original, mut converted) = (original(), converted());
            original["metadata"] = metadata.clone();
            converted["metadata"] = metadata.clone();
            let text = serde_json::to_vec(&metadata).unwrap();
            let answer = serde_json::to_vec(&response(vec![converted])).unwrap();
            let outcome = |metadata_text| {
                let sent_as = Original { object: original.clone(), metadata_text };
                converted_objects(&sent, vec![sent_as], decode(&answer, GVK).unwrap())
                    .map(|objects| objects[0].to_value().unwrap())
                    .map_err(|err| err.message)
            };
            assert_eq!(outcome(Some(&text)), outcome(None), "{metadata}");
        }
    }

    #[test]
    fn gvk_rendering() {
        assert_eq!(gvk_of(&original()), GVK);
        assert_eq!(gvk_of(&json!({"apiVersion": "v1", "kind": "Pod"})), "/v1, Kind=Pod");
    }
}
