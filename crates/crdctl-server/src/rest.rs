//! The verbs every resource shares — get, list, create, update, patch, delete,
//! deletecollection, and their `/status` forms — written once over an [`Endpoint`] that says
//! what kind of resource is addressed and supplies its strategy.
//!
//! Upstream: apiserver's `pkg/endpoints/handlers/{get,create,update,patch,delete}.go` and
//! `pkg/registry/generic/registry/store.go` (`GuaranteedUpdate`, finalizers, preconditions).

use std::sync::Arc;

use axum::http::StatusCode;
use base64::Engine;
use crdctl_conversion::Shape;
use crdctl_model::field::{self, Path};
use crdctl_storage::{Entry, ListOptions, Revision, StoreError};
use serde_json::{Value, json};

use crate::AppState;
use crate::error::{ApiError, ApiResult, Subject};
use crate::fieldmanager;
use crate::negotiate::{BodyType, PATCH_TYPES, Representation};
use crate::registry::builtin::service::{self, Reserved};
use crate::registry::builtin::{BuiltIn, Strategy, Subresource as BuiltInSubresource};
use crate::registry::scale;
use crate::registry::unknown_fields::FieldValidation;
use crate::registry::{Items, ServedCrd, crd, custom_resource, event, namespace};
use crate::selector::{FieldSelector, LabelSelector, SelectableFields};
use crate::table::Column;

/// How long an update keeps retrying races it did not ask to detect (upstream's
/// `GuaranteedUpdate` retries for as long as the request may run; many writers on one object,
/// through several replicas, lose many races).
const UPDATE_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// What kind of resource a request addresses.
#[derive(Debug, Clone)]
pub enum Kind {
    /// Core `v1` namespaces.
    Namespace,
    /// `apiextensions.k8s.io/v1` CustomResourceDefinitions.
    Crd,
    /// Objects of a CRD, at a served version.
    Custom(Arc<ServedCrd>),
    /// Events, in the core `v1` or the `events.k8s.io/v1` shape.
    Event(event::Shape),
    /// A resource of the built-in table.
    BuiltIn(&'static BuiltIn),
}

/// A resource at a version, in a namespace or across all of them.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Which resource.
    pub kind: Kind,
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

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: Revision,
    start: String,
}

impl Endpoint {
    /// `apiextensions.k8s.io/v1` CustomResourceDefinitions.
    pub fn crds() -> Endpoint {
        Endpoint {
            kind: Kind::Crd,
            group: crd::GROUP.into(),
            version: "v1".into(),
            resource: "customresourcedefinitions".into(),
            namespace: None,
            type_kind: "CustomResourceDefinition".into(),
            list_kind: "CustomResourceDefinitionList".into(),
            namespaced: false,
        }
    }

    /// `v1`, `apiextensions.k8s.io/v1`, `<group>/<version>`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The subject of errors about `name`.
    pub fn subject<'a>(&'a self, name: &'a str) -> Subject<'a> {
        Subject { group: &self.group, resource: &self.resource, name }
    }

    /// The store key of object `name` in the request's namespace.
    pub fn key(&self, name: &str) -> String {
        match &self.kind {
            Kind::Namespace => namespace::key(name),
            Kind::Crd => crd::key(name),
            Kind::Custom(served) => format!("{}{name}", served.prefix(self.namespace.as_deref())),
            Kind::Event(_) => event::key(self.namespace.as_deref(), name),
            Kind::BuiltIn(resource) => format!("{}{name}", resource.namespace_prefix(self.namespace.as_deref())),
        }
    }

    /// The store prefix a list or watch reads.
    pub fn prefix(&self) -> String {
        match &self.kind {
            Kind::Namespace => namespace::PREFIX.to_string(),
            Kind::Crd => crate::registry::CRD_PREFIX.to_string(),
            Kind::Custom(served) => served.prefix(self.namespace.as_deref()),
            Kind::Event(_) => event::prefix(self.namespace.as_deref()),
            Kind::BuiltIn(resource) => resource.namespace_prefix(self.namespace.as_deref()),
        }
    }

