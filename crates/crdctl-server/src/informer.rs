//! client-go's informer over the store's own change feed: every object under a prefix, then
//! each change as it is committed. A broken or compacted watch lists again and hands every
//! object over again, between [`Change::Listing`] and [`Change::Synced`], so a controller
//! misses nothing while the feed was down (or the server was: at start-up the first list is
//! everything the store holds): what it knows of and was not listed again is gone.

use std::time::Duration;

use crdctl_storage::{EventKind, ListOptions, Revision, Store, StoreError};
use serde_json::Value;

/// Objects listed per page.
const PAGE: usize = 1000;

/// What an informer decodes each stored object into: the whole object, or only what its
/// controller reads (as upstream's metadata-only informers), which costs a fraction of it on
/// a feed that carries every write.
pub trait Decode: Sized {
    /// The object stored as `bytes` at `revision`; `None` for what is not an object.
    fn decode(bytes: &[u8], revision: Revision) -> Option<Self>;
}

/// The whole object, with its `resourceVersion`.
impl Decode for Value {
    fn decode(bytes: &[u8], revision: Revision) -> Option<Value> {
        crate::object::decode(bytes, revision)
    }
}

/// Nothing decoded: for a controller that works from the key alone.
impl Decode for serde::de::IgnoredAny {
    fn decode(_bytes: &[u8], _revision: Revision) -> Option<serde::de::IgnoredAny> {
        Some(serde::de::IgnoredAny)
    }
}

/// A change to an object under the followed prefix.
#[derive(Debug)]
pub enum Change<T = Value> {
    /// Created or changed (or listed).
    Put {
        /// The store key.
        key: String,
        /// The object now.
        object: T,
        /// The object before, when the feed says.
        old: Option<T>,
    },
    /// Deleted (seen on the feed; a deletion missed while it was down shows as a key not
    /// listed again).
    Delete {
        /// The store key.
        key: String,
        /// The object before, when the feed says.
        old: Option<T>,
    },
    /// A list begins: every object present is handed over next.
    Listing,
    /// The list is done: every object present has been handed over since [`Change::Listing`].
    Synced,
}

/// Follows everything under `prefix`, calling `handle` with each change in order, until the
/// returned future is dropped.
pub async fn follow<T: Decode>(store: &dyn Store, prefix: &str, mut handle: impl FnMut(Change<T>)) {
    loop {
        handle(Change::Listing);
        let revision = match list(store, prefix, &mut handle).await {
            Ok(revision) => revision,
            Err(err) => {
                tracing::warn!(prefix, error = %err, "cannot list; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        handle(Change::Synced);
        if let Err(err) = watch(store, prefix, revision, &mut handle).await {
            tracing::warn!(prefix, error = %err, "watch ended; listing again");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Lists every object, handing each over.
pub(crate) async fn list<T: Decode>(
    store: &dyn Store,
    prefix: &str,
    handle: &mut impl FnMut(Change<T>),
) -> Result<Revision, StoreError> {
    let mut after: Option<String> = None;
    let mut revision = None;
    loop {
        let options =
            ListOptions { prefix, start_after: after.as_deref(), limit: PAGE, revision, ..Default::default() };
        let page = store.list(options).await?;
        revision = Some(page.revision);
        after = page.entries.last().map(|entry| entry.key.clone());
        for entry in page.entries {
            let Some(object) = T::decode(&entry.value, entry.mod_revision) else { continue };
            handle(Change::Put { key: entry.key, object, old: None });
        }
        if !page.more {
            break;
        }
    }
    Ok(revision.unwrap_or_default())
}

/// Hands over each change after `revision` until the watch ends.
async fn watch<T: Decode>(
    store: &dyn Store,
    prefix: &str,
    revision: Revision,
    handle: &mut impl FnMut(Change<T>),
) -> Result<(), StoreError> {
    let mut watch = store.watch(prefix, revision).await?;
    while let Some(event) = watch.next().await {
        let event = event?;
        let old = event.prev.and_then(|prev| T::decode(&prev.value, prev.mod_revision));
        match (event.kind, event.entry) {
            (EventKind::Put, Some(entry)) => {
                let Some(object) = T::decode(&entry.value, entry.mod_revision) else { continue };
                handle(Change::Put { key: event.key, object, old });
            }
            _ => handle(Change::Delete { key: event.key, old }),
        }
    }
    Ok(())
}
