//! The engine the embedded backends share: one writer thread with group commit (a write that
//! finds the engine idle commits on its own thread instead, as a lone RocksDB writer leads its
//! own group), watches fed from committed events (each sent only to the watchers of its key, as
//! etcd's watchable store does) and the backend's history, and lists at an older revision by
//! rolling the current state back through that history.
//!
//! A backend only stores state and history and commits a batch atomically; everything about
//! revisions, preconditions and the history window lives here, once.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};

use crate::{Entry, Event, EventKind, ListOptions, ListPage, Revision, Stats, Store, StoreError, Watch, Write};

/// Writes applied in one commit at most; more wait for the next.
const MAX_BATCH: usize = 512;
/// Live events buffered per watcher before it falls back to reading history.
const LIVE_CAPACITY: usize = 4096;
/// Events a watcher holds for its consumer before the engine waits.
const WATCH_BUFFER: usize = 256;
/// Current lists of at most this many keys run on the caller's thread, as gets do.
const INLINE_LIST_LIMIT: usize = 16;
/// How many revisions stay readable by default (a `continue` or watch older than this is 410).
pub const DEFAULT_HISTORY_WINDOW: Revision = 100_000;

/// The revision counters a backend persists with each commit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meta {
    /// The revision of the last committed write.
    pub revision: Revision,
    /// Revisions at or below this have been dropped from the history.
    pub compacted: Revision,
}

/// One atomic commit: events to apply to the state and append to the history, and the new
/// counters; history at or below `meta.compacted` is dropped in the same commit.
#[derive(Debug)]
pub struct Commit<'a> {
    /// The events, in revision order.
    pub events: &'a [Event],
    /// The counters after the commit.
    pub meta: Meta,
}

/// A consistent read: entries at the snapshot's revision and the history after a revision.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The counters at the snapshot.
    pub meta: Meta,
    /// Entries in key order.
    pub entries: Vec<Entry>,
    /// With a `limit`: how many more keys under the prefix follow the entries returned.
    pub rest: u64,
    /// History events after the requested revision, in revision order.
    pub history: Vec<Event>,
}

/// What a storage engine must provide to the shared engine. Calls are blocking; the engine
/// runs them off the async runtime.
pub trait Backend: Send + Sync + 'static {
    /// The persisted counters.
    fn meta(&self) -> Result<Meta, StoreError>;
    /// The current entry under `key`.
    fn get(&self, key: &str) -> Result<Option<Entry>, StoreError>;
    /// In one consistent read: up to `limit` entries (0 = all) under `prefix` after
    /// `start_after` and the count of the keys beyond them, and the history events after
    /// `history_after` of keys under `prefix` after `start_after`.
    fn snapshot(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        history_after: Option<Revision>,
    ) -> Result<Snapshot, StoreError>;
    /// In one consistent read: the counters and the history events under `prefix` after `after`.
    fn history(&self, prefix: &str, after: Revision) -> Result<(Meta, Vec<Event>), StoreError>;
    /// Applies a commit atomically; durable when it returns `Ok`.
    fn commit(&self, commit: &Commit<'_>) -> Result<(), StoreError>;
    /// The number of keys and their total value size.
    fn totals(&self) -> Result<(u64, u64), StoreError>;
}

/// A [`Store`] over a [`Backend`].
pub struct LocalStore<B: Backend> {
    shared: Arc<Shared<B>>,
    writes: std::sync::Mutex<Option<std_mpsc::Sender<Pending>>>,
    writer: Option<std::thread::JoinHandle<()>>,
}

struct Shared<B> {
    backend: B,
    /// The watchers following live events; a write wakes only those whose prefix covers it.
    watchers: std::sync::Mutex<Vec<Watcher>>,
    /// Set when the store is dropped: watches end.
    closed: tokio::sync::watch::Sender<bool>,
    revision: AtomicU64,
    compacted: AtomicU64,
    window: Revision,
    /// Held by whoever applies a batch: the writer thread, or a write committing in place.
    committing: std::sync::Mutex<()>,
    /// Writes handed to the writer thread and not yet applied.
    queued: AtomicUsize,
}