    /// What a write at `subresource` may own in `managedFields`; events keep none.
    pub fn field_scope(&self, subresource: Subresource) -> Option<fieldmanager::Scope<'_>> {
        let sub = match subresource {
            Subresource::Main => "",
            Subresource::Status => "status",
            Subresource::Scale => "scale",
        };
        let schema = match &self.kind {
            Kind::Custom(served) => served.schema(&self.version),
            Kind::BuiltIn(resource) => resource.schema(),
            Kind::Crd | Kind::Namespace => None,
            Kind::Event(_) => return None,
        };
        Some(fieldmanager::Scope {
            schema,
            api_version: self.api_version(),
            subresource: sub,
            has_status: self.has_status(),
        })
    }

    /// A write from `old` to `new` (both at the request's version) converted to each other
    /// version the managers of `managed` recorded fields in, and compared there, as upstream's
    /// field manager converts a write to each manager's version; versions the CRD no longer has
    /// are left out.
    async fn in_manager_versions(
        &self,
        managed: &Value,
        old: &Value,
        new: &Value,
    ) -> ApiResult<fieldmanager::OtherVersions> {
        let mut others = fieldmanager::OtherVersions::default();
        let Kind::Custom(served) = &self.kind else { return Ok(others) };
        for api_version in fieldmanager::other_manager_versions(managed, &self.api_version()) {
            let version = api_version.strip_prefix(&format!("{}/", self.group)).filter(|v| served.has_version(v));
            let Some(version) = version else { continue };
            let converted = served.convert(vec![old.clone(), new.clone()], version, Shape::List).await?;
            let [old, new] = <[Value; 2]>::try_from(converted)
                .map_err(|_| ApiError::internal("conversion changed the number of objects"))?;
            others.compared(&api_version, &old, &new, served.schema(version));
        }
        Ok(others)
    }

    /// Whether the resource has a verb, as discovery lists it.
    pub fn allows(&self, verb: &str) -> bool {
        match &self.kind {
            Kind::Namespace => namespace::VERBS.contains(&verb),
            Kind::BuiltIn(resource) => resource.verbs.contains(&verb),
            Kind::Crd | Kind::Custom(_) | Kind::Event(_) => true,
        }
    }

    /// Reserves what a written object needs from shared ranges (a Service's ClusterIP and node
    /// ports), given back with [`Reserved::release`] if the write fails.
    async fn reserve(&self, state: &AppState, object: &mut Value, old: Option<&Value>) -> ApiResult<Reserved> {
        match &self.kind {
            Kind::BuiltIn(resource) if matches!(resource.strategy, Strategy::Service) => {
                service::allocate(&*state.store, object, old, &state.config.service_ranges).await
            }
            _ => Ok(Reserved::default()),
        }
    }

    /// Gives back what `old` held and `new` (if the object is still there) does not.
    pub async fn release(&self, state: &AppState, old: &Value, new: Option<&Value>) {
        if let Kind::BuiltIn(resource) = &self.kind {
            resource.release(&*state.store, old, new).await;
        }
    }

    /// Whether `subresource` is one only a kubelet could answer (`pods/exec`, `log`, …).
    pub fn runs_on_a_node(&self, subresource: &str) -> bool {
        let Kind::BuiltIn(resource) = &self.kind else { return false };
        matches!(resource.subresource(subresource), Some(BuiltInSubresource::Node(_)))
    }

    /// Where the `Scale` of the version's objects comes from, if it has the scale subresource.
    pub fn scale_paths(&self) -> Option<scale::Paths<'_>> {
        match &self.kind {
            Kind::Custom(served) => scale::Paths::of_crd(served, &self.version),
            Kind::BuiltIn(resource) if resource.has(BuiltInSubresource::Scale) => {
                Some(scale::Paths::of_workload(resource.kind))
            }
            _ => None,
        }
    }

    /// Whether the version has the status subresource.
    pub fn has_status(&self) -> bool {
        match &self.kind {
            Kind::Custom(served) => served.has_status(&self.version),
            Kind::Crd | Kind::Namespace => true,
            Kind::BuiltIn(resource) => resource.has(BuiltInSubresource::Status),
            Kind::Event(_) => false,
        }
    }

    /// The field selector of a list or watch of this resource.
    pub fn field_selector(&self, params: &Params) -> ApiResult<FieldSelector> {
        let fields = match &self.kind {
            Kind::Namespace => namespace::SELECTABLE_FIELDS,
            Kind::Event(_) => event::SELECTABLE_FIELDS,
            Kind::BuiltIn(resource) => resource.fields,
            Kind::Crd | Kind::Custom(_) => SelectableFields::METADATA,
        };
        FieldSelector::parse(params.field_selector.as_deref().unwrap_or_default(), self.namespaced, fields)
    }

    /// The Table columns.
    pub fn columns(&self) -> Vec<Column> {
        match &self.kind {
            Kind::Custom(served) => crate::table::custom_resource_columns(served.printer_columns(&self.version)),
            Kind::BuiltIn(resource) => (resource.columns)(),
            Kind::Crd | Kind::Namespace | Kind::Event(_) => crate::table::created_at_columns(),
        }
    }

    /// Stored objects as the client sees them: converted to the request version for custom
    /// resources.
    pub async fn present(&self, objects: Vec<Value>, shape: Shape) -> ApiResult<Vec<Value>> {
        self.present_items(objects, shape).await?.into_values()
    }

    /// [`Endpoint::present`], keeping what a webhook converted as text.
    pub async fn present_items(&self, objects: Vec<Value>, shape: Shape) -> ApiResult<Items> {
        match &self.kind {
            Kind::Custom(served) => served.read_items_as(objects, &self.version, shape).await,
            Kind::Crd | Kind::Namespace | Kind::BuiltIn(_) => Ok(Items::Values(objects)),
            Kind::Event(shape) => {
                Ok(Items::Values(objects.into_iter().map(|object| event::present(object, *shape)).collect()))
            }
        }
    }

    /// [`Endpoint::present_items`] for objects as the store holds them.
    pub async fn present_stored(&self, entries: &[Entry], shape: Shape) -> ApiResult<Items> {
        match &self.kind {
            Kind::Custom(served) => served.read_stored_as(entries, &self.version, shape).await,
            _ => self.present_items(entries.iter().map(decode_entry).collect::<ApiResult<_>>()?, shape).await,
        }
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
    /// with the value at hand, presenting it costs less than reading its text. A custom
    /// resource created at the version it is stored in was pruned and defaulted with that
    /// version's schema on its way in ([`custom_resource::admit`]): it is already what a read
    /// would make of it.
    async fn present_created(&self, mut object: Value, entry: &Entry) -> ApiResult<Value> {
        crate::object::set_resource_version(&mut object, entry.mod_revision);
        match &self.kind {
            Kind::Custom(served) if served.storage_version() == self.version => Ok(object),
            _ => self.present_one(object).await,
        }
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

    /// Creates a terminating CRD's refusal.
    fn refuse_if_terminating(&self, name: &str) -> ApiResult<()> {
        if let Kind::Custom(served) = &self.kind
            && served.terminating()
        {
            return Err(ApiError::forbidden(
                self.subject(name),
                "create not allowed while custom resource definition is terminating",
            ));
        }
        Ok(())
    }
}

pub use crate::registry::decode_entry;

/// The bytes to store: the object without its `resourceVersion`, which is the store's revision.
fn encode(object: &Value) -> ApiResult<Vec<u8>> {
    let encoded = match crate::object::meta_field(object, "resourceVersion") {
        None => serde_json::to_vec(object),
        Some(_) => {
            let mut object = object.clone();
            crate::object::meta_mut(&mut object).remove("resourceVersion");
            serde_json::to_vec(&object)
        }
    };
    encoded.map_err(|err| ApiError::internal(err.to_string()))
}

fn store_error(endpoint: &Endpoint, name: &str) -> impl Fn(StoreError) -> ApiError {
    move |err| ApiError::from_store(err, endpoint.subject(name))
}

/// GET one object.
pub async fn get(state: &AppState, endpoint: &Endpoint, name: &str) -> ApiResult<Reply> {
    let entry = state.store.get(&endpoint.key(name)).await.map_err(store_error(endpoint, name))?;
    let entry = entry.ok_or_else(|| ApiError::not_found(endpoint.subject(name)))?;
    Ok(Reply::of(StatusCode::OK, endpoint.reply_entry(&entry).await?, Vec::new()))
}

/// One read of a list.
pub struct ListRead {
    /// The entries whose objects match the selectors, as stored.
    pub entries: Vec<Entry>,
    /// The revision they were read at.
    pub revision: Revision,
    /// Where the next page starts, when there is one.
    pub continue_token: Option<String>,
    /// About how many objects follow, when known (a page without selectors).
    pub remaining: Option<u64>,
}

impl ListRead {
    /// The objects, with their `resourceVersion`.
    pub fn objects(&self) -> ApiResult<Vec<Value>> {
        self.entries.iter().map(decode_entry).collect()
    }
}

/// Whether a stored object matches the selectors. Only its name, namespace and labels are read
/// unless a field selector names other fields: a list without selectors takes every entry unread.
fn selected(entry: &Entry, labels: &LabelSelector, fields: &FieldSelector) -> ApiResult<bool> {
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Option<Metadata>,
    }
    #[derive(serde::Deserialize, serde::Serialize)]
    struct Metadata {
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        labels: Option<Value>,
    }
    if labels.is_empty() && fields.is_empty() {
        return Ok(true);
    }
    // A field selector on other fields reads the whole object; otherwise metadata is enough, and
    // what that view cannot read (a key written twice, say), the whole object can.
    let metadata_view = fields.reads_only_metadata().then(|| serde_json::from_slice::<Object>(&entry.value).ok());
    let view = match metadata_view.flatten() {
        Some(Object { metadata }) => json!({"metadata": metadata}),
        None => decode_entry(entry)?,
    };
    Ok(labels.matches(&view) && fields.matches(&view))
}

