//! Today's OLM preflight text: crdify's messages under OLM's line assembly.

use serde_json::Value;

use super::go::{json_text, list_v, number_v, quote};
use super::olm::values_v;
use crate::finding::{Change, Finding, KeywordChange, Scope};
use crate::schema::PathStyle;

pub(super) fn lines(findings: &[&Finding]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut crds: Vec<&str> = findings.iter().map(|f| f.crd.as_str()).collect();
    crds.dedup();
    for crd in crds {
        let of_crd: Vec<&Finding> = findings.iter().copied().filter(|f| f.crd == crd).collect();
        // CRD-wide lines first (removed fields included, as crdify runs them CRD-wide).
        let is_crd_wide = |f: &Finding| {
            matches!(f.scope, Scope::Crd) || (matches!(f.scope, Scope::Version(_)) && f.change == Change::FieldRemoved)
        };
        let mut block: Vec<String> = Vec::new();
        let stored: Vec<&str> = of_crd
            .iter()
            .filter_map(|f| match &f.change {
                Change::StoredVersionRemoved { version } => Some(version.as_str()),
                _ => None,
            })
            .collect();
        for finding in of_crd.iter().filter(|f| is_crd_wide(f)) {
            match &finding.change {
                Change::StoredVersionRemoved { version } if stored.first() == Some(&version.as_str()) => {
                    block.push(format!("storedVersionRemoval: stored versions removed : {}", list_v(&stored)));
                }
                Change::StoredVersionRemoved { .. } => {}
                _ => block.extend(message(finding).map(|m| format!("{}: {m}", finding.change.check()))),
            }
        }
        for finding in of_crd.iter().filter(|f| !is_crd_wide(f)) {
            if let (Some(label), Some(text)) = (label(&finding.scope), message(finding)) {
                let path = finding.path.as_ref().map(|p| p.render(PathStyle::Verbose)).unwrap_or_else(|| "^".into());
                block.push(format!("{label}: {path}: {}: {text}", finding.change.check()));
            }
        }
        if let Some(first) = block.first_mut() {
            *first = format!("validating upgrade for CRD {}: {first}", quote(crd));
            lines.extend(block);
        }
    }
    lines
}

fn label(scope: &Scope) -> Option<String> {
    match scope {
        Scope::Crd => None,
        Scope::Version(version) => Some(version.clone()),
        Scope::ServedPair(older, newer) => Some(format!("{older} -> {newer}")),
    }
}

