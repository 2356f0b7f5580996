//! What a write does with fields its kind's schema does not know (`?fieldValidation=`), for
//! custom resources and built-in kinds alike: upstream's typed and schema-coercing decoders
//! drop them, and say so as the request asks.

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

impl FieldValidation {
    /// The unknown fields (field paths) a decoder found in a `kind` at `version`: refused under
    /// `Strict` as upstream's strict decoder refuses them, else the warnings to send (none under
    /// `Ignore`).
    pub fn report(self, kind: &str, version: &str, unknown: Vec<String>) -> Result<Vec<String>, ApiError> {
        let texts: Vec<String> = unknown.iter().map(|path| format!("unknown field {path:?}")).collect();
        match self {
            FieldValidation::Strict if !texts.is_empty() => Err(ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
                texts.join(", ")
            ))),
            FieldValidation::Warn => Ok(texts),
            _ => Ok(Vec::new()),
        }
    }
}