/// Reads a list, or one page of it.
pub async fn read_list(state: &AppState, endpoint: &Endpoint, params: &Params) -> ApiResult<ListRead> {
    let labels = LabelSelector::parse(params.label_selector.as_deref().unwrap_or_default())?;
    let fields = endpoint.field_selector(params)?;
    let prefix = endpoint.prefix();
    let (mut revision, mut min_revision, mut start_after) = match params.continue_.as_deref().filter(|c| !c.is_empty())
    {
        Some(token) => {
            let token = decode_continue(token)?;
            (Some(token.rv), None, Some(format!("{prefix}{}", token.start)))
        }
        None => match list_revision(state, params).await? {
            ReadAt::Current => (None, None, None),
            ReadAt::Exact(revision) => (Some(revision), None, None),
            ReadAt::NotOlderThan(revision) => (None, Some(revision), None),
        },
    };
    let limit = params.limit.unwrap_or(0);
    let mut entries = Vec::new();
    loop {
        let page = state
            .store
            .list(ListOptions { prefix: &prefix, start_after: start_after.as_deref(), limit, revision, min_revision })
            .await
            .map_err(|err| match err {
                StoreError::Compacted { .. } if params.continue_.is_some() => ApiError::expired(EXPIRED_CONTINUE),
                other => ApiError::from_store(other, endpoint.subject("")),
            })?;
        revision = Some(page.revision);
        min_revision = None;
        start_after = page.entries.last().map(|e| e.key.clone());
        for entry in page.entries {
            if selected(&entry, &labels, &fields)? {
                entries.push(entry);
            }
        }
        let full = limit > 0 && entries.len() >= limit;
        if !page.more || limit == 0 || full {
            let revision = page.revision;
            let continue_token = match (&start_after, page.more) {
                (Some(last), true) => Some(encode_continue(revision, last.trim_start_matches(&prefix))),
                _ => None,
            };
            // As upstream: counted only when no selector filters what follows.
            let remaining = (page.more && labels.is_empty() && fields.is_empty()).then_some(page.remaining);
            return Ok(ListRead { entries, revision, continue_token, remaining });
        }
    }
}

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Which state a list reads, from `resourceVersion` and `resourceVersionMatch`.
enum ReadAt {
    /// `""`: the current state, from the store itself.
    Current,
    /// `Exact`: the state at that revision.
    Exact(Revision),
    /// `"0"` and `NotOlderThan`: any state at least that new (after checking it was reached),
    /// which the watch cache may serve.
    NotOlderThan(Revision),
}

