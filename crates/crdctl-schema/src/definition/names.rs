//! Names: `metadata.name`, group, scope, `spec.names`, and what may not change on update.

use super::Options;
use crdctl_model::Crd;
use crdctl_model::crd::{Names, Spec};
use crdctl_model::field::{self, Path};
use crdctl_model::names::{dns1035_label_errors, dns1123_subdomain_errors};

/// `metadata.name` must be a DNS-1123 subdomain and equal `<plural>.<group>`.
pub(super) fn validate_metadata_name(crd: &Crd) -> field::ErrorList {
    let metadata = Path::new("metadata");
    let path = metadata.child("name");
    let name = crd.name();
    if name.is_empty() {
        return vec![path.required("name or generateName is required")];
    }
    let spec = &crd.definition.spec;
    let mut reasons = dns1123_subdomain_errors(name);
    if name != format!("{}.{}", spec.names.plural, spec.group) {
        reasons.push(r#"must be spec.names.plural+"."+spec.group"#.to_string());
    }
    reasons.iter().map(|reason| path.invalid(name, reason)).collect()
}

pub(super) fn validate_group_and_scope(spec: &Spec, path: &Path) -> field::ErrorList {
    let mut violations = Vec::new();
    let group = path.child("group");
    if spec.group.is_empty() {
        violations.push(group.required(""));
    } else if let errors @ [_, ..] = dns1123_subdomain_errors(&spec.group).as_slice() {
        violations.push(group.invalid(&spec.group, errors.join(",")));
    } else if !spec.group.contains('.') {
        violations.push(group.invalid(&spec.group, "should be a domain with at least one dot"));
    }
    let scope = path.child("scope");
    match spec.scope.as_str() {
        "" => violations.push(scope.required("")),
        "Cluster" | "Namespaced" => {}
        other => violations.push(scope.not_supported(other, &["Cluster", "Namespaced"])),
    }
    violations
}

/// Names that `spec` requires (status names may be empty), then the format of each.
pub(super) fn validate_spec_names(names: &Names, path: &Path) -> field::ErrorList {
    let mut violations = Vec::new();
    let required = [
        ("plural", &names.plural),
        ("singular", &names.singular),
        ("kind", &names.kind),
        ("listKind", &names.list_kind),
    ];
    for (field, value) in required {
        if value.is_empty() {
            violations.push(path.child(field).required(""));
        }
    }
    violations.extend(validate_names(names, path));
    violations
}

/// `ValidateCustomResourceDefinitionNames`, shared by `spec.names` and `status.acceptedNames`.
pub(super) fn validate_names(names: &Names, path: &Path) -> field::ErrorList {
    let mut violations = Vec::new();
    let mut label = |field: &Path, value: &str, lower_case: bool| {
        if value.is_empty() {
            return;
        }
        let errors = dns1035_label_errors(&if lower_case { value.to_lowercase() } else { value.to_string() });
        if !errors.is_empty() {
            let prefix = if lower_case { "may have mixed case, but should otherwise match: " } else { "" };
            violations.push(field.invalid(value, format!("{prefix}{}", errors.join(","))));
        }
    };
    label(&path.child("plural"), &names.plural, false);
    label(&path.child("singular"), &names.singular, false);
    label(&path.child("kind"), &names.kind, true);
    label(&path.child("listKind"), &names.list_kind, true);
    for (idx, short_name) in names.short_names.iter().enumerate() {
        let errors = dns1035_label_errors(short_name);
        if !errors.is_empty() {
            violations.push(path.child("shortNames").index(idx).invalid(short_name, errors.join(",")));
        }
    }
    if !names.kind.is_empty() && names.kind == names.list_kind {
        violations.push(path.child("listKind").invalid(&names.list_kind, "kind and listKind may not be the same"));
    }
    for (idx, category) in names.categories.iter().enumerate() {
        let errors = dns1035_label_errors(category);
        if !errors.is_empty() {
            violations.push(path.child("categories").index(idx).invalid(category, errors.join(",")));
        }
    }
    violations
}

/// Group and plural never change; scope and kind not once the CRD is Established.
pub(super) fn validate_immutable(new: &Spec, old: &Spec, options: Options) -> field::ErrorList {
    let spec = Path::new("spec");
    let mut violations = Vec::new();
    let mut immutable = |path: Path, new: &String, old: &String| {
        if new != old {
            violations.push(path.invalid(new, "field is immutable"));
        }
    };
    if options.require_immutable_names {
        immutable(spec.child("scope"), &new.scope, &old.scope);
        immutable(spec.child("names").child("kind"), &new.names.kind, &old.names.kind);
    }
    immutable(spec.child("group"), &new.group, &old.group);
    immutable(spec.child("names").child("plural"), &new.names.plural, &old.names.plural);
    violations
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crdctl_model::names::{DNS1035_LABEL_ERROR, DNS1123_SUBDOMAIN_ERROR};

    #[test]
    fn metadata_name_must_be_plural_dot_group() {
        let text = patched("  name: crontabs.example.com", "  name: crontab.example.com");
        assert_eq!(
            check(&text),
            [r#"metadata.name: Invalid value: "crontab.example.com": must be spec.names.plural+"."+spec.group"#]
        );
        let text = patched("  name: crontabs.example.com", "  name: \"\"");
        assert_eq!(check(&text), ["metadata.name: Required value: name or generateName is required"]);
    }

    #[test]
    fn group_rules() {
        let text = VALID.replace("example.com", "example");
        assert_eq!(check(&text), [r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#]);
        let text = VALID.replace("example.com", "Example.com");
        let violations = check(&text);
        assert!(
            violations.contains(&format!("spec.group: Invalid value: \"Example.com\": {DNS1123_SUBDOMAIN_ERROR}")),
            "{violations:?}"
        );
        let text = VALID.replace("  group: example.com\n", "").replace("crontabs.example.com", "crontabs.");
        assert_eq!(
            check(&text),
            [
                "metadata.name: Invalid value: \"crontabs.\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "spec.group: Required value"
            ]
        );
    }

    #[test]
    fn scope_rules() {
        assert_eq!(check(&patched("  scope: Namespaced\n", "")), ["spec.scope: Required value"]);
        assert_eq!(
            check(&patched("scope: Namespaced", "scope: Global")),
            [r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#]
        );
    }

    #[test]
    fn names_rules() {
        let text = patched(
            "    kind: CronTab\n",
            "    kind: CronTab\n    listKind: CronTab\n    shortNames: [ct, C_T]\n    categories: [all, \"\"]\n",
        );
        assert_eq!(
            check(&text),
            [
                "spec.names.shortNames[1]: Invalid value: \"C_T\": ".to_string() + DNS1035_LABEL_ERROR,
                "spec.names.listKind: Invalid value: \"CronTab\": kind and listKind may not be the same".to_string(),
                "spec.names.categories[1]: Invalid value: \"\": ".to_string() + DNS1035_LABEL_ERROR,
            ]
        );
        let text = patched("    kind: CronTab\n", "    kind: Cron_Tab\n");
        assert_eq!(
            check(&text),
            [
                format!("spec.names.singular: Invalid value: \"cron_tab\": {DNS1035_LABEL_ERROR}"),
                format!(
                    "spec.names.kind: Invalid value: \"Cron_Tab\": may have mixed case, but should otherwise match: {DNS1035_LABEL_ERROR}"
                ),
                format!(
                    "spec.names.listKind: Invalid value: \"Cron_TabList\": may have mixed case, but should otherwise match: {DNS1035_LABEL_ERROR}"
                ),
            ]
        );
        let text = patched("    kind: CronTab\n", "");
        assert_eq!(
            check(&text),
            [
                "spec.names.singular: Required value",
                "spec.names.kind: Required value",
                "spec.names.listKind: Required value"
            ]
        );
        let text = patched("    plural: crontabs\n", "").replace("crontabs.example.com", ".example.com");
        assert!(check(&text).contains(&"spec.names.plural: Required value".to_string()));
    }
}
