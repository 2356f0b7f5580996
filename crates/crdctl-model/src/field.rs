//! Field paths and field errors, as apimachinery's `pkg/util/validation/field`.
//!
//! Every check in crdctl that reports a problem with a field — a definition's, a custom
//! resource's, a request's — builds a [`Path`] and asks it for an [`Error`], so the messages have
//! one format: `spec.items[0].name: Invalid value: "x": must be …`.
//!
//! A [`Path`] is a chain of borrowed steps back to the root and costs nothing until a message
//! needs it: the server walks every node of every object it validates, and almost all of them
//! are valid. Each error also carries the JSON pointer of its node, so a command can point at the
//! file and line it came from.
//!
//! ```
//! use crdctl_model::field::Path;
//!
//! let spec = Path::new("spec");
//! let versions = spec.child("versions");
//! let name = versions.index(0);
//! let error = name.child("name").invalid("V1", "a DNS-1035 label must be lower case");
//! assert_eq!(error.to_string(), r#"spec.versions[0].name: Invalid value: "V1": a DNS-1035 label must be lower case"#);
//! assert_eq!(error.pointer, "/spec/versions/0/name");
//! assert_eq!(error.error_type.reason(), "FieldValueInvalid");
//! ```

use std::fmt::{self, Write};

use serde_json::Value;

use crate::go;

