//! The storage version migrator: what kube-controller-manager's `resource-version-controller`
//! and `storage-version-migrator-controller` do to a `storagemigration.k8s.io`
//! `StorageVersionMigration`, done inside the server, on the store, with no request per object.
//!
//! For each migration that has neither succeeded nor failed: record the store's revision in
//! `status.resourceVersion` (once; `Failed` if the resource is not served), set `Running`, then
//! rewrite every object of the resource not yet in the storage version — a page at a time,
//! converted together (one webhook call per page), each written back comparing its revision,
//! so an object a client changed or deleted meanwhile is left alone (a write stores it in the
//! storage version anyway); `generation` and `managedFields` stay as they are. Then
//! `Succeeded`, or `Failed` with upstream's reason and message. A migration a stopped server
//! left running starts again at start-up and skips what is done.
//!
//! With `Config::auto_migrate`, it also creates a migration whenever a CRD's storage version
//! changes, as the out-of-tree migrator's trigger controller did.

use std::sync::Arc;

use crdctl_storage::{ListOptions, StoreError};
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use super::Context;
use super::queue::{Next, Queue};
use crate::error::ApiError;
use crate::informer::{self, Change};
use crate::registry::ServedCrd;
use crate::registry::builtin::migration::{FAILED, PREFIX, RUNNING, SUCCEEDED, condition_true, str_at};

/// The name the controller writes under, as upstream's.
pub const CONTROLLER: &str = "storage-version-migrator-controller";

const SUCCEEDED_REASON: &str = "StorageVersionMigrationSucceeded";
const RUNNING_REASON: &str = "StorageVersionMigrationInProgress";
const FAILED_REASON: &str = "StorageVersionMigrationFailed";

/// Objects read, converted and written back together.
const PAGE: usize = 500;
/// Writes of one page in flight at once, so the store commits them together.
const WRITES_IN_FLIGHT: usize = 64;

/// The migrator, and the trigger when asked for.
pub async fn run(cx: &Context) {
    if cx.auto_migrate {
        tokio::join!(migrations(cx), trigger(cx));
    } else {
        migrations(cx).await;
    }
}

/// Follows the migrations: every unfinished one at start, then each as it is created or changed.
async fn migrations(cx: &Context) {
    let queue = Queue::new();
    let feed = informer::follow(&*cx.store, PREFIX, |change: Change<IgnoredAny>| {
        if let Change::Put { key, .. } = change {
            queue.add(key);
        }
    });
    let work = queue.run(CONTROLLER, 1, |key| async move { sync(cx, &key).await.map(|()| Next::Done) });
    tokio::join!(feed, work);
}

/// Creates a migration whenever a CRD's storage version changes (`--auto-migrate`).
async fn trigger(cx: &Context) {
    let mut storage_versions: std::collections::BTreeMap<String, String> =
        cx.registry.all().iter().map(|(name, crd)| (name.clone(), crd.storage_version().to_string())).collect();
    let mut changes = cx.registry.changes();
    while changes.changed().await.is_ok() {
        for (name, crd) in cx.registry.all().iter() {
            let storage = crd.storage_version().to_string();
            let before = storage_versions.insert(name.clone(), storage.clone());
            if before.is_some_and(|before| before != storage) && crd.established() {
                create_for(cx, crd).await;
            }
        }
    }
}

/// A new migration of `crd`'s resource, named `<plural>.<group>-<suffix>`.
async fn create_for(cx: &Context, crd: &ServedCrd) {
    let prefix = format!("{}.{}-", crd.plural(), crd.group());
    let name = cx.names.generate(&prefix);
    let mut migration = json!({
        "apiVersion": "storagemigration.k8s.io/v1beta1",
        "kind": "StorageVersionMigration",
        "metadata": {"name": name},
        "spec": {"resource": {"group": crd.group(), "resource": crd.plural()}},
    });
    crate::object::prepare_create(&mut migration, None);
    let bytes = crate::object::to_stored(&migration);
    match cx.store.create(&format!("{PREFIX}{name}"), bytes).await {
        Ok(_) => tracing::info!(migration = %name, crd = crd.crd.name(), "storage version changed; migration created"),
        Err(err) => tracing::warn!(crd = crd.crd.name(), error = %err, "cannot create a storage version migration"),
    }
}