pub(super) fn message(finding: &Finding) -> Option<String> {
    Some(match &finding.change {
        Change::ScopeChanged { old, new } => {
            format!("scope changed : {} -> {}", quote(old), quote(new))
        }
        Change::StoredVersionRemoved { version } => {
            format!("stored versions removed : {}", list_v(&[version]))
        }
        // crdify has no removal check between served versions; it diffs against an empty schema.
        Change::FieldRemoved if matches!(finding.scope, Scope::ServedPair(..)) => return None,
        Change::FieldRemoved => {
            let version = label(&finding.scope).unwrap_or_default();
            let path = finding.path.as_ref().map(|p| p.render(PathStyle::Verbose)).unwrap_or_default();
            format!("removed field : {version}.{path}")
        }
        Change::EnumRestricted { values } => {
            format!("enum constraint added when there was none previously : {}", values_v(values))
        }
        Change::EnumValuesRemoved { values } => {
            format!("allowed enum values removed : {}", values_v(values))
        }
        Change::EnumValuesAdded { values } => {
            format!("allowed enum values added : {}", values_v(values))
        }
        Change::DefaultAdded { value } => {
            format!("default added when there was none previously : {}", quote(&json_text(value)))
        }
        Change::DefaultRemoved { value } => {
            format!("default value removed : {}", quote(&json_text(value)))
        }
        Change::DefaultChanged { old, new } => {
            format!("default value changed : {} -> {}", quote(&json_text(old)), quote(&json_text(new)))
        }
        Change::BoundAdded { bound, value } => {
            let family = if bound.is_lower_bound() { "minimum" } else { "maximum" };
            format!("{family} constraint added when there was none previously : {}", number_v(value, bound.is_float()))
        }
        Change::BoundTightened { bound, old, new } => {
            let what = if bound.is_lower_bound() { "minimum increased" } else { "maximum decreased" };
            format!("{what} : {} -> {}", number_v(old, bound.is_float()), number_v(new, bound.is_float()))
        }
        Change::RequiredAdded { fields } => format!("new required fields: {}", list_v(fields)),
        Change::TypeChanged { old, new } => {
            format!("type changed : {} -> {}", quote(old), quote(new))
        }
        Change::DescriptionChanged { old, new } => {
            format!("description changed : {} -> {}", quote(old), quote(new))
        }
        Change::PatternAdded { new } => format!("pattern added : \"\" -> {}", quote(new)),
        Change::PatternRemoved { old } => format!("pattern removed : {} -> \"\"", quote(old)),
        Change::PatternChanged { old, new } => {
            format!("pattern changed : {} -> {}", quote(old), quote(new))
        }
        Change::NullableChanged { now_nullable: true } => "nullable added : false -> true".into(),
        Change::NullableChanged { now_nullable: false } => "nullable removed : true -> false".into(),
        Change::OneOfAdded { schemas, old_schema_lost: false } => {
            format!("oneOf constraint added when there was none previously: {}", list_v(schemas))
        }
        Change::OneOfAdded { schemas, old_schema_lost: true } => {
            format!(
                "oneOf constraint added and pre-existing property schema is not preserved in the new oneOf entries: {}",
                list_v(schemas)
            )
        }
        Change::OneOfSchemasRemoved { schemas } => {
            format!("allowed oneOf schemas removed: {}", list_v(schemas))
        }
        Change::OneOfSchemasAdded { schemas } => {
            format!("allowed oneOf schemas added: {}", list_v(schemas))
        }
        Change::Unknown { keywords } => unhandled_text(keywords),
    })
}

/// OLM's concise summary of unhandled keywords: `unhandled changes found (Format "" -> "email")`,
/// with Go field names in struct order and go-cmp's rendering of simple values.
fn unhandled_text(keywords: &[KeywordChange]) -> String {
    let go_field = |keyword: &str| GO_FIELDS.iter().position(|(json, _, _)| *json == keyword);
    let mut keywords: Vec<&KeywordChange> = keywords.iter().collect();
    keywords.sort_by_key(|k| go_field(&k.keyword).unwrap_or(GO_FIELDS.len()));
    let parts: Vec<String> = keywords
        .into_iter()
        .map(|k| {
            let (field, kind) = go_field(&k.keyword)
                .map_or((k.keyword.as_str(), GoValue::Complex), |idx| (GO_FIELDS[idx].1, GO_FIELDS[idx].2));
            let (before, after) = (kind.render(k.old.as_ref()), kind.render(k.new.as_ref()));
            let changed = if before == after { " (changed)" } else { "" };
            format!("{field} {before} -> {after}{changed}")
        })
        .collect();
    if parts.is_empty() {
        "unhandled changes found".into()
    } else {
        format!("unhandled changes found ({})", parts.join("; "))
    }
}

/// How go-cmp prints a JSONSchemaProps field.
#[derive(Debug, Clone, Copy)]
enum GoValue {
    /// `string`: `"x"`, unset `""`.
    String,
    /// `*string`: `&"x"`, unset `nil`.
    StringPointer,
    /// `bool`: `true`/`false`.
    Bool,
    /// `*bool`: `&true`, unset `nil`.
    BoolPointer,
    /// `*float64`: `&2`, unset `nil`.
    FloatPointer,
    /// `[]string`: `[]string{"a"}`, unset `nil`.
    Strings,
    /// Structs, schemas and raw JSON: summarised.
    Complex,
}

