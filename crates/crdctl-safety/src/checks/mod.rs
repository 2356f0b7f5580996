//! The checks, one file each, after crdify's `pkg/validations`.
//!
//! CRD-wide checks ([`scope`], [`stored_versions`]) compare whole definitions. Property checks
//! each own one schema keyword: [`compare_nodes`] runs every property check whose keyword
//! differs, and whatever differs that no check owns becomes [`Change::Unknown`]. A check owns
//! its keyword even when its enforcement is `None`: it understood the change and chose not to
//! report it, so the change is not unknown.

mod bounds;
mod default;
mod description;
mod enum_values;
mod nullable;
mod one_of;
mod pattern;
mod required;
pub mod scope;
pub mod stored_versions;
mod type_;

use serde_json::{Map, Value};

use crate::config::Config;
use crate::finding::{Bound, Change, KeywordChange};
use crate::schema;

/// A property check, by the keyword it owns.
#[derive(Debug, Clone, Copy)]
enum PropertyCheck {
    Default,
    Enum,
    Bound(Bound),
    Required,
    Type,
    Description,
    Pattern,
    Nullable,
    OneOf,
}

/// Every property check, in the order findings are listed.
const REGISTRY: [PropertyCheck; 16] = [
    PropertyCheck::Required,
    PropertyCheck::Type,
    PropertyCheck::Enum,
    PropertyCheck::Default,
    PropertyCheck::Bound(Bound::Maximum),
    PropertyCheck::Bound(Bound::MaxItems),
    PropertyCheck::Bound(Bound::MaxLength),
    PropertyCheck::Bound(Bound::MaxProperties),
    PropertyCheck::Bound(Bound::Minimum),
    PropertyCheck::Bound(Bound::MinItems),
    PropertyCheck::Bound(Bound::MinLength),
    PropertyCheck::Bound(Bound::MinProperties),
    PropertyCheck::Pattern,
    PropertyCheck::Nullable,
    PropertyCheck::OneOf,
    PropertyCheck::Description,
];

impl PropertyCheck {
    fn keyword(self) -> &'static str {
        match self {
            PropertyCheck::Default => "default",
            PropertyCheck::Enum => "enum",
            PropertyCheck::Bound(bound) => bound.keyword(),
            PropertyCheck::Required => "required",
            PropertyCheck::Type => "type",
            PropertyCheck::Description => "description",
            PropertyCheck::Pattern => "pattern",
            PropertyCheck::Nullable => "nullable",
            PropertyCheck::OneOf => "oneOf",
        }
    }

    fn compare(self, old: &Map<String, Value>, new: &Map<String, Value>, config: &Config) -> Option<Change> {
        let keyword = self.keyword();
        let (a, b) = (schema::present(old, keyword), schema::present(new, keyword));
        match self {
            PropertyCheck::Default => default::compare(a, b),
            PropertyCheck::Enum => enum_values::compare(a, b, config),
            PropertyCheck::Bound(bound) => bounds::compare(bound, a, b),
            PropertyCheck::Required => required::compare(a, b),
            PropertyCheck::Type => type_::compare(a, b),
            PropertyCheck::Description => description::compare(a, b),
            PropertyCheck::Pattern => pattern::compare(a, b, config),
            PropertyCheck::Nullable => nullable::compare(a, b, config),
            PropertyCheck::OneOf => one_of::compare(old, new, config),
        }
    }
}

/// Compares one schema node with its counterpart; children are compared at their own paths.
pub fn compare_nodes(old: &Map<String, Value>, new: &Map<String, Value>, config: &Config) -> Vec<Change> {
    let differing = schema::differing_keywords(old, new);
    if differing.is_empty() {
        return Vec::new();
    }
    let mut changes = Vec::new();
    for check in REGISTRY {
        if differing.iter().any(|(keyword, _, _)| *keyword == check.keyword())
            && let Some(change) = check.compare(old, new, config)
        {
            changes.push(change);
        }
    }
    let keywords: Vec<_> = differing
        .into_iter()
        .filter(|(keyword, _, _)| !REGISTRY.iter().any(|check| check.keyword() == *keyword))
        .map(|(keyword, old, new)| KeywordChange { keyword: keyword.to_string(), old: old.cloned(), new: new.cloned() })
        .collect();
    if !keywords.is_empty() {
        changes.push(Change::Unknown { keywords });
    }
    changes
}

