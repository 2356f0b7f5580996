//! The verbs every resource shares — get, list, create, update, patch, delete,
//! deletecollection, and their `/status` forms — written once over an [`Endpoint`] that says
//! what kind of resource is addressed and supplies its strategy. One module per verb family:
//! `read` (get, list), `create`, `update` (update, patch, apply, `/status`, `/scale`) and
//! `delete` (delete, deletecollection); this one holds what they share (the [`Endpoint`], the
//! query [`Params`], the [`Reply`]). Watches are `crate::watch`'s.
//!
//! Upstream: apiserver's `pkg/endpoints/handlers/{get,create,update,patch,delete}.go` and
//! `pkg/registry/generic/registry/store.go` (`GuaranteedUpdate`, finalizers, preconditions).

use std::sync::Arc;

use axum::http::StatusCode;
use crdctl_conversion::Shape;
use crdctl_model::field::{ErrorType, Path};
use crdctl_storage::{Entry, Store, StoreError};
use serde_json::Value;

use crate::admission;
use crate::error::{ApiError, ApiResult, Subject};
use crate::fieldmanager;
use crate::object::NameGenerator;
use crate::registry::builtin::{BuiltIn, CUSTOM_RESOURCE_DEFINITIONS};
use crate::registry::resource::{self, Part, Resource};
use crate::registry::scale;
use crate::registry::{Items, Registry, ServedCrd};
use crate::selector::FieldSelector;
use crate::table::Column;

mod create;
mod delete;
mod read;
mod update;

pub use create::{Managed, create, request_token};
pub use delete::{DeleteOptions, delete, delete_collection};
pub use read::{ListRead, get, list, read_list};
pub use update::{Change, update};

/// How long an update keeps retrying races it did not ask to detect (upstream's
/// `GuaranteedUpdate` retries for as long as the request may run; many writers on one object,
/// through several replicas, lose many races).
const UPDATE_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// What the verbs use of the server, borrowed from its state for one request.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// The store.
    pub store: &'a Arc<dyn Store>,
    /// The served CRDs.
    pub registry: &'a Registry,
    /// How names are drawn for `generateName`.
    pub names: &'a NameGenerator,
    /// What admission uses.
    pub admission: admission::Context<'a>,
    /// What strategies use.
    pub resources: resource::Context<'a>,
    /// Whether the garbage collector runs, so deletions may leave their dependents to it
    /// (upstream's `--enable-garbage-collector`).
    pub garbage_collector: bool,
}

/// A resource at a version, in a namespace or across all of them.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Which resource.
    pub served: Arc<dyn Resource>,
    /// The group, empty for core.
    pub group: String,
    /// The request version.
    pub version: String,
    /// The plural.
    pub resource: String,
    /// The namespace in the URL.
    pub namespace: Option<String>,
    /// The object kind.
    pub type_kind: String,
    /// The list kind.
    pub list_kind: String,
    /// Whether objects are namespaced.
    pub namespaced: bool,
}

/// What part of an object a request addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The object itself.
    Main,
    /// `/status`: only `status` changes.
    Status,
    /// `/scale`: the request reads and writes an `autoscaling/v1` `Scale`.
    Scale,
    /// `/token` of a ServiceAccount: a `TokenRequest` is created.
    Token,
    /// `/finalize` of a namespace: only `spec.finalizers` changes.
    Finalize,
}

impl Subresource {
    /// The name in the URL (empty for the object itself).
    pub fn name(self) -> &'static str {
        match self {
            Subresource::Main => "",
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Token => "token",
            Subresource::Finalize => "finalize",
        }
    }

    /// The part of the object a write here changes.
    pub(crate) fn part(self) -> Part {
        match self {
            Subresource::Status => Part::Status,
            Subresource::Finalize => Part::Finalizers,
            Subresource::Main | Subresource::Scale | Subresource::Token => Part::Main,
        }
    }
}

/// Query parameters the verbs read.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Params {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit`.
    pub limit: Option<usize>,
    /// `continue`.
    #[serde(rename = "continue")]
    pub continue_: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
    /// `watch`.
    pub watch: Option<String>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: Option<bool>,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u64>,
    /// `fieldValidation`.
    pub field_validation: Option<String>,
    /// `dryRun`.
    pub dry_run: Option<String>,
    /// `includeObject` for tables.
    pub include_object: Option<String>,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// `force` (server-side apply).
    pub force: Option<bool>,
    /// `propagationPolicy` (a DELETE without a body).
    pub propagation_policy: Option<String>,
    /// `orphanDependents` (a DELETE without a body; deprecated).
    pub orphan_dependents: Option<bool>,
    /// The request's `User-Agent`, for the default field manager; set by the handler.
    #[serde(skip)]
    pub user_agent: Option<String>,
}

