//! The structural schema of a CRD version, compiled once, and what the API server does with it
//! to every custom resource: prune unknown fields ([`prune`]), apply defaults ([`default`]),
//! validate with kube-openapi's rules and messages ([`validate`]) and check list-type
//! uniqueness ([`validate_list_types`]).
//!
//! [`Schema`] is a typed view of an `openAPIV3Schema` node: keywords parsed once, patterns
//! compiled once, formats resolved against the ones the API server checks, so validating an
//! object walks plain structs instead of looking keywords up in JSON maps.
//!
//! [`cel`] compiles, type-checks, costs and runs `x-kubernetes-validations` rules; [`check`] runs
//! everything the API server's strategy runs on a write. [`definition`] validates a whole
//! CustomResourceDefinition as the API server does on create and update, which needs all of the
//! above (its schemas must be structural, their defaults must validate, their rules compile).
//! Problems are [`crdctl_model::field::Error`]s.
//!
//! Upstream counterparts: apiextensions' `pkg/apiserver/schema` (`structural.go`, `pruning`,
//! `defaulting`, `listtype`, `cel`), `pkg/apiserver/validation` (the translation of
//! kube-openapi's results into field errors), `pkg/apis/apiextensions/validation`
//! ([`definition`]) and kube-openapi's `pkg/validation/validate`, whose validator order and
//! messages [`validate`] follows. Field paths are written as the API server writes them:
//! `spec.items[0].name`.
//!
//! ```
//! use serde_json::json;
//!
//! let schema = crdctl_schema::Schema::new(&json!({
//!     "type": "object",
//!     "properties": {"spec": {
//!         "type": "object",
//!         "properties": {"replicas": {"type": "integer", "default": 1, "maximum": 5}},
//!         "x-kubernetes-validations": [{"rule": "self.replicas % 2 == 1", "message": "must be odd"}],
//!     }},
//! }));
//! let mut object = json!({"spec": {"extra": true}});
//! assert_eq!(crdctl_schema::prune(&mut object, &schema), ["spec.extra"]);
//! crdctl_schema::default(&mut object, &schema);
//! assert_eq!(object, json!({"spec": {"replicas": 1}}));
//! assert!(crdctl_schema::check(&object, None, &schema).errors.is_empty());
//!
//! let too_many = json!({"spec": {"replicas": 6}});
//! let errors: Vec<String> =
//!     crdctl_schema::check(&too_many, None, &schema).errors.iter().map(ToString::to_string).collect();
//! assert_eq!(errors, [
//!     "spec.replicas: Invalid value: 6: spec.replicas in body should be less than or equal to 5",
//!     r#"spec: Invalid value: "object": must be odd"#,
//! ]);
//! ```

pub mod cel;
mod compiling;
pub use compiling::Pattern;
pub mod decode;
pub mod definition;
mod embedded;
mod formats;
pub mod generate;
mod list_type;
mod openapi;
mod read;
pub mod strategic_merge;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;

use crdctl_model::field::{self, ErrorType, Path, Raw};

pub use cel::{Limits, Rule, RuleOutcome, validate_rules, validate_rules_within};
pub use embedded::validate_embedded;
pub use formats::{Format, StringFormat};
pub use list_type::validate_list_types;
pub use openapi::{validate, validate_update};
pub use read::{
    FieldRead, NullRead, Pruned, ReadPlan, Steps, default, keeps, prune, prune_and_default_change,
    prune_and_default_json, prune_fields, prune_json,
};

/// The error [`check`] adds, as upstream does, when earlier errors leave the CEL rules
/// unchecked: no failure of its own.
pub const RULES_NOT_CHECKED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// What [`check`] found.
#[derive(Debug, Default)]
pub struct Checked {
    /// Field errors, in upstream's order: OpenAPI, list types, CEL rules.
    pub errors: field::ErrorList,
    /// Warnings: rules that failed on values the update did not change (ratcheted).
    pub warnings: Vec<String>,
}

