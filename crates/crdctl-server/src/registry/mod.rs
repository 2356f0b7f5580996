//! The CRDs the server serves, kept current by a watch on their keys in the store (not by the
//! request that wrote them), so every replica on one store routes alike; the one
//! [`resource::Resource`] trait every served resource implements — custom resources in
//! [`custom_resource`], built-in ones in [`builtin`] (namespaces, events and CRDs among them:
//! [`builtin::namespace`], [`event`], [`crd`] with its upgrade gate [`upgrade`]); and what
//! strategies share: the token signer ([`token`]) and the ranges Services draw from
//! ([`ranges`]).
//!
//! Upstream counterparts: apiextensions' `pkg/apiserver/customresource_handler.go`
//! (`crdInfo`, serving info per CRD) and `pkg/registry/`.

pub mod builtin;
pub mod crd;
pub mod custom_resource;
pub mod event;
pub mod ranges;
pub mod resource;
pub mod scale;
pub mod token;
pub mod unknown_fields;
pub mod upgrade;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crdctl_conversion::webhook::ServiceResolver;
use crdctl_conversion::{ConversionError, Converter, Shape};
use crdctl_model::Crd;
use crdctl_model::crd::{CustomResourceDefinition, Version};
use crdctl_model::json::{self, Fields, Splice};
use crdctl_schema::Schema;
use crdctl_storage::{Entry, EventKind, ListOptions, Revision, Store};
use serde_json::Value;
use tokio::sync::watch;

use crate::error::ApiError;
use crate::object::{decode, decode_entry};
use crate::registry::resource::Resource;

/// Where CRDs are stored.
pub const CRD_PREFIX: &str = "/registry/apiextensions.k8s.io/customresourcedefinitions/";

/// One CRD as served: the model, the stored object, and its converter.
pub struct ServedCrd {
    /// The CRD, loaded and defaulted.
    pub crd: Crd,
    /// The stored object, with `resourceVersion`.
    pub object: Value,
    /// The converter its `spec.conversion` asks for, or why there is none.
    pub converter: Result<Converter, ConversionError>,
    /// Each version's compiled `openAPIV3Schema`, by version name.
    pub schemas: BTreeMap<String, Schema>,
    /// The versions with the status subresource, asked of every write.
    with_status: Vec<String>,
}

impl std::fmt::Debug for ServedCrd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedCrd").field("name", &self.crd.name()).finish_non_exhaustive()
    }
}

impl ServedCrd {
    /// `spec.group`.
    pub fn group(&self) -> &str {
        &self.crd.definition.spec.group
    }

    /// `status.acceptedNames.plural`, falling back to `spec.names.plural`.
    pub fn plural(&self) -> &str {
        let accepted = &self.crd.definition.status.accepted_names.plural;
        if accepted.is_empty() { &self.crd.definition.spec.names.plural } else { accepted }
    }

    /// `spec.names.kind`.
    pub fn kind(&self) -> &str {
        &self.crd.definition.spec.names.kind
    }

    /// `spec.names.listKind`.
    pub fn list_kind(&self) -> String {
        let list_kind = &self.crd.definition.spec.names.list_kind;
        if list_kind.is_empty() { format!("{}List", self.kind()) } else { list_kind.clone() }
    }

    /// Whether objects live in namespaces.
    pub fn namespaced(&self) -> bool {
        self.crd.definition.spec.scope == "Namespaced"
    }

    /// The served version `name`.
    pub fn served_version(&self, name: &str) -> Option<&Version> {
        self.crd.definition.spec.versions.iter().find(|v| v.name == name && v.served)
    }

    /// The storage version's name.
    pub fn storage_version(&self) -> &str {
        self.crd.definition.storage_version().map(|v| v.name.as_str()).unwrap_or_default()
    }

    /// Whether `spec.versions` has `name`, served or not: what objects can be converted to.
    pub fn has_version(&self, name: &str) -> bool {
        self.version_json(name).is_some()
    }

