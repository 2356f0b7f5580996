//! The CEL type of a schema node with the size bounds cost estimation needs (upstream's
//! `DeclType` from `k8s.io/apiserver/pkg/cel/common/schemas.go`).
//!
//! A bound is what the schema declares (`maxLength`, `maxItems`, `maxProperties`, an enum's
//! longest value) or, when it declares nothing, what fits in one request: a list of values
//! that serialize to at least `n` bytes holds at most `(3 MiB - 2) / (n + 1)` of them. So
//! each node also carries the smallest size its value can serialize to.

use std::collections::HashMap;

use super::escape;
use crate::{Additional, Schema};

/// The largest request the API server accepts, which bounds every unbounded value.
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

/// A schema node's CEL type, bounds included.
#[derive(Debug, Clone, PartialEq)]
pub struct Decl {
    /// What kind of value it is.
    pub kind: DeclKind,
    /// The most characters, bytes, items or properties a value can have.
    pub max_elements: u64,
    /// The fewest bytes its JSON can take.
    pub min_serialized_size: u64,
}

/// The kinds of value a schema node can declare.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum DeclKind {
    Bool,
    Int,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    /// `x-kubernetes-int-or-string`.
    Dyn,
    List(Box<Decl>),
    /// `additionalProperties`: string keys to values of one type.
    Map(Box<Decl>),
    /// `properties`, by their CEL names (escaped).
    Object(HashMap<String, Decl>),
}

/// The bytes of a JSON `""`, the shortest string.
const MIN_STRING_SIZE: u64 = 2;

impl Decl {
    fn scalar(kind: DeclKind, min_serialized_size: u64) -> Decl {
        Decl { kind, max_elements: 0, min_serialized_size }
    }

    fn bounded(self, max_elements: u64) -> Decl {
        Decl { max_elements, ..self }
    }

    /// The type of `schema`; `resource_root` adds `apiVersion`, `kind` and `metadata` (name
    /// and generateName) as the API server does for a resource's root and embedded resources.
    /// `None` for nodes CEL cannot see (no type, lists of such nodes).
    pub fn of(schema: &Schema, resource_root: bool) -> Option<Decl> {
        if schema.int_or_string {
            let max_elements = match schema.max_length {
                Some(max) => characters_to_bytes(max),
                None => MAX_REQUEST_SIZE_BYTES - 2,
            };
            return Some(Decl { kind: DeclKind::Dyn, max_elements, min_serialized_size: 1 });
        }
        match schema.types.first().map(String::as_str) {
            Some("array") => {
                let items = schema.items.as_deref()?;
                let items = Decl::of(items, items.embedded_resource)?;
                let max_elements = match schema.max_items {
                    Some(max) => zero_if_negative(max),
                    None => (MAX_REQUEST_SIZE_BYTES - 2) / (items.min_serialized_size + 1),
                };
                Some(Decl { kind: DeclKind::List(Box::new(items)), max_elements, min_serialized_size: 2 })
            }
            Some("object") => match &schema.additional_properties {
                Some(Additional::Schema(values)) => {
                    let values = Decl::of(values, values.embedded_resource)?;
                    let max_elements = match schema.max_properties {
                        Some(max) => zero_if_negative(max),
                        None => (MAX_REQUEST_SIZE_BYTES - 2) / (values.min_serialized_size + 6),
                    };
                    Some(Decl { kind: DeclKind::Map(Box::new(values)), max_elements, min_serialized_size: 2 })
                }
                _ => Some(object(schema, resource_root && !has_type_and_object_meta(schema))),
            },
            Some("string") => Some(string(schema)),
            Some("boolean") => Some(Decl::scalar(DeclKind::Bool, 4)),
            Some("number") => Some(Decl::scalar(DeclKind::Double, 1)),
            Some("integer") => Some(Decl::scalar(DeclKind::Int, 1)),
            _ => None,
        }
    }

    /// The element type of a list or map.
    pub fn element(&self) -> Option<&Decl> {
        match &self.kind {
            DeclKind::List(element) | DeclKind::Map(element) => Some(element),
            _ => None,
        }
    }

