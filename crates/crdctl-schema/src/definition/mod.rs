//! Definition validation, as the API server runs it on create and update.
//!
//! Each rule lives in the submodule of its concern, mirroring apiextensions'
//! `pkg/apis/apiextensions/validation`. Rules never stop at the first problem: they return every
//! [`field::Error`], each with the API server's field path and message body, so `crdctl validate`
//! prints what `kubectl apply` would print, one line per cause.
//!
//! Field paths follow the API server's internal names, which differ from v1 in a few places
//! (`spec.conversion.webhookClientConfig`, `spec.conversion.conversionReviewVersions`); each
//! violation also carries the v1 JSON pointer of the node, for source positions.

mod cel;
mod conversion;
mod names;
mod schemas;
pub mod stored_versions;
mod versions;

use crdctl_model::field::{self, Path};
use crdctl_model::{Crd, SourceApiVersion};

/// Which checks apply; the API server derives them from the request and the old object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// Every version needs a schema (v1 requests; updates of CRDs that had them).
    pub require_schema: bool,
    /// `conversionReviewVersions` must contain `v1` or `v1beta1`.
    pub require_recognized_review_version: bool,
    /// Scope and kind may not change (the old CRD is Established).
    pub require_immutable_names: bool,
    /// `preserveUnknownFields: true` is refused (v1 requests unless it was already true).
    pub forbid_preserve_unknown_fields: bool,
}

/// Validates a CRD as the API server does on create.
///
/// The server resets `status` on create, so `status.storedVersions` is taken to be the first
/// storage version, as `PrepareForCreate` sets it. v1beta1 input is checked as the last API
/// servers that accepted v1beta1 did: schemas optional, `preserveUnknownFields: true` allowed.
pub fn validate(crd: &Crd) -> field::ErrorList {
    let is_v1 = crd.source_api_version == SourceApiVersion::V1;
    let options = Options {
        require_schema: is_v1,
        require_recognized_review_version: true,
        require_immutable_names: false,
        forbid_preserve_unknown_fields: is_v1,
    };
    let stored: Vec<String> =
        crd.definition.spec.versions.iter().find(|v| v.storage).map(|v| v.name.clone()).into_iter().collect();
    let mut violations = names::validate_metadata_name(crd);
    violations.extend(validate_spec(crd, options));
    violations.extend(names::validate_names(
        &crd.definition.status.accepted_names,
        &Path::new("status").child("acceptedNames"),
    ));
    violations.extend(stored_versions::validate(&stored, &crd.definition.spec.versions));
    violations
}

/// Validates `new` as an update of the installed `old`, as the API server does.
///
/// `status` comes from `old` (the main resource cannot change it), with the new storage version
/// appended, as `PrepareForUpdate` does; this is where removing a stored version is caught.
pub fn validate_update(new: &Crd, old: &Crd) -> field::ErrorList {
    let old_def = &old.definition;
    let old_review_versions = old_def
        .spec
        .conversion
        .as_ref()
        .and_then(|c| c.webhook.as_ref())
        .map(|w| w.conversion_review_versions.as_slice());
    let old_pruning_off = old_def.spec.preserve_unknown_fields == Some(true);
    let options = Options {
        require_schema: (0..old_def.spec.versions.len()).all(|idx| old.schema(idx).is_some()),
        require_recognized_review_version: old_review_versions
            .is_none_or(conversion::has_accepted_review_version_or_is_empty),
        require_immutable_names: old_def.condition_is_true("Established"),
        forbid_preserve_unknown_fields: new.source_api_version == SourceApiVersion::V1 && !old_pruning_off,
    };
    let mut stored = old_def.status.stored_versions.clone();
    if let Some(storage) = new.definition.spec.versions.iter().find(|v| v.storage)
        && !stored.contains(&storage.name)
    {
        stored.push(storage.name.clone());
    }
    let mut violations = names::validate_metadata_name(new);
    violations.extend(validate_spec(new, options));
    violations.extend(names::validate_immutable(&new.definition.spec, &old_def.spec, options));
    violations.extend(names::validate_names(
        &new.definition.status.accepted_names,
        &Path::new("status").child("acceptedNames"),
    ));
    violations.extend(stored_versions::validate(&stored, &new.definition.spec.versions));
    violations
}