    fn version_json(&self, name: &str) -> Option<&Value> {
        self.crd.value.get("spec")?.get("versions")?.as_array()?.iter().find(|v| v["name"] == name)
    }

    /// The version's `openAPIV3Schema`, as written.
    pub fn schema_json(&self, version: &str) -> Option<&Value> {
        self.version_json(version)?.pointer("/schema/openAPIV3Schema")
    }

    /// The version's compiled schema.
    pub fn schema(&self, version: &str) -> Option<&Schema> {
        self.schemas.get(version)
    }

    /// Whether the version has the status subresource.
    pub fn has_status(&self, version: &str) -> bool {
        self.with_status.iter().any(|name| name == version)
    }

    /// Whether the version has the scale subresource.
    pub fn has_scale(&self, version: &str) -> bool {
        self.scale(version).is_some()
    }

    /// The version's `subresources.scale`.
    pub fn scale(&self, version: &str) -> Option<&Value> {
        self.version_json(version)?.pointer("/subresources/scale")
    }

    /// The version's `additionalPrinterColumns`.
    pub fn printer_columns(&self, version: &str) -> Option<&Value> {
        self.version_json(version)?.get("additionalPrinterColumns")
    }

    /// Whether the CRD has condition `Established=True`.
    pub fn established(&self) -> bool {
        self.crd.definition.condition_is_true("Established")
    }

    /// Whether the CRD is being deleted.
    pub fn terminating(&self) -> bool {
        crate::object::meta_field(&self.object, "deletionTimestamp").is_some()
    }

    /// Whether custom resources are served (names accepted or established).
    pub fn serving(&self) -> bool {
        self.established() || self.crd.definition.condition_is_true("NamesAccepted")
    }

    /// `<group>/<version>`.
    pub fn api_version(&self, version: &str) -> String {
        format!("{}/{version}", self.group())
    }

