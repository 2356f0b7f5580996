//! Upstream's published OpenAPI v3 documents of Kubernetes 1.33 (`api/openapi-spec/v3` in
//! kubernetes/kubernetes), vendored gzip-compressed in `upstream/openapi-v3` with their
//! provenance and licence. They are what `/openapi/v3` serves for built-in group versions and
//! where a built-in kind's schema comes from: unknown fields, types, list types and map keys for
//! server-side apply.
//!
//! Only the compressed bytes stay in memory: a document is decompressed and parsed when asked for
//! (`/openapi/v3`, rarely), and a kind's schema is compiled from it the first time the kind is
//! written and kept; so a server pays for the kinds it uses, not for the documents (`TestServer`
//! starts without reading any).

use std::collections::HashMap;
use std::io::Read;
use std::sync::{LazyLock, Mutex, OnceLock, PoisonError};

use crdctl_schema::Schema;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// One vendored document.
struct Document {
    group: &'static str,
    version: &'static str,
    compressed: &'static [u8],
}

macro_rules! documents {
    ($(($group:literal, $version:literal, $file:literal)),* $(,)?) => {
        [$(Document {
            group: $group,
            version: $version,
            compressed: include_bytes!(concat!("../../../upstream/openapi-v3/", $file, "_openapi.json.gz")),
        }),*]
    };
}

static DOCUMENTS: [Document; 23] = documents![
    ("", "v1", "api__v1"),
    ("admissionregistration.k8s.io", "v1", "apis__admissionregistration.k8s.io__v1"),
    ("apiextensions.k8s.io", "v1", "apis__apiextensions.k8s.io__v1"),
    ("apiregistration.k8s.io", "v1", "apis__apiregistration.k8s.io__v1"),
    ("apps", "v1", "apis__apps__v1"),
    ("authentication.k8s.io", "v1", "apis__authentication.k8s.io__v1"),
    ("authorization.k8s.io", "v1", "apis__authorization.k8s.io__v1"),
    ("autoscaling", "v1", "apis__autoscaling__v1"),
    ("autoscaling", "v2", "apis__autoscaling__v2"),
    ("batch", "v1", "apis__batch__v1"),
    ("certificates.k8s.io", "v1", "apis__certificates.k8s.io__v1"),
    ("coordination.k8s.io", "v1", "apis__coordination.k8s.io__v1"),
    ("discovery.k8s.io", "v1", "apis__discovery.k8s.io__v1"),
    ("events.k8s.io", "v1", "apis__events.k8s.io__v1"),
    ("flowcontrol.apiserver.k8s.io", "v1", "apis__flowcontrol.apiserver.k8s.io__v1"),
    ("networking.k8s.io", "v1", "apis__networking.k8s.io__v1"),
    ("node.k8s.io", "v1", "apis__node.k8s.io__v1"),
    ("policy", "v1", "apis__policy__v1"),
    ("rbac.authorization.k8s.io", "v1", "apis__rbac.authorization.k8s.io__v1"),
    ("scheduling.k8s.io", "v1", "apis__scheduling.k8s.io__v1"),
    ("storage.k8s.io", "v1", "apis__storage.k8s.io__v1"),
    ("storagemigration.k8s.io", "v1alpha1", "apis__storagemigration.k8s.io__v1alpha1"),
    ("storagemigration.k8s.io", "v1beta1", "apis__storagemigration.k8s.io__v1beta1"),
];

/// The group versions with a vendored document.
pub fn group_versions() -> impl Iterator<Item = (&'static str, &'static str)> {
    DOCUMENTS.iter().map(|d| (d.group, d.version))
}

/// The text of `group`/`version`'s document (`None` if there is none, or if the vendored bytes do
/// not decompress, which the tests rule out).
fn text(group: &str, version: &str) -> Option<Vec<u8>> {
    let document = DOCUMENTS.iter().find(|d| d.group == group && d.version == version)?;
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(document.compressed).read_to_end(&mut text).ok()?;
    Some(text)
}

/// The document of `group`/`version`, parsed.
pub fn document(group: &str, version: &str) -> Option<Value> {
    serde_json::from_slice(&text(group, version)?).ok()
}

/// A hash of `group`/`version`'s document for the `/openapi/v3` index, read from the
/// compressed bytes so the index parses nothing.
pub fn hash(group: &str, version: &str) -> Option<String> {
    use sha2::Digest;
    let document = DOCUMENTS.iter().find(|d| d.group == group && d.version == version)?;
    let digest = sha2::Sha512::digest(document.compressed);
    Some(digest.iter().take(32).map(|b| format!("{b:02X}")).collect())
}

