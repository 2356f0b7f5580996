//! Restoring metadata after conversion: the webhook may change labels and annotations, and
//! nothing else. Changed labels and annotations are validated with the API server's rules.

use serde_json::{Map, Value};

use crate::converted::{ConvertedMetadata, JsonType, ObjectOr, Text};
use crdctl_model::field::Path;
use crdctl_model::meta::{validate_annotations, validate_labels};

/// Metadata put back after conversion.
#[derive(Debug)]
pub(crate) struct Restored {
    /// The metadata to store.
    pub metadata: Value,
    /// Whether it is the original's unchanged: the webhook sent back its labels and annotations
    /// as they were, so the text the request wrote it as is the answer's too.
    pub as_sent: bool,
}

/// `restoreObjectMeta`: the original metadata with the converted object's labels and annotations.
/// Returns the metadata to store, or the API server's error text.
///
/// This runs for every object a webhook converts, so the original metadata is moved, not copied
/// (the API server deep-copies it), and labels and annotations the webhook left as they were
/// stay the original's, compared with the webhook's without building them (see
/// [`crate::converted`]).
pub(crate) fn restore(
    original: Option<Value>,
    converted: Option<ObjectOr<ConvertedMetadata<'_>>>,
) -> Result<Restored, String> {
    let converted = match converted {
        None => return Err("missing metadata in converted object".into()),
        Some(ObjectOr::Object(metadata)) => metadata,
        Some(ObjectOr::Other(other)) => {
            return Err(format!("invalid metadata of type {} in converted object", other.go_type()));
        }
    };
    let mut restored = match original {
        None => Map::new(),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(format!("invalid metadata of type {} in input object", JsonType::of(&other).go_type()));
        }
    };
    let empty = Map::new();
    let mut as_sent = true;
    for (field, response) in [("labels", converted.labels), ("annotations", converted.annotations)] {
        let response = match response {
            None | Some(ObjectOr::Other(JsonType::Null)) => {
                as_sent &= restored.remove(field).is_none();
                continue;
            }
            Some(ObjectOr::Object(entries)) => entries,
            Some(ObjectOr::Other(other)) => {
                return Err(format!("invalid metadata.{field} of type {} in converted object", other.go_type()));
            }
        };
        let previous = match crate::converted::field(&restored, field) {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(map)) => map,
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in original object",
                    JsonType::of(other).go_type()
                ));
            }
        };
        let mut changed = previous.len() != response.len();
        for (key, value) in &response {
            let text = match value {
                Text::Str(text) => text,
                Text::Other(other) => {
                    return Err(format!(
                        "metadata.{field}[{key}] must be a string, but is {} in converted object",
                        other.go_type()
                    ));
                }
            };
            changed |= crate::converted::field(previous, key).and_then(Value::as_str) != Some(text.as_ref());
        }
        // Unchanged, the original's map already holds what the webhook sent; a key sent twice
        // (the last one counts, as in any JSON decoder) makes the two differ after all.
        if !changed && !has_repeated_keys(&response) {
            continue;
        }
        // Every value is a string: any other was refused above.
        let response: Map<String, Value> = response
            .into_iter()
            .filter_map(|(key, value)| match value {
                Text::Str(text) => Some((key.into_owned(), Value::String(text.into_owned()))),
                Text::Other(_) => None,
            })
            .collect();
        // Upstream names the annotations `metadata.annotation` here.
        let metadata = Path::new("metadata");
        let errors = if field == "labels" {
            validate_labels(&response, &metadata.child("labels"))
        } else {
            validate_annotations(&response, &metadata.child("annotation"))
        };
        if !errors.is_empty() {
            return Err(aggregate(errors.iter().map(ToString::to_string).collect()));
        }
        restored.insert(field.into(), Value::Object(response));
        as_sent = false;
    }
    Ok(Restored { metadata: Value::Object(restored), as_sent })
}

/// Whether `metadata`, given back exactly as it is, passes [`restore`] unchanged: it is an
/// object whose labels and annotations are each absent or an object of strings (`null` ones are
/// dropped, and other values refused).
pub(crate) fn restores_to_itself(metadata: &Value) -> bool {
    let Some(metadata) = metadata.as_object() else { return false };
    ["labels", "annotations"].into_iter().all(|field| match crate::converted::field(metadata, field) {
        None => true,
        Some(Value::Object(entries)) => entries.values().all(Value::is_string),
        Some(_) => false,
    })
}

fn has_repeated_keys(entries: &[(std::borrow::Cow<'_, str>, Text<'_>)]) -> bool {
    if entries.len() < 2 {
        return false;
    }
    let mut keys: Vec<&str> = entries.iter().map(|(key, _)| key.as_ref()).collect();
    keys.sort_unstable();
    keys.windows(2).any(|pair| matches!(pair, [a, b] if a == b))
}

