//! What a write does with fields its kind's schema does not know (`?fieldValidation=`), for
//! custom resources and built-in kinds alike: upstream's typed and schema-coercing decoders
//! drop them, and say so as the request asks.

use crdctl_model::field::{Path, Raw};
use crdctl_model::go;
use crdctl_schema::Schema;
use serde_json::{Map, Value};

use crate::error::ApiError;

/// `?fieldValidation=`: what to do with fields the schema does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and say so in `Warning` headers (the API server's default).
    #[default]
    Warn,
    /// Refuse the request (kubectl's default).
    Strict,
}

impl FieldValidation {
    /// Parses the query parameter.
    pub fn parse(text: Option<&str>) -> Result<FieldValidation, ApiError> {
        match text {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other}. Supported values are Ignore, Warn, Strict"
            ))),
        }
    }
}

/// How the object a write decodes reached the server; upstream words a strict decoding error
/// by it.
#[derive(Debug, Clone, Copy)]
pub enum Decoded<'a> {
    /// A request body (create, update, apply).
    Body,
    /// The result of a JSON or merge patch: refused as an invalid `patch`, showing the patched
    /// object as `encoding/json` writes it.
    Patched,
    /// The result of this strategic merge patch: refused as an invalid `patch`, showing the patch
    /// as Go's `%v` prints it.
    StrategicMerge(&'a Map<String, Value>),
}

impl FieldValidation {
    /// Prunes `object` (a `kind` at `version`) to `schema`. The fields it drops are refused under
    /// `Strict` as upstream's strict decoder refuses them, else returned as the warnings to send
    /// (none under `Ignore`).
    pub fn prune(
        self,
        object: &mut Value,
        schema: &Schema,
        (kind, version): (&str, &str),
        decoded: Decoded,
    ) -> Result<Vec<String>, ApiError> {
        let patched = (self == FieldValidation::Strict && matches!(decoded, Decoded::Patched)).then(|| object.clone());
        let unknown = crdctl_schema::prune(object, schema);
        let texts: Vec<String> = unknown.iter().map(|path| format!("unknown field {path:?}")).collect();
        match self {
            FieldValidation::Strict if !texts.is_empty() => {
                let error = format!("strict decoding error: {}", texts.join(", "));
                let shown = match (decoded, patched) {
                    (Decoded::StrategicMerge(patch), _) => go::display_map(patch),
                    (Decoded::Patched, Some(patched)) => go::json(&patched),
                    _ => {
                        return Err(ApiError::bad_request(format!(
                            "{kind} in version {version:?} cannot be handled as a {kind}: {error}"
                        )));
                    }
                };
                Err(ApiError::invalid("", "", "", &[Path::new("patch").invalid(Raw(go::quote(&shown)), error)]))
            }
            FieldValidation::Warn => Ok(texts),
            _ => Ok(Vec::new()),
        }
    }
}
