//! Pruning: every field the schema does not specify is dropped, except under
//! `x-kubernetes-preserve-unknown-fields` and the `apiVersion`, `kind` and `metadata` of the
//! root and of embedded resources. Upstream: apiextensions' `pkg/apiserver/schema/pruning`.

use serde_json::Value;

use super::Schema;
use super::path::Loc;

/// Fields every resource root (and every embedded resource) keeps whatever the schema says.
const RESOURCE_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Removes every field the schema does not specify, returning their paths (for
/// `fieldValidation=Strict|Warn`) in document order.
pub fn prune(object: &mut Value, schema: &Schema) -> Vec<String> {
    let mut unknown = Vec::new();
    prune_node(object, schema, &Loc::Root, true, &mut unknown);
    unknown
}

fn prune_node(value: &mut Value, schema: &Schema, loc: &Loc, resource_root: bool, unknown: &mut Vec<String>) {
    let resource_root = resource_root || schema.embedded_resource;
    match value {
        Value::Object(fields) => {
            let mut removed = Vec::new();
            for (name, child) in fields.iter_mut() {
                if resource_root && RESOURCE_FIELDS.contains(&name.as_str()) {
                    continue;
                }
                match schema.property(name) {
                    Some(child_schema) => prune_node(child, child_schema, &loc.field(name), false, unknown),
                    None if schema.preserve_unknown_fields => {}
                    None => removed.push(name.clone()),
                }
            }
            for name in removed {
                fields.shift_remove(&name);
                unknown.push(loc.field(&name).path());
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for (idx, item) in items.iter_mut().enumerate() {
                    prune_node(item, item_schema, &loc.index(idx), false, unknown);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn prune_drops_unknown_fields_and_reports_their_paths() {
        let schema = Schema::new(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "cronSpec": {"type": "string"},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {}}
            }}
        }}));
        let mut object = json!({
            "apiVersion": "example.com/v1", "kind": "CronTab", "metadata": {"name": "a"},
            "extra": 1,
            "spec": {"cronSpec": "* *", "x": true, "items": [{"name": "n", "bad": 1}], "free": {"any": 1},
                     "labels": {"k": "v"}, "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "junk": 1}}
        });
        let unknown = prune(&mut object, &schema);
        assert_eq!(unknown, ["spec.items[0].bad", "spec.template.junk", "spec.x", "extra"]);
        assert_eq!(object["spec"]["free"], json!({"any": 1}));
        assert_eq!(object["spec"]["template"], json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}}));
        assert_eq!(object["metadata"], json!({"name": "a"}));
    }
}
