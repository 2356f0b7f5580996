//! The min and max families: a new bound, a lower maximum or a higher minimum rejects stored
//! objects. Removing a bound, raising a maximum or lowering a minimum is fine.

use serde_json::Value;

use crate::finding::{Bound, Change, KeywordChange};

pub(super) fn compare(bound: Bound, old: Option<&Value>, new: Option<&Value>) -> Option<Change> {
    match (old, new) {
        (None, Some(value)) => Some(Change::BoundAdded { bound, value: value.clone() }),
        (Some(old_value), Some(new_value)) => match (old_value.as_f64(), new_value.as_f64()) {
            (Some(a), Some(b)) => {
                let tighter = if bound.is_lower_bound() { b > a } else { b < a };
                tighter.then(|| Change::BoundTightened { bound, old: old_value.clone(), new: new_value.clone() })
            }
            // A bound that is not a number cannot be compared: say so, as for any keyword
            // no check understands, rather than pass it.
            _ => Some(Change::Unknown {
                keywords: vec![KeywordChange {
                    keyword: bound.keyword().to_string(),
                    old: Some(old_value.clone()),
                    new: Some(new_value.clone()),
                }],
            }),
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_bound_that_is_not_a_number_is_reported_as_unhandled() {
        let change = compare(Bound::Maximum, Some(&json!(10)), Some(&json!("10"))).unwrap();
        assert!(matches!(change, Change::Unknown { keywords } if keywords[0].keyword == "maximum"));
        assert_eq!(compare(Bound::Maximum, Some(&json!(10)), Some(&json!(11))), None);
        assert!(compare(Bound::Minimum, Some(&json!(1)), Some(&json!(2))).is_some());
    }
}
