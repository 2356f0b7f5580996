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
    walk_json(json, schema, Steps { prune: true, default: false })
}

/// [`prune`] then [`super::default`] on JSON text, as the API server's decoder treats every
/// object it reads from storage, without building values: [`prune_json`], and on the way each
/// null the schema does not allow takes its default or goes, and each missing property with a
/// default gets it (after the fields that are there, in the schema's order, as
/// [`super::default`] adds them).
pub fn prune_and_default_json(json: &[u8], schema: &Schema) -> Result<Vec<u8>, serde_json::Error> {
    walk_json(json, schema, Steps { prune: true, default: true })
}

fn walk_json(json: &[u8], schema: &Schema, steps: Steps) -> Result<Vec<u8>, serde_json::Error> {
    let text = std::str::from_utf8(json).map_err(serde::de::Error::custom)?;
    let mut out = Vec::with_capacity(json.len());
    walk_text(text.trim_matches([' ', '\t', '\n', '\r']), schema, Level::Root, steps, &mut out)?;
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

/// What a walk does: drop unknown fields, and apply defaults (with the nulls they replace or
/// drop). Below a resource's `apiVersion`, `kind` and `metadata`, and inside a default just
/// added, nothing is pruned, as [`prune`] never goes there and runs before defaulting.
#[derive(Clone, Copy)]
struct Steps {
    prune: bool,
    default: bool,
}

fn walk_text(text: &str, schema: &Schema, level: Level, steps: Steps, out: &mut Vec<u8>) -> serde_json::Result<()> {
    let resource_root = level == Level::Root || schema.embedded_resource;
    let keeps_any_field = schema.preserve_unknown_fields || !steps.prune;
    let looks_inside =
        !schema.properties.is_empty() || matches!(schema.additional_properties, Some(Additional::Schema(_)));
    match (text.as_bytes().first(), &schema.items) {
        // An object the schema says nothing about keeps all of its fields, or none.
        (Some(b'{'), _) if looks_inside || !keeps_any_field => {
            out.push(b'{');
            let start = out.len();
            let fields = Fields::parse(text)?;
            for (name, value) in fields.iter() {
                let property = schema.property(name);
                let (child, child_steps) = if resource_root && RESOURCE_FIELDS.contains(&name) {
                    // Kept whatever the schema says, yet defaulted by it.
                    (property.filter(|_| steps.default), Steps { prune: false, ..steps })
                } else {
                    match property {
                        Some(child) => (Some(child), steps),
                        None if keeps_any_field => (None, steps),
                        None => continue,
                    }
                };
                let written = match child {
                    Some(child) if steps.default && value.get() == "null" && !child.nullable => match &child.default {
                        Some(default) => Written::Default(default),
                        None => continue,
                    },
                    _ => Written::Text(value.get()),
                };
                if out.len() > start {
                    out.push(b',');
                }
                write_key(out, name);
                match child {
                    Some(child) => written.walk(child, child_steps, out)?,
                    None => out.extend_from_slice(value.get().as_bytes()),
                }
            }
            if steps.default {
                for (name, property) in &schema.properties {
                    if let Some(default) = &property.default
                        && fields.get(name).is_none()
                    {
                        if out.len() > start {
                            out.push(b',');
                        }
                        write_key(out, name);
                        Written::Default(default).walk(property, steps, out)?;
                    }
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
                let item = match &item_schema.default {
                    Some(default) if steps.default && item.get() == "null" && !item_schema.nullable => {
                        Written::Default(default)
                    }
                    _ => Written::Text(item.get()),
                };
                item.walk(item_schema, steps, out)?;
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

/// A value to write: text from the input, or a default that takes a missing or null one's place.
enum Written<'a> {
    Text(&'a str),
    Default(&'a serde_json::Value),
}

impl Written<'_> {
    fn walk(self, schema: &Schema, steps: Steps, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match self {
            Written::Text(text) => walk_text(text, schema, Level::Nested, steps, out),
            // A default is written as it is and defaulted inside, not pruned (defaults are
            // refused unless they are pruned already).
            Written::Default(default) => {
                let text = serde_json::to_string(default)?;
                walk_text(&text, schema, Level::Nested, Steps { prune: false, ..steps }, out)
            }
        }
    }
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

    #[test]
    fn pruning_and_defaulting_text_does_what_values_do() {
        // Defaults at every kind of node: properties, items, additionalProperties, inside
        // defaults, under preserve-unknown-fields and in embedded resources (shared with the
        // fuzz target `prune`).
        let schema: Value = serde_json::from_str(include_str!("testdata/defaulting-schema.json")).unwrap();
        let schema = Schema::new(&schema);
        let documents = [
            r#"{"apiVersion": "v1", "kind": "K", "metadata": {"name": "a", "extra": 1}}"#,
            r#"{"metadata": {"name": null, "labels": null}, "spec": null, "status": null}"#,
            r#"{"spec": {"replicas": null, "mode": null, "label": null, "unknown": null, "limits": {"cpu": null}}}"#,
            r#"{"spec": {"ports": [null, {}, {"protocol": null, "port": null, "x": 1}, 7], "names": [null, "a"]}}"#,
            r#"{"spec": {"env": {"A": null, "B": {}, "C": {"v": null, "z": 1}}, "free": {"u": null, "known": null}}}"#,
            r#"{"spec": {"template": {"apiVersion": "v1", "metadata": {"other": null}, "spec": {"a": null, "b": 1}, "junk": 2}}}"#,
            r#"{"spec": {"limits": "not an object", "ports": {"not": "a list"}}, "spec": {"mode": "last"}, "x": null}"#,
            r#" { "sp\u0065c" : { } , "status" : { "phase" : null , "y" : [ ] } } "#,
            r#"[{"spec": null}]"#,
            r#"null"#,
        ];
        for document in documents {
            let mut value: Value = serde_json::from_str(document).unwrap();
            prune(&mut value, &schema);
            crate::schema::default(&mut value, &schema);
            let text = prune_and_default_json(document.as_bytes(), &schema).unwrap();
            let read: Value = serde_json::from_slice(&text).unwrap();
            assert_eq!(read, value, "{document}");
            // The same keys in the same order, at every level.
            assert_eq!(serde_json::to_string(&read).unwrap(), serde_json::to_string(&value).unwrap(), "{document}");
        }
        assert!(prune_and_default_json(b"{\"spec\": {\"mode\": nul}}", &schema).is_err());
    }
}
