//! Field sets, comparison, merging and removal guided by a CRD version's schema, as
//! structured-merge-diff's `typed` package does them: objects are granular maps unless
//! `x-kubernetes-map-type: atomic`; lists are atomic unless `x-kubernetes-list-type` is `set`
//! (items by value) or `map` (items by their `x-kubernetes-list-map-keys`); nodes without a
//! schema (`x-kubernetes-preserve-unknown-fields`) are deduced: maps granular, lists atomic.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use crdctl_schema::{Additional, Schema};
use serde_json::{Map, Value, json};

use super::set::{Element, Set};

/// `metadata` as every object has it, whatever the CRD's schema says.
static OBJECT_META: LazyLock<Schema> = LazyLock::new(|| {
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    Schema::new(&json!({"type": "object", "properties": {
        "labels": string_map, "annotations": string_map,
        "finalizers": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ownerReferences": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"],
            "items": {"type": "object", "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"},
                "uid": {"type": "string"}, "controller": {"type": "boolean"}, "blockOwnerDeletion": {"type": "boolean"}}}},
        "name": {"type": "string"}, "generateName": {"type": "string"}, "namespace": {"type": "string"},
        "uid": {"type": "string"}, "resourceVersion": {"type": "string"}, "generation": {"type": "integer"},
        "creationTimestamp": {"type": "string"}, "deletionTimestamp": {"type": "string"},
        "deletionGracePeriodSeconds": {"type": "integer"}, "selfLink": {"type": "string"},
        "managedFields": {"type": "array"},
    }}))
});

/// How a node is owned and merged.
enum Shape<'a> {
    /// Owned and replaced whole: scalars, atomic lists and maps.
    Leaf,
    /// A granular map: each field on its own.
    Map(Option<&'a Schema>),
    /// A `map` list: items by key.
    Keyed(&'a [String], Option<&'a Schema>),
    /// A `set` list: items by value.
    Set,
}

fn shape<'a>(schema: Option<&'a Schema>, value: &Value) -> Shape<'a> {
    match value {
        Value::Object(_) if schema.is_some_and(|s| s.map_type.as_deref() == Some("atomic")) => Shape::Leaf,
        Value::Object(_) => Shape::Map(schema),
        Value::Array(_) => match schema {
            Some(s) if s.list_type.as_deref() == Some("map") && !s.list_map_keys.is_empty() => {
                Shape::Keyed(&s.list_map_keys, s.items.as_deref())
            }
            Some(s) if s.list_type.as_deref() == Some("set") => Shape::Set,
            _ => Shape::Leaf,
        },
        _ => Shape::Leaf,
    }
}

/// A field's schema, and whether the field is declared (a property, not a map entry).
fn field<'a>(schema: Option<&'a Schema>, name: &str, root: bool) -> (Option<&'a Schema>, bool) {
    if root && name == "metadata" {
        return (Some(&OBJECT_META), true);
    }
    let Some(schema) = schema else { return (None, false) };
    if let Some(property) = schema.properties.get(name) {
        return (Some(property), true);
    }
    match &schema.additional_properties {
        Some(Additional::Schema(additional)) => (Some(additional), false),
        _ => (None, false),
    }
}

fn field_element(name: &str) -> Element {
    let mut element = String::with_capacity(name.len() + 2);
    element.push_str("f:");
    element.push_str(name);
    element
}

/// A list item's element: `k:{"name":"http"}` (key fields sorted) or `v:"value"`. A key field
/// the item lacks counts with its schema's default, as structured-merge-diff keys it (a Service
/// port applied without `protocol` is the stored one with `protocol: TCP`).
fn item_element(item: &Value, keys: Option<&[String]>, items_schema: Option<&Schema>) -> Element {
    match keys {
        Some(keys) => {
            let default = |k: &String| items_schema?.properties.get(k)?.default.as_ref();
            let key: BTreeMap<&str, &Value> =
                keys.iter().filter_map(|k| item.get(k).or_else(|| default(k)).map(|v| (k.as_str(), v))).collect();
            format!("k:{}", serde_json::to_string(&key).unwrap_or_default())
        }
        None => format!("v:{}", serde_json::to_string(item).unwrap_or_default()),
    }
}