/// `utilerrors.NewAggregate(...).Error()`: one message alone, several in brackets.
fn aggregate(mut errors: Vec<String>) -> String {
    errors.dedup();
    if errors.len() == 1 { errors.remove(0) } else { format!("[{}]", errors.join(", ")) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Restores `original` with `converted` read as the client reads a webhook's answer.
    #[track_caller]
    fn restore_from(original: Option<Value>, converted: Value) -> Result<Value, String> {
        let bytes = serde_json::to_vec(&converted).unwrap();
        restore(original, Some(serde_json::from_slice(&bytes).unwrap())).map(|restored| restored.metadata)
    }

    #[track_caller]
    fn restore_with(original: Value, converted: Value) -> Result<Value, String> {
        restore_from(Some(original), converted)
    }

    /// Upstream `TestRestoreObjectMeta`.
    #[test]
    fn upstream_restore_table() {
        assert_eq!(restore(Some(json!({})), None).unwrap_err(), "missing metadata in converted object");
        assert_eq!(
            restore_with(json!({}), json!([])).unwrap_err(),
            "invalid metadata of type []interface {} in converted object"
        );
        assert_eq!(
            restore_from(None, json!({"labels": {"a": "b"}})).unwrap(),
            json!({"labels": {"a": "b"}}),
            "original without metadata"
        );
        assert_eq!(restore_with(json!("x"), json!({})).unwrap_err(), "invalid metadata of type string in input object");
        assert_eq!(
            restore_with(
                json!({"name": "a", "labels": {"a": "1"}, "generation": 1}),
                json!({"name": "b", "labels": {"a": "2"}, "generation": 2, "foo": "bar"})
            )
            .unwrap(),
            json!({"name": "a", "labels": {"a": "2"}, "generation": 1})
        );
        assert_eq!(
            restore_with(json!({"labels": {"a": "1"}, "annotations": {"b": "2"}}), json!({"labels": null})).unwrap(),
            json!({}),
            "removed and nil"
        );
        assert_eq!(
            restore_with(json!({}), json!({"annotations": {"b": "2"}})).unwrap(),
            json!({"annotations": {"b": "2"}}),
            "added"
        );
        assert_eq!(
            restore_with(json!({}), json!({"labels": {"a": null}})).unwrap_err(),
            "metadata.labels[a] must be a string, but is <nil> in converted object"
        );
        let err = restore_with(json!({}), json!({"labels": {"some/non-qualified/label": "x"}})).unwrap_err();
        assert!(
            err.starts_with(
                "metadata.labels: Invalid value: \"some/non-qualified/label\": a qualified name must consist of"
            ),
            "{err}"
        );
        let err = restore_with(json!({}), json!({"labels": {"a": "üäö"}})).unwrap_err();
        let expected = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        assert_eq!(err, format!("metadata.labels: Invalid value: \"üäö\": {expected}"));
        let err = restore_with(json!({}), json!({"labels": {"a": "x".repeat(64)}})).unwrap_err();
        assert!(err.contains("must be no more than 63 characters"), "{err}");
        let err = restore_with(json!({}), json!({"annotations": {"a": "x".repeat(256 * 1024)}})).unwrap_err();
        assert_eq!(err, "metadata.annotation: Too long: may not be more than 262144 bytes");
    }

    #[test]
    fn a_label_sent_twice_counts_once_as_json_decoders_read_it() {
        // As many entries as the original's, each equal to one of its labels: still a change.
        let twice = br#"{"labels": {"a": "1", "a": "1"}}"#;
        let restored = restore(Some(json!({"labels": {"a": "1", "b": "2"}})), serde_json::from_slice(twice).unwrap());
        assert_eq!(restored.unwrap().metadata, json!({"labels": {"a": "1"}}));
        let changed = br#"{"labels": {"a": "1", "a": "2"}}"#;
        let restored = restore(Some(json!({"labels": {"a": "2"}})), serde_json::from_slice(changed).unwrap()).unwrap();
        assert_eq!(restored.metadata, json!({"labels": {"a": "2"}}));
        assert!(!restored.as_sent, "the webhook sent the label twice: the original's text no longer says it");
    }

    #[test]
    fn metadata_is_as_sent_only_when_labels_and_annotations_came_back_as_they_were() {
        let original = json!({"name": "a", "labels": {"x": "1"}, "annotations": {"n": "v"}, "generation": 2});
        let as_sent = |converted: &[u8]| {
            restore(Some(original.clone()), serde_json::from_slice(converted).unwrap()).unwrap().as_sent
        };
        assert!(as_sent(br#"{"name": "a", "generation": 9, "labels": {"x": "1"}, "annotations": {"n": "v"}}"#));
        assert!(!as_sent(br#"{"labels": {"x": "2"}, "annotations": {"n": "v"}}"#));
        assert!(!as_sent(br#"{"labels": {"x": "1"}}"#), "annotations dropped");
        assert!(!as_sent(br#"{"labels": {"x": "1"}, "annotations": {"n": "v", "m": "w"}}"#));
        let bare = json!({"name": "a"});
        assert!(restore(Some(bare), serde_json::from_slice(br#"{"labels": null}"#).unwrap()).unwrap().as_sent);
    }

    #[test]
    fn unchanged_invalid_labels_are_not_checked() {
        // A webhook is not blamed for labels it did not touch.
        let labels = json!({"labels": {"Bad Label": "x"}});
        assert!(restore_with(labels.clone(), labels).is_ok());
    }
}