    /// Where objects of this CRD are stored: `/registry/<group>/<plural>/[<namespace>/]`.
    pub fn prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(namespace) => format!("/registry/{}/{}/{namespace}/", self.group(), self.plural()),
            None => format!("/registry/{}/{}/", self.group(), self.plural()),
        }
    }

    /// Reads stored objects as `version`: each is pruned and defaulted with the schema of the
    /// version it was stored in, converted (the webhook only sees objects in other versions),
    /// then pruned with the requested version's schema.
    pub async fn read_as(&self, objects: Vec<Value>, version: &str, shape: Shape) -> Result<Vec<Value>, ApiError> {
        self.read_items_as(objects, version, shape).await?.into_values()
    }

    /// [`ServedCrd::read_as`], keeping what a webhook converted as the text it answered: pruned
    /// as text, a list goes from the webhook to the reader without being parsed.
    pub async fn read_items_as(&self, mut objects: Vec<Value>, version: &str, shape: Shape) -> Result<Items, ApiError> {
        for object in &mut objects {
            let stored_in = object["apiVersion"].as_str().and_then(|a| a.rsplit_once('/')).map(|(_, v)| v.to_string());
            let Some(stored_in) = stored_in.filter(|v| self.version_json(v).is_some()) else {
                let api_version = object["apiVersion"].as_str().unwrap_or_default();
                return Err(ApiError::internal(format!(
                    "request to convert CR from an invalid group/version: {api_version}"
                )));
            };
            if let Some(schema) = self.schema(&stored_in) {
                crdctl_schema::prune(object, schema);
                crdctl_schema::default(object, schema);
            }
        }
        let desired = self.api_version(version);
        if let Ok(converter @ Converter::Webhook(_)) = &self.converter
            && objects.iter().any(|object| object["apiVersion"] != desired.as_str())
        {
            let converted = converter
                .convert_json(objects, &desired, shape)
                .await
                .map_err(|err| ApiError::internal(err.message))?;
            let schema = self.schema(version);
            let pruned = converted
                .iter()
                .map(|object| match schema {
                    Some(schema) => crdctl_schema::prune_json(object.as_bytes(), schema)
                        .map_err(|err| ApiError::internal(format!("converted object: {err}"))),
                    None => Ok(object.as_bytes().to_vec()),
                })
                .collect::<Result<_, _>>()?;
            return Ok(Items::Json(pruned));
        }
        // Objects read at the version they were stored in were pruned above with the same schema
        // (and defaults hold no unknown fields: validation refuses them), so only converted
        // ones are pruned again.
        let stored_in_desired: Vec<bool> =
            objects.iter().map(|object| object["apiVersion"] == desired.as_str()).collect();
        let mut converted = self.convert(objects, version, shape).await?;
        if let Some(schema) = self.schema(version) {
            for (object, _) in converted.iter_mut().zip(&stored_in_desired).filter(|(_, unchanged)| !**unchanged) {
                crdctl_schema::prune(object, schema);
            }
        }
        Ok(Items::Values(converted))
    }

    /// [`ServedCrd::read_items_as`] for objects as the store holds them. When none needs a
    /// webhook, none is parsed into values: each goes from the stored bytes to the reader as
    /// text, given its `resourceVersion` (and, stored at another version under the `None`
    /// strategy, the `apiVersion` read), pruned and defaulted as text with the schema of the
    /// version it is stored in, and pruned again with the read version's when converted, as the
    /// value path does. Otherwise they are decoded and read as values.
    pub async fn read_stored_as(&self, entries: &[Entry], version: &str, shape: Shape) -> Result<Items, ApiError> {
        let desired = self.api_version(version);
        let converts_itself = matches!(self.converter, Ok(Converter::None)).then_some(desired.as_str());
        let mut texts = Vec::with_capacity(entries.len());
        for entry in entries {
            let failed = |err: serde_json::Error| ApiError::internal(format!("stored object {}: {err}", entry.key));
            let Some((stored_as, mut text)) = stored_text(&entry.value, entry.mod_revision, converts_itself) else {
                break;
            };
            let converted = stored_as != desired;
            let stored_in = stored_as.rsplit_once('/').map(|(_, v)| v).filter(|v| self.version_json(v).is_some());
            let Some(stored_in) = stored_in.filter(|_| !converted || converts_itself.is_some()) else { break };
            if let Some(schema) = self.schema(stored_in) {
                text = crdctl_schema::prune_and_default_json(&text, schema).map_err(failed)?;
            }
            if let Some(schema) = self.schema(version).filter(|_| converted) {
                text = crdctl_schema::prune_json(&text, schema).map_err(failed)?;
            }
            texts.push(text);
        }
        if texts.len() == entries.len() {
            return Ok(Items::Json(texts));
        }
        let objects = entries.iter().map(decode_entry).collect::<Result<_, _>>()?;
        self.read_items_as(objects, version, shape).await
    }

    /// Converts an object written at its version to the storage version and prunes it there.
    pub async fn to_storage(&self, object: Value) -> Result<Value, ApiError> {
        self.all_to_storage(vec![object])
            .await?
            .pop()
            .ok_or_else(|| ApiError::internal("conversion returned no object"))
    }

    /// [`ServedCrd::to_storage`] for objects in any versions, converted together (one webhook
    /// call), as storage version migration rewrites a page of them.
    pub async fn all_to_storage(&self, objects: Vec<Value>) -> Result<Vec<Value>, ApiError> {
        let storage = self.storage_version().to_string();
        let mut converted = self.convert(objects, &storage, Shape::Object).await?;
        if let Some(schema) = self.schema(&storage) {
            for object in &mut converted {
                crdctl_schema::prune(object, schema);
            }
        }
        Ok(converted)
    }

    /// `objects` converted to `version` and nothing more (no pruning or defaulting), as the
    /// field manager converts a write to each manager's version.
    pub async fn convert(&self, objects: Vec<Value>, version: &str, shape: Shape) -> Result<Vec<Value>, ApiError> {
        let desired = self.api_version(version);
        // Objects already in the desired version need no converter, so a webhook that cannot
        // be reached (or configured) only fails the requests that need it, as upstream.
        if objects.iter().all(|object| object["apiVersion"] == desired.as_str()) {
            return Ok(objects);
        }
        let converter = self.converter.as_ref().map_err(|err| ApiError::internal(err.message.clone()))?;
        converter.convert(objects, &desired, shape).await.map_err(|err| ApiError::internal(err.message))
    }
}

