//! `ValidatingAdmissionPolicy` and `ValidatingAdmissionPolicyBinding`, run in-process on every
//! write as 1.33 runs them (`staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating`),
//! before the validating webhooks.
//!
//! A binding applies its policy when the policy's `matchConstraints` and the binding's
//! `matchResources` match the request (resource rules with `resourceNames`, exclusions, namespace
//! and object selectors) and the policy's `matchConditions` hold. Its parameters
//! (`paramKind`, the binding's `paramRef`: a name or a selector, `parameterNotFoundAction`) are
//! read from the store; the policy is evaluated once per parameter object. `variables` are
//! evaluated in order and read as `variables.<name>`; each `validations` expression sees
//! `object`, `oldObject`, `request`, `params`, `namespaceObject` and the variables. A failed
//! validation is acted on as the binding's `validationActions` say: `Deny` refuses the write
//! (`ValidatingAdmissionPolicy 'p' with binding 'b' denied request: …`, 422 `Invalid` unless the
//! validation names another reason), `Warn` adds a `Warning`, `Audit` is recorded nowhere (the
//! server keeps no audit log). An expression that cannot be evaluated denies under
//! `failurePolicy: Fail` (the default) and is passed over under `Ignore`.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::matching::{MatchCondition, Rule};
use super::{CONFIGURATION_GROUP, Request};
use crate::AppState;
use crate::error::{ApiError, ApiResult};

const POLICIES: &str = "/registry/validatingadmissionpolicies/";
const BINDINGS: &str = "/registry/validatingadmissionpolicybindings/";

#[derive(Debug, Clone, Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    name: String,
}

