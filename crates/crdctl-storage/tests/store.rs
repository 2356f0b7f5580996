//! One suite for every backend: the `Store` contract (revisions, preconditions, paging at a
//! revision, watch, compaction), run by `backend_suite!` against memory and redb.

use std::sync::Arc;

use crdctl_storage::{EventKind, ListOptions, Store, StoreError, Write};

/// A store and whatever keeps it alive (the redb directory).
struct Opened {
    store: Arc<dyn Store>,
    _dir: Option<tempfile::TempDir>,
}

fn memory(window: u64) -> Opened {
    Opened { store: Arc::new(crdctl_storage::memory::open_with_window(window)), _dir: None }
}

fn redb(window: u64) -> Opened {
    let dir = tempfile::tempdir().unwrap();
    let store = crdctl_storage::redb::open_with_window(dir.path(), window).unwrap();
    Opened { store: Arc::new(store), _dir: Some(dir) }
}

async fn keys(store: &dyn Store, options: ListOptions<'_>) -> Vec<String> {
    store.list(options).await.unwrap().entries.into_iter().map(|e| e.key).collect()
}

async fn preconditions(open: fn(u64) -> Opened) {
    let store = open(1000).store;
    let a = store.create("/r/a", b"1".to_vec()).await.unwrap();
    assert_eq!((a.create_revision, a.mod_revision), (1, 1));
    assert!(matches!(store.create("/r/a", b"x".to_vec()).await, Err(StoreError::AlreadyExists { .. })));
    let a2 = store.update("/r/a", b"2".to_vec(), a.mod_revision).await.unwrap();
    assert_eq!((a2.create_revision, a2.mod_revision), (1, 2));
    let stale = store.update("/r/a", b"3".to_vec(), a.mod_revision).await;
    assert_eq!(stale, Err(StoreError::Conflict { key: "/r/a".into(), expected: 1, current: 2 }));
    assert!(matches!(store.update("/r/missing", vec![], 1).await, Err(StoreError::NotFound { .. })));
    assert!(matches!(store.delete("/r/a", Some(1)).await, Err(StoreError::Conflict { .. })));
    let deleted = store.delete("/r/a", Some(2)).await.unwrap();
    assert_eq!((deleted.kind, deleted.revision), (EventKind::Delete, 3));
    assert_eq!(deleted.prev.unwrap().value, b"2");
    assert_eq!(store.get("/r/a").await.unwrap(), None);
    assert_eq!(store.revision().await.unwrap(), 3, "failed writes do not bump the revision");
}

async fn paging_at_a_revision(open: fn(u64) -> Opened) {
    let store = open(1000).store;
    for name in ["a", "b", "c", "d", "e"] {
        store.create(&format!("/r/{name}"), name.as_bytes().to_vec()).await.unwrap();
    }
    store.create("/s/other", vec![]).await.unwrap();
    let first = store.list(ListOptions { prefix: "/r/", limit: 2, ..Default::default() }).await.unwrap();
    assert_eq!(first.entries.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["/r/a", "/r/b"]);
    assert!(first.more);
    assert_eq!(first.remaining, 3, "c, d and e follow");
    // Writes after the first page must not show in the later pages read at its revision.
    let c = store.get("/r/c").await.unwrap().unwrap();
    store.delete("/r/c", None).await.unwrap();
    store.create("/r/bb", vec![]).await.unwrap();
    store.update("/r/d", b"changed".to_vec(), 4).await.unwrap();
    let at = Some(first.revision);
    let rest = store.list(ListOptions { prefix: "/r/", start_after: Some("/r/b"), limit: 10, revision: at }).await;
    let rest = rest.unwrap();
    assert_eq!(rest.entries.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["/r/c", "/r/d", "/r/e"]);
    assert_eq!(rest.entries[0], c);
    assert_eq!(rest.entries[1].value, b"d");
    assert!(!rest.more);
    // Pages of one at the old revision walk exactly its keys, past keys created and deleted since.
    let (mut walked, mut after) = (Vec::new(), Some("/r/a".to_string()));
    loop {
        let options = ListOptions { prefix: "/r/", start_after: after.as_deref(), limit: 1, revision: at };
        let page = store.list(options).await.unwrap();
        walked.extend(page.entries.iter().map(|e| e.key.clone()));
        after = page.entries.last().map(|e| e.key.clone());
        if !page.more {
            break;
        }
    }
    assert_eq!(walked, ["/r/b", "/r/c", "/r/d", "/r/e"]);
    let now = keys(&*store, ListOptions { prefix: "/r/", ..Default::default() }).await;
    assert_eq!(now, ["/r/a", "/r/b", "/r/bb", "/r/d", "/r/e"]);
    let future = store.list(ListOptions { prefix: "/r/", revision: Some(99), ..Default::default() }).await;
    assert!(matches!(future, Err(StoreError::FutureRevision { requested: 99, .. })));
}

