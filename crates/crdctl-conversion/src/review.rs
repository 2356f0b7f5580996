//! `ConversionReview` in `apiextensions.k8s.io/v1` and `v1beta1`.
//!
//! Both versions have the same shape; only the `apiVersion` differs, and a webhook must answer
//! in the version it was asked in. Objects stay [`serde_json::Value`]: conversion must not drop
//! a field it does not know.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The group of ConversionReview.
pub const GROUP: &str = "apiextensions.k8s.io";
/// The kind of ConversionReview.
pub const KIND: &str = "ConversionReview";

/// A ConversionReview version the API server can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReviewVersion {
    /// `apiextensions.k8s.io/v1`.
    V1,
    /// `apiextensions.k8s.io/v1beta1`.
    V1beta1,
}

impl ReviewVersion {
    /// The version name, `v1` or `v1beta1`.
    pub fn name(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "v1",
            ReviewVersion::V1beta1 => "v1beta1",
        }
    }

    /// The full `apiVersion`.
    pub fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "apiextensions.k8s.io/v1",
            ReviewVersion::V1beta1 => "apiextensions.k8s.io/v1beta1",
        }
    }

    /// Parses an `apiVersion`.
    pub fn from_api_version(api_version: &str) -> Option<ReviewVersion> {
        match api_version {
            "apiextensions.k8s.io/v1" => Some(ReviewVersion::V1),
            "apiextensions.k8s.io/v1beta1" => Some(ReviewVersion::V1beta1),
            _ => None,
        }
    }

    /// The first version in a CRD's `conversionReviewVersions` that the API server supports,
    /// as the API server picks it.
    pub fn negotiate(preferred: &[String]) -> Option<ReviewVersion> {
        preferred.iter().find_map(|v| match v.as_str() {
            "v1" => Some(ReviewVersion::V1),
            "v1beta1" => Some(ReviewVersion::V1beta1),
            _ => None,
        })
    }
}

/// A ConversionReview, request or response. `O` is how converted objects are read: as values,
/// or as the API server's side reads them ([`crate::converted::Converted`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
pub struct ConversionReview<O = Value> {
    /// `apiextensions.k8s.io/v1` or `apiextensions.k8s.io/v1beta1`.
    #[serde(default)]
    pub api_version: String,
    /// `ConversionReview`.
    #[serde(default)]
    pub kind: String,
    /// What to convert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<ConversionRequest>,
    /// The webhook's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ConversionResponse<O>>,
}

/// `request` of a ConversionReview.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ConversionRequest {
    /// Identifies this conversion; the response must repeat it.
    #[serde(default)]
    pub uid: String,
    /// `<group>/<version>` to convert to.
    #[serde(rename = "desiredAPIVersion", default)]
    pub desired_api_version: String,
    /// The objects, in any versions other than the desired one.
    #[serde(default)]
    pub objects: Vec<Value>,
}

/// `response` of a ConversionReview.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
pub struct ConversionResponse<O = Value> {
    /// The request's uid.
    #[serde(default)]
    pub uid: String,
    /// The converted objects, in request order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converted_objects: Option<Vec<O>>,
    /// `Success`, or `Failed` with a message.
    #[serde(default)]
    pub result: Status,
}

/// A `metav1.Status` as conversion uses it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Status {
    /// `Success` or `Failed`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl ConversionReview {
    /// A request in `version` for `objects`.
    pub fn request(
        version: ReviewVersion,
        uid: &str,
        desired_api_version: &str,
        objects: Vec<Value>,
    ) -> ConversionReview {
        ConversionReview {
            api_version: version.api_version().into(),
            kind: KIND.into(),
            request: Some(ConversionRequest {
                uid: uid.into(),
                desired_api_version: desired_api_version.into(),
                objects,
            }),
            response: None,
        }
    }

    /// A successful response to a request in `version`.
    pub fn success(version: ReviewVersion, uid: &str, converted_objects: Vec<Value>) -> ConversionReview {
        ConversionReview::respond(
            version,
            ConversionResponse {
                uid: uid.into(),
                converted_objects: Some(converted_objects),
                result: Status { status: "Success".into(), message: String::new() },
            },
        )
    }

    /// A failed response to a request in `version`.
    pub fn failure(version: ReviewVersion, uid: &str, message: &str) -> ConversionReview {
        ConversionReview::respond(
            version,
            ConversionResponse {
                uid: uid.into(),
                converted_objects: None,
                result: Status { status: "Failed".into(), message: message.into() },
            },
        )
    }

    fn respond(version: ReviewVersion, response: ConversionResponse) -> ConversionReview {
        ConversionReview {
            api_version: version.api_version().into(),
            kind: KIND.into(),
            request: None,
            response: Some(response),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn negotiation_takes_the_first_supported_version() {
        let versions = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(ReviewVersion::negotiate(&versions(&["vx"])), None);
        assert_eq!(ReviewVersion::negotiate(&versions(&["v1", "v1beta1", "v2"])), Some(ReviewVersion::V1));
        assert_eq!(ReviewVersion::negotiate(&versions(&["v1beta1", "v1", "v2"])), Some(ReviewVersion::V1beta1));
    }

    #[test]
    fn the_seed_request_round_trips() {
        let seed = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "desiredAPIVersion": "example.com/v1",
                "objects": [{"kind": "CronTab", "apiVersion": "example.com/v1beta1", "metadata": {"name": "local-crontab"}, "hostPort": "localhost:1234"}]
            }
        });
        let review: ConversionReview = serde_json::from_value(seed.clone()).unwrap();
        assert_eq!(review.request.as_ref().unwrap().desired_api_version, "example.com/v1");
        assert_eq!(serde_json::to_value(&review).unwrap(), seed);
    }
}
