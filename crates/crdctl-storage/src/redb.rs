//! The on-disk backend, on [redb](https://docs.rs/redb): one file, copy-on-write B-trees,
//! every commit made durable with fsync before it returns.
//!
//! On-disk format (one database file, `crdctl.redb`):
//! - table `entries`: key → postcard `(create_revision, mod_revision, value)`;
//! - table `history`: revision → postcard [`Event`], the window the engine keeps. Every
//!   revision has one event, so the history is contiguous: the current revision is its last key
//!   and the compacted revision is its first key minus one (no counters are stored apart).
//!
//! Invariant: the two tables change only together, in one write transaction per batch, so
//! after a crash the file holds exactly the batches whose commit returned, which are exactly
//! the writes that were acknowledged. Each commit touches as few pages as it can, since its
//! fsync is what a single client waits for.

use std::path::{Path, PathBuf};

use redb::{
    Database, DatabaseError, ReadOnlyDatabase, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
};
use serde::{Deserialize, Serialize};

use crate::local::{Backend, Commit, DEFAULT_HISTORY_WINDOW, LocalStore, Meta, Snapshot};
use crate::{Entry, Event, EventKind, Revision, StoreError};

const ENTRIES: TableDefinition<&str, &[u8]> = TableDefinition::new("entries");
const HISTORY: TableDefinition<u64, &[u8]> = TableDefinition::new("history");

/// The database file inside a data directory.
pub const FILE_NAME: &str = "crdctl.redb";

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

/// The redb database.
#[derive(Debug)]
pub struct RedbBackend {
    db: Database,
    path: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct StoredEntry<'a> {
    create_revision: Revision,
    mod_revision: Revision,
    #[serde(borrow)]
    value: &'a [u8],
}

fn unavailable(err: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(err.to_string())
}

fn corrupt(err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(err.to_string())
}

impl RedbBackend {
    /// Opens or creates the database file in `dir`.
    pub fn open(dir: &Path) -> Result<RedbBackend, StoreError> {
        std::fs::create_dir_all(dir)
            .map_err(|err| unavailable(format!("cannot create the data directory {}: {err}", dir.display())))?;
        let path = dir.join(FILE_NAME);
        let db = Database::create(&path).map_err(|err| unavailable(format!("{}: {err}", path.display())))?;
        let txn = db.begin_write().map_err(unavailable)?;
        txn.open_table(ENTRIES).map_err(unavailable)?;
        txn.open_table(HISTORY).map_err(unavailable)?;
        txn.commit().map_err(unavailable)?;
        Ok(RedbBackend { db, path })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn decode_entry(key: &str, bytes: &[u8]) -> Result<Entry, StoreError> {
    let stored: StoredEntry<'_> = postcard::from_bytes(bytes).map_err(corrupt)?;
    Ok(Entry {
        key: key.to_string(),
        value: stored.value.to_vec(),
        create_revision: stored.create_revision,
        mod_revision: stored.mod_revision,
    })
}

fn read_meta(history: &impl ReadableTable<u64, &'static [u8]>) -> Result<Meta, StoreError> {
    let first = history.first().map_err(unavailable)?.map(|(key, _)| key.value());
    let last = history.last().map_err(unavailable)?.map(|(key, _)| key.value());
    Ok(Meta { revision: last.unwrap_or(0), compacted: first.map_or(0, |first| first - 1) })
}

/// The leading fields of a stored [`Event`]: postcard reads them without the values after.
#[derive(Deserialize)]
struct EventHead<'a> {
    _revision: Revision,
    _kind: EventKind,
    #[serde(borrow)]
    key: &'a str,
}

/// History events after `after` whose key is under `prefix` and after `start_after`; events
/// of other keys are skipped without decoding their values.
fn read_history(
    table: &impl ReadableTable<u64, &'static [u8]>,
    prefix: &str,
    start_after: Option<&str>,
    after: Revision,
) -> Result<Vec<Event>, StoreError> {
    let mut events = Vec::new();
    for item in table.range(after.saturating_add(1)..).map_err(unavailable)? {
        let (_, value) = item.map_err(unavailable)?;
        let bytes = value.value();
        let head: EventHead<'_> = postcard::from_bytes(bytes).map_err(corrupt)?;
        if head.key.starts_with(prefix) && start_after.is_none_or(|start| head.key > start) {
            events.push(postcard::from_bytes(bytes).map_err(corrupt)?);
        }
    }
    Ok(events)
}

impl Backend for RedbBackend {
    fn meta(&self) -> Result<Meta, StoreError> {
        let txn = self.db.begin_read().map_err(unavailable)?;
        read_meta(&txn.open_table(HISTORY).map_err(unavailable)?)
    }

    fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        let txn = self.db.begin_read().map_err(unavailable)?;
        let table = txn.open_table(ENTRIES).map_err(unavailable)?;
        let value = table.get(key).map_err(unavailable)?;
        value.map(|value| decode_entry(key, value.value())).transpose()
    }

    fn snapshot(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        history_after: Option<Revision>,
    ) -> Result<Snapshot, StoreError> {
        let txn = self.db.begin_read().map_err(unavailable)?;
        let history_table = txn.open_table(HISTORY).map_err(unavailable)?;
        let meta = read_meta(&history_table)?;
        let table = txn.open_table(ENTRIES).map_err(unavailable)?;
        let start = match start_after {
            Some(after) if after >= prefix => after,
            _ => prefix,
        };
        let take = if limit == 0 { usize::MAX } else { limit };
        let (mut entries, mut rest) = (Vec::new(), 0);
        for item in table.range(start..).map_err(unavailable)? {
            let (key, value) = item.map_err(unavailable)?;
            let key = key.value();
            if Some(key) == start_after {
                continue;
            }
            if !key.starts_with(prefix) {
                break;
            }
            if entries.len() == take {
                rest += 1;
            } else {
                entries.push(decode_entry(key, value.value())?);
            }
        }
        let history = match history_after {
            Some(after) => read_history(&history_table, prefix, start_after, after)?,
            None => Vec::new(),
        };
        Ok(Snapshot { meta, entries, rest, history })
    }

    fn history(&self, prefix: &str, after: Revision) -> Result<(Meta, Vec<Event>), StoreError> {
        let txn = self.db.begin_read().map_err(unavailable)?;
        let history = txn.open_table(HISTORY).map_err(unavailable)?;
        Ok((read_meta(&history)?, read_history(&history, prefix, None, after)?))
    }

    fn commit(&self, commit: &Commit<'_>) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(unavailable)?;
        {
            let mut entries = txn.open_table(ENTRIES).map_err(unavailable)?;
            let mut history = txn.open_table(HISTORY).map_err(unavailable)?;
            for event in commit.events {
                match (&event.kind, &event.entry) {
                    (EventKind::Put, Some(entry)) => {
                        let stored = StoredEntry {
                            create_revision: entry.create_revision,
                            mod_revision: entry.mod_revision,
                            value: &entry.value,
                        };
                        let bytes = postcard::to_allocvec(&stored).map_err(corrupt)?;
                        entries.insert(event.key.as_str(), bytes.as_slice()).map_err(unavailable)?;
                    }
                    _ => {
                        entries.remove(event.key.as_str()).map_err(unavailable)?;
                    }
                }
                let bytes = postcard::to_allocvec(event).map_err(corrupt)?;
                history.insert(event.revision, bytes.as_slice()).map_err(unavailable)?;
            }
            let first = history.first().map_err(unavailable)?.map(|(key, _)| key.value());
            if first.is_some_and(|first| first <= commit.meta.compacted) {
                history.retain_in(..=commit.meta.compacted, |_, _| false).map_err(unavailable)?;
            }
        }
        txn.commit().map_err(unavailable)
    }

    fn totals(&self) -> Result<(u64, u64), StoreError> {
        let txn = self.db.begin_read().map_err(unavailable)?;
        let table = txn.open_table(ENTRIES).map_err(unavailable)?;
        let mut bytes = 0u64;
        for item in table.iter().map_err(unavailable)? {
            let (key, value) = item.map_err(unavailable)?;
            bytes += decode_entry(key.value(), value.value())?.value.len() as u64;
        }
        Ok((table.len().map_err(unavailable)?, bytes))
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
    /// returns the revision read at. One entry is in memory at a time.
    pub fn for_each(&self, prefix: &str, mut visit: impl FnMut(Entry)) -> Result<Revision, StoreError> {
        let txn = self.db.begin_read().map_err(unavailable)?;
        let meta = read_meta(&txn.open_table(HISTORY).map_err(unavailable)?)?;
        let table = txn.open_table(ENTRIES).map_err(unavailable)?;
        for item in table.range(prefix..).map_err(unavailable)? {
            let (key, value) = item.map_err(unavailable)?;
            if !key.value().starts_with(prefix) {
                break;
            }
            visit(decode_entry(key.value(), value.value())?);
        }
        Ok(meta.revision)
    }
}
