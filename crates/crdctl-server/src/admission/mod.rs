//! Admission webhooks, called on every write as kube-apiserver 1.33 calls them
//! (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook`).
//!
//! - The webhooks are those of the stored `MutatingWebhookConfiguration`s and
//!   `ValidatingWebhookConfiguration`s, read at each write (configurations by name, webhooks as
//!   listed), with upstream's defaults: `failurePolicy: Fail`, `timeoutSeconds: 10`, every scope,
//!   empty selectors.
//! - A webhook is called when one of its `rules` matches the request (operation, group,
//!   version, resource and subresource with `*`, scope), its `namespaceSelector` selects the
//!   namespace's labels, its `objectSelector` the object's or the old object's, and every
//!   `matchConditions` expression holds ([`matching`]). Under `matchPolicy: Equivalent` (the
//!   default), rules that name another served version of a custom resource match too, and the
//!   webhook sees the objects converted to that version.
//! - Mutating webhooks run first, one after another, each seeing the object as the ones before
//!   patched it (`JSONPatch`); with `reinvocationPolicy: IfNeeded`, a webhook runs once more
//!   when a later one changed the object. The kind's own preparation and validation (pruning,
//!   defaulting, the schema) follow; then the validating webhooks run in parallel, and the first
//!   denial (in order) refuses the write.
//! - The request is an `AdmissionReview` in the first of the webhook's
//!   `admissionReviewVersions` the server speaks (v1, v1beta1); calls go through the HTTPS
//!   [`crdctl_conversion::webhook::Endpoint`] the conversion webhooks use; answers are checked
//!   as upstream checks them ([`review`]).
//! - `ValidatingAdmissionPolicy`s run before the validating webhooks ([`policy`]).
//! - Errors read as upstream's: `admission webhook "x" denied the request: …`, and under
//!   `failurePolicy: Fail`, `Internal error occurred: failed calling webhook "x": …`. A webhook
//!   with side effects refuses a dry run: `admission webhook "x" does not support dry run`.

pub mod audit;
pub mod matching;
pub mod objects;
pub mod policy;
pub mod review;
pub mod type_checking;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crdctl_conversion::webhook::{Endpoint, ServiceResolver};
use crdctl_model::crd::WebhookClientConfig;
use serde::Deserialize;
use serde_json::Value;

use crdctl_storage::Store;

use crate::error::{ApiError, ApiResult, Subject};
use crate::metrics::Metrics;
use crate::registry::Registry;

/// What admission uses of the server, borrowed for one request.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// The store.
    pub store: &'a Arc<dyn Store>,
    /// The served CRDs.
    pub registry: &'a Registry,
    /// What admission keeps between requests.
    pub kept: &'a Kept,
    /// Where policy checks are counted.
    pub metrics: &'a Metrics,
    /// Who asks (a review's `userInfo`).
    pub user: &'a crate::auth::User,
    /// Decides the checks of CEL's `authorizer`.
    pub authorizer: &'a crate::auth::Authorizer,
}

/// The group of the admission configurations, which no webhook sees (as upstream: a webhook
/// could otherwise lock out its own removal).
const CONFIGURATION_GROUP: &str = "admissionregistration.k8s.io";

/// The longest `timeoutSeconds` upstream allows.
const MAX_TIMEOUT_SECONDS: u64 = 30;

/// What a write does, as admission names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `CREATE`.
    Create,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
}

impl Operation {
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    /// The kind of its options object (`CreateOptions`, …).
    fn options_kind(self) -> &'static str {
        match self {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
        }
    }
}

/// A write, as admission sees it (upstream's `admission.Attributes`).
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// What it does.
    pub operation: Operation,
    /// The API group, empty for core.
    pub group: &'a str,
    /// The version of the request.
    pub version: &'a str,
    /// The resource plural.
    pub resource: &'a str,
    /// The subresource (`status`, `scale`), or empty.
    pub subresource: &'a str,
    /// The object's kind.
    pub kind: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// The namespace, for namespaced resources.
    pub namespace: Option<&'a str>,
    /// Whether the write is a dry run.
    pub dry_run: bool,
    /// The field manager, sent in the options.
    pub field_manager: Option<&'a str>,
    /// Who asks (`userInfo`).
    pub user: &'a crate::auth::User,
}

