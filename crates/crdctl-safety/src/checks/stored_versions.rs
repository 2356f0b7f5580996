//! `storedVersionRemoval`: a version objects may still be stored in must stay in `spec.versions`.
//!
//! The installed CRD's `status.storedVersions` says which versions those are. Files rarely carry
//! a status; then the old storage version is certainly stored (the API server records it on
//! create), and other removed versions are reported as notes: they may hold objects too.

use crdctl_model::Crd;

use crate::finding::Change;

/// Removed stored versions, and notes about versions whose status is unknown.
pub fn compare(old: &Crd, new: &Crd) -> (Vec<Change>, Vec<String>) {
    let still_defined = |version: &str| new.definition.spec.versions.iter().any(|v| v.name == version);
    let recorded = &old.definition.status.stored_versions;
    let stored: Vec<String> = if recorded.is_empty() {
        old.definition.storage_version().map(|v| v.name.clone()).into_iter().collect()
    } else {
        recorded.clone()
    };
    let changes = stored
        .iter()
        .filter(|v| !still_defined(v))
        .map(|version| Change::StoredVersionRemoved { version: version.clone() })
        .collect();
    let mut notes = Vec::new();
    if recorded.is_empty() {
        for version in
            old.definition.spec.versions.iter().filter(|v| !still_defined(&v.name) && !stored.contains(&v.name))
        {
            notes.push(format!(
                "{}: version {} was removed, and the installed CRD's status.storedVersions is unknown: objects may still be stored in {}; pass --stored-versions to check",
                old.name(),
                version.name,
                version.name
            ));
        }
    }
    (changes, notes)
}
