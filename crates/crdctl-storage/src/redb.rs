//! The on-disk backend, on [redb](https://docs.rs/redb): one file, copy-on-write B-trees,
//! every commit made durable with fsync before it returns.
//!
//! The layout is etcd's MVCC: one table `revisions`, revision → postcard `Record` (the key,
//! its create and previous revisions, the compaction point, and the value or a tombstone), and
//! an index of the live keys in memory, rebuilt from the table on open (etcd's `treeIndex`).
//! A write is then one insert into one B-tree: each commit's fsync, which a single client
//! waits for, covers as few pages as redb allows (a second table doubled the cost of a commit).
//!
//! Compaction keeps what etcd keeps: every revision inside the history window, and below it the
//! newest revision of each live key. When the compaction point passes a revision, the revision
//! it superseded goes, and so does the revision itself if it is a delete.
//!
//! Invariant: the table changes in one write transaction per batch, so after a crash the file
//! holds exactly the batches whose commit returned, which are exactly the writes that were
//! acknowledged. The index changes only after a commit returns. Readers take revisions from the
//! index and then read the table; a revision missing by then was compacted away meanwhile, and
//! the read starts again from the index.

pub mod power_loss;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::RwLock;

use redb::{
    Database, DatabaseError, ReadOnlyDatabase, ReadableDatabase, ReadableTable, StorageBackend, TableDefinition,
    TableHandle, WriteTransaction,
};
use serde::{Deserialize, Serialize};

use crate::local::{Backend, Commit, DEFAULT_HISTORY_WINDOW, LocalStore, Meta, Snapshot};
use crate::{Entry, Event, EventKind, Revision, StoreError};

const REVISIONS: TableDefinition<u64, &[u8]> = TableDefinition::new("revisions");

/// The database file inside a data directory.
pub const FILE_NAME: &str = "crdctl.redb";

/// redb's page cache. Its default (1 GiB) would keep the whole file in memory after the index is
/// rebuilt on open, which reads every revision; the operating system's page cache serves the
/// reads beyond it without counting against the server.
const CACHE_BYTES: usize = 8 << 20;

/// How often a read starts again when compaction removed a revision under it.
const READ_ATTEMPTS: usize = 64;

/// A store on disk.
pub type RedbStore = LocalStore<RedbBackend>;

/// Opens (or creates) the store in `dir`, keeping the default history window.
pub fn open(dir: &Path) -> Result<RedbStore, StoreError> {
    open_with_window(dir, DEFAULT_HISTORY_WINDOW)
}

/// Opens (or creates) the store in `dir`, keeping `window` revisions of history.
pub fn open_with_window(dir: &Path, window: Revision) -> Result<RedbStore, StoreError> {
    LocalStore::new(RedbBackend::open(dir)?, window)
}

/// Opens (or creates) the store on a storage backend other than a file: a disk that fails on
/// purpose ([`power_loss::Disk`]).
pub fn open_on(backend: impl StorageBackend, window: Revision) -> Result<RedbStore, StoreError> {
    LocalStore::new(RedbBackend::open_on(backend)?, window)
}

/// One revision as stored.
#[derive(Debug, Serialize, Deserialize)]
struct Record<'a> {
    #[serde(borrow)]
    key: &'a str,
    create_revision: Revision,
    /// The key's revision this one replaced, if the key existed.
    prev_revision: Option<Revision>,
    /// The compaction point after the commit that wrote this revision.
    compacted: Revision,
    /// `None` for a delete.
    #[serde(borrow)]
    value: Option<&'a [u8]>,
}

/// A live key in the index.
#[derive(Debug, Clone, Copy)]
struct Live {
    mod_revision: Revision,
    value_len: u64,
}

#[derive(Debug, Default)]
struct Index {
    meta: Meta,
    keys: BTreeMap<String, Live>,
}

