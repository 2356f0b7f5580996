//! `required`: a newly required field rejects objects that lack it. Removals are fine.

use serde_json::Value;

use crate::finding::Change;

pub(super) fn compare(old: Option<&Value>, new: Option<&Value>) -> Option<Change> {
    let names = |value: Option<&Value>| -> Vec<String> {
        value.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
    };
    let old = names(old);
    let mut added: Vec<String> = names(new).into_iter().filter(|name| !old.contains(name)).collect();
    added.dedup();
    (!added.is_empty()).then_some(Change::RequiredAdded { fields: added })
}
