//! The ConfigMap and Secret strategies: `ValidateConfigMap`, `ValidateSecret` and their updates,
//! and the Secret's `stringData` (upstream: `pkg/apis/core/validation`, `pkg/registry/core/secret`).

use base64::Engine;
use serde_json::{Map, Value};

use crdctl_model::field::{self, Path};
use crdctl_model::names;

/// Upstream's `MaxSecretSize`, which ConfigMaps share.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

fn object_field<'a>(object: &'a Value, name: &str) -> Option<&'a Map<String, Value>> {
    object.get(name).and_then(Value::as_object)
}

fn is_immutable(object: &Value) -> bool {
    object.get("immutable").and_then(Value::as_bool) == Some(true)
}

/// Every key of `data` must be a config key (`IsConfigMapKey`), reported at `path[key]`.
fn key_errors(data: Option<&Map<String, Value>>, path: &Path) -> field::ErrorList {
    let mut errors = field::ErrorList::new();
    for key in data.into_iter().flat_map(Map::keys) {
        errors.extend(names::config_map_key_errors(key).into_iter().map(|e| path.key(key).invalid(key, e)));
    }
    errors
}

/// Once `immutable` is set, the fields that hold data and `immutable` itself stay as they are
/// (`ValidateConfigMapUpdate`, `ValidateSecretUpdate`).
fn immutable_errors(object: &Value, old: &Value, data_fields: &[&str]) -> field::ErrorList {
    let mut errors = field::ErrorList::new();
    if !is_immutable(old) {
        return errors;
    }
    if !is_immutable(object) {
        errors.push(Path::new("immutable").forbidden("field is immutable when `immutable` is set"));
    }
    for name in data_fields {
        if object.get(*name) != old.get(*name) {
            errors.push(Path::new(name).forbidden("field is immutable when `immutable` is set"));
        }
    }
    errors
}

/// `ValidateConfigMap` (keys, no key in both `data` and `binaryData`, 1 MiB of values in all)
/// and its update.
pub fn config_map(object: &mut Value, old: Option<&Value>) -> field::ErrorList {
    let data = object_field(object, "data");
    let binary = object_field(object, "binaryData");
    let mut errors = field::ErrorList::new();
    let mut size = 0;
    for (bag, this, other, other_name) in [("data", data, binary, "binaryData"), ("binaryData", binary, data, "data")] {
        let path = Path::new(bag);
        for (key, value) in this.into_iter().flatten() {
            let at = path.key(key);
            errors.extend(names::config_map_key_errors(key).into_iter().map(|e| at.invalid(key, e)));
            if other.is_some_and(|other| other.contains_key(key)) {
                errors.push(at.invalid(key, format!("duplicate of key present in {other_name}")));
            }
            let text = value.as_str().unwrap_or_default();
            size += if bag == "data" { text.len() } else { text.len() / 4 * 3 };
        }
    }
    if size > MAX_DATA_BYTES {
        errors.push(Path::new("").too_long(format!("may not be more than {MAX_DATA_BYTES} bytes")));
    }
    if let Some(old) = old {
        errors.extend(immutable_errors(object, old, &["data", "binaryData"]));
    }
    errors
}

/// The Secret strategy: `stringData` is written into `data` (base64) and dropped, as the v1
/// conversion does; `type` defaults to `Opaque` and never changes; `data` values must be base64
/// (an `Err` is the decoder's message); keys, the 1 MiB limit and `immutable` as `ValidateSecret`.
pub fn secret(object: &mut Value, old: Option<&Value>) -> Result<field::ErrorList, String> {
    let Some(fields) = object.as_object_mut() else { return Ok(field::ErrorList::new()) };
    let string_data = fields.remove("stringData");
    if let Some(Value::Object(string_data)) = string_data {
        let data = fields.entry("data").or_insert_with(|| Value::Object(Map::new()));
        if !data.is_object() {
            *data = Value::Object(Map::new());
        }
        if let Some(data) = data.as_object_mut() {
            for (key, value) in string_data {
                let text = value.as_str().unwrap_or_default();
                data.insert(key, Value::String(base64::engine::general_purpose::STANDARD.encode(text)));
            }
        }
    }
    if fields.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
        fields.insert("type".into(), Value::String("Opaque".into()));
    }
    let data = object_field(object, "data");
    let mut size = 0;
    for value in data.into_iter().flat_map(Map::values) {
        let text = value.as_str().unwrap_or_default();
        let decoded = base64::engine::general_purpose::STANDARD.decode(text).map_err(|err| match err {
            base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => {
                format!("illegal base64 data at input byte {at}")
            }
            _ => format!("illegal base64 data at input byte {}", text.len()),
        })?;
        size += decoded.len();
    }
    let mut errors = key_errors(data, &Path::new("data"));
    if size > MAX_DATA_BYTES {
        errors.push(Path::new("data").too_long(format!("may not be more than {MAX_DATA_BYTES} bytes")));
    }
    if let Some(old) = old {
        let (new_type, old_type) = (object.get("type"), old.get("type"));
        if new_type != old_type {
            let shown = new_type.and_then(Value::as_str).unwrap_or_default();
            errors.push(Path::new("type").invalid(shown, "field is immutable"));
        }
        errors.extend(immutable_errors(object, old, &["data"]));
    }
    Ok(errors)
}