impl Index {
    fn apply(&mut self, revision: Revision, record: &Record<'_>) {
        match record.value {
            Some(value) => {
                let live = Live { mod_revision: revision, value_len: value.len() as u64 };
                self.keys.insert(record.key.to_string(), live);
            }
            None => {
                self.keys.remove(record.key);
            }
        }
        self.meta = Meta { revision, compacted: record.compacted };
    }
}

/// The redb database and the index of its live keys.
#[derive(Debug)]
pub struct RedbBackend {
    db: Database,
    index: RwLock<Index>,
}

fn unavailable(err: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(err.to_string())
}

fn corrupt(err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(err.to_string())
}

fn decode(bytes: &[u8]) -> Result<Record<'_>, StoreError> {
    postcard::from_bytes(bytes).map_err(corrupt)
}

/// Replays the table into an index.
fn build_index(table: &impl ReadableTable<u64, &'static [u8]>) -> Result<Index, StoreError> {
    let mut index = Index::default();
    for item in table.iter().map_err(unavailable)? {
        let (revision, bytes) = item.map_err(unavailable)?;
        index.apply(revision.value(), &decode(bytes.value())?);
    }
    Ok(index)
}

/// Creates the database file so that it appears whole or not at all: redb cannot open a file
/// whose creation a power cut interrupted, so the file is made and synced under another name,
/// renamed into place, and the rename synced.
fn create_whole(dir: &Path, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let fresh = path.with_extension("redb.new");
    // What a power cut left of an earlier attempt: nothing was ever stored in it.
    if fresh.exists() {
        std::fs::remove_file(&fresh)?;
    }
    {
        let db = Database::create(&fresh)?;
        let txn = db.begin_write()?;
        txn.open_table(REVISIONS)?;
        txn.commit()?;
    }
    std::fs::File::open(&fresh)?.sync_all()?;
    std::fs::rename(&fresh, path)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// A read found a revision gone: compaction overtook it, so it starts again.
struct Overtaken;

/// Reads a revision the index named; `Overtaken` if compaction removed it since.
fn read_entry(
    table: &impl ReadableTable<u64, &'static [u8]>,
    key: &str,
    revision: Revision,
) -> Result<Result<Entry, Overtaken>, StoreError> {
    let Some(bytes) = table.get(revision).map_err(unavailable)? else { return Ok(Err(Overtaken)) };
    let record = decode(bytes.value())?;
    match record.value {
        Some(value) if record.key == key => Ok(Ok(Entry {
            key: key.to_string(),
            value: value.to_vec(),
            create_revision: record.create_revision,
            mod_revision: revision,
        })),
        _ => Err(corrupt(format!("revision {revision} does not hold {key}"))),
    }
}

/// The events of keys under `prefix` (and after `start_after`) in `(after, until]`.
fn read_history(
    table: &impl ReadableTable<u64, &'static [u8]>,
    prefix: &str,
    start_after: Option<&str>,
    after: Revision,
    until: Revision,
) -> Result<Result<Vec<Event>, Overtaken>, StoreError> {
    let mut events = Vec::new();
    for item in table.range(after.saturating_add(1)..=until).map_err(unavailable)? {
        let (revision, bytes) = item.map_err(unavailable)?;
        let (revision, record) = (revision.value(), decode(bytes.value())?);
        if !record.key.starts_with(prefix) || start_after.is_some_and(|start| record.key <= start) {
            continue;
        }
        let prev = match record.prev_revision {
            Some(prev) => match read_entry(table, record.key, prev)? {
                Ok(entry) => Some(entry),
                Err(Overtaken) => return Ok(Err(Overtaken)),
            },
            None => None,
        };
        let (kind, entry) = match record.value {
            Some(value) => (
                EventKind::Put,
                Some(Entry {
                    key: record.key.to_string(),
                    value: value.to_vec(),
                    create_revision: record.create_revision,
                    mod_revision: revision,
                }),
            ),
            None => (EventKind::Delete, None),
        };
        events.push(Event { revision, kind, key: record.key.to_string(), entry, prev });
    }
    Ok(Ok(events))
}

impl RedbBackend {
    /// Opens or creates the database file in `dir` and builds the index.
    pub fn open(dir: &Path) -> Result<RedbBackend, StoreError> {
        std::fs::create_dir_all(dir)
            .map_err(|err| unavailable(format!("cannot create the data directory {}: {err}", dir.display())))?;
        let path = dir.join(FILE_NAME);
        if !path.exists() {
            create_whole(dir, &path).map_err(|err| unavailable(format!("{}: {err}", path.display())))?;
        }
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(&path)
            .map_err(|err| unavailable(format!("{}: {err}", path.display())))?;
        RedbBackend::on(db)
    }

    /// Opens or creates the database on `backend` and builds the index.
    pub fn open_on(backend: impl StorageBackend) -> Result<RedbBackend, StoreError> {
        RedbBackend::on(
            Database::builder().set_cache_size(CACHE_BYTES).create_with_backend(backend).map_err(unavailable)?,
        )
    }

    /// Converts the older format if that is what the database holds, and reads the index.
    fn on(db: Database) -> Result<RedbBackend, StoreError> {
        let txn = db.begin_write().map_err(unavailable)?;
        legacy::convert(&txn)?;
        let index = build_index(&txn.open_table(REVISIONS).map_err(unavailable)?)?;
        txn.commit().map_err(unavailable)?;
        Ok(RedbBackend { db, index: RwLock::new(index) })
    }

    fn index(&self) -> Result<std::sync::RwLockReadGuard<'_, Index>, StoreError> {
        self.index.read().map_err(|_| unavailable("the store index is poisoned"))
    }

    /// Takes what to read from the index (`plan`, under its lock, which the writer waits for:
    /// so only names and revisions), then reads it from the table; again from the index if a
    /// revision was compacted away in between.
    fn read_retrying<P, T>(
        &self,
        plan: impl Fn(&Index) -> P,
        read: impl Fn(P, &redb::ReadOnlyTable<u64, &'static [u8]>) -> Result<Result<T, Overtaken>, StoreError>,
    ) -> Result<T, StoreError> {
        for _ in 0..READ_ATTEMPTS {
            // The index first: every revision it names is committed, so the transaction begun
            // after it holds them unless compaction has removed them since.
            let planned = plan(&*self.index()?);
            let txn = self.db.begin_read().map_err(unavailable)?;
            let table = txn.open_table(REVISIONS).map_err(unavailable)?;
            if let Ok(found) = read(planned, &table)? {
                return Ok(found);
            }
        }
        Err(unavailable("reads keep being overtaken by compaction; the history window is too small"))
    }
}

impl Backend for RedbBackend {
    fn meta(&self) -> Result<Meta, StoreError> {
        Ok(self.index()?.meta)
    }

    fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        self.read_retrying(
            |index| index.keys.get(key).map(|live| live.mod_revision),
            |revision, table| match revision {
                Some(revision) => Ok(read_entry(table, key, revision)?.map(Some)),
                None => Ok(Ok(None)),
            },
        )
    }

    fn snapshot(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        history_after: Option<Revision>,
    ) -> Result<Snapshot, StoreError> {
        let start = match start_after {
            Some(after) if after >= prefix => Bound::Excluded(after),
            _ => Bound::Included(prefix),
        };
        let take = if limit == 0 { usize::MAX } else { limit };
        let plan = |index: &Index| {
            let mut keys =
                index.keys.range::<str, _>((start, Bound::Unbounded)).take_while(|(key, _)| key.starts_with(prefix));
            let wanted: Vec<(String, Revision)> =
                keys.by_ref().take(take).map(|(key, live)| (key.clone(), live.mod_revision)).collect();
            (index.meta, wanted, keys.count() as u64)
        };
        self.read_retrying(plan, |(meta, wanted, rest), table| {
            let mut entries = Vec::with_capacity(wanted.len());
            for (key, revision) in wanted {
                match read_entry(table, &key, revision)? {
                    Ok(entry) => entries.push(entry),
                    Err(Overtaken) => return Ok(Err(Overtaken)),
                }
            }
            let history = match history_after {
                Some(after) => match read_history(table, prefix, start_after, after, meta.revision)? {
                    Ok(history) => history,
                    Err(Overtaken) => return Ok(Err(Overtaken)),
                },
                None => Vec::new(),
            };
            Ok(Ok(Snapshot { meta, entries, rest, history }))
        })
    }

    fn history(&self, prefix: &str, after: Revision) -> Result<(Meta, Vec<Event>), StoreError> {
        self.read_retrying(
            |index| index.meta,
            |meta, table| Ok(read_history(table, prefix, None, after, meta.revision)?.map(|events| (meta, events))),
        )
    }

    fn commit(&self, commit: &Commit<'_>) -> Result<(), StoreError> {
        let previously_compacted = self.index()?.meta.compacted;
        let txn = self.db.begin_write().map_err(unavailable)?;
        let mut encoded = Vec::with_capacity(commit.events.len());
        {
            let mut table = txn.open_table(REVISIONS).map_err(unavailable)?;
            for event in commit.events {
                let record = Record {
                    key: &event.key,
                    create_revision: event.entry.as_ref().map_or(0, |entry| entry.create_revision),
                    prev_revision: event.prev.as_ref().map(|prev| prev.mod_revision),
                    compacted: commit.meta.compacted,
                    value: event.entry.as_ref().map(|entry| entry.value.as_slice()),
                };
                let bytes = postcard::to_allocvec(&record).map_err(corrupt)?;
                table.insert(event.revision, bytes.as_slice()).map_err(unavailable)?;
                encoded.push(bytes);
            }
            compact(&mut table, previously_compacted, commit.meta.compacted)?;
        }
        txn.commit().map_err(unavailable)?;
        let mut index = self.index.write().map_err(|_| unavailable("the store index is poisoned"))?;
        for (event, bytes) in commit.events.iter().zip(&encoded) {
            index.apply(event.revision, &decode(bytes)?);
        }
        index.meta = commit.meta;
        Ok(())
    }

    fn totals(&self) -> Result<(u64, u64), StoreError> {
        let index = self.index()?;
        Ok((index.keys.len() as u64, index.keys.values().map(|live| live.value_len).sum()))
    }
}

