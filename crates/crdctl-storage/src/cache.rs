//! A watch cache in front of a store, as kube-apiserver's cacher (`apiserver/pkg/storage/cacher`)
//! sits in front of etcd: per resource, one list and one watch on the backend keep the current
//! objects and a ring of recent events in memory, so watches and `resourceVersion="0"` lists do
//! not each reach the backend.
//!
//! Consistency is upstream's:
//! - a list without a revision (`resourceVersion=""`) is current: it goes to the backend;
//! - a list at an exact revision (a `continue`, `resourceVersionMatch=Exact`) goes to the
//!   backend, which keeps the history;
//! - a list with [`ListOptions::min_revision`] (`resourceVersion="0"`, `NotOlderThan`) is
//!   served from the cache once the cache has reached that revision, else from the backend;
//! - a watch is served from the cache when its ring still holds every event after the
//!   requested revision, else from the backend (which may answer
//!   [`StoreError::Compacted`]). A watcher that falls behind, or a cache that had to list
//!   again, switches over without losing or repeating an event.
//!
//! Reads and writes of single keys pass through.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Mutex, broadcast, mpsc};

use crate::{Entry, Event, EventKind, ListOptions, ListPage, Revision, Stats, Store, StoreError, Watch, Write};

/// Events kept per resource.
const RING: usize = 4096;
/// Live events buffered per cache watcher before it re-reads the ring.
const LIVE_CAPACITY: usize = 1024;
/// Events a watcher holds for its consumer.
const WATCH_BUFFER: usize = 256;
/// How long a `min_revision` list waits for the cache before asking the backend.
const FRESHNESS_WAIT: Duration = Duration::from_millis(250);
/// How often caches nobody uses are dropped.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Maps a listed or watched prefix to the resource whose cache serves it (`None`: not cached).
pub type ResourceOf = fn(&str) -> Option<String>;

/// A [`Store`] with a watch cache per resource over `inner`.
pub struct CachedStore {
    inner: Arc<dyn Store>,
    resource_of: ResourceOf,
    cachers: Arc<Mutex<HashMap<String, Arc<Cacher>>>>,
    sweeper: tokio::task::JoinHandle<()>,
}

impl Drop for CachedStore {
    fn drop(&mut self) {
        self.sweeper.abort();
    }
}

/// What one resource's cache holds.
#[derive(Default)]
struct State {
    objects: BTreeMap<String, Entry>,
    /// Recent events, oldest first; it holds every event after `oldest`.
    ring: VecDeque<Arc<Event>>,
    oldest: Revision,
    /// The revision the cache reflects.
    revision: Revision,
    /// Bumped whenever the cache lists again: live events of an older epoch are not
    /// continuous with what a watcher saw.
    epoch: u64,
}

/// A watcher joining a cache: the events it missed, then live ones of this epoch.
struct Attached {
    backlog: Vec<Arc<Event>>,
    epoch: u64,
    live: broadcast::Receiver<(u64, Arc<Event>)>,
}

struct Cacher {
    state: RwLock<State>,
    live: broadcast::Sender<(u64, Arc<Event>)>,
    reached: tokio::sync::watch::Sender<Revision>,
    follower: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Cacher {
    fn drop(&mut self) {
        if let Some(follower) = self.follower.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            follower.abort();
        }
    }
}

impl CachedStore {
    /// A cache over `inner`; `resource_of` says which resource a prefix belongs to.
    /// Must be called inside a Tokio runtime: a task drops the caches nobody uses.
    pub fn new(inner: Arc<dyn Store>, resource_of: ResourceOf) -> CachedStore {
        let cachers = Arc::new(Mutex::new(HashMap::new()));
        let sweeper = tokio::spawn(sweep_forever(Arc::downgrade(&cachers)));
        CachedStore { inner, resource_of, cachers, sweeper }
    }

    /// The cache serving `prefix`, started (listed) on first use.
    async fn cacher(&self, prefix: &str) -> Result<Option<Arc<Cacher>>, StoreError> {
        let Some(resource) = (self.resource_of)(prefix) else { return Ok(None) };
        let mut cachers = self.cachers.lock().await;
        if let Some(cacher) = cachers.get(&resource) {
            return Ok(Some(Arc::clone(cacher)));
        }
        let cacher = Arc::new(Cacher {
            state: RwLock::new(State::default()),
            live: broadcast::channel(LIVE_CAPACITY).0,
            reached: tokio::sync::watch::Sender::new(0),
            follower: std::sync::Mutex::new(None),
        });
        let revision = cacher.relist(&*self.inner, &resource).await?;
        let follower =
            tokio::spawn(follow(Arc::downgrade(&cacher), Arc::clone(&self.inner), resource.clone(), revision));
        *cacher.follower.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(follower);
        cachers.insert(resource, Arc::clone(&cacher));
        Ok(Some(cacher))
    }
}

