//! `default`: adding, removing or changing a default changes what stored objects mean.

use serde_json::Value;

use crate::finding::Change;
use crate::schema::json_equal;

pub(super) fn compare(old: Option<&Value>, new: Option<&Value>) -> Option<Change> {
    match (old, new) {
        (None, Some(value)) => Some(Change::DefaultAdded { value: value.clone() }),
        (Some(value), None) => Some(Change::DefaultRemoved { value: value.clone() }),
        (Some(old), Some(new)) if !json_equal(old, new) => {
            Some(Change::DefaultChanged { old: old.clone(), new: new.clone() })
        }
        _ => None,
    }
}
