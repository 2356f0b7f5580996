//! `admissionregistration.k8s.io/v1`: upstream's defaults for webhook configurations, policies
//! and bindings (`pkg/apis/admissionregistration/v1/defaults.go`), and the part of its validation
//! (`pkg/apis/admissionregistration/validation`) without which a wrong object would be stored
//! and then act differently than written: expressions that do not compile, and a binding's
//! `policyName` and `validationActions`.

use crdctl_model::field::{self, Path, Raw};
use crdctl_schema::cel::checker::Variable;
use crdctl_schema::cel::decl::{Decl, DeclKind};
use serde_json::{Map, Value, json};

/// What upstream's defaulting sets on an object of `kind`.
pub fn default(kind: &str, object: &mut Value) {
    match kind {
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
            for webhook in each_mut(object.get_mut("webhooks")) {
                insert(webhook, "failurePolicy", json!("Fail"));
                insert(webhook, "timeoutSeconds", json!(10));
                match_defaults(webhook);
                if kind == "MutatingWebhookConfiguration" {
                    insert(webhook, "reinvocationPolicy", json!("Never"));
                }
                if let Some(service) = webhook.get_mut("clientConfig").and_then(|c| c.get_mut("service")) {
                    service.as_object_mut().into_iter().for_each(|s| insert(s, "port", json!(443)));
                }
            }
        }
        "ValidatingAdmissionPolicy" => {
            let spec = crate::object::object_mut(object, "spec");
            insert(spec, "failurePolicy", json!("Fail"));
            if let Some(constraints) = spec.get_mut("matchConstraints").and_then(Value::as_object_mut) {
                match_defaults(constraints);
            }
        }
        "ValidatingAdmissionPolicyBinding" => {
            let resources = object.pointer_mut("/spec/matchResources").and_then(Value::as_object_mut);
            resources.into_iter().for_each(match_defaults);
        }
        _ => {}
    }
}

/// `SetDefaults_MatchResources` and `SetDefaults_Rule` (a webhook has the same fields).
fn match_defaults(matching: &mut Map<String, Value>) {
    insert(matching, "matchPolicy", json!("Equivalent"));
    insert(matching, "namespaceSelector", json!({}));
    insert(matching, "objectSelector", json!({}));
    for rules in ["rules", "resourceRules", "excludeResourceRules"] {
        for rule in each_mut(matching.get_mut(rules)) {
            insert(rule, "scope", json!("*"));
        }
    }
}

fn insert(fields: &mut Map<String, Value>, key: &str, value: Value) {
    fields.entry(key).or_insert(value);
}

fn each_mut(list: Option<&mut Value>) -> impl Iterator<Item = &mut Map<String, Value>> {
    list.and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut)
}

fn each(list: Option<&Value>) -> impl Iterator<Item = (usize, &Value)> {
    list.and_then(Value::as_array).into_iter().flatten().enumerate()
}

/// What upstream's validation refuses in an object of `kind`, of the checks above.
pub fn validate(kind: &str, object: &Value) -> field::ErrorList {
    match kind {
        "ValidatingAdmissionPolicy" => validate_policy(object),
        "ValidatingAdmissionPolicyBinding" => validate_binding(object),
        _ => field::ErrorList::new(),
    }
}

fn validate_policy(object: &Value) -> field::ErrorList {
    let mut errors = field::ErrorList::new();
    let spec_path = Path::new("spec");
    let spec = object.get("spec").cloned().unwrap_or_default();
    let empty = |name: &str| spec.get(name).and_then(Value::as_array).is_none_or(Vec::is_empty);
    if empty("validations") && empty("auditAnnotations") {
        let detail = "validations or auditAnnotations must contain at least one item";
        errors.push(spec_path.child("validations").required(detail));
        errors.push(spec_path.child("auditAnnotations").required(detail));
    }
    // Every expression may read these; the variables are read as `variables.<name>`.
    let dynamic = Decl { kind: DeclKind::Dyn, max_elements: 0, min_serialized_size: 0 };
    let names = each(spec.get("variables")).filter_map(|(_, v)| v.get("name")?.as_str());
    let variables = names.map(|name| (name.to_string(), dynamic.clone())).collect();
    let variables = Decl { kind: DeclKind::Object(variables), max_elements: 0, min_serialized_size: 0 };
    let mut declared: Vec<Variable<'_>> =
        ["object", "oldObject", "request", "namespaceObject", "authorizer"].map(Variable::dynamic).to_vec();
    declared.push(Variable::typed("variables", &variables));
    if spec.get("paramKind").is_some_and(|p| !p.is_null()) {
        declared.push(Variable::dynamic("params"));
    }
    let lists = [
        ("matchConditions", "expression"),
        ("variables", "expression"),
        ("validations", "expression"),
        ("validations", "messageExpression"),
        ("auditAnnotations", "valueExpression"),
    ];
    for (list, field) in lists {
        let list_path = spec_path.child(list);
        for (index, entry) in each(spec.get(list)) {
            let Some(expression) = entry.get(field).and_then(Value::as_str).filter(|e| !e.trim().is_empty()) else {
                continue;
            };
            let found = crdctl_schema::cel::check_admission(expression, &declared).errors;
            if !found.is_empty() {
                let path = list_path.index(index);
                let detail = format!("compilation failed: {}", found.join("\n"));
                errors.push(path.child(field).invalid(expression, detail));
            }
        }
    }
    errors
}

