//! A version's `openAPIV3Schema` as the API server checks it on create and update: it must be
//! structural (apiextensions' `pkg/apiserver/schema/validation.go` and `complete.go`), and the
//! keywords with API-server meaning must be used as `ValidateCustomResourceDefinitionOpenAPISchema`
//! allows (`uniqueItems`, `additionalProperties` with `properties`, list types and their keys,
//! `x-kubernetes-validations` rules that compile).
//!
//! A structural schema keeps the shape (`type`, `properties`, `items`, `additionalProperties`,
//! the `x-kubernetes-*` extensions, `default`, `nullable`, `description`) outside `allOf`,
//! `anyOf`, `oneOf` and `not`, which may only add value checks on fields the shape declares.
//! Messages are upstream's; errors are sorted by their text, as upstream sorts them.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::Schema;
use crate::cel::RuleSource;
use crdctl_model::field::{self, Path, Raw};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn text<'a>(schema: &'a Value, key: &str) -> &'a str {
    schema.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

fn additional(schema: &Value) -> Option<&Value> {
    schema.get("additionalProperties").filter(|a| a.is_object())
}

/// The version schemas of one CRD, each compiled once: versions often share one schema word
/// for word (compiling parses every CEL rule, the dearest part of validating a CRD).
#[derive(Default)]
pub(crate) struct Compiled<'a> {
    schemas: Vec<(&'a Value, Schema)>,
}

impl<'a> Compiled<'a> {
    fn of(&mut self, schema: &'a Value) -> Option<&Schema> {
        if !self.schemas.iter().any(|(compiled, _)| *compiled == schema) {
            self.schemas.push((schema, Schema::new(schema)));
        }
        self.schemas.iter().find(|(compiled, _)| *compiled == schema).map(|(_, compiled)| compiled)
    }
}

/// Every problem with one version's schema, at `path` (`spec.versions[i].schema.openAPIV3Schema`).
pub(crate) fn validate<'a>(schema: &'a Value, path: &Path, compiled: &mut Compiled<'a>) -> field::ErrorList {
    let mut structural = Vec::new();
    invariants(schema, Level::Root, path, &mut structural);
    completeness(schema, schema, path, path, &mut structural);
    structural.sort_by_key(ToString::to_string);
    // Defaults are checked, and rules typed and costed, only against a structural schema,
    // compiled once for both.
    let compiled = if structural.is_empty() { compiled.of(schema) } else { None };
    if let Some(compiled) = compiled {
        defaults(schema, compiled, path, &mut structural);
    }
    let costed = compiled.is_some() && structural.is_empty();
    let mut out = structural;
    if schema.get("nullable") == Some(&Value::Bool(true)) {
        out.push(path.child("nullable").forbidden("nullable cannot be true at the root"));
    }
    keywords(schema, path, &mut out);
    if let Some(compiled) = compiled.filter(|_| costed) {
        let rules = super::cel::validate(compiled, path, &out);
        out.extend(rules);
    }
    out
}

/// `type: integer` or `type: string` alone: the `anyOf` upstream accepts with int-or-string.
fn is_int_or_string_any_of(branches: Option<&Value>) -> bool {
    let Some(branches) = branches.and_then(Value::as_array) else { return false };
    branches.len() == 2
        && branches
            .iter()
            .zip(["integer", "string"])
            .all(|(b, t)| b.as_object().is_some_and(|o| o.len() == 1) && text(b, "type") == t)
}

