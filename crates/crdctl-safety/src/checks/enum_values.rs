//! `enum`: restricting values (a new enum, or fewer values) rejects stored objects. Adding
//! values is allowed unless the configuration says otherwise. Only the first matching case
//! is reported, as crdify does.

use serde_json::Value;

use crate::config::{Config, Policy};
use crate::dialect::go::json_text;
use crate::finding::Change;

pub(super) fn compare(old: Option<&Value>, new: Option<&Value>, config: &Config) -> Option<Change> {
    let values = |value: Option<&Value>| -> Vec<(String, Value)> {
        let mut values: Vec<(String, Value)> =
            value.and_then(Value::as_array).into_iter().flatten().map(|v| (json_text(v), v.clone())).collect();
        values.sort_by(|a, b| a.0.cmp(&b.0));
        values.dedup_by(|a, b| a.0 == b.0);
        values
    };
    let (old, new) = (values(old), values(new));
    let missing_from = |from: &[(String, Value)], other: &[(String, Value)]| -> Vec<Value> {
        from.iter().filter(|(text, _)| !other.iter().any(|(t, _)| t == text)).map(|(_, v)| v.clone()).collect()
    };
    if old.is_empty() && !new.is_empty() {
        return Some(Change::EnumRestricted { values: new.into_iter().map(|(_, v)| v).collect() });
    }
    let removed = missing_from(&old, &new);
    if !removed.is_empty() {
        return Some(Change::EnumValuesRemoved { values: removed });
    }
    let added = missing_from(&new, &old);
    (!added.is_empty() && config.enum_addition == Policy::Disallow).then_some(Change::EnumValuesAdded { values: added })
}
