//! A store whose writes are checked and never applied: kube-apiserver's `DryRunnableStorage`
//! (`registry/generic/registry/dryrun.go`).
//!
//! A dry run (`dryRun=All`) goes through every step of a write — decoding, defaulting,
//! admission, validation, preconditions — and ends at this store instead of the real one. Each
//! write is judged against the current state by the same rule a backend applies
//! (`local::apply`): a create fails on an existing key, an update or delete on a
//! missing key or an unexpected revision. A write that would succeed is answered as if applied,
//! and nothing is written: no revision is spent and no watch sees an event. Reads go to the
//! real store.
//!
//! The answers carry no new revision: a created entry has none (0), as upstream's dry-run
//! create returns an object without a `resourceVersion`; an updated one keeps the revision it
//! replaced, as upstream's dry-run update returns the object at the stored `resourceVersion`.

use std::sync::Arc;

use async_trait::async_trait;

use crate::{Event, ListOptions, ListPage, Revision, Stats, Store, StoreError, Watch, Write};

/// Checks writes against `store` and applies none; see the module docs.
pub struct DryRun(Arc<dyn Store>);

impl DryRun {
    /// A dry run over `store`.
    pub fn over(store: Arc<dyn Store>) -> DryRun {
        DryRun(store)
    }
}

#[async_trait]
impl Store for DryRun {
    async fn get(&self, key: &str) -> Result<Option<crate::Entry>, StoreError> {
        self.0.get(key).await
    }

    async fn list(&self, options: ListOptions<'_>) -> Result<ListPage, StoreError> {
        self.0.list(options).await
    }

    async fn write(&self, write: Write) -> Result<Event, StoreError> {
        let current = self.0.get(write.key()).await?;
        let kept: Revision = current.as_ref().map_or(0, |entry| entry.mod_revision);
        let mut event = crate::local::apply(write, current, kept)?;
        if let Some(entry) = &mut event.entry {
            entry.create_revision = event.prev.as_ref().map_or(0, |prev| prev.create_revision);
        }
        Ok(event)
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watch, StoreError> {
        self.0.watch(prefix, after).await
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        self.0.revision().await
    }

    async fn stats(&self) -> Result<Stats, StoreError> {
        self.0.stats().await
    }

    fn shared(&self) -> bool {
        self.0.shared()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory;

    /// Every write the real store would refuse, the dry run refuses with the same error; every
    /// write it would apply, the dry run answers and leaves the store as it was.
    #[tokio::test]
    async fn answers_as_the_store_would_and_writes_nothing() {
        let store: Arc<dyn Store> = Arc::new(memory::open());
        let a = store.create("/a", b"1".to_vec()).await.unwrap();
        let dry = DryRun::over(Arc::clone(&store));
        let before = store.revision().await.unwrap();
        let writes = [
            Write::Create { key: "/a".into(), value: b"x".to_vec() },
            Write::Create { key: "/b".into(), value: b"x".to_vec() },
            Write::Update { key: "/a".into(), value: b"2".to_vec(), expected: a.mod_revision },
            Write::Update { key: "/a".into(), value: b"2".to_vec(), expected: a.mod_revision + 7 },
            Write::Update { key: "/b".into(), value: b"2".to_vec(), expected: 1 },
            Write::Delete { key: "/a".into(), expected: Some(a.mod_revision) },
            Write::Delete { key: "/a".into(), expected: Some(a.mod_revision + 7) },
            Write::Delete { key: "/a".into(), expected: None },
            Write::Delete { key: "/b".into(), expected: None },
        ];
        for write in writes {
            let dried = dry.write(write.clone()).await;
            assert_eq!(store.revision().await.unwrap(), before, "{write:?} spent a revision");
            assert_eq!(store.get("/a").await.unwrap(), Some(a.clone()), "{write:?} changed /a");
            assert_eq!(store.get("/b").await.unwrap(), None, "{write:?} created /b");
            // The same write on a copy of the real store decides the same way.
            let copy = memory::open();
            copy.create("/a", b"1".to_vec()).await.unwrap();
            let real = copy.write(write.clone()).await;
            assert_eq!(dried.is_ok(), real.is_ok(), "{write:?}: dry {dried:?}, real {real:?}");
            if let (Err(dried), Err(real)) = (&dried, &real) {
                assert_eq!(dried, real, "{write:?}");
            }
            if let (Ok(dried), Ok(real)) = (dried, real) {
                assert_eq!((dried.kind, dried.key), (real.kind, real.key));
                assert_eq!(dried.prev, real.prev);
                let (dried, real) = (dried.entry, real.entry);
                assert_eq!(dried.as_ref().map(|e| &e.value), real.as_ref().map(|e| &e.value));
                // An update keeps the revision it replaced; a create has none.
                let expected = if matches!(write, Write::Create { .. }) { 0 } else { a.mod_revision };
                assert!(dried.is_none_or(|e| e.mod_revision == expected), "{write:?}");
            }
        }
    }
}
