//! Server-side apply and `metadata.managedFields`: which manager owns which field, updated by
//! every write, and the apply operation that merges a manager's configuration into the live
//! object, removes what it stopped applying, and refuses to take fields from other managers
//! unless forced.
//!
//! Upstream: apimachinery's `pkg/util/managedfields/internal` (the field manager, conflict
//! messages, the fields every object strips) over structured-merge-diff's `merge.Updater`
//! (`Apply`, `Update`, `prune`). [`set`] holds field sets and their `FieldsV1` encoding;
//! [`typed`] walks objects with the CRD's schema.
//!
//! A write is compared in the request's version, and again in each API version other managers
//! recorded their fields in ([`OtherVersions`], from the old and new object converted by the
//! caller, as `Updater.update` converts them): with a conversion webhook, `hostPort` at v1beta1
//! may be `host` and `port` at v1. Not modelled: pruning what an applier stopped applying when
//! its previous apply was at another version (it is pruned in the request's version), and
//! managers of a version the CRD no longer has (judged in the request's version; upstream's
//! converter fails for them).

pub mod set;
pub mod typed;

use std::collections::HashMap;

use crdctl_schema::Schema;
use serde_json::{Value, json};

use crate::error::ApiError;
use set::Set;
use typed::Comparison;

/// `Apply` or `Update`.
const APPLY: &str = "Apply";
const UPDATE: &str = "Update";

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: String,
    fields: Set,
}

impl Entry {
    /// Whether two entries are the same manager: appliers regardless of API version.
    fn same_manager(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == APPLY || self.api_version == other.api_version)
    }

    /// How conflicts name the manager (upstream's `printManager`).
    fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == UPDATE {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }
}

fn decode(object: &Value) -> Vec<Entry> {
    let entries = crate::object::meta_field(object, "managedFields").and_then(Value::as_array);
    let text = |entry: &Value, key: &str| entry.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    entries
        .into_iter()
        .flatten()
        .map(|entry| Entry {
            manager: text(entry, "manager"),
            operation: text(entry, "operation"),
            api_version: text(entry, "apiVersion"),
            time: text(entry, "time"),
            subresource: text(entry, "subresource"),
            fields: Set::from_fields_v1(entry.get("fieldsV1").unwrap_or(&Value::Null)),
        })
        .collect()
}

/// At most this many `Update` managers are kept; older ones are merged (upstream's
/// `DefaultMaxUpdateManagers`).
const MAX_UPDATE_MANAGERS: usize = 10;
/// The manager older updates are merged into, one per API version.
const ANCIENT_CHANGES: &str = "ancient-changes";

/// Upstream's `capManagersManager`: while there are more than [`MAX_UPDATE_MANAGERS`] `Update`
/// entries, the oldest are merged, per API version, into an `ancient-changes` entry, so
/// objects many clients touch keep a bounded `managedFields`.
#[expect(clippy::indexing_slicing, reason = "every index is below entries.len(), which only the final retain changes")]
fn cap_update_managers(entries: &mut Vec<Entry>) {
    let mut updaters: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].operation == UPDATE).collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    // Oldest first; ties by identity, as upstream compares manager identifiers.
    let identity = |e: &Entry| (e.manager.clone(), e.api_version.clone(), e.subresource.clone());
    updaters
        .sort_by(|&a, &b| (&entries[a].time, identity(&entries[a])).cmp(&(&entries[b].time, identity(&entries[b]))));
    let is_bucket = |e: &Entry, version: &str| {
        e.manager == ANCIENT_CHANGES && e.operation == UPDATE && e.api_version == version && e.subresource.is_empty()
    };
    let mut first_of_version: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut merged = vec![false; entries.len()];
    let mut remaining = updaters.len();
    for &index in &updaters {
        if remaining <= MAX_UPDATE_MANAGERS {
            break;
        }
        let version = entries[index].api_version.clone();
        let Some(&first) = first_of_version.get(&version) else {
            first_of_version.insert(version, index);
            continue;
        };
        let bucket = match (0..entries.len()).find(|&i| !merged[i] && is_bucket(&entries[i], &version)) {
            Some(bucket) => bucket,
            None => {
                // The first entry of this version becomes the bucket.
                entries[first].manager = ANCIENT_CHANGES.to_string();
                entries[first].subresource.clear();
                first
            }
        };
        if bucket == index {
            continue;
        }
        let fields = entries[index].fields.union(&entries[bucket].fields);
        entries[bucket].fields = fields;
        entries[bucket].time = entries[index].time.clone();
        merged[index] = true;
        remaining -= 1;
    }
    let mut index = 0;
    entries.retain(|_| {
        index += 1;
        !merged[index - 1]
    });
}

