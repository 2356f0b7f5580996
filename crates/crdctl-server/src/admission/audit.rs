//! What upstream adds to the audit event of an admitted request: the `auditAnnotations` of
//! webhook answers (`<webhook>/<key>`) and of policies (`<policy>/<key>`), and the failures of
//! bindings with the `Audit` action (`validation.policy.admission.k8s.io/validation_failure`,
//! a JSON list). The server keeps no audit log: each annotation is an event of its log under
//! the `audit` target, with the request it was made for.

use super::Request;

/// The annotation of the failures `Audit` bindings found.
pub const VALIDATION_FAILURE: &str = "validation.policy.admission.k8s.io/validation_failure";

/// Records the audit annotations a webhook or policy (`owner`) made, each as `<owner>/<key>`.
pub fn annotate_for(request: &Request<'_>, owner: &str, annotations: &[(String, String)]) {
    for (key, value) in annotations {
        annotate(request, &format!("{owner}/{key}"), value);
    }
}

/// Records one audit annotation of `request`.
pub fn annotate(request: &Request<'_>, key: &str, value: &str) {
    tracing::info!(
        target: "audit",
        operation = request.operation.as_str(),
        group = request.group,
        version = request.version,
        resource = request.resource,
        namespace = request.namespace.unwrap_or_default(),
        name = request.name,
        key,
        value,
        "audit annotation"
    );
}
