//! Upstream's strategic merge patch test tables (`tests/upstream/strategicpatch`, from
//! apimachinery's `pkg/util/strategicpatch/patch_test.go`), applied as the API server applies a
//! patch: each case's two-way patch to its original, and its three-way patch to the current
//! object. The schema is upstream's test schema (`swagger-merge-item-v3.json`, whose
//! `mergeItem` refers to itself), compiled by [`Schema::new`] like a built-in kind's.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

use std::path::Path;

use crdctl_schema::Schema;
use crdctl_schema::strategic_merge::{self, Status};
use serde_json::{Map, Value, json};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/strategicpatch");

/// Nesting of `mergeItem` kept when its references to itself are inlined: deeper than any case.
const DEPTH: usize = 4;

/// Inlines `$ref`s (alone or in a one-element `allOf`, whose siblings stay) down to `DEPTH`.
fn inline(components: &Map<String, Value>, node: &Value, depth: usize) -> Value {
    let Some(fields) = node.as_object() else { return node.clone() };
    let wrapped = fields.get("allOf").and_then(|all| all.get(0));
    let reference = fields.get("$ref").or_else(|| wrapped?.get("$ref")).and_then(Value::as_str);
    if let Some(name) = reference.and_then(|r| r.strip_prefix("#/components/schemas/")) {
        if depth == DEPTH {
            return json!({});
        }
        let mut resolved = inline(components, &components[name], depth + 1);
        for (key, value) in fields.iter().filter(|(k, _)| !matches!(k.as_str(), "allOf" | "$ref")) {
            resolved[key] = value.clone();
        }
        return resolved;
    }
    let mut out = Map::new();
    for (key, value) in fields {
        let value = match key.as_str() {
            "properties" => Value::Object(
                value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), inline(components, v, depth)))
                    .collect(),
            ),
            "items" | "additionalProperties" if value.is_object() => inline(components, value, depth),
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

fn merge_item_schema() -> Schema {
    let text = std::fs::read_to_string(Path::new(DATA).join("swagger-merge-item-v3.json")).unwrap();
    let document: Value = serde_json::from_str(&text).unwrap();
    let components = document["components"]["schemas"].as_object().unwrap();
    Schema::new(&inline(components, &components["mergeItem"], 0))
}

/// One upstream case.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    description: String,
    original: Option<Value>,
    two_way: Option<Value>,
    modified: Option<Value>,
    two_way_result: Option<Value>,
    current: Option<Value>,
    three_way: Option<Value>,
    result: Option<Value>,
    expected_error: Option<String>,
}

fn cases(file: &str) -> Vec<Case> {
    let text = std::fs::read_to_string(Path::new(DATA).join(file)).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|err| panic!("{file}: {err}"))
}

fn object(value: Option<&Value>) -> Map<String, Value> {
    value.and_then(Value::as_object).cloned().unwrap_or_default()
}

/// Upstream's `sortMergeListsByName`, which its tests apply to the inputs and expected results
/// of the tables written as YAML structures (whose lists it merges out of order): merging lists
/// sorted by merge key (scalars sorted and deduplicated), recursively.
fn sorted(value: &Value, schema: Option<&Schema>) -> Value {
    let Value::Object(fields) = value else { return value.clone() };
    let mut out = Map::new();
    for (key, field) in fields {
        let child = schema.and_then(|s| s.properties.get(key));
        let sorted_field = match field {
            Value::Array(items) if key == "$retainKeys" || key.starts_with("$deleteFromPrimitiveList") => {
                Value::Array(sorted_scalars(items))
            }
            Value::Object(_) if !key.starts_with('$') => sorted(field, child),
            Value::Array(items) if !key.starts_with('$') && child.is_some_and(|c| has_strategy(c, "merge")) => {
                let items_schema = child.and_then(|c| c.items.as_deref());
                match child.and_then(|c| c.patch_merge_key.as_deref()) {
                    _ if items.iter().all(|i| !i.is_object()) => Value::Array(sorted_scalars(items)),
                    Some(merge_key) => {
                        let mut items: Vec<Value> = items.iter().map(|i| sorted(i, items_schema)).collect();
                        items.sort_by_key(|i| go_string(&i[merge_key]));
                        Value::Array(items)
                    }
                    None => field.clone(),
                }
            }
            _ => field.clone(),
        };
        out.insert(key.clone(), sorted_field);
    }
    Value::Object(out)
}

fn has_strategy(schema: &Schema, strategy: &str) -> bool {
    schema.patch_strategies.iter().any(|s| s == strategy)
}