/// Everything the API server checks in a custom resource against its version's schema, as
/// its strategy runs it (apiextensions' `pkg/registry/customresource/strategy.go`): the
/// OpenAPI schema (ratcheted on updates), embedded resources, `x-kubernetes-list-type` uniqueness (on updates only
/// if the old object had none broken), and the CEL rules, unless an earlier error makes them
/// meaningless.
pub fn check(object: &Value, old: Option<&Value>, schema: &Schema) -> Checked {
    let mut errors = match old {
        Some(old) => validate_update(object, old, schema),
        None => validate(object, schema),
    };
    errors.extend(validate_embedded(object, schema));
    if old.is_none_or(|old| validate_list_types(old, schema).is_empty()) {
        errors.extend(validate_list_types(object, schema));
    }
    if !schema.has_rules {
        return Checked { errors, warnings: Vec::new() };
    }
    let blocking = errors.iter().any(|e| {
        matches!(
            e.error_type,
            ErrorType::NotSupported(..)
                | ErrorType::Required
                | ErrorType::TooLong
                | ErrorType::TooMany(_)
                | ErrorType::TypeInvalid(_)
        )
    });
    if blocking {
        errors.push(Path::Root.invalid(Raw("null".into()), RULES_NOT_CHECKED));
        return Checked { errors, warnings: Vec::new() };
    }
    let rules = validate_rules(object, old, schema);
    errors.extend(rules.errors);
    Checked { errors, warnings: rules.warnings }
}

