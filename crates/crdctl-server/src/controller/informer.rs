//! client-go's informer over the store's own change feed: every object under a prefix, then
//! each change as it is committed. A broken or compacted watch lists again and hands every
//! object over again, with a deletion for each key that went away meanwhile, so a controller
//! misses nothing while the feed was down (or the server was: at start-up the first list is
//! everything the store holds).

use std::collections::HashSet;
use std::time::Duration;

use crdctl_storage::{EventKind, ListOptions, Revision, Store, StoreError};
use serde_json::Value;

/// Objects listed per page.
const PAGE: usize = 1000;

/// A change to an object under the followed prefix.
#[derive(Debug)]
pub enum Change {
    /// Created or changed (or listed).
    Put {
        /// The store key.
        key: String,
        /// The object now, with its `resourceVersion`.
        object: Value,
        /// The object before, when the feed says.
        old: Option<Value>,
    },
    /// Deleted.
    Delete {
        /// The store key.
        key: String,
        /// The object before, when the feed says.
        old: Option<Value>,
    },
    /// Every object present when the follower started (or listed again) has been handed over.
    Synced,
}

/// Follows everything under `prefix`, calling `handle` with each change in order, until the
/// returned future is dropped.
pub async fn follow(store: &dyn Store, prefix: &str, mut handle: impl FnMut(Change)) {
    let mut known = HashSet::new();
    loop {
        let revision = match list(store, prefix, &mut known, &mut handle).await {
            Ok(revision) => revision,
            Err(err) => {
                tracing::warn!(prefix, error = %err, "cannot list; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        handle(Change::Synced);
        if let Err(err) = watch(store, prefix, revision, &mut known, &mut handle).await {
            tracing::warn!(prefix, error = %err, "watch ended; listing again");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Lists every object, handing each over, and the deletion of each known key that is gone.
async fn list(
    store: &dyn Store,
    prefix: &str,
    known: &mut HashSet<String>,
    handle: &mut impl FnMut(Change),
) -> Result<Revision, StoreError> {
    let mut listed = HashSet::new();
    let mut after: Option<String> = None;
    let mut revision = None;
    loop {
        let options =
            ListOptions { prefix, start_after: after.as_deref(), limit: PAGE, revision, ..Default::default() };
        let page = store.list(options).await?;
        revision = Some(page.revision);
        after = page.entries.last().map(|entry| entry.key.clone());
        for entry in page.entries {
            let Some(object) = crate::registry::decode(&entry.value, entry.mod_revision) else { continue };
            listed.insert(entry.key.clone());
            handle(Change::Put { key: entry.key, object, old: None });
        }
        if !page.more {
            break;
        }
    }
    for key in known.difference(&listed) {
        handle(Change::Delete { key: key.clone(), old: None });
    }
    *known = listed;
    Ok(revision.unwrap_or_default())
}

/// Hands over each change after `revision` until the watch ends.
async fn watch(
    store: &dyn Store,
    prefix: &str,
    revision: Revision,
    known: &mut HashSet<String>,
    handle: &mut impl FnMut(Change),
) -> Result<(), StoreError> {
    let mut watch = store.watch(prefix, revision).await?;
    while let Some(event) = watch.next().await {
        let event = event?;
        let old = event.prev.and_then(|prev| crate::registry::decode(&prev.value, prev.mod_revision));
        match (event.kind, event.entry) {
            (EventKind::Put, Some(entry)) => {
                let Some(object) = crate::registry::decode(&entry.value, entry.mod_revision) else { continue };
                known.insert(event.key.clone());
                handle(Change::Put { key: event.key, object, old });
            }
            _ => {
                if known.remove(&event.key) {
                    handle(Change::Delete { key: event.key, old });
                }
            }
        }
    }
    Ok(())
}
