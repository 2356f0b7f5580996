//! `storedVersionRemoval`: a version objects may still be stored in must stay in `spec.versions`.
//!
//! The installed CRD's `status.storedVersions` says which versions those are. Files rarely carry
//! a status; then the old storage version is certainly stored (the API server records it on
//! create), and other removed versions are reported as notes: they may hold objects too.

use crdctl_model::Crd;

use crate::finding::{Change, Note};

/// Removed stored versions, and notes about versions whose status is unknown.
pub fn compare(old: &Crd, new: &Crd) -> (Vec<Change>, Vec<Note>) {
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
            notes.push(Note::StoredVersionsUnknown { crd: old.name().to_string(), version: version.name.clone() });
        }
    }
    (changes, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(versions: &str) -> Crd {
        let text = format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: crontabs.example.com}}\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {{plural: crontabs, kind: CronTab}}\n  versions:\n{versions}"
        );
        crdctl_model::load::load_str("crd.yaml", &text).unwrap().remove(0)
    }

    /// Issue 11, defect 8: what the check cannot decide is data, its text in the dialect.
    #[test]
    fn a_removed_version_of_unknown_status_is_a_note() {
        let old =
            crd("  - {name: v1alpha1, served: true, storage: false}\n  - {name: v1, served: true, storage: true}\n");
        let new = crd("  - {name: v1, served: true, storage: true}\n");
        let (changes, notes) = compare(&old, &new);
        assert!(changes.is_empty());
        let note = Note::StoredVersionsUnknown { crd: "crontabs.example.com".into(), version: "v1alpha1".into() };
        assert_eq!(notes, std::slice::from_ref(&note));
        assert!(crate::dialect::note(&note).contains("objects may still be stored in v1alpha1"));
    }
}
