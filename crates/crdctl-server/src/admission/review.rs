//! One webhook call: the `AdmissionReview` request, and the answer checked as upstream's
//! `VerifyAdmissionResponse` checks it (`request/admissionreview.go`).

use crdctl_conversion::webhook::CallError;
use serde_json::{Value, json};

use super::Context;
use super::{Phase, Request, Webhook};
use crate::error::ApiError;

/// What a webhook answered, once checked.
#[derive(Debug, Default)]
pub struct Answer {
    /// `response.allowed`.
    pub allowed: bool,
    /// A mutating webhook's `JSONPatch`, decoded from base64.
    pub patch: Option<Vec<u8>>,
    /// `response.status`, the denial's `Status`.
    pub result: Option<Value>,
    /// `response.warnings`.
    pub warnings: Vec<String>,
    /// `response.auditAnnotations`: key and value.
    pub audit_annotations: Vec<(String, String)>,
}

/// Why a call did not answer.
#[derive(Debug)]
pub enum Failure {
    /// No usable answer (`failurePolicy` decides): the reason after
    /// `failed calling webhook "x": `.
    Call(String),
    /// Refused whatever the policy (a dry run a webhook with side effects cannot see).
    Refused(ApiError),
}

/// The `AdmissionReview` versions the server speaks, in its order of preference when the
/// webhook lists both.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// Calls `webhook` for `request` and checks its answer; `version`: the equivalent version the
/// webhook sees the objects at, when not the request's.
pub async fn call(
    cx: Context<'_>,
    webhook: &Webhook,
    (request, version): (&Request<'_>, Option<&str>),
    object: Option<&Value>,
    old: Option<&Value>,
    phase: Phase,
) -> Result<Answer, Failure> {
    if request.dry_run && !webhook.supports_dry_run() {
        let message = format!("admission webhook {:?} does not support dry run", webhook.name);
        return Err(Failure::Refused(ApiError::bad_request(message)));
    }
    let review_version =
        webhook.admission_review_versions.iter().find(|v| REVIEW_VERSIONS.contains(&v.as_str())).ok_or_else(|| {
            Failure::Call("webhook does not accept known AdmissionReview versions (v1, v1beta1)".into())
        })?;
    let endpoint = cx.kept.clients.endpoint(&webhook.client_config, cx.registry.resolver()).map_err(Failure::Call)?;
    let uid = uuid::Uuid::new_v4().to_string();
    let bytes = review_request((review_version, version), &uid, request, object, old);
    let answer = endpoint.post(bytes.into(), webhook.timeout()).await.map_err(|err| match err {
        CallError::Unanswered(text) => Failure::Call(format!("failed to call webhook: {text}")),
        other => Failure::Call(format!("failed to call webhook: {other}")),
    })?;
    let review: Value = serde_json::from_slice(&answer)
        .map_err(|err| Failure::Call(format!("failed to call webhook: decoding the response: {err}")))?;
    verify(review_version, &uid, review, phase).map_err(Failure::Call)
}

/// The request, serialized: the webhook sees the object at the request's version. Written
/// from borrowed parts: the objects are not copied first.
fn review_request(
    (review_version, version): (&str, Option<&str>),
    uid: &str,
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Vec<u8> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Review<'a> {
        api_version: String,
        kind: &'static str,
        request: Body<'a>,
    }
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Body<'a> {
        uid: &'a str,
        kind: &'a Value,
        resource: &'a Value,
        #[serde(skip_serializing_if = "str::is_empty")]
        sub_resource: &'a str,
        request_kind: &'a Value,
        request_resource: &'a Value,
        #[serde(skip_serializing_if = "str::is_empty")]
        request_sub_resource: &'a str,
        name: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace: Option<&'a str>,
        operation: &'static str,
        user_info: Value,
        object: Option<&'a Value>,
        old_object: Option<&'a Value>,
        dry_run: bool,
        options: Value,
    }
    let kind_at = |version: &str| json!({"group": request.group, "version": version, "kind": request.kind});
    let resource_at = |version: &str| json!({"group": request.group, "version": version, "resource": request.resource});
    let seen = version.unwrap_or(request.version);
    let (kind, resource) = (kind_at(seen), resource_at(seen));
    let (request_kind, request_resource) = (kind_at(request.version), resource_at(request.version));
    let review = Review {
        api_version: format!("admission.k8s.io/{review_version}"),
        kind: "AdmissionReview",
        request: Body {
            uid,
            kind: &kind,
            resource: &resource,
            sub_resource: request.subresource,
            request_kind: &request_kind,
            request_resource: &request_resource,
            request_sub_resource: request.subresource,
            name: request.name,
            namespace: request.namespace,
            operation: request.operation.as_str(),
            user_info: request.user.info(),
            object,
            old_object: old,
            dry_run: request.dry_run,
            options: request.options(),
        },
    };
    serde_json::to_vec(&review).unwrap_or_default()
}

