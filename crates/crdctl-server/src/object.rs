//! Object metadata the server owns: names, `uid`, timestamps, `resourceVersion`, `generation`.

use std::sync::Arc;

use crdctl_model::field::{self, Path};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::error::ApiError;

/// Now, as `metadata.creationTimestamp` writes it (`2026-12-01T10:00:00Z`).
pub fn now_timestamp() -> String {
    let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap_or_else(|_| OffsetDateTime::now_utc());
    now.format(&Rfc3339).unwrap_or_default()
}

/// Seconds since the epoch, now.
pub fn now_seconds() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

/// Seconds since the epoch of an RFC 3339 timestamp.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    OffsetDateTime::parse(text, &Rfc3339).ok().map(OffsetDateTime::unix_timestamp)
}

/// A new random `uid`.
pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// How many characters of `generateName` a generated name keeps: the name's 63 less the
/// random suffix (upstream's `maxGeneratedNameLength`).
const MAX_GENERATED_PREFIX: usize = 63 - 5;

/// Picks a name for an object from its `generateName` (upstream's `names.NameGenerator`). The
/// server draws random suffixes; a test can script them to make names collide.
#[derive(Clone)]
pub struct NameGenerator(Arc<dyn Fn(&str) -> String + Send + Sync>);

impl NameGenerator {
    /// Names from a function of the prefix.
    pub fn new(generate: impl Fn(&str) -> String + Send + Sync + 'static) -> NameGenerator {
        NameGenerator(Arc::new(generate))
    }

    /// A name for `prefix`.
    pub fn generate(&self, prefix: &str) -> String {
        (self.0)(prefix)
    }
}

impl Default for NameGenerator {
    /// `generateName` plus five random characters from the upstream alphabet.
    fn default() -> NameGenerator {
        NameGenerator::new(|prefix| {
            const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
            let random = uuid::Uuid::new_v4();
            let suffix = random.as_bytes().iter().take(5).map(|b| {
                let at = usize::from(*b) % ALPHABET.len();
                ALPHABET.get(at).map_or('x', |c| char::from(*c))
            });
            truncate_prefix(prefix).chars().chain(suffix).collect()
        })
    }
}

impl std::fmt::Debug for NameGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NameGenerator")
    }
}

/// The prefix cut to [`MAX_GENERATED_PREFIX`] bytes, as upstream cuts it, but on a character
/// boundary: upstream's byte cut can leave half a character, which no valid name has anyway.
fn truncate_prefix(prefix: &str) -> &str {
    let mut end = prefix.len().min(MAX_GENERATED_PREFIX);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    prefix.get(..end).unwrap_or_default()
}

/// `metadata` of an object, created if missing or not an object.
pub fn meta_mut(object: &mut Value) -> &mut Map<String, Value> {
    object_mut(object, "metadata")
}

/// The fields of `value`, which becomes an empty object first if it is not one.
pub fn fields_mut(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(fields) => fields,
        // Just made an object: this arm is never taken.
        _ => fields_mut(value),
    }
}

/// The object field `key` of `object`, created if missing or not an object (and `object` made an
/// object if it is not one).
pub fn object_mut<'a>(object: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    fields_mut(fields_mut(object).entry(key).or_insert_with(|| json!({})))
}

/// Sets field `key` of `object` (made an object if it is not one).
pub fn set(object: &mut Value, key: &str, value: Value) {
    fields_mut(object).insert(key.to_string(), value);
}