type Pending = (Write, oneshot::Sender<Result<Event, StoreError>>);

/// A watch's live feed. A watcher whose buffer is full is dropped from the list, which closes
/// its feed after what it holds; it then catches up from the history and registers again.
struct Watcher {
    prefix: String,
    live: mpsc::Sender<Arc<Event>>,
}

impl<B: Backend> LocalStore<B> {
    /// Starts the engine over `backend`, keeping `window` revisions of history.
    pub fn new(backend: B, window: Revision) -> Result<LocalStore<B>, StoreError> {
        let meta = backend.meta()?;
        let shared = Arc::new(Shared {
            backend,
            watchers: std::sync::Mutex::new(Vec::new()),
            closed: tokio::sync::watch::Sender::new(false),
            revision: AtomicU64::new(meta.revision),
            compacted: AtomicU64::new(meta.compacted),
            window: window.max(1),
            committing: std::sync::Mutex::new(()),
            queued: AtomicUsize::new(0),
        });
        let (tx, rx) = std_mpsc::channel();
        let writer = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("crdctl-store-writer".into())
            .spawn(move || writer.run_writer(rx))
            .map_err(|err| StoreError::Unavailable(format!("cannot start the writer thread: {err}")))?;
        Ok(LocalStore { shared, writes: std::sync::Mutex::new(Some(tx)), writer: Some(writer) })
    }

    /// The backend, for tests and stats.
    pub fn backend(&self) -> &B {
        &self.shared.backend
    }
}

