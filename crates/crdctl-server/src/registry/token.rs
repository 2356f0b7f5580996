//! ServiceAccount tokens: the `serviceaccounts/<name>/token` subresource issues a JWT for the
//! account, as upstream's `TokenRequest` does (`pkg/registry/core/serviceaccount/storage/token.go`,
//! `pkg/serviceaccount/claims.go`), and TokenReviews and bearer authentication accept it.
//!
//! Upstream signs with the service-account RSA key; this server signs HS256 with a 32-byte key
//! it keeps in the store as the Secret `kube-system/crdctl-service-account-key`, created once and
//! read by every replica, so a token stays valid across restarts and replicas. Only the server
//! can check such a token: clients ask it with a TokenReview, as they would upstream.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use crdctl_model::field::{Path, Raw};
use crdctl_storage::{Store, StoreError};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::error::{ApiError, ApiResult};

/// The issuer and default audience, as a cluster with default settings has them.
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
const KEY_SECRET: &str = "/registry/secrets/kube-system/crdctl-service-account-key";
const DEFAULT_EXPIRATION: i64 = 3600;
/// Upstream's minimum: ten minutes.
const MIN_EXPIRATION: i64 = 600;

/// Signs and checks ServiceAccount tokens.
#[derive(Clone)]
pub struct TokenSigner {
    mac: Hmac<Sha256>,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSigner { .. }")
    }
}

impl TokenSigner {
    /// A signer with `key` (the store's, or a test's).
    pub fn with_key(key: &[u8]) -> Result<TokenSigner, String> {
        let mac = <Hmac<Sha256> as Mac>::new_from_slice(key).map_err(|err| format!("service-account key: {err}"))?;
        Ok(TokenSigner { mac })
    }

    /// The store's key, created (random) if there is none yet.
    pub async fn load_or_create(store: &dyn Store) -> Result<TokenSigner, String> {
        let fresh: Vec<u8> = (0..2).flat_map(|_| uuid::Uuid::new_v4().into_bytes()).collect();
        let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "crdctl-service-account-key"}, "data": {"key": STANDARD.encode(&fresh)}});
        crate::object::prepare_create(&mut secret, Some("kube-system"));
        match store.create(KEY_SECRET, crate::object::to_stored(&secret)).await {
            Ok(_) => return TokenSigner::with_key(&fresh),
            Err(StoreError::AlreadyExists { .. }) => {}
            Err(err) => return Err(err.to_string()),
        }
        let stored =
            store.get(KEY_SECRET).await.map_err(|e| e.to_string())?.map(|entry| entry.value).unwrap_or_default();
        let stored: Value = serde_json::from_slice(&stored).unwrap_or_default();
        let key = stored.pointer("/data/key").and_then(Value::as_str).and_then(|k| STANDARD.decode(k).ok());
        // A key someone emptied or broke is replaced in memory: tokens then last this run only.
        TokenSigner::with_key(&key.filter(|k| !k.is_empty()).unwrap_or(fresh))
    }

    /// A token carrying `claims`.
    pub fn sign(&self, claims: &Value) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        let mut mac = self.mac.clone();
        mac.update(format!("{header}.{payload}").as_bytes());
        let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{header}.{payload}.{signature}")
    }

    /// The claims of a token this server signed that has not expired at `now` (Unix seconds).
    pub fn verify(&self, token: &str, now: i64) -> Option<Value> {
        let (signed, signature) = token.rsplit_once('.')?;
        let mut mac = self.mac.clone();
        mac.update(signed.as_bytes());
        mac.verify_slice(&URL_SAFE_NO_PAD.decode(signature).ok()?).ok()?;
        let (_, payload) = signed.split_once('.')?;
        let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
        (claims.get("exp")?.as_i64()? > now).then_some(claims)
    }
}

fn now_seconds() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

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

/// The ServiceAccount a token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The uid it had when the token was issued.
    pub uid: String,
}

impl Account {
    /// `namespace/name/uid`: one account, not another by the same name.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.namespace, self.name, self.uid)
    }
}

/// The account a token this server signed names, if the token is valid now.
pub fn account(signer: &TokenSigner, token: &str) -> Option<Account> {
    let claims = signer.verify(token, now_seconds())?;
    let text = |pointer: &str| claims.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    Some(Account {
        namespace: text("/kubernetes.io/namespace")?,
        name: text("/kubernetes.io/serviceaccount/name")?,
        uid: text("/kubernetes.io/serviceaccount/uid").unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
