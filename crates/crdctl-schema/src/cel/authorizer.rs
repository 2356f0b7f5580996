//! The `authorizer` of admission expressions (upstream's `library.Authz`):
//! `authorizer.group('apps').resource('deployments').namespace('ns').check('create').allowed()`,
//! `authorizer.serviceAccount('ns', 'sa')…`, `authorizer.path('/healthz').check('get')` and
//! `authorizer.requestResource.check('update')`.
//!
//! Each step is a value carrying what the check has gathered so far; `check(verb)` asks the
//! [`Authorize`] the evaluation was given (the server's authorizer, for the requesting user)
//! and the decision answers `allowed()`, `reason()`, `errored()` and `error()`. Where no
//! authorizer is given (outside a server: type checking, `crdctl check`) every check is
//! allowed, as an always-allow authorizer answers.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::{Key, Map, Opaque};
use kube_cel::cel::{Context, ExecutionError, Value};

/// What a check asks: the attributes upstream's `authorizer.AttributesRecord` carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Check {
    /// The ServiceAccount asked about (`authorizer.serviceAccount(namespace, name)`) instead of
    /// the requesting user.
    pub service_account: Option<(String, String)>,
    /// The verb.
    pub verb: String,
    /// The API group.
    pub group: String,
    /// The resource plural.
    pub resource: String,
    /// The subresource, or empty.
    pub subresource: String,
    /// The namespace, or empty.
    pub namespace: String,
    /// The object's name, or empty.
    pub name: String,
    /// A non-resource URL path (`authorizer.path(...)`), instead of a resource.
    pub path: Option<String>,
}

/// An authorizer's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// Whether the check is allowed.
    pub allowed: bool,
    /// Why, as the authorizer says.
    pub reason: String,
    /// What went wrong deciding, if anything.
    pub error: String,
}

/// Decides checks for one admission request.
pub trait Authorize: std::fmt::Debug + Send + Sync {
    /// The decision on `check`.
    fn authorize(&self, check: &Check) -> Decision;
}

/// Who asks, for the `authorizer` variable: the authorizer deciding for the requesting user,
/// and the request's own resource (`authorizer.requestResource`).
#[derive(Debug, Clone)]
pub struct Requester {
    /// Decides the checks.
    pub authorizer: Arc<dyn Authorize>,
    /// The request's group, resource, subresource, namespace and name.
    pub request: Check,
}

/// Allows everything: the authorizer of expressions evaluated outside a server.
#[derive(Debug)]
struct AlwaysAllow;

impl Authorize for AlwaysAllow {
    fn authorize(&self, _: &Check) -> Decision {
        Decision { allowed: true, ..Decision::default() }
    }
}

/// Which step of a check a value is, as upstream's types name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Authorizer,
    Group,
    Resource,
    Path,
    Decision,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Authorizer => "kubernetes.authorization.Authorizer",
            Kind::Group => "kubernetes.authorization.GroupCheck",
            Kind::Resource => "kubernetes.authorization.ResourceCheck",
            Kind::Path => "kubernetes.authorization.PathCheck",
            Kind::Decision => "kubernetes.authorization.Decision",
        }
    }
}

/// A step: its kind, what it has gathered, the authorizer that will decide, and (for a
/// decision) the answer.
#[derive(Debug, Clone)]
struct Step {
    kind: Kind,
    check: Check,
    authorizer: Arc<dyn Authorize>,
    decision: Decision,
}

impl PartialEq for Step {
    fn eq(&self, other: &Step) -> bool {
        self.kind == other.kind
            && self.check == other.check
            && self.decision == other.decision
            && Arc::ptr_eq(&self.authorizer, &other.authorizer)
    }
}

impl Eq for Step {}

impl Opaque for Step {
    fn runtime_type_name(&self) -> &str {
        self.kind.name()
    }
}

/// The key under which a step's value holds the step (a map, so that the authorizer can have
/// the `requestResource` field).
const STEP: &str = "@step";

