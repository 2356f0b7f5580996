//! What the API server does with a version's structural schema to every custom resource:
//! prune unknown fields, apply defaults, and validate types, required fields and enums, with
//! the API server's field paths and messages.
//!
//! Upstream counterparts: apiextensions' `pkg/apiserver/schema/pruning` (prune),
//! `schema/defaulting` (default) and `pkg/apiserver/validation` over kube-openapi's validator.
//! Field paths are written as the API server writes them: `spec.items[0].name`.

use serde_json::{Map, Value};

use crate::validation::{ErrorKind, Violation, go_quote};

/// Fields every resource root (and every embedded resource) keeps whatever the schema says.
const RESOURCE_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool) == Some(true)
}

fn child_path(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_string() } else { format!("{path}.{name}") }
}

/// Removes every field the schema does not specify, returning their paths (for
/// `fieldValidation=Strict|Warn`) in document order.
pub fn prune(object: &mut Value, schema: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    prune_node(object, schema, "", true, &mut unknown);
    unknown
}

fn prune_node(value: &mut Value, schema: &Value, path: &str, resource_root: bool, unknown: &mut Vec<String>) {
    let resource_root = resource_root || flag(schema, "x-kubernetes-embedded-resource");
    match value {
        Value::Object(fields) => {
            let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let mut removed = Vec::new();
            for (name, child) in fields.iter_mut() {
                if resource_root && RESOURCE_FIELDS.contains(&name.as_str()) {
                    continue;
                }
                let child_schema = properties.and_then(|p| p.get(name)).or(additional);
                match child_schema {
                    Some(child_schema) => prune_node(child, child_schema, &child_path(path, name), false, unknown),
                    None if preserve => {}
                    None => removed.push(name.clone()),
                }
            }
            for name in removed {
                fields.shift_remove(&name);
                unknown.push(child_path(path, &name));
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for (idx, item) in items.iter_mut().enumerate() {
                    prune_node(item, item_schema, &format!("{path}[{idx}]"), false, unknown);
                }
            }
        }
        _ => {}
    }
}

/// Sets every missing property that has a `default`, top down, as the API server's defaulter.
pub fn default(object: &mut Value, schema: &Value) {
    match object {
        Value::Object(fields) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    if !fields.contains_key(name)
                        && let Some(default) = property.get("default")
                    {
                        fields.insert(name.clone(), default.clone());
                    }
                }
                for (name, child) in fields.iter_mut() {
                    if let Some(property) = properties.get(name) {
                        default(child, property);
                    }
                }
            } else if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for child in fields.values_mut() {
                    default(child, additional);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    default(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

/// Validates types, `nullable`, `required` and `enum`; every violation, in document order.
pub fn validate(object: &Value, schema: &Value) -> Vec<Violation> {
    let mut violations = Vec::new();
    validate_node(object, schema, "", true, &mut violations);
    violations
}

/// The name kube-openapi gives a JSON value's type in messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(value: &Value, expected: &str) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        _ => true,
    }
}

fn violation(path: &str, kind: ErrorKind, detail: String) -> Violation {
    let pointer = String::new();
    Violation { field: if path.is_empty() { "<root>".into() } else { path.to_string() }, pointer, kind, detail }
}

fn validate_node(value: &Value, schema: &Value, path: &str, resource_root: bool, out: &mut Vec<Violation>) {
    if value.is_null() {
        if !flag(schema, "nullable") && schema.get("type").is_some() {
            let expected = schema["type"].as_str().unwrap_or_default();
            out.push(violation(
                path,
                ErrorKind::Invalid("\"null\"".into()),
                format!("{path} in body must be of type {expected}: \"null\""),
            ));
        }
        return;
    }
    let int_or_string = flag(schema, "x-kubernetes-int-or-string");
    if int_or_string {
        if !(value.is_string() || value.is_i64() || value.is_u64()) {
            out.push(violation(
                path,
                ErrorKind::Invalid(go_quote(type_name(value))),
                format!("{path} in body must be of type integer,string: {}", go_quote(type_name(value))),
            ));
            return;
        }
    } else if let Some(expected) = schema.get("type").and_then(Value::as_str)
        && !has_type(value, expected)
    {
        let actual = type_name(value);
        out.push(violation(
            path,
            ErrorKind::Invalid(go_quote(actual)),
            format!("{path} in body must be of type {expected}: {}", go_quote(actual)),
        ));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let render = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
        out.push(violation(
            path,
            ErrorKind::NotSupported(render_value(value), allowed.iter().map(render).collect()),
            String::new(),
        ));
    }
    match value {
        Value::Object(fields) => validate_object(fields, schema, path, resource_root, out),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for (idx, item) in items.iter().enumerate() {
                    validate_node(item, item_schema, &format!("{path}[{idx}]"), false, out);
                }
            }
        }
        _ => {}
    }
}

fn validate_object(
    fields: &Map<String, Value>,
    schema: &Value,
    path: &str,
    resource_root: bool,
    out: &mut Vec<Violation>,
) {
    let resource_root = resource_root || flag(schema, "x-kubernetes-embedded-resource");
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !fields.contains_key(name) {
                out.push(violation(&child_path(path, name), ErrorKind::Required, String::new()));
            }
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (name, child) in fields {
        if resource_root && RESOURCE_FIELDS.contains(&name.as_str()) {
            continue;
        }
        if let Some(child_schema) = properties.and_then(|p| p.get(name)).or(additional) {
            validate_node(child, child_schema, &child_path(path, name), false, out);
        }
    }
}

/// A value as the API server prints it in `Unsupported value: <v>`.
fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => go_quote(s),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["cronSpec"], "properties": {
                "cronSpec": {"type": "string"},
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "port": {"x-kubernetes-int-or-string": true},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {}}
            }}
        }})
    }

    #[test]
    fn prune_drops_unknown_fields_and_reports_their_paths() {
        let mut object = json!({
            "apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": "a"},
            "extra": 1,
            "spec": {"cronSpec": "* *", "x": true, "items": [{"name": "n", "bad": 1}], "free": {"any": 1},
                     "labels": {"k": "v"}, "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "junk": 1}}
        });
        let unknown = prune(&mut object, &schema());
        assert_eq!(unknown, ["spec.items[0].bad", "spec.template.junk", "spec.x", "extra"]);
        assert_eq!(object["spec"]["free"], json!({"any": 1}));
        assert_eq!(object["spec"]["template"], json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}}));
        assert_eq!(object["metadata"], json!({"name": "a"}));
    }

    #[test]
    fn default_fills_missing_properties() {
        let mut object = json!({"spec": {"cronSpec": "x"}});
        default(&mut object, &schema());
        assert_eq!(object["spec"]["replicas"], json!(1));
        let mut set = json!({"spec": {"replicas": 3}});
        default(&mut set, &schema());
        assert_eq!(set["spec"]["replicas"], json!(3));
    }

    #[test]
    fn validate_reports_upstream_messages() {
        let object = json!({"spec": {"replicas": "string", "mode": "c", "port": 1.5, "items": [{"name": 3}]}});
        let lines: Vec<String> = validate(&object, &schema()).iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "spec.cronSpec: Required value",
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
                "spec.mode: Unsupported value: \"c\": supported values: \"a\", \"b\"",
                "spec.port: Invalid value: \"number\": spec.port in body must be of type integer,string: \"number\"",
                "spec.items[0].name: Invalid value: \"integer\": spec.items[0].name in body must be of type string: \"integer\"",
            ]
        );
        assert!(validate(&json!({"spec": {"cronSpec": "x", "port": "80"}}), &schema()).is_empty());
    }
}