/// Writes the entries, sorted as upstream sorts them (operation, time, manager, …).
fn encode(object: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    cap_update_managers(&mut entries);
    entries.sort_by(|a, b| {
        (&a.operation, &a.time, &a.manager, &a.api_version, &a.subresource).cmp(&(
            &b.operation,
            &b.time,
            &b.manager,
            &b.api_version,
            &b.subresource,
        ))
    });
    let encoded: Vec<Value> = entries
        .into_iter()
        .map(|e| {
            // Built field by field: `json!` would copy each string it is given.
            let mut entry = serde_json::Map::with_capacity(7);
            entry.insert("manager".into(), Value::String(e.manager));
            entry.insert("operation".into(), Value::String(e.operation));
            entry.insert("apiVersion".into(), Value::String(e.api_version));
            entry.insert("time".into(), Value::String(e.time));
            entry.insert("fieldsType".into(), "FieldsV1".into());
            entry.insert("fieldsV1".into(), e.fields.to_fields_v1());
            if !e.subresource.is_empty() {
                entry.insert("subresource".into(), Value::String(e.subresource));
            }
            Value::Object(entry)
        })
        .collect();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if encoded.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(encoded));
        }
    }
}

/// Where a write lands, which decides which fields it may own.
#[derive(Debug, Clone)]
pub struct Scope<'a> {
    /// The version's schema; `None` for built-in kinds (fields deduced from the object).
    pub schema: Option<&'a Schema>,
    /// `apiVersion` of the request.
    pub api_version: String,
    /// `status` for the status subresource, empty otherwise.
    pub subresource: &'a str,
    /// Whether `status` is a subresource (then the main resource does not own it).
    pub has_status: bool,
}

impl Scope<'_> {
    /// The fields no manager owns: server-owned metadata, and what the endpoint resets.
    fn owned(&self, set: Set) -> Set {
        let mut set = set;
        set.remove(&["f:apiVersion"]);
        set.remove(&["f:kind"]);
        // `metadata` itself is never owned (an empty one would be), only fields inside it.
        set.unmark(
            "f:metadata",
            &[
                "f:name",
                "f:namespace",
                "f:creationTimestamp",
                "f:selfLink",
                "f:uid",
                "f:generation",
                "f:managedFields",
                "f:resourceVersion",
                "f:deletionTimestamp",
                "f:deletionGracePeriodSeconds",
            ],
        );
        match (self.subresource, self.has_status) {
            ("status", _) => set.only(&["f:status"]),
            (_, true) => {
                set.remove(&["f:status"]);
                set
            }
            _ => set,
        }
    }

    fn field_set(&self, object: &Value) -> Set {
        self.owned(typed::field_set(object, self.schema))
    }
}

fn without_managed_fields(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    copy
}

/// Records a create, update or patch by `manager` (operation `Update`): the fields it changed
/// become its own and leave their other owners (each judged in its own version, by `others`);
/// removed fields leave every owner.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    scope: &Scope<'_>,
    manager: &str,
    now: &str,
    others: &OtherVersions,
) {
    let mut entries = old.map(decode).unwrap_or_default();
    let empty = json!({});
    let old_object = old.map(without_managed_fields).unwrap_or(empty);
    // `encode` below rewrites `managedFields`: empty it in place (keeping its position among
    // the keys) rather than copy the object without it; the server-owned field is stripped anyway.
    if let Some(managed) = new.get_mut("metadata").and_then(|metadata| metadata.get_mut("managedFields")) {
        managed.take();
    }
    let changes = Changes::new(typed::compare(&old_object, new, scope.schema), others, scope);
    let me = Entry {
        manager: manager.to_string(),
        operation: UPDATE.into(),
        api_version: scope.api_version.to_string(),
        time: now.to_string(),
        subresource: scope.subresource.to_string(),
        fields: Set::default(),
    };
    let previous = entries.iter().find(|e| e.same_manager(&me)).cloned();
    entries.retain(|e| !e.same_manager(&me));
    for entry in &mut entries {
        let (changed, removed) = changes.seen_by(entry);
        entry.fields = entry.fields.difference(changed).difference(removed);
    }
    let (changed, removed) = changes.into_request_version();
    let fields = match &previous {
        Some(previous) => previous.fields.difference(&removed).joined(changed),
        None => changed,
    };
    entries.push(keep_time_if_unchanged(Entry { fields, ..me }, previous));
    encode(new, entries);
}

