//! `pattern`: any new or different pattern may reject stored values; removing one is only
//! allowed when configured.

use serde_json::Value;

use super::as_str;
use crate::config::{Config, Policy};
use crate::finding::Change;

pub(super) fn compare(old: Option<&Value>, new: Option<&Value>, config: &Config) -> Option<Change> {
    match (as_str(old), as_str(new)) {
        (old, new) if old == new => None,
        ("", new) => Some(Change::PatternAdded { new: new.into() }),
        (old, "") => (config.pattern_removal == Policy::Disallow).then(|| Change::PatternRemoved { old: old.into() }),
        (old, new) => Some(Change::PatternChanged { old: old.into(), new: new.into() }),
    }
}
