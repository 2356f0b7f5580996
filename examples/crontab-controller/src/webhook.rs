//! The controller's admission webhooks, as an operator ships them beside the controller (what
//! kubebuilder scaffolds): `/mutate` defaults a CronTab's `image` to `cron:latest`; `/validate`
//! refuses more than ten replicas and a `cronSpec` that is not five fields.
//!
//! Served by crdctl's webhook framework ([`crdctl_conversion::admission`]); the tests run them
//! against `TestServer`, which calls them as kube-apiserver would.

use crdctl_conversion::admission::{self, AdmissionRequest, Verdict};

/// The most replicas a CronTab may ask for.
pub const MAX_REPLICAS: i64 = 10;

/// The webhook routes: `POST /mutate` and `POST /validate`.
pub fn routes() -> axum::Router {
    admission::router().mutating("/mutate", mutate).validating("/validate", validate).build()
}

/// Defaults `spec.image`.
pub fn mutate(request: &AdmissionRequest) -> Verdict {
    match request.object_field("/spec/image") {
        None => Verdict::allow().add("/spec/image", "cron:latest".into()),
        Some(_) => Verdict::allow(),
    }
}

/// Refuses more than [`MAX_REPLICAS`] replicas and a schedule that is not five fields.
pub fn validate(request: &AdmissionRequest) -> Verdict {
    let replicas = request.object_field("/spec/replicas").and_then(|r| r.as_i64()).unwrap_or(1);
    if replicas > MAX_REPLICAS {
        return Verdict::deny(format!("spec.replicas: {replicas} is more than {MAX_REPLICAS}"));
    }
    let schedule = request.object_field("/spec/cronSpec").and_then(|s| s.as_str()).unwrap_or_default();
    if schedule.split_whitespace().count() != 5 {
        return Verdict::deny(format!("spec.cronSpec: {schedule:?} is not five fields"));
    }
    Verdict::allow()
}