/// The API versions other than `api_version` that `object`'s managers recorded fields in:
/// the versions to convert a write to before [`record_update`] or [`apply_finish`].
pub fn other_manager_versions(object: &Value, api_version: &str) -> Vec<String> {
    // Only the versions: the entries' field sets are decoded once, by the write itself.
    let entries = crate::object::meta_field(object, "managedFields").and_then(Value::as_array).into_iter().flatten();
    let mut versions: Vec<String> = entries
        .filter_map(|entry| entry.get("apiVersion").and_then(Value::as_str))
        .filter(|version| *version != api_version)
        .map(str::to_string)
        .collect();
    versions.sort();
    versions.dedup();
    versions
}

/// A write compared in the API versions other managers recorded their fields in. A manager
/// whose version is not here (the CRD no longer has it) is judged in the request's version.
#[derive(Debug, Default)]
pub struct OtherVersions {
    compared: HashMap<String, Comparison>,
}

impl OtherVersions {
    /// The old and new object as converted to `api_version`, compared with its schema.
    pub fn compared(&mut self, api_version: &str, old: &Value, new: &Value, schema: Option<&Schema>) {
        self.compared.insert(api_version.to_string(), typed::compare(old, new, schema));
    }
}

/// The fields a write changed and removed, owned fields only, in the request's version and in
/// each other version compared.
struct Changes {
    request: (Set, Set),
    others: HashMap<String, (Set, Set)>,
}

impl Changes {
    fn new(request: Comparison, others: &OtherVersions, scope: &Scope<'_>) -> Changes {
        let owned = |c: &Comparison| (scope.owned(c.modified.union(&c.added)), scope.owned(c.removed.clone()));
        let Comparison { added, modified, removed } = request;
        Changes {
            request: (scope.owned(modified.joined(added)), scope.owned(removed)),
            others: others.compared.iter().map(|(version, c)| (version.clone(), owned(c))).collect(),
        }
    }

    fn into_request_version(self) -> (Set, Set) {
        self.request
    }

    /// What `entry`'s manager sees changed and removed: in its own version when compared there.
    fn seen_by(&self, entry: &Entry) -> (&Set, &Set) {
        let (changed, removed) = self.others.get(&entry.api_version).unwrap_or(&self.request);
        (changed, removed)
    }
}

/// A manager's entry keeps its time unless its fields changed, so a repeated write is a no-op.
fn keep_time_if_unchanged(entry: Entry, previous: Option<Entry>) -> Entry {
    match previous {
        Some(previous) if previous.fields == entry.fields => Entry { time: previous.time, ..entry },
        _ => entry,
    }
}

/// Fields another manager owns that an apply would change.
#[derive(Debug)]
pub struct Conflicts(Vec<(String, String)>);

impl Conflicts {
    /// Each conflict: the other manager as upstream names it, and the field path.
    pub fn fields(&self) -> &[(String, String)] {
        &self.0
    }

    /// The 409 upstream answers, with one `FieldManagerConflict` cause per field.
    pub fn into_error(self) -> ApiError {
        let conflicts = self.0;
        let message = if let [(manager, field)] = conflicts.as_slice() {
            format!("Apply failed with 1 conflict: conflict with {manager}: {field}")
        } else {
            let mut lines = Vec::new();
            let mut managers: Vec<&String> = conflicts.iter().map(|(m, _)| m).collect();
            managers.dedup();
            for manager in managers {
                lines.push(format!("conflicts with {manager}:"));
                lines.extend(conflicts.iter().filter(|(m, _)| m == manager).map(|(_, path)| format!("- {path}")));
            }
            format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
        };
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|(manager, path)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {manager}"), "field": path}))
            .collect();
        ApiError::apply_conflict(message, causes)
    }
}

