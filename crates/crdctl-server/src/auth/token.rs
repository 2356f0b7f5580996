//! ServiceAccount tokens signed and checked: JWTs with upstream's claims
//! (`pkg/serviceaccount/claims.go`) that bearer authentication and TokenReviews accept.
//!
//! Upstream signs with the service-account RSA key; this server signs HS256 with a 32-byte key
//! it keeps in the store as the Secret `kube-system/crdctl-service-account-key`, created once and
//! read by every replica, so a token stays valid across restarts and replicas. Only the server
//! can check such a token: clients ask it with a TokenReview, as they would upstream.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use crdctl_storage::{Store, StoreError};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

/// The issuer and default audience, as a cluster with default settings has them.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
const KEY_SECRET: &str = "/registry/secrets/kube-system/crdctl-service-account-key";

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

/// Now, in Unix seconds.
pub fn now_seconds() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
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
