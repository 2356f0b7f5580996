//! What decoding a CRD's schemas into Go's `JSONSchemaProps` refuses: a keyword of the wrong
//! JSON type (`maximum: "10"`, `required: "name"`, `properties: []`). The API server refuses such a
//! CRD before any validation, with `encoding/json`'s error (through `sigs.k8s.io/json`), so the
//! text here is that error: `json: cannot unmarshal string into Go struct field
//! JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.maximum of type float64`.
//!
//! Go names the innermost struct and the path of struct field names from the document's root;
//! map keys and list indices are not part of it. `items`, `additionalProperties` and
//! `additionalItems` have their own decoders: `items` that is neither an object nor a list is
//! ignored, and `additionalProperties` that is neither a schema nor a boolean is refused with
//! `boolean or JSON schema expected`.

use serde_json::Value;

/// Go's decoding error for the first wrongly typed schema keyword in a v1 CRD, if any.
pub fn go_decode_error(crd: &Value) -> Option<String> {
    let versions = crd.pointer("/spec/versions")?.as_array()?;
    let mut path = vec!["spec", "versions", "schema", "openAPIV3Schema"];
    versions.iter().find_map(|version| {
        let schema = version.pointer("/schema/openAPIV3Schema")?;
        schema_props(schema, &mut path).err()
    })
}

/// The Go type a keyword decodes into.
#[derive(Clone, Copy)]
enum Kind {
    String,
    Float,
    Int,
    Bool,
    Strings,
    Anything,
    Values,
    Schema,
    Schemas,
    SchemaMap(&'static str),
    SchemaOrArray,
    SchemaOrBool,
    Dependencies,
    ExternalDocs,
    Rules,
}

fn keyword(name: &str) -> Option<Kind> {
    Some(match name {
        "id" | "$schema" | "$ref" | "description" | "type" | "format" | "title" | "pattern" => Kind::String,
        "x-kubernetes-list-type" | "x-kubernetes-map-type" => Kind::String,
        "maximum" | "minimum" | "multipleOf" => Kind::Float,
        "maxLength" | "minLength" | "maxItems" | "minItems" | "maxProperties" | "minProperties" => Kind::Int,
        "exclusiveMaximum" | "exclusiveMinimum" | "uniqueItems" | "nullable" => Kind::Bool,
        "x-kubernetes-preserve-unknown-fields" | "x-kubernetes-embedded-resource" | "x-kubernetes-int-or-string" => {
            Kind::Bool
        }
        "required" | "x-kubernetes-list-map-keys" => Kind::Strings,
        "default" | "example" => Kind::Anything,
        "enum" => Kind::Values,
        "not" => Kind::Schema,
        "allOf" | "oneOf" | "anyOf" => Kind::Schemas,
        "properties" | "patternProperties" => Kind::SchemaMap("map[string]v1.JSONSchemaProps"),
        "definitions" => Kind::SchemaMap("v1.JSONSchemaDefinitions"),
        "items" => Kind::SchemaOrArray,
        "additionalProperties" | "additionalItems" => Kind::SchemaOrBool,
        "dependencies" => Kind::Dependencies,
        "externalDocs" => Kind::ExternalDocs,
        "x-kubernetes-validations" => Kind::Rules,
        _ => return None,
    })
}

/// `json: cannot unmarshal <what> into Go struct field <Struct>.<path> of type <type>`.
fn type_error(value: &Value, structure: &str, path: &[&str], go_type: &str) -> String {
    let what = match value {
        Value::Null => "null".to_string(),
        Value::Bool(_) => "bool".to_string(),
        Value::Number(number) if go_type == "int64" => format!("number {number}"),
        Value::Number(_) => "number".to_string(),
        Value::String(_) => "string".to_string(),
        Value::Array(_) => "array".to_string(),
        Value::Object(_) => "object".to_string(),
    };
    format!("json: cannot unmarshal {what} into Go struct field {structure}.{} of type {go_type}", path.join("."))
}

fn schema_props<'a>(value: &'a Value, path: &mut Vec<&'a str>) -> Result<(), String> {
    let object = match value {
        Value::Null => return Ok(()),
        Value::Object(object) => object,
        other => return Err(type_error(other, "JSONSchemaProps", path, "v1.JSONSchemaProps")),
    };
    for (name, value) in object {
        let Some(kind) = keyword(name) else { continue };
        path.push(name);
        let checked = field(kind, value, path);
        path.pop();
        checked?;
    }
    Ok(())
}

fn scalar(kind: Kind, value: &Value) -> bool {
    match kind {
        Kind::String => value.is_string(),
        Kind::Float => value.is_number(),
        Kind::Int => value.as_i64().is_some(),
        Kind::Bool => value.is_boolean(),
        _ => true,
    }
}