impl Params {
    /// The field manager of a write: `fieldManager`, else the user agent's first segment.
    pub fn manager(&self) -> String {
        self.field_manager.clone().unwrap_or_else(|| fieldmanager::default_manager(self.user_agent.as_deref()))
    }

    /// Whether this is a watch request.
    pub fn is_watch(&self) -> bool {
        matches!(self.watch.as_deref(), Some("true" | "1"))
    }

    /// The query's `dryRun`, for a write whose options are of kind `options`.
    pub fn dry_run_of(&self, options: &str) -> ApiResult<DryRun> {
        DryRun::parse(self.dry_run.as_deref().as_slice(), options)
    }
}

/// A write's `dryRun` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DryRun {
    /// The write is applied.
    #[default]
    No,
    /// `dryRun=All`: every stage runs, nothing is stored.
    All,
}

impl DryRun {
    /// The directives a write names, as upstream's `ValidateDryRun` takes them: `All`, or
    /// none; anything else is refused as invalid options of kind `options` (`CreateOptions`,
    /// `DeleteOptions`, …) before the request does anything.
    pub fn parse(directives: &[&str], options: &str) -> ApiResult<DryRun> {
        match directives {
            [] => Ok(DryRun::No),
            _ if directives.iter().all(|directive| *directive == "All") => Ok(DryRun::All),
            _ => {
                let quoted: Vec<String> = directives.iter().map(|d| crdctl_model::go::quote(d)).collect();
                let value = format!("[]string{{{}}}", quoted.join(", "));
                let error = Path::new("dryRun").error(ErrorType::NotSupported(value, vec!["All".into()]), "");
                Err(ApiError::invalid("meta.k8s.io", options, "", &[error]))
            }
        }
    }
}

/// Where a write verb writes, chosen once per request from its [`DryRun`]: the store, or a
/// [`crdctl_storage::dry_run::DryRun`] over it, which checks each write as the store would and
/// applies none. A dry run so takes every step of the real write — names, addresses, admission,
/// validation, preconditions, conflicts — through the same code, and nothing follows it: no
/// revision, no watch event, no lifecycle.
pub(crate) struct Writes {
    store: Arc<dyn Store>,
    dry_run: DryRun,
}

impl Writes {
    pub(crate) fn new(cx: Context<'_>, dry_run: DryRun) -> Writes {
        let store = match dry_run {
            DryRun::No => Arc::clone(cx.store),
            DryRun::All => Arc::new(crdctl_storage::dry_run::DryRun::over(Arc::clone(cx.store))),
        };
        Writes { store, dry_run }
    }

    pub(crate) fn store(&self) -> &dyn Store {
        &*self.store
    }

    pub(crate) fn dry_run(&self) -> DryRun {
        self.dry_run
    }

    /// What follows a write (a CRD served); nothing follows a dry run.
    async fn after_write(&self, cx: Context<'_>, endpoint: &Endpoint, revision: u64) {
        if self.dry_run == DryRun::No {
            endpoint.served.after_write(cx.resources, revision).await;
        }
    }
}

/// A response body with the warnings to send with it.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub code: StatusCode,
    /// The body; for a list, without its `items`.
    pub body: Body,
    /// A list's `items`, kept apart so that text a webhook answered is written out as it is.
    pub items: Option<Items>,
    /// `Warning` header texts.
    pub warnings: Vec<String>,
}

/// A reply's body: a value, or one object's JSON text as read from the store, which is written
/// out without being parsed.
#[derive(Debug)]
pub enum Body {
    /// A value.
    Value(Value),
    /// An object's JSON text.
    Json(Vec<u8>),
}

impl Body {
    /// Whether this is a `Status` (which text never is: text is a stored object).
    pub fn is_status(&self) -> bool {
        matches!(self, Body::Value(value) if value["kind"] == "Status")
    }

    /// The body as a value, parsing text.
    pub fn into_value(self) -> ApiResult<Value> {
        match self {
            Body::Value(value) => Ok(value),
            Body::Json(text) => {
                serde_json::from_slice(&text).map_err(|err| ApiError::internal(format!("stored object: {err}")))
            }
        }
    }
}

impl Reply {
    fn ok(body: Value) -> Reply {
        Reply::with_warnings(StatusCode::OK, body, Vec::new())
    }

