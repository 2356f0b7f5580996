//! Core `v1` Namespaces: enough for namespaced custom resources (`default` exists; objects
//! need an existing namespace; deleting a namespace deletes what is in it).

use serde_json::{Value, json};

use crate::error::{ApiError, Subject};

/// Where namespaces are stored.
pub const PREFIX: &str = "/registry/namespaces/";

/// The verbs of `namespaces`: no `deletecollection`.
pub const VERBS: [&str; 7] = ["create", "delete", "get", "list", "patch", "update", "watch"];

/// Namespaces every cluster has; none of them can be deleted.
pub const BUILT_IN: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// What errors about namespace `name` name.
pub fn subject(name: &str) -> Subject<'_> {
    Subject { group: "", resource: "namespaces", name }
}

/// The store key of a namespace.
pub fn key(name: &str) -> String {
    format!("{PREFIX}{name}")
}

/// A new namespace object.
pub fn new(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// A DNS-1123 label's problems, in upstream's words.
fn label_errors(name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name.len() > 63 {
        problems.push("must be no more than 63 characters".to_string());
    }
    let valid = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !valid {
        problems.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    problems
}

/// Checks and fills a namespace on create.
pub fn prepare_create(object: &mut Value) -> Result<(), ApiError> {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    if api_version != "v1" || object.get("kind").and_then(Value::as_str) != Some("Namespace") {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version (v1)"
        )));
    }
    let name = crate::object::name(object).to_string();
    let problems = label_errors(&name);
    if name.is_empty() || !problems.is_empty() {
        let violations: Vec<_> = crate::object::name_violations(object)
            .into_iter()
            .chain(problems.into_iter().map(|detail| crdctl_model::validation::Violation {
                field: "metadata.name".into(),
                pointer: String::new(),
                kind: crdctl_model::validation::ErrorKind::Invalid(crdctl_model::validation::go_quote(&name)),
                detail,
            }))
            .collect();
        return Err(ApiError::invalid("", "Namespace", &name, &violations));
    }
    crate::object::prepare_create(object, None);
    object["spec"] = json!({"finalizers": ["kubernetes"]});
    object["status"] = json!({"phase": "Active"});
    Ok(())
}
