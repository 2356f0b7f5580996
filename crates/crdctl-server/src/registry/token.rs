//! The `serviceaccounts/<name>/token` subresource: a JWT for the account, as upstream's
//! `TokenRequest` issues it (`pkg/registry/core/serviceaccount/storage/token.go`), signed by
//! [`crate::auth::token`].

use crdctl_model::field::{Path, Raw};
use serde_json::{Value, json};

use crate::auth::token::{ISSUER, TokenSigner, now_seconds};
use crate::error::{ApiError, ApiResult};

const DEFAULT_EXPIRATION: i64 = 3600;
/// Upstream's minimum: ten minutes.
const MIN_EXPIRATION: i64 = 600;

/// Answers a `TokenRequest` for `account` (a stored ServiceAccount): the request with its
/// audiences and expiry defaulted and `status.token` set.
pub fn request(signer: &TokenSigner, account: &Value, mut request: Value) -> ApiResult<Value> {
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
    let claims = json!({
        "aud": audiences, "exp": now + expiration, "iat": now, "nbf": now, "iss": ISSUER,
        "jti": uuid::Uuid::new_v4().to_string(),
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
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

    #[test]
    fn a_token_verifies_until_it_expires_and_not_under_another_key() {
        let signer = TokenSigner::with_key(b"one").unwrap();
        let builder = json!({"metadata": {"name": "builder", "namespace": "ci", "uid": "u-1"}});
        let answered = request(&signer, &builder, json!({"spec": {"expirationSeconds": 600}})).unwrap();
        let token = answered["status"]["token"].as_str().unwrap();
        let named = account(&signer, token).unwrap();
        assert_eq!((named.namespace.as_str(), named.name.as_str(), named.uid.as_str()), ("ci", "builder", "u-1"));
        assert_eq!(answered["spec"]["audiences"], json!([ISSUER]));
        assert!(signer.verify(token, now_seconds() + 601).is_none(), "expired");
        assert!(TokenSigner::with_key(b"two").unwrap().verify(token, now_seconds()).is_none(), "another key");
        let short = request(&signer, &builder, json!({"spec": {"expirationSeconds": 60}})).unwrap_err();
        assert_eq!(
            short.message,
            r#"TokenRequest.authentication.k8s.io "builder" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"#
        );
    }
}
