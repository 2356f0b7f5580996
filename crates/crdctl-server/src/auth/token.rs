//! ServiceAccount tokens signed and checked: JWTs with upstream's claims
//! (`pkg/serviceaccount/claims.go`) that bearer authentication and TokenReviews accept.
//!
//! Tokens are signed ES256 with a P-256 key the server keeps in the store as the Secret
//! `kube-system/crdctl-service-account-key`, created once and read by every replica, so a token
//! stays valid across restarts and replicas. The public key is published as upstream's service
//! account issuer discovery does (`/.well-known/openid-configuration`, `/openid/v1/jwks`), so
//! anyone can verify a token without asking the server.

use std::sync::Arc;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, UnparsedPublicKey,
};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use crdctl_storage::Store;
use serde_json::{Value, json};

/// The issuer and default audience, as a cluster with default settings has them.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The Secret's field holding the PKCS#8 key.
const KEY_FIELD: &str = "sa.key";
/// How far clocks may disagree: go-jose's `DefaultLeeway`, which upstream's validator uses.
const LEEWAY_SECONDS: i64 = 60;

/// Signs and checks ServiceAccount tokens.
#[derive(Clone)]
pub struct TokenSigner {
    key: Arc<EcdsaKeyPair>,
    /// The key's id: the SHA-256 of its public key's DER, as upstream's `keyIDFromPublicKey`.
    kid: String,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSigner").field("kid", &self.kid).finish_non_exhaustive()
    }
}

/// Why a token is not accepted, in upstream's words where it has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a JWT this server signed (or not a JWT at all).
    #[error("invalid bearer token")]
    Invalid,
    /// Past its `exp`.
    #[error("service account token has expired")]
    Expired,
    /// Before its `nbf`.
    #[error("service account token is not valid yet")]
    NotValidYet,
    /// Meant for other audiences.
    #[error("token audiences {token:?} is invalid for the target audiences {wanted:?}")]
    Audience {
        /// The token's audiences.
        token: Vec<String>,
        /// The audiences asked for.
        wanted: Vec<String>,
    },
    /// Its account, or the object it is bound to, is gone or was replaced.
    #[error("{0}")]
    Holder(String),
}

impl TokenSigner {
    /// A signer with a new random key, and the key as PKCS#8 to keep.
    pub fn generate() -> Result<(TokenSigner, Vec<u8>), String> {
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .map_err(|_| "cannot generate the service-account key".to_string())?;
        let pkcs8 = pkcs8.as_ref().to_vec();
        Ok((TokenSigner::from_pkcs8(&pkcs8)?, pkcs8))
    }

