//! `spec.versions`: names, the single storage version, schemas, deprecation warnings, and the
//! v1beta1 rules about top-level versus per-version fields.

use serde_json::{Value, json};

use super::Options;
use crdctl_model::Crd;
use crdctl_model::crd::Version;
use crdctl_model::field::{self, Path};
use crdctl_model::names::dns1035_label_errors;

/// Longest `deprecationWarning` in bytes (Go's `len`).
const MAX_DEPRECATION_WARNING_BYTES: usize = 256;

pub(super) fn validate(crd: &Crd, options: Options, spec_path: &Path) -> field::ErrorList {
    let spec = &crd.definition.spec;
    let versions_path = spec_path.child("versions");
    let mut violations = Vec::new();

    let pruning = spec.preserve_unknown_fields != Some(true);
    let mut compiled = super::schemas::Compiled::default();
    for (idx, version) in spec.versions.iter().enumerate() {
        let version_path = versions_path.index(idx);
        let schema = version_path.child("schema");
        let schema_path = schema.child("openAPIV3Schema");
        if let Some(schema) = crd.schema(idx) {
            // Structural schemas are required where schemas are (apiextensions.k8s.io/v1).
            if options.require_schema {
                violations.extend(super::schemas::validate(schema, &schema_path, &mut compiled));
            }
            continue;
        }
        if options.require_schema {
            violations.push(schema_path.required("schemas are required"));
        } else if pruning && version.served {
            violations.push(schema_path.required("because otherwise all fields are pruned"));
        }
    }

    for (idx, version) in spec.versions.iter().enumerate() {
        let path = versions_path.index(idx);
        let errors = dns1035_label_errors(&version.name);
        if !errors.is_empty() {
            violations.push(path.child("name").invalid(&version.name, errors.join(",")));
        }
        if let Some(warning) = &version.deprecation_warning {
            for error in deprecation_warning_errors(version.deprecated, warning) {
                violations.push(path.child("deprecationWarning").invalid(warning, &error));
            }
        }
    }

    if let Some(legacy) = &crd.legacy {
        let exclusive = [
            (legacy.top_level_schema && legacy.per_version_schema, "validation", "schemas"),
            (legacy.top_level_subresources && legacy.per_version_subresources, "subresources", "subresources"),
            (
                legacy.top_level_columns && legacy.per_version_columns,
                "additionalPrinterColumns",
                "additionalPrinterColumns",
            ),
        ];
        for (both, field, what) in exclusive {
            if both {
                violations.push(
                    spec_path
                        .child(field)
                        .forbidden(format!("top-level and per-version {what} are mutually exclusive")),
                );
            }
        }
        let identical = [
            (legacy.identical_schemas, "schemas", "validation"),
            (legacy.identical_subresources, "subresources", "subresources"),
            (legacy.identical_columns, "additionalPrinterColumns", "additionalPrinterColumns"),
        ];
        for (all_same, what, top_level) in identical {
            if all_same {
                violations.push(versions_path.invalid(&versions_value(&spec.versions), format!("per-version {what} may not all be set to identical values (top-level {top_level} should be used instead)")));
            }
        }
    }

    let mut seen = std::collections::HashSet::new();
    if !spec.versions.iter().all(|v| seen.insert(v.name.as_str())) {
        violations.push(versions_path.invalid(&versions_value(&spec.versions), "must contain unique version names"));
    }
    if spec.versions.iter().filter(|v| v.storage).count() != 1 {
        violations.push(
            versions_path
                .invalid(&versions_value(&spec.versions), "must have exactly one version marked as storage version"),
        );
    }

    if let Some(version) = crd.legacy.as_ref().and_then(|l| l.version.as_ref()) {
        let path = spec_path.child("version");
        let errors = dns1035_label_errors(version);
        if !errors.is_empty() {
            violations.push(path.invalid(version, errors.join(",")));
        }
        if spec.versions.first().is_some_and(|first| &first.name != version) {
            violations.push(path.invalid(version, "must match the first version in spec.versions"));
        }
    }
    violations
}