impl Request<'_> {
    fn subject(&self) -> Subject<'_> {
        Subject { group: self.group, resource: self.resource, name: self.name }
    }

    /// The `authorizer` of the request's CEL expressions: `authorizer` deciding for its user,
    /// `requestResource` the request's own.
    fn requester(&self, authorizer: &crate::auth::Authorizer) -> crdctl_schema::cel::Requester {
        use crdctl_schema::cel::authorizer::Check;
        let request = Check {
            group: self.group.to_string(),
            resource: self.resource.to_string(),
            subresource: self.subresource.to_string(),
            namespace: self.namespace.unwrap_or_default().to_string(),
            name: self.name.to_string(),
            ..Check::default()
        };
        let deciding = crate::auth::ForUser { authorizer: authorizer.clone(), user: self.user.clone() };
        crdctl_schema::cel::Requester { authorizer: std::sync::Arc::new(deciding), request }
    }

    /// The operation's options object, as upstream sends it.
    fn options(&self) -> Value {
        let mut options = serde_json::Map::new();
        options.insert("kind".into(), self.operation.options_kind().into());
        options.insert("apiVersion".into(), "meta.k8s.io/v1".into());
        if let Some(manager) = self.field_manager.filter(|_| self.operation != Operation::Delete) {
            options.insert("fieldManager".into(), manager.into());
        }
        if self.dry_run {
            options.insert("dryRun".into(), serde_json::json!(["All"]));
        }
        Value::Object(options)
    }
}

/// One webhook of a configuration, with upstream's defaults.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    /// Its name (`x.example.com`), which errors quote.
    pub name: String,
    /// Where it listens.
    #[serde(default)]
    pub client_config: WebhookClientConfig,
    /// What requests it sees.
    #[serde(default)]
    pub rules: Vec<matching::Rule>,
    /// `Fail` (the default) or `Ignore`: what a failed call does.
    #[serde(default)]
    pub failure_policy: Option<String>,
    /// Which namespaces' objects it sees.
    #[serde(default)]
    pub namespace_selector: Option<Value>,
    /// Which objects it sees.
    #[serde(default)]
    pub object_selector: Option<Value>,
    /// CEL expressions that must all hold for it to be called.
    #[serde(default)]
    pub match_conditions: Vec<matching::MatchCondition>,
    /// `None`, `NoneOnDryRun`, `Some` or `Unknown`.
    #[serde(default)]
    pub side_effects: Option<String>,
    /// Seconds before a call fails (default 10, at most 30).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// The `AdmissionReview` versions it reads, preferred first.
    #[serde(default)]
    pub admission_review_versions: Vec<String>,
    /// `Never` (the default) or `IfNeeded` (mutating webhooks).
    #[serde(default)]
    pub reinvocation_policy: Option<String>,
    /// `Equivalent` (the default) or `Exact`.
    #[serde(default)]
    pub match_policy: Option<String>,
}

impl Webhook {
    fn ignores_failures(&self) -> bool {
        self.failure_policy.as_deref() == Some("Ignore")
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds.unwrap_or(10).clamp(1, MAX_TIMEOUT_SECONDS))
    }

    /// Whether a dry run may call it: only webhooks without side effects (on dry runs).
    fn supports_dry_run(&self) -> bool {
        matches!(self.side_effects.as_deref(), Some("None" | "NoneOnDryRun"))
    }
}

/// What admission keeps between requests: the webhooks' clients, and the parsed
/// configurations, policies and bindings.
#[derive(Debug, Clone, Default)]
pub struct Kept {
    /// The webhooks' HTTPS clients.
    pub clients: Clients,
    /// The stored admission objects, parsed.
    pub parsed: objects::Parsed,
}

/// The HTTPS clients of the webhooks called so far, by `clientConfig`: a call reuses the
/// client, and with it the connection, of the calls before (upstream's `ClientManager` cache).
#[derive(Debug, Clone, Default)]
pub struct Clients(Arc<Mutex<HashMap<WebhookClientConfig, Endpoint, foldhash::fast::RandomState>>>);

/// At most this many clients are kept; then the cache starts over.
const MAX_CLIENTS: usize = 256;

impl Clients {
    /// The client for `config`, made on first use.
    fn endpoint(&self, config: &WebhookClientConfig, resolver: &dyn ServiceResolver) -> Result<Endpoint, String> {
        let mut clients = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(endpoint) = clients.get(config) {
            return Ok(endpoint.clone());
        }
        let endpoint = Endpoint::new(config, resolver)?;
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(config.clone(), endpoint.clone());
        Ok(endpoint)
    }
}

