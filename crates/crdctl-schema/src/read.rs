//! Reading an object through its schema, as the API server's decoder does to every custom
//! resource it reads or writes: pruning drops every field the schema does not specify (except
//! under `x-kubernetes-preserve-unknown-fields` and the `apiVersion`, `kind` and `metadata` of a
//! resource root), and defaulting gives a missing property, or a null one that may not be null,
//! its `default`, and drops a null that may be neither null nor defaulted. Upstream:
//! apiextensions' `pkg/apiserver/schema/pruning` and `defaulting/{algorithm.go,prunenulls.go}`.
//!
//! What each node does is decided once, in [`Schema::new`] (a [`ReadPlan`]), and answered by the
//! plan's questions ([`ReadPlan::field`], [`ReadPlan::null`], [`ReadPlan::defaulted`]). Two
//! interpreters follow it: one edits decoded values in place ([`prune`], [`default`]; and
//! [`prune_and_default_change`] only asks whether it would), the other
//! rewrites JSON text without building values ([`prune_json`], [`prune_and_default_json`]),
//! copying every value the schema keeps whole as it was written and reading only the objects and
//! arrays the schema looks into. The two are held to the same results by the tests below and by
//! the `prune` fuzz target.

use serde_json::Value;
use serde_json::value::RawValue;

use super::{Additional, Schema};
use crdctl_model::field::Path;
use crdctl_model::json::{Fields, write_key};

/// Fields every resource root (and every embedded resource) keeps whatever the schema says.
const RESOURCE_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// What a read does at one node, worked out from its keywords once.
#[derive(Debug, Clone, Default)]
pub struct ReadPlan {
    /// A resource root (the object itself, or an embedded resource).
    resource_root: bool,
    /// `x-kubernetes-preserve-unknown-fields`: fields the schema does not name stay.
    keeps_unknown: bool,
    /// The node names properties or has an `additionalProperties` schema, so a read looks inside.
    looks_inside: bool,
    /// The properties that have a default, in schema order.
    defaulted: Vec<String>,
}

/// What a read does: drop unknown fields, and apply defaults (with the nulls they replace or
/// drop). Below a resource's `apiVersion`, `kind` and `metadata`, and inside a default just
/// added, nothing is pruned, as pruning never goes there and runs before defaulting.
#[derive(Debug, Clone, Copy)]
pub struct Steps {
    /// Drop fields the schema does not specify.
    pub prune: bool,
    /// Apply defaults and drop the nulls that may not be null.
    pub default: bool,
}

/// What happens to one field of an object.
#[derive(Debug)]
pub enum FieldRead<'s> {
    /// Read on with the field's schema and these steps.
    Walk(&'s Schema, Steps),
    /// Kept as it is, unread.
    Keep,
    /// Pruned: the schema does not specify it.
    Prune,
}

/// What happens to a null where the schema does not allow one.
#[derive(Debug)]
pub enum NullRead<'s> {
    /// It stays (the node is nullable, or defaulting is not a step).
    Keep,
    /// It becomes the default.
    Default(&'s Value),
    /// It goes (a field; a list item without a default stays null, as upstream leaves it).
    Drop,
}

impl ReadPlan {
    pub(crate) fn new(schema: &Schema, resource_root: bool) -> ReadPlan {
        ReadPlan {
            resource_root: resource_root || schema.embedded_resource,
            keeps_unknown: schema.preserve_unknown_fields,
            looks_inside: !schema.properties.is_empty()
                || matches!(schema.additional_properties, Some(Additional::Schema(_))),
            defaulted: schema.properties.iter().filter(|(_, p)| p.default.is_some()).map(|(n, _)| n.clone()).collect(),
        }
    }

