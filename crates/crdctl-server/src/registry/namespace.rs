//! Core `v1` Namespaces: enough for namespaced custom resources (`default` exists; objects
//! need an existing namespace; deleting a namespace deletes what is in it).

use serde_json::{Value, json};

use crate::error::{ApiError, Subject};
use crate::selector::{SelectableFields, field_value};

/// Where namespaces are stored.
pub const PREFIX: &str = "/registry/namespaces/";

/// The verbs of `namespaces`: no `deletecollection`.
pub const VERBS: [&str; 7] = ["create", "delete", "get", "list", "patch", "update", "watch"];

/// The fields a namespace list can select on (upstream's `NamespaceToSelectableFields`; `name`
/// is kept there for compatibility).
pub const SELECTABLE_FIELDS: SelectableFields = SelectableFields {
    labels: &["status.phase", "name"],
    value: |namespace, label| match label {
        "name" => field_value(namespace, "metadata.name"),
        label => field_value(namespace, label),
    },
};

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

/// Checks and fills a namespace on create.
pub fn prepare_create(object: &mut Value) -> Result<(), ApiError> {
    crate::object::check_type(object, "v1", "Namespace")?;
    // A namespace's name is a DNS label (`ValidateNamespaceName`), not a subdomain.
    let errors = crate::object::name_errors(object, crdctl_model::names::dns1123_label_errors);
    if !errors.is_empty() {
        let name = crate::object::name(object).to_string();
        return Err(ApiError::invalid("", "Namespace", &name, &errors));
    }
    crate::object::prepare_create(object, None);
    object["spec"] = json!({"finalizers": ["kubernetes"]});
    object["status"] = json!({"phase": "Active"});
    Ok(())
}
