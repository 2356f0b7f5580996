//! The CustomResourceDefinition strategy: v1 defaulting, status handled as upstream
//! (`storedVersions` appended, never removed but through `/status`), the naming and
//! establishing controllers' conditions, validation with upstream messages, the upgrade-safety
//! gate, and the finalizer that deletes a CRD's objects before the CRD.
//!
//! Upstream: apiextensions' `pkg/registry/customresourcedefinition/strategy.go`,
//! `pkg/controller/{status/naming_controller.go,establish,finalizer}`.

use crdctl_model::Crd;
use crdctl_model::crd::{API_VERSION_V1, KIND};
use crdctl_storage::Store;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::registry::upgrade::UpgradeSafety;
use crate::registry::{CRD_PREFIX, OnDelete, Registry};

/// The group of CRDs.
pub use crdctl_model::crd::GROUP;
/// The finalizer that holds a CRD until its objects are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The store key of a CRD.
pub fn key(name: &str) -> String {
    format!("{CRD_PREFIX}{name}")
}

fn invalid(name: &str, violations: &[crdctl_model::field::Error]) -> ApiError {
    ApiError::invalid(GROUP, KIND, name, violations)
}

/// Writes the v1 defaults into the stored JSON (singular, listKind, conversion, webhook service
/// port), taken from the model's defaulted view so the two never disagree.
fn apply_defaults(object: &mut Value) -> Result<Crd, ApiError> {
    let crd = load(object)?;
    let spec = &crd.definition.spec;
    if let Some(names) = object.pointer_mut("/spec/names").and_then(Value::as_object_mut) {
        for (key, value) in [("singular", &spec.names.singular), ("listKind", &spec.names.list_kind)] {
            if !value.is_empty() {
                names.insert(key.into(), json!(value));
            }
        }
    }
    if let Some(fields) = object.get_mut("spec").and_then(Value::as_object_mut)
        && fields.get("conversion").is_none_or(Value::is_null)
    {
        let strategy = spec.conversion.as_ref().map_or("None", |c| c.strategy.as_str());
        fields.insert("conversion".into(), json!({"strategy": strategy}));
    }
    let port = spec.conversion.as_ref().and_then(|c| c.webhook.as_ref()).and_then(|w| w.client_config.as_ref());
    let port = port.and_then(|c| c.service.as_ref()).and_then(|s| s.port);
    if let (Some(port), Some(service)) =
        (port, object.pointer_mut("/spec/conversion/webhook/clientConfig/service").and_then(Value::as_object_mut))
    {
        service.entry("port").or_insert(json!(port));
    }
    Ok(crd)
}

fn load(object: &Value) -> Result<Crd, ApiError> {
    let name = crate::object::name(object);
    Crd::from_value(name, object.clone()).map_err(|err| ApiError::bad_request(err.to_string()))
}

fn check_type(object: &Value) -> Result<(), ApiError> {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    if api_version != API_VERSION_V1 {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({API_VERSION_V1})"
        )));
    }
    if object.get("kind").and_then(Value::as_str) != Some(KIND) {
        return Err(ApiError::bad_request(format!(
            "Object 'Kind' is {:?}, not {KIND:?}",
            object.get("kind").and_then(Value::as_str).unwrap_or_default()
        )));
    }
    // Go's decoder refuses a schema keyword of the wrong JSON type before anything else runs.
    if let Some(err) = crdctl_schema::decode::go_decode_error(object) {
        return Err(ApiError::bad_request(format!(
            "CustomResourceDefinition in version \"v1\" cannot be handled as a CustomResourceDefinition: {err}"
        )));
    }
    Ok(())
}

fn storage_version(object: &Value) -> Option<String> {
    object.pointer("/spec/versions")?.as_array()?.iter().find(|v| v["storage"] == true)?["name"]
        .as_str()
        .map(str::to_string)
}

fn condition(type_: &str, status: bool, reason: &str, message: &str) -> Value {
    json!({
        "type": type_,
        "status": if status { "True" } else { "False" },
        "lastTransitionTime": crate::object::now_timestamp(),
        "reason": reason,
        "message": message,
    })
}

/// Sets `NamesAccepted`, `Established` and `acceptedNames` as the naming and establishing
/// controllers would once they ran, keeping conditions that did not change.
fn set_conditions(object: &mut Value, others: &Registry) {
    let name = crate::object::name(object).to_string();
    let group = object.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default().to_string();
    let names = object.pointer("/spec/names").cloned().unwrap_or_else(|| json!({}));
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    let conflict =
        others.all().values().filter(|other| other.crd.name() != name && other.group() == group).find_map(|other| {
            let accepted = &other.crd.definition.status.accepted_names;
            if accepted.kind == text(&names, "kind") {
                Some(("KindConflict", format!("{:?} is already in use", accepted.kind)))
            } else if accepted.list_kind == text(&names, "listKind") {
                Some(("ListKindConflict", format!("{:?} is already in use", accepted.list_kind)))
            } else {
                let short = crate::object::strings(names.get("shortNames"));
                short
                    .iter()
                    .find(|s| accepted.short_names.contains(s) || accepted.plural == **s)
                    .map(|s| ("ShortNamesConflict", format!("{s:?} is already in use")))
            }
        });
    let mut conditions: Vec<Value> =
        object.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let same = |a: &Value, b: &Value, field: &str| a.get(field) == b.get(field);
    let mut set = |new: Value| match conditions.iter_mut().find(|c| same(c, &new, "type")) {
        Some(existing) if same(existing, &new, "status") && same(existing, &new, "reason") => {}
        Some(existing) => *existing = new,
        None => conditions.push(new),
    };
    match &conflict {
        None => {
            set(condition("NamesAccepted", true, "NoConflicts", "no conflicts found"));
            set(condition("Established", true, "InitialNamesAccepted", "the initial names have been accepted"));
            crate::object::object_mut(object, "status").insert("acceptedNames".into(), names);
        }
        Some((reason, message)) => {
            set(condition("NamesAccepted", false, reason, message));
            set(condition("Established", false, "NotAccepted", "not all names are accepted"));
            if object.pointer("/status/acceptedNames").is_none() {
                let none = json!({"plural": "", "kind": ""});
                crate::object::object_mut(object, "status").insert("acceptedNames".into(), none);
            }
        }
    }
    crate::object::object_mut(object, "status").insert("conditions".into(), Value::Array(conditions));
}