async fn list_revision(state: &AppState, params: &Params) -> ApiResult<ReadAt> {
    let text = match params.resource_version.as_deref() {
        None | Some("") => return Ok(ReadAt::Current),
        Some("0") => return Ok(ReadAt::NotOlderThan(0)),
        Some(text) => text,
    };
    let requested = crate::object::parse_resource_version(text)?;
    match params.resource_version_match.as_deref() {
        Some("Exact") => Ok(ReadAt::Exact(requested)),
        _ => {
            let current = state.store.revision().await.map_err(|err| ApiError::unavailable(err.to_string()))?;
            if requested > current {
                return Err(ApiError::too_large_resource_version(requested, current));
            }
            Ok(ReadAt::NotOlderThan(requested))
        }
    }
}

fn encode_continue(revision: Revision, start: &str) -> String {
    let token = ContinueToken { v: "meta.k8s.io/v1".into(), rv: revision, start: start.to_string() };
    base64::engine::general_purpose::URL_SAFE.encode(serde_json::to_vec(&token).unwrap_or_default())
}

fn decode_continue(token: &str) -> ApiResult<ContinueToken> {
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE.decode(token).map_err(|_| bad())?;
    serde_json::from_slice(&bytes).map_err(|_| bad())
}

/// GET a list, to be rendered as `representation`. A list rendered as itself stays text from
/// the store; a `Table` or metadata view reads values, so it is read as values.
pub async fn list(
    state: &AppState,
    endpoint: &Endpoint,
    params: &Params,
    representation: Representation,
) -> ApiResult<Reply> {
    let read = read_list(state, endpoint, params).await?;
    let items = match representation {
        Representation::Object => endpoint.present_stored(&read.entries, Shape::List).await?,
        Representation::Table | Representation::Metadata => {
            endpoint.present_items(read.objects()?, Shape::List).await?
        }
    };
    let mut metadata = json!({"resourceVersion": read.revision.to_string()});
    if let Some(token) = read.continue_token {
        crate::object::set(&mut metadata, "continue", Value::String(token));
    }
    if let Some(remaining) = read.remaining {
        crate::object::set(&mut metadata, "remainingItemCount", remaining.into());
    }
    let body = json!({"apiVersion": endpoint.api_version(), "kind": endpoint.list_kind, "metadata": metadata});
    Ok(Reply { items: Some(items), ..Reply::ok(body) })
}

/// Who owns the fields of a created object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Managed {
    /// The request's manager, as an `Update`.
    Record,
    /// Already set: a server-side apply created it.
    Applied,
}

/// How many names a create with `generateName` tries (upstream's
/// `maxNameGenerationCreateAttempts`).
const GENERATE_NAME_ATTEMPTS: u32 = 8;

