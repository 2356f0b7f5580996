//! CRD conversion: `ConversionReview`, the `None` strategy, and both sides of a conversion webhook.
//!
//! The core is pure and synchronous: [`review`] holds the ConversionReview types of
//! `apiextensions.k8s.io/v1` and `v1beta1`, [`none`] the `None` strategy, and [`response`] checks a
//! webhook's answer exactly as the API server does, with its error messages, reading the converted
//! objects as [`converted`] describes. I/O lives behind
//! features:
//!
//! - `client`: [`webhook::WebhookClient`] calls a CRD's conversion webhook (URL or Service, TLS
//!   verified against the `caBundle`), and [`Converter`] picks None or Webhook from a CRD.
//! - `framework`: [`framework::serve`] turns one conversion function into an HTTPS webhook that
//!   answers v1 and v1beta1 reviews, reloads rotated certificates and shuts down gracefully.
//! - `certs`: [`certs::generate`] makes a CA and a serving certificate for a webhook.
//! - `fuzz`: [`fuzz::run`] converts objects made from each served version's schema around the
//!   other versions and back, and reports what did not come back, shrunk to the smallest object.
//!
//! The `None` strategy changes only `apiVersion`, as the API server's `nopConverter`:
//!
//! ```
//! use serde_json::json;
//!
//! let stored = json!({"apiVersion": "stable.example.com/v1beta1", "kind": "CronTab", "spec": {"cron": "* * * * */5"}});
//! let served = crdctl_conversion::none::convert(vec![stored], "stable.example.com/v1");
//! assert_eq!(served[0]["apiVersion"], "stable.example.com/v1");
//! assert_eq!(served[0]["spec"], json!({"cron": "* * * * */5"}));
//! ```

#[cfg(feature = "framework")]
pub mod admission;
#[cfg(feature = "certs")]
pub mod certs;
pub mod converted;
#[cfg(feature = "client")]
mod converter;
pub mod difference;
#[cfg(feature = "framework")]
pub mod framework;
#[cfg(feature = "fuzz")]
pub mod fuzz;
mod metadata;
pub mod none;
pub mod response;
pub mod review;
#[cfg(feature = "client")]
pub mod webhook;

#[cfg(feature = "client")]
pub use converter::Converter;
pub use response::{ConversionError, ObjectJson, Shape};
pub use review::{ConversionReview, ReviewVersion};
