//! The StorageVersionMigration strategy (upstream: `pkg/apis/storagemigration/validation`):
//! `spec.resource` names a resource and never changes; `status.resourceVersion` is set once; a
//! migration that succeeded or failed stays so, and is not running meanwhile. And the
//! conversions between v1alpha1 (1.30–1.34) and v1beta1 (1.35, the version stored), which
//! upstream never served side by side: v1alpha1 names a group, version and resource and its
//! conditions have a `lastUpdateTime`; v1beta1 names a group and resource (the storage version is
//! the one migrated to) and its conditions are `metav1.Condition`s.

use crdctl_model::field::{self, Path};
use serde_json::{Map, Value, json};

/// Where StorageVersionMigrations are stored.
pub const PREFIX: &str = "/registry/storageversionmigrations/";

/// Keeps a v1alpha1 migration's `spec.resource.version`, which v1beta1 has no field for, so
/// reading it back at v1alpha1 gives what was written (as upstream keeps fields a stored
/// version lacks in annotations).
const V1ALPHA1_VERSION: &str = "storagemigration.crdctl.io/v1alpha1-version";

/// The condition types, as upstream's `MigrationConditionType`.
pub const RUNNING: &str = "Running";
/// The migration finished and every object is in the storage version.
pub const SUCCEEDED: &str = "Succeeded";
/// The migration stopped for good.
pub const FAILED: &str = "Failed";

/// A v1alpha1 migration as v1beta1 stores it: `spec.resource.version` kept in an annotation,
/// `spec.continueToken` (which no migrator sets any more) dropped, `lastUpdateTime` as
/// `lastTransitionTime`.
pub fn from_v1alpha1(mut object: Value) -> Value {
    crate::object::set(&mut object, "apiVersion", json!("storagemigration.k8s.io/v1beta1"));
    let spec = crate::object::object_mut(&mut object, "spec");
    spec.remove("continueToken");
    let version = match spec.get_mut("resource").and_then(Value::as_object_mut) {
        Some(resource) => resource.remove("version"),
        None => None,
    };
    if let Some(version) = version.filter(|v| v.as_str().is_some_and(|v| !v.is_empty())) {
        let meta = crate::object::meta_mut(&mut object);
        let annotations = crate::object::fields_mut(meta.entry("annotations").or_insert_with(|| json!({})));
        annotations.insert(V1ALPHA1_VERSION.into(), version);
    }
    rename_condition_times(&mut object, "lastUpdateTime", "lastTransitionTime");
    object
}

/// A stored (v1beta1) migration at v1alpha1.
pub fn to_v1alpha1(mut object: Value) -> Value {
    crate::object::set(&mut object, "apiVersion", json!("storagemigration.k8s.io/v1alpha1"));
    let annotations = object.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut);
    let version = annotations.and_then(|annotations| annotations.remove(V1ALPHA1_VERSION));
    if object.pointer("/metadata/annotations").and_then(Value::as_object).is_some_and(Map::is_empty) {
        crate::object::meta_mut(&mut object).remove("annotations");
    }
    if let Some(version) = version {
        let spec = crate::object::object_mut(&mut object, "spec");
        let resource = crate::object::fields_mut(spec.entry("resource").or_insert_with(|| json!({})));
        resource.insert("version".into(), version);
    }
    rename_condition_times(&mut object, "lastTransitionTime", "lastUpdateTime");
    for condition in conditions_mut(&mut object) {
        condition.remove("observedGeneration");
    }
    object
}

fn conditions_mut(object: &mut Value) -> impl Iterator<Item = &mut Map<String, Value>> {
    let conditions = object.pointer_mut("/status/conditions").and_then(Value::as_array_mut);
    conditions.into_iter().flatten().filter_map(Value::as_object_mut)
}

fn rename_condition_times(object: &mut Value, from: &str, to: &str) {
    for condition in conditions_mut(object) {
        if let Some(time) = condition.remove(from) {
            condition.insert(to.into(), time);
        }
    }
}