/// Server-side apply of `config` by `manager` onto `live` (None on create), with every other
/// manager judged in the request's version: [`apply_merge`] then [`apply_finish`].
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    scope: &Scope<'_>,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, Conflicts> {
    apply_finish(apply_merge(live, config, scope, manager, now), scope, force, &OtherVersions::default())
}

/// An apply merged and pruned, before its conflicts are known.
#[derive(Debug)]
pub struct Merged {
    live: Value,
    merged: Value,
    entries: Vec<Entry>,
    me: Entry,
    previous: Option<Entry>,
    /// The client-side apply annotation to write for kubectl's apply ([`LAST_APPLIED`]).
    last_applied: Option<String>,
}

/// The annotation in which `kubectl apply` (client side) keeps the configuration it applied.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The manager `kubectl apply --server-side` applies as, for which upstream's field manager
/// bridges client-side apply (`lastAppliedManager`, `lastAppliedUpdater`).
const KUBECTL: &str = "kubectl";

/// The client-side apply annotation of `object`, if it has a non-empty one.
fn last_applied_of(object: &Value) -> Option<&str> {
    let annotations = object.get("metadata")?.get("annotations")?;
    annotations.get(LAST_APPLIED)?.as_str().filter(|text| !text.is_empty())
}

/// What kubectl's server-side apply writes to the client-side apply annotation, when the live
/// object has one (upstream's `buildLastApplied`): the applied configuration without that
/// annotation, as Go encodes an unstructured object.
fn next_last_applied(live: &Value, config: &Value, manager: &str) -> Option<String> {
    if manager != KUBECTL || last_applied_of(live).is_none() {
        return None;
    }
    let mut config = config.clone();
    if let Some(annotations) = config.get_mut("metadata").and_then(|m| m.get_mut("annotations")) {
        annotations.as_object_mut().map(|a| a.remove(LAST_APPLIED));
    }
    Some(format!("{}\n", crdctl_model::go::json(&config)))
}

/// The fields kubectl's server-side apply may take from client-side apply without a conflict
/// (upstream's `allowedConflictsFromLastApplied`): those the live object's client-side apply
/// annotation sets, to the values the live object still has.
fn allowed_from_last_applied(live: &Value, scope: &Scope<'_>) -> Option<Set> {
    let last_applied: Value = serde_json::from_str(last_applied_of(live)?).ok()?;
    if last_applied.get("apiVersion").and_then(Value::as_str) != Some(scope.api_version.as_str()) {
        return None;
    }
    let comparison = typed::compare(&last_applied, live, scope.schema);
    let set = typed::field_set(&last_applied, scope.schema);
    Some(set.difference(&comparison.modified).difference(&comparison.added).difference(&comparison.removed))
}

impl Merged {
    /// The live object without `managedFields` (`{}` on create) and the merged object: what to
    /// convert to [`other_manager_versions`] for [`apply_finish`].
    pub fn objects(&self) -> (&Value, &Value) {
        (&self.live, &self.merged)
    }
}

/// The first half of an apply: `config` merged into `live`, and what the manager applied
/// before and applies no more removed, unless someone else still owns it.
pub fn apply_merge(live: Option<&Value>, config: &Value, scope: &Scope<'_>, manager: &str, now: &str) -> Merged {
    let mut entries = live.map(decode).unwrap_or_default();
    let live_object = live.map(without_managed_fields).unwrap_or_else(|| json!({}));
    let mut merged = typed::merge(&live_object, config, scope.schema);
    let me = Entry {
        manager: manager.to_string(),
        operation: APPLY.into(),
        api_version: scope.api_version.to_string(),
        time: now.to_string(),
        subresource: scope.subresource.to_string(),
        fields: scope.field_set(config),
    };
    let previous = entries.iter().find(|e| e.same_manager(&me)).cloned();
    let last = previous.as_ref().map(|e| e.fields.clone()).unwrap_or_default();
    entries.retain(|e| !e.same_manager(&me));
    if !last.is_empty() {
        let owned = entries.iter().fold(me.fields.clone(), |owned, e| owned.union(&e.fields));
        let stale = typed::with_named_fields_as_members(&last).difference(&owned);
        typed::remove(&mut merged, &stale, &owned, scope.schema);
    }
    let last_applied = next_last_applied(&live_object, config, manager);
    Merged { live: live_object, merged, entries, me, previous, last_applied }
}

