//! Name rules, as apimachinery's `pkg/util/validation`: each function returns every reason a
//! value breaks its rule, in upstream's words, for a [`crate::field::Path`] to report.
//!
//! ```
//! use crdctl_model::names;
//!
//! assert!(names::dns1123_subdomain_errors("stable.example.com").is_empty());
//! assert_eq!(names::dns1123_label_errors(&"a".repeat(64)), ["must be no more than 63 characters"]);
//! ```

const DNS1035_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// Why a value is not a DNS-1035 label, in upstream's words.
pub const DNS1035_LABEL_ERROR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
/// Why a value is not a DNS-1123 subdomain, in upstream's words.
pub const DNS1123_SUBDOMAIN_ERROR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

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
    if !value.split('.').all(is_dns1123_label) {
        errors.push(DNS1123_SUBDOMAIN_ERROR.to_string());
    }
    errors
}

const DNS1123_LABEL_MAX: usize = 63;
/// Why a value is not a DNS-1123 label, in upstream's words.
pub const DNS1123_LABEL_ERROR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// apimachinery's `IsDNS1123Label`: every reason `value` is not a DNS-1123 label (namespace names).
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errors.push(format!("must be no more than {DNS1123_LABEL_MAX} characters"));
    }
    if !is_dns1123_label(value) {
        errors.push(DNS1123_LABEL_ERROR.to_string());
    }
    errors
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_dns1123_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    let alphanumeric = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    bytes.first().is_some_and(alphanumeric)
        && bytes.last().is_some_and(alphanumeric)
        && bytes.iter().all(|b| alphanumeric(b) || *b == b'-')
}

const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;
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

/// apimachinery's `IsValidPathSegmentName`: a name that is one segment of a URL path (RBAC
/// objects, embedded resources) may not be `.` or `..`, nor contain `/` or `%`.
pub fn path_segment_name_errors(name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if name == "." || name == ".." {
        errors.push(format!("may not be '{name}'"));
    }
    errors.extend(path_segment_prefix_errors(name));
    errors
}

/// apimachinery's `IsValidPathSegmentPrefix`, for a `generateName`.
pub fn path_segment_prefix_errors(prefix: &str) -> Vec<String> {
    ["/", "%"].iter().filter(|c| prefix.contains(*c)).map(|c| format!("may not contain '{c}'")).collect()
}

const CONFIG_MAP_KEY_MAX: usize = 253;
const CONFIG_MAP_KEY_ERROR: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// apimachinery's `IsConfigMapKey`: the keys of a ConfigMap's or a Secret's data.
pub fn config_map_key_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if key.len() > CONFIG_MAP_KEY_MAX {
        errors.push(format!("must be no more than {CONFIG_MAP_KEY_MAX} characters"));
    }
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) {
        errors.push(CONFIG_MAP_KEY_ERROR.to_string());
    }
    match key {
        "." => errors.push("must not be '.'".to_string()),
        ".." => errors.push("must not be '..'".to_string()),
        key if key.starts_with("..") => errors.push("must not start with '..'".to_string()),
        _ => {}
    }
    errors
}

#[cfg(test)]
mod tests {
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
    fn path_segments_and_config_keys() {
        assert!(path_segment_name_errors("system:controller:x").is_empty());
        assert_eq!(path_segment_name_errors(".."), ["may not be '..'"]);
        assert_eq!(path_segment_name_errors("a/b%"), ["may not contain '/'", "may not contain '%'"]);
        assert!(config_map_key_errors("tls.crt").is_empty());
        assert_eq!(config_map_key_errors("a b"), [CONFIG_MAP_KEY_ERROR]);
        assert_eq!(config_map_key_errors("..x"), ["must not start with '..'"]);
        assert_eq!(config_map_key_errors(""), [CONFIG_MAP_KEY_ERROR]);
    }

    #[test]
    fn dns1123_labels() {
        assert!(dns1123_label_errors("team-a").is_empty());
        assert_eq!(dns1123_label_errors("-a"), [DNS1123_LABEL_ERROR]);
        assert_eq!(dns1123_label_errors("a.b"), [DNS1123_LABEL_ERROR]);
        assert_eq!(dns1123_label_errors(""), [DNS1123_LABEL_ERROR]);
    }
}
