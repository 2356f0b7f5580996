//! Label and field selectors on lists and watches (`?labelSelector=`, `?fieldSelector=`), with
//! the operators kubectl sends: `=`, `==`, `!=`, `in`, `notin`, existence and `!` absence; and
//! the structured `metav1.LabelSelector` of objects (workload selectors, admission's
//! `namespaceSelector` and `objectSelector`).

use serde_json::{Map, Value};

use crate::error::ApiError;

/// Whether `labels` has every `matchLabels` pair and meets every `matchExpressions` term of a
/// `metav1.LabelSelector` (the empty selector selects everything).
pub fn selects(selector: &Value, labels: &Map<String, Value>) -> bool {
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let pairs_hold = match_labels.into_iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    pairs_hold
        && expressions.into_iter().flatten().all(|term| {
            let key = term["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = term["values"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let value = labels.get(key).and_then(Value::as_str);
            match term["operator"].as_str() {
                Some("In") => value.is_some_and(|v| values.contains(&v)),
                Some("NotIn") => value.is_none_or(|v| !values.contains(&v)),
                Some("Exists") => value.is_some(),
                Some("DoesNotExist") => value.is_none(),
                _ => false,
            }
        })
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

/// Splits on commas outside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (idx, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(text.get(start..idx).unwrap_or_default());
                start = idx + 1;
            }
            _ => {}
        }
    }
    parts.push(text.get(start..).unwrap_or_default());
    parts.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect()
}

fn set_values(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
}

impl LabelSelector {
    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses `?labelSelector=`.
    pub fn parse(text: &str) -> Result<LabelSelector, ApiError> {
        let bad = || ApiError::bad_request(format!("unable to parse requirement: invalid label selector {text:?}"));
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let requirement = if let Some(key) = part.strip_prefix('!') {
                Requirement::NotExists(key.trim().to_string())
            } else if let Some((key, value)) = part.split_once("!=") {
                Requirement::NotEquals(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::Equals(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, values)) = part.split_once(" notin ") {
                Requirement::NotIn(key.trim().to_string(), set_values(values).ok_or_else(bad)?)
            } else if let Some((key, values)) = part.split_once(" in ") {
                Requirement::In(key.trim().to_string(), set_values(values).ok_or_else(bad)?)
            } else if part.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) {
                Requirement::Exists(part.to_string())
            } else {
                return Err(bad());
            };
            requirements.push(requirement);
        }
        Ok(LabelSelector(requirements))
    }

    /// Whether an object's labels satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = crate::object::meta_field(object, "labels").and_then(Value::as_object);
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.0.iter().all(|requirement| match requirement {
            Requirement::Equals(key, value) => label(key) == Some(value.as_str()),
            Requirement::NotEquals(key, value) => label(key) != Some(value.as_str()),
            Requirement::In(key, values) => label(key).is_some_and(|v| values.iter().any(|x| x == v)),
            Requirement::NotIn(key, values) => label(key).is_none_or(|v| !values.iter().any(|x| x == v)),
            Requirement::Exists(key) => label(key).is_some(),
            Requirement::NotExists(key) => label(key).is_none(),
        })
    }
}

/// The fields of a kind a field selector can name beyond `metadata.name` (and
/// `metadata.namespace` for namespaced kinds), as upstream's `GetAttrs` sets them: the labels,
/// and how to read one from a stored object.
#[derive(Debug, Clone, Copy)]
pub struct SelectableFields {
    /// The labels.
    pub labels: &'static [&'static str],
    /// The value of `label` in an object; a field the object lacks reads as `""`.
    pub value: fn(&Value, &str) -> String,
}

impl SelectableFields {
    /// Only `metadata.name` and `metadata.namespace`, as for custom resources.
    pub const METADATA: SelectableFields = SelectableFields { labels: &[], value: field_value };
}

/// The string at a field label's path (`involvedObject.name` → `/involvedObject/name`).
pub fn field_value(object: &Value, label: &str) -> String {
    let mut node = Some(object);
    for step in label.split('.') {
        node = node.and_then(|n| n.get(step));
    }
    match node {
        Some(Value::String(text)) => text.clone(),
        Some(value @ (Value::Bool(_) | Value::Number(_))) => value.to_string(),
        _ => String::new(),
    }
}

/// A field selector: `field=value` and `field!=value` terms, all of which must hold.
#[derive(Debug, Clone)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
    fields: SelectableFields,
}

impl FieldSelector {
    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether matching reads only `metadata` (so a list can skip the rest of each object).
    pub fn reads_only_metadata(&self) -> bool {
        self.terms.iter().all(|(field, _, _)| field.starts_with("metadata."))
    }

    /// Parses `?fieldSelector=` for a kind with `fields`; `namespaced` decides whether
    /// `metadata.namespace` is allowed.
    pub fn parse(text: &str, namespaced: bool, fields: SelectableFields) -> Result<FieldSelector, ApiError> {
        let mut terms = Vec::new();
        for part in split_top_level(text) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!("invalid field selector: {part:?}")));
            };
            let field = field.trim();
            let known = field == "metadata.name"
                || (namespaced && field == "metadata.namespace")
                || fields.labels.contains(&field);
            if !known {
                return Err(ApiError::bad_request(format!("field label not supported: {field}")));
            }
            terms.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector { terms, fields })
    }

    /// Whether the object matches every term.
    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(field, equal, value)| {
            let actual = match field.as_str() {
                "metadata.name" | "metadata.namespace" => field_value(object, field),
                label => (self.fields.value)(object, label),
            };
            (actual == *value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn label_selectors_match_as_kubectl_means_them() {
        let object = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        for (selector, expected) in [
            ("", true),
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("missing notin (x)", true),
        ] {
            assert_eq!(LabelSelector::parse(selector).unwrap().matches(&object), expected, "{selector}");
        }
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn field_selectors_allow_metadata_and_the_kinds_own_labels() {
        let object = json!({"metadata": {"name": "a", "namespace": "ns"}, "status": {"phase": "Active"}});
        let parse = |text| FieldSelector::parse(text, true, SelectableFields::METADATA);
        assert!(parse("metadata.name=a").unwrap().matches(&object));
        assert!(!parse("metadata.namespace!=ns").unwrap().matches(&object));
        assert!(parse("metadata.name=a").unwrap().reads_only_metadata());
        let err = parse("spec.x=1").unwrap_err();
        assert_eq!(err.message, "field label not supported: spec.x");
        assert!(FieldSelector::parse("metadata.namespace=ns", false, SelectableFields::METADATA).is_err());
        let phase = SelectableFields { labels: &["status.phase"], value: field_value };
        let selector = FieldSelector::parse("status.phase=Active,metadata.name!=b", true, phase).unwrap();
        assert!(selector.matches(&object) && !selector.reads_only_metadata());
        assert!(!FieldSelector::parse("status.phase=Terminating", true, phase).unwrap().matches(&object));
    }
}