/// The second half of an apply: the fields it changes that other managers own (each judged
/// in its own version, by `others`) are conflicts, unless `force` takes them over.
pub fn apply_finish(
    applied: Merged,
    scope: &Scope<'_>,
    force: bool,
    others: &OtherVersions,
) -> Result<Value, Conflicts> {
    let Merged { live, mut merged, mut entries, me, previous, last_applied } = applied;
    let changes = Changes::new(typed::compare(&live, &merged, scope.schema), others, scope);
    let mut conflicts = Vec::new();
    for entry in &entries {
        let (changed, _) = changes.seen_by(entry);
        for path in entry.fields.intersection(changed).paths() {
            conflicts.push((entry.describe(), set::display(&path)));
        }
    }
    if !conflicts.is_empty() && !force {
        // kubectl's server-side apply takes over, without conflicts, what its client-side
        // apply set and nobody changed since, as upstream's `lastAppliedManager` does.
        if me.manager == KUBECTL
            && let Some(allowed) = allowed_from_last_applied(&live, scope)
        {
            let allowed: std::collections::HashSet<String> = allowed.paths().iter().map(|p| set::display(p)).collect();
            conflicts.retain(|(_, path)| !allowed.contains(path));
        }
        if !conflicts.is_empty() {
            conflicts.sort();
            return Err(Conflicts(conflicts));
        }
    }
    for entry in &mut entries {
        let (changed, removed) = changes.seen_by(entry);
        entry.fields = entry.fields.difference(changed).difference(removed);
    }
    entries.push(keep_time_if_unchanged(me, previous));
    encode(&mut merged, entries);
    if let Some(last_applied) = last_applied {
        let metadata = crate::object::object_mut(&mut merged, "metadata");
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        crate::object::set(annotations, LAST_APPLIED, Value::String(last_applied));
    }
    Ok(merged)
}

