//! The `serviceaccounts/<name>/token` subresource: a JWT for the account, as upstream's
//! `TokenRequest` issues it (`pkg/registry/core/serviceaccount/storage/token.go`), signed by
//! [`crate::auth::token`], and bound to a Pod, Secret or Node when the request says
//! (`spec.boundObjectRef`), so it stops working when that object goes.

use crdctl_model::field::{Path, Raw};
use serde_json::{Value, json};

use crate::auth::token::{BINDABLE, Bindable, ISSUER, TokenSigner, now_seconds};
use crate::error::{ApiError, ApiResult, Subject};

const DEFAULT_EXPIRATION: i64 = 3600;
/// Upstream's minimum: ten minutes.
const MIN_EXPIRATION: i64 = 600;

/// The object a request asks its token to be bound to (`spec.boundObjectRef`): its kind and
/// name, checked to be one a token can be bound to.
pub fn bound_ref(request: &Value) -> ApiResult<Option<(&'static Bindable, String)>> {
    let Some(reference) = request.pointer("/spec/boundObjectRef").filter(|r| !r.is_null()) else { return Ok(None) };
    let text = |field: &str| reference.get(field).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let bindable = BINDABLE.iter().find(|bindable| bindable.kind == kind && api_version == "v1");
    let Some(bindable) = bindable else {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        return Err(ApiError::bad_request(format!(
            "cannot bind token to object of type {group}/{version}, Kind={kind}"
        )));
    };
    Ok(Some((bindable, text("name").to_string())))
}