/// POST: create an object.
pub async fn create(
    state: &AppState,
    endpoint: &Endpoint,
    mut object: Value,
    params: &Params,
    managed: Managed,
) -> ApiResult<Reply> {
    if let Kind::BuiltIn(resource) = &endpoint.kind
        && let Some(answered) = resource.review(&mut object, &state.config)?
    {
        return Ok(Reply::of(StatusCode::CREATED, Body::Value(answered), Vec::new()));
    }
    let mut warnings = Vec::new();
    let generate_from = crate::object::name_to_generate(&object);
    if let Some(prefix) = &generate_from {
        crate::object::set_name(&mut object, state.config.names.generate(prefix));
    }
    if let Some(namespace) = &endpoint.namespace {
        let body_namespace = crate::object::meta_str(&object, "namespace").unwrap_or(namespace);
        if body_namespace != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        require_namespace(state, namespace, endpoint.subject(crate::object::name(&object))).await?;
    }
    match &endpoint.kind {
        Kind::Namespace => namespace::prepare_create(&mut object)?,
        Kind::Crd => crd::prepare_create(&mut object, &state.registry)?,
        Kind::Custom(served) => {
            let field_validation = FieldValidation::parse(params.field_validation.as_deref())?;
            warnings = custom_resource::admit(&mut object, None, served, &endpoint.version, field_validation)?;
            custom_resource::prepare_create(&mut object, served, &endpoint.version, endpoint.namespace.as_deref());
        }
        Kind::Event(shape) => {
            object = event::to_storage(object, *shape)?;
            let violations = crate::object::subdomain_name_errors(&object);
            if !violations.is_empty() {
                let name = crate::object::name(&object).to_string();
                return Err(ApiError::invalid(&endpoint.group, "Event", &name, &violations));
            }
            crate::object::prepare_create(&mut object, endpoint.namespace.as_deref());
        }
        Kind::BuiltIn(resource) => {
            let field_validation = FieldValidation::parse(params.field_validation.as_deref())?;
            warnings = resource.prepare_create(&mut object, field_validation)?;
            crate::object::prepare_create(&mut object, endpoint.namespace.as_deref());
        }
    }
    if managed == Managed::Record
        && let Some(scope) = endpoint.field_scope(Subresource::Main)
    {
        let now = crate::object::now_timestamp();
        let none = fieldmanager::OtherVersions::default();
        fieldmanager::record_update(None, &mut object, &scope, &params.manager(), &now, &none);
    }
    let mut name = crate::object::name(&object).to_string();
    endpoint.refuse_if_terminating(&name)?;
    let mut stored = match &endpoint.kind {
        Kind::Custom(served) => served.to_storage(object).await?,
        _ => object,
    };
    if params.dry_run.is_some() {
        let body = endpoint.present_one(stored).await?;
        return Ok(Reply::with_warnings(StatusCode::CREATED, body, warnings));
    }
    let reserved = endpoint.reserve(state, &mut stored, None).await?;
    // A generated name that exists already is drawn again, as kube-apiserver does since 1.32
    // (`RetryGenerateName`): the whole create is tried with a new name up to 8 times.
    let mut attempts = 1;
    let entry = loop {
        let key = endpoint.key(&name);
        let written = match state.store.create(&key, encode(&stored)?).await {
            Err(StoreError::TooLarge(_)) if without_managed_fields(&mut stored) => {
                state.store.create(&key, encode(&stored)?).await
            }
            written => written,
        };
        match (written, &generate_from) {
            (Err(StoreError::AlreadyExists { .. }), Some(prefix)) if attempts < GENERATE_NAME_ATTEMPTS => {
                attempts += 1;
                name = state.config.names.generate(prefix);
                crate::object::set_name(&mut stored, name.clone());
            }
            (Err(StoreError::AlreadyExists { .. }), Some(_)) => {
                reserved.release(&*state.store).await;
                return Err(ApiError::generate_name_conflict(endpoint.subject(&name)));
            }
            (Err(err), _) => {
                reserved.release(&*state.store).await;
                return Err(store_error(endpoint, &name)(err));
            }
            (Ok(entry), _) => break entry,
        }
    };
    match endpoint.kind {
        Kind::Crd => state.registry.wait_for(entry.mod_revision).await,
        Kind::Namespace => namespace::create_default_service_account(&*state.store, &name).await,
        _ => {}
    }
    let body = endpoint.present_created(stored, &entry).await?;
    Ok(Reply::with_warnings(StatusCode::CREATED, body, warnings))
}

/// Drops `managedFields` from an object the store found too large, so the write can be tried
/// once more, as upstream's create, update and (non-apply) patch handlers do; whether there
/// was anything to drop.
fn without_managed_fields(object: &mut Value) -> bool {
    crate::object::meta_mut(object).remove("managedFields").is_some()
}

/// As the NamespaceLifecycle admission plugin (a create in a terminating namespace is refused
/// about the object `creating`): the namespace from the watch cache if it is
/// there (a stale answer errs only towards a recently deleted namespace, as upstream's informer
/// does), else a current read, so a namespace created a moment ago is found.
async fn require_namespace(state: &AppState, name: &str, creating: Subject<'_>) -> ApiResult<()> {
    let key = namespace::key(name);
    let unavailable = |err: StoreError| ApiError::unavailable(err.to_string());
    // The namespace's own key sorts first under it: one entry is enough.
    let cached = ListOptions { prefix: &key, limit: 1, min_revision: Some(0), ..Default::default() };
    let cached = state.store.list(cached).await.map_err(unavailable)?.entries.into_iter().find(|e| e.key == key);
    let found = match cached {
        Some(entry) => Some(entry),
        None => state.store.get(&key).await.map_err(unavailable)?,
    };
    match found {
        Some(entry) if being_deleted(&entry)? => Err(ApiError::forbidden(
            creating,
            &format!("unable to create new content in namespace {name} because it is being terminated"),
        )),
        Some(_) => Ok(()),
        None => Err(ApiError::not_found(namespace::subject(name))),
    }
}

/// Whether a stored object has a `deletionTimestamp`, reading nothing else of it.
fn being_deleted(entry: &Entry) -> ApiResult<bool> {
    #[derive(serde::Deserialize)]
    struct Object {
        #[serde(default)]
        metadata: Metadata,
    }
    #[derive(serde::Deserialize, Default)]
    struct Metadata {
        #[serde(rename = "deletionTimestamp")]
        deletion_timestamp: Option<serde::de::IgnoredAny>,
    }
    let object: Object = serde_json::from_slice(&entry.value)
        .map_err(|_| ApiError::internal(format!("stored object {} is not JSON", entry.key)))?;
    Ok(object.metadata.deletion_timestamp.is_some())
}