/// Moves the compaction point from `from` to `to`: each revision it passes removes the revision
/// it superseded, and itself if it is a delete.
fn compact(table: &mut redb::Table<'_, u64, &'static [u8]>, from: Revision, to: Revision) -> Result<(), StoreError> {
    if to <= from {
        return Ok(());
    }
    let mut removed = Vec::new();
    for item in table.range(from.saturating_add(1)..=to).map_err(unavailable)? {
        let (revision, bytes) = item.map_err(unavailable)?;
        let record = decode(bytes.value())?;
        removed.extend(record.prev_revision);
        if record.value.is_none() {
            removed.push(revision.value());
        }
    }
    for revision in removed {
        table.remove(revision).map_err(unavailable)?;
    }
    Ok(())
}

/// The format before revisions were one table (a table of entries beside a table of events
/// holding whole values), converted on open in the transaction that opens the store.
mod legacy {
    use super::*;

    pub(super) const ENTRIES: TableDefinition<&str, &[u8]> = TableDefinition::new("entries");
    pub(super) const HISTORY: TableDefinition<u64, &[u8]> = TableDefinition::new("history");

    #[derive(Serialize, Deserialize)]
    pub(super) struct StoredEntry<'a> {
        pub(super) create_revision: Revision,
        pub(super) mod_revision: Revision,
        #[serde(borrow)]
        pub(super) value: &'a [u8],
    }

    /// One revision to write, owned.
    struct Converted {
        key: String,
        create_revision: Revision,
        prev_revision: Option<Revision>,
        value: Option<Vec<u8>>,
    }

    impl Converted {
        fn entry(entry: Entry, prev_revision: Option<Revision>) -> Converted {
            let Entry { key, value, create_revision, .. } = entry;
            Converted { key, create_revision, prev_revision, value: Some(value) }
        }
    }

    /// Rewrites the legacy tables, if there are any, as revisions: the events of the window,
    /// the values they replaced, and the current entries older than the window.
    pub(super) fn convert(txn: &WriteTransaction) -> Result<(), StoreError> {
        let present = txn.list_tables().map_err(unavailable)?.any(|table| table.name() == HISTORY.name());
        if !present {
            return Ok(());
        }
        let mut records: BTreeMap<Revision, Converted> = BTreeMap::new();
        let compacted;
        {
            let history = txn.open_table(HISTORY).map_err(unavailable)?;
            compacted = history.first().map_err(unavailable)?.map_or(0, |(first, _)| first.value().saturating_sub(1));
            for item in history.iter().map_err(unavailable)? {
                let (_, bytes) = item.map_err(unavailable)?;
                let event: Event = postcard::from_bytes(bytes.value()).map_err(corrupt)?;
                let prev_revision = event.prev.as_ref().map(|prev| prev.mod_revision);
                if let Some(prev) = event.prev {
                    records.entry(prev.mod_revision).or_insert_with(|| Converted::entry(prev, None));
                }
                let converted = match event.entry {
                    Some(entry) => Converted::entry(entry, prev_revision),
                    None => Converted { key: event.key, create_revision: 0, prev_revision, value: None },
                };
                records.insert(event.revision, converted);
            }
            let entries = txn.open_table(ENTRIES).map_err(unavailable)?;
            for item in entries.iter().map_err(unavailable)? {
                let (key, bytes) = item.map_err(unavailable)?;
                let stored: StoredEntry<'_> = postcard::from_bytes(bytes.value()).map_err(corrupt)?;
                records.entry(stored.mod_revision).or_insert_with(|| Converted {
                    key: key.value().to_string(),
                    create_revision: stored.create_revision,
                    prev_revision: None,
                    value: Some(stored.value.to_vec()),
                });
            }
        }
        let mut table = txn.open_table(REVISIONS).map_err(unavailable)?;
        for (revision, converted) in &records {
            let record = Record {
                key: &converted.key,
                create_revision: converted.create_revision,
                prev_revision: converted.prev_revision,
                compacted,
                value: converted.value.as_deref(),
            };
            table
                .insert(*revision, postcard::to_allocvec(&record).map_err(corrupt)?.as_slice())
                .map_err(unavailable)?;
        }
        drop(table);
        txn.delete_table(ENTRIES).map_err(unavailable)?;
        txn.delete_table(HISTORY).map_err(unavailable)?;
        Ok(())
    }
}