/// Objects read for a client: values, or the JSON text of each, as a webhook's answer is kept.
#[derive(Debug)]
pub enum Items {
    /// Objects as values.
    Values(Vec<Value>),
    /// Each object's JSON text.
    Json(Vec<Vec<u8>>),
}

impl Items {
    /// The objects as values, parsing text.
    pub fn into_values(self) -> Result<Vec<Value>, ApiError> {
        match self {
            Items::Values(values) => Ok(values),
            Items::Json(texts) => texts
                .iter()
                .map(|text| {
                    serde_json::from_slice(text).map_err(|err| ApiError::internal(format!("converted object: {err}")))
                })
                .collect(),
        }
    }

    /// Writes the objects as a JSON array.
    pub fn write_array(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        match self {
            Items::Values(values) => {
                for (idx, value) in values.iter().enumerate() {
                    if idx > 0 {
                        out.push(b',');
                    }
                    // Writing a value into memory cannot fail.
                    let _ = serde_json::to_writer(&mut *out, value);
                }
            }
            Items::Json(texts) => {
                for (idx, text) in texts.iter().enumerate() {
                    if idx > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(text);
                }
            }
        }
        out.push(b']');
    }
}

/// Every CRD by name, replaced whole on each change so readers never lock for long.
pub type Crds = Arc<BTreeMap<String, Arc<ServedCrd>>>;

/// The CRD cache. Cheap to clone.
#[derive(Clone)]
pub struct Registry {
    crds: Arc<RwLock<Crds>>,
    observed: watch::Sender<Revision>,
    resolver: Arc<dyn ServiceResolver>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

impl Registry {
    /// Loads every CRD from the store and starts following their changes.
    pub async fn start(store: Arc<dyn Store>, resolver: Arc<dyn ServiceResolver>) -> Result<Registry, ApiError> {
        let registry = Registry {
            crds: Arc::new(RwLock::new(Arc::new(BTreeMap::new()))),
            observed: watch::Sender::new(0),
            resolver,
        };
        let revision = registry.reload(&*store).await?;
        tokio::spawn(registry.clone().follow(store, revision));
        Ok(registry)
    }

    /// Every CRD, by name.
    pub fn all(&self) -> Crds {
        Arc::clone(&self.crds.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// The CRD named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<ServedCrd>> {
        self.all().get(name).cloned()
    }

    /// The CRD serving `<plural>.<group>`.
    pub fn by_resource(&self, group: &str, plural: &str) -> Option<Arc<ServedCrd>> {
        self.all().values().find(|crd| crd.group() == group && crd.plural() == plural).cloned()
    }

    /// The resource serving `kind` of `group`/`version`: a built-in one, or a CRD's at a served
    /// version (upstream's RESTMapper, for what a policy names by kind).
    pub fn resource_of_kind(&self, (group, version, kind): (&str, &str, &str)) -> Option<Arc<dyn Resource>> {
        let builtin = builtin::RESOURCES.iter();
        if let Some(builtin) = builtin.into_iter().find(|r| r.group == group && r.version == version && r.kind == kind)
        {
            return Some(Arc::new(builtin));
        }
        let served = self.all().values().find(|c| c.group() == group && c.kind() == kind).cloned()?;
        served.served_version(version)?;
        Some(served)
    }

    /// How webhook Services are reached (`--webhook-service`, else DNS).
    pub fn resolver(&self) -> &dyn ServiceResolver {
        &*self.resolver
    }

    /// The converter a CRD's `spec.conversion` asks for, its webhook Services resolved as
    /// the served CRDs' are.
    pub fn converter_for(&self, crd: &CustomResourceDefinition) -> Result<Converter, ConversionError> {
        Converter::for_crd(crd, &*self.resolver)
    }

    /// Changes as they are seen: the revision of the store the cache has caught up with.
    pub fn changes(&self) -> watch::Receiver<Revision> {
        self.observed.subscribe()
    }

    /// Waits until the cache has seen the store at `revision` (after a CRD write), so the next
    /// request routes by what was written.
    pub async fn wait_for(&self, revision: Revision) {
        let mut observed = self.observed.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(5), observed.wait_for(|seen| *seen >= revision)).await;
    }

