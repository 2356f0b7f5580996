//! Properties over generated CRDs (proptest): v1beta1 → v1 normalisation is a fixed point and
//! drops nothing the user wrote, a CRD compared with itself is always safe, and a change the
//! check lets through never makes an object that was valid invalid.
//!
//! The generator writes legacy v1beta1 CRDs the way people did: a top-level `validation`,
//! `subresources` and `additionalPrinterColumns` (with `JSONPath`) or per-version ones, and
//! schemas with types, enums, defaults, bounds, patterns, `required`, nested objects and lists.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn leaf_schema() -> impl Strategy<Value = Value> {
    prop_oneof![
        (proptest::option::of(prop::collection::vec("[a-c]{1,3}", 1..4)), proptest::option::of("[a-z]{0,5}")).prop_map(
            |(values, default)| {
                let mut schema = json!({"type": "string"});
                // A default must be one of the enum's values, or the API server refuses the CRD.
                let default = match (&values, default) {
                    (Some(values), Some(_)) => values.first().cloned(),
                    (_, default) => default,
                };
                if let Some(values) = values {
                    schema["enum"] = json!(values);
                }
                if let Some(default) = default {
                    schema["default"] = json!(default);
                }
                schema
            }
        ),
        (proptest::option::of(0i64..10), proptest::option::of(10i64..100)).prop_map(|(min, max)| {
            let mut schema = json!({"type": "integer", "format": "int64"});
            if let Some(min) = min {
                schema["minimum"] = json!(min);
            }
            if let Some(max) = max {
                schema["maximum"] = json!(max);
            }
            schema
        }),
        prop::sample::select(vec!["^[a-z]+$", "a.*", "^x", "[a-c]{1,3}", "b$", "^$"])
            .prop_map(|pattern| json!({"type": "string", "pattern": pattern, "description": "a pattern"})),
        Just(json!({"type": "boolean", "nullable": true})),
        Just(json!({"x-kubernetes-int-or-string": true})),
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    leaf_schema().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (prop::collection::btree_map("[a-e]{1,4}", inner.clone(), 1..4), any::<bool>()).prop_map(
                |(properties, require_first)| {
                    let mut schema = json!({"type": "object", "properties": properties});
                    if require_first && let Some(first) = properties_names(&schema).first() {
                        schema["required"] = json!([first]);
                    }
                    schema
                }
            ),
            (inner, 0usize..3).prop_map(|(items, min)| json!({"type": "array", "items": items, "minItems": min})),
        ]
    })
}