/// The resource a migration names, as the server serves it.
enum Target {
    /// A custom resource: objects may be stored in any of its versions.
    Custom(Arc<ServedCrd>),
    /// A built-in resource: stored in its one version, nothing to rewrite.
    BuiltIn,
}

impl Target {
    fn find(cx: &Context, group: &str, resource: &str) -> Option<Target> {
        if let Some(crd) = cx.registry.by_resource(group, resource).filter(|crd| crd.established()) {
            return Some(Target::Custom(crd));
        }
        let mut groups = crate::discovery::core_groups();
        groups.extend(crate::discovery::groups(&cx.registry));
        let served = groups
            .iter()
            .filter(|g| g.name == group)
            .flat_map(|g| &g.versions)
            .any(|version| version.resources.iter().any(|r| r.name == resource));
        served.then_some(Target::BuiltIn)
    }
}

/// Brings one migration forward; an error (the store unavailable) is retried.
async fn sync(cx: &Context, key: &str) -> Result<(), ApiError> {
    let Some(migration) = read(cx, key).await? else { return Ok(()) };
    if condition_true(&migration, SUCCEEDED) || condition_true(&migration, FAILED) {
        return Ok(());
    }
    let group = str_at(&migration, "/spec/resource/group");
    let resource = str_at(&migration, "/spec/resource/resource");
    let target = Target::find(cx, group, resource);
    if str_at(&migration, "/status/resourceVersion").is_empty() {
        if target.is_none() {
            return finish(cx, key, FAILED, FAILED_REASON, "resource does not exist in discovery").await;
        }
        let revision = cx.store.revision().await.map_err(unavailable)?;
        update_status(cx, key, |status| {
            if status.get("resourceVersion").and_then(Value::as_str).is_none_or(str::is_empty) {
                status.insert("resourceVersion".into(), json!(revision.to_string()));
            }
        })
        .await?;
    }
    let Some(target) = target else {
        return finish(cx, key, FAILED, FAILED_REASON, "resource not found").await;
    };
    update_status(cx, key, |status| set_condition(status, RUNNING, RUNNING_REASON, "")).await?;
    let migrated = match target {
        Target::Custom(crd) => rewrite(cx, &crd).await,
        Target::BuiltIn => Ok(0),
    };
    let name = key.trim_start_matches(PREFIX);
    let labels = format!("{resource}.{group}");
    match migrated {
        Ok(count) => {
            tracing::info!(migration = name, resource = %labels, rewritten = count, "storage version migration succeeded");
            cx.metrics.record_migration(&labels, "succeeded", count);
            finish(cx, key, SUCCEEDED, SUCCEEDED_REASON, "").await
        }
        Err(err) => {
            tracing::warn!(migration = name, resource = %labels, error = %err.message, "storage version migration failed");
            cx.metrics.record_migration(&labels, "failed", 0);
            finish(cx, key, FAILED, FAILED_REASON, "migration encountered unhandled error").await
        }
    }
}