fn invariants(s: &Value, level: Level, path: &Path, out: &mut field::ErrorList) {
    let kind = text(s, "type");
    if kind == "array" && s.get("items").is_none() {
        out.push(path.child("items").required("must be specified"));
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        invariants(items, Level::Item, &path.child("items"), out);
    }
    for (name, property) in properties(s).into_iter().flatten() {
        invariants(property, Level::Field, &path.child("properties").key(name), out);
    }
    if s.get("additionalProperties").is_some_and(|a| !a.is_null()) {
        if level == Level::Root {
            out.push(path.child("additionalProperties").forbidden("must not be used at the root"));
        }
        if let Some(additional) = additional(s) {
            invariants(additional, Level::Field, &path.child("additionalProperties"), out);
        }
    }
    let int_or_string = flag(s, "x-kubernetes-int-or-string");
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(s, "x-kubernetes-embedded-resource");
    if int_or_string && preserve {
        out.push(
            path.child("x-kubernetes-preserve-unknown-fields")
                .invalid(true, "must be false if x-kubernetes-int-or-string is true"),
        );
    }
    if int_or_string && embedded {
        out.push(
            path.child("x-kubernetes-embedded-resource")
                .invalid(true, "must be false if x-kubernetes-int-or-string is true"),
        );
    }
    let skip_any_of = is_int_or_string_any_of(s.get("anyOf"));
    let skip_first_all_of = s
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .is_some_and(|first| is_int_or_string_any_of(first.get("anyOf")));
    value_validation(s, skip_any_of, skip_first_all_of, path, out);

    let check_metadata = level == Level::Root || embedded;
    if embedded && kind != "object" {
        if kind.is_empty() {
            out.push(path.child("type").required("must be object if x-kubernetes-embedded-resource is true"));
        } else {
            out.push(path.child("type").invalid(kind, "must be object if x-kubernetes-embedded-resource is true"));
        }
    } else if kind.is_empty() && !int_or_string && !preserve {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        out.push(path.child("type").required(detail));
    }
    if embedded && s.get("additionalProperties").is_some_and(|a| !a.is_null()) {
        out.push(
            path.child("additionalProperties").forbidden("must not be used if x-kubernetes-embedded-resource is set"),
        );
    }
    if level == Level::Root && !kind.is_empty() && kind != "object" {
        out.push(path.child("type").invalid(kind, "must be object at the root"));
    }
    for name in ["kind", "apiVersion"] {
        if let Some(property) = properties(s).and_then(|p| p.get(name))
            && check_metadata
            && text(property, "type") != "string"
        {
            out.push(
                path.child("properties").key(name).child("type").invalid(text(property, "type"), "must be string"),
            );
        }
    }
    if let Some(metadata) = properties(s).and_then(|p| p.get("metadata")) {
        let properties_path = path.child("properties");
        let metadata_path = properties_path.key("metadata");
        if check_metadata && text(metadata, "type") != "object" {
            out.push(metadata_path.child("type").invalid(text(metadata, "type"), "must be object"));
        }
        if level == Level::Root && !only_names(metadata) {
            out.push(metadata_path.forbidden(
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if embedded && !preserve && properties(s).is_none_or(Map::is_empty) {
        out.push(path.child("properties").required(
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// Whether a root `metadata` schema says nothing but its type, a default, and restrictions of
/// `name` and `generateName`.
fn only_names(metadata: &Value) -> bool {
    let Some(fields) = metadata.as_object() else { return true };
    fields.iter().all(|(key, value)| match key.as_str() {
        "type" | "default" => true,
        "properties" => value.as_object().is_some_and(|p| p.keys().all(|k| k == "name" || k == "generateName")),
        _ => false,
    })
}

fn value_validation(
    v: &Value,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &Path,
    out: &mut field::ErrorList,
) {
    let branches = |key: &str| v.get(key).and_then(Value::as_array).into_iter().flatten().enumerate();
    if !skip_any_of {
        for (i, branch) in branches("anyOf") {
            nested(branch, false, &path.child("anyOf").index(i), out);
        }
    }
    for (i, branch) in branches("allOf") {
        nested(branch, skip_first_all_of_any_of && i == 0, &path.child("allOf").index(i), out);
    }
    for (i, branch) in branches("oneOf") {
        nested(branch, false, &path.child("oneOf").index(i), out);
    }
    if let Some(not) = v.get("not").filter(|n| n.is_object()) {
        nested(not, false, &path.child("not"), out);
    }
    if let Some(pattern) = v.get("pattern").and_then(Value::as_str)
        && let Err(err) = crate::compiling::syntax(pattern)
    {
        out.push(
            path.child("pattern").invalid(pattern, format!("must be a valid regular expression, but isn't: {err}")),
        );
    }
}

fn nested(v: &Value, skip_any_of: bool, path: &Path, out: &mut field::ErrorList) {
    value_validation(v, skip_any_of, false, path, out);
    if let Some(items) = v.get("items").filter(|i| i.is_object()) {
        nested(items, false, &path.child("items"), out);
    }
    for (name, property) in properties(v).into_iter().flatten() {
        nested(property, false, &path.child("properties").key(name), out);
    }
    let present = |key: &str| v.get(key).is_some_and(|x| !x.is_null());
    if !text(v, "type").is_empty() {
        out.push(path.child("type").forbidden("must be empty to be structural"));
    }
    if present("additionalProperties") {
        out.push(path.child("additionalProperties").forbidden("must be undefined to be structural"));
    }
    if present("default") {
        out.push(path.child("default").forbidden("must be undefined to be structural"));
    }
    if !text(v, "title").is_empty() {
        out.push(path.child("title").forbidden("must be empty to be structural"));
    }
    if !text(v, "description").is_empty() {
        out.push(path.child("description").forbidden("must be empty to be structural"));
    }
    for (key, detail) in [
        ("nullable", "must be false to be structural"),
        ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
        ("x-kubernetes-embedded-resource", "must be false to be structural"),
        ("x-kubernetes-int-or-string", "must be false to be structural"),
    ] {
        if flag(v, key) {
            out.push(path.child(key).forbidden(detail));
        }
    }
    if v.get("x-kubernetes-list-map-keys").and_then(Value::as_array).is_some_and(|k| !k.is_empty()) {
        out.push(path.child("x-kubernetes-list-map-keys").forbidden("must be empty to be structural"));
    }
    for key in ["x-kubernetes-list-type", "x-kubernetes-map-type"] {
        if present(key) {
            out.push(path.child(key).forbidden("must be undefined to be structural"));
        }
    }
    if v.get("x-kubernetes-validations").and_then(Value::as_array).is_some_and(|r| !r.is_empty()) {
        out.push(path.child("x-kubernetes-validations").forbidden("must be empty to be structural"));
    }
    if properties(v).is_some_and(|p| p.contains_key("metadata")) {
        out.push(path.child("properties").key("metadata").forbidden("must not be specified in a nested context"));
    }
}

/// Fields that `allOf`/`anyOf`/`oneOf`/`not` branches of `v` mention must exist in the shape `s`.
fn completeness(v: &Value, s: &Value, s_path: &Path, v_path: &Path, out: &mut field::ErrorList) {
    if let Some(not) = v.get("not").filter(|n| n.is_object()) {
        nested_completeness(not, Some(s), s_path, &v_path.child("not"), out);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, branch) in v.get(key).and_then(Value::as_array).into_iter().flatten().enumerate() {
            nested_completeness(branch, Some(s), s_path, &v_path.child(key).index(i), out);
        }
    }
}

fn nested_completeness(v: &Value, s: Option<&Value>, s_path: &Path, v_path: &Path, out: &mut field::ErrorList) {
    let Some(s) = s else {
        out.push(s_path.required(format!("because it is defined in {}", v_path.path())));
        return;
    };
    completeness(v, s, s_path, v_path, out);
    if let Some(items) = v.get("items").filter(|i| i.is_object()) {
        nested_completeness(
            items,
            s.get("items").filter(|i| i.is_object()),
            &s_path.child("items"),
            &v_path.child("items"),
            out,
        );
    }
    for (name, property) in properties(v).into_iter().flatten() {
        let shape = properties(s).and_then(|p| p.get(name));
        let s_properties = s_path.child("properties");
        let v_properties = v_path.child("properties");
        let s_child = s_properties.key(name);
        let v_child = v_properties.key(name);
        match shape {
            Some(shape) => nested_completeness(property, Some(shape), &s_child, &v_child, out),
            None => out.push(s_child.required(format!("because it is defined in {}", v_child.path()))),
        }
    }
}

/// Every `default` must survive pruning and validate against its own node's schema, OpenAPI
/// rules and CEL rules alike (apiextensions' `schema/defaulting/validation.go`, with defaults
/// required to be pruned as for apiextensions.k8s.io/v1). Errors are placed under
/// `<node>.default`, as upstream places kube-openapi's. `node` is `s` compiled.
fn defaults(s: &Value, node: &Schema, path: &Path, out: &mut field::ErrorList) {
    if let Some(default) = s.get("default").filter(|d| !d.is_null()) {
        let default_path = path.child("default");
        let mut pruned = default.clone();
        crate::prune(&mut pruned, node);
        if pruned != *default {
            out.push(default_path.invalid(Raw(crdctl_model::go::bad_value(default)), "must not have unknown fields"));
        }
        let mut errors = crate::validate(default, node);
        if errors.is_empty() {
            errors = crate::validate_rules(default, Some(default), node).errors;
        }
        if errors.is_empty() {
            errors = crate::validate_rules(default, None, node).errors;
        }
        for mut error in errors {
            error.field = if error.field == "<nil>" {
                default_path.path()
            } else {
                format!("{}.{}", default_path.path(), error.field)
            };
            error.pointer = default_path.pointer();
            out.push(error);
        }
    }
    if let (Some(items), Some(compiled)) = (s.get("items").filter(|i| i.is_object()), &node.items) {
        defaults(items, compiled, &path.child("items"), out);
    }
    for (name, property) in properties(s).into_iter().flatten() {
        if let Some(compiled) = node.properties.get(name) {
            defaults(property, compiled, &path.child("properties").key(name), out);
        }
    }
}

/// The API-server-specific keyword rules of `ValidateCustomResourceDefinitionOpenAPISchema`.
fn keywords(s: &Value, path: &Path, out: &mut field::ErrorList) {
    if flag(s, "uniqueItems") {
        out.push(
            path.child("uniqueItems")
                .forbidden("uniqueItems cannot be set to true since the runtime complexity becomes quadratic"),
        );
    }
    if additional(s).is_some() && properties(s).is_some_and(|p| !p.is_empty()) {
        out.push(
            path.child("additionalProperties").forbidden("additionalProperties and properties are mutual exclusive"),
        );
    }
    list_type(s, path, out);
    rules(s, path, out);
    for (name, property) in properties(s).into_iter().flatten() {
        keywords(property, &path.child("properties").key(name), out);
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        keywords(items, &path.child("items"), out);
    }
    if let Some(additional) = additional(s) {
        keywords(additional, &path.child("additionalProperties"), out);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, branch) in s.get(key).and_then(Value::as_array).into_iter().flatten().enumerate() {
            keywords(branch, &path.child(key).index(i), out);
        }
    }
    if let Some(not) = s.get("not").filter(|n| n.is_object()) {
        keywords(not, &path.child("not"), out);
    }
}

fn list_type(s: &Value, path: &Path, out: &mut field::ErrorList) {
    let list_type = s.get("x-kubernetes-list-type").and_then(Value::as_str);
    let kind = text(s, "type");
    let keys: Vec<&str> = s
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if list_type.is_some() && kind != "array" {
        if kind.is_empty() {
            out.push(path.child("type").required("must be array if x-kubernetes-list-type is specified"));
        } else {
            out.push(path.child("type").invalid(kind, "must be array if x-kubernetes-list-type is specified"));
        }
    }
    if let Some(other) = list_type.filter(|t| !["atomic", "set", "map"].contains(t)) {
        out.push(path.child("x-kubernetes-list-type").not_supported(other, &["atomic", "set", "map"]));
    }
    if !keys.is_empty() {
        match list_type {
            None => out.push(
                path.child("x-kubernetes-list-type").required("must be map if x-kubernetes-list-map-keys is non-empty"),
            ),
            Some(t) if t != "map" => {
                out.push(
                    path.child("x-kubernetes-list-type")
                        .invalid(t, "must be map if x-kubernetes-list-map-keys is non-empty"),
                );
            }
            _ => {}
        }
    }
    if list_type != Some("map") {
        return;
    }
    if keys.is_empty() {
        out.push(
            path.child("x-kubernetes-list-map-keys").required("must not be empty if x-kubernetes-list-type is map"),
        );
    }
    let Some(items) = s.get("items") else {
        out.push(path.child("items").required("must have a schema if x-kubernetes-list-type is map"));
        return;
    };
    if !items.is_object() {
        out.push(
            path.child("items")
                .invalid(Raw(items.to_string()), "must only have a single schema if x-kubernetes-list-type is map"),
        );
        return;
    }
    let item_type = text(items, "type");
    if item_type != "object" {
        out.push(
            path.child("items")
                .child("type")
                .invalid(item_type, "must be object if parent array's x-kubernetes-list-type is map"),
        );
        return;
    }
    let quoted: Vec<String> = keys.iter().map(|k| crdctl_model::go::quote(k)).collect();
    let keys_value = || Raw(format!("[]string{{{}}}", quoted.join(", ")));
    for (idx, key) in keys.iter().enumerate() {
        match properties(items).and_then(|p| p.get(*key)) {
            Some(property) if matches!(text(property, "type"), "array" | "object") => out.push(
                path.child("items")
                    .child("properties")
                    .key(key)
                    .child("type")
                    .invalid(item_type, "must be a scalar type if parent array's x-kubernetes-list-type is map"),
            ),
            Some(_) => {}
            None => out.push(
                path.child("x-kubernetes-list-map-keys")
                    .invalid(keys_value(), "entries must all be names of item properties"),
            ),
        }
        if keys.iter().take(idx).any(|earlier| earlier == key) {
            out.push(
                path.child("x-kubernetes-list-map-keys").invalid(keys_value(), "must not contain duplicate entries"),
            );
        }
    }
}

/// `x-kubernetes-validations`: each rule present, and its message, reason and field path
/// usable. Compiling them is [`super::cel`]'s, once the schema is known to be structural.
fn rules(s: &Value, path: &Path, out: &mut field::ErrorList) {
    const REASONS: [&str; 4] =
        ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];
    for (i, entry) in s.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let rules_path = path.child("x-kubernetes-validations");
        let rule_path = rules_path.index(i);
        let source = &RuleSource::deserialize(entry).unwrap_or_default();
        let message = source.message.trim();
        if source.rule.trim().is_empty() {
            out.push(rule_path.child("rule").required("rule is not specified"));
        } else if !source.message.is_empty() && message.is_empty() {
            out.push(rule_path.child("message").invalid(&source.message, "must be non-empty if specified"));
        } else if message.contains('\n') {
            out.push(rule_path.child("message").invalid(&source.message, "must not contain line breaks"));
        } else if source.rule.trim().contains('\n') && message.is_empty() {
            out.push(rule_path.child("message").required("message must be specified if rule contains line breaks"));
        }
        if !source.message_expression.is_empty() && source.message_expression.trim().is_empty() {
            out.push(rule_path.child("messageExpression").required("messageExpression must be non-empty if specified"));
        }
        if let Some(reason) = source.reason.as_deref().filter(|r| !REASONS.contains(r)) {
            out.push(rule_path.child("reason").not_supported(reason, &REASONS));
        }
        if !source.field_path.is_empty() && source.field_path.trim().is_empty() {
            out.push(rule_path.child("fieldPath").invalid(&source.field_path, "must be non-empty if specified"));
        }
        if source.field_path.contains('\n') {
            out.push(rule_path.child("fieldPath").invalid(&source.field_path, "must not contain line breaks"));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize)]
    struct Case {
        name: String,
        schema: Value,
        #[serde(default)]
        errors: Vec<String>,
        error_prefix: Option<String>,
    }

    #[test]
    fn structural_schema_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/structural_schemas.yaml");
        let cases: Vec<Case> =
            serde_saphyr::from_str(&std::fs::read_to_string(path).expect("the table")).expect("YAML");
        assert!(cases.len() >= 15, "the table lost cases");
        let mut problems = Vec::new();
        for case in &cases {
            let seen: Vec<String> = validate(&case.schema, &Path::new("openAPIV3Schema"), &mut Compiled::default())
                .iter()
                .map(ToString::to_string)
                .collect();
            let ok = match &case.error_prefix {
                Some(prefix) => seen.len() == 1 && seen[0].starts_with(prefix),
                None => seen == case.errors,
            };
            if !ok {
                let expected = case.error_prefix.clone().map_or_else(|| case.errors.clone(), |p| vec![p]);
                problems.push(format!("{}:\n  got {seen:#?}\n  expected {expected:#?}", case.name));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