    fn load(&self, object: Value) -> Option<Arc<ServedCrd>> {
        let name = crate::object::name(&object).to_string();
        let crd = match Crd::from_value(&name, object.clone()) {
            Ok(crd) => crd,
            Err(err) => {
                tracing::error!(crd = %name, error = %err, "stored CRD cannot be loaded");
                return None;
            }
        };
        let converter = Converter::for_crd(&crd.definition, &*self.resolver);
        let mut served = ServedCrd { crd, object, converter, schemas: BTreeMap::new(), with_status: Vec::new() };
        let names: Vec<String> = served.crd.definition.spec.versions.iter().map(|v| v.name.clone()).collect();
        served.schemas =
            names.iter().filter_map(|name| Some((name.clone(), Schema::new(served.schema_json(name)?)))).collect();
        served.with_status = names
            .into_iter()
            .filter(|name| served.version_json(name).and_then(|v| v.pointer("/subresources/status")).is_some())
            .collect();
        Some(Arc::new(served))
    }

    fn replace(&self, crds: BTreeMap<String, Arc<ServedCrd>>) {
        *self.crds.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(crds);
    }

    async fn reload(&self, store: &dyn Store) -> Result<Revision, ApiError> {
        let page = store
            .list(ListOptions { prefix: CRD_PREFIX, ..Default::default() })
            .await
            .map_err(|err| ApiError::unavailable(err.to_string()))?;
        let mut crds = BTreeMap::new();
        for entry in page.entries {
            if let Some(served) = decode(&entry.value, entry.mod_revision).and_then(|object| self.load(object)) {
                crds.insert(served.crd.name().to_string(), served);
            }
        }
        self.replace(crds);
        self.observed.send_replace(page.revision);
        Ok(page.revision)
    }