fn sorted_scalars(items: &[Value]) -> Vec<Value> {
    let mut unique: Vec<Value> = Vec::new();
    for item in items {
        if !unique.contains(item) {
            unique.push(item.clone());
        }
    }
    unique.sort_by_key(go_string);
    unique
}

fn go_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".into(),
        other => other.to_string(),
    }
}

/// Applies every case of `file`; returns the failures, one line each.
fn run(file: &str, schema: &Schema, sort: bool) -> Vec<String> {
    let prepare = |value: Option<&Value>| -> Option<Value> {
        let value = value?;
        Some(if sort { sorted(value, Some(schema)) } else { value.clone() })
    };
    let mut failures = Vec::new();
    for case in cases(file) {
        let two_way = (
            "TwoWay",
            prepare(case.original.as_ref()),
            prepare(case.two_way.as_ref()),
            prepare(case.two_way_result.as_ref().or(case.modified.as_ref())),
        );
        let three_way = (
            "ThreeWay",
            prepare(case.current.as_ref()),
            prepare(case.three_way.as_ref()),
            prepare(case.result.as_ref()),
        );
        for (direction, original, patch, expected) in [two_way, three_way] {
            let Some(patch) = patch else { continue };
            let name = format!("{file}: {}/{direction}", case.description);
            let outcome = strategic_merge::apply(object(original.as_ref()), object(Some(&patch)), schema);
            match (outcome, &case.expected_error, expected) {
                (Err(err), Some(wanted), _) if err.message.contains(wanted.as_str()) => {}
                (Ok(result), None, Some(expected)) if Value::Object(result.clone()) == expected => {}
                (Ok(_), None, None) => {}
                (outcome, wanted, expected) => failures.push(format!(
                    "{name}\n  patch:    {patch}\n  got:      {outcome:?}\n  expected: {}",
                    wanted.as_deref().map_or_else(|| format!("{expected:?}"), |w| format!("error containing {w:?}"))
                )),
            }
        }
    }
    failures
}

#[test]
fn upstream_tables_apply_as_upstream_applies_them() {
    let schema = merge_item_schema();
    let mut failures = Vec::new();
    for (file, sort) in [
        ("custom.yaml", true),
        ("custom-raw.yaml", false),
        ("create.yaml", true),
        ("raw.yaml", false),
        ("raw-extension.yaml", false),
        ("unknown-field.yaml", false),
    ] {
        failures.extend(run(file, &schema, sort));
    }
    assert!(failures.is_empty(), "{} cases fail:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn bad_patches_get_upstream_texts_and_statuses() {
    let schema = merge_item_schema();
    let apply = |original: Value, patch: Value| {
        strategic_merge::apply(object(Some(&original)), object(Some(&patch)), &schema).unwrap_err()
    };
    let cases = [
        (
            json!({"mergingList": [{"name": "a"}]}),
            json!({"mergingList": [{"value": "b"}]}),
            Status::Internal,
            "map: map[value:b] does not contain declared merge key: name",
        ),
        (
            json!({"mergeItemPtr": {"name": "a"}}),
            json!({"mergeItemPtr": {"$patch": "explode", "name": "a"}}),
            Status::Internal,
            "unknown patch type: explode in map: map[$patch:explode name:a]",
        ),
        (
            json!({"mergingList": [{"name": "a"}]}),
            json!({"mergingList": [{"name": "a", "$patch": "merge"}]}),
            Status::Internal,
            "merging lists cannot yet be specified in the patch",
        ),
        (json!({}), json!({"$retainKeys": "name"}), Status::BadRequest, "invalid patch format of retainKeys"),
        (
            json!({}),
            json!({"$retainKeys": ["name"], "value": "x"}),
            Status::BadRequest,
            "invalid patch format of retainKeys",
        ),
        (
            json!({}),
            json!({"$setElementOrder": []}),
            Status::BadRequest,
            "invalid patch format of setElementOrder list",
        ),
        (
            json!({"mergingIntList": [1]}),
            json!({"$deleteFromPrimitiveList": [1]}),
            Status::BadRequest,
            "invalid patch format of primitive list",
        ),
        (
            json!({"mergingIntList": [[1]]}),
            json!({"mergingIntList": [[2]]}),
            Status::Unprocessable,
            "lists of lists are not supported",
        ),
        (
            json!({"mergingIntList": [1]}),
            json!({"mergingIntList": ["two"]}),
            Status::Internal,
            "list element types are not identical: [[1] [two]]",
        ),
    ];
    for (original, patch, status, message) in cases {
        let err = apply(original, patch.clone());
        assert_eq!((err.status, err.message.as_str()), (status, message), "{patch}");
    }
}