/// Every [`SWEEP_EVERY`], drops the caches of resources that hold nothing and that no watch
/// follows (a CRD deleted, a test's resource gone): each holds a backend watch. A later use
/// starts a fresh one.
async fn sweep_forever(cachers: std::sync::Weak<Mutex<HashMap<String, Arc<Cacher>>>>) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let Some(cachers) = cachers.upgrade() else { return };
        sweep(&mut *cachers.lock().await);
    }
}

fn sweep(cachers: &mut HashMap<String, Arc<Cacher>>) {
    // Only the map holds an idle cache: its follower keeps a weak reference, watchers and
    // lists strong ones while they run.
    cachers.retain(|_, cacher| Arc::strong_count(cacher) > 1 || !cacher.read().objects.is_empty());
}

impl Cacher {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Replaces the contents with a fresh list of `resource`; returns its revision.
    async fn relist(&self, inner: &dyn Store, resource: &str) -> Result<Revision, StoreError> {
        let page = inner.list(ListOptions { prefix: resource, ..Default::default() }).await?;
        let mut state = self.write();
        state.objects = page.entries.into_iter().map(|e| (e.key.clone(), e)).collect();
        state.ring.clear();
        state.oldest = page.revision;
        state.revision = page.revision;
        state.epoch = state.epoch.wrapping_add(1);
        drop(state);
        self.reached.send_replace(page.revision);
        Ok(page.revision)
    }

    fn apply(&self, event: Event) {
        let event = Arc::new(event);
        let mut state = self.write();
        match &event.entry {
            Some(entry) if event.kind == EventKind::Put => {
                state.objects.insert(event.key.clone(), entry.clone());
            }
            _ => {
                state.objects.remove(&event.key);
            }
        }
        if state.ring.len() == RING
            && let Some(dropped) = state.ring.pop_front()
        {
            state.oldest = dropped.revision;
        }
        state.ring.push_back(Arc::clone(&event));
        state.revision = event.revision;
        // Sent under the lock, so a watcher attaching now sees each event once: in the ring
        // or live.
        let _ = self.live.send((state.epoch, event));
        let revision = state.revision;
        drop(state);
        self.reached.send_replace(revision);
    }

    /// The ring's events under `prefix` after `after`, and a subscription to what follows, or
    /// `None` if the ring no longer reaches back to `after`.
    fn attach(&self, prefix: &str, after: Revision) -> Option<Attached> {
        let state = self.read();
        if after < state.oldest {
            return None;
        }
        let backlog = state.ring.iter().filter(|e| e.revision > after && e.key.starts_with(prefix)).cloned().collect();
        Some(Attached { backlog, epoch: state.epoch, live: self.live.subscribe() })
    }

