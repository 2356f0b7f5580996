//! Properties over generated CRDs (proptest): v1beta1 → v1 normalisation is a fixed point and
//! drops nothing the user wrote, and a CRD compared with itself is always safe.
//!
//! The generator writes legacy v1beta1 CRDs the way people did: a top-level `validation`,
//! `subresources` and `additionalPrinterColumns` (with `JSONPath`) or per-version ones, and
//! schemas with types, enums, defaults, bounds, patterns, `required`, nested objects and lists.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn leaf_schema() -> impl Strategy<Value = Value> {
    prop_oneof![
        (proptest::option::of(prop::collection::vec("[a-c]{1,3}", 1..4)), proptest::option::of("[a-z]{0,5}")).prop_map(
            |(values, default)| {
                let mut schema = json!({"type": "string"});
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
        "[a-z^$.*]{1,6}".prop_map(|pattern| json!({"type": "string", "pattern": pattern, "description": "a pattern"})),
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