/// The items of a list by element, first occurrence of each.
fn index<'v>(items: &'v [Value], keys: Option<&[String]>, items_schema: Option<&Schema>) -> Vec<(Element, &'v Value)> {
    let mut out: Vec<(Element, &Value)> = Vec::with_capacity(items.len());
    for item in items {
        let element = item_element(item, keys, items_schema);
        if !out.iter().any(|(e, _)| *e == element) {
            out.push((element, item));
        }
    }
    out
}

/// Every field path `value` sets (upstream's `ToFieldSet`).
pub fn field_set(value: &Value, schema: Option<&Schema>) -> Set {
    let mut set = Set::default();
    walk_set(value, schema, true, &mut Vec::new(), &mut set);
    set
}

fn walk_set(value: &Value, schema: Option<&Schema>, root: bool, path: &mut Vec<Element>, set: &mut Set) {
    match (shape(schema, value), value) {
        (Shape::Map(schema), Value::Object(fields)) => {
            for (name, child) in fields {
                let (child_schema, declared) = field(schema, name, root);
                path.push(field_element(name));
                walk_set(child, child_schema, false, path, set);
                let empty_map = child.as_object().is_some_and(Map::is_empty);
                if child.is_null() || empty_map || !declared {
                    set.insert(path);
                }
                path.pop();
            }
        }
        (Shape::Keyed(keys, items_schema), Value::Array(items)) => {
            for (element, item) in index(items, Some(keys), items_schema) {
                path.push(element);
                walk_set(item, items_schema, false, path, set);
                set.insert(path);
                path.pop();
            }
        }
        (Shape::Set, Value::Array(items)) => {
            for (element, _) in index(items, None, None) {
                path.push(element);
                set.insert(path);
                path.pop();
            }
        }
        _ if !path.is_empty() => set.insert(path),
        _ => {}
    }
}

/// What changed between two versions of an object (upstream's `Comparison`).
#[derive(Debug, Default)]
pub struct Comparison {
    /// Paths only in the new object.
    pub added: Set,
    /// Leaves in both with different values.
    pub modified: Set,
    /// Paths only in the old object.
    pub removed: Set,
}

/// Compares two versions of an object.
pub fn compare(old: &Value, new: &Value, schema: Option<&Schema>) -> Comparison {
    let mut comparison = Comparison::default();
    walk_compare(Some(old), Some(new), schema, true, &mut Vec::new(), &mut comparison);
    comparison
}

fn walk_compare(
    old: Option<&Value>,
    new: Option<&Value>,
    schema: Option<&Schema>,
    root: bool,
    path: &mut Vec<Element>,
    out: &mut Comparison,
) {
    // A node only on one side is added or removed whole: built as a tree, then grafted.
    match (old, new) {
        (None, Some(added)) if !root => return out.added.graft(path, every_path(added, schema)),
        (Some(removed), None) if !root => return out.removed.graft(path, every_path(removed, schema)),
        _ => {}
    }
    let Some(probe) = new.or(old) else { return };
    let same_kind = match (old, new) {
        (Some(a), Some(b)) => std::mem::discriminant(a) == std::mem::discriminant(b),
        _ => true,
    };
    match (shape(schema, probe), same_kind) {
        (Shape::Map(schema), true) => {
            let empty = Map::new();
            let old_fields = old.and_then(Value::as_object).unwrap_or(&empty);
            let new_fields = new.and_then(Value::as_object).unwrap_or(&empty);
            let names = old_fields.keys().chain(new_fields.keys().filter(|k| !old_fields.contains_key(*k)));
            for name in names {
                let (child_schema, _) = field(schema, name, root);
                path.push(field_element(name));
                walk_compare(old_fields.get(name), new_fields.get(name), child_schema, false, path, out);
                path.pop();
            }
        }
        (Shape::Keyed(keys, items_schema), true) => compare_items(old, new, Some(keys), items_schema, path, out),
        (Shape::Set, true) => compare_items(old, new, None, None, path, out),
        // Leaves, and nodes whose type changed, compare whole.
        _ => {
            if let (Some(a), Some(b)) = (old, new)
                && a != b
                && !path.is_empty()
            {
                out.modified.insert(path);
            }
        }
    }
    if path.is_empty() {
        return;
    }
    match (old, new) {
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        _ => {}
    }
}