/// How an update computes the new object from the current one (both in the request version).
pub enum Change {
    /// PUT: the body replaces the object.
    Replace(Value),
    /// PATCH with a body of this type.
    Patch(BodyType, Value),
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
}

/// PUT or PATCH of the main resource, `/status` or `/scale`: read, compute, admit,
/// compare-and-swap, retried on conflicts the client did not ask to detect.
pub async fn update(
    state: &AppState,
    endpoint: &Endpoint,
    name: &str,
    change: Change,
    subresource: Subresource,
    params: &Params,
) -> ApiResult<Reply> {
    let status = subresource == Subresource::Status;
    let deadline = std::time::Instant::now() + UPDATE_RETRY_FOR;
    while std::time::Instant::now() < deadline {
        let key = endpoint.key(name);
        let current = state.store.get(&key).await.map_err(store_error(endpoint, name))?;
        let Some(current) = current else {
            if let Change::Patch(BodyType::ApplyPatch, body) = &change
                && subresource == Subresource::Main
            {
                let applied = server_side_apply(endpoint, None, body, subresource, params).await?;
                return create(state, endpoint, applied, params, Managed::Applied).await;
            }
            return Err(ApiError::not_found(endpoint.subject(name)));
        };
        let old = endpoint.present_entry(&current).await?;
        let (new, precondition) = match (&change, &endpoint.kind) {
            (_, _) if subresource == Subresource::Scale => {
                let paths = endpoint.scale_paths().ok_or_else(|| ApiError::internal("the resource has no scale"))?;
                let current_scale = scale::of(&old, paths);
                let desired = match &change {
                    Change::Replace(body) => body.clone(),
                    Change::Patch(body_type, patch) => apply_patch(&current_scale, *body_type, patch)?,
                };
                let rv = crate::object::meta_str(&desired, "resourceVersion").map(str::to_string);
                let mut new = old.clone();
                scale::apply(&mut new, &desired, paths)?;
                (new, rv)
            }
            (Change::Patch(BodyType::ApplyPatch, config), _) => {
                let rv = crate::object::meta_str(config, "resourceVersion").map(str::to_string);
                (server_side_apply(endpoint, Some(&old), config, subresource, params).await?, rv)
            }
            _ => {
                let (mut new, rv) = change_object(endpoint, name, &old, &change)?;
                if let Some(scope) = endpoint.field_scope(subresource) {
                    let now = crate::object::now_timestamp();
                    match endpoint.in_manager_versions(&old, &old, &new).await {
                        Ok(others) => {
                            fieldmanager::record_update(Some(&old), &mut new, &scope, &params.manager(), &now, &others)
                        }
                        // As upstream's `UpdateNoErrors`: the write goes on, without managedFields.
                        Err(err) => {
                            tracing::warn!(error = %err.message, "managedFields dropped: the write could not be converted");
                            crate::object::meta_mut(&mut new).remove("managedFields");
                        }
                    }
                }
                (new, rv)
            }
        };
        if let Some(rv) = &precondition
            && *rv != current.mod_revision.to_string()
        {
            return Err(ApiError::conflict(endpoint.subject(name)));
        }
        if crate::object::name(&new) != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                crate::object::name(&new)
            )));
        }
        let (mut stored, warnings) = admit_update(state, endpoint, new, &old, status, params).await?;
        if params.dry_run.is_some() {
            return Ok(Reply::with_warnings(StatusCode::OK, endpoint.present_one(stored).await?, warnings));
        }
        let deleting = crate::object::meta_field(&stored, "deletionTimestamp").is_some()
            && crate::object::finalizers(&stored).is_empty()
            && !matches!(endpoint.kind, Kind::Crd | Kind::Namespace);
        let reserved =
            if deleting { Reserved::default() } else { endpoint.reserve(state, &mut stored, Some(&old)).await? };
        let kept = (!deleting).then(|| stored.clone());
        let result = if deleting {
            state.store.delete(&key, Some(current.mod_revision)).await.map(|event| event.prev)
        } else {
            let value = encode(&stored)?;
            // As upstream: an update that would store the same bytes writes nothing and keeps
            // the resourceVersion. Bytes in an older storage version differ, so a no-op update
            // is how storage migration rewrites an object.
            if value == current.value {
                return Ok(Reply::of(StatusCode::OK, endpoint.reply_entry(&current).await?, warnings));
            }
            let mut stored = stored;
            let applying = matches!(change, Change::Patch(BodyType::ApplyPatch, _));
            match state.store.update(&key, value, current.mod_revision).await {
                Err(StoreError::TooLarge(_)) if !applying && without_managed_fields(&mut stored) => {
                    state.store.update(&key, encode(&stored)?, current.mod_revision).await
                }
                written => written,
            }
            .map(Some)
        };
        if result.is_err() {
            reserved.release(&*state.store).await;
        } else {
            endpoint.release(state, &old, kept.as_ref()).await;
        }
        match result {
            Ok(entry) => {
                let entry = entry.ok_or_else(|| ApiError::internal("the store returned no object"))?;
                if matches!(endpoint.kind, Kind::Crd) {
                    state.registry.wait_for(entry.mod_revision).await;
                }
                return Ok(Reply::of(StatusCode::OK, endpoint.reply_entry(&entry).await?, warnings));
            }
            Err(StoreError::Conflict { .. }) if precondition.is_none() => continue,
            Err(err) => return Err(ApiError::from_store(err, endpoint.subject(name))),
        }
    }
    Err(ApiError::conflict(endpoint.subject(name)))
}

