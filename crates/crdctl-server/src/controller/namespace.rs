//! kube-controller-manager's namespace controller (`pkg/controller/namespace/deletion`): a
//! namespace being deleted empties itself — every namespaced resource in it, custom resources
//! included, is deleted through the verbs (in the background, so the garbage collector takes
//! their dependents, and marked where finalizers hold them) — and records what is left in its
//! `status.conditions` with upstream's reasons and messages; once nothing is left, the
//! `kubernetes` spec finalizer goes, and the namespace once no finalizer holds it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crdctl_storage::{ListOptions, StoreError};
use serde_json::{Value, json};

use super::queue::{Next, Queue};
use super::{Client, Context};
use crate::error::{ApiError, ApiResult};
use crate::informer;
use crate::registry::Propagation;
use crate::registry::builtin::namespace::{KUBERNETES_FINALIZER, PREFIX, key};

/// The name the controller runs under, as upstream's.
const CONTROLLER: &str = "namespace-controller";
/// Namespaces emptied at once (upstream's `--concurrent-namespace-syncs`).
const WORKERS: usize = 10;
/// How soon a namespace with content left (held by finalizers) is looked at again.
const RECHECK: Duration = Duration::from_millis(200);

/// The condition types upstream records, in its order, with the reason and message each has
/// when nothing is wrong.
const CONDITIONS: [(&str, &str, &str); 5] = [
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentHasNoFinalizers", "All content-preserving finalizers finished"),
];

/// Runs the controller until the returned future is dropped.
pub async fn run(cx: &Context) {
    let queue = Queue::new();
    let feed = informer::follow(&*cx.store, PREFIX, super::queue_deleted(&queue));
    let work = queue.run(CONTROLLER, WORKERS, |name| sync(cx, name));
    tokio::join!(feed, work);
}

/// What deleting a namespace's content left.
#[derive(Debug, Default)]
struct Left {
    /// Objects left, per `<resource>.<group>`.
    by_resource: BTreeMap<String, usize>,
    /// Objects left, per finalizer holding them.
    by_finalizer: BTreeMap<String, usize>,
    /// Why resources could not be deleted.
    failures: Vec<String>,
}