    /// A signer with a PKCS#8 P-256 key.
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<TokenSigner, String> {
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8)
            .map_err(|err| format!("service-account key: {err}"))?;
        let der = key.public_key().as_der().map_err(|err| format!("service-account key: {err}"))?;
        let kid = URL_SAFE_NO_PAD.encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der.as_ref()));
        Ok(TokenSigner { key: Arc::new(key), kid })
    }

    /// The store's key, created (random) if there is none yet.
    pub async fn load_or_create(store: &dyn Store) -> Result<TokenSigner, String> {
        let (signer, pkcs8) = TokenSigner::generate()?;
        let data = json!({KEY_FIELD: STANDARD.encode(&pkcs8)});
        super::kept_secret(store, "crdctl-service-account-key", (signer, data), |data| {
            let pkcs8 = STANDARD.decode(data.get(KEY_FIELD)?.as_str()?).ok()?;
            TokenSigner::from_pkcs8(&pkcs8).ok()
        })
        .await
    }

    /// A token carrying `claims`.
    pub fn sign(&self, claims: &Value) -> String {
        let header = URL_SAFE_NO_PAD.encode(json!({"alg": "ES256", "kid": self.kid}).to_string());
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signed = format!("{header}.{payload}");
        // Signing with a key that loaded cannot fail; an empty signature would only be refused.
        let signature = self.key.sign(&SystemRandom::new(), signed.as_bytes()).ok();
        let signature = signature.map(|s| URL_SAFE_NO_PAD.encode(s.as_ref())).unwrap_or_default();
        format!("{signed}.{signature}")
    }

    /// The claims of a token this server signed, valid at `now` (Unix seconds).
    pub fn verify(&self, token: &str, now: i64) -> Result<Value, TokenError> {
        let (signed, signature) = token.rsplit_once('.').ok_or(TokenError::Invalid)?;
        let (header, payload) = signed.split_once('.').ok_or(TokenError::Invalid)?;
        let decode = |part: &str| -> Result<Value, TokenError> {
            let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| TokenError::Invalid)?;
            serde_json::from_slice(&bytes).map_err(|_| TokenError::Invalid)
        };
        // Only our algorithm: never `none`, never a key the token names.
        if decode(header)?.get("alg").and_then(Value::as_str) != Some("ES256") {
            return Err(TokenError::Invalid);
        }
        let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| TokenError::Invalid)?;
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, self.key.public_key().as_ref())
            .verify(signed.as_bytes(), &signature)
            .map_err(|_| TokenError::Invalid)?;
        let claims = decode(payload)?;
        if claims.get("iss").and_then(Value::as_str) != Some(ISSUER) {
            return Err(TokenError::Invalid);
        }
        let time = |claim: &str| claims.get(claim).and_then(Value::as_i64);
        if time("exp").is_none_or(|exp| exp + LEEWAY_SECONDS <= now) {
            return Err(TokenError::Expired);
        }
        if time("nbf").is_some_and(|nbf| nbf - LEEWAY_SECONDS > now) {
            return Err(TokenError::NotValidYet);
        }
        Ok(claims)
    }

    /// The public key as a JSON Web Key Set (`/openid/v1/jwks`).
    pub fn jwks(&self) -> Value {
        // An uncompressed P-256 point: 0x04, then X and Y, 32 bytes each.
        let point = self.key.public_key().as_ref();
        let coordinate = |range: std::ops::Range<usize>| URL_SAFE_NO_PAD.encode(point.get(range).unwrap_or_default());
        json!({"keys": [{
            "use": "sig", "kty": "EC", "kid": self.kid, "crv": "P-256", "alg": "ES256",
            "x": coordinate(1..33), "y": coordinate(33..65),
        }]})
    }
}

/// The OpenID provider configuration (`/.well-known/openid-configuration`), as upstream's
/// `serviceaccount.NewOpenIDMetadataProvider` builds it.
pub fn openid_configuration() -> Value {
    json!({
        "issuer": ISSUER,
        "jwks_uri": format!("{ISSUER}/openid/v1/jwks"),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    })
}

/// Now, in Unix seconds.
pub fn now_seconds() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// An object a token holds on to: it works while the object exists with this uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The object's claim under `kubernetes.io`: `serviceaccount`, `pod`, `secret` or `node`.
    pub claim: &'static str,
    /// Where the object is stored.
    pub key: String,
    /// Its name.
    pub name: String,
    /// The uid it had when the token was issued.
    pub uid: String,
}

impl Holder {
    /// Whether the token still holds, given the uid of the object now stored (if any), with
    /// upstream's reasons (`pkg/serviceaccount/claims.go`) when it does not.
    pub fn check(&self, stored_uid: Option<&str>) -> Result<(), TokenError> {
        let (claim, uid) = (self.claim, &self.uid);
        let reason = match stored_uid {
            Some(stored) if stored == uid => return Ok(()),
            None if claim == "serviceaccount" => format!("serviceaccounts {:?} not found", self.name),
            None => "service account token has been invalidated".to_string(),
            Some(stored) if claim == "serviceaccount" => {
                format!("service account UID ({stored}) does not match claim ({uid})")
            }
            Some(stored) if claim == "secret" => {
                format!("secret UID ({stored}) does not match service account secret ref claim ({uid})")
            }
            Some(stored) => format!("{claim} UID ({stored}) does not match claim ({uid})"),
        };
        Err(TokenError::Holder(reason))
    }
}

