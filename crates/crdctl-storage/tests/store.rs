//! One suite for every backend: the `Store` contract (revisions, preconditions, paging at a
//! revision, watch, compaction), run by `backend_suite!` against memory, redb and a real etcd
//! (one process per test, so revisions are the test's own). Revisions are counted from where
//! the store starts: a fresh etcd is at revision 1, the embedded stores at 0.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

use std::sync::Arc;

use crdctl_storage::{EventKind, ListOptions, Store, StoreError, Write};

/// A store and whatever keeps it alive (the redb directory, the etcd process).
struct Opened {
    store: Arc<dyn Store>,
    _keep: Option<Box<dyn Send>>,
}

async fn memory(window: u64) -> Opened {
    Opened { store: Arc::new(crdctl_storage::memory::open_with_window(window)), _keep: None }
}

async fn redb(window: u64) -> Opened {
    let dir = tempfile::tempdir().unwrap();
    let store = crdctl_storage::redb::open_with_window(dir.path(), window).unwrap();
    Opened { store: Arc::new(store), _keep: Some(Box::new(dir)) }
}

/// The watch cache over memory, caching per first path segment (`/r/`, `/s/`).
async fn cached(window: u64) -> Opened {
    let inner = Arc::new(crdctl_storage::memory::open_with_window(window));
    let store = crdctl_storage::cache::CachedStore::new(inner, first_segment);
    Opened { store: Arc::new(store), _keep: None }
}

fn first_segment(prefix: &str) -> Option<String> {
    let segment = prefix.strip_prefix('/')?.split('/').next().filter(|s| !s.is_empty())?;
    Some(format!("/{segment}/"))
}

async fn etcd(window: u64) -> Opened {
    let cluster = crdctl_storage::etcd::cluster::LocalCluster::start(1).expect("etcd starts");
    let mut config = crdctl_storage::etcd::EtcdConfig::new(cluster.endpoints());
    config.window = window;
    config.compaction_interval = std::time::Duration::from_millis(50);
    let store = crdctl_storage::etcd::open(config).await.unwrap();
    Opened { store: Arc::new(store), _keep: Some(Box::new(cluster)) }
}

async fn keys(store: &dyn Store, options: ListOptions<'_>) -> Vec<String> {
    store.list(options).await.unwrap().entries.into_iter().map(|e| e.key).collect()
}

async fn preconditions(opened: Opened) {
    let store = opened.store;
    let base = store.revision().await.unwrap();
    let a = store.create("/r/a", b"1".to_vec()).await.unwrap();
    assert_eq!((a.create_revision, a.mod_revision), (base + 1, base + 1));
    assert!(matches!(store.create("/r/a", b"x".to_vec()).await, Err(StoreError::AlreadyExists { .. })));
    let a2 = store.update("/r/a", b"2".to_vec(), a.mod_revision).await.unwrap();
    assert_eq!((a2.create_revision, a2.mod_revision), (base + 1, base + 2));
    let stale = store.update("/r/a", b"3".to_vec(), a.mod_revision).await;
    assert_eq!(stale, Err(StoreError::Conflict { key: "/r/a".into(), expected: base + 1, current: base + 2 }));
    assert!(matches!(store.update("/r/missing", vec![], 1).await, Err(StoreError::NotFound { .. })));
    assert!(matches!(store.delete("/r/missing", None).await, Err(StoreError::NotFound { .. })));
    assert!(matches!(store.delete("/r/a", Some(base + 1)).await, Err(StoreError::Conflict { .. })));
    let deleted = store.delete("/r/a", Some(base + 2)).await.unwrap();
    assert_eq!((deleted.kind, deleted.revision), (EventKind::Delete, base + 3));
    assert_eq!(deleted.prev.unwrap().value, b"2");
    assert_eq!(store.get("/r/a").await.unwrap(), None);
    assert_eq!(store.revision().await.unwrap(), base + 3, "failed writes do not bump the revision");
}

