//! What Go's decoder refuses in a built-in object's body before anything else runs: a value of
//! the wrong JSON type for the field's Go type (`"replicas": "three"`). The API server answers
//! 400 with `encoding/json`'s error (through `sigs.k8s.io/json`): `Deployment in version "v1"
//! cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field
//! DeploymentSpec.spec.replicas of type int32`.
//!
//! Go names the innermost struct and the path of field names from the object's root (map keys
//! and list indices are not part of it), and reports the first wrong value in document order.
//! `null` is never wrong. Types with decoders of their own — `IntOrString`, `Quantity`, times,
//! embedded JSON — are not checked here; the schema's validation still is.

use crdctl_schema::{Additional, Schema};
use serde_json::Value;

/// Which of Go's decoders reads an object into its typed struct; they accept nearly the same
/// values and word their refusals differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decoder {
    /// `encoding/json`, which reads a request body.
    Json,
    /// apimachinery's unstructured converter (`runtime.DefaultUnstructuredConverter`), which
    /// reads the object a strategic merge patch produced.
    Unstructured,
}

/// Go's error for the first wrongly typed value of `object`, a `kind` whose schema is `schema`.
pub fn type_error(object: &Value, schema: &Schema, kind: &str) -> Option<String> {
    first_error(object, schema, kind, Decoder::Json)
}

/// The unstructured converter's error for the first value of `object` its field cannot hold
/// (`cannot restore map from string`), as upstream's strategic merge patch handler meets it
/// when it reads the patched object back into its type.
pub fn restore_error(object: &Value, schema: &Schema) -> Option<String> {
    first_error(object, schema, "", Decoder::Unstructured)
}

fn first_error(object: &Value, schema: &Schema, kind: &str, decoder: Decoder) -> Option<String> {
    let Value::Object(fields) = object else { return None };
    let mut path = Vec::new();
    fields
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "apiVersion" | "kind"))
        .find_map(|(name, value)| field(value, schema.properties.get(name)?, (kind, decoder), name, &mut path))
}

/// The error of one field of the struct `structure`.
fn field<'a>(
    value: &'a Value,
    schema: &'a Schema,
    (structure, decoder): (&str, Decoder),
    name: &'a str,
    path: &mut Vec<&'a str>,
) -> Option<String> {
    path.push(name);
    let error = check(value, schema, (structure, decoder), path);
    path.pop();
    error
}

fn check<'a>(
    value: &'a Value,
    schema: &'a Schema,
    (structure, decoder): (&str, Decoder),
    path: &mut Vec<&'a str>,
) -> Option<String> {
    let go_type = go_type(schema)?;
    let refused = |value: &Value| match decoder {
        Decoder::Json => Some(error(value, structure, path, &go_type)),
        Decoder::Unstructured => Some(restore_message(value, schema, &go_type)),
    };
    match (schema.types.first().map(String::as_str), value) {
        (_, Value::Null) => None,
        (Some("string"), Value::String(_)) | (Some("boolean"), Value::Bool(_)) => None,
        (Some("number"), Value::Number(_)) => None,
        (Some("integer"), Value::Number(n)) if fits(n, &go_type, decoder) => None,
        (Some("array"), Value::Array(items)) => {
            let item = schema.items.as_deref()?;
            items.iter().find_map(|value| check(value, item, (structure, decoder), path))
        }
        (Some("object"), Value::Object(fields)) => match (&schema.go_type, &schema.additional_properties) {
            (Some(struct_type), _) => {
                let inner = struct_type.rsplit('.').next().unwrap_or(struct_type);
                fields
                    .iter()
                    .find_map(|(name, value)| field(value, schema.properties.get(name)?, (inner, decoder), name, path))
            }
            (None, Some(Additional::Schema(values))) => {
                fields.values().find_map(|value| check(value, values, (structure, decoder), path))
            }
            _ => None,
        },
        (_, value) => refused(value),
    }
}

/// The Go type a node decodes into, as Go prints it; `None` for what has a decoder of its own.
fn go_type(schema: &Schema) -> Option<String> {
    if schema.int_or_string || schema.preserve_unknown_fields {
        return None;
    }
    Some(match (schema.types.first()?.as_str(), schema.format_name.as_str()) {
        ("string", "date-time") => return None,
        ("string", "byte") => "[]uint8".into(),
        ("string", _) => "string".into(),
        ("boolean", _) => "bool".into(),
        ("integer", "int32") => "int32".into(),
        ("integer", _) => "int64".into(),
        ("number", "float") => "float32".into(),
        ("number", _) => "float64".into(),
        ("array", _) => format!("[]{}", go_type(schema.items.as_deref()?)?),
        ("object", _) => match (&schema.go_type, &schema.additional_properties) {
            (Some(struct_type), _) => struct_type.clone(),
            (None, Some(Additional::Schema(values))) => format!("map[string]{}", go_type(values)?),
            _ => return None,
        },
        _ => return None,
    })
}

/// Whether an integer field of `go_type` holds the number: `encoding/json` refuses fractions
/// and overflow; the converter refuses fractions only (it converts with Go's wrapping).
fn fits(number: &serde_json::Number, go_type: &str, decoder: Decoder) -> bool {
    match (number.as_i64(), go_type, decoder) {
        (Some(n), "int32", Decoder::Json) => i32::try_from(n).is_ok(),
        (Some(_), _, _) => true,
        (None, _, Decoder::Unstructured) => number.as_f64().is_some_and(|f| f.fract() == 0.0),
        (None, _, Decoder::Json) => false,
    }
}