fn properties_names(schema: &Value) -> Vec<String> {
    schema["properties"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default()
}

/// A v1beta1 CRD document, as JSON.
fn legacy_crd() -> impl Strategy<Value = Value> {
    let versions = prop::sample::subsequence(vec!["v1alpha1", "v1beta1", "v1", "v2"], 1..4);
    (versions, schema(), any::<bool>(), any::<bool>(), prop::sample::select(vec!["Namespaced", "Cluster"])).prop_map(
        |(versions, spec_schema, top_level, with_status, scope)| {
            let root = json!({"type": "object", "properties": {"spec": spec_schema}});
            let storage = versions.len() - 1;
            let mut list: Vec<Value> = versions
                .iter()
                .enumerate()
                .map(|(i, name)| json!({"name": name, "served": true, "storage": i == storage}))
                .collect();
            let mut spec = json!({"group": "example.com", "scope": scope,
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"}});
            let columns = json!([{"name": "Age", "type": "date", "JSONPath": ".metadata.creationTimestamp"}]);
            if top_level {
                spec["validation"] = json!({"openAPIV3Schema": root});
                spec["additionalPrinterColumns"] = columns;
                if with_status {
                    spec["subresources"] = json!({"status": {}});
                }
            } else {
                for version in &mut list {
                    version["schema"] = json!({"openAPIV3Schema": root.clone()});
                    version["additionalPrinterColumns"] = columns.clone();
                }
            }
            spec["versions"] = Value::Array(list);
            spec["version"] = json!(versions[0]);
            json!({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"}, "spec": spec})
        },
    )
}

/// Every distinct scalar of a document, keys included.
fn scalars(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                out.push(format!("key:{key}"));
                scalars(child, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| scalars(item, out)),
        scalar => out.push(scalar.to_string()),
    }
}

fn load(document: &Value) -> Vec<crdctl_model::Crd> {
    crdctl_model::load::load_str("generated.json", &document.to_string()).expect("generated CRDs load")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn normalisation_is_a_fixed_point_and_keeps_every_field(document in legacy_crd()) {
        let once = crdctl_model::normalize::to_v1(document.clone()).value;
        let twice = crdctl_model::normalize::to_v1(once.clone()).value;
        prop_assert_eq!(&once, &twice);
        let (mut before, mut after) = (Vec::new(), Vec::new());
        scalars(&document, &mut before);
        scalars(&once, &mut after);
        // What v1 renames or drops by design: the apiVersion, the singular `version` (kept as
        // the first version's name) and the top-level fields that moved into each version.
        let renamed: Map<String, Value> = serde_json::from_value(json!({
            "\"apiextensions.k8s.io/v1beta1\"": null, "key:version": null, "key:validation": null, "key:JSONPath": null,
        })).unwrap();
        for scalar in before.iter().filter(|s| !renamed.contains_key(*s)) {
            prop_assert!(after.contains(scalar), "{} was dropped by normalisation", scalar);
        }
    }

    #[test]
    fn a_crd_compared_with_itself_is_always_safe(document in legacy_crd()) {
        let crds = load(&document);
        let config = crdctl_safety::Config::default();
        let report = crdctl_safety::check_all(&crds, &crds, &config);
        prop_assert!(report.findings.is_empty(), "{:?}", report.findings);
        let report = crdctl_safety::api_server_check_all(&crds, &crds);
        prop_assert!(report.findings.is_empty(), "{:?}", report.findings);
    }
}

/// Values shaped like `schema`: often valid, sometimes not (the property filters on validity).
fn object_for(schema: &Value) -> BoxedStrategy<Value> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array).filter(|v| !v.is_empty()) {
        return prop_oneof![4 => prop::sample::select(values.clone()), 1 => "[a-c]{1,3}".prop_map(Value::from)].boxed();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            let fields: Vec<(String, BoxedStrategy<Value>)> = schema["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(name, property)| (name.clone(), object_for(property)))
                .collect();
            let strategies: Vec<BoxedStrategy<Option<(String, Value)>>> = fields
                .into_iter()
                .map(|(name, strategy)| proptest::option::of(strategy.prop_map(move |v| (name.clone(), v))).boxed())
                .collect();
            strategies.prop_map(|present| Value::Object(present.into_iter().flatten().collect())).boxed()
        }
        Some("array") => prop::collection::vec(object_for(&schema["items"]), 0..3).prop_map(Value::Array).boxed(),
        Some("integer") => (-5i64..120).prop_map(Value::from).boxed(),
        Some("boolean") => prop_oneof![any::<bool>().prop_map(Value::from), Just(Value::Null)].boxed(),
        Some(_) => "[a-z^$.]{0,4}".prop_map(Value::from).boxed(),
        None => prop_oneof![(0i64..100).prop_map(Value::from), "[a-z]{1,3}".prop_map(Value::from)].boxed(),
    }
}

/// Every node of a schema, by JSON pointer.
fn nodes(schema: &Value, pointer: String, out: &mut Vec<String>) {
    out.push(pointer.clone());
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        nodes(property, format!("{pointer}/properties/{name}"), out);
    }
    if schema.get("items").is_some() {
        nodes(&schema["items"], format!("{pointer}/items"), out);
    }
}

/// One edit of the kind operators make between releases, at one node.
fn edit(schema: &Value, node: usize, kind: usize) -> Value {
    let mut pointers = Vec::new();
    nodes(schema, String::new(), &mut pointers);
    let mut edited = schema.clone();
    let Some(target) = edited.pointer_mut(&pointers[node % pointers.len()]) else { return edited };
    let bump = |value: Option<&Value>, by: i64| json!(value.and_then(Value::as_i64).unwrap_or(50) + by);
    match kind % 10 {
        0 => target["enum"] = json!(["a", "b"]),
        1 => {
            if let Some(values) = target.get_mut("enum").and_then(Value::as_array_mut) {
                values.push(json!("zz"));
            }
        }
        2 => target["minimum"] = bump(target.get("minimum"), 3),
        3 => target["maximum"] = bump(target.get("maximum"), -7),
        4 => target["maximum"] = bump(target.get("maximum"), 7),
        5 => {
            if let Some(first) = properties_names(target).first() {
                target["required"] = json!([first]);
            }
        }
        6 => target["type"] = json!("string"),
        7 => {
            if let Some(properties) = target.get_mut("properties").and_then(Value::as_object_mut) {
                properties.insert("added".into(), json!({"type": "string"}));
            }
        }
        8 => target["minItems"] = json!(2),
        _ => target["description"] = json!("documented"),
    }
    edited
}

fn v1_crd(spec_schema: &Value) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}}}]}})
}

fn valid(schema: &Value, spec: &Value) -> bool {
    let compiled = crdctl_schema::Schema::new(&json!({"type": "object", "properties": {"spec": schema}}));
    crdctl_schema::validate(&json!({"spec": spec}), &compiled).is_empty()
}

fn schema_and_object() -> impl Strategy<Value = (Value, Value)> {
    schema().prop_flat_map(|schema| {
        let objects = object_for(&schema);
        (Just(schema), objects)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Issue 11: what the preflight lets through never makes a stored object invalid.
    #[test]
    fn a_safe_change_never_invalidates_an_old_object((old, spec) in schema_and_object(), node in 0usize..64, kind in 0usize..10) {
        prop_assume!(valid(&old, &spec));
        let new = edit(&old, node, kind);
        let (old_crd, new_crd) = (load(&v1_crd(&old)), load(&v1_crd(&new)));
        let report = crdctl_safety::check_all(&old_crd, &new_crd, &crdctl_safety::Config::default());
        let safe = report.findings.iter().all(|f| f.severity != crdctl_safety::Severity::Error);
        if safe {
            prop_assert!(valid(&new, &spec), "{} was judged safe, but {} no longer validates", new, spec);
        }
    }
}