    async fn follow(self, store: Arc<dyn Store>, mut revision: Revision) {
        loop {
            let mut watch = match store.watch(CRD_PREFIX, revision).await {
                Ok(watch) => watch,
                Err(err) => {
                    tracing::warn!(error = %err, "CRD watch failed; reloading");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if let Ok(reloaded) = self.reload(&*store).await {
                        revision = reloaded;
                    }
                    continue;
                }
            };
            while let Some(event) = watch.next().await {
                let Ok(event) = event else { break };
                let mut crds = (*self.all()).clone();
                let name = event.key.trim_start_matches(CRD_PREFIX).to_string();
                match (event.kind, event.entry) {
                    (EventKind::Put, Some(entry)) => {
                        if let Some(served) = decode(&entry.value, entry.mod_revision).and_then(|o| self.load(o)) {
                            crds.insert(name, served);
                        }
                    }
                    _ => {
                        crds.remove(&name);
                    }
                }
                self.replace(crds);
                revision = event.revision;
                self.observed.send_replace(revision);
            }
            // The watch ended (the store closed it, or this replica fell behind): start again
            // from the last revision seen; a compacted one reloads above.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The resource a store prefix belongs to, for the watch cache: `/registry/<resource>/` for the
/// core group (no dot in its name), `/registry/<group>/<plural>/` for the others (API groups
/// have dots); namespaced prefixes share their resource's cache.
pub fn resource_prefix(prefix: &str) -> Option<String> {
    let rest = prefix.strip_prefix("/registry/")?;
    let mut segments = rest.split('/');
    let first = segments.next().filter(|s| !s.is_empty())?;
    if !first.contains('.') {
        return Some(format!("/registry/{first}/"));
    }
    let plural = segments.next().filter(|s| !s.is_empty())?;
    Some(format!("/registry/{first}/{plural}/"))
}

/// What a DELETE does to an object (upstream's `RESTDeleteStrategy` with the finalizers of the
/// object and, for namespaces and CRDs, of their lifecycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDelete {
    /// Nothing holds it: it is removed.
    Remove,
    /// It is marked for deletion (the object, changed, is to be written).
    Mark,
    /// It was marked before: nothing to write.
    AlreadyMarked,
}

/// What a DELETE does to an object its `metadata.finalizers` may hold: marked with
/// `deletionTimestamp` (a grace period of 0, as nothing runs pods) until its finalizers are gone;
/// marking counts a `generation` (upstream's `markAsDeleting`).
pub fn on_delete(object: &mut Value) -> OnDelete {
    if crate::object::finalizers(object).is_empty() {
        return OnDelete::Remove;
    }
    if crate::object::meta_field(object, "deletionTimestamp").is_some() {
        return OnDelete::AlreadyMarked;
    }
    let meta = crate::object::meta_mut(object);
    if let Some(generation) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
        meta.insert("generation".into(), Value::from(generation.saturating_add(1)));
    }
    meta.insert("deletionTimestamp".into(), Value::String(crate::object::now_timestamp()));
    meta.insert("deletionGracePeriodSeconds".into(), Value::from(0));
    OnDelete::Mark
}

/// How a deletion treats the deleted object's dependents (`propagationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// The object goes first, its dependents after.
    Background,
    /// The dependents that block it go first.
    Foreground,
    /// The dependents lose their reference to it and stay.
    Orphan,
}

impl Propagation {
    /// The name in `DeleteOptions`.
    pub fn name(self) -> &'static str {
        match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        }
    }
}

/// The finalizer that keeps an object until the garbage collector has orphaned its dependents.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// The finalizer that keeps an object until its blocking dependents are gone.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// Sets the garbage collector's finalizers of an object being deleted, as upstream's store
/// does (`deletionFinalizersForGarbageCollection`): the policy asked for, else the one its
/// finalizers already say, else the resource's `default`. Whether they changed.
pub fn set_gc_finalizers(object: &mut Value, asked: Option<Propagation>, default: Propagation) -> bool {
    let mut finalizers = crate::object::finalizers(object);
    let has = |finalizer: &str| finalizers.iter().any(|f| f == finalizer);
    let propagation = asked.unwrap_or(if has(ORPHAN_FINALIZER) {
        Propagation::Orphan
    } else if has(FOREGROUND_FINALIZER) {
        Propagation::Foreground
    } else {
        default
    });
    let before = finalizers.clone();
    finalizers.retain(|f| f != ORPHAN_FINALIZER && f != FOREGROUND_FINALIZER);
    match propagation {
        Propagation::Orphan => finalizers.push(ORPHAN_FINALIZER.into()),
        Propagation::Foreground => finalizers.push(FOREGROUND_FINALIZER.into()),
        Propagation::Background => {}
    }
    let same = finalizers.len() == before.len() && finalizers.iter().all(|f| before.contains(f));
    if !same {
        let meta = crate::object::meta_mut(object);
        if finalizers.is_empty() {
            meta.remove("finalizers");
        } else {
            meta.insert("finalizers".into(), finalizers.into());
        }
    }
    !same
}

/// Stored objects as their text with `metadata.resourceVersion` set, when every one is stored at
/// `api_version` (`None` otherwise): what a read of built-in objects answers without parsing them.
pub fn stored_texts(entries: &[Entry], api_version: &str) -> Option<Vec<Vec<u8>>> {
    entries
        .iter()
        .map(|entry| {
            let (stored_as, text) = stored_text(&entry.value, entry.mod_revision, None)?;
            (stored_as == api_version).then_some(text)
        })
        .collect()
}

