//! `apiextensions.k8s.io/v1beta1` → `v1`, as the API server converts a stored v1beta1 CRD.
//!
//! v1beta1 allowed one top-level `validation`, `subresources` and `additionalPrinterColumns`
//! (with a capitalised `JSONPath`) for all versions, a single `version` instead of `versions`,
//! and `conversion.webhookClientConfig` beside `conversion.conversionReviewVersions`. Its
//! defaults differ from v1's: `scope: Namespaced`, `preserveUnknownFields: true` and, for
//! webhooks, `conversionReviewVersions: [v1beta1]`. [`to_v1`] applies those defaults and moves
//! every field to its v1 place, leaving everything else untouched.
//!
//! Each move is recorded as a [`Relocation`] so that positions in the v1 form can still be traced
//! to the line the user wrote.

use serde_json::{Map, Value, json};

use crate::crd::API_VERSION_V1;

/// A subtree that moved: `v1_prefix` in the v1 form was `source_prefix` in the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relocation {
    /// JSON pointer prefix in the v1 document.
    pub v1_prefix: String,
    /// JSON pointer prefix in the source document.
    pub source_prefix: String,
}

/// How a v1beta1 document laid out the fields that v1 keeps per version.
///
/// Validation needs it: v1beta1 forbids mixing top-level and per-version fields and setting
/// every per-version field to the same value, and the deprecated `spec.version` must match
/// the first entry of `spec.versions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LegacyLayout {
    /// `spec.version`, when set.
    pub version: Option<String>,
    /// Top-level `spec.validation` was set.
    pub top_level_schema: bool,
    /// Top-level `spec.subresources` was set.
    pub top_level_subresources: bool,
    /// Top-level `spec.additionalPrinterColumns` was non-empty.
    pub top_level_columns: bool,
    /// Some version set its own schema.
    pub per_version_schema: bool,
    /// Some version set its own subresources.
    pub per_version_subresources: bool,
    /// Some version set its own columns.
    pub per_version_columns: bool,
    /// Every version set an identical schema (true for a single version with its own schema).
    pub identical_schemas: bool,
    /// Every version set identical subresources.
    pub identical_subresources: bool,
    /// Every version set identical columns.
    pub identical_columns: bool,
}

/// The v1 form of a v1beta1 CRD, with what moved and what the input looked like.
#[derive(Debug, Clone)]
pub struct Normalized {
    /// The v1 document.
    pub value: Value,
    /// Subtrees that moved.
    pub relocations: Vec<Relocation>,
    /// The v1beta1 layout.
    pub legacy: LegacyLayout,
}

/// Converts a v1beta1 CRD document to v1. The input must be a JSON object.
pub fn to_v1(mut doc: Value) -> Normalized {
    let mut relocations = Vec::new();
    let mut legacy = LegacyLayout::default();
    if let Some(object) = doc.as_object_mut() {
        object.insert("apiVersion".into(), Value::String(API_VERSION_V1.into()));
        if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
            normalize_spec(spec, &mut relocations, &mut legacy);
        }
    }
    Normalized { value: doc, relocations, legacy }
}

