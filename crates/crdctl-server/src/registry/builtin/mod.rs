//! Built-in resources served from one table ([`RESOURCES`], in `table.rs`): each row says what
//! upstream's discovery and registry say of a resource (group, version, names, scope, verbs,
//! subresources, the fields a field selector can name, whether it tracks `generation`, where it
//! is stored) and which [`Strategy`] writes it. Namespaces, Events and CRDs are rows like the
//! others; their lifecycles are strategies ([`namespace`], [`super::event`],
//! [`super::crd`]). Routing, the verb check, discovery, field selectors and namespace cleanup
//! read the table; adding a kind is one row, plus a strategy when it has upstream behaviour of
//! its own.
//!
//! Every write is decoded as upstream's typed decoder would: the type defaulted from the URL,
//! a body value of the wrong JSON type refused with Go's error (`go_decode.rs`), `null` fields
//! dropped, unknown fields dropped (or refused under `fieldValidation=Strict`)
//! against the kind's schema from upstream's OpenAPI documents ([`documents`]); then the
//! strategy's defaults, then validation (names, the schema's types and required fields, the
//! strategy's checks). Afterwards only the controllers that act on API objects alone
//! ([`crate::controller`]) do anything with them: nothing runs Pods.

mod admissionregistration;
mod autoscaling;
mod data;
mod defaults;
pub mod documents;
pub(crate) mod go_decode;
mod immutable;
pub mod migration;
pub mod namespace;
mod printers;
mod qos;
pub mod review;
pub mod service;
mod table;
mod workload;

use std::borrow::Cow;

use async_trait::async_trait;
use crdctl_conversion::Shape;
use crdctl_model::field;
use crdctl_schema::Schema;
use crdctl_storage::{Entry, Revision, Store};
use serde_json::Value;

use crate::error::{ApiError, ApiResult, Subject};
use crate::fieldmanager::OtherVersions;
use crate::registry::ranges::Reserved;
use crate::registry::resource::{Context, Resource};
use crate::registry::unknown_fields::{Decoded, FieldValidation};
use crate::registry::{Items, OnDelete, Propagation, crd, scale};
use crate::selector::SelectableFields;
use crate::table::Column;

pub use super::resource::{Part, Subresource};
pub use table::{CUSTOM_RESOURCE_DEFINITIONS, RESOURCES};

/// One built-in resource at one version.
#[derive(Debug)]
pub struct BuiltIn {
    /// The API group; empty for core.
    pub group: &'static str,
    /// The version.
    pub version: &'static str,
    /// The plural.
    pub resource: &'static str,
    /// The singular.
    pub singular: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// Short names, as upstream discovery lists them.
    pub short_names: &'static [&'static str],
    /// Categories (`all`, …).
    pub categories: &'static [&'static str],
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// The verbs, as upstream discovery lists them.
    pub verbs: &'static [&'static str],
    /// The subresources, as upstream discovery lists them.
    pub subresources: &'static [Subresource],
    /// Whether `metadata.generation` starts at 1 and counts changes outside `metadata` and
    /// `status` (upstream sets it for workloads and policies, not for data objects).
    pub generation: bool,
    /// The fields a field selector can name beyond `metadata.name` and `metadata.namespace`.
    pub fields: SelectableFields,
    /// Where objects are stored: `/registry/<resource>/[<namespace>/]<name>`, as upstream.
    pub prefix: &'static str,
    /// The name rule (`ValidateNameFunc`).
    pub name_rule: fn(&str) -> Vec<String>,
    /// What writes do beyond the generic.
    pub strategy: Strategy,
    /// The `Table` columns of upstream's printer.
    pub columns: fn() -> Vec<Column>,
    /// Set on a version stored as another version of the same resource (upstream stores each
    /// resource in one version whatever version is asked for).
    pub stored_as: Option<StoredAs>,
    /// Whether a PUT without `metadata.resourceVersion` replaces whatever is stored (upstream's
    /// `AllowUnconditionalUpdate`); else it is refused.
    pub unconditional_update: bool,
}

/// The version a resource's objects are stored in, and the conversions to and from it.
#[derive(Debug, Clone, Copy)]
pub struct StoredAs {
    /// The storage version's group (`events.k8s.io` Events are stored as core ones).
    pub group: &'static str,
    /// The storage version.
    pub version: &'static str,
    /// An object at the row's version, converted to the storage version.
    pub to_storage: fn(Value) -> Value,
    /// A stored object, converted to the row's version.
    pub from_storage: fn(Value) -> Value,
}

