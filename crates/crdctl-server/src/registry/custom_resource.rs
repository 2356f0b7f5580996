//! The custom-resource strategy at a request version V: `apiVersion` and `kind` checks,
//! pruning with `fieldValidation`, defaulting and validation with V's schema, server-owned
//! metadata, `generation`, and the status subresource's split of what each endpoint may change.
//!
//! Upstream: apiextensions' `pkg/registry/customresource/{strategy.go,status_strategy.go}` and
//! the decoding steps of `customresource_handler.go` (`schemaCoercingDecoder`).

use std::borrow::Cow;

use async_trait::async_trait;
use crdctl_conversion::Shape;
use crdctl_schema::Schema;
use crdctl_storage::{Entry, Revision, Store};
use serde_json::Value;

use crate::error::{ApiError, ApiResult, Subject};
use crate::fieldmanager::OtherVersions;
use crate::registry::ranges::Reserved;
use crate::registry::resource::{Context, Part, Resource, Subresource};
use crate::registry::unknown_fields::{Decoded, FieldValidation};
use crate::registry::{Items, OnDelete, Propagation, ServedCrd, scale};
use crate::selector::SelectableFields;
use crate::table::Column;

/// Decodes a written object at `version`: checks its type, prunes (reporting unknown fields as
/// `fieldValidation` asks), defaults and validates it against the schema, and `old` (the
/// stored object, at `version`) on updates. Returns the warnings to send.
fn admit(
    object: &mut Value,
    old: Option<&Value>,
    crd: &ServedCrd,
    version: &str,
    (field_validation, decoded): (FieldValidation, Decoded),
) -> Result<Vec<String>, ApiError> {
    let expected = crd.api_version(version);
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    if api_version != expected {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({expected})"
        )));
    }
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind != crd.kind() {
        return Err(ApiError::bad_request(format!(
            "{} in version {version:?} cannot be handled as a {}: the kind in the data ({kind}) does not match the expected kind ({})",
            crd.kind(),
            crd.kind(),
            crd.kind()
        )));
    }
    if !object.get("metadata").is_none_or(Value::is_object) {
        return Err(ApiError::bad_request(format!(
            "{} in version {version:?} cannot be handled as a {}: metadata must be an object",
            crd.kind(),
            crd.kind()
        )));
    }
    let mut warnings = Vec::new();
    if let Some(schema) = crd.schema(version) {
        warnings.extend(field_validation.prune(object, schema, (crd.kind(), version), decoded)?);
        crdctl_schema::default(object, schema);
    }
    let mut violations = crate::object::subdomain_name_errors(object);
    if let Some(schema) = crd.schema(version) {
        let checked = crdctl_schema::check(object, old, schema);
        violations.extend(checked.errors);
        warnings.extend(checked.warnings);
    }
    if !violations.is_empty() {
        let name = crate::object::name(object).to_string();
        return Err(ApiError::invalid(crd.group(), crd.kind(), &name, &violations));
    }
    Ok(warnings)
}

/// Server-owned fields on create; `status` is dropped when it is a subresource.
fn prepare_create(object: &mut Value, crd: &ServedCrd, version: &str, namespace: Option<&str>) {
    crate::object::prepare_create(object, namespace);
    crate::object::start_generation(object);
    if crd.has_status(version)
        && let Some(fields) = object.as_object_mut()
    {
        fields.remove("status");
    }
}

/// Server-owned fields on update: kept from `old`, `status` kept when it is a subresource,
/// `generation` bumped when anything but metadata (and status) changed.
fn prepare_update(new: &mut Value, old: &Value, crd: &ServedCrd, version: &str) {
    crate::object::keep_server_fields(new, old);
    let has_status = crd.has_status(version);
    if has_status {
        crate::object::keep_status(new, old);
    }
    crate::object::count_generation(new, old, has_status);
}

/// A CRD's objects, at the version a request names.
#[async_trait]
impl Resource for ServedCrd {
    fn prefix(&self, namespace: Option<&str>) -> String {
        ServedCrd::prefix(self, namespace)
    }

    fn namespaced(&self) -> bool {
        ServedCrd::namespaced(self)
    }

    /// Objects created at the storage version were pruned and defaulted with its schema on
    /// their way in: they are what a read would make of them.
    fn stored_as_presented(&self, version: &str) -> bool {
        self.storage_version() == version
    }

    fn allows(&self, _: &str) -> bool {
        true
    }

    /// Not for custom resources (upstream's `AllowUnconditionalUpdate` is false).
    fn allows_unconditional_update(&self) -> bool {
        false
    }

    fn subresource(&self, version: &str, name: &str) -> Option<Subresource> {
        match name {
            "status" if self.has_status(version) => Some(Subresource::Status),
            "scale" if self.has_scale(version) => Some(Subresource::Scale),
            _ => None,
        }
    }