/// Rewrites every object of `crd` stored in another version than its storage version; how
/// many were rewritten.
async fn rewrite(cx: &Context, crd: &ServedCrd) -> Result<u64, ApiError> {
    let prefix = crd.prefix(None);
    let storage = crd.api_version(crd.storage_version());
    let mut after: Option<String> = None;
    let mut rewritten = 0;
    loop {
        let options = ListOptions { prefix: &prefix, start_after: after.as_deref(), limit: PAGE, ..Default::default() };
        let page = cx.store.list(options).await.map_err(unavailable)?;
        after = page.entries.last().map(|entry| entry.key.clone());
        let mut stale = Vec::new();
        let mut objects = Vec::new();
        for entry in page.entries {
            let object = crate::object::decode_entry(&entry)?;
            if object.get("apiVersion").and_then(Value::as_str) != Some(storage.as_str()) {
                stale.push(entry);
                objects.push(object);
            }
        }
        if !objects.is_empty() {
            let converted = crd.all_to_storage(objects).await?;
            // Each write is a task of its own: a write that finds the store idle commits on its
            // caller's thread, so writes polled from one task would commit one at a time; as
            // tasks, the others queue meanwhile and are committed together.
            let mut writes = tokio::task::JoinSet::new();
            for (entry, object) in stale.into_iter().zip(converted) {
                if writes.len() >= WRITES_IN_FLIGHT {
                    rewritten += joined(writes.join_next().await)?;
                }
                writes.spawn(rewrite_one(Arc::clone(&cx.store), entry, object));
            }
            while !writes.is_empty() {
                rewritten += joined(writes.join_next().await)?;
            }
        }
        if !page.more {
            return Ok(rewritten);
        }
    }
}

/// A finished write's count (none when the set was empty).
fn joined(result: Option<Result<Result<u64, ApiError>, tokio::task::JoinError>>) -> Result<u64, ApiError> {
    match result {
        Some(Ok(written)) => written,
        Some(Err(err)) => Err(ApiError::internal(format!("a migration write stopped: {err}"))),
        None => Ok(0),
    }
}

/// Writes back one converted object if nobody changed it since it was read; 1 if it did.
async fn rewrite_one(
    store: Arc<dyn crdctl_storage::Store>,
    entry: crdctl_storage::Entry,
    object: Value,
) -> Result<u64, ApiError> {
    match store.update(&entry.key, crate::object::to_stored(&object), entry.mod_revision).await {
        Ok(_) => Ok(1),
        // Changed or deleted since it was read: whoever wrote it stored it in the
        // storage version, or it is gone.
        Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => Ok(0),
        Err(err) => Err(unavailable(err)),
    }
}

/// Sets a final condition (`Succeeded` or `Failed`), `Running` going `False`.
async fn finish(cx: &Context, key: &str, kind: &str, reason: &str, message: &str) -> Result<(), ApiError> {
    update_status(cx, key, |status| set_condition(status, kind, reason, message)).await
}

/// upstream's `setStatusConditions`: nothing if `kind` is already true; a final condition sets
/// `Running` to `False`.
fn set_condition(status: &mut serde_json::Map<String, Value>, kind: &str, reason: &str, message: &str) {
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    let Some(conditions) = conditions.as_array_mut() else { return };
    if conditions.iter().any(|c| c["type"] == kind && c["status"] == "True") {
        return;
    }
    if kind != RUNNING {
        for running in conditions.iter_mut().filter(|c| c["type"] == RUNNING) {
            running["status"] = json!("False");
        }
    }
    conditions.retain(|c| c["type"] != kind);
    conditions.push(json!({
        "type": kind, "status": "True", "lastTransitionTime": crate::object::now_timestamp(),
        "reason": reason, "message": message,
    }));
}

/// Changes a migration's status in the store, re-reading and changing again on a conflict.
async fn update_status(
    cx: &Context,
    key: &str,
    change: impl Fn(&mut serde_json::Map<String, Value>),
) -> Result<(), ApiError> {
    super::guaranteed_update(&*cx.store, key, |migration| change(crate::object::object_mut(migration, "status")))
        .await
        .map(|_| ())
        .map_err(unavailable)
}

async fn read(cx: &Context, key: &str) -> Result<Option<Value>, ApiError> {
    let entry = cx.store.get(key).await.map_err(unavailable)?;
    entry.map(|entry| crate::object::decode_entry(&entry)).transpose()
}

fn unavailable(err: StoreError) -> ApiError {
    ApiError::unavailable(err.to_string())
}