/// Which configurations: mutating or validating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `MutatingWebhookConfiguration`s.
    Mutating,
    /// `ValidatingWebhookConfiguration`s.
    Validating,
}

impl Phase {
    fn prefix(self) -> &'static str {
        match self {
            Phase::Mutating => "/registry/mutatingwebhookconfigurations/",
            Phase::Validating => "/registry/validatingwebhookconfigurations/",
        }
    }
}

/// A stored webhook configuration, parsed.
#[derive(Deserialize)]
struct Configuration {
    #[serde(default)]
    webhooks: Vec<Webhook>,
}

/// The stored configurations of `phase`, by name. A configuration that does not parse is
/// skipped, as upstream's informer would never have stored it.
async fn configurations(cx: Context<'_>, phase: Phase) -> ApiResult<Vec<Arc<Configuration>>> {
    objects::read::<Configuration>(cx, phase.prefix()).await
}

/// Every webhook of `configurations`, in the order listed.
fn webhooks(configurations: &[Arc<Configuration>]) -> Vec<&Webhook> {
    configurations.iter().flat_map(|c| c.webhooks.iter()).collect()
}

/// Runs the mutating webhooks on `object` (the request's version), in order, patching it;
/// `IfNeeded` webhooks run once more when a later webhook changed it. Returns the webhooks'
/// warnings.
pub async fn mutate(
    cx: Context<'_>,
    request: &Request<'_>,
    object: &mut Value,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    let configurations = configurations(cx, Phase::Mutating).await?;
    let webhooks = webhooks(&configurations);
    if webhooks.is_empty() || request.group == CONFIGURATION_GROUP {
        return Ok(Vec::new());
    }
    let matched = matching::matching(cx, &webhooks, request, Some(&*object), old).await?;
    let mut warnings = Vec::new();
    let mut changed_by: Vec<usize> = Vec::new();
    for matched in &matched {
        let before = object.clone();
        let called = call_mutating(cx, matched, request, object, old, &mut warnings).await;
        called.map_err(|err| err.after_warnings(&warnings))?;
        if *object != before {
            changed_by.push(matched.at);
        }
    }
    // Reinvocation: an `IfNeeded` webhook sees the object again when one after it changed it.
    let reinvoke = matched.iter().filter(|m| {
        m.webhook.reinvocation_policy.as_deref() == Some("IfNeeded") && changed_by.iter().any(|by| *by > m.at)
    });
    for matched in reinvoke {
        let called = call_mutating(cx, matched, request, object, old, &mut warnings).await;
        called.map_err(|err| err.after_warnings(&warnings))?;
    }
    Ok(warnings)
}

/// `object` at `version` of the request's custom resource (`matchPolicy: Equivalent`), or as
/// it is.
async fn at_version<'o>(
    cx: Context<'_>,
    request: &Request<'_>,
    version: Option<&str>,
    object: Option<&'o Value>,
) -> ApiResult<Option<Cow<'o, Value>>> {
    let (Some(version), Some(object)) = (version, object) else { return Ok(object.map(Cow::Borrowed)) };
    let Some(served) = cx.registry.by_resource(request.group, request.resource) else {
        return Ok(Some(Cow::Borrowed(object)));
    };
    let converted = served.convert(vec![object.clone()], version, crdctl_conversion::Shape::Object).await?;
    Ok(converted.into_iter().next().map(Cow::Owned))
}