/// Server-side apply of `config` onto `live` (None: the object does not exist yet).
async fn server_side_apply(
    endpoint: &Endpoint,
    live: Option<&Value>,
    config: &Value,
    subresource: Subresource,
    params: &Params,
) -> ApiResult<Value> {
    let Some(manager) = params.field_manager.as_deref().filter(|m| !m.is_empty()) else {
        let error = Path::new("fieldManager").required("is required for apply patch");
        return Err(ApiError::invalid("meta.k8s.io", "PatchOptions", "", &[error]));
    };
    if crate::object::meta_field(config, "managedFields").is_some_and(|m| !m.is_null()) {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let Some(scope) = endpoint.field_scope(subresource) else {
        let live = live.cloned().unwrap_or_else(|| json!({}));
        return Ok(fieldmanager::typed::merge(&live, config, None));
    };
    let force = params.force.unwrap_or(false);
    let merged = fieldmanager::apply_merge(live, config, &scope, manager, &crate::object::now_timestamp());
    let others = match live {
        Some(live) => {
            let (live_object, merged_object) = merged.objects();
            endpoint.in_manager_versions(live, live_object, merged_object).await?
        }
        None => fieldmanager::OtherVersions::default(),
    };
    fieldmanager::apply_finish(merged, &scope, force, &others).map_err(fieldmanager::Conflicts::into_error)
}

/// The object a PUT or PATCH of the main resource or `/status` asks for, and the
/// `resourceVersion` it must replace.
fn change_object(endpoint: &Endpoint, name: &str, old: &Value, change: &Change) -> ApiResult<(Value, Option<String>)> {
    Ok(match change {
        Change::Replace(body) if !body.is_object() => {
            return Err(ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                crdctl_conversion::response::json_type(body)
            )));
        }
        Change::Replace(body) => {
            let rv = crate::object::meta_str(body, "resourceVersion").map(str::to_string);
            if rv.is_none() && matches!(endpoint.kind, Kind::Custom(_)) {
                return Err(ApiError::invalid(
                    &endpoint.group,
                    &endpoint.type_kind,
                    name,
                    &[Path::new("metadata")
                        .child("resourceVersion")
                        .invalid(field::Raw("0x0".into()), "must be specified for an update")],
                ));
            }
            (body.clone(), rv)
        }
        Change::Patch(body_type, patch) => {
            let rv = crate::object::meta_str(patch, "resourceVersion").map(str::to_string);
            (apply_patch(old, *body_type, patch)?, rv)
        }
    })
}

/// Runs the strategy for an update; returns the object to store (in the storage version for
/// custom resources) and warnings.
async fn admit_update(
    state: &AppState,
    endpoint: &Endpoint,
    mut new: Value,
    old: &Value,
    status: bool,
    params: &Params,
) -> ApiResult<(Value, Vec<String>)> {
    let mut warnings = Vec::new();
    match (&endpoint.kind, status) {
        (Kind::Namespace, _) => {
            crate::object::check_type(&mut new, "v1", "Namespace")?;
            crate::object::keep_server_fields(&mut new, old);
            crate::object::set(&mut new, "status", old.get("status").cloned().unwrap_or_else(|| json!({})));
        }
        (Kind::Crd, false) => crd::prepare_update(&mut new, old, &state.registry, state.config.upgrade_safety)?,
        (Kind::Crd, true) => crd::prepare_status_update(&mut new, old)?,
        (Kind::Event(shape), _) => {
            new = event::to_storage(new, *shape)?;
            crate::object::keep_server_fields(&mut new, old);
        }
        (Kind::BuiltIn(resource), _) => {
            let field_validation = FieldValidation::parse(params.field_validation.as_deref())?;
            warnings = resource.prepare_update(&mut new, old, status, field_validation)?;
        }
        (Kind::Custom(served), _) => {
            let field_validation = FieldValidation::parse(params.field_validation.as_deref())?;
            warnings = custom_resource::admit(&mut new, Some(old), served, &endpoint.version, field_validation)?;
            if status {
                crate::object::keep_all_but_status(&mut new, old);
            } else {
                custom_resource::prepare_update(&mut new, old, served, &endpoint.version);
            }
            new = served.to_storage(new).await?;
        }
    }
    Ok((new, warnings))
}

/// Applies a patch to the current object (in the request version).
fn apply_patch(current: &Value, body_type: BodyType, patch: &Value) -> ApiResult<Value> {
    let mut patched = current.clone();
    match body_type {
        BodyType::MergePatch => json_patch::merge(&mut patched, patch),
        BodyType::ApplyPatch => return Err(ApiError::bad_request("apply patches are not applied as merge patches")),
        BodyType::JsonPatch => {
            let operations: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|err| {
                ApiError::bad_request(format!("the server rejected our request due to an error in our request: {err}"))
            })?;
            for (index, operation) in operations.0.iter().enumerate() {
                // As upstream's JSON patch library: testing a missing path for null succeeds
                // (kube-runtime's finalizer helper adds the first finalizer that way).
                if let json_patch::PatchOperation::Test(test) = operation
                    && test.value.is_null()
                    && patched.pointer(test.path.as_str()).is_none()
                {
                    continue;
                }
                json_patch::patch(&mut patched, std::slice::from_ref(operation)).map_err(|mut err| {
                    err.operation = index;
                    ApiError::unprocessable_patch(&err.to_string())
                })?;
            }
        }
        BodyType::Json | BodyType::Yaml | BodyType::StrategicMergePatch => {
            return Err(ApiError::unsupported_media_type(&PATCH_TYPES));
        }
    }
    if !patched.is_object() {
        return Err(ApiError::bad_request("the patch did not produce an object"));
    }
    Ok(patched)
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