impl GoValue {
    fn render(self, value: Option<&Value>) -> String {
        match (self, value) {
            (GoValue::String, v) => quote(v.and_then(Value::as_str).unwrap_or_default()),
            (GoValue::Bool, v) => v.and_then(Value::as_bool).unwrap_or(false).to_string(),
            (_, None) => "nil".into(),
            (GoValue::StringPointer, Some(v)) => {
                format!("&{}", quote(v.as_str().unwrap_or_default()))
            }
            (GoValue::BoolPointer, Some(v)) => format!("&{}", v.as_bool().unwrap_or(false)),
            (GoValue::FloatPointer, Some(v)) => format!("&{}", number_v(v, true)),
            (GoValue::Strings, Some(v)) => {
                let items: Vec<String> =
                    v.as_array().into_iter().flatten().map(|s| quote(s.as_str().unwrap_or_default())).collect();
                format!("[]string{{{}}}", items.join(", "))
            }
            (GoValue::Complex, Some(_)) => "<complex value>".into(),
        }
    }
}

/// JSONSchemaProps fields that no check owns, in Go struct order: JSON name, Go name, kind.
const GO_FIELDS: [(&str, &str, GoValue); 26] = [
    ("id", "ID", GoValue::String),
    ("$schema", "Schema", GoValue::String),
    ("$ref", "Ref", GoValue::StringPointer),
    ("format", "Format", GoValue::String),
    ("title", "Title", GoValue::String),
    ("exclusiveMaximum", "ExclusiveMaximum", GoValue::Bool),
    ("exclusiveMinimum", "ExclusiveMinimum", GoValue::Bool),
    ("uniqueItems", "UniqueItems", GoValue::Bool),
    ("multipleOf", "MultipleOf", GoValue::FloatPointer),
    ("allOf", "AllOf", GoValue::Complex),
    ("anyOf", "AnyOf", GoValue::Complex),
    ("not", "Not", GoValue::Complex),
    ("additionalProperties", "AdditionalProperties", GoValue::Complex),
    ("patternProperties", "PatternProperties", GoValue::Complex),
    ("dependencies", "Dependencies", GoValue::Complex),
    ("additionalItems", "AdditionalItems", GoValue::Complex),
    ("definitions", "Definitions", GoValue::Complex),
    ("externalDocs", "ExternalDocs", GoValue::Complex),
    ("example", "Example", GoValue::Complex),
    ("x-kubernetes-preserve-unknown-fields", "XPreserveUnknownFields", GoValue::BoolPointer),
    ("x-kubernetes-embedded-resource", "XEmbeddedResource", GoValue::Bool),
    ("x-kubernetes-int-or-string", "XIntOrString", GoValue::Bool),
    ("x-kubernetes-list-map-keys", "XListMapKeys", GoValue::Strings),
    ("x-kubernetes-list-type", "XListType", GoValue::StringPointer),
    ("x-kubernetes-map-type", "XMapType", GoValue::StringPointer),
    ("x-kubernetes-validations", "XValidations", GoValue::Complex),
];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// operator-controller `unhandled_message_test.go`, on the parts that map to JSON keywords.
    #[test]
    fn concise_unhandled_messages() {
        let change =
            |keyword: &str, old: Option<Value>, new: Option<Value>| KeywordChange { keyword: keyword.into(), old, new };
        assert_eq!(
            unhandled_text(&[change("format", None, Some(json!("email")))]),
            r#"unhandled changes found (Format "" -> "email")"#
        );
        assert_eq!(
            unhandled_text(&[
                change("x-kubernetes-list-type", None, Some(json!("map"))),
                change("x-kubernetes-list-map-keys", None, Some(json!(["name"])))
            ]),
            r#"unhandled changes found (XListMapKeys nil -> []string{"name"}; XListType nil -> &"map")"#
        );
        assert_eq!(
            unhandled_text(&[change("example", Some(json!({})), Some(json!({"type": "string"})))]),
            "unhandled changes found (Example <complex value> -> <complex value> (changed))"
        );
        assert_eq!(unhandled_text(&[]), "unhandled changes found");
    }
}