fn validate_binding(object: &Value) -> field::ErrorList {
    let mut errors = field::ErrorList::new();
    let spec_path = Path::new("spec");
    if object.pointer("/spec/policyName").and_then(Value::as_str).is_none_or(str::is_empty) {
        errors.push(spec_path.child("policyName").required(""));
    }
    let actions_path = spec_path.child("validationActions");
    let actions: Vec<&str> = each(object.pointer("/spec/validationActions")).filter_map(|(_, a)| a.as_str()).collect();
    const SUPPORTED: [&str; 3] = ["Audit", "Deny", "Warn"];
    for (index, action) in actions.iter().enumerate() {
        if !SUPPORTED.contains(action) {
            errors.push(actions_path.index(index).not_supported(action, &SUPPORTED));
        }
        if actions.iter().take(index).any(|a| a == action) {
            errors.push(actions_path.index(index).duplicate(*action));
        }
    }
    if actions.contains(&"Deny") && actions.contains(&"Warn") {
        // Go prints the internal type's value with `%#v`.
        let quoted: Vec<String> = actions.iter().map(|a| format!("{a:?}")).collect();
        let written = Raw(format!("[]admissionregistration.ValidationAction{{{}}}", quoted.join(", ")));
        let detail = "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)";
        errors.push(actions_path.invalid(written, detail));
    }
    if actions.is_empty() {
        errors.push(actions_path.required("at least one validation action is required"));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errors: field::ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaults_are_upstreams() {
        let mut configuration = json!({"webhooks": [{"name": "a", "clientConfig": {"service": {"namespace": "n", "name": "s"}},
            "rules": [{"operations": ["CREATE"]}]}]});
        default("MutatingWebhookConfiguration", &mut configuration);
        assert_eq!(
            configuration["webhooks"][0],
            json!({"name": "a", "clientConfig": {"service": {"namespace": "n", "name": "s", "port": 443}},
                "rules": [{"operations": ["CREATE"], "scope": "*"}], "failurePolicy": "Fail", "timeoutSeconds": 10,
                "matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {}, "reinvocationPolicy": "Never"})
        );
        let mut policy = json!({"spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"]}]}}});
        default("ValidatingAdmissionPolicy", &mut policy);
        assert_eq!(policy["spec"]["failurePolicy"], "Fail");
        assert_eq!(policy["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert_eq!(policy["spec"]["matchConstraints"]["resourceRules"][0]["scope"], "*");
    }

    #[test]
    fn policies_with_expressions_that_do_not_compile_are_refused() {
        let policy = json!({"spec": {"validations": [{"expression": "object.spec.replicas < 5"},
            {"expression": "params.max > 1"}, {"expression": "variables.known && !variables.unknown"}],
            "variables": [{"name": "known", "expression": "true"}]}});
        let found = messages(validate("ValidatingAdmissionPolicy", &policy));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(
            found[0].starts_with(r#"spec.validations[1].expression: Invalid value: "params.max > 1": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params'"#),
            "{found:#?}"
        );
        assert!(found[1].contains("undefined field 'unknown'"), "{found:#?}");
        let empty = messages(validate("ValidatingAdmissionPolicy", &json!({"spec": {}})));
        assert_eq!(
            empty,
            [
                "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
                "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
            ]
        );
    }

    #[test]
    fn bindings_need_a_policy_and_known_actions() {
        let found = messages(validate(
            "ValidatingAdmissionPolicyBinding",
            &json!({"spec": {"validationActions": ["Deny", "Warn", "Deny", "Block"]}}),
        ));
        assert_eq!(
            found,
            [
                "spec.policyName: Required value",
                "spec.validationActions[2]: Duplicate value: \"Deny\"",
                "spec.validationActions[3]: Unsupported value: \"Block\": supported values: \"Audit\", \"Deny\", \"Warn\"",
                "spec.validationActions: Invalid value: []admissionregistration.ValidationAction{\"Deny\", \"Warn\", \"Deny\", \"Block\"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ]
        );
    }
}