impl Step {
    fn value(self) -> Value {
        let mut fields = HashMap::new();
        if self.kind == Kind::Authorizer {
            let request = Step { kind: Kind::Resource, ..self.clone() };
            fields.insert(key("requestResource"), request.value());
        }
        fields.insert(key(STEP), Value::Opaque(Arc::new(self)));
        Value::Map(Map { map: Arc::new(fields) })
    }

    /// The step `value` is, when it is one `function` takes.
    fn of(value: &Value, function: &str, wanted: &[Kind]) -> Result<Step, ExecutionError> {
        let step = match value {
            Value::Map(map) => match map.map.get(&key(STEP)) {
                Some(Value::Opaque(opaque)) => opaque.downcast_ref::<Step>(),
                _ => None,
            },
            _ => None,
        };
        match step {
            Some(step) if wanted.contains(&step.kind) => Ok(step.clone()),
            _ => Err(ExecutionError::function_error(function, "no such overload")),
        }
    }

    /// The next step, of `kind`, with `change` made to what it has gathered.
    fn then(mut self, kind: Kind, change: impl FnOnce(&mut Check)) -> Value {
        self.kind = kind;
        change(&mut self.check);
        self.value()
    }
}

fn key(name: &str) -> Key {
    Key::String(Arc::new(name.to_string()))
}

/// The `authorizer` variable for `requester`; every check allowed without one.
pub(super) fn variable(requester: Option<&Requester>) -> Value {
    let (authorizer, request) = match requester {
        Some(requester) => (Arc::clone(&requester.authorizer), requester.request.clone()),
        None => (Arc::new(AlwaysAllow) as Arc<dyn Authorize>, Check::default()),
    };
    Step { kind: Kind::Authorizer, check: request, authorizer, decision: Decision::default() }.value()
}

