//! The `authorizer` of admission expressions (upstream's `library.Authz`):
//! `authorizer.group('apps').resource('deployments').namespace('ns').check('create').allowed()`,
//! `authorizer.serviceAccount('ns', 'sa')…`, `authorizer.path('/healthz').check('get')` and
//! `authorizer.requestResource.check('update')`. The server authorizes every request, so every
//! check is allowed, as an always-allow authorizer answers: `allowed()` is true, `errored()`
//! false, `reason()` and `error()` empty.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, ExecutionError, Value};

/// The key that marks a value as a step of an authorization check, and says which.
const STEP: &str = "@authorizer";

/// The steps of a check, as upstream's types: what each function takes and gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Authorizer,
    Group,
    Resource,
    Path,
    Decision,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Authorizer => "kubernetes.authorization.Authorizer",
            Step::Group => "kubernetes.authorization.GroupCheck",
            Step::Resource => "kubernetes.authorization.ResourceCheck",
            Step::Path => "kubernetes.authorization.PathCheck",
            Step::Decision => "kubernetes.authorization.Decision",
        }
    }

    fn value(self) -> Value {
        let mut fields = HashMap::from([(key(STEP), Value::String(Arc::new(self.name().to_string())))]);
        if self == Step::Authorizer {
            fields.insert(key("requestResource"), Step::Resource.value());
        }
        Value::Map(Map { map: Arc::new(fields) })
    }

    /// The step `value` is, when it is the one `function` takes.
    fn expect(value: &Value, function: &str, wanted: &[Step]) -> Result<(), ExecutionError> {
        let step = match value {
            Value::Map(map) => map.map.get(&key(STEP)),
            _ => None,
        };
        match step {
            Some(Value::String(name)) if wanted.iter().any(|w| w.name() == name.as_str()) => Ok(()),
            _ => Err(ExecutionError::function_error(function, "no such overload")),
        }
    }
}

fn key(name: &str) -> Key {
    Key::String(Arc::new(name.to_string()))
}

/// The `authorizer` variable.
pub(super) fn variable() -> Value {
    Step::Authorizer.value()
}

/// Adds the check functions to `context`.
pub(super) fn register(context: &mut Context<'static>) {
    context.add_function("group", |This(this): This<Value>, _group: Arc<String>| {
        Step::expect(&this, "group", &[Step::Authorizer]).map(|()| Step::Group.value())
    });
    context.add_function("serviceAccount", |This(this): This<Value>, _namespace: Arc<String>, _name: Arc<String>| {
        Step::expect(&this, "serviceAccount", &[Step::Authorizer]).map(|()| Step::Authorizer.value())
    });
    context.add_function("path", |This(this): This<Value>, _path: Arc<String>| {
        Step::expect(&this, "path", &[Step::Authorizer]).map(|()| Step::Path.value())
    });
    context.add_function("resource", |This(this): This<Value>, _resource: Arc<String>| {
        Step::expect(&this, "resource", &[Step::Group]).map(|()| Step::Resource.value())
    });
    for narrowing in ["subresource", "namespace", "name", "fieldSelector", "labelSelector"] {
        context.add_function(narrowing, move |This(this): This<Value>, _value: Arc<String>| {
            Step::expect(&this, narrowing, &[Step::Resource]).map(|()| Step::Resource.value())
        });
    }
    context.add_function("check", |This(this): This<Value>, _verb: Arc<String>| {
        Step::expect(&this, "check", &[Step::Resource, Step::Path]).map(|()| Step::Decision.value())
    });
    let answer = |function: &'static str, answer: Value| {
        move |This(this): This<Value>| Step::expect(&this, function, &[Step::Decision]).map(|()| answer.clone())
    };
    context.add_function("allowed", answer("allowed", Value::Bool(true)));
    context.add_function("errored", answer("errored", Value::Bool(false)));
    context.add_function("reason", answer("reason", Value::String(Arc::new(String::new()))));
    context.add_function("error", answer("error", Value::String(Arc::new(String::new()))));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn every_check_is_allowed_and_steps_are_typed() {
        let object = json!({"metadata": {"name": "a"}});
        let holds = |expression: &str| super::super::evaluate_condition(expression, &[("object", &object)]);
        for allowed in [
            "authorizer.group('apps').resource('deployments').namespace('ns').name('a').check('create').allowed()",
            "authorizer.serviceAccount('ns', 'sa').group('').resource('pods').subresource('log').check('get').allowed()",
            "authorizer.path('/healthz').check('get').allowed()",
            "authorizer.requestResource.check('update').allowed()",
            "!authorizer.group('').resource('secrets').check('list').errored()",
            "authorizer.group('').resource('secrets').check('list').reason() == ''",
        ] {
            assert_eq!(holds(allowed), Ok(true), "{allowed}");
        }
        assert!(holds("authorizer.allowed()").is_err());
        assert!(holds("authorizer.group('').check('get').allowed()").is_err());
    }
}
