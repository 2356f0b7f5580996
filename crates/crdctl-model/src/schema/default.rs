//! Defaulting, as the API server's decoder applies it to every custom resource it reads or
//! writes: a missing property, or a null one that may not be null, takes its `default`; a null
//! that may not be null and has no default is dropped. Upstream: apiextensions'
//! `pkg/apiserver/schema/defaulting/{algorithm.go,prunenulls.go}`.

use serde_json::Value;

use super::{Additional, Schema};

fn non_nullable_null(value: &Value, schema: &Schema) -> bool {
    value.is_null() && !schema.nullable
}

/// Applies defaults top down, then drops nulls that may be neither null nor defaulted.
pub fn default(object: &mut Value, schema: &Schema) {
    apply(object, schema);
    drop_nulls(object, schema);
}

fn apply(value: &mut Value, schema: &Schema) {
    match value {
        Value::Object(fields) => {
            for (name, property) in &schema.properties {
                if let Some(default) = &property.default
                    && fields.get(name).is_none_or(|v| non_nullable_null(v, property))
                {
                    fields.insert(name.clone(), default.clone());
                }
            }
            for (name, child) in fields.iter_mut() {
                if let Some(property) = schema.properties.get(name) {
                    apply(child, property);
                } else if let Some(Additional::Schema(additional)) = &schema.additional_properties {
                    if let Some(default) = additional.default.as_ref().filter(|_| non_nullable_null(child, additional))
                    {
                        *child = default.clone();
                    }
                    apply(child, additional);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for item in items {
                    if let Some(default) = item_schema.default.as_ref().filter(|_| non_nullable_null(item, item_schema))
                    {
                        *item = default.clone();
                    }
                    apply(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

fn drop_nulls(value: &mut Value, schema: &Schema) {
    // Below a node the schema does not describe nothing is dropped, so it is not walked.
    match value {
        Value::Object(fields) => {
            fields.retain(|name, child| {
                !schema.property(name).is_some_and(|s| non_nullable_null(child, s) && s.default.is_none())
            });
            for (name, child) in fields.iter_mut() {
                if let Some(child_schema) = schema.property(name) {
                    drop_nulls(child, child_schema);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.items.as_deref() {
                for item in items {
                    drop_nulls(item, item_schema);
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
    fn defaults_fill_missing_and_non_nullable_null_properties() {
        let schema = Schema::new(&json!({"type": "object", "properties": {
            "replicas": {"type": "integer", "default": 1},
            "kept": {"type": "integer", "nullable": true, "default": 2},
            "dropped": {"type": "string"},
            "ports": {"type": "array", "items": {"type": "object", "properties": {"protocol": {"type": "string", "default": "TCP"}}}}
        }}));
        let mut object = json!({"kept": null, "dropped": null, "ports": [{}, {"protocol": "UDP"}]});
        default(&mut object, &schema);
        assert_eq!(object, json!({"kept": null, "ports": [{"protocol": "TCP"}, {"protocol": "UDP"}], "replicas": 1}));
        let mut set = json!({"replicas": null});
        default(&mut set, &schema);
        assert_eq!(set["replicas"], json!(1));
        // A null the schema says nothing about stays, however deep.
        let mut unknown = json!({"free": {"inner": null}, "ports": [{"extra": null}]});
        default(&mut unknown, &schema);
        let expected =
            json!({"free": {"inner": null}, "ports": [{"extra": null, "protocol": "TCP"}], "kept": 2, "replicas": 1});
        assert_eq!(unknown, expected);
    }
}
