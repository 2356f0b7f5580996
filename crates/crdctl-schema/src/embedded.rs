//! Embedded resources (`x-kubernetes-embedded-resource`): each needs an `apiVersion` and a
//! `kind`, and its metadata is validated as an object's: names, labels and annotations.
//! Upstream: apiextensions' `pkg/apiserver/schema/objectmeta/validation.go`, which runs
//! apimachinery's `ValidateObjectMeta` (owner references, finalizers and managed fields,
//! rarely embedded, are not checked here).

use serde_json::{Map, Value};

use crdctl_model::field::{self, Path, Raw};
use crdctl_model::go::bad_value;
use crdctl_model::meta::{validate_annotations, validate_labels};
use crdctl_model::names::{dns1035_label_errors, path_segment_name_errors, path_segment_prefix_errors};

use super::{Additional, Schema};

/// Every problem with the embedded resources in `object`.
pub fn validate_embedded(object: &Value, schema: &Schema) -> field::ErrorList {
    let mut out = Vec::new();
    walk(object, schema, &Path::Root, &mut out);
    out
}

fn walk(value: &Value, schema: &Schema, loc: &Path, out: &mut field::ErrorList) {
    if !schema.has_embedded_resources {
        return;
    }
    match value {
        Value::Object(fields) => {
            if schema.embedded_resource {
                embedded(fields, loc, out);
            }
            for (name, child) in fields {
                match (schema.properties.get(name), &schema.additional_properties) {
                    (Some(property), _) => walk(child, property, &loc.child(name), out),
                    (None, Some(Additional::Schema(additional))) => walk(child, additional, &loc.key(name), out),
                    _ => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for (idx, item) in items.iter().enumerate() {
                    walk(item, item_schema, &loc.index(idx), out);
                }
            }
        }
        _ => {}
    }
}

fn embedded(fields: &Map<String, Value>, loc: &Path, out: &mut field::ErrorList) {
    for name in ["apiVersion", "kind"] {
        if !fields.contains_key(name) {
            out.push(loc.child(name).required("must not be empty"));
        }
    }
    for (name, value) in fields {
        let at = loc.child(name);
        let invalid = |detail: String| at.invalid(Raw(bad_value(value)), detail);
        match (name.as_str(), value.as_str()) {
            ("apiVersion" | "kind", None) => out.push(invalid("must be a string".into())),
            ("apiVersion" | "kind", Some("")) => out.push(invalid("must not be empty".into())),
            ("apiVersion", Some(api_version)) if api_version.matches('/').count() > 1 => {
                out.push(invalid(format!("unexpected GroupVersion string: {api_version}")));
            }
            ("kind", Some(kind)) => {
                let errors = dns1035_label_errors(&kind.to_lowercase());
                if !errors.is_empty() {
                    out.push(invalid(format!("may have mixed case, but should otherwise match: {}", errors.join(","))));
                }
            }
            ("metadata", _) => metadata(value, &at, out),
            _ => {}
        }
    }
}

/// `metadata.name` and `generateName` as `ValidatePathSegmentName` checks them, then labels
/// and annotations as `ValidateLabels` and `ValidateAnnotations` do (errors at the map, not
/// the key).
fn metadata(value: &Value, loc: &Path, out: &mut field::ErrorList) {
    let Some(fields) = value.as_object() else {
        out.push(loc.invalid(Raw(bad_value(value)), "must be an object"));
        return;
    };
    for key in ["name", "generateName"] {
        let Some(name) = fields.get(key).and_then(Value::as_str) else { continue };
        let problems = if key == "name" { path_segment_name_errors(name) } else { path_segment_prefix_errors(name) };
        for problem in problems {
            let at = loc.child(key);
            out.push(at.invalid(name, problem));
        }
    }
    if let Some(labels) = fields.get("labels").and_then(Value::as_object) {
        out.extend(validate_labels(labels, &loc.child("labels")));
    }
    if let Some(annotations) = fields.get("annotations").and_then(Value::as_object) {
        out.extend(validate_annotations(annotations, &loc.child("annotations")));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn embedded_resources_need_type_metadata_and_a_usable_name() {
        let schema = Schema::new(&json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
        }}}}));
        let errors = |template: Value| -> Vec<String> {
            validate_embedded(&json!({"spec": {"template": template}}), &schema)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            errors(json!({"metadata": {"name": "a/b"}})),
            [
                "spec.template.apiVersion: Required value: must not be empty",
                "spec.template.kind: Required value: must not be empty",
                "spec.template.metadata.name: Invalid value: \"a/b\": may not contain '/'",
            ]
        );
        assert_eq!(
            errors(json!({"apiVersion": "a/b/c", "kind": "Not A Kind"})),
            [
                "spec.template.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c",
                "spec.template.kind: Invalid value: \"Not A Kind\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            ]
        );
        assert!(errors(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}})).is_empty());
        let pod = |metadata: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata});
        assert_eq!(
            errors(pod(
                json!({"labels": {"app/x/y": "ok", "tier": "-bad"}, "annotations": {"Example.com/Note": "x", "a b": "y"}})
            )),
            [
                "spec.template.metadata.labels: Invalid value: \"app/x/y\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                "spec.template.metadata.labels: Invalid value: \"-bad\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                "spec.template.metadata.annotations: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ]
        );
        let big = pod(json!({"annotations": {"note": "x".repeat(256 * 1024)}}));
        assert_eq!(errors(big), ["spec.template.metadata.annotations: Too long: may not be more than 262144 bytes"]);
        assert!(errors(pod(json!({"labels": {"app.kubernetes.io/name": "web", "empty": ""}}))).is_empty());
    }
}