/// Prepares a CRD for create: defaults, a fresh status, conditions, validation.
pub fn prepare_create(object: &mut Value, registry: &Registry) -> Result<(), ApiError> {
    check_type(object)?;
    let crd = apply_defaults(object)?;
    let name = crate::object::name(object).to_string();
    let violations = crdctl_schema::definition::validate(&crd);
    if !violations.is_empty() {
        return Err(invalid(&name, &violations));
    }
    crate::object::start_generation(object);
    object["status"] = json!({"storedVersions": storage_version(object).into_iter().collect::<Vec<_>>()});
    set_conditions(object, registry);
    crate::object::meta_mut(object).insert("finalizers".into(), json!([CLEANUP_FINALIZER]));
    Ok(())
}

/// Prepares an update of the main resource: status kept from `old` with the new storage
/// version appended, generation bumped on spec changes, validation; then the upgrade gate
/// ([`super::upgrade`]) judges it, with the stored objects. Returns the gate's warnings.
pub async fn prepare_update(
    new: &mut Value,
    old: &Value,
    (store, registry): (&dyn Store, &Registry),
    safety: UpgradeSafety,
) -> Result<Vec<String>, ApiError> {
    check_type(new)?;
    apply_defaults(new)?;
    let name = crate::object::name(old).to_string();
    crate::object::keep_server_fields(new, old);
    crate::object::set(new, "status", old.get("status").cloned().unwrap_or_else(|| json!({})));
    if let Some(storage) = storage_version(new) {
        let stored = new.pointer("/status/storedVersions").and_then(Value::as_array).cloned().unwrap_or_default();
        if !stored.iter().any(|v| v == storage.as_str()) {
            let mut stored = stored;
            stored.push(Value::String(storage));
            crate::object::object_mut(new, "status").insert("storedVersions".into(), Value::Array(stored));
        }
    }
    if old.get("spec") != new.get("spec") {
        let generation = crate::object::meta_field(old, "generation").and_then(Value::as_i64).unwrap_or(1);
        crate::object::meta_mut(new).insert("generation".into(), json!(generation + 1));
    }
    let (old_crd, new_crd) = (load(old)?, load(new)?);
    let violations = crdctl_schema::definition::validate_update(&new_crd, &old_crd);
    if !violations.is_empty() {
        return Err(invalid(&name, &violations));
    }
    let warnings = super::upgrade::gate(store, registry, safety, &old_crd, &new_crd).await?;
    set_conditions(new, registry);
    Ok(warnings)
}

/// Prepares an update of `/status`: only `status` is taken; an empty `storedVersions` becomes
/// the storage version.
pub fn prepare_status_update(new: &mut Value, old: &Value) -> Result<(), ApiError> {
    let mut status = new.get("status").cloned().unwrap_or_else(|| json!({}));
    if !status.is_object() {
        return Err(ApiError::bad_request(format!(
            "CustomResourceDefinition in version \"v1\" cannot be handled as a CustomResourceDefinition: json: cannot unmarshal {} into Go struct field CustomResourceDefinition.status of type v1.CustomResourceDefinitionStatus",
            crdctl_conversion::response::json_type(&status)
        )));
    }
    let stored_empty = status.get("storedVersions").and_then(Value::as_array).is_none_or(Vec::is_empty);
    if stored_empty {
        let stored = json!(storage_version(old).into_iter().collect::<Vec<_>>());
        crate::object::set(&mut status, "storedVersions", stored);
    }
    let mut updated = old.clone();
    crate::object::set(&mut updated, "status", status);
    crate::object::meta_mut(&mut updated).remove("resourceVersion");
    *new = updated;
    Ok(())
}

/// A DELETE marks a CRD as terminating: `deletionTimestamp` and the `Terminating` condition;
/// the cleanup controller (`crate::controller::crd_cleanup`) then deletes its objects, and the
/// CRD once they are gone.
pub fn on_delete(object: &mut Value) -> OnDelete {
    if crate::object::meta_field(object, "deletionTimestamp").is_some() {
        return OnDelete::AlreadyMarked;
    }
    crate::object::meta_mut(object).insert("deletionTimestamp".into(), json!(crate::object::now_timestamp()));
    set_terminating(object, true, "InstanceDeletionInProgress", "CustomResource deletion is in progress");
    OnDelete::Mark
}

/// Sets the `Terminating` condition.
pub fn set_terminating(object: &mut Value, status: bool, reason: &str, message: &str) {
    let mut conditions: Vec<Value> =
        object.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some("Terminating"));
    conditions.push(condition("Terminating", status, reason, message));
    crate::object::object_mut(object, "status").insert("conditions".into(), Value::Array(conditions));
}
