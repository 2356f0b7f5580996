//! `scope`: moving between Namespaced and Cluster orphans every stored object.

use crdctl_model::Crd;

use crate::finding::Change;

/// The scope change, if any.
pub fn compare(old: &Crd, new: &Crd) -> Option<Change> {
    let (old, new) = (&old.definition.spec.scope, &new.definition.spec.scope);
    (old != new).then(|| Change::ScopeChanged { old: old.clone(), new: new.clone() })
}
