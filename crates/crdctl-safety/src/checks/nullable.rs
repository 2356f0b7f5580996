//! `nullable`: clients may break on new nulls, and stored nulls break when it is removed;
//! each direction can be allowed by configuration.

use serde_json::Value;

use crate::config::{Config, Policy};
use crate::finding::Change;

pub(super) fn compare(old: Option<&Value>, new: Option<&Value>, config: &Config) -> Option<Change> {
    let is_true = |v: Option<&Value>| v.and_then(Value::as_bool).unwrap_or(false);
    match (is_true(old), is_true(new)) {
        (false, true) if config.nullable_addition == Policy::Disallow => {
            Some(Change::NullableChanged { now_nullable: true })
        }
        (true, false) if config.nullable_removal == Policy::Disallow => {
            Some(Change::NullableChanged { now_nullable: false })
        }
        _ => None,
    }
}
