//! A `ValidatingAdmissionPolicy`'s `status.typeChecking`: what upstream's type checker
//! (`policy/validating/typechecking.go`) warns about each validation's `expression` and
//! `messageExpression`, checked against the schemas of the kinds the policy matches.
//!
//! The kinds are those the `matchConstraints` name without wildcards (at most ten, sorted by
//! group, version and kind); `object` and `oldObject` have each kind's schema, `params` the
//! `paramKind`'s (`dyn` when it is not served), `variables` the types of the policy's
//! variables, and `request`, `namespaceObject` and `authorizer` are `dyn`. Each warning names
//! the kind it is about (`apps/v1, Kind=Deployment: ERROR: <input>:1:8: undefined field 'foo'`).
//! The warnings never change what the policy does; the server records them when the policy is
//! written, with `observedGeneration`, where upstream's controller records them soon after.

use std::collections::HashMap;

use crdctl_schema::cel::checker::Variable;
use crdctl_schema::cel::decl::{Decl, DeclKind};
use serde_json::{Value, json};

use super::policy::Policy;
use crate::registry::Registry;
use crate::registry::builtin;

/// Upstream's `maxTypesToCheck`.
const MAX_TYPES: usize = 10;

/// Sets `status` of a written policy: `observedGeneration` and the type checker's warnings.
pub fn record(registry: &Registry, object: &mut Value) {
    let Ok(policy) = serde_json::from_value::<Policy>(object.clone()) else { return };
    let warnings: Vec<Value> = warnings(registry, &policy)
        .into_iter()
        .map(|(field_ref, warning)| json!({"fieldRef": field_ref, "warning": warning}))
        .collect();
    let generation = object.pointer("/metadata/generation").cloned().unwrap_or(json!(1));
    let mut type_checking = json!({});
    if !warnings.is_empty() {
        crate::object::set(&mut type_checking, "expressionWarnings", Value::Array(warnings));
    }
    crate::object::set(object, "status", json!({"observedGeneration": generation, "typeChecking": type_checking}));
}

/// The warnings of each validation's expressions, by field (`spec.validations[0].expression`).
fn warnings(registry: &Registry, policy: &Policy) -> Vec<(String, String)> {
    let params = policy.spec.param_kind.as_ref().map(|param| {
        let (group, version) = param.api_version.split_once('/').unwrap_or(("", param.api_version.as_str()));
        object_decl(registry, &Kind { group: group.into(), version: version.into(), kind: param.kind.clone() })
    });
    // Per kind: the object's type, and the variables' types with it.
    let scopes: Vec<(Kind, Decl, Decl)> = kinds(registry, policy)
        .into_iter()
        .filter_map(|kind| {
            let object = object_decl(registry, &kind)?;
            let variables = variables(policy, &declared(&object, params.as_ref()));
            Some((kind, object, variables))
        })
        .collect();
    let mut found = Vec::new();
    for (index, validation) in policy.spec.validations.iter().enumerate() {
        let expressions = [
            ("expression", Some(&validation.expression)),
            ("messageExpression", validation.message_expression.as_ref()),
        ];
        for (field, expression) in expressions {
            let Some(expression) = expression.filter(|e| !e.trim().is_empty()) else { continue };
            let results: Vec<String> = scopes
                .iter()
                .filter_map(|(kind, object, variables)| {
                    let mut scope = declared(object, params.as_ref());
                    scope.push(Variable::typed("variables", variables));
                    let errors = crdctl_schema::cel::check_admission(expression, &scope).errors;
                    (!errors.is_empty()).then(|| format!("{kind}: {}\n", errors.join("\n")))
                })
                .collect();
            if !results.is_empty() {
                found.push((format!("spec.validations[{index}].{field}"), results.join("\n")));
            }
        }
    }
    found
}

/// What every expression may read besides `variables`: `object` and `oldObject` of the kind's
/// type, `params` (with a `paramKind`: its type, or `dyn` when it is not served), and the rest
/// untyped.
fn declared<'d>(object: &'d Decl, params: Option<&'d Option<Decl>>) -> Vec<Variable<'d>> {
    let mut declared = vec![Variable::typed("object", object), Variable::typed("oldObject", object)];
    declared.extend(["request", "namespaceObject", "authorizer"].map(Variable::dynamic));
    match params {
        Some(Some(params)) => declared.push(Variable::typed("params", params)),
        Some(None) => declared.push(Variable::dynamic("params")),
        None => {}
    }
    declared
}

/// The type of `variables`: each variable typed by its expression, checked with the ones
/// before it.
fn variables(policy: &Policy, declared: &[Variable<'_>]) -> Decl {
    let object = |fields| Decl { kind: DeclKind::Object(fields), max_elements: 0, min_serialized_size: 0 };
    let mut fields = HashMap::new();
    for variable in &policy.spec.variables {
        let composed = object(fields.clone());
        let mut scope = declared.to_vec();
        scope.push(Variable::typed("variables", &composed));
        let checked = crdctl_schema::cel::check_admission(&variable.expression, &scope);
        fields.insert(variable.name.clone(), checked.output);
    }
    object(fields)
}

/// A group, version and kind, shown as upstream's `GroupVersionKind` prints.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Kind {
    group: String,
    version: String,
    kind: String,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// The kinds the policy's resource rules name exactly (upstream's `typesToCheck`): rules with a
/// wildcard group or version name none, wildcard resources and subresources are skipped.
fn kinds(registry: &Registry, policy: &Policy) -> Vec<Kind> {
    let Some(constraints) = &policy.spec.match_constraints else { return Vec::new() };
    let mut kinds: Vec<Kind> = Vec::new();
    for named in &constraints.resource_rules {
        let rule = &named.rule;
        if rule.api_groups.iter().chain(&rule.api_versions).any(|g| g.contains('*')) {
            continue;
        }
        let mut groups = rule.api_groups.clone();
        let mut versions = rule.api_versions.clone();
        let mut resources: Vec<&String> = rule.resources.iter().filter(|r| !r.contains(['*', '/'])).collect();
        groups.sort();
        versions.sort();
        resources.sort();
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    let Some(kind) = kind_of(registry, group, version, resource) else { continue };
                    if !kinds.contains(&kind) {
                        kinds.push(kind);
                    }
                    if kinds.len() == MAX_TYPES {
                        kinds.sort();
                        return kinds;
                    }
                }
            }
        }
    }
    kinds.sort();
    kinds
}

/// The kind served as `resource` of `group`/`version`.
fn kind_of(registry: &Registry, group: &str, version: &str, resource: &str) -> Option<Kind> {
    let kind = match builtin::find(group, version, resource) {
        Some(builtin) => builtin.kind.to_string(),
        None => {
            let served = registry.by_resource(group, resource)?;
            served.served_version(version)?;
            served.kind().to_string()
        }
    };
    Some(Kind { group: group.into(), version: version.into(), kind })
}

/// The type of an object of `kind`, from its published schema: a built-in kind's from upstream's
/// OpenAPI document, a custom resource's from its CRD with the `ObjectMeta` every published
/// schema refers to.
fn object_decl(registry: &Registry, kind: &Kind) -> Option<Decl> {
    let served = registry.resource_of_kind((&kind.group, &kind.version, &kind.kind))?;
    Decl::of(&*served.object_schema(&kind.version)?, true)
}