/// Every path below `value` (a node not in the other object), as [`walk_compare`] finds them
/// when one side is missing.
fn every_path(value: &Value, schema: Option<&Schema>) -> Set {
    let mut set = Set::default();
    match (shape(schema, value), value) {
        (Shape::Map(schema), Value::Object(fields)) => {
            for (name, child) in fields {
                let (child_schema, _) = field(schema, name, false);
                set.put(field_element(name), every_path(child, child_schema));
            }
        }
        (Shape::Keyed(keys, items_schema), Value::Array(items)) => {
            for (element, item) in index(items, Some(keys), items_schema) {
                set.put(element, every_path(item, items_schema));
            }
        }
        (Shape::Set, Value::Array(items)) => {
            for (element, item) in index(items, None, None) {
                set.put(element, every_path(item, None));
            }
        }
        _ => {}
    }
    set
}

fn compare_items(
    old: Option<&Value>,
    new: Option<&Value>,
    keys: Option<&[String]>,
    items_schema: Option<&Schema>,
    path: &mut Vec<Element>,
    out: &mut Comparison,
) {
    let no_items = Vec::new();
    let old_items = index(old.and_then(Value::as_array).unwrap_or(&no_items), keys, items_schema);
    let new_items = index(new.and_then(Value::as_array).unwrap_or(&no_items), keys, items_schema);
    fn find<'v>(items: &[(Element, &'v Value)], element: &str) -> Option<&'v Value> {
        items.iter().find(|(e, _)| e == element).map(|(_, v)| *v)
    }
    let mut elements: Vec<&Element> = old_items.iter().map(|(e, _)| e).collect();
    elements.extend(new_items.iter().map(|(e, _)| e).filter(|e| find(&old_items, e).is_none()));
    for element in elements {
        path.push(element.clone());
        walk_compare(find(&old_items, element), find(&new_items, element), items_schema, false, path, out);
        path.pop();
    }
}

/// Merges an applied configuration into the live object: the configuration wins on leaves,
/// maps and keyed lists merge field by field and item by item (upstream's `Merge`).
pub fn merge(live: &Value, config: &Value, schema: Option<&Schema>) -> Value {
    merge_node(live, config, schema, true)
}

fn merge_node(live: &Value, config: &Value, schema: Option<&Schema>, root: bool) -> Value {
    if std::mem::discriminant(live) != std::mem::discriminant(config) {
        return config.clone();
    }
    match (shape(schema, config), live, config) {
        (Shape::Map(schema), Value::Object(live_fields), Value::Object(config_fields)) => {
            let mut out = live_fields.clone();
            for (name, value) in config_fields {
                let (child_schema, _) = field(schema, name, root);
                let merged = match live_fields.get(name) {
                    Some(current) => merge_node(current, value, child_schema, false),
                    None => value.clone(),
                };
                out.insert(name.clone(), merged);
            }
            Value::Object(out)
        }
        (Shape::Keyed(keys, items_schema), Value::Array(live_items), Value::Array(config_items)) => {
            Value::Array(merge_items(live_items, config_items, Some(keys), items_schema))
        }
        (Shape::Set, Value::Array(live_items), Value::Array(config_items)) => {
            Value::Array(merge_items(live_items, config_items, None, None))
        }
        _ => config.clone(),
    }
}

