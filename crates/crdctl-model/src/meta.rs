//! Rules for an object's labels and annotations, as apimachinery's `ValidateLabels` and
//! `ValidateAnnotations`: what the API server checks in every object's metadata, in an embedded
//! resource's, and in the metadata a conversion webhook sends back.
//!
//! ```
//! use crdctl_model::field::Path;
//!
//! let labels = serde_json::json!({"app": "web", "tier": "-bad"});
//! let metadata = Path::new("metadata");
//! let errors = crdctl_model::meta::validate_labels(labels.as_object().unwrap(), &metadata.child("labels"));
//! assert_eq!(errors.len(), 1);
//! assert!(errors[0].to_string().starts_with(r#"metadata.labels: Invalid value: "-bad": a valid label"#));
//! ```

use serde_json::{Map, Value};

use crate::field::{ErrorList, Path};
use crate::names::{label_value_errors, qualified_name_errors};

/// How large an object's annotations may be together, keys and values (`TotalAnnotationSizeLimitB`).
pub const TOTAL_ANNOTATION_BYTES: usize = 256 * 1024;

/// Each key must be a qualified name and each value a label value; every error is at `path`.
pub fn validate_labels(labels: &Map<String, Value>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (key, value) in labels {
        errors.extend(qualified_name_errors(key).into_iter().map(|e| path.invalid(key, e)));
        let value = value.as_str().unwrap_or_default();
        errors.extend(label_value_errors(value).into_iter().map(|e| path.invalid(value, e)));
    }
    errors
}

/// Each key must be a qualified name (checked lower-cased), and keys and values together at most
/// [`TOTAL_ANNOTATION_BYTES`].
pub fn validate_annotations(annotations: &Map<String, Value>, path: &Path) -> ErrorList {
    let mut errors: ErrorList = annotations
        .keys()
        .flat_map(|key| qualified_name_errors(&key.to_lowercase()).into_iter().map(move |e| path.invalid(key, e)))
        .collect();
    let total: usize = annotations.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
    if total > TOTAL_ANNOTATION_BYTES {
        errors.push(path.too_long(format!("may not be more than {TOTAL_ANNOTATION_BYTES} bytes")));
    }
    errors
}