/// Adds the check functions to `context`.
pub(super) fn register(context: &mut Context<'static>) {
    context.add_function("group", |This(this): This<Value>, group: Arc<String>| {
        let step = Step::of(&this, "group", &[Kind::Authorizer])?;
        Ok::<_, ExecutionError>(step.then(Kind::Group, |check| {
            // A new check: of the principal, nothing of the request's resource.
            *check =
                Check { service_account: check.service_account.take(), group: group.to_string(), ..Check::default() }
        }))
    });
    context.add_function("serviceAccount", |This(this): This<Value>, namespace: Arc<String>, name: Arc<String>| {
        let step = Step::of(&this, "serviceAccount", &[Kind::Authorizer])?;
        let account = Some((namespace.to_string(), name.to_string()));
        Ok::<_, ExecutionError>(
            step.then(Kind::Authorizer, |check| *check = Check { service_account: account, ..Check::default() }),
        )
    });
    context.add_function("path", |This(this): This<Value>, path: Arc<String>| {
        let step = Step::of(&this, "path", &[Kind::Authorizer])?;
        Ok::<_, ExecutionError>(step.then(Kind::Path, |check| {
            *check = Check {
                service_account: check.service_account.take(),
                path: Some(path.to_string()),
                ..Check::default()
            }
        }))
    });
    context.add_function("resource", |This(this): This<Value>, resource: Arc<String>| {
        let step = Step::of(&this, "resource", &[Kind::Group])?;
        Ok::<_, ExecutionError>(step.then(Kind::Resource, |check| check.resource = resource.to_string()))
    });
    /// Sets one attribute of a check.
    type Narrowing = fn(&mut Check, String);
    let narrowings: [(&str, Narrowing); 3] = [
        ("subresource", |check, value| check.subresource = value),
        ("namespace", |check, value| check.namespace = value),
        ("name", |check, value| check.name = value),
    ];
    for (narrowing, set) in narrowings {
        context.add_function(narrowing, move |This(this): This<Value>, value: Arc<String>| {
            let step = Step::of(&this, narrowing, &[Kind::Resource])?;
            Ok::<_, ExecutionError>(step.then(Kind::Resource, |check| set(check, value.to_string())))
        });
    }
    // Selectors narrow a list or watch; RBAC decides without them, as upstream's does.
    for selector in ["fieldSelector", "labelSelector"] {
        context.add_function(selector, move |This(this): This<Value>, _selector: Arc<String>| {
            Step::of(&this, selector, &[Kind::Resource]).map(Step::value)
        });
    }
    context.add_function("check", |This(this): This<Value>, verb: Arc<String>| {
        let mut step = Step::of(&this, "check", &[Kind::Resource, Kind::Path])?;
        step.check.verb = verb.to_string();
        step.decision = step.authorizer.authorize(&step.check);
        step.kind = Kind::Decision;
        Ok::<_, ExecutionError>(step.value())
    });
    let answer = |function: &'static str, answer: fn(&Decision) -> Value| {
        move |This(this): This<Value>| Step::of(&this, function, &[Kind::Decision]).map(|step| answer(&step.decision))
    };
    context.add_function("allowed", answer("allowed", |decision| Value::Bool(decision.allowed)));
    context.add_function("errored", answer("errored", |decision| Value::Bool(!decision.error.is_empty())));
    context.add_function("reason", answer("reason", |decision| Value::String(Arc::new(decision.reason.clone()))));
    context.add_function("error", answer("error", |decision| Value::String(Arc::new(decision.error.clone()))));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Allows only `get` of `secrets` named `mine` in `team`, and the ServiceAccount `ci/bot`
    /// to list pods; records every check.
    #[derive(Debug, Default)]
    struct Recording(std::sync::Mutex<Vec<Check>>);

    impl Authorize for Recording {
        fn authorize(&self, check: &Check) -> Decision {
            self.0.lock().unwrap().push(check.clone());
            let bot = check.service_account == Some(("ci".into(), "bot".into()));
            let allowed = match (bot, check.verb.as_str(), check.resource.as_str()) {
                (false, "get", "secrets") => check.namespace == "team" && check.name == "mine",
                (true, "list", "pods") => true,
                _ => false,
            };
            let reason = if allowed { "granted" } else { "no rule" };
            Decision { allowed, reason: reason.into(), error: String::new() }
        }
    }

    #[test]
    fn checks_are_decided_by_the_authorizer_given_and_steps_are_typed() {
        let recording = Arc::new(Recording::default());
        let request = Check {
            group: "apps".into(),
            resource: "deployments".into(),
            namespace: "team".into(),
            ..Check::default()
        };
        let requester = Requester { authorizer: recording.clone(), request };
        let object = json!({"metadata": {"name": "a"}});
        let holds =
            |expression: &str| super::super::evaluate_condition(expression, &[("object", &object)], Some(&requester));
        for (expression, expected) in [
            ("authorizer.group('').resource('secrets').namespace('team').name('mine').check('get').allowed()", true),
            ("authorizer.group('').resource('secrets').namespace('team').name('yours').check('get').allowed()", false),
            ("authorizer.group('').resource('secrets').check('get').reason() == 'no rule'", true),
            ("authorizer.serviceAccount('ci', 'bot').group('').resource('pods').check('list').allowed()", true),
            (
                "authorizer.serviceAccount('ci', 'bot').group('').resource('secrets').namespace('team').name('mine').check('get').allowed()",
                false,
            ),
            ("authorizer.requestResource.check('update').allowed()", false),
            ("!authorizer.path('/healthz').check('get').errored()", true),
        ] {
            assert_eq!(holds(expression), Ok(expected), "{expression}");
        }
        let checks = recording.0.lock().unwrap().clone();
        let request_check = checks.iter().find(|check| check.verb == "update").unwrap();
        assert_eq!(
            (request_check.group.as_str(), request_check.resource.as_str(), request_check.namespace.as_str()),
            ("apps", "deployments", "team")
        );
        assert!(checks.iter().any(|check| check.path.as_deref() == Some("/healthz")));
        assert!(holds("authorizer.allowed()").is_err());
        assert!(holds("authorizer.group('').check('get').allowed()").is_err());
    }

    #[test]
    fn without_an_authorizer_every_check_is_allowed() {
        let holds = |expression: &str| super::super::evaluate_condition(expression, &[], None);
        assert_eq!(holds("authorizer.group('apps').resource('deployments').check('create').allowed()"), Ok(true));
        assert_eq!(holds("authorizer.requestResource.check('update').reason()  == ''"), Ok(true));
    }
}
