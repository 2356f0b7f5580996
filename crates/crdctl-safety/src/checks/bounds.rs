//! The min and max families: a new bound, a lower maximum or a higher minimum rejects stored
//! objects. Removing a bound, raising a maximum or lowering a minimum is fine.

use serde_json::Value;

use crate::finding::{Bound, Change};

pub(super) fn compare(bound: Bound, old: Option<&Value>, new: Option<&Value>) -> Option<Change> {
    match (old, new) {
        (None, Some(value)) => Some(Change::BoundAdded { bound, value: value.clone() }),
        (Some(old), Some(new)) => {
            let (a, b) = (old.as_f64()?, new.as_f64()?);
            let tighter = if bound.is_lower_bound() { b > a } else { b < a };
            tighter.then(|| Change::BoundTightened { bound, old: old.clone(), new: new.clone() })
        }
        _ => None,
    }
}
