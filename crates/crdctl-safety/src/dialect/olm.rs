//! The OLM v1 documentation's format.

use serde_json::Value;

use super::go::{json_text, list_v, number_v, quote};
use crate::finding::{Change, Finding, Scope};
use crate::schema::PathStyle;

/// The full line for a finding, or `None` if it is implied by a removal.
pub(super) fn line(finding: &Finding) -> Option<String> {
    let detail = message(finding)?;
    let name = &finding.crd;
    let validation = finding.change.validation(&finding.scope);
    Some(format!(
        "validating upgrade for CRD {} failed: CustomResourceDefinition {name} failed upgrade safety validation. {} validation failed: {detail}",
        quote(name),
        quote(validation)
    ))
}

pub(super) fn message(finding: &Finding) -> Option<String> {
    if finding.implied_by_removal {
        return None;
    }
    let path = finding.path.as_ref().map(|p| p.render(PathStyle::Wildcard)).unwrap_or_else(|| "^".into());
    Some(match (&finding.scope, &finding.change) {
        (_, Change::ScopeChanged { old, new }) => {
            format!("scope changed from {} to {}", quote(old), quote(new))
        }
        (_, Change::StoredVersionRemoved { version }) => {
            format!("stored version {} removed", quote(version))
        }
        (Scope::Version(version), Change::FieldRemoved) => {
            format!("crd/{} version/{version} field/{path} may not be removed", finding.crd)
        }
        (Scope::ServedPair(older, newer), Change::FieldRemoved) => {
            format!(
                "version upgrade {} to {}, field {}: field is missing from version {}",
                quote(older),
                quote(newer),
                quote(&path),
                quote(newer)
            )
        }
        (Scope::Version(version) | Scope::ServedPair(version, _), Change::Unknown { .. }) => {
            format!(
                "version {}, field {} has unknown change, refusing to determine that change is safe",
                quote(version),
                quote(&path)
            )
        }
        (Scope::Version(version), change) => {
            format!("version {}, field {}: {}", quote(version), quote(&path), change_text(change))
        }
        (Scope::ServedPair(older, newer), change) => {
            format!(
                "version upgrade {} to {}, field {}: {}",
                quote(older),
                quote(newer),
                quote(&path),
                change_text(change)
            )
        }
        (Scope::Crd, change) => change_text(change),
    })
}

fn change_text(change: &Change) -> String {
    match change {
        Change::RequiredAdded { fields } => {
            format!("new required fields added: {}", list_v(fields))
        }
        Change::EnumRestricted { values } => {
            format!("enum constraints {} added when there were no restrictions previously", values_v(values))
        }
        Change::EnumValuesRemoved { values } => {
            format!("enums {} removed from the set of previously allowed values", values_v(values))
        }
        Change::EnumValuesAdded { values } => {
            format!("enums {} added to the set of previously allowed values", values_v(values))
        }
        Change::BoundAdded { bound, value } => {
            format!(
                "{}: constraint {} added when there were no restrictions previously",
                bound.keyword(),
                number_v(value, bound.is_float())
            )
        }
        Change::BoundTightened { bound, old, new } => format!(
            "{}: constraint {} from {} to {}",
            bound.keyword(),
            if bound.is_lower_bound() { "increased" } else { "decreased" },
            number_v(old, bound.is_float()),
            number_v(new, bound.is_float())
        ),
        Change::DefaultAdded { value } => {
            format!("default value {} added when there was no default previously", default_v(value))
        }
        Change::DefaultRemoved { value } => format!("default value {} removed", default_v(value)),
        Change::DefaultChanged { old, new } => {
            format!("default value changed from {} to {}", default_v(old), default_v(new))
        }
        Change::TypeChanged { old, new } => {
            format!("type changed from {} to {}", quote(old), quote(new))
        }
        Change::DescriptionChanged { old, new } => {
            format!("description changed from {} to {}", quote(old), quote(new))
        }
        Change::PatternAdded { new } => format!("pattern {} added when there was no pattern previously", quote(new)),
        Change::PatternRemoved { old } => format!("pattern {} removed", quote(old)),
        Change::PatternChanged { old, new } => {
            format!("pattern changed from {} to {}", quote(old), quote(new))
        }
        Change::NullableChanged { now_nullable } => {
            format!("nullable changed from {} to {now_nullable}", !now_nullable)
        }
        Change::OneOfAdded { schemas, old_schema_lost: false } => {
            format!("oneOf constraints {} added when there were no restrictions previously", list_v(schemas))
        }
        Change::OneOfAdded { schemas, old_schema_lost: true } => {
            format!("oneOf constraints {} added that do not accept the previous schema", list_v(schemas))
        }
        Change::OneOfSchemasRemoved { schemas } => {
            format!("oneOf schemas {} removed from the set of previously allowed schemas", list_v(schemas))
        }
        Change::OneOfSchemasAdded { schemas } => {
            format!("oneOf schemas {} added to the set of previously allowed schemas", list_v(schemas))
        }
        // Rendered with their scope above.
        Change::ScopeChanged { .. }
        | Change::StoredVersionRemoved { .. }
        | Change::FieldRemoved
        | Change::Unknown { .. }
        | Change::ApiServerRefusal { .. } => String::new(),
    }
}

/// Enum values as compact JSON, sorted: `["Managed" "Unmanaged"]`.
pub(super) fn values_v(values: &[Value]) -> String {
    let mut texts: Vec<String> = values.iter().map(json_text).collect();
    texts.sort();
    list_v(&texts)
}

/// A default as its JSON text, Go-quoted: `"\"Managed\""`.
fn default_v(value: &Value) -> String {
    quote(&json_text(value))
}
