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
//! `object`, `oldObject`, `request`, `params`, `namespaceObject`, the `authorizer` (the
//! server's authorizer, deciding for the requesting user) and the variables; only those the expressions read are bound. A failed validation is
//! acted on as the binding's `validationActions` say: `Deny` refuses the write
//! (`ValidatingAdmissionPolicy 'p' with binding 'b' denied request: …`, 422 `Invalid` unless the
//! validation names another reason), `Warn` adds a `Warning`, `Audit` adds the failure to the
//! request's audit annotations ([`super::audit`]), as do `auditAnnotations`. An expression that
//! cannot be evaluated denies under `failurePolicy: Fail` (the default) and is passed over under
//! `Ignore`. Each action is counted in `apiserver_validating_admission_policy_check_total`.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::Context;
use super::matching::{MatchCondition, Rule};
use super::{CONFIGURATION_GROUP, Request};
use crate::error::{ApiError, ApiResult};

const POLICIES: &str = "/registry/validatingadmissionpolicies/";
const BINDINGS: &str = "/registry/validatingadmissionpolicybindings/";

#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct Metadata {
    #[serde(default)]
    pub(super) name: String,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Policy {
    #[serde(default)]
    pub(super) metadata: Metadata,
    #[serde(default)]
    pub(super) spec: PolicySpec,
}