/// What a kind's writes do beyond the generic (upstream's `RESTCreateStrategy` and
/// `RESTUpdateStrategy`).
#[derive(Debug, Clone, Copy)]
pub enum Strategy {
    /// Nothing beyond the generic.
    Plain,
    /// `data`/`binaryData` keys, the 1 MiB limit, `immutable`.
    ConfigMap,
    /// `stringData` merged into `data`, `type` defaulted and immutable, keys, size, `immutable`.
    Secret,
    /// A workload or pod: upstream's defaults for the pod template at this path (`spec` for
    /// Pods, `spec.template.spec` for workloads, `spec.jobTemplate.spec.template.spec` for
    /// CronJobs) and the kind's own (`replicas`, strategies, limits).
    Workload(&'static [&'static str]),
    /// Services: `type`, `sessionAffinity`, port protocols and IP families defaulted.
    Service,
    /// A review: created, answered in `status`, never stored (the only verb is `create`).
    Review(fn(&Value, Context<'_>) -> Value),
    /// A StorageVersionMigration: its resource is required and immutable, its status moves one way.
    StorageVersionMigration,
    /// Webhook configurations and policy bindings: upstream's defaults, expressions and actions
    /// checked.
    AdmissionRegistration,
    /// A ValidatingAdmissionPolicy: as [`Strategy::AdmissionRegistration`], and its
    /// `status.typeChecking` follows its expressions.
    AdmissionPolicy,
    /// A Role, ClusterRole or binding: written only by a user who holds what it grants
    /// ([`crate::auth::escalation`]).
    Rbac,
    /// A HorizontalPodAutoscaler: `minReplicas`, and in v2 the default CPU metric and behavior.
    HorizontalPodAutoscaler,
    /// A Namespace: `Active` when created, `spec.finalizers` written through `finalize` only,
    /// the built-in four kept, deletion emptying it first ([`namespace`]).
    Namespace,
    /// An Event, of either group ([`super::event`]): kept without `managedFields`.
    Event,
    /// A CustomResourceDefinition ([`super::crd`]): decoded by the CRD model rather than the
    /// generic decoder, status kept by the server, the upgrade-safety gate, the cleanup finalizer.
    CustomResourceDefinition,
}

/// The resource `resource` of `group`/`version`, if built in.
pub fn find(group: &str, version: &str, resource: &str) -> Option<&'static BuiltIn> {
    RESOURCES.iter().find(|r| r.group == group && r.version == version && r.resource == resource)
}

impl BuiltIn {
    /// `<group>/<version>`, or `<version>` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The store prefix of one namespace's objects, or of all.
    pub fn namespace_prefix(&self, namespace: Option<&str>) -> String {
        match namespace.filter(|_| self.namespaced) {
            Some(namespace) => format!("{}{namespace}/", self.prefix),
            None => self.prefix.to_string(),
        }
    }