    fn with_warnings(code: StatusCode, body: Value, warnings: Vec<String>) -> Reply {
        Reply::of(code, Body::Value(body), warnings)
    }

    fn of(code: StatusCode, body: Body, warnings: Vec<String>) -> Reply {
        Reply { code, body, items: None, warnings }
    }

    /// The body as JSON, with the list's items.
    pub fn into_json(self) -> Vec<u8> {
        let mut out = match self.body {
            // Writing a value into memory cannot fail.
            Body::Value(value) => serde_json::to_vec(&value).unwrap_or_default(),
            Body::Json(text) => text,
        };
        if let Some(items) = &self.items
            && out.pop() == Some(b'}')
        {
            out.extend_from_slice(if out.len() > 1 { b",\"items\":" } else { b"\"items\":" });
            items.write_array(&mut out);
            out.push(b'}');
        }
        out
    }
}

impl Endpoint {
    /// A resource of the built-in table, in `namespace` or across all.
    pub fn built_in(resource: &'static BuiltIn, namespace: Option<String>) -> Endpoint {
        Endpoint {
            served: Arc::new(resource),
            group: resource.group.into(),
            version: resource.version.into(),
            resource: resource.resource.into(),
            namespace,
            type_kind: resource.kind.into(),
            list_kind: format!("{}List", resource.kind),
            namespaced: resource.namespaced,
        }
    }

    /// A CRD's objects at `version`, in `namespace` or across all.
    pub fn custom(served: Arc<ServedCrd>, version: &str, namespace: Option<String>) -> Endpoint {
        Endpoint {
            group: served.group().to_string(),
            version: version.to_string(),
            resource: served.plural().to_string(),
            namespace,
            type_kind: served.kind().to_string(),
            list_kind: served.list_kind(),
            namespaced: served.namespaced(),
            served,
        }
    }

    /// `apiextensions.k8s.io/v1` CustomResourceDefinitions.
    pub fn crds() -> Endpoint {
        Endpoint::built_in(&CUSTOM_RESOURCE_DEFINITIONS, None)
    }

