//! The custom-resource strategy at a request version V: `apiVersion` and `kind` checks,
//! pruning with `fieldValidation`, defaulting and validation with V's schema, server-owned
//! metadata, `generation`, and the status subresource's split of what each endpoint may change.
//!
//! Upstream: apiextensions' `pkg/registry/customresource/{strategy.go,status_strategy.go}` and
//! the decoding steps of `customresource_handler.go` (`schemaCoercingDecoder`).

use serde_json::Value;

use crate::error::ApiError;
use crate::registry::ServedCrd;
use crate::registry::unknown_fields::{Decoded, FieldValidation};

/// Decodes a written object at `version`: checks its type, prunes (reporting unknown fields as
/// `fieldValidation` asks), defaults and validates it against the schema, and `old` (the
/// stored object, at `version`) on updates. Returns the warnings to send.
pub fn admit(
    object: &mut Value,
    old: Option<&Value>,
    crd: &ServedCrd,
    version: &str,
    (field_validation, decoded): (FieldValidation, Decoded),
) -> Result<Vec<String>, ApiError> {
    let expected = crd.api_version(version);
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    if api_version != expected {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({expected})"
        )));
    }
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind != crd.kind() {
        return Err(ApiError::bad_request(format!(
            "{} in version {version:?} cannot be handled as a {}: the kind in the data ({kind}) does not match the expected kind ({})",
            crd.kind(),
            crd.kind(),
            crd.kind()
        )));
    }
    if !object.get("metadata").is_none_or(Value::is_object) {
        return Err(ApiError::bad_request(format!(
            "{} in version {version:?} cannot be handled as a {}: metadata must be an object",
            crd.kind(),
            crd.kind()
        )));
    }
    let mut warnings = Vec::new();
    if let Some(schema) = crd.schema(version) {
        warnings.extend(field_validation.prune(object, schema, (crd.kind(), version), decoded)?);
        crdctl_schema::default(object, schema);
    }
    let mut violations = crate::object::subdomain_name_errors(object);
    if let Some(schema) = crd.schema(version) {
        let checked = crdctl_schema::check(object, old, schema);
        violations.extend(checked.errors);
        warnings.extend(checked.warnings);
    }
    if !violations.is_empty() {
        let name = crate::object::name(object).to_string();
        return Err(ApiError::invalid(crd.group(), crd.kind(), &name, &violations));
    }
    Ok(warnings)
}

/// Server-owned fields on create; `status` is dropped when it is a subresource.
pub fn prepare_create(object: &mut Value, crd: &ServedCrd, version: &str, namespace: Option<&str>) {
    crate::object::prepare_create(object, namespace);
    crate::object::start_generation(object);
    if crd.has_status(version)
        && let Some(fields) = object.as_object_mut()
    {
        fields.remove("status");
    }
}

/// Server-owned fields on update: kept from `old`, `status` kept when it is a subresource,
/// `generation` bumped when anything but metadata (and status) changed.
pub fn prepare_update(new: &mut Value, old: &Value, crd: &ServedCrd, version: &str) {
    crate::object::keep_server_fields(new, old);
    let has_status = crd.has_status(version);
    if has_status {
        crate::object::keep_status(new, old);
    }
    crate::object::count_generation(new, old, has_status);
}