/// `validateDeprecationWarning`: indexes are byte offsets, as in Go.
fn deprecation_warning_errors(deprecated: bool, warning: &str) -> Vec<String> {
    if !deprecated {
        return vec!["can only be set for deprecated versions".into()];
    }
    let mut errors = Vec::new();
    if warning.len() > MAX_DEPRECATION_WARNING_BYTES {
        errors.push(format!("must be <= {MAX_DEPRECATION_WARNING_BYTES} characters long"));
    }
    if warning.is_empty() {
        errors.push("must not be an empty string".into());
    }
    if let Some((idx, _)) = warning.char_indices().find(|&(_, c)| !is_printable(c)) {
        errors.push(format!(
            "must only contain printable UTF-8 characters; non-printable character found at index {idx}"
        ));
    }
    errors
}

/// Go's `unicode.IsPrint`: no control or format characters, and no space but U+0020.
fn is_printable(c: char) -> bool {
    let format_character = matches!(c, '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{e0001}' | '\u{e0020}'..='\u{e007f}');
    let private_use = matches!(c, '\u{e000}'..='\u{f8ff}' | '\u{f0000}'..='\u{ffffd}' | '\u{100000}'..='\u{10fffd}');
    !c.is_control() && !format_character && !private_use && (c == ' ' || !c.is_whitespace())
}