async fn paging_at_a_revision(opened: Opened) {
    let store = opened.store;
    let base = store.revision().await.unwrap();
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
    store.update("/r/d", b"changed".to_vec(), base + 4).await.unwrap();
    let at = Some(first.revision);
    let rest = store
        .list(ListOptions { prefix: "/r/", start_after: Some("/r/b"), limit: 10, revision: at, ..Default::default() })
        .await;
    let rest = rest.unwrap();
    assert_eq!(rest.entries.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["/r/c", "/r/d", "/r/e"]);
    assert_eq!(rest.entries[0], c);
    assert_eq!(rest.entries[1].value, b"d");
    assert!(!rest.more);
    // Pages of one at the old revision walk exactly its keys, past keys created and deleted since.
    let (mut walked, mut after) = (Vec::new(), Some("/r/a".to_string()));
    loop {
        let options =
            ListOptions { prefix: "/r/", start_after: after.as_deref(), limit: 1, revision: at, ..Default::default() };
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
    // "Any state this new" may come from a cache; it is never older than asked.
    let current = store.revision().await.unwrap();
    let fresh = ListOptions { prefix: "/r/", min_revision: Some(current), ..Default::default() };
    assert_eq!(keys(&*store, fresh).await, now);
    let exact = ListOptions { prefix: "/r/a", min_revision: Some(0), ..Default::default() };
    assert_eq!(keys(&*store, exact).await, ["/r/a"], "a prefix that is a whole key lists that key");
    let paged = store.list(ListOptions { limit: 2, ..fresh }).await.unwrap();
    assert_eq!((paged.entries.len(), paged.more, paged.remaining), (2, true, 3));
    assert!(paged.revision >= current);
    let future = store.list(ListOptions { prefix: "/r/", revision: Some(base + 99), ..Default::default() }).await;
    assert!(
        matches!(future, Err(StoreError::FutureRevision { requested, .. }) if requested == base + 99),
        "{future:?}"
    );
}

async fn watch_from_a_revision(opened: Opened) {
    let store = opened.store;
    let base = store.revision().await.unwrap();
    let a = store.create("/r/a", b"1".to_vec()).await.unwrap();
    store.create("/s/x", vec![]).await.unwrap();
    store.update("/r/a", b"2".to_vec(), a.mod_revision).await.unwrap();
    let mut watch = store.watch("/r/", a.mod_revision).await.unwrap();
    let replayed = watch.next().await.unwrap().unwrap();
    assert_eq!((replayed.revision, replayed.kind), (base + 3, EventKind::Put));
    assert_eq!(replayed.prev.map(|p| p.value), Some(b"1".to_vec()), "watches carry the previous value");
    store.delete("/r/a", None).await.unwrap();
    store.create("/s/y", vec![]).await.unwrap();
    store.create("/r/b", vec![]).await.unwrap();
    let live: Vec<_> = [watch.next().await, watch.next().await].into_iter().map(|e| e.unwrap().unwrap()).collect();
    assert_eq!(
        live.iter().map(|e| (e.revision, e.kind)).collect::<Vec<_>>(),
        [(base + 4, EventKind::Delete), (base + 6, EventKind::Put)]
    );
}

/// With a window of 3, old revisions become unreadable (at once for the embedded stores, at
/// etcd's next compaction tick for etcd) and the last ones stay readable. On etcd the compactor's
/// own bookkeeping write takes revisions too, so the writes here need not be consecutive, and a
/// tick may compact partway through them before the last one does.
async fn compaction(opened: Opened) {
    let store = opened.store;
    let base = store.revision().await.unwrap();
    let mut revisions = vec![store.create("/r/a", vec![]).await.unwrap().mod_revision];
    for _ in 0..10 {
        let last = revisions.last().copied().unwrap();
        revisions.push(store.update("/r/a", vec![], last).await.unwrap().mod_revision);
    }
    let revision = revisions.last().copied().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let compacted = loop {
        match store.watch("/r/", base + 2).await {
            Err(StoreError::Compacted { requested, compacted }) if compacted + 3 >= revision => {
                break (requested, compacted);
            }
            other => assert!(std::time::Instant::now() < deadline, "not compacted: {:?}", other.map(|_| ())),
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(compacted.0, base + 2);
    assert!((base + 2..=revision - 2).contains(&compacted.1), "compacted at {}, last write {revision}", compacted.1);
    let old = store.list(ListOptions { prefix: "/r/", revision: Some(compacted.1 - 1), ..Default::default() }).await;
    assert!(matches!(old, Err(StoreError::Compacted { .. })), "{old:?}");
    let [.., third_last, second_last, last] = revisions[..] else { panic!("eleven writes") };
    let mut watch = store.watch("/r/", third_last).await.unwrap();
    assert_eq!(watch.next().await.unwrap().unwrap().revision, second_last);
    assert_eq!(watch.next().await.unwrap().unwrap().revision, last);
    assert_eq!(store.stats().await.unwrap().compacted, compacted.1);
}

async fn concurrent_writers_each_get_their_own_revision(opened: Opened) {
    let store = opened.store;
    let base = store.revision().await.unwrap();
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
    assert_eq!(all, (base + 1..=base + 800).collect::<Vec<_>>(), "every write gets its own revision");
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.keys, stats.revision), (800, base + 800));
}

/// A watcher that reads nothing while thousands of writes happen (more than a live feed or the
/// cache's ring holds, half of them under another prefix), and one that starts that far back,
/// both get every event of their prefix once, in order.
async fn watchers_that_fall_behind_lose_nothing(opened: Opened) {
    let store = opened.store;
    let first = store.create("/r/first", vec![]).await.unwrap().mod_revision;
    let mut slow = store.watch("/r/", first).await.unwrap();
    let mut revisions = vec![];
    for i in 0..6000 {
        revisions.push(store.create(&format!("/r/{i:05}"), vec![]).await.unwrap().mod_revision);
        store.create(&format!("/s/{i:05}"), vec![]).await.unwrap();
    }
    let mut old = store.watch("/r/", first).await.unwrap();
    for watch in [&mut slow, &mut old] {
        let mut seen = Vec::new();
        while seen.len() < revisions.len() {
            let next = tokio::time::timeout(std::time::Duration::from_secs(10), watch.next()).await;
            let event = next.unwrap_or_else(|_| panic!("no event after {:?}", seen.last())).unwrap().unwrap();
            assert!(event.key.starts_with("/r/"), "{}", event.key);
            seen.push(event.revision);
        }
        assert_eq!(seen, revisions);
    }
    let listed = store.list(ListOptions { prefix: "/r/", min_revision: Some(0), ..Default::default() }).await.unwrap();
    assert_eq!(listed.entries.len(), 6001);
}

macro_rules! backend_suite {
    ($($backend:ident),*) => {$(
        mod $backend {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn preconditions() { super::preconditions(super::$backend(100_000).await).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn paging_at_a_revision() { super::paging_at_a_revision(super::$backend(100_000).await).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn watch_from_a_revision() { super::watch_from_a_revision(super::$backend(100_000).await).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn compaction() { super::compaction(super::$backend(3).await).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrent_writers_each_get_their_own_revision() { super::concurrent_writers_each_get_their_own_revision(super::$backend(100_000).await).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn watchers_that_fall_behind_lose_nothing() { super::watchers_that_fall_behind_lose_nothing(super::$backend(100_000).await).await }
        }
    )*};
}

backend_suite!(memory, redb, etcd, cached);

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

/// redb against the in-memory model through a random mix of writes on a few keys with a small
/// window, reopening the file every few hundred writes: the same entries at every revision the
/// window holds, the same history, the same compaction point, the same totals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redb_agrees_with_memory_through_compaction_and_reopens() {
    const WINDOW: u64 = 7;
    let dir = tempfile::tempdir().unwrap();
    let model = crdctl_storage::memory::open_with_window(WINDOW);
    let mut redb = Some(crdctl_storage::redb::open_with_window(dir.path(), WINDOW).unwrap());
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    for round in 0..12 {
        for _ in 0..250 {
            let key = format!("/r/{:02}", next(16));
            let current = model.get(&key).await.unwrap();
            let write = match (current, next(4)) {
                (None, _) => Write::Create { key, value: vec![b'v'; next(64) as usize] },
                (Some(entry), 0) => Write::Delete { key, expected: Some(entry.mod_revision) },
                (Some(entry), _) => {
                    Write::Update { key, value: vec![b'u'; next(64) as usize], expected: entry.mod_revision }
                }
            };
            let expected = model.write(write.clone()).await;
            let got = redb.as_ref().unwrap().write(write).await;
            assert_eq!(got, expected);
        }
        let store = redb.as_ref().unwrap();
        let (want, got) = (model.stats().await.unwrap(), store.stats().await.unwrap());
        assert_eq!(got, want, "round {round}");
        for at in want.compacted..=want.revision {
            let options = ListOptions { prefix: "/r/", revision: Some(at), ..Default::default() };
            assert_eq!(store.list(options).await.unwrap(), model.list(options).await.unwrap(), "at {at}");
        }
        let (mut want_watch, mut got_watch) =
            (model.watch("/r/", want.compacted).await.unwrap(), store.watch("/r/", want.compacted).await.unwrap());
        for _ in want.compacted..want.revision {
            assert_eq!(got_watch.next().await.unwrap(), want_watch.next().await.unwrap());
        }
        if round % 3 == 2 {
            drop(redb.take());
            redb = Some(crdctl_storage::redb::open_with_window(dir.path(), WINDOW).unwrap());
        }
    }
}
