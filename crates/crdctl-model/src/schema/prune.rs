//! Pruning: every field the schema does not specify is dropped, except under
//! `x-kubernetes-preserve-unknown-fields` and the `apiVersion`, `kind` and `metadata` of the
//! root and of embedded resources. Upstream: apiextensions' `pkg/apiserver/schema/pruning`.

use serde_json::Value;
use serde_json::value::RawValue;

use super::path::Loc;
use super::{Additional, Schema};
use crate::json::{Fields, write_key};

/// Fields every resource root (and every embedded resource) keeps whatever the schema says.
const RESOURCE_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Removes every field the schema does not specify, returning their paths (for
/// `fieldValidation=Strict|Warn`) in document order.
pub fn prune(object: &mut Value, schema: &Schema) -> Vec<String> {
    let mut unknown = Vec::new();
    prune_node(object, schema, &Loc::Root, true, &mut unknown);
    unknown
}

fn prune_node(value: &mut Value, schema: &Schema, loc: &Loc, resource_root: bool, unknown: &mut Vec<String>) {
    let resource_root = resource_root || schema.embedded_resource;
    match value {
        Value::Object(fields) => {
            let mut removed = Vec::new();
            for (name, child) in fields.iter_mut() {
                if resource_root && RESOURCE_FIELDS.contains(&name.as_str()) {
                    continue;
                }
                match schema.property(name) {
                    Some(child_schema) => prune_node(child, child_schema, &loc.field(name), false, unknown),
                    None if schema.preserve_unknown_fields => {}
                    None => removed.push(name.clone()),
                }
            }
            for name in removed {
                fields.shift_remove(&name);
                unknown.push(loc.field(&name).path());
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for (idx, item) in items.iter_mut().enumerate() {
                    prune_node(item, item_schema, &loc.index(idx), false, unknown);
                }
            }
        }
        _ => {}
    }
}

/// [`prune`] on JSON text, without building values: every value the schema keeps whole is
/// copied as it was written, and only objects and arrays the schema looks into are read. A key
/// written twice is read as a decoder reads it (see [`Fields`]).
pub fn prune_json(json: &[u8], schema: &Schema) -> Result<Vec<u8>, serde_json::Error> {
    let text = std::str::from_utf8(json).map_err(serde::de::Error::custom)?;
    let mut out = Vec::with_capacity(json.len());
    prune_text(text.trim_matches([' ', '\t', '\n', '\r']), schema, Level::Root, &mut out)?;
    Ok(out)
}

/// Where a value's text sits: the whole input, which is the resource root and has not been read
/// as JSON yet (so it is checked before it is copied unread), or inside an object or array,
/// which was read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Nested,
}

fn prune_text(text: &str, schema: &Schema, level: Level, out: &mut Vec<u8>) -> serde_json::Result<()> {
    let resource_root = level == Level::Root || schema.embedded_resource;
    let keeps_any_field = schema.preserve_unknown_fields;
    let looks_inside =
        !schema.properties.is_empty() || matches!(schema.additional_properties, Some(Additional::Schema(_)));
    match (text.as_bytes().first(), &schema.items) {
        // An object the schema says nothing about keeps all of its fields, or none.
        (Some(b'{'), _) if looks_inside || !keeps_any_field => {
            out.push(b'{');
            let start = out.len();
            for (name, value) in Fields::parse(text)?.iter() {
                let child = match schema.property(name) {
                    _ if resource_root && RESOURCE_FIELDS.contains(&name) => None,
                    Some(child) => Some(child),
                    None if keeps_any_field => None,
                    None => continue,
                };
                if out.len() > start {
                    out.push(b',');
                }
                write_key(out, name);
                match child {
                    Some(child) => prune_text(value.get(), child, Level::Nested, out)?,
                    None => out.extend_from_slice(value.get().as_bytes()),
                }
            }
            out.push(b'}');
        }
        (Some(b'['), Some(item_schema)) => {
            let items: Vec<&RawValue> = serde_json::from_str(text)?;
            out.push(b'[');
            for (idx, item) in items.into_iter().enumerate() {
                if idx > 0 {
                    out.push(b',');
                }
                prune_text(item.get(), item_schema, Level::Nested, out)?;
            }
            out.push(b']');
        }
        _ => {
            if level == Level::Root {
                serde_json::from_str::<&RawValue>(text)?;
            }
            out.extend_from_slice(text.as_bytes());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn prune_drops_unknown_fields_and_reports_their_paths() {
        let schema = Schema::new(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "cronSpec": {"type": "string"},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {}}
            }}
        }}));
        let mut object = json!({
            "apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": "a"},
            "extra": 1,
            "spec": {"cronSpec": "* *", "x": true, "items": [{"name": "n", "bad": 1}], "free": {"any": 1},
                     "labels": {"k": "v"}, "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "junk": 1}}
        });
        let unknown = prune(&mut object, &schema);
        assert_eq!(unknown, ["spec.items[0].bad", "spec.template.junk", "spec.x", "extra"]);
        assert_eq!(object["spec"]["free"], json!({"any": 1}));
        assert_eq!(object["spec"]["template"], json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}}));
        assert_eq!(object["metadata"], json!({"name": "a"}));
    }

    #[test]
    fn pruning_text_keeps_what_pruning_values_keeps() {
        let schema = Schema::new(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "name": {"type": "string"},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "any": {"type": "array"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                         "properties": {"strict": {"type": "object", "properties": {"a": {"type": "integer"}}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "string"}}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}
            }},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }}));
        let documents = [
            r#"{"apiVersion": "v1", "kind": "K", "metadata": {"name": "a", "x": [1]}, "extra": {"deep": [1, {"a": 2}]}}"#,
            r#" { "spec" : { "name" : "n\"q" , "x" : true , "items" : [ {"name": "a", "bad": 1}, 7, [1] ] } } "#,
            r#"{"spec": {"any": [{"kept": 1}], "free": {"u": 1, "strict": {"a": 1, "b": 2}}, "labels": {"k": {"v": "1", "w": 2}}}}"#,
            r#"{"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"m": 1}, "spec": {"x": 1}, "junk": 1}}}"#,
            r#"{"spec": "not an object", "status": {"anything": {"goes": [null, 1.5e300]}}}"#,
            r#"{"spec": {"name": {"an": "object"}, "items": {"not": "a list"}}, "extra": 1, "spec": {"name": "last"}}"#,
            r#"{"\u0073pec": {"n\u0061me": "escaped keys"}}"#,
            r#"[{"spec": {"x": 1}}]"#,
            r#""text""#,
        ];
        for document in documents {
            let mut value: Value = serde_json::from_str(document).unwrap();
            prune(&mut value, &schema);
            let pruned = prune_json(document.as_bytes(), &schema).unwrap();
            assert_eq!(serde_json::from_slice::<Value>(&pruned).unwrap(), value, "{document}");
            let keys = |v: &Value| v.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>());
            assert_eq!(keys(&serde_json::from_slice(&pruned).unwrap()), keys(&value), "order kept: {document}");
        }
        for broken in [&b"{\"spec\": "[..], b"{} {}", b"[1,", b"tru", b"\xff", b"\"a"] {
            assert!(prune_json(broken, &schema).is_err(), "{}", String::from_utf8_lossy(broken));
        }
        let keeps_all = Schema::new(&json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        assert!(prune_json(b"{\"a\": tru}", &keeps_all).is_err(), "copied whole, still checked");
    }
}