/// One schema node, as the API server's validator sees it.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// `type`; `x-kubernetes-int-or-string` makes it `["integer", "string"]`.
    pub types: Vec<String>,
    /// `format`, when it is one the API server checks for this type (others are stripped, as
    /// upstream's `StripUnsupportedFormatsPostProcess`).
    pub format: Option<Format>,
    /// `format` as written, for messages.
    pub format_name: String,
    /// `nullable`.
    pub nullable: bool,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// `x-kubernetes-preserve-unknown-fields: true`.
    pub preserve_unknown_fields: bool,
    /// `x-kubernetes-embedded-resource`.
    pub embedded_resource: bool,
    /// Whether CEL rules see this property under another name (`foo__dash__bar`,
    /// `__namespace__`) or not at all: its name as written is not its CEL name.
    pub renamed_in_cel: bool,
    /// `properties`, in schema order; looked up on every field a rule or a check reads, so
    /// hashed with foldhash rather than SipHash.
    pub properties: IndexMap<String, Schema, foldhash::fast::RandomState>,
    /// `additionalProperties`.
    pub additional_properties: Option<Additional>,
    /// `items` (a single schema; structural schemas allow no tuple form).
    pub items: Option<Box<Schema>>,
    /// `required`.
    pub required: Vec<String>,
    /// `enum`.
    pub enumeration: Option<Vec<Value>>,
    /// `default`.
    pub default: Option<Value>,
    /// `maximum` and `exclusiveMaximum`.
    pub maximum: Option<f64>,
    /// `exclusiveMaximum`.
    pub exclusive_maximum: bool,
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `exclusiveMinimum`.
    pub exclusive_minimum: bool,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `maxLength`, in characters.
    pub max_length: Option<i64>,
    /// `minLength`, in characters.
    pub min_length: Option<i64>,
    /// `pattern`, compiled on first use.
    pub pattern: Option<Pattern>,
    /// `maxItems`.
    pub max_items: Option<i64>,
    /// `minItems`.
    pub min_items: Option<i64>,
    /// `uniqueItems`.
    pub unique_items: bool,
    /// `maxProperties`.
    pub max_properties: Option<i64>,
    /// `minProperties`.
    pub min_properties: Option<i64>,
    /// `allOf`.
    pub all_of: Vec<Schema>,
    /// `anyOf`.
    pub any_of: Vec<Schema>,
    /// `oneOf`.
    pub one_of: Vec<Schema>,
    /// `not`.
    pub not: Option<Box<Schema>>,
    /// `x-kubernetes-list-type`.
    pub list_type: Option<String>,
    /// `x-kubernetes-list-map-keys`.
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type`.
    pub map_type: Option<String>,
    /// `x-kubernetes-patch-strategy`, split at commas (`merge`, `replace`, `retainKeys`):
    /// how a strategic merge patch treats this field. Built-in kinds only.
    pub patch_strategies: Vec<String>,
    /// `x-kubernetes-patch-merge-key`: which field identifies an item of this list in a
    /// strategic merge patch.
    pub patch_merge_key: Option<String>,
    /// `x-crdctl-go-type`: the Go struct a built-in kind's object node decodes into
    /// (`v1.DeploymentSpec`), which Go's decoder names in its errors. Built-in kinds only.
    pub go_type: Option<String>,
    /// `x-kubernetes-validations`, compiled.
    pub rules: Vec<Rule>,
    /// The CEL type of `self` in this node's rules (none without rules, or for nodes CEL
    /// cannot type).
    pub rule_type: Option<std::sync::Arc<cel::decl::Decl>>,
    /// Whether this node or any below it has rules (so rule checks can skip whole subtrees).
    pub has_rules: bool,
    /// Whether any node below this one has rules.
    pub has_rules_below: bool,
    /// Whether this node or any below it is an embedded resource (so their check can skip
    /// whole subtrees).
    pub has_embedded_resources: bool,
    /// Whether this node or any below it has an `x-kubernetes-list-type` (so their check can
    /// skip whole subtrees).
    pub has_list_types: bool,
    /// What pruning and defaulting do here.
    pub read: ReadPlan,
}

/// `additionalProperties`: a schema, or `false`.
#[derive(Debug, Clone)]
pub enum Additional {
    /// `additionalProperties: false`.
    Forbidden,
    /// A schema every other property must satisfy.
    Schema(Box<Schema>),
}

/// The keywords as they are spelled in JSON; turned into a [`Schema`] by [`Schema::new`]. The
/// keywords holding schemas (`properties`, `items`, `allOf`, …) are read in place, not copied.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Keywords {
    #[serde(rename = "type")]
    kind: Option<String>,
    format: Option<String>,
    nullable: bool,
    #[serde(rename = "x-kubernetes-int-or-string")]
    int_or_string: bool,
    #[serde(rename = "x-kubernetes-preserve-unknown-fields")]
    preserve_unknown_fields: Option<bool>,
    #[serde(rename = "x-kubernetes-embedded-resource")]
    embedded_resource: bool,
    required: Vec<String>,
    #[serde(rename = "enum")]
    enumeration: Option<Vec<Value>>,
    default: Option<Value>,
    maximum: Option<f64>,
    exclusive_maximum: bool,
    minimum: Option<f64>,
    exclusive_minimum: bool,
    multiple_of: Option<f64>,
    max_length: Option<i64>,
    min_length: Option<i64>,
    pattern: Option<String>,
    max_items: Option<i64>,
    min_items: Option<i64>,
    unique_items: bool,
    max_properties: Option<i64>,
    min_properties: Option<i64>,
    #[serde(rename = "x-kubernetes-list-type")]
    list_type: Option<String>,
    #[serde(rename = "x-kubernetes-list-map-keys")]
    list_map_keys: Vec<String>,
    #[serde(rename = "x-kubernetes-map-type")]
    map_type: Option<String>,
    #[serde(rename = "x-kubernetes-patch-strategy")]
    patch_strategy: Option<String>,
    #[serde(rename = "x-kubernetes-patch-merge-key")]
    patch_merge_key: Option<String>,
    #[serde(rename = "x-crdctl-go-type")]
    go_type: Option<String>,
    #[serde(rename = "x-kubernetes-validations")]
    validations: Vec<Value>,
}

impl Schema {
    /// Compiles a version's `openAPIV3Schema`. Keywords of the wrong JSON type are ignored
    /// here: definition validation reports them (a CRD that reaches the server has passed it).
    pub fn new(root: &Value) -> Schema {
        compiling::scope(|| Schema::node(root, true))
    }

    /// `resource_root`: the root of a resource, where rules also see `apiVersion`, `kind` and
    /// `metadata`.
    fn node(node: &Value, resource_root: bool) -> Schema {
        let keywords = Keywords::deserialize(node).unwrap_or_default();
        let child = |node: &Value| Schema::node(node, false);
        let children = |key: &str| node.get(key).and_then(Value::as_array).into_iter().flatten().map(child).collect();
        let object = |key: &str| node.get(key).filter(|value| value.is_object());
        let mut types: Vec<String> = keywords.kind.iter().filter(|t| !t.is_empty()).cloned().collect();
        if keywords.int_or_string {
            types = vec!["integer".into(), "string".into()];
        }
        let format_name = keywords.format.unwrap_or_default();
        let format = Format::supported(&format_name, keywords.kind.as_deref().unwrap_or_default());
        Schema {
            types,
            format,
            format_name,
            nullable: keywords.nullable,
            int_or_string: keywords.int_or_string,
            preserve_unknown_fields: keywords.preserve_unknown_fields == Some(true),
            embedded_resource: keywords.embedded_resource,
            renamed_in_cel: false,
            properties: node
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(name, node)| {
                    let renamed_in_cel = cel::escape(name).as_deref() != Some(name.as_str());
                    (name.clone(), Schema { renamed_in_cel, ..child(node) })
                })
                .collect(),
            additional_properties: match node.get("additionalProperties") {
                Some(Value::Bool(false)) => Some(Additional::Forbidden),
                Some(node @ Value::Object(_)) => Some(Additional::Schema(Box::new(child(node)))),
                _ => None,
            },
            items: object("items").map(|node| Box::new(child(node))),
            required: keywords.required,
            enumeration: keywords.enumeration,
            default: keywords.default,
            maximum: keywords.maximum,
            exclusive_maximum: keywords.exclusive_maximum,
            minimum: keywords.minimum,
            exclusive_minimum: keywords.exclusive_minimum,
            multiple_of: keywords.multiple_of,
            max_length: keywords.max_length,
            min_length: keywords.min_length,
            pattern: keywords.pattern.map(compiling::Pattern::new),
            max_items: keywords.max_items,
            min_items: keywords.min_items,
            unique_items: keywords.unique_items,
            max_properties: keywords.max_properties,
            min_properties: keywords.min_properties,
            all_of: children("allOf"),
            any_of: children("anyOf"),
            one_of: children("oneOf"),
            not: object("not").map(|node| Box::new(child(node))),
            list_type: keywords.list_type,
            list_map_keys: keywords.list_map_keys,
            map_type: keywords.map_type,
            patch_strategies: keywords
                .patch_strategy
                .map(|s| s.split(',').map(str::to_string).collect())
                .unwrap_or_default(),
            patch_merge_key: keywords.patch_merge_key,
            go_type: keywords.go_type,
            rules: keywords.validations.iter().map(Rule::new).collect(),
            rule_type: None,
            has_rules: false,
            has_rules_below: false,
            has_embedded_resources: false,
            has_list_types: false,
            read: ReadPlan::default(),
        }
        .with_read_plan(resource_root)
        .with_subtree_flags()
        .with_rule_type(resource_root)
    }

    fn with_read_plan(mut self, resource_root: bool) -> Schema {
        self.read = ReadPlan::new(&self, resource_root);
        self
    }

    /// Types the node's rules, and bounds what each evaluation of them can cost.
    fn with_rule_type(mut self, resource_root: bool) -> Schema {
        if self.rules.is_empty() {
            return self;
        }
        let Some(decl) = cel::decl::Decl::of(&self, resource_root || self.embedded_resource) else { return self };
        for rule in &mut self.rules {
            if let Ok(compiled) = &rule.compiled {
                let (source, decl) = (&rule.source, &decl);
                rule.checked = Some(cel::Checks {
                    rule: compiled.check(source, decl),
                    message: compiled.check_message(source, decl),
                });
            }
        }
        self.rule_type = Some(std::sync::Arc::new(decl));
        self
    }

    /// What this node and those below it hold, from the flags of its children.
    fn with_subtree_flags(mut self) -> Schema {
        let below = |flag: fn(&Schema) -> bool| {
            matches!(&self.additional_properties, Some(Additional::Schema(schema)) if flag(schema))
                || self.properties.values().any(flag)
                || self.items.as_deref().is_some_and(flag)
        };
        let has_rules_below = below(|s| s.has_rules);
        let has_embedded_resources = self.embedded_resource || below(|s| s.has_embedded_resources);
        let has_list_types = self.list_type.is_some() || below(|s| s.has_list_types);
        (self.has_rules, self.has_rules_below) = (!self.rules.is_empty() || has_rules_below, has_rules_below);
        (self.has_embedded_resources, self.has_list_types) = (has_embedded_resources, has_list_types);
        self
    }

    /// The schema of a property: `properties[name]`, else `additionalProperties`.
    pub fn property(&self, name: &str) -> Option<&Schema> {
        self.properties.get(name).or(match &self.additional_properties {
            Some(Additional::Schema(schema)) => Some(schema),
            _ => None,
        })
    }

    fn has_type(&self, name: &str) -> bool {
        self.types.iter().any(|t| t == name)
    }
}

/// The old item a new list item corresponds to: `map` list items by their keys, `set` items by
/// value; items of other lists correspond to nothing (upstream's `CorrelatedObject`).
pub(crate) fn correlate<'a>(list_schema: &Schema, item: &Value, old_items: &'a [Value]) -> Option<&'a Value> {
    match list_schema.list_type.as_deref() {
        Some("map") if !list_schema.list_map_keys.is_empty() => {
            let key = |v: &Value| -> Vec<Option<Value>> {
                list_schema.list_map_keys.iter().map(|k| v.get(k).cloned()).collect()
            };
            let wanted = key(item);
            old_items.iter().find(|old| key(old) == wanted)
        }
        Some("set") => old_items.iter().find(|old| *old == item),
        _ => None,
    }
}