/// `json: cannot unmarshal <what> into Go struct field <Struct>.<path> of type <type>`.
fn error(value: &Value, structure: &str, path: &[&str], go_type: &str) -> String {
    let what = match value {
        Value::Bool(_) => "bool".to_string(),
        // A number an integer field cannot hold is shown, as Go shows it.
        Value::Number(number) if go_type.starts_with("int") => format!("number {number}"),
        Value::Number(_) => "number".to_string(),
        Value::String(_) => "string".to_string(),
        Value::Array(_) => "array".to_string(),
        Value::Object(_) => "object".to_string(),
        Value::Null => "null".to_string(),
    };
    format!("json: cannot unmarshal {what} into Go struct field {structure}.{} of type {go_type}", path.join("."))
}

/// The converter's refusal of `value` for a field of `go_type` (its `fromUnstructured`): by the
/// field's kind — struct, map, slice — or, for a scalar, the conversion Go's reflection allows
/// and the converter does not.
fn restore_message(value: &Value, schema: &Schema, go_type: &str) -> String {
    // The reflect kind of a decoded JSON value (integral numbers decode as int64).
    let kind = match value {
        Value::Bool(_) => "bool",
        Value::Number(n) if n.as_i64().is_some() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
        Value::Null => "invalid",
    };
    let scalar = !go_type.starts_with('[') && schema.types.first().is_none_or(|t| t != "object");
    match (schema.go_type.is_some(), go_type, kind) {
        (true, _, _) => format!("cannot restore struct from: {kind}"),
        (false, _, _) if go_type.starts_with("map[") => format!("cannot restore map from {kind}"),
        (false, _, _) if go_type.starts_with('[') => format!("cannot restore slice from {kind}"),
        // Go converts integers to strings and floats to integers, and the converter allows
        // neither (a float is fine only when integral, which `fits` accepted).
        (false, "string", "int64") | (false, "int32" | "int64", "float64") if scalar => {
            format!("cannot convert {kind} to {go_type}")
        }
        _ => format!("unrecognized type: {go_type}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::builtin::find;
    use serde_json::json;

    /// Each case: a Deployment's body with one wrong value, and Go's error for it.
    #[test]
    fn wrong_json_types_read_as_gos_decoder_reports_them() {
        let schema = find("apps", "v1", "deployments").and_then(|d| d.schema()).unwrap();
        let container = json!({"name": "c", "image": "nginx"});
        let cases = [
            (
                json!({"spec": {"replicas": "three"}}),
                "string into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                json!({"spec": {"replicas": 1.5}}),
                "number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                json!({"spec": {"replicas": 3_000_000_000_u64}}),
                "number 3000000000 into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (json!({"spec": []}), "array into Go struct field Deployment.spec of type v1.DeploymentSpec"),
            (
                json!({"metadata": {"labels": {"a": 1}}}),
                "number into Go struct field ObjectMeta.metadata.labels of type string",
            ),
            (
                json!({"spec": {"template": {"spec": {"containers": [container, "c2"]}}}}),
                "string into Go struct field PodSpec.spec.template.spec.containers of type v1.Container",
            ),
            (
                json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": 7}]}}}}),
                "number into Go struct field Container.spec.template.spec.containers.image of type string",
            ),
            (json!({"spec": {"paused": "yes"}}), "string into Go struct field DeploymentSpec.spec.paused of type bool"),
        ];
        for (body, expected) in cases {
            assert_eq!(
                type_error(&body, schema, "Deployment"),
                Some(format!("json: cannot unmarshal {expected}")),
                "{body}"
            );
        }
        // What decodes: nulls, int-or-string, quantities, times.
        let fine = json!({"metadata": {"name": null, "creationTimestamp": null}, "spec": {"replicas": 2,
            "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}}}});
        assert_eq!(type_error(&fine, schema, "Deployment"), None);
        let secret = find("", "v1", "secrets").and_then(|s| s.schema()).unwrap();
        assert_eq!(
            type_error(&json!({"data": {"a": 1}}), secret, "Secret").as_deref(),
            Some("json: cannot unmarshal number into Go struct field Secret.data of type []uint8")
        );
    }

    /// Each case: a patched Deployment with one value its field cannot hold, and the
    /// converter's error, as upstream's tests (`test/cmd/core.sh`) and its source word them.
    #[test]
    fn wrongly_typed_values_read_as_the_unstructured_converter_reports_them() {
        let schema = find("apps", "v1", "deployments").and_then(|d| d.schema()).unwrap();
        let cases = [
            (json!({"metadata": {"labels": "invalid"}}), "cannot restore map from string"),
            (json!({"metadata": {"finalizers": {"a": "b"}}}), "cannot restore slice from map"),
            (json!({"spec": "x"}), "cannot restore struct from: string"),
            (json!({"spec": {"replicas": "three"}}), "unrecognized type: int32"),
            (json!({"spec": {"replicas": 1.5}}), "cannot convert float64 to int32"),
            (json!({"metadata": {"name": 5}}), "cannot convert int64 to string"),
            (json!({"metadata": {"name": true}}), "unrecognized type: string"),
            (json!({"spec": {"paused": 1}}), "unrecognized type: bool"),
        ];
        for (object, expected) in cases {
            assert_eq!(restore_error(&object, schema).as_deref(), Some(expected), "{object}");
        }
        // What converts: an integral float into an integer, nulls, int-or-string, quantities.
        let fine = json!({"metadata": {"labels": null}, "spec": {"replicas": 2.0,
            "strategy": {"rollingUpdate": {"maxSurge": "25%"}},
            "template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": 1}}}]}}}});
        assert_eq!(restore_error(&fine, schema), None);
    }
}