/// Values as strings for comparisons that do not care about JSON types.
fn as_str(value: Option<&Value>) -> &str {
    value.and_then(Value::as_str).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::{Enforcement, Policy};

    /// Runs every check on two nodes under crdify's defaults.
    #[track_caller]
    fn changes(old: Value, new: Value) -> Vec<Change> {
        changes_with(old, new, &Config::crdify())
    }

    #[track_caller]
    fn changes_with(old: Value, new: Value, config: &Config) -> Vec<Change> {
        compare_nodes(old.as_object().unwrap(), new.as_object().unwrap(), config)
    }

    #[track_caller]
    fn flagged(old: Value, new: Value) -> bool {
        !changes(old, new).is_empty()
    }

    /// crdify's "different field changed" case: an `id` change is unknown to every check.
    #[test]
    fn an_unowned_keyword_is_unknown() {
        assert_eq!(
            changes(json!({"id": "foo", "default": "x"}), json!({"id": "bar", "default": "x"})),
            [Change::Unknown {
                keywords: vec![KeywordChange {
                    keyword: "id".into(),
                    old: Some(json!("foo")),
                    new: Some(json!("bar"))
                }]
            }]
        );
    }

    /// Anything no check owns blocks: format, x-kubernetes-*, anyOf, additionalProperties, ...
    #[test]
    fn other_keywords_are_unknown_changes() {
        let cases = [
            (json!({"type": "string"}), json!({"type": "string", "format": "date-time"}), "format"),
            (
                json!({"type": "array"}),
                json!({"type": "array", "x-kubernetes-list-type": "set"}),
                "x-kubernetes-list-type",
            ),
            (
                json!({"anyOf": [{"type": "integer"}, {"type": "string"}]}),
                json!({"anyOf": [{"type": "integer"}]}),
                "anyOf",
            ),
            (
                json!({"type": "object", "additionalProperties": {"type": "string"}}),
                json!({"type": "object", "additionalProperties": {"type": "integer"}}),
                "additionalProperties",
            ),
            (json!({"x-kubernetes-preserve-unknown-fields": true}), json!({}), "x-kubernetes-preserve-unknown-fields"),
        ];
        for (old, new, keyword) in cases {
            match changes(old, new).as_slice() {
                [Change::Unknown { keywords }] => assert_eq!(keywords[0].keyword, keyword),
                other => panic!("{keyword}: {other:?}"),
            }
        }
    }

    #[test]
    fn default_table() {
        assert!(!flagged(json!({"default": "foo"}), json!({"default": "foo"})));
        assert_eq!(changes(json!({}), json!({"default": "foo"})), [Change::DefaultAdded { value: json!("foo") }]);
        assert_eq!(changes(json!({"default": "foo"}), json!({})), [Change::DefaultRemoved { value: json!("foo") }]);
        assert_eq!(
            changes(json!({"default": "foo"}), json!({"default": "bar"})),
            [Change::DefaultChanged { old: json!("foo"), new: json!("bar") }]
        );
        assert!(
            !flagged(json!({"default": {"a": 1, "b": 2}}), json!({"default": {"b": 2, "a": 1.0}})),
            "key order and 1 vs 1.0 do not matter"
        );
    }

    #[test]
    fn description_table() {
        assert!(!flagged(json!({"description": "foo"}), json!({"description": "foo"})));
        assert_eq!(
            changes(json!({"description": "foo"}), json!({"description": "bar"})),
            [Change::DescriptionChanged { old: "foo".into(), new: "bar".into() }]
        );
    }

    #[test]
    fn enum_table() {
        assert!(!flagged(json!({"enum": ["foo"]}), json!({"enum": ["foo"]})));
        assert_eq!(
            changes(json!({}), json!({"enum": ["foo"]})),
            [Change::EnumRestricted { values: vec![json!("foo")] }]
        );
        assert_eq!(
            changes(json!({"enum": ["foo"]}), json!({"enum": ["foo", "bar"]})),
            [Change::EnumValuesAdded { values: vec![json!("bar")] }]
        );
        let mut allow = Config::crdify();
        allow.enum_addition = Policy::Allow;
        assert!(changes_with(json!({"enum": ["foo"]}), json!({"enum": ["foo", "bar"]}), &allow).is_empty());
        assert_eq!(
            changes(json!({"enum": ["foo", "bar"]}), json!({"enum": ["bar"]})),
            [Change::EnumValuesRemoved { values: vec![json!("foo")] }]
        );
        assert!(!flagged(json!({"enum": ["b", "a"]}), json!({"enum": ["a", "b"]})), "order does not matter");
    }

    /// crdify's TestMaximum/TestMaxItems/... and TestMinimum/...: five cases per keyword.
    #[test]
    fn bound_tables() {
        for bound in Bound::ALL {
            let kw = bound.keyword();
            let (lower, higher) = (json!({kw: 20}), json!({kw: 30}));
            assert!(!flagged(json!({kw: 10}), json!({kw: 10})), "{kw} no diff");
            assert_eq!(
                changes(json!({}), json!({kw: 10})),
                [Change::BoundAdded { bound, value: json!(10) }],
                "{kw} new"
            );
            let (tightened_from, tightened_to) =
                if bound.is_lower_bound() { (lower.clone(), higher.clone()) } else { (higher.clone(), lower.clone()) };
            assert_eq!(
                changes(tightened_from.clone(), tightened_to.clone()),
                [Change::BoundTightened { bound, old: tightened_from[kw].clone(), new: tightened_to[kw].clone() }],
                "{kw} tightened"
            );
            assert!(!flagged(tightened_to, tightened_from), "{kw} loosened");
            assert!(!flagged(json!({kw: 10}), json!({})), "{kw} removed");
        }
    }

    #[test]
    fn required_table() {
        assert!(!flagged(json!({"required": ["foo"]}), json!({"required": ["foo"]})));
        assert_eq!(
            changes(json!({}), json!({"required": ["foo"]})),
            [Change::RequiredAdded { fields: vec!["foo".into()] }]
        );
        assert!(
            !flagged(json!({"required": ["foo", "bar"]}), json!({"required": ["foo"]})),
            "required to optional is allowed"
        );
    }

    #[test]
    fn type_table() {
        assert!(!flagged(json!({"type": "string"}), json!({"type": "string"})));
        assert_eq!(
            changes(json!({"type": "string"}), json!({"type": "integer"})),
            [Change::TypeChanged { old: "string".into(), new: "integer".into() }]
        );
    }

    #[test]
    fn pattern_table() {
        assert!(!flagged(json!({"pattern": "^[a-z]+$"}), json!({"pattern": "^[a-z]+$"})));
        assert_eq!(
            changes(json!({}), json!({"pattern": "^[a-z]+$"})),
            [Change::PatternAdded { new: "^[a-z]+$".into() }]
        );
        assert_eq!(
            changes(json!({"pattern": "^[a-z]+$"}), json!({"pattern": "^[A-Z]+$"})),
            [Change::PatternChanged { old: "^[a-z]+$".into(), new: "^[A-Z]+$".into() }]
        );
        assert_eq!(
            changes(json!({"pattern": "^[a-z]+$"}), json!({})),
            [Change::PatternRemoved { old: "^[a-z]+$".into() }]
        );
        let mut allow = Config::crdify();
        allow.pattern_removal = Policy::Allow;
        assert!(changes_with(json!({"pattern": "^[a-z]+$"}), json!({}), &allow).is_empty());
    }

    #[test]
    fn nullable_table() {
        assert!(!flagged(json!({"nullable": true}), json!({"nullable": true})));
        assert_eq!(changes(json!({}), json!({"nullable": true})), [Change::NullableChanged { now_nullable: true }]);
        assert_eq!(changes(json!({"nullable": true}), json!({})), [Change::NullableChanged { now_nullable: false }]);
        let mut allow = Config::crdify();
        allow.nullable_addition = Policy::Allow;
        allow.nullable_removal = Policy::Allow;
        assert!(changes_with(json!({}), json!({"nullable": true}), &allow).is_empty());
        assert!(changes_with(json!({"nullable": true}), json!({}), &allow).is_empty());
    }

    #[test]
    fn one_of_table() {
        let int = json!({"type": "integer"});
        let string = json!({"type": "string"});
        assert_eq!(
            changes(json!({}), json!({"oneOf": [int]})),
            [Change::OneOfAdded { schemas: vec![r#"{"type":"integer"}"#.into()], old_schema_lost: false }]
        );
        assert_eq!(
            changes(json!({"oneOf": [int, string]}), json!({"oneOf": [int]})),
            [Change::OneOfSchemasRemoved { schemas: vec![r#"{"type":"string"}"#.into()] }]
        );
        assert_eq!(
            changes(json!({"oneOf": [int]}), json!({"oneOf": [int, string]})),
            [Change::OneOfSchemasAdded { schemas: vec![r#"{"type":"string"}"#.into()] }]
        );
        assert!(!flagged(json!({"oneOf": [int, string]}), json!({"oneOf": [string, int]})), "reordering is no change");
        assert!(
            !flagged(
                json!({"oneOf": [{"type": "integer", "description": "a"}]}),
                json!({"oneOf": [{"type": "integer", "description": "b"}]})
            ),
            "descriptions are ignored"
        );
    }

    #[test]
    fn one_of_addition_allowed_when_the_old_schema_survives() {
        let mut allow = Config::crdify();
        allow.one_of_addition = Policy::Allow;
        let old = json!({"required": ["a"]});
        assert!(
            changes_with(
                old.clone(),
                json!({"required": ["a"], "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
                &allow
            )
            .is_empty()
        );
        assert_eq!(
            changes_with(old, json!({"required": ["a"], "oneOf": [{"required": ["b"]}]}), &allow),
            [Change::OneOfAdded { schemas: vec![r#"{"required":["b"]}"#.into()], old_schema_lost: true }]
        );
    }

    #[test]
    fn enforcement_none_still_understands_the_keyword() {
        let mut config = Config::crdify();
        config.set_enforcement("description", Enforcement::None);
        // compare_nodes reports the change; the enforcement is applied when findings are made.
        assert_eq!(changes_with(json!({"description": "a"}), json!({"description": "b"}), &config).len(), 1);
        assert!(
            !changes_with(json!({"description": "a"}), json!({"description": "b"}), &config)
                .iter()
                .any(|c| matches!(c, Change::Unknown { .. }))
        );
    }

    #[test]
    fn several_changes_on_one_node_are_all_reported() {
        let found = changes(json!({"type": "integer", "format": "int32"}), json!({"type": "string"}));
        assert_eq!(
            found,
            [
                Change::TypeChanged { old: "integer".into(), new: "string".into() },
                Change::Unknown {
                    keywords: vec![KeywordChange { keyword: "format".into(), old: Some(json!("int32")), new: None }]
                },
            ]
        );
    }
}
