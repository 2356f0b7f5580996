//! Which webhooks a request calls, as upstream's `generic.Webhook.ShouldCallHook`: a rule
//! matches, the selectors select, and every match condition holds.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::Context;
use super::{Request, Webhook};
use crate::error::{ApiError, ApiResult};

/// One of a webhook's `rules` (`RuleWithOperations`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`.
    #[serde(default)]
    pub operations: Vec<String>,
    /// Groups, `""` for core, `*` for any.
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// Versions, `*` for any.
    #[serde(default)]
    pub api_versions: Vec<String>,
    /// `crontabs`, `crontabs/status`, `*`, `*/status`, `crontabs/*`, `*/*`.
    #[serde(default)]
    pub resources: Vec<String>,
    /// `Cluster`, `Namespaced` or `*` (the default).
    #[serde(default)]
    pub scope: Option<String>,
}

impl Rule {
    /// Whether the rule matches the request.
    pub fn matches(&self, request: &Request<'_>) -> bool {
        let listed = |values: &[String], value: &str| values.iter().any(|v| v == "*" || v == value);
        listed(&self.operations, request.operation.as_str())
            && listed(&self.api_groups, request.group)
            && listed(&self.api_versions, request.version)
            && self.resources.iter().any(|pattern| resource_matches(pattern, request.resource, request.subresource))
            && match self.scope.as_deref() {
                Some("Cluster") => request.namespace.is_none(),
                Some("Namespaced") => request.namespace.is_some(),
                _ => true,
            }
    }
}

/// `resource[/subresource]` against a pattern: `*` is every resource but no subresource, `*/*`
/// everything, `r/*` every subresource of `r`, `*/s` subresource `s` of every resource.
fn resource_matches(pattern: &str, resource: &str, subresource: &str) -> bool {
    let (want_resource, want_sub) = pattern.split_once('/').unwrap_or((pattern, ""));
    let resource_ok = want_resource == "*" || want_resource == resource;
    let sub_ok = match want_sub {
        "*" => true,
        sub => sub == subresource,
    };
    resource_ok && sub_ok
}

/// One of a webhook's `matchConditions`: a CEL expression over `object`, `oldObject`,
/// `request` and `authorizer`.
#[derive(Debug, Clone, Deserialize)]
pub struct MatchCondition {
    /// Its name, which errors quote.
    pub name: String,
    /// The expression.
    pub expression: String,
}

/// A webhook a request calls.
#[derive(Debug, Clone)]
pub struct Matched<'w> {
    /// Its place in the webhooks' order.
    pub at: usize,
    /// The webhook.
    pub webhook: &'w Webhook,
    /// Under `matchPolicy: Equivalent`, the version of the resource its rules name when they
    /// do not name the request's: the webhook sees the object converted to it.
    pub version: Option<String>,
}

/// The webhooks `request` calls. A match condition that cannot be evaluated refuses the
/// request under `failurePolicy: Fail` and skips the webhook under `Ignore`.
pub async fn matching<'w>(
    cx: Context<'_>,
    webhooks: &[&'w Webhook],
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<Vec<Matched<'w>>> {
    let mut namespace_labels: Option<Map<String, Value>> = None;
    let mut matched = Vec::new();
    for (at, &webhook) in webhooks.iter().enumerate() {
        let version = match webhook.rules.iter().any(|rule| rule.matches(request)) {
            true => None,
            false => match equivalent_version(cx, webhook, request) {
                Some(version) => Some(version),
                None => continue,
            },
        };
        let selectors = (webhook.namespace_selector.as_ref(), webhook.object_selector.as_ref());
        if !select(cx, request, (object, old), selectors, &mut namespace_labels).await? {
            continue;
        }
        match conditions_hold(cx, webhook, request, object, old) {
            Ok(true) => matched.push(Matched { at, webhook, version }),
            Ok(false) => {}
            Err(_) if webhook.ignores_failures() => {}
            Err(reason) => return Err(super::failed(webhook, &reason)),
        }
    }
    Ok(matched)
}

/// Under `matchPolicy: Equivalent` (the default), another served version of the request's
/// custom resource that the webhook's rules name.
fn equivalent_version(cx: Context<'_>, webhook: &Webhook, request: &Request<'_>) -> Option<String> {
    if webhook.match_policy.as_deref() == Some("Exact") {
        return None;
    }
    let served = cx.registry.by_resource(request.group, request.resource)?;
    let versions = served.crd.definition.spec.versions.iter().filter(|v| v.served && v.name != request.version);
    versions
        .map(|v| v.name.clone())
        .find(|version| webhook.rules.iter().any(|rule| rule.matches(&Request { version, ..request.clone() })))
}

/// Whether a `namespaceSelector` selects the request's namespace and an `objectSelector` the
/// object or the old object (absent or empty selectors select everything).
pub async fn selectors_select(
    cx: Context<'_>,
    request: &Request<'_>,
    objects: (Option<&Value>, Option<&Value>),
    namespace_selector: Option<&Value>,
    object_selector: Option<&Value>,
) -> ApiResult<bool> {
    select(cx, request, objects, (namespace_selector, object_selector), &mut None).await
}