impl<B: Backend> Drop for LocalStore<B> {
    /// Ends the watches, lets the writer finish what was queued, and waits for it, so the
    /// backend is closed (its file lock released) when this returns.
    fn drop(&mut self) {
        self.shared.closed.send_replace(true);
        if let Ok(mut writes) = self.writes.lock() {
            writes.take();
        }
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl<B: Backend> Shared<B> {
    /// The writer loop: takes every write queued, applies them in order, commits once,
    /// publishes the events, then acknowledges each write.
    fn run_writer(&self, rx: std_mpsc::Receiver<Pending>) {
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(pending) => batch.push(pending),
                    Err(_) => break,
                }
            }
            let taken = batch.len();
            {
                // Poisoning means a panic in a batch, which leaves nothing half-applied here.
                let _committing = self.committing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                self.apply_batch(batch);
            }
            self.queued.fetch_sub(taken, Ordering::AcqRel);
        }
    }

    /// Commits `write` on the caller's thread when nothing is committing or queued, or gives it
    /// back. A lone writer (one client, a controller) otherwise pays two wake-ups of idle cores,
    /// to the writer thread and back, on every write; concurrent writers find the engine busy
    /// and group on the writer thread as before. Only on a runtime of several workers: the
    /// commit blocks this one for one durable write while the others go on serving, where on a
    /// single worker it would stop every task that could join the next group.
    fn commit_in_place(&self, write: Write) -> Result<Result<Event, StoreError>, Write> {
        let other_workers = tokio::runtime::Handle::try_current().is_ok_and(|runtime| {
            runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
                && runtime.metrics().num_workers() > 1
        });
        if !other_workers || self.queued.load(Ordering::Acquire) != 0 {
            return Err(write);
        }
        let Ok(_committing) = self.committing.try_lock() else { return Err(write) };
        let (reply, mut answer) = oneshot::channel();
        self.apply_batch(vec![(write, reply)]);
        Ok(answer.try_recv().unwrap_or_else(|_| Err(StoreError::Unavailable("the commit gave no answer".into()))))
    }

    fn apply_batch(&self, batch: Vec<Pending>) {
        let mut revision = self.revision.load(Ordering::Acquire);
        let mut overlay: HashMap<String, Option<Entry>> = HashMap::new();
        let mut events = Vec::with_capacity(batch.len());
        let mut outcomes = Vec::with_capacity(batch.len());
        for (write, reply) in batch {
            let current = match overlay.get(write.key()) {
                Some(entry) => Ok(entry.clone()),
                None => self.backend.get(write.key()),
            };
            let outcome = current.and_then(|current| apply(write, current, revision.saturating_add(1)));
            match outcome {
                Ok(event) => {
                    revision = event.revision;
                    overlay.insert(event.key.clone(), event.entry.clone());
                    outcomes.push((reply, Ok(events.len())));
                    events.push(event);
                }
                Err(err) => outcomes.push((reply, Err(err))),
            }
        }
        let previously_compacted = self.compacted.load(Ordering::Acquire);
        let meta = Meta { revision, compacted: previously_compacted.max(revision.saturating_sub(self.window)) };
        let committed = if events.is_empty() { Ok(()) } else { self.backend.commit(&Commit { events: &events, meta }) };
        if let Err(err) = &committed {
            tracing::error!(error = %err, writes = events.len(), "store commit failed");
        } else {
            self.compacted.store(meta.compacted, Ordering::Release);
            self.revision.store(meta.revision, Ordering::Release);
        }
        let events: Vec<Arc<Event>> = events.into_iter().map(Arc::new).collect();
        if committed.is_ok() {
            self.publish(&events);
        }
        for (reply, outcome) in outcomes {
            let result = match (&committed, outcome) {
                (_, Err(err)) => Err(err),
                (Err(err), Ok(_)) => Err(err.clone()),
                (Ok(()), Ok(index)) => events
                    .get(index)
                    .map(|event| (**event).clone())
                    .ok_or_else(|| StoreError::Unavailable("a write lost its event".into())),
            };
            // A caller that went away does not undo its write.
            let _ = reply.send(result);
        }
    }

    /// Hands committed events to the watchers of their keys; drops watchers that are full or gone.
    fn publish(&self, events: &[Arc<Event>]) {
        let Ok(mut watchers) = self.watchers.lock() else { return };
        watchers.retain(|watcher| {
            !watcher.live.is_closed()
                && events
                    .iter()
                    .filter(|event| event.key.starts_with(&watcher.prefix))
                    .all(|event| watcher.live.try_send(Arc::clone(event)).is_ok())
        });
    }

    /// A live feed of the events under `prefix` from now on.
    fn subscribe(&self, prefix: &str) -> Result<mpsc::Receiver<Arc<Event>>, StoreError> {
        let (live, receiver) = mpsc::channel(LIVE_CAPACITY);
        let mut watchers =
            self.watchers.lock().map_err(|_| StoreError::Unavailable("the watcher list is poisoned".into()))?;
        watchers.push(Watcher { prefix: prefix.to_string(), live });
        Ok(receiver)
    }

    fn check_readable(&self, requested: Revision) -> Result<(), StoreError> {
        let compacted = self.compacted.load(Ordering::Acquire);
        let current = self.revision.load(Ordering::Acquire);
        if requested < compacted {
            return Err(StoreError::Compacted { requested, compacted });
        }
        if requested > current {
            return Err(StoreError::FutureRevision { requested, current });
        }
        Ok(())
    }

    fn list(&self, options: ListOptions<'_>) -> Result<ListPage, StoreError> {
        let fetch =
            |extra: usize| if options.limit == 0 { 0 } else { options.limit.saturating_add(1).saturating_add(extra) };
        let Some(at) = options.revision else {
            let snapshot = self.backend.snapshot(options.prefix, options.start_after, fetch(0), None)?;
            return Ok(page(snapshot.entries, snapshot.rest, options.limit, snapshot.meta.revision));
        };
        self.check_readable(at)?;
        // The state at `at` differs from the current one in at most one key per later event, so
        // `limit + 1` entries at `at` are among the first `limit + 1 + events` current ones.
        let mut extra = 0;
        let snapshot = loop {
            let snapshot = self.backend.snapshot(options.prefix, options.start_after, fetch(extra), Some(at))?;
            if snapshot.history.len() <= extra || snapshot.rest == 0 {
                break snapshot;
            }
            extra = snapshot.history.len();
        };
        if at < snapshot.meta.compacted {
            return Err(StoreError::Compacted { requested: at, compacted: snapshot.meta.compacted });
        }
        let rest = snapshot.rest;
        let fetched_past = snapshot.entries.last().map(|entry| entry.key.clone());
        // Each key written after `at` takes the value its first later write replaced.
        let mut at_revision: BTreeMap<String, Option<Entry>> = BTreeMap::new();
        for event in snapshot.history {
            at_revision.entry(event.key).or_insert(event.prev);
        }
        let mut entries: BTreeMap<String, Entry> =
            snapshot.entries.into_iter().map(|entry| (entry.key.clone(), entry)).collect();
        for (key, entry) in at_revision {
            // Beyond the fetched range a key is not part of this page (unless nothing was cut).
            if rest > 0 && fetched_past.as_ref().is_some_and(|last| key > *last) {
                continue;
            }
            match entry {
                Some(entry) => entries.insert(key, entry),
                None => entries.remove(&key),
            };
        }
        Ok(page(entries.into_values().collect(), rest, options.limit, at))
    }
}