/// One pass over a terminating namespace.
async fn sync(cx: &Context, name: String) -> ApiResult<Next> {
    let client = cx.client();
    let Some(entry) = cx.store.get(&key(&name)).await.map_err(unavailable)? else { return Ok(Next::Done) };
    let namespace = crate::object::decode_entry(&entry)?;
    if crate::object::meta_field(&namespace, "deletionTimestamp").is_none() {
        return Ok(Next::Done);
    }
    let left = delete_content(cx, &client, &name).await?;
    let conditions = conditions(&left);
    super::guaranteed_update(&*cx.store, &key(&name), |namespace| merge_conditions(namespace, &conditions))
        .await
        .map_err(unavailable)?;
    if !left.by_resource.is_empty() || !left.failures.is_empty() {
        return Ok(Next::After(RECHECK));
    }
    let finalized = super::guaranteed_update(&*cx.store, &key(&name), |namespace| {
        if let Some(finalizers) = namespace.pointer_mut("/spec/finalizers").and_then(Value::as_array_mut) {
            finalizers.retain(|f| f != KUBERNETES_FINALIZER);
        }
    })
    .await
    .map_err(unavailable)?;
    let Some(entry) = (match finalized {
        Some(entry) => Some(entry),
        None => cx.store.get(&key(&name)).await.map_err(unavailable)?,
    }) else {
        return Ok(Next::Done);
    };
    let namespace = crate::object::decode_entry(&entry)?;
    let held_by_spec = namespace.pointer("/spec/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
    if held_by_spec || !crate::object::finalizers(&namespace).is_empty() {
        return Ok(Next::Done);
    }
    match cx.store.delete(&key(&name), Some(entry.mod_revision)).await {
        Ok(_) | Err(StoreError::NotFound { .. }) => {
            tracing::info!(namespace = %name, "namespace deleted");
            Ok(Next::Done)
        }
        Err(StoreError::Conflict { .. }) => Ok(Next::After(Duration::ZERO)),
        Err(err) => Err(unavailable(err)),
    }
}

/// Deletes every object in the namespace (each through the verbs, in the background), and
/// counts what is left.
async fn delete_content(cx: &Context, client: &Client<'_>, namespace: &str) -> ApiResult<Left> {
    let mut left = Left::default();
    for resource in namespaced_resources(cx) {
        let endpoint = resource.endpoint(Some(namespace.to_string()));
        let prefix = endpoint.prefix();
        let page = cx.store.list(ListOptions { prefix: &prefix, ..Default::default() }).await.map_err(unavailable)?;
        let mut remaining = 0;
        for entry in page.entries {
            let Some(object) = crate::object::decode(&entry.value, entry.mod_revision) else { continue };
            let (name, uid) =
                (crate::object::name(&object), crate::object::meta_str(&object, "uid").unwrap_or_default());
            if let Err(err) = client.delete(&endpoint, name, uid, Propagation::Background).await {
                left.failures.push(format!("{}: {}", endpoint.resource, err.message));
            }
            if cx.store.get(&entry.key).await.map_err(unavailable)?.is_some() {
                remaining += 1;
                for finalizer in crate::object::finalizers(&object) {
                    *left.by_finalizer.entry(finalizer).or_default() += 1;
                }
            }
        }
        if remaining > 0 {
            left.by_resource.insert(format!("{}.{}", endpoint.resource, endpoint.group), remaining);
        }
    }
    Ok(left)
}

/// Every namespaced resource with storage of its own: the built-in ones and the CRDs'.
fn namespaced_resources(cx: &Context) -> Vec<NamespacedResource> {
    let built_in = crate::registry::builtin::RESOURCES.iter().filter(|r| r.namespaced && r.owns_storage());
    let mut resources: Vec<NamespacedResource> = built_in.map(NamespacedResource::BuiltIn).collect();
    let crds = cx.registry.all();
    resources
        .extend(crds.values().filter(|crd| crd.namespaced()).map(|crd| NamespacedResource::Custom(Arc::clone(crd))));
    resources
}

/// A resource a namespace holds objects of.
enum NamespacedResource {
    BuiltIn(&'static crate::registry::builtin::BuiltIn),
    Custom(Arc<crate::registry::ServedCrd>),
}

impl NamespacedResource {
    fn endpoint(&self, namespace: Option<String>) -> crate::rest::Endpoint {
        match self {
            NamespacedResource::BuiltIn(row) => crate::rest::Endpoint::built_in(row, namespace),
            NamespacedResource::Custom(crd) => {
                crate::rest::Endpoint::custom(Arc::clone(crd), crd.storage_version(), namespace)
            }
        }
    }
}

/// The conditions that say what `left` is, as upstream's `namespaceConditionUpdater`: every
/// type, `False` with its "ok" reason unless something is wrong.
fn conditions(left: &Left) -> Vec<(String, &'static str, String, String)> {
    CONDITIONS
        .iter()
        .map(|(kind, ok_reason, ok_message)| {
            let failing = match *kind {
                "NamespaceContentRemaining" if !left.by_resource.is_empty() => Some((
                    "SomeResourcesRemain",
                    format!(
                        "Some resources are remaining: {}",
                        join(&left.by_resource, |resource, n| format!("{resource} has {n} resource instances"))
                    ),
                )),
                "NamespaceFinalizersRemaining" if !left.by_finalizer.is_empty() => Some((
                    "SomeFinalizersRemain",
                    format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        join(&left.by_finalizer, |finalizer, n| format!("{finalizer} in {n} resource instances"))
                    ),
                )),
                "NamespaceDeletionContentFailure" if !left.failures.is_empty() => Some((
                    "ContentDeletionFailed",
                    format!(
                        "Failed to delete all resource types, {} remaining: {}",
                        left.failures.len(),
                        aggregate(&left.failures)
                    ),
                )),
                _ => None,
            };
            match failing {
                Some((reason, message)) => (kind.to_string(), "True", reason.to_string(), message),
                None => (kind.to_string(), "False", ok_reason.to_string(), ok_message.to_string()),
            }
        })
        .collect()
}

/// `counts` as upstream lists them: sorted, joined with ", ".
fn join(counts: &BTreeMap<String, usize>, entry: impl Fn(&str, usize) -> String) -> String {
    counts.iter().map(|(name, n)| entry(name, *n)).collect::<Vec<_>>().join(", ")
}

/// apimachinery's `utilerrors.NewAggregate(errs).Error()`.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Sets `conditions` on `namespace`, keeping each unchanged one as it was (its
/// `lastTransitionTime` included).
fn merge_conditions(namespace: &mut Value, conditions: &[(String, &'static str, String, String)]) {
    let old: Vec<Value> =
        namespace.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let now = crate::object::now_timestamp();
    let merged: Vec<Value> = conditions
        .iter()
        .map(|(kind, status, reason, message)| {
            let same = |c: &&Value| {
                c["type"] == kind.as_str()
                    && c["status"] == *status
                    && c["reason"] == reason.as_str()
                    && c["message"] == message.as_str()
            };
            old.iter().find(same).cloned().unwrap_or_else(|| {
                json!({"type": kind, "status": status, "lastTransitionTime": now, "reason": reason, "message": message})
            })
        })
        .collect();
    crate::object::object_mut(namespace, "status").insert("conditions".into(), Value::Array(merged));
}

fn unavailable(err: StoreError) -> ApiError {
    ApiError::unavailable(err.to_string())
}