    fn scale_paths(&self, version: &str) -> Option<scale::Paths<'_>> {
        scale::Paths::of_crd(self, version)
    }

    fn selectable_fields(&self) -> SelectableFields {
        SelectableFields::METADATA
    }

    fn columns(&self, version: &str) -> Vec<Column> {
        crate::table::custom_resource_columns(self.printer_columns(version))
    }

    /// Custom resources take no strategic merge patch.
    fn patch_schema(&self) -> Option<&Schema> {
        None
    }

    fn managed_schema(&self, version: &str) -> Option<Option<&Schema>> {
        Some(self.schema(version))
    }

    /// The version's schema with the `apiVersion`, `kind` and `ObjectMeta` every published
    /// schema has.
    fn object_schema(&self, version: &str) -> Option<Cow<'_, Schema>> {
        let mut schema = self.schema(version)?.clone();
        let string = Schema { types: vec!["string".into()], ..Schema::default() };
        schema.properties.insert("apiVersion".into(), string.clone());
        schema.properties.insert("kind".into(), string);
        let meta = crate::registry::builtin::documents::compiled("", "v1", "ConfigMap")?.properties.get("metadata")?;
        schema.properties.insert("metadata".into(), meta.clone());
        Some(Cow::Owned(schema))
    }

    fn typed(&self) -> bool {
        false
    }

    fn speaks_protobuf(&self) -> bool {
        false
    }

    fn removed_when_finalized(&self) -> bool {
        true
    }

    fn on_delete(&self, object: &mut Value) -> ApiResult<OnDelete> {
        Ok(crate::registry::on_delete(object))
    }

    fn garbage_collection(&self) -> Option<Propagation> {
        Some(Propagation::Background)
    }

    fn refuse_create(&self, subject: Subject<'_>) -> ApiResult<()> {
        if self.terminating() {
            return Err(ApiError::forbidden(
                subject,
                "create not allowed while custom resource definition is terminating",
            ));
        }
        Ok(())
    }

    fn review(&self, _: Context<'_>, _: &mut Value) -> ApiResult<Option<Value>> {
        Ok(None)
    }

    async fn admit_create(
        &self,
        _: Context<'_>,
        object: &mut Value,
        (version, namespace): (&str, Option<&str>),
        validation: FieldValidation,
    ) -> ApiResult<Vec<String>> {
        let warnings = admit(object, None, self, version, (validation, Decoded::Body))?;
        prepare_create(object, self, version, namespace);
        Ok(warnings)
    }

    async fn admit_update(
        &self,
        _: Context<'_>,
        (new, old): (&mut Value, &Value),
        (version, part): (&str, Part),
        decoding: (FieldValidation, Decoded<'_>),
    ) -> ApiResult<Vec<String>> {
        let warnings = admit(new, Some(old), self, version, decoding)?;
        if part == Part::Status {
            crate::object::keep_all_but_status(new, old);
        } else {
            prepare_update(new, old, self, version);
        }
        Ok(warnings)
    }

    async fn to_storage(&self, object: Value) -> ApiResult<Value> {
        ServedCrd::to_storage(self, object).await
    }

    async fn present(&self, objects: Vec<Value>, version: &str, shape: Shape) -> ApiResult<Items> {
        self.read_items_as(objects, version, shape).await
    }

    async fn present_stored(&self, entries: &[Entry], version: &str, shape: Shape) -> ApiResult<Items> {
        self.read_stored_as(entries, version, shape).await
    }

    /// Versions the CRD no longer has are left out.
    async fn in_manager_versions(
        &self,
        api_version: &str,
        managed: &Value,
        (old, new): (&Value, &Value),
    ) -> ApiResult<OtherVersions> {
        let mut others = OtherVersions::default();
        for other in crate::fieldmanager::other_manager_versions(managed, api_version) {
            let version = other.strip_prefix(&format!("{}/", self.group())).filter(|v| self.has_version(v));
            let Some(version) = version else { continue };
            let converted = self.convert(vec![old.clone(), new.clone()], version, Shape::List).await?;
            let [old, new] = <[Value; 2]>::try_from(converted)
                .map_err(|_| ApiError::internal("conversion changed the number of objects"))?;
            others.compared(&other, &old, &new, self.schema(version));
        }
        Ok(others)
    }

    async fn reserve(&self, _: Context<'_>, _: &dyn Store, _: &mut Value, _: Option<&Value>) -> ApiResult<Reserved> {
        Ok(Reserved::default())
    }

    async fn release(&self, _: &dyn Store, _: &Value, _: Option<&Value>) {}

    async fn after_write(&self, _: Context<'_>, _: Revision) {}
}