    /// What a read with `steps` does to field `name` of an object at `node`.
    pub fn field<'s>(&self, node: &'s Schema, name: &str, steps: Steps) -> FieldRead<'s> {
        let property = node.property(name);
        if self.resource_root && RESOURCE_FIELDS.contains(&name) {
            // Kept whatever the schema says, yet defaulted by it.
            return match property.filter(|_| steps.default) {
                Some(property) => FieldRead::Walk(property, Steps { prune: false, ..steps }),
                None => FieldRead::Keep,
            };
        }
        match property {
            Some(property) => FieldRead::Walk(property, steps),
            None if self.keeps_unknown || !steps.prune => FieldRead::Keep,
            None => FieldRead::Prune,
        }
    }

    /// Whether a read with `steps` keeps an object at this node whole, unread.
    pub fn keeps_whole_object(&self, steps: Steps) -> bool {
        !self.looks_inside && (self.keeps_unknown || !steps.prune)
    }

    /// The properties of `node` a missing field of which takes its default.
    pub fn defaulted<'s>(&'s self, node: &'s Schema) -> impl Iterator<Item = (&'s str, &'s Schema, &'s Value)> {
        self.defaulted.iter().filter_map(|name| {
            let property = node.properties.get(name)?;
            Some((name.as_str(), property, property.default.as_ref()?))
        })
    }
}

impl Schema {
    /// What a read with `steps` does to a null at this node.
    pub fn null(&self, steps: Steps) -> NullRead<'_> {
        match &self.default {
            _ if !steps.default || self.nullable => NullRead::Keep,
            Some(default) => NullRead::Default(default),
            None => NullRead::Drop,
        }
    }
}

/// Removes every field the schema does not specify, returning their paths (for
/// `fieldValidation=Strict|Warn`) in document order.
pub fn prune(object: &mut Value, schema: &Schema) -> Vec<String> {
    prune_fields(object, schema).into_iter().map(|field| field.path).collect()
}

/// A field pruning removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    /// Its field path, as the API server writes it (`spec.items[0].bad`).
    pub path: String,
    /// Its JSON pointer in the object (`/spec/items/0/bad`).
    pub pointer: String,
}

/// [`prune`], naming each removed field by path and pointer.
pub fn prune_fields(object: &mut Value, schema: &Schema) -> Vec<Pruned> {
    let mut unknown = Vec::new();
    read_value(object, schema, Steps { prune: true, default: false }, &Path::Root, &mut unknown);
    unknown
}

/// Whether [`prune`] with `schema` keeps the field at `pointer` (a JSON pointer into an object
/// whose other fields it keeps): what tells a field one schema prunes from one another schema
/// prunes too, without pruning the object again.
pub fn keeps(schema: &Schema, pointer: &str) -> bool {
    let steps = Steps { prune: true, default: false };
    let mut node = schema;
    for step in pointer.split('/').skip(1) {
        let step = step.replace("~1", "/").replace("~0", "~");
        if let (Some(items), true) = (&node.items, step.bytes().all(|b| b.is_ascii_digit())) {
            node = items;
            continue;
        }
        match node.read.field(node, &step, steps) {
            FieldRead::Walk(child, child_steps) if child_steps.prune => node = child,
            FieldRead::Walk(..) | FieldRead::Keep => return true,
            FieldRead::Prune => return false,
        }
    }
    true
}

/// Applies defaults, and drops nulls that may be neither null nor defaulted.
pub fn default(object: &mut Value, schema: &Schema) {
    read_value(object, schema, Steps { prune: false, default: true }, &Path::Root, &mut Vec::new());
}

/// Whether [`prune`] then [`default`] would change `object` at all: what lets a caller that
/// needs the object as they leave it read it in place instead of copying it first.
pub fn prune_and_default_change(object: &Value, schema: &Schema) -> bool {
    changes(object, schema, Steps { prune: true, default: true })
}

/// [`read_value`]'s decisions, taken without acting on them: whether any would edit `value`.
fn changes(value: &Value, schema: &Schema, steps: Steps) -> bool {
    let plan = &schema.read;
    match value {
        Value::Object(fields) => {
            let a_field_changes = fields.iter().any(|(name, child)| match plan.field(schema, name, steps) {
                FieldRead::Keep => false,
                FieldRead::Prune => true,
                FieldRead::Walk(child_schema, child_steps) => {
                    (child.is_null() && !matches!(child_schema.null(steps), NullRead::Keep))
                        || changes(child, child_schema, child_steps)
                }
            });
            a_field_changes || steps.default && plan.defaulted(schema).any(|(name, ..)| !fields.contains_key(name))
        }
        Value::Array(items) => schema.items.as_deref().is_some_and(|item_schema| {
            items.iter().any(|item| {
                (item.is_null() && matches!(item_schema.null(steps), NullRead::Default(_)))
                    || changes(item, item_schema, steps)
            })
        }),
        _ => false,
    }
}