/// Merges two keyed lists in upstream's order: items of the configuration in its order, the
/// live object's other items kept where they stood relative to the shared ones.
fn merge_items(live: &[Value], config: &[Value], keys: Option<&[String]>, items_schema: Option<&Schema>) -> Vec<Value> {
    let live_items = index(live, keys, items_schema);
    let config_items = index(config, keys, items_schema);
    let in_config = |element: &str| config_items.iter().find(|(e, _)| e == element).map(|(_, v)| *v);
    let in_live = |element: &str| live_items.iter().find(|(e, _)| e == element).map(|(_, v)| *v);
    let mut shared: std::collections::VecDeque<&Element> =
        config_items.iter().map(|(e, _)| e).filter(|e| in_live(e).is_some()).collect();
    let mut next_shared = shared.pop_front();
    let mut merged_config: Vec<&Element> = Vec::new();
    let mut out = Vec::with_capacity(live_items.len().max(config_items.len()));
    let merge_item = |element: &str| -> Value {
        match (in_live(element), in_config(element)) {
            (Some(l), Some(c)) => merge_node(l, c, items_schema, false),
            (Some(l), None) => l.clone(),
            (None, Some(c)) => c.clone(),
            (None, None) => Value::Null,
        }
    };
    let (mut li, mut ri) = (0, 0);
    loop {
        let (live, config) = (live_items.get(li).map(|(e, _)| e), config_items.get(ri).map(|(e, _)| e));
        if live.is_none() && config.is_none() {
            break;
        }
        if let (Some(element), Some(config_element)) = (live, config) {
            if element == config_element {
                merged_config.push(element);
                out.push(merge_item(element));
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if in_config(element).is_some() && next_shared.is_some_and(|n| n != element) {
                li += 1;
                continue;
            }
        }
        if let Some(element) = live {
            if in_config(element).is_none() {
                out.push(merge_item(element));
                li += 1;
                continue;
            } else if merged_config.contains(&element) {
                li += 1;
            }
        }
        if let Some(element) = config {
            merged_config.push(element);
            out.push(merge_item(element));
            ri += 1;
            if next_shared.is_some_and(|n| n == element) {
                next_shared = shared.pop_front();
            }
        }
    }
    out
}

/// Marks every named field that has owned fields below it as owned itself (upstream's
/// `EnsureNamedFieldsAreMembers`), so that removing a manager's fields can remove the maps
/// that held only them.
pub fn with_named_fields_as_members(set: &Set) -> Set {
    let mut out = Set::default();
    for path in set.paths() {
        let mut prefix = Vec::with_capacity(path.len());
        for (depth, element) in path.iter().enumerate() {
            prefix.push(element.clone());
            if depth + 1 == path.len() || element.starts_with("f:") {
                out.insert(&prefix);
            }
        }
    }
    out
}

/// Removes from `value` what `remove` holds, keeping whatever `owned` still holds below it.
pub fn remove(value: &mut Value, remove: &Set, owned: &Set, schema: Option<&Schema>) {
    remove_node(value, remove, owned, schema, true);
}

fn remove_node(value: &mut Value, remove: &Set, owned: &Set, schema: Option<&Schema>, root: bool) {
    let empty = Set::default();
    match (shape(schema, value), value) {
        (Shape::Map(schema), Value::Object(fields)) => {
            let mut dropped = Vec::new();
            for (name, child) in fields.iter_mut() {
                let element = field_element(name);
                let Some((member, below)) = remove.child(&element) else { continue };
                let (owned_member, owned_below) = owned.child(&element).unwrap_or((false, &empty));
                if member && !owned_member && owned_below.is_empty() {
                    dropped.push(name.clone());
                } else {
                    let (child_schema, _) = field(schema, name, root);
                    remove_node(child, below, owned_below, child_schema, false);
                }
            }
            for name in dropped {
                fields.shift_remove(&name);
            }
        }
        (shape @ (Shape::Keyed(..) | Shape::Set), Value::Array(items)) => {
            let (keys, items_schema) = match shape {
                Shape::Keyed(keys, items_schema) => (Some(keys), items_schema),
                _ => (None, None),
            };
            items.retain_mut(|item| {
                let element = item_element(item, keys, items_schema);
                let Some((member, below)) = remove.child(&element) else { return true };
                let (owned_member, owned_below) = owned.child(&element).unwrap_or((false, &empty));
                if member && !owned_member && owned_below.is_empty() {
                    return false;
                }
                remove_node(item, below, owned_below, items_schema, false);
                true
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::new(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "args": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }}
        }}))
    }

    #[test]
    fn field_sets_follow_list_and_map_types() {
        let object = json!({"spec": {"replicas": 1, "ports": [{"name": "http", "port": 80}], "tags": ["a"], "args": ["x"], "labels": {"k": "v"}}});
        let set = field_set(&object, Some(&schema()));
        assert_eq!(
            set.to_fields_v1(),
            json!({"f:spec": {"f:args": {}, "f:labels": {"f:k": {}}, "f:ports": {"k:{\"name\":\"http\"}": {".": {}, "f:name": {}, "f:port": {}}}, "f:replicas": {}, "f:tags": {"v:\"a\"": {}}}})
        );
    }

    #[test]
    fn merge_keeps_live_items_and_replaces_atomic_lists() {
        let live = json!({"spec": {"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}], "args": ["x", "y"], "tags": ["t1"]}});
        let config = json!({"spec": {"ports": [{"name": "b", "port": 3}, {"name": "c", "port": 4}], "args": ["z"], "tags": ["t2"]}});
        let merged = merge(&live, &config, Some(&schema()));
        assert_eq!(
            merged,
            json!({"spec": {"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 3}, {"name": "c", "port": 4}], "args": ["z"], "tags": ["t1", "t2"]}})
        );
    }

    #[test]
    fn a_node_on_one_side_only_is_added_or_removed_with_every_path_below_it() {
        let object = json!({"spec": {"replicas": 1, "ports": [{"name": "http", "port": 80}], "tags": ["a"], "args": ["x"], "labels": {"k": "v"}}});
        let every_node = json!({"f:spec": {".": {}, "f:args": {}, "f:labels": {".": {}, "f:k": {}},
            "f:ports": {".": {}, "k:{\"name\":\"http\"}": {".": {}, "f:name": {}, "f:port": {}}},
            "f:replicas": {}, "f:tags": {".": {}, "v:\"a\"": {}}}});
        let created = compare(&json!({}), &object, Some(&schema()));
        assert_eq!(created.added.to_fields_v1(), every_node);
        assert!(created.modified.is_empty() && created.removed.is_empty());
        let deleted = compare(&object, &json!({}), Some(&schema()));
        assert_eq!(deleted.removed.to_fields_v1(), every_node);
        assert!(deleted.modified.is_empty() && deleted.added.is_empty());
    }

    #[test]
    fn compare_reports_leaves() {
        let old = json!({"spec": {"replicas": 1, "ports": [{"name": "a", "port": 1}]}});
        let new = json!({"spec": {"replicas": 2, "ports": [{"name": "b", "port": 1}]}});
        let comparison = compare(&old, &new, Some(&schema()));
        let shown = |set: &Set| set.paths().iter().map(|p| super::super::set::display(p)).collect::<Vec<_>>();
        assert_eq!(shown(&comparison.modified), [".spec.replicas"]);
        assert_eq!(
            shown(&comparison.added),
            [".spec.ports[name=\"b\"]", ".spec.ports[name=\"b\"].name", ".spec.ports[name=\"b\"].port"]
        );
        assert_eq!(
            shown(&comparison.removed),
            [".spec.ports[name=\"a\"]", ".spec.ports[name=\"a\"].name", ".spec.ports[name=\"a\"].port"]
        );
    }
}