/// The versions list as the API server prints it in a message (internal field names). Schemas,
/// subresources and columns are left out: upstream prints them in full, which helps nobody.
fn versions_value(versions: &[Version]) -> Value {
    Value::Array(
        versions
            .iter()
            .map(|v| json!({"Name": v.name, "Served": v.served, "Storage": v.storage, "Deprecated": v.deprecated}))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    #[test]
    fn version_names_are_dns1035_labels() {
        let text = patched("  - name: v1beta1\n", "  - name: V1Beta1\n");
        assert_eq!(
            check(&text),
            [
                "spec.versions[0].name: Invalid value: \"V1Beta1\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
    }

    #[test]
    fn version_names_are_unique() {
        let text = patched("  - name: v1beta1\n", "  - name: v1\n");
        assert_eq!(
            check(&text),
            [
                r#"spec.versions: Invalid value: [{"Name":"v1","Served":true,"Storage":false,"Deprecated":false},{"Name":"v1","Served":true,"Storage":true,"Deprecated":false}]: must contain unique version names"#
            ]
        );
    }

    #[test]
    fn exactly_one_storage_version() {
        let none = patched("    storage: true\n", "    storage: false\n");
        assert_eq!(
            check(&none),
            [
                r#"spec.versions: Invalid value: [{"Name":"v1beta1","Served":true,"Storage":false,"Deprecated":false},{"Name":"v1","Served":true,"Storage":false,"Deprecated":false}]: must have exactly one version marked as storage version"#,
                "status.storedVersions: Invalid value: []: must have at least one stored version",
            ]
        );
        let two = patched("    storage: false\n", "    storage: true\n");
        assert_eq!(
            check(&two),
            [
                r#"spec.versions: Invalid value: [{"Name":"v1beta1","Served":true,"Storage":true,"Deprecated":false},{"Name":"v1","Served":true,"Storage":true,"Deprecated":false}]: must have exactly one version marked as storage version"#,
                r#"status.storedVersions: Invalid value: ["v1beta1"]: must have the storage version v1"#,
            ]
        );
    }

    #[test]
    fn empty_versions() {
        let text = VALID.split("  versions:\n").next().unwrap().to_string() + "  versions: []\n";
        assert_eq!(
            check(&text),
            [
                "spec.versions: Invalid value: []: must have exactly one version marked as storage version",
                "status.storedVersions: Invalid value: []: must have at least one stored version",
            ]
        );
    }

    #[test]
    fn schemas_are_required_in_v1() {
        let text = patched(
            "    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n",
            "    storage: true\n",
        );
        assert_eq!(check(&text), ["spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required"]);
    }

    #[test]
    fn v1beta1_needs_schemas_for_served_versions_only_when_pruning() {
        let v1beta1 = "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata:\n  name: crontabs.example.com\nspec:\n  group: example.com\n  names:\n    plural: crontabs\n    kind: CronTab\n  version: v1\n";
        assert_eq!(check(v1beta1), Vec::<String>::new(), "preserveUnknownFields defaults to true");
        let pruning = format!("{v1beta1}  preserveUnknownFields: false\n");
        assert_eq!(
            check(&pruning),
            ["spec.versions[0].schema.openAPIV3Schema: Required value: because otherwise all fields are pruned"]
        );
    }

    #[test]
    fn v1beta1_top_level_and_per_version_fields_are_exclusive() {
        let text = "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata:\n  name: crontabs.example.com\nspec:\n  group: example.com\n  names:\n    plural: crontabs\n    kind: CronTab\n  validation:\n    openAPIV3Schema:\n      type: object\n  subresources:\n    status: {}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n    subresources:\n      status: {}\n";
        assert_eq!(
            check(text),
            [
                "spec.validation: Forbidden: top-level and per-version schemas are mutually exclusive",
                "spec.subresources: Forbidden: top-level and per-version subresources are mutually exclusive",
                r#"spec.versions: Invalid value: [{"Name":"v1","Served":true,"Storage":true,"Deprecated":false}]: per-version schemas may not all be set to identical values (top-level validation should be used instead)"#,
                r#"spec.versions: Invalid value: [{"Name":"v1","Served":true,"Storage":true,"Deprecated":false}]: per-version subresources may not all be set to identical values (top-level subresources should be used instead)"#,
            ]
        );
    }

    #[test]
    fn v1beta1_version_must_match_the_first_version() {
        let text = "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata:\n  name: crontabs.example.com\nspec:\n  group: example.com\n  names:\n    plural: crontabs\n    kind: CronTab\n  version: v2\n  versions:\n  - name: v1\n    served: true\n    storage: true\n";
        assert_eq!(
            check(text),
            [r#"spec.version: Invalid value: "v2": must match the first version in spec.versions"#]
        );
    }

    /// Upstream `Test_validateDeprecationWarning`. Its invalid-UTF-8 case cannot be expressed:
    /// the loader rejects invalid UTF-8 before validation.
    #[test]
    fn deprecation_warning_rules() {
        let cases: &[(bool, &str, &[&str])] = &[
            (false, "", &["can only be set for deprecated versions"]),
            (false, "foo", &["can only be set for deprecated versions"]),
            (true, "Iñtërnâtiônàlizætiøn,💝🐹🌇⛔", &[]),
            (true, &"x".repeat(256), &[]),
            (true, &"x".repeat(257), &["must be <= 256 characters long"]),
            (true, "", &["must not be an empty string"]),
            (
                true,
                "Test message\nfoo",
                &["must only contain printable UTF-8 characters; non-printable character found at index 12"],
            ),
            (
                true,
                "Test message\u{8}",
                &["must only contain printable UTF-8 characters; non-printable character found at index 12"],
            ),
            (
                true,
                "Test message\u{0}",
                &["must only contain printable UTF-8 characters; non-printable character found at index 12"],
            ),
        ];
        for &(deprecated, warning, expected) in cases {
            assert_eq!(deprecation_warning_errors(deprecated, warning), expected, "{warning:?}");
        }
    }

    #[test]
    fn deprecation_warning_reaches_the_report() {
        let text = patched("    storage: false\n", "    storage: false\n    deprecationWarning: use v1\n");
        assert_eq!(
            check(&text),
            [
                r#"spec.versions[0].deprecationWarning: Invalid value: "use v1": can only be set for deprecated versions"#
            ]
        );
    }
}
