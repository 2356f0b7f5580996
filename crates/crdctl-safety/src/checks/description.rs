//! `description`: never unsafe, but owned so that it is not an unknown change. OLM does not report it.

use serde_json::Value;

use super::as_str;
use crate::finding::Change;

pub(super) fn compare(old: Option<&Value>, new: Option<&Value>) -> Option<Change> {
    let (old, new) = (as_str(old), as_str(new));
    (old != new).then(|| Change::DescriptionChanged { old: old.into(), new: new.into() })
}