fn read_value(value: &mut Value, schema: &Schema, steps: Steps, loc: &Path, unknown: &mut Vec<Pruned>) {
    let plan = &schema.read;
    match value {
        Value::Object(fields) => {
            let (mut pruned, mut dropped) = (Vec::new(), Vec::new());
            for (name, child) in fields.iter_mut() {
                let (child_schema, mut child_steps) = match plan.field(schema, name, steps) {
                    FieldRead::Walk(child_schema, child_steps) => (child_schema, child_steps),
                    FieldRead::Keep => continue,
                    FieldRead::Prune => {
                        pruned.push(name.clone());
                        continue;
                    }
                };
                if child.is_null() {
                    match child_schema.null(steps) {
                        NullRead::Keep => {}
                        NullRead::Default(default) => {
                            *child = default.clone();
                            child_steps.prune = false;
                        }
                        NullRead::Drop => {
                            dropped.push(name.clone());
                            continue;
                        }
                    }
                }
                read_value(child, child_schema, child_steps, &loc.child(name), unknown);
            }
            for name in pruned {
                fields.shift_remove(&name);
                let field = loc.child(&name);
                unknown.push(Pruned { path: field.path(), pointer: field.pointer() });
            }
            for name in dropped {
                fields.shift_remove(&name);
            }
            if steps.default {
                for (name, property, default) in plan.defaulted(schema) {
                    if !fields.contains_key(name) {
                        let mut value = default.clone();
                        let steps = Steps { prune: false, ..steps };
                        read_value(&mut value, property, steps, &loc.child(name), unknown);
                        fields.insert(name.to_string(), value);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for (idx, item) in items.iter_mut().enumerate() {
                    let mut item_steps = steps;
                    if let (true, NullRead::Default(default)) = (item.is_null(), item_schema.null(steps)) {
                        *item = default.clone();
                        item_steps.prune = false;
                    }
                    read_value(item, item_schema, item_steps, &loc.index(idx), unknown);
                }
            }
        }
        _ => {}
    }
}

/// [`prune`] on JSON text, without building values. A key written twice is read as a decoder
/// reads it (see [`Fields`]).
pub fn prune_json(json: &[u8], schema: &Schema) -> Result<Vec<u8>, serde_json::Error> {
    read_json(json, schema, Steps { prune: true, default: false })
}

/// [`prune`] then [`default`] on JSON text, as the API server's decoder treats every object it
/// reads from storage, without building values.
pub fn prune_and_default_json(json: &[u8], schema: &Schema) -> Result<Vec<u8>, serde_json::Error> {
    read_json(json, schema, Steps { prune: true, default: true })
}

fn read_json(json: &[u8], schema: &Schema, steps: Steps) -> Result<Vec<u8>, serde_json::Error> {
    let text = std::str::from_utf8(json).map_err(serde::de::Error::custom)?;
    let mut out = Vec::with_capacity(json.len());
    read_text(text.trim_matches([' ', '\t', '\n', '\r']), schema, Level::Root, steps, &mut out)?;
    Ok(out)
}

/// Where a value's text sits: the whole input, which has not been read as JSON yet (so it is
/// checked before it is copied unread), or inside an object or array, which was read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Nested,
}

fn read_text(text: &str, schema: &Schema, level: Level, steps: Steps, out: &mut Vec<u8>) -> serde_json::Result<()> {
    let plan = &schema.read;
    match (text.as_bytes().first(), &schema.items) {
        (Some(b'{'), _) if !plan.keeps_whole_object(steps) => {
            out.push(b'{');
            let start = out.len();
            let fields = Fields::parse(text)?;
            for (name, value) in fields.iter() {
                let written = match plan.field(schema, name, steps) {
                    FieldRead::Prune => continue,
                    FieldRead::Keep => None,
                    FieldRead::Walk(child, child_steps) => match (value.get(), child.null(steps)) {
                        ("null", NullRead::Drop) => continue,
                        ("null", NullRead::Default(default)) => Some((child, child_steps, Written::Default(default))),
                        _ => Some((child, child_steps, Written::Text(value.get()))),
                    },
                };
                if out.len() > start {
                    out.push(b',');
                }
                write_key(out, name);
                match written {
                    Some((child, child_steps, written)) => written.read(child, child_steps, out)?,
                    None => out.extend_from_slice(value.get().as_bytes()),
                }
            }
            if steps.default {
                for (name, property, default) in plan.defaulted(schema) {
                    if fields.get(name).is_none() {
                        if out.len() > start {
                            out.push(b',');
                        }
                        write_key(out, name);
                        Written::Default(default).read(property, steps, out)?;
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
                let item = match (item.get(), item_schema.null(steps)) {
                    ("null", NullRead::Default(default)) => Written::Default(default),
                    _ => Written::Text(item.get()),
                };
                item.read(item_schema, steps, out)?;
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
    Default(&'a Value),
}

impl Written<'_> {
    fn read(self, schema: &Schema, steps: Steps, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match self {
            Written::Text(text) => read_text(text, schema, Level::Nested, steps, out),
            // A default is written as it is and defaulted inside, not pruned (defaults are
            // refused unless they are pruned already).
            Written::Default(default) => {
                let text = serde_json::to_string(default)?;
                read_text(&text, schema, Level::Nested, Steps { prune: false, ..steps }, out)
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
        let pruned = prune_fields(&mut object.clone(), &schema);
        let pointers: Vec<&str> = pruned.iter().map(|p| p.pointer.as_str()).collect();
        assert_eq!(pointers, ["/spec/items/0/bad", "/spec/template/junk", "/spec/x", "/extra"]);
        assert!(pointers.iter().all(|pointer| !keeps(&schema, pointer)), "keeps agrees with pruning");
        for kept in
            ["/spec/cronSpec", "/spec/items/0/name", "/spec/free/any/deeper", "/spec/labels/k", "/metadata/name"]
        {
            assert!(keeps(&schema, kept), "{kept}");
        }
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
            // Nothing to prune or default: read unchanged.
            r#"{"metadata": {"labels": {}}, "spec": {"replicas": 2, "label": null, "ports": [{"protocol": "T"}]}}"#,
        ];
        for document in documents {
            let mut value: Value = serde_json::from_str(document).unwrap();
            let before = value.clone();
            prune(&mut value, &schema);
            default(&mut value, &schema);
            assert_eq!(prune_and_default_change(&before, &schema), value != before, "{document}");
            let text = prune_and_default_json(document.as_bytes(), &schema).unwrap();
            let read: Value = serde_json::from_slice(&text).unwrap();
            assert_eq!(read, value, "{document}");
            // The same keys in the same order, at every level.
            assert_eq!(serde_json::to_string(&read).unwrap(), serde_json::to_string(&value).unwrap(), "{document}");
        }
        assert!(prune_and_default_json(b"{\"spec\": {\"mode\": nul}}", &schema).is_err());
    }

    #[test]
    fn defaults_fill_missing_and_non_nullable_null_properties() {
        let schema = Schema::new(&json!({"type": "object", "properties": {
            "replicas": {"type": "integer", "default": 1},
            "kept": {"type": "integer", "nullable": true, "default": 2},
            "dropped": {"type": "string"},
            "ports": {"type": "array", "items": {"type": "object", "properties": {"protocol": {"type": "string", "default": "TCP"}}}}
        }}));
        let mut object = json!({"kept": null, "dropped": null, "ports": [{}, {"protocol": "UDP"}]});
        default(&mut object, &schema);
        assert_eq!(object, json!({"kept": null, "ports": [{"protocol": "TCP"}, {"protocol": "UDP"}], "replicas": 1}));
        let mut set = json!({"replicas": null});
        default(&mut set, &schema);
        assert_eq!(set["replicas"], json!(1));
        // A null the schema says nothing about stays, however deep.
        let mut unknown = json!({"free": {"inner": null}, "ports": [{"extra": null}]});
        default(&mut unknown, &schema);
        let expected =
            json!({"free": {"inner": null}, "ports": [{"extra": null, "protocol": "TCP"}], "kept": 2, "replicas": 1});
        assert_eq!(unknown, expected);
    }
}