/// A document's component schemas as text, each parsed only when a schema inlines it: a
/// compile holds the document's text, not a parsed copy of all of it.
type Components<'a> = HashMap<&'a str, &'a RawValue>;

fn component(components: &Components, name: &str) -> Option<Value> {
    serde_json::from_str(components.get(name)?.get()).ok()
}

/// The component schema name of `kind`: the one named `….<version>.<kind>` whose
/// `x-kubernetes-group-version-kind` names it.
fn component_name<'a>(components: &Components<'a>, group: &str, version: &str, kind: &str) -> Option<&'a str> {
    let suffix = format!(".{version}.{kind}");
    let names_kind = |gvk: &Value| gvk["group"] == group && gvk["version"] == version && gvk["kind"] == kind;
    components.keys().copied().filter(|name| name.ends_with(&suffix)).find(|name| {
        let gvks = component(components, name).and_then(|c| c.get("x-kubernetes-group-version-kind").cloned());
        gvks.and_then(|g| g.as_array().map(|g| g.iter().any(names_kind))).unwrap_or(false)
    })
}

/// The compiled schema of `kind` in `group`/`version`, compiled the first time it is asked
/// for and kept for the life of the process.
pub fn compiled(group: &'static str, version: &'static str, kind: &'static str) -> Option<&'static Schema> {
    compiled_in((group, version), (group, version, kind))
}

/// The compiled schema of a kind that `document` describes though it belongs to another group
/// version: `autoscaling/v1` `Scale` in each document with a scale subresource.
pub fn compiled_in(document: GroupVersion, kind: GroupVersionKind) -> Option<&'static Schema> {
    type Cells = HashMap<(GroupVersion, GroupVersionKind), &'static OnceLock<Option<Schema>>>;
    static CELLS: LazyLock<Mutex<Cells>> = LazyLock::new(Mutex::default);
    // One cell per kind (a few dozen at most), leaked so it lives as long as the schemas it holds.
    let cell = *CELLS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry((document, kind))
        .or_insert_with(|| Box::leak(Box::new(OnceLock::new())));
    cell.get_or_init(|| schema(document, kind)).as_ref()
}

type GroupVersion = (&'static str, &'static str);
type GroupVersionKind = (&'static str, &'static str, &'static str);

/// The compiled schema of `kind` from `document`: structural, references inlined.
fn schema(
    (document_group, document_version): GroupVersion,
    (group, version, kind): GroupVersionKind,
) -> Option<Schema> {
    #[derive(Deserialize)]
    struct Document<'a> {
        #[serde(borrow)]
        components: Schemas<'a>,
    }
    #[derive(Deserialize)]
    struct Schemas<'a> {
        #[serde(borrow)]
        schemas: Components<'a>,
    }
    let text = text(document_group, document_version)?;
    let components = serde_json::from_slice::<Document>(&text).ok()?.components.schemas;
    let name = component_name(&components, group, version, kind)?;
    Some(Schema::new(&structural(&components, name, &mut Vec::new())))
}

const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const RAW_EXTENSION: &str = "io.k8s.apimachinery.pkg.runtime.RawExtension";
const FIELDS_V1: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1";
const JSON: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON";

/// The component `name` as one structural schema, the form the server's validator and pruner
/// read: references inlined, descriptions and object defaults dropped (upstream defaults
/// built-in kinds in Go, not from the schema; nothing applies the scalar defaults that stay),
/// and the types the documents spell as `oneOf` or as a bare
/// object said the structural way — `IntOrString` is `x-kubernetes-int-or-string`, a `Quantity`
/// (string or number) and the embedded JSON of `RawExtension`, `FieldsV1` and apiextensions'
/// `JSON` keep what they hold. A reference back to a component being inlined (only
/// apiextensions' `JSONSchemaProps` has one) keeps what it holds too.
fn structural(schemas: &Components, name: &str, inlining: &mut Vec<String>) -> Value {
    match name {
        INT_OR_STRING => return json!({"x-kubernetes-int-or-string": true}),
        QUANTITY | JSON => return json!({"x-kubernetes-preserve-unknown-fields": true}),
        RAW_EXTENSION | FIELDS_V1 => return json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        _ if inlining.iter().any(|n| n == name) => {
            return json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        }
        _ => {}
    }
    let Some(component) = component(schemas, name) else {
        return json!({"x-kubernetes-preserve-unknown-fields": true});
    };
    inlining.push(name.to_string());
    let mut node = inline(schemas, &component, inlining);
    inlining.pop();
    // A component with properties is a Go struct, `<package>.<Name>` (`v1.DeploymentSpec`).
    if let Value::Object(fields) = &mut node
        && fields.contains_key("properties")
    {
        let mut segments = name.rsplit('.');
        if let (Some(type_name), Some(package)) = (segments.next(), segments.next()) {
            fields.insert("x-crdctl-go-type".into(), json!(format!("{package}.{type_name}")));
        }
    }
    node
}

