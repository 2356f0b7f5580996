//! The admission objects the server stores — webhook configurations, policies, bindings — read
//! at every write: in small pages a store answers in place (a watch cache may too), each object
//! parsed once per revision and kept.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crdctl_storage::{ListOptions, Revision};
use serde::de::DeserializeOwned;

use super::Context;
use crate::error::{ApiError, ApiResult};

/// Objects read per page.
const PAGE: usize = 16;

/// An object parsed at a revision, of whichever type its prefix holds.
type Kept = (Revision, Arc<dyn Any + Send + Sync>);

/// Parsed objects by prefix, then by store key.
#[derive(Debug, Clone, Default)]
pub struct Parsed(Arc<Mutex<HashMap<String, HashMap<String, Kept>>>>);

/// Every object stored under `prefix` that parses as `T`, in key order (one that does not is
/// skipped, as upstream's informer would never have stored it).
pub async fn read<T: DeserializeOwned + Send + Sync + 'static>(
    cx: Context<'_>,
    prefix: &str,
) -> ApiResult<Vec<Arc<T>>> {
    let mut all = Vec::new();
    let (mut seen, mut parsed_now) = (Vec::new(), false);
    let mut after: Option<String> = None;
    loop {
        let options = ListOptions {
            prefix,
            start_after: after.as_deref(),
            limit: PAGE,
            min_revision: Some(0),
            ..Default::default()
        };
        let page = cx.store.list(options).await.map_err(|err| ApiError::unavailable(err.to_string()))?;
        after = page.entries.last().map(|entry| entry.key.clone());
        let mut parsed = cx.kept.parsed.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let known = parsed.entry(prefix.to_string()).or_default();
        for entry in page.entries {
            let kept = known.get(&entry.key).filter(|(revision, _)| *revision == entry.mod_revision);
            if let Some(object) = kept.and_then(|(_, object)| Arc::clone(object).downcast::<T>().ok()) {
                all.push(object);
                seen.push(entry.key);
                continue;
            }
            parsed_now = true;
            match serde_json::from_slice::<T>(&entry.value) {
                Ok(object) => {
                    let object = Arc::new(object);
                    let kept = (entry.mod_revision, Arc::clone(&object) as Arc<dyn Any + Send + Sync>);
                    known.insert(entry.key.clone(), kept);
                    all.push(object);
                }
                Err(err) => tracing::warn!(key = %entry.key, error = %err, "admission object skipped"),
            }
            seen.push(entry.key);
        }
        // What is no longer stored is no longer kept. When every object listed was kept
        // already and as many are kept, they are the same ones.
        if !page.more {
            if parsed_now || known.len() != seen.len() {
                known.retain(|key, _| seen.binary_search(key).is_ok());
            }
            return Ok(all);
        }
    }
}

/// Whether anything is stored under `prefix`.
pub async fn any(cx: Context<'_>, prefix: &str) -> ApiResult<bool> {
    let options = ListOptions { prefix, limit: 1, min_revision: Some(0), ..Default::default() };
    let page = cx.store.list(options).await.map_err(|err| ApiError::unavailable(err.to_string()))?;
    Ok(!page.entries.is_empty())
}