/// Checks an answer as upstream does; the reason it is unusable otherwise.
fn verify(version: &str, uid: &str, review: Value, phase: Phase) -> Result<Answer, String> {
    let Some(response) = review.get("response").filter(|r| r.is_object()) else {
        return Err("webhook response was absent".into());
    };
    let answered_uid = response.get("uid").and_then(Value::as_str).unwrap_or_default();
    let patch = response.get("patch").and_then(Value::as_str).filter(|p| !p.is_empty());
    let patch_type = response.get("patchType").and_then(Value::as_str);
    if version == "v1" {
        if answered_uid != uid {
            return Err(format!("expected response.uid={uid:?}, got {answered_uid:?}"));
        }
        let api_version = review.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = review.get("kind").and_then(Value::as_str).unwrap_or_default();
        if (api_version, kind) != ("admission.k8s.io/v1", "AdmissionReview") {
            let got = match api_version.split_once('/') {
                Some((group, version)) => format!("{group}/{version}, Kind={kind}"),
                None => format!("/{api_version}, Kind={kind}"),
            };
            return Err(format!("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {got}"));
        }
        match (phase, patch, patch_type) {
            (Phase::Mutating, Some(_), None) => {
                return Err("webhook returned response.patch but not response.patchType".into());
            }
            (Phase::Mutating, None, Some(_)) => {
                return Err("webhook returned response.patchType but not response.patch".into());
            }
            (Phase::Mutating, Some(_), Some(kind)) if kind != "JSONPatch" => {
                return Err(format!("unsupported patch type {kind:?}"));
            }
            (Phase::Validating, Some(_), _) => return Err("validating webhook may not return response.patch".into()),
            (Phase::Validating, None, Some(_)) => {
                return Err("validating webhook may not return response.patchType".into());
            }
            _ => {}
        }
    }
    let patch = match (phase, patch) {
        (Phase::Mutating, Some(patch)) => {
            use base64::Engine;
            Some(
                base64::engine::general_purpose::STANDARD
                    .decode(patch)
                    .map_err(|err| format!("failed to decode response.patch: {err}"))?,
            )
        }
        _ => None,
    };
    let warnings = response.get("warnings").and_then(Value::as_array).into_iter().flatten();
    let annotations = response.get("auditAnnotations").and_then(Value::as_object).into_iter().flatten();
    Ok(Answer {
        audit_annotations: annotations.filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect(),
        allowed: response.get("allowed").and_then(Value::as_bool).unwrap_or(false),
        patch,
        result: response.get("status").cloned(),
        warnings: warnings.filter_map(Value::as_str).map(str::to_string).collect(),
    })
}

/// Applies a webhook's `JSONPatch` to the object; why not, in upstream's words.
pub fn apply_patch(object: &mut Value, patch: &[u8]) -> Result<(), String> {
    let operations: json_patch::Patch =
        serde_json::from_slice(patch).map_err(|err| format!("json: cannot unmarshal the patch: {err}"))?;
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &operations).map_err(|err| err.to_string())?;
    if !patched.is_object() {
        return Err("the patched object is not an object".into());
    }
    *object = patched;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_as_upstream_checks_them() {
        let answer = |response: Value| json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
        let verify_v1 = |review: Value, phase| verify("v1", "u1", review, phase).map(|a| a.allowed);
        assert_eq!(verify_v1(answer(json!({"uid": "u1", "allowed": true})), Phase::Validating), Ok(true));
        assert_eq!(
            verify_v1(answer(json!({"uid": "u2", "allowed": true})), Phase::Validating),
            Err(r#"expected response.uid="u1", got "u2""#.into())
        );
        assert_eq!(
            verify_v1(json!({"kind": "AdmissionReview"}), Phase::Validating),
            Err("webhook response was absent".into())
        );
        assert_eq!(
            verify_v1(answer(json!({"uid": "u1", "allowed": true, "patch": "W10="})), Phase::Validating),
            Err("validating webhook may not return response.patch".into())
        );
        assert_eq!(
            verify_v1(answer(json!({"uid": "u1", "allowed": true, "patch": "W10="})), Phase::Mutating),
            Err("webhook returned response.patch but not response.patchType".into())
        );
        let mut wrong_kind = answer(json!({"uid": "u1", "allowed": true}));
        wrong_kind["apiVersion"] = json!("admission.k8s.io/v1beta1");
        assert_eq!(
            verify_v1(wrong_kind, Phase::Validating),
            Err("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview".into())
        );
        // `allowed` missing reads as false, a denial.
        assert_eq!(verify_v1(answer(json!({"uid": "u1"})), Phase::Validating), Ok(false));
        // v1beta1 answers were never checked for uid or kind.
        assert_eq!(
            verify("v1beta1", "u1", json!({"response": {"allowed": true}}), Phase::Validating).map(|a| a.allowed),
            Ok(true)
        );
    }
}