    /// How many times a rule on this node can run in one request when its ancestors do not
    /// bound it (upstream's `maxCardinality`): one per value that fits, with a comma between.
    pub fn max_cardinality(&self) -> u64 {
        MAX_REQUEST_SIZE_BYTES / (self.min_serialized_size + 1)
    }
}

/// An object's fields; `with_object_meta` replaces `apiVersion`, `kind` and `metadata` with
/// what rules see of a resource: two strings, and `metadata` with only `name` and
/// `generateName` (upstream's `WithTypeAndObjectMeta`).
fn object(schema: &Schema, with_object_meta: bool) -> Decl {
    let string = || Decl::scalar(DeclKind::String, MIN_STRING_SIZE).bounded(MAX_REQUEST_SIZE_BYTES - 2);
    let synthetic = with_object_meta.then(|| {
        let metadata = [("name".to_string(), string()), ("generateName".to_string(), string())];
        let metadata = Decl::scalar(DeclKind::Object(metadata.into_iter().collect()), 2);
        [("kind", string()), ("apiVersion", string()), ("metadata", metadata)]
    });
    let declared = schema
        .properties
        .iter()
        .filter(|(name, _)| !with_object_meta || !matches!(name.as_str(), "kind" | "apiVersion" | "metadata"))
        .filter_map(|(name, property)| {
            Some((name.as_str(), Decl::of(property, property.embedded_resource)?, property))
        });
    let mut fields = HashMap::new();
    let mut min_serialized_size = 2;
    let mut add = |name: &str, field: Decl, has_default: bool| {
        if schema.required.iter().any(|r| r == name) && !has_default {
            min_serialized_size += name.len() as u64 + field.min_serialized_size + 4;
        }
        if let Some(escaped) = escape(name) {
            fields.insert(escaped, field);
        }
    };
    for (name, field, property) in declared {
        add(name, field, property.default.is_some());
    }
    for (name, field) in synthetic.into_iter().flatten() {
        add(name, field, false);
    }
    Decl { kind: DeclKind::Object(fields), max_elements: 0, min_serialized_size }
}

fn string(schema: &Schema) -> Decl {
    let per_request = MAX_REQUEST_SIZE_BYTES - 2;
    let (kind, min_serialized_size, max_elements) = match schema.format_name.as_str() {
        "byte" => (DeclKind::Bytes, MIN_STRING_SIZE, schema.max_length.map_or(per_request, zero_if_negative)),
        // RFC 3339 durations and times, quoted: "0" to 32 bytes, "YYYY-MM-DD", and a full date-time.
        "duration" => (DeclKind::Duration, 3, 32),
        "date" => (DeclKind::Timestamp, 12, 12),
        "date-time" => (DeclKind::Timestamp, 21, 32),
        _ => {
            let max_elements = match (schema.max_length, &schema.enumeration) {
                (Some(max), _) => characters_to_bytes(max),
                (None, Some(values)) if !values.is_empty() => {
                    values.iter().filter_map(|v| v.as_str()).map(|v| v.len() as u64).max().unwrap_or(0)
                }
                _ => per_request,
            };
            (DeclKind::String, MIN_STRING_SIZE, max_elements)
        }
    };
    Decl { kind, max_elements, min_serialized_size }
}

/// A `maxLength` counts characters; a UTF-8 character takes up to four bytes.
fn characters_to_bytes(max_length: i64) -> u64 {
    zero_if_negative(max_length).saturating_mul(4)
}

fn zero_if_negative(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn has_type(schema: Option<&Schema>, name: &str) -> bool {
    schema.is_some_and(|s| s.has_type(name))
}

/// Whether the root already declares what `with_type_and_object_meta` would add.
fn has_type_and_object_meta(schema: &Schema) -> bool {
    let metadata = schema.properties.get("metadata");
    has_type(schema.properties.get("kind"), "string")
        && has_type(schema.properties.get("apiVersion"), "string")
        && has_type(metadata, "object")
        && has_type(metadata.and_then(|m| m.properties.get("name")), "string")
        && has_type(metadata.and_then(|m| m.properties.get("generateName")), "string")
}
