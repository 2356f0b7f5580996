//! `status.storedVersions`: every version objects may still be persisted in must stay in
//! `spec.versions` until a storage migration removes it from the list.

use serde_json::Value;

use crdctl_model::crd::Version;
use crdctl_model::field::{self, Path};

pub(super) fn validate(stored_versions: &[String], versions: &[Version]) -> field::ErrorList {
    let status = Path::new("status");
    let path = status.child("storedVersions");
    if stored_versions.is_empty() {
        return vec![path.invalid(&Value::Array(Vec::new()), "must have at least one stored version")];
    }
    let mut violations = Vec::new();
    for version in versions.iter().filter(|v| v.storage) {
        if !stored_versions.contains(&version.name) {
            violations.push(path.invalid(stored_versions, format!("must have the storage version {}", version.name)));
        }
    }
    for (idx, stored) in stored_versions.iter().enumerate() {
        if !versions.iter().any(|v| &v.name == stored) {
            violations.push(path.index(idx).invalid(stored, missing_stored_version_detail(stored)));
        }
    }
    violations
}

/// The API server's explanation when a stored version leaves `spec.versions`.
pub fn missing_stored_version_detail(version: &str) -> String {
    format!(
        "missing from spec.versions; {version} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {version} and removes {version} from status.storedVersions"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(names: &[&str], storage: &str) -> Vec<Version> {
        names
            .iter()
            .map(|n| Version { name: n.to_string(), served: true, storage: *n == storage, ..Version::default() })
            .collect()
    }

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[track_caller]
    fn check(stored: &[&str], names: &[&str], storage: &str) -> Vec<String> {
        validate(&strings(stored), &versions(names, storage)).iter().map(ToString::to_string).collect()
    }

    /// Upstream `TestValidateCustomResourceDefinitionStoredVersions`.
    #[test]
    fn upstream_table() {
        assert!(check(&["v1"], &["v1"], "v1").is_empty());
        assert_eq!(
            check(&[], &["v1"], "v1"),
            ["status.storedVersions: Invalid value: []: must have at least one stored version"]
        );
        assert!(check(&["v1alpha", "v1"], &["v1alpha", "v1beta1", "v1"], "v1").is_empty());
        assert_eq!(
            check(&["v1alpha", "v1beta1", "v1"], &["v1beta1", "v1"], "v1"),
            [format!(
                "status.storedVersions[0]: Invalid value: \"v1alpha\": {}",
                missing_stored_version_detail("v1alpha")
            )]
        );
        assert_eq!(
            check(&["v1alpha", "v1beta1"], &["v1alpha", "v1beta1", "v1"], "v1"),
            [r#"status.storedVersions: Invalid value: ["v1alpha","v1beta1"]: must have the storage version v1"#]
        );
    }
}