/// [`selectors_select`], keeping the namespace's labels once read in `namespace_labels`.
async fn select(
    cx: Context<'_>,
    request: &Request<'_>,
    (object, old): (Option<&Value>, Option<&Value>),
    (namespace_selector, object_selector): (Option<&Value>, Option<&Value>),
    namespace_labels: &mut Option<Map<String, Value>>,
) -> ApiResult<bool> {
    if let Some(selector) = namespace_selector.filter(|s| !is_empty(s)) {
        let labels = match namespace_labels {
            Some(labels) => labels,
            None => namespace_labels.insert(labels_of_namespace(cx, request, object).await?),
        };
        if !crate::selector::selects(selector, labels) {
            return Ok(false);
        }
    }
    if let Some(selector) = object_selector.filter(|s| !is_empty(s)) {
        let selects = |o: Option<&Value>| o.is_some_and(|o| crate::selector::selects(selector, &labels(o)));
        if !(selects(object) || selects(old)) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether a label selector selects everything (no labels, no expressions).
fn is_empty(selector: &Value) -> bool {
    selector.get("matchLabels").and_then(Value::as_object).is_none_or(Map::is_empty)
        && selector.get("matchExpressions").and_then(Value::as_array).is_none_or(Vec::is_empty)
}

fn labels(object: &Value) -> Map<String, Value> {
    object.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default()
}

/// The labels a `namespaceSelector` reads: the request's namespace's; for a Namespace itself,
/// its own; none for other cluster-scoped objects (which every namespace selector lets through
/// upstream, as there is no namespace to judge).
async fn labels_of_namespace(
    cx: Context<'_>,
    request: &Request<'_>,
    object: Option<&Value>,
) -> ApiResult<Map<String, Value>> {
    if request.group.is_empty() && request.resource == "namespaces" {
        return Ok(object.map(labels).unwrap_or_default());
    }
    let Some(namespace) = request.namespace else { return Ok(Map::new()) };
    let entry = cx
        .store
        .get(&crate::registry::builtin::namespace::key(namespace))
        .await
        .map_err(|err| ApiError::unavailable(err.to_string()))?;
    let namespace: Option<Value> = entry.and_then(|entry| serde_json::from_slice(&entry.value).ok());
    Ok(namespace.as_ref().map(labels).unwrap_or_default())
}

/// Whether every match condition holds; an error says which one could not be evaluated.
fn conditions_hold(
    cx: Context<'_>,
    webhook: &Webhook,
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<bool, String> {
    if webhook.match_conditions.is_empty() {
        return Ok(true);
    }
    let null = Value::Null;
    let request_value = request_variable(request);
    let variables =
        [("object", object.unwrap_or(&null)), ("oldObject", old.unwrap_or(&null)), ("request", &request_value)];
    let requester = request.requester(cx.authorizer);
    for condition in &webhook.match_conditions {
        let holds = crdctl_schema::cel::evaluate_condition(&condition.expression, &variables, Some(&requester))
            .map_err(|err| format!("failed to evaluate match condition {:?}: {err}", condition.name))?;
        if !holds {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The `request` variable of CEL expressions: the admission request's attributes.
pub fn request_variable(request: &Request<'_>) -> Value {
    json!({
        "kind": {"group": request.group, "version": request.version, "kind": request.kind},
        "resource": {"group": request.group, "version": request.version, "resource": request.resource},
        "subResource": request.subresource,
        "requestKind": {"group": request.group, "version": request.version, "kind": request.kind},
        "requestResource": {"group": request.group, "version": request.version, "resource": request.resource},
        "requestSubResource": request.subresource,
        "name": request.name,
        "namespace": request.namespace.unwrap_or_default(),
        "operation": request.operation.as_str(),
        "userInfo": request.user.info(),
        "dryRun": request.dry_run,
        "options": request.options(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Operation;

    fn request<'a>(operation: Operation, resource: &'a str, subresource: &'a str) -> Request<'a> {
        Request {
            operation,
            group: "example.com",
            version: "v1",
            resource,
            subresource,
            kind: "CronTab",
            name: "a",
            namespace: Some("default"),
            dry_run: false,
            field_manager: None,
            user: crate::auth::User::administrator_ref(),
        }
    }

    fn rule(resources: &[&str], scope: Option<&str>) -> Rule {
        Rule {
            operations: vec!["CREATE".into(), "UPDATE".into()],
            api_groups: vec!["example.com".into()],
            api_versions: vec!["*".into()],
            resources: resources.iter().map(|r| r.to_string()).collect(),
            scope: scope.map(str::to_string),
        }
    }

    #[test]
    fn rules_match_resources_and_subresources_as_upstream() {
        let create = request(Operation::Create, "crontabs", "");
        let status = request(Operation::Update, "crontabs", "status");
        assert!(rule(&["crontabs"], None).matches(&create));
        assert!(rule(&["*"], None).matches(&create));
        assert!(!rule(&["*"], None).matches(&status), "* is no subresource");
        assert!(rule(&["*/*"], None).matches(&status));
        assert!(rule(&["crontabs/*"], None).matches(&status));
        assert!(rule(&["*/status"], None).matches(&status));
        assert!(!rule(&["crontabs/scale"], None).matches(&status));
        assert!(!rule(&["crontabs"], None).matches(&request(Operation::Delete, "crontabs", "")));
        assert!(!rule(&["crontabs"], Some("Cluster")).matches(&create));
        assert!(rule(&["crontabs"], Some("Namespaced")).matches(&create));
    }
}
