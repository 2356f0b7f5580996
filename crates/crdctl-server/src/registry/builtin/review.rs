//! The reviews, answered by the server's own authenticator and authorizer: `kubectl auth
//! can-i` and `kubectl auth whoami` say what the server would do.

use serde_json::{Value, json};

use crate::auth::{Attributes, User, attributes};
use crate::registry::resource::Context;

/// The attributes a review's `spec` asks about, for `user`.
fn asked(spec: &Value, user: User) -> Attributes {
    let text = |value: &Value, field: &str| value.get(field).and_then(Value::as_str).unwrap_or_default().to_string();
    match spec.get("resourceAttributes") {
        Some(resource) => Attributes {
            user,
            verb: text(resource, "verb"),
            path: String::new(),
            resource: Some(attributes::Resource {
                group: text(resource, "group"),
                version: text(resource, "version"),
                resource: text(resource, "resource"),
                subresource: Some(text(resource, "subresource")).filter(|s| !s.is_empty()),
                namespace: text(resource, "namespace"),
                name: text(resource, "name"),
            }),
        },
        None => {
            let path = spec.get("nonResourceAttributes").cloned().unwrap_or_default();
            Attributes { user, verb: text(&path, "verb"), path: text(&path, "path"), resource: None }
        }
    }
}

fn decide(spec: &Value, user: User, context: Context<'_>) -> Value {
    let decision = context.authorizer.decide(&asked(spec, user));
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        crate::object::set(&mut status, "reason", json!(decision.reason));
    }
    status
}

/// A `SubjectAccessReview`'s (or `LocalSubjectAccessReview`'s): whether the user its spec
/// names may.
pub fn subject_access(review: &Value, context: Context<'_>) -> Value {
    let spec = review.get("spec").cloned().unwrap_or_default();
    decide(&spec, User::from_spec(&spec), context)
}

/// A `SelfSubjectAccessReview`'s: whether the requester may.
pub fn self_access(review: &Value, context: Context<'_>) -> Value {
    decide(&review.get("spec").cloned().unwrap_or_default(), context.user.clone(), context)
}

/// A `SelfSubjectRulesReview`'s: every rule the requester holds in the namespace.
pub fn rules(review: &Value, context: Context<'_>) -> Value {
    let namespace = review.pointer("/spec/namespace").and_then(Value::as_str).unwrap_or_default();
    context.authorizer.rules_review(context.user, namespace)
}

/// A `SelfSubjectReview`'s: the requester.
pub fn whoami(_: &Value, context: Context<'_>) -> Value {
    json!({"userInfo": context.user.info()})
}

/// A `TokenReview`'s: the user the token names, as a bearer token would be authenticated, for
/// the audiences the review asks about (the server's own when it names none).
pub fn token_review(review: &Value, context: Context<'_>) -> Value {
    let token = review.pointer("/spec/token").and_then(Value::as_str).unwrap_or_default();
    let audiences = crate::object::strings(review.pointer("/spec/audiences"));
    match context.authenticator.review_token(token, &audiences) {
        Ok((user, audiences)) => json!({"authenticated": true, "user": user.info(), "audiences": audiences}),
        Err(err) => json!({"authenticated": false, "error": err.to_string()}),
    }
}