fn field<'a>(kind: Kind, value: &'a Value, path: &mut Vec<&'a str>) -> Result<(), String> {
    let wrong = |go_type: &str| Err(type_error(value, "JSONSchemaProps", path, go_type));
    if value.is_null() {
        return Ok(()); // null leaves a Go field at its zero value
    }
    match kind {
        Kind::String if !scalar(kind, value) => wrong("string"),
        Kind::Float if !scalar(kind, value) => wrong("float64"),
        Kind::Int if !scalar(kind, value) => wrong("int64"),
        Kind::Bool if !scalar(kind, value) => wrong("bool"),
        Kind::String | Kind::Float | Kind::Int | Kind::Bool | Kind::Anything => Ok(()),
        Kind::Strings => match value.as_array() {
            None => wrong("[]string"),
            Some(items) => match items.iter().find(|item| !item.is_string() && !item.is_null()) {
                Some(item) => Err(type_error(item, "JSONSchemaProps", path, "string")),
                None => Ok(()),
            },
        },
        Kind::Values if !value.is_array() => wrong("[]v1.JSON"),
        Kind::Values => Ok(()),
        Kind::Schema | Kind::SchemaOrBool if value.is_object() => schema_props(value, path),
        Kind::Schema => wrong("v1.JSONSchemaProps"),
        Kind::SchemaOrBool if value.is_boolean() => Ok(()),
        Kind::SchemaOrBool => Err("boolean or JSON schema expected".to_string()),
        Kind::Schemas => match value.as_array() {
            None => wrong("[]v1.JSONSchemaProps"),
            Some(items) => items.iter().try_for_each(|item| schema_props(item, path)),
        },
        Kind::SchemaMap(go_type) => match value.as_object() {
            None => wrong(go_type),
            Some(map) => map.values().try_for_each(|item| schema_props(item, path)),
        },
        Kind::SchemaOrArray => match value {
            Value::Object(_) => schema_props(value, path),
            Value::Array(items) => items.iter().try_for_each(|item| schema_props(item, path)),
            _ => Ok(()), // neither form: Go's decoder leaves items empty
        },
        Kind::Dependencies if !value.is_object() => wrong("v1.JSONSchemaDependencies"),
        Kind::Dependencies => Ok(()),
        Kind::ExternalDocs => match value.as_object() {
            None => wrong("v1.ExternalDocumentation"),
            Some(docs) => struct_fields(docs, "ExternalDocumentation", path, |name| {
                matches!(name, "description" | "url").then_some(("string", Kind::String))
            }),
        },
        Kind::Rules => match value.as_array() {
            None => wrong("v1.ValidationRules"),
            Some(rules) => rules.iter().try_for_each(|rule| match rule {
                Value::Null => Ok(()),
                Value::Object(rule) => struct_fields(rule, "ValidationRule", path, |name| match name {
                    "rule" | "message" | "messageExpression" | "fieldPath" => Some(("string", Kind::String)),
                    "reason" => Some(("v1.FieldValueErrorReason", Kind::String)),
                    "optionalOldSelf" => Some(("bool", Kind::Bool)),
                    _ => None,
                }),
                other => Err(type_error(other, "JSONSchemaProps", path, "v1.ValidationRule")),
            }),
        },
    }
}

/// The scalar fields of a small struct (`ExternalDocumentation`, `ValidationRule`).
fn struct_fields<'a>(
    object: &'a serde_json::Map<String, Value>,
    structure: &str,
    path: &mut Vec<&'a str>,
    fields: impl Fn(&str) -> Option<(&'static str, Kind)>,
) -> Result<(), String> {
    for (name, value) in object {
        let Some((go_type, kind)) = fields(name) else { continue };
        if !value.is_null() && !scalar(kind, value) {
            path.push(name);
            let error = type_error(value, structure, path, go_type);
            path.pop();
            return Err(error);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::go_decode_error;

    fn crd(schema: serde_json::Value) -> serde_json::Value {
        json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}})
    }

    #[test]
    fn wrongly_typed_keywords_read_as_go_reports_them() {
        let prefix = "json: cannot unmarshal";
        let cases = [
            (
                json!({"type": "object", "properties": {"replicas": {"type": "integer", "maximum": "10"}}}),
                Some(format!(
                    "{prefix} string into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.maximum of type float64"
                )),
            ),
            (
                json!({"type": "object", "properties": {"name": "string"}}),
                Some(format!(
                    "{prefix} string into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties of type v1.JSONSchemaProps"
                )),
            ),
            (
                json!({"type": "object", "required": "name"}),
                Some(format!(
                    "{prefix} string into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.required of type []string"
                )),
            ),
            (
                json!({"type": "array", "items": {"type": "string", "maxLength": 1.5}}),
                Some(format!(
                    "{prefix} number 1.5 into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.items.maxLength of type int64"
                )),
            ),
            (
                json!({"type": "object", "x-kubernetes-validations": [{"rule": "true", "reason": 3}]}),
                Some(format!(
                    "{prefix} number into Go struct field ValidationRule.spec.versions.schema.openAPIV3Schema.x-kubernetes-validations.reason of type v1.FieldValueErrorReason"
                )),
            ),
            (json!({"type": "object", "additionalProperties": "yes"}), Some("boolean or JSON schema expected".into())),
            (
                json!({"type": "object", "properties": []}),
                Some(format!(
                    "{prefix} array into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties of type map[string]v1.JSONSchemaProps"
                )),
            ),
            // What Go accepts: nulls, items that is neither form, any default, unknown keys.
            (json!({"type": "array", "items": "string", "default": "x", "maximum": null, "x-unknown": 1}), None),
            (json!({"type": "object", "additionalProperties": false, "nullable": true, "enum": [1, "a"]}), None),
        ];
        for (schema, expected) in cases {
            assert_eq!(go_decode_error(&crd(schema.clone())), expected, "{schema}");
        }
    }
}