async fn call_mutating(
    cx: Context<'_>,
    matched: &matching::Matched<'_>,
    request: &Request<'_>,
    object: &mut Value,
    old: Option<&Value>,
    warnings: &mut Vec<String>,
) -> ApiResult<()> {
    let (webhook, version) = (matched.webhook, matched.version.as_deref());
    let mut seen = at_version(cx, request, version, Some(&*object)).await?.map_or(Value::Null, Cow::into_owned);
    let seen_old = at_version(cx, request, version, old).await?;
    match review::call(cx, webhook, (request, version), Some(&seen), seen_old.as_deref(), Phase::Mutating).await {
        Ok(answer) => {
            warnings.extend(answer.warnings);
            audit::annotate_for(request, &webhook.name, &answer.audit_annotations);
            if !answer.allowed {
                return Err(ApiError::webhook_denied(request.subject(), &webhook.name, answer.result.as_ref()));
            }
            if let Some(patch) = answer.patch {
                // As upstream: a patch that does not apply is the server's error, whatever the
                // failure policy.
                review::apply_patch(&mut seen, &patch).map_err(ApiError::internal_error)?;
                // Back to the request's version when the webhook saw another.
                let back = at_version(cx, request, version.map(|_| request.version), Some(&seen)).await?;
                *object = back.map(Cow::into_owned).unwrap_or(seen);
            }
            Ok(())
        }
        Err(review::Failure::Refused(err)) => Err(err),
        Err(review::Failure::Call(reason)) if webhook.ignores_failures() => {
            tracing::warn!(webhook = %webhook.name, %reason, "failed calling webhook, failing open");
            Ok(())
        }
        Err(review::Failure::Call(reason)) => Err(failed(webhook, &reason)),
    }
}

/// Runs the validating webhooks in parallel on the object as it will be stored (`object`;
/// `None` on delete); the first denial, in webhook order, refuses the write. Returns the
/// webhooks' warnings.
pub async fn validate(
    cx: Context<'_>,
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    let configurations = configurations(cx, Phase::Validating).await?;
    validate_with(cx, &webhooks(&configurations), request, object, old).await
}

/// [`validate`] for a delete: the object being deleted (`old`, at the request's version) is
/// only read when a validating webhook or a policy binding exists.
pub async fn validate_delete(
    cx: Context<'_>,
    request: &Request<'_>,
    old: impl Future<Output = ApiResult<Option<Value>>>,
) -> ApiResult<Vec<String>> {
    let configurations = configurations(cx, Phase::Validating).await?;
    let webhooks = webhooks(&configurations);
    if webhooks.is_empty() && !policy::any_bound(cx).await? {
        return Ok(Vec::new());
    }
    let old = old.await?;
    validate_with(cx, &webhooks, request, None, old.as_ref()).await
}

/// The policies, then the webhooks (kube-apiserver's plugin order).
async fn validate_with(
    cx: Context<'_>,
    webhooks: &[&Webhook],
    request: &Request<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    let mut warnings = policy::validate(cx, request, object, old).await?;
    if webhooks.is_empty() || request.group == CONFIGURATION_GROUP {
        return Ok(warnings);
    }
    let matched = matching::matching(cx, webhooks, request, object, old).await?;
    let calls = matched.iter().map(|matched| async move {
        let version = matched.version.as_deref();
        let seen = at_version(cx, request, version, object).await;
        let seen_old = at_version(cx, request, version, old).await;
        let answer = match (seen, seen_old) {
            (Ok(seen), Ok(seen_old)) => {
                review::call(
                    cx,
                    matched.webhook,
                    (request, version),
                    seen.as_deref(),
                    seen_old.as_deref(),
                    Phase::Validating,
                )
                .await
            }
            (Err(err), _) | (_, Err(err)) => Err(review::Failure::Refused(err)),
        };
        (matched.webhook, answer)
    });
    let mut refusal = None;
    for (webhook, answer) in futures_util::future::join_all(calls).await {
        let refused = match answer {
            Ok(answer) => {
                warnings.extend(answer.warnings);
                audit::annotate_for(request, &webhook.name, &answer.audit_annotations);
                (!answer.allowed)
                    .then(|| ApiError::webhook_denied(request.subject(), &webhook.name, answer.result.as_ref()))
            }
            Err(review::Failure::Refused(err)) => Some(err),
            Err(review::Failure::Call(reason)) if webhook.ignores_failures() => {
                tracing::warn!(webhook = %webhook.name, %reason, "failed calling webhook, failing open");
                None
            }
            Err(review::Failure::Call(reason)) => Some(failed(webhook, &reason)),
        };
        refusal = refusal.or(refused);
    }
    match refusal {
        Some(err) => Err(err.after_warnings(&warnings)),
        None => Ok(warnings),
    }
}

/// `Internal error occurred: failed calling webhook "x": <reason>` (upstream's
/// `ErrCallingWebhook` under `failurePolicy: Fail`).
fn failed(webhook: &Webhook, reason: &str) -> ApiError {
    ApiError::internal_error(format!("failed calling webhook {:?}: {reason}", webhook.name))
}
