use serde_json::json;

use super::*;
use crate::registry::builtin::table;

fn secrets() -> &'static BuiltIn {
    find("", "v1", "secrets").unwrap()
}

fn messages(err: ApiError) -> String {
    err.message
}

/// One row per resource stores it; a row for another version of it (`stored_as`) shares the
/// storing row's prefix.
#[test]
fn the_table_has_one_row_per_resource_and_prefix() {
    let storing = || RESOURCES.iter().filter(|r| r.stored_as.is_none());
    for row in RESOURCES.iter().filter(|r| r.stored_as.is_some()) {
        let stored = row.stored_as.unwrap();
        let stored_by =
            storing().find(|r| (r.group, r.resource, r.version) == (stored.group, row.resource, stored.version));
        assert_eq!(stored_by.map(|r| r.prefix), Some(row.prefix), "{} {}", row.resource, row.version);
    }
    let storing: Vec<&BuiltIn> = storing().collect();
    for (at, row) in storing.iter().enumerate() {
        let later = storing.get(at + 1..).unwrap_or_default();
        assert!(later.iter().all(|r| (r.group, r.resource) != (row.group, row.resource)), "{}", row.resource);
        if let Strategy::Review(_) = row.strategy {
            assert_eq!((row.prefix, row.verbs), ("", table::CREATE_ONLY), "reviews are not stored");
            continue;
        }
        assert!(row.prefix.starts_with("/registry/") && row.prefix.ends_with('/'), "{}", row.prefix);
        let overlaps = |r: &&BuiltIn| r.prefix.starts_with(row.prefix) || row.prefix.starts_with(r.prefix);
        assert!(!later.iter().filter(|r| r.stored()).any(overlaps), "{}", row.prefix);
    }
}

/// What upstream's OpenAPI document of a row's group version says of it: the kind, the scope,
/// the verbs (from each operation's `x-kubernetes-action`) and the subresources.
#[test]
fn every_row_is_what_upstreams_document_says() {
    for row in RESOURCES.iter() {
        let document = documents::document(row.group, row.version).unwrap();
        let base = if row.group.is_empty() {
            format!("/api/{}", row.version)
        } else {
            format!("/apis/{}/{}", row.group, row.version)
        };
        let scope = if row.namespaced { "/namespaces/{namespace}" } else { "" };
        let collection = format!("{base}{scope}/{}", row.resource);
        let paths = document["paths"].as_object().unwrap();
        let mut verbs: Vec<&str> = Vec::new();
        for (path, item) in paths.iter().filter(|(p, _)| **p == collection || **p == format!("{collection}/{{name}}")) {
            for operation in item.as_object().unwrap().values().filter_map(|o| o.get("x-kubernetes-action")) {
                let kind =
                    item.as_object().unwrap().values().find_map(|o| o.pointer("/x-kubernetes-group-version-kind/kind"));
                assert_eq!(kind.and_then(Value::as_str), Some(row.kind), "{path}");
                verbs.push(match operation.as_str().unwrap() {
                    "post" => "create",
                    "put" => "update",
                    other => other,
                });
            }
        }
        let watched = paths.keys().any(|p| p.ends_with(&format!("/watch{}", collection.trim_start_matches(&base))));
        if watched {
            verbs.push("watch");
        }
        verbs.sort_unstable();
        verbs.dedup();
        assert_eq!(verbs, row.verbs, "{}", row.resource);
        let mut subresources: Vec<&str> = paths
            .keys()
            .filter_map(|p| p.strip_prefix(&format!("{collection}/{{name}}/")))
            .filter(|sub| {
                !sub.contains('/')
                    && !["binding", "eviction", "ephemeralcontainers", "resize", "approval"].contains(sub)
            })
            .collect();
        subresources.sort_unstable();
        let mut ours: Vec<&str> = row.subresources.iter().map(|s| s.name()).collect();
        ours.sort_unstable();
        assert_eq!(ours, subresources, "{}", row.resource);
    }
}

#[test]
fn every_row_has_a_schema_with_its_fields() {
    for row in RESOURCES.iter() {
        let schema = row.schema().unwrap_or_else(|| panic!("{} has no schema", row.kind));
        assert!(schema.property("metadata").is_some(), "{}", row.kind);
        for sub in [Subresource::Status, Subresource::Scale] {
            if row.has(sub) && sub == Subresource::Status {
                assert!(schema.property("status").is_some(), "{}", row.kind);
            }
        }
    }
}

