//! Deprecation warnings: the text the API server uses for a deprecated version and the
//! `Warning: 299 - "<text>"` header that carries it (apiextensions' `defaultDeprecationWarning`,
//! apimachinery's `NewWarningHeader`).

use axum::http::HeaderValue;
use axum::response::Response;
use crdctl_model::crd::CustomResourceDefinition;
use crdctl_model::version;

/// The warning for requests to `version`, if it is deprecated: its `deprecationWarning`, or
/// `<group>/<v> <Kind> is deprecated[; use <group>/<replacement> <Kind>]`, the replacement
/// being the highest-priority served, non-deprecated version of higher priority.
pub fn deprecation_warning(crd: &CustomResourceDefinition, version_name: &str) -> Option<String> {
    let version = crd.spec.versions.iter().find(|v| v.name == version_name)?;
    if !version.deprecated {
        return None;
    }
    if let Some(text) = &version.deprecation_warning {
        return Some(text.clone());
    }
    let (group, kind) = (&crd.spec.group, &crd.spec.names.kind);
    let mut text = format!("{group}/{version_name} {kind} is deprecated");
    let replacement = crd
        .served_versions_by_priority()
        .into_iter()
        .find(|v| !v.deprecated && version::compare(version_name, &v.name) == std::cmp::Ordering::Less);
    if let Some(replacement) = replacement {
        text.push_str(&format!("; use {group}/{} {kind}", replacement.name));
    }
    Some(text)
}

/// `299 - "<text>"`, with `"` and `\` escaped; `None` for text a header cannot carry
/// (control characters), which upstream drops too.
pub fn header(text: &str) -> Option<HeaderValue> {
    if text.chars().any(char::is_control) {
        return None;
    }
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
    HeaderValue::from_str(&format!("299 - \"{escaped}\"")).ok()
}

/// Adds one `Warning` header per distinct text.
pub fn add(response: &mut Response, warnings: &[String]) {
    let mut seen: Vec<&String> = Vec::new();
    for text in warnings {
        if seen.contains(&text) {
            continue;
        }
        seen.push(text);
        if let Some(value) = header(text) {
            response.headers_mut().append("Warning", value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(versions: &[(&str, bool, bool)]) -> CustomResourceDefinition {
        let versions: Vec<String> = versions
            .iter()
            .map(|(name, served, deprecated)| {
                format!("{{\"name\":\"{name}\",\"served\":{served},\"storage\":false,\"deprecated\":{deprecated}}}")
            })
            .collect();
        let text = format!(
            "{{\"metadata\":{{\"name\":\"widgets.example.com\"}},\"spec\":{{\"group\":\"example.com\",\"scope\":\"Cluster\",\"names\":{{\"plural\":\"widgets\",\"kind\":\"Widget\"}},\"versions\":[{}]}}}}",
            versions.join(",")
        );
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn default_texts_match_upstream_cases() {
        let only_unserved_higher = crd(&[("v1", true, true), ("v2", true, true), ("v3", false, false)]);
        assert_eq!(deprecation_warning(&only_unserved_higher, "v1").unwrap(), "example.com/v1 Widget is deprecated");
        let mut many: Vec<(&str, bool, bool)> = ["v1", "v1alpha1", "v1alpha2", "v1beta1", "v1beta2", "v2", "v2alpha1"]
            .iter()
            .map(|v| (*v, true, *v == "v1"))
            .collect();
        many.extend([("v3", false, false), ("v3beta1", false, false)]);
        assert_eq!(
            deprecation_warning(&crd(&many), "v1").unwrap(),
            "example.com/v1 Widget is deprecated; use example.com/v2 Widget"
        );
        let less_stable = crd(&[
            ("v1", true, false),
            ("v2", true, true),
            ("v3", false, false),
            ("v3alpha1", true, false),
            ("v3beta1", true, false),
            ("v4", true, true),
        ]);
        assert_eq!(deprecation_warning(&less_stable, "v2").unwrap(), "example.com/v2 Widget is deprecated");
        assert_eq!(deprecation_warning(&less_stable, "v1"), None);
    }

    #[test]
    fn header_escapes_quotes() {
        assert_eq!(header("a \"b\" \\c").unwrap(), "299 - \"a \\\"b\\\" \\\\c\"");
        assert_eq!(header("bad\ntext"), None);
    }
}
