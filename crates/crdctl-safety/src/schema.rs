//! Flattened schemas: every node of an `openAPIV3Schema` under its place in the tree.
//!
//! Nodes are keyed by their JSON pointer below `openAPIV3Schema` (`/properties/spec/items`), which
//! is unique and doubles as the way back to a source line. [`SchemaPath`] turns a pointer into the
//! `^.spec.items` notation that reports print. Comparing two nodes looks only at their own
//! keywords: `properties` and `items` children are compared at their own paths.
//!
//! Equality follows the API server's Go types: an absent slice or map equals an empty one, an
//! absent string equals `""`, an absent plain boolean equals `false`, but an absent pointer
//! (`maximum`, `x-kubernetes-preserve-unknown-fields`, ...) differs from any value.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// Keywords that are compared at their own paths, never as part of the parent node.
const CHILD_KEYWORDS: [&str; 2] = ["properties", "items"];

/// A version's schema, flattened.
#[derive(Debug, Default)]
pub struct FlatSchema<'a> {
    nodes: Vec<(String, &'a Map<String, Value>)>,
    by_pointer: HashMap<String, usize>,
}

impl<'a> FlatSchema<'a> {
    /// Flattens a schema root; `None` (a version without schema) flattens to nothing.
    pub fn new(root: Option<&'a Value>) -> FlatSchema<'a> {
        let mut flat = FlatSchema::default();
        if let Some(root) = root.and_then(Value::as_object) {
            flat.visit(String::new(), root);
        }
        flat
    }

    /// Nodes in document order, each with its pointer below `openAPIV3Schema`.
    pub fn nodes(&self) -> impl Iterator<Item = (&str, &'a Map<String, Value>)> {
        self.nodes.iter().map(|(pointer, node)| (pointer.as_str(), *node))
    }

    /// The node at `pointer`.
    pub fn get(&self, pointer: &str) -> Option<&'a Map<String, Value>> {
        self.by_pointer.get(pointer).and_then(|&idx| self.nodes.get(idx)).map(|(_, node)| *node)
    }

    /// Whether the schema has a node at `pointer`.
    pub fn contains(&self, pointer: &str) -> bool {
        self.by_pointer.contains_key(pointer)
    }