#[derive(Debug, Clone, Deserialize)]
struct Policy {
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    spec: PolicySpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicySpec {
    #[serde(default)]
    param_kind: Option<ParamKind>,
    #[serde(default)]
    match_constraints: Option<MatchResources>,
    #[serde(default)]
    validations: Vec<Validation>,
    #[serde(default)]
    failure_policy: Option<String>,
    #[serde(default)]
    match_conditions: Vec<MatchCondition>,
    #[serde(default)]
    variables: Vec<Variable>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ParamKind {
    api_version: String,
    kind: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MatchResources {
    #[serde(default)]
    namespace_selector: Option<Value>,
    #[serde(default)]
    object_selector: Option<Value>,
    #[serde(default)]
    resource_rules: Vec<NamedRule>,
    #[serde(default)]
    exclude_resource_rules: Vec<NamedRule>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NamedRule {
    #[serde(flatten)]
    rule: Rule,
    #[serde(default)]
    resource_names: Vec<String>,
}

impl NamedRule {
    fn matches(&self, request: &Request<'_>) -> bool {
        self.rule.matches(request)
            && (self.resource_names.is_empty() || self.resource_names.iter().any(|n| n == request.name))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Validation {
    expression: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    message_expression: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct Variable {
    name: String,
    expression: String,
}

#[derive(Debug, Clone, Deserialize)]
struct Binding {
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    spec: BindingSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BindingSpec {
    #[serde(default)]
    policy_name: String,
    #[serde(default)]
    param_ref: Option<ParamRef>,
    #[serde(default)]
    match_resources: Option<MatchResources>,
    #[serde(default)]
    validation_actions: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ParamRef {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    selector: Option<Value>,
    #[serde(default)]
    parameter_not_found_action: Option<String>,
}

/// A failed validation of one binding, as its actions treat it.
struct Failure {
    message: String,
    reason: Option<String>,
}

/// Runs every binding whose policy matches `request`; the warnings of `Warn` bindings, or the
/// first denial.
pub async fn validate(
    state: &AppState,
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    if request.group == CONFIGURATION_GROUP {
        return Ok(Vec::new());
    }
    let bindings = super::objects::read::<Binding>(state, BINDINGS).await?;
    if bindings.is_empty() {
        return Ok(Vec::new());
    }
    let policies = super::objects::read::<Policy>(state, POLICIES).await?;
    // What applies, with its parameters: the reads first, then every expression in one scope.
    let mut applying: Vec<(&Policy, &Binding, Parameters)> = Vec::new();
    for policy in policies.iter().map(|p| &**p) {
        let bound: Vec<&Binding> =
            bindings.iter().map(|b| &**b).filter(|b| b.spec.policy_name == policy.metadata.name).collect();
        if bound.is_empty() || !matches(policy.spec.match_constraints.as_ref(), state, request, object, old).await? {
            continue;
        }
        for binding in bound {
            if let Some(resources) = &binding.spec.match_resources
                && !matches(Some(resources), state, request, object, old).await?
            {
                continue;
            }
            applying.push((policy, binding, parameters(state, policy, binding, request).await));
        }
    }
    if applying.is_empty() {
        return Ok(Vec::new());
    }
    let namespace_object = namespace_of(state, request).await?;
    let null = Value::Null;
    let request_value = super::matching::request_variable(request);
    let shared = [
        ("object", object.unwrap_or(&null)),
        ("oldObject", old.unwrap_or(&null)),
        ("request", &request_value),
        ("namespaceObject", namespace_object.as_ref().unwrap_or(&null)),
    ];
    let mut warnings = Vec::new();
    crdctl_schema::cel::with_admission_scope(&shared, |scope| {
        for (policy, binding, parameters) in applying {
            let failures = match parameters {
                Parameters::Objects(params) => params
                    .iter()
                    .flat_map(|param| {
                        scope.inner(&[("params", param.as_ref().unwrap_or(&null))], |scope| evaluate(scope, policy))
                    })
                    .collect(),
                Parameters::Fail(failures) => failures,
            };
            for failure in failures {
                let actions = &binding.spec.validation_actions;
                if actions.iter().any(|a| a == "Warn") {
                    warnings.push(format!(
                        "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                        policy.metadata.name, binding.metadata.name, failure.message
                    ));
                }
                if actions.iter().any(|a| a == "Deny") {
                    let message = format!(
                        "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
                        policy.metadata.name, binding.metadata.name, failure.message
                    );
                    return Err(ApiError::policy_denied(request.subject(), &message, failure.reason.as_deref()));
                }
            }
        }
        Ok(warnings)
    })
}

/// A binding's parameter objects (`None`: a policy without `paramKind`), or the failures that
/// stand for them (none found under `Deny`, a configuration error under `Fail`).
enum Parameters {
    Objects(Vec<Option<Value>>),
    Fail(Vec<Failure>),
}

async fn parameters(state: &AppState, policy: &Policy, binding: &Binding, request: &Request<'_>) -> Parameters {
    let fail_closed = policy.spec.failure_policy.as_deref() != Some("Ignore");
    let configuration_error = |message: String| {
        Parameters::Fail(match fail_closed {
            true => vec![Failure { message: format!("failed to configure binding: {message}"), reason: None }],
            false => Vec::new(),
        })
    };
    match (&policy.spec.param_kind, &binding.spec.param_ref) {
        (None, _) => Parameters::Objects(vec![None]),
        (Some(_), None) => configuration_error("paramRef is required when paramKind is set".into()),
        (Some(kind), Some(reference)) => match params(state, kind, reference, request).await {
            Ok(found) if found.is_empty() => Parameters::Fail(match reference.parameter_not_found_action.as_deref() {
                Some("Deny") => vec![Failure {
                    message: "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
                    reason: None,
                }],
                _ => Vec::new(),
            }),
            Ok(found) => Parameters::Objects(found.into_iter().map(Some).collect()),
            Err(message) => configuration_error(message),
        },
    }
}

/// Whether any policy binding exists (what makes a delete read the object it deletes).
pub async fn any_bound(state: &AppState) -> ApiResult<bool> {
    super::objects::any(state, BINDINGS).await
}

/// Whether `resources` (a policy's constraints, a binding's resources) match the request.
async fn matches(
    resources: Option<&MatchResources>,
    state: &AppState,
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<bool> {
    let Some(resources) = resources else { return Ok(false) };
    if !resources.resource_rules.iter().any(|rule| rule.matches(request))
        || resources.exclude_resource_rules.iter().any(|rule| rule.matches(request))
    {
        return Ok(false);
    }
    super::matching::selectors_select(
        state,
        request,
        (object, old),
        resources.namespace_selector.as_ref(),
        resources.object_selector.as_ref(),
    )
    .await
}

/// The request's namespace, for `namespaceObject` (none for cluster-scoped requests and for
/// Namespaces themselves, as upstream).
async fn namespace_of(state: &AppState, request: &Request<'_>) -> ApiResult<Option<Value>> {
    let Some(namespace) = request.namespace.filter(|_| !(request.group.is_empty() && request.resource == "namespaces"))
    else {
        return Ok(None);
    };
    let entry = state
        .store
        .get(&crate::registry::namespace::key(namespace))
        .await
        .map_err(|err| ApiError::unavailable(err.to_string()))?;
    Ok(entry.and_then(|entry| serde_json::from_slice(&entry.value).ok()))
}

/// The failures of `policy` in `scope` (its variables bound, and one parameter object).
fn evaluate(scope: &mut crdctl_schema::cel::AdmissionScope<'_>, policy: &Policy) -> Vec<Failure> {
    let fail_closed = policy.spec.failure_policy.as_deref() != Some("Ignore");
    let mut failures = Vec::new();
    for condition in &policy.spec.match_conditions {
        match scope.check(&condition.expression) {
            Ok(true) => {}
            Ok(false) => return failures,
            Err(err) if fail_closed => {
                let message = format!("failed to evaluate match condition {:?}: {err}", condition.name);
                failures.push(Failure { message, reason: None });
                return failures;
            }
            Err(_) => return failures,
        }
    }
    for variable in &policy.spec.variables {
        // A variable that fails is unbound; the expressions reading it fail in turn.
        let _ = scope.define(&variable.name, &variable.expression);
    }
    for validation in &policy.spec.validations {
        match scope.check(&validation.expression) {
            Ok(true) => {}
            Ok(false) => {
                let written = validation.message_expression.as_deref().and_then(|e| scope.string(e).ok());
                let message = written
                    .filter(|m| !m.trim().is_empty())
                    .or_else(|| validation.message.clone())
                    .unwrap_or_else(|| format!("failed expression: {}", validation.expression));
                failures.push(Failure { message, reason: validation.reason.clone() });
            }
            Err(err) if fail_closed => failures.push(Failure {
                message: format!("expression '{}' resulted in error: {err}", validation.expression),
                reason: None,
            }),
            Err(_) => {}
        }
    }
    failures
}

/// The parameter objects a binding names: its `paramRef`'s object by name, or every object its
/// selector selects, of the policy's `paramKind` (built-in or custom), in the reference's
/// namespace or else the request's; why not, when the kind is not served.
async fn params(
    state: &AppState,
    kind: &ParamKind,
    reference: &ParamRef,
    request: &Request<'_>,
) -> Result<Vec<Value>, String> {
    let (group, version) = kind.api_version.split_once('/').unwrap_or(("", kind.api_version.as_str()));
    let (prefix, namespaced) = if let Some(resource) = crate::registry::builtin::RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.kind == kind.kind)
    {
        (resource.prefix.to_string(), resource.namespaced)
    } else if let Some(served) =
        state.registry.all().values().find(|c| c.group() == group && c.crd.definition.spec.names.kind == kind.kind)
    {
        (served.prefix(None), served.crd.definition.spec.scope == "Namespaced")
    } else {
        return Err(format!(
            "failed to find resource referenced by paramKind: '{}, Kind={}'",
            kind.api_version, kind.kind
        ));
    };
    let namespace = reference.namespace.as_deref().filter(|n| !n.is_empty()).or(request.namespace);
    let scoped = match (namespaced, namespace) {
        (true, Some(namespace)) => format!("{prefix}{namespace}/"),
        (true, None) => {
            return Err(
                "cannot use a namespaced paramKind for a cluster-scoped request without paramRef.namespace".into()
            );
        }
        (false, _) => prefix,
    };
    let read = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).ok();
    if let Some(name) = &reference.name {
        let entry = state.store.get(&format!("{scoped}{name}")).await.map_err(|err| err.to_string())?;
        return Ok(entry.and_then(|entry| read(&entry.value)).into_iter().collect());
    }
    let selector = reference.selector.clone().unwrap_or(Value::Object(Map::new()));
    let options = crdctl_storage::ListOptions { prefix: &scoped, ..Default::default() };
    let page = state.store.list(options).await.map_err(|err| err.to_string())?;
    Ok(page
        .entries
        .iter()
        .filter_map(|entry| read(&entry.value))
        .filter(|object| {
            let labels = object.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default();
            crate::selector::selects(&selector, &labels)
        })
        .collect())
}