/// Where a value sits: a chain of steps back to the root.
#[derive(Debug, Clone, Copy)]
pub enum Path<'a> {
    /// The object itself; upstream's nil path, printed `<nil>` in an error.
    Root,
    /// A property: `parent.name`.
    Child(&'a Path<'a>, &'a str),
    /// A property the API server names differently from its place in the v1 document:
    /// `parent.name` in messages, `parent/v1` (one or more pointer segments) for positions.
    Renamed(&'a Path<'a>, &'a str, &'a str),
    /// A map entry, as `field.Path.Key` writes it: `parent[name]`.
    Key(&'a Path<'a>, &'a str),
    /// A list item: `parent[index]`.
    Index(&'a Path<'a>, usize),
}

impl<'a> Path<'a> {
    /// A path of one step from the root: `field.NewPath(name)`.
    pub fn new(name: &'a str) -> Path<'a> {
        Path::Child(&Path::Root, name)
    }

    /// A property of this node.
    pub fn child(&'a self, name: &'a str) -> Path<'a> {
        Path::Child(self, name)
    }

    /// A property whose internal name differs from its place in the v1 document.
    pub fn child_at(&'a self, name: &'a str, v1_pointer_segments: &'a str) -> Path<'a> {
        Path::Renamed(self, name, v1_pointer_segments)
    }

    /// A map entry of this node.
    pub fn key(&'a self, name: &'a str) -> Path<'a> {
        Path::Key(self, name)
    }

    /// A list item of this node.
    pub fn index(&'a self, index: usize) -> Path<'a> {
        Path::Index(self, index)
    }

    /// The API server's field path: `spec.items[0].name`; empty at the root.
    pub fn path(&self) -> String {
        let mut out = String::new();
        self.write_path(&mut out);
        out
    }

    fn write_path(&self, out: &mut String) {
        match self {
            Path::Root => {}
            Path::Child(parent, name) | Path::Renamed(parent, name, _) => {
                parent.write_path(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Path::Key(parent, name) => {
                parent.write_path(out);
                let _ = write!(out, "[{name}]");
            }
            Path::Index(parent, index) => {
                parent.write_path(out);
                let _ = write!(out, "[{index}]");
            }
        }
    }

    /// The path as a field error names it: `<nil>` at the root, as upstream prints a nil path.
    pub fn error_field(&self) -> String {
        match self {
            Path::Root => "<nil>".to_string(),
            _ => self.path(),
        }
    }

    /// The JSON pointer of the node in the (v1) document.
    pub fn pointer(&self) -> String {
        let mut out = String::new();
        self.write_pointer(&mut out);
        out
    }

    fn write_pointer(&self, out: &mut String) {
        match self {
            Path::Root => {}
            Path::Child(parent, name) | Path::Key(parent, name) => {
                parent.write_pointer(out);
                out.push('/');
                out.push_str(&escape_pointer_segment(name));
            }
            Path::Renamed(parent, _, v1) => {
                parent.write_pointer(out);
                out.push('/');
                out.push_str(v1);
            }
            Path::Index(parent, index) => {
                parent.write_pointer(out);
                let _ = write!(out, "/{index}");
            }
        }
    }

    /// An error of any type at this node.
    pub fn error(&self, error_type: ErrorType, detail: impl Into<String>) -> Error {
        Error { field: self.error_field(), pointer: self.pointer(), error_type, detail: detail.into() }
    }

    /// `field.Required`.
    pub fn required(&self, detail: impl Into<String>) -> Error {
        self.error(ErrorType::Required, detail)
    }

    /// `field.Forbidden`.
    pub fn forbidden(&self, detail: impl Into<String>) -> Error {
        self.error(ErrorType::Forbidden, detail)
    }

    /// `field.Invalid`, the value printed as `field.ErrorBody` prints it.
    pub fn invalid(&self, value: impl Into<BadValue>, detail: impl Into<String>) -> Error {
        self.error(ErrorType::Invalid(value.into().0), detail)
    }

    /// `field.TypeInvalid`.
    pub fn type_invalid(&self, value: impl Into<BadValue>, detail: impl Into<String>) -> Error {
        self.error(ErrorType::TypeInvalid(value.into().0), detail)
    }

    /// `field.NotSupported` for a string value.
    pub fn not_supported(&self, value: &str, supported: &[&str]) -> Error {
        let supported = supported.iter().map(|s| s.to_string()).collect();
        self.error(ErrorType::NotSupported(go::quote(value), supported), "")
    }

    /// `field.Duplicate`.
    pub fn duplicate(&self, value: impl Into<BadValue>) -> Error {
        self.error(ErrorType::Duplicate(value.into().0), "")
    }

    /// `field.TooLong`; the detail says the limit.
    pub fn too_long(&self, detail: impl Into<String>) -> Error {
        self.error(ErrorType::TooLong, detail)
    }

    /// `field.TooMany`: `count` items where the detail's limit allows fewer.
    pub fn too_many(&self, count: impl fmt::Display, detail: impl Into<String>) -> Error {
        self.error(ErrorType::TooMany(count.to_string()), detail)
    }
}

/// Escapes one JSON pointer segment (RFC 6901): `~` as `~0`, `/` as `~1`.
pub fn escape_pointer_segment(segment: &str) -> std::borrow::Cow<'_, str> {
    if segment.contains(['~', '/']) { segment.replace('~', "~0").replace('/', "~1").into() } else { segment.into() }
}

/// One problem with one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The API server's field path, e.g. `spec.versions[0].name`.
    pub field: String,
    /// The JSON pointer of the node in the v1 document, for source positions.
    pub pointer: String,
    /// What kind of problem, with the offending value where the API server prints one.
    pub error_type: ErrorType,
    /// The detail after the type, e.g. `must contain unique version names`.
    pub detail: String,
}

/// Every problem a check found, in the order it found them.
pub type ErrorList = Vec<Error>;

/// The API server's error types (`field.ErrorType`), with the value each prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorType {
    /// `Required value`.
    Required,
    /// `Forbidden`.
    Forbidden,
    /// `Invalid value: <value>`; the value is rendered as the API server renders it.
    Invalid(String),
    /// `Unsupported value: <value>: supported values: ...`.
    NotSupported(String, Vec<String>),
    /// `Invalid value: <value>` for a value of the wrong type (`field.TypeInvalid`).
    TypeInvalid(String),
    /// `Too long`; the detail says the limit.
    TooLong,
    /// `Too many: <count>`; the detail says the limit.
    TooMany(String),
    /// `Duplicate value: <value>`.
    Duplicate(String),
}

impl ErrorType {
    /// The cause reason the API server puts in a `Status` (`FieldValueInvalid`, ...).
    pub fn reason(&self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::Invalid(_) => "FieldValueInvalid",
            ErrorType::NotSupported(..) => "FieldValueNotSupported",
            ErrorType::TypeInvalid(_) => "FieldValueTypeInvalid",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany(_) => "FieldValueTooMany",
            ErrorType::Duplicate(_) => "FieldValueDuplicate",
        }
    }
}

