//! The `/scale` subresource: an `autoscaling/v1` `Scale` read from and written to the paths a
//! CRD version names in `subresources.scale`, or a built-in workload's `spec.replicas`. Upstream: apiextensions'
//! `pkg/registry/customresource/etcd.go` (`scaleFromCustomResource`, `scaleUpdatedObjectInfo`)
//! `autoscaling/validation.ValidateScale`, and `pkg/registry/apps/deployment/storage` (`scaleFromDeployment`).

use crdctl_model::field::{Path, Raw};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::registry::ServedCrd;

/// Where a resource keeps what its `Scale` shows, without leading dots.
#[derive(Debug, Clone, Copy)]
pub struct Paths<'a> {
    spec_replicas: &'a str,
    status_replicas: &'a str,
    selector: Selector<'a>,
}

/// Where the `Scale`'s `status.selector` comes from.
#[derive(Debug, Clone, Copy)]
enum Selector<'a> {
    /// None.
    Absent,
    /// A string at a path (a CRD's `labelSelectorPath`).
    Text(&'a str),
    /// A `metav1.LabelSelector` at `spec.selector`, printed (the `apps` workloads).
    Printed,
    /// A label map at `spec.selector` (ReplicationControllers).
    LabelMap,
}

impl<'a> Paths<'a> {
    /// A CRD version's `subresources.scale`, if it has one.
    pub fn of_crd(crd: &'a ServedCrd, version: &str) -> Option<Paths<'a>> {
        let scale = crd.scale(version)?;
        let path = |key: &str| scale.get(key).and_then(Value::as_str).map(|p| p.trim_start_matches('.'));
        Some(Paths {
            spec_replicas: path("specReplicasPath")?,
            status_replicas: path("statusReplicasPath")?,
            selector: path("labelSelectorPath").map_or(Selector::Absent, Selector::Text),
        })
    }

    /// A built-in workload's: `spec.replicas`, `status.replicas`, and the selector of
    /// `spec.selector` (a label map for ReplicationControllers).
    pub fn of_workload(kind: &str) -> Paths<'static> {
        let selector = if kind == "ReplicationController" { Selector::LabelMap } else { Selector::Printed };
        Paths { spec_replicas: "spec.replicas", status_replicas: "status.replicas", selector }
    }

    fn selector(&self, object: &Value) -> String {
        match self.selector {
            Selector::Absent => String::new(),
            Selector::Text(path) => nested(object, path).and_then(Value::as_str).unwrap_or_default().to_string(),
            Selector::Printed => object.pointer("/spec/selector").map(format_label_selector).unwrap_or_default(),
            Selector::LabelMap => {
                let labels = object.pointer("/spec/selector").cloned().unwrap_or_default();
                format_label_selector(&json!({"matchLabels": labels}))
            }
        }
    }
}

/// `metav1.FormatLabelSelector`: requirements sorted by key, `k=v`, `k in (a,b)`,
/// `k notin (a,b)`, `k`, `!k`, joined by commas.
fn format_label_selector(selector: &Value) -> String {
    let mut terms: Vec<(String, String)> = Vec::new();
    for (key, value) in selector.get("matchLabels").and_then(Value::as_object).into_iter().flatten() {
        terms.push((key.clone(), format!("{key}={}", value.as_str().unwrap_or_default())));
    }
    for term in selector.get("matchExpressions").and_then(Value::as_array).into_iter().flatten() {
        let key = term["key"].as_str().unwrap_or_default().to_string();
        let mut values: Vec<&str> = term["values"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        values.sort_unstable();
        let text = match term["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "DoesNotExist" => format!("!{key}"),
            _ => key.clone(),
        };
        terms.push((key, text));
    }
    terms.sort();
    terms.into_iter().map(|(_, text)| text).collect::<Vec<_>>().join(",")
}

fn nested<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(object, |node, key| node.get(key))
}

/// The `Scale` of `object`: replicas missing from the object read as 0.
pub fn of(object: &Value, paths: Paths) -> Value {
    let replicas = |path: &str| nested(object, path).and_then(Value::as_i64).unwrap_or(0);
    let selector = paths.selector(object);
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
pub fn apply(object: &mut Value, scale: &Value, paths: Paths) -> Result<(), ApiError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_scale_prints_its_selector_as_upstream() {
        let deployment = json!({"metadata": {"name": "d"}, "spec": {"replicas": 3, "selector": {
            "matchLabels": {"tier": "web", "app": "a"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}, {"key": "canary", "operator": "DoesNotExist"}]}},
            "status": {"replicas": 2}});
        let scale = of(&deployment, Paths::of_workload("Deployment"));
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(scale["status"], json!({"replicas": 2, "selector": "app=a,!canary,env in (dev,prod),tier=web"}));
        let controller = json!({"metadata": {"name": "rc"}, "spec": {"selector": {"app": "a"}}});
        assert_eq!(of(&controller, Paths::of_workload("ReplicationController"))["status"]["selector"], "app=a");
    }
}
