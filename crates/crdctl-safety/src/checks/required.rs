//! `required`: a newly required field rejects objects that lack it. Removals are fine.

use serde_json::Value;

use crate::finding::Change;

pub(super) fn compare(old: Option<&Value>, new: Option<&Value>) -> Option<Change> {
    let names = |value: Option<&Value>| -> Vec<String> {
        value.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
    };
    let old = names(old);
    let mut added: Vec<String> = names(new).into_iter().filter(|name| !old.contains(name)).collect();
    // Sorted and unique, as crdify's `sets.List` (a repeated name need not be adjacent).
    added.sort_unstable();
    added.dedup();
    (!added.is_empty()).then_some(Change::RequiredAdded { fields: added })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Issue 11, defect 8: sorted and unique, though the new list repeats a name apart.
    #[test]
    fn added_fields_are_sorted_and_unique() {
        let change = compare(Some(&json!(["a"])), Some(&json!(["c", "b", "c", "a"])));
        assert_eq!(change, Some(Change::RequiredAdded { fields: vec!["b".into(), "c".into()] }));
    }
}
