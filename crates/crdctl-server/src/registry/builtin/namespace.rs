//! Core `v1` Namespaces and their lifecycle, as kube-apiserver's NamespaceLifecycle admission
//! and controller-manager's namespace controller: `default`, `kube-system`, `kube-public` and
//! `kube-node-lease` always exist and cannot be deleted; objects need an existing namespace that
//! is not terminating; deleting a namespace marks it `Terminating`, and the namespace
//! controller (`crate::controller::namespace`) empties and removes it.

use serde_json::{Value, json};

use crate::error::{ApiError, Subject};
use crate::registry::OnDelete;
use crate::registry::builtin::Part;
use crate::selector::{SelectableFields, field_value};

/// Where namespaces are stored.
pub const PREFIX: &str = "/registry/namespaces/";

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

/// The label upstream's defaulting gives every namespace, its name as value, so selectors can
/// pick namespaces by name.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The spec finalizer of the namespace lifecycle, removed once the namespace is empty.
pub const KUBERNETES_FINALIZER: &str = "kubernetes";

/// A namespace the server makes at start-up, as a create would store it.
pub fn initial(name: &str) -> Value {
    let mut object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    default(&mut object, None, Part::Main);
    crate::object::prepare_create(&mut object, None);
    object
}

/// The namespace strategy's part of a write: the name label always; on create `Active` and the
/// `kubernetes` spec finalizer (upstream's `PrepareForCreate`); an update of the main resource
/// keeps `spec.finalizers`, which only `finalize` writes.
pub fn default(object: &mut Value, old: Option<&Value>, part: Part) {
    let name = crate::object::name(object).to_string();
    let labels = crate::object::meta_mut(object).entry("labels").or_insert_with(|| json!({}));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(NAME_LABEL.into(), Value::String(name));
    }
    match (old, part) {
        (None, _) => {
            let finalizers = crate::object::object_mut(object, "spec").entry("finalizers").or_insert_with(|| json!([]));
            if let Some(finalizers) = finalizers.as_array_mut()
                && !finalizers.iter().any(|f| f == KUBERNETES_FINALIZER)
            {
                finalizers.push(json!(KUBERNETES_FINALIZER));
            }
            crate::object::set(object, "status", json!({"phase": "Active"}));
        }
        (Some(old), Part::Main) => set_finalizers(object, old.pointer("/spec/finalizers").cloned()),
        (Some(_), Part::Status | Part::Finalizers) => {}
    }
}

/// Makes `new` `old` with `new`'s `spec.finalizers`: an update through `finalize`.
pub fn keep_all_but_finalizers(new: &mut Value, old: &Value) {
    let mut updated = old.clone();
    set_finalizers(&mut updated, new.pointer("/spec/finalizers").cloned());
    crate::object::meta_mut(&mut updated).remove("resourceVersion");
    *new = updated;
}

/// `spec.finalizers` set to `finalizers`, or removed.
fn set_finalizers(namespace: &mut Value, finalizers: Option<Value>) {
    let spec = crate::object::object_mut(namespace, "spec");
    match finalizers {
        Some(finalizers) => spec.insert("finalizers".into(), finalizers),
        None => spec.remove("finalizers"),
    };
}

/// A DELETE: refused for the built-in four; otherwise the namespace is marked `Terminating`,
/// for the namespace controller to empty.
pub fn on_delete(object: &mut Value) -> Result<OnDelete, ApiError> {
    let name = crate::object::name(object);
    if BUILT_IN.contains(&name) {
        return Err(ApiError::forbidden(subject(name), "this namespace may not be deleted"));
    }
    if crate::object::meta_field(object, "deletionTimestamp").is_some() {
        return Ok(OnDelete::AlreadyMarked);
    }
    crate::object::meta_mut(object).insert("deletionTimestamp".into(), json!(crate::object::now_timestamp()));
    crate::object::set(object, "status", json!({"phase": "Terminating"}));
    Ok(OnDelete::Mark)
}