/// The uid of a stored object, all an informer of token holders decodes.
#[derive(Debug)]
pub struct Uid(pub String);

impl crate::informer::Decode for Uid {
    fn decode(bytes: &[u8], _: crdctl_storage::Revision) -> Option<Uid> {
        #[derive(serde::Deserialize)]
        struct Object {
            metadata: Metadata,
        }
        #[derive(serde::Deserialize)]
        struct Metadata {
            #[serde(default)]
            uid: String,
        }
        serde_json::from_slice::<Object>(bytes).ok().map(|object| Uid(object.metadata.uid))
    }
}

/// The ServiceAccount a token names, and the object it is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The uid it had when the token was issued.
    pub uid: String,
    /// The object the token is bound to (`spec.boundObjectRef`), if any.
    pub bound: Option<Holder>,
    /// The token's audiences.
    pub audiences: Vec<String>,
}

impl Account {
    /// The objects that must still exist for the token to work.
    pub fn holders(&self) -> impl Iterator<Item = Holder> + '_ {
        let account = Holder {
            claim: "serviceaccount",
            key: format!("/registry/serviceaccounts/{}/{}", self.namespace, self.name),
            name: self.name.clone(),
            uid: self.uid.clone(),
        };
        std::iter::once(account).chain(self.bound.clone())
    }
}

/// A kind a token can be bound to, as upstream's TokenRequest allows.
#[derive(Debug, Clone, Copy)]
pub struct Bindable {
    /// The kind `spec.boundObjectRef` names (of API group `""`).
    pub kind: &'static str,
    /// Its resource, for messages.
    pub resource: &'static str,
    /// The claim under `kubernetes.io` naming the object.
    pub claim: &'static str,
    /// Where such objects are stored.
    pub prefix: &'static str,
    /// Whether they are namespaced (in the account's namespace).
    pub namespaced: bool,
}

impl Bindable {
    /// Where the object `name` in `namespace` is stored.
    pub fn key(&self, namespace: &str, name: &str) -> String {
        match self.namespaced {
            true => format!("{}{namespace}/{name}", self.prefix),
            false => format!("{}{name}", self.prefix),
        }
    }
}

/// Pods, Secrets and Nodes.
pub const BINDABLE: [Bindable; 3] = [
    Bindable { kind: "Pod", resource: "pods", claim: "pod", prefix: "/registry/pods/", namespaced: true },
    Bindable { kind: "Secret", resource: "secrets", claim: "secret", prefix: "/registry/secrets/", namespaced: true },
    Bindable { kind: "Node", resource: "nodes", claim: "node", prefix: "/registry/minions/", namespaced: false },
];

/// The account a token this server signed names, if the token is valid now for `audiences`
/// (any one of them).
pub fn account(signer: &TokenSigner, token: &str, audiences: &[String]) -> Result<Account, TokenError> {
    let claims = signer.verify(token, now_seconds())?;
    let text = |pointer: &str| claims.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    let token_audiences: Vec<String> = match claims.get("aud") {
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    };
    if !token_audiences.iter().any(|audience| audiences.contains(audience)) {
        return Err(TokenError::Audience { token: token_audiences, wanted: audiences.to_vec() });
    }
    let namespace = text("/kubernetes.io/namespace").ok_or(TokenError::Invalid)?;
    let bound = BINDABLE.iter().find_map(|bindable| {
        let name = text(&format!("/kubernetes.io/{}/name", bindable.claim))?;
        Some(Holder {
            claim: bindable.claim,
            key: bindable.key(&namespace, &name),
            name,
            uid: text(&format!("/kubernetes.io/{}/uid", bindable.claim))?,
        })
    });
    Ok(Account {
        name: text("/kubernetes.io/serviceaccount/name").ok_or(TokenError::Invalid)?,
        uid: text("/kubernetes.io/serviceaccount/uid").unwrap_or_default(),
        namespace,
        bound,
        audiences: token_audiences,
    })
}
