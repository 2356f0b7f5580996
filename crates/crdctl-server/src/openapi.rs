//! OpenAPI v3 (`/openapi/v3` index and one document per group version) and v2
//! (`/openapi/v2`): upstream's published documents for built-in group versions, and for CRDs
//! documents built from the schemas of served versions, as apiextensions'
//! `pkg/controller/openapi{,v3}/builder` does: every path carries
//! `x-kubernetes-group-version-kind`, PATCH carries `fieldValidation`, so
//! `kubectl apply --validate=strict` and `kubectl explain` work.

use serde_json::{Map, Value, json};

use crate::registry::builtin::documents;
use crate::registry::{Registry, ServedCrd};

/// What a document describes: one kind at one group version.
struct KindDoc {
    group: String,
    version: String,
    kind: String,
    plural: String,
    namespaced: bool,
    schema: Value,
    status: bool,
}

fn definition_name(group: &str, version: &str, kind: &str) -> String {
    if group.is_empty() {
        return format!("io.k8s.api.core.{version}.{kind}");
    }
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn object_meta_schema() -> Value {
    let string = json!({"type": "string"});
    let map = json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}});
    json!({
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "type": "object",
        "properties": {
            "name": {"description": "Name must be unique within a namespace.", "type": "string"},
            "generateName": string, "namespace": string, "uid": string, "resourceVersion": string,
            "generation": {"type": "integer", "format": "int64"},
            "creationTimestamp": {"type": "string", "format": "date-time"},
            "deletionTimestamp": {"type": "string", "format": "date-time"},
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
            "labels": map.clone(), "annotations": map,
            "finalizers": {"type": "array", "items": {"type": "string", "default": ""}, "x-kubernetes-list-type": "set"},
            "ownerReferences": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
        }
    })
}

fn kinds_for(registry: &Registry, group: &str, version: &str) -> Vec<KindDoc> {
    let crds = registry.all();
    let served = crds.values().filter(|c| c.established() && c.group() == group && c.served_version(version).is_some());
    served.map(|crd| custom_kind(crd, version)).collect()
}

fn custom_kind(crd: &ServedCrd, version: &str) -> KindDoc {
    KindDoc {
        group: crd.group().to_string(),
        version: version.to_string(),
        kind: crd.kind().to_string(),
        plural: crd.plural().to_string(),
        namespaced: crd.namespaced(),
        schema: crd
            .schema_json(version)
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})),
        status: crd.has_status(version),
    }
}

/// The group versions that have a document, built-in ones (from upstream's documents) first.
pub fn group_versions(registry: &Registry) -> Vec<(String, String)> {
    let mut gvs: Vec<(String, String)> = documents::group_versions().map(|(g, v)| (g.into(), v.into())).collect();
    for crd in registry.all().values().filter(|c| c.established()) {
        for version in crd.crd.definition.spec.versions.iter().filter(|v| v.served) {
            let gv = (crd.group().to_string(), version.name.clone());
            if !gvs.contains(&gv) {
                gvs.push(gv);
            }
        }
    }
    gvs
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// The component schema of a kind: the CRD schema with `apiVersion`, `kind`, `metadata` and
/// the group-version-kind extension.
fn component(kind: &KindDoc) -> Value {
    let mut schema = kind.schema.clone();
    if !schema.is_object() {
        schema = json!({"type": "object"});
    }
    let properties = schema
        .as_object_mut()
        .map(|s| s.entry("properties").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut);
    if let Some(properties) = properties {
        properties.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
        properties.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
        properties.insert("metadata".into(), json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "description": "Standard object's metadata."}));
    }
    let group_version_kind = json!([{"group": kind.group, "kind": kind.kind, "version": kind.version}]);
    crate::object::set(&mut schema, "x-kubernetes-group-version-kind", group_version_kind);
    schema
}

fn query(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
}

fn operation(kind: &KindDoc, action: &str, reference: &str) -> Value {
    let mut op = json!({
        "operationId": format!("{action}{}", kind.kind),
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": reference}}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": kind.group, "kind": kind.kind, "version": kind.version},
    });
    match action {
        "patch" => {
            crate::object::set(
                &mut op,
                "parameters",
                json!([query("dryRun"), query("fieldManager"), query("fieldValidation"), {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}]),
            );
            let patch = json!({"schema": {"type": "object"}});
            crate::object::set(
                &mut op,
                "requestBody",
                json!({"content": {
                "application/json-patch+json": patch, "application/merge-patch+json": patch, "application/apply-patch+yaml": patch
            }, "required": true}),
            );
        }
        "put" | "post" => {
            crate::object::set(
                &mut op,
                "parameters",
                json!([query("dryRun"), query("fieldManager"), query("fieldValidation")]),
            );
            crate::object::set(
                &mut op,
                "requestBody",
                json!({"content": {"application/json": {"schema": {"$ref": reference}}}, "required": true}),
            );
        }
        _ => {}
    }
    op
}

