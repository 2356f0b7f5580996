//! The `/scale` subresource: an `autoscaling/v1` `Scale` read from and written to the paths a
//! CRD version names in `subresources.scale`. Upstream: apiextensions'
//! `pkg/registry/customresource/etcd.go` (`scaleFromCustomResource`, `scaleUpdatedObjectInfo`)
//! and `autoscaling/validation.ValidateScale`.

use crdctl_model::field::{Path, Raw};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::registry::ServedCrd;

/// The paths of a version's `subresources.scale`, without their leading dots.
struct Paths<'a> {
    spec_replicas: &'a str,
    status_replicas: &'a str,
    label_selector: Option<&'a str>,
}

fn paths<'a>(crd: &'a ServedCrd, version: &str) -> Option<Paths<'a>> {
    let scale = crd.scale(version)?;
    let path = |key: &str| scale.get(key).and_then(Value::as_str).map(|p| p.trim_start_matches('.'));
    Some(Paths {
        spec_replicas: path("specReplicasPath")?,
        status_replicas: path("statusReplicasPath")?,
        label_selector: path("labelSelectorPath"),
    })
}

fn nested<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(object, |node, key| node.get(key))
}

/// The `Scale` of `object` (at `version`): replicas missing from the object read as 0.
pub fn of(object: &Value, crd: &ServedCrd, version: &str) -> Value {
    let Some(paths) = paths(crd, version) else { return Value::Null };
    let replicas = |path: &str| nested(object, path).and_then(Value::as_i64).unwrap_or(0);
    let selector = paths.label_selector.and_then(|p| nested(object, p)).and_then(Value::as_str).unwrap_or_default();
    let meta = &object["metadata"];
    let mut metadata = json!({
        "name": meta["name"], "uid": meta["uid"], "resourceVersion": meta["resourceVersion"],
        "creationTimestamp": meta["creationTimestamp"],
    });
    if let Some(namespace) = meta.get("namespace") {
        crate::object::set(&mut metadata, "namespace", namespace.clone());
    }
    let mut status = json!({"replicas": replicas(paths.status_replicas)});
    if !selector.is_empty() {
        crate::object::set(&mut status, "selector", json!(selector));
    }
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata,
        "spec": {"replicas": replicas(paths.spec_replicas)}, "status": status,
    })
}

/// Writes a requested `Scale`'s `spec.replicas` into `object`, after upstream's checks.
pub fn apply(object: &mut Value, scale: &Value, crd: &ServedCrd, version: &str) -> Result<(), ApiError> {
    let paths = paths(crd, version).ok_or_else(|| ApiError::internal("the version has no scale subresource"))?;
    let name = crate::object::name(object).to_string();
    let replicas = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
    let invalid = |detail: &str, value: String| {
        ApiError::invalid(
            "autoscaling",
            "Scale",
            &name,
            &[Path::new("spec").child("replicas").invalid(Raw(value), detail)],
        )
    };
    let Some(count) = replicas.as_i64().filter(|n| i32::try_from(*n).is_ok()) else {
        return Err(invalid("must be a 32-bit integer", crdctl_model::go::bad_value(&replicas)));
    };
    if count < 0 {
        return Err(invalid("must be greater than or equal to 0", count.to_string()));
    }
    let mut node = object;
    let mut keys = paths.spec_replicas.split('.').peekable();
    while let Some(key) = keys.next() {
        let fields = crate::object::fields_mut(node);
        if keys.peek().is_none() {
            fields.insert(key.to_string(), json!(count));
            break;
        }
        node = fields.entry(key.to_string()).or_insert_with(|| json!({}));
    }
    Ok(())
}