impl Error {
    /// The message without the field, as `field.Error.ErrorBody`:
    /// `Required value: required when strategy is set to Webhook`.
    pub fn body(&self) -> String {
        let mut body = match &self.error_type {
            ErrorType::Required => "Required value".to_string(),
            ErrorType::Forbidden => "Forbidden".to_string(),
            ErrorType::Invalid(value) | ErrorType::TypeInvalid(value) => format!("Invalid value: {value}"),
            ErrorType::TooLong => "Too long".to_string(),
            ErrorType::TooMany(count) => format!("Too many: {count}"),
            ErrorType::Duplicate(value) => format!("Duplicate value: {value}"),
            ErrorType::NotSupported(value, supported) => {
                let quoted: Vec<String> = supported.iter().map(|s| go::quote(s)).collect();
                format!("Unsupported value: {value}: supported values: {}", quoted.join(", "))
            }
        };
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

impl std::error::Error for Error {}

/// A bad value rendered the way `field.ErrorBody` prints it: strings quoted, numbers and booleans
/// bare, lists and JSON values as JSON; [`Raw`] for a value already rendered.
pub struct BadValue(String);

/// A value already rendered as Go prints it (`%#v` of a struct, `0x0` of a nil pointer).
#[derive(Debug, Clone)]
pub struct Raw(pub String);

impl From<Raw> for BadValue {
    fn from(value: Raw) -> Self {
        BadValue(value.0)
    }
}
impl From<&str> for BadValue {
    fn from(value: &str) -> Self {
        BadValue(go::quote(value))
    }
}
impl From<&String> for BadValue {
    fn from(value: &String) -> Self {
        BadValue(go::quote(value))
    }
}
impl From<i64> for BadValue {
    fn from(value: i64) -> Self {
        BadValue(value.to_string())
    }
}
impl From<bool> for BadValue {
    fn from(value: bool) -> Self {
        BadValue(value.to_string())
    }
}
impl From<&[String]> for BadValue {
    fn from(value: &[String]) -> Self {
        BadValue(serde_json::to_string(value).unwrap_or_default())
    }
}
impl From<&Value> for BadValue {
    fn from(value: &Value) -> Self {
        BadValue(serde_json::to_string(value).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_written_as_the_api_server_writes_them() {
        let root = Path::Root;
        let spec = root.child("spec");
        let labels = spec.child("labels");
        let key = labels.key("a/b");
        let items = spec.child("items");
        let item = items.index(2);
        let name = item.child("name");
        assert_eq!(root.path(), "");
        assert_eq!(root.error_field(), "<nil>");
        assert_eq!(name.path(), "spec.items[2].name");
        assert_eq!(key.path(), "spec.labels[a/b]");
        assert_eq!(key.pointer(), "/spec/labels/a~1b");
        assert_eq!(name.pointer(), "/spec/items/2/name");
    }

    #[test]
    fn a_renamed_field_keeps_its_v1_place() {
        let conversion = Path::new("spec");
        let conversion = conversion.child("conversion");
        let config = conversion.child_at("webhookClientConfig", "webhook/clientConfig");
        let url = config.child("url");
        assert_eq!(url.path(), "spec.conversion.webhookClientConfig.url");
        assert_eq!(url.pointer(), "/spec/conversion/webhook/clientConfig/url");
    }

    #[test]
    fn bodies_are_written_as_error_body() {
        let path = Path::new("spec");
        let field = path.child("scope");
        assert_eq!(
            field.not_supported("Global", &["Cluster", "Namespaced"]).to_string(),
            r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#
        );
        assert_eq!(field.required("").to_string(), "spec.scope: Required value");
        assert_eq!(field.too_many(3, "must have at most 2 items").body(), "Too many: 3: must have at most 2 items");
        let value = serde_json::json!({"a": 1});
        assert_eq!(
            field.invalid(Raw(go::bad_value(&value)), "x").body(),
            r#"Invalid value: map[string]interface {}{"a":1}: x"#
        );
    }
}
