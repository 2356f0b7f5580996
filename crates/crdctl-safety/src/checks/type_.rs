//! `type`: any change, including to or from unset, breaks stored objects.

use serde_json::Value;

use super::as_str;
use crate::finding::Change;

pub(super) fn compare(old: Option<&Value>, new: Option<&Value>) -> Option<Change> {
    let (old, new) = (as_str(old), as_str(new));
    (old != new).then(|| Change::TypeChanged { old: old.into(), new: new.into() })
}