/// DELETE one object: finalizers first mark it; otherwise it is removed.
pub async fn delete(state: &AppState, endpoint: &Endpoint, name: &str, options: Option<&Value>) -> ApiResult<Reply> {
    let deadline = std::time::Instant::now() + UPDATE_RETRY_FOR;
    while std::time::Instant::now() < deadline {
        let key = endpoint.key(name);
        let current = state.store.get(&key).await.map_err(store_error(endpoint, name))?;
        let current = current.ok_or_else(|| ApiError::not_found(endpoint.subject(name)))?;
        let mut object = decode_entry(&current)?;
        check_preconditions(endpoint, name, &object, options)?;
        let result = match &endpoint.kind {
            Kind::Crd => {
                if crate::object::meta_field(&object, "deletionTimestamp").is_none() {
                    crd::mark_terminating(&mut object);
                }
                state.store.update(&key, encode(&object)?, current.mod_revision).await.map(Some)
            }
            Kind::Namespace => {
                if namespace::BUILT_IN.contains(&name) {
                    return Err(ApiError::forbidden(endpoint.subject(name), "this namespace may not be deleted"));
                }
                if crate::object::meta_field(&object, "deletionTimestamp").is_some() {
                    return Ok(Reply::ok(endpoint.present_entry(&current).await?));
                }
                namespace::mark_terminating(&mut object);
                let marked = state.store.update(&key, encode(&object)?, current.mod_revision).await;
                if marked.is_ok() {
                    let (store, registry) = (Arc::clone(&state.store), state.registry.clone());
                    tokio::spawn(namespace::finalize(store, registry, name.to_string()));
                }
                marked.map(Some)
            }
            Kind::Custom(_) | Kind::Event(_) | Kind::BuiltIn(_) if !crate::object::finalizers(&object).is_empty() => {
                if crate::object::meta_field(&object, "deletionTimestamp").is_some() {
                    return Ok(Reply::ok(endpoint.present_entry(&current).await?));
                }
                crate::object::meta_mut(&mut object)
                    .insert("deletionTimestamp".into(), json!(crate::object::now_timestamp()));
                crate::object::meta_mut(&mut object).insert("deletionGracePeriodSeconds".into(), json!(0));
                state.store.update(&key, encode(&object)?, current.mod_revision).await.map(Some)
            }
            Kind::Custom(_) | Kind::Event(_) | Kind::BuiltIn(_) => {
                let deleted = state.store.delete(&key, Some(current.mod_revision)).await;
                if deleted.is_ok() {
                    endpoint.release(state, &object, None).await;
                }
                deleted.map(|_| None)
            }
        };
        match result {
            Ok(Some(entry)) => {
                if matches!(endpoint.kind, Kind::Crd) {
                    state.registry.wait_for(entry.mod_revision).await;
                }
                return Ok(Reply::ok(endpoint.present_entry(&entry).await?));
            }
            Ok(None) => {
                let uid = crate::object::meta_str(&object, "uid").unwrap_or_default();
                let mut details = json!({"name": name, "group": endpoint.group, "kind": endpoint.resource, "uid": uid});
                if endpoint.group.is_empty() {
                    details.as_object_mut().map(|d| d.remove("group"));
                }
                return Ok(Reply::ok(json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details,
                })));
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(err) => return Err(ApiError::from_store(err, endpoint.subject(name))),
        }
    }
    Err(ApiError::conflict(endpoint.subject(name)))
}

/// DELETE a collection: every object the selectors match.
pub async fn delete_collection(
    state: &AppState,
    endpoint: &Endpoint,
    params: &Params,
    options: Option<&Value>,
) -> ApiResult<Reply> {
    let read = read_list(state, endpoint, &Params { limit: None, continue_: None, ..params.clone() }).await?;
    let revision = read.revision;
    let mut deleted = Vec::new();
    for object in read.objects()? {
        let name = crate::object::name(&object).to_string();
        let mut scoped = endpoint.clone();
        if endpoint.namespaced && scoped.namespace.is_none() {
            scoped.namespace = crate::object::meta_str(&object, "namespace").map(str::to_string);
        }
        match delete(state, &scoped, &name, options).await {
            Ok(_) => deleted.push(object),
            Err(err) if err.code == StatusCode::NOT_FOUND => {}
            Err(err) => return Err(err),
        }
    }
    let items = endpoint.present(deleted, Shape::List).await?;
    Ok(Reply::ok(json!({
        "apiVersion": endpoint.api_version(),
        "kind": endpoint.list_kind,
        "metadata": {"resourceVersion": revision.to_string()},
        "items": items,
    })))
}