    /// `v1`, `apiextensions.k8s.io/v1`, `<group>/<version>`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The admission attributes of a write of object `name`.
    pub fn admission<'a>(
        &'a self,
        operation: admission::Operation,
        (name, subresource): (&'a str, &'a str),
        dry_run: DryRun,
        field_manager: Option<&'a str>,
        user: &'a crate::auth::User,
    ) -> admission::Request<'a> {
        admission::Request {
            operation,
            group: &self.group,
            version: &self.version,
            resource: &self.resource,
            subresource,
            kind: &self.type_kind,
            name,
            namespace: self.namespace.as_deref(),
            dry_run: dry_run == DryRun::All,
            field_manager,
            user,
        }
    }

    /// The subject of errors about `name`.
    pub fn subject<'a>(&'a self, name: &'a str) -> Subject<'a> {
        Subject { group: &self.group, resource: &self.resource, name }
    }

    /// The store key of object `name` in the request's namespace.
    pub fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix())
    }

    /// The store prefix a list or watch reads.
    pub fn prefix(&self) -> String {
        self.served.prefix(self.namespace.as_deref())
    }

    /// What a write at `subresource` may own in `managedFields`.
    pub fn field_scope(&self, subresource: Subresource) -> Option<fieldmanager::Scope<'_>> {
        if subresource == Subresource::Token {
            return None;
        }
        Some(fieldmanager::Scope {
            schema: self.served.managed_schema(&self.version)?,
            api_version: self.api_version(),
            subresource: subresource.name(),
            has_status: self.has_status(),
        })
    }

    /// A write from `old` to `new` (both at the request's version) converted to each other
    /// version the managers of `managed` recorded fields in.
    async fn in_manager_versions(
        &self,
        managed: &Value,
        old: &Value,
        new: &Value,
    ) -> ApiResult<fieldmanager::OtherVersions> {
        self.served.in_manager_versions(&self.api_version(), managed, (old, new)).await
    }

    /// Whether objects have a protobuf message.
    pub fn speaks_protobuf(&self) -> bool {
        self.served.speaks_protobuf() && crate::protobuf::message(&self.api_version(), &self.type_kind).is_some()
    }

    /// Whether the request version has `subresource`.
    pub fn has(&self, subresource: resource::Subresource) -> bool {
        self.served.subresource(&self.version, subresource.name()) == Some(subresource)
    }

    /// Whether the request version has the status subresource.
    pub fn has_status(&self) -> bool {
        self.has(resource::Subresource::Status)
    }

    /// Whether `subresource` is one only a kubelet could answer (`pods/exec`, `log`, …).
    pub fn runs_on_a_node(&self, subresource: &str) -> bool {
        matches!(self.served.subresource(&self.version, subresource), Some(resource::Subresource::Node(_)))
    }

    /// Where the `Scale` of the version's objects comes from, if it has the scale subresource.
    pub fn scale_paths(&self) -> Option<scale::Paths<'_>> {
        self.served.scale_paths(&self.version)
    }

    /// The field selector of a list or watch of this resource.
    pub fn field_selector(&self, params: &Params) -> ApiResult<FieldSelector> {
        let fields = self.served.selectable_fields();
        FieldSelector::parse(params.field_selector.as_deref().unwrap_or_default(), self.namespaced, fields)
    }

    /// The Table columns.
    pub fn columns(&self) -> Vec<Column> {
        self.served.columns(&self.version)
    }

    /// Stored objects as the client sees them: converted to the request version for custom
    /// resources.
    pub async fn present(&self, objects: Vec<Value>, shape: Shape) -> ApiResult<Vec<Value>> {
        self.present_items(objects, shape).await?.into_values()
    }

    /// [`Endpoint::present`], keeping what a webhook converted as text.
    pub async fn present_items(&self, objects: Vec<Value>, shape: Shape) -> ApiResult<Items> {
        self.served.present(objects, &self.version, shape).await
    }

    /// [`Endpoint::present_items`] for objects as the store holds them, unparsed where the
    /// stored text is what the client sees.
    pub async fn present_stored(&self, entries: &[Entry], shape: Shape) -> ApiResult<Items> {
        self.served.present_stored(entries, &self.version, shape).await
    }

    async fn present_one(&self, object: Value) -> ApiResult<Value> {
        self.present(vec![object], Shape::Object)
            .await?
            .pop()
            .ok_or_else(|| ApiError::internal("conversion lost the object"))
    }

    async fn present_entry(&self, entry: &Entry) -> ApiResult<Value> {
        self.present_one(decode_entry(entry)?).await
    }

    /// The object just created as `entry`, without parsing back the bytes it was stored as:
    /// with the value at hand, presenting it costs less than reading its text.
    async fn present_created(&self, mut object: Value, entry: &Entry) -> ApiResult<Value> {
        // A dry run's create has no revision, and its object no `resourceVersion`, as upstream's.
        if entry.mod_revision > 0 {
            crate::object::set_resource_version(&mut object, entry.mod_revision);
        }
        if self.served.stored_as_presented(&self.version) {
            return Ok(object);
        }
        self.present_one(object).await
    }

    /// A stored object as a reply's body: text from the store to the response, unless it needs
    /// a webhook ([`Endpoint::present_stored`]); cheaper than parsing it.
    async fn reply_entry(&self, entry: &Entry) -> ApiResult<Body> {
        match self.present_stored(std::slice::from_ref(entry), Shape::Object).await? {
            Items::Json(mut texts) => texts.pop().map(Body::Json),
            Items::Values(mut values) => values.pop().map(Body::Value),
        }
        .ok_or_else(|| ApiError::internal("conversion lost the object"))
    }
}

pub use crate::object::decode_entry;

fn store_error(endpoint: &Endpoint, name: &str) -> impl Fn(StoreError) -> ApiError {
    move |err| ApiError::from_store(err, endpoint.subject(name))
}

/// Drops `managedFields` from an object the store found too large, so the write can be tried
/// once more, as upstream's create, update and (non-apply) patch handlers do; whether there
/// was anything to drop.
fn without_managed_fields(object: &mut Value) -> bool {
    crate::object::meta_mut(object).remove("managedFields").is_some()
}

/// DeleteOptions' preconditions.
fn check_preconditions(endpoint: &Endpoint, name: &str, object: &Value, options: Option<&Value>) -> ApiResult<()> {
    let Some(preconditions) = options.and_then(|o| o.get("preconditions")) else { return Ok(()) };
    for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        if let Some(expected) = preconditions.get(field).and_then(Value::as_str) {
            let actual = crate::object::meta_str(object, field).unwrap_or_default();
            if expected != actual {
                return Err(ApiError::conflict_with(
                    endpoint.subject(name),
                    &format!(
                        "Precondition failed: {label} in precondition: {expected}, {label} in object meta: {actual}"
                    ),
                ));
            }
        }
    }
    Ok(())
}