/// Applies one write to the key's current entry at `revision`.
pub(crate) fn apply(write: Write, current: Option<Entry>, revision: Revision) -> Result<Event, StoreError> {
    match write {
        Write::Create { key, value } => match current {
            Some(_) => Err(StoreError::AlreadyExists { key }),
            None => {
                let entry = Entry { key: key.clone(), value, create_revision: revision, mod_revision: revision };
                Ok(Event { revision, kind: EventKind::Put, key, entry: Some(entry), prev: None })
            }
        },
        Write::Update { key, value, expected } => match current {
            None => Err(StoreError::NotFound { key }),
            Some(prev) if prev.mod_revision != expected => {
                Err(StoreError::Conflict { key, expected, current: prev.mod_revision })
            }
            Some(prev) => {
                let entry =
                    Entry { key: key.clone(), value, create_revision: prev.create_revision, mod_revision: revision };
                Ok(Event { revision, kind: EventKind::Put, key, entry: Some(entry), prev: Some(prev) })
            }
        },
        Write::Delete { key, expected } => match current {
            None => Err(StoreError::NotFound { key }),
            Some(prev) if expected.is_some_and(|expected| expected != prev.mod_revision) => {
                Err(StoreError::Conflict { key, expected: expected.unwrap_or_default(), current: prev.mod_revision })
            }
            Some(prev) => Ok(Event { revision, kind: EventKind::Delete, key, entry: None, prev: Some(prev) }),
        },
    }
}

/// The first `limit` of `entries` (0 = all), with `rest` keys known to follow them.
fn page(mut entries: Vec<Entry>, rest: u64, limit: usize, revision: Revision) -> ListPage {
    let more = limit > 0 && (entries.len() > limit || rest > 0);
    let mut remaining = 0;
    if more {
        remaining = rest.saturating_add(entries.len().saturating_sub(limit) as u64);
        entries.truncate(limit);
    }
    ListPage { entries, revision, more, remaining }
}

async fn blocking<B: Backend, T: Send + 'static>(
    shared: &Arc<Shared<B>>,
    f: impl FnOnce(&Shared<B>) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let shared = Arc::clone(shared);
    tokio::task::spawn_blocking(move || f(&shared))
        .await
        .map_err(|err| StoreError::Unavailable(format!("store task failed: {err}")))?
}