#[test]
fn string_data_is_written_into_data_and_type_defaults_to_opaque() {
    let mut secret = json!({"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"a": "y", "b": "zz"}});
    secrets().prepare_create(&mut secret, FieldValidation::Strict).unwrap();
    assert_eq!(secret["data"], json!({"a": "eQ==", "b": "eno="}));
    assert_eq!((secret["type"].as_str(), secret.get("stringData")), (Some("Opaque"), None));
    assert_eq!((secret["apiVersion"].as_str(), secret["kind"].as_str()), (Some("v1"), Some("Secret")));
}

#[test]
fn secrets_refuse_what_upstream_refuses() {
    let mut bad = json!({"metadata": {"name": "s"}, "data": {"a": "not base64!"}});
    assert_eq!(
        messages(secrets().prepare_create(&mut bad, FieldValidation::Strict).unwrap_err()),
        r#"Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3"#
    );
    let mut keys = json!({"metadata": {"name": "s"}, "stringData": {"a b": "x"}});
    let message = messages(secrets().prepare_create(&mut keys, FieldValidation::Strict).unwrap_err());
    assert!(
        message.starts_with(r#"Secret "s" is invalid: data[a b]: Invalid value: "a b": a valid config key"#),
        "{message}"
    );
    let old = json!({"metadata": {"name": "s"}, "type": "Opaque", "immutable": true, "data": {"a": "eA=="}});
    let mut changed = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"a": "eQ=="}});
    assert_eq!(
        messages(
            secrets()
                .prepare_update(&mut changed, &old, Part::Main, (FieldValidation::Strict, Decoded::Body))
                .unwrap_err()
        ),
        "Secret \"s\" is invalid: [type: Invalid value: \"kubernetes.io/tls\": field is immutable, immutable: Forbidden: field is immutable when `immutable` is set, data: Forbidden: field is immutable when `immutable` is set]"
    );
    let mut large = json!({"metadata": {"name": "s"}, "stringData": {"a": "x".repeat(data::MAX_DATA_BYTES + 1)}});
    let message = messages(secrets().prepare_create(&mut large, FieldValidation::Strict).unwrap_err());
    assert_eq!(message, r#"Secret "s" is invalid: data: Too long: may not be more than 1048576 bytes"#);
}

#[test]
fn config_maps_check_keys_duplicates_and_immutability() {
    let config_maps = find("", "v1", "configmaps").unwrap();
    let mut map = json!({"metadata": {"name": "c"}, "data": {"k": "v", "..x": "v"}, "binaryData": {"k": "AA=="}});
    assert_eq!(
        messages(config_maps.prepare_create(&mut map, FieldValidation::Strict).unwrap_err()),
        r#"ConfigMap "c" is invalid: [data[k]: Invalid value: "k": duplicate of key present in binaryData, data[..x]: Invalid value: "..x": must not start with '..', binaryData[k]: Invalid value: "k": duplicate of key present in data]"#
    );
    let old = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"k": "v"}});
    let mut same = old.clone();
    config_maps.prepare_update(&mut same, &old, Part::Main, (FieldValidation::Strict, Decoded::Body)).unwrap();
    let mut changed = json!({"metadata": {"name": "c"}, "immutable": true, "data": {"k": "w"}});
    assert_eq!(
        messages(
            config_maps
                .prepare_update(&mut changed, &old, Part::Main, (FieldValidation::Strict, Decoded::Body))
                .unwrap_err()
        ),
        "ConfigMap \"c\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
}

#[test]
fn rbac_names_are_path_segments() {
    let roles = find("rbac.authorization.k8s.io", "v1", "clusterroles").unwrap();
    let mut role = json!({"metadata": {"name": "system:controller:crontab"}, "rules": []});
    roles.prepare_create(&mut role, FieldValidation::Strict).unwrap();
    let mut bad = json!({"metadata": {"name": "a/b"}});
    assert_eq!(
        messages(roles.prepare_create(&mut bad, FieldValidation::Strict).unwrap_err()),
        r#"ClusterRole.rbac.authorization.k8s.io "a/b" is invalid: metadata.name: Invalid value: "a/b": may not contain '/'"#
    );
}