/// A data directory opened only to read, for tools that inspect a stopped server's data
/// (`crdctl store stats`): nothing is written, not even the tables of an empty directory.
pub struct ReadOnlyStore {
    db: ReadOnlyDatabase,
}

impl ReadOnlyStore {
    /// Opens the database in `dir`; fails if a server has it open.
    pub fn open(dir: &Path) -> Result<ReadOnlyStore, StoreError> {
        let path = dir.join(FILE_NAME);
        if !path.exists() {
            return Err(unavailable(format!("{}: no crdctl data here (no {FILE_NAME})", dir.display())));
        }
        let db = ReadOnlyDatabase::open(&path).map_err(|err| match err {
            DatabaseError::DatabaseAlreadyOpen => {
                unavailable(format!("{}: in use by a running server; stop it first", path.display()))
            }
            other => unavailable(format!("{}: {other}", path.display())),
        })?;
        Ok(ReadOnlyStore { db })
    }

    /// Calls `visit` with every entry under `prefix`, in key order, from one consistent read;
    /// returns the revision read at. The keys under `prefix` are in memory, and one value.
    pub fn for_each(&self, prefix: &str, mut visit: impl FnMut(Entry)) -> Result<Revision, StoreError> {
        let txn = self.db.begin_read().map_err(unavailable)?;
        let table = match txn.open_table(REVISIONS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => {
                return Err(unavailable(
                    "the data directory was written by an older crdctl; start `crdctl serve` on it once to convert it",
                ));
            }
            Err(err) => return Err(unavailable(err)),
        };
        let mut live: BTreeMap<String, Revision> = BTreeMap::new();
        let mut revision = 0;
        for item in table.iter().map_err(unavailable)? {
            let (at, bytes) = item.map_err(unavailable)?;
            let record = decode(bytes.value())?;
            revision = at.value();
            if !record.key.starts_with(prefix) {
                continue;
            }
            match record.value {
                Some(_) => live.insert(record.key.to_string(), revision),
                None => live.remove(record.key),
            };
        }
        for (key, at) in live {
            match read_entry(&table, &key, at)? {
                Ok(entry) => visit(entry),
                Err(Overtaken) => return Err(corrupt(format!("revision {at} of {key} is missing"))),
            }
        }
        Ok(revision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ListOptions, Store};

    fn stored_revisions(backend: &RedbBackend) -> Vec<Revision> {
        let txn = backend.db.begin_read().unwrap();
        let table = txn.open_table(REVISIONS).unwrap();
        table.iter().unwrap().map(|item| item.unwrap().0.value()).collect()
    }

    /// The file keeps the window (from the compaction point, the oldest state still readable)
    /// and the newest revision of each live key, nothing else: thousands of updates of one key,
    /// a key written once and a deleted one leave the window and one revision.
    #[tokio::test]
    async fn compaction_keeps_the_window_and_the_newest_revision_of_live_keys() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_with_window(dir.path(), 10).unwrap();
        let kept = store.create("/r/kept", b"old".to_vec()).await.unwrap();
        let gone = store.create("/r/gone", vec![]).await.unwrap();
        store.delete("/r/gone", Some(gone.mod_revision)).await.unwrap();
        let mut busy = store.create("/r/busy", vec![]).await.unwrap();
        for i in 0..2000u32 {
            busy = store.update("/r/busy", i.to_le_bytes().to_vec(), busy.mod_revision).await.unwrap();
        }
        let revisions = stored_revisions(store.backend());
        let newest = busy.mod_revision;
        let mut expected = vec![kept.mod_revision];
        expected.extend(newest - 10..=newest);
        assert_eq!(revisions, expected);
        assert_eq!(store.get("/r/kept").await.unwrap().unwrap().value, b"old");
        assert_eq!(store.get("/r/gone").await.unwrap(), None);
    }