fn validate_spec(crd: &Crd, options: Options) -> field::ErrorList {
    // Versions share rules; each is parsed once for the whole CRD.
    crate::compiling::scope(|| validate_spec_compiling(crd, options))
}

fn validate_spec_compiling(crd: &Crd, options: Options) -> field::ErrorList {
    let spec = Path::new("spec");
    let mut violations = names::validate_group_and_scope(&crd.definition.spec, &spec);
    violations.extend(versions::validate(crd, options, &spec));
    violations.extend(names::validate_spec_names(&crd.definition.spec.names, &spec.child("names")));
    violations.extend(conversion::validate(&crd.definition.spec, options, &spec));
    if options.forbid_preserve_unknown_fields && crd.definition.spec.preserve_unknown_fields == Some(true) {
        violations.push(spec.child("preserveUnknownFields").invalid(
            true,
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    violations
}

#[cfg(test)]
pub(crate) mod test_support {
    use crdctl_model::Crd;

    /// A valid v1 CRD; tests patch it with YAML text replacements.
    pub const VALID: &str = "\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: crontabs
    kind: CronTab
  versions:
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
";

    #[track_caller]
    pub fn crd(text: &str) -> Crd {
        crdctl_model::load::load_str("test.yaml", text).expect("test CRD loads").remove(0)
    }

    /// Validates `text` and renders each violation as the API server prints it.
    #[track_caller]
    pub fn check(text: &str) -> Vec<String> {
        super::validate(&crd(text)).iter().map(ToString::to_string).collect()
    }

    #[track_caller]
    pub fn patched(from: &str, to: &str) -> String {
        assert!(VALID.contains(from), "fixture does not contain {from:?}");
        VALID.replacen(from, to, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    #[test]
    fn the_fixture_is_valid() {
        assert_eq!(check(VALID), Vec::<String>::new());
    }

    #[test]
    fn update_keeps_stored_versions_from_the_old_crd() {
        let old = crd(&format!("{VALID}status:\n  storedVersions: [v1beta1, v1]\n"));
        let new = crd(&VALID.replace("  - name: v1beta1\n    served: true\n    storage: false\n    schema:\n      openAPIV3Schema:\n        type: object\n", ""));
        let violations: Vec<String> = validate_update(&new, &old).iter().map(ToString::to_string).collect();
        assert_eq!(
            violations,
            [
                "status.storedVersions[0]: Invalid value: \"v1beta1\": missing from spec.versions; v1beta1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1beta1 and removes v1beta1 from status.storedVersions"
            ]
        );
    }

    #[test]
    fn group_and_plural_are_immutable() {
        let old = crd(VALID);
        let new = crd(&VALID.replace("crontabs", "crontables"));
        let violations: Vec<String> = validate_update(&new, &old).iter().map(ToString::to_string).collect();
        assert_eq!(violations, ["spec.names.plural: Invalid value: \"crontables\": field is immutable"]);
        let new = crd(&VALID.replace("example.com", "example.org"));
        let violations: Vec<String> = validate_update(&new, &old).iter().map(ToString::to_string).collect();
        assert_eq!(violations, ["spec.group: Invalid value: \"example.org\": field is immutable"]);
    }

    #[test]
    fn scope_and_kind_are_immutable_once_established() {
        let changed = VALID.replace("scope: Namespaced", "scope: Cluster").replace("kind: CronTab", "kind: Cron");
        let not_established = crd(VALID);
        assert!(validate_update(&crd(&changed), &not_established).is_empty());
        let established = crd(&format!(
            "{VALID}status:\n  conditions:\n  - type: Established\n    status: \"True\"\n  storedVersions: [v1]\n"
        ));
        let violations: Vec<String> =
            validate_update(&crd(&changed), &established).iter().map(ToString::to_string).collect();
        assert_eq!(
            violations,
            [
                "spec.scope: Invalid value: \"Cluster\": field is immutable",
                "spec.names.kind: Invalid value: \"Cron\": field is immutable",
            ]
        );
    }

    #[test]
    fn preserve_unknown_fields_true_is_refused_in_v1_only() {
        let text = patched("  scope: Namespaced\n", "  scope: Namespaced\n  preserveUnknownFields: true\n");
        assert_eq!(
            check(&text),
            [
                "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"
            ]
        );
        let old = crd(&text);
        assert!(validate_update(&crd(&text), &old).is_empty(), "allowed when it was already true");
    }
}