#[async_trait]
impl<B: Backend> Store for LocalStore<B> {
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        // One key from a B-tree in the page cache takes microseconds: cheaper in place than the
        // hand-off to a blocking thread, which would double the latency of every read.
        self.shared.backend.get(key)
    }

    async fn list(&self, options: ListOptions<'_>) -> Result<ListPage, StoreError> {
        // A few current keys cost what a get costs: in place too. Older revisions read history.
        if options.revision.is_none() && (1..=INLINE_LIST_LIMIT).contains(&options.limit) {
            return self.shared.list(options);
        }
        let (prefix, start_after) = (options.prefix.to_string(), options.start_after.map(str::to_string));
        let (limit, revision) = (options.limit, options.revision);
        blocking(&self.shared, move |shared| {
            shared.list(ListOptions {
                prefix: &prefix,
                start_after: start_after.as_deref(),
                limit,
                revision,
                min_revision: None,
            })
        })
        .await
    }

    async fn write(&self, write: Write) -> Result<Event, StoreError> {
        let write = match self.shared.commit_in_place(write) {
            Ok(committed) => return committed,
            Err(write) => write,
        };
        let (reply, result) = oneshot::channel();
        let gone = || StoreError::Unavailable("the store is closed".into());
        {
            let writes = self.writes.lock().map_err(|_| gone())?;
            let writer = writes.as_ref().ok_or_else(gone)?;
            self.shared.queued.fetch_add(1, Ordering::AcqRel);
            if writer.send((write, reply)).is_err() {
                self.shared.queued.fetch_sub(1, Ordering::AcqRel);
                return Err(gone());
            }
        }
        result.await.map_err(|_| StoreError::Unavailable("the writer stopped before answering".into()))?
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watch, StoreError> {
        // A watch may start at a future revision (it then waits); only a compacted one fails.
        let compacted = self.shared.compacted.load(Ordering::Acquire);
        if after < compacted {
            return Err(StoreError::Compacted { requested: after, compacted });
        }
        // Subscribe before reading history so no event falls between the two.
        let live = self.shared.subscribe(prefix)?;
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let closed = self.shared.closed.subscribe();
        tokio::spawn(feed_watch(Arc::downgrade(&self.shared), closed, prefix.to_string(), after, live, tx));
        Ok(Watch::new(rx))
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        Ok(self.shared.revision.load(Ordering::Acquire))
    }

    async fn stats(&self) -> Result<Stats, StoreError> {
        let (keys, value_bytes) = blocking(&self.shared, |shared| shared.backend.totals()).await?;
        Ok(Stats {
            revision: self.shared.revision.load(Ordering::Acquire),
            compacted: self.shared.compacted.load(Ordering::Acquire),
            keys,
            value_bytes,
        })
    }
}