/// The OpenAPI v3 document of one group version, or `None` if nothing is served there:
/// upstream's for built-in group versions, else built from the CRDs served there.
pub fn v3_document(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    if let Some(document) = documents::document(group, version) {
        return Some(document);
    }
    let kinds = kinds_for(registry, group, version);
    if kinds.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert(OBJECT_META.into(), object_meta_schema());
    for kind in &kinds {
        let name = definition_name(&kind.group, &kind.version, &kind.kind);
        let reference = format!("#/components/schemas/{name}");
        schemas.insert(name, component(kind));
        let base = if kind.namespaced {
            format!("/{}/namespaces/{{namespace}}/{}", gv_path(&kind.group, &kind.version), kind.plural)
        } else {
            format!("/{}/{}", gv_path(&kind.group, &kind.version), kind.plural)
        };
        let path_params = |with_name: bool| {
            let mut params = Vec::new();
            if with_name {
                params.push(json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}}));
            }
            if kind.namespaced {
                params.push(json!({"name": "namespace", "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}}));
            }
            Value::Array(params)
        };
        paths.insert(
            base.clone(),
            json!({
                "get": operation(kind, "list", &reference),
                "post": operation(kind, "post", &reference),
                "parameters": path_params(false),
            }),
        );
        let item = json!({
            "get": operation(kind, "get", &reference),
            "put": operation(kind, "put", &reference),
            "patch": operation(kind, "patch", &reference),
            "delete": operation(kind, "delete", &reference),
            "parameters": path_params(true),
        });
        paths.insert(format!("{base}/{{name}}"), item.clone());
        if kind.status {
            paths.insert(format!("{base}/{{name}}/status"), item);
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// The `/openapi/v3` index: one entry per group version, each with a hash that changes with it.
pub fn v3_index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions(registry) {
        let hash = match documents::hash(&group, &version) {
            Some(hash) => Some(hash),
            None => v3_document(registry, &group, &version)
                .map(|d| crate::discovery::etag(&d).trim_matches('"').to_string()),
        };
        if let Some(hash) = hash {
            let path = gv_path(&group, &version);
            paths.insert(path.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}));
        }
    }
    json!({"paths": paths})
}

/// Swagger 2.0 `paths` and `definitions`.
#[derive(Default)]
struct Swagger2 {
    paths: Map<String, Value>,
    definitions: Map<String, Value>,
}

impl Swagger2 {
    /// Adds a v3 document in Swagger 2.0 form: references to `#/definitions/`, operations
    /// rewritten by [`swagger2_operation`].
    fn add(&mut self, mut document: Value) {
        rewrite_references(&mut document);
        if let Some(Value::Object(schemas)) = document.pointer_mut("/components/schemas").map(Value::take) {
            self.definitions.extend(schemas);
        }
        for (path, mut item) in
            document.get_mut("paths").map(Value::take).and_then(|p| p.as_object().cloned()).unwrap_or_default()
        {
            if let Some(ops) = item.as_object_mut() {
                for op in ops.values_mut().filter(|op| op.get("operationId").is_some()) {
                    swagger2_operation(op);
                }
            }
            self.paths.insert(path, item);
        }
    }
}

fn rewrite_references(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields.iter_mut() {
                match field {
                    Value::String(reference) if key == "$ref" => {
                        *reference = reference.replace("#/components/schemas/", "#/definitions/");
                    }
                    _ => rewrite_references(field),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_references),
        _ => {}
    }
}

/// The `/openapi/v2` (Swagger 2.0) document of everything served.
pub fn v2_document(registry: &Registry) -> Value {
    let mut swagger = Swagger2::default();
    for (group, version) in group_versions(registry) {
        swagger.add(v3_document(registry, &group, &version).unwrap_or_default());
    }
    let info = json!({"title": "Kubernetes", "version": crate::discovery::VERSION.git_version});
    json!({"swagger": "2.0", "info": info, "paths": swagger.paths, "definitions": swagger.definitions})
}

/// A v3 operation in Swagger 2.0 form: query parameters typed inline, `consumes` for bodies.
fn swagger2_operation(op: &mut Value) {
    if let Some(body) = op.get("requestBody").cloned() {
        let consumes: Vec<String> =
            body.get("content").and_then(Value::as_object).map(|c| c.keys().cloned().collect()).unwrap_or_default();
        crate::object::set(op, "consumes", json!(consumes));
        op.as_object_mut().map(|o| o.remove("requestBody"));
        let mut params = op.get("parameters").and_then(Value::as_array).cloned().unwrap_or_default();
        params.push(json!({"name": "body", "in": "body", "required": true, "schema": {"type": "object"}}));
        op["parameters"] = Value::Array(params);
    }
    if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
        for param in params.iter_mut().filter(|p| p["in"] == "query") {
            let schema = param.as_object_mut().and_then(|p| p.remove("schema")).unwrap_or_default();
            param["type"] = schema.get("type").cloned().unwrap_or(json!("string"));
            param["uniqueItems"] = json!(true);
        }
    }
    op["produces"] = json!(["application/json"]);
    if let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) {
        for response in responses.values_mut() {
            let schema = response.pointer("/content/application~1json/schema").cloned();
            if let Some(schema) = schema {
                *response = json!({"description": "OK", "schema": schema});
            }
        }
    }
}

/// The gnostic `openapi_v2.Document` protobuf of a document with `swagger` and `info` only:
/// valid for clients that decode it, with no definitions, so they treat every custom resource
/// as a kind without a schema (client-side apply then uses a JSON merge patch, as it does for
/// CRDs anyway). Field numbers: Document.swagger = 1, Document.info = 2, Info.title = 1,
/// Info.version = 2.
pub fn v2_protobuf_header() -> Vec<u8> {
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2];
        let mut len = bytes.len();
        loop {
            let byte = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
        out.extend_from_slice(bytes);
        out
    }
    let info = [field(1, b"Kubernetes"), field(2, crate::discovery::VERSION.git_version.as_bytes())].concat();
    [field(1, b"2.0"), field(2, &info)].concat()
}