    fn visit(&mut self, pointer: String, node: &'a Map<String, Value>) {
        self.by_pointer.insert(pointer.clone(), self.nodes.len());
        self.nodes.push((pointer.clone(), node));
        for (key, child) in node {
            match (key.as_str(), child) {
                ("items" | "additionalProperties" | "additionalItems" | "not", Value::Object(schema)) => {
                    self.visit(format!("{pointer}/{key}"), schema);
                }
                ("items" | "allOf" | "anyOf" | "oneOf", Value::Array(schemas)) => {
                    for (idx, schema) in schemas.iter().enumerate() {
                        if let Value::Object(schema) = schema {
                            self.visit(format!("{pointer}/{key}/{idx}"), schema);
                        }
                    }
                }
                ("properties" | "patternProperties" | "definitions" | "dependencies", Value::Object(children)) => {
                    for (name, schema) in children {
                        // `dependencies` may also hold string lists, which are not schemas.
                        if let Value::Object(schema) = schema {
                            let segment = crdctl_model::field::escape_pointer_segment(name);
                            self.visit(format!("{pointer}/{key}/{segment}"), schema);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// The keywords of a node that differ, excluding `properties` and `items`, with the old and new
/// values (`None` when absent or zero).
pub fn differing_keywords<'a>(
    old: &'a Map<String, Value>,
    new: &'a Map<String, Value>,
) -> Vec<(&'a str, Option<&'a Value>, Option<&'a Value>)> {
    // Most nodes are unchanged: find that out without allocating.
    let same = |a: &'a Map<String, Value>, b: &'a Map<String, Value>| {
        a.iter()
            .filter(|(k, _)| !CHILD_KEYWORDS.contains(&k.as_str()))
            .all(|(k, v)| b.get(k).is_some_and(|w| json_equal(v, w)))
    };
    if old.len() == new.len() && same(old, new) {
        return Vec::new();
    }
    let mut keys: Vec<&str> = old.keys().map(String::as_str).collect();
    keys.extend(new.keys().map(String::as_str).filter(|k| !old.contains_key(*k)));
    keys.into_iter()
        .filter(|key| !CHILD_KEYWORDS.contains(key))
        .filter_map(|key| {
            let (a, b) = (present(old, key), present(new, key));
            (!semantically_equal(a, b)).then_some((key, a, b))
        })
        .collect()
}

/// The value of `key`, or `None` when it is absent or the Go zero value of its field.
pub fn present<'a>(node: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    let value = node.get(key)?;
    let zero = match value {
        Value::Null => true,
        Value::String(s) => s.is_empty() && go_kind(key) == GoKind::Plain,
        Value::Bool(b) => !b && go_kind(key) == GoKind::Plain,
        Value::Array(items) => items.is_empty() && go_kind(key) != GoKind::Json,
        Value::Object(map) => map.is_empty() && go_kind(key) == GoKind::Collection,
        Value::Number(_) => false,
    };
    (!zero).then_some(value)
}

/// Compares two keyword values as the API server's Go types would.
pub fn semantically_equal(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => json_equal(a, b),
        _ => false,
    }
}

/// JSON equality where `1` equals `1.0` (Go decodes both to the same float64).
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// How a JSONSchemaProps field is typed in Go, which decides what counts as "unset".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GoKind {
    /// Plain string or bool: `""` and `false` are unset.
    Plain,
    /// Slice or map: empty is unset.
    Collection,
    /// A pointer (`*float64`, `*bool`, `*JSON`, `*string`): only absence is unset.
    Pointer,
    /// Raw JSON (`default`, `example`, `enum` items): any value is set, even `[]`.
    Json,
}

fn go_kind(key: &str) -> GoKind {
    match key {
        "id"
        | "$schema"
        | "description"
        | "type"
        | "format"
        | "title"
        | "pattern"
        | "exclusiveMaximum"
        | "exclusiveMinimum"
        | "uniqueItems"
        | "nullable"
        | "x-kubernetes-embedded-resource"
        | "x-kubernetes-int-or-string" => GoKind::Plain,
        "enum"
        | "required"
        | "allOf"
        | "oneOf"
        | "anyOf"
        | "properties"
        | "patternProperties"
        | "dependencies"
        | "definitions"
        | "x-kubernetes-list-map-keys"
        | "x-kubernetes-validations" => GoKind::Collection,
        "default" | "example" => GoKind::Json,
        _ => GoKind::Pointer,
    }
}

/// One step of a [`SchemaPath`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Segment {
    /// `properties[name]`.
    Property(String),
    /// `items` as a single schema.
    Items,
    /// `items[i]` in the array form.
    ItemsAt(usize),
    /// `additionalProperties` as a schema.
    AdditionalProperties,
    /// `allOf[i]`, `anyOf[i]` or `oneOf[i]` (the keyword, the index).
    Combinator(&'static str, usize),
    /// `not`.
    Not,
    /// `additionalItems` as a schema.
    AdditionalItems,
    /// `patternProperties[p]`, `definitions[k]` or `dependencies[k]`.
    Keyed(&'static str, String),
}

/// A node's place in a schema, rendered as `^.spec.items.name` (or `^.spec[*].name`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SchemaPath(pub Vec<Segment>);

/// How array items and additionalProperties are written in a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathStyle {
    /// `.items`, `.additionalProperties`: crdify today.
    Verbose,
    /// `[*]` for both: OLM's earlier messages, which the OLM docs show.
    Wildcard,
}

impl SchemaPath {
    /// Parses a pointer made by [`FlatSchema`].
    pub fn from_pointer(pointer: &str) -> SchemaPath {
        let mut segments = Vec::new();
        let mut parts = pointer.split('/').skip(1).map(unescape);
        while let Some(keyword) = parts.next() {
            let segment = match keyword.as_str() {
                "properties" => Segment::Property(parts.next().unwrap_or_default()),
                "items" => match parts.clone().next().and_then(|i| i.parse().ok()) {
                    Some(idx) => {
                        parts.next();
                        Segment::ItemsAt(idx)
                    }
                    None => Segment::Items,
                },
                "additionalProperties" => Segment::AdditionalProperties,
                "additionalItems" => Segment::AdditionalItems,
                "not" => Segment::Not,
                "allOf" | "anyOf" | "oneOf" => {
                    let keyword = match keyword.as_str() {
                        "allOf" => "allOf",
                        "anyOf" => "anyOf",
                        _ => "oneOf",
                    };
                    Segment::Combinator(keyword, parts.next().and_then(|i| i.parse().ok()).unwrap_or_default())
                }
                "patternProperties" => Segment::Keyed("patternProperties", parts.next().unwrap_or_default()),
                "definitions" => Segment::Keyed("definitions", parts.next().unwrap_or_default()),
                _ => Segment::Keyed("dependencies", parts.next().unwrap_or_default()),
            };
            segments.push(segment);
        }
        SchemaPath(segments)
    }

    /// The JSON pointer of the node within its schema (the inverse of
    /// [`SchemaPath::from_pointer`]).
    pub fn pointer(&self) -> String {
        let escape = |name: &str| name.replace('~', "~0").replace('/', "~1");
        self.0
            .iter()
            .map(|segment| match segment {
                Segment::Property(name) => format!("/properties/{}", escape(name)),
                Segment::Items => "/items".into(),
                Segment::ItemsAt(idx) => format!("/items/{idx}"),
                Segment::AdditionalProperties => "/additionalProperties".into(),
                Segment::Combinator(keyword, idx) => format!("/{keyword}/{idx}"),
                Segment::Not => "/not".into(),
                Segment::AdditionalItems => "/additionalItems".into(),
                Segment::Keyed(keyword, key) => format!("/{keyword}/{}", escape(key)),
            })
            .collect()
    }

    /// Renders the path from `^`.
    pub fn render(&self, style: PathStyle) -> String {
        let mut out = String::from("^");
        for segment in &self.0 {
            match (segment, style) {
                (Segment::Property(name), _) => {
                    out.push('.');
                    out.push_str(name);
                }
                (Segment::Items | Segment::AdditionalProperties, PathStyle::Wildcard) => out.push_str("[*]"),
                (Segment::Items, PathStyle::Verbose) => out.push_str(".items"),
                (Segment::AdditionalProperties, PathStyle::Verbose) => out.push_str(".additionalProperties"),
                (Segment::ItemsAt(idx), PathStyle::Wildcard) => out.push_str(&format!("[{idx}]")),
                (Segment::ItemsAt(idx), PathStyle::Verbose) => out.push_str(&format!(".items[{idx}]")),
                (Segment::Combinator(keyword, idx), _) => out.push_str(&format!(".{keyword}[{idx}]")),
                (Segment::Not, _) => out.push_str(".not"),
                (Segment::AdditionalItems, _) => out.push_str(".additionalItems"),
                (Segment::Keyed(keyword, key), _) => out.push_str(&format!(".{keyword}[{key}]")),
            }
        }
        out
    }
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pointers_read_back_as_the_same_path() {
        let schema = json!({"properties": {"a/b": {"items": {"additionalProperties": {"oneOf": [{}, {"not": {}}]}}},
            "c~": {"items": [{}, {"patternProperties": {"^x$": {}}}], "additionalItems": {}}}});
        for (pointer, _) in FlatSchema::new(Some(&schema)).nodes() {
            assert_eq!(SchemaPath::from_pointer(pointer).pointer(), pointer);
        }
    }

    #[track_caller]
    fn paths(schema: Value, style: PathStyle) -> Vec<String> {
        FlatSchema::new(Some(&schema)).nodes().map(|(p, _)| SchemaPath::from_pointer(p).render(style)).collect()
    }

    /// crdify `TestFlattenCRDVersion`.
    #[test]
    fn flattening_follows_every_schema_construct() {
        let basic = json!({"properties": {"spec": {"properties": {"fieldOne": {}, "fieldTwo": {}, "fieldThree": {"properties": {"subfield": {}}}}}}});
        assert_eq!(
            paths(basic, PathStyle::Verbose),
            ["^", "^.spec", "^.spec.fieldOne", "^.spec.fieldTwo", "^.spec.fieldThree", "^.spec.fieldThree.subfield"]
        );
        let field = |inner: Value| json!({"properties": {"spec": {"properties": {"fieldOne": inner}}}});
        let cases = [
            (
                json!({"items": {"properties": {"subfield": {}}}}),
                vec!["^.spec.fieldOne.items", "^.spec.fieldOne.items.subfield"],
            ),
            (
                json!({"items": [{"properties": {"subfield": {}}}]}),
                vec!["^.spec.fieldOne.items[0]", "^.spec.fieldOne.items[0].subfield"],
            ),
            (
                json!({"allOf": [{"properties": {"nested": {}}}]}),
                vec!["^.spec.fieldOne.allOf[0]", "^.spec.fieldOne.allOf[0].nested"],
            ),
            (
                json!({"anyOf": [{"properties": {"nested": {}}}]}),
                vec!["^.spec.fieldOne.anyOf[0]", "^.spec.fieldOne.anyOf[0].nested"],
            ),
            (
                json!({"oneOf": [{"properties": {"nested": {}}}]}),
                vec!["^.spec.fieldOne.oneOf[0]", "^.spec.fieldOne.oneOf[0].nested"],
            ),
            (json!({"not": {"properties": {"nested": {}}}}), vec!["^.spec.fieldOne.not", "^.spec.fieldOne.not.nested"]),
            (
                json!({"additionalProperties": {"properties": {"nested": {}}}}),
                vec!["^.spec.fieldOne.additionalProperties", "^.spec.fieldOne.additionalProperties.nested"],
            ),
            (
                json!({"patternProperties": {"pattern": {"properties": {"nested": {}}}}}),
                vec!["^.spec.fieldOne.patternProperties[pattern]", "^.spec.fieldOne.patternProperties[pattern].nested"],
            ),
            (
                json!({"additionalItems": {"properties": {"nested": {}}}}),
                vec!["^.spec.fieldOne.additionalItems", "^.spec.fieldOne.additionalItems.nested"],
            ),
            (
                json!({"definitions": {"thing": {"properties": {"nested": {}}}}}),
                vec!["^.spec.fieldOne.definitions[thing]", "^.spec.fieldOne.definitions[thing].nested"],
            ),
            (
                json!({"dependencies": {"dependencyOne": {"properties": {"nested": {}}}}}),
                vec![
                    "^.spec.fieldOne.dependencies[dependencyOne]",
                    "^.spec.fieldOne.dependencies[dependencyOne].nested",
                ],
            ),
        ];
        for (inner, expected) in cases {
            let all = paths(field(inner), PathStyle::Verbose);
            assert_eq!(&all[3..], expected.as_slice());
        }
    }

    #[test]
    fn wildcard_style_writes_items_and_maps_as_stars() {
        let schema = json!({"properties": {"ports": {"items": {"properties": {"name": {}}}}, "labels": {"additionalProperties": {"type": "string"}}}});
        assert_eq!(
            paths(schema, PathStyle::Wildcard),
            ["^", "^.ports", "^.ports[*]", "^.ports[*].name", "^.labels", "^.labels[*]"]
        );
    }

    #[test]
    fn properties_named_like_keywords_do_not_collide() {
        let schema = json!({"properties": {"items": {"properties": {"not": {}}}}});
        let flat = FlatSchema::new(Some(&schema));
        assert_eq!(flat.nodes().count(), 3);
        assert!(flat.contains("/properties/items/properties/not"));
    }

    #[test]
    fn go_zero_values_equal_absence() {
        let old =
            json!({"type": "string", "required": [], "nullable": false, "x-kubernetes-preserve-unknown-fields": false});
        let new = json!({"type": "string"});
        let diff = differing_keywords(old.as_object().unwrap(), new.as_object().unwrap());
        let keys: Vec<&str> = diff.iter().map(|(k, _, _)| *k).collect();
        assert_eq!(keys, ["x-kubernetes-preserve-unknown-fields"], "a pointer set to false differs from absent");
        let (one, one_point_zero) = (json!({"maximum": 1}), json!({"maximum": 1.0}));
        assert!(differing_keywords(one.as_object().unwrap(), one_point_zero.as_object().unwrap()).is_empty());
    }

    #[test]
    fn children_are_not_part_of_the_parent() {
        let old = json!({"type": "object", "properties": {"a": {"type": "string"}}, "items": {"type": "string"}});
        let new = json!({"type": "object", "properties": {"b": {}}});
        assert!(differing_keywords(old.as_object().unwrap(), new.as_object().unwrap()).is_empty());
    }
}
