//! Names: `metadata.name`, group, scope, `spec.names`, and what may not change on update.

use super::{Options, Path, Violation};
use crate::Crd;
use crate::crd::{Names, Spec};

const DNS1035_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;
const DNS1035_LABEL_ERROR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_ERROR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// apimachinery's `IsDNS1035Label`: every reason `value` is not a DNS-1035 label.
pub fn dns1035_label_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1035_LABEL_MAX {
        errors.push(format!("must be no more than {DNS1035_LABEL_MAX} characters"));
    }
    let bytes = value.as_bytes();
    let valid = bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes.last().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
    if !valid {
        errors.push(DNS1035_LABEL_ERROR.to_string());
    }
    errors
}

/// apimachinery's `IsDNS1123Subdomain`: every reason `value` is not a DNS-1123 subdomain.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errors.push(format!("must be no more than {DNS1123_SUBDOMAIN_MAX} characters"));
    }
    let is_label = |label: &str| {
        let bytes = label.as_bytes();
        bytes.first().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && bytes.last().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
    };
    if !value.split('.').all(is_label) {
        errors.push(DNS1123_SUBDOMAIN_ERROR.to_string());
    }
    errors
}

/// `metadata.name` must be a DNS-1123 subdomain and equal `<plural>.<group>`.
pub(super) fn validate_metadata_name(crd: &Crd) -> Vec<Violation> {
    let path = Path::root("metadata").child("name");
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

pub(super) fn validate_group_and_scope(spec: &Spec, path: &Path) -> Vec<Violation> {
    let mut violations = Vec::new();
    let group = path.child("group");
    if spec.group.is_empty() {
        violations.push(group.required(""));
    } else if let errors @ [_, ..] = dns1123_subdomain_errors(&spec.group).as_slice() {
        violations.push(group.invalid(&spec.group, &errors.join(",")));
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
pub(super) fn validate_spec_names(names: &Names, path: &Path) -> Vec<Violation> {
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
pub(super) fn validate_names(names: &Names, path: &Path) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut label = |field: &Path, value: &str, lower_case: bool| {
        if value.is_empty() {
            return;
        }
        let errors = dns1035_label_errors(&if lower_case { value.to_lowercase() } else { value.to_string() });
        if !errors.is_empty() {
            let prefix = if lower_case { "may have mixed case, but should otherwise match: " } else { "" };
            violations.push(field.invalid(value, &format!("{prefix}{}", errors.join(","))));
        }
    };
    label(&path.child("plural"), &names.plural, false);
    label(&path.child("singular"), &names.singular, false);
    label(&path.child("kind"), &names.kind, true);
    label(&path.child("listKind"), &names.list_kind, true);
    for (idx, short_name) in names.short_names.iter().enumerate() {
        let errors = dns1035_label_errors(short_name);
        if !errors.is_empty() {
            violations.push(path.child("shortNames").index(idx).invalid(short_name, &errors.join(",")));
        }
    }
    if !names.kind.is_empty() && names.kind == names.list_kind {
        violations.push(path.child("listKind").invalid(&names.list_kind, "kind and listKind may not be the same"));
    }
    for (idx, category) in names.categories.iter().enumerate() {
        let errors = dns1035_label_errors(category);
        if !errors.is_empty() {
            violations.push(path.child("categories").index(idx).invalid(category, &errors.join(",")));
        }
    }
    violations
}

/// Group and plural never change; scope and kind not once the CRD is Established.
pub(super) fn validate_immutable(new: &Spec, old: &Spec, options: Options) -> Vec<Violation> {
    let spec = Path::root("spec");
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

const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;
/// How large an object's annotations may be together, keys and values (`TotalAnnotationSizeLimitB`).
pub const TOTAL_ANNOTATION_BYTES: usize = 256 * 1024;
const QUALIFIED_NAME_ERROR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_ERROR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// apimachinery's `IsQualifiedName`.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let mut errors = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(dns1123_subdomain_errors(prefix).into_iter().map(|e| format!("prefix part {e}")));
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_ERROR} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".into());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errors.push(format!("name part must be no more than {QUALIFIED_NAME_MAX} characters"));
    }
    if !is_name_token(name) {
        errors.push(format!("name part {QUALIFIED_NAME_ERROR}"));
    }
    errors
}

/// apimachinery's `IsValidLabelValue`.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errors.push(format!("must be no more than {LABEL_VALUE_MAX} characters"));
    }
    if !value.is_empty() && !is_name_token(value) {
        errors.push(LABEL_VALUE_ERROR.into());
    }
    errors
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_name_token(value: &str) -> bool {
    let bytes = value.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    #[test]
    fn dns_labels() {
        assert!(dns1035_label_errors("v1beta1").is_empty());
        assert_eq!(dns1035_label_errors("1v"), [DNS1035_LABEL_ERROR]);
        assert_eq!(dns1035_label_errors(&"a".repeat(64)), ["must be no more than 63 characters"]);
        assert!(dns1123_subdomain_errors("stable.example.com").is_empty());
        assert_eq!(dns1123_subdomain_errors("Example.com"), [DNS1123_SUBDOMAIN_ERROR]);
        assert_eq!(dns1123_subdomain_errors("a..b").len(), 1);
    }

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