/// The manager of a write without `fieldManager`: the user agent up to its first `/`, as
/// upstream's `prefixFromUserAgent`, at most 128 characters.
pub fn default_manager(user_agent: Option<&str>) -> String {
    let agent = user_agent.unwrap_or_default();
    agent.split('/').next().unwrap_or_default().chars().take(128).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(schema: &Schema) -> Scope<'_> {
        Scope { schema: Some(schema), api_version: "example.com/v1".into(), subresource: "", has_status: true }
    }

    fn schema() -> Schema {
        Schema::new(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }}))
    }

    fn object(spec: Value) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "x"}, "spec": spec})
    }

    #[test]
    fn more_than_ten_update_managers_merge_the_oldest_into_ancient_changes() {
        let schema = Schema::new(&json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        let mut live = object(json!({}));
        for n in 0..12 {
            let mut new = live.clone();
            new["spec"][format!("f{n:02}")] = json!(n);
            record_update(
                Some(&live),
                &mut new,
                &scope(&schema),
                &format!("m{n:02}"),
                &format!("2026-12-01T00:00:{n:02}Z"),
                &OtherVersions::default(),
            );
            live = new;
        }
        let entries = live["metadata"]["managedFields"].as_array().unwrap();
        let managers: Vec<&str> = entries.iter().map(|e| e["manager"].as_str().unwrap()).collect();
        // m00, m01 and m02 were the oldest: merged; the bucket takes the newest merged time.
        assert_eq!(managers, ["ancient-changes", "m03", "m04", "m05", "m06", "m07", "m08", "m09", "m10", "m11"]);
        assert_eq!(entries[0]["time"], "2026-12-01T00:00:02Z");
        assert_eq!(entries[0]["fieldsV1"], json!({"f:spec": {"f:f00": {}, "f:f01": {}, "f:f02": {}}}));
        assert_eq!(entries[1]["fieldsV1"], json!({"f:spec": {"f:f03": {}}}));
    }

    #[test]
    fn apply_twice_is_idempotent_and_dropping_a_field_removes_it() {
        let schema = schema();
        let first = apply(None, &object(json!({"a": "1", "b": "2"})), &scope(&schema), "alice", false, "t1").unwrap();
        let again =
            apply(Some(&first), &object(json!({"a": "1", "b": "2"})), &scope(&schema), "alice", false, "t1").unwrap();
        assert_eq!(first, again);
        let dropped = apply(Some(&again), &object(json!({"a": "1"})), &scope(&schema), "alice", false, "t2").unwrap();
        assert_eq!(dropped["spec"], json!({"a": "1"}));
        assert_eq!(dropped["metadata"]["managedFields"][0]["fieldsV1"], json!({"f:spec": {"f:a": {}}}));
    }

    #[test]
    fn a_second_applier_conflicts_unless_forced_or_in_agreement() {
        let schema = schema();
        let first = apply(None, &object(json!({"a": "1"})), &scope(&schema), "alice", false, "t1").unwrap();
        let Err(conflicts) = apply(Some(&first), &object(json!({"a": "2"})), &scope(&schema), "bob", false, "t2")
        else {
            panic!("expected a conflict")
        };
        let error = conflicts.into_error();
        assert_eq!(error.message, r#"Apply failed with 1 conflict: conflict with "alice": .spec.a"#);
        // The same value is shared ownership, not a conflict.
        let shared = apply(Some(&first), &object(json!({"a": "1"})), &scope(&schema), "bob", false, "t2").unwrap();
        assert_eq!(shared["metadata"]["managedFields"].as_array().unwrap().len(), 2);
        // Forced, bob takes the field; alice's entry, now empty, goes.
        let forced = apply(Some(&first), &object(json!({"a": "2"})), &scope(&schema), "bob", true, "t2").unwrap();
        assert_eq!(forced["spec"]["a"], "2");
        let managers: Vec<&Value> =
            forced["metadata"]["managedFields"].as_array().unwrap().iter().map(|e| &e["manager"]).collect();
        assert_eq!(managers, [&json!("bob")]);
    }

    #[test]
    fn metadata_is_never_owned_but_its_labels_are() {
        let schema = schema();
        let mut bare = object(json!({"a": "1"}));
        bare["metadata"] = json!({});
        let applied = apply(None, &bare, &scope(&schema), "alice", false, "t1").unwrap();
        assert_eq!(applied["metadata"]["managedFields"][0]["fieldsV1"], json!({"f:spec": {"f:a": {}}}));
        let mut labelled = object(json!({"a": "1"}));
        labelled["metadata"]["labels"] = json!({"tier": "edge"});
        let applied = apply(None, &labelled, &scope(&schema), "alice", false, "t1").unwrap();
        assert_eq!(
            applied["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:tier": {}}}, "f:spec": {"f:a": {}}})
        );
    }

    #[test]
    fn updates_take_the_fields_they_change() {
        let schema = schema();
        let applied = apply(None, &object(json!({"a": "1", "b": "2"})), &scope(&schema), "alice", false, "t1").unwrap();
        let mut edited = applied.clone();
        edited["spec"]["a"] = json!("3");
        record_update(Some(&applied), &mut edited, &scope(&schema), "kubectl-edit", "t2", &OtherVersions::default());
        let entries = edited["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries[0]["manager"], "alice");
        assert_eq!(entries[0]["fieldsV1"], json!({"f:spec": {"f:b": {}}}));
        assert_eq!(entries[1]["manager"], "kubectl-edit");
        assert_eq!(entries[1]["operation"], "Update");
        assert_eq!(entries[1]["fieldsV1"], json!({"f:spec": {"f:a": {}}}));
        // Alice applying her old value now conflicts with the editor, named with its version.
        let Err(conflicts) =
            apply(Some(&edited), &object(json!({"a": "1", "b": "2"})), &scope(&schema), "alice", false, "t3")
        else {
            panic!("expected a conflict")
        };
        assert_eq!(
            conflicts.into_error().message,
            r#"Apply failed with 1 conflict: conflict with "kubectl-edit" using example.com/v1: .spec.a"#
        );
    }
}