/// Whether the condition `kind` is `True` in `object`'s status.
pub fn condition_true(object: &Value, kind: &str) -> bool {
    conditions(object).any(|c| c["type"] == kind && c["status"] == "True")
}

fn conditions(object: &Value) -> impl Iterator<Item = &Value> {
    object.pointer("/status/conditions").and_then(Value::as_array).into_iter().flatten()
}

/// The string at `pointer` in `object`, empty if none.
pub fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// `ValidateStorageVersionMigration` on create, its update at the resource (`old`, not `status`)
/// and `ValidateStorageVersionMigrationStatusUpdate` at `/status`.
pub fn validate(object: &Value, old: Option<&Value>, status: bool) -> field::ErrorList {
    match old {
        Some(old) if status => validate_status(object, old),
        _ => {
            // v1alpha1 names a version too, and requires it.
            let alpha = object.get("apiVersion").and_then(Value::as_str) == Some("storagemigration.k8s.io/v1alpha1");
            let fields: &[&str] = if alpha { &["group", "version", "resource"] } else { &["group", "resource"] };
            let mut errors = field::ErrorList::new();
            let spec = Path::new("spec");
            let resource = spec.child("resource");
            for required in if alpha { &["resource", "version"][..] } else { &["resource"][..] } {
                if str_at(object, &format!("/spec/resource/{required}")).is_empty() {
                    errors.push(resource.child(required).required(format!("{required} is required")));
                }
            }
            for field in old.map(|_| fields).into_iter().flatten() {
                let pointer = format!("/spec/resource/{field}");
                let value = str_at(object, &pointer);
                if old.is_some_and(|old| str_at(old, &pointer) != value) {
                    errors.push(Path::new(field).invalid(value, "field is immutable"));
                }
            }
            errors
        }
    }
}

fn validate_status(object: &Value, old: &Value) -> field::ErrorList {
    let mut errors = field::ErrorList::new();
    let status = Path::new("status");
    let resource_version = str_at(object, "/status/resourceVersion");
    let at = status.child("resourceVersion");
    if !resource_version.is_empty() {
        match resource_version.parse::<i64>() {
            Err(err) => errors.push(at.invalid(
                resource_version,
                format!("failed to parse resource version {resource_version:?}: strconv.ParseInt: parsing {resource_version:?}: {}", go_parse_error(&err)),
            )),
            Ok(n) if n < 0 => errors.push(at.invalid(n, "must be greater than or equal to 0")),
            Ok(_) => {}
        }
    }
    let old_version = str_at(old, "/status/resourceVersion");
    if !old_version.is_empty() && old_version != resource_version {
        errors.push(at.invalid(resource_version, "resourceVersion cannot be updated"));
    }
    let listed = object.pointer("/status/conditions").cloned().unwrap_or(Value::Array(Vec::new()));
    let at = status.child("conditions");
    let (succeeded, failed, running) =
        (condition_true(object, SUCCEEDED), condition_true(object, FAILED), condition_true(object, RUNNING));
    let rules = [
        (succeeded && failed, "Both success and failed conditions cannot be true at the same time"),
        (succeeded && running, "Running condition cannot be true when success condition is true"),
        (failed && running, "Running condition cannot be true when failed condition is true"),
        (condition_true(old, SUCCEEDED) && !succeeded, "Success condition cannot be set to false once it is true"),
        (condition_true(old, FAILED) && !failed, "Failed condition cannot be set to false once it is true"),
    ];
    errors.extend(rules.into_iter().filter(|(broken, _)| *broken).map(|(_, message)| at.invalid(&listed, message)));
    errors
}

