//! Picking a converter from a CRD, as the API server's converter factory does.

use crdctl_model::crd::CustomResourceDefinition;
use serde_json::Value;

use crate::response::{ConversionError, ObjectJson, Shape};
use crate::webhook::{ServiceResolver, WebhookClient};

/// Converts custom resources between a CRD's versions.
#[derive(Debug, Clone)]
pub enum Converter {
    /// Only `apiVersion` changes.
    None,
    /// The CRD's conversion webhook.
    Webhook(Box<WebhookClient>),
}

impl Converter {
    /// The converter the CRD's `spec.conversion` asks for.
    pub fn for_crd(
        crd: &CustomResourceDefinition,
        resolver: &dyn ServiceResolver,
    ) -> Result<Converter, ConversionError> {
        let conversion = crd.spec.conversion.clone().unwrap_or_default();
        match conversion.strategy.as_str() {
            "" | "None" => Ok(Converter::None),
            "Webhook" => {
                let webhook = conversion.webhook.unwrap_or_default();
                let client_config = webhook.client_config.unwrap_or_default();
                Ok(Converter::Webhook(Box::new(WebhookClient::new(
                    &client_config,
                    &webhook.conversion_review_versions,
                    resolver,
                )?)))
            }
            other => Err(ConversionError::setup(format!(
                "unknown conversion strategy {other:?} for CRD {}",
                crd.metadata.name
            ))),
        }
    }

    /// Converts every object to `desired_api_version`, order preserved, each independently of
    /// the others' versions.
    pub async fn convert(
        &self,
        objects: Vec<Value>,
        desired_api_version: &str,
        shape: Shape,
    ) -> Result<Vec<Value>, ConversionError> {
        match self {
            Converter::None => Ok(crate::none::convert(objects, desired_api_version)),
            Converter::Webhook(client) => client.convert(objects, desired_api_version, shape).await,
        }
    }

    /// [`Converter::convert`], with the objects as JSON text, which a webhook's answer already
    /// is: a list read writes them out without parsing them.
    pub async fn convert_json(
        &self,
        objects: Vec<Value>,
        desired_api_version: &str,
        shape: Shape,
    ) -> Result<Vec<ObjectJson>, ConversionError> {
        match self {
            Converter::None => {
                Ok(crate::none::convert(objects, desired_api_version).iter().map(ObjectJson::of).collect())
            }
            Converter::Webhook(client) => client.convert_json(objects, desired_api_version, shape).await,
        }
    }
}