/// Sends history after `last`, then live events, catching up from history whenever the live
/// feed overflowed (and so was closed); ends with `Compacted` if the watcher fell out of the
/// window. It holds the engine only while it reads, so dropping the store closes the backend
/// (and releases its file) at once.
async fn feed_watch<B: Backend>(
    shared: std::sync::Weak<Shared<B>>,
    mut closed: tokio::sync::watch::Receiver<bool>,
    prefix: String,
    mut last: Revision,
    mut live: mpsc::Receiver<Arc<Event>>,
    tx: mpsc::Sender<Result<Event, StoreError>>,
) {
    loop {
        let Some(engine) = shared.upgrade() else { return };
        let history = {
            let prefix = prefix.clone();
            blocking(&engine, move |shared| {
                let (meta, history) = shared.backend.history(&prefix, last)?;
                if last < meta.compacted {
                    return Err(StoreError::Compacted { requested: last, compacted: meta.compacted });
                }
                Ok(history)
            })
            .await
        };
        drop(engine);
        match history {
            Ok(events) => {
                for event in events {
                    last = event.revision;
                    if tx.send(Ok(event)).await.is_err() {
                        return;
                    }
                }
            }
            Err(err) => {
                let _ = tx.send(Err(err)).await;
                return;
            }
        }
        loop {
            let received = tokio::select! {
                received = live.recv() => received,
                () = tx.closed() => return,
                _ = closed.wait_for(|closed| *closed) => return,
            };
            match received {
                Some(event) if event.revision <= last => {}
                Some(event) => {
                    last = event.revision;
                    if tx.send(Ok((*event).clone())).await.is_err() {
                        return;
                    }
                }
                // Fell behind and was dropped from the live feed: register again, catch up
                // from history, then go on live.
                None => match shared.upgrade().map(|engine| engine.subscribe(&prefix)) {
                    None => return,
                    Some(Ok(again)) => {
                        live = again;
                        break;
                    }
                    Some(Err(err)) => {
                        let _ = tx.send(Err(err)).await;
                        return;
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::memory::MemoryBackend;

    /// The in-memory backend, recording for each commit its size and the thread that made it;
    /// each commit takes `delay`, as a durable one would.
    #[derive(Default)]
    struct Recording {
        inner: MemoryBackend,
        delay: Duration,
        commits: Mutex<Vec<(usize, Option<String>)>>,
    }

    impl Backend for Arc<Recording> {
        fn meta(&self) -> Result<Meta, StoreError> {
            self.inner.meta()
        }
        fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
            self.inner.get(key)
        }
        fn snapshot(
            &self,
            prefix: &str,
            start_after: Option<&str>,
            limit: usize,
            history_after: Option<Revision>,
        ) -> Result<Snapshot, StoreError> {
            self.inner.snapshot(prefix, start_after, limit, history_after)
        }
        fn history(&self, prefix: &str, after: Revision) -> Result<(Meta, Vec<Event>), StoreError> {
            self.inner.history(prefix, after)
        }
        fn commit(&self, commit: &Commit<'_>) -> Result<(), StoreError> {
            std::thread::sleep(self.delay);
            let thread = std::thread::current().name().map(str::to_string);
            self.commits.lock().unwrap().push((commit.events.len(), thread));
            self.inner.commit(commit)
        }
        fn totals(&self) -> Result<(u64, u64), StoreError> {
            self.inner.totals()
        }
    }

    fn recording(delay: Duration) -> (Arc<Recording>, Arc<LocalStore<Arc<Recording>>>) {
        let backend = Arc::new(Recording { delay, ..Default::default() });
        let store = LocalStore::new(Arc::clone(&backend), DEFAULT_HISTORY_WINDOW).unwrap();
        (backend, Arc::new(store))
    }

    const WRITER: Option<&str> = Some("crdctl-store-writer");

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_writer_commits_on_its_own_thread() {
        let (backend, store) = recording(Duration::ZERO);
        for i in 0..20 {
            let entry = store.create(&format!("/k/{i}"), b"v".to_vec()).await.unwrap();
            assert_eq!(entry.mod_revision, i + 1);
        }
        let commits = backend.commits.lock().unwrap().clone();
        assert_eq!(commits.len(), 20);
        assert!(commits.iter().all(|(size, thread)| *size == 1 && thread.as_deref() != WRITER), "{commits:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_share_commits() {
        let (backend, store) = recording(Duration::from_millis(5));
        let writers: Vec<_> = (0..32)
            .map(|i| {
                let store = Arc::clone(&store);
                tokio::spawn(async move { store.create(&format!("/k/{i}"), b"v".to_vec()).await.unwrap().mod_revision })
            })
            .collect();
        let mut revisions = Vec::new();
        for writer in writers {
            revisions.push(writer.await.unwrap());
        }
        revisions.sort();
        assert_eq!(revisions, (1..=32).collect::<Vec<_>>());
        let commits = backend.commits.lock().unwrap().clone();
        // At most one commit in place is running at a time; everything arriving meanwhile
        // queues and is applied by the writer thread in groups.
        assert!(commits.len() < 16, "{commits:?}");
        assert!(commits.iter().any(|(size, thread)| *size > 1 && thread.as_deref() == WRITER), "{commits:?}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn on_one_worker_every_write_goes_to_the_writer_thread() {
        let (backend, store) = recording(Duration::ZERO);
        for i in 0..5 {
            store.create(&format!("/k/{i}"), b"v".to_vec()).await.unwrap();
        }
        let commits = backend.commits.lock().unwrap().clone();
        assert!(commits.iter().all(|(_, thread)| thread.as_deref() == WRITER), "{commits:?}");
    }
}