    /// One page of the cached objects, at the cache's revision.
    fn page(&self, options: &ListOptions<'_>) -> ListPage {
        let state = self.read();
        let start = match options.start_after {
            Some(after) => std::ops::Bound::Excluded(after),
            None => std::ops::Bound::Included(options.prefix),
        };
        let keys = state
            .objects
            .range::<str, _>((start, std::ops::Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(options.prefix));
        let (mut entries, mut rest) = (Vec::new(), 0u64);
        for (_, entry) in keys {
            if options.limit == 0 || entries.len() < options.limit {
                entries.push(entry.clone());
            } else {
                rest = rest.saturating_add(1);
            }
        }
        ListPage { entries, revision: state.revision, more: rest > 0, remaining: rest }
    }
}

/// Keeps a cache current: follows the backend's watch, resumes it where it stopped, and lists
/// again when the backend no longer has that revision.
async fn follow(cacher: std::sync::Weak<Cacher>, inner: Arc<dyn Store>, resource: String, mut revision: Revision) {
    loop {
        match inner.watch(&resource, revision).await {
            Ok(mut watch) => {
                while let Some(Ok(event)) = watch.next().await {
                    let Some(cacher) = cacher.upgrade() else { return };
                    revision = event.revision;
                    cacher.apply(event);
                }
            }
            Err(StoreError::Compacted { .. }) => {
                let Some(cacher) = cacher.upgrade() else { return };
                match cacher.relist(&*inner, &resource).await {
                    Ok(listed) => revision = listed,
                    Err(err) => tracing::warn!(resource, error = %err, "watch cache cannot list"),
                }
                continue;
            }
            Err(err) => tracing::warn!(resource, error = %err, "watch cache lost its watch"),
        }
        if cacher.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Feeds one watcher from the cache, re-attaching after it fell behind or the cache listed
/// again, and from the backend once the ring no longer reaches back far enough.
async fn serve_watch(
    cacher: Arc<Cacher>,
    inner: Arc<dyn Store>,
    prefix: String,
    mut last: Revision,
    tx: mpsc::Sender<Result<Event, StoreError>>,
) {
    loop {
        let Some(Attached { backlog, epoch, mut live }) = cacher.attach(&prefix, last) else {
            drop(cacher);
            let mut watch = match inner.watch(&prefix, last).await {
                Ok(watch) => watch,
                Err(err) => {
                    let _ = tx.send(Err(err)).await;
                    return;
                }
            };
            while let Some(event) = watch.next().await {
                if tx.send(event).await.is_err() {
                    return;
                }
            }
            return;
        };
        for event in backlog {
            last = event.revision;
            if tx.send(Ok((*event).clone())).await.is_err() {
                return;
            }
        }
        loop {
            match live.recv().await {
                Ok((seen, event)) if seen == epoch => {
                    if event.revision > last && event.key.starts_with(&prefix) {
                        last = event.revision;
                        if tx.send(Ok((*event).clone())).await.is_err() {
                            return;
                        }
                    }
                }
                // The cache listed again, or this watcher fell behind: attach afresh from `last`.
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => break,
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}

#[async_trait]
impl Store for CachedStore {
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        self.inner.get(key).await
    }

    async fn list(&self, options: ListOptions<'_>) -> Result<ListPage, StoreError> {
        let Some(min_revision) = options.min_revision.filter(|_| options.revision.is_none()) else {
            return self.inner.list(options).await;
        };
        if let Some(cacher) = self.cacher(options.prefix).await? {
            let mut reached = cacher.reached.subscribe();
            let fresh = tokio::time::timeout(FRESHNESS_WAIT, reached.wait_for(|r| *r >= min_revision)).await;
            if matches!(fresh, Ok(Ok(_))) {
                return Ok(cacher.page(&options));
            }
        }
        self.inner.list(options).await
    }

    async fn write(&self, write: Write) -> Result<Event, StoreError> {
        self.inner.write(write).await
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watch, StoreError> {
        let Some(cacher) = self.cacher(prefix).await? else { return self.inner.watch(prefix, after).await };
        if cacher.read().oldest > after {
            return self.inner.watch(prefix, after).await;
        }
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        tokio::spawn(serve_watch(cacher, Arc::clone(&self.inner), prefix.to_string(), after, tx));
        Ok(Watch::new(rx))
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        self.inner.revision().await
    }

    async fn stats(&self) -> Result<Stats, StoreError> {
        self.inner.stats().await
    }

    fn shared(&self) -> bool {
        self.inner.shared()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_segment(prefix: &str) -> Option<String> {
        let segment = prefix.strip_prefix('/')?.split('/').next().filter(|s| !s.is_empty())?;
        Some(format!("/{segment}/"))
    }

    #[tokio::test]
    async fn caches_of_empty_unwatched_resources_are_dropped() {
        let store = CachedStore::new(Arc::new(crate::memory::open()), first_segment);
        store.create("/kept/a", vec![]).await.unwrap();
        let listed = ListOptions { prefix: "/kept/", min_revision: Some(0), ..Default::default() };
        assert_eq!(store.list(listed).await.unwrap().entries.len(), 1);
        // Served from the cache (it starts at the current revision), so it holds the cache.
        let watched = store.watch("/watched/", store.revision().await.unwrap()).await.unwrap();
        let gone = store.create("/gone/a", vec![]).await.unwrap();
        store.watch("/gone/", 0).await.unwrap();
        store.delete("/gone/a", Some(gone.mod_revision)).await.unwrap();
        let resources = |cachers: &HashMap<String, Arc<Cacher>>| {
            let mut names: Vec<String> = cachers.keys().cloned().collect();
            names.sort();
            names
        };
        assert_eq!(resources(&*store.cachers.lock().await), ["/gone/", "/kept/", "/watched/"]);
        // The watch on /gone/ was dropped above; let its task see that.
        tokio::time::sleep(Duration::from_millis(50)).await;
        sweep(&mut *store.cachers.lock().await);
        assert_eq!(
            resources(&*store.cachers.lock().await),
            ["/kept/", "/watched/"],
            "objects or a watcher keep a cache"
        );
        drop(watched);
    }
}
