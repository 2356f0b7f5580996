//! Typed views of an `apiextensions.k8s.io/v1` CustomResourceDefinition.
//!
//! These types cover what validation, safety checks and serving read. They are views, not the
//! source of truth: a [`crate::Crd`] keeps the whole document as JSON, so fields these types do not
//! name (and schemas, which stay JSON) are never dropped. Every field has a default so that a
//! missing field is reported by validation, with its path, rather than by deserialisation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `apiextensions.k8s.io/v1` group version.
pub const API_VERSION_V1: &str = "apiextensions.k8s.io/v1";
/// The legacy `apiextensions.k8s.io/v1beta1` group version.
pub const API_VERSION_V1BETA1: &str = "apiextensions.k8s.io/v1beta1";
/// The kind of a CRD.
pub const KIND: &str = "CustomResourceDefinition";
/// The API group of CustomResourceDefinitions.
pub const GROUP: &str = "apiextensions.k8s.io";

/// A CustomResourceDefinition in its v1 shape, without schemas.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceDefinition {
    /// `apiextensions.k8s.io/v1` after normalisation.
    #[serde(default, deserialize_with = "nullable")]
    pub api_version: String,
    /// `CustomResourceDefinition`.
    #[serde(default, deserialize_with = "nullable")]
    pub kind: String,
    /// Object metadata.
    #[serde(default, deserialize_with = "nullable")]
    pub metadata: ObjectMeta,
    /// The definition.
    #[serde(default, deserialize_with = "nullable")]
    pub spec: Spec,
    /// Status, present in files exported from a cluster.
    #[serde(default, deserialize_with = "nullable")]
    pub status: Status,
}

/// The parts of `metadata` that CRD handling reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Must be `<plural>.<group>`.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Annotations, such as `api-approved.kubernetes.io`.
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `spec` of a CRD.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// API group, e.g. `stable.example.com`.
    #[serde(default, deserialize_with = "nullable")]
    pub group: String,
    /// Resource and kind names.
    #[serde(default, deserialize_with = "nullable")]
    pub names: Names,
    /// `Namespaced` or `Cluster`.
    #[serde(default, deserialize_with = "nullable")]
    pub scope: String,
    /// Versions in the order written.
    #[serde(default, deserialize_with = "nullable")]
    pub versions: Vec<Version>,
    /// How objects convert between versions; absent means `None`.
    #[serde(default)]
    pub conversion: Option<Conversion>,
    /// Disables pruning of unknown fields (legacy).
    #[serde(default)]
    pub preserve_unknown_fields: Option<bool>,
}

/// `spec.names` and `status.acceptedNames`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Names {
    /// URL path segment, e.g. `crontabs`.
    #[serde(default, deserialize_with = "nullable")]
    pub plural: String,
    /// Lower-case singular name, defaults to the lower-cased kind.
    #[serde(default, deserialize_with = "nullable")]
    pub singular: String,
    /// The kind, e.g. `CronTab`.
    #[serde(default, deserialize_with = "nullable")]
    pub kind: String,
    /// The list kind, defaults to `<kind>List`.
    #[serde(default, deserialize_with = "nullable")]
    pub list_kind: String,
    /// Short names for kubectl.
    #[serde(default, deserialize_with = "nullable")]
    pub short_names: Vec<String>,
    /// Categories such as `all`.
    #[serde(default, deserialize_with = "nullable")]
    pub categories: Vec<String>,
}

/// One entry of `spec.versions`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    /// Version name, e.g. `v1beta1`.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Whether the API server serves this version.
    #[serde(default, deserialize_with = "nullable")]
    pub served: bool,
    /// Whether objects are persisted in this version.
    #[serde(default, deserialize_with = "nullable")]
    pub storage: bool,
    /// Whether requests to this version get a deprecation warning.
    #[serde(default, deserialize_with = "nullable")]
    pub deprecated: bool,
    /// Overrides the default deprecation warning.
    #[serde(default)]
    pub deprecation_warning: Option<String>,
}

/// `spec.conversion`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Conversion {
    /// `None` or `Webhook`.
    #[serde(default, deserialize_with = "nullable")]
    pub strategy: String,
    /// Webhook settings, for strategy `Webhook`.
    #[serde(default)]
    pub webhook: Option<WebhookConversion>,
}

/// `spec.conversion.webhook`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookConversion {
    /// How to reach the webhook.
    #[serde(default)]
    pub client_config: Option<WebhookClientConfig>,
    /// ConversionReview versions the webhook accepts, preferred first.
    #[serde(default, deserialize_with = "nullable")]
    pub conversion_review_versions: Vec<String>,
}

/// Where a conversion webhook lives: a URL or a Service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookClientConfig {
    /// `https://host[:port][/path]`.
    #[serde(default)]
    pub url: Option<String>,
    /// A Service in the cluster.
    #[serde(default)]
    pub service: Option<ServiceReference>,
    /// PEM CA bundle, base64 in YAML; empty means system roots.
    #[serde(default)]
    pub ca_bundle: Option<String>,
}

/// `clientConfig.service`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    /// Service namespace.
    #[serde(default, deserialize_with = "nullable")]
    pub namespace: String,
    /// Service name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// URL path; the root when absent.
    #[serde(default)]
    pub path: Option<String>,
    /// Port; 443 when absent.
    #[serde(default)]
    pub port: Option<i64>,
}

/// `status` of a CRD.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Conditions such as `Established`.
    #[serde(default, deserialize_with = "nullable")]
    pub conditions: Vec<Condition>,
    /// Names the server accepted.
    #[serde(default, deserialize_with = "nullable")]
    pub accepted_names: Names,
    /// Every version that objects may still be persisted in.
    #[serde(default, deserialize_with = "nullable")]
    pub stored_versions: Vec<String>,
}

/// A status condition.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, e.g. `Established`.
    #[serde(rename = "type", default, deserialize_with = "nullable")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default, deserialize_with = "nullable")]
    pub status: String,
}

/// Reads `null` as the default value, as Go's JSON decoding does for slices, maps and strings.
fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

impl CustomResourceDefinition {
    /// The version objects are persisted in, if exactly one is marked.
    pub fn storage_version(&self) -> Option<&Version> {
        let mut storage = self.spec.versions.iter().filter(|v| v.storage);
        match (storage.next(), storage.next()) {
            (Some(version), None) => Some(version),
            _ => None,
        }
    }

    /// Served versions, highest priority first; the first is the one kubectl uses by default.
    pub fn served_versions_by_priority(&self) -> Vec<&Version> {
        let mut served: Vec<&Version> = self.spec.versions.iter().filter(|v| v.served).collect();
        crate::version::sort_by_priority_of(&mut served, |version| &version.name);
        served
    }

    /// The version kubectl picks when none is given: the highest-priority served version.
    pub fn preferred_version(&self) -> Option<&Version> {
        self.served_versions_by_priority().into_iter().next()
    }

    /// Whether the condition `type_` is `True`.
    pub fn condition_is_true(&self, type_: &str) -> bool {
        self.status.conditions.iter().any(|c| c.type_ == type_ && c.status == "True")
    }

    /// The conversion strategy, `None` when unset.
    pub fn conversion_strategy(&self) -> &str {
        self.spec.conversion.as_ref().map_or("None", |c| c.strategy.as_str())
    }
}
