//! apiextensions-apiserver's CRD finalizer (`pkg/controller/finalizer`): a CRD being deleted
//! deletes its custom resources through the verbs (marked where their own finalizers hold
//! them) and waits until every one is really gone — `Terminating` stays `True` with
//! `InstanceDeletionInProgress` meanwhile — then records `InstanceDeletionCompleted`, drops
//! the `customresourcecleanup.apiextensions.k8s.io` finalizer, and the CRD goes.

use std::time::Duration;

use crdctl_storage::{ListOptions, StoreError};
use serde_json::Value;

use super::Context;
use super::queue::{Next, Queue};
use crate::error::{ApiError, ApiResult};
use crate::informer;
use crate::registry::crd::{CLEANUP_FINALIZER, key, set_terminating};
use crate::registry::{CRD_PREFIX, Propagation};
use crate::rest::Endpoint;

/// How soon a CRD whose objects are held by finalizers looks at them again.
const RECHECK: Duration = Duration::from_millis(200);

/// Runs the controller until the returned future is dropped.
pub async fn run(cx: &Context) {
    let queue = Queue::new();
    let feed = informer::follow(&*cx.store, CRD_PREFIX, super::queue_deleted(&queue));
    let work = queue.run("crd-finalizer", 5, |name| sync(cx, name));
    tokio::join!(feed, work);
}

async fn sync(cx: &Context, name: String) -> ApiResult<Next> {
    let Some(entry) = cx.store.get(&key(&name)).await.map_err(unavailable)? else { return Ok(Next::Done) };
    let crd = crate::object::decode_entry(&entry)?;
    let terminating = crate::object::meta_field(&crd, "deletionTimestamp").is_some();
    if !terminating || !crate::object::finalizers(&crd).iter().any(|f| f == CLEANUP_FINALIZER) {
        return Ok(Next::Done);
    }
    // The registry serves what the store holds a moment later.
    let Some(served) = cx.registry.get(&name).filter(|served| served.terminating()) else {
        return Ok(Next::After(Duration::from_millis(50)));
    };
    let (status, reason, message) = if served.established() {
        let version = served.storage_version().to_string();
        let client = cx.client();
        let mut left = 0;
        let page = cx.store.list(ListOptions { prefix: &served.prefix(None), ..Default::default() }).await;
        for entry in page.map_err(unavailable)?.entries {
            let Some(object) = crate::object::decode(&entry.value, entry.mod_revision) else { continue };
            let namespace = crate::object::meta_str(&object, "namespace").map(str::to_string);
            let endpoint = Endpoint::custom(std::sync::Arc::clone(&served), &version, namespace);
            let uid = crate::object::meta_str(&object, "uid").unwrap_or_default();
            if let Err(err) = client.delete(&endpoint, crate::object::name(&object), uid, Propagation::Background).await
            {
                let message = format!("could not issue all deletes: {}", err.message);
                record(cx, &name, |crd| set_terminating(crd, true, "InstanceDeletionFailed", &message)).await?;
                return Err(err);
            }
            left += usize::from(cx.store.get(&entry.key).await.map_err(unavailable)?.is_some());
        }
        if left > 0 {
            tracing::debug!(crd = %name, left, "waiting for custom resources to be removed");
            return Ok(Next::After(RECHECK));
        }
        (false, "InstanceDeletionCompleted", "removed all instances")
    } else {
        (false, "NeverEstablished", "resource was never established")
    };
    let finalized = record(cx, &name, |crd| {
        set_terminating(crd, status, reason, message);
        let finalizers: Vec<String> =
            crate::object::finalizers(crd).into_iter().filter(|f| f != CLEANUP_FINALIZER).collect();
        crate::object::meta_mut(crd).insert("finalizers".into(), finalizers.into());
    })
    .await?;
    let Some(entry) = finalized else { return Ok(Next::Done) };
    let crd = crate::object::decode_entry(&entry)?;
    if crate::object::finalizers(&crd).is_empty() {
        match cx.store.delete(&key(&name), Some(entry.mod_revision)).await {
            Ok(_) | Err(StoreError::NotFound { .. }) => tracing::info!(crd = %name, "CRD deleted"),
            Err(StoreError::Conflict { .. }) => return Ok(Next::After(Duration::ZERO)),
            Err(err) => return Err(unavailable(err)),
        }
    }
    Ok(Next::Done)
}

/// Changes the stored CRD, re-reading on a conflict.
async fn record(cx: &Context, name: &str, change: impl FnMut(&mut Value)) -> ApiResult<Option<crdctl_storage::Entry>> {
    super::guaranteed_update(&*cx.store, &key(name), change).await.map_err(unavailable)
}

fn unavailable(err: StoreError) -> ApiError {
    ApiError::unavailable(err.to_string())
}