    /// Writes the format of two tables: /r/a created at 1, /r/b at 2 (both compacted); /r/a
    /// updated at 3, /r/c created at 4 and deleted at 5: the window is 3..=5.
    fn write_two_tables(db: &Database) {
        let txn = db.begin_write().unwrap();
        {
            let entry = |key: &str, value: &[u8], create, modified| Entry {
                key: key.into(),
                value: value.to_vec(),
                create_revision: create,
                mod_revision: modified,
            };
            let mut entries = txn.open_table(legacy::ENTRIES).unwrap();
            let mut history = txn.open_table(legacy::HISTORY).unwrap();
            // /r/a created at 1, /r/b at 2 (both compacted); /r/a updated at 3, /r/c
            // created at 4 and deleted at 5: the window is 3..=5.
            for e in [entry("/r/a", b"a2", 1, 3), entry("/r/b", b"b", 2, 2)] {
                let stored = legacy::StoredEntry {
                    create_revision: e.create_revision,
                    mod_revision: e.mod_revision,
                    value: &e.value,
                };
                entries.insert(e.key.as_str(), postcard::to_allocvec(&stored).unwrap().as_slice()).unwrap();
            }
            let c = entry("/r/c", b"c", 4, 4);
            let events = [
                Event {
                    revision: 3,
                    kind: EventKind::Put,
                    key: "/r/a".into(),
                    entry: Some(entry("/r/a", b"a2", 1, 3)),
                    prev: Some(entry("/r/a", b"a1", 1, 1)),
                },
                Event { revision: 4, kind: EventKind::Put, key: "/r/c".into(), entry: Some(c.clone()), prev: None },
                Event { revision: 5, kind: EventKind::Delete, key: "/r/c".into(), entry: None, prev: Some(c) },
            ];
            for event in &events {
                history.insert(event.revision, postcard::to_allocvec(event).unwrap().as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
    }

    /// What [`write_two_tables`] reads as once converted.
    async fn assert_converted(store: &RedbStore) {
        let stats = store.stats().await.unwrap();
        assert_eq!((stats.revision, stats.compacted, stats.keys), (5, 2, 2));
        let now = store.list(ListOptions { prefix: "/r/", ..Default::default() }).await.unwrap();
        let values: Vec<_> = now.entries.iter().map(|e| (e.key.as_str(), e.value.as_slice())).collect();
        assert_eq!(values, [("/r/a", &b"a2"[..]), ("/r/b", &b"b"[..])]);
        let at_2 = store.list(ListOptions { prefix: "/r/", revision: Some(2), ..Default::default() }).await.unwrap();
        assert_eq!(at_2.entries[0].value, b"a1", "the value the window's first event replaced");
        let mut watch = store.watch("/r/", 2).await.unwrap();
        let kinds: Vec<_> = [watch.next().await, watch.next().await, watch.next().await]
            .into_iter()
            .map(|event| {
                let event = event.unwrap().unwrap();
                (event.revision, event.kind)
            })
            .collect();
        assert_eq!(kinds, [(3, EventKind::Put), (4, EventKind::Put), (5, EventKind::Delete)]);
    }

    /// A file in the format of two tables (entries and events) opens with its entries, its
    /// window of history and its compaction point.
    #[tokio::test]
    async fn the_two_table_format_is_converted_on_open() {
        let dir = tempfile::tempdir().unwrap();
        write_two_tables(&Database::create(dir.path().join(FILE_NAME)).unwrap());
        let store = open_with_window(dir.path(), 3).unwrap();
        assert_converted(&store).await;
        let txn = store.backend().db.begin_read().unwrap();
        let names: Vec<String> = txn.list_tables().unwrap().map(|table| table.name().to_string()).collect();
        assert_eq!(names, ["revisions"]);
    }

    /// The conversion is one transaction: a power cut at any of its operations leaves the old
    /// format, which the next open converts, or the new one, whatever else the disk kept.
    #[tokio::test]
    async fn a_power_cut_during_the_conversion_leaves_the_old_format_or_the_new() {
        use power_loss::{Disk, Survivors};
        let disk = Disk::new();
        write_two_tables(&Database::builder().create_with_backend(disk.clone()).unwrap());
        let two_tables = disk.reboot(Survivors::None);
        let uncut = two_tables.reboot(Survivors::None);
        drop(open_on(uncut.clone(), 3).unwrap());
        let operations = uncut.operations();
        assert!(operations > 2, "the conversion wrote: {operations} operations");
        for cut in 1..=operations {
            let disk = two_tables.reboot(Survivors::None).with_power_cut_at(cut);
            drop(open_on(disk.clone(), 3));
            let unsynced = disk.unsynced();
            for survivors in [
                Survivors::None,
                Survivors::Prefix { whole: unsynced.saturating_sub(1), torn: 2048 },
                Survivors::Prefix { whole: unsynced, torn: 0 },
                Survivors::Random(cut),
            ] {
                let store = open_on(disk.reboot(survivors), 3)
                    .unwrap_or_else(|err| panic!("cut at {cut}, {survivors:?}: {err}"));
                assert_converted(&store).await;
            }
        }
    }

    /// What a power cut left of a data file's creation is ignored and made again.
    #[tokio::test]
    async fn a_half_made_data_file_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME).with_extension("redb.new"), b"torn").unwrap();
        let store = open(dir.path()).unwrap();
        store.create("/r/a", b"1".to_vec()).await.unwrap();
        drop(store);
        assert!(!dir.path().join(FILE_NAME).with_extension("redb.new").exists());
        assert_eq!(open(dir.path()).unwrap().get("/r/a").await.unwrap().unwrap().value, b"1");
    }
}
