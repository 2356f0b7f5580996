//! `oneOf`: alternatives are compared as sets, ignoring description, title, example and
//! externalDocs. A new oneOf, or removed alternatives, can reject stored objects.

use serde_json::{Map, Value};

use crate::config::{Config, Policy};
use crate::dialect::go::json_text;
use crate::finding::Change;

/// Keywords that do not change what a subschema accepts.
const DOCUMENTATION: [&str; 4] = ["description", "title", "example", "externalDocs"];

pub(super) fn compare(old: &Map<String, Value>, new: &Map<String, Value>, config: &Config) -> Option<Change> {
    let (old_set, new_set) = (alternatives(old), alternatives(new));
    let minus = |a: &[String], b: &[String]| -> Vec<String> { a.iter().filter(|s| !b.contains(s)).cloned().collect() };
    if old_set.is_empty() && !new_set.is_empty() {
        if config.one_of_addition == Policy::Disallow {
            return Some(Change::OneOfAdded { schemas: new_set, old_schema_lost: false });
        }
        let mut old_node = old.clone();
        old_node.remove("oneOf");
        let preserved = new_set.contains(&normalized(&old_node));
        return (!preserved).then_some(Change::OneOfAdded { schemas: new_set, old_schema_lost: true });
    }
    let removed = minus(&old_set, &new_set);
    if !removed.is_empty() && config.one_of_removal == Policy::Disallow {
        return Some(Change::OneOfSchemasRemoved { schemas: removed });
    }
    let added = minus(&new_set, &old_set);
    (!added.is_empty() && config.one_of_addition == Policy::Disallow)
        .then_some(Change::OneOfSchemasAdded { schemas: added })
}

/// The node's oneOf alternatives as canonical JSON, sorted and de-duplicated.
fn alternatives(node: &Map<String, Value>) -> Vec<String> {
    let mut set: Vec<String> = node
        .get("oneOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .map(normalized)
        .collect();
    set.sort();
    set.dedup();
    set
}

fn normalized(schema: &Map<String, Value>) -> String {
    let mut schema = schema.clone();
    for key in DOCUMENTATION {
        schema.remove(key);
    }
    json_text(&Value::Object(schema))
}