fn normalize_spec(spec: &mut Map<String, Value>, relocations: &mut Vec<Relocation>, legacy: &mut LegacyLayout) {
    spec.entry("scope").or_insert_with(|| json!("Namespaced"));
    if !spec.contains_key("preserveUnknownFields") || spec["preserveUnknownFields"].is_null() {
        spec.insert("preserveUnknownFields".into(), Value::Bool(true));
    }

    legacy.version = spec.shift_remove("version").and_then(|v| v.as_str().map(str::to_owned));
    let versions_empty = spec.get("versions").and_then(Value::as_array).is_none_or(Vec::is_empty);
    if versions_empty && let Some(version) = &legacy.version {
        spec.insert("versions".into(), json!([{ "name": version, "served": true, "storage": true }]));
        relocations.push(Relocation { v1_prefix: "/spec/versions/0".into(), source_prefix: "/spec/version".into() });
    }

    // Taken out and put back into the same slot, so keys keep the order the user wrote.
    // Anything but a list is left for the typed view to report with its position.
    let mut versions = match spec.get_mut("versions") {
        Some(Value::Array(versions)) => std::mem::take(versions),
        _ => Vec::new(),
    };
    for version in versions.iter_mut() {
        if let Some(columns) = version.get_mut("additionalPrinterColumns") {
            rename_json_path_keys(columns);
        }
    }
    let per_version = |versions: &[Value], key: &str| versions.iter().any(|v| v.get(key).is_some_and(|x| !is_empty(x)));
    let identical = |versions: &[Value], key: &str| {
        let first = versions.first().and_then(|v| v.get(key));
        first.is_some_and(|f| !is_empty(f)) && versions.iter().all(|v| v.get(key) == first)
    };
    legacy.per_version_schema = per_version(&versions, "schema");
    legacy.per_version_subresources = per_version(&versions, "subresources");
    legacy.per_version_columns = per_version(&versions, "additionalPrinterColumns");
    legacy.identical_schemas = identical(&versions, "schema");
    legacy.identical_subresources = identical(&versions, "subresources");
    legacy.identical_columns = identical(&versions, "additionalPrinterColumns");

    let top_level = [
        ("validation", "schema"),
        ("subresources", "subresources"),
        ("additionalPrinterColumns", "additionalPrinterColumns"),
    ];
    for (top_key, version_key) in top_level {
        let Some(mut shared) = spec.shift_remove(top_key) else {
            continue;
        };
        if is_empty(&shared) {
            continue;
        }
        match top_key {
            "validation" => legacy.top_level_schema = true,
            "subresources" => legacy.top_level_subresources = true,
            _ => {
                legacy.top_level_columns = true;
                rename_json_path_keys(&mut shared);
            }
        }
        for (idx, version) in versions.iter_mut().enumerate() {
            if let Some(version) = version.as_object_mut() {
                version.insert(version_key.into(), shared.clone());
                relocations.push(Relocation {
                    v1_prefix: format!("/spec/versions/{idx}/{version_key}"),
                    source_prefix: format!("/spec/{top_key}"),
                });
            }
        }
    }
    if let Some(Value::Array(slot)) = spec.get_mut("versions") {
        *slot = versions;
    }

    if let Some(conversion) = spec.get_mut("conversion").and_then(Value::as_object_mut) {
        normalize_conversion(conversion, relocations);
    }
}

fn normalize_conversion(conversion: &mut Map<String, Value>, relocations: &mut Vec<Relocation>) {
    let client_config = conversion.shift_remove("webhookClientConfig").filter(|v| !v.is_null());
    let mut review_versions = conversion.shift_remove("conversionReviewVersions").filter(|v| !v.is_null());
    let is_webhook = conversion.get("strategy").and_then(Value::as_str) == Some("Webhook");
    if is_webhook && review_versions.as_ref().and_then(Value::as_array).is_none_or(Vec::is_empty) {
        review_versions = Some(json!(["v1beta1"]));
    }
    if client_config.is_none() && review_versions.is_none() {
        return;
    }
    let mut webhook = Map::new();
    if let Some(client_config) = client_config {
        webhook.insert("clientConfig".into(), client_config);
        relocations.push(Relocation {
            v1_prefix: "/spec/conversion/webhook/clientConfig".into(),
            source_prefix: "/spec/conversion/webhookClientConfig".into(),
        });
    }
    if let Some(review_versions) = review_versions {
        webhook.insert("conversionReviewVersions".into(), review_versions);
        relocations.push(Relocation {
            v1_prefix: "/spec/conversion/webhook/conversionReviewVersions".into(),
            source_prefix: "/spec/conversion/conversionReviewVersions".into(),
        });
    }
    conversion.insert("webhook".into(), Value::Object(webhook));
}

/// Makes a v1 document acceptable to `kubectl apply` on a current cluster, beyond what the API
/// server's conversion does, and says what it changed so the user can review it.
///
/// A v1 create refuses `preserveUnknownFields: true` (the v1beta1 default) and requires a schema
/// for every version. Unknown fields are kept at the root of every schema with
/// `x-kubernetes-preserve-unknown-fields: true`, the replacement the API server's message names.
pub fn prepare_for_v1_create(doc: &mut Value) -> Vec<String> {
    let mut changes = Vec::new();
    let Some(spec) = doc.get_mut("spec").and_then(Value::as_object_mut) else {
        return changes;
    };
    let preserve = spec.get("preserveUnknownFields") == Some(&Value::Bool(true));
    if preserve {
        spec.shift_remove("preserveUnknownFields");
        changes.push("spec.preserveUnknownFields: true is not allowed in apiextensions.k8s.io/v1; every version's schema root now sets x-kubernetes-preserve-unknown-fields: true instead, and unknown fields inside objects with declared properties will be pruned".to_string());
    }
    for version in spec.get_mut("versions").and_then(Value::as_array_mut).into_iter().flatten() {
        let name = version.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        let Some(version) = version.as_object_mut() else {
            continue;
        };
        let schema =
            version.get_mut("schema").and_then(|s| s.get_mut("openAPIV3Schema")).and_then(Value::as_object_mut);
        match schema {
            Some(schema) if preserve => {
                schema.entry("x-kubernetes-preserve-unknown-fields").or_insert(Value::Bool(true));
            }
            Some(_) => {}
            None => {
                version.insert(
                    "schema".into(),
                    json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}),
                );
                changes.push(format!(
                    "version {name}: apiextensions.k8s.io/v1 requires a schema; added one that accepts any object"
                ));
            }
        }
    }
    changes
}