fn inline(schemas: &Components, node: &Value, inlining: &mut Vec<String>) -> Value {
    let Some(fields) = node.as_object() else { return node.clone() };
    // A reference, alone or wrapped in the one-element `allOf` upstream uses to describe it.
    let wrapped = fields.get("allOf").and_then(Value::as_array).and_then(|all| all.first());
    let reference = fields.get("$ref").or_else(|| wrapped?.get("$ref")).and_then(Value::as_str);
    if let Some(name) = reference.and_then(|r| r.strip_prefix("#/components/schemas/")) {
        // What a field says beside its reference is about the field: how a strategic merge
        // patch treats it (`x-kubernetes-patch-strategy: retainKeys` on a Deployment's strategy).
        let mut resolved = structural(schemas, name, inlining);
        if let Value::Object(resolved_fields) = &mut resolved {
            for (key, value) in fields.iter().filter(|(k, _)| k.starts_with("x-kubernetes-patch-")) {
                resolved_fields.insert(key.clone(), value.clone());
            }
        }
        return resolved;
    }
    let mut out = Map::new();
    for (key, value) in fields {
        let value = match key.as_str() {
            "description" | "x-kubernetes-group-version-kind" => continue,
            // Scalar defaults stay: server-side apply keys a list item by them when the item
            // leaves a key field out (a Service port's `protocol`).
            "default" if value.is_object() || value.is_array() => continue,
            "properties" => Value::Object(
                value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, property)| (name.clone(), inline(schemas, property, inlining)))
                    .collect(),
            ),
            "items" | "additionalProperties" if value.is_object() => inline(schemas, value, inlining),
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_decodes_and_names_its_group_version() {
        for (group, version) in group_versions() {
            let document = document(group, version).unwrap_or_else(|| panic!("{group}/{version} does not decode"));
            let prefix =
                if group.is_empty() { format!("/api/{version}/") } else { format!("/apis/{group}/{version}/") };
            let paths = document["paths"].as_object().unwrap();
            assert!(!paths.is_empty() && paths.keys().all(|p| p.starts_with(&prefix)), "{prefix}");
        }
    }

    #[test]
    fn schemas_are_structural_with_references_inlined() {
        let deployment = compiled("apps", "v1", "Deployment").unwrap();
        let containers =
            deployment.property("spec").and_then(|s| s.property("template")).and_then(|t| t.property("spec"));
        let containers = containers.and_then(|s| s.property("containers")).unwrap();
        assert_eq!(
            (containers.list_type.as_deref(), containers.list_map_keys.as_slice()),
            (Some("map"), &["name".to_string()][..])
        );
        let container = containers.items.as_deref().unwrap();
        assert_eq!(container.required, ["name"]);
        let port = container.property("ports").and_then(|p| p.items.as_deref()).unwrap();
        assert!(port.property("containerPort").unwrap().types == ["integer"]);
        let strategy = deployment.property("spec").and_then(|s| s.property("strategy")).unwrap();
        let max_surge = strategy.property("rollingUpdate").and_then(|r| r.property("maxSurge")).unwrap();
        assert!(max_surge.int_or_string);
        assert!(deployment.property("spec").unwrap().default.is_none(), "upstream defaults built-ins in Go");
        // Patch strategies stay, also beside a reference (the strategy is a `DeploymentStrategy`).
        assert_eq!(
            (containers.patch_strategies.as_slice(), containers.patch_merge_key.as_deref()),
            (&["merge".to_string()][..], Some("name"))
        );
        assert_eq!(strategy.patch_strategies, ["retainKeys"]);
        let scale = compiled_in(("apps", "v1"), ("autoscaling", "v1", "Scale")).unwrap();
        assert!(scale.property("spec").and_then(|s| s.property("replicas")).is_some());
        let crd = compiled("apiextensions.k8s.io", "v1", "CustomResourceDefinition").unwrap();
        let versions = crd.property("spec").and_then(|s| s.property("versions")).and_then(|v| v.items.as_deref());
        let props = versions.and_then(|v| v.property("schema")).and_then(|s| s.property("openAPIV3Schema"));
        let nested = props.and_then(|p| p.property("properties")).and_then(|p| match &p.additional_properties {
            Some(crdctl_schema::Additional::Schema(s)) => Some(s),
            _ => None,
        });
        assert!(nested.unwrap().preserve_unknown_fields, "a schema inside a schema keeps what it holds");
    }
}