/// Go's `strconv.ParseInt` error words.
fn go_parse_error(err: &std::num::ParseIntError) -> &'static str {
    match err.kind() {
        std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => "value out of range",
        _ => "invalid syntax",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn migration(resource: &str, conditions: Value, resource_version: &str) -> Value {
        json!({
            "spec": {"resource": {"group": "example.com", "resource": resource}},
            "status": {"conditions": conditions, "resourceVersion": resource_version},
        })
    }

    fn messages(errors: field::ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn v1alpha1_round_trips_through_the_stored_v1beta1() {
        let alpha = json!({
            "apiVersion": "storagemigration.k8s.io/v1alpha1", "kind": "StorageVersionMigration",
            "metadata": {"name": "m"},
            "spec": {"resource": {"group": "example.com", "version": "v1", "resource": "crontabs"}, "continueToken": "t"},
            "status": {"resourceVersion": "7", "conditions": [{"type": "Running", "status": "True",
                "lastUpdateTime": "2026-12-01T10:00:00Z", "reason": "StorageVersionMigrationInProgress"}]},
        });
        let stored = from_v1alpha1(alpha.clone());
        assert_eq!(stored["apiVersion"], "storagemigration.k8s.io/v1beta1");
        assert_eq!(stored["spec"], json!({"resource": {"group": "example.com", "resource": "crontabs"}}));
        assert_eq!(stored["status"]["conditions"][0]["lastTransitionTime"], "2026-12-01T10:00:00Z");
        let mut back = alpha;
        back["spec"].as_object_mut().unwrap().remove("continueToken");
        assert_eq!(to_v1alpha1(stored), back, "all but the token, which no migrator sets");
        // Written at v1beta1: no version to give back.
        let beta = json!({"apiVersion": "storagemigration.k8s.io/v1beta1", "metadata": {"name": "b"},
            "spec": {"resource": {"group": "", "resource": "configmaps"}}});
        assert_eq!(to_v1alpha1(beta)["spec"]["resource"], json!({"group": "", "resource": "configmaps"}));
    }

    #[test]
    fn the_resource_is_required_and_immutable() {
        let created = migration("", json!([]), "");
        assert_eq!(
            messages(validate(&created, None, false)),
            ["spec.resource.resource: Required value: resource is required"]
        );
        let old = migration("crontabs", json!([]), "");
        let renamed = migration("cronjobs", json!([]), "");
        assert_eq!(
            messages(validate(&renamed, Some(&old), false)),
            [r#"resource: Invalid value: "cronjobs": field is immutable"#]
        );
        assert!(validate(&old, Some(&old), false).is_empty());
    }

    #[test]
    fn status_keeps_its_resource_version_and_final_conditions() {
        let succeeded = json!([{"type": "Succeeded", "status": "True"}, {"type": "Running", "status": "False"}]);
        let old = migration("crontabs", succeeded.clone(), "12");
        assert!(validate(&old, Some(&old), true).is_empty());
        let moved = migration("crontabs", succeeded, "13");
        assert_eq!(
            messages(validate(&moved, Some(&old), true)),
            [r#"status.resourceVersion: Invalid value: "13": resourceVersion cannot be updated"#]
        );
        let reverted = migration("crontabs", json!([{"type": "Running", "status": "True"}]), "12");
        assert_eq!(
            messages(validate(&reverted, Some(&old), true)),
            [
                r#"status.conditions: Invalid value: [{"type":"Running","status":"True"}]: Success condition cannot be set to false once it is true"#
            ]
        );
        let both = migration(
            "crontabs",
            json!([{"type": "Succeeded", "status": "True"}, {"type": "Failed", "status": "True"}]),
            "12",
        );
        assert_eq!(validate(&both, Some(&old), true).len(), 1);
        let garbled = migration("crontabs", json!([]), "x1");
        assert_eq!(
            messages(validate(&garbled, Some(&migration("crontabs", json!([]), "")), true)),
            [
                r#"status.resourceVersion: Invalid value: "x1": failed to parse resource version "x1": strconv.ParseInt: parsing "x1": invalid syntax"#
            ]
        );
    }
}