    /// The version objects are stored in.
    pub fn storage_version(&self) -> &'static str {
        self.stored_as.map_or(self.version, |stored| stored.version)
    }

    /// An admitted object as it is stored.
    pub fn to_storage(&self, object: Value) -> Value {
        match self.stored_as {
            Some(stored) => (stored.to_storage)(object),
            None => object,
        }
    }

    /// A stored object at this row's version.
    pub fn from_storage(&self, object: Value) -> Value {
        match self.stored_as {
            Some(stored) => (stored.from_storage)(object),
            None => object,
        }
    }

    /// Whether objects are stored (all but reviews).
    pub fn stored(&self) -> bool {
        !matches!(self.strategy, Strategy::Review(_))
    }

    /// Whether this row's prefix holds its resource's objects: stored, and not another version
    /// of a resource whose storage row is another.
    pub fn owns_storage(&self) -> bool {
        self.stored() && self.stored_as.is_none()
    }

    /// Whether the resource has `subresource`.
    pub fn has(&self, subresource: Subresource) -> bool {
        self.subresources.contains(&subresource)
    }

    /// The subresource named `name`, if the resource has it.
    pub fn subresource(&self, name: &str) -> Option<Subresource> {
        self.subresources.iter().copied().find(|s| s.name() == name)
    }

    /// The kind's schema from upstream's OpenAPI document, compiled on first use.
    pub fn schema(&'static self) -> Option<&'static Schema> {
        documents::compiled(self.group, self.version, self.kind)
    }

    /// Decodes, defaults and validates a created object (upstream's decoder, then
    /// `BeforeCreate`); returns the warnings to send.
    pub fn prepare_create(&'static self, object: &mut Value, validation: FieldValidation) -> ApiResult<Vec<String>> {
        let warnings = self.decode(object, validation, Decoded::Body)?;
        if self.has(Subresource::Status) {
            crate::object::fields_mut(object).remove("status");
        }
        let mut errors = crate::object::name_errors(object, self.name_rule);
        errors.extend(self.write(object, None, Part::Main)?);
        self.refuse(object, errors)?;
        if self.generation {
            crate::object::start_generation(object);
        }
        Ok(warnings)
    }

    /// Decodes, defaults and validates a replacement of `old` (`BeforeUpdate`) changing `part`
    /// of it, the rest kept from `old`; returns the warnings to send.
    pub fn prepare_update(
        &'static self,
        object: &mut Value,
        old: &Value,
        part: Part,
        (validation, decoded): (FieldValidation, Decoded<'_>),
    ) -> ApiResult<Vec<String>> {
        let warnings = self.decode(object, validation, decoded)?;
        match part {
            Part::Status => crate::object::keep_all_but_status(object, old),
            Part::Finalizers => namespace::keep_all_but_finalizers(object, old),
            Part::Main => {
                crate::object::keep_server_fields(object, old);
                if self.has(Subresource::Status) {
                    crate::object::keep_status(object, old);
                }
            }
        }
        let errors = self.write(object, Some(old), part)?;
        self.refuse(object, errors)?;
        if self.generation {
            crate::object::count_generation(object, old, self.has(Subresource::Status));
        }
        Ok(warnings)
    }

    /// The typed decoder's part: type from the URL, `null`s dropped, unknown fields pruned.
    fn decode(
        &'static self,
        object: &mut Value,
        validation: FieldValidation,
        decoded: Decoded,
    ) -> ApiResult<Vec<String>> {
        self.check_type(object)?;
        let Some(schema) = self.schema() else {
            crate::object::drop_nulls(object);
            return Ok(Vec::new());
        };
        // A body Go cannot decode into the kind's type is refused before anything else.
        if let Decoded::Body = decoded
            && let Some(err) = go_decode::type_error(object, schema, self.kind)
        {
            return Err(self.undecodable(&err));
        }
        crate::object::drop_nulls(object);
        validation.prune(object, schema, (self.kind, self.version), decoded)
    }

    fn refuse(&self, object: &Value, errors: field::ErrorList) -> ApiResult<()> {
        if errors.is_empty() {
            return Ok(());
        }
        Err(ApiError::invalid(self.group, self.kind, crate::object::name(object), &errors))
    }

    /// The strategy's defaults and checks, then the schema's, for a create (`old` is `None`)
    /// or an update (of `status` alone, or of the rest).
    fn write(&'static self, object: &mut Value, old: Option<&Value>, part: Part) -> ApiResult<field::ErrorList> {
        let mut errors = match self.strategy {
            Strategy::Plain | Strategy::Rbac => {
                defaults::default(self.kind, object);
                field::ErrorList::new()
            }
            Strategy::Review(_) | Strategy::Event | Strategy::CustomResourceDefinition => field::ErrorList::new(),
            Strategy::Namespace => {
                namespace::default(object, old, part);
                field::ErrorList::new()
            }
            Strategy::AdmissionRegistration | Strategy::AdmissionPolicy => {
                admissionregistration::default(self.kind, object);
                admissionregistration::validate(self.kind, object)
            }
            Strategy::ConfigMap => data::config_map(object, old),
            Strategy::Secret => data::secret(object, old).map_err(|err| self.undecodable(&err))?,
            Strategy::Workload(pod_spec) => workload::default(self.kind, pod_spec, object, old),
            Strategy::Service => workload::default_service(object),
            Strategy::StorageVersionMigration => migration::validate(object, old, part == Part::Status),
            Strategy::HorizontalPodAutoscaler => {
                autoscaling::default(self.version, object);
                field::ErrorList::new()
            }
        };
        if let (Some(old), Part::Main) = (old, part) {
            errors.extend(immutable::errors(self.kind, object, old));
        }
        if let Some(schema) = self.schema() {
            errors.extend(crdctl_schema::check(object, old, schema).errors);
        }
        Ok(errors)
    }

    /// The body's `apiVersion` and `kind` (filled in from the URL where it leaves them out). An
    /// object of another kind is refused as upstream's decoder refuses it: a kind the server
    /// serves cannot be converted to this one, any other is not registered.
    fn check_type(&self, object: &mut Value) -> ApiResult<()> {
        let sent = |field: &str| object.get(field).and_then(Value::as_str).unwrap_or_default().to_string();
        let (api_version, kind) = (sent("apiVersion"), sent("kind"));
        let other_kind = !kind.is_empty() && kind != self.kind;
        let other_group = !api_version.is_empty() && api_version.rsplit_once('/').map_or("", |(g, _)| g) != self.group;
        if !other_kind && !other_group {
            return crate::object::check_type(object, &self.api_version(), self.kind);
        }
        // What the body leaves out is the URL's, as upstream's decoder defaults it.
        let api_version = if api_version.is_empty() { self.api_version() } else { api_version };
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let kind = if kind.is_empty() { self.kind } else { kind.as_str() };
        let why = match RESOURCES.iter().find(|r| r.group == group && r.version == version && r.kind == kind) {
            // Go names the versioned type by its package (`v1`) and the internal one by its
            // group's (`core`, `apps`).
            Some(_) => {
                let internal = self.group.split('.').next().filter(|g| !g.is_empty()).unwrap_or("core");
                format!("converting ({version}.{kind}) to ({internal}.{}): unknown conversion", self.kind)
            }
            None => format!(
                "no kind {kind:?} is registered for version {api_version:?} in scheme \"pkg/api/legacyscheme/scheme.go:30\""
            ),
        };
        Err(ApiError::bad_request(format!("{kind} in version {version:?} cannot be handled as a {}: {why}", self.kind)))
    }

    /// 400 for a body the typed decoder would refuse (a `data` value that is not base64).
    fn undecodable(&self, err: &str) -> ApiError {
        let kind = self.kind;
        ApiError::bad_request(format!("{kind} in version {:?} cannot be handled as a {kind}: {err}", self.version))
    }
}

/// Built-in resources are served through their table row, `&'static` so a request holds one
/// without copying it.
#[async_trait]
impl Resource for &'static BuiltIn {
    fn prefix(&self, namespace: Option<&str>) -> String {
        self.namespace_prefix(namespace)
    }

    fn namespaced(&self) -> bool {
        self.namespaced
    }

    fn stored_as_presented(&self, _: &str) -> bool {
        self.stored_as.is_none()
    }

    fn allows(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }

    fn allows_unconditional_update(&self) -> bool {
        self.unconditional_update
    }

    fn subresource(&self, _: &str, name: &str) -> Option<Subresource> {
        BuiltIn::subresource(self, name)
    }

    fn scale_paths(&self, _: &str) -> Option<scale::Paths<'_>> {
        self.has(Subresource::Scale).then(|| scale::Paths::of_workload(self.kind))
    }

    fn selectable_fields(&self) -> SelectableFields {
        self.fields
    }

    fn columns(&self, _: &str) -> Vec<Column> {
        (self.columns)()
    }

    fn patch_schema(&self) -> Option<&Schema> {
        self.schema()
    }

    /// Events keep no `managedFields`; CRDs are managed untyped (their schema nests itself).
    fn managed_schema(&self, _: &str) -> Option<Option<&Schema>> {
        match self.strategy {
            Strategy::Event => None,
            Strategy::CustomResourceDefinition => Some(None),
            _ => Some(self.schema()),
        }
    }

    fn object_schema(&self, _: &str) -> Option<Cow<'_, Schema>> {
        self.schema().map(Cow::Borrowed)
    }

    fn typed(&self) -> bool {
        true
    }

    fn speaks_protobuf(&self) -> bool {
        !matches!(self.strategy, Strategy::CustomResourceDefinition)
    }

    fn removed_when_finalized(&self) -> bool {
        !matches!(self.strategy, Strategy::Namespace | Strategy::CustomResourceDefinition)
    }

    fn on_delete(&self, object: &mut Value) -> ApiResult<OnDelete> {
        match self.strategy {
            Strategy::Namespace => namespace::on_delete(object),
            Strategy::CustomResourceDefinition => Ok(crd::on_delete(object)),
            _ => Ok(super::on_delete(object)),
        }
    }

    fn garbage_collection(&self) -> Option<Propagation> {
        match (self.group, self.version, self.resource) {
            // Events take no part (upstream's event strategy: `Unsupported`).
            ("" | "events.k8s.io", _, "events") => None,
            // Orphaned unless asked otherwise, for backward compatibility, as upstream.
            ("", "v1", "replicationcontrollers") | ("batch", "v1", "jobs") => Some(Propagation::Orphan),
            _ => Some(Propagation::Background),
        }
    }

    fn refuse_create(&self, _: Subject<'_>) -> ApiResult<()> {
        Ok(())
    }

    fn review(&self, context: Context<'_>, object: &mut Value) -> ApiResult<Option<Value>> {
        let Strategy::Review(answer) = self.strategy else { return Ok(None) };
        crate::object::check_type(object, &self.api_version(), self.kind)?;
        let mut answered = object.clone();
        crate::object::set(&mut answered, "status", answer(object, context));
        Ok(Some(answered))
    }

    /// As upstream's store: the system fields first (`FillObjectMetaSystemFields`), so the
    /// strategy can read the uid (a Job's generated selector). CRDs go through the CRD model.
    async fn admit_create(
        &self,
        context: Context<'_>,
        object: &mut Value,
        (_, namespace): (&str, Option<&str>),
        validation: FieldValidation,
    ) -> ApiResult<Vec<String>> {
        crate::object::prepare_create(object, namespace);
        if let Strategy::Rbac = self.strategy {
            let writer = (context.authorizer, &**context.store);
            crate::auth::escalation::confirm(writer, context.user, self.kind, object).await?;
        }
        if let Strategy::CustomResourceDefinition = self.strategy {
            crd::prepare_create(object, context.registry)?;
            return Ok(Vec::new());
        }
        let warnings = self.prepare_create(object, validation)?;
        self.observe(context, object);
        Ok(warnings)
    }

    async fn admit_update(
        &self,
        context: Context<'_>,
        (new, old): (&mut Value, &Value),
        (_, part): (&str, Part),
        decoding: (FieldValidation, Decoded<'_>),
    ) -> ApiResult<Vec<String>> {
        if let Strategy::CustomResourceDefinition = self.strategy {
            let gate = (&**context.store, context.registry);
            return match part {
                Part::Status => crd::prepare_status_update(new, old).map(|()| Vec::new()),
                _ => crd::prepare_update(new, old, gate, context.upgrade_safety).await,
            };
        }
        if let Strategy::Rbac = self.strategy
            && !crate::object::only_garbage_collection_changes(new, old)
        {
            let writer = (context.authorizer, &**context.store);
            crate::auth::escalation::confirm(writer, context.user, self.kind, new).await?;
        }
        let warnings = self.prepare_update(new, old, part, decoding)?;
        if part == Part::Main {
            self.observe(context, new);
        }
        Ok(warnings)
    }

    async fn to_storage(&self, object: Value) -> ApiResult<Value> {
        Ok(BuiltIn::to_storage(self, object))
    }

    async fn present(&self, objects: Vec<Value>, _: &str, _: Shape) -> ApiResult<Items> {
        Ok(Items::Values(objects.into_iter().map(|object| self.from_storage(object)).collect()))
    }

    /// Objects stored at the row's version go out as their stored text.
    async fn present_stored(&self, entries: &[Entry], version: &str, shape: Shape) -> ApiResult<Items> {
        if self.stored_as.is_none()
            && let Some(texts) = crate::registry::stored_texts(entries, &self.api_version())
        {
            return Ok(Items::Json(texts));
        }
        let objects = entries.iter().map(crate::object::decode_entry).collect::<ApiResult<_>>()?;
        self.present(objects, version, shape).await
    }

    /// Built-in kinds have one version each here: nothing to convert.
    async fn in_manager_versions(&self, _: &str, _: &Value, _: (&Value, &Value)) -> ApiResult<OtherVersions> {
        Ok(OtherVersions::default())
    }

    async fn reserve(
        &self,
        context: Context<'_>,
        store: &dyn Store,
        object: &mut Value,
        old: Option<&Value>,
    ) -> ApiResult<Reserved> {
        match self.strategy {
            Strategy::Service => service::allocate(store, object, old, context.service_ranges).await,
            _ => Ok(Reserved::default()),
        }
    }

    async fn release(&self, store: &dyn Store, old: &Value, new: Option<&Value>) {
        if let Strategy::Service = self.strategy {
            service::release(store, old, new).await;
        }
    }

    async fn after_write(&self, context: Context<'_>, revision: Revision) {
        if let Strategy::CustomResourceDefinition = self.strategy {
            context.registry.wait_for(revision).await;
        }
    }
}

impl BuiltIn {
    /// What the server records in `status` of an object written outside `/status`, where
    /// upstream's controllers record it soon after: a policy's type checking.
    fn observe(&self, context: Context<'_>, object: &mut Value) {
        if let Strategy::AdmissionPolicy = self.strategy {
            (context.type_check)(context.registry, object);
        }
    }
}

#[cfg(test)]
mod tests;