/// [`decode`] on text: the stored object's `apiVersion`, and its text with
/// `metadata.resourceVersion` set where [`crate::object::set_resource_version`] sets it (in
/// place, or last; a `metadata` that is missing or not an object becomes one), and with
/// `apiVersion` set to `api_version` when given, as [`Converter::None`] sets it. `None` unless
/// the bytes are a JSON object.
fn stored_text(bytes: &[u8], revision: Revision, api_version: Option<&str>) -> Option<(String, Vec<u8>)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let fields = Fields::parse(text).ok()?;
    let stored_as = fields.get("apiVersion").and_then(|v| serde_json::from_str(v.get()).ok()).unwrap_or_default();
    let new_api_version = api_version.and_then(|v| serde_json::to_string(v).ok());
    let resource_version = format!("\"{revision}\"");
    let metadata = [("resourceVersion", Splice::Set(&resource_version))];
    // What was missing goes last, in the order the value path adds it.
    let mut edits = vec![("metadata", Splice::Object(&metadata))];
    edits.extend(new_api_version.as_deref().map(|new| ("apiVersion", Splice::Set(new))));
    let mut out = Vec::with_capacity(bytes.len() + 32);
    json::splice(&fields, &edits, &mut out);
    Some((stored_as, out))
}

#[cfg(test)]
mod tests {
    use super::{CRD_PREFIX, decode, resource_prefix, stored_text};

    #[test]
    fn stored_text_gets_its_resource_version_where_a_decoded_object_does() {
        let stored = [
            r#"{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"a","uid":"u"},"spec":{}}"#,
            r#"{"metadata":{"resourceVersion":"3","name":"a"},"apiVersion":"example.com/v1"}"#,
            r#"{"metadata":{}}"#,
            r#"{"metadata":null,"kind":"K"}"#,
            r#"{"kind":"K"}"#,
            r#"{}"#,
            r#" { "metadata" : { "name" : "s p a c e d" } , "x" : [ 1 , 2 ] } "#,
            r#"{"metadata":{ },"kind":"K"}"#,
            r#"{"metadata":{"resource\u0056ersion":"9","name":"escaped"}}"#,
            r#"{"metadata":{"name":"\u0061","annotations":{"resourceVersion":"not this one"}}}"#,
        ];
        for text in stored {
            let decoded = decode(text.as_bytes(), 42).unwrap();
            // As stored, and converted by the None strategy.
            let converted = crdctl_conversion::none::convert(vec![decoded.clone()], "example.com/v2").remove(0);
            for (to, expected) in [(None, &decoded), (Some("example.com/v2"), &converted)] {
                let (stored_as, written) = stored_text(text.as_bytes(), 42, to).unwrap();
                let read: serde_json::Value = serde_json::from_slice(&written).unwrap();
                assert_eq!(serde_json::to_string(&read).unwrap(), serde_json::to_string(expected).unwrap(), "{text}");
                assert_eq!(stored_as, decoded["apiVersion"].as_str().unwrap_or_default());
            }
        }
        for not_an_object in ["[1]", "null", "\"text\"", "{\"a\":", ""] {
            assert!(stored_text(not_an_object.as_bytes(), 1, None).is_none(), "{not_an_object}");
            assert!(decode(not_an_object.as_bytes(), 1).is_none(), "{not_an_object}");
        }
    }

    #[test]
    fn prefixes_map_to_their_resource() {
        let cases = [
            ("/registry/namespaces/", Some("/registry/namespaces/")),
            ("/registry/namespaces/default", Some("/registry/namespaces/")),
            ("/registry/events/default/", Some("/registry/events/")),
            ("/registry/example.com/crontabs/", Some("/registry/example.com/crontabs/")),
            ("/registry/example.com/crontabs/default/", Some("/registry/example.com/crontabs/")),
            (CRD_PREFIX, Some(CRD_PREFIX)),
            ("/registry/example.com/", None),
            ("/other/", None),
        ];
        for (prefix, resource) in cases {
            assert_eq!(resource_prefix(prefix).as_deref(), resource, "{prefix}");
        }
    }
}