impl Policy {
    /// Every CEL expression of the policy.
    fn expressions(&self) -> impl Iterator<Item = &str> {
        let spec = &self.spec;
        let validations = spec.validations.iter().flat_map(|v| [Some(&v.expression), v.message_expression.as_ref()]);
        spec.match_conditions
            .iter()
            .map(|c| &c.expression)
            .chain(spec.variables.iter().map(|v| &v.expression))
            .chain(validations.flatten())
            .chain(spec.audit_annotations.iter().map(|a| &a.value_expression))
            .map(String::as_str)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PolicySpec {
    #[serde(default)]
    pub(super) param_kind: Option<ParamKind>,
    #[serde(default)]
    pub(super) match_constraints: Option<MatchResources>,
    #[serde(default)]
    pub(super) validations: Vec<Validation>,
    #[serde(default)]
    pub(super) failure_policy: Option<String>,
    #[serde(default)]
    pub(super) match_conditions: Vec<MatchCondition>,
    #[serde(default)]
    pub(super) variables: Vec<Variable>,
    #[serde(default)]
    pub(super) audit_annotations: Vec<AuditAnnotation>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AuditAnnotation {
    pub(super) key: String,
    pub(super) value_expression: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ParamKind {
    pub(super) api_version: String,
    pub(super) kind: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct MatchResources {
    #[serde(default)]
    pub(super) namespace_selector: Option<Value>,
    #[serde(default)]
    pub(super) object_selector: Option<Value>,
    #[serde(default)]
    pub(super) resource_rules: Vec<NamedRule>,
    #[serde(default)]
    pub(super) exclude_resource_rules: Vec<NamedRule>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct NamedRule {
    #[serde(flatten)]
    pub(super) rule: Rule,
    #[serde(default)]
    pub(super) resource_names: Vec<String>,
}

impl NamedRule {
    fn matches(&self, request: &Request<'_>) -> bool {
        self.rule.matches(request)
            && (self.resource_names.is_empty() || self.resource_names.iter().any(|n| n == request.name))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Validation {
    pub(super) expression: String,
    #[serde(default)]
    pub(super) message: Option<String>,
    #[serde(default)]
    pub(super) message_expression: Option<String>,
    #[serde(default)]
    pub(super) reason: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Variable {
    pub(super) name: String,
    pub(super) expression: String,
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
    /// The validation's index, when one failed (not a configuration or annotation error).
    validation: Option<usize>,
    /// `no_error` for a validation that failed, else why it could not be evaluated.
    error_type: &'static str,
}

impl Failure {
    fn error(message: String) -> Failure {
        Failure { message, reason: None, validation: None, error_type: "invalid_error" }
    }
}

/// What evaluating a policy for one binding and parameter found.
#[derive(Default)]
struct Evaluated {
    failures: Vec<Failure>,
    /// Failures that must deny whatever the binding's actions (an audit annotation that could
    /// not be evaluated under `failurePolicy: Fail`).
    internal: Vec<Failure>,
    /// Expressions whose errors `failurePolicy: Ignore` passed over.
    ignored: usize,
    /// Audit annotations: key and value.
    annotations: Vec<(String, String)>,
}

impl Evaluated {
    fn extend(&mut self, other: Evaluated) {
        self.failures.extend(other.failures);
        self.internal.extend(other.internal);
        self.ignored += other.ignored;
        self.annotations.extend(other.annotations);
    }
}

/// Runs every binding whose policy matches `request`; the warnings of `Warn` bindings, or the
/// first denial.
pub async fn validate(
    cx: Context<'_>,
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    if request.group == CONFIGURATION_GROUP {
        return Ok(Vec::new());
    }
    let bindings = super::objects::read::<Binding>(cx, BINDINGS).await?;
    if bindings.is_empty() {
        return Ok(Vec::new());
    }
    let policies = super::objects::read::<Policy>(cx, POLICIES).await?;
    // What applies, with its parameters: the reads first, then every expression in one scope.
    let mut applying: Vec<(&Policy, &Binding, Parameters)> = Vec::new();
    for policy in policies.iter().map(|p| &**p) {
        let bound: Vec<&Binding> =
            bindings.iter().map(|b| &**b).filter(|b| b.spec.policy_name == policy.metadata.name).collect();
        if bound.is_empty() || !matches(policy.spec.match_constraints.as_ref(), cx, request, object, old).await? {
            continue;
        }
        for binding in bound {
            if let Some(resources) = &binding.spec.match_resources
                && !matches(Some(resources), cx, request, object, old).await?
            {
                continue;
            }
            applying.push((policy, binding, parameters(cx, policy, binding, request).await));
        }
    }
    if applying.is_empty() {
        return Ok(Vec::new());
    }
    // Only what the expressions read is bound: each value costs a conversion, the namespace a read.
    let expressions = applying.iter().flat_map(|(policy, ..)| policy.expressions());
    let [reads_old, reads_request, reads_namespace] =
        crdctl_schema::cel::reads(expressions, ["oldObject", "request", "namespaceObject"]);
    let namespace_object = match reads_namespace {
        true => Some(namespace_of(cx, request).await?.unwrap_or(Value::Null)),
        false => None,
    };
    let request_value = reads_request.then(|| super::matching::request_variable(request));
    let null = Value::Null;
    let bound = [
        ("object", Some(object.unwrap_or(&null))),
        ("oldObject", reads_old.then_some(old.unwrap_or(&null))),
        ("request", request_value.as_ref()),
        ("namespaceObject", namespace_object.as_ref()),
    ];
    let shared: Vec<(&str, &Value)> = bound.into_iter().filter_map(|(name, value)| Some((name, value?))).collect();
    let requester = request.requester(cx.authorizer);
    let evaluated: Vec<(&Policy, &Binding, Evaluated)> =
        crdctl_schema::cel::with_admission_scope(&shared, Some(&requester), |scope| {
            applying
                .into_iter()
                .map(|(policy, binding, parameters)| {
                    let evaluated = match parameters {
                        // Nothing to bind of its own: evaluated in the shared scope.
                        Parameters::Objects(params) if params == [None] && policy.spec.variables.is_empty() => {
                            evaluate(scope, policy)
                        }
                        Parameters::Objects(params) => {
                            let mut all = Evaluated::default();
                            for param in &params {
                                let param = ("params", param.as_ref().unwrap_or(&null));
                                all.extend(scope.inner(&[param], |scope| evaluate(scope, policy)));
                            }
                            all
                        }
                        Parameters::Fail(failures) => Evaluated { failures, ..Evaluated::default() },
                    };
                    (policy, binding, evaluated)
                })
                .collect()
        });
    enforce(cx, request, evaluated)
}

/// Acts on what each binding's evaluation found, as its `validationActions` say: the warnings,
/// or the first denial.
fn enforce(
    cx: Context<'_>,
    request: &Request<'_>,
    evaluated: Vec<(&Policy, &Binding, Evaluated)>,
) -> ApiResult<Vec<String>> {
    let mut warnings = Vec::new();
    let mut denial: Option<ApiError> = None;
    let mut audited = Vec::new();
    for (policy, binding, evaluated) in evaluated {
        let names = (policy.metadata.name.as_str(), binding.metadata.name.as_str());
        let denied = |failure: &Failure| {
            let message = format!(
                "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
                names.0, names.1, failure.message
            );
            ApiError::policy_denied(request.subject(), &message, failure.reason.as_deref())
        };
        super::audit::annotate_for(request, names.0, &evaluated.annotations);
        for _ in 0..evaluated.ignored {
            cx.metrics.record_policy_check(names, "invalid_error", "allow");
        }
        for failure in &evaluated.internal {
            cx.metrics.record_policy_check(names, failure.error_type, "deny");
            denial.get_or_insert_with(|| denied(failure));
        }
        for failure in &evaluated.failures {
            for action in &binding.spec.validation_actions {
                match action.as_str() {
                    "Deny" => {
                        cx.metrics.record_policy_check(names, failure.error_type, "deny");
                        denial.get_or_insert_with(|| denied(failure));
                    }
                    "Warn" => {
                        cx.metrics.record_policy_check(names, failure.error_type, "warn");
                        warnings.push(format!(
                            "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                            names.0, names.1, failure.message
                        ));
                    }
                    "Audit" => {
                        cx.metrics.record_policy_check(names, failure.error_type, "audit");
                        audited.push(json!({"message": failure.message, "policy": names.0, "binding": names.1,
                            "expressionIndex": failure.validation, "validationActions": binding.spec.validation_actions}));
                    }
                    _ => {}
                }
            }
        }
    }
    if !audited.is_empty() {
        super::audit::annotate(request, super::audit::VALIDATION_FAILURE, &Value::Array(audited).to_string());
    }
    match denial {
        Some(denial) => Err(denial.after_warnings(&warnings)),
        None => Ok(warnings),
    }
}

/// A binding's parameter objects (`None`: a policy without `paramKind`), or the failures that
/// stand for them (none found under `Deny`, a configuration error under `Fail`).
enum Parameters {
    Objects(Vec<Option<Value>>),
    Fail(Vec<Failure>),
}

async fn parameters(cx: Context<'_>, policy: &Policy, binding: &Binding, request: &Request<'_>) -> Parameters {
    let fail_closed = policy.spec.failure_policy.as_deref() != Some("Ignore");
    let configuration_error = |message: String| {
        Parameters::Fail(match fail_closed {
            true => vec![Failure::error(format!("failed to configure binding: {message}"))],
            false => Vec::new(),
        })
    };
    match (&policy.spec.param_kind, &binding.spec.param_ref) {
        (None, _) => Parameters::Objects(vec![None]),
        (Some(_), None) => configuration_error("paramRef is required when paramKind is set".into()),
        (Some(kind), Some(reference)) => match params(cx, kind, reference, request).await {
            Ok(found) if found.is_empty() => Parameters::Fail(match reference.parameter_not_found_action.as_deref() {
                Some("Deny") => vec![Failure {
                    error_type: "no_error",
                    ..Failure::error("no params found for policy binding with `Deny` parameterNotFoundAction".into())
                }],
                _ => Vec::new(),
            }),
            Ok(found) => Parameters::Objects(found.into_iter().map(Some).collect()),
            Err(message) => configuration_error(message),
        },
    }
}

/// Whether any policy binding exists (what makes a delete read the object it deletes).
pub async fn any_bound(cx: Context<'_>) -> ApiResult<bool> {
    super::objects::any(cx, BINDINGS).await
}

/// Whether `resources` (a policy's constraints, a binding's resources) match the request.
async fn matches(
    resources: Option<&MatchResources>,
    cx: Context<'_>,
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
        cx,
        request,
        (object, old),
        resources.namespace_selector.as_ref(),
        resources.object_selector.as_ref(),
    )
    .await
}

/// The request's namespace, for `namespaceObject` (none for cluster-scoped requests and for
/// Namespaces themselves, as upstream).
async fn namespace_of(cx: Context<'_>, request: &Request<'_>) -> ApiResult<Option<Value>> {
    let Some(namespace) = request.namespace.filter(|_| !(request.group.is_empty() && request.resource == "namespaces"))
    else {
        return Ok(None);
    };
    let entry = cx
        .store
        .get(&crate::registry::builtin::namespace::key(namespace))
        .await
        .map_err(|err| ApiError::unavailable(err.to_string()))?;
    Ok(entry.and_then(|entry| serde_json::from_slice(&entry.value).ok()))
}

/// What `policy` finds in `scope` (its variables bound, and one parameter object): failed
/// validations, errors, audit annotations.
fn evaluate(scope: &mut crdctl_schema::cel::AdmissionScope<'_>, policy: &Policy) -> Evaluated {
    let fail_closed = policy.spec.failure_policy.as_deref() != Some("Ignore");
    let mut found = Evaluated::default();
    let error = |found: &mut Evaluated, message: String| match fail_closed {
        true => found.failures.push(Failure::error(message)),
        false => found.ignored += 1,
    };
    for condition in &policy.spec.match_conditions {
        match scope.check(&condition.expression) {
            Ok(true) => {}
            Ok(false) => return found,
            Err(err) => {
                error(&mut found, format!("failed to evaluate match condition {:?}: {err}", condition.name));
                return found;
            }
        }
    }
    for variable in &policy.spec.variables {
        // A variable that fails is unbound; the expressions reading it fail in turn.
        let _ = scope.define(&variable.name, &variable.expression);
    }
    for (index, validation) in policy.spec.validations.iter().enumerate() {
        match scope.check(&validation.expression) {
            Ok(true) => {}
            Ok(false) => {
                let written = validation.message_expression.as_deref().and_then(|e| scope.string(e).ok());
                let message = written
                    .map(|m| m.trim().to_string())
                    .filter(|m| !m.is_empty() && !m.contains('\n'))
                    .or_else(|| validation.message.as_ref().map(|m| m.trim().to_string()))
                    .unwrap_or_else(|| format!("failed expression: {}", validation.expression.trim()));
                let reason = validation.reason.clone();
                found.failures.push(Failure { message, reason, validation: Some(index), error_type: "no_error" });
            }
            Err(err) => error(&mut found, format!("expression '{}' resulted in error: {err}", validation.expression)),
        }
    }
    for annotation in &policy.spec.audit_annotations {
        let problem = match scope.string_or_null(&annotation.value_expression) {
            Ok(Ok(Some(value))) if !value.trim().is_empty() => {
                found.annotations.push((annotation.key.clone(), value.trim().to_string()));
                continue;
            }
            Ok(Ok(_)) => continue,
            Ok(Err(returned)) => format!(
                "valueExpression '{}' resulted in unsupported return type: {returned}. Return type must be either string or null.",
                annotation.value_expression
            ),
            Err(err) => format!("valueExpression '{}' resulted in error: {err}", annotation.value_expression),
        };
        match fail_closed {
            true => found.internal.push(Failure { reason: Some("InternalError".into()), ..Failure::error(problem) }),
            false => found.ignored += 1,
        }
    }
    found
}

/// The parameter objects a binding names: its `paramRef`'s object by name, or every object its
/// selector selects, of the policy's `paramKind` (built-in or custom), in the reference's
/// namespace or else the request's; why not, when the kind is not served.
async fn params(
    cx: Context<'_>,
    kind: &ParamKind,
    reference: &ParamRef,
    request: &Request<'_>,
) -> Result<Vec<Value>, String> {
    let (group, version) = kind.api_version.split_once('/').unwrap_or(("", kind.api_version.as_str()));
    let Some(served) = cx.registry.resource_of_kind((group, version, &kind.kind)) else {
        return Err(format!(
            "failed to find resource referenced by paramKind: '{}, Kind={}'",
            kind.api_version, kind.kind
        ));
    };
    let (prefix, namespaced) = (served.prefix(None), served.namespaced());
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
        let entry = cx.store.get(&format!("{scoped}{name}")).await.map_err(|err| err.to_string())?;
        return Ok(entry.and_then(|entry| read(&entry.value)).into_iter().collect());
    }
    let selector = reference.selector.clone().unwrap_or(Value::Object(Map::new()));
    let options = crdctl_storage::ListOptions { prefix: &scoped, ..Default::default() };
    let page = cx.store.list(options).await.map_err(|err| err.to_string())?;
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
