//! The reviews, answered as an authorizer that allows everything and an authenticator that
//! knows one user would: `kubectl auth can-i` says yes and `kubectl auth whoami` names the user.

use serde_json::{Value, json};

use crate::registry::resource::Context;

/// Who every request is: the server has one user, its token's holder, who may do anything (the
/// reviews answer as an authorizer that allows everything, so `kubectl auth can-i` says yes).
pub fn user() -> Value {
    json!({"username": "system:admin", "groups": ["system:masters", "system:authenticated"]})
}

/// A `SubjectAccessReview`'s: allowed.
pub fn allowed(_: &Value, _: Context<'_>) -> Value {
    json!({"allowed": true, "reason": "crdctl serve allows every request of an authenticated user"})
}

/// A `SelfSubjectRulesReview`'s: every verb on everything.
pub fn every_rule(_: &Value, _: Context<'_>) -> Value {
    json!({
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        "incomplete": false,
    })
}

/// A `SelfSubjectReview`'s: the one user.
pub fn whoami(_: &Value, _: Context<'_>) -> Value {
    json!({"userInfo": user()})
}

/// A token is a ServiceAccount token this server signed, or the server's own (any, when the
/// server has none).
pub fn token_review(review: &Value, context: Context<'_>) -> Value {
    let token = review.pointer("/spec/token").and_then(Value::as_str).unwrap_or_default();
    if let Some(account) = crate::registry::token::user(context.tokens, token) {
        return json!({"authenticated": true, "user": account, "audiences": review.pointer("/spec/audiences")});
    }
    match context.server_token {
        Some(expected) if expected != token => json!({"authenticated": false, "error": "invalid bearer token"}),
        _ => json!({"authenticated": true, "user": user()}),
    }
}