/// v1beta1 printer columns spell `JSONPath`; v1 spells `jsonPath`.
fn rename_json_path_keys(columns: &mut Value) {
    for column in columns.as_array_mut().into_iter().flatten() {
        if let Some(column) = column.as_object_mut()
            && let Some(path) = column.shift_remove("JSONPath")
        {
            column.insert("jsonPath".into(), path);
        }
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_v1beta1_crontab_becomes_v1() {
        let input = json!({
            "apiVersion": "apiextensions.k8s.io/v1beta1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.example.com"},
            "spec": {
                "group": "example.com",
                "version": "v1beta1",
                "names": {"plural": "crontabs", "kind": "CronTab"},
                "validation": {"openAPIV3Schema": {"type": "object"}},
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Spec", "type": "string", "JSONPath": ".spec.cronSpec"}],
                "conversion": {"strategy": "Webhook", "webhookClientConfig": {"url": "https://x.example.com/convert"}}
            }
        });
        let normalized = to_v1(input);
        assert_eq!(
            normalized.value,
            json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "crontabs.example.com"},
                "spec": {
                    "group": "example.com",
                    "names": {"plural": "crontabs", "kind": "CronTab"},
                    "scope": "Namespaced",
                    "preserveUnknownFields": true,
                    "versions": [{
                        "name": "v1beta1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object"}},
                        "subresources": {"status": {}},
                        "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"}]
                    }],
                    "conversion": {"strategy": "Webhook", "webhook": {
                        "clientConfig": {"url": "https://x.example.com/convert"},
                        "conversionReviewVersions": ["v1beta1"]
                    }}
                }
            })
        );
        assert!(normalized.legacy.top_level_schema && !normalized.legacy.per_version_schema);
        assert!(normalized.relocations.contains(&Relocation {
            v1_prefix: "/spec/versions/0/schema".into(),
            source_prefix: "/spec/validation".into()
        }));
    }

    #[test]
    fn top_level_fields_copy_into_every_version() {
        let normalized = to_v1(json!({"spec": {
            "versions": [{"name": "v1", "served": true, "storage": true}, {"name": "v2", "served": true, "storage": false}],
            "validation": {"openAPIV3Schema": {"type": "object"}},
            "preserveUnknownFields": false,
            "scope": "Cluster"
        }}));
        let versions = normalized.value["spec"]["versions"].as_array().unwrap();
        assert!(versions.iter().all(|v| v["schema"] == json!({"openAPIV3Schema": {"type": "object"}})));
        assert_eq!(normalized.value["spec"]["scope"], "Cluster");
        assert_eq!(normalized.value["spec"]["preserveUnknownFields"], false);
    }

    #[test]
    fn explicit_review_versions_are_kept() {
        let normalized = to_v1(json!({"spec": {"conversion": {
            "strategy": "Webhook", "conversionReviewVersions": ["v1", "v1beta1"],
            "webhookClientConfig": {"service": {"name": "w", "namespace": "n"}}
        }}}));
        assert_eq!(
            normalized.value["spec"]["conversion"]["webhook"]["conversionReviewVersions"],
            json!(["v1", "v1beta1"])
        );
    }

    #[test]
    fn preparing_for_create_replaces_preserve_unknown_fields() {
        let mut doc = json!({"spec": {"preserveUnknownFields": true, "versions": [
            {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v2"}
        ]}});
        let changes = prepare_for_v1_create(&mut doc);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!(
            doc,
            json!({"spec": {"versions": [
                {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v2", "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            ]}})
        );
        assert!(prepare_for_v1_create(&mut doc).is_empty(), "idempotent");
    }

    #[test]
    fn identical_per_version_fields_are_detected() {
        let normalized = to_v1(json!({"spec": {"versions": [
            {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v2", "schema": {"openAPIV3Schema": {"type": "object"}}}
        ]}}));
        assert!(normalized.legacy.identical_schemas);
        assert!(!normalized.legacy.identical_columns);
    }
}