/// The type of a body written to a built-in endpoint: an `apiVersion` or `kind` the body left
/// out (or empty) is the endpoint's, as upstream's decoder defaults them from the URL; one the
/// body does give must be the endpoint's, with upstream's message otherwise.
pub fn check_type(object: &mut Value, api_version: &str, kind: &str) -> Result<(), ApiError> {
    let Some(fields) = object.as_object_mut() else { return Ok(()) };
    for (field, expected, what) in [("apiVersion", api_version, "API version"), ("kind", kind, "kind")] {
        match fields.get(field).and_then(Value::as_str).unwrap_or_default() {
            "" => {
                fields.insert(field.into(), Value::String(expected.into()));
            }
            given if given != expected => {
                return Err(ApiError::bad_request(format!(
                    "the {what} in the data ({given}) does not match the expected {what} ({expected})"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// A field of `metadata` (`pointer("/metadata/…")` without parsing a pointer).
pub fn meta_field<'a>(object: &'a Value, field: &str) -> Option<&'a Value> {
    object.get("metadata")?.get(field)
}

/// A string field of `metadata`.
pub fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    meta_field(object, field)?.as_str()
}

/// `metadata.name`, or empty.
pub fn name(object: &Value) -> &str {
    meta_str(object, "name").unwrap_or_default()
}

/// Sets `metadata.resourceVersion` from the store revision.
pub fn set_resource_version(object: &mut Value, revision: u64) {
    meta_mut(object).insert("resourceVersion".into(), Value::String(revision.to_string()));
}

/// Parses a `resourceVersion` the client sent.
pub fn parse_resource_version(text: &str) -> Result<u64, ApiError> {
    text.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {text:?}")))
}

/// Whether `new` differs from `old` only in what the garbage collector writes (owner
/// references and finalizers) and what every write changes (upstream's
/// `IsOnlyMutatingGCFields`, blind to the bookkeeping fields).
pub fn only_garbage_collection_changes(new: &Value, old: &Value) -> bool {
    let strip = |object: &Value| {
        let mut object = object.clone();
        let meta = meta_mut(&mut object);
        for field in ["ownerReferences", "finalizers", "resourceVersion", "managedFields", "generation"] {
            meta.remove(field);
        }
        object
    };
    strip(new) == strip(old)
}

/// The object's finalizers.
pub fn finalizers(object: &Value) -> Vec<String> {
    strings(meta_field(object, "finalizers"))
}

/// The strings of a list of strings (none when `value` is absent or no list).
pub fn strings(value: Option<&Value>) -> Vec<String> {
    value.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

/// Whether two objects differ outside `metadata` (and `status`, when it is a subresource):
/// what bumps `generation`.
pub fn spec_changed(old: &Value, new: &Value, ignore_status: bool) -> bool {
    let strip = |object: &Value| -> Value {
        let mut copy = object.clone();
        if let Some(fields) = copy.as_object_mut() {
            fields.remove("metadata");
            fields.remove("apiVersion");
            if ignore_status {
                fields.remove("status");
            }
        }
        copy
    };
    strip(old) != strip(new)
}

/// The `generateName` of an object that has no name: the server names it.
pub fn name_to_generate(object: &Value) -> Option<String> {
    let meta = object.get("metadata")?;
    if meta.get("name").and_then(Value::as_str).is_some_and(|name| !name.is_empty()) {
        return None;
    }
    meta.get("generateName").and_then(Value::as_str).filter(|prefix| !prefix.is_empty()).map(str::to_string)
}

/// Sets `metadata.name`.
pub fn set_name(object: &mut Value, name: String) {
    meta_mut(object).insert("name".into(), Value::String(name));
}

/// Fills what the server owns on create (`uid`, `creationTimestamp`) and drops what it sets
/// later (`resourceVersion`, `deletionTimestamp`). `generation` is the strategy's: only kinds
/// with a spec count them ([`start_generation`]).
pub fn prepare_create(object: &mut Value, namespace: Option<&str>) {
    let meta = meta_mut(object);
    if let Some(namespace) = namespace {
        meta.insert("namespace".into(), Value::String(namespace.to_string()));
    }
    meta.insert("uid".into(), Value::String(new_uid()));
    meta.insert("creationTimestamp".into(), Value::String(now_timestamp()));
    for owned in ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"] {
        meta.remove(owned);
    }
}

/// The bytes to store: the object without its `resourceVersion`, which is the store's
/// revision. Writing a value into memory cannot fail.
pub fn to_stored(object: &Value) -> Vec<u8> {
    let encoded = match meta_field(object, "resourceVersion") {
        None => serde_json::to_vec(object),
        Some(_) => {
            let mut object = object.clone();
            meta_mut(&mut object).remove("resourceVersion");
            serde_json::to_vec(&object)
        }
    };
    encoded.unwrap_or_default()
}

/// `metadata.generation: 1`, for kinds whose strategy counts spec changes (CRDs, custom resources).
pub fn start_generation(object: &mut Value) {
    meta_mut(object).insert("generation".into(), Value::from(1));
}

/// Keeps what the client may not change on update: `uid`, `creationTimestamp`, `generation`,
/// `deletionTimestamp`, `namespace`, `name`.
pub fn keep_server_fields(new: &mut Value, old: &Value) {
    let old_meta = old.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
    let meta = meta_mut(new);
    for owned in [
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "name",
    ] {
        match old_meta.get(owned) {
            Some(value) => meta.insert(owned.into(), value.clone()),
            None => meta.remove(owned),
        };
    }
    meta.remove("resourceVersion");
}

/// Keeps `old`'s `status` (or its absence) in `new`: an update of the resource when `status` is
/// a subresource.
pub fn keep_status(new: &mut Value, old: &Value) {
    match old.get("status") {
        Some(status) => set(new, "status", status.clone()),
        None => {
            fields_mut(new).remove("status");
        }
    }
}

/// Makes `new` `old` with `new`'s `status`: an update through `/status`.
pub fn keep_all_but_status(new: &mut Value, old: &Value) {
    let mut updated = old.clone();
    keep_status(&mut updated, new);
    meta_mut(&mut updated).remove("resourceVersion");
    *new = updated;
}

/// `old`'s `generation`, plus one when `new` changed outside `metadata` (and `status`).
pub fn count_generation(new: &mut Value, old: &Value, has_status: bool) {
    let generation = meta_field(old, "generation").and_then(Value::as_i64).unwrap_or(1);
    let counted = if spec_changed(old, new, has_status) { generation + 1 } else { generation };
    meta_mut(new).insert("generation".into(), Value::from(counted));
}

/// Drops every member whose value is `null`, at any depth, as decoding into typed objects
/// does (a `null` pointer, slice or map is the field left out).
pub fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            fields.retain(|_, v| !v.is_null());
            fields.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// The problems of `metadata.name` as a DNS-1123 subdomain, the name rule of most kinds.
pub fn subdomain_name_errors(object: &Value) -> field::ErrorList {
    name_errors(object, crdctl_model::names::dns1123_subdomain_errors)
}

/// `metadata.name`'s problems under a name rule (`ValidateObjectMeta` with a `ValidateNameFunc`):
/// required unless a name is to be generated, then every reason the rule gives.
pub fn name_errors(object: &Value, rule: fn(&str) -> Vec<String>) -> field::ErrorList {
    let name = name(object);
    let metadata = Path::new("metadata");
    let path = metadata.child("name");
    if name.is_empty() {
        let has_generate = meta_str(object, "generateName").is_some_and(|g| !g.is_empty());
        return vec![path.required(if has_generate { "" } else { "name or generateName is required" })];
    }
    rule(name).into_iter().map(|detail| path.invalid(name, detail)).collect()
}

/// A stored object with its `resourceVersion`.
pub fn decode(bytes: &[u8], revision: crdctl_storage::Revision) -> Option<Value> {
    let mut object: Value = serde_json::from_slice(bytes).ok().filter(Value::is_object)?;
    set_resource_version(&mut object, revision);
    Some(object)
}

/// A stored entry as an object with its `resourceVersion`.
pub fn decode_entry(entry: &crdctl_storage::Entry) -> Result<Value, ApiError> {
    decode(&entry.value, entry.mod_revision)
        .ok_or_else(|| ApiError::internal(format!("stored object {} is not a JSON object", entry.key)))
}
