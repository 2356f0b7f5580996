//! `x-kubernetes-list-type` invariants: `set` items are unique, `map` items are objects with
//! unique keys. Upstream: apiextensions' `pkg/apiserver/schema/listtype/validation.go`.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{Additional, Schema};
use crdctl_model::field::Path;
use crdctl_model::field::{self, Raw};
use crdctl_model::go::{self, bad_value};

/// Every duplicate in a `set` or `map` list of `object`, reported at its second occurrence.
pub fn validate_list_types(object: &Value, schema: &Schema) -> field::ErrorList {
    let mut out = Vec::new();
    if let Value::Object(fields) = object
        && schema.has_list_types
    {
        walk_object(fields, schema, &Path::Root, &mut out);
    }
    out
}

fn walk_object(fields: &Map<String, Value>, schema: &Schema, loc: &Path, out: &mut field::ErrorList) {
    for (name, child) in fields {
        if let Some(Additional::Schema(additional)) = &schema.additional_properties {
            walk(child, additional, &loc.key(name), out);
        }
        if let Some(property) = schema.properties.get(name) {
            walk(child, property, &loc.child(name), out);
        }
    }
}

fn walk(value: &Value, schema: &Schema, loc: &Path, out: &mut field::ErrorList) {
    if !schema.has_list_types {
        return;
    }
    match value {
        Value::Object(fields) => walk_object(fields, schema, loc, out),
        Value::Array(items) => {
            match schema.list_type.as_deref() {
                Some("set") => {
                    for idx in second_occurrences(items) {
                        if let Some(item) = items.get(idx) {
                            out.push(duplicate(&loc.index(idx), item));
                        }
                    }
                }
                Some("map") => check_map(items, schema, loc, out),
                _ => {}
            }
            if let Some(item_schema) = &schema.items {
                for (idx, item) in items.iter().enumerate() {
                    walk(item, item_schema, &loc.index(idx), out);
                }
            }
        }
        _ => {}
    }
}

fn duplicate(loc: &Path, value: &Value) -> field::Error {
    loc.duplicate(Raw(bad_value(value)))
}

/// The identity upstream's set check uses: scalars by Go value (an `int64` is not a
/// `float64`), compounds by their JSON.
fn identity(value: &Value) -> String {
    match value {
        Value::Number(n) if n.is_f64() => format!("f{n}"),
        Value::Number(n) => format!("i{n}"),
        Value::String(s) => format!("s{s}"),
        other => format!("j{}", go::json(other)),
    }
}

/// The index of each value's second occurrence.
fn second_occurrences(items: &[Value]) -> Vec<usize> {
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(items.len());
    let mut out = Vec::new();
    for (idx, item) in items.iter().enumerate() {
        let times = seen.entry(identity(item)).or_insert(0);
        *times = times.saturating_add(1);
        if *times == 2 {
            out.push(idx);
        }
    }
    out
}

fn check_map(items: &[Value], schema: &Schema, loc: &Path, out: &mut field::ErrorList) {
    if let Some((idx, item)) = items.iter().enumerate().find(|(_, item)| !item.is_null() && !item.is_object()) {
        let loc = loc.index(idx);
        out.push(loc.invalid(Raw(bad_value(item)), "must be an object for an array of list-type map"));
        return;
    }
    if items.len() <= 1 {
        return;
    }
    // An item without a key field has an "unspecified" key, equal to every other unspecified one.
    let keys: Vec<Value> = items
        .iter()
        .map(|item| {
            let fields = item.as_object();
            let key: Map<String, Value> = schema
                .list_map_keys
                .iter()
                .filter_map(|name| fields.and_then(|f| f.get(name)).map(|v| (name.clone(), v.clone())))
                .collect();
            Value::Object(key)
        })
        .collect();
    let identities: Vec<Value> = if let [name] = schema.list_map_keys.as_slice() {
        keys.iter().map(|key| key.get(name).cloned().unwrap_or(Value::Object(Map::new()))).collect()
    } else {
        keys.clone()
    };
    for idx in second_occurrences(&identities) {
        if let Some(key) = keys.get(idx) {
            out.push(duplicate(&loc.index(idx), key));
        }
    }
}