/// Checks the bound object (`object`, as stored) against the request and the account, with
/// upstream's refusals.
pub fn check_bound(request: &Value, bindable: &Bindable, object: &Value, account: &str) -> ApiResult<()> {
    let name = crate::object::name(object);
    let running_as = object.pointer("/spec/serviceAccountName").and_then(Value::as_str).unwrap_or_default();
    if bindable.kind == "Pod" && running_as != account {
        return Err(ApiError::bad_request(format!(
            "cannot bind token for serviceaccount {account:?} to pod running with different serviceaccount name."
        )));
    }
    let asked_uid = request.pointer("/spec/boundObjectRef/uid").and_then(Value::as_str).unwrap_or_default();
    if !asked_uid.is_empty() && Some(asked_uid) != crate::object::meta_str(object, "uid") {
        let subject = Subject { group: "", resource: bindable.kind, name };
        return Err(ApiError::conflict_with(
            subject,
            &format!(
                "the UID in the bound object reference ({asked_uid}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    Ok(())
}

/// Answers a `TokenRequest` for `account` (a stored ServiceAccount), bound to `bound` (the
/// object `spec.boundObjectRef` names, checked by [`check_bound`]): the request with its
/// audiences and expiry defaulted and `status.token` set.
pub fn request(
    signer: &TokenSigner,
    account: &Value,
    bound: Option<(&Bindable, &Value)>,
    mut request: Value,
) -> ApiResult<Value> {
    crate::object::check_type(&mut request, "authentication.k8s.io/v1", "TokenRequest")?;
    let name = crate::object::name(account).to_string();
    let namespace = crate::object::meta_str(account, "namespace").unwrap_or_default().to_string();
    let uid = crate::object::meta_str(account, "uid").unwrap_or_default().to_string();
    let spec = crate::object::fields_mut(&mut request).entry("spec").or_insert_with(|| json!({}));
    let expiration = spec.get("expirationSeconds").and_then(Value::as_i64).unwrap_or(DEFAULT_EXPIRATION);
    if expiration < MIN_EXPIRATION {
        let spec = Path::new("spec");
        let at = spec.child("expirationSeconds");
        let error = at.invalid(Raw(expiration.to_string()), "may not specify a duration less than 10 minutes");
        return Err(ApiError::invalid("authentication.k8s.io", "TokenRequest", &name, &[error]));
    }
    let audiences = match spec.get("audiences").and_then(Value::as_array) {
        Some(audiences) if !audiences.is_empty() => Value::Array(audiences.clone()),
        _ => json!([ISSUER]),
    };
    crate::object::set(spec, "audiences", audiences.clone());
    crate::object::set(spec, "expirationSeconds", json!(expiration));
    let now = now_seconds();
    let mut kubernetes = json!({"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}});
    if let Some((bindable, object)) = bound {
        let meta = |field| crate::object::meta_str(object, field).unwrap_or_default();
        crate::object::set(&mut kubernetes, bindable.claim, json!({"name": meta("name"), "uid": meta("uid")}));
    }
    let claims = json!({
        "aud": audiences, "exp": now + expiration, "iat": now, "nbf": now, "iss": ISSUER,
        "jti": uuid::Uuid::new_v4().to_string(),
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
        "kubernetes.io": kubernetes,
    });
    let expires = time::OffsetDateTime::from_unix_timestamp(now + expiration)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default();
    let meta = crate::object::meta_mut(&mut request);
    meta.insert("name".into(), json!(name));
    meta.insert("namespace".into(), json!(namespace));
    crate::object::set(&mut request, "status", json!({"token": signer.sign(&claims), "expirationTimestamp": expires}));
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::token::account;

    use crate::auth::token::TokenError;

    #[test]
    fn a_token_verifies_until_it_expires_and_not_under_another_key() {
        let (signer, _) = TokenSigner::generate().unwrap();
        let builder = json!({"metadata": {"name": "builder", "namespace": "ci", "uid": "u-1"}});
        let answered = request(&signer, &builder, None, json!({"spec": {"expirationSeconds": 600}})).unwrap();
        let token = answered["status"]["token"].as_str().unwrap();
        let named = account(&signer, token, &[ISSUER.into()]).unwrap();
        assert_eq!((named.namespace.as_str(), named.name.as_str(), named.uid.as_str()), ("ci", "builder", "u-1"));
        assert_eq!(named.bound, None);
        assert_eq!(answered["spec"]["audiences"], json!([ISSUER]));
        // Expiry and not-before hold with upstream's minute of leeway.
        assert!(signer.verify(token, now_seconds() + 650).is_ok(), "within the leeway");
        assert_eq!(signer.verify(token, now_seconds() + 661), Err(TokenError::Expired));
        assert_eq!(signer.verify(token, now_seconds() - 61), Err(TokenError::NotValidYet));
        let (other, _) = TokenSigner::generate().unwrap();
        assert_eq!(other.verify(token, now_seconds()), Err(TokenError::Invalid), "another key");
        assert_eq!(
            account(&signer, token, &["vault".into()]).unwrap_err().to_string(),
            r#"token audiences ["https://kubernetes.default.svc.cluster.local"] is invalid for the target audiences ["vault"]"#
        );
        let short = request(&signer, &builder, None, json!({"spec": {"expirationSeconds": 60}})).unwrap_err();
        assert_eq!(
            short.message,
            r#"TokenRequest.authentication.k8s.io "builder" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"#
        );
    }

    #[test]
    fn a_bound_token_names_its_object_and_only_pods_secrets_and_nodes_are_bindable() {
        let (signer, _) = TokenSigner::generate().unwrap();
        let builder = json!({"metadata": {"name": "builder", "namespace": "ci", "uid": "u-1"}});
        let pod = json!({"metadata": {"name": "p", "namespace": "ci", "uid": "pod-1"}, "spec": {"serviceAccountName": "builder"}});
        let asked =
            json!({"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-1"}}});
        let (bindable, name) = bound_ref(&asked).unwrap().unwrap();
        assert_eq!((bindable.kind, name.as_str()), ("Pod", "p"));
        check_bound(&asked, bindable, &pod, "builder").unwrap();
        let answered = request(&signer, &builder, Some((bindable, &pod)), asked.clone()).unwrap();
        let named = account(&signer, answered["status"]["token"].as_str().unwrap(), &[ISSUER.into()]).unwrap();
        let holders: Vec<_> = named.holders().map(|h| (h.key, h.uid)).collect();
        assert_eq!(
            holders,
            [
                ("/registry/serviceaccounts/ci/builder".into(), "u-1".into()),
                ("/registry/pods/ci/p".into(), "pod-1".into())
            ]
        );
        let held = named.holders().nth(1).unwrap();
        assert_eq!(held.check(None).unwrap_err().to_string(), "service account token has been invalidated");
        assert_eq!(held.check(Some("pod-2")).unwrap_err().to_string(), "pod UID (pod-2) does not match claim (pod-1)");

        let other = check_bound(&asked, bindable, &pod, "deployer").unwrap_err();
        assert_eq!(
            other.message,
            r#"cannot bind token for serviceaccount "deployer" to pod running with different serviceaccount name."#
        );
        let recreated = json!({"metadata": {"name": "p", "uid": "pod-2"}, "spec": {"serviceAccountName": "builder"}});
        assert_eq!(
            check_bound(&asked, bindable, &recreated, "builder").unwrap_err().message,
            r#"Operation cannot be fulfilled on Pod "p": the UID in the bound object reference (pod-1) does not match the UID in record. The object might have been deleted and then recreated"#
        );
        let config_map = json!({"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}}});
        assert_eq!(
            bound_ref(&config_map).unwrap_err().message,
            "cannot bind token to object of type /v1, Kind=ConfigMap"
        );
        let deployment =
            json!({"spec": {"boundObjectRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}});
        assert_eq!(
            bound_ref(&deployment).unwrap_err().message,
            "cannot bind token to object of type apps/v1, Kind=Deployment"
        );
    }
}
