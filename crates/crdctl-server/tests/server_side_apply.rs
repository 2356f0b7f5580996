//! structured-merge-diff's merge test tables, run against the server's field manager.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

use std::collections::BTreeMap;

use crdctl_schema::Schema;
use crdctl_server::fieldmanager::{self, Scope, set};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct Case {
    name: String,
    schema: Value,
    ops: Vec<Op>,
    object: Value,
    managed: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
struct Op {
    op: String,
    manager: String,
    object: Value,
    #[serde(default)]
    conflicts: Vec<(String, String)>,
}

/// The fixtures' objects carry no metadata; the field manager keeps it in `metadata`.
fn with_metadata(object: &Value, managed: Option<&Value>) -> Value {
    let mut object = object.clone();
    let mut metadata = json!({"name": "fixture"});
    if let Some(managed) = managed {
        metadata["managedFields"] = managed.clone();
    }
    object["metadata"] = metadata;
    object
}

fn without_metadata(object: &Value) -> Value {
    let mut object = object.clone();
    object.as_object_mut().map(|o| o.remove("metadata"));
    object
}

#[test]
fn structured_merge_diff_tables() {
    let path = format!("{}/tests/upstream/structured_merge_diff.yaml", env!("CARGO_MANIFEST_DIR"));
    let cases: Vec<Case> = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(cases.len() >= 14, "the table lost cases");
    let mut problems = Vec::new();
    for case in &cases {
        let schema = Schema::new(&case.schema);
        let scope = Scope { schema: Some(&schema), api_version: "v1".into(), subresource: "", has_status: false };
        let mut state: Option<Value> = None;
        for (index, op) in case.ops.iter().enumerate() {
            let live = state.clone();
            match op.op.as_str() {
                "apply" | "force-apply" => {
                    let config = with_metadata(&op.object, None);
                    let force = op.op == "force-apply";
                    match fieldmanager::apply(live.as_ref(), &config, &scope, &op.manager, force, "t") {
                        Ok(merged) if op.conflicts.is_empty() => state = Some(merged),
                        Ok(_) => {
                            problems.push(format!("{} op {index}: expected conflicts {:?}", case.name, op.conflicts))
                        }
                        Err(conflicts) => {
                            if conflicts.fields() != op.conflicts.as_slice() {
                                problems.push(format!(
                                    "{} op {index}: conflicts {:?}, expected {:?}",
                                    case.name,
                                    conflicts.fields(),
                                    op.conflicts
                                ));
                            }
                        }
                    }
                }
                "update" => {
                    let managed = live.as_ref().and_then(|l| l.pointer("/metadata/managedFields"));
                    let mut new = with_metadata(&op.object, managed);
                    let others = fieldmanager::OtherVersions::default();
                    fieldmanager::record_update(live.as_ref(), &mut new, &scope, &op.manager, "t", &others);
                    state = Some(new);
                }
                other => panic!("{}: unknown op {other}", case.name),
            }
        }
        let state = state.unwrap_or_else(|| json!({}));
        if without_metadata(&state) != case.object {
            problems.push(format!("{}: object {}, expected {}", case.name, without_metadata(&state), case.object));
        }
        let managed: BTreeMap<String, Vec<String>> = state
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|entry| {
                let fields = set::Set::from_fields_v1(&entry["fieldsV1"]);
                let mut paths: Vec<String> = fields.paths().iter().map(|p| set::display(p)).collect();
                paths.sort();
                (entry["manager"].as_str().unwrap().to_string(), paths)
            })
            .collect();
        let expected: BTreeMap<String, Vec<String>> = case
            .managed
            .iter()
            .map(|(m, paths)| {
                (m.clone(), {
                    let mut p = paths.clone();
                    p.sort();
                    p
                })
            })
            .collect();
        if managed != expected {
            problems.push(format!("{}: managed {managed:?}, expected {expected:?}", case.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