async fn watch_from_a_revision(open: fn(u64) -> Opened) {
    let store = open(1000).store;
    let a = store.create("/r/a", b"1".to_vec()).await.unwrap();
    store.create("/s/x", vec![]).await.unwrap();
    store.update("/r/a", b"2".to_vec(), a.mod_revision).await.unwrap();
    let mut watch = store.watch("/r/", a.mod_revision).await.unwrap();
    let replayed = watch.next().await.unwrap().unwrap();
    assert_eq!((replayed.revision, replayed.kind), (3, EventKind::Put));
    store.delete("/r/a", None).await.unwrap();
    store.create("/s/y", vec![]).await.unwrap();
    store.create("/r/b", vec![]).await.unwrap();
    let live: Vec<_> = [watch.next().await, watch.next().await].into_iter().map(|e| e.unwrap().unwrap()).collect();
    assert_eq!(
        live.iter().map(|e| (e.revision, e.kind)).collect::<Vec<_>>(),
        [(4, EventKind::Delete), (6, EventKind::Put)]
    );
}

async fn compaction(open: fn(u64) -> Opened) {
    let store = open(3).store;
    let mut revision = store.create("/r/a", vec![]).await.unwrap().mod_revision;
    for _ in 0..10 {
        revision = store.update("/r/a", vec![], revision).await.unwrap().mod_revision;
    }
    assert!(matches!(store.watch("/r/", 2).await, Err(StoreError::Compacted { requested: 2, compacted: 8 })));
    let old = store.list(ListOptions { prefix: "/r/", revision: Some(5), ..Default::default() }).await;
    assert!(matches!(old, Err(StoreError::Compacted { .. })));
    let mut watch = store.watch("/r/", 9).await.unwrap();
    assert_eq!(watch.next().await.unwrap().unwrap().revision, 10);
}

async fn concurrent_writers_each_get_their_own_revision(open: fn(u64) -> Opened) {
    let store = open(100_000).store;
    let tasks: Vec<_> = (0..16)
        .map(|writer| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut revisions = Vec::new();
                for i in 0..50 {
                    let write = Write::Create { key: format!("/r/{writer:02}/{i:03}"), value: vec![writer as u8] };
                    revisions.push(store.write(write).await.unwrap().revision);
                }
                revisions
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all.sort_unstable();
    assert_eq!(all, (1..=800).collect::<Vec<_>>(), "every write gets its own revision");
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.keys, stats.revision), (800, 800));
}

macro_rules! backend_suite {
    ($($backend:ident),*) => {$(
        mod $backend {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn preconditions() { super::preconditions(super::$backend).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn paging_at_a_revision() { super::paging_at_a_revision(super::$backend).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn watch_from_a_revision() { super::watch_from_a_revision(super::$backend).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn compaction() { super::compaction(super::$backend).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrent_writers_each_get_their_own_revision() { super::concurrent_writers_each_get_their_own_revision(super::$backend).await }
        }
    )*};
}

backend_suite!(memory, redb);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redb_keeps_everything_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = crdctl_storage::redb::open(dir.path()).unwrap();
        let a = store.create("/r/a", b"1".to_vec()).await.unwrap();
        store.update("/r/a", b"2".to_vec(), a.mod_revision).await.unwrap();
        store.create("/r/b", b"3".to_vec()).await.unwrap();
    }
    let store = crdctl_storage::redb::open(dir.path()).unwrap();
    assert_eq!(store.revision().await.unwrap(), 3);
    assert_eq!(store.get("/r/a").await.unwrap().unwrap().value, b"2");
    let mut watch = store.watch("/r/", 1).await.unwrap();
    assert_eq!(watch.next().await.unwrap().unwrap().revision, 2, "history survives a restart");
    assert_eq!(store.create("/r/c", vec![]).await.unwrap().mod_revision, 4);
}
